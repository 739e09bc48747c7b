"""View ops, as the functionalization and the passes after it see them: which ops always return
a view of their operand 0 (`VIEW_KINDS`: indexing with ints and slices, `view`, `transpose`,
`permute`, ...; `reshape`, `contiguous` and `to` may copy, so they are not views here), and a
`Step`, one such op between a tensor and its view, re-applied to a new base or (in
ir/passes/functionalize_writes.py) inverted to carry a write of the view back into its base.
Basic indexing is read as primitive views (`index_prims`: select, slice, unsqueeze)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ir.core import ops
from ir.core.graph import Loc, Operation, Value
from ir.core.types import ANY, DTYPE, INT, Type

# Ops whose result is always a view of operand 0, by how they invert. Ops that may return a view
# or a copy (reshape, contiguous, to, flatten) are not here: their results only *may* alias.
VIEW_KINDS = {
    "view": "reshape", "view_as": "reshape", "squeeze": "reshape", "unsqueeze": "reshape",
    "transpose": "involution", "swapdims": "involution", "swapaxes": "involution", "t": "involution",
    "permute": "permute", "movedim": "movedim", "moveaxis": "movedim", "select": "select",
    "narrow": "narrow", "diagonal": "diagonal", "detach": "identity", "alias": "identity",
    # views a write cannot be carried back through
    "expand": "", "expand_as": "", "broadcast_to": "", "unfold": "", "as_strided": "", "real": "",
    "imag": "", "view_as_real": "", "view_as_complex": "",
}
ATTRIBUTE_VIEWS = {"T": "involution", "mT": "involution", "data": "identity"}

FULL = ("slice", False, False, False)  # the index item `:`


@dataclass(frozen=True)
class Step:
    """One view op between a root and a value: re-applied to a new base, inverted to carry a
    write of the view back into its base. Steps compare by op name, attributes and operands, so
    `y[i]` read twice (or `y[i] = t` after `t = y[i]`) is one step."""

    name: str
    attrs: tuple
    rest: tuple  # the operands after the base
    cls: type = field(compare=False)
    attributes: dict = field(compare=False)
    result_type: Type = field(compare=False)
    loc: Loc | None = field(compare=False)
    kind: str = field(compare=False)  # how it inverts (functionalize_writes.invert); "" when it does not
    label: str = field(compare=False)  # for reasons: "`.expand()`"
    prims: tuple = field(compare=False, default=())  # basic indexing as select/slice/unsqueeze
    hint: str | None = field(compare=False, default=None)  # the source's name for the view

    @staticmethod
    def make(cls: type, attributes: dict, rest: Sequence[Value], result_type: Type, loc: Loc | None,
             hint: str | None = None) -> Step:
        frozen = tuple(sorted((k, _freeze(v)) for k, v in attributes.items()))
        kind, label, prims = _view_kind(cls, attributes, list(rest))
        return Step(cls.name, frozen, tuple(rest), cls, dict(attributes), result_type, loc, kind, label, prims, hint)

    def view(self, base: Value, hint: str | None = None) -> Operation:
        """The view op of this step applied to `base` (not yet in a block)."""
        return self.cls([base, *self.rest], [self.result_type], dict(self.attributes), loc=self.loc,
                        result_names=[hint])


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def view_name(op: Operation) -> str | None:
    """The torch name of a view op (`transpose` for x.transpose(...) and torch.transpose(x, ...)),
    or None when the op is not always a view of its operand 0."""
    if isinstance(op, ops.TensorMethodOp):
        name = op.attributes["method"]
    elif isinstance(op, ops.TorchCallOp):
        callee = op.attributes["callee"]
        name = callee.removeprefix("torch.Tensor." if callee.startswith("torch.Tensor.") else "torch.")
        if "." in name:
            return None
    else:
        return None
    if name not in VIEW_KINDS or op.attributes.get("alias_of") != 0 or op.attributes.get("mutates"):
        return None
    if len(op.attributes.get("kwnames", ())) >= len(op.operands):
        return None  # the tensor itself passed by keyword
    return name


def _view_kind(cls: type, attributes: dict, rest: list[Value]) -> tuple[str, str, tuple]:
    if cls is ops.IndexOp:
        prims = index_prims(attributes["items"], rest)
        return ("index" if prims is not None else ""), "indexing", prims or ()
    if cls is ops.GetAttrOp:
        return ATTRIBUTE_VIEWS[attributes["attr"]], f"`.{attributes['attr']}`", ()
    name = attributes.get("method") or attributes["callee"].rsplit(".", 1)[1]
    kind = VIEW_KINDS[name]
    kwnames = attributes.get("kwnames", ())
    if kind == "reshape" and any(v.type in (DTYPE, ANY) for v in rest):
        kind = ""  # x.view(torch.int32) reinterprets the bytes
    elif kind == "permute" and permutation(rest, kwnames) is None:
        kind = ""
    elif kind == "movedim" and kwnames:
        kind = ""
    elif kind == "narrow":
        start = argument(rest, kwnames, 1, "start")
        if not (isinstance(start, Value) and type(constant_of(start)) is int and constant_of(start) >= 0):
            kind = ""  # a negative start counts from the end: no slice_scatter bound for it
    return kind, f"`.{name}()`", ()


def constant_of(value: Value) -> Any:
    owner = value.owner
    return owner.value if isinstance(owner, ops.ConstantOp) else ...


def argument(rest: Sequence[Value], kwnames: Sequence[str], position: int, name: str) -> Value | None:
    """Argument `position` (counted after the tensor) of a call, passed by position or by name."""
    positional = len(rest) - len(kwnames)
    if position < positional:
        return rest[position]
    if name in kwnames:
        return rest[positional + list(kwnames).index(name)]
    return None


def permutation(rest: Sequence[Value], kwnames: Sequence[str]) -> tuple[int, ...] | None:
    """The dims of a permute (`x.permute(0, 2, 1)`, `.permute((0, 2, 1))`, `torch.permute(x, dims)`)
    from its operands after the tensor, non-negative; None unless constant and a permutation."""
    values = [constant_of(v) for v in rest]
    if len(values) == 1 and isinstance(values[0], tuple):
        values = list(values[0])
    if not values or not all(type(v) is int for v in values):
        return None
    n = len(values)
    dims = [v + n if v < 0 else v for v in values]
    return tuple(dims) if sorted(dims) == list(range(n)) else None


def index_prims(items: tuple, values: Sequence[Value]) -> tuple | None:
    """Basic indexing (ints, slices, None, one Ellipsis) as primitive views applied in order:
    ("select", dim, index), ("slice", dim, start, stop, step) with None for absent parts,
    ("unsqueeze", dim). Dims before the Ellipsis count from the front, after it from the back.
    None when an item is not basic (a tensor or a value of unknown type)."""
    it = iter(values)
    parsed = []
    for item in items:
        if item[0] == "value":
            v = next(it)
            if v.type != INT:
                return None
            parsed.append(("select", v))
        elif item[0] == "slice":
            parts = [next(it) if present else None for present in item[1:]]
            parsed.append(("slice", *parts))
        else:
            parsed.append((item[0],))
    cut = next((i for i, p in enumerate(parsed) if p[0] == "ellipsis"), len(parsed))
    prims = []
    dim = 0
    for p in parsed[:cut]:
        dim = _prim(prims, p, dim, 1)
    tail = []
    dim = -1
    for p in reversed(parsed[cut + 1:]):
        dim = _prim(tail, p, dim, -1)
    return tuple(prims + tail[::-1])


def _prim(out: list, p: tuple, dim: int, direction: int) -> int:
    """Append the primitive for parsed item `p` at `dim`; the dim of the next item."""
    if p[0] == "select":
        out.append(("select", dim, p[1]))
        return dim
    if p[0] == "slice":
        if any(part is not None for part in p[1:]):
            out.append(("slice", dim, *p[1:]))
        return dim + direction
    out.append(("unsqueeze", dim))  # "none"
    return dim + direction


def index_values(items: tuple, operands: Sequence[Value]) -> list[Value]:
    """The operands of `torch.index` that are value items (not slice bounds)."""
    it = iter(operands)
    out = []
    for item in items:
        if item[0] == "value":
            out.append(next(it))
        elif item[0] == "slice":
            for present in item[1:]:
                if present:
                    next(it)
    return out


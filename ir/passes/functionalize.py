"""Functionalization: after this pass no tensor op writes into memory, except the deliberate
write-backs of what the caller can observe (`copy_` ops marked `writeback`).

Roots and aliases. Every tensor value shares storage with one or more *roots*: a tensor argument
(or a tensor in a tuple argument), a tensor attribute of a module argument reached by a static
path of attribute reads (`self.count`, `self.bn.running_mean`), or a tensor an op makes fresh. The
alias analysis (`_Aliasing`) gives every value the roots it may share storage with and, where that
is certain, its *exact alias*: one root and the chain of view ops from it (`y[:, 0]` is `y` then
`[:, 0]`). Views are the ops that always return a view (indexing with ints and slices, `view`,
`transpose`, `permute`, ...); `reshape`, `contiguous`, `to` may copy, so their results only may
alias. If results and loop-carried values are exact when every incoming value is the same alias
(an optimistic fixpoint: `acc += x` in a loop). An if result made of fresh tensors that nothing
reads after the if is a fresh root of its own (the output of `nn.ReLU(inplace=True)`, which the
layer lowering makes an if on `inplace`).

The rewrite (`_Trial`) walks each function in program order and keeps, for each written root, the
SSA value of its current contents (`cur`). A write through an exact alias (`x.add_(y)`, `x += y`,
`x[i] = v`, `F.relu(x, inplace=True)`, `v.mul_(2)` with `v = y[:, 0]`):

1. computes the written view's new value out of place (`add_` -> `add`, `x[m] = v` ->
   `index_put`, `copy_` and basic-index assignment -> a broadcast, cast copy), in the target's
   dtype (an in-place op keeps it where the functional op promotes) and shape (`expand_as` raises
   where eager's in-place op would), both only where the types do not settle it (`_fit`);
2. carries it back to the root through the inverse of each view (`select_scatter`,
   `slice_scatter`, `diagonal_scatter`, `reshape_as`, the inverse permutation, the transpose
   itself): that is the root's new value;
3. later reads of any alias of that root re-apply their view chain to the new value, at the first
   read after the write (cached per block).

A write in a branch makes the root's new value an if result; a write in a loop makes it a
loop-carried value. Arguments and attributes the function writes are read once at entry; at
`func.return` each gets one write-back, and a returned alias of one is a view of the caller's
tensor itself, as in eager (for an early return, inside its branch). When a written argument or
attribute may share memory with another one the function reads, an entry guard
(`_guards.no_overlap`, runtime/guards.py) sends the call down the eager path.

What is left as it is. Writes into a root the pass cannot follow stay (correct, not functional),
each marked `unfunctionalized` with the reason (also `functionalize_function(...).notes`):

- writes through a value that may be one of several tensors (an if result or loop-carried value
  mixing roots, the result of `reshape`/`contiguous`/`to`, an item of a list or of an opaque
  call's result), into a tensor stored in a list or a module attribute (`py.setattr`), passed to a
  call the compiler does not see into (`module.call`, `func.call`; a `plain_module`-guarded torch
  layer in `READ_ONLY_LAYERS` writes only its own buffers), into an Optional tensor, or into an
  attribute the function also assigns;
- writes through a view without an inverse here: `expand`, `unfold`, `as_strided`, `real`/`imag`,
  `view(dtype)`, `narrow` from a start that is not a constant >= 0, `permute` of non-constant
  dims, items of `split`/`chunk`/`unbind`; index assignment with an index tensor after a slice,
  None or Ellipsis (`x[:, idx] = v`), or a mask of unknown rank followed by more items;
- random in-place ops (`uniform_`, `bernoulli_`, ...), ops that change metadata (`resize_`,
  `unsqueeze_`, `t_`, ...), ops writing other than their first tensor (`out=`, F.batch_norm's
  running statistics);
- a root read, after a write, through a value that may alias it, or returned through one.

Finding such a root can invalidate rewrites already made for it, so each function is rewritten
on a copy, and again with the newly excluded roots until no new reason turns up.

Semantics kept only where eager does not raise: with dtypes unknown at compile time, an in-place
op whose promoted dtype eager cannot cast back (an int tensor `+=` a float tensor) is computed and
cast instead of raising; eager's error on a write whose input partly overlaps the written tensor
is not reproduced; `x[i] = v` with more leading size-1 dims in v than the view has raises
(`expand_as`) where eager drops them. The guard does not cover tensors of modules without a static
path (an element of a loop over a ModuleList) nor the `Any`-typed configuration attributes of
torch layers; it compares address ranges, so interleaved views count as overlapping.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import torch

from ir import ops
from ir.builder import literal_type
from ir.core import OPAQUE, BlockArg, Block, Loc, OpResult, Operation, Program, Value
from ir.rewrite import clone_op
from ir.passes.inline import guard_prefix_end
from ir.torch_callinfo import SignatureError, effect_attributes
from ir.torch_schemas import schemas
from ir.torch_signatures import UNANNOTATED_ALIASES, binary_result_type, resolve_function, resolve_method
from ir.types import (
    ANY,
    BOOL,
    DTYPE,
    DictType,
    INT,
    NONE,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    is_subtype,
    unify,
)

GUARD_HELPER = "_guards.no_overlap"  # runtime/guards.py, as generated modules name it

# Root kinds. Inputs and attributes are what the caller can observe.
INPUT, ATTR, FRESH, CONTENTS, UNKNOWN = "input", "attribute", "fresh", "list contents", "unknown"


# -- roots and view chains -----------------------------------------------------------------------
@dataclass(eq=False)
class Root:
    """Storage a tensor value may live in."""

    key: tuple  # the same in every copy of the function: ("entry", arg, path), ("op", n, i), ...
    kind: str
    name: str  # for reasons and guards: "x", "self.count", "w"
    type: Type
    value: Value | None  # the arg, the first read of an attribute, the fresh op's result
    entry: tuple = ()  # INPUT/ATTR: how to read it from its argument: ((part, type), ...)

    @property
    def label(self) -> str:
        if self.kind == FRESH and (self.value is None or self.value.name is None):
            loc = self.value.owner.loc if self.value is not None and isinstance(self.value.owner, Operation) else None
            return f"the tensor made at {loc}" if loc else "a new tensor"
        return f"`{self.name}`"

    @property
    def observable(self) -> bool:
        return self.kind != FRESH

    @property
    def trackable(self) -> bool:
        return self.kind in (INPUT, ATTR, FRESH) and isinstance(self.type, TensorType)


class Unsupported(Exception):
    """A write this pass does not turn into functional ops; the message says why."""


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
    kind: str = field(compare=False)  # how it inverts (`_INVERT`); "" when it does not
    label: str = field(compare=False)  # for reasons: "`.expand()`"
    prims: tuple = field(compare=False, default=())  # basic indexing as select/slice/unsqueeze
    hint: str | None = field(compare=False, default=None)  # the source's name for the view

    @staticmethod
    def make(cls: type, attributes: dict, rest: Sequence[Value], result_type: Type, loc: Loc | None,
             hint: str | None = None) -> Step:
        frozen = tuple(sorted((k, _freeze(v)) for k, v in attributes.items()))
        kind, label, prims = _view_kind(cls, attributes, list(rest))
        return Step(cls.name, frozen, tuple(rest), cls, dict(attributes), result_type, loc, kind, label, prims, hint)

    def apply(self, em: Emitter, base: Value, hint: str | None = None) -> Value:
        op = self.cls([base, *self.rest], [self.result_type], dict(self.attributes), loc=self.loc,
                      result_names=[hint])
        return em.add(op).result

    def invert(self, em: Emitter, base: Value, src: Value) -> Value:
        """The base's value after its view (this step applied to `base`) became `src`."""
        new = _INVERT[self.kind](self, em, base, src)
        new.type = base.type  # the base keeps its dtype and shape
        if new.name is None:
            new.name = base.name
        return new


@dataclass(frozen=True)
class Alias:
    """A value is `root` seen through `chain` (views applied in order)."""

    root: tuple
    chain: tuple[Step, ...] = ()


TOP = "top"  # exactness not known yet (optimistic start of the fixpoint), or never read


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def holds_tensors(t: Type) -> bool:
    if isinstance(t, TensorType) or t == ANY:
        return True
    if isinstance(t, (OptionalType, ListType)):
        return holds_tensors(t.elem)
    if isinstance(t, DictType):
        return holds_tensors(t.value)
    if isinstance(t, TupleType):
        return any(holds_tensors(e) for e in t.elems)
    return False


def _module_like(t: Type) -> bool:
    return isinstance(t, (ModuleType, ModuleListType))


# -- view ops ------------------------------------------------------------------------------------
# Ops whose result is always a view of operand 0, by how they invert. Ops that may return a view
# or a copy (reshape, contiguous, to, flatten) are not here: their results only *may* alias.
_VIEW_KINDS = {
    "view": "reshape", "view_as": "reshape", "squeeze": "reshape", "unsqueeze": "reshape",
    "transpose": "involution", "swapdims": "involution", "swapaxes": "involution", "t": "involution",
    "permute": "permute", "movedim": "movedim", "moveaxis": "movedim", "select": "select",
    "narrow": "narrow", "diagonal": "diagonal", "detach": "identity", "alias": "identity",
    # views a write cannot be carried back through
    "expand": "", "expand_as": "", "broadcast_to": "", "unfold": "", "as_strided": "", "real": "",
    "imag": "", "view_as_real": "", "view_as_complex": "",
}
_ATTRIBUTE_VIEWS = {"T": "involution", "mT": "involution", "data": "identity"}

# Torch layers whose forward is one functional call on the input: under a `plain_module` guard
# (exactly that class, no hooks) a call reads its tensor arguments, returns a new tensor and
# writes nothing but the layer's own buffers (BatchNorm's running statistics, kept in training).
READ_ONLY_LAYERS = frozenset(f"torch.nn.{name}" for name in (
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LayerNorm", "GroupNorm", "Linear", "Conv1d", "Conv2d", "Conv3d",
))
FULL = ("slice", False, False, False)


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
    if name not in _VIEW_KINDS or op.attributes.get("alias_of") != 0 or op.attributes.get("mutates"):
        return None
    if len(op.attributes.get("kwnames", ())) >= len(op.operands):
        return None  # the tensor itself passed by keyword
    return name


def _view_kind(cls: type, attributes: dict, rest: list[Value]) -> tuple[str, str, tuple]:
    if cls is ops.IndexOp:
        prims = _index_prims(attributes["items"], rest)
        return ("index" if prims is not None else ""), "indexing", prims or ()
    if cls is ops.GetAttrOp:
        return _ATTRIBUTE_VIEWS[attributes["attr"]], f"`.{attributes['attr']}`", ()
    name = attributes.get("method") or attributes["callee"].rsplit(".", 1)[1]
    kind = _VIEW_KINDS[name]
    kwnames = attributes.get("kwnames", ())
    if kind == "reshape" and any(v.type in (DTYPE, ANY) for v in rest):
        kind = ""  # x.view(torch.int32) reinterprets the bytes
    elif kind == "permute" and permutation(rest, kwnames) is None:
        kind = ""
    elif kind == "movedim" and kwnames:
        kind = ""
    elif kind == "narrow":
        start = _arg(rest, kwnames, 1, "start")
        if not (isinstance(start, Value) and type(_constant(start)) is int and _constant(start) >= 0):
            kind = ""  # a negative start counts from the end: no slice_scatter bound for it
    return kind, f"`.{name}()`", ()


def _constant(value: Value) -> Any:
    owner = value.owner
    return owner.value if isinstance(owner, ops.ConstantOp) else ...


def _arg(rest: Sequence[Value], kwnames: Sequence[str], position: int, name: str) -> Value | None:
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
    values = [_constant(v) for v in rest]
    if len(values) == 1 and isinstance(values[0], tuple):
        values = list(values[0])
    if not values or not all(type(v) is int for v in values):
        return None
    n = len(values)
    dims = [v + n if v < 0 else v for v in values]
    return tuple(dims) if sorted(dims) == list(range(n)) else None


def _index_prims(items: tuple, values: Sequence[Value]) -> tuple | None:
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


def _prim_items(prim: tuple) -> tuple[tuple, list[Value]]:
    """The `torch.index` items and operands of one primitive view."""
    kind, dim = prim[0], prim[1]
    if kind == "select":
        item, operands = ("value",), [prim[2]]
    elif kind == "slice":
        parts = prim[2:]
        item, operands = ("slice", *(p is not None for p in parts)), [p for p in parts if p is not None]
    else:
        item, operands = ("none",), []
    if dim >= 0:
        return (FULL,) * dim + (item,), operands
    return (("ellipsis",), item) + (FULL,) * (-dim - 1), operands


def _invert_index(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    bases = [base]
    for prim in step.prims[:-1]:
        items, operands = _prim_items(prim)
        view = ops.IndexOp([bases[-1], *operands], [_like(base)], {"items": items}, loc=step.loc)
        bases.append(em.add(view).result)
    for prim, b in zip(reversed(step.prims), reversed(bases)):
        src = _scatter_prim(prim, em, b, src)
    return src


def _scatter_prim(prim: tuple, em: Emitter, base: Value, src: Value) -> Value:
    kind, dim = prim[0], prim[1]
    if kind == "select":
        return em.call("torch.select_scatter", [base, src, em.const(dim), prim[2]], t=base.type)
    if kind == "slice":
        start, stop, stride = (p if p is not None else em.const(d) for p, d in zip(prim[2:], (None, None, 1)))
        return em.call("torch.slice_scatter", [base, src, em.const(dim), start, stop, stride], t=base.type)
    return em.method("squeeze", [src, em.const(dim)], t=base.type)


def _like(t: Value) -> TensorType:
    """A tensor of `t`'s dtype and device, shape unknown."""
    tt = t.type
    return TensorType(tt.dtype, None, tt.device) if isinstance(tt, TensorType) else TensorType()


def _invert_permute(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    dims = permutation(step.rest, step.attributes.get("kwnames", ()))
    assert dims is not None
    inverse = tuple(sorted(range(len(dims)), key=lambda i: dims[i]))
    return em.method("permute", [src, em.const(inverse)])


def _invert_movedim(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    source, destination = step.rest
    return em.method("movedim", [src, destination, source])


def _call_args(step: Step, em: Emitter, params: Sequence[tuple[str, Any]]) -> list[Value]:
    kwnames = step.attributes.get("kwnames", ())
    out = []
    for i, (name, default) in enumerate(params):
        v = _arg(step.rest, kwnames, i, name)
        out.append(v if v is not None else em.const(default))
    return out


def _invert_select(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    dim, index = _call_args(step, em, [("dim", None), ("index", None)])
    return em.call("torch.select_scatter", [base, src, dim, index])


def _invert_narrow(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    dim, start, length = _call_args(step, em, [("dim", None), ("start", None), ("length", None)])
    stop = em.add(ops.BinaryOp([start, length], [INT], {"op": "+"}, loc=step.loc)).result
    return em.call("torch.slice_scatter", [base, src, dim, start, stop, em.const(1)])


def _invert_diagonal(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    args = _call_args(step, em, [("offset", 0), ("dim1", 0), ("dim2", 1)])
    return em.call("torch.diagonal_scatter", [base, src, *args])


_INVERT = {
    "identity": lambda step, em, base, src: src,
    "reshape": lambda step, em, base, src: em.method("reshape_as", [src, base]),
    "involution": lambda step, em, base, src: step.apply(em, src),
    "permute": _invert_permute,
    "movedim": _invert_movedim,
    "select": _invert_select,
    "narrow": _invert_narrow,
    "diagonal": _invert_diagonal,
    "index": _invert_index,
}


# -- building ops ----------------------------------------------------------------------------------
class Emitter:
    """Inserts new ops in front of `anchor`, with its location; constants come from `pool`
    when one is given (one constant per value, at the function's entry)."""

    def __init__(self, anchor: Operation, loc: Loc | None = None, pool: ConstantPool | None = None) -> None:
        self.anchor = anchor
        self.loc = loc or anchor.loc
        self.pool = pool

    def add(self, op: Operation) -> Operation:
        if op.loc is None:
            op.loc = self.loc
        assert self.anchor.parent is not None
        self.anchor.parent.insert_before(self.anchor, op)
        return op

    def const(self, value: Any, t: Type | None = None) -> Value:
        t = t or literal_type(value)
        if self.pool is not None:
            return self.pool.get(value, t)
        return self.add(ops.ConstantOp([], [t], {"value": value})).result

    def call(self, callee: str, operands: Sequence[Value], kwnames: Sequence[str] = (), t: Type | None = None,
             **extra: Any) -> Value:
        args, kwargs = _split(operands, kwnames)
        try:
            info = resolve_function(callee, [a.type for a in args], {k: v.type for k, v in zip(kwnames, kwargs)},
                                    _consts(args, kwnames, kwargs))
        except SignatureError as e:
            raise Unsupported(f"no functional form: {e}") from None
        return self._torch_op(ops.TorchCallOp, info, operands, kwnames, t, callee=callee, **extra)

    def method(self, name: str, operands: Sequence[Value], kwnames: Sequence[str] = (), t: Type | None = None,
               **extra: Any) -> Value:
        args, kwargs = _split(operands[1:], kwnames)
        try:
            info = resolve_method(name, operands[0].type, [a.type for a in args],
                                  {k: v.type for k, v in zip(kwnames, kwargs)}, _consts(args, kwnames, kwargs))
        except SignatureError as e:
            raise Unsupported(f"no functional form: {e}") from None
        return self._torch_op(ops.TensorMethodOp, info, operands, kwnames, t, method=name, **extra)

    def _torch_op(self, cls: type, info: Any, operands: Sequence[Value], kwnames: Sequence[str], t: Type | None,
                  **attrs: Any) -> Value:
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        attrs.update(effect_attributes(info))
        writeback = attrs.pop("writeback", None)
        if writeback:
            attrs["writeback"] = True  # after the effects, so that it prints last
        return self.add(cls(list(operands), [t or info.result], attrs)).result


class ConstantPool:
    """The constants the pass makes, each once, at the start of the function body (constants
    dominate everything there, and codegen prints them where they are used)."""

    def __init__(self, func: ops.FuncOp) -> None:
        self.func = func
        self.made: dict[tuple, Value] = {}

    def get(self, value: Any, t: Type) -> Value:
        key = (type(value).__name__, repr(value), t)
        if key not in self.made:
            op = ops.ConstantOp([], [t], {"value": value}, loc=self.func.loc)
            body = self.func.body
            op.parent = body
            body.ops.insert(len(self.made), op)
            self.made[key] = op.result
        return self.made[key]


def _split(values: Sequence[Value], kwnames: Sequence[str]) -> tuple[list[Value], list[Value]]:
    cut = len(values) - len(kwnames)
    return list(values[:cut]), list(values[cut:])


def _consts(args: list[Value], kwnames: Sequence[str], kwargs: list[Value]) -> dict:
    """Constant arguments by position or keyword, as the front end passes them to the resolver."""
    out: dict = {}
    for i, a in enumerate(args):
        if _constant(a) is not ...:
            out[i] = _constant(a)
    for k, v in zip(kwnames, kwargs):
        if _constant(v) is not ...:
            out[k] = _constant(v)
    return out


# -- alias analysis --------------------------------------------------------------------------------
def written_operands(op: Operation) -> tuple[int, ...]:
    """The tensor operands `op` writes into (not counting this pass's own write-backs)."""
    if isinstance(op, (ops.InplaceOp, ops.IndexPutOp)):
        return (0,)
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) and not op.attributes.get("writeback"):
        return tuple(op.attributes.get("mutates", ()))
    return ()


LOOPS = (ops.ForRangeOp, ops.ForEachOp, ops.WhileOp)


class _Aliasing:
    """May-alias roots and exact aliases of the values of one function (see the module
    docstring). `merges` are the if results to treat as fresh roots of their own."""

    def __init__(self, func: ops.FuncOp, merges: frozenset[Value] = frozenset()) -> None:
        self.func = func
        self.merges = merges
        self.roots: dict[tuple, Root] = {}
        self.may: dict[Value, frozenset[tuple]] = {}
        self.exact: dict[Value, Any] = {}  # Alias, None (not exact) or TOP
        self.merged_from: dict[Value, frozenset[tuple]] = {}  # a merge root's incoming roots
        self.steps: dict[Operation, Step] = {}
        self.list_roots: frozenset[tuple] = frozenset()  # what any list may hold
        self.order = list(func.walk())
        self.position = {op: i for i, op in enumerate(self.order)}
        self.assigned = {op.attributes["attr"]: op for op in self.order if isinstance(op, ops.SetAttrOp)}
        self._args()
        # A fixpoint: may-alias sets only grow, exact aliases only go from TOP to an alias to None.
        self.changed = True
        while self.changed:
            self.changed = False
            for op in self.order[1:]:
                self._transfer(op)

    # -- queries --------------------------------------------------------------------------------
    def may_of(self, v: Value) -> frozenset[tuple]:
        if isinstance(v.type, ListType):
            return self.list_roots | self.may.get(v, frozenset())
        return self.may.get(v, frozenset())

    def exact_of(self, v: Value) -> Alias | None:
        a = self.exact.get(v)
        return a if isinstance(a, Alias) else None

    # -- state ----------------------------------------------------------------------------------
    def _set(self, v: Value, may: frozenset[tuple], exact: Any = None) -> None:
        """Record what `v` may alias (accumulated over the fixpoint) and its exact alias (as the
        transfer function now computes it)."""
        if not holds_tensors(v.type):
            return
        old_may, old_exact = self.may.get(v, frozenset()), self.exact.get(v, TOP)
        may = old_may | may
        if may != old_may or exact != old_exact:
            self.may[v], self.exact[v] = may, exact
            self.changed = True

    def _root(self, key: tuple, kind: str, name: str, t: Type, value: Value | None, entry: tuple = ()) -> tuple:
        if key not in self.roots:
            self.roots[key] = Root(key, kind, name, t, value, entry)
        return key

    def _fresh(self, v: Value) -> tuple:
        key = ("op", self.position[v.owner], v.index)  # type: ignore[index]
        return self._root(key, FRESH, v.name or "tensor", v.type, v)

    def _same_as(self, v: Value, source: Value) -> None:
        self._set(v, self.may_of(source), self.exact.get(source, TOP))

    def _union(self, values: Sequence[Value]) -> frozenset[tuple]:
        out: frozenset[tuple] = frozenset()
        for v in values:
            out |= self.may_of(v)
        return out

    def _args(self) -> None:
        for arg in self.func.args:
            if _module_like(arg.type):
                continue
            leaves = self._leaves(arg, arg.type, (), ())
            if isinstance(arg.type, (TensorType, OptionalType)) and leaves:
                self._set(arg, leaves, Alias(next(iter(leaves))))
            elif isinstance(arg.type, ListType):
                self._set(arg, leaves, None)
            elif leaves or arg.type == ANY:
                self._set(arg, leaves or frozenset({self._unknown()}), None)

    def _leaves(self, arg: BlockArg, t: Type, parts: tuple, entry: tuple) -> frozenset[tuple]:
        """The roots of the tensors in argument `arg` (in a tuple argument, at item `parts`)."""
        if isinstance(t, TupleType):
            out: frozenset[tuple] = frozenset()
            for k, e in enumerate(t.elems):
                out |= self._leaves(arg, e, parts + (("item", k),), entry + ((("item", k), e),))
            return out
        name = (arg.name or "arg") + "".join(f"[{p[1]}]" for p in parts)
        if isinstance(t, ListType) and holds_tensors(t):
            key = self._root(("contents", arg.index, *parts), CONTENTS, f"{name}[...]", t, arg, entry)
            self.list_roots |= {key}
            return frozenset({key})
        if isinstance(t, (TensorType, OptionalType)) and holds_tensors(t):
            return frozenset({self._root(("entry", arg.index, *parts), INPUT, name, t, arg, entry)})
        if t == ANY:
            return frozenset({self._unknown()})
        return frozenset()

    def _unknown(self) -> tuple:
        return self._root(("unknown",), UNKNOWN, "a tensor the compiler cannot name", ANY, None)

    # -- transfer functions ---------------------------------------------------------------------
    def _transfer(self, op: Operation) -> None:
        if isinstance(op, ops.IfOp):
            self._if(op)
        elif isinstance(op, LOOPS):
            self._loop(op)
        elif isinstance(op, (ops.RefineOp, ops.InplaceOp)):
            self._same_as(op.result, op.operands[0])
        elif isinstance(op, ops.UninitializedOp):
            pass  # never read: fits any merge
        elif isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
            self._torch(op)
        elif isinstance(op, ops.IndexOp):
            self._index(op)
        elif isinstance(op, ops.GetAttrOp):
            self._getattr(op)
        elif isinstance(op, (ops.GetItemOp, ops.UnpackOp)):
            self._extract(op)
        elif isinstance(op, ops.TupleOp):
            self._set(op.result, self._union(op.operands), None)
        elif isinstance(op, (ops.ListOp, ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.DictOp, ops.DictSetItemOp)):
            held = op.operands if isinstance(op, (ops.ListOp, ops.DictOp)) else op.operands[1:]
            new = self.list_roots | self._union(held)
            self.changed |= new != self.list_roots
            self.list_roots = new
        elif op.has_trait(OPAQUE) or isinstance(op, ops.BuiltinCallOp):
            self._opaque(op)
        else:
            for r in op.results:
                if holds_tensors(r.type):
                    key = self._fresh(r)
                    self._set(r, frozenset({key}), Alias(key))

    def _torch(self, op: Operation) -> None:
        if not op.results:
            return
        r = op.result
        a = op.attributes
        alias_of = a.get("alias_of")
        if alias_of is not None and alias_of in a.get("mutates", ()):
            self._same_as(r, op.operands[alias_of])  # an in-place op returns its target
        elif view_name(op) is not None:
            self._view(op, op.operands[0])
        elif alias_of is not None or _base_name(op) in UNANNOTATED_ALIASES:
            # may return (a view of) an operand, or a new tensor
            sources = [op.operands[alias_of]] if alias_of is not None else op.operands
            self._set(r, self._union(sources) | {self._fresh(r)}, None)
        elif holds_tensors(r.type):
            key = self._fresh(r)
            self._set(r, frozenset({key}), Alias(key) if isinstance(r.type, TensorType) else None)

    def _view(self, op: Operation, base: Value) -> None:
        step = self.steps.get(op)
        if step is None:
            step = self.steps[op] = Step.make(type(op), op.attributes, op.operands[1:], op.result.type, op.loc,
                                              op.result.name)
        a = self.exact.get(base, TOP)
        exact = Alias(a.root, a.chain + (step,)) if isinstance(a, Alias) else a
        self._set(op.result, self.may_of(base), exact)

    def _index(self, op: ops.IndexOp) -> None:
        items, operands = op.attributes["items"], op.operands[1:]
        parts = [v.type for v in operands]
        values = _index_values(items, operands)
        if _index_prims(items, operands) is not None and all(t in (INT, NONE) for t in parts):
            self._view(op, op.operands[0])
        elif all(v.type == INT or isinstance(v.type, TensorType) for v in values):
            key = self._fresh(op.result)  # advanced indexing copies
            self._set(op.result, frozenset({key}), Alias(key))
        else:
            self._set(op.result, self.may_of(op.operands[0]) | {self._fresh(op.result)}, None)

    def _getattr(self, op: ops.GetAttrOp) -> None:
        r, obj, attr = op.result, op.operands[0], op.attributes["attr"]
        if not holds_tensors(r.type):
            return
        if _module_like(obj.type):
            self._attribute(op)
        elif isinstance(obj.type, TensorType) and attr in _ATTRIBUTE_VIEWS:
            self._view(op, obj)
        else:  # x.grad, x.real, a field of a named tuple
            self._set(r, self.may_of(obj) or frozenset({self._unknown()}), None)

    def _attribute(self, op: ops.GetAttrOp) -> None:
        """A tensor attribute of a module: a root when the module has a static path from an
        argument; when the function assigns the attribute, a read may see any assigned value."""
        r, attr = op.result, op.attributes["attr"]
        path = entry_path(r, self.func)
        if path is None:
            self._set(r, frozenset({self._unknown()} | self._attribute_roots()), None)
            return
        key = self._entry_root(r, path)
        if attr in self.assigned:
            assigned = [s.operands[1] for s in self.order
                        if isinstance(s, ops.SetAttrOp) and s.attributes["attr"] == attr]
            self._set(r, frozenset({key}) | self._union(assigned), None)
        else:
            self._set(r, frozenset({key}), Alias(key))

    def _attribute_roots(self, prefix: tuple | None = None) -> frozenset[tuple]:
        """Attribute roots (below the module at `prefix`, when given)."""
        return frozenset(k for k, root in self.roots.items()
                         if root.kind == ATTR and (prefix is None or k[:len(prefix)] == prefix))

    def reachable(self, op: Operation) -> frozenset[tuple]:
        """Roots a call the compiler does not see into can reach: through its tensor operands,
        and the attributes of each module it gets (any attribute, for a module without a static
        path); a guarded read-only layer, only its own attributes."""
        layer = guarded_layer_call(op, self.func)
        if layer is not None:
            return self._attribute_roots(layer)
        out = self._union(op.operands)
        if isinstance(op, ops.OpaqueOp):
            # Python code kept as written reaches whatever the caller can (the module through a
            # global, an input stored on it): every input and attribute tensor.
            out |= frozenset(k for k, r in self.roots.items() if r.observable)
        for v in op.operands:
            if _module_like(v.type):
                prefix = module_prefix(v, self.func)
                out |= self._attribute_roots(prefix) | ({self._unknown()} if prefix is None else frozenset())
        return out

    def _entry_root(self, value: Value, path: tuple) -> tuple:
        arg, steps = path
        parts = tuple(part for _, _, part in steps)
        if isinstance(arg.type, TupleType):
            return next(iter(self._leaves(arg, arg.type, (), ()) & {("entry", arg.index, *parts)}), self._unknown())
        name = arg.name or "arg"
        for p in parts:
            name += f".{p[1]}" if p[0] == "attr" else f"[{p[1]}]"
        entry = tuple((part, op.results[i].type) for op, i, part in steps)
        return self._root(("entry", arg.index, *parts), ATTR, name, value.type, value, entry)

    def _extract(self, op: Operation) -> None:
        """An item of a tuple (the item itself when the tuple is built here or is an argument),
        of a list (anything a list may hold)."""
        container = op.operands[0]
        for r in op.results:
            if not holds_tensors(r.type):
                continue
            path = entry_path(r, self.func)
            in_argument = path is not None and isinstance(path[0].type, TupleType)
            if in_argument and isinstance(r.type, (TensorType, OptionalType)):
                key = self._entry_root(r, path)  # a tensor of a tuple argument
                self._set(r, frozenset({key}), Alias(key) if self.roots[key].kind == INPUT else None)
                continue
            item = _tuple_item(op, r)
            if item is not None:
                self._same_as(r, item)
            else:
                self._set(r, self.may_of(container) or frozenset({self._unknown()}), None)

    def _opaque(self, op: Operation) -> None:
        """A call the compiler does not see into may return any tensor it can reach."""
        if guarded_layer_call(op, self.func) is not None and isinstance(op.result.type, TensorType):
            key = self._fresh(op.result)
            self._set(op.result, frozenset({key}), Alias(key))
            return
        reach = self.reachable(op)
        for r in op.results:
            if holds_tensors(r.type):
                self._set(r, reach | {self._fresh(r)}, None)

    # -- control flow ---------------------------------------------------------------------------
    def _if(self, op: ops.IfOp) -> None:
        for i, r in enumerate(op.results):
            incoming = [b.terminator.operands[i] for b in (op.then_block, op.else_block)]  # type: ignore[union-attr]
            if r in self.merges:
                self.merged_from[r] = self._union(incoming)
                key = self._root(("merge", self.position[op], i), FRESH, r.name or "tensor", r.type, r)
                self._set(r, frozenset({key}), Alias(key))
            else:
                self._set(r, self._union(incoming), _meet_all(self.exact.get(v, TOP) for v in incoming))

    def _loop(self, op: Operation) -> None:
        for j, (init, args, nexts, result) in enumerate(carried_slots(op)):
            incoming = [init, *nexts]
            may = self._union(incoming)
            exact = _meet_all(self.exact.get(v, TOP) for v in incoming)
            for arg in args:
                self._set(arg, may, exact)
            self._set(result, may, exact)
        if isinstance(op, ops.ForEachOp):
            elem, iterable = op.body.args[0], op.operands[0]
            self._set(elem, self.may_of(iterable) or frozenset({self._unknown()}), None)


def _index_values(items: tuple, operands: Sequence[Value]) -> list[Value]:
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


def _base_name(op: Operation) -> str:
    aten = op.attributes.get("aten") or ""
    return aten.removeprefix("aten::").partition(".")[0]


def _tuple_item(op: Operation, r: Value) -> Value | None:
    """The operand of a `py.tuple` that extraction result `r` is."""
    built = op.operands[0].owner
    if not isinstance(built, ops.TupleOp):
        return None
    if isinstance(op, ops.UnpackOp):
        return built.operands[r.index]  # type: ignore[attr-defined]
    index = _constant(op.operands[1])
    if type(index) is int and -len(built.operands) <= index < len(built.operands):
        return built.operands[index]
    return None


def _meet(a: Any, b: Any) -> Any:
    if a is TOP:
        return b
    if b is TOP:
        return a
    return a if a == b else None


def _meet_all(values: Iterator[Any]) -> Any:
    out: Any = TOP
    for v in values:
        out = _meet(out, v)
    return out


def carried_slots(op: Operation) -> list[tuple[Value, list[Value], list[Value], Value]]:
    """For each loop-carried value: its initial value, the block arguments that hold it, the
    values the terminators pass on, and the loop's result."""
    out = []
    if isinstance(op, ops.WhileOp):
        cond, yld = op.before.terminator, op.after.terminator
        for j, r in enumerate(op.results):
            out.append((op.operands[j], [op.before.args[j], op.after.args[j]],
                        [cond.operands[1 + j], yld.operands[j]], r))  # type: ignore[union-attr]
        return out
    body = op.regions[0].block
    term = body.terminator
    first = 3 if isinstance(op, ops.ForRangeOp) else 1
    shift = 1 if isinstance(term, ops.ConditionOp) else 0
    for j, r in enumerate(op.results):
        nxt = term.operands[shift + j]  # type: ignore[union-attr]
        out.append((op.operands[first + j], [body.args[1 + j]], [nxt], r))
    return out


def guarded_layer_call(op: Operation, func: ops.FuncOp) -> tuple | None:
    """For a call of a `READ_ONLY_LAYERS` module that an entry guard checks, the key prefix of
    the module's attributes (what the call may write)."""
    if not isinstance(op, ops.ModuleCallOp) or not isinstance(op.operands[0].type, ModuleType):
        return None
    qualname = op.operands[0].type.qualname
    path = entry_path(op.operands[0], func)
    if qualname not in READ_ONLY_LAYERS or path is None:
        return None
    text = ".".join(str(part[1]) for _, _, part in path[1])
    for guard in func.body.ops:
        if isinstance(guard, ops.BuiltinCallOp) and guard.attributes["callee"] == "_guards.plain_module" \
                and guard.operands[0] is path[0] and [_constant(v) for v in guard.operands[1:3]] == [text, qualname]:
            return ("entry", path[0].index, *(part for _, _, part in path[1]))
    return None


def module_prefix(module: Value, func: ops.FuncOp) -> tuple | None:
    """The key prefix of the attributes of a module value: from its static path, or for the
    element of a loop over a module list, from the list's path (any index)."""
    while isinstance(module.owner, ops.RefineOp):
        module = module.owner.operands[0]
    path = entry_path(module, func)
    if path is not None:
        return ("entry", path[0].index, *(part for _, _, part in path[1]))
    if isinstance(module, BlockArg) and module.index == 0 and module.block.parent is not None:
        loop = module.block.parent.parent
        if isinstance(loop, ops.ForEachOp) and module.block is loop.body:
            return module_prefix(loop.operands[0], func)
    return None


def entry_path(value: Value, func: ops.FuncOp) -> tuple[BlockArg, tuple] | None:
    """How `value` is read from an argument of `func` by attribute reads of modules and constant
    items of tuples and module lists: (argument, ((op, result index, part), ...)) with parts
    ("attr", name) and ("item", k); None when it is not."""
    steps = []
    while not isinstance(value, BlockArg):
        op = value.owner
        obj = op.operands[0] if op.operands else None
        if isinstance(op, ops.GetAttrOp) and _module_like(obj.type):
            steps.append((op, 0, ("attr", op.attributes["attr"])))
        elif isinstance(op, ops.GetItemOp) and isinstance(obj.type, (TupleType, ModuleListType)):
            index = _constant(op.operands[1])
            if type(index) is not int:
                return None
            steps.append((op, 0, ("item", index)))
        elif isinstance(op, ops.UnpackOp) and isinstance(obj.type, TupleType):
            steps.append((op, value.index, ("item", value.index)))  # type: ignore[attr-defined]
        else:
            return None
        value = obj
    if value.block is not func.body:
        return None
    return value, tuple(reversed(steps))


def analyse(func: ops.FuncOp) -> _Aliasing:
    """The alias analysis, with every if result that can be a fresh root of its own made one:
    a tensor result whose incoming values are fresh tensors of the if's block that nothing
    reads after the if (`out = self.relu(out)` with an in-place ReLU). Candidates that fail the
    check are dropped until the rest pass."""
    first = _Aliasing(func)
    merges = {r for op in first.order if isinstance(op, ops.IfOp) for r in op.results
              if _merge_candidate(first, op, r)}
    while True:
        a = _Aliasing(func, frozenset(merges))
        dead = {r for r in merges if not _unread_after(a, r)}
        if not dead:
            return a
        merges -= dead


def _merge_candidate(a: _Aliasing, op: ops.IfOp, r: Value) -> bool:
    if not isinstance(r.type, TensorType) or a.exact.get(r) is not None or not a.may_of(r):
        return False
    for key in a.may_of(r):
        root = a.roots[key]
        owner = root.value.owner if root.value is not None else None
        if root.kind != FRESH or not isinstance(owner, Operation):
            return False
        while owner is not None and owner.parent is not op.parent:
            owner = owner.parent_op()
        if owner is None:
            return False  # made in an enclosing loop's earlier iteration, or outside
    return True


def _unread_after(a: _Aliasing, r: Value) -> bool:
    """Whether no value that may alias the roots merged into `r` is read after r's if."""
    op = r.owner
    assert isinstance(op, ops.IfOp)
    start = a.position[op]
    end = start + sum(1 for _ in op.walk()) - 1
    for v, may in a.may.items():
        if may & a.merged_from[r]:
            for use in v.uses:
                if a.position.get(use.op, end + 1) > end:
                    return False
    return True


class _Trial:
    """One rewrite of one function, with the roots in `excluded` left alone. Collects the
    reasons it finds for leaving more roots alone in `found`."""

    def __init__(self, func: ops.FuncOp, excluded: dict[tuple, str]) -> None:
        self.func = func
        self.a = analyse(func)
        self.roots = self.a.roots
        self.excluded = dict(excluded)
        self.found: dict[tuple, str] = {}
        self.exact: dict[Value, Alias] = {}  # of values this pass makes
        self.may: dict[Value, frozenset[tuple]] = {}
        self.captured: dict[Value, dict[tuple, Value | None]] = {}  # root -> its value at definition
        self.cur: dict[tuple, Value] = {}
        self.storage: dict[tuple, Value] = {}
        self.cache: list[dict] = [{}]  # (root, chain, root's value) -> that view, per block
        self.erased_inputs: list[Value] = []
        self.added_slots: list[tuple[Operation, int]] = []
        self.pushed: set[Value] = set()
        self.returned: set[tuple[Operation, int]] = set()
        self.pool = ConstantPool(func)
        self.opaque_reach: frozenset[tuple] = frozenset()  # what calls the compiler does not see into reach

    def emitter(self, at: Operation) -> Emitter:
        return Emitter(at, pool=self.pool)

    # -- driver ---------------------------------------------------------------------------------
    def run(self) -> None:
        self._exclude_statically()
        self.tracked = self._tracked()
        self.loop_writes = self._loop_writes()
        self._find_returned()
        self._enter()
        self.block(self.func.body)
        _dedupe_slots(self.added_slots)
        _fit_merge_types(self.func)
        _erase_dead(self.erased_inputs)

    def _tracked(self) -> list[tuple]:
        """Roots written through an exact alias and not left alone, in program order."""
        out: list[tuple] = []
        for op in self.a.order:
            for i in written_operands(op):
                alias = self.a.exact_of(op.operands[i])
                if alias is not None and alias.root not in self.excluded and alias.root not in out:
                    out.append(alias.root)
        return out

    def _exclude(self, key: tuple, reason: str, written: set[tuple]) -> None:
        if key in written and key not in self.excluded:
            self.excluded[key] = reason

    def _exclude_statically(self) -> None:
        """Roots whose writes cannot be made functional, whatever the order of ops."""
        written = {k for op in self.a.order for i in written_operands(op) for k in self.a.may_of(op.operands[i])}
        for op in self.a.order:
            at = _at(op)
            for i in written_operands(op):
                target = op.operands[i]
                alias = self.a.exact_of(target)
                if alias is None:
                    for k in sorted(self.a.may_of(target), key=repr):
                        self._exclude(k, f"{self.roots[k].label} is written{at} through a value that may be one of "
                                         "several tensors", written)
                    continue
                root = self.roots[alias.root]
                if not root.trackable:
                    self._exclude(root.key, f"{root.label} ({root.kind}, {root.type}) is written{at}", written)
                for step in _written_chain(op, alias):
                    if not step.kind:
                        self._exclude(root.key, f"{root.label} is written{at} through {step.label}, which has no "
                                                "inverse", written)
            if op.has_trait(OPAQUE) and not isinstance(op, (ops.GuardOp, ops.SetAttrOp)):
                self.opaque_reach |= self.a.reachable(op)
                for k in sorted(self.a.reachable(op), key=repr):
                    self._exclude(k, f"{self.roots[k].label} is passed to `{_describe(op)}`{at}, which may read or "
                                     "write it", written)
            if isinstance(op, ops.SetAttrOp):  # the value escapes into the module
                for k in sorted(self.a.may_of(op.operands[1]), key=repr):
                    self._exclude(k, f"{self.roots[k].label} is stored in `{_describe(op)}`{at}", written)
        for loop in self.a.order:
            if isinstance(loop, ops.WhileOp):
                # Its new value would leave the condition region through scf.condition, which the
                # Python emitter expects to pass the region's own arguments on unchanged.
                for op in loop.before.ops:
                    for inner in op.walk():
                        for i in written_operands(inner):
                            alias = self.a.exact_of(inner.operands[i])
                            if alias is not None:
                                self._exclude(alias.root, f"{self.roots[alias.root].label} is written in the "
                                                          f"condition of a while loop{_at(inner)}", written)
        settled = self._settled_before_listed()
        for k in sorted(self.a.list_roots - settled, key=repr):
            self._exclude(k, f"{self.roots[k].label} is stored in a list", written)

    def _settled_before_listed(self) -> set[tuple]:
        """Roots stored in lists only by ops of the function's own block (not in a loop), after
        every write to them (`torch.cat([F.relu(a, inplace=True), b])`): a list then holds
        their final value, which the rewrite passes it."""
        stores: dict[tuple, list[Operation]] = {}
        writes: dict[tuple, list[int]] = {}
        for op in self.a.order:
            if isinstance(op, (ops.ListOp, ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.DictOp, ops.DictSetItemOp)):
                held = op.operands if isinstance(op, (ops.ListOp, ops.DictOp)) else op.operands[1:]
                for k in self.a._union(held):
                    stores.setdefault(k, []).append(op)
            for i in written_operands(op):
                for k in self.a.may_of(op.operands[i]):
                    writes.setdefault(k, []).append(self.a.position[op])
        top = self.a.func.regions[0].block
        return {k for k, listed in stores.items()
                if all(op.parent is top for op in listed)
                and all(w < min(self.a.position[op] for op in listed) for w in writes.get(k, []))}

    def _loop_writes(self) -> dict[Operation, list[tuple]]:
        out: dict[Operation, list[tuple]] = {}
        for loop in self.a.order:
            if isinstance(loop, LOOPS):
                keys = []
                for op in list(loop.walk())[1:]:
                    for i in written_operands(op):
                        alias = self.a.exact_of(op.operands[i])
                        if alias is not None and alias.root in self.tracked and alias.root not in keys:
                            keys.append(alias.root)
                out[loop] = keys
        return out

    def _find_returned(self) -> None:
        """Operand positions whose value is what the function returns: the return's, and, for a
        returned if result (an early return) or a returned tuple holding one, the yields."""
        term = self.func.body.terminator
        work = [(term, i) for i in range(len(term.operands))] if term is not None else []
        while work:
            op, i = work.pop()
            self.returned.add((op, i))
            self._returned_value(op.operands[i], work)

    def _returned_value(self, v: Value, work: list) -> None:
        owner = v.owner
        if isinstance(owner, ops.TupleOp) and len(v.uses) == 1:
            for e in owner.operands:
                self._returned_value(e, work)
        elif isinstance(owner, ops.IfOp) and len(v.uses) == 1 and holds_tensors(v.type):
            self.pushed.add(v)
            for block in (owner.then_block, owner.else_block):
                work.append((block.terminator, v.index))  # type: ignore[attr-defined]

    # -- entry: reads of what the caller passes, and the overlap guard ---------------------------
    def _enter(self) -> None:
        body = self.func.body
        em = Emitter(body.ops[guard_prefix_end(self.func)], self.func.loc, self.pool)
        cache: dict[tuple, Value] = {}
        for key in self.tracked:
            root = self.roots[key]
            if root.observable:
                self.storage[key] = self._read_at_entry(root, em, cache)
                self.cur[key] = self.storage[key]
        written = [k for k in self.tracked if self.roots[k].observable]
        if written:
            others = [k for k, r in self.roots.items() if r.kind in (INPUT, ATTR, CONTENTS) and k not in written
                      and self._used(r)]
            self._guard(em, written, others, cache)
        for arg in self.func.args:
            self._define_value(arg, storage=True)

    def _read_at_entry(self, root: Root, em: Emitter, cache: dict[tuple, Value]) -> Value:
        """The root's tensor as the caller passed it: the argument, or a fresh read of the same
        attributes and items at entry (where the original read may sit in a branch)."""
        arg = self.func.args[root.key[1]]
        value: Value = arg
        for n, (part, t) in enumerate(root.entry):
            key = (root.key[1], *(p for p, _ in root.entry[:n + 1]))
            if key not in cache:
                if part[0] == "attr":
                    op = ops.GetAttrOp([value], [t], {"attr": part[1]}, result_names=[None])
                else:
                    op = ops.GetItemOp([value, em.const(part[1])], [t])
                cache[key] = em.add(op).result
            value = cache[key]
        if root.entry:
            value.name = root.name.rsplit(".", 1)[-1].split("[")[0] if root.kind == ATTR else value.name
            self._register(value, Alias(root.key), {root.key: value})
        return value

    def _used(self, root: Root) -> bool:
        """Whether the function reads this tensor the caller passes (an attribute of unknown type
        of a standard torch layer is its configuration, as the layer lowering reads it: not a
        tensor)."""
        if root.value is None:
            return False
        if root.kind == ATTR and root.type == ANY:
            module = root.entry[-2][1] if len(root.entry) > 1 else self.func.args[root.key[1]].type
            return not (isinstance(module, ModuleType) and module.qualname.startswith("torch.nn."))
        return bool(root.value.uses) if isinstance(root.value, BlockArg) else True

    def _guard(self, em: Emitter, written: list[tuple], others: list[tuple], cache: dict[tuple, Value]) -> None:
        def values(keys: list[tuple]) -> Value:
            vs = []
            for k in keys:
                v = self.storage.get(k) or self._read_at_entry(self.roots[k], em, cache)
                if k not in self.opaque_reach:
                    self.storage[k] = v  # later reads read this one (nothing can re-bind it)
                vs.append(v)
            return em.add(ops.TupleOp(vs, [TupleType(tuple(v.type for v in vs))])).result

        if len(written) < 2 and not others:
            return
        call = em.add(ops.BuiltinCallOp([values(written), values(others)], [BOOL], {"callee": GUARD_HELPER}))
        names = ", ".join(f"{self.roots[k].label}" for k in written)
        reason = f"{names} (written) may share memory with another tensor argument or attribute"
        em.add(ops.GuardOp([call.result], [], {"reason": reason}))

    # -- the walk -------------------------------------------------------------------------------
    def block(self, block: Block) -> None:
        for op in list(block.ops):
            self.visit(op)

    def visit(self, op: Operation) -> None:
        if isinstance(op, ops.IfOp):
            self.if_op(op)
        elif isinstance(op, LOOPS):
            self.loop(op)
        elif isinstance(op, (ops.ReturnOp, ops.YieldOp, ops.ConditionOp)):
            self.terminator(op)
        elif written_operands(op):
            self.write(op)
        else:
            self.uses(op)
            self.define(op)

    # -- values -----------------------------------------------------------------------------------
    def exact_of(self, v: Value) -> Alias | None:
        return self.exact.get(v) or self.a.exact_of(v)

    def may_of(self, v: Value) -> frozenset[tuple]:
        return self.may.get(v) or self.a.may_of(v)

    def _register(self, v: Value, alias: Alias, captured: dict[tuple, Value | None]) -> None:
        self.exact[v] = alias
        self.may[v] = frozenset({alias.root})
        self.captured[v] = captured

    def uses(self, op: Operation) -> None:
        for i, v in enumerate(list(op.operands)):
            new = self.current(v, op)
            if new is not v:
                op.set_operand(i, new)

    def current(self, v: Value, at: Operation) -> Value:
        """`v` as a value holding what it holds now: an exact alias of a written root is its view
        chain applied to the root's current value."""
        alias = self.exact_of(v)
        if alias is not None and alias.root in self.cur and self._stale(v, alias.root):
            return self.materialize(alias.root, alias.chain, self.emitter(at))
        for k in sorted(self.may_of(v), key=repr):
            if k in self.cur and self._stale(v, k) and not (v in self.pushed and self.roots[k].observable):
                self._problem(k, f"{self.roots[k].label} is read{_at(at)} through a value that may alias it, "
                                 "after a write")
        return v

    def _stale(self, v: Value, key: tuple) -> bool:
        return self.captured.get(v, {}).get(key, self.cur.get(key)) is not self.cur.get(key)

    def materialize(self, key: tuple, chain: tuple[Step, ...], em: Emitter) -> Value:
        """The current value of root `key` seen through `chain`, re-using views made earlier in
        this block (or an enclosing one) since the root's last write."""
        return self._view_of(key, chain, self.cur[key], em)

    def from_storage(self, key: tuple, chain: tuple[Step, ...], em: Emitter) -> Value:
        """The root's own tensor (as the caller passed it) seen through `chain`: what a returned
        alias of an input or attribute is."""
        return self._view_of(key, chain, self.storage[key], em)

    def _view_of(self, key: tuple, chain: tuple[Step, ...], root_value: Value, em: Emitter) -> Value:
        if not chain:
            return root_value
        for scope in reversed(self.cache):
            hit = scope.get((key, chain, root_value))
            if hit is not None:
                return hit
        base = self._view_of(key, chain[:-1], root_value, em)
        value = chain[-1].apply(em, base, chain[-1].hint)
        self._register(value, Alias(key, chain), {key: root_value})
        self.cache[-1][(key, chain, root_value)] = value
        return value

    def define(self, op: Operation) -> None:
        extracts = isinstance(op, (ops.GetItemOp, ops.UnpackOp))
        for r in op.results:
            if isinstance(op, ops.GetAttrOp) and _module_like(op.operands[0].type) or \
                    extracts and entry_path(r, self.func) is not None:
                alias = self.exact_of(r)
                if alias is not None and alias.root in self.storage and r.uses:
                    r.replace_all_uses_with(self.storage[alias.root])  # read once, at entry
                    self.erased_inputs.append(r)
                    continue
                self._define_value(r, storage=True)  # the caller's tensor
            else:
                self._define_value(r, source=op.operands[0] if extracts else None)

    def _define_value(self, v: Value, storage: bool = False, source: Value | None = None) -> None:
        """Note which version of each written root `v` holds: the caller's tensor for reads of
        arguments and attributes, the container's for items, else the current one."""
        keys = [k for k in self.may_of(v) if k in self.tracked]
        if not keys:
            return
        if storage:
            self.captured[v] = {k: self.storage.get(k) for k in keys}
        elif source is not None and source in self.captured:
            self.captured[v] = {k: self.captured[source].get(k) for k in keys}
        else:
            self.captured[v] = {k: self.cur.get(k) for k in keys}
        alias = self.exact_of(v)
        if alias is None:
            return
        if not alias.chain and self.roots[alias.root].value is v and alias.root in self.tracked \
                and not self.roots[alias.root].observable:
            self.cur[alias.root] = v  # a fresh tensor: its own first version
            self.captured[v] = {alias.root: v}
        elif alias.chain and alias.root in self.cur and not self._stale(v, alias.root):
            self.cache[-1][(alias.root, alias.chain, self.cur[alias.root])] = v  # a view to re-use

    def _problem(self, key: tuple, reason: str) -> None:
        if key not in self.excluded:
            self.excluded[key] = reason
            self.found[key] = reason

    def _leave(self, op: Operation, reason: str) -> None:
        self.uses(op)
        op.attributes["unfunctionalized"] = reason
        self.define(op)

    # -- writes ---------------------------------------------------------------------------------
    def write(self, op: Operation) -> None:
        written = written_operands(op)
        target = op.operands[written[0]]
        alias = self.exact_of(target)
        if alias is None:
            self._leave(op, self._uncertain_target(target))
            return
        if alias.root not in self.tracked:
            self._leave(op, self.excluded.get(alias.root, "writes a tensor the compiler cannot name"))
            return
        try:
            if len(written) != 1:
                raise Unsupported(f"`{_describe(op)}` writes into several tensors")
            self.uses(op)
            em = self.emitter(op)
            done = functional_value(op, alias, self, em)
            if done is not None:
                if op.results and op.results[0].name:
                    done[1].name = op.results[0].name  # `t = x.add_(1)`: the new value is t
                self.commit(alias.root, *done, em)
        except Unsupported as e:
            self._problem(alias.root, f"{self.roots[alias.root].label} is written{_at(op)}: {e}")
            self._leave(op, str(e))
            return
        if done is not None:
            for r in op.results:  # an in-place op returns its target, which now holds the new value
                r.replace_all_uses_with(done[1])
        self.erased_inputs += list(op.operands)
        op.erase()

    def _uncertain_target(self, target: Value) -> str:
        read = target
        while isinstance(read.owner, ops.RefineOp):
            read = read.owner.operands[0]
        attr = read.owner.attributes.get("attr") if isinstance(read.owner, ops.GetAttrOp) else None
        if attr in self.a.assigned:
            return f"writes attribute `{attr}`, which the function also assigns{_at(self.a.assigned[attr])}"
        names = ", ".join(self.roots[k].label for k in sorted(self.may_of(target), key=repr))
        return f"writes through a value that may be one of several tensors ({names})"

    def commit(self, key: tuple, chain: tuple[Step, ...], new: Value, em: Emitter) -> None:
        """Carry the written view's new value back to the root through each step's inverse."""
        bases = [self.materialize(key, chain[:i], em) for i in range(len(chain))]
        value = new
        for step, base in zip(reversed(chain), reversed(bases)):
            value = step.invert(em, base, value)
        self.cur[key] = value
        self._register(value, Alias(key), {key: value})
        self._register(new, Alias(key, chain), {key: value})
        if chain:
            self.cache[-1][(key, chain, value)] = new

    # -- control flow ---------------------------------------------------------------------------
    def scoped(self, block: Block, cur: dict[tuple, Value]) -> dict[tuple, Value]:
        """Walk `block` starting from `cur`; the roots' values at its end."""
        saved = self.cur
        self.cur = dict(cur)
        self.cache.append({})
        loop = block.parent.parent if block.parent is not None else None
        for arg in block.args:
            element = isinstance(loop, ops.ForEachOp) and arg.index == 0
            self._define_value(arg, source=loop.operands[0] if element else None)  # type: ignore[union-attr]
        self.block(block)
        self.cache.pop()
        out, self.cur = self.cur, saved
        return out

    def if_op(self, op: ops.IfOp) -> None:
        self.uses(op)
        ends = [self.scoped(b, self.cur) for b in (op.then_block, op.else_block)]
        for key in list(self.cur):
            values = [end[key] for end in ends]
            if values[0] is values[1]:
                self.cur[key] = values[0]
                continue
            for block, v in zip((op.then_block, op.else_block), values):
                block.terminator._add_operand(v)  # type: ignore[union-attr]
            self.cur[key] = _add_result(op, self.roots[key])
            self._register(self.cur[key], Alias(key), {key: self.cur[key]})
            self.added_slots.append((op, len(op.results) - 1))
        self.define(op)

    def loop(self, op: Operation) -> None:
        self.uses(op)
        keys = [k for k in self.loop_writes[op] if k in self.cur]
        slots = [_add_carried(op, self.cur[k], self.roots[k]) for k in keys]
        for k, slot in zip(keys, slots):
            for v in slot:
                self._register(v, Alias(k), {k: v})
        for j in range(len(keys)):
            self.added_slots.append((op, len(op.results) - len(keys) + j))
        if isinstance(op, ops.WhileOp):
            before = self.scoped(op.before, {**self.cur, **{k: s[0] for k, s in zip(keys, slots)}})
            for k in keys:
                op.before.terminator._add_operand(before[k])  # type: ignore[union-attr]
            after = self.scoped(op.after, {**self.cur, **{k: s[1] for k, s in zip(keys, slots)}})
            for k in keys:
                op.after.terminator._add_operand(after[k])  # type: ignore[union-attr]
        else:
            body = op.regions[0].block
            end = self.scoped(body, {**self.cur, **{k: s[0] for k, s in zip(keys, slots)}})
            for k in keys:
                body.terminator._add_operand(end[k])  # type: ignore[union-attr]
        for k, s in zip(keys, slots):
            self.cur[k] = s[-1]
        self.define(op)

    def terminator(self, op: Operation) -> None:
        if isinstance(op, ops.ReturnOp):
            self.write_back(op)
        for i, v in enumerate(list(op.operands)):
            new = self.returned_value(v, op) if (op, i) in self.returned else self.current(v, op)
            if new is not v:
                op.set_operand(i, new)

    # -- what the caller sees -------------------------------------------------------------------
    def write_back(self, ret: Operation) -> None:
        """One `copy_` into each written tensor the caller can see."""
        em = self.emitter(ret)
        for key in self.tracked:
            if self.roots[key].observable and self.cur.get(key) is not self.storage[key]:
                em.method("copy_", [self.storage[key], self.cur[key]], t=self.storage[key].type, writeback=True)

    def returned_value(self, v: Value, at: Operation) -> Value:
        """A returned value: an alias of a written input or attribute is a view of the caller's
        tensor itself (which the write-back updates), as eager returns the same object."""
        alias = self.exact_of(v)
        em = self.emitter(at)
        if alias is not None and alias.root in self.tracked:
            if self.roots[alias.root].observable:
                return self.from_storage(alias.root, alias.chain, em)
            return self.current(v, at)
        owner = v.owner
        if isinstance(owner, ops.TupleOp) and v not in self.pushed:
            items = [self.returned_value(e, at) for e in owner.operands]
            if all(a is b for a, b in zip(items, owner.operands)):
                return v
            new = em.add(ops.TupleOp(items, [TupleType(tuple(i.type for i in items))], result_names=[v.name])).result
            self.erased_inputs.append(v)
            return new
        if v not in self.pushed:
            for k in sorted(self.may_of(v), key=repr):
                if k in self.cur and self.roots[k].observable:
                    self._problem(k, f"{self.roots[k].label} may be returned{_at(at)} through a value that may "
                                     "be one of several tensors")
        return self.current(v, at)


def _written_chain(op: Operation, alias: Alias) -> tuple[Step, ...]:
    """The view chain of what `op` writes: its target's, and for `x[i] = v` the basic part of
    the indexing."""
    if isinstance(op, ops.IndexPutOp):
        step = _index_put_view(op)
        if step is not None:
            return alias.chain + (step,)
    return alias.chain


def _at(op: Operation) -> str:
    return f" at {op.loc}" if op.loc is not None else ""


def _describe(op: Operation) -> str:
    a = op.attributes
    return a.get("callee") or a.get("method") or a.get("attr") or op.name


# -- functional forms of writes -------------------------------------------------------------------
Written = tuple[tuple[Step, ...], Value]  # the chain of the written view, and its new value

# In-place methods that change a tensor's shape or metadata rather than its values.
_METADATA = frozenset({
    "resize_", "resize_as_", "set_", "unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_",
    "as_strided_", "requires_grad_", "detach_", "share_memory_", "retain_grad", "rename_", "fill_diagonal_",
})


def functional_value(op: Operation, alias: Alias, trial: _Trial, em: Emitter) -> Written | None:
    """What `op` (its operands current) writes, computed out of place: the chain of the written
    view from the root, and the view's new value; None when the write changes nothing."""
    if isinstance(op, ops.IndexPutOp):
        return _index_put(op, alias, trial, em)
    if op.attributes.get("random"):
        raise Unsupported(f"`{_describe(op)}` draws random numbers")
    index = written_operands(op)[0]
    target = op.operands[index]
    if isinstance(op, ops.InplaceOp):
        new = _inplace_operator(op, target, em)
    elif isinstance(op, ops.TensorMethodOp):
        new = _inplace_method(op, target, em)
    else:
        new = _inplace_call(op, target, index, em)
    return alias.chain, new


def _inplace_operator(op: ops.InplaceOp, target: Value, em: Emitter) -> Value:
    """`x += y` is `x + y` kept in x's dtype and shape."""
    rhs, sym = op.operands[1], op.attributes["op"]
    try:
        t = binary_result_type(sym, target.type, rhs.type)
    except SignatureError as e:
        raise Unsupported(str(e)) from None
    new = em.add(ops.BinaryOp([target, rhs], [t], {"op": sym})).result
    return _fit(new, target, [rhs], em)


def _inplace_method(op: ops.TensorMethodOp, target: Value, em: Emitter) -> Value:
    name, rest = op.attributes["method"], op.operands[1:]
    kwnames = op.attributes.get("kwnames", ())
    if name in _METADATA:
        raise Unsupported(f"`{name}` changes the tensor's shape or metadata, not its values")
    if name in ("copy_", "fill_"):
        return _broadcast_copy(rest[0], target, em)
    if name == "zero_":
        return em.call("torch.zeros_like", [target], t=target.type)
    if not name.endswith("_"):
        raise Unsupported(f"`{name}` writes into its tensor")
    new = em.method(name[:-1], [target, *rest], kwnames)
    return _fit(new, target, rest, em)


def _inplace_call(op: ops.TorchCallOp, target: Value, index: int, em: Emitter) -> Value:
    """`F.relu(x, inplace=True)` is `F.relu(x)`, `torch.relu_(x)` is `torch.relu(x)`."""
    callee, operands = op.attributes["callee"], list(op.operands)
    kwnames = list(op.attributes.get("kwnames", ()))
    if op.attributes.get("alias_of") not in (None, index):
        raise Unsupported(f"`{callee}` returns another tensor than the one it writes")
    flag = _inplace_operand(callee, operands, kwnames)
    if flag is not None:
        positional = len(operands) - len(kwnames)
        if flag >= positional or flag == positional - 1:  # a keyword, or the last positional
            if flag >= positional:
                kwnames.pop(flag - positional)
            operands.pop(flag)
        else:
            operands[flag] = em.const(False)
    elif callee.endswith("_"):
        callee = callee[:-1]
    else:
        raise Unsupported(f"`{callee}` writes into its argument")
    new = em.call(callee, operands, kwnames)
    numbers = _number_operands(op)
    return _fit(new, target, [v for i, v in enumerate(op.operands) if i != index and i not in numbers], em)


def _torch_function(callee: str) -> Any:
    fn: Any = torch
    for part in callee.split(".")[1:]:
        fn = getattr(fn, part, None)
    return fn


def _number_operands(op: Operation) -> set[int]:
    """The operands of a call of torch's Python wrappers (`F.hardtanh(x, m.min_val, m.max_val,
    inplace=True)`) that it takes as numbers: bound to a parameter annotated `float`, `int` or
    `bool` that its aten overload takes as a number too (a 0-d tensor passed there is read as
    one). A number neither promotes an in-place op's result nor broadcasts it, whatever its
    IR type says (a layer's settings are `Any`)."""
    aten = op.attributes.get("aten")
    kwnames = list(op.attributes.get("kwnames", ()))
    positional = len(op.operands) - len(kwnames)
    try:
        signature = inspect.signature(_torch_function(op.attributes["callee"]))
        bound = signature.bind(*range(positional), **{k: positional + i for i, k in enumerate(kwnames)})
    except (TypeError, ValueError):
        return set()
    name = (aten or "aten::").removeprefix("aten::").partition(".")[0]
    sig = next((s for s in (schemas(name) if name else ()) if s.aten == aten), None)
    kinds = {p.schema_name: p.kind for p in sig.params} if sig is not None else {}
    return {i for param, i in bound.arguments.items()
            if type(i) is int and signature.parameters[param].annotation in (float, int, bool)
            and kinds.get(param) in ("Scalar", "float", "int", "bool")}


def _inplace_operand(callee: str, operands: list[Value], kwnames: list[str]) -> int | None:
    """The operand passing `inplace=True`, if any."""
    positional = len(operands) - len(kwnames)
    if "inplace" in kwnames:
        i = positional + kwnames.index("inplace")
        return i if _constant(operands[i]) is True else None
    fn = _torch_function(callee)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    if "inplace" in params and params.index("inplace") < positional:
        i = params.index("inplace")
        return i if _constant(operands[i]) is True else None
    return None


def _fit(new: Value, target: Value, others: Sequence[Value], em: Emitter) -> Value:
    """`new` as an in-place op leaves its target: in the target's dtype (the op may have
    promoted), and of the target's shape (an in-place op raises where broadcasting would grow
    it; `expand_as` raises too)."""
    if _may_change_dtype(new.type, target.type, others):
        new = em.method("to", [new, _dtype_of(target, em)])
    if _may_grow(new.type, target.type, others):
        new = em.method("expand_as", [new, target])
    new.type, new.name = target.type, target.name
    return new


def _broadcast_copy(src: Value, target: Value, em: Emitter) -> Value:
    """What `target.copy_(src)` (or `target[...] = src`) leaves in target: src broadcast to its
    shape and cast to its dtype, as a new tensor (never src's memory)."""
    if not holds_tensors(src.type):
        new = em.call("torch.full_like", [target, src], t=target.type)
    else:
        new = src
        if not _same_shape(src.type, target.type):
            new = em.method("expand_as", [new, target])
        if _same_dtype(src.type, target.type):
            new = em.method("clone", [new])
        elif _known_dtypes(src.type, target.type):
            new = em.method("to", [new, _dtype_of(target, em)])  # a conversion: a new tensor
        else:
            new = em.method("to", [new, _dtype_of(target, em), em.const(True)], ["copy"])
    new.type, new.name = target.type, target.name
    return new


def _dtype_of(t: Value, em: Emitter) -> Value:
    dtype = t.type.dtype if isinstance(t.type, TensorType) else None
    if dtype is not None:
        return em.const(f"torch.{dtype}", DTYPE)
    return em.add(ops.GetAttrOp([t], [DTYPE], {"attr": "dtype"})).result


def _known_dtypes(a: Type, b: Type) -> bool:
    return isinstance(a, TensorType) and isinstance(b, TensorType) and a.dtype is not None and b.dtype is not None


def _same_dtype(a: Type, b: Type) -> bool:
    return _known_dtypes(a, b) and a.dtype == b.dtype  # type: ignore[union-attr]


def _same_shape(a: Type, b: Type) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.shape is not None and b.shape is not None
            and a.shape == b.shape and None not in a.shape)


def _may_change_dtype(new: Type, target: Type, others: Sequence[Value]) -> bool:
    """Whether the out-of-place result may have another dtype than the target, where the
    in-place op succeeds: when its dtype is known to differ (`x.eq(0)` is bool where `x.eq_(0)`
    keeps x's dtype), or a tensor operand with dimensions may promote it (numbers and 0-d tensors
    of a higher category make the in-place op raise)."""
    if _same_dtype(new, target):
        return False
    if isinstance(new, TensorType) and new.dtype is not None:
        return True
    return any(_may_promote(o.type, target) for o in others)


def _may_promote(t: Type, target: Type) -> bool:
    """Whether an operand of type `t` may promote the result past the dtype of `target`."""
    if not isinstance(t, (TensorType, OptionalType)) and t != ANY:
        return False  # a number
    if not isinstance(t, TensorType):
        return True
    if t.dtype == "bool" or _same_dtype(t, target):
        return False
    return not (t.rank == 0 and isinstance(target, TensorType) and (target.rank or 0) > 0)


def _may_grow(new: Type, target: Type, others: Sequence[Value]) -> bool:
    """Whether broadcasting the other operands may give a larger shape than the target's."""
    if _same_shape(new, target):
        return False
    return any(_may_broadcast_past(o.type, target) for o in others)


def _may_broadcast_past(t: Type, target: Type) -> bool:
    """Whether broadcasting an operand of type `t` with `target` may give a larger shape."""
    if not isinstance(t, TensorType):
        return holds_tensors(t)  # numbers never do
    if t.rank == 0:
        return False
    if not isinstance(target, TensorType) or target.shape is None or t.shape is None:
        return True
    if len(t.shape) > len(target.shape):
        return True
    return any(d != 1 and (d is None or d != td) for d, td in zip(reversed(t.shape), reversed(target.shape)))


# -- index assignment ------------------------------------------------------------------------------
def _index_put_view(op: ops.IndexPutOp) -> Step | None:
    """The basic-indexing view `x[items] = v` writes into (for x[mask] = v, what the mask
    indexes); None when that is x itself."""
    try:
        items, operands, _ = _index_put_parts(op)
    except Unsupported:
        return None
    if all(item == FULL for item in items):
        return None
    return Step.make(ops.IndexOp, {"items": items}, operands, _like(op.operands[0]), op.loc)


def _index_put_parts(op: ops.IndexPutOp) -> tuple[tuple, list[Value], list[Value]]:
    """`x[items] = v` as a basic view of x and the index tensors `index_put` takes on it: a
    tensor item becomes as many full slices as dims it indexes (which needs its rank only when
    items follow it). Index tensors must come first (only ints before or between them), as
    `index_put` takes them."""
    items, operands = op.attributes["items"], op.operands[1:-1]
    it = iter(operands)
    view_items: list[tuple] = []
    view_operands: list[Value] = []
    tensors: list[Value] = []
    for item in items:
        if item[0] == "value":
            v = next(it)
            if isinstance(v.type, TensorType):
                if any(i[0] not in ("value", "index") for i in view_items):
                    raise Unsupported("an index tensor after a slice, None or Ellipsis")
                view_items.append(("index", v))
                tensors.append(v)
                continue
            if v.type != INT:
                raise Unsupported(f"an index of type {v.type}")
            view_items.append(item)
            view_operands.append(v)
        elif item[0] == "slice":
            view_items.append(item)
            view_operands += [next(it) for present in item[1:] if present]
        elif item[0] == "ellipsis" and tensors:
            raise Unsupported("an Ellipsis with index tensors")
        else:
            view_items.append(item)
    while view_items and (view_items[-1] == FULL or view_items[-1][0] == "index"):
        view_items.pop()  # what follows the last basic item does not change the view
    if any(v.type not in (INT, NONE) for v in view_operands):
        raise Unsupported("a slice bound that is not an int")
    out: list[tuple] = []
    for item in view_items:
        out += [FULL] * _indexed_dims(item[1].type) if item[0] == "index" else [item]
    return tuple(out), view_operands, tensors


def _indexed_dims(t: TensorType) -> int:
    if t.dtype == "bool" and t.rank is not None:
        return t.rank
    if t.dtype is not None and t.dtype.startswith("int"):
        return 1
    raise Unsupported(f"an index tensor of type {t} (a bool mask of known rank or integer indices)")


def _index_put(op: ops.IndexPutOp, alias: Alias, trial: _Trial, em: Emitter) -> Written | None:
    items, operands, tensors = _index_put_parts(op)
    value = op.operands[-1]
    step = _index_put_view(op)
    chain = alias.chain + ((step,) if step is not None else ())
    if not tensors:
        if trial.exact_of(value) == Alias(alias.root, chain):
            return None  # `y[i] = t` after `t = y[i]; t += 1`: a copy onto itself
        view = trial.materialize(alias.root, chain, em)
        return chain, _broadcast_copy(value, view, em)
    view = trial.materialize(alias.root, chain, em)
    indices = em.add(ops.TupleOp(tensors, [TupleType(tuple(v.type for v in tensors))])).result
    if not holds_tensors(value.type):
        value = em.method("new_full", [view, em.const(()), value])
    elif not _same_dtype(value.type, view.type) and getattr(value.type, "rank", None) in (None, 0):
        value = em.method("to", [value, _dtype_of(view, em)])  # setitem converts a 0-d value
    new = em.method("index_put", [view, indices, value], t=view.type)
    new.name = view.name
    return chain, new


# -- IR surgery ------------------------------------------------------------------------------------
def _add_result(op: Operation, root: Root) -> OpResult:
    r = OpResult(root.type, op, len(op.results), _root_hint(root))
    op.results.append(r)
    return r


def _root_hint(root: Root) -> str | None:
    return root.name.rsplit(".", 1)[-1] if root.name.replace(".", "").replace("_", "").isalnum() else None


def _add_carried(op: Operation, init: Value, root: Root) -> tuple[Value, ...]:
    """A new loop-carried value starting at `init`: its block arguments and the loop's result
    (the terminators' operands are added after the walk)."""
    op._add_operand(init)
    hint = _root_hint(root)
    if isinstance(op, ops.WhileOp):
        args: tuple[Value, ...] = (op.before.add_arg(root.type, hint), op.after.add_arg(root.type, hint))
    else:
        args = (op.regions[0].block.add_arg(root.type, hint),)
    return args + (_add_result(op, root),)


def _slot_values(op: Operation, j: int) -> list[Value]:
    """What decides slot j's value: the if's yields, the loop's initial value and what its
    terminators pass on (a block argument passed on unchanged stands for itself)."""
    if isinstance(op, ops.IfOp):
        return [b.terminator.operands[j] for b in (op.then_block, op.else_block)]  # type: ignore[union-attr]
    init, args, nexts, _ = carried_slots(op)[j]
    return [init, *[n if n not in args else "arg" for n in nexts]]  # type: ignore[list-item]


def _dedupe_slots(added: list[tuple[Operation, int]]) -> None:
    """A slot this pass added that carries the same values as another of the same op (the
    carried `acc` of `acc += x` in a loop and the root it writes) gives way to that one; an if
    result it added that nothing reads goes."""
    for op, j in sorted(added, key=lambda s: -s[1]):
        if isinstance(op, ops.IfOp) and not op.results[j].uses:
            _drop_slot(op, j)
            continue
        mine = _slot_values(op, j)
        for i in range(j):
            if _slot_values(op, i) == mine:  # the same values (Values compare by identity)
                _merge_slot(op, j, i)
                break


def _merge_slot(op: Operation, j: int, i: int) -> None:
    op.results[j].replace_all_uses_with(op.results[i])
    if not isinstance(op, ops.IfOp):
        for arg_j, arg_i in zip(carried_slots(op)[j][1], carried_slots(op)[i][1]):
            arg_j.replace_all_uses_with(arg_i)
    _drop_slot(op, j)


def _drop_slot(op: Operation, j: int) -> None:
    """Remove result j of an if or loop, with its yields, initial value and block arguments."""
    if isinstance(op, ops.IfOp):
        places = [(b, None, 0) for b in (op.then_block, op.else_block)]
        first = None
    elif isinstance(op, ops.WhileOp):
        places, first = [(op.before, 0, 1), (op.after, 0, 0)], 0
    else:
        body = op.regions[0].block
        places = [(body, 1, 1 if isinstance(body.terminator, ops.ConditionOp) else 0)]
        first = 3 if isinstance(op, ops.ForRangeOp) else 1
    for block, arg0, term0 in places:
        term = block.terminator
        _set_operands(term, [v for k, v in enumerate(term.operands) if k != term0 + j])  # type: ignore[union-attr]
        if arg0 is not None:
            del block.args[arg0 + j]
            for k, a in enumerate(block.args):
                a.index = k
    if first is not None:
        _set_operands(op, [v for k, v in enumerate(op.operands) if k != first + j])
    del op.results[j]
    for k, r in enumerate(op.results):
        r.index = k


def _set_operands(op: Operation, values: list[Value]) -> None:
    op.drop_operands()
    for v in values:
        op._add_operand(v)


def _fit_merge_types(func: ops.FuncOp) -> None:
    """Results and block arguments of ifs and loops whose incoming values are now typed less
    precisely (a view re-derived from a root of unknown shape) take the common type."""
    for op in func.walk():
        if isinstance(op, ops.IfOp):
            for i, r in enumerate(op.results):
                for v in _slot_values(op, i):
                    r.type = _widen(r.type, v.type)
        elif isinstance(op, LOOPS):
            for init, args, nexts, r in carried_slots(op):
                t = r.type
                for v in [init, *nexts]:
                    t = _widen(t, v.type)
                for v in [*args, r]:
                    v.type = t


def _widen(t: Type, incoming: Type) -> Type:
    if is_subtype(incoming, t):
        return t
    return unify(t, incoming) or ANY


def _erase_dead(candidates: list[Value]) -> None:
    """Erase pure ops that the rewrite left without uses (the views an in-place op read, the
    tuples a returned value was rebuilt from)."""
    work = [v.owner for v in candidates if isinstance(v.owner, Operation)]
    while work:
        op = work.pop()
        if op.parent is None or not ops.is_pure(op) or any(r.uses for r in op.results):
            continue
        inputs = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.erase()
        work += inputs


# -- the pass --------------------------------------------------------------------------------------
@dataclass
class Functionalized:
    func: ops.FuncOp
    notes: list[str]  # "<loc>: <why>" for each write left as it is


def functionalize_function(func: ops.FuncOp) -> Functionalized:
    """A functional copy of `func` (see the module docstring), and why writes were left alone."""
    excluded: dict[tuple, str] = {}
    while True:
        trial = _Trial(clone_op(func, {}), excluded)  # type: ignore[arg-type]
        trial.run()
        if not trial.found:
            notes = [f"{op.loc}: " * (op.loc is not None) + op.attributes["unfunctionalized"]
                     for op in trial.func.walk() if "unfunctionalized" in op.attributes]
            return Functionalized(trial.func, notes)
        excluded.update(trial.found)


def functionalize(program: Program) -> None:
    for i, func in enumerate(program.funcs):
        if isinstance(func, ops.FuncOp):
            program.funcs[i] = functionalize_function(func).func

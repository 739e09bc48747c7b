"""Torch's operator schemas as the front end sees them through Python, and binding calls to them.

`schemas(name)` reads `aten::<name>` overloads from torch's registry and keeps the ones that
Python can reach the way torch's own Python bindings do (python_arg_parser.cpp and
tools/autograd/gen_python_functions.py are the reference):

- only operators registered with the dispatcher (the JIT registry also holds TorchScript-only
  overloads such as `aten::add.int(int a, int b)` that `torch.add` never accepts);
- no `out=` variants (rejected with their own message by the caller);
- not the few signatures torch hides from Python (`add.Scalar`, `mul.Scalar`...: `torch.add(x, 1)`
  binds `add.Tensor` with the number wrapped into a tensor, which only add/sub/mul/div and a few
  others allow);
- not ops tagged `generated`.

`bind` follows the Python argument parser: positional then keyword arguments, `input` for the
schema's `self` in function form, numpy-style `axis`/`keepdims` aliases, a single int list
parameter taking varargs (`x.view(B, T, C)`), `int[N]` taking a lone int, bool not accepted as int
(but as float and Scalar), None only for optional parameters. Each matching overload gets a cost
(exact kinds cost nothing, conversions a little, dynamic `Any` values more) and the cheapest wins.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    MEMORY_FORMAT,
    NONE,
    STR,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.torchapi.dtypes import COMPLEX, INTEGRAL_DTYPES

_KINDS = {
    "Tensor": "Tensor", "int": "int", "float": "float", "bool": "bool", "number": "Scalar",
    "complex": "complex", "str": "str", "ScalarType": "dtype", "Device": "device",
    "Layout": "layout", "MemoryFormat": "memory_format", "Generator": "generator",
    "List[int]": "int[]", "List[float]": "float[]", "List[bool]": "bool[]",
    "List[number]": "Scalar[]", "List[Tensor]": "Tensor[]", "List[Optional[Tensor]]": "Tensor?[]",
    "List[Optional[number]]": "Scalar?[]",
}
# How kinds are spelled in messages (as torch's own Python error messages spell them).
_SHOW = {
    "Scalar": "Number", "int[]": "tuple of ints", "float[]": "tuple of floats",
    "bool[]": "tuple of bools", "Scalar[]": "tuple of Numbers", "Tensor[]": "tuple of Tensors",
    "Tensor?[]": "tuple of Tensors", "Scalar?[]": "tuple of Numbers", "dtype": "torch.dtype",
    "device": "torch.device", "layout": "torch.layout", "memory_format": "torch.memory_format",
    "generator": "torch.Generator",
}

# python_arg_parser.cpp: should_allow_numbers_as_tensors.
NUMBERS_AS_TENSORS = frozenset({
    "add", "add_", "div", "div_", "divide", "divide_", "mul", "mul_", "multiply", "multiply_",
    "sub", "sub_", "subtract", "subtract_", "true_divide", "true_divide_", "to", "_to_copy",
    "copy_", "copy", "floor_divide", "floor_divide_", "_conj",
})
# gen_python_functions.py: SKIP_PYTHON_BINDINGS_SIGNATURES.
_HIDDEN = frozenset({
    "aten::add.Scalar", "aten::add_.Scalar", "aten::sub.Scalar", "aten::sub_.Scalar",
    "aten::mul.Scalar", "aten::mul_.Scalar", "aten::div.Scalar", "aten::div_.Scalar",
})
# python_arg_parser.cpp: numpy_compatibility_arg_names.
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "a": "input", "x1": "input", "x2": "other"}


@dataclass(frozen=True)
class Param:
    name: str  # as Python spells it ("input" for a function's self)
    schema_name: str
    kind: str
    optional: bool
    size: int | None  # N of int[N]
    kwarg_only: bool
    has_default: bool
    default: object
    write: bool
    alias: frozenset[str]
    alias_after: frozenset[str]


@dataclass(frozen=True)
class Return:
    kind: str
    optional: bool
    alias: frozenset[str]  # for lists: the elements' alias set
    name: str = ""  # named returns come back as torch.return_types namedtuples (r.values)


@dataclass(frozen=True)
class Sig:
    aten: str  # "aten::add.Tensor"
    params: tuple[Param, ...]
    returns: tuple[Return, ...]
    tags: frozenset[str]

    def render(self, prefix: str, method: bool) -> str:
        parts: list[str] = []
        star = False
        for p in self.params:
            if method and p.schema_name == "self":
                continue
            if p.kwarg_only and not star:
                parts.append("*")
                star = True
            kind = _SHOW.get(p.kind, p.kind) + ("?" if p.optional else "")
            text = f"{kind} {_python_name(p, method)}"
            if p.has_default:
                text += f"={_show_default(p.default)}"
            parts.append(text)
        return f"{prefix}({', '.join(parts)})"


def _show_default(value: object) -> str:
    if isinstance(value, torch.dtype):
        return str(value)
    return repr(value)


def _kind(t: object) -> tuple[str, bool] | None:
    text = str(t)
    optional = text.startswith("Optional[")
    if optional:
        text = text[len("Optional["):-1]
    kind = _KINDS.get(text)
    return None if kind is None else (kind, optional)


def _in_dispatcher(name: str, overload: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
    except RuntimeError:
        return False
    return True


_LIST_ALIAS = re.compile(r"Tensor\((\w)\)\[\]")


@functools.lru_cache(maxsize=None)
def schemas(name: str) -> tuple[Sig, ...]:
    """Python-reachable overloads of aten::<name>, in registration order."""
    out: list[Sig] = []
    for s in torch._C._jit_get_schemas_for_operator("aten::" + name):
        overload = s.overload_name
        aten = f"aten::{name}.{overload}" if overload else f"aten::{name}"
        if aten in _HIDDEN or not _in_dispatcher(s.name, overload):
            continue
        if any(a.is_out for a in s.arguments):
            continue
        params: list[Param] = []
        usable = True
        for a in s.arguments:
            kind = _kind(a.real_type)
            if kind is None:
                usable = False
                break
            info = a.alias_info
            params.append(Param(
                name=a.name,
                schema_name=a.name,
                kind=kind[0],
                optional=kind[1],
                size=a.N,
                kwarg_only=a.kwarg_only,
                has_default=a.has_default_value(),
                default=a.default_value if a.has_default_value() else None,
                write=bool(info and info.is_write),
                alias=frozenset(info.before_set) if info else frozenset(),
                alias_after=frozenset(info.after_set) if info else frozenset(),
            ))
        returns: list[Return] = []
        for r in s.returns:
            kind = _kind(r.real_type)
            if kind is None:
                kind = ("any", False)
            alias = frozenset(r.alias_info.before_set) if r.alias_info else frozenset()
            if kind[0] == "Tensor[]" and not alias:
                m = _LIST_ALIAS.search(str(s).split(" -> ", 1)[1])
                alias = frozenset({m.group(1)}) if m else frozenset()
            returns.append(Return(kind[0], kind[1], alias, r.name))
        if not usable:
            continue
        try:
            packet = getattr(torch.ops.aten, name)
            tags = frozenset(t.name for t in getattr(packet, overload or "default").tags)
        except (AttributeError, RuntimeError):
            tags = frozenset()
        if "generated" in tags and "view_copy" not in tags:
            continue
        out.append(Sig(aten, tuple(params), tuple(returns), tags))
    return tuple(out)


# -- matching one argument ----------------------------------------------------------------------
def _elems(t: Type) -> list[Type] | None:
    """Element types of a list/tuple argument; [elem] for a list of unknown length."""
    if isinstance(t, TupleType):
        return list(t.elems)
    if isinstance(t, ListType):
        return [t.elem]
    return None


def match(p: Param, t: Type, numbers_as_tensors: bool) -> int | None:
    """Cost of passing a value of type `t` for parameter `p`; None if torch would reject it."""
    if t == ANY:
        return 8
    if p.kind == "any":
        return 0
    if t == NONE:
        return 0 if p.optional else None
    if isinstance(t, OptionalType):
        return None if not p.optional or t.elem == NONE else _match_kind(p, t.elem, numbers_as_tensors)
    return _match_kind(p, t, numbers_as_tensors)


def _zero_dim_ok(t: TensorType, integral: bool = False) -> bool:
    if t.shape is not None and len(t.shape) != 0:
        return False
    return not integral or t.dtype is None or t.dtype in INTEGRAL_DTYPES


def _int_tensor(t: Type) -> bool:
    """A tensor that may be a zero-dim integer tensor (passes where Python wants an int index)."""
    return isinstance(t, TensorType) and _zero_dim_ok(t, integral=True)


def _match_kind(p: Param, t: Type, numbers_as_tensors: bool) -> int | None:
    k = p.kind
    if k == "Tensor":
        if isinstance(t, TensorType):
            return 0
        if numbers_as_tensors and t in (INT, FLOAT, BOOL, COMPLEX):
            # No dearer than a Scalar overload: torch's parser tries the Tensor overloads first,
            # so torch.div(x, 2, rounding_mode="floor") dispatches div.Tensor_mode.
            return 0
        return None
    if isinstance(t, TensorType):
        # A zero-dim tensor (without grad; checked at run time) passes as a number.
        if k in ("Scalar", "float", "complex") and _zero_dim_ok(t):
            return 12
        if k == "int" and _zero_dim_ok(t, integral=True):
            return 12
        if k == "int[]" and p.size and _zero_dim_ok(t, integral=True):
            return 12  # x.sum(torch.tensor(1)): a lone index where int[1] is expected
        return None
    if k == "int":
        return 0 if t == INT else None
    if k == "float":
        return 0 if t == FLOAT else 1 if t in (INT, BOOL) else None
    if k == "bool":
        return 0 if t == BOOL else None
    if k == "Scalar":
        return 0 if t in (INT, FLOAT, BOOL, COMPLEX) else None
    if k == "complex":
        return 0 if t == COMPLEX else 1 if t in (INT, FLOAT, BOOL) else None
    if k == "str":
        return 0 if t == STR else None
    if k == "dtype":
        return 0 if t == DTYPE else None
    if k == "device":
        return 0 if t in (DEVICE, STR) else 1 if t == INT else None
    if k == "memory_format":
        return 0 if t == MEMORY_FORMAT else None
    if k in ("layout", "generator"):
        return None  # only ANY (a dynamic value) or None reach these
    if k.endswith("[]"):
        if t == INT and k == "int[]" and p.size:
            return 1  # int[2] kernel_size=3
        if t in (FLOAT, INT) and k == "float[]" and p.size:
            return 1
        elems = _elems(t)
        if elems is None:
            return None
        elem_kind = {"int[]": "int", "float[]": "float", "bool[]": "bool", "Scalar[]": "Scalar",
                     "Tensor[]": "Tensor", "Tensor?[]": "Tensor", "Scalar?[]": "Scalar"}[k]
        elem_param = Param("", "", elem_kind, k.endswith("?[]"), None, False, False, None, False,
                           frozenset(), frozenset())
        cost = 0
        for e in elems:
            c = match(elem_param, e, False)
            if c is None:
                return None
            cost += min(c, 4)
        return cost
    return None


# -- binding a call -----------------------------------------------------------------------------
class Mismatch(str):
    """Why a call does not bind to an overload; `score` says how far binding got (the message of
    the overload that got furthest is the most useful one to show)."""

    score: int

    def __new__(cls, text: str, score: int) -> "Mismatch":
        obj = super().__new__(cls, text)
        obj.score = score
        return obj


@dataclass
class Bound:
    sig: Sig
    cost: int
    # schema parameter index -> operand index, or a tuple of operand indices (int varargs)
    slots: dict[int, int | tuple[int, ...]]
    int_hints: dict[int | str, int]


def bind(
    sig: Sig,
    method: bool,
    args: list[Type],
    kwargs: dict[str, Type],
    numbers_as_tensors: bool,
    self_type: Type | None = None,
    numpy_names: bool = True,
) -> Bound | Mismatch:
    """Bind the call to `sig`; a Bound, or the reason it does not bind (for messages).

    Operand numbering: methods: 0 self, 1.. positional, then kwargs; functions: 0.. positional,
    then kwargs. `int_hints` (keys as in const_values) suggests placeholder values for unknown
    ints (0 for dims, 1 otherwise). `numpy_names`: accept axis=/keepdims= (torch's C++ parser
    does; methods written in Python, like Tensor.split, do not).
    """
    params = list(sig.params)
    slots: dict[int, int | tuple[int, ...]] = {}
    cost = 0
    offset = 1 if method else 0
    visible = list(range(len(params)))
    if method:
        self_idx = next((i for i, p in enumerate(params) if p.schema_name == "self"), None)
        if self_idx is None or params[self_idx].kind != "Tensor":
            return Mismatch("not a method", 0)
        assert self_type is not None
        c = match(params[self_idx], self_type, False)
        if c is None:
            return Mismatch("self is not a tensor", 0)
        slots[self_idx] = 0
        visible.remove(self_idx)
    positional = [i for i in visible if not params[i].kwarg_only]
    pos_args = list(range(len(args)))
    # x.view(B, T, C): one positional int list takes varargs when the first argument is an int.
    # Not an int[N] list: a lone int already fits it, so x.std(1, 1) is an error, not dim=(1, 1).
    if (
        len(positional) == 1
        and params[positional[0]].kind == "int[]"
        and not params[positional[0]].size
        and args
        and (args[0] in (INT, ANY) or _int_tensor(args[0]))
        and (len(args) > 1 or args[0] != ANY)
    ):
        pi = positional[0]
        for n, a in enumerate(args):
            # torch checks the elements after the first more leniently: x.permute(0, True) and
            # x.view(2, zero_dim_int_tensor) bind (x.view(True, 2) and x.view([2, True]) do not).
            if a == INT:
                continue
            if a == ANY:
                cost += 8
            elif n > 0 and a == BOOL:
                cost += 1
            elif _int_tensor(a):
                cost += 12
            else:
                return Mismatch(f"argument of type {a} in a list of ints", 3)
        slots[pi] = tuple(offset + i for i in pos_args)
        pos_args = []
        positional = []
    if len(pos_args) > len(positional):
        return Mismatch(f"takes {len(positional)} positional arguments but {len(pos_args)} were given", 1)
    for i, pi in zip(pos_args, positional):
        slots[pi] = offset + i
    by_name: dict[str, int] = {}
    for i in visible:
        by_name[_python_name(params[i], method)] = i
    for n, (kw, t) in enumerate(kwargs.items()):
        key = kw if kw in by_name or not numpy_names else _NUMPY_NAMES.get(kw, kw)
        pi_opt = by_name.get(key)
        if pi_opt is None:
            return Mismatch(f"unexpected keyword argument '{kw}'", 1)
        if pi_opt in slots:
            return Mismatch(f"got multiple values for argument '{kw}'", 1)
        slots[pi_opt] = offset + len(args) + n
    hints: dict[int | str, int] = {}
    for pi, p in enumerate(params):
        if pi not in slots:
            if not p.has_default:  # `Tensor? weight` without a default is required in Python too
                return Mismatch(f"missing required argument '{_python_name(p, method)}'", 2)
            continue
        where = slots[pi]
        if isinstance(where, tuple):
            continue
        t = _operand_type(where, method, self_type, args, kwargs)
        c = match(p, t, numbers_as_tensors)
        if c is None:
            return Mismatch(f"argument '{_python_name(p, method)}' must be {_SHOW.get(p.kind, p.kind)}, not {t}", 3)
        cost += c
        if t == INT:
            key = _const_key(where, method, args, kwargs)
            hints[key] = 0 if ("dim" in p.name or p.name in ("start", "index")) else 1
    return Bound(sig, cost, slots, hints)


def _python_name(p: Param, method: bool) -> str:
    return "input" if p.schema_name == "self" and not method else p.schema_name


def _operand_type(i: int, method: bool, self_type: Type | None, args: list[Type], kwargs: dict[str, Type]) -> Type:
    if method:
        if i == 0:
            assert self_type is not None
            return self_type
        i -= 1
    if i < len(args):
        return args[i]
    return list(kwargs.values())[i - len(args)]


def _const_key(i: int, method: bool, args: list[Type], kwargs: dict[str, Type]) -> int | str:
    """The const_values key of operand i (positional index not counting self, or kwarg name)."""
    j = i - 1 if method else i
    if j < len(args):
        return j
    return list(kwargs)[j - len(args)]


def operand_key(i: int, method: bool, args: list[Type], kwargs: dict[str, Type]) -> int | str | None:
    if method and i == 0:
        return None
    return _const_key(i, method, args, kwargs)

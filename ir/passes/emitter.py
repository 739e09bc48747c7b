"""Building ops in place of an op, for the passes that rewrite a call into others (decompose and
its rules; freeze, pack, pool, concat, layout, scales, plan): what is known of a value (`Facts`:
shape propagation's rules run again on the IR), the op's arguments bound to parameter names
(`bind`, `Call`), the `Emitter` that builds typed ops in front of it, the facts a rule reads off
a value (`_shape`, `_rank`, `_dims`, ...), and `Unsupported`, raised where a fact a rewrite
needs is not known: the op then stays as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ir.core import ops
from ir.core.builder import literal_type
from ir.core.graph import Block, Operation, Value
from ir.core.types import (
    ANY,
    DTYPE,
    INT,
    NONE,
    Dim,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.kernel.primitives import op_name
from ir.shapes.rules import _plain, bind_call, refine_type
from ir.shapes.rules_python import OP_RULES
from ir.shapes.values import AV, UNKNOWN, norm_dim
from ir.torchapi.operators import binary_result_type, unary_result_type
from ir.torchapi.signatures import resolve_function, resolve_method

FLOATING = ("float16", "bfloat16", "float32", "float64")
COMPUTE_DTYPE = {"float16": "float32", "bfloat16": "float32", "float32": "float32", "float64": "float64"}


class Unsupported(Exception):
    """A fact the rule needs is not known (or the call is one eager rejects): the op stays."""


# -- facts about values ---------------------------------------------------------------------------
# Ops whose abstract value is recomputed here with shape propagation's rule (Python values: ints
# and their tuples, so `x.size(-1)` is the symbol C). Tensors are described by their types.
_SCALAR_RULES = frozenset({"py.constant", "py.tuple", "py.list", "py.unary", "py.binary", "py.compare",
                           "py.getitem", "py.getattr", "py.call", "torch.method"})


class Facts:
    """What shape propagation knows about a value, recomputed from the IR: tensors by their
    types, Python values (sizes, dims, flags) by re-running the analysis' rule on the op that
    made them. Passed to OP_RULES in place of the interpreter and its frame."""

    appends: dict = {}
    escaped: frozenset = frozenset()

    def __init__(self) -> None:
        self.cache: dict[Value, AV] = {}

    def of(self, value: Value) -> AV:
        av = self.cache.get(value)
        if av is None:
            av = self.cache[value] = self._compute(value)
        return av

    def _compute(self, value: Value) -> AV:
        owner = value.owner
        if isinstance(value.type, (TensorType, OptionalType)) or not isinstance(owner, Operation) \
                or owner.name not in _SCALAR_RULES or owner.regions:
            return AV(value.type)
        if owner.name == "torch.method" and not _is_sizes(value.type):
            return AV(value.type)
        if isinstance(value.type, ListType) and any(isinstance(u.op, (ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp))
                                                    for u in value.uses):
            return AV(value.type)  # a list that grows: its elements are not known here
        try:
            return OP_RULES[owner.name](self, None, owner)[getattr(value, "index", 0)]
        except (TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError, KeyError):
            return AV(value.type)

    # The interpreter's interface, as the rules use it.
    def read(self, frame: object, value: Value) -> AV:
        return self.of(value)

    def operand(self, frame: object, value: Value) -> AV:
        return self.of(value)

    def list_elem(self, frame: object, value: Value, av: AV) -> AV:
        return AV(av.type.elem if isinstance(av.type, ListType) else ANY)

    def attr(self, frame: object, mod: AV, name: str, declared: Type = ANY) -> AV:
        return AV(declared)


def _is_sizes(t: Type) -> bool:
    """An int, or a tuple of ints (x.size(d), x.size())."""
    return t == INT or (isinstance(t, TupleType) and all(e == INT for e in t.elems))


# -- a call, bound to parameter names -------------------------------------------------------------
@dataclass
class Call:
    """The op under decomposition with its arguments by parameter name ("self" for the input
    tensor). `operands` holds the IR values bound to each name; defaults have none."""

    op: Operation
    name: str
    args: dict[str, AV]
    operands: dict[str, Value]

    def const(self, name: str) -> Any:
        """The argument's Python value (ints, floats, bools, str, None, tuples of them, dtype
        names); UNKNOWN when it is not a compile-time constant."""
        av = self.args.get(name)
        return UNKNOWN if av is None else _constant(av)

    def tensor(self, name: str = "self") -> Value:
        value = self.operands.get(name)
        if value is None or not isinstance(value.type, TensorType):
            raise Unsupported(f"{name} is not a tensor")
        return value

    def optional_tensor(self, name: str) -> Value | None:
        """The tensor passed as `name`, or None when the argument is (certainly) None."""
        if name not in self.args or self.const(name) is None:
            return None
        return self.tensor(name)

    def arg(self, name: str) -> Value | Any:
        """What to pass on: the operand itself when it is not a constant, else its value."""
        value = self.const(name)
        if value is not UNKNOWN:
            return value
        operand = self.operands.get(name)
        if operand is None or operand.type == ANY:
            raise Unsupported(f"{name} is not known")
        return operand

    def flag(self, name: str) -> bool:
        value = self.const(name)
        if type(value) is not bool:
            raise Unsupported(f"{name} is not a constant bool")
        return value

    def number(self, name: str) -> float | int:
        value = self.const(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unsupported(f"{name} is not a constant number")
        return value


def _constant(av: AV) -> Any:
    if av.items is not None:
        values = tuple(_constant(i) for i in av.items)
        return UNKNOWN if any(v is UNKNOWN for v in values) else values
    if not av.known:
        return UNKNOWN
    v = av.value
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return UNKNOWN  # a symbolic size, a module


def bind(op: Operation, facts: Facts) -> Call:
    if isinstance(op, ops.GetAttrOp):
        x = op.operands[0]
        return Call(op, op.attributes["attr"], {"self": facts.of(x)}, {"self": x})
    kwnames = list(op.attributes.get("kwnames", ()))
    n_pos = len(op.operands) - len(kwnames)
    # A fresh AV per operand: bind_call keeps the objects it is given, so each bound argument
    # leads back to its operand by identity.
    avs = [_copy(facts.of(v)) for v in op.operands]
    by_id = {id(av): v for av, v in zip(avs, op.operands)}
    kind, callee = ("method", op.attributes["method"]) if isinstance(op, ops.TensorMethodOp) \
        else ("function", op.attributes["callee"])
    args = bind_call(kind, callee, op.attributes.get("aten"), avs[:n_pos], dict(zip(kwnames, avs[n_pos:])))
    if args is None:
        raise Unsupported("arguments do not bind")
    operands = {name: by_id[id(av)] for name, av in args.items() if id(av) in by_id}
    return Call(op, op_name(op), args, operands)


def _copy(av: AV) -> AV:
    return AV(av.type, av.value, av.items, av.origin)


# -- building primitives --------------------------------------------------------------------------
Operand = Any  # a Value, or a Python constant (int, float, bool, None, str, tuple, Dtype)


@dataclass(frozen=True)
class Dtype:
    """A dtype argument, by name ("float32")."""

    name: str


class Emitter:
    """Builds the replacement of one op in a scratch block, typed as lowering and shape
    propagation type it; `commit` moves it in front of the op, `discard` drops it."""

    def __init__(self, anchor: Operation, facts: Facts) -> None:
        self.anchor = anchor
        self.block = Block()
        self.facts = facts
        self.constants: dict[tuple[type, str], Value] = {}  # one py.constant per value
        self.sizes: dict[tuple[Value, int], Value] = {}  # one x.size(d) per size

    # -- values ---------------------------------------------------------------------------
    def value(self, x: Operand) -> Value:
        if isinstance(x, Value):
            return x
        key = (type(x), repr(x))  # 1, 1.0 and True are different constants
        if key not in self.constants:
            if isinstance(x, Dtype):
                op = ops.ConstantOp([], [DTYPE], {"value": f"torch.{x.name}"})
            else:
                op = ops.ConstantOp([], [literal_type(x)], {"value": x})
            self.constants[key] = self._add(op)
        return self.constants[key]

    def size(self, x: Value, d: int) -> Operand:
        """x.size(d): the int when the type fixes it, else read at run time."""
        dim = _shape(x)[d]
        if type(dim) is int:
            return dim
        if (x, d) not in self.sizes:
            self.sizes[x, d] = self.method("size", x, d)
        return self.sizes[x, d]

    def count(self, x: Value, dims: Sequence[int]) -> Operand:
        """How many elements dims `dims` of x hold (an int, or an int value built at run time)."""
        known = 1
        parts: list[Value] = []
        for d in dims:
            n = self.size(x, d)
            if isinstance(n, int):
                known *= n
            else:
                parts.append(n)
        total: Operand = known
        for part in parts:
            total = part if total == 1 else self.binary("*", total, part)
        return total

    # -- ops ------------------------------------------------------------------------------
    def call(self, callee: str, *args: Operand, **kwargs: Operand) -> Value:
        return self._torch(ops.TorchCallOp, callee, [self.value(a) for a in args], kwargs)

    def method(self, name: str, x: Value, *args: Operand, **kwargs: Operand) -> Value:
        return self._torch(ops.TensorMethodOp, name, [x] + [self.value(a) for a in args], kwargs)

    def binary(self, op: str, a: Operand, b: Operand) -> Value:
        va, vb = self.value(a), self.value(b)
        declared = binary_result_type(op, _plain(va.type), _plain(vb.type))
        cls = ops.CompareOp if op in ("==", "!=", "<", "<=", ">", ">=") else ops.BinaryOp
        return self._add(cls([va, vb], [declared], {"op": op}))

    def unary(self, op: str, a: Value) -> Value:
        return self._add(ops.UnaryOp([a], [unary_result_type(op, _plain(a.type))], {"op": op}))

    def write(self, target: Value, value: Value) -> None:
        """`target.copy_(value)`: a write the decomposed op makes (decompose.WRITING_RULES), in its place."""
        op = ops.TensorMethodOp([target, value], [target.type], {
            "method": "copy_", "mutates": (0,), "alias_of": 0, "aten": "aten::copy_"})
        op.loc = self.anchor.loc
        self.block.append(op)

    def builtin(self, callee: str, result: Type, *args: Operand) -> Value:
        return self._add(ops.BuiltinCallOp([self.value(a) for a in args], [result], {"callee": callee}))

    def tuple(self, *values: Value) -> Value:
        return self._add(ops.TupleOp(list(values), [TupleType(tuple(v.type for v in values))]))

    def shape(self, sizes: Sequence[Operand]) -> Value:
        """A tuple of sizes, ints or int values: one constant when every size is an int."""
        if any(isinstance(n, Value) for n in sizes):
            return self.tuple(*[self.value(n) for n in sizes])
        return self.value(tuple(sizes))

    def cast(self, x: Value, dtype: str) -> Value:
        return x if _dtype(x) == dtype else self.method("to", x, Dtype(dtype))

    def _torch(self, cls: type[Operation], name: str, operands: list[Value], kwargs: dict[str, Operand]) -> Value:
        kw = [(k, self.value(v)) for k, v in kwargs.items()]
        method = cls is ops.TensorMethodOp
        positional = operands[1:] if method else operands
        consts: dict[int | str, object] = {i: v.owner.value for i, v in enumerate(positional)
                                           if isinstance(v.owner, ops.ConstantOp)}
        consts.update({k: v.owner.value for k, v in kw if isinstance(v.owner, ops.ConstantOp)})
        types = [_plain(v.type) for v in positional]
        kw_types = {k: _plain(v.type) for k, v in kw}
        if method:
            info = resolve_method(name, _plain(operands[0].type), types, kw_types, consts)
        else:
            info = resolve_function(name, types, kw_types, consts)
        attrs: dict[str, Any] = {"method" if method else "callee": name}
        if kw:
            attrs["kwnames"] = tuple(k for k, _ in kw)
        if info.mutates or info.random or info.result == NONE:
            raise Unsupported(f"{name} is not a pure function")
        if info.alias_of is not None:
            attrs["alias_of"] = info.alias_of
        if info.aten:
            attrs["aten"] = info.aten
        return self._add(cls(operands + [v for _, v in kw], [info.result], attrs))

    def _add(self, op: Operation) -> Value:
        op.loc = self.anchor.loc
        self.block.append(op)
        rule = OP_RULES.get(op.name)
        if rule is not None:
            av = rule(self.facts, None, op)[0]
            op.result.type = refine_type(op.result.type, av.type)
            self.facts.cache[op.result] = AV(op.result.type, av.value, av.items)
        return op.result

    # -- placing the result ---------------------------------------------------------------
    def commit(self) -> None:
        block = self.anchor.parent
        assert block is not None
        for op in list(self.block.ops):
            self.block.ops.remove(op)
            op.parent = None
            block.insert_before(self.anchor, op)

    def discard(self) -> None:
        for op in reversed(list(self.block.ops)):
            for r in op.results:
                r.uses.clear()
                self.facts.cache.pop(r, None)
            op.erase()


# -- facts a rule needs ---------------------------------------------------------------------------
def _shape(x: Value) -> tuple[Dim, ...]:
    t = x.type
    if not isinstance(t, TensorType) or t.shape is None:
        raise Unsupported("rank unknown")
    return t.shape


def _rank(x: Value) -> int:
    return len(_shape(x))


def _dtype(x: Value) -> str | None:
    return x.type.dtype if isinstance(x.type, TensorType) else None


def _float_dtype(x: Value) -> str:
    d = _dtype(x)
    if d not in FLOATING:
        raise Unsupported(f"dtype {d} is not a real floating dtype")
    return d  # type: ignore[return-value]


def _dim(d: Any, rank: int) -> int:
    n = norm_dim(d, rank) if type(d) is int else None
    if n is None:
        raise Unsupported(f"dim {d!r} is not a constant in range")
    return n


def _dims(value: Any, rank: int, all_if_empty: bool = True) -> tuple[int, ...]:
    """A dim argument (an int, a tuple of ints, None or () for every dim) normalized."""
    if value is None or value == ():
        if not all_if_empty:
            raise Unsupported("no dims")
        return tuple(range(rank))
    if type(value) is int:
        value = (value,)
    if not isinstance(value, tuple):
        raise Unsupported("dims not constant")
    dims = tuple(_dim(d, rank) for d in value)
    if len(set(dims)) != len(dims):
        raise Unsupported("a dim repeats")
    return dims


def _dim_arg(dims: tuple[int, ...]) -> Operand:
    return dims[0] if len(dims) == 1 else dims


def _nonempty(x: Value, dims: Sequence[int]) -> None:
    """amax/amin raise on an empty dim where the composite does not: the sizes must be >= 1."""
    shape = _shape(x)
    if not shape:
        return  # a 0-d tensor holds one element
    for d in dims:
        n = shape[d]
        if n is None or (type(n) is int and n < 1):
            raise Unsupported(f"dim {d} may be empty")

"""What functionalization puts in place of a write: the written view's new value computed out of
place (`functional_value`: `add_` -> `add`, `x[m] = v` -> `index_put`, `copy_` and basic-index
assignment -> a broadcast, cast copy), in the target's dtype and shape only where the types do
not settle them (`_fit`), and how that value is carried back through each view to its base
(`invert`: `select_scatter`, `slice_scatter`, `diagonal_scatter`, `reshape_as`, the inverse
permutation). `Unsupported` says why a write has no functional form here.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, Sequence

import torch

from ir.core import ops
from ir.core.builder import literal_type
from ir.core.graph import Loc, Operation, Value
from ir.core.types import ANY, DTYPE, INT, NONE, OptionalType, TensorType, TupleType, Type
from ir.passes.aliasing import Alias, holds_tensors, written_operands
from ir.passes.views import FULL, Step, argument, constant_of, permutation
from ir.torchapi.callinfo import SignatureError, effect_attributes
from ir.torchapi.schemas import schemas
from ir.torchapi.signatures import binary_result_type, resolve_function, resolve_method


class Unsupported(Exception):
    """A write this pass does not turn into functional ops; the message says why."""



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
        if not attrs.get("writeback"):
            attrs.pop("writeback", None)  # (held only where true)
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
        if constant_of(a) is not ...:
            out[i] = constant_of(a)
    for k, v in zip(kwnames, kwargs):
        if constant_of(v) is not ...:
            out[k] = constant_of(v)
    return out


# -- view inverses ----------------------------------------------------------------------------------
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
        v = argument(step.rest, kwnames, i, name)
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
    "involution": lambda step, em, base, src: em.add(step.view(src)).result,
    "permute": _invert_permute,
    "movedim": _invert_movedim,
    "select": _invert_select,
    "narrow": _invert_narrow,
    "diagonal": _invert_diagonal,
    "index": _invert_index,
}

def invert(step: Step, em: Emitter, base: Value, src: Value) -> Value:
    """The base's value after its view (`step` applied to `base`) became `src`."""
    new = _INVERT[step.kind](step, em, base, src)
    new.type = base.type  # the base keeps its dtype and shape
    if new.name is None:
        new.name = base.name
    return new


def describe(op: Operation) -> str:
    a = op.attributes
    return a.get("callee") or a.get("method") or a.get("attr") or op.name


# -- functional forms of writes -------------------------------------------------------------------
Written = tuple[tuple[Step, ...], Value]  # the chain of the written view, and its new value


class Contents(Protocol):
    """What a write reads of the function's values as the rewrite has them (functionalize's
    `_Trial`)."""

    def exact_of(self, v: Value) -> Alias | None: ...

    def materialize(self, key: tuple, chain: tuple[Step, ...], em: Emitter) -> Value: ...


# In-place methods that change a tensor's shape or metadata rather than its values.
_METADATA = frozenset({
    "resize_", "resize_as_", "set_", "unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_",
    "as_strided_", "requires_grad_", "detach_", "share_memory_", "retain_grad", "rename_", "fill_diagonal_",
})


def functional_value(op: Operation, alias: Alias, trial: Contents, em: Emitter) -> Written | None:
    """What `op` (its operands current) writes, computed out of place: the chain of the written
    view from the root, and the view's new value; None when the write changes nothing."""
    if isinstance(op, ops.IndexPutOp):
        return _index_put(op, alias, trial, em)
    if op.attributes.get("random"):
        raise Unsupported(f"`{describe(op)}` draws random numbers")
    index = written_operands(op)[0]
    target = op.operands[index]
    if isinstance(op, ops.InplaceOp):
        new = _inplace_operator(op, target, em)
    elif isinstance(op, ops.TensorMethodOp):
        new = _inplace_method(op, target, em)
    else:
        new = _inplace_call(op, target, index, em)
    return alias.chain, new


def out_of_place(op: Operation, em: Emitter) -> Value:
    """The value an in-place op (`F.relu(x, inplace=True)`, `x.mul_(2)`, `x += y`) writes into
    its one target, computed out of place (the op itself is left as it is)."""
    index = written_operands(op)[0]
    target = op.operands[index]
    if isinstance(op, ops.InplaceOp):
        return _inplace_operator(op, target, em)
    if isinstance(op, ops.TensorMethodOp):
        return _inplace_method(op, target, em)
    return _inplace_call(op, target, index, em)  # type: ignore[arg-type]


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
    return _fit(new, target, rest, em, grows=name[:-1] not in KEEPS_SHAPE)


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
        return i if constant_of(operands[i]) is True else None
    fn = _torch_function(callee)
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    if "inplace" in params and params.index("inplace") < positional:
        i = params.index("inplace")
        return i if constant_of(operands[i]) is True else None
    return None


# Methods whose result has the shape of the tensor they are called on, whatever their other
# operands: an index or scatter writes into a copy of it (`out.index_add(0, rows, v)`).
KEEPS_SHAPE = frozenset({"index_add", "index_copy", "index_fill", "index_reduce", "scatter", "scatter_add",
                         "scatter_reduce", "put"})  # (not masked_scatter: its mask broadcasts with the tensor)


def _fit(new: Value, target: Value, others: Sequence[Value], em: Emitter, grows: bool = True) -> Value:
    """`new` as an in-place op leaves its target: in the target's dtype (the op may have
    promoted), and of the target's shape (an in-place op raises where broadcasting would grow
    it; `expand_as` raises too). `grows`: whether the op's result may be larger than the target."""
    if _may_change_dtype(new.type, target.type, others):
        new = em.method("to", [new, _dtype_of(target, em)])
    if grows and _may_grow(new.type, target.type, others):
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
def index_put_view(op: ops.IndexPutOp) -> Step | None:
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


def _index_put(op: ops.IndexPutOp, alias: Alias, trial: Contents, em: Emitter) -> Written | None:
    items, operands, tensors = _index_put_parts(op)
    value = op.operands[-1]
    step = index_put_view(op)
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



"""Row-wise functions: kernels for tensors whose rank nothing declares (shared/DESIGN.md §4b).

A function of plain `Tensor` parameters has no rank to compile kernels for. Many such functions
do not need one: an element-wise chain, a softmax over the last dimension, a layer norm over it.
For them a tensor of any rank >= 1 is the same computation on its (rows, last) view, rows being
the product of the leading sizes. `row_plan` decides, from the generic (rank-free) IR of a
function, whether it is row-wise, and which parameters are full tensors (viewed as
(rows, last) of the shape they broadcast to: runtime.guards.over_rows) and which are vectors of
the last size (a layer norm's weight). A parameter the function does not use is neither.
A function is row-wise when every value it computes is one of:

- rows: the shape the row parameters broadcast to, or that shape with its last size 1 (a reduction over
  the last dimension with keepdim);
- vec: (last,), broadcast against rows along their last dimension;
- a Python scalar: a literal, a number parameter, `x.shape[-1]` of a row tensor;

and every op that makes a tensor is element-wise (torch's `pointwise` tag on the aten op), a
softmax or reduction over dimension -1 written so in the source, or a norm over the last
dimension. Anything else (a dimension read or reduced by a position from the front, a view, a
matmul, control flow, a mutation, a call) makes it not row-wise, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import torch

from ir.core.graph import Operation, Value
from ir.core.ops import (
    BinaryOp,
    CompareOp,
    ConstantOp,
    FuncOp,
    GetAttrOp,
    GetItemOp,
    ListOp,
    ReturnOp,
    TensorMethodOp,
    TorchCallOp,
    TupleOp,
    UnaryOp,
)
from ir.core.types import NUMBER_TYPES, TensorType

ROWS = "rows"  # the row parameters' shape
ROWS1 = "rows1"  # that shape with the last size 1
VEC = "vec"  # (last,)
SCALAR = "scalar"  # a Python number, bool, str or None
LAST = "last"  # the last size of a row tensor: a scalar the norms take as their shape
Layout = Union[str, tuple]  # one of the above, or ("tuple", layouts...)

# Ops over the last dimension, with the names of their parameters in order (`input` first).
_REDUCTIONS = {name: ("input", "dim", "keepdim", "dtype") for name in ("sum", "mean", "amax", "amin", "logsumexp")}
_SOFTMAXES = {name: ("input", "dim", "dtype") for name in ("softmax", "log_softmax", "_softmax")}
_NORMS = {"layer_norm": ("input", "normalized_shape", "weight", "bias", "eps"),
          "rms_norm": ("input", "normalized_shape", "weight", "eps")}
_BINARY_TENSOR_OPS = {"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"}


@dataclass(frozen=True)
class RowPlan:
    rows: tuple[str, ...]  # parameters viewed as (rows, last) of the shape they broadcast to
    vectors: tuple[str, ...]  # parameters of shape (last,)


class NotRowWise(Exception):
    """Why a function needs its tensors' rank: `op` is the first op that does."""

    def __init__(self, reason: str, op: Operation | None = None) -> None:
        where = f"line {op.loc.line}: " if op is not None and op.loc is not None else ""
        super().__init__(where + reason)


def row_plan(func: FuncOp) -> RowPlan:
    """The row plan of a function whose tensor parameters have no rank; raises NotRowWise."""
    layouts: dict[Value, Layout] = {}
    vectors = _vector_parameters(func)
    rows, vecs = [], []
    for arg in func.args:
        if isinstance(arg.type, TensorType):
            if arg.type.shape is not None:
                raise NotRowWise(f"{arg.name} has a rank")
            if not arg.uses:
                continue  # (any tensor will do)
            layouts[arg] = VEC if arg in vectors else ROWS
            (vecs if arg in vectors else rows).append(arg.name)
        elif arg.type in NUMBER_TYPES:
            layouts[arg] = SCALAR
        else:
            raise NotRowWise(f"{arg.name} is neither a tensor nor a number")
    if not rows:
        raise NotRowWise("no parameter is a full tensor")
    for op in func.body.ops:
        if isinstance(op, ReturnOp):
            _check_return(op, layouts, set(func.args))
            continue
        if len(op.results) != 1 or op.regions:
            raise NotRowWise(f"{op.name} is not row-wise", op)
        layouts[op.result] = _layout(op, [layouts[v] for v in op.operands])
    return RowPlan(tuple(rows), tuple(vecs))


def _vector_parameters(func: FuncOp) -> set[Value]:
    """Parameters a norm takes as its weight or bias: they have the last size."""
    found = set()
    for op in func.body.ops:
        table = _NORMS.get(_aten_name(op) or "")
        if table is not None:
            bound = _bind(op, table)
            found |= {bound[name] for name in ("weight", "bias") if name in bound and bound[name] in func.args}
    return found


def _check_return(op: ReturnOp, layouts: dict[Value, Layout], args: set[Value]) -> None:
    for value in op.operands:
        layout = layouts[value]
        items = [(value, layout)]
        if isinstance(layout, tuple):
            producer = value.owner
            items = list(zip(producer.operands, layout[1:]))
        for item, item_layout in items:
            if item in args:
                raise NotRowWise(f"it returns its parameter {item.name}", op)
            if item_layout not in (ROWS, ROWS1):
                raise NotRowWise("it returns a value without the rows' shape", op)


def _layout(op: Operation, operands: list[Layout]) -> Layout:
    if isinstance(op, ConstantOp):
        return SCALAR
    if isinstance(op, (TupleOp, ListOp)):
        return ("tuple", *operands)
    if isinstance(op, (BinaryOp, UnaryOp, CompareOp)):
        if all(layout in (SCALAR, LAST) for layout in operands):
            return SCALAR
        if isinstance(op, BinaryOp) and op.attributes["op"] not in _BINARY_TENSOR_OPS:
            raise NotRowWise(f"`{op.attributes['op']}` of tensors is not element-wise", op)
        if isinstance(op, CompareOp) and op.attributes["op"] not in ("==", "!=", "<", "<=", ">", ">="):
            raise NotRowWise(f"`{op.attributes['op']}` of a tensor depends on its shape", op)
        return _broadcast(op, operands)
    if isinstance(op, GetAttrOp):
        if op.attributes["attr"] == "shape" and operands[0] in (ROWS, ROWS1, VEC):
            return ("shape", operands[0])
        raise NotRowWise(f"`.{op.attributes['attr']}` needs the rank", op)
    if isinstance(op, GetItemOp):
        container, index = operands
        if isinstance(container, tuple) and container[0] == "shape" and _constant(op.operands[1]) == -1:
            return LAST if container[1] != ROWS1 else SCALAR
        raise NotRowWise("indexing needs the rank (only `.shape[-1]` does not)", op)
    if isinstance(op, (TorchCallOp, TensorMethodOp)):
        return _call_layout(op, operands)
    raise NotRowWise(f"{op.name} is not row-wise", op)


def _call_layout(op: Operation, operands: list[Layout]) -> Layout:
    name = _aten_name(op)
    if name is None:
        raise NotRowWise(f"{_display(op)} is not a torch op", op)
    if op.attributes.get("mutates") or op.attributes.get("alias_of") is not None or op.attributes.get("random"):
        raise NotRowWise(f"{_display(op)} writes, views or draws random numbers", op)
    if isinstance(op, TensorMethodOp) and op.attributes.get("method") == "size":
        if len(op.operands) == 2 and _constant(op.operands[1]) == -1 and operands[0] in (ROWS, VEC):
            return LAST
        raise NotRowWise("`.size()` needs the rank (only `.size(-1)` does not)", op)
    if name in _SOFTMAXES or name in _REDUCTIONS:
        table = _SOFTMAXES.get(name) or _REDUCTIONS[name]
        bound = _bind(op, table)
        given = _layouts_of(op, operands, bound)
        if given.get("input") not in (ROWS, ROWS1):
            raise NotRowWise(f"{_display(op)} of a value without the rows' shape", op)
        dim = _constant(bound["dim"]) if "dim" in bound else None
        if dim not in (-1, (-1,), [-1]):
            raise NotRowWise(f"{_display(op)} over a dimension other than -1 needs the rank", op)
        if "dtype" in bound and _constant(bound["dtype"]) is not None:
            raise NotRowWise(f"{_display(op)} with a dtype", op)
        if name in _SOFTMAXES:
            return given["input"]
        if "keepdim" not in bound or _constant(bound["keepdim"]) is not True:
            raise NotRowWise(f"{_display(op)} without keepdim=True drops a dimension", op)
        return ROWS1
    if name in _NORMS:
        bound = _bind(op, _NORMS[name])
        given = _layouts_of(op, operands, bound)
        if given["input"] != ROWS or given.get("normalized_shape") != ("tuple", LAST):
            raise NotRowWise(f"{_display(op)} over more than the last dimension needs the rank", op)
        for part in ("weight", "bias"):
            if part in bound and given[part] != VEC and _constant(bound[part]) is not None:
                raise NotRowWise(f"the {part} of {_display(op)} is not a vector of the last size", op)
        return ROWS
    if _pointwise(op.attributes["aten"]):
        return _broadcast(op, operands)
    raise NotRowWise(f"{_display(op)} is not element-wise", op)


def _broadcast(op: Operation, operands: list[Layout]) -> Layout:
    tensors = [layout for layout in operands if layout != SCALAR and layout != LAST]
    if any(layout not in (ROWS, ROWS1, VEC) for layout in tensors):
        raise NotRowWise(f"{_display(op)} of a value that is neither a tensor nor a number", op)
    if ROWS in tensors or ROWS1 in tensors and VEC in tensors:
        return ROWS
    return ROWS1 if ROWS1 in tensors else VEC


def _bind(op: Operation, names: tuple[str, ...]) -> dict[str, Value]:
    """Operand per parameter name: positional operands in order, then the keyword ones."""
    kwnames = tuple(op.attributes.get("kwnames", ()))
    positional = op.operands[:len(op.operands) - len(kwnames)]
    bound = dict(zip(names, positional))
    for kw, value in zip(kwnames, op.operands[len(positional):]):
        bound["input" if kw == "self" else kw] = value
    return bound


def _layouts_of(op: Operation, operands: list[Layout], bound: dict[str, Value]) -> dict[str, Layout]:
    where = {id(value): i for i, value in enumerate(op.operands)}
    return {name: operands[where[id(value)]] for name, value in bound.items()}


def _constant(value: Value) -> Any:
    """The literal `value` holds (a tuple of literals for a tuple), else a marker nothing equals."""
    owner = value.owner
    if isinstance(owner, ConstantOp):
        return owner.value
    if isinstance(owner, TupleOp):
        return tuple(_constant(v) for v in owner.operands)
    return _UNKNOWN


_UNKNOWN = object()


def _aten_name(op: Operation) -> str | None:
    aten = op.attributes.get("aten") if isinstance(op, (TorchCallOp, TensorMethodOp)) else None
    if not isinstance(aten, str) or not aten.startswith("aten::"):
        return None
    return aten.removeprefix("aten::").partition(".")[0]


# Element-wise overloads torch does not tag so: `where` with a Python number for a branch.
_ALSO_POINTWISE = {"where.ScalarSelf", "where.ScalarOther", "where.Scalar"}


def _pointwise(aten: str) -> bool:
    """Whether the aten op is element-wise: its overload (or, where the front end named none,
    every overload of the name) carries torch's `pointwise` tag."""
    name, _, overload = aten.removeprefix("aten::").partition(".")
    if f"{name}.{overload}" in _ALSO_POINTWISE:
        return True
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return False
    try:
        found = [getattr(packet, o) for o in ([overload] if overload else packet.overloads())]
    except AttributeError:
        return False
    if not overload:  # the overloads a call with a tensor may be: a tensor in, one tensor out
        found = [o for o in found if not o._schema.is_mutable and _tensor_to_tensor(o._schema)]
    return bool(found) and all(torch.Tag.pointwise in o.tags for o in found)


def _tensor_to_tensor(schema: Any) -> bool:
    tensor = torch._C.TensorType.get()
    return (any(a.type == tensor for a in schema.arguments)
            and len(schema.returns) == 1 and schema.returns[0].type == tensor)


def _display(op: Operation) -> str:
    return str(op.attributes.get("callee") or op.attributes.get("method") or op.attributes.get("aten"))

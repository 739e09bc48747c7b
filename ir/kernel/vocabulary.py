"""The kernel IR's vocabulary: which element operations, row reductions, dtypes and devices a
generated kernel may hold (both emitters implement each: codegen/elements.py, checked by
tests/test_elements.py), and the iteration shape of a kernel. The fuse and autograd_kernels
passes decide with it what goes into a kernel; codegen and explain read kernels with it."""

from __future__ import annotations

import sympy

from ir.core import ops
from ir.core.graph import PURE, Operation, Value
from ir.core.types import BOOL, FLOAT, INT, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import Primitive, classify, op_name

# Pointwise primitives both kernel emitters implement: codegen/elements.py has an entry for each
# (tests/test_elements.py keeps the two in step).
FUSIBLE = frozenset({
    "add", "sub", "mul", "div", "neg", "abs", "exp", "expm1", "log", "log1p", "tanh", "erf", "sqrt",
    "rsqrt", "reciprocal", "sin", "cos", "floor", "ceil", "trunc", "maximum", "minimum", "clamp_min",
    "clamp_max", "where", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "to", "pow",
})
# (bfloat16 and float16 compute in float, rounded to 16 bits after every op as in eager)
DTYPES = frozenset({"float32", "float64", "bfloat16", "float16", "int32", "int64", "bool"})
# Row reductions the emitters implement, on floating tensors only (integer sums widen in torch).
REDUCTIONS = frozenset({"sum", "amax", "amin"})
REDUCTION_DTYPES = frozenset({"float32", "float64", "bfloat16", "float16"})
SCALARS = (INT, FLOAT, BOOL)
DEVICES = frozenset({"cpu", "cuda"})  # (not "cuda:1": Triton launches on the current device)


def known_tensor(t: object) -> bool:
    """A tensor type whose dtype, rank and device a kernel can take, its sizes ints or size
    expressions."""
    return (isinstance(t, TensorType) and t.dtype in DTYPES and t.shape is not None and t.device in DEVICES
            and all(type(d) is int or isinstance(d, sympy.Expr) for d in t.shape))


def _one_device(values: list[Value]) -> bool:
    """Whether the tensors among `values` are on one device (eager mixes a 0-d CPU tensor into
    CUDA math, and `to` may move a tensor: a kernel reads and writes one device)."""
    return len({v.type.device for v in values if isinstance(v.type, TensorType)}) <= 1


def fusible(op: Operation) -> bool:
    """A pointwise primitive or row reduction the emitters implement, on tensors whose facts
    are known."""
    return pointwise_fusible(op) or row_reduction(op) is not None


def row_reduction(op: Operation) -> str | None:
    """The kind of reduction `op` is ("sum", "amax", "amin") when it reduces a known floating
    tensor over its last dim with keepdim=True (dim given as an int or a one-int tuple), else
    None. amax and amin need the dim to be a size known to be at least 1 (eager raises on empty)."""
    if op.regions or len(op.results) != 1 or not op.has_trait(PURE) or op_name(op) not in REDUCTIONS:
        return None
    if not isinstance(classify(op), Primitive):
        return None
    kwnames = op.attributes.get("kwnames", ())
    positional = op.operands[:len(op.operands) - len(kwnames)]
    args = dict(zip(("self", "dim", "keepdim"), positional))
    if len(positional) > 3:
        return None
    for name, v in zip(kwnames, op.operands[len(positional):]):
        if name in args:
            return None
        args[name] = v
    if set(args) != {"self", "dim", "keepdim"}:
        return None  # (dtype=, out=, a reduction over every dim)
    x, result = args["self"].type, op.result.type
    if not (known_tensor(x) and known_tensor(result) and x.dtype in REDUCTION_DTYPES  # type: ignore[union-attr]
            and result.dtype == x.dtype and len(x.shape) >= 1 and result.device == x.device):  # type: ignore[union-attr]
        return None
    dim, keepdim = constant_of(args["dim"]), constant_of(args["keepdim"])
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    rank = len(x.shape)  # type: ignore[union-attr]
    if keepdim is not True or type(dim) is not int or dim not in (rank - 1, -1):
        return None
    size = x.shape[-1]  # type: ignore[union-attr]
    # (a size symbol is positive: entry checks pin every one at >= 1, guards.check_tensor)
    if op_name(op) != "sum" and not (size >= 1 if type(size) is int else sympy.sympify(size).is_positive is True):
        return None
    return op_name(op)


NOT_CONSTANT = object()


def constant_of(v: Value) -> object:
    """The value of a constant operand, else NOT_CONSTANT."""
    return v.owner.attributes.get("value", NOT_CONSTANT) if isinstance(v.owner, ops.ConstantOp) else NOT_CONSTANT


def pointwise_fusible(op: Operation) -> bool:
    """A pointwise primitive the emitters implement, on tensors whose facts are known."""
    if op.regions or len(op.results) != 1 or not op.has_trait(PURE) or op.attributes.get("kwnames"):
        return False
    prim = classify(op)
    if not isinstance(prim, Primitive) or prim.kind != "pointwise" or op_name(op) not in FUSIBLE:
        return False
    if not known_tensor(op.result.type):
        return False
    for v in op.operands[:1] if op_name(op) == "to" else op.operands:  # (to's other operands: below)
        if not (known_tensor(v.type) or v.type in SCALARS):
            return False
    if not _one_device(list(op.operands) + [op.result]):
        return False
    if op_name(op) == "to":  # x.to(dtype) / x.float(): a constant dtype, and a real conversion
        # (to the tensor's own dtype, eager returns the tensor itself: an alias, not a copy)
        return (all(isinstance(v.owner, ops.ConstantOp) for v in op.operands[1:])
                and op.operands[0].type.dtype != op.result.type.dtype)  # type: ignore[union-attr]
    if op_name(op) == "pow" and op.result.type.dtype not in ("float32", "float64"):  # type: ignore[union-attr]
        return False  # integer powers are exact in torch, std::pow goes through double; 16-bit
        # powers round after each multiplication in some of torch's special cases, not in others
    return any(isinstance(v.type, TensorType) for v in op.operands)


def iteration_shape(values: list[Value]) -> tuple | None:
    """The broadcast of the shapes of `values`, when it is known (equal dims or 1s)."""
    rank = max(len(v.type.shape) for v in values)  # type: ignore[union-attr]
    out: list = [1] * rank
    for v in values:
        shape = v.type.shape  # type: ignore[union-attr]
        for i, d in enumerate(shape, start=rank - len(shape)):
            if d == 1 or d == out[i]:
                continue
            if out[i] == 1:
                out[i] = d
            else:
                return None
    return tuple(out)


def kernel_shape(kernel: kernel_ops.KernelOp) -> tuple:
    """A kernel's iteration shape: the broadcast of its inputs and results; a batch norm's
    group's kernel (kernel.batch_norm_chain), the shape of its input x, whose elements it walks."""
    if isinstance(kernel, kernel_ops.BatchNormChainOp):
        return tuple(kernel.operands[0].type.shape)  # type: ignore[union-attr]
    n = kernel.inputs
    shape = iteration_shape(list(kernel.operands[:n]) + list(kernel.results))
    assert shape is not None
    return shape

"""The primitive ops: the small set of tensor operations that later stages (fusion, kernel
emitters) have to understand. ir/passes/decompose.py rewrites composite ops (softmax, layer_norm,
gelu, var, linear, ...) into these; docs/primitives.md lists both, and tests keep the three in
step.

A primitive is named by its aten op (without overload) and has a kind:

- pointwise: one output element from the elements at the same (broadcast) index of its tensor
  operands; `arity` counts the tensor operands (Python scalars may stand for some of them).
  Casts (`to` with a dtype) are pointwise too.
- reduction: reduces over `dim` (a list; empty or absent: every dim), with `keepdim`.
- view: a new shape or stride over the same elements (no arithmetic).
- extern: a call of torch's own kernel that later stages do not generate (matmul, convolution,
  gathers, window ops): the fusion groups stop at them.
- creation: makes a tensor from sizes and a fill value or a range.
- other: data movement (cat, flip, ...), copies and layout (clone, contiguous, detach), and
  metadata queries (size, dim) that read no tensor data.

IR ops map to primitives in `classify`: `torch.call` / `torch.method` by their `aten` attribute
(or callee), Python operators on tensors (`py.binary`, `py.unary`, `py.compare`) by the aten op
they reach, `torch.index` as a view (basic indexing) or an extern gather (advanced indexing).
What is neither a primitive nor decomposed is in LEFT_AS_IS, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ir.core import ops
from ir.core.graph import Operation
from ir.core.types import OptionalType, TensorType, TupleType, Type

# How far compiled results may be from eager's once composites are decomposed (and, later,
# fused): |compiled - eager| <= atol + rtol * |eager|, as (atol, rtol) per dtype name
# (docs/primitives.md, "Tolerance"). For float16 and bfloat16, 8 units of the last place: eager
# rounds intermediate results of some composites to the low precision, the decompositions once.
TOLERANCE = {
    "float64": (1e-12, 1e-12),
    "float32": (1e-5, 1e-5),
    "float16": (8 * 2.0**-10, 8 * 2.0**-10),
    "bfloat16": (8 * 2.0**-7, 8 * 2.0**-7),
}

KINDS = ("pointwise", "reduction", "view", "extern", "creation", "other")


@dataclass(frozen=True)
class Primitive:
    name: str  # the aten op, without overload
    kind: str  # one of KINDS
    arity: int | None  # pointwise: tensor operands; None for the other kinds
    semantics: str  # one line, for docs/primitives.md


@dataclass(frozen=True)
class LeftAsIs:
    """An op that is neither primitive nor decomposed, and why."""

    name: str
    reason: str


def _table(kind: str, arity: int | None, entries: str) -> dict[str, Primitive]:
    """`entries`: lines of `name: semantics`."""
    out = {}
    for line in entries.strip().splitlines():
        name, _, semantics = line.partition(":")
        out[name.strip()] = Primitive(name.strip(), kind, arity, semantics.strip())
    return out


PRIMITIVES: dict[str, Primitive] = {
    **_table("pointwise", 1, """
        abs: |x|
        neg: -x
        exp: e**x
        exp2: 2**x
        expm1: e**x - 1, exact near 0
        log: natural log
        log2: log base 2
        log10: log base 10
        log1p: log(1 + x), exact near 0
        sqrt: square root
        rsqrt: 1 / sqrt(x)
        reciprocal: 1 / x
        sin: sine
        cos: cosine
        tan: tangent
        asin: arc sine
        acos: arc cosine
        atan: arc tangent
        sinh: hyperbolic sine
        cosh: hyperbolic cosine
        tanh: hyperbolic tangent
        erf: error function
        erfc: 1 - erf(x)
        floor: round down
        ceil: round up
        round: round half to even
        trunc: round toward zero
        sign: -1, 0 or 1 (NaN stays NaN)
        isnan: x != x
        isinf: x is +inf or -inf
        isfinite: not NaN and not inf
        logical_not: x == 0
        bitwise_not: ~x (integers and bool)
        positive: +x (the value itself)
        to: cast to a dtype (the `to(dtype)` form and float()/half()/... only)
    """),
    **_table("pointwise", 2, """
        add: x + y (with alpha: x + alpha * y)
        sub: x - y (with alpha: x - alpha * y)
        rsub: y - x (a number minus a tensor)
        mul: x * y
        div: x / y; with rounding_mode "floor" or "trunc" the rounded quotient
        floor_divide: x // y
        remainder: x % y, the sign of y (Python's)
        fmod: C fmod, the sign of x
        pow: x ** y
        maximum: larger of x and y, NaN if either is NaN
        minimum: smaller of x and y, NaN if either is NaN
        clamp_min: max(x, lo) with NaN propagated (lo a number or a tensor)
        clamp_max: min(x, hi) with NaN propagated
        atan2: angle of (x, y)
        eq: x == y
        ne: x != y
        lt: x < y
        le: x <= y
        gt: x > y
        ge: x >= y
        logical_and: x and y as bools
        logical_or: x or y as bools
        logical_xor: x xor y as bools
        bitwise_and: x & y
        bitwise_or: x | y
        bitwise_xor: x ^ y
        __lshift__: x << y
        __rshift__: x >> y
    """),
    **_table("pointwise", 3, """
        where: cond ? x : y (x, y tensors or numbers)
    """),
    **_table("reduction", None, """
        sum: sum over dims (float16/bfloat16 accumulate in float32)
        prod: product over dims
        amax: maximum over dims, NaN if any is NaN; an empty dim raises
        amin: minimum over dims, NaN if any is NaN; an empty dim raises
        max: with a dim, (values, indices) of the maximum
        min: with a dim, (values, indices) of the minimum
        argmax: index of the first maximum
        argmin: index of the first minimum
        any: some element is nonzero
        all: every element is nonzero
    """),
    **_table("view", None, """
        view: the same elements in a new shape (strides must allow it)
        reshape: a view when the strides allow it, else a copy
        permute: dims reordered
        expand: size-1 dims broadcast to a size (stride 0)
        narrow: the elements start .. start+length-1 of a dim (a slice)
        select: one index of a dim, the dim removed
        squeeze: size-1 dims removed
        unsqueeze: a size-1 dim inserted
        index: basic indexing x[...]: slices, ints, None, ellipsis (torch.index)
    """),
    **_table("extern", None, """
        matmul: torch.matmul with its broadcasting and 1-d rules
        mm: matrix product of 2-d tensors
        bmm: batched matrix product
        addmm: beta * b + alpha * (x @ y) in the GEMM
        linear: x @ weight.T (a 2-d weight, no bias: decomposition moves the bias out)
        baddbmm: batched addmm
        mv: matrix-vector product
        dot: vector dot product
        conv1d: 1-d convolution
        conv2d: 2-d convolution
        conv3d: 3-d convolution
        convolution: convolution with every option
        conv_transpose1d: transposed 1-d convolution
        conv_transpose2d: transposed 2-d convolution
        conv_transpose3d: transposed 3-d convolution
        embedding: rows of a weight gathered by indices
        index_select: slices of a dim gathered by indices
        gather: elements gathered along a dim by an index tensor
        index.Tensor: advanced indexing x[idx] with tensors (torch.index)
        scaled_dot_product_attention: torch's fused attention kernels
        max_pool1d: window maximum
        max_pool2d: window maximum
        max_pool3d: window maximum
        avg_pool1d: window mean
        avg_pool2d: window mean
        avg_pool3d: window mean
        adaptive_avg_pool1d: window mean over computed windows
        adaptive_avg_pool2d: window mean over computed windows
        adaptive_max_pool2d: window maximum over computed windows
        interpolate: resampling (upsample_* kernels)
        cumsum: running sum (a scan)
        cumprod: running product (a scan)
        sort: sorted values and indices
        topk: k largest values and indices
        einsum: contraction by subscripts (torch plans the matmuls)
    """),
    **_table("creation", None, """
        full: a tensor of sizes filled with a value
        zeros: full with 0
        ones: full with 1
        empty: uninitialised (only its shape and dtype are defined)
        arange: start, start + step, ... below end
        full_like: full with another tensor's shape, dtype, device
        zeros_like: zeros with another tensor's shape, dtype, device
        ones_like: ones with another tensor's shape, dtype, device
        empty_like: empty with another tensor's shape, dtype, device
        new_full: full with this tensor's dtype and device
        new_zeros: zeros with this tensor's dtype and device
        new_ones: ones with this tensor's dtype and device
        new_empty: empty with this tensor's dtype and device
        scalar_tensor: a 0-d tensor holding a number
        tensor: a tensor from Python numbers
    """),
    **_table("other", None, """
        cat: tensors joined along a dim
        stack: tensors joined along a new dim
        flip: dims reversed
        roll: elements rotated along dims
        repeat: the tensor tiled
        tril: lower triangle, the rest 0
        triu: upper triangle, the rest 0
        constant_pad_nd: padded with a constant
        pad: F.pad (constant, reflect, replicate or circular)
        split: views of consecutive slices
        chunk: views of consecutive slices
        unbind: views of every index of a dim
        clone: a copy
        contiguous: the same values in row-major layout (itself when it is)
        detach: the same values without autograd history
        alias: the same tensor
        size: a size (metadata, no data read)
        dim: the rank (metadata)
        numel: the number of elements (metadata)
    """),
}

# Python operators on tensors, by the aten op they reach (ir/torchapi/operators.py _OP_ATEN).
OPERATOR_PRIMITIVES: dict[str, str] = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "//": "floor_divide", "%": "remainder",
    "**": "pow", "@": "matmul", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor",
    "<<": "__lshift__", ">>": "__rshift__", "==": "eq", "!=": "ne", "<": "lt", "<=": "le",
    ">": "gt", ">=": "ge",
}
UNARY_OPERATOR_PRIMITIVES: dict[str, str] = {"-": "neg", "+": "positive", "~": "bitwise_not"}

# Aten overloads that name another primitive than their base name.
OVERLOAD_PRIMITIVES: dict[str, str] = {"max.other": "maximum", "min.other": "minimum"}

# Ops that are neither primitive nor decomposed, by design. (Composites whose facts are not
# known stay too: decompose.py leaves them, and their reason is "facts unknown".)
LEFT_AS_IS: dict[str, LeftAsIs] = {
    e.name: e for e in [
        LeftAsIs("module.call", "an opaque call of a submodule: its forward is not compiled here"),
        LeftAsIs("py.inplace", "mutation: functionalization turns it into a pure op and a copy"),
        LeftAsIs("torch.index_put", "mutation: functionalization turns it into index_put and a copy"),
        LeftAsIs("in-place", "a method or call with mutates (x.add_(y), inplace=True): "
                             "functionalization turns it into its pure form"),
        LeftAsIs("random", "draws from the global RNG (dropout in training, rand, randn, "
                           "bernoulli...): never reordered, duplicated or fused"),
        LeftAsIs("item", "reads a tensor element into Python: a sync point"),
        LeftAsIs("tolist", "reads tensor data into Python: a sync point"),
        LeftAsIs("nonzero", "data-dependent result shape"),
        LeftAsIs("masked_select", "data-dependent result shape"),
        LeftAsIs("unique", "data-dependent result shape"),
        LeftAsIs("repeat_interleave", "data-dependent result shape when repeats is a tensor"),
        LeftAsIs("to.device", "a device move, or a copy to another tensor's dtype and device "
                              "(the other overloads of `to`): not a cast"),
    ]
}


Classification = Union[Primitive, LeftAsIs, None]


def op_name(op: Operation) -> str:
    """The name an op is known by here: the aten op without overload for torch calls (else the
    last part of the callee or the method name), the primitive of a Python operator."""
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
        aten = op.attributes.get("aten")
        if aten:
            return aten.removeprefix("aten::").partition(".")[0]
        callee = op.attributes.get("callee") or op.attributes.get("method") or ""
        return callee.rsplit(".", 1)[-1]
    if isinstance(op, (ops.BinaryOp, ops.CompareOp)):
        return OPERATOR_PRIMITIVES.get(op.attributes.get("op", ""), op.name)
    if isinstance(op, ops.UnaryOp):
        return UNARY_OPERATOR_PRIMITIVES.get(op.attributes.get("op", ""), op.name)
    if isinstance(op, ops.GetAttrOp):
        return op.attributes.get("attr", op.name)
    return op.name


def is_tensor_op(op: Operation) -> bool:
    """Whether `op` computes on tensors (so it must be a primitive, or left as is with a reason).
    Attribute reads of metadata (x.shape, x.dtype) and control flow are not tensor ops."""
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp, ops.IndexOp, ops.IndexPutOp,
                       ops.InplaceOp, ops.ModuleCallOp)):
        return True
    if isinstance(op, (ops.BinaryOp, ops.UnaryOp, ops.CompareOp)):
        if op.attributes.get("op") in ("is", "is not", "in", "not in", "not"):
            return False
        return any(_has_tensor(v.type) for v in op.operands)
    if isinstance(op, ops.GetAttrOp):  # x.T, x.mT, x.data: views of a tensor
        return bool(op.operands) and _has_tensor(op.operands[0].type) and _has_tensor(op.result.type)
    return False


def classify(op: Operation) -> Classification:
    """The primitive `op` is, or why it is left as it is; None for a composite (not decomposed)."""
    if op.attributes.get("mutates"):
        return LEFT_AS_IS["in-place"]
    if op.attributes.get("random"):
        return LEFT_AS_IS["random"]
    if op.name in LEFT_AS_IS:
        return LEFT_AS_IS[op.name]
    if isinstance(op, ops.IndexOp):
        advanced = any(_has_tensor(v.type) for v in op.operands[1:])
        return PRIMITIVES["index.Tensor" if advanced else "index"]
    if isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") in _CAST_METHODS:
        return PRIMITIVES["to"]
    aten = op.attributes.get("aten")
    if aten:
        overload = aten.removeprefix("aten::")
        if overload in OVERLOAD_PRIMITIVES:
            return PRIMITIVES.get(OVERLOAD_PRIMITIVES[overload])
        if overload.partition(".")[0] == "to":
            return PRIMITIVES["to"] if overload == "to.dtype" else LEFT_AS_IS["to.device"]
    name = op_name(op)
    if name in LEFT_AS_IS:
        return LEFT_AS_IS[name]
    return PRIMITIVES.get(name)


# Tensor methods that are `to(dtype)` by another name.
_CAST_METHODS = frozenset({"float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char"})


def _has_tensor(t: Type) -> bool:
    if isinstance(t, TensorType):
        return True
    if isinstance(t, OptionalType):
        return _has_tensor(t.elem)
    if isinstance(t, TupleType):
        return any(_has_tensor(e) for e in t.elems)
    return False

"""Decomposition rules for the activations (sigmoid, silu, gelu, the elu family, relu and its
clamped forms, ...) and the other pointwise composites (addcmul, addcdiv, lerp, square,
masked_fill, type_as). Merged into decompose_rules.RULES."""

from __future__ import annotations

import math

from ir.core.graph import Value
from ir.passes.decompose_common import Rule, _same_dtypes, _upcast, registrar
from ir.passes.emitter import (
    COMPUTE_DTYPE,
    FLOATING,
    Call,
    Emitter,
    Operand,
    Unsupported,
    _dim,
    _dtype,
    _float_dtype,
    _rank,
    _shape,
)
from ir.shapes.values import exact_div

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


# -- activations ----------------------------------------------------------------------------------
def _clamp(e: Emitter, x: Value, lo: Operand, hi: Operand) -> Value:
    if lo is not None:
        x = e.call("torch.clamp_min", x, lo)
    if hi is not None:
        x = e.call("torch.clamp_max", x, hi)
    return x


def _sigmoid(e: Emitter, x: Value) -> Value:
    return e.call("torch.reciprocal", e.binary("+", 1, e.call("torch.exp", e.unary("-", x))))


@rule("sigmoid", "special_expit")
def sigmoid(e: Emitter, c: Call) -> Value:
    xc, d = _upcast(e, c.tensor())
    return e.cast(_sigmoid(e, xc), d)


@rule("silu")
def silu(e: Emitter, c: Call) -> Value:
    """x / (1 + exp(-x)), as the eager kernel computes x * sigmoid(x)."""
    xc, d = _upcast(e, c.tensor())
    return e.cast(e.binary("/", xc, e.binary("+", 1, e.call("torch.exp", e.unary("-", xc)))), d)


@rule("gelu")
def gelu(e: Emitter, c: Call) -> Value:
    approximate = c.const("approximate") if "approximate" in c.args else "none"
    xc, d = _upcast(e, c.tensor())
    if approximate == "none":
        erf = e.call("torch.erf", e.binary("*", xc, math.sqrt(0.5)))
        return e.cast(e.binary("*", e.binary("*", xc, 0.5), e.binary("+", 1, erf)), d)
    if approximate == "tanh":
        beta = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # the eager kernel's kBeta
        cube = e.binary("*", e.binary("*", xc, xc), xc)
        inner = e.binary("*", beta, e.binary("+", xc, e.binary("*", 0.044715, cube)))
        tanh = e.call("torch.tanh", inner)
        return e.cast(e.binary("*", e.binary("*", 0.5, xc), e.binary("+", 1, tanh)), d)
    raise Unsupported("approximate")


@rule("mish")
def mish(e: Emitter, c: Call) -> Value:
    """x * tanh(log1p(exp(x))): the eager kernel's softplus has no threshold here."""
    xc, d = _upcast(e, c.tensor())
    softplus = e.call("torch.log1p", e.call("torch.exp", xc))
    return e.cast(e.binary("*", xc, e.call("torch.tanh", softplus)), d)


@rule("hardswish")
def hardswish(e: Emitter, c: Call) -> Value:
    xc, d = _upcast(e, c.tensor())
    return e.cast(e.binary("/", e.binary("*", xc, _clamp(e, e.binary("+", xc, 3), 0, 6)), 6), d)


@rule("hardsigmoid")
def hardsigmoid(e: Emitter, c: Call) -> Value:
    xc, d = _upcast(e, c.tensor())
    return e.cast(e.binary("/", _clamp(e, e.binary("+", xc, 3), 0, 6), 6), d)


def _elu(e: Emitter, c: Call, alpha: float, scale: float, input_scale: float) -> Value:
    """x > 0: x * scale; else expm1(x * input_scale) * alpha * scale."""
    xc, d = _upcast(e, c.tensor())
    scaled_in = xc if input_scale == 1 else e.binary("*", xc, input_scale)
    negative = e.binary("*", e.call("torch.expm1", scaled_in), alpha * scale)
    positive = xc if scale == 1 else e.binary("*", xc, scale)
    return e.cast(e.call("torch.where", e.binary("<=", xc, 0), negative, positive), d)


def _const_or(c: Call, name: str, default: float) -> float:
    return c.number(name) if name in c.args else default


@rule("elu")
def elu(e: Emitter, c: Call) -> Value:
    return _elu(e, c, _const_or(c, "alpha", 1.0), _const_or(c, "scale", 1.0), _const_or(c, "input_scale", 1.0))


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


@rule("selu")
def selu(e: Emitter, c: Call) -> Value:
    return _elu(e, c, SELU_ALPHA, SELU_SCALE, 1.0)


@rule("celu")
def celu(e: Emitter, c: Call) -> Value:
    alpha = _const_or(c, "alpha", 1.0)
    if alpha == 0:
        raise Unsupported("celu with alpha 0 raises")
    return _elu(e, c, alpha, 1.0, 1.0 / alpha)


@rule("leaky_relu")
def leaky_relu(e: Emitter, c: Call) -> Value:
    xc, d = _upcast(e, c.tensor())
    slope = _const_or(c, "negative_slope", 0.01)
    return e.cast(e.call("torch.where", e.binary(">", xc, 0), xc, e.binary("*", xc, slope)), d)


@rule("prelu")
def prelu(e: Emitter, c: Call) -> Value:
    """x > 0 ? x : w * x, the weight (one slope, or one per channel, dim 1) broadcast against x."""
    x, w = c.tensor(), c.tensor("weight")
    rank, wshape = _rank(x), _shape(w)
    if rank == 0 or len(wshape) != 1 or type(wshape[0]) is not int:
        raise Unsupported("needs a 1-d weight of known size and an input of rank >= 1")
    if wshape[0] != 1 and rank < 2:
        raise Unsupported("one slope per channel needs (N, C, ...)")  # (eager raises)
    (xc, wc), d = _opmath(e, x, w)
    slope = wc if wshape[0] == 1 or rank == 2 else e.method("reshape", wc, (wshape[0],) + (1,) * (rank - 2))
    return e.cast(e.call("torch.where", e.binary(">", xc, 0), xc, e.binary("*", slope, xc)), d)


@rule("softplus")
def softplus(e: Emitter, c: Call) -> Value:
    """x * beta > threshold: x; else log1p(exp(x * beta)) / beta."""
    xc, d = _upcast(e, c.tensor())
    beta, threshold = _const_or(c, "beta", 1.0), _const_or(c, "threshold", 20.0)
    scaled = xc if beta == 1 else e.binary("*", xc, beta)
    smooth = e.call("torch.log1p", e.call("torch.exp", scaled))
    if beta != 1:
        smooth = e.binary("/", smooth, beta)
    return e.cast(e.call("torch.where", e.binary(">", scaled, threshold), xc, smooth), d)


@rule("log_sigmoid")
def log_sigmoid(e: Emitter, c: Call) -> Value:
    """min(x, 0) - log1p(exp(-|x|)): no overflow for either sign."""
    xc, d = _upcast(e, c.tensor())
    tail = e.call("torch.log1p", e.call("torch.exp", e.unary("-", e.call("torch.abs", xc))))
    return e.cast(e.binary("-", e.call("torch.clamp_max", xc, 0), tail), d)


@rule("tanhshrink")
def tanhshrink(e: Emitter, c: Call) -> Value:
    """x - tanh(x), in the input's dtype as F.tanhshrink computes it."""
    x = c.tensor()
    _float_dtype(x)
    return e.binary("-", x, e.call("torch.tanh", x))


@rule("softsign")
def softsign(e: Emitter, c: Call) -> Value:
    """x / (|x| + 1), in the input's dtype as F.softsign computes it."""
    x = c.tensor()
    _float_dtype(x)
    return e.binary("/", x, e.binary("+", e.call("torch.abs", x), 1))


@rule("glu")
def glu(e: Emitter, c: Call) -> Value:
    """a * sigmoid(b) for the two halves a, b of dim."""
    x = c.tensor()
    dim = _dim(c.const("dim") if "dim" in c.args else -1, _rank(x))
    half = exact_div(_shape(x)[dim], 2)
    if half is None:
        raise Unsupported("the dim's size is not known to be even")
    h = half if type(half) is int else e.binary("//", e.size(x, dim), 2)
    xc, d = _upcast(e, x)
    a = e.method("narrow", xc, dim, 0, h)
    b = e.method("narrow", xc, dim, h, h)
    return e.cast(e.binary("*", a, _sigmoid(e, b)), d)


def _integer_or_float(x: Value) -> str:
    d = _dtype(x)
    if d is None or d == "bool" or d.startswith("complex"):
        raise Unsupported("dtype")
    return d


@rule("relu")
def relu(e: Emitter, c: Call) -> Value:
    """clamp_min(x, 0), as aten implements relu."""
    x = c.tensor()
    _integer_or_float(x)
    return e.call("torch.clamp_min", x, 0)


@rule("relu6")
def relu6(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    _integer_or_float(x)
    return _clamp(e, x, 0, 6)


@rule("hardtanh")
def hardtanh(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    _integer_or_float(x)
    lo, hi = _const_or(c, "min_val", -1.0), _const_or(c, "max_val", 1.0)
    if lo > hi:
        raise Unsupported("min_val > max_val raises")
    return _clamp(e, x, lo, hi)


@rule("threshold")
def threshold(e: Emitter, c: Call) -> Value:
    """x <= threshold: value; else x (NaN stays NaN)."""
    x = c.tensor()
    _integer_or_float(x)
    return e.call("torch.where", e.binary("<=", x, c.arg("threshold")), c.arg("value"), x)


@rule("clamp", "clip")
def clamp(e: Emitter, c: Call) -> Value:
    """clamp_max(clamp_min(x, min), max): min > max gives max, as eager."""
    x = c.tensor()
    _integer_or_float(x)
    lo, hi = c.arg("min"), c.arg("max")
    if lo is None and hi is None:
        raise Unsupported("clamp without bounds raises")
    return _clamp(e, x, lo, hi)


# -- pointwise composites -------------------------------------------------------------------------
def _opmath(e: Emitter, *values: Value) -> tuple[list[Value], str]:
    """Operands of one dtype in its computation dtype (integers as they are), and that dtype."""
    d = _same_dtypes(*values)
    if d not in FLOATING:
        _integer_or_float(values[0])
        return list(values), d
    return [e.cast(v, COMPUTE_DTYPE[d]) for v in values], d


@rule("addcmul")
def addcmul(e: Emitter, c: Call) -> Value:
    """self + value * t1 * t2 (torch._refs.addcmul), in the computation dtype as eager."""
    (x, t1, t2), d = _opmath(e, c.tensor(), c.tensor("tensor1"), c.tensor("tensor2"))
    value = c.arg("value") if "value" in c.args else 1
    product = t1 if value == 1 else e.binary("*", value, t1)
    return e.cast(e.binary("+", x, e.binary("*", product, t2)), d)


@rule("addcdiv")
def addcdiv(e: Emitter, c: Call) -> Value:
    """self + value * t1 / t2, in the eager kernel's order."""
    _float_dtype(c.tensor())
    (x, t1, t2), d = _opmath(e, c.tensor(), c.tensor("tensor1"), c.tensor("tensor2"))
    value = c.arg("value") if "value" in c.args else 1
    numerator = t1 if value == 1 else e.binary("*", value, t1)
    return e.cast(e.binary("+", x, e.binary("/", numerator, t2)), d)


@rule("lerp")
def lerp(e: Emitter, c: Call) -> Value:
    """|w| < 0.5: start + w * (end - start); else end - (end - start) * (1 - w): exact at both
    ends, as the eager kernel."""
    _float_dtype(c.tensor())
    weight = c.arg("weight")
    tensors = [c.tensor(), c.tensor("end")] + ([weight] if isinstance(weight, Value) else [])
    values, d = _opmath(e, *tensors)
    start, end = values[0], values[1]
    diff = e.binary("-", end, start)
    if isinstance(weight, Value):
        w = values[2]
        near = e.binary("+", start, e.binary("*", w, diff))
        far = e.binary("-", end, e.binary("*", diff, e.binary("-", 1, w)))
        out = e.call("torch.where", e.binary("<", e.call("torch.abs", w), 0.5), near, far)
    elif not isinstance(weight, (int, float)) or isinstance(weight, bool):
        raise Unsupported("weight")
    elif abs(weight) < 0.5:
        out = e.binary("+", start, e.binary("*", weight, diff))
    else:
        out = e.binary("-", end, e.binary("*", diff, 1 - weight))
    return e.cast(out, d)


@rule("square")
def square(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    _integer_or_float(x)
    return e.binary("*", x, x)


@rule("masked_fill")
def masked_fill(e: Emitter, c: Call) -> Value:
    x, mask = c.tensor(), c.tensor("mask")
    if _dtype(mask) != "bool":
        raise Unsupported("mask must be bool")
    return e.call("torch.where", mask, c.arg("value"), x)


@rule("type_as")
def type_as(e: Emitter, c: Call) -> Value:
    dtype = _dtype(c.tensor("other"))
    if dtype is None:
        raise Unsupported("dtype of other")
    return e.cast(c.tensor(), dtype)

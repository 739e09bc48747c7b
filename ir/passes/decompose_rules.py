"""The decomposition rules of ir/passes/decompose.py: one small function per composite op, named
as in docs/primitives.md, registered in `RULES` below. Each builds through the Emitter
(ir/passes/emitter.py) and returns the value that replaces the op, or raises Unsupported.

Formulas follow torch's decompositions (torch/_decomp, torch/_refs) and, where those differ in
the order of operations, the eager CPU kernel (whose results the compiled code is compared with).
`_upcast` is torch's computation dtype: float16 and bfloat16 compute in float32, and the result is
rounded to the input's dtype once, at the end.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from ir.core import Value
from ir.passes.emitter import (
    COMPUTE_DTYPE,
    FLOATING,
    Call,
    Emitter,
    Operand,
    Unsupported,
    _dim,
    _dim_arg,
    _dims,
    _dtype,
    _float_dtype,
    _nonempty,
    _rank,
    _shape,
)
from ir.shape_rule_table import sizes_of
from ir.shape_rules_values import UNKNOWN, dims_equal, exact_div
from ir.types import FLOAT, INT

Rule = Callable[[Emitter, Call], Value]
RULES: dict[str, Rule] = {}  # by the op's aten name, or the name of torch's Python-level function


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            assert n not in RULES, f"two rules for {n}"
            RULES[n] = fn
        return fn

    return register


def _upcast(e: Emitter, x: Value) -> tuple[Value, str]:
    """x in its computation dtype, and the dtype the result goes back to."""
    d = _float_dtype(x)
    return e.cast(x, COMPUTE_DTYPE[d]), d


def _same_dtypes(*values: Value | None) -> str:
    dtypes = {_dtype(v) for v in values if v is not None}
    if len(dtypes) != 1 or None in dtypes:
        raise Unsupported("operand dtypes differ or are unknown")
    return dtypes.pop()  # type: ignore[return-value]


def _keepdim(c: Call) -> bool:
    return c.flag("keepdim") if "keepdim" in c.args else False


# -- softmax family -------------------------------------------------------------------------------
def _softmax_input(e: Emitter, c: Call, negate: bool = False) -> tuple[Value, int, str]:
    """The input (negated for softmin, cast to `dtype=` when given), the dim, the result dtype."""
    x = c.tensor()
    if negate:
        x = e.unary("-", x)
    dtype = c.const("dtype") if "dtype" in c.args else None
    if dtype is UNKNOWN or (dtype is not None and dtype not in FLOATING):
        raise Unsupported("dtype")
    if dtype is not None:
        x = e.cast(x, dtype)
    d = _float_dtype(x)
    dim = c.const("dim")
    if dim is None:
        raise Unsupported("softmax without a dim picks one with a warning")
    n = _dim(dim, _rank(x))
    _nonempty(x, [n])
    return e.cast(x, COMPUTE_DTYPE[d]), n, d


def _shift_by_max(e: Emitter, x: Value, dim: int) -> Value:
    """x - amax(x): exp of it cannot overflow."""
    return e.binary("-", x, e.call("torch.amax", x, dim, keepdim=True))


# Below this, exp(x - max) counts as 0 in a softmax: e^-87 (1.6e-38) and e^-708 (3.3e-308) are the
# last normal numbers of float32 and float64 with some room. A subnormal exp costs x86 cores a
# microcode assist (~100 cycles) there and in every multiply that reads it: the matmul after
# swin_t's masked softmax (its -100 for other windows' pixels gives e^-100) took 22x as long.
# The probability changes by less than 2e-38 (float64: 4e-308), below half an ulp of any
# probability above 2^-102, and the row's sum, at least 1, not at all.
SOFTMAX_NEGLIGIBLE = {"float32": -87.0, "float64": -708.0}


def _softmax(e: Emitter, x: Value, dim: int) -> Value:
    shifted = _shift_by_max(e, x, dim)
    low = SOFTMAX_NEGLIGIBLE[_float_dtype(x)]
    # exp of the clamped value: one of a subnormal would pay the assist even where `where` drops it
    exp = e.call("torch.exp", e.call("torch.clamp_min", shifted, low))
    unnormalized = e.call("torch.where", e.binary("<", shifted, low), 0.0, exp)
    return e.binary("/", unnormalized, e.call("torch.sum", unnormalized, dim, keepdim=True))


@rule("softmax", "special_softmax")
def softmax(e: Emitter, c: Call) -> Value:
    x, dim, d = _softmax_input(e, c)
    return e.cast(_softmax(e, x, dim), d)


@rule("softmin")
def softmin(e: Emitter, c: Call) -> Value:
    """F.softmin: (-x).softmax(dim, dtype=dtype)."""
    x, dim, d = _softmax_input(e, c, negate=True)
    return e.cast(_softmax(e, x, dim), d)


@rule("log_softmax", "special_log_softmax")
def log_softmax(e: Emitter, c: Call) -> Value:
    x, dim, d = _softmax_input(e, c)
    shifted = _shift_by_max(e, x, dim)
    lse = e.call("torch.log", e.call("torch.sum", e.call("torch.exp", shifted), dim, keepdim=True))
    return e.cast(e.binary("-", shifted, lse), d)


# -- normalization --------------------------------------------------------------------------------
def _mean(e: Emitter, x: Value, xc: Value, dims: tuple[int, ...], keepdim: bool) -> Value:
    """sum / count over dims, in xc's dtype (x gives the sizes)."""
    return e.binary("/", e.call("torch.sum", xc, _dim_arg(dims), keepdim=keepdim), e.count(x, dims))


def _centered(e: Emitter, x: Value, xc: Value, dims: tuple[int, ...]) -> tuple[Value, Value]:
    """The mean (dims kept) and x - mean: the two passes of a variance."""
    mean = _mean(e, x, xc, dims, True)
    return mean, e.binary("-", xc, mean)


def _biased_var(e: Emitter, x: Value, diff: Value, dims: tuple[int, ...]) -> Value:
    return e.binary("/", e.call("torch.sum", e.binary("*", diff, diff), _dim_arg(dims), keepdim=True),
                    e.count(x, dims))


def _normalized_dims(c: Call, x: Value) -> tuple[int, ...]:
    """The trailing dims `normalized_shape` names; it must equal them (eager checks it)."""
    sizes = sizes_of(c.args.get("normalized_shape"))
    shape = _shape(x)
    if not sizes or len(sizes) > len(shape):
        raise Unsupported("normalized_shape")
    tail = shape[len(shape) - len(sizes):]
    if not all(dims_equal(a, b) for a, b in zip(sizes, tail)):
        raise Unsupported("normalized_shape is not known to match the input")
    return tuple(range(len(shape) - len(sizes), len(shape)))


def _affine_param(c: Call, name: str, shape: Sequence[Any], x_dtype: str) -> Value | None:
    """weight or bias: None, or a tensor of exactly `shape` whose dtype eager accepts with the
    input's (the same, or float32 for a low-precision input)."""
    p = c.optional_tensor(name)
    if p is None:
        return None
    got = _shape(p)
    if len(got) != len(shape) or not all(dims_equal(a, b) for a, b in zip(got, shape)):
        raise Unsupported(f"{name} shape")
    if _dtype(p) not in (x_dtype, COMPUTE_DTYPE[x_dtype]):
        raise Unsupported(f"{name} dtype")
    return p


def _scale_shift(e: Emitter, out: Value, weight: Value | None, bias: Value | None) -> Value:
    if weight is not None:
        out = e.binary("*", out, weight)
    if bias is not None:
        out = e.binary("+", out, bias)
    return out


@rule("layer_norm")
def layer_norm(e: Emitter, c: Call) -> Value:
    """torch._refs.native_layer_norm: (x - mean) * rsqrt(biased var + eps) * weight + bias."""
    x = c.tensor()
    dims = _normalized_dims(c, x)
    xc, d = _upcast(e, x)
    normalized = [_shape(x)[i] for i in dims]
    weight = _affine_param(c, "weight", normalized, d)
    bias = _affine_param(c, "bias", normalized, d)
    # The mean corrected once by the mean of what is left (x - mean): `sum / n` may be an ulp
    # off, and a row of one value then normalizes to ulp / sqrt(eps) (~2e-5) where eager's
    # Welford mean is exact and its result 0. One more pass over the row, in the same kernel.
    first, left = _centered(e, x, xc, dims)
    mean = e.binary("+", first, _mean(e, x, left, dims, True))
    diff = e.binary("-", xc, mean)
    rstd = e.call("torch.rsqrt", e.binary("+", _biased_var(e, x, diff, dims), c.arg("eps")))
    return e.cast(_scale_shift(e, e.binary("*", diff, rstd), weight, bias), d)


@rule("rms_norm")
def rms_norm(e: Emitter, c: Call) -> Value:
    """torch._decomp _fused_rms_norm: x * rsqrt(mean(x * x) + eps) * weight; eps None is the
    machine epsilon of the computation dtype."""
    x = c.tensor()
    dims = _normalized_dims(c, x)
    xc, d = _upcast(e, x)
    weight = _affine_param(c, "weight", [_shape(x)[i] for i in dims], d)
    eps = c.arg("eps")
    if eps is None:
        eps = float(torch.finfo(getattr(torch, COMPUTE_DTYPE[d])).eps)
    mean_square = _mean(e, x, e.binary("*", xc, xc), dims, True)
    out = e.binary("*", xc, e.call("torch.rsqrt", e.binary("+", mean_square, eps)))
    return e.cast(_scale_shift(e, out, weight, None), d)


def _channel_param(e: Emitter, p: Value | None, rank: int) -> Value | None:
    """A per-channel (C,) tensor shaped (C, 1, ..., 1) to broadcast against (N, C, *)."""
    if p is None or rank == 2:
        return p
    return e.method("reshape", p, (_shape(p)[0],) + (1,) * (rank - 2))


def _channels(x: Value) -> tuple[int, Any]:
    shape = _shape(x)
    if len(shape) < 2:
        raise Unsupported("needs (N, C, ...)")
    return len(shape), shape[1]


def _more_than_one(sizes: Sequence[Any]) -> bool:
    """Whether a product of sizes is surely not 1 (F.group_norm and F.instance_norm raise then):
    symbolic sizes are at least 1, an unknown one may be anything but makes 1 no likelier."""
    return math.prod(s for s in sizes if type(s) is int) != 1


@rule("group_norm")
def group_norm(e: Emitter, c: Call) -> Value:
    """torch._refs.native_group_norm: statistics over (N, G, C/G * spatial)."""
    x = c.tensor()
    rank, channels = _channels(x)
    groups = c.const("num_groups")
    if type(channels) is not int or type(groups) is not int or groups < 1 or channels % groups:
        raise Unsupported("channels must be a known multiple of num_groups")
    if not _more_than_one([_shape(x)[0], channels // groups, *_shape(x)[2:]]):
        raise Unsupported("one value per group may be all there is: F.group_norm raises then")
    xc, d = _upcast(e, x)
    weight = _affine_param(c, "weight", [channels], d)
    bias = _affine_param(c, "bias", [channels], d)
    if groups == 1:
        # Statistics over every dim but the batch's, of x as it is: no reshape, which copies a
        # channels-last x (poolformer's residual stream) before and after the statistics.
        dims = tuple(range(1, rank))
        _, diff = _centered(e, x, xc, dims)
        rstd = e.call("torch.rsqrt", e.binary("+", _biased_var(e, x, diff, dims), c.arg("eps")))
        out = _scale_shift(e, e.binary("*", diff, rstd), _channel_param(e, weight, rank), _channel_param(e, bias, rank))
        return e.cast(out, d)
    inner = e.count(x, range(2, rank))
    inner = channels // groups * inner if isinstance(inner, int) else e.binary("*", inner, channels // groups)
    grouped = e.method("reshape", xc, e.shape([e.size(x, 0), groups, inner]))
    _, diff = _centered(e, grouped, grouped, (2,))
    rstd = e.call("torch.rsqrt", e.binary("+", _biased_var(e, grouped, diff, (2,)), c.arg("eps")))
    out = e.method("reshape", e.binary("*", diff, rstd), e.shape([e.size(x, i) for i in range(rank)]))
    out = _scale_shift(e, out, _channel_param(e, weight, rank), _channel_param(e, bias, rank))
    return e.cast(out, d)


@rule("instance_norm")
def instance_norm(e: Emitter, c: Call) -> Value:
    """With the input's own statistics and no running ones (which it would update): statistics
    over the spatial dims of each (sample, channel)."""
    if not c.flag("use_input_stats"):
        raise Unsupported("running statistics: batch_norm's formula, not decomposed here")
    if c.optional_tensor("running_mean") is not None or c.optional_tensor("running_var") is not None:
        raise Unsupported("updates the running statistics")
    x = c.tensor()
    rank, channels = _channels(x)
    if rank < 3 or not _more_than_one(_shape(x)[2:]):
        raise Unsupported("one spatial element may be all there is: F.instance_norm raises then")
    dims = tuple(range(2, rank))
    xc, d = _upcast(e, x)
    weight = _affine_param(c, "weight", [channels], d)
    bias = _affine_param(c, "bias", [channels], d)
    _, diff = _centered(e, x, xc, dims)
    rstd = e.call("torch.rsqrt", e.binary("+", _biased_var(e, x, diff, dims), c.arg("eps")))
    out = _scale_shift(e, e.binary("*", diff, rstd), _channel_param(e, weight, rank), _channel_param(e, bias, rank))
    return e.cast(out, d)


@rule("batch_norm")
def batch_norm(e: Emitter, c: Call) -> Value:
    """Inference (training=False) with running statistics, arranged as ATen's CPU kernel
    arranges it for a contiguous or channels-last input: per channel alpha = 1 / sqrt(var + eps)
    * weight and beta = bias - mean * alpha, in the computation dtype, then x * alpha + beta: two
    ops an element instead of four. (ATen's build contracts the two multiply-adds into fused
    ones, which no primitive here expresses: the results differ from eager's in the last bit.)
    Training: `_batch_norm_training`."""
    if c.flag("training"):
        return _batch_norm_training(e, c)
    x = c.tensor()
    rank, channels = _channels(x)
    xc, d = _upcast(e, x)
    ct = COMPUTE_DTYPE[d]
    stats = [_affine_param(c, n, [channels], d) for n in ("running_mean", "running_var")]
    if stats[0] is None or stats[1] is None:
        raise Unsupported("eval needs running statistics")
    weight = _affine_param(c, "weight", [channels], d)
    bias = _affine_param(c, "bias", [channels], d)
    mean, var, weight, bias = (None if p is None else e.cast(p, ct) for p in (*stats, weight, bias))
    alpha = e.call("torch.reciprocal", e.call("torch.sqrt", e.binary("+", var, c.arg("eps"))))
    if weight is not None:
        alpha = e.binary("*", alpha, weight)
    beta = e.binary("-", 0 if bias is None else bias, e.binary("*", mean, alpha))
    out = e.binary("*", xc, _channel_param(e, alpha, rank))
    return e.cast(e.binary("+", out, _channel_param(e, beta, rank)), d)


def _batch_norm_training(e: Emitter, c: Call) -> Value:
    """Training (the batch's statistics), as ATen's CPU kernel computes it: per channel the
    batch's mean, then the sum of squared deviations from it (two passes), over the input seen as
    (N, C, S) rows (S the spatial size: row sums over S, then over N, so that the passes over the
    input are row reductions a kernel makes); the output `x * alpha + beta` as in inference, with
    alpha = 1 / sqrt(biased var + eps) * weight; then, where there are running statistics (a
    BatchNorm with track_running_stats=False has none: both None), `momentum * batch + (1 -
    momentum) * running` (the variance unbiased, over n - 1), written into them in place.
    Float32 and float64 (a 16-bit input keeps float32 statistics: not decomposed here)."""
    x = c.tensor()
    rank, channels = _channels(x)
    d = _float_dtype(x)
    if d not in ("float32", "float64") or type(channels) is not int:
        raise Unsupported("a 16-bit input, or channels not known")
    stats = [_affine_param(c, n, [channels], d) for n in ("running_mean", "running_var")]
    tracked = stats[0] is not None or stats[1] is not None
    if tracked and (stats[0] is None or stats[1] is None or _dtype(stats[0]) != d or _dtype(stats[1]) != d):
        raise Unsupported("one running statistic, or running statistics of another dtype than the input's")
    if not _more_than_one([_shape(x)[0], *_shape(x)[2:]]):
        raise Unsupported("one value per channel may be all there is: F.batch_norm raises then")
    momentum = c.arg("momentum")
    if tracked and (not isinstance(momentum, (Value, int, float)) or isinstance(momentum, bool)):
        raise Unsupported("momentum is not a number")
    weight = _affine_param(c, "weight", [channels], d)
    bias = _affine_param(c, "bias", [channels], d)
    spatial = e.count(x, range(2, rank))
    n = e.count(x, [0, *range(2, rank)])
    rows = e.method("reshape", x, e.shape([e.size(x, 0), channels, spatial]))
    mean = e.binary("/", e.call("torch.sum", e.call("torch.sum", rows, 2, keepdim=True), 0), n)  # (C, 1)
    diff = e.binary("-", rows, mean)
    squares = e.call("torch.sum", e.call("torch.sum", e.binary("*", diff, diff), 2, keepdim=True), 0)
    # (per channel from here: one reshape of each, read by one kernel of every per-channel value)
    mean, squares = (e.method("reshape", v, (channels,)) for v in (mean, squares))
    alpha = e.call("torch.reciprocal", e.call("torch.sqrt", e.binary("+", e.binary("/", squares, n), c.arg("eps"))))
    if weight is not None:
        alpha = e.binary("*", alpha, weight)
    beta = e.binary("-", 0 if bias is None else bias, e.binary("*", mean, alpha))
    if not tracked:
        return e.binary("+", e.binary("*", x, _channel_param(e, alpha, rank)), _channel_param(e, beta, rank))
    keep = e.binary("-", 1, momentum)
    unbiased = e.binary("/", squares, e.binary("-", n, 1))
    updated = [e.binary("+", e.binary("*", batch, momentum), e.binary("*", running, keep))  # type: ignore[arg-type]
               for running, batch in zip(stats, (mean, unbiased))]
    # (the per-channel values in one kernel, the writes, then the output: nothing splits its kernel)
    for running, new in zip(stats, updated):
        e.write(running, new)  # type: ignore[arg-type]
    return e.binary("+", e.binary("*", x, _channel_param(e, alpha, rank)), _channel_param(e, beta, rank))


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


# -- reductions -----------------------------------------------------------------------------------
def _reduction_dims(c: Call, x: Value, name: str = "dim") -> tuple[int, ...]:
    value = c.const(name) if name in c.args else None
    if value is UNKNOWN:
        raise Unsupported("dims")
    return _dims(value, _rank(x))


@rule("mean")
def mean(e: Emitter, c: Call) -> Value:
    """sum / count, summed in the computation dtype; an empty reduction gives NaN, as eager."""
    x = c.tensor()
    if "dtype" in c.args and c.const("dtype") not in (None, _dtype(x)):
        raise Unsupported("dtype")
    dims = _reduction_dims(c, x)
    xc, d = _upcast(e, x)
    return e.cast(_mean(e, x, xc, dims, _keepdim(c)), d)


def _correction(c: Call) -> float | int:
    if "correction" in c.args:
        value = c.const("correction")
        if value is None:
            return 1
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Unsupported("correction")
        return value
    if "unbiased" in c.args:
        return 1 if c.flag("unbiased") else 0
    return 1


def _var(e: Emitter, c: Call) -> tuple[Value, Value, tuple[int, ...], bool, str]:
    """The variance with the call's correction, the mean (dims kept), the dims, keepdim and the
    result dtype. Divides by max(0, count - correction), as eager."""
    x = c.tensor()
    dims = _reduction_dims(c, x)
    keepdim = _keepdim(c)
    correction = _correction(c)
    xc, d = _upcast(e, x)
    mean, diff = _centered(e, x, xc, dims)
    total = e.call("torch.sum", e.binary("*", diff, diff), _dim_arg(dims), keepdim=keepdim)
    n = e.count(x, dims)
    if isinstance(n, int):
        divisor: Operand = max(0, n - correction)
    elif correction <= 0:  # count >= 1 (symbolic sizes are positive): no clamping needed
        divisor = n if correction == 0 else e.binary("-", n, correction)
    else:
        shifted = n if correction == 0 else e.binary("-", n, correction)
        divisor = e.builtin("max", INT if isinstance(correction, int) else FLOAT, 0, shifted)
    return e.binary("/", total, divisor), mean, dims, keepdim, d


@rule("var")
def var(e: Emitter, c: Call) -> Value:
    v, _, _, _, d = _var(e, c)
    return e.cast(v, d)


@rule("std")
def std(e: Emitter, c: Call) -> Value:
    v, _, _, _, d = _var(e, c)
    return e.cast(e.call("torch.sqrt", v), d)


def _with_mean(e: Emitter, c: Call, take_sqrt: bool) -> Value:
    v, mean, dims, keepdim, d = _var(e, c)
    if take_sqrt:
        v = e.call("torch.sqrt", v)
    if not keepdim:
        mean = e.call("torch.squeeze", mean, _dim_arg(dims)) if dims else mean
    return e.tuple(e.cast(v, d), e.cast(mean, d))


@rule("var_mean")
def var_mean(e: Emitter, c: Call) -> Value:
    return _with_mean(e, c, False)


@rule("std_mean")
def std_mean(e: Emitter, c: Call) -> Value:
    return _with_mean(e, c, True)


@rule("logsumexp")
def logsumexp(e: Emitter, c: Call) -> Value:
    """log(sum(exp(x - m))) + m with m = amax(x), an infinite m taken as 0 (torch._refs)."""
    x = c.tensor()
    dims = _dims(c.const("dim"), _rank(x), all_if_empty=False)
    keepdim = _keepdim(c)
    _nonempty(x, dims)
    xc, d = _upcast(e, x)
    m = e.call("torch.amax", xc, _dim_arg(dims), keepdim=True)
    m = e.call("torch.where", e.call("torch.isinf", m), 0.0, m)
    total = e.call("torch.sum", e.call("torch.exp", e.binary("-", xc, m)), _dim_arg(dims), keepdim=keepdim)
    if not keepdim:
        m = e.call("torch.squeeze", m, _dim_arg(dims))
    return e.cast(e.binary("+", e.call("torch.log", total), m), d)


def _vector_norm(e: Emitter, x: Value, p: Any, dims: tuple[int, ...], keepdim: bool) -> Value:
    """sum(|x|^p)^(1/p) over dims, with the usual special cases (torch.linalg.vector_norm)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise Unsupported("ord")
    xc, d = _upcast(e, x)
    dim = _dim_arg(dims)
    if p == 2:
        out = e.call("torch.sqrt", e.call("torch.sum", e.binary("*", xc, xc), dim, keepdim=keepdim))
    elif p == 1:
        out = e.call("torch.sum", e.call("torch.abs", xc), dim, keepdim=keepdim)
    elif math.isinf(p):
        _nonempty(x, dims)  # eager raises: the inf norm of nothing has no identity
        out = e.call("torch.amax" if p > 0 else "torch.amin", e.call("torch.abs", xc), dim, keepdim=keepdim)
    elif p == 0:
        nonzero = e.cast(e.binary("!=", xc, 0), _dtype(xc))  # type: ignore[arg-type]
        out = e.call("torch.sum", nonzero, dim, keepdim=keepdim)
    else:
        powered = e.binary("**", e.call("torch.abs", xc), p)
        out = e.binary("**", e.call("torch.sum", powered, dim, keepdim=keepdim), 1.0 / p)
    return e.cast(out, d)


@rule("linalg_vector_norm")
def vector_norm(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    if c.const("dtype") is not None:
        raise Unsupported("dtype")
    return _vector_norm(e, x, c.const("ord"), _reduction_dims(c, x), _keepdim(c))


@rule("norm")
def norm(e: Emitter, c: Call) -> Value:
    """torch.norm: "fro" (over at most two dims) and numbers are vector norms; "nuc" stays."""
    x = c.tensor()
    if c.const("dtype") is not None or c.const("out") is not None:
        raise Unsupported("dtype or out")
    p, dims = c.const("p"), _reduction_dims(c, x)
    if p == "fro" and (c.const("dim") is None or len(dims) <= 2):
        p = 2
    elif p is None:
        p = 2.0
    return _vector_norm(e, x, p, dims, _keepdim(c))


@rule("normalize")
def normalize(e: Emitter, c: Call) -> Value:
    """x / clamp_min(norm(x, p, dim, keepdim=True), eps), as F.normalize."""
    x = c.tensor()
    if c.const("out") is not None:
        raise Unsupported("out")
    dims = _dims(c.const("dim"), _rank(x), all_if_empty=False)
    denom = e.call("torch.clamp_min", _vector_norm(e, x, c.const("p"), dims, True), c.arg("eps"))
    return e.binary("/", x, denom)


@rule("max", "min")
def max_min(e: Emitter, c: Call) -> Value:
    """torch.max(x) / torch.min(x) without a dim: amax / amin over every dim."""
    if c.op.attributes.get("aten") not in ("aten::max", "aten::min"):
        raise Unsupported("the dim and binary forms are primitives")
    x = c.tensor()
    _nonempty(x, range(_rank(x)))
    return e.call("torch.amax" if c.name == "max" else "torch.amin", x, ())


# -- views ----------------------------------------------------------------------------------------
def _permute(e: Emitter, x: Value, perm: Sequence[int]) -> Value:
    return e.method("permute", x, tuple(perm))


def _swap(rank: int, a: int, b: int) -> list[int]:
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


@rule("transpose", "swapaxes", "swapdims")
def transpose(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    names = ("dim0", "dim1") if "dim0" in c.args else ("axis0", "axis1")
    return _permute(e, x, _swap(rank, _dim(c.const(names[0]), rank), _dim(c.const(names[1]), rank)))


@rule("t")
def t(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if rank > 2:
        raise Unsupported("t() of more than 2 dims raises")
    return _permute(e, x, list(reversed(range(rank))))


@rule("T", "mT")
def transpose_attribute(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if c.name == "T":
        return _permute(e, x, list(reversed(range(rank))))
    if rank < 2:
        raise Unsupported("mT needs 2 dims")
    return _permute(e, x, _swap(rank, rank - 2, rank - 1))


@rule("movedim", "moveaxis")
def movedim(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    source = _dims(c.const("source"), rank, all_if_empty=False)
    destination = _dims(c.const("destination"), rank, all_if_empty=False)
    if len(source) != len(destination):
        raise Unsupported("source and destination differ in length")
    perm: list[int | None] = [None] * rank
    for s, dst in zip(source, destination):
        perm[dst] = s
    rest = iter(i for i in range(rank) if i not in source)
    return _permute(e, x, [p if p is not None else next(rest) for p in perm])


@rule("flatten")
def flatten(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if rank == 0:
        return e.method("reshape", x, (1,))
    start = _dim(c.const("start_dim") if "start_dim" in c.args else 0, rank)
    end = _dim(c.const("end_dim") if "end_dim" in c.args else -1, rank)
    if start > end:
        raise Unsupported("start_dim after end_dim raises")
    if start == end:
        return x  # eager returns the input itself
    sizes = [e.size(x, i) for i in range(start)] + [e.count(x, range(start, end + 1))]
    sizes += [e.size(x, i) for i in range(end + 1, rank)]
    return e.method("reshape", x, e.shape(sizes))


@rule("unflatten")
def unflatten(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    dim = _dim(c.const("dim"), rank)
    sizes = c.const("sizes")
    if not isinstance(sizes, tuple) or not sizes or not all(type(s) is int for s in sizes):
        raise Unsupported("sizes")
    if sizes.count(-1) == 1:
        known = math.prod(s for s in sizes if s != -1)
        inferred = exact_div(_shape(x)[dim], known) if known else None
        if inferred is None:
            raise Unsupported("the -1 size is not known")
        if type(inferred) is not int:
            inferred = e.binary("//", e.size(x, dim), known)
        new: list[Operand] = [inferred if s == -1 else s for s in sizes]
    elif -1 in sizes or any(s < 0 for s in sizes):
        raise Unsupported("sizes")
    else:
        new = list(sizes)
    shape = [e.size(x, i) for i in range(dim)] + new + [e.size(x, i) for i in range(dim + 1, rank)]
    return e.method("view", x, e.shape(shape))


def _shaped_like(e: Emitter, c: Call, method: str) -> Value:
    other = c.tensor("other")
    return e.method(method, c.tensor(), e.shape([e.size(other, i) for i in range(_rank(other))]))


@rule("expand_as")
def expand_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "expand")


@rule("view_as")
def view_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "view")


@rule("reshape_as")
def reshape_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "reshape")


# -- extern ---------------------------------------------------------------------------------------
@rule("linear")
def linear(e: Emitter, c: Call) -> Value:
    """linear(x, weight) + bias: the GEMM stays an extern call (linear without a bias is one),
    the bias add joins the pointwise ops after it (where an activation usually follows). A 1-d
    weight is a matmul."""
    x, weight = c.tensor(), c.tensor("weight")
    bias = c.optional_tensor("bias")
    _same_dtypes(x, weight, bias)
    rank = _rank(weight)
    if rank not in (1, 2):
        raise Unsupported("weight must be 1-d or 2-d")
    if rank == 2 and bias is None:
        raise Unsupported("already a primitive")
    out = e.call("torch.nn.functional.linear", x, weight) if rank == 2 else e.call("torch.matmul", x, weight)
    return out if bias is None else e.binary("+", out, bias)


@rule("conv2d")
def conv2d_of_pixels(e: Emitter, c: Call) -> Value:
    """A 1x1 convolution of 1x1 images (a squeeze-and-excitation block's layers) is a linear
    layer. At batch 8 torch's convolution took 152 us for 96 to 24 channels, the GEMM with its
    reshapes 27; at batch 1 the convolution's im2col path is a little faster (11 us against
    15), so a batch of 1 keeps it. Any stride and dilation give a 1x1 output; padding must be
    none."""
    x, weight = c.tensor(), c.tensor("weight")
    bias = c.optional_tensor("bias")
    _same_dtypes(x, weight, bias)
    if _shape(x)[2:] != (1, 1) or _rank(x) != 4 or _shape(weight)[2:] != (1, 1) or _rank(weight) != 4:
        raise Unsupported("not a 1x1 convolution of 1x1 images")
    if _shape(x)[0] == 1:
        raise Unsupported("at batch 1 torch's convolution is the faster")
    if c.const("groups") != 1 or _shape(x)[1] != _shape(weight)[1]:
        raise Unsupported("grouped, or the channels differ (eager raises)")
    if c.const("padding") not in (0, (0,), (0, 0), [0], [0, 0], "valid", "same"):
        raise Unsupported("padding makes the output larger")
    for name in ("stride", "dilation"):
        value = c.const(name)
        steps = value if isinstance(value, (tuple, list)) else (value,)
        if len(steps) not in (1, 2) or any(type(v) is not int or v < 1 for v in steps):
            raise Unsupported(f"{name} is not known to be valid")
        if name == "stride" and c.const("padding") == "same" and any(v != 1 for v in steps):
            raise Unsupported("padding='same' with a stride raises in eager")
    rows = e.method("reshape", x, e.shape([e.size(x, 0), e.size(x, 1)]))
    out = e.call("torch.nn.functional.linear", rows, e.method("reshape", weight, e.shape([e.size(weight, 0), e.size(weight, 1)])))
    if bias is not None:
        out = e.binary("+", out, bias)
    return e.method("unsqueeze", e.method("unsqueeze", out, -1), -1)


# -- identities -----------------------------------------------------------------------------------
@rule("pad", "constant_pad_nd")
def pad_by_nothing(e: Emitter, c: Call) -> Value:
    """Padding by zero on every side: eager's result is a copy of the input. When only this op
    sees the input (a new tensor read nowhere else), the copy is the input itself: swin pads each
    attention's input to a multiple of its window, by nothing at 224x224 (12 copies a call)."""
    x = c.tensor()
    pads = c.const("pad")
    rank = _rank(x)
    if type(pads) is not tuple or not pads or any(type(p) is not int or p != 0 for p in pads) \
            or len(pads) % 2 or len(pads) // 2 > rank:
        raise Unsupported("padding by something, or not known (or eager raises)")
    if "mode" in c.args and c.const("mode") != "constant":
        raise Unsupported("not constant padding")
    return x  # (the driver keeps the call unless nothing else sees x: decompose._seen_only_by)


@rule("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")
def dropout(e: Emitter, c: Call) -> Value:
    """Not training: the input itself (eager returns it), once p is known to be valid."""
    training = "training" if "training" in c.args else "train"
    if c.flag(training):
        raise Unsupported("training draws random numbers")
    p = c.number("p")
    if not 0 <= p <= 1:
        raise Unsupported("p outside [0, 1] raises")
    return c.tensor()

"""Decomposition rules for the normalizations: layer_norm, rms_norm, group_norm, instance_norm,
batch_norm (inference, and training with its running statistics written in place). Merged into
decompose_rules.RULES."""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from ir.core.graph import Value
from ir.passes.decompose_common import Rule, _centered, _mean, _upcast, registrar
from ir.passes.emitter import (
    COMPUTE_DTYPE,
    Call,
    Emitter,
    Unsupported,
    _dim_arg,
    _dtype,
    _float_dtype,
    _shape,
)
from ir.shapes.rule_table import sizes_of
from ir.shapes.values import dims_equal

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


# -- normalization --------------------------------------------------------------------------------
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

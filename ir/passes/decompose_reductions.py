"""Decomposition rules for softmax and the reductions: softmax, softmin, log_softmax, mean,
var/std (and their `_mean` forms), logsumexp, vector norms, normalize, max/min over all
elements. Merged into decompose_rules.RULES."""

from __future__ import annotations

import math
from typing import Any

from ir.core.graph import Value
from ir.core.types import FLOAT, INT
from ir.passes.decompose_common import Rule, _centered, _mean, _upcast, registrar
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
)
from ir.shapes.values import UNKNOWN

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


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


# -- reductions -----------------------------------------------------------------------------------
def _keepdim(c: Call) -> bool:
    return c.flag("keepdim") if "keepdim" in c.args else False


def _reduction_dims(c: Call, x: Value, name: str = "dim") -> tuple[int, ...]:
    value = c.const(name) if name in c.args else None
    if value is UNKNOWN:
        raise Unsupported("dims")
    return _dims(value, _rank(x))


def _over_the_last_dim(x: Value, dims: tuple[int, ...]) -> None:
    """Unsupported unless `dims` hold the last dim: fuse joins only reductions of rows to kernels,
    so a mean or variance over other dims would become torch's sums, each a call (and a variance
    a kernel writing every squared difference between them) where eager makes one call:
    `x.var(dim=0)` of an [8, 32] tensor, 6.3 us eager and 9.0 decomposed; `x.mean(dim=0)` 4.1 and
    5.1. The composite stays, eager's own op."""
    rank = _rank(x)
    if rank >= 1 and rank - 1 not in dims:
        raise Unsupported("a reduction that keeps the last dim does not fuse")


@rule("mean")
def mean(e: Emitter, c: Call) -> Value:
    """sum / count, summed in the computation dtype; an empty reduction gives NaN, as eager."""
    x = c.tensor()
    if "dtype" in c.args and c.const("dtype") not in (None, _dtype(x)):
        raise Unsupported("dtype")
    dims = _reduction_dims(c, x)
    _over_the_last_dim(x, dims)
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
    _over_the_last_dim(x, dims)
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

"""torchscribe's Triton helpers, which the Triton kernels of compiled modules import (under their
`if triton is not None:`, so that Triton is imported only where a kernel runs on it): torch's
semantics where triton.language's differ, math Triton's interpreter lacks (libdevice does not
run under TRITON_INTERPRET=1), float scalars passed as their float64's bits, and the block size
heuristics of the launchers. Kernels hold 16-bit floats as float32 values. Conditions are
nested tl.where rather than `|` and `&` of comparisons: the interpreter cannot combine a 0-d
comparison with a block that way.

The kernels that call these are written by codegen/triton_kernels.py (its docstring says how);
the polynomials of ts_expm1 and ts_log1p are Taylor series, to the precision of each
dtype."""

from __future__ import annotations

import struct

import triton
import triton.language as tl


@triton.jit
def ts_maximum(a, b):
    # torch.maximum: NaN when either is NaN (tl.maximum may return the other operand)
    return tl.where(a != a, a, tl.where(a > b, a, b))


@triton.jit
def ts_minimum(a, b):
    return tl.where(a != a, a, tl.where(a < b, a, b))


@triton.jit
def ts_max_rows(x):
    # each row's maximum (axis 1), NaN when the row holds one (tl.max skips NaNs)
    nan = tl.max((x != x).to(tl.int32), axis=1, keep_dims=True) > 0
    return tl.where(nan, float("nan"), tl.max(x, axis=1, keep_dims=True))


@triton.jit
def ts_min_rows(x):
    nan = tl.max((x != x).to(tl.int32), axis=1, keep_dims=True) > 0
    return tl.where(nan, float("nan"), tl.min(x, axis=1, keep_dims=True))


@triton.jit
def ts_sqrt(x):
    # correctly rounded, as torch's (tl.sqrt of float32 is approximate on GPUs)
    if x.dtype == tl.float32:
        return tl.math.sqrt_rn(x)
    else:
        return tl.sqrt(x)


@triton.jit
def ts_trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def ts_expm1(x):
    # exp(x) - 1 cancels near 0: a Taylor polynomial there (x + x^2 p(x), p's coefficients 1/k!),
    # to the precision of x's dtype for |x| < 0.25 (the first term left out is below half an ulp)
    if x.dtype == tl.float64:
        p = (0.5 + x * (0.16666666666666666 + x * (0.041666666666666664 + x * (0.008333333333333333
            + x * (0.001388888888888889 + x * (0.0001984126984126984 + x * (2.48015873015873e-05
            + x * (2.7557319223985893e-06 + x * (2.755731922398589e-07
            + x * (2.505210838544172e-08 + x * 2.08767569878681e-09))))))))))
    else:
        p = (0.5 + x * (0.16666666666666666 + x * (0.041666666666666664 + x * (0.008333333333333333
            + x * (0.001388888888888889 + x * 0.0001984126984126984)))))
    y = tl.where(tl.abs(x) < 0.25, x + x * x * p, tl.exp(x) - 1.0)
    return tl.where(x == 0, x, y)  # (expm1(-0.0) is -0.0)


@triton.jit
def ts_log1p(x):
    # log(1 + x) loses x's low digits near 0: there 2 atanh(s) = 2 (s + s^3/3 + ...), s = x / (2 + x),
    # q's coefficients 1/(2k+1), for |x| < 0.25 (|s| < 0.143)
    s = x / (2.0 + x)
    z = s * s
    if x.dtype == tl.float64:
        q = (0.3333333333333333 + z * (0.2 + z * (0.14285714285714285 + z * (0.1111111111111111
            + z * (0.09090909090909091 + z * (0.07692307692307693 + z * (0.06666666666666667
            + z * (0.058823529411764705 + z * 0.05263157894736842))))))))
    else:
        q = 0.3333333333333333 + z * (0.2 + z * (0.14285714285714285 + z * 0.1111111111111111))
    t = s + s
    return tl.where(tl.abs(x) < 0.25, t + t * z * q, tl.log(1.0 + x))


@triton.jit
def ts_tanh(x):
    # tanh|x| = t / (t + 2) with t = expm1(2|x|), accurate near 0 too; above 20 it rounds to 1
    a = tl.minimum(tl.abs(x), 20.0)
    t = ts_expm1(a + a)
    y = t / (t + 2.0)
    y = tl.where(x < 0, -y, y)
    return tl.where(x == 0, x, tl.where(x != x, x, y))


@triton.jit
def ts_pow(x, y):
    # C's pow (torch's): exp(y log|x|) in float64, negative for a negative x to an odd integer
    # power, NaN for a finite negative x to a non-integer one; x ** 0 and 1 ** y are 1 (NaN too),
    # and so is (-1) ** +-inf
    xd, yd = tl.broadcast(x.to(tl.float64), y.to(tl.float64))
    r = tl.exp(yd * tl.log(tl.abs(xd)))
    integer = tl.floor(yd) == yd
    odd = integer & ((yd - 2.0 * tl.floor(0.5 * yd)) == 1.0)
    r = tl.where((xd < 0) & odd, -r, r)
    r = tl.where((xd < 0) & (xd > float("-inf")) & (integer == 0), float("nan"), r)
    one = (yd == 0) | (xd == 1) | ((xd == -1) & (tl.abs(yd) == float("inf")))
    return tl.where(one, 1.0, r).to(x.dtype)


@triton.jit
def ts_double(bits):
    # a float scalar, passed as its float64's bits (Triton would pass a Python float as float32)
    return bits.to(tl.int64).to(tl.float64, bitcast=True)


_TS_F64 = struct.Struct("<d")
_TS_I64 = struct.Struct("<q")


def ts_bits(x: float) -> int:
    """A Python float as the bits of its float64, for ts_double."""
    return _TS_I64.unpack(_TS_F64.pack(x))[0]


TS_TILE = 1024  # elements per program of a pointwise kernel (8 per thread of 4 warps)
TS_ROW_BLOCK_MAX = 4096  # the longest row a reduction kernel holds in one block; longer rows loop
TS_LOOP_BLOCK = 1024  # columns per step of a loop over a long row


def ts_tile(n_rows: int, n: int) -> tuple[int, int, int]:
    """ROWS, COLS and num_warps of a pointwise kernel: the last dim's power of two (up to
    TS_TILE) of columns, and rows to fill the tile."""
    cols = min(triton.next_power_of_2(n), TS_TILE)
    rows = min(triton.next_power_of_2(n_rows), TS_TILE // cols)
    return rows, cols, max(1, min(4, rows * cols // 256))


def ts_row_tile(n_rows: int, n: int) -> tuple[int, int, int]:
    """ROWS, BLOCK and num_warps of a row-reduction kernel: whole rows in one block when they fit,
    else steps of TS_LOOP_BLOCK along the rows; rows to fill TS_TILE elements."""
    if n > TS_ROW_BLOCK_MAX:
        block = TS_LOOP_BLOCK
    else:
        block = triton.next_power_of_2(max(n, 2))  # (Triton 3.2's interpreter ignores a one-element mask)
    rows = min(triton.next_power_of_2(n_rows), max(1, TS_TILE // block))
    return rows, block, max(1, min(8, rows * block // 256))

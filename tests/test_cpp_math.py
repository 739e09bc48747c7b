"""codegen/cpp_math.py: every function, float and double, against torch's CPU result and a
correctly rounded reference (ULP bounds of cpp_math.functions()), exact IEEE special values, and
a loop calling it vectorised by the compiler with the flags runtime/native.py builds kernels with.

The reference: float32 results rounded from torch's float64 ones; float64 results rounded from
numpy's long double (x87 80-bit: glibc's expl, sinl, ...), or mpmath for erf, erfc and gelu.

`python -m tests.test_cpp_math` prints the measured maxima (the table of docs/cpp_math.md) and
times each vectorised loop against torch on 1e6 floats (one thread).
"""

from __future__ import annotations

import ctypes
import math
import platform

import numpy as np
import pytest
import torch

from codegen import cpp_math
from runtime import native

CHAIN = native.toolchain()
pytestmark = pytest.mark.skipif(CHAIN is None, reason="no C++ compiler")
GCC_X86 = CHAIN is not None and "clang" not in CHAIN.version and platform.machine() in ("x86_64", "AMD64")

FUNCS = {f.name: f for f in cpp_math.functions()}
NP = {"float32": np.float32, "float64": np.float64}
INT = {"float32": np.int32, "float64": np.int64}
INF, NAN = math.inf, math.nan


def kernel_name(name: str, dtype: str) -> str:
    return f"k_{name}_{dtype}"


def kernels() -> list[tuple[str, str]]:
    return [(f.name, d) for f in cpp_math.functions() for d in f.dtypes]


SOURCE = cpp_math.MATH_HEADER + "".join(
    cpp_math.kernel_source(FUNCS[name], dtype, kernel_name(name, dtype)) + "\n" for name, dtype in kernels())


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        return native.load(SOURCE)


def call(lib: ctypes.CDLL, name: str, dtype: str, *xs: np.ndarray) -> np.ndarray:
    xs = tuple(np.ascontiguousarray(x, dtype=NP[dtype]) for x in xs)
    out = np.empty_like(xs[0])
    fn = getattr(lib, kernel_name(name, dtype))
    fn(*(ctypes.c_void_p(x.ctypes.data) for x in xs), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(out.size))
    return out


# ---- ULP distance ------------------------------------------------------------------------------

def ordered(a: np.ndarray) -> np.ndarray:
    """The floats as integers in the order of their values (+0 and -0 both 0)."""
    it = INT[str(a.dtype)]
    i = a.view(it).astype(np.int64)
    return np.where(i < 0, np.int64(np.iinfo(it).min) - i, i)


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many representable values apart a and b are (as float64; 0 for two NaNs, inf for one)."""
    oa, ob = ordered(a), ordered(b)
    same = (oa >= 0) == (ob >= 0)
    with np.errstate(over="ignore"):
        d = np.where(same, np.abs(np.where(same, oa - ob, 0)), 0).astype(np.float64)
    d = np.where(same, d, np.abs(oa.astype(np.float64) - ob.astype(np.float64)))
    na, nb = np.isnan(a), np.isnan(b)
    d[na & nb] = 0
    d[na ^ nb] = np.inf
    return d


def step(dtype: str, points, k: int = 48) -> np.ndarray:
    """The 2k+1 representable values around each point."""
    it = INT[dtype]
    o = ordered(np.asarray(points, dtype=NP[dtype]))[:, None] + np.arange(-k, k + 1)[None, :]
    i = np.where(o < 0, np.int64(np.iinfo(it).min) - o, o).astype(it)
    return i.reshape(-1).view(NP[dtype])


# ---- samples -----------------------------------------------------------------------------------

# main uniform range, points where the method or the result changes regime (thresholds of
# overflow, underflow, subnormal results, polynomial/formula switches)
RANGES = {
    "ts_exp": ((-110, 90), [88.72283935546875, -87.33654, -103.97208, -103.27893, 0.34657359, -0.34657359],
               (-750, 712), [709.782712893384, -708.3964185322641, -745.1332191019412, -744.44]),
    "ts_expm1": ((-20, 90), [88.72283935546875, 0.34657359, -0.34657359, -17.0, 1e-7],
                 (-40, 712), [709.782712893384, 0.34657359028, -37.5, 1e-16]),
    "ts_log": ((0, 10), [1.0, 0.70710677, 1.4142135, 2.0, 0.5], (0, 10), [1.0, 0.7071067811865476, 2.0]),
    "ts_log1p": ((-1, 10), [-1.0, 0.0, 1.0, -0.29289323, 0.41421357], (-1, 10), [-1.0, 0.0, 1.0, -0.2928932188]),
    "ts_log2": ((0, 10), [1.0, 0.70710677, 1.4142135, 2.0, 0.5], (0, 10), [1.0, 0.7071067811865476, 2.0]),
    "ts_tanh": ((-10, 10), [0.55, -0.55, 9.0, -9.0], (-20, 20), [0.55, -0.55, 19.0]),
    "ts_sigmoid": ((-110, 40), [-88.72, -103.28, 0.0, 17.0], (-750, 40), [-709.78, -745.13, 37.0]),
    "ts_erf": ((-5, 5), [0.75, -0.75, 3.9], (-7, 7), [0.75, -0.75, 5.9]),
    "ts_erfc": ((-5, 11), [0.75, -0.75, 9.2, 10.05], (-7, 28), [0.75, -0.75, 26.2, 26.55]),
    "ts_gelu": ((-15, 10), [-14.2, -13.1, -1.0607, 1.0607], (-40, 10), [-38.0, -1.0606601717798212]),
    "ts_sin": ((-1e4, 1e4), [math.pi, 2 * math.pi, 1e4], (-1e5, 1e5), [math.pi, 1e5]),
    "ts_cos": ((-1e4, 1e4), [math.pi / 2, 1e4], (-1e5, 1e5), [math.pi / 2, 1e5]),
}
TRIG_LIMIT = 2.0 ** 50  # documented: sin and cos are NaN from there on


def sample(name: str, dtype: str, n: int, seed: int = 0) -> np.ndarray:
    """n values: half uniform over the function's main range, a quarter with uniformly random bit
    patterns (every magnitude, subnormals, NaNs and infinities), a quarter log-uniform up to the
    range's bound (down to 2^-30 / 2^-60), plus special values and the floats around thresholds."""
    rng = np.random.default_rng(seed)
    t = NP[dtype]
    f32 = dtype == "float32"
    (lo, hi), points = (RANGES[name][0], RANGES[name][1]) if f32 else (RANGES[name][2], RANGES[name][3])
    it = np.uint32 if f32 else np.uint64
    mag = max(abs(lo), abs(hi))
    parts = [
        rng.uniform(lo, hi, n // 2).astype(t),
        rng.integers(0, np.iinfo(it).max, n // 4, dtype=it, endpoint=True).view(t),
        (np.exp2(rng.uniform(-30 if f32 else -60, math.log2(mag), n // 4)) * rng.choice([-1.0, 1.0], n // 4)).astype(t),
    ]
    fi = np.finfo(t)
    special = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 2.0, 0.5, fi.tiny, -fi.tiny, fi.smallest_subnormal,
               -fi.smallest_subnormal, fi.max, -fi.max, fi.tiny / 3, -fi.tiny / 3]
    parts += [np.array(special, dtype=t), step(dtype, points)]
    if name in ("ts_sin", "ts_cos"):  # the floats nearest multiples of pi/2 (tiny results)
        k = np.concatenate([np.arange(1, 2000), rng.integers(1, 2 ** 40, 2000)]).astype(np.float64)
        half_pi = np.longdouble("1.57079632679489661923132169163975144")  # to 64 bits
        near = (np.longdouble(k) * half_pi).astype(t)
        parts.append(np.concatenate([near, -near]))
    x = np.concatenate(parts)
    with np.errstate(invalid="ignore"):
        if name in ("ts_sin", "ts_cos"):
            x = x[~(np.abs(x) >= TRIG_LIMIT) | ~np.isfinite(x)]
    return x


# ---- references --------------------------------------------------------------------------------

TORCH = {
    "ts_exp": torch.exp, "ts_expm1": torch.expm1, "ts_log": torch.log, "ts_log1p": torch.log1p,
    "ts_log2": torch.log2, "ts_tanh": torch.tanh, "ts_sigmoid": torch.sigmoid, "ts_erf": torch.erf,
    "ts_erfc": torch.erfc, "ts_gelu": torch.nn.functional.gelu, "ts_sin": torch.sin, "ts_cos": torch.cos,
}


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """The correctly rounded result (to within a double rounding from a much wider type)."""
    with np.errstate(all="ignore"):
        if x.dtype == np.float32:
            xd = torch.from_numpy(x.astype(np.float64))
            if name == "ts_gelu":  # x/2 erfc(-x/sqrt2): torch's float64 gelu cancels in the tail
                r = 0.5 * xd * torch.special.erfc(-xd * 2 ** -0.5)
                r[xd == -INF] = NAN
            else:
                r = TORCH[name](xd)
            return r.numpy().astype(np.float32)
        if name in ("ts_erf", "ts_erfc", "ts_gelu"):
            return _mpmath(name, x)
        ld = x.astype(np.longdouble)
        f = {"ts_exp": np.exp, "ts_expm1": np.expm1, "ts_log": np.log, "ts_log1p": np.log1p, "ts_log2": np.log2,
             "ts_tanh": np.tanh, "ts_sigmoid": lambda v: 1 / (1 + np.exp(-v)), "ts_sin": np.sin, "ts_cos": np.cos}[name]
        return f(ld).astype(np.float64)


def _mpmath(name: str, x: np.ndarray) -> np.ndarray:
    import mpmath

    f = {"ts_erf": mpmath.erf, "ts_erfc": mpmath.erfc,
         "ts_gelu": lambda v: v / 2 * mpmath.erfc(-v / mpmath.sqrt(2))}[name]
    limit = {"ts_erf": lambda v: math.copysign(1.0, v), "ts_erfc": lambda v: 0.0 if v > 0 else 2.0,
             "ts_gelu": lambda v: v if v > 0 else NAN if v == -INF else -0.0}[name]
    out = np.empty(x.size)
    with mpmath.workprec(100):
        for i, v in enumerate(x.tolist()):
            out[i] = NAN if v != v else limit(v) if abs(v) > 1e6 else float(f(mpmath.mpf(v)))
    return out


def measure(lib: ctypes.CDLL, name: str, dtype: str, n: int | None = None, seed: int = 0) -> dict:
    """Max ULP of the kernel against the reference and against torch (where torch is itself within
    1 ulp of the reference), on sample(name, dtype, n)."""
    if n is None:
        n = 20_000 if (dtype == "float64" and name in ("ts_erf", "ts_erfc", "ts_gelu")) else 1_000_000
    x = sample(name, dtype, n, seed)
    got = call(lib, name, dtype, x)
    ref = reference(name, x)
    with torch.no_grad():
        theirs = TORCH[name](torch.from_numpy(x)).numpy()
    d_ref = ulps(got, ref)
    torch_ok = ulps(theirs, ref) <= 1
    d_torch = np.where(torch_ok, ulps(got, theirs), 0)
    i = int(np.argmax(d_ref))
    return {"n": x.size, "ulp": float(d_ref.max()), "ulp_torch": float(d_torch.max()),
            "torch_off": int((~torch_ok).sum()), "worst": (x[i], got[i], ref[i])}


# ---- tests -------------------------------------------------------------------------------------

UNARY = [k for k in kernels() if FUNCS[k[0]].arity == 1]


@pytest.mark.parametrize("name,dtype", UNARY, ids=[f"{n}-{d}" for n, d in UNARY])
def test_accuracy(lib: ctypes.CDLL, name: str, dtype: str) -> None:
    m = measure(lib, name, dtype)
    fn = FUNCS[name]
    assert m["ulp"] <= fn.ulp[dtype], f"{name} {dtype}: {m}"
    assert m["ulp_torch"] <= fn.ulp_torch[dtype], f"{name} {dtype}: {m}"


SPECIAL = {  # (x, expected) exactly, signed zeros included; checked against torch float64 too
    "ts_exp": [(-INF, 0.0), (INF, INF), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (-1000.0, 0.0), (1000.0, INF)],
    "ts_expm1": [(-INF, -1.0), (INF, INF), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (-1000.0, -1.0), (1000.0, INF)],
    "ts_log": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (1.0, 0.0)],
    "ts_log1p": [(-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "ts_log2": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (INF, INF), (NAN, NAN), (1.0, 0.0), (0.5, -1.0),
                (1024.0, 10.0)],
    "ts_tanh": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (30.0, 1.0), (-30.0, -1.0)],
    "ts_sigmoid": [(INF, 1.0), (-INF, 0.0), (NAN, NAN), (0.0, 0.5), (-0.0, 0.5), (-1000.0, 0.0), (1000.0, 1.0)],
    "ts_erf": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (10.0, 1.0), (-10.0, -1.0)],
    "ts_erfc": [(INF, 0.0), (-INF, 2.0), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (30.0, 0.0), (-10.0, 2.0)],
    "ts_gelu": [(INF, INF), (-INF, NAN), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (-60.0, -0.0), (60.0, 60.0)],
    "ts_sin": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "ts_cos": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0)],
}


def same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal values with equal signs (zeros), or both NaN."""
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


@pytest.mark.parametrize("name", list(SPECIAL))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_special_values(lib: ctypes.CDLL, name: str, dtype: str) -> None:
    x = np.array([v for v, _ in SPECIAL[name]], dtype=NP[dtype])
    want = np.array([w for _, w in SPECIAL[name]], dtype=NP[dtype])
    got = call(lib, name, dtype, x)
    assert same(got, want).all(), f"{name} {dtype}: {list(zip(x, got, want))}"
    theirs = TORCH[name](torch.from_numpy(x.astype(np.float64))).numpy().astype(NP[dtype])
    assert same(theirs, want).all(), f"torch {name}: {list(zip(x, theirs, want))}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_subnormal_inputs_and_results(lib: ctypes.CDLL, dtype: str) -> None:
    t = NP[dtype]
    fi = np.finfo(t)
    tiny = np.array([fi.smallest_subnormal, fi.tiny / 2, -fi.smallest_subnormal, -fi.tiny / 7], dtype=t)
    for name in ("ts_expm1", "ts_log1p", "ts_tanh", "ts_sin"):  # f(x) = x for tiny x
        assert same(call(lib, name, dtype, tiny), tiny).all(), name
    for name in ("ts_exp", "ts_cos", "ts_erfc"):
        assert (call(lib, name, dtype, tiny) == 1).all(), name
    for name in ("ts_erf", "ts_gelu"):  # 2x/sqrt(pi), x/2
        assert (ulps(call(lib, name, dtype, tiny), reference(name, tiny)) <= FUNCS[name].ulp[dtype]).all(), name
    # log of subnormals, and subnormal results: as the correctly rounded reference
    logs = call(lib, "ts_log", dtype, np.abs(tiny))
    assert (ulps(logs, reference("ts_log", np.abs(tiny))) <= 1).all()
    lo = -745.0 if dtype == "float64" else -103.0
    x = np.linspace(lo, lo + 10, 1001).astype(t)
    for name in ("ts_exp", "ts_sigmoid"):
        got = call(lib, name, dtype, x)
        assert (got < fi.tiny).any() and (got > 0).any()
        assert (ulps(got, reference(name, x)) <= 1).all(), name


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sin_cos_beyond_the_documented_range_is_nan(lib: ctypes.CDLL, dtype: str) -> None:
    x = np.array([TRIG_LIMIT, -TRIG_LIMIT, 1e30, -3e38], dtype=NP[dtype])
    for name in ("ts_sin", "ts_cos"):
        assert np.isnan(call(lib, name, dtype, x)).all()
    below = np.nextafter(NP[dtype](TRIG_LIMIT), NP[dtype](0))
    assert not np.isnan(call(lib, "ts_sin", dtype, np.array([below, -below], dtype=NP[dtype]))).any()


def test_pow_float32(lib: ctypes.CDLL) -> None:
    rng = np.random.default_rng(3)
    n = 400_000
    x = np.concatenate([rng.uniform(0, 10, n), np.exp2(rng.uniform(-60, 60, n)) * rng.choice([-1.0, 1.0], n),
                        rng.integers(-9, 10, n)]).astype(np.float32)
    y = np.concatenate([rng.uniform(-20, 20, n), rng.uniform(-3, 3, n), rng.integers(-40, 40, n)]).astype(np.float32)
    special = np.array([NAN, 0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, 2.0 ** 30, 1e-45, INF, -INF],
                       dtype=np.float32)
    sx, sy = np.meshgrid(special, special, indexing="ij")
    x, y = np.concatenate([x, sx.ravel()]), np.concatenate([y, sy.ravel()])
    got = call(lib, "ts_pow", "float32", x, y)
    with np.errstate(over="ignore"):
        ref = torch.pow(torch.from_numpy(x).double(), torch.from_numpy(y).double()).numpy().astype(np.float32)
    theirs = torch.pow(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    d = ulps(got, ref)
    i = int(np.argmax(d))
    assert d.max() <= FUNCS["ts_pow"].ulp["float32"], (x[i], y[i], got[i], ref[i])
    assert same(got[-special.size ** 2:], ref[-special.size ** 2:]).all()  # C99 special cases, exactly
    ok = ulps(theirs, ref) <= 1
    assert np.where(ok, ulps(got, theirs), 0).max() <= FUNCS["ts_pow"].ulp_torch["float32"]


def test_every_loop_is_vectorised() -> None:
    lines = SOURCE.splitlines()
    where = {k: lines.index(cpp_math.kernel_source(FUNCS[k[0]], k[1], kernel_name(*k))) + 1 for k in kernels()}
    vectorised = cpp_math.vectorized_lines(cpp_math.vectorization_report(SOURCE))
    assert {k: line in vectorised for k, line in where.items()} == {k: True for k in where}


@pytest.mark.skipif(not GCC_X86, reason="checks gcc on x86-64")
def test_every_loop_is_vectorised_with_avx2_only() -> None:
    """Without AVX-512 (no masked operations, no 64-bit integer<->double conversions) too."""
    lines = SOURCE.splitlines()
    where = [lines.index(cpp_math.kernel_source(FUNCS[k[0]], k[1], kernel_name(*k))) + 1 for k in kernels()]
    vectorised = cpp_math.vectorized_lines(cpp_math.vectorization_report(SOURCE, extra_flags=("-march=haswell",)))
    assert set(where) <= vectorised, sorted(set(where) - vectorised)


def test_erf_fast_is_within_its_absolute_bound_and_exact_where_erf_rounds_to_one() -> None:
    """ts_erf_fast (an erf for `1 + erf(x)`): its absolute error bound, +-1 exactly from 3.92 on
    (so `1 + erf(x)` is 0 where eager's is), the special values as erf's, and a vectorised loop."""
    what, bounds = cpp_math.ABSOLUTE["ts_erf_fast"]
    fn = cpp_math.MathFunction("ts_erf_fast", what, 1, {}, {})
    source = cpp_math.MATH_HEADER + cpp_math.kernel_source(fn, "float32", "k_erf_fast") + "\n"
    lib = native.load(source)
    dense = np.arange(np.float32(1.5).view(np.int32), np.float32(4.0).view(np.int32), dtype=np.int32).view(np.float32)
    rng = np.random.default_rng(5)
    x = np.concatenate([dense, rng.uniform(-8, 8, 1_000_000).astype(np.float32)])
    out = np.empty_like(x)
    lib.k_erf_fast(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size))
    error = np.abs(out.astype(np.float64) - torch.special.erf(torch.from_numpy(x).double()).numpy())
    assert error.max() <= bounds["float32"], (x[np.argmax(error)], error.max())
    assert (np.abs(out[np.abs(x) >= 3.92]) == 1).all()
    special = np.array([INF, -INF, NAN, 0.0, -0.0, 10.0, -10.0, 3.92, -1e30], dtype=np.float32)
    got = np.empty_like(special)
    lib.k_erf_fast(ctypes.c_void_p(special.ctypes.data), ctypes.c_void_p(got.ctypes.data), ctypes.c_int64(special.size))
    want = np.array([1.0, -1.0, NAN, 0.0, -0.0, 1.0, -1.0, 1.0, -1.0], dtype=np.float32)
    assert same(got, want).all(), list(zip(special, got))
    line = source.splitlines().index(cpp_math.kernel_source(fn, "float32", "k_erf_fast")) + 1
    assert line in cpp_math.vectorized_lines(cpp_math.vectorization_report(source))


def test_listing_matches_the_header() -> None:
    for name in cpp_math.ABSOLUTE:
        assert f"{name}(" in cpp_math.MATH_HEADER
    for f in cpp_math.functions():
        assert f"{f.name}(" in cpp_math.MATH_HEADER
        for dtype in f.dtypes:
            assert f.ulp[dtype] is not None and f.ulp_torch[dtype] is not None
    assert {f.name for f in cpp_math.functions()} >= {"ts_exp", "ts_expm1", "ts_log", "ts_log1p", "ts_log2", "ts_tanh",
                                                      "ts_sigmoid", "ts_erf", "ts_erfc", "ts_sin", "ts_cos"}


def test_vectorized_lines_parses_gcc_and_clang_reports() -> None:
    report = ("/tmp/x/kernels.cpp:12:5: optimized: loop vectorized using 32 byte vectors\n"
              "kernels.cpp:14:1: missed: couldn't vectorize loop\n"
              "kernels.cpp:20:3: remark: vectorized loop (vectorization width: 8, interleaved count: 4)\n")
    assert cpp_math.vectorized_lines(report) == {12, 20}


# ---- figures for docs/cpp_math.md --------------------------------------------------------------

def main() -> None:
    import time

    lib = native.load(SOURCE)
    print(f"{'function':12s} {'dtype':8s} {'n':>9s} {'ulp':>4s} {'vs torch':>8s} {'torch>1ulp':>10s}")
    for name, dtype in kernels():
        if FUNCS[name].arity != 1:
            continue
        m = measure(lib, name, dtype)
        print(f"{name:12s} {dtype:8s} {m['n']:9d} {m['ulp']:4.0f} {m['ulp_torch']:8.0f} {m['torch_off']:10d}")
    torch.set_num_threads(1)
    timing_range = {"ts_log": (0, 100), "ts_log2": (0, 100), "ts_log1p": (-1, 100), "ts_sin": (-1e4, 1e4),
                    "ts_cos": (-1e4, 1e4)}
    print("\n1e6 float32 uniform over [-10, 10] (log: (0, 100], log1p: (-1, 100], sin/cos: [-1e4, 1e4]),"
          " one thread, best of 20 (ms): ours, torch")
    for name in TORCH:
        lo, hi = timing_range.get(name, (-10, 10))
        x = np.random.default_rng(0).uniform(lo, hi, 1_000_000).astype(np.float32)
        t = torch.from_numpy(x)
        out = np.empty_like(x)
        fn = getattr(lib, kernel_name(name, "float32"))
        args = (ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size))

        def best(f) -> float:
            times = []
            for _ in range(20):
                start = time.perf_counter()
                f()
                times.append(time.perf_counter() - start)
            return min(times) * 1e3

        ours, theirs = best(lambda: fn(*args)), best(lambda: TORCH[name](t))
        print(f"{name:12s} {ours:7.3f} {theirs:7.3f}  x{theirs / ours:.2f}")


if __name__ == "__main__":
    main()

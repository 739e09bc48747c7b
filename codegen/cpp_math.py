"""Vectorisable math for the fused C++ kernels: `MATH_HEADER`, the text of the checked-in header
runtime/include/torchscribe/vecmath.h (branch-free, inlinable float and double implementations
of exp, expm1, log, log1p, log2, tanh, sigmoid, erf, erfc, gelu, sin, cos and (float) pow, named
`torchscribe::ts_<name>`), and what the tests know of each function.

Why: kernels are built with `g++ -O3 -march=native -fno-math-errno` and no -ffast-math (NaN, inf
and signed zeros must behave as in torch), and without -ffast-math gcc calls glibc's scalar expf,
tanhf, ... which keeps the loop around them from being vectorised. These are written so that gcc
vectorises such a loop (checked by `vectorization_report`, see tests/test_cpp_math.py):

- Cody-Waite range reduction (exact first step with fma) and Remez minimax polynomials fitted for
  relative error, coefficients rounded to the working precision one at a time with a refit of the
  lower ones; powers of two built in the exponent field (memcpy bit casts), two half-steps so
  subnormal results round once; rounding to an integer with the 1.5*2^p shifter, so no
  float<->int conversion needs AVX-512 (double k, exponents) and nothing calls libm.
- Every select is a bit-mask blend (`math_detail::sel`) of values computed on every path: with a
  plain ternary gcc sinks a computation into one branch, and under -ftrapping-math (the default)
  will not if-convert floating-point operations there, so the loop would not vectorise.
- Special values are selected last: NaN propagates, +-inf and +-0 as in torch/C99, subnormal
  inputs and results are handled (log prescales, exp scales in two steps, sigmoid and gelu keep
  the tiny results torch gets as 0 by overflow or cancellation; see docs/cpp_math.md).

Requires hardware fma for speed (x86-64-v3 / AVX2+FMA, any AArch64): without it std::fma is a
libm call and the loops do not vectorise (results stay correct). float sin/cos and pow compute
in double internally (vectorised with float<->double conversions).

`functions()` lists what exists with the error bounds the tests assert (ULP against the correctly
rounded result and against torch's CPU result; see docs/cpp_math.md for ranges and timings).
Generated kernels include it through runtime/include/torchscribe/kernels.h and call
`torchscribe::ts_exp(x)` etc.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runtime.native import INCLUDE_DIR

# The header is the source: generated kernels include it (runtime/native.py compiles them with
# its directory on the include path), and the tests compile this text.
MATH_HEADER = (INCLUDE_DIR / "torchscribe" / "vecmath.h").read_text(encoding="utf-8")


@dataclass(frozen=True)
class MathFunction:
    """One function of MATH_HEADER: its C++ name, the torch function it matches, its arity, and
    per dtype ("float32", "float64") the largest error in ULP measured by the tests against the
    correctly rounded result (`ulp`) and against torch's CPU result (`ulp_torch`, on the inputs
    where torch is itself within 1 ulp; None: not provided for that dtype)."""

    name: str
    torch_name: str
    arity: int
    ulp: dict[str, int | None]
    ulp_torch: dict[str, int | None]
    domain: str = ""

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(d for d, bound in self.ulp.items() if bound is not None)


def _f(name: str, torch_name: str, f32: int, f64: int, t32: int, t64: int, domain: str = "",
       arity: int = 1) -> MathFunction:
    return MathFunction(name, torch_name, arity, {"float32": f32, "float64": f64},
                        {"float32": t32, "float64": t64}, domain)


# Bounds asserted by tests/test_cpp_math.py: the maxima measured over 13e6 values per function and
# dtype (3.2e5 for float64 erf/erfc/gelu), four random samples; ranges in docs/cpp_math.md.
# ulp_torch counts the inputs where torch is itself within 1 ulp of the correctly rounded result
# (it is not, by overflow or cancellation, in sigmoid's and gelu's negative tails).
FUNCTIONS: tuple[MathFunction, ...] = (
    _f("ts_exp", "torch.exp", 1, 1, 1, 1),
    _f("ts_expm1", "torch.expm1", 1, 1, 1, 1),
    _f("ts_log", "torch.log", 1, 1, 1, 1),
    _f("ts_log1p", "torch.log1p", 1, 1, 1, 1),
    _f("ts_log2", "torch.log2", 1, 1, 1, 1),
    _f("ts_tanh", "torch.tanh", 1, 1, 1, 2),
    _f("ts_sigmoid", "torch.sigmoid", 1, 1, 2, 2),
    _f("ts_erf", "torch.erf", 2, 1, 2, 1),
    _f("ts_erfc", "torch.erfc", 2, 1, 2, 2),
    _f("ts_gelu", "torch.nn.functional.gelu (approximate='none')", 2, 2, 3, 3),
    _f("ts_sin", "torch.sin", 1, 1, 1, 1, "|x| < 2**50 (NaN from there on)"),
    _f("ts_cos", "torch.cos", 1, 1, 1, 1, "|x| < 2**50 (NaN from there on)"),
    MathFunction("ts_pow", "torch.pow", 2, {"float32": 1, "float64": None}, {"float32": 1, "float64": None},
                 "float32 only (computed in double)"),
)


def functions() -> tuple[MathFunction, ...]:
    """The functions MATH_HEADER defines, with their documented error bounds."""
    return FUNCTIONS


# Functions held to an absolute error instead, for a use that keeps no more (codegen/elements.py
# spells an op with one there): name -> (what it stands for, the bound per dtype it has one for;
# tests/test_cpp_math.py measures it against torch's float64 result over every float32 in
# [1.5, 4), where the error is largest, and a million random ones in [-8, 8]).
ABSOLUTE: dict[str, tuple[str, dict[str, float]]] = {
    "ts_erf_fast": ("torch.erf where every use is 1 + erf(x) (GELU, the normal CDF)", {"float32": 4e-7}),
}


CTYPES = {"float32": "float", "float64": "double"}


def kernel_source(fn: MathFunction, dtype: str, kernel: str) -> str:
    """An extern "C" loop applying `fn` elementwise: `kernel(const T* in..., T* out, int64_t n)`,
    on one line (so that a vectorisation report names it by line)."""
    t = CTYPES[dtype]
    ins = ", ".join(f"const {t}* __restrict in{j}" for j in range(fn.arity))
    args = ", ".join(f"in{j}[i]" for j in range(fn.arity))
    return (f'extern "C" void {kernel}({ins}, {t}* __restrict out, int64_t n) '
            f"{{ for (int64_t i = 0; i < n; ++i) out[i] = torchscribe::{fn.name}({args}); }}")


def vectorization_report(source: str, *, missed: bool = False, extra_flags: tuple[str, ...] = ()) -> str:
    """The compiler's report of the loops it vectorised in `source` (with `missed`, also those it
    did not and why), compiling it as runtime/native.py builds kernels (same compiler and flags)
    from a file named kernels.cpp. gcc: -fopt-info-vec-optimized; clang: -Rpass=loop-vectorize."""
    from runtime import native

    chain = native.toolchain()
    if chain is None:
        raise native.CompilerNotFound("no C++ compiler: cannot produce a vectorisation report")
    clang = "clang" in chain.version
    if clang:
        report = ["-Rpass=loop-vectorize"] + (["-Rpass-missed=loop-vectorize", "-Rpass-analysis=loop-vectorize"]
                                              if missed else [])
    else:
        report = ["-fopt-info-vec-all" if missed else "-fopt-info-vec-optimized"]
    with tempfile.TemporaryDirectory(prefix="torchscribe-vec-") as tmp:
        src = Path(tmp) / "kernels.cpp"
        src.write_text(source, encoding="utf-8")
        flags = [f for f in chain.flags if f != "-shared"]
        command = [chain.cxx, *flags, *native.include_flags(), *extra_flags, *report, "-c", str(src), "-o",
                   str(Path(tmp) / "kernels.o")]
        done = subprocess.run(command, capture_output=True, text=True, cwd=tmp)
    if done.returncode != 0:
        raise native.BuildError(f"$ {' '.join(command)}\n{done.stderr[:4000]}")
    return done.stderr


_VECTORIZED = re.compile(r"^(?:.*/)?kernels\.cpp:(\d+):\d+: (?:optimized: loop vectorized|remark: vectorized loop)",
                         re.MULTILINE)


def vectorized_lines(report: str) -> set[int]:
    """The lines of kernels.cpp holding a loop that `report` says was vectorised."""
    return {int(m.group(1)) for m in _VECTORIZED.finditer(report)}


__all__ = ["FUNCTIONS", "MATH_HEADER", "MathFunction", "functions", "kernel_source", "vectorization_report",
           "vectorized_lines"]

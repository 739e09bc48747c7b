"""bfloat16 and float16 in the fused C++ kernels. Torch's CPU kernels compute a 16-bit op in float
and round its result to 16 bits; a kernel does the same after every op, so a fused chain is
bit for bit eager's, up to the math functions (codegen/cpp_math.py's against torch's Sleef, within
1-2 float ulps before rounding to 16 bits: the result is nearly always the same 16-bit value).
Checked: which ops group (IR in, IR out), the C++ conversions on every 16-bit value and on the
rounding ties, the kernels against eager over strides, storage offsets, sizes that are not a
multiple of the vector width, zero sizes, infinities, NaNs and signed zeros, type promotion with
float32 tensors and Python numbers, and row reductions (softmax, layer norm, ...) in 16 bits."""

from __future__ import annotations


import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from source_module import imported_source
from ir.kernel import ops as kernel_ops
from ir.core.parser import parse_program
from ir.passes.fuse import fuse
from test_fuse import CHAIN, UNIT_ONLY, compiled, fused


@pytest.fixture(autouse=True)
def _seeded() -> None:
    """Fixed inputs per test: the math tests bound the fraction of results off by a 16-bit ulp,
    which random inputs now and then push past the bound."""
    torch.manual_seed(0)

DTYPES16 = [torch.bfloat16, torch.float16]
BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def assert_bitwise(got, expected, msg: str = "") -> None:
    """Same dtype, shape and bits (-0.0 is not 0.0), NaN in the same places (any NaN)."""
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), msg
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_bitwise(g, e, f"{msg}[{k}]")
        return
    assert got.dtype == expected.dtype and got.shape == expected.shape, (msg, got.dtype, got.shape, expected.shape)
    if not expected.is_floating_point():
        assert torch.equal(got, expected), msg
        return
    nan = expected.isnan()
    assert torch.equal(got.isnan(), nan), f"{msg}: NaN at other places"
    bad = _bits(got, nan) != _bits(expected, nan)
    assert not bad.any(), f"{msg}: {int(bad.sum())} differ, e.g. {got[bad][:4].tolist()} != {expected[bad][:4].tolist()}"


def _bits(t: torch.Tensor, nan: torch.Tensor) -> torch.Tensor:
    return t.masked_fill(nan, 0).view(BITS[t.element_size()])


def bitwise_fraction(got: torch.Tensor, expected: torch.Tensor) -> float:
    nan = expected.isnan()
    return float(((_bits(got, nan) == _bits(expected, nan)) | (got.isnan() & nan)).float().mean())


# -- which ops group ------------------------------------------------------------------------------
def test_a_bf16_chain_becomes_one_kernel() -> None:
    text = CHAIN.replace("f32[", "bf16[")
    assert fused(text) == """\
func @f(%x: bf16[B, 8]@cpu, %y: bf16[8]@cpu) -> bf16[B, 8]@cpu {
  %0 : bf16[B, 8]@cpu = kernel.pointwise(%x, %y) {name = "exp_mul_add", inputs = 2} {
    ^(%x_1: bf16[]@cpu, %y_1: bf16[]@cpu):
    %1 : bf16[]@cpu = torch.call(%x_1) {callee = "torch.exp", aten = "aten::exp"}
    %2 : bf16[]@cpu = py.binary(%1, %y_1) {op = "*"}
    %3 : float = py.constant() {value = 0.5}
    %4 : bf16[]@cpu = py.binary(%2, %3) {op = "+"}
    scf.yield(%4)
  }
  func.return(%0)
}
"""


def test_conversions_join_kernels() -> None:
    """`x.to(torch.float32)` ... `.to(torch.bfloat16)` around a computation (how decompositions
    compute 16-bit softmax, sigmoid, layer norm in float) are ops of the kernel."""
    text = """\
func @f(%x: bf16[B, 8]@cpu) -> bf16[B, 8]@cpu {
  %0 : dtype = py.constant() {value = "torch.float32"}
  %1 : f32[B, 8]@cpu = torch.method(%x, %0) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %2 : f32[B, 8]@cpu = torch.call(%1) {callee = "torch.exp", aten = "aten::exp"}
  %3 : dtype = py.constant() {value = "torch.bfloat16"}
  %4 : bf16[B, 8]@cpu = torch.method(%2, %3) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%4)
}
"""
    out = fused(text)
    assert out.count("kernel.pointwise") == 1 and out.count("torch.method") == 2, out
    assert "f32[B, 8]" not in out, out  # nothing in float32 outside the kernel


# -- the C++ conversions --------------------------------------------------------------------------
SOURCE = '''
import torch
import torch.nn.functional as F
from torch import Tensor


def widen(x: Tensor) -> Tensor:
    return x.float() * 1.0


def to_bf16(x: Tensor) -> Tensor:
    return (x * 1.0).to(torch.bfloat16)


def to_f16(x: Tensor) -> Tensor:
    return (x * 1.0).to(torch.float16)


def exact(x: Tensor, y: Tensor) -> Tensor:
    a = x * y + 0.3  # a number added: rounded to x's dtype first, as eager does
    b = (a - y) / 1.7 * 3.1  # a number divided by, multiplied with: read in float
    c = torch.maximum(b, -x).abs() - torch.minimum(a, y)
    d = torch.where(c > 0.1, c, 0.25 - x)  # compared with 0.1 rounded; 0.25 - x rounds 0.25
    e = torch.floor(d * 4.0) + torch.ceil(-d) + torch.trunc(d * 1.5)
    f = torch.clamp(e, min=-2.5, max=3.3) + torch.sqrt(x.abs()) * (y / (x + 2.0))
    return 0.7 / (f * f + 5.0) + torch.where(x == 0.1, 1.0, -x)  # 0.7 / z: reciprocal(z) * 0.7


def mixed(x: Tensor, z: Tensor, s: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    a = x * s + z  # x * s: x's dtype, s (a 0-dim float32 tensor) read in float; + z: float32
    b = s * x - s  # s first: rounded to x's dtype, as in the subtraction
    c = torch.where(x > s, x, -x)  # compared in x's dtype (s is 0-dim), so s rounded
    return a, b, c, x * 2.5 < z


def convert(x: Tensor, d: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    k = (x * 100.0).to(torch.int32)
    # float64 -> float32 -> 16 bits, as eager rounds; an int32 tensor rounded to bfloat16 first;
    # bfloat16 + float16 is float32
    return (-d).to(torch.float16), (-d).to(torch.bfloat16) * k + 1, k, x.half() * 0.3 + x.bfloat16()


def chain(x: Tensor, y: Tensor) -> Tensor:
    a = torch.exp(-x * x) + y
    b = torch.tanh(a) * 0.5 + torch.sigmoid(x)
    c = torch.where(b > 0.1, b, y - 1.0) * torch.rsqrt(y.abs() + 1.0)
    return torch.maximum(c, x.abs()) / (1.0 + x * x) + torch.log1p(x.abs()) * torch.erf(y) - torch.log(x.abs())


def softmax(x: Tensor) -> Tensor:
    return F.softmax(x, dim=-1)


def log_softmax(x: Tensor) -> Tensor:
    return F.log_softmax(x, dim=-1)


def layer_norm_gelu(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def rms_norm(x: Tensor, w: Tensor) -> Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def extrema(x: Tensor) -> Tensor:
    return x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True) + x


def centered(x: Tensor) -> Tensor:
    return x - x.sum(-1, keepdim=True) / 3
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("dtypes16_models")
    with imported_source(root, "dtypes16_models", SOURCE) as module:
        yield module


def _every_16_bit_value(dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def _rounding_cases(dtype: torch.dtype) -> torch.Tensor:
    """float32 values around every 16-bit value, the ties between neighbours, overflow, float
    subnormals and random bit patterns."""
    values = _every_16_bit_value(dtype).float()
    finite = values[values.isfinite()].unique()  # (sorted)
    ties = ((finite[1:].double() + finite[:-1].double()) / 2).float()
    up, down = torch.full_like(values, float("inf")), torch.full_like(values, -float("inf"))
    special = torch.tensor([3.0e38, -3.0e38, 65519.99, 65520.0, -65520.0, 1e-40, -1e-45, 2**-25, 3 * 2**-26])
    g = torch.Generator().manual_seed(0)
    random = torch.randint(-(2**31), 2**31, (200_000,), generator=g, dtype=torch.int64).to(torch.int32).view(torch.float32)
    return torch.cat([values, values.nextafter(up), values.nextafter(down), ties, special, random])


@pytest.mark.parametrize("dtype", DTYPES16)
def test_every_16_bit_value_widens_and_rounds_as_torch(fns, dtype, tmp_path, monkeypatch) -> None:
    """Loads of all 65536 bit patterns, and rounding to nearest even (ties, overflow to inf,
    subnormals, NaN stays NaN, -0.0) of float32 values, against torch's own conversions."""
    every = _every_16_bit_value(dtype)
    widen = compiled(fns.widen, (every[:8],), tmp_path / "widen", monkeypatch)
    narrow_fn = fns.to_bf16 if dtype == torch.bfloat16 else fns.to_f16
    x = _rounding_cases(dtype)
    narrow = compiled(narrow_fn, (x[:8],), tmp_path / "narrow", monkeypatch)
    with runtime.mode("strict"):
        assert_bitwise(widen(every), every.float(), "widen")
        assert_bitwise(narrow(x), x.to(dtype), "round")


# -- pointwise kernels against eager ----------------------------------------------------------------
def _specials(dtype: torch.dtype, width: int) -> torch.Tensor:
    """One row of NaN, infinities, signed zeros, the largest values (whose squares overflow),
    subnormals and the ties of 0.1 and 0.25 comparisons."""
    big = 3.0e38 if dtype == torch.bfloat16 else 60000.0
    tiny = 1e-39 if dtype == torch.bfloat16 else 1e-6
    row = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, big, -big, tiny, -tiny, 0.1, 0.25, -2.0, 1.0]
    return torch.tensor((row * (width // len(row) + 1))[:width]).to(dtype)[None]


@pytest.mark.parametrize("dtype", DTYPES16)
def test_pointwise_chain_is_bitwise_eager(fns, dtype, tmp_path, monkeypatch) -> None:
    """Arithmetic with tensors and numbers, maximum/minimum, abs, neg, where, comparisons,
    floor/ceil/trunc, clamp, sqrt, division by a tensor: exactly eager's bits."""
    y = torch.randn(37).to(dtype)
    f = compiled(fns.exact, (torch.randn(5, 37).to(dtype), y), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        for n in (1, 3, 64):
            x = (torch.randn(n, 37) * 3).to(dtype)
            assert_bitwise(f(x, y), fns.exact(x, y), f"batch {n}")
        x = (torch.randn(37, 300) * 3).to(dtype).t()  # transposed: the strided inner loop
        assert_bitwise(f(x, y), fns.exact(x, y), "transposed")
        big = (torch.randn(1001, 37) * 3).to(dtype)[1:]  # a storage offset; the parallel loop
        assert_bitwise(f(big, y), fns.exact(big, y), "offset")
        special = _specials(dtype, 37)
        assert_bitwise(f(special, y), fns.exact(special, y), "NaN, inf, -0.0, overflow, subnormals")
        assert_bitwise(f(special, special[0]), fns.exact(special, special[0]), "specials on both sides")


@pytest.mark.parametrize("dtype", DTYPES16)
def test_long_vectors_are_bitwise_eager(fns, dtype, tmp_path, monkeypatch) -> None:
    """One dim of 1000003 elements (not a multiple of any vector width; a parallel loop)."""
    x, y = (torch.randn(1000003) * 3).to(dtype), torch.randn(1000003).to(dtype)
    f = compiled(fns.exact, (x[:8], y[:8]), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        assert_bitwise(f(x, y), fns.exact(x, y), "1000003")
        assert_bitwise(f(x[1::2], y[1::2]), fns.exact(x[1::2], y[1::2]), "every second one")


def test_zero_size_kernels(fns, tmp_path, monkeypatch) -> None:
    y = torch.randn(0).to(torch.bfloat16)
    f = compiled(fns.exact, (torch.randn(4, 0).to(torch.bfloat16), y), tmp_path, monkeypatch)
    with runtime.mode("strict"):  # the kernel itself runs, with no elements
        got = f(torch.randn(2, 0).to(torch.bfloat16), y)
    assert got.shape == (2, 0) and got.dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", DTYPES16)
def test_type_promotion_with_float32_and_numbers(fns, dtype, tmp_path, monkeypatch) -> None:
    """16-bit with a float32 tensor computes in float32; with a number or a 0-dim float32
    tensor in 16 bits (the number rounded to 16 bits where eager rounds it); comparisons give
    bool."""
    x, z, s = (torch.randn(60, 8) * 3).to(dtype), torch.randn(60, 8) * 3, torch.tensor(0.3)
    f = compiled(fns.mixed, (x, z, s), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        got = f(x, z, s)
        assert [t.dtype for t in got] == [torch.float32, dtype, dtype, torch.bool]
        assert_bitwise(got, fns.mixed(x, z, s))
        x = torch.tensor([[0.1, 0.3, -0.3, 0.30078125, 0.2998046875, float("nan"), float("inf"), -0.0]]).to(dtype)
        z = torch.tensor([[0.75, 0.75, -0.75, 0.751, 0.7494, 1.0, 1.0, 0.0]])
        s = torch.tensor(0.29999)  # rounded to 16 bits, s equals an x here (x > s differs)
        assert_bitwise(f(x, z, s), fns.mixed(x, z, s), "near ties")


@pytest.mark.parametrize("dtype", DTYPES16)
def test_conversions(fns, dtype, tmp_path, monkeypatch) -> None:
    """float64 -> 16 bits goes through float32 (two roundings) as in eager; 16 bits -> int32
    truncates; an int32 operand of a bfloat16 op is rounded to bfloat16; bf16 + f16 is float32."""
    x = (torch.randn(5, 37) * 3).to(dtype)
    d = torch.randn(5, 37, dtype=torch.float64)
    f = compiled(fns.convert, (x, d), tmp_path, monkeypatch)
    # (1 + 2^-8 + 2^-40 rounds to bfloat16's 1 through float32, to 1 + 2^-7 directly; likewise
    # 1 + 2^-11 + 2^-40 for float16)
    d[0, :6] = torch.tensor([1 + 2**-8 + 2**-40, 1 + 2**-11 + 2**-40, -(1 + 2**-8 + 2**-40), 70000.0, 1e-9, 3.5e38],
                            dtype=torch.float64)
    with runtime.mode("strict"):
        assert_bitwise(f(x, d), fns.convert(x, d))
        x, d = (torch.randn(40, 37) * 9).to(dtype), torch.randn(40, 37, dtype=torch.float64) * 1e3
        assert_bitwise(f(x, d), fns.convert(x, d), "larger values")


@pytest.mark.parametrize("dtype", DTYPES16)
def test_transcendental_chain(fns, dtype, tmp_path, monkeypatch) -> None:
    """exp, tanh, sigmoid, log1p, erf, log, rsqrt: within the documented tolerance
    (ir/primitives.TOLERANCE, docs/primitives.md), and nearly always the same bits: our float
    functions and torch's differ by an ulp of float, which rounding to 16 bits nearly always
    hides. (rsqrt: eager's vectorised loop rounds once, its scalar loop for the last few
    elements of a row twice; the kernel rounds once.)"""
    y = torch.randn(37).to(dtype)
    f = compiled(fns.chain, (torch.randn(5, 37).to(dtype), y), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        for what, x in [("batch", (torch.randn(200, 37) * 2).to(dtype)),
                        ("transposed", (torch.randn(37, 300) * 2).to(dtype).t()),
                        ("offset", (torch.randn(1001, 37) * 2).to(dtype)[1:]),
                        ("specials", _specials(dtype, 37))]:
            got, expected = f(x, y), fns.chain(x, y)
            assert_close_to_eager(got, expected, what)
            if what != "specials":  # (37 values: one ulp off is 3% of them)
                assert bitwise_fraction(got, expected) > 0.99, what


# -- row reductions -------------------------------------------------------------------------------
def _reduction_inputs(name: str, n: int, width: int, dtype: torch.dtype) -> tuple:
    x = (torch.randn(n, 3, width) * 2).to(dtype)
    if name == "layer_norm_gelu":
        return x, torch.randn(width).to(dtype), torch.randn(width).to(dtype)
    if name == "rms_norm":
        return x, torch.randn(width).to(dtype)
    return (x,)


@pytest.mark.parametrize("dtype", DTYPES16)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm_gelu", "rms_norm", "extrema", "centered"])
def test_reductions(fns, name, dtype, tmp_path, monkeypatch) -> None:
    """One kernel each, input and output in 16 bits (softmax, layer norm, ... compute in
    float32 between the conversions their decompositions put around them; a 16-bit sum
    accumulates in double and is rounded to 16 bits). amax and amin are exact: `extrema` is
    eager's bits; the others within the tolerance."""
    fn = getattr(fns, name)
    width = 37
    f = compiled(fn, _reduction_inputs(name, 2, width, dtype), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert text.count('extern "C" void') == 1 and "_row(" in text, text
    check = assert_bitwise if name == "extrema" else assert_close_to_eager
    with runtime.mode("strict"):
        for n in (1, 5, 400):  # 400 * 3 * 37 elements: the parallel loop
            args = _reduction_inputs(name, n, width, dtype)
            check(f(*args), fn(*args), f"batch {n}")
        x, *rest = _reduction_inputs(name, 4, width, dtype)
        strided = torch.randn(width, 3, 4).to(dtype).permute(2, 1, 0)  # the row is not unit-stride
        check(f(strided, *rest), fn(strided, *rest), "strided rows")
        offset = torch.randn(5, 3, width).to(dtype)[1:]
        check(f(offset, *rest), fn(offset, *rest), "offset")
        x[0, 0, 3] = float("inf")
        x[0, 1, 20] = -float("inf")
        x[1, 0, :] = -float("inf")
        x[1, 1, 7] = float("nan")
        x[2, 2, :] = float("inf")
        x[3, 0, 5] = -0.0
        check(f(x, *rest), fn(x, *rest), "inf and NaN rows")


# -- vectorisation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_16_bit_loops_vectorise(dtype: str) -> None:
    """The compiler's own report: the unit-stride loop of a 16-bit chain with exp and tanh
    (loads, a rounding after every op, stores) is vectorised."""
    from codegen.cpp_kernels import PRELUDE, emit_kernel
    from codegen.cpp_math import vectorization_report, vectorized_lines

    text = CHAIN.replace('{op = "+"}', '{op = "+"}\n  %9 : f32[B, 8]@cpu = torch.call(%3) '
                         '{callee = "torch.tanh", aten = "aten::tanh"}').replace("func.return(%3)", "func.return(%9)")
    program = parse_program(text.replace("f32[", f"{dtype}["))
    fuse(program)
    [kernel] = [op for op in program.walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    code, _ = emit_kernel(kernel)
    assert f"ts_round_{dtype}(torchscribe::ts_tanh(" in code and f"ts_load_{dtype}(" in code, code
    # only the version for unit strides (both versions' loops are on one line)
    source = PRELUDE + UNIT_ONLY + code.replace("ts_unit_or_strided(", "unit_only(")
    unit_loop = next(i for i, line in enumerate(source.splitlines(), start=1) if "for (int64_t j" in line)
    assert vectorized_lines(vectorization_report(source)) & {unit_loop, unit_loop + 1}, code


def test_16_bit_softmax_loops_vectorise(fns, tmp_path, monkeypatch) -> None:
    from codegen.cpp_math import vectorization_report, vectorized_lines

    compiled(fns.softmax, (torch.randn(2, 3, 16).to(torch.bfloat16),), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    source = text[text.index('KERNELS_CPP = r"""') + len('KERNELS_CPP = r"""'):text.index('"""\n_lib')]
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines, start=1) if line.startswith("static TS_NOINLINE void"))
    simd = [i for i, line in enumerate(lines, start=1) if i > start and "#pragma omp simd" in line]
    assert len(simd) == 3, source  # one vectorised loop per pass
    report = vectorized_lines(vectorization_report(source))
    for pragma in simd:  # (gcc names the loop's line or one of its first statements')
        assert report & set(range(pragma + 1, pragma + 4)), (pragma, source)

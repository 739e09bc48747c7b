"""Row reductions fused with their pointwise prologues and epilogues (`kernel.reduction`): which
ops group (IR in, IR out), and the generated kernels against eager over dtypes, strides, storage
offsets, row lengths that are not a multiple of the vector width, infinities and NaNs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from source_module import imported_source
from ir.kernel import ops as kernel_ops
from ir.core.parser import parse_program
from test_fuse import compiled, fused

SOFTMAX = """\
func @f(%x: f32[B, 40]@cpu) -> f32[B, 40]@cpu {
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 1]@cpu = torch.call(%x, %0, %1) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %3 : f32[B, 40]@cpu = py.binary(%x, %2) {op = "-"}
  %4 : f32[B, 40]@cpu = torch.call(%3) {callee = "torch.exp", aten = "aten::exp"}
  %5 : f32[B, 1]@cpu = torch.call(%4, %0, %1) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %6 : f32[B, 40]@cpu = py.binary(%4, %5) {op = "/"}
  func.return(%6)
}
"""


def test_softmax_is_one_reduction_kernel() -> None:
    assert fused(SOFTMAX) == """\
func @f(%x: f32[B, 40]@cpu) -> f32[B, 40]@cpu {
  %0 : f32[B, 40]@cpu = kernel.reduction(%x) {name = "amax_sub_exp", inputs = 1} {
    ^(%x_1: f32[]@cpu):
    %1 : f32[]@cpu = kernel.reduce(%x_1) {kind = "amax"}
    %2 : f32[]@cpu = py.binary(%x_1, %1) {op = "-"}
    %3 : f32[]@cpu = torch.call(%2) {callee = "torch.exp", aten = "aten::exp"}
    %4 : f32[]@cpu = kernel.reduce(%3) {kind = "sum"}
    %5 : f32[]@cpu = py.binary(%3, %4) {op = "/"}
    scf.yield(%5)
  }
  func.return(%0)
}
"""


def test_softmax_over_a_symbolic_row_is_one_kernel() -> None:
    """A size symbol is at least 1 (entry checks pin it), so the row's max joins the kernel:
    softmax over an annotated `"N D"` tensor's last dim."""
    out = fused(SOFTMAX.replace("f32[B, 40]", "f32[B, N]"))
    assert "kernel.reduce(%x_1) {kind = \"amax\"}" in out and "torch.amax" not in out


@pytest.mark.parametrize("change", [
    ("%0 : int = py.constant() {value = 1}", "%0 : int = py.constant() {value = 0}"),  # not the last dim
    ("%1 : bool = py.constant() {value = True}", "%1 : bool = py.constant() {value = False}"),  # no keepdim
    # amax of a maybe-empty row (a size symbol is >= 1, entry checks pin it; N - 1 may be 0)
    ("f32[B, 40]@cpu) -> f32[B, 40]@cpu {", "f32[B, N - 1]@cpu) -> f32[B, N - 1]@cpu {"),
])
def test_reductions_that_stay(change: tuple[str, str]) -> None:
    """Only reductions over the last dim with keepdim join a kernel, and amax/amin only over a
    dim known to be nonempty (eager raises on an empty one)."""
    text = SOFTMAX.replace(*change)
    if "N - 1]" in text:
        text = text.replace("f32[B, 40]", "f32[B, N - 1]")
    if "value = 0}" in text:
        text = text.replace("f32[B, 1]", "f32[1, 40]")
    if "False" in text:
        text = text.replace("f32[B, 1]", "f32[B]").replace("f32[B, 40]@cpu = py.binary(%x, %2)", "f32[B, 40]@cpu = py.binary(%x, %2)")
    out = fused(text)
    assert "kernel.reduce(" not in out.split("kernel.reduction")[0]
    program = parse_program(out)
    amax = [op for op in program.walk() if op.attributes.get("callee") == "torch.amax"]
    assert amax, out  # the amax stays a torch call


# -- generated kernels against eager --------------------------------------------------------------
SOURCE = '''
import torch
import torch.nn.functional as F
from torch import Tensor


def softmax(x: Tensor) -> Tensor:
    return F.softmax(x, dim=-1)


def log_softmax(x: Tensor) -> Tensor:
    return F.log_softmax(x, dim=-1)


def layer_norm_gelu(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def residual_gelu_layer_norm(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.layer_norm(x + F.gelu(x), (x.shape[-1],), w, b)


def stats(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)
    return mean, var, (x - mean) * torch.rsqrt(var + 1e-5)


def rms_norm(x: Tensor, w: Tensor) -> Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w


def extrema(x: Tensor) -> Tensor:
    return x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True) + x


def centered(x: Tensor) -> Tensor:
    return x - x.sum(-1, keepdim=True) / 3


def windows(x: Tensor, bias: Tensor) -> Tensor:
    return F.softmax(x.reshape(-1, 4, 9) + bias, dim=-1) * 2


def softmax_times(x: Tensor, w: Tensor) -> Tensor:
    h = x @ w
    return F.softmax(h, dim=-1) * h
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("reduction_models")
    with imported_source(root, "reduction_models", SOURCE) as module:
        yield module


def _kernel_text(tmp_path: Path) -> str:
    return next((tmp_path / "jit").glob("*.py")).read_text()


def _inputs(name: str, n: int, width: int, dtype: torch.dtype) -> tuple:
    x = torch.randn(n, 3, width, dtype=dtype)
    if name in ("layer_norm_gelu", "residual_gelu_layer_norm"):
        return x, torch.randn(width, dtype=dtype), torch.randn(width, dtype=dtype)
    if name == "rms_norm":
        return x, torch.randn(width, dtype=dtype)
    return (x,)


# residual_gelu_layer_norm: erf is kept in a row buffer by the mean's pass and read by the two
# after it (a transformer MLP block's `norm(x + gelu(h))`), declared once.
NAMES = ["softmax", "log_softmax", "layer_norm_gelu", "residual_gelu_layer_norm", "stats", "rms_norm", "extrema", "centered"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_reduction_kernels_match_eager(fns, name, dtype, tmp_path, monkeypatch) -> None:
    fn = getattr(fns, name)
    width = 37  # not a multiple of any vector width
    f = compiled(fn, _inputs(name, 2, width, dtype), tmp_path, monkeypatch)
    assert "_row(" in _kernel_text(tmp_path)  # a reduction kernel's row function
    with runtime.mode("strict"):  # a guard failure raises rather than running eagerly
        for n in (1, 5, 400):  # 400 * 3 * 37 elements: the parallel loop
            args = _inputs(name, n, width, dtype)
            assert_close_to_eager(f(*args), fn(*args), f"batch {n}")
        x, *rest = _inputs(name, 4, width, dtype)
        strided = torch.randn(width, 3, 4, dtype=dtype).permute(2, 1, 0)  # the row is not unit-stride
        assert_close_to_eager(f(strided, *rest), fn(strided, *rest), "strided rows")
        offset = torch.randn(5, 3, width, dtype=dtype)[1:]  # a storage offset
        assert_close_to_eager(f(offset, *rest), fn(offset, *rest), "offset")


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "extrema", "layer_norm_gelu"])
def test_infinities_and_nans_in_rows(fns, name, tmp_path, monkeypatch) -> None:
    """A row with an infinity or a NaN takes the exact loop for its maximum; the others the
    vectorised one. Every row here matches eager, NaNs included."""
    fn = getattr(fns, name)
    width = 21
    f = compiled(fn, _inputs(name, 2, width, torch.float32), tmp_path, monkeypatch)
    x, *rest = _inputs(name, 4, width, torch.float32)
    x[0, 0, 3] = float("inf")
    x[0, 1, 20] = -float("inf")
    x[1, 0, :] = -float("inf")
    x[1, 1, 7] = float("nan")
    x[2, 2, :] = float("inf")
    with runtime.mode("strict"):
        assert_close_to_eager(f(x, *rest), fn(x, *rest), "inf and NaN rows")


def test_a_whole_tensor_row_of_symbolic_length(fns, tmp_path, monkeypatch) -> None:
    """A 1-d input: the row is the whole tensor, its length the batch symbol; the sum is fused
    (it is 0 for an empty row) and the kernel has no outer loop."""
    f = compiled(fns.centered, (torch.randn(6),), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        for n in (1, 17, 5000):
            x = torch.randn(n)
            got, want = f(x), fns.centered(x)
            try:
                assert_close_to_eager(got, want, f"length {n}")
            except AssertionError:
                # (eager sums 5000 floats in float, the kernel in double: where the two differ by
                # more than the tolerance, the kernel must be the nearer to float64's result)
                exact = fns.centered(x.double())
                assert (got.double() - exact).abs().max() <= (want.double() - exact).abs().max() + 1e-6, f"length {n}"


def test_sizes_that_are_expressions_of_the_batch(fns, tmp_path, monkeypatch) -> None:
    """`x.reshape(-1, 4, 9)` of a [B, 8, 36] input is [8*B, 4, 9]: its kernels read `8*B` from
    their input (swin's attention over windows of a batch)."""
    f = compiled(fns.windows, (torch.randn(2, 8, 36), torch.randn(4, 9)), tmp_path, monkeypatch)
    text = _kernel_text(tmp_path)
    assert "_row(" in text and "torch.exp" not in text[text.index("def windows("):]
    with runtime.mode("strict"):
        for n in (1, 3, 50):
            x, bias = torch.randn(n, 8, 36), torch.randn(4, 9)
            assert_close_to_eager(f(x, bias), fns.windows(x, bias), f"batch {n}")


def test_long_rows_sum_accurately(fns, tmp_path, monkeypatch) -> None:
    """Sums accumulate in double: a long float32 row of large values with a small mean."""
    x = torch.randn(1, 3, 100_000) * 1000 + 0.5
    f = compiled(fns.stats, (x,), tmp_path, monkeypatch)
    with runtime.mode("strict"):
        assert_close_to_eager(f(x), fns.stats(x), "long rows")


def test_softmax_kernel_computes_exp_once_and_vectorises(fns, tmp_path, monkeypatch) -> None:
    """exp(x - max) (where not negligible) is kept for the normalising pass, not computed
    twice, in the output row, which that pass then divides in place without reading x; the
    unit-stride loops of every pass are vectorised (the compiler's own report)."""
    from codegen.cpp_math import vectorization_report, vectorized_lines

    compiled(fns.softmax, (torch.randn(2, 3, 16),), tmp_path, monkeypatch)
    text = _kernel_text(tmp_path)
    source = text[text.index('KERNELS_CPP = r"""') + len('KERNELS_CPP = r"""'):text.index('"""\n_lib')]
    row = source[source.index("static TS_NOINLINE void"):source.index('extern "C"', source.index("static TS_NOINLINE void"))]
    assert row.count("torchscribe::ts_exp(") == 1, row  # pass 2
    assert "std::vector<float>" not in row and "p = out0;" in row, row  # the buffer is the output row
    assert "p0[" not in row[row.index("// pass 3"):], row  # (nor is the 0 of a negligible exp chosen again)
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines, start=1) if line.startswith("static TS_NOINLINE void"))
    simd = [i for i, line in enumerate(lines, start=1) if i > start and "#pragma omp simd" in line]
    assert len(simd) == 3, row  # one vectorised loop per pass
    report = vectorized_lines(vectorization_report(source))
    for pragma in simd:  # (gcc names the loop's line or one of its first statements')
        assert report & set(range(pragma + 1, pragma + 4)), (pragma, row)


def test_a_row_buffer_stays_out_of_an_output_written_over_an_input_read_later(fns, tmp_path, monkeypatch) -> None:
    """softmax(h) * h writes its output over h (a temporary that dies) and its last pass reads
    h: the kept exp cannot wait in the output's row, which the pass before would overwrite."""
    f = compiled(fns.softmax_times, (torch.randn(2, 8), torch.randn(8, 300)), tmp_path, monkeypatch)
    row = _kernel_text(tmp_path)
    row = row[row.index("static TS_NOINLINE void"):row.index('extern "C"')]
    assert "const float* p0 = out0;" in row and "std::vector<float>" in row, row
    with runtime.mode("strict"):
        for n in (1, 150):  # (150 rows of 300: the parallel loop)
            x, w = torch.randn(n, 8), torch.randn(8, 300)
            assert_close_to_eager(f(x, w), fns.softmax_times(x, w), f"batch {n}")


def test_every_reduce_kind_is_emitted() -> None:
    from codegen import cpp_rows

    source = Path(cpp_rows.__file__).read_text()
    for kind in kernel_ops.ReduceOp.KINDS:
        assert f'"{kind}"' in source, kind


BATCH_NORM = """\
func @f(%x: f32[B, 4, 3]@cpu, %var: f32[4]@cpu) -> f32[B, 4, 3]@cpu {
  %0 : float = py.constant() {value = 1e-05}
  %1 : f32[4]@cpu = py.binary(%var, %0) {op = "+"}
  %2 : f32[4]@cpu = torch.call(%1) {callee = "torch.rsqrt", aten = "aten::rsqrt"}
  %3 : tuple[int, int] = py.constant() {value = (4, 1)}
  %4 : f32[4, 1]@cpu = torch.method(%2, %3) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %5 : f32[B, 4, 3]@cpu = py.binary(%x, %4) {op = "*"}
  func.return(%5)
}
"""


def test_a_reshape_moves_to_the_input_of_a_pointwise_chain() -> None:
    """`rsqrt(var + eps).reshape(C, 1)` becomes `rsqrt(var.reshape(C, 1) + eps)`: the chain then
    joins the kernel that uses it instead of being a kernel (or two torch calls) of its own."""
    out = fused(BATCH_NORM)
    assert out.count("kernel.pointwise") == 1, out
    assert 'torch.method(%var, %0) {method = "reshape"' in out, out
    assert "f32[4]@cpu = " not in out, out  # nothing computed on the unshaped vector


def test_a_view_does_not_move() -> None:
    """`f(a).view(...)` of a fresh `f(a)` always succeeds; `a.view(...)` may not (a transposed
    `a`), so a view stays where it is."""
    text = BATCH_NORM.replace('{method = "reshape", alias_of = 0, aten = "aten::reshape"}',
                              '{method = "view", alias_of = 0, aten = "aten::view"}')
    out = fused(text)
    assert 'torch.method(%var, ' not in out, out


WIDER_PRODUCT = """\
func @f(%x: f32[B, 64, 32]@cpu, %l: f32[B, 64, 48]@cpu) -> f32[B, 64, 48]@cpu {
  %0 : f32[B, 64, 32]@cpu = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %1 : int = py.constant() {value = -1}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 64, 1]@cpu = torch.call(%0, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %4 : f32[B, 64, 48]@cpu = py.binary(%l, %3) {op = "*"}
  %5 : f32[B, 64, 48]@cpu = torch.call(%4) {callee = "torch.exp", aten = "aten::exp"}
  func.return(%5)
}
"""


def test_a_row_sum_read_by_a_wider_product_is_still_a_kernel() -> None:
    """`l * tanh(x).sum(-1, keepdim=True)` with l wider than x's rows: the product cannot join
    the reduction's kernel (no iteration shape holds both); it starts a kernel of its own, which
    reads the sums. (Joined, the group had no shape, and nothing of it was fused.)"""
    out = fused(WIDER_PRODUCT)
    assert out.count("kernel.reduction(%x)") == 1 and out.count("kernel.pointwise(%l, %") == 1, out
    assert 'callee = "torch.tanh"' in out and "kernel.reduce(" in out


def test_a_wider_product_of_a_row_sum_matches_eager(tmp_path, monkeypatch) -> None:
    source = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x * 2.0 + 1.0)
        return self.up(x) * h.sum(-1, keepdim=True)
"""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "wider_product", source) as mod:
        torch.manual_seed(0)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 64, 32),))
            text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
            assert "torch.tanh(" not in text.split("def Net_forward(")[1], text  # (fused)
            for batch in (2, 5):
                x = torch.randn(batch, 64, 32)
                with runtime.mode("strict"):
                    assert_close_to_eager(compiled(x), net(x))

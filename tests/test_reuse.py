"""Buffer reuse (ir/passes/reuse.py): which kernels write over an input that dies into them (IR
in, IR out), and the generated kernels against eager when they do, including inputs that are
not contiguous when the kernel runs."""

from __future__ import annotations


import pytest
import torch

from closeness import assert_close_to_eager
from pass_text import after
from source_module import imported_source
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.passes.reuse import reuse_buffers
from test_fuse import compiled

MATMUL_BIAS_TANH = """\
func @f(%x: f32[B, 8]@cpu, %w: f32[8, 16]@cpu, %b: f32[16]@cpu) -> f32[B, 16]@cpu {
  %0 : f32[B, 16]@cpu = torch.call(%x, %w) {callee = "torch.matmul", aten = "aten::matmul"}
  %1 : f32[B, 16]@cpu = py.binary(%0, %b) {op = "+"}
  %2 : f32[B, 16]@cpu = torch.call(%1) {callee = "torch.tanh", aten = "aten::tanh"}
  func.return(%2)
}
"""


def reused(text: str) -> str:
    return after(text, fuse, dce, reuse_buffers)


def test_the_epilogue_of_a_matmul_writes_over_its_result() -> None:
    assert reused(MATMUL_BIAS_TANH) == """\
func @f(%x: f32[B, 8]@cpu, %w: f32[8, 16]@cpu, %b: f32[16]@cpu) -> f32[B, 16]@cpu {
  %0 : f32[B, 16]@cpu = torch.call(%x, %w) {callee = "torch.matmul", aten = "aten::matmul"}
  %1 : f32[B, 16]@cpu = kernel.pointwise(%0, %b) {name = "add_tanh", inputs = 2, reuse = ((0, 0),)} {
    ^(%2: f32[]@cpu, %b_1: f32[]@cpu):
    %3 : f32[]@cpu = py.binary(%2, %b_1) {op = "+"}
    %4 : f32[]@cpu = torch.call(%3) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%4)
  }
  func.return(%1)
}
"""


def test_one_op_becomes_a_kernel_only_to_write_over_a_dead_temporary() -> None:
    one = MATMUL_BIAS_TANH.replace("""  %2 : f32[B, 16]@cpu = torch.call(%1) {callee = "torch.tanh", aten = "aten::tanh"}
  func.return(%2)""", "  func.return(%1)")
    out = reused(one)
    assert 'kernel.pointwise(%0, %b) {name = "add", inputs = 2, reuse = ((0, 0),)}' in out
    # the bias add of an argument: no kernel of one op
    argument = one.replace("%1 : f32[B, 16]@cpu = py.binary(%0, %b)", "%1 : f32[B, 16]@cpu = py.binary(%x, %b)")
    argument = argument.replace("f32[B, 8]@cpu, %w", "f32[B, 16]@cpu, %w")
    assert "kernel" not in reused(argument)


@pytest.mark.parametrize("change", [
    # the matmul result is returned too: it must stay intact
    ("  func.return(%2)", "  func.return(%2, %0)"),
    # a view of it: an alias may be read later
    ("  func.return(%2)", """  %5 : f32[16, B]@cpu = torch.method(%0) {method = "t", aten = "aten::t"}
  func.return(%2, %5)"""),
    # the bias is the full-shape operand, the matmul result broadcasts: different shapes
    ("%0 : f32[B, 16]@cpu = torch.call(%x, %w)", "%0 : f32[16]@cpu = torch.call(%b, %w)"),
    # the matmul wrote into a tensor of the caller's (`out=`): its result is that tensor
    ("%0 : f32[B, 16]@cpu = torch.call(%x, %w) {callee = \"torch.matmul\", aten = \"aten::matmul\"}",
     "%0 : f32[B, 16]@cpu = torch.call(%x, %w, %o) {callee = \"torch.matmul\", kwnames = (\"out\",), mutates = (2,), alias_of = 2, aten = \"aten::matmul.out\"}"),
    # a different dtype
    ("%1 : f32[B, 16]@cpu = py.binary(%0, %b) {op = \"+\"}", "%1 : f64[B, 16]@cpu = py.binary(%0, %b) {op = \"+\"}"),
])
def test_no_reuse(change: tuple[str, str]) -> None:
    text = MATMUL_BIAS_TANH.replace(*change)
    if "%o" in text:
        text = text.replace("%b: f32[16]@cpu)", "%b: f32[16]@cpu, %o: f32[B, 16]@cpu)")
    if "%0 : f32[16]@cpu" in text:
        text = text.replace("%w: f32[8, 16]@cpu", "%w: f32[16, 16]@cpu")
    if "f64[B, 16]" in text:
        text = text.replace("%2 : f32[B, 16]@cpu", "%2 : f64[B, 16]@cpu").replace("-> f32[B, 16]@cpu", "-> f64[B, 16]@cpu")
    if "%5" in text or "(%2, %0)" in text:
        text = text.replace("-> f32[B, 16]@cpu", "-> tuple[f32[B, 16]@cpu, f32[16, B]@cpu]")
        if "(%2, %0)" in text:
            text = text.replace("f32[16, B]@cpu]", "f32[B, 16]@cpu]")
    assert "reuse" not in reused(text)


def test_a_temporary_from_outside_a_loop_is_not_written_over_inside_it() -> None:
    text = """\
func @f(%x: f32[4, 4]@cpu, %n: int) -> f32[4, 4]@cpu {
  %0 : f32[4, 4]@cpu = torch.call(%x, %x) {callee = "torch.matmul", aten = "aten::matmul"}
  %1 : int = py.constant() {value = 0}
  %2 : int = py.constant() {value = 1}
  %3 : f32[4, 4]@cpu = scf.for(%1, %n, %2, %x) {
    ^(%i: int, %acc: f32[4, 4]@cpu):
    %4 : f32[4, 4]@cpu = torch.call(%0) {callee = "torch.exp", aten = "aten::exp"}
    %5 : f32[4, 4]@cpu = py.binary(%4, %acc) {op = "+"}
    scf.yield(%5)
  }
  func.return(%3)
}
"""
    out = reused(text)
    assert "kernel.pointwise(%0, %acc)" in out and "reuse" not in out


SOFTMAX_OF_MATMUL = """\
func @f(%q: f32[B, 8]@cpu, %k: f32[8, 40]@cpu) -> tuple[f32[B, 40]@cpu, f32[B, 40]@cpu] {
  %m : f32[B, 40]@cpu = torch.call(%q, %k) {callee = "torch.matmul", aten = "aten::matmul"}
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 1]@cpu = torch.call(%m, %0, %1) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %3 : f32[B, 40]@cpu = py.binary(%m, %2) {op = "-"}
  %4 : f32[B, 40]@cpu = torch.call(%3) {callee = "torch.exp", aten = "aten::exp"}
  %5 : f32[B, 1]@cpu = torch.call(%4, %0, %1) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %6 : f32[B, 40]@cpu = py.binary(%4, %5) {op = "/"}
  func.return(%6, %3)
}
"""


def test_a_reduction_kernel_writes_over_its_input_only_from_its_last_pass() -> None:
    """%3 (x - max) is written in the second pass, before the third reads the row again (for
    %6); only %6 may take the matmul's buffer."""
    out = reused(SOFTMAX_OF_MATMUL)
    assert "reuse = ((1, 0),)" in out  # results: %3 first, then %6 (in the order the ops stood)
    assert "results" not in out


SOURCE = '''
import torch
from torch import Tensor
import torch.nn.functional as F


def epilogue(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return torch.tanh(x @ w + b) * 2.0


def bias_only(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return x @ w + b


def conv_relu(x: Tensor, w: Tensor) -> Tensor:
    return F.conv2d(x, w).relu() + 1.0


def attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    s = q @ k.transpose(-2, -1)
    p = torch.softmax(s * 0.125, dim=-1)
    return p @ v, p


def chained(x: Tensor) -> Tensor:
    a = torch.exp(x) * 3.0
    b = a.sum(-1, keepdim=True)
    return (a / b).sigmoid() - 1.0


def two_outputs(x: Tensor, w: Tensor) -> Tensor:
    y = x * 2.0  # (an output of the kernel below, stored before the conv's result is read)
    z = torch.relu(F.conv2d(x, w, padding=1)) + y
    return F.conv2d(y, w, padding=1) + z
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("reuse_models")
    with imported_source(root, "reuse_models", SOURCE) as module:
        yield module


def generated(tmp_path) -> str:
    return next((tmp_path / "jit").glob("*.py")).read_text()


@pytest.mark.parametrize("name", ["epilogue", "bias_only"])
def test_matmul_epilogues_match_eager(fns, name, tmp_path, monkeypatch) -> None:
    fn = getattr(fns, name)
    x, w, b = torch.randn(4, 24), torch.randn(24, 40), torch.randn(40)
    f = compiled(fn, (x, w, b), tmp_path, monkeypatch)
    assert "in0.contiguous()" in generated(tmp_path)
    for n in (1, 7, 1000):  # 1000 x 40: the parallel loop
        x = torch.randn(n, 24)
        assert_close_to_eager(f(x, w, b), fn(x, w, b), f"batch {n}")
    # w transposed: matmul's result is still fresh; x a slice with a storage offset
    wt = torch.randn(40, 24).t()
    x = torch.randn(9, 24)[2:]
    assert_close_to_eager(f(x, wt, b), fn(x, wt, b), "strided operands")


def test_a_conv_result_in_channels_last_is_made_contiguous_first(fns, tmp_path, monkeypatch) -> None:
    x, w = torch.randn(2, 3, 9, 9), torch.randn(5, 3, 3, 3)
    f = compiled(fns.conv_relu, (x, w), tmp_path, monkeypatch)
    assert "in0.contiguous()" in generated(tmp_path)
    assert_close_to_eager(f(x, w), fns.conv_relu(x, w))
    xc, wc = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    assert not F_conv_is_contiguous(xc, wc)
    assert_close_to_eager(f(xc, wc), fns.conv_relu(xc, wc), "channels_last")


def F_conv_is_contiguous(x: torch.Tensor, w: torch.Tensor) -> bool:
    return torch.nn.functional.conv2d(x, w).is_contiguous()


def test_softmax_writes_over_the_scores(fns, tmp_path, monkeypatch) -> None:
    q, k, v = torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.randn(2, 7, 16)
    f = compiled(fns.attention, (q, k, v), tmp_path, monkeypatch)
    assert "in0.contiguous()" in generated(tmp_path)
    for b in (1, 3):
        q, k, v = torch.randn(b, 5, 16), torch.randn(b, 7, 16), torch.randn(b, 7, 16)
        assert_close_to_eager(f(q, k, v), fns.attention(q, k, v), f"batch {b}")


def test_a_kernel_writes_over_an_earlier_kernels_output(fns, tmp_path, monkeypatch) -> None:
    """exp(x) * 3 is both an output of the reduction kernel's row (read by the sum) and an
    input of the next: it is a temporary of the function, so the last kernel writes over it."""
    x = torch.randn(6, 33)
    f = compiled(fns.chained, (x,), tmp_path, monkeypatch)
    for shape in ((6, 33), (1, 33), (3000, 33)):
        x = torch.randn(shape)
        assert_close_to_eager(f(x), fns.chained(x), str(shape))


def test_a_kernel_with_two_outputs_reads_the_input_it_writes_over_first(fns, tmp_path, monkeypatch) -> None:
    """Output 0 (`x * 2`) is written over the conv's result, which output 1 reads: the element's
    load of it comes before any store (it came after output 0's store: silently wrong results,
    found in hrnet's branch fusion)."""
    x, w = torch.randn(2, 4, 6, 6), torch.randn(4, 4, 3, 3)
    f = compiled(fns.two_outputs, (x, w), tmp_path, monkeypatch)
    text = generated(tmp_path)
    assert "out1[o + j]" in text and ".contiguous()," in text  # (two outputs, one over the conv's result)
    for b in (1, 3):
        x = torch.randn(b, 4, 6, 6)
        assert_close_to_eager(f(x, w), fns.two_outputs(x, w), f"batch {b}")


LINEAR_BIAS = """\
func @f(%x: f32[B, 8]@cpu, %w: f32[16, 8]@cpu, %b: f32[16]@cpu) -> f32[B, 16]@cpu {
  %0 : f32[B, 16]@cpu = torch.call(%x, %w) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %1 : f32[B, 16]@cpu = py.binary(%0, %b) {op = "+"}
  func.return(%1)
}
"""


def test_a_bias_add_that_joins_nothing_goes_back_into_the_linear() -> None:
    """Decomposition splits linear's bias off so that it can join an epilogue; alone, one
    `linear(x, w, b)` call (bias added in the GEMM) beats a GEMM plus a kernel pass."""
    assert reused(LINEAR_BIAS) == """\
func @f(%x: f32[B, 8]@cpu, %w: f32[16, 8]@cpu, %b: f32[16]@cpu) -> f32[B, 16]@cpu {
  %0 : f32[B, 16]@cpu = torch.call(%x, %w, %b) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%0)
}
"""
    with_activation = LINEAR_BIAS.replace("  func.return(%1)", """\
  %2 : f32[B, 16]@cpu = torch.call(%1) {callee = "torch.tanh", aten = "aten::tanh"}
  func.return(%2)""")
    out = reused(with_activation)
    assert 'kernel.pointwise(%0, %b) {name = "add_tanh", inputs = 2, reuse = ((0, 0),)}' in out
    # the linear's result used twice: it stays, and so does the add
    twice = LINEAR_BIAS.replace("  func.return(%1)", "  func.return(%1, %0)").replace(
        "-> f32[B, 16]@cpu {", "-> tuple[f32[B, 16]@cpu, f32[B, 16]@cpu] {")
    assert "torch.call(%x, %w) {" in reused(twice)

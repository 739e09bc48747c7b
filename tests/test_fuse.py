"""Pointwise fusion into C++ kernels: which ops group (IR in, IR out), and the generated kernels
against eager over dtypes, broadcasting, strides, storage offsets, zero sizes and sizes that are
not a multiple of the vector width."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from source_module import imported_source
from ir.core import ops
from ir.kernel import ops as kernel_ops
from ir.core.parser import parse_program
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.kernel.primitives import op_name
from ir.core.printer import print_program
from ir.core.verifier import verify

CHAIN = """\
func @f(%x: f32[B, 8]@cpu, %y: f32[8]@cpu) -> f32[B, 8]@cpu {
  %0 : f32[B, 8]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 8]@cpu = py.binary(%0, %y) {op = "*"}
  %2 : float = py.constant() {value = 0.5}
  %3 : f32[B, 8]@cpu = py.binary(%1, %2) {op = "+"}
  func.return(%3)
}
"""


def fused(text: str) -> str:
    program = parse_program(text)
    fuse(program)
    dce(program)  # (as the pipeline does next: the constants the kernel copied)
    verify(program)
    out = print_program(program, with_locs=False)
    assert print_program(parse_program(out), with_locs=False) == out
    return out


def test_a_chain_becomes_one_kernel() -> None:
    out = fused(CHAIN)
    assert out == """\
func @f(%x: f32[B, 8]@cpu, %y: f32[8]@cpu) -> f32[B, 8]@cpu {
  %0 : f32[B, 8]@cpu = kernel.pointwise(%x, %y) {name = "exp_mul_add", inputs = 2} {
    ^(%x_1: f32[]@cpu, %y_1: f32[]@cpu):
    %1 : f32[]@cpu = torch.call(%x_1) {callee = "torch.exp", aten = "aten::exp"}
    %2 : f32[]@cpu = py.binary(%1, %y_1) {op = "*"}
    %3 : float = py.constant() {value = 0.5}
    %4 : f32[]@cpu = py.binary(%2, %3) {op = "+"}
    scf.yield(%4)
  }
  func.return(%0)
}
"""


def test_unknown_facts_and_single_ops_stay() -> None:
    unknown = CHAIN.replace("f32[B, 8]@cpu", "Tensor").replace("f32[8]@cpu", "Tensor")
    assert fused(unknown) == print_program(parse_program(unknown), with_locs=False)
    single = """\
func @f(%x: f32[4]@cpu) -> f32[4]@cpu {
  %0 : f32[4]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  func.return(%0)
}
"""
    assert fused(single) == single


SCALED_QUERY = """\
func @f(%q: f32[B, 4, 3, 8]@cpu, %k: f32[B, 3, 8, 4]@cpu) -> f32[B, 3, 4, 4]@cpu {
  %0 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 1, 3)}
  %1 : f32[B, 3, 4, 8]@cpu = torch.method(%q, %0) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %2 : float = py.constant() {value = 0.25}
  %3 : f32[B, 3, 4, 8]@cpu = py.binary(%1, %2) {op = "*"}
  %4 : f32[B, 3, 4, 4]@cpu = torch.call(%3, %k) {callee = "torch.matmul", aten = "aten::matmul"}
  func.return(%4)
}
"""


def test_a_lone_op_on_a_view_that_only_a_gemm_reads_is_a_kernel() -> None:
    """Eager's `q * 0.25` keeps the permuted strides and matmul copies it; the kernel writes it
    row-major."""
    out = fused(SCALED_QUERY)
    assert 'kernel.pointwise(%1) {name = "mul", inputs = 1}' in out
    # on a tensor that is no view, or read by more than GEMMs, it stays a torch call
    plain = SCALED_QUERY.replace("py.binary(%1, %2)", "py.binary(%k, %2)").replace(
        "%3 : f32[B, 3, 4, 8]@cpu", "%3 : f32[B, 3, 8, 4]@cpu").replace(
        "torch.call(%3, %k)", "torch.call(%1, %3)")
    assert "kernel.pointwise" not in fused(plain)
    shared = SCALED_QUERY.replace("torch.call(%3, %k)", "torch.call(%5, %k)").replace(
        "  %4 :", '  %5 : f32[B, 3, 4, 8]@cpu = torch.method(%3) {method = "contiguous", alias_of = 0, '
        'aten = "aten::contiguous"}\n  %4 :')
    assert "contiguous" in fused(shared) and "kernel.pointwise" not in fused(shared)


def test_a_value_used_outside_is_an_output_and_ends_the_group() -> None:
    text = """\
func @f(%x: f32[4]@cpu) -> tuple[f32[4]@cpu, f32[]@cpu] {
  %0 : f32[4]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[4]@cpu = py.binary(%0, %x) {op = "*"}
  %2 : f32[]@cpu = torch.method(%1) {method = "sum", aten = "aten::sum"}
  %3 : f32[4]@cpu = py.binary(%1, %2) {op = "/"}
  %4 : f32[4]@cpu = torch.call(%3) {callee = "torch.tanh", aten = "aten::tanh"}
  %5 : tuple[f32[4]@cpu, f32[]@cpu] = py.tuple(%4, %2)
  func.return(%5)
}
"""
    out = fused(text)
    program = parse_program(out)
    kernels = [op for op in program.walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    assert len(kernels) == 2, out  # exp*x, then (/ sum, tanh) after the reduction
    assert kernels[0].attributes["name"].startswith("exp_mul")


def test_a_smaller_value_used_outside_does_not_undo_the_kernel_after_it() -> None:
    # a per-channel mean that is returned, then subtracted from every row and squared and summed:
    # the mean's op makes a group of its own, the rest a reduction kernel reading it
    text = """\
func @f(%x: f32[B, 4, 16]@cpu, %s: f32[4, 1]@cpu, %n: int) -> tuple[f32[B, 4, 1]@cpu, f32[4, 1]@cpu] {
  %mean : f32[4, 1]@cpu = py.binary(%s, %n) {op = "/"}
  %0 : f32[B, 4, 16]@cpu = py.binary(%x, %mean) {op = "-"}
  %1 : f32[B, 4, 16]@cpu = py.binary(%0, %0) {op = "*"}
  %2 : int = py.constant() {value = 2}
  %3 : bool = py.constant() {value = True}
  %4 : f32[B, 4, 1]@cpu = torch.call(%1, %2, %3) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %5 : tuple[f32[B, 4, 1]@cpu, f32[4, 1]@cpu] = py.tuple(%4, %mean)
  func.return(%5)
}
"""
    out = fused(text)
    assert "%mean : f32[4, 1]@cpu = py.binary(%s, %n)" in out, out
    program = parse_program(out)
    kernels = [op for op in program.walk() if isinstance(op, kernel_ops.ReductionKernelOp)]
    assert len(kernels) == 1 and kernels[0].operands[:2] == [program.funcs[0].args[0], kernels[0].operands[1]], out
    assert kernels[0].operands[1].name == "mean", out


def test_a_gate_joins_its_multiply_across_a_permute_and_a_finished_group() -> None:
    """A squeeze-and-excitation gate in channels-last order (`exp` for its decomposed sigmoid):
    `exp(s).permute(0, 2, 3, 1) * y` where `y` is a kernel's output that the pooling also reads
    (its group is finished). The permute of `[B, C, 1, 1]` moves no memory, so it sinks below
    the exp, and the multiply joins the exp's group, `y` an input: one kernel, where the
    multiply was a torch call."""
    text = """\
func @f(%x: f32[B, 4, 4, 8]@cpu, %s: f32[B, 8, 1, 1]@cpu) -> f32[B, 4, 4, 8]@cpu {
  %dims : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %0 : f32[B, 4, 4, 8]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 4, 4, 8]@cpu = py.binary(%0, %x) {op = "*"}
  %2 : f32[B, 1, 1, 8]@cpu = torch.method(%1) {method = "sum", aten = "aten::sum"}
  %3 : f32[B, 8, 1, 1]@cpu = torch.call(%s) {callee = "torch.exp", aten = "aten::exp"}
  %4 : f32[B, 1, 1, 8]@cpu = torch.method(%3, %dims) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %5 : f32[B, 4, 4, 8]@cpu = py.binary(%4, %1) {op = "*"}
  %6 : f32[B, 4, 4, 8]@cpu = py.binary(%5, %2) {op = "+"}
  func.return(%6)
}
"""
    out = fused(text)
    kernels = [op for op in parse_program(out).walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    assert len(kernels) == 2, out
    assert 'torch.method(%s, %dims) {method = "permute"' in out, out  # the permute reads the input
    gate = kernels[1]
    assert [op_name(o) for o in gate.body.ops if not isinstance(o, (ops.ConstantOp, ops.YieldOp))]== ["exp", "mul", "add"], out


BATCH_NORM = """\
func @f(%x: f32[B, 8, 5, 5]@cpu, %v: f32[8]@cpu, %w: f32[8]@cpu, %m: f32[8]@cpu, %b: f32[8]@cpu) -> f32[B, 8, 5, 5]@cpu {
  %eps : float = py.constant() {value = 1e-05}
  %c11 : tuple[int, int, int] = py.constant() {value = (8, 1, 1)}
  %0 : f32[8]@cpu = py.binary(%v, %eps) {op = "+"}
  %1 : f32[8]@cpu = torch.call(%0) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %2 : f32[8]@cpu = torch.call(%1) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  %alpha : f32[8]@cpu = py.binary(%2, %w) {op = "*"}
  %3 : f32[8]@cpu = py.binary(%m, %alpha) {op = "*"}
  %beta : f32[8]@cpu = py.binary(%b, %3) {op = "-"}
  %4 : f32[8, 1, 1]@cpu = torch.method(%alpha, %c11) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %5 : f32[B, 8, 5, 5]@cpu = py.binary(%x, %4) {op = "*"}
  %6 : f32[8, 1, 1]@cpu = torch.method(%beta, %c11) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %7 : f32[B, 8, 5, 5]@cpu = py.binary(%5, %6) {op = "+"}
  func.return(%7)
}
"""


def test_per_channel_values_of_several_inputs_join_their_consumer() -> None:
    """Batch norm's alpha = 1 / sqrt(var + eps) * w (used twice) and beta = b - m * alpha, each
    reshaped to (C, 1, 1): the per-channel DAG is computed from reshaped inputs instead, and the
    whole of it joins the kernel that scales x, one kernel where there were two and reshapes of
    their results."""
    out = fused(BATCH_NORM)
    kernels = [op for op in parse_program(out).walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    assert len(kernels) == 1, out
    assert [op_name(o) for o in kernels[0].body.ops if not isinstance(o, (ops.ConstantOp, ops.YieldOp))] == \
        ["add", "sqrt", "reciprocal", "mul", "mul", "sub", "mul", "add"], out
    reshaped = [line.split("torch.method(")[1].split(",")[0] for line in out.splitlines() if '"reshape"' in line]
    assert sorted(reshaped) == ["%b", "%m", "%v", "%w"], out  # (the inputs, once each)


def test_per_channel_values_reshaped_by_a_later_constant() -> None:
    """beta's reshape reads a shape constant of its own, defined after alpha's reshape (where
    the DAG moves to): the moved reshapes read alpha's constant, which is defined before them.
    (Found by tests/test_module_programs.py: an eval batch norm of one channel, on a 1x1 image,
    did not verify: `operand #1 is not defined before this use`.)"""
    text = BATCH_NORM.replace(
        "  %6 : f32[8, 1, 1]@cpu = torch.method(%beta, %c11)",
        "  %c11b : tuple[int, int, int] = py.constant() {value = (8, 1, 1)}\n"
        "  %6 : f32[8, 1, 1]@cpu = torch.method(%beta, %c11b)")
    out = fused(text)
    kernels = [op for op in parse_program(out).walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    assert len(kernels) == 1, out
    reshaped = [line.split("torch.method(")[1].split(")")[0] for line in out.splitlines() if '"reshape"' in line]
    assert sorted(reshaped) == ["%b, %c11", "%m, %c11", "%v, %c11", "%w, %c11"], out


def test_per_channel_values_used_elsewhere_stay() -> None:
    """A value of the DAG that is also used as it is (here alpha, returned) stays where it is,
    computed by a kernel of its own, and is an input of what moves (beta's part)."""
    text = BATCH_NORM.replace("-> f32[B, 8, 5, 5]@cpu {", "-> tuple[f32[B, 8, 5, 5]@cpu, f32[8]@cpu] {").replace(
        "  func.return(%7)",
        "  %8 : tuple[f32[B, 8, 5, 5]@cpu, f32[8]@cpu] = py.tuple(%7, %alpha)\n  func.return(%8)")
    out = fused(text)
    assert '%alpha : f32[8]@cpu = kernel.pointwise(%v, %w)' in out, out
    kernels = [op for op in parse_program(out).walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    assert len(kernels) == 2, out


def test_no_read_moves_past_a_write() -> None:
    text = """\
func @f(%x: f32[4]@cpu) -> f32[4]@cpu {
  %0 : f32[4]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : int = py.constant() {value = 1}
  %2 : f32[4]@cpu = torch.method(%x, %1) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %3 : f32[4]@cpu = py.binary(%0, %x) {op = "*"}
  func.return(%3)
}
"""
    assert fused(text) == print_program(parse_program(text), with_locs=False)


def test_no_read_moves_down_past_a_write_to_meet_a_reshape() -> None:
    """`sigmoid(x)` (here `exp`), then `x.add_(1)`, then the reshape of the sigmoid: sinking the
    reshape would compute the exp after the write, of the new `x` (a miscompile, once)."""
    text = """\
func @f(%x: f32[4]@cpu, %y: f32[4, 3]@cpu) -> f32[4, 3]@cpu {
  %shape : tuple[int, int] = py.constant() {value = (4, 1)}
  %0 : f32[4]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : int = py.constant() {value = 1}
  %2 : f32[4]@cpu = torch.method(%x, %1) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %3 : f32[4, 1]@cpu = torch.method(%0, %shape) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %4 : f32[4, 3]@cpu = py.binary(%y, %3) {op = "*"}
  func.return(%4)
}
"""
    out = fused(text)
    assert 'torch.method(%0, %shape) {method = "reshape"' in out, out  # the reshape still reads exp(x)
    assert out.index('callee = "torch.exp"') < out.index('method = "add_"'), out


def test_no_read_of_the_per_channel_dag_moves_up_past_a_write() -> None:
    """Batch norm's DAG with alpha reshaped before a write to `m` and beta (which reads `m`)
    after it: computing the DAG where alpha's reshape stands would read `m` before the write. The
    DAG stays; beta is computed after the write."""
    text = """\
func @f(%x: f32[B, 8, 5, 5]@cpu, %v: f32[8]@cpu, %w: f32[8]@cpu, %m: f32[8]@cpu, %b: f32[8]@cpu) -> f32[B, 8, 5, 5]@cpu {
  %eps : float = py.constant() {value = 1e-05}
  %c11 : tuple[int, int, int] = py.constant() {value = (8, 1, 1)}
  %one : int = py.constant() {value = 1}
  %0 : f32[8]@cpu = py.binary(%v, %eps) {op = "+"}
  %1 : f32[8]@cpu = torch.call(%0) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %2 : f32[8]@cpu = torch.call(%1) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  %alpha : f32[8]@cpu = py.binary(%2, %w) {op = "*"}
  %4 : f32[8, 1, 1]@cpu = torch.method(%alpha, %c11) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %written : f32[8]@cpu = torch.method(%m, %one) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %3 : f32[8]@cpu = py.binary(%m, %alpha) {op = "*"}
  %beta : f32[8]@cpu = py.binary(%b, %3) {op = "-"}
  %5 : f32[B, 8, 5, 5]@cpu = py.binary(%x, %4) {op = "*"}
  %6 : f32[8, 1, 1]@cpu = torch.method(%beta, %c11) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %7 : f32[B, 8, 5, 5]@cpu = py.binary(%5, %6) {op = "+"}
  func.return(%7)
}
"""
    out = fused(text)
    reshaped = [line.split("torch.method(")[1].split(",")[0] for line in out.splitlines() if '"reshape"' in line]
    assert sorted(reshaped) == ["%alpha", "%beta"], out  # (the DAG did not move)
    assert out.index('method = "add_"') < out.index("%beta : f32[8]@cpu = kernel.pointwise(%m"), out


# -- generated kernels against eager --------------------------------------------------------------
WRITES_BETWEEN = '''
import torch


def add_between(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    x.add_(1.0)
    return y * s.reshape(4, 1)


def store_between(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    x[0] = 5.0
    return y * s.reshape(4, 1)


def write_in_a_loop_between(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = torch.exp(x)
    for i in range(2):
        x.mul_(2.0)
    return y * s.reshape(4, 1)
'''


@pytest.mark.parametrize("name", ["add_between", "store_between", "write_in_a_loop_between"])
def test_a_value_read_before_a_write_keeps_its_value(name, tmp_path, monkeypatch) -> None:
    """`s = sigmoid(x)`, a write to `x`, then `s` reshaped: values and the written input as
    eager's (the sigmoid was once computed after the write)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "writes_between", WRITES_BETWEEN) as mod:
        fn = getattr(mod, name)
        x, y = torch.randn(4), torch.randn(4, 3)
        compiled = script(fn, example_inputs=(x.clone(), y))
        mine, theirs = x.clone(), x.clone()
        with runtime.mode("strict"):
            got = compiled(mine, y)
        assert_close_to_eager(got, fn(theirs, y))
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)


SCALED_ATTENTION = '''
import torch


def scores(qkv: torch.Tensor, scale: float) -> torch.Tensor:
    qkv = qkv.permute(2, 0, 3, 1, 4)
    q = qkv[0] * scale
    return q.matmul(qkv[1].transpose(-2, -1))
'''


def test_a_scaled_query_written_row_major_gives_eagers_scores(tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "scaled_attention", SCALED_ATTENTION) as mod:
        qkv = torch.randn(4, 7, 3, 2, 5)
        compiled = script(mod.scores, example_inputs=(qkv, 0.3))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        assert "q = mul(qkv[0], scale)" in text
        for batch in (4, 2):
            qkv = torch.randn(batch, 7, 3, 2, 5)
            with runtime.mode("strict"):
                got = compiled(qkv, 0.3)
            assert_close_to_eager(got, mod.scores(qkv, 0.3))


SOURCE = '''
import torch
from torch import Tensor


def chain(x: Tensor, y: Tensor) -> Tensor:
    a = torch.exp(-x * x) + y
    b = torch.tanh(a) * 0.5 + torch.sigmoid(x)
    c = torch.where(b > 0.1, b, y - 1.0)
    return torch.maximum(c, x.abs()) / (1.0 + x * x)


def compare(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    m = (x > y) & (x < 2.0)
    return m, (x * 2 + y).to(torch.float64) - 1.5


def ints(x: Tensor, y: Tensor) -> Tensor:
    return (x * 3 + y - 1) * (x > 0).to(x.dtype)


def gelu_by_hand(x: Tensor) -> Tensor:
    return x * 0.5 * (1 + torch.erf(x * 0.7071067811865476))


def erf_and_cdf(x: Tensor) -> tuple[Tensor, Tensor]:
    e = torch.erf(x)
    return e, 0.5 * (1 + e)


def trig(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    a = torch.sin(x) * torch.tanh(y) + torch.exp(-x.abs())
    return a, torch.cos(a) + y
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fuse_models")
    with imported_source(root, "fuse_models", SOURCE) as module:
        yield module


def compiled(fn, example, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    out = script(fn, example_inputs=example)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "kernel" in text and "_lib." in text, "nothing was fused"
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_float_chain_matches_eager(fns, dtype, tmp_path, monkeypatch) -> None:
    x, y = torch.randn(5, 37, dtype=dtype), torch.randn(37, dtype=dtype)
    f = compiled(fns.chain, (x, y), tmp_path, monkeypatch)
    for n in (1, 3, 64, 0):  # 0: a zero-size batch (runs eagerly: size symbols are >= 1)
        x, y = torch.randn(n, 37, dtype=dtype), torch.randn(37, dtype=dtype)
        assert_close_to_eager(f(x, y), fns.chain(x, y), f"batch {n}")
    x = torch.randn(37, 300, dtype=dtype).t()  # strided (transposed) input
    assert_close_to_eager(f(x, y), fns.chain(x, y), "transposed")
    big = torch.randn(1000, 37, dtype=dtype)[1:]  # a storage offset; parallel loops
    assert_close_to_eager(f(big, y), fns.chain(big, y), "offset")
    special = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0, -0.0] * 7 + [1.0, -1.0]], dtype=dtype)
    assert_close_to_eager(f(special, y), fns.chain(special, y), "NaN and inf")


@pytest.mark.parametrize("width", [1, 6, 67, 130])
def test_elements_four_at_a_time_match_eager(fns, width, tmp_path, monkeypatch) -> None:
    """An element with three or more transcendentals runs four at a time (ts_elements<4>, kernels.h:
    j, n/4 + j, ...; what n/4 leaves, one at a time): every element is computed and stored once,
    also for rows shorter than four, of a length that four does not divide, and strided."""
    x, y = torch.randn(3, width) * 3, torch.randn(3, width)
    f = compiled(fns.trig, (x, y), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "ts_elements<4>(" in text, text
    assert_close_to_eager(f(x, y), fns.trig(x, y), "contiguous")
    x, y = torch.randn(width, 5).t() * 3, torch.randn(width, 5).t()  # (rows not folded into one)
    assert_close_to_eager(f(x, y), fns.trig(x, y), "transposed")


def test_an_erf_only_added_to_one_is_the_cheaper_erf(fns, tmp_path, monkeypatch) -> None:
    """`1 + erf(x)` keeps erf's error relative to 1 only, so an erf whose every use is that sum is
    vecmath.h's ts_erf_fast (absolute error 4e-7); an erf also used as itself stays ts_erf. Both
    against eager, with the tails where `1 + erf` is 0 and the special values."""
    x = torch.cat([torch.linspace(-12, 12, 4001), torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, -1e30])])
    f = compiled(fns.gelu_by_hand, (x,), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "ts_erf_fast(" in text and "ts_erf(" not in text, text
    with runtime.mode("strict"):  # (the kernel runs: a fallback to eager would raise)
        got = f(x)
    assert_close_to_eager(got, fns.gelu_by_hand(x), "gelu")
    assert (got[(x < -6) & (x > -float("inf"))] == 0).all()
    for old in (tmp_path / "jit").glob("*.py"):
        old.unlink()
    g = compiled(fns.erf_and_cdf, (x,), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "ts_erf(" in text and "ts_erf_fast(" not in text, text
    with runtime.mode("strict"):
        got = g(x)
    assert_close_to_eager(got, fns.erf_and_cdf(x), "erf and the CDF")


def test_elements_one_at_a_time_without_transcendentals(fns, tmp_path, monkeypatch) -> None:
    """Four at a time only pays for a long chain of math: a kernel of a few arithmetic ops runs
    its elements one at a time (its code compiled once, not five times)."""
    compiled(fns.ints, (torch.randn(6, 11), torch.randn(11)), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "ts_elements" not in text and "for (int64_t j" in text, text


def test_comparisons_casts_and_two_outputs(fns, tmp_path, monkeypatch) -> None:
    x, y = torch.randn(4, 9), torch.randn(4, 9)
    f = compiled(fns.compare, (x, y), tmp_path, monkeypatch)
    for n in (1, 7):
        x, y = torch.randn(n, 9), torch.randn(n, 9)
        assert_close_to_eager(f(x, y), fns.compare(x, y))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_integer_kernels(fns, dtype, tmp_path, monkeypatch) -> None:
    x, y = torch.randint(-50, 50, (6, 11), dtype=dtype), torch.randint(-50, 50, (11,), dtype=dtype)
    f = compiled(fns.ints, (x, y), tmp_path, monkeypatch)
    x = torch.randint(-50, 50, (3, 11), dtype=dtype)
    assert torch.equal(f(x, y), fns.ints(x, y))


def test_zero_size_kernels(fns, tmp_path, monkeypatch) -> None:
    x, y = torch.randn(4, 0), torch.randn(0)
    f = compiled(fns.chain, (x, y), tmp_path, monkeypatch)
    with runtime.mode("strict"):  # the kernel itself runs, with no elements
        got = f(torch.randn(2, 0), y)
    assert got.shape == (2, 0) and got.dtype == torch.float32


# A kernel's rows on the threads (ts_rows): how many threads took a share, and ts_fold.
THREADS_CPP = r"""#include <torchscribe/kernels.h>
#include <atomic>
extern "C" void threads_used(int64_t rows, int64_t* out) {
  std::atomic<int64_t> shares{0};
  ts_rows([&](int64_t begin, int64_t end) { shares += begin < end; }, rows, true);
  *out = shares;
}
extern "C" void fold(int64_t n, int64_t inner, int64_t* out) { *out = ts_fold(n, inner); }
"""


def test_kernels_run_on_torchs_thread_count(tmp_path, monkeypatch) -> None:
    """ts_rows shares the rows among torch.set_num_threads threads, also in a Python thread
    other than the one that set it (where OpenMP's own count is every core)."""
    import threading

    from runtime.kernels import Library

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    lib = Library(THREADS_CPP)
    out = torch.zeros(1, dtype=torch.int64)

    def used(rows: int = 1000) -> int:
        lib.threads_used(rows, out.data_ptr())
        return int(out)

    before = torch.get_num_threads()
    try:
        for n in (1, 2, 1):
            torch.set_num_threads(n)
            seen: list[int] = []
            other = threading.Thread(target=lambda: seen.append(used()))
            other.start()
            other.join()
            assert (used(), seen, used(1)) == (n, [n], 1)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("n, inner, folded", [
    (7, 300, 7),  # short enough together: one row
    (2048, 2048, 2),  # rows of 4096 at most, the rest for the threads
    (96, 100, 32),  # the largest power of two dividing n
    (4099, 3, 4099),  # that leaves rows of 3: one row after all
    (7, 1000, 1),
    (0, 5, 1), (1, 10**6, 1),
])
def test_how_many_rows_fold_into_one(tmp_path, monkeypatch, n: int, inner: int, folded: int) -> None:
    from runtime.kernels import Library

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    out = torch.zeros(1, dtype=torch.int64)
    Library(THREADS_CPP).fold(n, inner, out.data_ptr())
    assert int(out) == folded


# ts_unit_or_strided that instantiates the version for unit strides alone
UNIT_ONLY = "template <class B> static inline void unit_only(bool, const B& body) { body(std::true_type{}); }\n"


def test_the_unit_stride_loop_vectorises() -> None:
    """The compiler's own report: the inner loop of a fused chain with exp, tanh and a select
    is vectorised (the transcendentals are codegen/cpp_math.py's, not libm calls)."""
    from codegen.cpp_kernels import PRELUDE, emit_kernel
    from codegen.cpp_math import vectorization_report, vectorized_lines

    program = parse_program(CHAIN.replace('{op = "+"}', '{op = "+"}\n  %9 : f32[B, 8]@cpu = torch.call(%3) '
                                          '{callee = "torch.tanh", aten = "aten::tanh"}').replace(
        "func.return(%3)", "func.return(%9)"))
    fuse(program)
    [kernel] = [op for op in program.walk() if isinstance(op, kernel_ops.PointwiseKernelOp)]
    text, _ = emit_kernel(kernel)
    assert text.count("for (int64_t j") == 1, text  # (one loop body, for unit and other strides)
    # only the version for unit strides (both versions' loops are on one line)
    source = PRELUDE + UNIT_ONLY + text.replace("ts_unit_or_strided(", "unit_only(")
    unit_loop = next(i for i, line in enumerate(source.splitlines(), start=1) if "for (int64_t j" in line)
    # (gcc names the loop by its `for` line or by the first line of its body)
    assert vectorized_lines(vectorization_report(source)) & {unit_loop, unit_loop + 1}, text


def test_no_read_moves_past_a_write_inside_a_loop() -> None:
    """A write nested in a loop between two ops of a chain ends the group: the kernel would
    otherwise stand after the loop and read `x` after the write."""
    text = """\
func @f(%x: f32[4]@cpu) -> f32[4]@cpu {
  %0 : f32[4]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[4]@cpu = py.binary(%0, %x) {op = "*"}
  %2 : int = py.constant() {value = 0}
  %3 : int = py.constant() {value = 2}
  %4 : int = py.constant() {value = 1}
  scf.for(%2, %3, %4) {
    ^(%i: int):
    %5 : f32[4]@cpu = torch.method(%x, %4) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
    scf.yield()
  }
  %6 : f32[4]@cpu = py.binary(%1, %x) {op = "+"}
  %7 : f32[4]@cpu = torch.call(%6) {callee = "torch.tanh", aten = "aten::tanh"}
  func.return(%7)
}
"""
    out = fused(text)
    program = parse_program(out)
    body = program.funcs[0].regions[0].block.ops
    kinds = [op.name for op in body if op.name in ("kernel.pointwise", "scf.for")]
    assert kinds == ["kernel.pointwise", "scf.for", "kernel.pointwise"], out


def test_identity_casts_and_integer_powers_stay() -> None:
    """`x.float()` of a float32 tensor is `x` itself in eager (an alias, not a copy), and integer
    `pow` is exact in torch: neither goes into a kernel."""
    text = """\
func @f(%x: f32[4]@cpu, %n: i64[4]@cpu) -> tuple[f32[4]@cpu, i64[4]@cpu] {
  %0 : f32[4]@cpu = torch.method(%x) {method = "float", alias_of = 0, aten = "aten::to.dtype"}
  %1 : f32[4]@cpu = torch.call(%0) {callee = "torch.exp", aten = "aten::exp"}
  %2 : int = py.constant() {value = 3}
  %3 : i64[4]@cpu = py.binary(%n, %2) {op = "**"}
  %4 : i64[4]@cpu = py.binary(%3, %2) {op = "+"}
  %5 : tuple[f32[4]@cpu, i64[4]@cpu] = py.tuple(%1, %4)
  func.return(%5)
}
"""
    assert "kernel.pointwise" not in fused(text)


def test_integer_overflow_wraps_like_torch(fns, tmp_path, monkeypatch) -> None:
    x = torch.tensor([[2**31 - 1, -(2**31), 2**30, 5]], dtype=torch.int32)
    y = torch.tensor([7, -7, 2**30, 1], dtype=torch.int32)
    f = compiled(fns.ints, (x.repeat(3, 1), y), tmp_path, monkeypatch)
    assert torch.equal(f(x.repeat(2, 1), y), fns.ints(x.repeat(2, 1), y))


def test_kernels_are_named_for_what_they_compute() -> None:
    """Without a source, a kernel is named after its ops; two in one function are told apart by
    a number; each function names its own (codegen/kernel_names.py: apart in a module)."""
    g = CHAIN.replace("func @f(", "func @g(")
    twice = CHAIN.replace("%y: f32[8]@cpu)", "%y: f32[8]@cpu, %w: f32[8, 8]@cpu)").replace("  func.return(%3)", """\
  %4 : f32[B, 8]@cpu = torch.call(%3, %w) {callee = "torch.matmul", aten = "aten::matmul"}
  %5 : f32[B, 8]@cpu = torch.call(%4) {callee = "torch.exp", aten = "aten::exp"}
  %6 : f32[B, 8]@cpu = py.binary(%5, %y) {op = "*"}
  %7 : f32[B, 8]@cpu = py.binary(%6, %2) {op = "+"}
  func.return(%7)""")

    def names(text: str) -> list[str]:
        return [op.attributes["name"] for op in parse_program(fused(text)).walk() if isinstance(op, kernel_ops.KernelOp)]

    assert names(CHAIN + "\n" + g) == ["exp_mul_add", "exp_mul_add"]
    assert names(twice + "\n" + g) == ["exp_mul_add", "exp_mul_add_2", "exp_mul_add"]


NAMED_SOURCE = """\
h = self.act(self.bn1(x)) * 2.0
y = torch.nn.functional.softmax(h, dim=-1)
z = torch.abs(w) + 8.0
"""
NAMED = """\
func @f(%x: f32[B, 8]@cpu, %w: f32[B, 8]@cpu) -> tuple[f32[B, 8]@cpu, f32[B, 8]@cpu] {
  %0 : f32[B, 8]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}  # m.py:1:15
  %1 : f32[B, 8]@cpu = torch.call(%0) {callee = "torch.tanh", aten = "aten::tanh"}  # m.py:1:5
  %2 : float = py.constant() {value = 2.0}
  %3 : f32[B, 8]@cpu = py.binary(%1, %2) {op = "*"}  # m.py:1:5
  %4 : f32[B, 8]@cpu = torch.call(%3) {callee = "torch.exp", aten = "aten::exp"}  # m.py:2:5
  %5 : f32[B, 8]@cpu = torch.call(%w) {callee = "torch.abs", aten = "aten::abs"}  # m.py:3:5
  %6 : float = py.constant() {value = 8.0}
  %7 : f32[B, 8]@cpu = py.binary(%5, %6) {op = "+"}  # m.py:3:5
  %8 : tuple[f32[B, 8]@cpu, f32[B, 8]@cpu] = py.tuple(%4, %7)
  func.return(%8)
}
"""


def test_kernels_are_named_after_the_calls_their_ops_come_from() -> None:
    """`self.act(self.bn1(x)) * 2.0` then a softmax: `bn1_act_softmax`, the modules and functions
    called, in the order the kernel computes them (an operator names nothing); a name Python
    binds (`abs`) takes the kernel's ops after it."""
    program = parse_program(NAMED)
    program.source_lines = {"m.py": NAMED_SOURCE.splitlines()}
    fuse(program)
    names = [op.attributes["name"] for op in program.walk() if isinstance(op, kernel_ops.KernelOp)]
    assert names == ["bn1_act_softmax", "abs_add"]
    # from a span's text: what a call calls, None for an operator or a statement
    from ir.core.graph import Loc
    from ir.kernel.names import called_name

    lines = {"m.py": ["out = self.relu(self.bn1(out))", "out += identity", "y = F.gelu(", "    x)"]}
    assert called_name(Loc("m.py", 1, 6, 1, 30), lines) == "relu"
    assert called_name(Loc("m.py", 1, 16, 1, 29), lines) == "bn1"
    assert called_name(Loc("m.py", 3, 4, 4, 6), lines) == "gelu"
    assert called_name(Loc("m.py", 2, 0, 2, 15), lines) is None
    assert called_name(Loc("m.py", 1, 6, 1, 14), lines) is None  # (`self.relu`: no call)

"""Pointwise groups in code autograd records run as fused kernels with generated backward
kernels (ir/passes/autograd_kernels.py, runtime/autograd_kernels.py): their gradients are
eager's (gradcheck in float64, float32 against eager), a gradient of a gradient too, and
autograd's errors and requires_grad flags stay eager's."""

from __future__ import annotations

import copy

import os
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import runtime  # noqa: E402
from ir.core.graph import Program  # noqa: E402
from ir.passes.autograd_kernels import autograd_kernels  # noqa: E402
from ir.passes.derivatives import DERIVATIVES  # noqa: E402
from pass_text import after  # noqa: E402
from runtime.autograd_kernels import fused_from  # noqa: E402
from transpiler import script  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "autograd_kernels_cache"))
    runtime.reset()


@pytest.fixture(autouse=True)
def _kernels_at_any_size() -> Any:
    """Groups run their kernels on these small tensors too (below `fused_from` they run their
    torch ops: test_small_groups_run_their_torch_ops)."""
    with fused_from(0):
        yield


def fused(out: Any) -> bool:
    """Whether `out` was made by a fused group (its grad_fn is the group's function; a batch
    norm's group's, where one heads it)."""
    return type(out.grad_fn).__name__ in ("_FusedBackward", "_NormFusedBackward")


def leaves(*tensors: Tensor) -> list[Tensor]:
    return [t.detach().clone().requires_grad_() for t in tensors]


def check_gradients(fn: Callable[..., Any], inputs: tuple, expect_fused: bool = True, **tol: float) -> Any:
    """Compile `fn` for `inputs`, check that its output comes from a fused group (or not), and
    compare its outputs and gradients with eager's; gradcheck and gradgradcheck in float64."""
    compiled = script(fn, example_inputs=tuple(t.detach() if isinstance(t, Tensor) else t for t in inputs))
    tensors = [t for t in inputs if isinstance(t, Tensor)]
    eager_leaves, compiled_leaves = leaves(*tensors), leaves(*tensors)

    def call(f: Callable[..., Any], given: list[Tensor]) -> Any:
        it = iter(given)
        return f(*[next(it) if isinstance(t, Tensor) else t for t in inputs])

    with runtime.mode("off"):
        expected = call(fn, eager_leaves)
    with runtime.mode("strict"):
        got = call(compiled, compiled_leaves)
    outs_e = expected if isinstance(expected, tuple) else (expected,)
    outs_c = got if isinstance(got, tuple) else (got,)
    assert fused(outs_c[0]) == expect_fused
    ramp = [torch.linspace(-1, 2, o.numel(), dtype=o.dtype).reshape(o.shape) for o in outs_e]
    sum((o * r).sum() for o, r in zip(outs_e, ramp) if o.requires_grad).backward()
    sum((o * r).sum() for o, r in zip(outs_c, ramp) if o.requires_grad).backward()
    for e, c in zip(outs_e, outs_c):
        assert c.requires_grad == e.requires_grad
        torch.testing.assert_close(c, e, **tol)
    for e, c in zip(eager_leaves, compiled_leaves):
        torch.testing.assert_close(c.grad, e.grad, **tol)
    if tensors[0].dtype == torch.float64:
        with runtime.mode("strict"):
            assert torch.autograd.gradcheck(lambda *ts: call(compiled, list(ts)), tuple(leaves(*tensors)))
            assert torch.autograd.gradgradcheck(lambda *ts: call(compiled, list(ts)), tuple(leaves(*tensors)))
    assert runtime.fallback_counts() == {}
    return compiled


# -- gradcheck in float64 -------------------------------------------------------------------------
def broadcast(x: Tensor, bias: Tensor, scale: Tensor) -> Tensor:
    return torch.tanh(x * scale + bias) * torch.sigmoid(x)


def with_scalar(x: Tensor, s: float) -> Tensor:
    return torch.exp(x * s) - s / (x * x + 1.0)


def two_outputs(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    a = torch.sigmoid(x) * y
    b = torch.tanh(a) + x
    return a, b * 2.0


def boundaries(x: Tensor, y: Tensor) -> Tensor:
    clipped = torch.clamp(x, -0.5, 0.5) * y
    return torch.where(x > 0.0, clipped, -x) + F.relu(y) * 2.0


def test_gradcheck_broadcast_inputs() -> None:
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    check_gradients(broadcast, (x, torch.randn(5, dtype=torch.float64), torch.randn(4, 1, dtype=torch.float64)))
    check_gradients(broadcast, (x, torch.randn(1, 1, 5, dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64)))


def test_gradcheck_a_python_number() -> None:
    check_gradients(with_scalar, (torch.randn(6, 7, dtype=torch.float64), 0.75))


def test_gradcheck_several_outputs() -> None:
    check_gradients(two_outputs, (torch.randn(5, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)))


def test_where_and_clamp_at_their_boundaries() -> None:
    """Inputs on clamp's bounds (gradient passes, as eager's `min <= x <= max`), at 0 for
    relu (none passes) and where's condition; gradcheck away from the kinks, eager's exact
    gradients at them."""
    x = torch.tensor([[-0.5, 0.5, 0.0, -1.0, 1.0, 0.25]], dtype=torch.float64)
    y = torch.tensor([[0.0, -0.0, 1.0, -2.0, 0.5, 3.0]], dtype=torch.float64)
    compiled = script(boundaries, example_inputs=(x, y))
    (xe, ye), (xc, yc) = leaves(x, y), leaves(x, y)
    with runtime.mode("strict"):
        out = compiled(xc, yc)
    assert fused(out)
    out.sum().backward()
    boundaries(xe, ye).sum().backward()
    assert torch.equal(xc.grad, xe.grad) and torch.equal(yc.grad, ye.grad)
    smooth = (torch.randn(4, 6, dtype=torch.float64), torch.randn(4, 6, dtype=torch.float64))
    check_gradients(boundaries, smooth)


def activations(x: Tensor, y: Tensor) -> Tensor:
    a = F.silu(x) * F.gelu(y) + F.gelu(x, approximate="tanh") + F.hardtanh(x, -0.5, 0.75) * F.relu6(y * 4.0)
    return torch.abs(a) ** 1.5 / (torch.sqrt(y * y + 1.0) - torch.rsqrt(x * x + 2.0))


def transcendentals(x: Tensor) -> Tensor:
    return torch.log1p(torch.sin(x) * torch.cos(x) + 1.5) + torch.expm1(torch.erf(x)) \
        + torch.log(x * x + 1.0) * torch.reciprocal(x * x + 0.5) - torch.neg(x)


def test_gradcheck_every_rule() -> None:
    check_gradients(activations, (torch.randn(4, 9, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64)))
    check_gradients(transcendentals, (torch.randn(4, 9, dtype=torch.float64),))
    covered = {"add", "sub", "mul", "div", "neg", "exp", "expm1", "log", "log1p", "tanh", "sigmoid", "silu", "relu",
               "clamp", "where", "abs", "pow", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "erf", "gelu", "hardtanh",
               "relu6"}
    assert set(DERIVATIVES) - covered == {"clamp_min", "clamp_max"}


def one_sided(x: Tensor) -> Tensor:
    return torch.clamp_min(x, -0.25) * torch.clamp_max(x, 0.5)


def powers(x: Tensor) -> Tensor:
    return (x * 0.5) ** 2 + torch.pow(x * x + 1.0, -1.5) * x ** 3


def test_powers_by_numbers() -> None:
    check_gradients(powers, (torch.randn(3, 8, dtype=torch.float64),))


def test_float32_matches_eager() -> None:
    check_gradients(one_sided, (torch.randn(8, 33),))
    check_gradients(two_outputs, (torch.randn(8, 33), torch.randn(33)))
    check_gradients(activations, (torch.randn(8, 33), torch.randn(8, 33)), rtol=1e-4, atol=1e-5)


# -- autograd's semantics -------------------------------------------------------------------------
def partly(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    b = torch.tanh(y) + 1.0
    return torch.sigmoid(x * b) * 2.0, b * 3.0


def test_an_output_of_inputs_that_need_no_grad_needs_none() -> None:
    """Only x requires grad: `b * 3.0`, from y alone, does not require grad, as in eager."""
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    compiled = script(partly, example_inputs=(x, y))
    leaf = x.clone().requires_grad_()
    with runtime.mode("strict"):
        a, b = compiled(leaf, y)
    eager_a, eager_b = partly(x.clone().requires_grad_(), y)
    assert fused(a) and a.requires_grad and not b.requires_grad and not eager_b.requires_grad
    a.sum().backward()
    assert leaf.grad is not None


def written_later(x: Tensor) -> Tensor:
    y = torch.sigmoid(x) * 2.0  # (eager saves sigmoid's result, not x)
    x.add_(1.0)
    return y


def saved_result_written(x: Tensor) -> Tensor:
    y = torch.sigmoid(x * 2.0)  # (eager saves y, which the write then changes)
    y.mul_(2.0)
    return y


def test_a_saved_input_written_later_forms_no_group() -> None:
    """Fused, x would be saved, and its write would raise in backward where eager's does not:
    no group is formed, and the gradient is eager's."""
    x = torch.randn(5)
    compiled = script(written_later, example_inputs=(x,))
    results = []
    for fn, mode in ((written_later, "off"), (compiled, "strict")):
        leaf = x.clone().requires_grad_()
        with runtime.mode(mode):
            out = fn(leaf * 1.0)
        assert not fused(out)
        out.sum().backward()
        results.append(leaf.grad)
    torch.testing.assert_close(results[1], results[0])


def test_a_saved_result_written_raises_as_in_eager() -> None:
    x = torch.randn(5)
    compiled = script(saved_result_written, example_inputs=(x,))
    for fn, mode in ((saved_result_written, "off"), (compiled, "strict")):
        with runtime.mode(mode):
            out = fn(x.clone().requires_grad_())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def test_the_module_binds_the_kernels() -> None:
    """The module's text: a forward and a backward C++ kernel and the function object, called
    where the group's ops stood."""
    check_gradients(two_outputs, (torch.randn(5, 6), torch.randn(5, 6)))
    texts = [p.read_text() for p in Path(os.environ["TORCHSCRIBE_CACHE_DIR"]).rglob("*.py")]
    text = next(t for t in texts if "def two_outputs(" in t and "_autograd.Pointwise(" in t)
    assert "from runtime import autograd_kernels as _autograd" in text
    assert "_backward_kernel(" in text and "= _autograd.Pointwise(" in text
    assert "a, tmp = sigmoid_tanh_autograd(x, y)" in text


def unrelated_write(x: Tensor) -> tuple[Tensor, Tensor]:
    counts = torch.zeros(3)
    counts.add_(1.0)  # (a tensor of the function's own, which the group does not read)
    return torch.tanh(x * 2.0) * 3.0, counts


def test_a_write_elsewhere_keeps_the_group() -> None:
    check_gradients(unrelated_write, (torch.randn(4, 5, dtype=torch.float64),))


class NormedGate(torch.nn.Module):
    """A batch norm in training (it writes its running statistics and returns a new tensor),
    then a pointwise chain of its result."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(6)

    def forward(self, x: Tensor) -> Tensor:
        y = self.norm(x)
        return y * torch.sigmoid(y * 1.5)


def test_a_group_after_a_training_batch_norm() -> None:
    """The batch norm heads the group of the chain after it (its kernels compute the statistics
    and write the running ones); values, gradients and statistics are eager's."""
    torch.manual_seed(0)
    eager = NormedGate().double().train()
    x = torch.randn(8, 6, dtype=torch.float64)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    xe, xc = leaves(x, x)
    with runtime.mode("strict"):
        out = compiled(xc)
    assert fused(out)
    want = eager(xe)
    torch.testing.assert_close(out, want)
    out.sum().backward(), want.sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad)
    torch.testing.assert_close(compiled.norm.weight.grad, eager.norm.weight.grad)
    torch.testing.assert_close(compiled.norm.running_var, eager.norm.running_var)


def written_through_a_view(x: Tensor) -> Tensor:
    y = torch.exp(x) * 2.0  # (eager saves exp's result: x's write does not matter to it)
    x.T.mul_(3.0)
    return y


def test_a_write_through_a_view_of_an_input_forms_no_group() -> None:
    x = torch.randn(4, 5)
    compiled = script(written_through_a_view, example_inputs=(x,))
    grads = []
    for fn, mode in ((written_through_a_view, "off"), (compiled, "strict")):
        leaf = x.clone().requires_grad_()
        with runtime.mode(mode):
            out = fn(leaf * 1.0)
        assert not fused(out)
        out.sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0])


# -- the pass on IR text --------------------------------------------------------------------------
GATE = """func @f(%x: f32[B, 5]@cpu, %w: f32[5]@cpu) -> f32[B, 5]@cpu {
  %0 : f32[B, 5]@cpu = torch.call(%x) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %y : f32[B, 5]@cpu = py.binary(%0, %w) {op = "*"}
  func.return(%y)
}
"""


def for_autograd(program: Program) -> None:
    program.autograd = True
    autograd_kernels(program)


def test_the_pass_on_text() -> None:
    """sigmoid(x) * w: a forward kernel of the decomposed sigmoid, a backward kernel that
    computes it again and gives both gradients at the iteration shape (w's is summed to [5] at
    run time), and the group's torch ops as a function of their own."""
    assert after(GATE, for_autograd) == """func @f.sigmoid_mul(%x: f32[B, 5]@cpu, %w: f32[5]@cpu) -> f32[B, 5]@cpu {
  %0 : f32[B, 5]@cpu = torch.call(%x) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %y : f32[B, 5]@cpu = py.binary(%0, %w) {op = "*"}
  func.return(%y)
}

func @f(%x: f32[B, 5]@cpu, %w: f32[5]@cpu) -> f32[B, 5]@cpu {
  %y : f32[B, 5]@cpu = kernel.autograd(%x, %w) {name = "sigmoid_mul_autograd", inputs = 2, grads = (0, 1), eager = "f.sigmoid_mul", depends = ((0, 1),)} {
    ^(%x_1: f32[B, 5]@cpu, %w_1: f32[5]@cpu, %grad_y: f32[B, 5]@cpu):
    %0 : f32[B, 5]@cpu = kernel.pointwise(%x_1, %w_1) {name = "sigmoid_mul", inputs = 2} {
      ^(%x_2: f32[]@cpu, %w_2: f32[]@cpu):
      %1 : f32[]@cpu = py.unary(%x_2) {op = "-"}
      %2 : f32[]@cpu = torch.call(%1) {callee = "torch.exp", aten = "aten::exp"}
      %3 : int = py.constant() {value = 1}
      %4 : f32[]@cpu = py.binary(%3, %2) {op = "+"}
      %5 : f32[]@cpu = torch.call(%4) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
      %y_1 : f32[]@cpu = py.binary(%5, %w_2) {op = "*"}
      scf.yield(%y_1)
    }
    %6 : f32[B, 5]@cpu, %7 : f32[B, 5]@cpu = kernel.pointwise(%x_1, %w_1, %grad_y) {name = "sigmoid_mul_backward", inputs = 3} {
      ^(%x_3: f32[]@cpu, %w_3: f32[]@cpu, %grad_y_1: f32[]@cpu):
      %8 : f32[]@cpu = py.unary(%x_3) {op = "-"}
      %9 : f32[]@cpu = torch.call(%8) {callee = "torch.exp", aten = "aten::exp"}
      %10 : int = py.constant() {value = 1}
      %11 : f32[]@cpu = py.binary(%10, %9) {op = "+"}
      %12 : f32[]@cpu = torch.call(%11) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
      %13 : f32[]@cpu = py.binary(%grad_y_1, %w_3) {op = "*"}
      %14 : f32[]@cpu = py.binary(%grad_y_1, %12) {op = "*"}
      %15 : int = py.constant() {value = 1}
      %16 : f32[]@cpu = py.binary(%15, %12) {op = "-"}
      %17 : f32[]@cpu = py.binary(%13, %16) {op = "*"}
      %18 : f32[]@cpu = py.binary(%17, %12) {op = "*"}
      scf.yield(%18, %14)
    }
    scf.yield()
  }
  func.return(%y)
}
"""
    # Only in code for autograd.
    assert after(GATE, autograd_kernels) == GATE


def test_the_pass_on_text_leaves_a_group_whose_input_is_written() -> None:
    written = GATE.replace("  func.return(%y)", """  %1 : float = py.constant() {value = 1.0}
  %2 : f32[5]@cpu = torch.method(%w, %1) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Scalar"}
  func.return(%y)""")
    assert after(written, for_autograd) == written


def test_through_tritons_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCHSCRIBE_BACKEND=triton: the forward and backward kernels run as Triton kernels in
    Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before Triton is imported),
    with the same gradients."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton's interpreter is not on (a GPU machine runs Triton on CUDA tensors)")
    pytest.importorskip("triton")
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    check_gradients(broadcast, (x, torch.randn(5, dtype=torch.float64), torch.randn(4, 1, dtype=torch.float64)))
    texts = [p.read_text() for p in Path(os.environ["TORCHSCRIBE_CACHE_DIR"]).rglob("*.py")]
    assert any("_backward_triton(" in t for t in texts)


def test_explain_names_the_groups_kernels() -> None:
    """`torchscribe explain` of code for autograd (a checked-in entry's Specialisation.autograd)
    lists a group as one kernel: its forward's ops and its backward's gradients."""
    from ir.core.parser import parse_program
    from transpiler.explain import explain_function

    program = parse_program(after(GATE, for_autograd))
    func = next(f for f in program.funcs if f.sym_name == "f")
    text = explain_function(func, False, ())
    assert "sigmoid_mul_autograd: a pointwise group, which autograd records as one function, over [B, 5]" in text
    assert "forward kernel sigmoid_mul fuses: neg, exp, add, reciprocal, mul" in text
    assert "backward kernel sigmoid_mul_backward: the gradients of inputs 0, 1" in text


class Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 7))

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(x * self.scale) * x


def test_without_the_arguments_gradients_a_partial_backward_runs() -> None:
    """A group reading an argument and a parameter has a second backward kernel without the
    argument's gradient, which a call whose argument needs none runs; both give eager's."""
    torch.manual_seed(0)
    model, x = Gate().double(), torch.randn(5, 7, dtype=torch.float64)
    with torch.no_grad():
        compiled = script(Gate().double(), example_inputs=(x,))
    compiled.load_state_dict(model.state_dict())
    with runtime.mode("strict"):
        compiled(x.clone().requires_grad_())  # (compiles the code for autograd)
    group = next(getattr(m, "sigmoid_autograd") for name, m in list(sys.modules.items())
                 if name.startswith("torchscribe_jit.") and hasattr(m, "sigmoid_autograd") and "Gate_forward" in vars(m))
    ran: list[str] = []
    kernel, inputs = group.partial
    group.partial = (lambda *args: ran.append("partial") or kernel(*args), inputs)
    for needs_grad in (False, True):
        model.zero_grad(), compiled.zero_grad()
        xe, xc = x.clone().requires_grad_(needs_grad), x.clone().requires_grad_(needs_grad)
        with runtime.mode("strict"):
            out = compiled(xc)
        assert fused(out)
        out.sum().backward()
        model(xe).sum().backward()
        torch.testing.assert_close(compiled.scale.grad, model.scale.grad)
        if needs_grad:
            torch.testing.assert_close(xc.grad, xe.grad)
        assert ran == ["partial"]  # (the first call only: the second needs x's gradient too)
    texts = [p.read_text() for p in Path(os.environ["TORCHSCRIBE_CACHE_DIR"]).rglob("*.py")]
    assert any("partial=(sigmoid_backward_weights, (1,))" in t for t in texts)
    with runtime.mode("strict"):
        assert torch.autograd.gradcheck(lambda s: torch.func.functional_call(compiled, {"scale": s}, (x,)),
                                        (model.scale.detach().clone().requires_grad_(),))


def cell(x: Tensor, h: Tensor) -> Tensor:
    return torch.tanh(x * 2.0 + h)


def test_small_groups_run_their_torch_ops() -> None:
    """Below the gate's size a group runs its torch ops (autograd records eager's nodes, which
    cost less than a custom Function on a few elements), from it its kernels; the values and
    gradients are eager's either way."""
    from runtime import autograd_kernels

    small = (torch.randn(2, 3), torch.randn(2, 3))
    compiled = script(cell, example_inputs=small)
    at = autograd_kernels._Gate.fused_from  # (the default; the fixture has set the gate to 0)
    for rows, want_fused in ((2, False), (-(-at // 3), True)):  # (2 rows: 6 elements; then the gate)
        x, h = leaves(torch.randn(rows, 3), torch.randn(rows, 3))
        with fused_from(at), runtime.mode("strict"):
            out = compiled(x, h)
        assert fused(out) == want_fused, rows
        out.sum().backward()
        x0, h0 = leaves(x.detach(), h.detach())
        cell(x0, h0).sum().backward()
        torch.testing.assert_close(out.detach(), torch.tanh(x0 * 2.0 + h0).detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(x.grad, x0.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(h.grad, h0.grad, rtol=1e-4, atol=1e-6)

"""A batch norm in train mode heads a group autograd records (ir/passes/autograd_kernels.py,
kernel.batch_norm_chain, runtime/include's ts_batch_norm_train): its kernels compute the
batch's statistics, move the running ones, run the pointwise ops after it on each normalised
element, and in backward give the gradients of x, weight, bias and the other tensors the ops
read. Checked against eager in strict mode: the forward's bits (torch's order of operations),
the gradients to rounding, the running statistics, both layouts, gradcheck and a gradient of a
gradient in float64, and what runs eager's ops instead."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import runtime  # noqa: E402
from ir.core.graph import Program  # noqa: E402
from ir.passes.autograd_kernels import autograd_kernels  # noqa: E402
from pass_text import after  # noqa: E402
from runtime.autograd_kernels import fused_from  # noqa: E402
from transpiler import script  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "autograd_batch_norm_cache"))
    runtime.reset()


@pytest.fixture(autouse=True)
def _kernels_at_any_size() -> Any:
    with fused_from(0):
        yield


def norm_fused(out: Tensor) -> bool:
    return type(out.grad_fn).__name__ == "_NormFusedBackward"


class ConvBlock(nn.Module):
    """MobileNet's conv, batch norm, ReLU6(inplace=True), then a second conv whose batch norm
    adds the first's result (a tensor of its input's shape) before a ReLU."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.act = nn.ReLU6(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c, momentum=0.3)

    def forward(self, x: Tensor) -> Tensor:
        y = self.act(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + y)


def train_both(model: nn.Module, inputs: tuple, steps: int = 2) -> tuple[nn.Module, nn.Module, list, list]:
    """`steps` forward and backward passes of the model under script() (strict) and of eager's
    copy, with one fixed output gradient; the two models and each side's outputs and input
    gradients."""
    eager = copy.deepcopy(model)
    compiled = script(model, example_inputs=tuple(t.detach() for t in inputs))
    got, want = [], []
    for _ in range(steps):
        leaves_c = [t.detach().clone().requires_grad_() for t in inputs]
        leaves_e = [t.detach().clone().requires_grad_() for t in inputs]
        with runtime.mode("strict"):
            out_c = compiled(*leaves_c)
        out_e = eager(*leaves_e)
        outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
        outs_e = out_e if isinstance(out_e, tuple) else (out_e,)
        ramps = [torch.linspace(-1, 2, o.numel(), dtype=o.dtype).reshape(o.shape) for o in outs_e]
        sum((o * r).sum() for o, r in zip(outs_c, ramps)).backward()
        sum((o * r).sum() for o, r in zip(outs_e, ramps)).backward()
        got.append((outs_c, [t.grad for t in leaves_c]))
        want.append((outs_e, [t.grad for t in leaves_e]))
    return compiled, eager, got, want


def assert_trained_alike(compiled: nn.Module, eager: nn.Module, got: list, want: list, **tol: float) -> None:
    for (outs_c, grads_c), (outs_e, grads_e) in zip(got, want):
        for c, e in zip(outs_c, outs_e):
            torch.testing.assert_close(c, e, **tol)
        for c, e in zip(grads_c, grads_e):
            torch.testing.assert_close(c, e, **tol)
    for (name, p), (_, q) in zip(compiled.named_parameters(), eager.named_parameters()):
        # (a weight's gradient sums thousands of terms, and the backward kernel's sums are in
        # double where eager's are partly in float: an entry the sum cancels to near 0 differs
        # by more than rtol of it, but not by more than rounding of the largest entry)
        error, scale = (p.grad - q.grad).abs().max().item(), q.grad.abs().max().item()
        assert error <= tol["rtol"] * scale + tol["atol"], f"{name}.grad: {error:.3g} off, largest entry {scale:.3g}"
    for (name, b), (_, e) in zip(compiled.named_buffers(), eager.named_buffers()):
        torch.testing.assert_close(b, e, **tol, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv_block_trains_as_eager(channels_last: bool) -> None:
    """Both batch norms head groups (bn1 with its in-place ReLU6, bn2 with the add and the ReLU);
    values, every gradient and the running statistics are eager's, the input row-major or
    channels-last."""
    torch.manual_seed(0)
    model = ConvBlock().train()
    x = torch.randn(4, 3, 12, 12)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    compiled, eager, got, want = train_both(model, (x,))
    assert norm_fused(got[0][0][0])
    assert_trained_alike(compiled, eager, got, want, rtol=1e-4, atol=1e-5)


class ResidualBlock(nn.Module):
    """torchvision's BasicBlock as written there: in-place adds and ReLUs, then a dropout (in
    train(), F.dropout: a call the passes see into, where a module call left the whole forward
    without a group)."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.drop = nn.Dropout(0.25)

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        out = self.relu(out)
        return self.drop(out)


def test_a_residual_blocks_in_place_ops_join_the_batch_norms_group() -> None:
    """`out += identity` and the in-place ReLU after bn2 become out of place and join its group
    (bn2, add, ReLU: one function); the dropout draws eager's mask under one seed."""
    torch.manual_seed(0)
    model = ResidualBlock().train()
    x = torch.randn(4, 8, 10, 10)
    eager = copy.deepcopy(model)
    compiled = script(model, example_inputs=(x,))
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(7)
    with runtime.mode("strict"):
        out = compiled(xc)
    torch.manual_seed(7)
    want = eager(xe)
    assert torch.equal(out, want)
    names = set()
    todo = [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and type(node).__name__ not in names:
            names.add(type(node).__name__)
            todo += [n for n, _ in node.next_functions]
    assert "_NormFusedBackward" in names and not names & {"AddBackward0", "ReluBackward0", "NativeBatchNormBackward0"}
    ramp = torch.linspace(-1, 2, out.numel()).reshape(out.shape)
    (out * ramp).sum().backward()
    (want * ramp).sum().backward()
    assert_trained_alike(compiled, eager, [((out,), [xc.grad])], [((want,), [xe.grad])], rtol=1e-4, atol=1e-5)


class Norms(nn.Module):
    """Batch norms on 3-d and 2-d input (planar and, at one value per row, interleaved), one
    followed by nothing the group takes (its result is returned and also read by the chain)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.BatchNorm1d(6)
        self.b = nn.BatchNorm1d(6, momentum=0.5)

    def forward(self, x: Tensor, z: Tensor, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        u = self.a(x)
        v = F.silu(u) * 2.0 + w
        return u, v, torch.sigmoid(self.b(z))


def test_planar_and_interleaved_layouts_and_outputs() -> None:
    torch.manual_seed(0)
    model = Norms().train()
    inputs = (torch.randn(5, 6, 7), torch.randn(9, 6), torch.randn(5, 6, 7))
    compiled, eager, got, want = train_both(model, inputs)
    outs = got[0][0]
    assert norm_fused(outs[0]) and norm_fused(outs[1]) and norm_fused(outs[2])
    assert_trained_alike(compiled, eager, got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("channels_last", [False, True])
def test_the_forward_is_eagers_bit_for_bit(channels_last: bool) -> None:
    """The statistics and the normalised values are computed in torch's order (its sums, the
    mean and the squares rounded to float, fma(x, alpha, beta)): eager's bits, so that a value
    normalised to about 0 falls on the same side of a ReLU (where it does not, its gradient
    differs by the whole of it)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm2d(16), nn.ReLU()).train()
    with torch.no_grad():
        model[0].weight.uniform_(0.5, 1.5)
        model[0].bias.uniform_(-0.5, 0.5)
    x = torch.randn(8, 16, 16, 16) * 3.0 + 1.0
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    eager = copy.deepcopy(model)
    compiled = script(model, example_inputs=(x,))
    versions = [(b._version, e._version) for b, e in zip(compiled[0].buffers(), eager[0].buffers())]
    with runtime.mode("strict"):
        got = compiled(x.clone().requires_grad_())
    assert norm_fused(got)
    assert torch.equal(got, eager(x.clone().requires_grad_()))
    # (side effects: the running statistics' version counters move as eager's do, which leaves
    # them; num_batches_tracked's add_ counts one)
    assert [b._version - v for b, (v, _) in zip(compiled[0].buffers(), versions)] == \
        [e._version - v for e, (_, v) in zip(eager[0].buffers(), versions)]
    assert torch.equal(compiled[0].running_mean, eager[0].running_mean)
    assert torch.equal(compiled[0].running_var, eager[0].running_var)


def test_gradcheck_and_a_gradient_of_a_gradient() -> None:
    """In float64: gradcheck of the group's backward kernel, and gradgradcheck, whose backward
    with create_graph=True runs the group's torch ops (on throwaway running statistics)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(4), nn.Tanh()).double().train()
    x = torch.randn(6, 4, 3, dtype=torch.float64)
    compiled = script(model, example_inputs=(x,))
    before = compiled[0].running_mean.clone()
    with runtime.mode("strict"):
        assert norm_fused(compiled(x.clone().requires_grad_()))
        leaf = x.clone().requires_grad_()
        assert torch.autograd.gradcheck(compiled, (leaf,))
        assert torch.autograd.gradgradcheck(compiled, (leaf,))
    assert not torch.equal(compiled[0].running_mean, before)


def test_layouts_the_kernels_do_not_read_run_eagers_ops() -> None:
    """A permuted input (neither row-major nor channels-last) and an added tensor laid out
    otherwise than x: the group's torch ops run, with eager's results."""
    torch.manual_seed(0)
    model = Norms().train()
    x = torch.randn(7, 6, 5).transpose(0, 2)  # [5, 6, 7], strided
    inputs = (x, torch.randn(9, 6), torch.randn(5, 7, 6).transpose(1, 2))
    compiled, eager, got, want = train_both(model, inputs)
    assert not norm_fused(got[0][0][0]) and not norm_fused(got[0][0][1]) and norm_fused(got[0][0][2])
    assert_trained_alike(compiled, eager, got, want, rtol=1e-4, atol=1e-5)


def test_one_value_per_channel_raises_as_eager() -> None:
    model = nn.Sequential(nn.BatchNorm1d(3), nn.ReLU()).train()
    compiled = script(model, example_inputs=(torch.randn(4, 3),))
    with runtime.mode("strict"), pytest.raises(ValueError, match="more than 1 value per channel"):
        compiled(torch.randn(1, 3, requires_grad=True))


class WrittenAfter(nn.Module):
    """The in-place ReLU's result is written again: eager's ReLU saved it, so its backward
    raises; the in-place op stays as it is, and so does the error."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn(x), inplace=True)
        y.mul_(2.0)
        return y


def test_an_in_place_result_written_again_keeps_eagers_error() -> None:
    model = WrittenAfter().train()
    x = torch.randn(8, 4)
    compiled = script(model, example_inputs=(x,))
    for fn, mode in ((copy.deepcopy(model), "off"), (compiled, "strict")):
        with runtime.mode(mode):
            out = fn(x.clone().requires_grad_())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


# -- the pass on IR text --------------------------------------------------------------------------
NORM_RELU = """func @f(%self: Module[M], %x: f32[B, 4, 3]@cpu) -> f32[B, 4, 3]@cpu {
  %bn : Module[torch.nn.BatchNorm1d] = py.getattr(%self) {attr = "bn"}
  %0 : i64[]@cpu = py.getattr(%bn) {attr = "num_batches_tracked"}
  %1 : int = py.constant() {value = 1}
  %2 : i64[]@cpu = torch.method(%0, %1) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %3 : f32[4]@cpu = py.getattr(%bn) {attr = "running_mean"}
  %4 : f32[4]@cpu = py.getattr(%bn) {attr = "running_var"}
  %5 : f32[4]@cpu = py.getattr(%bn) {attr = "weight"}
  %6 : f32[4]@cpu = py.getattr(%bn) {attr = "bias"}
  %7 : bool = py.constant() {value = True}
  %8 : float = py.constant() {value = 0.1}
  %9 : float = py.constant() {value = 1e-05}
  %10 : f32[B, 4, 3]@cpu = torch.call(%x, %3, %4, %5, %6, %7, %8, %9) {callee = "torch.nn.functional.batch_norm", mutates = (1, 2), aten = "aten::batch_norm"}
  %y : f32[B, 4, 3]@cpu = torch.call(%10, %7) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
  %11 : f32[B, 4, 3]@cpu = py.binary(%y, %x) {op = "+"}
  func.return(%11)
}
"""


def for_autograd(program: Program) -> None:
    program.autograd = True
    autograd_kernels(program)


def test_the_pass_on_text() -> None:
    """The in-place ReLU on the batch norm's new result becomes F.relu(.., False), and the
    batch norm, the ReLU and the add of x (a tensor of its input's shape: an argument, which
    the function does not write; it writes the module's num_batches_tracked and running
    statistics) are one group: its forward kernel takes the normalised element in x's place,
    its backward yields that element's gradient and x's (the batch norm's x is its first
    operand, added x its sixth)."""
    text = after(NORM_RELU, for_autograd)
    group = text[text.index("func @f(%self"):]
    assert "kernel.autograd(%x, %5, %6, %3, %4, %x, %8, %9) {name = \"batch_norm_relu_add_autograd\", inputs = 6, " \
           "grads = (0, 1, 2, 5), eager = \"f.batch_norm_relu_add\", depends = ((0, 1, 2, 5),), batch_norm = True}" in group
    assert "kernel.batch_norm_chain(%x_1, %11, %12, %13, %14, %x_2) {name = \"batch_norm_relu_add\", inputs = 6}" in group
    assert "kernel.batch_norm_chain(%x_1, %11, %12, %13, %14, %x_2, %17) {name = \"batch_norm_relu_add_backward\", " \
           "inputs = 7, backward = True}" in group
    assert "torch.nn.functional.batch_norm" not in group and "aten::relu_" not in text
    # (the group's torch ops, for a backward that autograd records, with the ReLU out of place)
    assert '{callee = "torch.nn.functional.relu", aten = "aten::relu"}' in text[:text.index("func @f(%self")]
    assert "kernel.autograd" not in after(NORM_RELU, autograd_kernels)  # (only in code for autograd)


def test_explain_says_what_the_group_is() -> None:
    from ir.core.parser import parse_program
    from transpiler.explain import explain_function

    program = parse_program(after(NORM_RELU, for_autograd))
    func = next(f for f in program.funcs if f.sym_name == "f")
    text = explain_function(func, False, ())
    assert "batch_norm_relu_add_autograd: a train-mode batch norm and the pointwise ops after it, which autograd " \
           "records as one function, over [B, 4, 3]" in text
    assert "forward kernel batch_norm_relu_add fuses: clamp_min, add" in text

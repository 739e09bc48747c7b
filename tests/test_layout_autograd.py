"""Channels-last convolutions in code autograd records (ir/passes/layout_autograd.py): where the
pass makes conv inputs channels-last and results row-major again (IR in, IR out), what leaves a
function as it is, and conv nets trained compiled against eager, on outputs, gradients, running
statistics, dropout's masks and the strides of what they return."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import runtime
from ir.core.graph import Program
from ir.passes.layout_autograd import autograd_channels_last
from pass_text import after
from transpiler import script


def for_autograd(program: Program) -> None:
    program.autograd = True
    autograd_channels_last(program)


CONV = 'torch.call(%{x}, %w, %none, %one, %one, %one, %g) {{callee = "torch.nn.functional.conv2d"}}'
HEAD = """\
func @f(%x: f32[B, 8, 16, 16]@cpu, %w: f32[8, 8, 3, 3]@cpu, %mean: f32[8]@cpu, %var: f32[8]@cpu) -> f32[B, 8, 16, 16]@cpu {
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %g : int = py.constant() {value = 1}
  %true : bool = py.constant() {value = True}
  %momentum : float = py.constant() {value = 0.1}
  %eps : float = py.constant() {value = 1e-05}
"""
BLOCK = HEAD + f"""\
  %0 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="x")}
  %1 : f32[B, 8, 16, 16]@cpu = torch.call(%0, %mean, %var, %none, %none, %true, %momentum, %eps) {{callee = "torch.nn.functional.batch_norm", mutates = (1, 2), aten = "aten::batch_norm"}}
  %2 : f32[B, 8, 16, 16]@cpu = torch.call(%1, %true) {{callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}}
  %3 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="2")}
  %4 : f32[B, 8, 16, 16]@cpu = py.inplace(%3, %x) {{op = "+"}}
  func.return(%4)
}}
"""


def test_conv_inputs_channels_last_and_the_result_row_major() -> None:
    """The first conv's input is made channels-last; batch norm and the in-place ReLU keep that
    layout, so the second conv's input is not copied again; the result is made row-major, as
    eager returns it."""
    assert after(BLOCK, for_autograd) == HEAD + """\
  %0 : memory_format = py.constant() {value = "torch.channels_last"}
  %1 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %0) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %2 : f32[B, 8, 16, 16]@cpu = torch.call(%1, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %3 : f32[B, 8, 16, 16]@cpu = torch.call(%2, %mean, %var, %none, %none, %true, %momentum, %eps) {callee = "torch.nn.functional.batch_norm", mutates = (1, 2), aten = "aten::batch_norm"}
  %4 : f32[B, 8, 16, 16]@cpu = torch.call(%3, %true) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
  %5 : f32[B, 8, 16, 16]@cpu = torch.call(%4, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %6 : f32[B, 8, 16, 16]@cpu = py.inplace(%5, %x) {op = "+"}
  %7 : f32[B, 8, 16, 16]@cpu = torch.method(%6) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  func.return(%7)
}
"""


def test_only_code_for_autograd() -> None:
    assert after(BLOCK, autograd_channels_last) == after(BLOCK)


def test_a_random_op_reads_a_row_major_copy() -> None:
    """Dropout draws its mask in the memory order of its input: it reads the layout eager has."""
    text = BLOCK.replace(f'  %3 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="2")}',
                         '  %d : f32[B, 8, 16, 16]@cpu = torch.call(%2, %momentum) '
                         '{callee = "torch.nn.functional.dropout", random = True}\n'
                         f'  %3 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="d")}')
    out = after(text, for_autograd)
    assert 'contiguous(' not in out and (
        '%5 : f32[B, 8, 16, 16]@cpu = torch.method(%4) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}\n'
        '  %d : f32[B, 8, 16, 16]@cpu = torch.call(%5, %momentum) {callee = "torch.nn.functional.dropout", random = True}'
    ) in out


LINE_BEFORE_CONV2 = '  %3 : f32[B, 8, 16, 16]@cpu = '


@pytest.mark.parametrize("use", [
    # a view that the channels-last strides could not give
    '  %s : tuple[int, int] = py.constant() {value = (-1, 256)}\n'
    '  %v : f32[?, 256]@cpu = torch.method(%2, %s) {method = "view", alias_of = 0, aten = "aten::view"}\n',
    # strides read
    '  %s : tuple[int, int, int, int] = torch.method(%2) {method = "stride", aten = "aten::stride"}\n',
    # a reshape (a view in eager, a copy channels-last) of a tensor written after it
    '  %s : tuple[int, int] = py.constant() {value = (-1, 256)}\n'
    '  %v : f32[?, 256]@cpu = torch.method(%2, %s) {method = "reshape", alias_of = 0, aten = "aten::reshape"}\n'
    '  %z : f32[B, 8, 16, 16]@cpu = torch.method(%2) {method = "relu_", mutates = (0,), alias_of = 0, aten = "aten::relu_"}\n',
], ids=["view", "stride", "reshape-then-write"])
def test_uses_that_could_tell_leave_the_function_as_it_is(use: str) -> None:
    text = BLOCK.replace(LINE_BEFORE_CONV2, use + LINE_BEFORE_CONV2, 1)
    assert after(text, for_autograd) == after(text)


# -- compiled against eager ---------------------------------------------------------------------------
class Stage(nn.Module):
    """Convs that run faster channels-last (depthwise; 3x3 at 16x16), batch norm, in-place
    activations, a residual add, dropout on feature maps, a reshape nothing writes after."""

    def __init__(self, c: int, p: float) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.dw = nn.Conv2d(c, c, 3, 1, 1, groups=c)
        self.conv = nn.Conv2d(c, c, 3, 1, 1)
        self.bn2 = nn.BatchNorm2d(c)
        self.p = p

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        x = F.relu6(self.bn(self.stem(x)), inplace=True)
        y = F.dropout(self.dw(x), self.p, self.training)
        y = self.bn2(self.conv(y))
        y += x
        y = F.silu(y, inplace=True)
        rows = y.reshape(y.shape[0], y.shape[1], -1)
        return y, rows.mean(-1)


class RowsWrittenAfter(nn.Module):
    """A reshape of a conv result that is then written in place: in eager the reshape is a view
    and sees the write; a channels-last copy would not."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 4, 3, 1, 1, groups=4)
        self.b = nn.Conv2d(4, 4, 3, 1, 1, groups=4)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        y = self.b(self.a(x))
        rows = y.reshape(y.shape[0], -1)
        y.relu_()
        return rows * 2, y


class CrossStage(nn.Module):
    """CSPNet's split: a conv's output unpacked into two halves along channels (an op of several
    results), one through another conv, concatenated back."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.b = nn.Conv2d(4, 4, 3, 1, 1, groups=4)

    def forward(self, x: Tensor) -> tuple[Tensor]:
        left, right = self.a(x).chunk(2, dim=1)
        return (torch.cat([F.relu(self.b(left)), right], 1),)


def train_step(model: nn.Module, x: Tensor, mode: str) -> tuple[tuple[Tensor, ...], dict[str, Tensor]]:
    x = x.clone().requires_grad_()
    torch.manual_seed(7)
    with runtime.mode(mode):
        out = model(x)
    sum(o.square().mean() for o in out).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    grads["input"] = x.grad
    return out, grads


@pytest.mark.parametrize("cls,shape", [(lambda: Stage(8, 0.5), (3, 3, 16, 16)), (RowsWrittenAfter, (2, 4, 16, 16)),
                                       (CrossStage, (2, 8, 16, 16))],
                         ids=["stage", "rows-written-after", "cross-stage"])
def test_trains_as_eager(cls, shape, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    eager = cls().train()
    x = torch.randn(*shape)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    out_e, grads_e = train_step(eager, x, "off")
    out_c, grads_c = train_step(compiled, x, "strict")
    for e, c in zip(out_e, out_c):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)  # (dropout's masks: eager's)
        assert c.stride() == e.stride()  # (returned row-major, as eager's)
    assert grads_c.keys() == grads_e.keys()
    for name in grads_e:
        torch.testing.assert_close(grads_c[name], grads_e[name], rtol=1e-4, atol=1e-5, msg=name)
    for (name, b_e), (_, b_c) in zip(eager.named_buffers(), compiled.named_buffers()):
        torch.testing.assert_close(b_c, b_e, rtol=1e-4, atol=1e-6, msg=name)
    code = "\n".join(p.read_text() for p in tmp_path.rglob("*.py"))
    assert ("memory_format=torch.channels_last" in code) == (cls is not RowsWrittenAfter)

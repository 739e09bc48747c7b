"""Functions decorated `@torch.no_grad()` in code for calls autograd records: they run compiled,
under their own `torch.no_grad()` as in eager, never eagerly because grad is on (issue 50,
point 1). What such a function computes stays out of the graph, and what it writes in place
(an exponential average of an activation kept in a buffer) is a plain tensor after the call, as
eager leaves it."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_programs import generated_module  # noqa: E402
from test_training import compare_training  # noqa: E402

import runtime  # noqa: E402
from transpiler import script  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "grad_off_cache"))
    runtime.reset()


class Tracked(nn.Module):
    """A layer that keeps a running mean of its output, updated without grad, and scales by a
    statistic taken without grad."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("average", torch.zeros(6))

    @torch.no_grad()
    def track(self, y: Tensor) -> Tensor:
        self.average.mul_(0.9).add_(y.mean(0), alpha=0.1)
        return y.abs().amax()

    def forward(self, x: Tensor) -> Tensor:
        y = torch.tanh(self.lin(x))
        peak = self.track(y)
        return y * 2.0 / (peak + 1.0)


class Frozen(nn.Module):
    """A forward that is itself grad-off: its result requires no grad, called with grad on."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 3)

    @torch.no_grad()
    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(self.lin(x)) * 3.0


def test_a_grad_off_method_runs_compiled_and_stays_out_of_the_graph() -> None:
    torch.manual_seed(0)
    eager = Tracked()
    x = torch.randn(5, 6)
    compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    compare_training(eager, compiled, (x,))  # (strict: no call ran eagerly; buffers alike)
    assert not compiled.average.requires_grad and compiled.average.grad_fn is None


def test_a_grad_off_forward_called_with_grad_on() -> None:
    torch.manual_seed(0)
    eager = Frozen()
    x = torch.randn(4, 6, requires_grad=True)
    compiled = script(copy.deepcopy(eager), example_inputs=(x.detach(),))
    with runtime.mode("strict"):
        out = compiled(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, eager(x))
    assert runtime.fallback_counts() == {}


SOURCE = '''
import torch
from torch import Tensor, nn
from transpiler import script


@script
class Tracked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("average", torch.zeros(6))

    @torch.no_grad()
    def track(self, y: Tensor) -> Tensor:
        self.average.mul_(0.9).add_(y.mean(0), alpha=0.1)
        return y.abs().amax()

    def forward(self, x: Tensor) -> Tensor:
        y = torch.tanh(self.lin(x))
        peak = self.track(y)
        return y * 2.0 / (peak + 1.0)
'''


@pytest.fixture
def on_path(tmp_path: Path):
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))


def test_a_checked_in_module_calls_its_grad_off_method(on_path: Path) -> None:
    """The generic code of a module compiled ahead of time: the method is a function of the
    module, decorated as in the source, and the forward calls it."""
    with generated_module(on_path, SOURCE) as (path, module):
        text = path.with_name(f"{path.stem}_compiled.py").read_text()
        assert "@torch.no_grad()\ndef Tracked_track(" in text
        torch.manual_seed(0)
        compiled = module.Tracked()
        eager = copy.deepcopy(compiled)
        compare_training(eager, compiled, (torch.randn(5, 6),))
        assert not compiled.average.requires_grad


class Measured(nn.Module):
    """A scale taken under `@torch.inference_mode()`: an inference tensor, which autograd may
    not save for backward (eager raises when the product records it)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    @torch.inference_mode()
    def scale(self, y: Tensor) -> Tensor:
        return y.abs().amax(dim=0) + 1.0

    def forward(self, x: Tensor) -> Tensor:
        y = self.lin(x)
        return y * self.scale(y)


def test_an_inference_mode_method_makes_inference_tensors_as_in_eager() -> None:
    torch.manual_seed(0)
    eager = Measured()
    x = torch.randn(5, 6)
    compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    with pytest.raises(RuntimeError, match="[Ii]nference tensors"):
        eager(x)
    with runtime.mode("strict"), pytest.raises(RuntimeError, match="[Ii]nference tensors"):
        compiled(x)
    with torch.no_grad(), runtime.mode("strict"):  # (without grad it computes, as eager does)
        torch.testing.assert_close(compiled(x), eager(x))

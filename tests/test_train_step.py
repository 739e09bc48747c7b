"""The training-step benchmark's helper (benchmarks/train_step.py): each backend's first step is
checked against eager's before it is timed; a step that differs, or a backend that fails, is
reported and not timed. Nothing here times anything against a threshold."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import runtime
from benchmarks import bench, train_step

BUDGET_S = 0.01  # the fewest timed steps time_in_turns takes


class Net(nn.Module):
    """Parameters, a batch norm's buffers (updated in train mode) and dropout (its masks from
    torch's generator: each backend's checked step starts from the same seed)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.drop(F.relu(self.bn(self.fc1(x)))))


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "train_step_cache"))
    runtime.reset()


def net_and_batch() -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(5, 6),)


def test_script_steps_match_eager_and_are_timed() -> None:
    """script(model, example_inputs=...)'s step, from a model in eval mode put in train mode,
    matches eager's (gradients, the SGD step, batch norm's statistics, dropout's masks) and
    is timed with eager's; the model passed in is not trained (each backend has a copy)."""
    model, inputs = net_and_batch()
    initial = train_step.state(model)
    result = train_step.measure(model, inputs, train_step.MeanSquares(), BUDGET_S, backends=("eager", "torchscribe"))
    assert result.problems == {}
    assert set(result.seconds) == set(result.first_s) == {"eager", "torchscribe"}
    assert all(len(rounds) == bench.ROUNDS for rounds in result.rounds.values())
    assert all(torch.equal(initial[k], v) for k, v in train_step.state(model).items())
    assert runtime.fallback_counts() == {}


def test_a_step_that_differs_is_reported() -> None:
    """A step whose gradients are off by 1% (the output scaled) is a mismatch naming the tensor:
    torchscribe's is not timed, another backend's is timed with the note (as the inference tables
    do); a backend that raises is reported with its error and not timed."""
    def scaled(model: nn.Module, inputs: tuple) -> bench.Built:
        return bench.Built(lambda x: model(x) * 1.01, model)

    def broken(model: nn.Module, inputs: tuple) -> bench.Built:
        raise RuntimeError("no kernel for this")

    model, inputs = net_and_batch()
    builders = {"eager": bench.build_eager, "compile": scaled, "torchscribe": scaled}
    result = train_step.measure(model, inputs, train_step.MeanSquares(), BUDGET_S, builders=builders)
    assert set(result.seconds) == {"eager", "compile"} and set(result.problems) == {"torchscribe"}
    assert result.problems["torchscribe"].startswith("torchscribe's step differs from eager's: ")
    assert "moved" in result.problems["torchscribe"]
    assert result.differs["compile"].startswith("compile's step differs from eager's (timed all the same): ")
    builders = {"eager": bench.build_eager, "compile": broken, "torchscribe": broken}
    result = train_step.measure(model, inputs, train_step.MeanSquares(), BUDGET_S, builders=builders)
    assert set(result.seconds) == {"eager"} and result.differs == {}
    assert result.problems == dict.fromkeys(("compile", "torchscribe"), "RuntimeError: no kernel for this")


def test_update_mismatch_compares_what_the_step_changed() -> None:
    before = {"w": torch.ones(4), "n": torch.tensor(0)}
    after = {"w": torch.tensor([0.9, 1.0, 1.1, 1.0]), "n": torch.tensor(1)}
    assert train_step.update_mismatch(before, after, after) is None
    rounded = {"w": after["w"] + 1e-6, "n": after["n"]}  # rounding next to a step of 0.1
    assert train_step.update_mismatch(before, after, rounded) is None
    # a wrong step small next to the weight (1e-3 of it) is 1% of the update
    off = {"w": after["w"] * torch.tensor([1.0, 1.0, 1.0 + 1e-3 / 1.1, 1.0]), "n": after["n"]}
    assert "w moved" in train_step.update_mismatch(before, after, off)
    assert "w moved" in train_step.update_mismatch(before, after, {"w": after["w"] * math.nan, "n": after["n"]})
    assert train_step.update_mismatch(before, after, {"w": after["w"], "n": torch.tensor(2)}).startswith("n: ")
    assert "other parameters" in train_step.update_mismatch(before, after, {"w": after["w"]})
    # where eager's float32 step is 1e-3 from its float64 step, rounding of that size passes
    reference = {"w": after["w"].double() + 1e-3, "n": after["n"].double()}
    assert train_step.update_mismatch(before, after, off, reference) is None
    assert "w moved" in train_step.update_mismatch(before, after, {"w": after["w"] + 0.02, "n": after["n"]}, reference)


def test_losses_draw_fixed_targets_once() -> None:
    loss = train_step.MeanSquares()
    out = (torch.zeros(2, 3, requires_grad=True), torch.ones(2), [torch.zeros(4, requires_grad=True)])
    first = loss(out)
    assert [t.shape for t in loss.targets] == [(2, 3), (4,)]  # the outputs autograd records
    assert torch.equal(loss(out), first)
    assert torch.equal(train_step.MeanSquares()(out), first)  # the same seed, the same targets
    with pytest.raises(ValueError, match="nothing to train"):
        train_step.MeanSquares()(torch.zeros(3))
    ce = train_step.CrossEntropy()
    logits = torch.randn(8, 10, requires_grad=True)
    assert torch.equal(ce(logits), ce(logits)) and ce.labels.shape == (8,)


def test_trainable_problem() -> None:
    assert "function" in train_step.trainable_problem(lambda x: x)
    assert train_step.trainable_problem(nn.ReLU()) == "no parameters to train"
    assert train_step.trainable_problem(nn.Linear(2, 2)) is None

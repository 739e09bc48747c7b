"""A training step timed per backend (issue 50, point 4), for benchmarks/bench.py (the examples)
and benchmarks/zoo.py --train (the real models).

A step is what a training loop runs: the model in train() mode called on a fixed batch, a loss
against a fixed target, backward, an SGD step with momentum, gradients set to None. Each backend
trains its own copy of the model, made from the same initial weights; before timing, one step of
each (from the same seed, so that dropout draws the same masks) is checked against eager's: what
each parameter and buffer moved by must match what it moved by in eager, within the rounding
error of a float32 step (eager's steps in float64, and in float32 on channels-last tensors,
measure it). A backend that fails, or
torchscribe's step where it differs, is reported and not timed; another backend whose step
differs (torch.compile's gradient of resnet18's layer4.0.conv2.weight is 13% of its largest
entry off float64's, eager's float32 one 4e-6) is timed with a note, as the inference tables
time it. The backends timed take turns (bench.time_in_turns)."""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
import torch._inductor.config
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.bench import BUILDERS, Built, Timed, calling_mode, log, short_error, time_in_turns

LR = 1e-3  # small: hundreds of timed steps on one batch leave the weights of order one
MOMENTUM = 0.9
SEED = 0
# The checked step: a backend's parameters and buffers may differ from eager's float32 step's by
# NOISE_FACTOR times what those differ by from eager's step in float64 (the rounding error of a
# float32 step on this model: a deep network in train mode amplifies it, one of resnet18's float32
# gradients differs from float64's by 6% of its largest entry), plus UPDATE_RTOL of the largest change
# of that tensor, plus UPDATE_ATOL. A wrong gradient or dropout mask differs by far more.
NOISE_FACTOR = 10.0
UPDATE_RTOL = 1e-4
UPDATE_ATOL = 1e-7
BACKENDS = ("eager", "compile", "torchscribe")


def floating_outputs(out: Any) -> list[Tensor]:
    """The floating tensors of a (nested) output that autograd records, in order."""
    if isinstance(out, Tensor):
        return [out] if out.is_floating_point() and out.requires_grad else []
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in floating_outputs(item)]
    return []


class MeanSquares:
    """The sum over the model's floating outputs of the mean squared difference from a fixed
    target each. The targets are drawn from their own seeded generator at the first call (their
    shapes are the outputs'), and shared by every backend that uses this loss."""

    def __init__(self, seed: int = SEED) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.targets: list[Tensor] | None = None

    def __call__(self, out: Any) -> Tensor:
        outputs = floating_outputs(out)
        if not outputs:
            raise ValueError("no floating output requires grad: nothing to train")
        if self.targets is None:
            self.targets = [torch.randn(o.shape, generator=self.generator, dtype=o.dtype) for o in outputs]
        return sum((F.mse_loss(o, t.to(o.dtype)) for o, t in zip(outputs, self.targets)), torch.zeros(()))


class CrossEntropy:
    """Cross-entropy of a classifier's (batch, classes) logits against fixed labels, drawn from
    their own seeded generator at the first call."""

    def __init__(self, seed: int = SEED) -> None:
        self.generator = torch.Generator().manual_seed(seed)
        self.labels: Tensor | None = None

    def __call__(self, out: Any) -> Tensor:
        if self.labels is None:
            batch, classes = out.shape
            self.labels = torch.randint(classes, (batch,), generator=self.generator)
        return F.cross_entropy(out, self.labels)


@dataclass
class Step:
    """One training step of `fn` (the backend's callable), whose parameters live in `owner`."""

    fn: Callable[..., Any]
    owner: nn.Module
    inputs: tuple
    loss: Callable[[Any], Tensor]
    optimizer: torch.optim.Optimizer = field(init=False)

    def __post_init__(self) -> None:
        self.optimizer = torch.optim.SGD(self.owner.parameters(), lr=LR, momentum=MOMENTUM)

    def __call__(self) -> None:
        self.loss(self.fn(*self.inputs)).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def state(owner: nn.Module) -> dict[str, Tensor]:
    """A copy of the parameters and buffers, by name."""
    return {name: t.detach().clone() for name, t in owner.state_dict(keep_vars=True).items()}


def update_mismatch(before: dict[str, Tensor], expected: dict[str, Tensor], actual: dict[str, Tensor],
                    reference: dict[str, Tensor] | None = None,
                    other_layout: Callable[[], dict[str, Tensor] | None] | None = None) -> str | None:
    """Why a step that took the state from `before` to `actual` is not eager's (`before` to
    `expected`), or None. Compared per tensor on what the step changed, so that a wrong gradient
    shows even where it moves a weight by little next to the weight's size; `reference`, eager's
    step in float64, measures the rounding error a float32 step may have (NOISE_FACTOR), as far as
    eager's float32 step shows it, and as far as eager's step on channels-last tensors shows it
    (`other_layout`, stepped only where a tensor differs by more than the float64 step allows:
    torch's batch norm sums a channels-last tensor's statistics in float32, the row-major one
    more exactly: mobilenet_v2's running means 1e-9 from float64's one way and 4e-7 the other,
    both eager's float32 step; eager's own channels-last step of timm's repvgg_a0 aborts the
    process in backward, so it is not taken where it is not needed)."""
    if other_layout is not None:
        first = update_mismatch(before, expected, actual, reference)
        if first is None:
            return None
        layout = other_layout()
        if layout is None:
            return first
        return _mismatch(before, expected, actual, reference, layout)
    return _mismatch(before, expected, actual, reference, None)


def _mismatch(before: dict[str, Tensor], expected: dict[str, Tensor], actual: dict[str, Tensor],
              reference: dict[str, Tensor] | None, other_layout: dict[str, Tensor] | None) -> str | None:
    if actual.keys() != expected.keys():
        return f"other parameters and buffers: {sorted(actual.keys() ^ expected.keys())[:3]}"
    worst: tuple[float, str] | None = None
    for name, want in expected.items():
        got = actual[name]
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{name}: {tuple(got.shape)} {got.dtype}, eager {tuple(want.shape)} {want.dtype}"
        if not want.is_floating_point():
            if not torch.equal(got, want):
                return f"{name}: {got.tolist() if got.numel() < 5 else 'differs'}, eager's step " \
                       f"{want.tolist() if want.numel() < 5 else 'another value'}"
            continue
        if not want.numel():
            continue
        moved = (want.double() - before[name].double()).abs().max().item()
        error = (got.double() - want.double()).abs().max().item()
        noise = (want.double() - reference[name]).abs().max().item() if reference is not None else 0.0
        if reference is not None and other_layout is not None:
            noise = max(noise, (other_layout[name].double() - reference[name]).abs().max().item())
        if not error <= NOISE_FACTOR * noise + UPDATE_RTOL * moved + UPDATE_ATOL:  # (NaN fails)
            relative = error / moved if moved > 0 else math.inf
            if worst is None or relative > worst[0]:
                worst = (relative, f"{name} moved {error:.2e} away from eager's step (eager moved it by at most "
                                   f"{moved:.2e}; eager's float32 step is {noise:.2e} from its float64 step)")
    return worst[1] if worst else None


def float64_state(model: nn.Module, inputs: tuple, loss: Callable[[Any], Tensor],
                  builder: Callable[[Any, tuple], Built]) -> dict[str, Tensor] | None:
    """The state after eager's step in float64 from the same weights and seed (None where the
    model does not run in float64: the check then has no rounding error to allow for)."""
    as64 = copy.deepcopy(model).double()
    inputs64 = tuple(map_floating(copy.deepcopy(inputs), lambda t: t.double()))
    try:
        _, after = first_step("eager", as64, inputs64, loss, {"eager": builder})
    except Exception as exc:  # noqa: BLE001 - a model written for float32 only
        log(f"eager's step in float64 failed ({short_error(exc)}): checking without its rounding error")
        return None
    return {k: v.double() for k, v in after.items()}


def channels_last_state(model: nn.Module, inputs: tuple, loss: Callable[[Any], Tensor],
                        builder: Callable[[Any, tuple], Built]) -> dict[str, Tensor] | None:
    """The state after eager's float32 step from the same weights and seed with the model's and
    the inputs' 4-d tensors channels-last (`model.to(memory_format=torch.channels_last)`, torch's
    way of training a conv net faster); None where no input is 4-d or the step fails."""
    def to_channels_last(t: Tensor) -> Tensor:
        return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t

    if not any(isinstance(t, Tensor) and t.dim() == 4 for t in inputs):
        return None
    model = copy.deepcopy(model).to(memory_format=torch.channels_last)
    inputs = tuple(map_floating(copy.deepcopy(inputs), to_channels_last))
    try:
        return first_step("eager", model, inputs, loss, {"eager": builder})[1]
    except Exception as exc:  # noqa: BLE001
        log(f"eager's step on channels-last tensors failed ({short_error(exc)})")
        return None


def map_floating(obj: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """`obj` with every floating tensor in its nested tuples and lists replaced by `fn(tensor)`."""
    if isinstance(obj, Tensor):
        return fn(obj) if obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_floating(item, fn) for item in obj)
    return obj


@contextlib.contextmanager
def training_calls(backend: str) -> Iterator[None]:
    """Grad on (time_in_turns turns it off for inference), and the backend's calling mode
    (torchscribe strict: a call that would run eagerly is an error, not eager's time)."""
    with torch.enable_grad(), calling_mode(backend):
        yield


@dataclass
class Result:
    """One model's training step per backend: median seconds, or why it was not timed."""

    seconds: dict[str, float] = field(default_factory=dict)
    fastest_s: dict[str, float] = field(default_factory=dict)
    first_s: dict[str, float] = field(default_factory=dict)  # building and the checked step
    rounds: dict[str, list[list[float]]] = field(default_factory=dict)  # time_in_turns's, per backend
    problems: dict[str, str] = field(default_factory=dict)  # not timed: failed, or torchscribe's step differs
    differs: dict[str, str] = field(default_factory=dict)  # another backend's step differs: timed, with this note


def trainable_problem(model: Any) -> str | None:
    """Why `model` has no training step to time, or None."""
    if not isinstance(model, nn.Module):
        return "a function: no parameters to train"
    if not any(p.requires_grad for p in model.parameters()):
        return "no parameters to train"
    return None


def first_step(backend: str, model: nn.Module, inputs: tuple, loss: Callable[[Any], Tensor],
               builders: dict[str, Callable[[Any, tuple], Built]] = BUILDERS) -> tuple[Step, dict[str, Tensor]]:
    """The backend built on its own copy of `model` and one step of it from SEED: the step (to
    time) and the state after it. Raises what building or stepping raises."""
    with torch.no_grad(), calling_mode(backend):
        built = builders[backend](copy.deepcopy(model), inputs)
    owner = built.owner if isinstance(built.owner, nn.Module) else None
    if owner is None:
        raise TypeError(f"{backend} gives no module holding the parameters")
    step = Step(built.fn, owner, copy.deepcopy(inputs), loss)
    torch.manual_seed(SEED)
    with training_calls(backend):
        step()
    return step, state(owner)


def step_mismatch(model: nn.Module, inputs: tuple, loss: Callable[[Any], Tensor], backend: str = "torchscribe",
                  builders: dict[str, Callable[[Any, tuple], Built]] = BUILDERS) -> str | None:
    """Why one step of `backend` (torchscribe: strict mode) is not eager's, as `measure` checks it
    before timing, or None; nothing timed (tests/corpus/test_training.py)."""
    model = model.train()
    initial = state(model)
    with torch._inductor.config.patch(fallback_random=True):
        _, expected = first_step("eager", model, inputs, loss, builders)
        _, after = first_step(backend, model, inputs, loss, builders)
    return update_mismatch(initial, expected, after, float64_state(model, inputs, loss, builders["eager"]),
                           lambda: channels_last_state(model, inputs, loss, builders["eager"]))


def measure(model: nn.Module, inputs: tuple, loss: Callable[[Any], Tensor], budget_s: float,
            backends: Sequence[str] = BACKENDS,
            builders: dict[str, Callable[[Any, tuple], Built]] = BUILDERS) -> Result:
    """Build each backend on its own copy of `model` (in train() mode), check one step of each
    against eager's, and time the steps that match in turns. Eager first: it is the reference."""
    result = Result()
    model = model.train()
    initial = state(model)
    expected: dict[str, Tensor] | None = None
    reference: dict[str, Tensor] | None = None
    other_layout: Callable[[], dict[str, Tensor] | None] | None = None
    timed: dict[str, Timed] = {}
    # torch.compile draws dropout's masks from eager's generator, so that its step can be checked
    # against eager's (by default its kernels draw their own); other steps are unchanged by it.
    with torch._inductor.config.patch(fallback_random=True):
        for backend in ("eager", *(b for b in backends if b != "eager")):
            try:
                start = time.perf_counter()
                step, after = first_step(backend, model, inputs, loss, builders)
                result.first_s[backend] = time.perf_counter() - start
            except Exception as exc:  # one backend failing is a result, not the end of the run
                result.problems[backend] = short_error(exc)
                if backend == "eager":
                    return result
                continue
            if expected is None:
                expected = after
                reference = float64_state(model, inputs, loss, builders["eager"])
                other_layout = functools.lru_cache(maxsize=1)(
                    lambda: channels_last_state(model, inputs, loss, builders["eager"]))
            elif problem := update_mismatch(initial, expected, after, reference, other_layout):
                # As in the inference tables: torchscribe's wrong result is not timed; another
                # backend's is (what its users get), with the difference in a note.
                if backend == "torchscribe":
                    result.problems[backend] = f"{backend}'s step differs from eager's: {problem}"
                    continue
                result.differs[backend] = f"{backend}'s step differs from eager's (timed all the same): {problem}"
            timed[backend] = Timed(step, (), lambda backend=backend: training_calls(backend))
        log(f"timing training steps: {', '.join(timed)}")
        time_in_turns(timed, budget_s)
    for backend, entry in timed.items():
        result.seconds[backend] = statistics.median(entry.times)
        result.fastest_s[backend] = min(entry.times)
        result.rounds[backend] = entry.rounds
    return result

"""A/B of a training step with and without the fused backward kernels (issue 50, point 2):
`script(model, example_inputs=...)` compiled twice in one process, once with the standard
pipeline and once with `autograd_kernels` taken out of it (script()'s cache tells the two
pipelines apart), the steps (forward, loss, backward, SGD step) timed in turns with eager's
(bench.time_in_turns), after checking each step against eager's (train_step.measure).

    python -m benchmarks.train_ab [--budget 2] [--repeat 3] [--only lstm_cell pointwise_chain]

Prints, per model and repeat, the median and the fastest step of each and the ratios
unfused/fused and eager/fused (on a busy machine the fastest steps vary less). The examples' committed modules are not used: a call autograd records runs their
generic code, which has no types and so no kernels (docs/models.md, "Training")."""

from __future__ import annotations

import argparse
import contextlib
import importlib
from typing import Any, Iterator

import torch
from torch import Tensor, nn

from benchmarks import micro, train_step
from benchmarks.bench import BUILDERS, Built, log

MODELS = ("lstm_cell", "pointwise_chain", "gated_mlp")


class GatedMLP(nn.Module):
    """A SwiGLU-style block with a tanh-GELU: the pointwise ops between the linears are two
    groups (silu(a) * b, then the GELU and the residual)."""

    def __init__(self, dim: int = 256, hidden: int = 512) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.nn.functional.silu(self.gate(x)) * self.up(x)
        y = self.down(h)
        return x + torch.nn.functional.gelu(y, approximate="tanh") * 0.5


class WithWeight(nn.Module):
    """A parameter-free model with a learned input scale, so that a step has something to train."""

    def __init__(self, inner: nn.Module, width: int) -> None:
        super().__init__()
        self.inner = inner
        self.scale = nn.Parameter(torch.ones(width))

    def forward(self, x: Tensor) -> Tensor:
        return self.inner(x * self.scale)


def make(name: str) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    if name == "lstm_cell":
        return importlib.import_module("examples.lstm_cell").make_example()  # (batch 8)
    if name == "pointwise_chain":
        return WithWeight(micro.PointwiseChain(), micro.WIDTH), (torch.randn(8, micro.SEQ, micro.WIDTH),)
    if name == "gated_mlp":
        return GatedMLP(), (torch.randn(8, 128, 256),)
    raise KeyError(name)


@contextlib.contextmanager
def without_autograd_kernels() -> Iterator[None]:
    from ir import passes

    saved = list(passes.PIPELINE)
    passes.PIPELINE[:] = [p for p in saved if p[0] != "autograd_kernels"]
    try:
        yield
    finally:
        passes.PIPELINE[:] = saved


def build(fused: bool) -> Any:
    """script() of the model, its code for autograd compiled now (one call with grad on), with
    or without the pass."""

    def builder(model: Any, inputs: tuple) -> Built:
        from transpiler import script

        with contextlib.nullcontext() if fused else without_autograd_kernels():
            compiled = script(model, example_inputs=inputs)
            with torch.enable_grad():
                compiled(*inputs)
        return Built(compiled, compiled)

    return builder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timing per backend and repeat")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    builders = {**BUILDERS, "torchscribe": build(True), "unfused": build(False)}
    for name in args.only:
        for r in range(args.repeat):
            model, inputs = make(name)
            result = train_step.measure(model, inputs, train_step.MeanSquares(), args.budget,
                                        backends=("eager", "unfused", "torchscribe"), builders=builders)
            if result.problems:
                log(f"{name}: {result.problems}")
            for label, s in (("median", result.seconds), ("fastest", result.fastest_s)):
                fused, unfused, eager = (s.get(k, float("nan")) for k in ("torchscribe", "unfused", "eager"))
                print(f"{name} repeat {r} {label}: eager {eager * 1e3:.3f} ms, unfused {unfused * 1e3:.3f} ms, "
                      f"fused {fused * 1e3:.3f} ms; unfused/fused {unfused / fused:.2f}x, "
                      f"eager/fused {eager / fused:.2f}x", flush=True)


if __name__ == "__main__":
    main()

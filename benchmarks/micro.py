"""Micro-benchmarks: small memory-bound models that a fusing backend should run as one kernel.

Each is an ordinary `nn.Module` in the subset torchscribe compiles (docs/subset.md), not
decorated: the runner compiles an instance with `script(model, example_inputs=...)`, so the code
is specialised to the dtype and the feature sizes, with a symbolic batch. The input is a
transformer-like activation `(batch, SEQ, WIDTH)` in float32 (`SHAPES` names the others);
`SIZES` are the batches run.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SEQ = 128
WIDTH = 768
# Batch 1 and 8 as for the examples, and a large batch: 50 MB in and 50 MB out, well past the
# last-level cache of common CPUs, so that time is memory traffic.
SIZES = {"b1": 1, "b8": 8, "large": 128}


class PointwiseChain(nn.Module):
    """Twelve elementwise ops, transcendentals among them: eager reads and writes memory for each,
    a fused kernel reads `x` once and writes the result once."""

    def forward(self, x: Tensor) -> Tensor:
        y = x * 1.5 + 0.25
        y = torch.sin(y) + torch.cos(x)
        y = y * torch.sigmoid(y)
        y = torch.exp(-y.abs())
        return torch.tanh(y) * x


class Softmax(nn.Module):
    """A row reduction (max, sum of exp) followed by a pointwise normalisation."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, dim=-1)


class LayerNormGELU(nn.Module):
    """Two row reductions (mean, variance), the affine transform, then an erf GELU."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.norm(x))


class DepthwiseBlock(nn.Module):
    """A depthwise 3x3 conv, batch norm and ReLU on NCHW input `(batch, CHANNELS, SIDE, SIDE)`:
    oneDNN's conv runs many times faster on a channels-last input (ir/passes/layout.py), and the
    batch norm and ReLU around it are one kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, CHANNELS, 3, padding=1, groups=CHANNELS, bias=False)
        self.bn = nn.BatchNorm2d(CHANNELS)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)))


CHANNELS = 96
SIDE = 56

BENCHMARKS: dict[str, type[nn.Module]] = {
    "pointwise_chain": PointwiseChain,
    "softmax": Softmax,
    "layer_norm_gelu": LayerNormGELU,
    "depthwise_block": DepthwiseBlock,
}
# The input of each, by batch size (the transformer-like activation unless named here).
SHAPES: dict[str, Callable[[int], tuple[int, ...]]] = {"depthwise_block": lambda b: (b, CHANNELS, SIDE, SIDE)}


def make(name: str, size: str) -> tuple[nn.Module, tuple]:
    """(model, inputs) of one micro-benchmark at one of SIZES, the same on every call."""
    torch.manual_seed(0)
    if name == "layer_norm_gelu":
        model: nn.Module = LayerNormGELU(WIDTH)
        with torch.no_grad():  # non-trivial affine parameters
            model.norm.weight.uniform_(0.5, 1.5)
            model.norm.bias.uniform_(-0.5, 0.5)
    else:
        model = BENCHMARKS[name]()
        if name == "depthwise_block":
            with torch.no_grad():  # batch-norm statistics that are not the identity
                model.bn.running_mean.uniform_(-1, 1)
                model.bn.running_var.uniform_(0.5, 2)
    shape = SHAPES.get(name, lambda b: (b, SEQ, WIDTH))(SIZES[size])
    return model.eval(), (torch.randn(shape),)


def factories() -> list[tuple[str, str, Callable[[], tuple[nn.Module, tuple]]]]:
    """(benchmark, size label, factory) for every micro-benchmark at every size."""
    return [(name, size, functools.partial(make, name, size)) for name in BENCHMARKS for size in SIZES]

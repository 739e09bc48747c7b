"""The root of `script(nn.Sequential(...), ...)`: compiled as a module that calls the container,
so that the container is what the compiler already understands as a submodule (a call of each
layer in order, ir/passes/inline.py), whatever torch's own container source says."""

from __future__ import annotations

from torch import nn


class SequentialCall(nn.Module):
    def __init__(self, layers: nn.Sequential) -> None:
        super().__init__()
        self.layers = layers

    def forward(self, x):
        return self.layers(x)

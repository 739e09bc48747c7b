"""The root of `script(nn.Sequential(...), ...)`, or of one of torch's own layers
(`script(nn.Conv2d(...), ...)`): compiled as a module that calls it, so that the root is what the
compiler already understands as a submodule (a Sequential: a call of each layer in order,
ir/passes/inline.py; a layer: the torch call its forward makes, ir/passes/layers.py), whatever
torch's own source and annotations say."""

from __future__ import annotations

from torch import nn


class RootCall(nn.Module):
    def __init__(self, root: nn.Module) -> None:
        super().__init__()
        self.root = root

    def forward(self, x):
        return self.root(x)

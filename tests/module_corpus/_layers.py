"""Helpers that model files take with `from ._layers import *` (names the compiler does not see
in the importing file)."""

import math

import numpy as np
import torch
from torch import nn

__all__ = ["np", "SQRT_HALF", "LEAK", "gelu_tanh", "conv_out", "Swish"]

SQRT_HALF = math.sqrt(0.5)
LEAK = 0.2


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def conv_out(size, kernel, stride=1, pad=0):
    return (size + 2 * pad - kernel) // stride + 1


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)

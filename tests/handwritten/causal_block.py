"""A decoder-only transformer block in the style of small GPT code: a config dataclass, a layer
norm whose bias is optional, attention with a causal mask kept as a buffer, a GELU MLP."""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from transpiler import script


@dataclass
class Settings:
    width: int = 128
    heads: int = 4
    context: int = 64
    with_bias: bool = True


class Norm(nn.Module):
    def __init__(self, width: int, with_bias: bool) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.shift = nn.Parameter(torch.zeros(width)) if with_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.gain.shape, self.gain, self.shift, 1e-5)


class CausalAttention(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.qkv = nn.Linear(s.width, 3 * s.width, bias=s.with_bias)
        self.out = nn.Linear(s.width, s.width, bias=s.with_bias)
        self.heads = s.heads
        self.width = s.width
        lower = torch.tril(torch.ones(s.context, s.context))
        self.register_buffer("allowed", lower.view(1, 1, s.context, s.context))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(self.width, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.allowed[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).contiguous().view(b, t, c))


class Feedforward(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.up = nn.Linear(s.width, 4 * s.width, bias=s.with_bias)
        self.down = nn.Linear(4 * s.width, s.width, bias=s.with_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


@script(example="make_example")
class CausalBlock(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.norm_a = Norm(s.width, s.with_bias)
        self.attend = CausalAttention(s)
        self.norm_f = Norm(s.width, s.with_bias)
        self.feed = Feedforward(s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.norm_a(x))
        return x + self.feed(self.norm_f(x))


def make_example():
    torch.manual_seed(0)
    return CausalBlock(Settings()).eval(), (torch.randn(4, 64, 128),)

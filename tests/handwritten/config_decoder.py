"""A decoder block configured by a dataclass: the config object is kept on the module and read
in forward; a causal mask from a registered tril buffer, masked_fill with the dtype's minimum,
softmax over the keys, and dropout that reads self.training."""
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@dataclass
class Config:
    dim: int = 64
    heads: int = 4
    context: int = 32
    dropout: float = 0.1
    bias: bool = True


@script(example="make_example")
class Decoder(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=cfg.bias)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=cfg.bias)
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 4 * cfg.dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * cfg.dim, cfg.dim), nn.Dropout(cfg.dropout))
        self.register_buffer("mask", torch.tril(torch.ones(cfg.context, cfg.context)).view(1, 1, cfg.context, cfg.context))

    def attend(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(self.cfg.dim, dim=2)
        hs = C // self.cfg.heads
        q = q.view(B, T, self.cfg.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.cfg.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.cfg.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, torch.finfo(att.dtype).min)
        att = F.softmax(att, dim=-1)
        att = F.dropout(att, self.cfg.dropout, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attend(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def make_example():
    torch.manual_seed(0)
    return Decoder(Config()).eval(), (torch.randn(2, 24, 64),)

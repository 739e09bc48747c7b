"""A small GPT in the style of the popular single-file GPT trainers: a settings dataclass, the
embeddings and blocks kept in an nn.ModuleDict built with dict(...) and called by attribute
(`self.body.tok(idx)`), the output head tied to the token embedding, a causal
scaled_dot_product_attention picked by a hasattr() test, and a loss computed only when targets
are given."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@dataclass
class Settings:
    vocab: int = 64
    context: int = 16
    width: int = 32
    heads: int = 4
    depth: int = 2


class SelfAttention(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.heads = s.heads
        self.qkv = nn.Linear(s.width, 3 * s.width)
        self.out = nn.Linear(s.width, s.width)
        self.fused = hasattr(F, "scaled_dot_product_attention")

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) / (k.size(-1) ** 0.5)
            causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
        return self.out(y.transpose(1, 2).contiguous().view(b, t, c))


class Layer(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(s.width)
        self.attn = SelfAttention(s)
        self.norm2 = nn.LayerNorm(s.width)
        self.ff = nn.Sequential(nn.Linear(s.width, 4 * s.width), nn.GELU(), nn.Linear(4 * s.width, s.width))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


@script(example="make_example")
class TinyGPT(nn.Module):
    def __init__(self, s: Settings) -> None:
        super().__init__()
        self.s = s
        self.body = nn.ModuleDict(dict(
            tok=nn.Embedding(s.vocab, s.width),
            pos=nn.Embedding(s.context, s.width),
            layers=nn.ModuleList([Layer(s) for _ in range(s.depth)]),
            norm=nn.LayerNorm(s.width),
        ))
        self.head = nn.Linear(s.width, s.vocab, bias=False)
        self.body.tok.weight = self.head.weight

    def forward(self, idx: Tensor, targets: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
        b, t = idx.size()
        assert t <= self.s.context, f"sequence of {t} tokens, context is {self.s.context}"
        x = self.body.tok(idx) + self.body.pos(torch.arange(t, device=idx.device))
        for layer in self.body.layers:
            x = layer(x)
        logits = self.head(self.body.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    s = Settings()
    return TinyGPT(s).eval(), (torch.randint(0, s.vocab, (2, s.context)), torch.randint(0, s.vocab, (2, s.context)))

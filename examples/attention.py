"""Causal multi-head self-attention: qkv projection, heads, scaled scores, causal mask buffer."""
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int = 128, dropout: float = 0.0) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        weights = self.dropout(weights)

        y = weights @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = CausalSelfAttention(64, 4, max_len=64).eval()
    x = torch.randn(8, 32, 64)
    return model, (x,)

"""A top-2 mixture of experts over tokens, with a gating network and a residual."""
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


class Expert(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, hidden)
        self.w2 = nn.Linear(hidden, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(F.silu(self.w1(x)))


@script(example="make_example")
class MoE(nn.Module):
    def __init__(self, d: int = 64, hidden: int = 128, n_experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.gate = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d, hidden) for _ in range(n_experts)])
        self.k = k
        self.norm = nn.LayerNorm(d)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        h = self.norm(x).reshape(-1, d)
        logits = self.gate(h)
        weights, chosen = torch.topk(F.softmax(logits, dim=-1), self.k, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        out = torch.zeros_like(h)
        for i, expert in enumerate(self.experts):
            mask = chosen == i
            rows = mask.any(-1).nonzero().squeeze(-1)
            if rows.numel() == 0:
                continue
            w = (weights * mask).sum(-1)[rows].unsqueeze(-1)
            out.index_add_(0, rows, expert(h[rows]) * w)
        return x + out.reshape(b, t, d)


def make_example():
    torch.manual_seed(0)
    return MoE().eval(), (torch.randn(4, 16, 64),)

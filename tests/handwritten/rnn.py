"""A GRU written step by step, with a 1-d conv front end and a classifier over the last state."""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


class GRUCell(nn.Module):
    def __init__(self, n_in: int, n_hidden: int) -> None:
        super().__init__()
        self.ih = nn.Linear(n_in, 3 * n_hidden)
        self.hh = nn.Linear(n_hidden, 3 * n_hidden)

    def forward(self, x: Tensor, h: Tensor) -> Tensor:
        gi = self.ih(x)
        gh = self.hh(h)
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (1 - z) * n + z * h


@script(example="make_example")
class Tagger(nn.Module):
    def __init__(self, n_mels: int = 40, hidden: int = 64, classes: int = 12) -> None:
        super().__init__()
        self.conv = nn.Conv1d(n_mels, hidden, 5, padding=2)
        self.norm = nn.BatchNorm1d(hidden)
        self.cell = GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, classes)
        self.hidden = hidden

    def forward(self, feats: Tensor, h0: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        x = F.gelu(self.norm(self.conv(feats)))  # (B, H, T)
        x = x.transpose(1, 2)
        h = h0 if h0 is not None else x.new_zeros(x.size(0), self.hidden)
        outs: List[Tensor] = []
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
            outs.append(h)
        seq = torch.stack(outs, 1)
        return self.out(seq.mean(1)), h


def make_example():
    torch.manual_seed(0)
    return Tagger().eval(), (torch.randn(4, 40, 50),)

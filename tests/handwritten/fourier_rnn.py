"""An FNet-style mixer (the real part of fft2), an Optional downsample and nn.Identity, jit.Final
constants, then a recurrence over x.unbind(1) through a @torch.jit.script helper, collected with
append and stacked, then roll, flip and cumsum."""
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@torch.jit.script
def fused_gate(a: Tensor, b: Tensor) -> Tensor:
    return torch.sigmoid(a) * torch.tanh(b)


class FourierBlock(nn.Module):
    use_fft: torch.jit.Final[bool]

    def __init__(self, dim: int, use_fft: bool = True, downsample: bool = False) -> None:
        super().__init__()
        self.use_fft = use_fft
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.down: Optional[nn.Module] = nn.Linear(dim, dim) if downsample else None
        self.gate = nn.Identity() if use_fft else nn.Sigmoid()

    def forward(self, x: Tensor) -> Tensor:
        if self.use_fft:
            x = x + torch.fft.fft2(x).real
        x = self.norm(x)
        x = x + self.gate(self.ff(x))
        if self.down is not None:
            x = self.down(x)
        return x


@script(example="make_example")
class Recurrent(nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.blocks = nn.Sequential(FourierBlock(dim), FourierBlock(dim, use_fft=False, downsample=True))
        self.a = nn.Linear(dim, dim)
        self.b = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        x = self.blocks(x)
        h = torch.zeros_like(x[:, 0])
        outs: List[Tensor] = []
        for step in x.unbind(1):
            h = fused_gate(self.a(step), self.b(h))
            outs.append(h)
        y = torch.stack(outs, dim=1)
        return torch.roll(y, shifts=1, dims=1).flip(-1).cumsum(1)


def make_example():
    torch.manual_seed(0)
    return Recurrent().eval(), (torch.randn(2, 6, 32),)

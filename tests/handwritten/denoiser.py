"""A denoiser in the style of diffusion codebases: a sinusoidal timestep embedding computed by a
module-level helper (odd widths padded), residual blocks of GroupNorm, SiLU and convolutions with
the time embedding added per channel, a 1x1 skip where widths differ (nn.Identity where not), an
optional conditioning vector, average-pool down and nearest up with a concatenated skip."""

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from transpiler import script


def timestep_embedding(t: torch.Tensor, dim: int, max_period: int = 10000) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(4, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(emb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


@script(example="make_example")
class Denoiser(nn.Module):
    def __init__(self, ch: int = 16, temb: int = 32) -> None:
        super().__init__()
        self.temb_dim = temb
        self.embed = nn.Sequential(nn.Linear(temb, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inp = nn.Conv2d(3, ch, 3, padding=1)
        self.down = ResBlock(ch, ch * 2, temb)
        self.mid = ResBlock(ch * 2, ch * 2, temb)
        self.up = ResBlock(ch * 4, ch, temb)
        self.out = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: Optional[torch.Tensor] = None) -> torch.Tensor:
        emb = self.embed(timestep_embedding(t, self.temb_dim))
        if cond is not None:
            emb = emb + cond
        h0 = self.inp(x)
        h1 = self.down(h0, emb)
        h = self.mid(F.avg_pool2d(h1, 2), emb)
        h = F.interpolate(h, scale_factor=2, mode="nearest")
        h = self.up(torch.cat([h, h1], dim=1), emb)
        return self.out(F.silu(h))


def make_example():
    torch.manual_seed(0)
    return Denoiser().eval(), (torch.randn(2, 3, 16, 16), torch.randint(0, 1000, (2,)))

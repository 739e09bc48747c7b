"""A gated MLP-mixer written with module-level helper functions (one taking layers as
arguments), chunk/split unpacking, list comprehensions of layers, and the builtin sum over a
generator of zipped heads and features."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


def swish(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def spatial_gate(x: Tensor, proj: nn.Linear, norm: nn.LayerNorm) -> Tensor:
    u, v = x.chunk(2, dim=-1)
    v = proj(norm(v).transpose(1, 2)).transpose(1, 2)
    return u * v


class GatedBlock(nn.Module):
    def __init__(self, tokens: int, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.gate_norm = nn.LayerNorm(2 * width)
        self.gate_proj = nn.Linear(tokens, tokens)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: Tensor) -> Tensor:
        h = swish(self.up(self.norm(x)))
        return x + self.down(spatial_gate(h, self.gate_proj, self.gate_norm))


@script(example="make_example")
class GatedMixer(nn.Module):
    def __init__(self, tokens: int = 16, width: int = 32, depth: int = 3, classes: int = 5) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([GatedBlock(tokens, width) for _ in range(depth)])
        self.heads = nn.ModuleList([nn.Linear(width, classes) for _ in range(2)])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        for block in self.blocks:
            x = block(x)
        first, rest = x.split([1, x.size(1) - 1], dim=1)
        pooled = (first.squeeze(1), rest.mean(1))
        logits = sum(head(p) for head, p in zip(self.heads, pooled))
        return logits, x


def make_example():
    torch.manual_seed(0)
    return GatedMixer().eval(), (torch.randn(4, 16, 32),)

"""A tiny ViT written by hand: patch embedding by unfold + einsum, a class token, nn.MultiheadAttention."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * 4), nn.GELU(approximate="tanh"), nn.Linear(dim * 4, dim))
        self.gamma = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, x: Tensor) -> Tensor:
        h = self.norm1(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + self.gamma * a
        return x + self.gamma * self.mlp(self.norm2(x))


@script(example="make_example")
class TinyViT(nn.Module):
    def __init__(self, patch: int = 4, dim: int = 64, depth: int = 2, heads: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.patch = patch
        self.proj = nn.Parameter(torch.randn(3 * patch * patch, dim) * 0.02)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, 65, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, img: Tensor) -> Tensor:
        patches = F.unfold(img, self.patch, stride=self.patch).transpose(1, 2)
        x = torch.einsum("bnp,pd->bnd", patches, self.proj)
        cls = self.cls.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        x = self.norm(x)
        return self.head(x[:, 0])


def make_example():
    torch.manual_seed(0)
    return TinyViT().eval(), (torch.randn(2, 3, 32, 32),)

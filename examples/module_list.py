"""A stack of @script blocks held in an nn.ModuleList, iterated with a scaled residual."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@script
class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(self.fc(self.norm(x)))


@script(example="make_example")
class Stack(nn.Module):
    def __init__(self, dim: int, depth: int, residual_scale: float = 0.5) -> None:
        super().__init__()
        self.residual_scale = residual_scale
        self.layers = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = x + self.residual_scale * layer(x)
        return self.head(x)


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = Stack(64, 4).eval()
    x = torch.randn(8, 16, 64)
    return model, (x,)

"""A transformer-style MLP: Linear -> GELU -> Linear, a residual add, then LayerNorm."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class MLP(nn.Module):
    def __init__(self, dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: Tensor) -> Tensor:
        h = F.gelu(self.fc1(x))
        h = self.fc2(h)
        return self.norm(x + h)


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = MLP(64, 256).eval()
    x = torch.randn(8, 16, 64)
    return model, (x,)

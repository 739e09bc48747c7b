"""Optional arguments refined with `is None`, default arguments, and a str option with if/elif/else."""
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class MaskedPool(nn.Module):
    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, out_dim)

    def forward(
        self,
        x: Tensor,
        mask: Optional[Tensor] = None,
        reduction: str = "mean",
        temperature: Optional[float] = None,
    ) -> Tensor:
        # x: (batch, length, dim); mask: (batch, length), True where x is valid.
        if mask is None:
            mask = torch.ones(x.size(0), x.size(1), dtype=torch.bool, device=x.device)
        weights = mask.unsqueeze(-1).to(x.dtype)
        if reduction == "sum":
            pooled = (x * weights).sum(dim=1)
        elif reduction == "mean":
            pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        else:
            pooled = x.masked_fill(weights == 0, float("-inf")).amax(dim=1)
        out = self.proj(pooled)
        if temperature is not None:
            out = out / temperature
        return out


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = MaskedPool(32, 16).eval()
    x = torch.randn(8, 20, 32)
    lengths = torch.randint(1, 21, (8, 1))
    mask = torch.arange(20).unsqueeze(0) < lengths
    return model, (x, mask, "max", 2.0)


def make_example_defaults() -> tuple[object, tuple]:
    """The same module called with only x: mask is None, reduction "mean", no temperature."""
    torch.manual_seed(0)
    model = MaskedPool(32, 16).eval()
    x = torch.randn(8, 20, 32)
    return model, (x,)

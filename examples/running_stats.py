"""A normalizer that updates buffers in forward: EMA mean/variance and a step counter."""
import torch
from torch import Tensor, nn

from transpiler import script


@script(example=("make_example", "make_example_eval"))
class RunningNorm(nn.Module):
    def __init__(self, dim: int, momentum: float = 0.1, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x: Tensor) -> Tensor:
        # x: (batch, dim)
        if self.training:
            batch_mean = x.mean(dim=0)
            batch_var = x.var(dim=0, unbiased=False)
            self.mean.mul_(1.0 - self.momentum).add_(batch_mean, alpha=self.momentum)
            self.var.lerp_(batch_var, self.momentum)
            self.count += 1
        return (x - self.mean) / torch.sqrt(self.var + self.eps)


def make_example() -> tuple[object, tuple]:
    """Train mode, so that forward's buffer updates happen (they are part of what is compared)."""
    torch.manual_seed(0)
    model = RunningNorm(32).train()
    x = torch.randn(8, 32) * 3.0 + 1.0
    return model, (x,)


def make_example_eval() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = RunningNorm(32)
    model.mean.uniform_(-1.0, 1.0)
    model.var.uniform_(0.5, 2.0)
    model.eval()
    x = torch.randn(8, 32)
    return model, (x,)

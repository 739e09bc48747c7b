"""Plain @script functions with `while` loops: early return, `break`, `continue`, an int result."""
import torch
from torch import Tensor

from transpiler import script


@script(example="make_example")
def newton_sqrt(x: Tensor, max_iter: int = 20, tol: float = 1e-6) -> Tensor:
    """Element-wise square root of a positive tensor by Newton's method, returning once converged."""
    y = torch.where(x > 1.0, x, torch.ones_like(x))
    i = 0
    while i < max_iter:
        y_next = 0.5 * (y + x / y)
        if bool(((y_next - y).abs() < tol).all()):
            return y_next
        y = y_next
        i += 1
    return y


@script  # (no example: a whole-tensor max and one multiply per step leave nothing to fuse)
def shrink_until(x: Tensor, limit: float, max_steps: int = 64) -> tuple[Tensor, int]:
    """Scale x down until its largest magnitude is at most `limit`; returns (x, steps taken)."""
    steps = 0
    while steps < max_steps:
        peak = x.abs().max()
        if bool(peak <= limit):
            break
        steps += 1
        if bool(peak > 4.0 * limit):
            # Far from the target: take a coarse step and check again.
            x = x * 0.25
            continue
        x = x * 0.5
    return x, steps


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    x = torch.rand(8, 256) * 100.0 + 0.01
    return newton_sqrt, (x, 30)


def make_example_shrink() -> tuple[object, tuple]:
    torch.manual_seed(0)
    x = torch.randn(8, 256) * 50.0
    return shrink_until, (x, 1.5)

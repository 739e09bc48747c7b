"""Indexing reads and writes; also MUTATES ITS INPUT `acc` in place, on purpose (the caller sees it)."""
import torch
from torch import Tensor

from transpiler import script


@script(example="make_example")
def indexing(x: Tensor, acc: Tensor, threshold: float = 0.5) -> tuple[Tensor, Tensor, Tensor]:
    # Reads: step slices, negative indices, None (new axis), ellipsis, a boolean mask.
    evens = x[:, ::2]
    last = x[..., -1]
    window = x[1:-1, None, 2:10:3]
    picked = x[x > threshold]  # 1-d, its length depends on the data

    # Writes into a clone: boolean-mask assignment and slice assignment with broadcasting.
    y = x.clone()
    y[y < 0] = 0.0
    y[:, :4] = last[:, None]
    y[0] += 1.0

    # In-place updates of the input `acc`: visible to the caller after the call.
    acc.mul_(2)
    acc += evens.sum(dim=1, keepdim=True)
    acc[:, 0] = 0.0

    return evens * 2.0 + last.unsqueeze(1), y + window.sum(), picked


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    x = torch.randn(8, 32)
    acc = torch.randn(8, 16)
    return indexing, (x, acc, 0.5)

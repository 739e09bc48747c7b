"""List and tuple arguments: tuple unpacking, a loop over a list[int], min/max/len, an int result.

Nothing here fuses (a pad, adaptive pools of a size the loop picks, a cat: each one library
call), so its compiled module holds the generic code alone and names no example."""
import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script


@script
def pyramid_pool(x: Tensor, sizes: list[int], pad: tuple[int, int] = (0, 0)) -> tuple[Tensor, int]:
    """Average-pool a (batch, channels, length) signal at several output sizes and concatenate."""
    left, right = pad
    x = F.pad(x, (left, right))
    length = x.size(-1)
    pooled: list[Tensor] = []
    for size in sizes:
        size = max(1, min(size, length))
        pooled.append(F.adaptive_avg_pool1d(x, size))
    return torch.cat(pooled, dim=-1), len(pooled)


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    x = torch.randn(8, 16, 50)
    return pyramid_pool, (x, [1, 2, 4, 8, 64], (3, 3))

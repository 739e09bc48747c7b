"""List and tuple arguments: tuple unpacking, a loop over a list[int], min/max/len, an int result.

The loop stays Python (its sizes are the caller's), and each adaptive average pool in it becomes
a kernel of ours that reads the size the loop picks at run time (torch's goes through its 2-d
pooling loop): so the example names a factory, whose dtype, device and sizes it specialises to."""
import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script


@script(example="make_example")
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

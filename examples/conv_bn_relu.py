"""Conv2d + BatchNorm2d + ReLU; in train mode BatchNorm also updates its running-stat buffers."""
import torch
from torch import Tensor, nn

from transpiler import script


@script(example=("make_example", "make_example_train"))
class ConvBNReLU(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1) -> None:
        super().__init__()
        padding = kernel_size // 2
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.bn(self.conv(x)))


def _make(training: bool) -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = ConvBNReLU(3, 16)
    # Non-trivial running statistics, so that eval mode does more than divide by sqrt(1 + eps).
    model.bn.running_mean.uniform_(-0.5, 0.5)
    model.bn.running_var.uniform_(0.5, 2.0)
    model.train(training)
    x = torch.randn(8, 3, 32, 32)
    return model, (x,)


def make_example() -> tuple[object, tuple]:
    return _make(training=False)


def make_example_train() -> tuple[object, tuple]:
    """Train mode: the outputs use batch statistics and the running-stat buffers change."""
    return _make(training=True)

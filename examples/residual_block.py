"""A ResNet basic block (in-place ReLU, `out += identity`, optional downsample), stacked twice."""
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@script
class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample: Optional[nn.Module] = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: Tensor) -> Tensor:
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            identity = self.downsample(x)

        out += identity
        out = self.relu(out)
        return out


@script(example="make_example")
class ResNetStage(nn.Module):
    """Two blocks: the first downsamples (downsample is a Sequential), the second does not (None)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.block1 = BasicBlock(in_channels, out_channels, stride=2)
        self.block2 = BasicBlock(out_channels, out_channels)

    def forward(self, x: Tensor) -> Tensor:
        return self.block2(self.block1(x))


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = ResNetStage(16, 32)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    model.eval()
    x = torch.randn(8, 16, 16, 16)
    return model, (x,)

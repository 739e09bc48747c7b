"""A small UNet, written with lists of skips and a ModuleList of stages."""
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


class DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


@script(example="make_example")
class UNet(nn.Module):
    def __init__(self, cin: int = 3, classes: int = 2, widths: List[int] = [16, 32, 64]) -> None:
        super().__init__()
        self.downs = nn.ModuleList()
        c = cin
        for w in widths:
            self.downs.append(DoubleConv(c, w))
            c = w
        self.bottleneck = DoubleConv(widths[-1], widths[-1] * 2)
        self.ups = nn.ModuleList()
        self.convs = nn.ModuleList()
        c = widths[-1] * 2
        for w in reversed(widths):
            self.ups.append(nn.ConvTranspose2d(c, w, 2, stride=2))
            self.convs.append(DoubleConv(2 * w, w))
            c = w
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: Tensor) -> Tensor:
        skips: List[Tensor] = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottleneck(x)
        skips = skips[::-1]
        for i, (up, conv) in enumerate(zip(self.ups, self.convs)):
            x = up(x)
            skip = skips[i]
            if x.shape[-2:] != skip.shape[-2:]:
                x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = conv(torch.cat([skip, x], dim=1))
        return torch.sigmoid(self.head(x))


def make_example():
    torch.manual_seed(0)
    model = UNet().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    return model, (torch.randn(2, 3, 64, 64),)

"""Convolutional building blocks in the styles of image-model repositories."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BN_MOMENTUM = 0.1
ACTIVATIONS = {"relu": nn.ReLU, "silu": nn.SiLU}


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNAct(nn.Sequential):
    """A Sequential subclass: its forward is Sequential's."""

    def __init__(self, cin, cout, k=3, stride=1, act="relu"):
        super().__init__(
            nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
            nn.BatchNorm2d(cout, momentum=BN_MOMENTUM),
            ACTIVATIONS[act](),
        )


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class SqueezeExcite(nn.Module):
    def __init__(self, channels, reduction=4):
        super().__init__()
        hidden = make_divisible(channels // reduction)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, hidden, 1)
        self.fc2 = nn.Conv2d(hidden, channels, 1)

    def forward(self, x):
        s = self.pool(x)
        s = F.relu(self.fc1(s))
        return x * torch.sigmoid(self.fc2(s))


class HSwish(nn.Module):
    """A layer whose forward is a staticmethod."""

    @staticmethod
    def forward(x):
        return x * F.relu6(x + 3.0) / 6.0


class MobileBlock(nn.Module):
    def __init__(self, cin, cout, expand=2):
        super().__init__()
        mid = cin * expand
        self.expand = ConvBNAct(cin, mid, 1)
        self.dw = nn.Conv2d(mid, mid, 3, 1, 1, groups=mid, bias=False)
        self.bn = nn.BatchNorm2d(mid)
        self.act = HSwish()
        self.se = SqueezeExcite(mid)
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.use_res = cin == cout

    def forward(self, x):
        y = self.act(self.bn(self.dw(self.expand(x))))
        y = self.project(self.se(y))
        if self.use_res:
            y = y + x
        return y


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(ConvBNAct(cin, cout), ConvBNAct(cout, cout))


class UNetUp(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.conv = DoubleConv(cin + cout, cout)

    def forward(self, x, skip):
        x = self.up(x)
        dy = skip.size(2) - x.size(2)
        dx = skip.size(3) - x.size(3)
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


class ChannelAttention(nn.Module):
    def __init__(self, channels, ratio=4):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(channels, channels // ratio, 1, bias=False), nn.ReLU(),
                                 nn.Conv2d(channels // ratio, channels, 1, bias=False))

    def forward(self, x):
        avg = self.mlp(F.adaptive_avg_pool2d(x, 1))
        mx = self.mlp(F.adaptive_max_pool2d(x, 1))
        return torch.sigmoid(avg + mx)


class SpatialAttention(nn.Module):
    def __init__(self, kernel_size=7):
        super().__init__()
        self.conv = nn.Conv2d(2, 1, kernel_size, padding=kernel_size // 2, bias=False)

    def forward(self, x):
        avg = torch.mean(x, dim=1, keepdim=True)
        mx, _ = torch.max(x, dim=1, keepdim=True)
        return torch.sigmoid(self.conv(torch.cat([avg, mx], dim=1)))


class CBAM(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.ca = ChannelAttention(channels)
        self.sa = SpatialAttention()

    def forward(self, x):
        x = x * self.ca(x)
        return x * self.sa(x)


class GhostModule(nn.Module):
    def __init__(self, cin, cout, ratio=2):
        super().__init__()
        self.cout = cout
        init = math.ceil(cout / ratio)
        self.primary = nn.Sequential(nn.Conv2d(cin, init, 1, bias=False), nn.BatchNorm2d(init), nn.ReLU(inplace=True))
        self.cheap = nn.Sequential(nn.Conv2d(init, init * (ratio - 1), 3, 1, 1, groups=init, bias=False),
                                   nn.BatchNorm2d(init * (ratio - 1)), nn.ReLU(inplace=True))

    def forward(self, x):
        x1 = self.primary(x)
        x2 = self.cheap(x1)
        out = torch.cat([x1, x2], dim=1)
        return out[:, : self.cout, :, :]


class PixelNorm(nn.Module):
    """GAN code: a numpy constant and an epsilon at module level."""

    def __init__(self):
        super().__init__()
        self.eps = np.float32(1e-8).item()

    def forward(self, x):
        return x * torch.rsqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)


class EqualConv2d(nn.Module):
    def __init__(self, cin, cout, k, padding=0):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(cout, cin, k, k))
        self.bias = nn.Parameter(torch.zeros(cout))
        self.scale = 1 / np.sqrt(cin * k * k)
        self.padding = padding

    def forward(self, x):
        return F.conv2d(x, self.weight * self.scale, self.bias, padding=self.padding)


class TinyClassifier(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(ConvBNAct(3, 8, stride=2), MobileBlock(8, 8), ConvBNAct(8, 16, stride=2))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(16, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(self.pool(x), 1)
        return self.classifier(x)


class RunningStats(nn.Module):
    """A buffer updated in forward (training-time statistics, as normalisers keep)."""

    def __init__(self, channels, momentum=0.1):
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(channels))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        batch_mean = x.mean(dim=(0, 2, 3))
        self.mean.mul_(1 - self.momentum).add_(batch_mean * self.momentum)
        self.count += 1
        return x - self.mean.view(1, -1, 1, 1)


def _image(c=3, s=16, n=2):
    return torch.randn(n, c, s, s)


def _eval(m):
    return m.eval()


CASES = [
    ("Sequential", lambda: (_eval(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3))),
                            (_image(),))),
    ("ConvBNAct", lambda: (_eval(ConvBNAct(3, 8, stride=2, act="silu")), (_image(),))),
    ("BasicBlock", lambda: (_eval(BasicBlock(4, 8, stride=2)), (_image(4),))),
    ("BasicBlockTrain", lambda: (BasicBlock(4, 4).train(), (_image(4),))),
    ("SqueezeExcite", lambda: (_eval(SqueezeExcite(16)), (_image(16, 8),))),
    ("HSwish", lambda: (_eval(HSwish()), (_image(),))),
    ("MobileBlock", lambda: (_eval(MobileBlock(8, 8)), (_image(8, 8),))),
    ("UNetUp", lambda: (_eval(UNetUp(8, 4)), (_image(8, 4), _image(4, 9)))),
    ("CBAM", lambda: (_eval(CBAM(8)), (_image(8, 8),))),
    ("GhostModule", lambda: (_eval(GhostModule(4, 7)), (_image(4, 8),))),
    ("PixelNorm", lambda: (_eval(PixelNorm()), (_image(),))),
    ("EqualConv2d", lambda: (_eval(EqualConv2d(3, 4, 3, padding=1)), (_image(),))),
    ("TinyClassifier", lambda: (_eval(TinyClassifier()), (_image(s=32),))),
    ("RunningStats", lambda: (RunningStats(3), (_image(),))),
]

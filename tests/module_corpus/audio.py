"""Sequence and audio models: weight_norm'd Conv1d stacks, causal convolutions, gated units, the
constants and numpy helpers such files keep at module level."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm

LRELU_SLOPE = 0.1
SAMPLE_RATE = 16000
HOP = 4


def get_padding(kernel_size, dilation=1):
    return int((kernel_size * dilation - dilation) / 2)


def hann(n):
    return torch.from_numpy(np.hanning(n).astype(np.float32))


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    """A TCN block: weight_norm'd causal convolutions (hooked submodules)."""

    def __init__(self, n_inputs, n_outputs, kernel_size, dilation, dropout=0.2):
        super(TemporalBlock, self).__init__()
        padding = (kernel_size - 1) * dilation
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, nn.ReLU(), nn.Dropout(dropout))
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2):
        super().__init__()
        layers = []
        for i, out in enumerate(num_channels):
            cin = num_inputs if i == 0 else num_channels[i - 1]
            layers += [TemporalBlock(cin, out, kernel_size, dilation=2 ** i)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class ResBlock1(nn.Module):
    """A vocoder residual block: weight_norm'd convs in ModuleLists, leaky ReLU slope at module level."""

    def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
        super().__init__()
        self.convs1 = nn.ModuleList([
            weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=d, padding=get_padding(kernel_size, d)))
            for d in dilation
        ])
        self.convs2 = nn.ModuleList([
            weight_norm(nn.Conv1d(channels, channels, kernel_size, 1, dilation=1, padding=get_padding(kernel_size, 1)))
            for _ in dilation
        ])

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c1(xt)
            xt = F.leaky_relu(xt, LRELU_SLOPE)
            xt = c2(xt)
            x = xt + x
        return x


class GatedConv(nn.Module):
    def __init__(self, channels, kernel_size=3, dilation=1):
        super().__init__()
        self.conv = nn.Conv1d(channels, 2 * channels, kernel_size, padding=dilation * (kernel_size - 1) // 2,
                              dilation=dilation)
        self.res = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        h = torch.tanh(a) * torch.sigmoid(b)
        return (x + self.res(h)) * math.sqrt(0.5), h


class WaveNetStack(nn.Module):
    def __init__(self, channels=8, layers=3):
        super().__init__()
        self.layers = nn.ModuleList([GatedConv(channels, dilation=2 ** i) for i in range(layers)])
        self.out = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        skips = 0
        for layer in self.layers:
            x, h = layer(x)
            skips = skips + h
        return self.out(F.relu(skips)), x


class SubsampledEncoder(nn.Module):
    """Conv subsampling then a GRU-free projection; the frame count is computed with a helper."""

    def __init__(self, idim, odim):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, odim, 3, 2), nn.ReLU(), nn.Conv2d(odim, odim, 3, 2), nn.ReLU())
        self.out = nn.Linear(odim * (((idim - 1) // 2 - 1) // 2), odim)

    def forward(self, x):
        x = self.conv(x.unsqueeze(1))
        b, c, t, f = x.size()
        return self.out(x.transpose(1, 2).contiguous().view(b, t, c * f))


class Windowed(nn.Module):
    """A window made with numpy at module level, applied each call."""

    def __init__(self, n=16):
        super().__init__()
        self.register_buffer("window", hann(n))

    def forward(self, frames):
        return frames * self.window * float(SAMPLE_RATE) / 16000.0


class SnakeActivation(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x):
        return x + (1.0 / (self.alpha + 1e-9)) * torch.sin(self.alpha * x) ** 2


class PreNet(nn.Module):
    """Tacotron's prenet: dropout kept on at inference (F.dropout with training=True) would
    differ from eager's random numbers, so here in eval it is off."""

    def __init__(self, idim, sizes=(16, 8)):
        super().__init__()
        dims = [idim] + list(sizes[:-1])
        self.layers = nn.ModuleList([nn.Linear(i, o, bias=False) for i, o in zip(dims, sizes)])

    def forward(self, x):
        for linear in self.layers:
            x = F.dropout(F.relu(linear(x)), p=0.5, training=self.training)
        return x


def _wave(c=4, t=20, n=2):
    return torch.randn(n, c, t)


CASES = [
    ("TemporalBlock", lambda: (TemporalBlock(4, 8, 3, dilation=2).eval(), (_wave(),))),
    ("TemporalConvNet", lambda: (TemporalConvNet(4, [6, 6]).eval(), (_wave(),))),
    ("ResBlock1", lambda: (ResBlock1(4).eval(), (_wave(),))),
    ("WaveNetStack", lambda: (WaveNetStack().eval(), (_wave(8),))),
    ("SubsampledEncoder", lambda: (SubsampledEncoder(16, 8).eval(), (torch.randn(2, 20, 16),))),
    ("Windowed", lambda: (Windowed().eval(), (torch.randn(2, 5, 16),))),
    ("Snake", lambda: (SnakeActivation(4).eval(), (_wave(),))),
    ("PreNet", lambda: (PreNet(12).eval(), (torch.randn(2, 7, 12),))),
    ("Chomp1d", lambda: (Chomp1d(2).eval(), (_wave(),))),
]

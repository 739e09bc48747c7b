"""A WaveNet-style stack of dilated causal 1-d convolutions with gated activations, residual and
skip connections; the skip sum starts from the integer 0."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


class GatedLayer(nn.Module):
    def __init__(self, channels: int, dilation: int, kernel_size: int = 2) -> None:
        super().__init__()
        self.pad = (kernel_size - 1) * dilation
        self.conv = nn.Conv1d(channels, 2 * channels, kernel_size, dilation=dilation)
        self.res = nn.Conv1d(channels, channels, 1)
        self.skip = nn.Conv1d(channels, channels, 1)

    def forward(self, x: Tensor):
        h = self.conv(F.pad(x, (self.pad, 0)))
        filt, gate = h.chunk(2, dim=1)
        h = torch.tanh(filt) * torch.sigmoid(gate)
        return x + self.res(h), self.skip(h)


@script(example="make_example")
class WaveNet(nn.Module):
    def __init__(self, channels: int = 32, blocks: int = 2, depth: int = 4, classes: int = 16) -> None:
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 1)
        self.layers = nn.ModuleList(
            [GatedLayer(channels, 2 ** i) for _ in range(blocks) for i in range(depth)]
        )
        self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(channels, channels, 1), nn.ReLU(),
                                 nn.Conv1d(channels, classes, 1))

    def forward(self, audio: Tensor) -> Tensor:
        x = self.inp(audio.unsqueeze(1))
        skip = 0
        for layer in self.layers:
            x, s = layer(x)
            skip = skip + s
        return F.log_softmax(self.out(skip), dim=1)


def make_example():
    torch.manual_seed(0)
    return WaveNet().eval(), (torch.randn(2, 400),)

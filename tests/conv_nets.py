"""Conv nets written as source text for the compiled-against-eager tests (tests/test_layout.py,
tests/test_freeze.py): `net_source(steps, c)` is a module whose `Net` has one layer per step,
`c` channels throughout, and returns the last value and its pooled features."""

from __future__ import annotations

import textwrap

LAYERS = {
    "conv": "nn.Conv2d({c}, {c}, 3, padding=1, bias={bias})",
    "pointwise": "nn.Conv2d({c}, {c}, 1, bias={bias})",
    "over_channels": "OverChannels({c})",
    "expand": "nn.Sequential(nn.Conv2d({c}, {c} * 3, 1, bias={bias}), nn.ReLU(), nn.Conv2d({c} * 3, {c}, 1))",
    "depthwise": "nn.Conv2d({c}, {c}, 3, padding=1, groups={c}, bias={bias})",
    "grouped": "nn.Conv2d({c}, {c}, 3, padding=1, groups=2, bias={bias})",
    "bn": "nn.BatchNorm2d({c})",
    "relu": "nn.ReLU()",
    "hardswish": "nn.Hardswish()",
    "pool": "nn.MaxPool2d(3, stride=1, padding=1)",
}
STEPS = {  # what forward does with the layer (`y`: the running value, `x`: the input)
    "layer": "y = self.l{i}(y)",
    "residual": "y = self.l{i}(y) + y",
    "gate": "y = y * torch.sigmoid(F.adaptive_avg_pool2d(self.l{i}(y), 1))",
    # squeeze-and-excitation: the layer on the pooled channels
    "squeeze": "y = y * torch.sigmoid(self.l{i}(F.adaptive_avg_pool2d(torch.relu(y), (1, 1))))",
    "concat": "y = torch.cat([self.l{i}(y), x], 1)[:, :{c}]",
    "fire": "y = torch.cat([torch.relu(self.l{i}(y)[:, :{h}] * 2.0), torch.tanh(y[:, {h}:] + 1.0)], 1)",
    "view": "y = self.l{i}(y).view(y.size(0), {c}, -1).transpose(1, 2).reshape(y.shape)",
    # ShuffleNet's: a cat of two halves shuffled, and the shuffle's halves
    "shuffle": "a, b = self.l{i}(y).chunk(2, dim=1); y = channel_shuffle(torch.cat([torch.relu(b), a], 1), 2)",
    "unit": "a, b = y.chunk(2, dim=1); y = self.l{i}(channel_shuffle(torch.cat([a, torch.tanh(b) * 2.0], 1), 2))",
    "shuffle4": "y = channel_shuffle(self.l{i}(y), 4)",
}


def net_source(steps: list[tuple[str, str, bool]], c: int) -> str:
    layers = "\n".join(f"        self.l{i} = {LAYERS[layer].format(c=c, bias=bias)}"
                       for i, (layer, _, bias) in enumerate(steps))
    body = "\n".join("        " + STEPS[step].format(i=i, c=c, h=c // 2) for i, (_, step, _) in enumerate(steps))
    return textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        from torch import nn


        def channel_shuffle(x, groups: int):
            n, c, h, w = x.size()
            x = x.view(n, groups, c // groups, h, w)
            x = torch.transpose(x, 1, 2).contiguous()
            return x.view(n, c, h, w)


        class OverChannels(nn.Module):  # convnext's block: linear over the channels of NHWC rows
            def __init__(self, c):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.scale = nn.Parameter(torch.full((c, 1, 1), 0.5))

            def forward(self, x):
                return self.scale * self.fc(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
        {layers}

            def forward(self, x):
                y = x
        {body}
                return y, torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)
        """).format(layers=layers, body=body)

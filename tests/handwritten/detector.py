"""A tiny anchor-free detector head: a conv trunk, per-cell class scores and box offsets decoded
against a grid made with meshgrid, then the top-k scoring cells gathered."""
from typing import Dict

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


def conv_bn(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU(inplace=True))


@script(example="make_example")
class Detector(nn.Module):
    def __init__(self, classes: int = 5, width: int = 16, k: int = 10) -> None:
        super().__init__()
        self.trunk = nn.Sequential(conv_bn(3, width, 2), conv_bn(width, width * 2, 2), conv_bn(width * 2, width * 2))
        self.cls = nn.Conv2d(width * 2, classes, 1)
        self.box = nn.Conv2d(width * 2, 4, 1)
        self.k = k
        self.stride = 4

    def forward(self, images: Tensor) -> Dict[str, Tensor]:
        feats = self.trunk(images)
        n, _, h, w = feats.shape
        scores = self.cls(feats).sigmoid().flatten(2)          # n, classes, h*w
        offsets = self.box(feats).flatten(2).transpose(1, 2)   # n, h*w, 4
        ys, xs = torch.meshgrid(torch.arange(h, device=images.device), torch.arange(w, device=images.device), indexing="ij")
        centers = torch.stack([xs, ys], dim=-1).reshape(1, h * w, 2).to(feats.dtype) * self.stride + self.stride / 2
        lt = centers - F.relu(offsets[..., :2]) * self.stride
        rb = centers + F.relu(offsets[..., 2:]) * self.stride
        boxes = torch.cat([lt, rb], dim=-1)
        best, labels = scores.max(dim=1)                       # n, h*w
        top, idx = best.topk(self.k, dim=1)
        picked = boxes.gather(1, idx.unsqueeze(-1).expand(n, self.k, 4))
        return {"boxes": picked, "scores": top, "labels": labels.gather(1, idx)}


def make_example():
    torch.manual_seed(0)
    return Detector().eval(), (torch.randn(2, 3, 64, 64),)

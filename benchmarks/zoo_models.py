"""The real-model corpus (issue 7): torchvision's classification models and
nn.TransformerEncoderLayer, in eval mode with random weights. Used by the opt-in test suite
(tests/corpus/) and benchmark (benchmarks/zoo.py); both run in the corpus virtualenv
(`make corpus`), which has torchvision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[int], tuple]  # batch size -> example inputs
    # Documented tolerance against eager (float32): the compiled code fuses and reorders
    # float operations (batch norm folded into one multiply-add, a different GELU or softmax
    # evaluation order), so results agree to rounding, scaled by the output's magnitude.
    rtol: float = 1e-4
    atol: float = 1e-4


def _vision(name: str, size: int = 224, **kwargs: Any) -> ZooModel:
    def build() -> nn.Module:
        import torchvision.models as tvm

        torch.manual_seed(0)
        return getattr(tvm, name)(**kwargs).eval()

    return ZooModel(name, build, lambda batch: (torch.randn(batch, 3, size, size),))


def _encoder(mask: bool) -> ZooModel:
    def build() -> nn.Module:
        torch.manual_seed(0)
        return nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True).eval()

    def inputs(batch: int) -> tuple:
        x = torch.randn(batch, 64, 256)
        if not mask:
            return (x,)
        padding = torch.zeros(batch, 64, dtype=torch.bool)
        padding[:, 48:] = True  # the last 16 positions of every sequence are padding
        return (x, None, padding)

    return ZooModel("encoder_layer_mask" if mask else "encoder_layer", build, inputs)


MODELS: list[ZooModel] = [
    _vision("resnet18"),
    _vision("resnet50"),
    _vision("mobilenet_v2"),
    _vision("mobilenet_v3_small"),
    _vision("efficientnet_b0"),
    _vision("squeezenet1_1"),
    _vision("shufflenet_v2_x1_0"),
    _vision("regnet_y_400mf"),
    _vision("densenet121"),
    _vision("convnext_tiny"),
    _vision("vit_b_16"),
    _vision("swin_t"),
    _encoder(mask=False),
    _encoder(mask=True),
]

BY_NAME = {m.name: m for m in MODELS}


def make(name: str, batch: str = "1") -> tuple[nn.Module, tuple]:
    """(model, inputs) for benchmarks/first_call.py: `benchmarks.zoo_models:make:resnet18:1`."""
    model = BY_NAME[name]
    return model.build(), model.inputs(int(batch))

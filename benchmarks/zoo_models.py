"""The real-model corpus (issue 7): torchvision's classification models and
nn.TransformerEncoderLayer, in eval mode with random weights. Used by the opt-in test suite
(tests/corpus/) and benchmark (benchmarks/zoo.py); both run in the corpus virtualenv
(`make corpus`), which has torchvision. The batch norms' running statistics are calibrated on
random inputs (`calibrate_batch_norm`), so that activations and outputs are of order one."""

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
    classifier: bool = False  # (batch, classes) logits: trained with cross-entropy (zoo.py --train)


def calibrate_batch_norm(model: nn.Module, inputs: Callable[[int], tuple]) -> nn.Module:
    """Give the batch norms running statistics of the activations they see, as training would:
    with their initial ones (mean 0, variance 1) a random network's activations shrink layer by
    layer (efficientnet_b0's outputs were ~1e-14), and a comparison with eager then passes
    whatever the compiled code computes."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(*inputs(4))
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    return model


def fill_zero_weights(model: nn.Module) -> nn.Module:
    """Random values for the weight matrices a model initialises to zero (ViT's classifier
    head): a zero layer makes the output zero whatever comes before it."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                nn.init.normal_(p, std=0.02)
    return model


def mismatch(model: ZooModel, expected: Any, actual: Any) -> str | None:
    """Why `actual` (compiled) does not match `expected` (eager) within the model's tolerance,
    or None. An output too small for the tolerance to tell anything apart is a failure too."""
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.dtype != expected.dtype:
        return "different output"
    scale = expected.abs().max().item()
    if scale < 100 * model.atol:
        return f"eager's output is too small to compare (max |y| {scale:.1e})"
    if torch.allclose(actual, expected, rtol=model.rtol, atol=model.atol * max(1.0, scale)):
        return None
    return f"max |diff| {(actual - expected).abs().max().item():.2e} (max |y| {scale:.2e})"


def _vision(name: str, size: int = 224, **kwargs: Any) -> ZooModel:
    def inputs(batch: int) -> tuple:
        return (torch.randn(batch, 3, size, size),)

    def build() -> nn.Module:
        import torchvision.models as tvm

        torch.manual_seed(0)
        return calibrate_batch_norm(fill_zero_weights(getattr(tvm, name)(**kwargs)), inputs).eval()

    return ZooModel(name, build, inputs, classifier=True)


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

"""The second real-model corpus (issue 48): timm, a model library nobody tuned the compiler for.
Models are picked by family (convnets, vision transformers, hybrids, MLP models), small variants
so that a run stays within minutes, with random weights and calibrated batch norms as in
benchmarks/zoo_models.py. Used by tests/corpus/test_timm.py and `python -m benchmarks.zoo
--corpus timm`; both run in the corpus virtualenv (`make corpus`), which has timm."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchmarks.zoo_models import ZooModel, calibrate_batch_norm, fill_zero_weights

# (family, timm model name)
FAMILIES: tuple[tuple[str, str], ...] = (
    ("convnet", "resnet18"),
    ("convnet", "resnet50d"),
    ("convnet", "regnety_002"),
    ("convnet", "efficientnet_b0"),
    ("convnet", "mobilenetv3_small_100"),
    ("convnet", "ghostnet_100"),
    ("convnet", "mixnet_s"),
    ("convnet", "rexnet_100"),
    ("convnet", "convnext_atto"),
    ("convnet", "convnextv2_atto"),
    ("convnet", "densenet121"),
    ("convnet", "dla34"),
    ("convnet", "dpn68"),
    ("convnet", "hrnet_w18_small"),
    ("convnet", "inception_v3"),
    ("convnet", "vgg11"),
    ("convnet", "xception41"),
    ("convnet", "repvgg_a0"),
    ("convnet", "cspresnet50"),
    ("convnet", "res2net50_26w_4s"),
    ("vit", "deit_tiny_patch16_224"),
    ("vit", "vit_tiny_patch16_224"),
    ("vit", "swin_tiny_patch4_window7_224"),
    ("vit", "cait_xxs24_224"),
    ("vit", "levit_128s"),
    ("vit", "crossvit_tiny_240"),
    ("vit", "pvt_v2_b0"),
    ("vit", "twins_svt_small"),
    ("vit", "tnt_s_patch16_224"),
    ("hybrid", "coat_lite_tiny"),
    ("hybrid", "mobilevit_xxs"),
    ("hybrid", "efficientformer_l1"),
    ("hybrid", "edgenext_xx_small"),
    ("hybrid", "fastvit_t8"),
    ("hybrid", "maxvit_nano_rw_256"),
    ("hybrid", "poolformer_s12"),
    ("mlp", "mixer_s16_224"),
    ("mlp", "resmlp_12_224"),
    ("mlp", "gmlp_ti16_224"),
)


def _timm(name: str) -> ZooModel:
    def input_size() -> tuple[int, ...]:
        import timm

        return tuple(timm.get_pretrained_cfg(name).to_dict().get("input_size", (3, 224, 224)))

    def inputs(batch: int) -> tuple:
        return (torch.randn(batch, *input_size()),)

    def build() -> nn.Module:
        import timm

        torch.manual_seed(0)
        model: Any = timm.create_model(name, pretrained=False)
        return calibrate_batch_norm(fill_zero_weights(model), inputs).eval()

    # Deeper networks than the torchvision zoo's (cait: 24 blocks), so rounding differences
    # from fused, reordered float math grow more on the way to the output.
    return ZooModel(name, build, inputs, rtol=1e-3, atol=1e-3)


MODELS: list[ZooModel] = [_timm(name) for _, name in FAMILIES]
FAMILY = dict((name, family) for family, name in FAMILIES)
BY_NAME = {m.name: m for m in MODELS}


def make(name: str, batch: str = "1") -> tuple[nn.Module, tuple]:
    """(model, inputs) for benchmarks/first_call.py: `benchmarks.timm_models:make:resnet18:1`."""
    model = BY_NAME[name]
    return model.build(), model.inputs(int(batch))

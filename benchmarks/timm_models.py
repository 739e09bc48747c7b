"""The timm corpus (issue 48): models of a library nobody tuned the compiler for, a sample across
its families (convnets, vision transformers, hybrids of the two, MLP models), each a small
variant at the input size of its pretrained configuration, with random weights in eval mode.
Used by tests/corpus/test_timm.py and `python -m benchmarks.zoo --corpus timm`; needs timm (the corpus virtualenv, `make corpus`). The batch
norms are calibrated on random inputs as the torchvision zoo's are (benchmarks/zoo_models.py),
so that outputs are of order one."""

from __future__ import annotations

import torch
from torch import nn

from benchmarks.zoo_models import ZooModel, calibrate_batch_norm, fill_zero_weights

# (name, family, input size), grouped by family.
TABLE: list[tuple[str, str, int]] = [
    # convolutional networks
    ("resnet18", "convnet", 224),
    ("resnet50d", "convnet", 224),
    ("res2net50_26w_4s", "convnet", 224),
    ("cspresnet50", "convnet", 256),
    ("regnety_002", "convnet", 224),
    ("efficientnet_b0", "convnet", 224),
    ("mixnet_s", "convnet", 224),
    ("mobilenetv3_small_100", "convnet", 224),
    ("ghostnet_100", "convnet", 224),
    ("rexnet_100", "convnet", 224),
    ("repvgg_a0", "convnet", 224),
    ("densenet121", "convnet", 224),
    ("dla34", "convnet", 224),
    ("dpn68", "convnet", 224),
    ("hrnet_w18_small", "convnet", 224),
    ("inception_v3", "convnet", 299),
    ("xception41", "convnet", 299),
    ("convnext_atto", "convnet", 224),
    ("convnextv2_atto", "convnet", 224),
    # vision transformers
    ("vit_tiny_patch16_224", "vit", 224),
    ("deit_tiny_patch16_224", "vit", 224),
    ("cait_xxs24_224", "vit", 224),
    ("swin_tiny_patch4_window7_224", "vit", 224),
    ("crossvit_tiny_240", "vit", 240),
    ("pvt_v2_b0", "vit", 224),
    ("twins_svt_small", "vit", 224),
    ("tnt_s_patch16_224", "vit", 224),
    # hybrids: convolutions and attention (or pooling as the token mixer)
    ("levit_128s", "hybrid", 224),
    ("efficientformer_l1", "hybrid", 224),
    ("coat_lite_tiny", "hybrid", 224),
    ("maxvit_nano_rw_256", "hybrid", 256),
    ("mobilevit_xxs", "hybrid", 256),
    ("edgenext_xx_small", "hybrid", 256),
    ("fastvit_t8", "hybrid", 256),
    ("poolformer_s12", "hybrid", 224),
    # MLP models
    ("mixer_s16_224", "mlp", 224),
    ("resmlp_12_224", "mlp", 224),
    ("gmlp_ti16_224", "mlp", 224),
]


def _timm(name: str, size: int) -> ZooModel:
    def inputs(batch: int) -> tuple:
        return (torch.randn(batch, 3, size, size),)

    def build() -> nn.Module:
        import timm

        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False)
        return calibrate_batch_norm(fill_zero_weights(model), inputs).eval()

    return ZooModel(name, build, inputs)


MODELS: list[ZooModel] = [_timm(name, size) for name, _, size in TABLE]
FAMILY = {name: family for name, family, _ in TABLE}
BY_NAME = {m.name: m for m in MODELS}


def make(name: str, batch: str = "1") -> tuple[nn.Module, tuple]:
    """(model, inputs) for benchmarks/first_call.py: `benchmarks.timm_models:make:resnet18:1`."""
    model = BY_NAME[name]
    return model.build(), model.inputs(int(batch))

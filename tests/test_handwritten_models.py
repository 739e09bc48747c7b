"""Models written the way their authors write them (tests/handwritten/: a causal transformer
block, a Llama-style block, a UNet, a small ViT, a GRU tagger with a time loop, a text classifier,
a mixture of experts, a WaveNet-style stack, a detector head, a gated MLP-mixer, an FNet-style
recurrent model, a decoder configured by a dataclass, a small GPT whose blocks sit in an
nn.ModuleDict called by attribute, a diffusion-style denoiser with a timestep embedding), none of them tuned for the compiler: each
compiles ahead of time with its example factory, its checked-in module holds kernels, and in
strict mode (no fallback to eager) it computes eager's results at the example's batch and at
another."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case

MODELS = Path(__file__).parent / "handwritten"
NAMES = sorted(p.stem for p in MODELS.glob("*.py"))


def _other_batch(value: object) -> object:
    """An input like `value` with a batch of 3."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = (3, *value.shape[1:])
    if value.dtype.is_floating_point:
        return torch.randn(shape, dtype=value.dtype)
    return torch.randint(1, int(value.max()) + 1, shape, dtype=value.dtype)


def _same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_a_model_written_by_hand_compiles_and_matches_eager(tmp_path: Path, name: str) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, f"hand_{name}", (MODELS / f"{name}.py").read_text())
        assert "_lib." in text, "no kernel in the checked-in module"
        model, inputs = module.make_example()
        torch.manual_seed(1)
        for args in (tuple(inputs), tuple(_other_batch(v) for v in inputs)):
            with torch.no_grad():
                with runtime.mode("strict"):
                    got = model(*args)
                with runtime.mode("off"):
                    want = model(*args)
            _same(got, want)

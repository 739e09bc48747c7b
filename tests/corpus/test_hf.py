"""The Hugging Face transformers corpus, opt-in (`make corpus`; issue 8 point 3): each model compiles
with script(model, example_inputs=..., permissive=True) without changing its source and matches
eager, every tensor of its output (a ModelOutput dataclass) within the model's documented tolerance,
at the batch size it was compiled for and at another. The compiled module runs in strict mode, so a
fallback to eager (an entry check that fails) is an error, not a silent pass. Needs transformers: run
in the corpus virtualenv.

The eager side (builders, inputs, the output comparison) is checked in test_hf_eager.py; how much of
each model runs in generated kernels is measured by benchmarks/hf_bench.py."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

import runtime
from benchmarks.hf_models import MODELS, HFModel, compare_outputs
from transpiler import script

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_matches_eager(model: HFModel) -> None:
    eager = model.build()
    with torch.no_grad():
        # Compiled at batch 2, as test_zoo does (a batch of 1 is a size-1 dimension, which a
        # compiler may take for a broadcast), and checked at 2 and 3 (the batch is symbolic).
        compiled = script(eager, example_inputs=model.inputs(2), permissive=True)
        for batch in (2, 3):
            args = model.inputs(batch)
            expected = eager(*args)
            with runtime.mode("strict"):  # the compiled code runs (no entry check fails)
                actual = compiled(*args)
            compare_outputs(expected, actual, rtol=model.rtol, atol=model.atol)

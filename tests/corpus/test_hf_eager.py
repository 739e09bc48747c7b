"""The eager side of the Hugging Face corpus (benchmarks/hf_models.py), which test_hf.py compares
against: every builder makes the same model twice from its seed, runs on its example inputs at two
batch sizes without a download, uses the attention implementation the corpus documents, and
compare_outputs accepts eager against itself and rejects a changed output. Needs transformers: run in
the corpus virtualenv (`make corpus`)."""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("transformers")

from benchmarks.hf_models import ATTENTION, MODELS, HFModel, compare_outputs

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_eager_runs_and_is_deterministic(model: HFModel) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    first, second = model.build(), model.build()
    assert not first.training
    assert first.config._attn_implementation == ATTENTION
    with torch.no_grad():
        for batch in (1, 3):
            args = model.inputs(batch)
            assert compare_outputs(first(*args), second(*model.inputs(batch)), rtol=0, atol=0) >= 1


def test_compare_outputs_rejects_differences() -> None:
    model = MODELS[1]  # bert: two tensors in its output (last_hidden_state, pooler_output)
    eager = model.build()
    with torch.no_grad():
        out = eager(*model.inputs(2))
    assert compare_outputs(out, out) == 2
    with pytest.raises(AssertionError, match="structure"):
        compare_outputs(out, out.to_tuple())
    with pytest.raises(AssertionError, match="structure"):
        compare_outputs(out, (out[0],))
    changed = type(out)(
        last_hidden_state=out.last_hidden_state + 1e-2, pooler_output=out.pooler_output
    )
    with pytest.raises(AssertionError, match="last_hidden_state"):
        compare_outputs(out, changed)

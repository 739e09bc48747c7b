"""Training the real models compiled, opt-in (`make corpus`; issue 50): for every model of the
torchvision corpus (benchmarks/zoo_models.py) and, where timm is installed, of the timm sample
(benchmarks/timm_models.py), one training step of `script(model, example_inputs=...)` in
`train()` mode, in strict run mode (code for calls autograd records, never eager), moves every
parameter and buffer (batch norm's running statistics too) as eager's step does: the check the
training benchmark makes before timing (benchmarks/train_step.step_mismatch: within ten times the
rounding error of eager's float32 step, which eager's steps in float64 and on channels-last
tensors measure). Dropout draws the same masks from the same seed. Batch 2, the corpus's inputs.
Needs torchvision: run in the corpus virtualenv."""

from __future__ import annotations

import pytest

pytest.importorskip("torchvision")

from benchmarks import train_step  # noqa: E402
from benchmarks.zoo_models import MODELS, ZooModel  # noqa: E402

pytestmark = pytest.mark.corpus

try:
    from benchmarks.timm_models import MODELS as TIMM_MODELS
except ImportError:  # (timm not installed: the torchvision corpus alone)
    TIMM_MODELS = []

BATCH = 2


CASES = [pytest.param(m, id=f"torchvision-{m.name}") for m in MODELS] + \
    [pytest.param(m, id=f"timm-{m.name}") for m in TIMM_MODELS]


@pytest.mark.parametrize("model", CASES)
def test_a_training_step_matches_eager(model: ZooModel) -> None:
    loss = train_step.CrossEntropy() if model.classifier else train_step.MeanSquares()
    problem = train_step.step_mismatch(model.build(), model.inputs(BATCH), loss)
    assert problem is None, problem

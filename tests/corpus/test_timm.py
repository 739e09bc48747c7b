"""The timm corpus, opt-in (`make corpus`; issue 48): each model of benchmarks/timm_models.py
compiles with script(model, example_inputs=...) without changing its source, in strict mode
(nothing kept as Python), and runs in strict run mode (a fallback to eager is an error), matching
eager within the project's tolerance (benchmarks/zoo_models.mismatch) at batch 1, called under
torch.inference_mode() and under torch.no_grad(). A model that still fails for a reason not fixed
yet is an expected failure that says why (strict: a fix makes it pass, and the test fails until
it leaves the list). Needs timm: run in the corpus virtualenv."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("timm")

from benchmarks.timm_models import MODELS  # noqa: E402
from benchmarks.zoo_models import ZooModel, mismatch  # noqa: E402
import runtime  # noqa: E402
from transpiler import script  # noqa: E402

pytestmark = pytest.mark.corpus

# name -> why it does not compile or match yet
EXPECTED_FAILURES: dict[str, str] = {}


def _cases() -> list:
    return [pytest.param(m, id=m.name, marks=pytest.mark.xfail(strict=True, reason=EXPECTED_FAILURES[m.name]))
            if m.name in EXPECTED_FAILURES else pytest.param(m, id=m.name) for m in MODELS]


@pytest.mark.parametrize("model", _cases())
def test_matches_eager_in_strict_mode(model: ZooModel) -> None:
    eager = model.build()
    args = model.inputs(1)
    with torch.inference_mode():
        compiled = script(eager, example_inputs=args)
    for context in (torch.inference_mode, torch.no_grad):
        with context():
            expected = eager(*args)
            with runtime.mode("strict"):  # the compiled code runs (no entry check fails)
                problem = mismatch(model, expected, compiled(*args))
        assert problem is None, f"under {context.__name__}: {problem}"

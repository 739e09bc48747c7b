"""The timm corpus, opt-in (`make corpus`; issue 48): each model of benchmarks/timm_models.py
compiles with script(model, example_inputs=...) without changing its source, in strict mode
(nothing kept as Python) and in permissive mode, and runs in strict run mode (a fallback to eager
is an error), matching eager within the project's tolerance (benchmarks/zoo_models.mismatch),
compiled for and called at batch 1 and at batch 8. At batch 1 it is called under
torch.inference_mode() and under torch.no_grad(); at batch 8 under no_grad.

The full product (two modes, two batches) takes over two hours on two cores, so a plain run
takes strict and permissive at batch 1 and strict at batch 8; TORCHSCRIBE_CORPUS_FULL=1 adds
permissive at batch 8 (or select cases with -k, e.g. `-k "permissive and b8"`). A case that
still fails for a reason not fixed yet is an expected failure that says why (strict: a fix makes
it pass, and the test fails until it leaves the list). Needs timm: run in the corpus virtualenv."""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("timm")

from benchmarks.timm_models import MODELS  # noqa: E402
from benchmarks.zoo_models import ZooModel, mismatch  # noqa: E402
import runtime  # noqa: E402
from transpiler import script  # noqa: E402

pytestmark = pytest.mark.corpus

# (compile mode, batch) of a plain run; the full run's last case doubles the permissive time
RUNS = [("strict", 1), ("permissive", 1), ("strict", 8)]
if os.environ.get("TORCHSCRIBE_CORPUS_FULL") == "1":
    RUNS.append(("permissive", 8))

# case id ("strict-b1-resnet18") -> why it does not compile or match yet
EXPECTED_FAILURES: dict[str, str] = {}


def _cases() -> list:
    cases = []
    for mode, batch in RUNS:
        for m in MODELS:
            case = f"{mode}-b{batch}-{m.name}"
            why = EXPECTED_FAILURES.get(case)
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why is not None else []
            cases.append(pytest.param(m, mode, batch, id=case, marks=marks))
    return cases


@pytest.mark.parametrize(("model", "mode", "batch"), _cases())
def test_matches_eager(model: ZooModel, mode: str, batch: int) -> None:
    eager = model.build()
    args = model.inputs(batch)
    with torch.inference_mode():
        compiled = script(eager, example_inputs=args, permissive=mode == "permissive")
    # (the pair of contexts is issue 9's point; once, at batch 1, is enough)
    contexts = (torch.inference_mode, torch.no_grad) if batch == 1 else (torch.no_grad,)
    for context in contexts:
        with context():
            expected = eager(*args)
            with runtime.mode("strict"):  # the compiled code runs (no entry check fails)
                problem = mismatch(model, expected, compiled(*args))
        assert problem is None, f"under {context.__name__}: {problem}"

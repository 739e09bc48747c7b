"""Every example, compiled, computes exactly what eager computes, with the same side effects;
the committed compiled modules are fresh; generation is deterministic."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import runtime
from benchmarks.compare import compare, factories, observe, snapshot
from transpiler.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
STEMS = sorted(p.stem for p in EXAMPLES.glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled"))
CASES = [
    (stem, variant, factory)
    for stem in STEMS
    for variant, factory in factories(importlib.import_module(f"examples.{stem}"))
]


def run(factory, mode: str, context=torch.no_grad) -> dict:
    model, inputs = factory()
    with runtime.mode(mode), context():
        out = model(*inputs)
    return snapshot(observe(model, inputs, out))


def test_committed_modules_are_fresh() -> None:
    """`torchscribe --check examples` passes: what is committed is what the compiler writes."""
    assert cli_main(["--check", str(EXAMPLES)]) == 0


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode], ids=["no_grad", "inference_mode"])
@pytest.mark.parametrize("stem,variant,factory", CASES, ids=[f"{s}[{v}]" if v else s for s, v, _ in CASES])
def test_compiled_matches_eager(stem: str, variant: str, factory, context) -> None:
    eager = run(factory, "off", context)
    compiled = run(factory, "strict", context)
    # The compiled module calls the same torch ops in the same order: results are bitwise equal.
    result = compare(eager, compiled, atol=0.0, rtol=0.0)
    assert result.ok, f"{stem}[{variant}]: {result.mismatches}"


def test_compiled_code_really_runs() -> None:
    """Strict mode ran the compiled function, not eager: count calls through COMPILED."""
    runtime.dispatch.reset()
    from examples import rnn_cell, rnn_cell_compiled

    calls = []
    original = rnn_cell_compiled.COMPILED["MyCell.forward"]
    rnn_cell_compiled.COMPILED["MyCell.forward"] = lambda *a, **k: calls.append(1) or original(*a, **k)
    try:
        model, inputs = rnn_cell.make_example()
        with runtime.mode("strict"):
            model(*inputs)
    finally:
        rnn_cell_compiled.COMPILED["MyCell.forward"] = original
        runtime.dispatch.reset()
    assert calls == [1]


def test_generation_is_deterministic(tmp_path: Path) -> None:
    """Two runs under different hash seeds, from different directories, write identical bytes."""
    outputs = []
    for seed, cwd in (("0", ROOT), ("12345", tmp_path)):
        project = tmp_path / f"run{seed}"
        project.mkdir()
        (project / "pyproject.toml").write_text("")  # the header names paths relative to it
        work = project / "examples"
        subprocess.run(["cp", "-r", str(EXAMPLES), str(work)], check=True)
        for compiled in work.glob("*_compiled.py"):
            compiled.unlink()
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-m", "transpiler.cli", "-q", str(work)], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        outputs.append({p.name: p.read_bytes() for p in sorted(work.glob("*_compiled.py"))})
    assert outputs[0] == outputs[1]
    committed = {p.name: p.read_bytes() for p in sorted(EXAMPLES.glob("*_compiled.py"))}
    assert outputs[0] == committed


def test_a_branch_that_writes_nothing_copies_nothing() -> None:
    """In eval mode running_stats' buffers come out of the `if self.training` unchanged: the
    write-backs after it must not copy a buffer onto itself (a self copy bumps the version
    counter and costs a call per buffer)."""
    from examples import running_stats

    model, (x,) = running_stats.make_example_eval()
    versions = [b._version for b in model.buffers()]
    with runtime.mode("strict"), torch.no_grad():
        model(x)
    assert [b._version for b in model.buffers()] == versions

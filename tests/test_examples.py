"""Every example, compiled, computes exactly what eager computes, with the same side effects;
the committed compiled modules are fresh; generation is deterministic."""
from __future__ import annotations

import copy
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


def example_of(stem: str, factory) -> str | None:
    """The COMPILED key whose `@script(example=...)` names `factory`, or None."""
    module = importlib.import_module(f"examples.{stem}")
    for name, obj in vars(module).items():
        named = getattr(obj, "__torchscribe_options__", {}).get("example")
        if factory.__name__ in ((named,) if isinstance(named, str) else named or ()) \
                and getattr(obj, "__module__", None) == module.__name__:
            return f"{name}.forward" if isinstance(obj, type) else name
    return None


def test_committed_modules_are_fresh() -> None:
    """`torchscribe --check examples` passes: what is committed is what the compiler writes."""
    assert cli_main(["--check", str(EXAMPLES)]) == 0


def test_the_residual_blocks_module_is_at_most_three_times_its_source() -> None:
    """Issue 47's budget for a module a reviewer reads: its kernels, its generic code, its entry
    checks and its specialisation in at most 3x the source's lines (66 lines: 198)."""
    source = (EXAMPLES / "residual_block.py").read_text().splitlines()
    compiled = (EXAMPLES / "residual_block_compiled.py").read_text().splitlines()
    assert len(compiled) <= 3 * len(source), (len(compiled), len(source))


@pytest.mark.parametrize("context", [torch.no_grad, torch.inference_mode], ids=["no_grad", "inference_mode"])
@pytest.mark.parametrize("stem,variant,factory", CASES, ids=[f"{s}[{v}]" if v else s for s, v, _ in CASES])
def test_compiled_matches_eager(stem: str, variant: str, factory, context) -> None:
    """The committed module against eager, on values and side effects; the example a decorator
    names runs its specialisation (kernels), within the tolerance of fused float32 code."""
    runtime.dispatch.reset()
    eager = run(factory, "off", context)
    compiled = run(factory, "strict", context)
    result = compare(eager, compiled, atol=1e-5, rtol=1e-5)
    assert result.ok, f"{stem}[{variant}]: {result.mismatches}"
    if example_of(stem, factory) is not None:
        assert runtime.generic_counts() == {}, "a call of the decorator's own example ran the generic code"


@pytest.mark.parametrize("stem,variant,factory", CASES, ids=[f"{s}[{v}]" if v else s for s, v, _ in CASES])
def test_generic_code_matches_eager_exactly(stem: str, variant: str, factory) -> None:
    """The generic code of every entry (what a call the specialisations refuse runs) calls the
    same torch ops in the same order as eager: results are bitwise equal."""
    runtime.dispatch.reset()
    model, inputs = factory()
    eager = run(factory, "off")
    compiled_module = importlib.import_module(f"examples.{stem}_compiled")
    generic = {key: fns[-1] if isinstance(fns, tuple) else fns for key, fns in compiled_module.COMPILED.items()}
    key = f"{type(model).__name__}.forward" if isinstance(model, torch.nn.Module) else model.__name__
    with torch.no_grad():
        out = generic[key](model, *inputs) if isinstance(model, torch.nn.Module) else generic[key](*inputs)
    result = compare(eager, snapshot(observe(model, inputs, out)), atol=0.0, rtol=0.0)
    assert result.ok, f"{stem}[{variant}]: {result.mismatches}"


def test_a_call_the_specialisation_refuses_runs_the_generic_code() -> None:
    """Another batch size is still the specialisation (the batch is symbolic); another spatial
    size, or float64, runs the generic code, counted, never eager, and computes what eager does."""
    from examples import residual_block

    key = "examples.residual_block.ResNetStage.forward"
    runtime.dispatch.reset()
    model, (x,) = residual_block.make_example()
    calls = [(model, x[:3], 0), (model, x[:, :, :8, :8], 1), (copy.deepcopy(model).double(), x.double(), 2)]
    for m, arg, generic_calls in calls:
        with torch.no_grad():
            with runtime.mode("off"):
                expected = m(arg)
            with runtime.mode("strict"):
                got = m(arg)
        assert runtime.generic_counts().get(key, 0) == generic_calls
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    runtime.dispatch.reset()


def test_compiled_code_really_runs() -> None:
    """Strict mode ran the compiled function, not eager: count calls through COMPILED."""
    runtime.dispatch.reset()
    from examples import rnn_cell, rnn_cell_compiled

    calls = []
    original = rnn_cell_compiled.COMPILED["MyCell.forward"]
    specialised, *rest = original
    rnn_cell_compiled.COMPILED["MyCell.forward"] = (lambda *a, **k: calls.append(1) or specialised(*a, **k), *rest)
    try:
        model, inputs = rnn_cell.make_example()
        with runtime.mode("strict"), torch.no_grad():
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

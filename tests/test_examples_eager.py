"""The example models run eagerly, deterministically; the demo's comparison notices differences."""
from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.compare import compare, factories, flatten, observe, snapshot  # noqa: E402

EXAMPLES_DIR = ROOT / "examples"
STEMS = sorted(
    p.stem
    for p in EXAMPLES_DIR.glob("*.py")
    if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


def _runtime_mode():
    try:
        import runtime
    except ImportError:
        pytest.skip("runtime is not importable")
    if not hasattr(runtime, "mode"):
        pytest.skip("runtime.mode is not available yet")
    try:
        import transpiler
    except ImportError:
        pytest.skip("transpiler is not importable")
    if not hasattr(transpiler, "script"):
        pytest.skip("transpiler.script is not available yet")
    return runtime.mode


def _run_eager(factory) -> dict:
    mode = _runtime_mode()
    model, inputs = factory()
    with mode("off"), torch.no_grad():
        out = model(*inputs)
    return snapshot(observe(model, inputs, out))


def test_examples_found() -> None:
    assert len(STEMS) >= 8, STEMS


@pytest.mark.parametrize("stem", STEMS)
def test_example_file_shape(stem: str) -> None:
    """A module docstring that opens with a one-line summary, a make_example(), at least one
    @script definition (`@script` or `@script(...)`)."""
    tree = ast.parse((EXAMPLES_DIR / f"{stem}.py").read_text())
    doc = ast.get_docstring(tree)
    assert doc and doc.strip().split("\n\n")[0].count("\n") == 0, f"{stem}.py needs a one-line summary docstring"
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert "make_example" in names
    decorated = [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        and any(isinstance(d.func if isinstance(d, ast.Call) else d, ast.Name)
                and (d.func if isinstance(d, ast.Call) else d).id == "script" for d in node.decorator_list)
    ]
    assert decorated, f"{stem}.py has no @script definition"


@pytest.mark.parametrize("stem", STEMS)
def test_example_runs_eagerly_and_deterministically(stem: str) -> None:
    _runtime_mode()
    module = importlib.import_module(f"examples.{stem}")
    found = factories(module)
    assert found and found[0][0] == "", "make_example() comes first"
    for variant, factory in found:
        first = _run_eager(factory)
        second = _run_eager(factory)
        result = compare(first, second, atol=0.0, rtol=0.0)
        assert result.ok, f"{stem}[{variant}] is not deterministic: {result.mismatches}"


def test_compare_notices_differences() -> None:
    base = flatten((torch.ones(2, 3), 3, [torch.arange(4)]), "output")
    assert compare(base, base).ok

    def variant(obj) -> list[str]:
        return compare(base, flatten(obj, "output")).mismatches

    assert variant((torch.ones(2, 3) + 1e-3, 3, [torch.arange(4)]))  # values
    assert variant((torch.ones(2, 3, dtype=torch.float64), 3, [torch.arange(4)]))  # dtype
    assert variant((torch.ones(3, 2), 3, [torch.arange(4)]))  # shape
    assert variant((torch.ones(2, 3), 3.0, [torch.arange(4)]))  # int vs float
    assert variant((torch.ones(2, 3), 3, (torch.arange(4),)))  # list vs tuple
    assert variant((torch.ones(2, 3), 3, [torch.arange(4), 1]))  # length
    assert not variant((torch.ones(2, 3) + 1e-7, 3, [torch.arange(4)]))  # within tolerance


def test_compare_sees_mutated_inputs_and_buffers() -> None:
    model = torch.nn.BatchNorm1d(4).train()
    x = torch.randn(8, 4)
    acc = torch.zeros(4)
    expected = snapshot(observe(model, (x, acc), torch.tensor(0.0)))
    model(x)  # updates running stats
    acc += 1  # mutates an input
    got = compare(expected, snapshot(observe(model, (x, acc), torch.tensor(0.0))))
    wrong = {m.split(":")[0] for m in got.mismatches}
    assert wrong == {"input[1]", "state.running_mean", "state.running_var", "state.num_batches_tracked"}


def test_nan_in_the_same_place_is_equal() -> None:
    nan = float("nan")
    a = flatten(torch.tensor([nan, 1.0, float("-inf")]), "output")
    assert compare(a, flatten(torch.tensor([nan, 1.0, float("-inf")]), "output")).ok
    assert not compare(a, flatten(torch.tensor([0.0, 1.0, float("-inf")]), "output")).ok

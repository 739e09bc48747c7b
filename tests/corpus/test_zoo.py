"""The real-model corpus, opt-in (`make corpus`): each model compiles with
script(model, example_inputs=...) without changing its source and matches eager within the
model's documented tolerance, plain and frozen (freeze=True), at the batch size it was compiled for and at another (the batch is
symbolic), under torch.inference_mode() and torch.no_grad(), and frozen at batch 1; and through a checked-in module
(`@script_model(freeze=True)`, issue 47). Needs torchvision: run in the corpus virtualenv."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest
import torch

pytest.importorskip("torchvision")

from benchmarks.zoo_models import MODELS, ZooModel, mismatch  # noqa: E402
import runtime  # noqa: E402
from transpiler import cli, script  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("freeze", [False, True], ids=["plain", "frozen"])
@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_matches_eager(model: ZooModel, freeze: bool) -> None:
    eager = model.build()
    inputs = model.inputs(2)
    # Compiled and first called under inference mode (what a frozen module makes once then, a
    # later call under no_grad reads), then called under no_grad.
    with torch.inference_mode():
        compiled = script(eager, example_inputs=inputs, freeze=freeze)
    for batch, context in ((2, torch.inference_mode), (3, torch.no_grad)):
        with context():
            args = model.inputs(batch)
            expected = eager(*args)
            with runtime.mode("strict"):  # the compiled code runs (no entry check fails)
                problem = mismatch(model, expected, compiled(*args))
        assert problem is None, f"batch {batch} under {context.__name__}: {problem}"


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_frozen_at_batch_one_matches_eager(model: ZooModel) -> None:
    """Compiled for one image, the batch is the constant 1 (broadcasts differ from a symbolic
    batch's): what the zoo times at batch 1, with the rewrites only a batch of one allows (a
    squeeze-and-excitation gate scaling the next 1x1 conv's weight, ir/passes/scales.py)."""
    eager = model.build()
    args = model.inputs(1)
    with torch.no_grad():
        compiled = script(eager, example_inputs=args, freeze=True)
        expected = eager(*args)
        with runtime.mode("strict"):
            problem = mismatch(model, expected, compiled(*args))
    assert problem is None, problem


@pytest.mark.parametrize("model", MODELS[:1], ids=[MODELS[0].name])
def test_grad_enabled_calls_give_gradients(model: ZooModel) -> None:
    """With grad enabled and parameters requiring grad, the compiled module runs its code for
    autograd (tests/corpus/test_training.py checks each model's step), and gradients flow."""
    eager = model.build()
    (x,) = model.inputs(1)
    with torch.no_grad():
        compiled = script(eager, example_inputs=(x,))
    out = compiled(x)
    assert out.requires_grad
    out.sum().backward()
    assert eager.fc.weight.grad is not None
    torch.testing.assert_close(out.detach(), eager(x).detach())


SERVING = '''\
from benchmarks.zoo_models import BY_NAME
from transpiler import script_model


@script_model(freeze=True)
def {name}():
    zoo = BY_NAME[{name!r}]
    return zoo.build(), zoo.inputs(8)
'''


@pytest.mark.parametrize("model", MODELS, ids=[m.name for m in MODELS])
def test_checked_in_module_matches_eager(model: ZooModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A project checks in the model's code as a user would (issue 47): a file declaring it with
    `@script_model(freeze=True)`, `torchscribe FILE` (the factory runs in a child process, which
    finds benchmarks on PYTHONPATH), then the factory's `load(model)` on an instance of its own.
    Compiled for a batch of 8, it runs in strict mode (no entry check refuses a call) at 8 and at 1."""
    path = tmp_path / f"serving_{model.name}.py"
    path.write_text(SERVING.format(name=model.name), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    code = cli.main(["-q", str(path)])
    assert code == 0, "".join(capsys.readouterr())
    monkeypatch.syspath_prepend(str(tmp_path))
    factory = getattr(importlib.import_module(path.stem), model.name)
    eager = model.build()
    fast = factory.load(eager)
    for batch in (1, 8):
        args = model.inputs(batch)
        with torch.no_grad():
            expected = eager(*args)
            with runtime.mode("strict"):
                problem = mismatch(model, expected, fast(*args))
        assert problem is None, f"batch {batch}: {problem}"


def test_the_checked_in_benchmark_builds_each_corpus_own_model(tmp_path: Path) -> None:
    """benchmarks.zoo's `checked-in` backend writes a factory file naming the model's corpus:
    torchvision's and timm's corpora both have a `resnet18`, and the torchvision row once timed
    a module compiled for timm's (which its entry checks refused)."""
    pytest.importorskip("timm")
    from benchmarks import zoo

    model = next(m for m in MODELS if m.name == "resnet18")
    text = zoo.factory_text(model, 1)
    assert "from benchmarks.zoo_models import BY_NAME" in text
    from benchmarks.timm_models import BY_NAME as TIMM

    assert "from benchmarks.timm_models import BY_NAME" in zoo.factory_text(TIMM["resnet18"], 1)

"""NamedTuple classes of the model's file in compiled code: made positionally, by keyword and
with the class's defaults, read by field name (also from a submodule's result), and returned as
instances of the class, ahead of time (generic code and an example's kernels) and for an
instance; wrong fields are diagnostics."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case, imported_source

SOURCE = textwrap.dedent('''
    from typing import NamedTuple

    import torch
    from torch import Tensor, nn

    from transpiler import script


    class Scores(NamedTuple):
        logits: Tensor
        hidden: Tensor
        scale: float = 1.0


    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 4)

        def forward(self, x: Tensor) -> Scores:
            h = torch.tanh(x)
            return Scores(hidden=h, logits=self.fc(h))


    @script(example="make_example")
    class Classifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(8, 16)
            self.head = Head()

        def forward(self, x: Tensor) -> Scores:
            out = self.head(self.body(x))
            return Scores(out.logits / out.scale, out.hidden * 2, 0.5)


    def make_example():
        torch.manual_seed(0)
        return Classifier().eval(), (torch.randn(3, 8),)
''')


def _check(model: torch.nn.Module, x: torch.Tensor, source_module) -> None:
    with torch.no_grad():
        with runtime.mode("strict"):
            got = model(x)
        with runtime.mode("off"):
            want = model(x)
    assert type(got) is source_module.Scores and got.scale == 0.5
    torch.testing.assert_close(got.logits, want.logits)
    torch.testing.assert_close(got.hidden, want.hidden)


def test_named_tuples_ahead_of_time(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "scores_aot", SOURCE)
    assert "_source = _guards.model_module(__name__, SOURCE_FILE)" in text
    assert text.count(".Scores(") == 2  # made by the generic code and by the example's
    assert "_lib." in text
    model, (x,) = module.make_example()
    _check(model, x, module)
    _check(model, torch.randn(5, 8), module)


def test_named_tuples_for_an_instance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "scores_jit", SOURCE.replace('@script(example="make_example")', "")) as module:
        model, (x,) = module.make_example()
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            got = compiled(x)
        want = model(x)
        assert type(got) is module.Scores
        torch.testing.assert_close(tuple(got[:2]), tuple(want[:2]))


@pytest.mark.parametrize("call, message", [
    ("Scores(out.logits, hidden=out.hidden, temperature=2.0)", "Scores() has no field `temperature`"),
    ("Scores(out.logits)", "Scores() is missing the field `hidden`"),
    ("Scores(out.logits, out.hidden, 0.5, 1)", "Scores() takes 3 fields, 4 given"),
])
def test_wrong_fields_are_diagnostics(tmp_path: Path, capsys: pytest.CaptureFixture, call: str, message: str) -> None:
    from transpiler.cli import main as cli_main

    path = tmp_path / "bad_scores.py"
    path.write_text(SOURCE.replace("Scores(out.logits / out.scale, out.hidden * 2, 0.5)", call))
    with case_directory(tmp_path):
        assert cli_main(["-q", str(path)]) == 2
    assert f"error: {message}" in capsys.readouterr().err

"""Staleness: a compiled module's header records the hash of every file it was compiled from
(SOURCE_HASH for the model file, SOURCES for other files whose @script code it holds) and the
torch version; --check, loader.compiled_problem and run-time dispatch compare them all."""

from __future__ import annotations

import itertools
import sys
import warnings
from pathlib import Path
from typing import Iterator

import pytest
import torch

import runtime
from ir.core.graph import Program
from runtime import dispatch, loader
from runtime.errors import TorchscribeWarning
from runtime.loader import compiled_path_for, read_header
from runtime.source_hash import file_source_hash
from transpiler import cli, compile as compile_mod
from transpiler.pipeline import torch_version
from transpiler.compile import compile_path

MODEL = '''\
import torch
from torch import Tensor
from transpiler import script


@script
def double(x: Tensor) -> Tensor:
    return x * 2.0
'''

HELPERS = "# @script code the model inlines (recorded as a dependency by the tests)\nSCALE = 2\n"

_counter = itertools.count()


class Files:
    def __init__(self, root: Path) -> None:
        self.name = f"ts_stale_{next(_counter)}"
        self.model = root / f"{self.name}.py"
        self.model.write_text(MODEL)
        (root / "lib").mkdir()
        self.helpers = root / "lib" / "helpers.py"
        self.helpers.write_text(HELPERS)
        self.compiled = compiled_path_for(self.model)

    def add_dependency(self, name: str, program: Program) -> None:
        if name == "lower":
            program.dependencies.append(self.helpers)

    def compile(self) -> str:
        compiled = compile_path(self.model, after_pass=self.add_dependency)
        assert compiled is not None
        return compiled.text


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Files]:
    monkeypatch.delenv("TORCHSCRIBE", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    runtime.reset()
    f = Files(tmp_path)
    yield f
    runtime.reset()
    for name in (f.name, f"{f.name}_compiled"):
        sys.modules.pop(name, None)


def test_header_records_dependencies_relative_and_sorted(files: Files) -> None:
    text = files.compile()
    header = loader.parse_header(text)
    assert header is not None
    assert header["SOURCES"] == {"lib/helpers.py": file_source_hash(files.helpers)}
    assert header["SOURCE_HASH"] == file_source_hash(files.model)
    assert header["TORCH_VERSION"] == torch_version()
    assert str(files.model.parent) not in text  # no absolute paths: the same on every machine
    assert files.compile() == text


def test_no_dependencies_no_sources_line(files: Files) -> None:
    compiled = compile_path(files.model)
    assert compiled is not None and "SOURCES" not in compiled.text


def test_compiled_problem_names_the_changed_dependency(files: Files) -> None:
    files.compiled.write_text(files.compile())
    assert loader.compiled_problem(files.model) is None
    files.helpers.write_text(HELPERS + "SCALE = 3\n")
    problem = loader.compiled_problem(files.model)
    assert problem is not None and "lib/helpers.py" in problem and "changed" in problem
    files.helpers.unlink()
    problem = loader.compiled_problem(files.model)
    assert problem is not None and "lib/helpers.py" in problem and "missing" in problem


def test_line_endings_of_a_dependency_do_not_make_it_stale(files: Files) -> None:
    files.compiled.write_text(files.compile())
    files.helpers.write_bytes(HELPERS.replace("\n", "\r\n").encode())
    assert loader.compiled_problem(files.model) is None


def _torchscribe_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, TorchscribeWarning)]


def test_dispatch_runs_eagerly_when_a_dependency_changed(files: Files) -> None:
    files.compiled.write_text(files.compile())
    files.helpers.write_text(HELPERS + "SCALE = 3\n")
    __import__(files.name)
    model = sys.modules[files.name]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = model.double(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))
    [message] = _torchscribe_warnings(record)
    assert "lib/helpers.py" in message and "changed since it was generated" in message
    assert "running eagerly" in message and "Regenerate it with `torchscribe" in message


def test_dispatch_runs_compiled_when_dependencies_are_fresh(files: Files) -> None:
    files.compiled.write_text(files.compile())
    __import__(files.name)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        sys.modules[files.name].double(torch.ones(3))
    assert _torchscribe_warnings(record) == []
    assert f"{files.name}_compiled" in sys.modules


def test_module_generated_with_another_torch_says_so_when_loaded(files: Files) -> None:
    text = rehashed(files.compile().replace(f'TORCH_VERSION = "{dispatch.TORCH_VERSION}"', 'TORCH_VERSION = "1.0"'))
    assert 'TORCH_VERSION = "1.0"' in text
    files.compiled.write_text(text)
    __import__(files.name)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = sys.modules[files.name].double(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))
    [message] = _torchscribe_warnings(record)
    assert f"generated with torch 1.0 but this is torch {dispatch.TORCH_VERSION}" in message
    assert "Regenerate it with `torchscribe" in message


def test_check_names_the_changed_dependency(files: Files, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    real = compile_mod.compile_path
    monkeypatch.setattr(compile_mod, "compile_path",
                        lambda path, display=None, after_pass=None, permissive=False, examples="child":
                        real(path, display, files.add_dependency, permissive, examples))
    files.compiled.write_text(files.compile())
    assert cli.main(["--check", str(files.model)]) == 0
    capsys.readouterr()
    files.helpers.write_text(HELPERS + "SCALE = 3\n")
    assert cli.main(["--check", str(files.model)]) == 1
    out = capsys.readouterr().out
    assert "lib/helpers.py" in out and "changed since it was generated" in out
    assert f"run `torchscribe {files.model}`" in out
    assert read_header(files.compiled) is not None


def rehashed(text: str) -> str:
    """A generated module's text after a change, with its BODY_HASH made to match again (as a
    module generated that way would have)."""
    import re

    return loader.with_body_hash(re.sub(r'^BODY_HASH = "[^"]*"$', 'BODY_HASH = ""', text, count=1, flags=re.M))


EDITS = {
    "a changed constant": lambda t: t.replace("x * 2.0", "x * 3.0"),
    "a deleted line": lambda t: "\n".join(line for line in t.splitlines() if "_guards.check_tensor" not in line) + "\n",
    "a changed hash": lambda t: t.replace('BODY_HASH = "sha256:', 'BODY_HASH = "sha256:0'),
    "no hash": lambda t: "\n".join(line for line in t.splitlines() if not line.startswith("BODY_HASH")) + "\n",
}


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_a_module_edited_after_it_was_generated_does_not_run(files: Files, edit: str) -> None:
    """What runs is what was reviewed: a hand edit (or a bad merge) of the compiled module makes
    it stale. Eager with a warning naming the file; strict mode raises."""
    text = files.compile()
    assert "x * 2.0" in text and loader.body_problem(text) is None
    files.compiled.write_text(EDITS[edit](text))
    assert loader.body_problem(files.compiled.read_text()) is not None
    assert loader.compiled_problem(files.model) is not None
    __import__(files.name)
    model = sys.modules[files.name]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = model.double(torch.ones(3))
    assert torch.equal(out, torch.full((3,), 2.0))  # eager's, not the edited module's
    [message] = _torchscribe_warnings(record)
    assert f"{files.name}_compiled.py" in message and "running eagerly" in message, message
    assert "BODY_HASH" in message
    runtime.reset()
    with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="BODY_HASH"):
        model.double(torch.ones(3))


def test_line_endings_do_not_count_as_an_edit(files: Files) -> None:
    text = files.compile()
    assert loader.body_problem(text.replace("\n", "\r\n")) is None


def test_the_cli_regenerates_an_edited_module_and_check_says_why(files: Files, capsys) -> None:
    assert cli.main(["-q", str(files.model)]) == 0
    assert cli.main(["--check", str(files.model)]) == 0
    files.compiled.write_text(EDITS["a changed constant"](files.compiled.read_text()))
    capsys.readouterr()
    assert cli.main(["--check", str(files.model)]) == 1
    assert "was edited after it was generated" in capsys.readouterr().out
    assert cli.main(["-q", str(files.model)]) == 0  # not "up to date": written again
    assert "x * 2.0" in files.compiled.read_text() and loader.body_problem(files.compiled.read_text()) is None
    files.compiled.write_text(EDITS["a changed constant"](files.compiled.read_text()))
    assert cli.main(["-q", str(files.compiled)]) == 0  # the module named: its model is compiled
    assert "x * 2.0" in files.compiled.read_text()


def test_orphans_are_reported_by_check_and_removed_only_when_asked(files: Files, capsys) -> None:
    files.compiled.write_text(files.compile())
    renamed = files.model.with_name(f"{files.name}_renamed.py")
    files.model.rename(renamed)
    capsys.readouterr()
    assert cli.main(["--check", str(files.model.parent)]) == 1
    assert f"its model {files.model.name} is gone" in capsys.readouterr().err
    assert cli.main(["-q", "--exit-nonzero-on-write", str(renamed)]) == 1  # the hook's call, given the new name
    assert files.compiled.exists()  # reported, not removed
    plain = files.model.with_name("notes_compiled.py")
    plain.write_text("# a file of the user's that happens to end in _compiled.py\n")
    assert cli.main(["-q", "--remove-orphans", str(renamed)]) == 0
    assert not files.compiled.exists() and plain.exists()

"""Test models written as source text: the compiler reads a model from its file, so a test
module's SOURCE is written to a temporary directory and imported from there."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


@contextmanager
def imported_source(root: Path, name: str, source: str) -> Iterator[ModuleType]:
    """`source` (dedented) as module `name` in `root`, importable while the block runs."""
    (root / f"{name}.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(name, None)


@contextmanager
def case_directory(root: Path) -> Iterator[Path]:
    """`root` on sys.path while the block runs (the cases `compiled_case` writes into it)."""
    sys.path.insert(0, str(root))
    try:
        yield root
    finally:
        sys.path.remove(str(root))


def compiled_case(directory: Path, name: str, source: str) -> tuple[ModuleType, str]:
    """`source` written as module `name` into `directory` (on sys.path), compiled ahead of time
    with the CLI, and imported; and the text of its compiled module."""
    from transpiler.cli import main as cli_main

    path = directory / f"{name}.py"
    path.write_text(source)
    assert cli_main(["-q", str(path)]) == 0
    return importlib.import_module(name), (directory / f"{name}_compiled.py").read_text()


@contextmanager
def jit_source(tmp_path: Path, monkeypatch, name: str, source: str) -> Iterator[ModuleType]:
    """`source` imported as `name`, with script()'s cache in `tmp_path / "cache"` (generated_jit)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, name, source) as mod:
        yield mod


def generated_jit(tmp_path: Path, stem: str) -> str:
    """The module script() generated for class `stem` under jit_source."""
    (path,) = (tmp_path / "cache" / "jit").glob(f"{stem}_*.py")
    return path.read_text()

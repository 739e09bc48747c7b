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

"""Which files a run works on: the model files under the paths given (a generated module given by
name stands for its model) and the generated modules whose model is gone. `torchscribe PATH`
(transpiler/cli.py) and `torchscribe explain PATH` (transpiler/explain.py) both search this way."""

from __future__ import annotations

import os
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", ".tox", ".eggs"}


def find_sources(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Python files under `paths` (recursively), in sorted order, and the paths that do not exist."""
    from runtime.loader import is_generated_file

    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            # A compiled module given by name (a shell glob, a pre-commit hook that sees it staged)
            # is output, not a model: its model is checked instead, so that an edited module is
            # regenerated (one whose model is gone is an orphan: `find_orphans`).
            if not (path.name.endswith("_compiled.py") and is_generated_file(path)):
                found.append(path)
            elif (model := model_path_for(path)).is_file():
                found.append(model)
        elif path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(".py") and not name.endswith("_compiled.py"):
                        found.append(Path(root) / name)
        else:
            missing.append(p)
    unique = list(dict.fromkeys(found))
    return unique, missing


def model_path_for(compiled: Path) -> Path:
    """The model file a generated module names as its source (SOURCE_FILE, beside it)."""
    from runtime.loader import read_header

    named = (read_header(compiled) or {}).get("SOURCE_FILE")
    if isinstance(named, str) and named and "/" not in named and "\\" not in named:
        return compiled.with_name(named)
    return compiled.with_name(compiled.name.removesuffix("_compiled.py") + ".py")


def find_orphans(paths: list[str]) -> list[Path]:
    """Generated modules whose model file is gone (renamed or deleted): under the directories
    given, and beside the files given (`git mv misc.py utils.py` stages utils.py, in the
    directory where misc_compiled.py stays behind)."""
    from runtime.loader import is_generated_file

    places: list[tuple[Path, bool]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            places.append((path, True))
        elif path.is_file():
            places.append((path.parent, False))
    orphans: list[Path] = []
    for place, recursive in dict.fromkeys(places):
        walk = os.walk(place) if recursive else [(str(place), [], sorted(os.listdir(place)))]
        for root, dirs, files in walk:
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                compiled = Path(root) / name
                if name.endswith("_compiled.py") and is_generated_file(compiled) \
                        and not model_path_for(compiled).exists():
                    orphans.append(compiled)
    return list(dict.fromkeys(orphans))


def mentions_script(path: Path) -> bool:
    """A cheap filter before parsing: files that never say `script` cannot have targets."""
    try:
        return "script" in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False

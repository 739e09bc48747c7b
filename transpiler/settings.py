"""Which devices and dtypes the checked-in module has kernels for (shared/DESIGN.md §4b).

A decorated function's annotated tensor parameters give ranks; these settings give the rest of
what kernels need: `@script(devices=..., dtypes=...)` on the object, else `[tool.torchscribe]`
in the nearest pyproject.toml at or above the model file that has that table (as ruff, black and
mypy find theirs), else float32 on the CPU. The project's settings change the output without
changing the model's source, so a module records them in its header (SETTINGS, when they are
not the defaults) and `torchscribe` regenerates, and `--check` fails, when they change.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ir.core.graph import Loc
from runtime.dispatch import SPECIALISE_DEVICES, SPECIALISE_DTYPES, target_names_problem
from transpiler.diagnostics import CompileError, Diagnostic, UserError
from transpiler.source import SourceFile, Target

TABLE = "tool.torchscribe"
KEYS = ("devices", "dtypes")


@dataclass(frozen=True)
class Settings:
    devices: tuple[str, ...] = ("cpu",)
    dtypes: tuple[str, ...] = ("float32",)

    def header(self) -> dict[str, list[str]] | None:
        """What the module's SETTINGS line records: None for the defaults (no line)."""
        if self == DEFAULT:
            return None
        return {"devices": list(self.devices), "dtypes": list(self.dtypes)}


DEFAULT = Settings()


def find_config(model_path: Path) -> Path | None:
    """The nearest pyproject.toml at or above the model file's directory with a
    `[tool.torchscribe]` table (a cheap text test first: most projects have none)."""
    for directory in Path(model_path).resolve().parents:
        candidate = directory / "pyproject.toml"
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if _TABLE_HEADER.search(text):
            return candidate
    return None


_TABLE_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*torchscribe\s*\]", re.MULTILINE)


def project_settings(model_path: Path) -> tuple[Settings, Path | None]:
    """The project's settings for a model file and the pyproject.toml they come from. A file
    that does not parse or a bad value raises CompileError (a diagnostic in pyproject.toml)."""
    config = find_config(model_path)
    if config is None:
        return DEFAULT, None
    text = config.read_text(encoding="utf-8")
    display = os.path.relpath(config)
    lines = text.splitlines()

    def error(message: str, line: int, hint: str) -> CompileError:
        code = lines[line - 1] if 1 <= line <= len(lines) else ""
        col = len(code) - len(code.lstrip())
        return CompileError([Diagnostic(message, Loc(display, line, col, line, max(col + 1, len(code.rstrip()))),
                                        hint)], {display: lines})

    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise error("reading [tool.torchscribe] needs Python 3.11 or the tomli package", _table_line(lines),
                        "pip install tomli") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"line (\d+)", str(e))
        raise error(f"pyproject.toml does not parse: {e}", int(at.group(1)) if at else len(lines),
                    "fix the TOML syntax") from None
    table = data.get("tool", {}).get("torchscribe", {})
    if not isinstance(table, Mapping):
        raise error("[tool.torchscribe] must be a table", _table_line(lines), 'write e.g. devices = ["cpu"]')
    for key in table:
        if key not in KEYS:
            raise error(f"[tool.torchscribe] has no setting `{key}`", _key_line(lines, key),
                        f"the settings are {', '.join(KEYS)}")
    found: dict[str, tuple[str, ...]] = {}
    for key in KEYS:
        if key in table:
            problem = target_names_problem(key, table[key])
            if problem is not None:
                raise error(f"[tool.torchscribe] {key} {problem}", _key_line(lines, key), _names_hint(key))
            found[key] = tuple(table[key])
    return replace(DEFAULT, **found), config


def _table_line(lines: list[str]) -> int:
    return next((i + 1 for i, line in enumerate(lines) if _TABLE_HEADER.match(line)), 1)


def _key_line(lines: list[str], key: str) -> int:
    """The line that sets `key` in the table (after its header), else the header's."""
    start = _table_line(lines)
    for i in range(start, len(lines)):
        if lines[i].lstrip().startswith("["):
            break
        if re.match(rf"\s*{key}\s*=", lines[i]):
            return i + 1
    return start


def _names_hint(option: str, decorator: bool = False) -> str:
    valid = SPECIALISE_DEVICES if option == "devices" else SPECIALISE_DTYPES
    example = '"cpu", "cuda"' if option == "devices" else '"float32", "bfloat16"'
    spelled = f"@script({option}=({example}))" if decorator else f"{option} = [{example}]"
    return f"name one or more of {', '.join(valid)}: e.g. {spelled}"


def target_settings(source: SourceFile, target: Target, project: Settings) -> Settings:
    """The settings of one decorated object: its decorator's options over the project's. A bad
    option raises UserError at the option."""
    chosen: dict[str, tuple[str, ...]] = {}
    for key in KEYS:
        value = target.options.get(key)
        if value is None:
            continue
        problem = target_names_problem(key, value)
        if problem is not None:
            raise UserError(f"@script({key}=...) {problem}", source.option_loc(target, key), _names_hint(key, True))
        chosen[key] = tuple(value)  # type: ignore[arg-type]
    return replace(project, **chosen)


def targets_settings(source: SourceFile, targets: list[Target], project: Settings) -> dict[str, Settings]:
    """`target_settings` of each target, by name; every bad option raises, in one CompileError."""
    found: dict[str, Settings] = {}
    diagnostics: list[Diagnostic] = []
    for target in targets:
        try:
            found[target.name] = target_settings(source, target, project)
        except UserError as e:
            diagnostics.extend(e.diagnostics)
    if diagnostics:
        raise CompileError(diagnostics, {source.display: source.lines})
    return found


def settings_problem(header: Mapping[str, Any], model_path: Path) -> str | None:
    """Why a compiled module whose header is `header` was compiled under other project settings
    than the model file has now, as a phrase that follows "compiled module X"; None when they
    are the same (or the project's settings do not read: compiling reports that)."""
    recorded = header.get("SETTINGS")
    try:
        current, config = project_settings(model_path)
    except CompileError:
        return "is stale (its project's [tool.torchscribe] settings changed and do not read)"
    if recorded == current.header():
        return None
    default = {"devices": list(DEFAULT.devices), "dtypes": list(DEFAULT.dtypes)}
    then = recorded if isinstance(recorded, Mapping) else default
    now = current.header() or default
    changed = ", ".join(f"{key} = {_toml(then.get(key, []))}, now {_toml(now[key])}"
                        for key in KEYS if list(then.get(key, [])) != now[key])
    where = f"from {os.path.relpath(config)}" if config is not None else "(the default: no [tool.torchscribe] table)"
    return f"is stale (compiled for [tool.torchscribe] {changed or 'other settings'} {where})"


def _toml(names: Any) -> str:
    return "[" + ", ".join(f'"{n}"' for n in names) + "]"

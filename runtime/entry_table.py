"""The table of a compiled function's entry checks below one argument (`entry_checks`), and the
submodule paths its rows name, parsed once (`_path`).

A compiled function that inlined or lowered submodules, or was specialised to an instance's
parameters and settings, makes its checks of what hangs below `self` with one `check_entry` call
(runtime/guards.py, and its C++ fast path) and a table made here once, when its module is imported,
rather than with a wall of `check_module`, `check_tensor` and `check_value` lines: the same
checks, with the same messages, written one row per submodule. Generated code names these
through `_guards` (runtime/guards.py re-exports them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_paths: dict[str, tuple[tuple[str | int, bool], ...]] = {}


def _path(path: str) -> tuple[tuple[str | int, bool], ...]:
    """Parse a path once: "a.b?.0" is (("a", False), ("b", True), (0, False)); True: may be None."""
    parts = _paths.get(path)
    if parts is None:
        parts = tuple(
            (int(p.rstrip("?")) if p.rstrip("?").lstrip("-").isdigit() else p.rstrip("?"), p.endswith("?"))
            for p in (path.split(".") if path else ())
        )
        _paths[path] = parts
    return parts


@dataclass(frozen=True)
class TensorCheck:
    """In an `entry_checks` row: a tensor of this dtype, device type and shape (as `check_tensor`
    takes them, None for what is not checked), where the table's `tensors` does not give them."""

    dtype: torch.dtype | None
    device_type: str | None
    shape: tuple[int | str | None, ...] | None


@dataclass(frozen=True)
class ListValue:
    """In an `entry_checks` row: a list the attribute must equal (a bare list is a tensor's shape)."""

    value: Any


def entry_checks(*rows: tuple, tensors: tuple = (None, None), returns: tuple[str, ...] = (),
                 root: str = "self") -> tuple:
    """The table of a compiled function's entry checks below its argument `root`, one row per
    submodule it checks, `(path, qualname, *conditions, attributes)` (the submodule as
    `check_module` takes it after the root: `("block1.conv1", "torch.nn.Conv2d",
    "zeros_padding")`), or `(path, attributes)` for what is only read there (`("", {...})`: on the
    root). `attributes`, optional, maps names (or paths) below the row's path to what they must
    be: a list is the shape of a tensor whose dtype and device type `tensors` gives (`"weight":
    [32, 16, 3, 3]`, the name ending in "?" where it may be None), `TensorCheck(...)` a tensor
    of others, anything else the value `check_value` compares with (`ListValue(...)` for a list).
    `returns`: paths of module rows whose submodules `check_entry` returns. A row whose path is
    a tuple of paths is one row for each (`(("block1.bn1", "block2.bn1"), "torch.nn.BatchNorm2d",
    {...})`: layers alike are checked alike), in that order, where it stands.

    The checks run in the order modules, tensors, values, each in the order of the rows. Each
    path is read on from the submodule of the longest module path that leads to it
    ("block1.conv1.weight" from "block1.conv1", checked before), so that each submodule is read
    once. Made here: modules (path, qualname, conditions, base, steps), tensors (name, base,
    steps, dtype, device_type, shape), values (name, base, steps, last, expected); `base` is
    the module row read on from (-1: the root), `steps` are `_path`'s parts from there (for a
    value, all but a `last` attribute read with getattr, if any), `name` the path as messages
    spell it (`self.layers[0].fc.weight`)."""
    modules, tensor_checks, value_checks = [], [], []
    for paths, *rest in rows:
        attributes = rest.pop() if rest and type(rest[-1]) is dict else {}
        for path in paths if type(paths) is tuple else (paths,):
            if rest:
                modules.append((path, *rest))
            for key, expected in attributes.items():
                at = f"{path}.{key}" if path else key
                if type(expected) is list:
                    tensor_checks.append((at, *tensors, tuple(expected)))
                elif type(expected) is TensorCheck:
                    tensor_checks.append((at, expected.dtype, expected.device_type, expected.shape))
                else:
                    value_checks.append((at, expected.value if type(expected) is ListValue else expected))
    parsed: list[tuple] = []

    def based(path: str) -> tuple[int, tuple]:
        steps = _path(path)
        base = max((i for i, before in enumerate(parsed) if len(before) < len(steps) and steps[:len(before)] == before),
                   key=lambda i: len(parsed[i]), default=-1)
        return base, steps[len(parsed[base]):] if base >= 0 else steps

    def name(path: str) -> str:
        return root + "".join(f"[{step}]" if type(step) is int else f".{step}" for step, _ in _path(path))

    module_rows = []
    for path, qualname, *conditions in modules:
        module_rows.append((path, qualname, tuple(conditions), *based(path)))
        parsed.append(_path(path))
    tensor_rows = tuple((name(path), *based(path), dtype, device, shape)
                        for path, dtype, device, shape in tensor_checks)
    value_rows = []
    for path, expected in value_checks:
        base, steps = based(path)
        # A Python attribute (eps) is read with getattr, which finds it first; one pinned to None
        # may be a parameter, buffer or submodule set to None, which `attr` reads faster.
        last = steps[-1][0] if expected is not None and steps and type(steps[-1][0]) is str else None
        value_rows.append((name(path), base, steps[:-1] if last is not None else steps, last, expected))
    paths = [row[0] for row in module_rows]
    return tuple(module_rows), tensor_rows, tuple(value_rows), tuple(paths.index(p) for p in returns)

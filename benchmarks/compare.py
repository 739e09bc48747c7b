"""Helpers to compare an eager run of an example with a compiled one.

A run is observed as a flat, ordered dict from a path ("output[0]", "input[1][0]",
"state.bn.running_mean") to a leaf: a tensor, a Python scalar, a string, None, or a `Shape`
marker recording a container's type and length. Two observations match when they have the same
paths, the same structure and scalars, tensors of the same dtype, shape and device, and values
within tolerance (NaNs in the same places count as equal).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable

import torch
from torch import nn

ATOL = 1e-5
RTOL = 1e-5

# Example factories: `make_example()` and any `make_example_<variant>()` in an example module.
FACTORY_PREFIX = "make_example"


@dataclasses.dataclass(frozen=True)
class Shape:
    """A container in a flattened structure: its type name and length."""

    kind: str
    length: int


@dataclasses.dataclass
class Comparison:
    ok: bool
    max_abs_error: float
    mismatches: list[str]


def factories(module: Any) -> list[tuple[str, Callable[[], tuple[object, tuple]]]]:
    """(variant, factory) pairs of an example module, `make_example` first, variants sorted."""
    found = []
    for name in sorted(vars(module)):
        fn = getattr(module, name)
        if not callable(fn):
            continue
        if name == FACTORY_PREFIX:
            found.append(("", fn))
        elif name.startswith(FACTORY_PREFIX + "_"):
            found.append((name[len(FACTORY_PREFIX) + 1 :], fn))
    found.sort(key=lambda item: (item[0] != "", item[0]))
    return found


def flatten(obj: Any, path: str, into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Flatten nested tuples/lists/dicts of leaves into `into` (returned), keyed by path."""
    if into is None:
        into = {}
    if isinstance(obj, (tuple, list)):
        into[path] = Shape(type(obj).__name__, len(obj))
        for i, item in enumerate(obj):
            flatten(item, f"{path}[{i}]", into)
    elif isinstance(obj, dict):
        into[path] = Shape("dict", len(obj))
        for key in obj:
            flatten(obj[key], f"{path}[{key!r}]", into)
    else:
        into[path] = obj
    return into


def module_state(model: object) -> dict[str, torch.Tensor]:
    """Parameters and buffers of a module (its state_dict); empty for a plain function."""
    if isinstance(model, nn.Module):
        return dict(model.state_dict(keep_vars=False))
    return {}


def observe(model: object, inputs: tuple, outputs: Any) -> dict[str, Any]:
    """Everything a caller can see after a call: outputs, inputs (may be mutated), module state,
    and which output tensors share storage with each other or with inputs and state."""
    seen = flatten(outputs, "output")
    flatten(tuple(inputs), "input", seen)
    for name, tensor in module_state(model).items():
        seen[f"state.{name}"] = tensor
    storages: dict[int, list[str]] = {}
    for path, value in seen.items():
        if isinstance(value, torch.Tensor) and value.untyped_storage().nbytes():
            storages.setdefault(value.untyped_storage().data_ptr(), []).append(path)
    for path, value in list(seen.items()):
        if path.startswith("output") and isinstance(value, torch.Tensor) and value.untyped_storage().nbytes():
            shared = tuple(p for p in storages[value.untyped_storage().data_ptr()] if p != path)
            seen[f"alias.{path}"] = shared
    return seen


def snapshot(observation: dict[str, Any]) -> dict[str, Any]:
    """A detached copy, so that later in-place updates do not change what was observed."""
    return {
        k: v.detach().clone() if isinstance(v, torch.Tensor) else v for k, v in observation.items()
    }


def tensor_error(expected: torch.Tensor, actual: torch.Tensor) -> float:
    """Max absolute difference; NaN in the same place counts as 0, in one only as inf."""
    if expected.numel() == 0:
        return 0.0
    if expected.dtype == torch.bool:
        return float((expected != actual).any())
    if not (expected.is_floating_point() or expected.is_complex()):
        return float((expected.long() - actual.long()).abs().max())
    e = expected.detach().to(torch.float64 if not expected.is_complex() else torch.complex128)
    a = actual.detach().to(e.dtype)
    both_nan = torch.isnan(e) & torch.isnan(a)
    same_inf = torch.isinf(e) & (e == a)
    diff = (e - a).abs()
    diff = torch.where(both_nan | same_inf, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    return float(diff.max())


def _compare_tensors(
    path: str, e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float
) -> tuple[list[str], float]:
    if e.dtype != a.dtype:
        return [f"{path}: dtype {a.dtype}, expected {e.dtype}"], math.inf
    if e.shape != a.shape:
        return [f"{path}: shape {tuple(a.shape)}, expected {tuple(e.shape)}"], math.inf
    if e.device != a.device:
        return [f"{path}: device {a.device}, expected {e.device}"], math.inf
    err = tensor_error(e, a)
    if e.is_floating_point() or e.is_complex():
        ok = torch.allclose(a.detach(), e.detach(), atol=atol, rtol=rtol, equal_nan=True)
    else:
        ok = torch.equal(a, e)
    return ([] if ok else [f"{path}: values differ, max abs error {err:.3g}"]), err


def _compare_leaf(path: str, e: Any, a: Any, atol: float, rtol: float) -> tuple[list[str], float]:
    if isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
            return [f"{path}: {type(a).__name__}, expected {type(e).__name__}"], math.inf
        return _compare_tensors(path, e, a, atol, rtol)
    if type(e) is not type(a):
        return [f"{path}: {type(a).__name__} {a!r}, expected {type(e).__name__} {e!r}"], math.inf
    if isinstance(e, float):
        if math.isnan(e) and math.isnan(a):
            return [], 0.0
        err = abs(e - a) if e != a else 0.0
        ok = err <= atol + rtol * abs(e)
        return ([] if ok else [f"{path}: {a!r}, expected {e!r}"]), err
    if e != a:
        return [f"{path}: {a!r}, expected {e!r}"], math.inf
    return [], 0.0


def compare(
    expected: dict[str, Any], actual: dict[str, Any], atol: float = ATOL, rtol: float = RTOL
) -> Comparison:
    """Compare two observations (see `observe`); `expected` is the eager one."""
    mismatches: list[str] = []
    worst = 0.0
    for path in expected:
        if path not in actual:
            mismatches.append(f"{path}: missing")
            worst = math.inf
    for path in actual:
        if path not in expected:
            mismatches.append(f"{path}: unexpected")
            worst = math.inf
    for path, e in expected.items():
        if path in actual:
            problems, err = _compare_leaf(path, e, actual[path], atol, rtol)
            mismatches.extend(problems)
            worst = max(worst, err)
    return Comparison(ok=not mismatches, max_abs_error=worst, mismatches=mismatches)


def tensors_in(obj: Any) -> Iterable[torch.Tensor]:
    """Every tensor in a nested structure of tuples/lists/dicts, in order."""
    for leaf in flatten(obj, "").values():
        if isinstance(leaf, torch.Tensor):
            yield leaf


def restorer(inputs: tuple, owner: Any) -> Callable[[], None]:
    """Puts inputs and module state back as they are now (for models that update them)."""
    tensors = list(tensors_in(inputs))
    saved = [t.detach().clone() for t in tensors]
    state = {k: v.detach().clone() for k, v in module_state(owner).items()}

    def restore() -> None:
        with torch.no_grad():
            for tensor, value in zip(tensors, saved):
                tensor.copy_(value)
        if state:
            owner.load_state_dict(state)

    return restore

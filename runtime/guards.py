"""Entry checks that generated code runs before any side effect.

A compiled function raises ``GuardFailure(reason)`` when an input violates what the generated
code assumes; the dispatcher then runs the original eager code (or raises in strict mode).
The helpers are deliberately tiny: they sit on every compiled call's path.
"""

from __future__ import annotations

from typing import Any

import torch


class GuardFailure(Exception):
    """An input does not satisfy an assumption of the compiled code; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def type_name(value: Any) -> str:
    """Short, user-facing type name: ``Tensor``, ``int``, ``None``."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return "Tensor"
    return type(value).__name__


def _names(types: type | tuple[type, ...]) -> str:
    if isinstance(types, type):
        types = (types,)
    return " or ".join("Tensor" if t is torch.Tensor else "None" if t is type(None) else t.__name__ for t in types)


def check_tensor(value: Any, name: str) -> None:
    if not isinstance(value, torch.Tensor):
        raise GuardFailure(f"argument {name!r}: expected Tensor, got {type_name(value)}")


def check_type(value: Any, expected: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, expected):
        raise GuardFailure(f"argument {name!r}: expected {_names(expected)}, got {type_name(value)}")


def check_dtype(value: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    if value.dtype != dtype:
        raise GuardFailure(f"argument {name!r}: expected dtype {_dtype(dtype)}, got {_dtype(value.dtype)}")


def check_device_type(value: torch.Tensor, device_type: str, name: str) -> None:
    if value.device.type != device_type:
        raise GuardFailure(f"argument {name!r}: expected a {device_type} tensor, got {value.device.type}")


def check_dim(value: torch.Tensor, ndim: int, name: str) -> None:
    if value.dim() != ndim:
        raise GuardFailure(f"argument {name!r}: expected {ndim} dimensions, got {value.dim()}")


def check_size(value: torch.Tensor, dim: int, size: int, name: str) -> None:
    if value.size(dim) != size:
        raise GuardFailure(f"argument {name!r}: expected size {size} in dimension {dim}, got {value.size(dim)}")


def check_contiguous(value: torch.Tensor, name: str) -> None:
    if not value.is_contiguous():
        raise GuardFailure(f"argument {name!r}: expected a contiguous tensor")


def check_annotation(value: Any, annotation: Any, name: str) -> None:
    """Full check against a typing annotation (``tuple[Tensor, int]``, ``Optional[...]``).

    typeguard is imported only here, on first use, so importing the runtime stays cheap.
    """
    import typeguard

    try:
        typeguard.check_type(value, annotation)
    except typeguard.TypeCheckError as error:
        raise GuardFailure(f"argument {name!r}: {error}") from None


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")

"""Counters, per compiled function: eager fallbacks after guard failures, and calls that no
specialisation of a checked-in module accepted (they ran its generic compiled code)."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_fallbacks: dict[str, int] = {}
_generic: dict[str, int] = {}


def count_fallback(qualname: str) -> int:
    """Record one fallback of ``qualname``; returns the new count (1 means: first time)."""
    with _lock:
        count = _fallbacks.get(qualname, 0) + 1
        _fallbacks[qualname] = count
        return count


def fallback_counts() -> dict[str, int]:
    """A copy of ``{"<module>.<Class>.forward" or "<module>.<function>": fallbacks}``."""
    with _lock:
        return dict(_fallbacks)


def reset_fallback_counts() -> None:
    with _lock:
        _fallbacks.clear()
        _generic.clear()


def count_generic(qualname: str) -> None:
    """Record one call of ``qualname`` that ran the generic compiled code."""
    with _lock:
        _generic[qualname] = _generic.get(qualname, 0) + 1


def generic_counts() -> dict[str, int]:
    """A copy of ``{"<module>.<Class>.forward" or "<module>.<function>": calls}`` that no
    specialisation accepted (a dtype, device, rank or size other than they were compiled for;
    grad enabled): they ran the generic compiled code, not the kernels."""
    with _lock:
        return dict(_generic)

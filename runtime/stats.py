"""Counters of eager fallbacks after guard failures, per compiled function."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_fallbacks: dict[str, int] = {}


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

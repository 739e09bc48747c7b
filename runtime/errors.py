"""User-facing error and warning types of the torchscribe runtime."""

from __future__ import annotations


class TorchscribeError(RuntimeError):
    """A problem the user must fix: a missing or stale compiled module in strict mode,
    a failed guard in strict mode, or a bad TORCHSCRIBE setting.

    The message is one self-contained paragraph; raise it ``from None`` so users see no
    internal traceback.
    """


class TorchscribeWarning(UserWarning):
    """The runtime fell back to eager execution (or ran a module generated with another
    torch). Emitted once per source file (or per compiled function for guard failures)."""

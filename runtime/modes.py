"""Run mode: ``on`` (compiled when fresh, else eager with a warning), ``off`` (always eager),
``strict`` (anything but fresh compiled code is an error).

The TORCHSCRIBE environment variable is read on every call (about 0.1 us) so tests and
launchers can change it at any time; ``mode(...)`` overrides it for
the current thread / async context.
"""

from __future__ import annotations

import contextvars
import os
from types import TracebackType

from runtime.errors import TorchscribeError

ENV_VAR = "TORCHSCRIBE"
MODES = ("on", "off", "strict")

# A contextvar rather than a global: an override in one thread or task never leaks into another.
_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("torchscribe_mode", default=None)


# os.environ.get encodes the key on every read (half the cost of a compiled call's dispatch):
# read the mapping behind os.environ (kept in step with it) by its encoded key instead.
_ENVIRON = getattr(os.environ, "_data", None)
_KEY = os.environ.encodekey(ENV_VAR) if _ENVIRON is not None else ENV_VAR  # type: ignore[attr-defined]
_SETTINGS = {os.environ.encodevalue(v) if _ENVIRON is not None else v: v  # type: ignore[attr-defined]
             for v in ("", "on", "off", "strict")}


# The same read without a Python call, for the dispatcher, which makes it on every compiled call
# (a call of current_mode() costs 0.4 us there in strict mode, 1.2 us from the environment,
# measured inside a model's call): `override()` is the override or None; else
# `MODE_OF.get(environ_get(KEY, UNSET))` is the mode the variable sets, or None for anything
# current_mode() must look at itself (an invalid setting, which it reports).
override = _override.get
MODE_OF = {raw: "on" if value in ("", "on") else value for raw, value in _SETTINGS.items()}
environ_get = _ENVIRON.get if _ENVIRON is not None else (lambda key, default: None)
KEY = _KEY
UNSET = _KEY[:0]


def current_mode() -> str:
    """The mode in force now: a ``mode()`` override, else TORCHSCRIBE, else ``"on"``."""
    override = _override.get()
    if override is not None:
        return override
    raw = _SETTINGS.get(_ENVIRON.get(_KEY, _KEY[:0]) if _ENVIRON is not None else os.environ.get(ENV_VAR, ""))
    if raw == "" or raw == "on":
        return "on"
    if raw is not None:
        return raw
    raw = os.environ.get(ENV_VAR, "")
    raise TorchscribeError(
        f"{ENV_VAR}={raw!r} is not a valid setting; use one of 'on' (the default: compiled "
        f"code when it is fresh, else eager with a warning), 'off' (always eager) or 'strict' "
        f"(a missing or stale compiled module, or a failed guard, is an error)."
    )


class mode:
    """``with runtime.mode("off"): ...`` runs the block in the given mode, whatever TORCHSCRIBE says."""

    def __init__(self, value: str) -> None:
        if value not in MODES:
            raise TorchscribeError(
                f"runtime.mode({value!r}): the mode must be one of {', '.join(map(repr, MODES))}."
            )
        self.value = value
        self._tokens: list[contextvars.Token[str | None]] = []

    def __enter__(self) -> mode:
        # A stack of tokens lets the same object be entered again while already active.
        self._tokens.append(_override.set(self.value))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _override.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"mode({self.value!r})"

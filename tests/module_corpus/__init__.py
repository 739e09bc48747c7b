"""Small nn.Modules written in the styles model code on GitHub uses (numpy helpers, module-level
constants and helper functions, base classes, Sequential subclasses, weight_norm'd convolutions,
staticmethod layers, `*args` forwards, a tensor or a tuple returned), for
tests/test_module_corpus.py. Each file lists its cases in `CASES`: (name, factory), the factory
returning the module and its example inputs. Our own code, written for these tests."""

from __future__ import annotations

from typing import Any, Callable

from module_corpus import attention, audio, misc, vision

CASES: list[tuple[str, Callable[[], tuple[Any, tuple]]]] = [
    (f"{m.__name__.rpartition('.')[2]}.{name}", factory)
    for m in (vision, audio, attention, misc) for name, factory in m.CASES
]

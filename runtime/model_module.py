"""The model's module, for Python code that permissive mode kept in a compiled module: it reads the
module-level names of its file (`logger`, helper functions, constants) from it, live. Generated
modules call `_guards.model_module(__name__, SOURCE_FILE)`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


class _ModelModule:
    """The model's module, found on first use: Python code that permissive mode kept reads the
    module-level names of its file (`logger`, helper functions, constants) from it, live."""

    def __init__(self, name: str | None, compiled_name: str, source_file: str) -> None:
        self._names = (name, compiled_name, source_file)
        self._module: Any = None

    def _find(self) -> Any:
        name, compiled_name, source_file = self._names
        if name is None:  # the file this module was generated from: its sibling (pkg.cell for pkg.cell_compiled)
            package = compiled_name.rpartition(".")[0]
            stem = source_file.rpartition(".")[0] or source_file
            name = f"{package}.{stem}" if package else stem
            main = sys.modules.get("__main__")
            if name not in sys.modules and getattr(main, "__file__", None) and \
                    os.path.basename(main.__file__) == source_file:  # type: ignore[union-attr]
                return main
        try:
            return sys.modules.get(name) or importlib.import_module(name)
        except ImportError as error:
            raise ImportError(f"compiled code kept as Python reads names of module {name}, which cannot be "
                              f"imported ({error}); load the compiled module through @script or script()") from None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = self._find()
        return getattr(self._module, attr)


def model_module(name: str, source_file: str | None = None) -> Any:
    """`model_module("pkg.mod")`; in a module generated next to its model file,
    `model_module(__name__, SOURCE_FILE)`: the model module beside it."""
    if source_file is None:
        return _ModelModule(name, "", "")
    return _ModelModule(None, name, source_file)

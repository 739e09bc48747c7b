"""The compiled module's side of its C++ kernels: build (or load from the cache) the library
from the source text the module holds, and expose each kernel as a function of Python ints and
floats.

Two bindings, the same to the caller. "fastcall": the kernels built into a tiny CPython
extension module with one METH_FASTCALL function each (runtime/pyext.py writes the bindings),
about 0.05 us a call with 14 arguments. "ctypes": the plain library, each kernel a ctypes
function with its argument types declared, about 1.2 us a call (benchmarks/kernel_call.py);
used where Python's headers are not installed (runtime/native.py probes once), and, without a
compiler, where only a ctypes build of these kernels is in the cache."""

from __future__ import annotations

import ctypes
from types import ModuleType

from runtime import native, pyext

_ARG_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int64, "d": ctypes.c_double}


class Library:
    """`Library(source, {"k0_mul_erf": "iipp..."})`: one attribute per kernel; argument kinds
    are "p" (a data pointer, as an int), "i" (int64) and "d" (double; an int is taken too).
    Built when the module is imported, so a missing compiler is reported before any call runs.

    `fastcall`: None (the default) uses the extension module where it can be built or is cached,
    else ctypes; True requires the extension module; False uses ctypes. `binding` says which."""

    binding: str

    def __init__(self, source: str, signatures: dict[str, str], *, fastcall: bool | None = None) -> None:
        if fastcall is None:  # without a compiler, an extension module can still be in the cache
            fastcall = native.python_flags() is not None or native.toolchain() is None
            required = False
        else:
            required = fastcall
        module = _extension_module(source, signatures, required) if fastcall else None
        if module is not None:
            self.binding = "fastcall"
            for name in signatures:
                setattr(self, name, getattr(module, name))
            return
        lib = native.load(source)
        self.binding = "ctypes"
        for name, kinds in signatures.items():
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [_ARG_TYPES[k] for k in kinds]
            setattr(self, name, fn)


def _extension_module(source: str, signatures: dict[str, str], required: bool) -> ModuleType | None:
    name, text = pyext.extension_source(source, signatures)
    try:
        return native.load_extension(text, name)
    except native.CompilerNotFound:
        if required:
            raise
        return None  # no compiler and no extension build cached: a ctypes build may be

"""The compiled module's side of its C++ kernels: build (or load from the cache) the library
from the source text the module holds, and expose each kernel as a ctypes function with its
argument types declared, so a call converts its Python ints and floats without guessing."""

from __future__ import annotations

import ctypes

from runtime import native

_ARG_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int64, "d": ctypes.c_double}


class Library:
    """`Library(source, {"k0_mul_erf": "iipp..."})`: one attribute per kernel; argument kinds
    are "p" (a data pointer), "i" (int64) and "d" (double). Built when the module is imported,
    so a missing compiler is reported before any call runs."""

    def __init__(self, source: str, signatures: dict[str, str]) -> None:
        lib = native.load(source)
        for name, kinds in signatures.items():
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [_ARG_TYPES[k] for k in kinds]
            setattr(self, name, fn)

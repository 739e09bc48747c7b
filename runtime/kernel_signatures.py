"""What each kernel of a library takes, read off its C++ declarations: the record both bindings
work from (runtime/kernels.py's ctypes functions, runtime/pyext.py's CPython functions)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Arg:
    """What one argument of a kernel's Python function stands for: "i" an int64_t, "d" a double,
    "p" a data pointer (a tensor, or an address as an int) and, where the parameters after the
    pointer `x` are named `x_s<k>`, the strides of those dims `k` of the tensor (`strides`).
    `role`: "size" for the leading sizes `n0`, `n1`, ... (one tuple of them may stand for them
    all: `_lib.k(x.shape, ...)`), "out" for an output `out<k>` (the function returns them)."""

    kind: str
    strides: tuple[int, ...] = ()
    role: str = ""


# A kernel's declaration: `extern "C" void <name>(<parameters>)`, the parameters on any number of
# lines (comments are taken out first).
_DECLARATION = re.compile(r'extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# A data pointer as kernels.h spells a kernel's parameters: `ts_in<float>`, `ts_out<uint16_t>`.
_POINTER = re.compile(r"ts_(in|out)<\w+>")
# A parameter's C type (without const and __restrict), as the kind the bindings convert it to.
_KINDS = {"int64_t": "i", "double": "d"}


def kernel_signatures(source: str) -> dict[str, tuple[Arg, ...]]:
    """Each `extern "C"` function of `source` and what its Python function takes, in order: a
    data pointer (any `T*`, `ts_in<T>` or `ts_out<T>`), an int64_t, a double, each one
    argument, but that the int64_t parameters right after a pointer `x` named `x_s<k>` are the
    strides of its tensor, which the pointer's argument gives (`x.stride(k)`). The leading
    int64_t parameters `n0`, `n1`, ... are the sizes (a tuple may give them all), the pointers
    `out0`, ... the outputs, which the function returns (one, or a tuple of them; None where
    there are none). The declarations are the record of what a launcher passes; a parameter of
    another type is an error (the bindings convert these three only)."""
    found = {}
    for match in _DECLARATION.finditer(_COMMENT.sub("", source)):
        name, args, pointer = match[1], [], None  # (pointer: the name of the last pointer parameter)
        for param in filter(None, (p.strip() for p in match[2].split(","))):
            words = param.replace("*", " * ").split()
            base = " ".join(w for w in words[:-1] if w not in ("const", "__restrict", "__restrict__"))
            kind = "p" if "*" in words or _POINTER.fullmatch(base) else _KINDS.get(base)
            if kind is None or words.count("*") > 1:
                raise ValueError(f"kernel {name}: parameter `{param}` is not a pointer, an int64_t or a double")
            stride = re.fullmatch(r"(\w+)_s(\d+)", words[-1])
            if kind == "i" and stride and stride[1] == pointer:
                args[-1] = Arg("p", args[-1].strides + (int(stride[2]),), args[-1].role)
                continue
            size = kind == "i" and words[-1] == f"n{len(args)}" and all(a.role == "size" for a in args)
            role = "size" if size else "out" if kind == "p" and re.fullmatch(r"out\d+", words[-1]) else ""
            args.append(Arg(kind, (), role))
            pointer = words[-1] if kind == "p" else None
        found[name] = tuple(args)
    return found

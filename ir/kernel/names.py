"""Kernel names: what a kernel computes, in the source's words.

A kernel is named after the calls its ops come from, read off each op's location in the source:
`out = self.relu(self.bn1(out))` fused is `bn1_relu`, `F.gelu(self.fc1(x))` is `fc1_gelu`,
`torch.softmax(x, -1)` is `softmax` (the module attribute, function or method called, in the
order the kernel computes them, at most MAX_PARTS). Operators name nothing; a kernel of
operators alone, or without locations in a known source, is named after its ops
(`mul_add`). A name that a compiled module binds otherwise (a Python builtin or keyword, a
runtime name) takes the kernel's ops after it (`sum_div`, not `sum`); a name taken in the same
function gets a number (`bn1_relu_2`). codegen/kernel_names.py makes names unique across a module's
functions the same way. The C++ function of kernel `k` is `k_kernel` (codegen/cpp_kernels.py),
so no name here meets the C library's.

Names depend only on the source text at the ops' locations and the order of the ops: the same
program is named the same on every run and machine.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from typing import Iterable

from ir.core.graph import Loc, Operation

MAX_PARTS = 3
# What a compiled module binds at top level besides its kernels and functions (codegen/names.py,
# codegen/module.py, codegen/kernel_launchers.py), and Python's own names.
RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | frozenset({
    "torch", "F", "math", "Tensor", "Optional", "COMPILED", "KERNELS_CPP", "triton", "tl", "struct",
})


def reserved(name: str) -> bool:
    """Whether a kernel may not be called `name`: a name the module binds otherwise (a name
    with a leading underscore is the runtime's, `ts_`/`TS_` its Triton helpers')."""
    return name in RESERVED or name.startswith(("_", "ts_", "TS_")) or name.isupper()


def span_text(loc: Loc, source_lines: dict[str, list[str]]) -> str | None:
    """The source text `loc` spans (to the end of its line where it has no end)."""
    lines = source_lines.get(loc.file)
    if lines is None or not 1 <= loc.line <= len(lines):
        return None
    if loc.end_line < loc.line or loc.end_line > len(lines):
        return lines[loc.line - 1][loc.col:]
    if loc.end_line == loc.line:
        return lines[loc.line - 1][loc.col:loc.end_col]
    middle = lines[loc.line:loc.end_line - 1]
    return "\n".join([lines[loc.line - 1][loc.col:], *middle, lines[loc.end_line - 1][:loc.end_col]])


_CALLEE = re.compile(r"\s*((?:[A-Za-z_]\w*\s*\.\s*)*[A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)?\(")


def called_name(loc: Loc | None, source_lines: dict[str, list[str]]) -> str | None:
    """The name of what the call at `loc` calls: `bn1` for `self.bn1(out)`, `gelu` for
    `F.gelu(h)`, `softmax` for `x.softmax(-1)`, `blocks` for `self.blocks[i](x)`, `down` for
    `down.forward(y)`; None where `loc` is no call (an operator, a
    statement) or its text is not known."""
    if loc is None:
        return None
    text = span_text(loc, source_lines)
    if text is None:
        return None
    if loc.end_line < loc.line:  # (a location without its end: the text runs to the end of the line)
        match = _CALLEE.match(text)
        parts = [part.strip() for part in match[1].split(".")] if match else []
        name = parts[-2] if len(parts) > 1 and parts[-1] == "forward" else parts[-1] if parts else None
    else:
        try:
            node = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:  # (a statement: `out += identity`)
            node = None
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr == "forward":  # `down.forward(y)`: the module's name
            func = func.value
        if isinstance(func, ast.Subscript):  # `self.blocks[i](x)`: the container's name
            func = func.value
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    name = (name or "").lstrip("_")
    return name if name.isidentifier() and name.isascii() else None


class KernelNamer:
    """Names the kernels of one function (see the module docstring); `taken`: names the
    function's kernels have already."""

    def __init__(self, source_lines: dict[str, list[str]], taken: Iterable[str] = ()) -> None:
        self.source_lines = source_lines
        self.taken = set(taken)

    def take(self, fused: list[Operation], ops: list[str]) -> str:
        """The name of a kernel of the source ops `fused` (in the order it computes them);
        `ops`: what it computes, in the IR's words (`add`, `sqrt`), for a kernel that calls
        nothing by name."""
        parts = list(dict.fromkeys(n for n in (called_name(op.loc, self.source_lines) for op in fused) if n))
        parts = parts[:MAX_PARTS] or list(dict.fromkeys(ops))[:MAX_PARTS]
        more = [o for o in dict.fromkeys(ops) if o not in parts]
        while reserved("_".join(parts)) and more:  # (`sum` is Python's: `sum_div`)
            parts.append(more.pop(0))
        return self.unique("_".join(parts) if not reserved("_".join(parts)) else "_".join(["kernel", *parts]))

    def unique(self, base: str) -> str:
        """`base`, or `base_2`, `base_3`, ... where it is taken."""
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name


__all__ = ["KernelNamer", "MAX_PARTS", "RESERVED", "called_name", "reserved", "span_text"]

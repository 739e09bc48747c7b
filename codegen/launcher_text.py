"""What the C++ and the Triton launchers of a kernel both say: the iteration sizes as Python
expressions, and the docstring naming the ops the kernel fuses."""

from __future__ import annotations

from pathlib import PurePath

from ir import ops
from ir.primitives import op_name
from ir.types import TensorType


def size_texts(k: ops.KernelOp, shape: tuple) -> list[str] | None:
    """The sizes of `shape` as Python: literals, symbolic ones (`B`, `64*B`) read from an input
    that has that size there; None when no input has it."""
    n_in = k.attributes["inputs"]
    rank = len(shape)
    parts = []
    for i, d in enumerate(shape):
        if type(d) is int:
            parts.append(str(d))
            continue
        found = None
        for j, v in enumerate(k.operands[:n_in]):
            t = v.type
            assert isinstance(t, TensorType) and t.shape is not None
            at = i - (rank - len(t.shape))
            if at >= 0 and t.shape[at] == d:
                found = f"in{j}.shape[{at}]"
                break
        if found is None:
            return None
        parts.append(found)
    return parts


def describe(k: ops.KernelOp, source_file: str | bool, backend: str = "") -> str:
    """`Fused: add, tanh from cell.py:15.` (`Fused (Triton): ...` with a backend named)."""
    names = ", ".join(dict.fromkeys(op.attributes["kind"] if isinstance(op, ops.ReduceOp) else op_name(op)
                                    for op in k.body.ops if not isinstance(op, (ops.YieldOp, ops.ConstantOp))))
    lines: dict[str, set[int]] = {}
    for op in k.body.ops:
        if op.loc is not None:
            lines.setdefault(PurePath(op.loc.file).name, set()).add(op.loc.line)
    where = ""
    if lines and source_file:
        where = " from " + ", ".join(f"{file}:" + ",".join(str(n) for n in sorted(found))
                                     for file, found in lines.items())
    return f"Fused{f' ({backend})' if backend else ''}: {names}{where}."


__all__ = ["size_texts", "describe"]

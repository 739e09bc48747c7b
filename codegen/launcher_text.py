"""What the C++ and the Triton code of a kernel both say: the iteration sizes as Python
expressions, the docstring naming the ops the kernel fuses, and the comments quoting the source
line each run of statements computes (`with_source`)."""

from __future__ import annotations


from ir import ops
from ir.core import Loc, Operation
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


def source_text(loc: Loc | None, source_lines: dict[str, list[str]] | None) -> str | None:
    """The source line at `loc`, stripped; None where it is not known. Generated code quotes
    the source rather than naming line numbers, which every line inserted above would change."""
    if loc is None or source_lines is None:
        return None
    lines = source_lines.get(loc.file)
    if lines is None or not 1 <= loc.line <= len(lines):
        return None
    return lines[loc.line - 1].strip() or None


def source_comment(loc: Loc | None, source_lines: dict[str, list[str]] | None, marker: str) -> str | None:
    """A comment quoting the source line at `loc` (`// out = self.bn1(out)`, `marker` "//" or
    "#"); None where the line is not known."""
    quote = source_text(loc, source_lines)
    if quote is None:
        return None
    # (a line ending in a backslash would continue a C++ comment; three quotes would end the raw
    # string that holds the C++)
    return f"{marker} {quote.rstrip(chr(92)).rstrip()}".replace('"' * 3, "'" * 3)


def with_source(items: list[tuple[Operation | None, str]], source_lines: dict[str, list[str]] | None,
                marker: str) -> list[str]:
    """The statements of `items` (each with the op it computes, or None: a load, a store), each
    run of them from one source line preceded by a comment quoting that line (`source_comment`);
    only where the line changes, not per statement."""
    out: list[str] = []
    last = None
    for op, text in items:
        loc = op.loc if op is not None else None
        if loc is not None and (loc.file, loc.line) != last:
            comment = source_comment(loc, source_lines, marker)
            if comment is not None:
                out.append(comment)
                last = (loc.file, loc.line)
        out.append(text)
    return out


QUOTED_LINES = 3  # source lines a kernel's description quotes; past that, how many more


def quoted(locs: list[Loc], source_lines: dict[str, list[str]] | None) -> str:
    """" of `a = ...` and `b = ...`" for the distinct source lines at `locs`, in source order."""
    first = {(loc.file, loc.line): loc for loc in sorted(locs, key=lambda loc: (loc.file, loc.line))}
    texts = list(dict.fromkeys(t for t in (source_text(loc, source_lines) for loc in first.values()) if t))
    if not texts:
        return ""
    shown = [f"`{t}`" for t in texts[:QUOTED_LINES]]
    if len(texts) > QUOTED_LINES:
        more = len(texts) - QUOTED_LINES
        shown.append(f"{more} more line{'s' if more > 1 else ''}")
    return " of " + (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1])


def describe(k: ops.KernelOp, source_lines: dict[str, list[str]] | None, backend: str = "") -> str:
    """`Fused: add, tanh of `h = torch.tanh(x + 1)`.` (`Fused (Triton): ...` with a backend named)."""
    names = ", ".join(dict.fromkeys(op.attributes["kind"] if isinstance(op, ops.ReduceOp) else op_name(op)
                                    for op in k.body.ops if not isinstance(op, (ops.YieldOp, ops.ConstantOp))))
    where = quoted([op.loc for op in k.body.ops if op.loc is not None], source_lines)
    return f"Fused{f' ({backend})' if backend else ''}: {names}{where}."


def docstring(text: str) -> str:
    """`text` as a one-line docstring: a backslash (a quoted source line continued with `\\`)
    and a triple quote in it escaped, so the docstring says exactly `text`."""
    return '"""' + text.replace("\\", "\\\\").replace('"""', '\\"""') + '"""'


__all__ = ["docstring", "size_texts", "describe", "quoted", "source_comment", "source_text", "with_source"]

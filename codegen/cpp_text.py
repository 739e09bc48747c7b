"""The layout of C++ kernel text: calls and declarations filled into lines of WIDTH columns,
a lambda passed to a helper of kernels.h, runs of declarations joined into one, and the
parentheses an expression needs as an operand."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Iterator

from codegen.writer import Writer


WIDTH = 100  # columns a parameter or argument list fills before it wraps


def wrapped(head: str, items: list[str], tail: str = "", indent: str = "") -> list[str]:
    """`head(items)tail` as C++ lines: one where it fits in WIDTH columns, else the items filled
    onto lines of their own, indented four spaces more than `indent`."""
    return [indent + line for line in _wrapped(head, items, tail, len(indent))]


def write_wrapped(w: Writer, head: str, items: list[str], tail: str = "") -> None:
    """`wrapped` at the writer's depth, filling the columns left there."""
    w.extend(_wrapped(head, items, tail, len(w.prefix)))


def _wrapped(head: str, items: list[str], tail: str, column: int) -> list[str]:
    """`wrapped`'s lines without their indentation, `column` wide."""
    one = f"{head}({', '.join(items)}){tail}"
    if column + len(one) <= WIDTH or not items:
        return [one]
    lines, line, pad = [f"{head}("], "", "    "
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else f"){tail}")
        if line and column + len(pad) + len(line) + 1 + len(piece) > WIDTH:
            lines.append(pad + line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return lines + [pad + line]


@contextmanager
def lambda_call(w: Writer, callee: str, items: list[str], params: list[str], own: list[str] = [],
                after: str = "") -> Iterator[None]:
    """`callee(items, [&](params) {`, what is written inside, `});`: the kernel's code as the
    lambda a helper of kernels.h runs (and inlines: TS_ROWS), the call wrapped at WIDTH columns,
    the lambda's brace ending it; `own`, what it captures by value (a gatherer `g0`: each
    thread's copy its own); `after`, what follows the lambda's parameters (` TS_INLINE -> float`)."""
    head = _wrapped(callee, items + [f"[{', '.join(['&', *own])}]({', '.join(params)}){after}"], " {", len(w.prefix))
    head[-1] = head[-1][:-len(") {")] + " {"
    with w.block(*head, close="});"):
        yield


def bare_arguments(text: str) -> str:
    """`text` without the parentheses around a whole argument of a call (`std::sqrt((x + e))`
    is `std::sqrt(x + e)`): a folded value is parenthesized for the operator it may meet."""
    chars = list(text)
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for i, c in enumerate(chars):
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            pairs[stack.pop()] = i
    drop = set()
    for start, end in pairs.items():
        before = text[:start].rstrip()
        if before.endswith(("(", ",")) and text[end + 1:end + 2] in (")", ",") \
                and (not before.endswith("(") or re.search(r"[\w>]\($", before)):
            drop |= {start, end}
    return "".join(c for i, c in enumerate(chars) if i not in drop)


def atomic(text: str) -> bool:
    """Whether a C++ expression reads as one operand: a name, a literal or a call (`std::sqrt(x)`,
    `ts_max(a, b)`), or one in parentheses."""
    if re.fullmatch(r"[\w.:]+", text):
        return True
    head = re.match(r"[\w:<>]*\(", text)
    if head is None or not text.endswith(")"):
        return False
    depth = 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and i >= head.end() - 1:
            return i == len(text) - 1
    return False


def grouped(index: str) -> str:
    """`index` as an operand of `*`: in parentheses where it is a sum."""
    return f"({index})" if " " in index else index


# One declaration `const T name = value;` of a line (no pointer type: `const auto* p0 = a, p1 = b`
# would not declare p1 a pointer; no comment after it).
_DECLARATION = re.compile(r"( *)(const [\w:<>]+) (\w+) = ([^;]*);")


def joined_declarations(lines: list[str]) -> list[str]:
    """Runs of declarations of one type, one a line, as one declaration of several names filled
    into lines of WIDTH columns: `const float v1 = a0 + 1e-05f, v2 = std::sqrt(v1), ...;`, a
    chain of values read left to right (a batch norm's six statements on two lines). A comment,
    a store or a loop between them ends a run, so each stays under the source line it quotes."""
    out: list[str] = []
    run: list[re.Match[str]] = []

    def flush() -> None:
        if run:
            out.extend(filled(f"{run[0][1]}{run[0][2]} ", [f"{m[3]} = {m[4]}" for m in run], ";"))
            run.clear()

    for line in lines:
        match = _DECLARATION.fullmatch(line)
        if match is None or (run and (match[1], match[2]) != (run[0][1], run[0][2])):
            flush()
        if match is None:
            out.append(line)
        else:
            run.append(match)
    flush()
    return out


def filled(head: str, items: list[str], tail: str, separator: str = ",", column: int = 0) -> list[str]:
    """`head` and the `items` (each but the last followed by `separator`), then `tail`, filled
    into lines of WIDTH columns from `column` (continuation lines indented four spaces more than
    `head`)."""
    pad = " " * (len(head) - len(head.lstrip()) + 4)
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (separator if i < len(items) - 1 else tail)
        if line.strip() and line != head and column + len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = pad + piece
        else:
            line = line + piece if line == head else f"{line} {piece}"
    return lines + [line]


__all__ = ["WIDTH", "wrapped", "write_wrapped", "lambda_call", "bare_arguments", "atomic", "grouped", "joined_declarations", "filled"]

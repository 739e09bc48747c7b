"""Permissive mode in the lowering: what does not lower stays Python (a `py.opaque` op).

Lowering a statement or expression either succeeds or raises a UserError. In permissive mode the
ops it built so far are taken back and the source text goes into one `py.opaque` op instead:
its operands are the locals the text reads, its results the locals it binds (or, for an
expression, its value), all of them plain Python objects (type Any) from then on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from ir.core import ops
from ir.core.graph import Block, Value
from ir.core.types import ANY
from transpiler.context import Break
from transpiler.diagnostics import UserError
from transpiler.env import Env
from transpiler.opaque import WRITE, analyze, may_change

if TYPE_CHECKING:
    from ir.core.builder import Builder
    from transpiler.context import FileContext
    from transpiler.source import SourceFile


# Expressions that need no parentheses inside any other.
ATOMS = (cst.Call, cst.Attribute, cst.Subscript, cst.Name, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp,
         cst.SetComp, cst.GeneratorExp, cst.SimpleString, cst.FormattedString, cst.Integer, cst.Float)


@dataclass
class Mark:
    block: Block
    size: int
    env: Env
    returned: int
    breaks: int
    epoch: int
    loop_depth: int


class KeptAsPython:
    """Mixin of FunctionLowerer."""

    ctx: FileContext
    source: SourceFile
    node: cst.FunctionDef
    b: Builder
    env: Env
    returned_types: list
    loop_depth: int
    empty_stars: set[Value]
    star_items: dict[Value, dict[str, Value]]
    # How many py.opaque ops came before: attribute reads of a module after one are read again
    # and not assumed unchanged (the Python code may have set them).
    epoch: int = 0

    def mark(self) -> Mark:
        return Mark(self.b.block, len(self.b.block.ops), self.env.copy(), len(self.returned_types),
                    len(self.ctx.breaks), self.epoch, self.loop_depth)

    def rollback(self, mark: Mark) -> None:
        """Take back what lowering built since `mark`."""
        assert self.b.block is mark.block
        for op in reversed(mark.block.ops[mark.size:]):
            op.erase()  # later ops first: only ops being removed use their results
        self.env = mark.env
        del self.returned_types[mark.returned:]
        del self.ctx.breaks[mark.breaks:]
        self.epoch = mark.epoch
        self.loop_depth = mark.loop_depth  # (a loop's lowering that raised did not leave it)

    def kept_as_python(self, node: cst.CSTNode, error: UserError, expression: bool) -> Value | None:
        """Put `node` in the function as Python text; raise `error` when it cannot stay Python.
        Returns the expression's value (None for a statement)."""
        bound = {n for n, v in self.env.values.items() if isinstance(v, Value) and "." not in n}
        code = analyze(self.source, node, self.node, bound)
        if code.leaves is not None:
            raise UserError(f"{error.diagnostic.message}; and it cannot stay as Python: it has {code.leaves}",
                            error.diagnostic.loc, error.diagnostic.hint) from None
        if not expression:  # a `**kwargs` dict it may change: what it holds after is Python's
            for name in code.reads:
                value = self.env.get(name)
                if (value in self.empty_stars or value in self.star_items) and name not in code.writes \
                        and may_change(node, name):
                    code.writes.append(name)
                    code.occurrences = [(*o[:4], WRITE) if o[3] == name else o for o in code.occurrences]
        operands: list[Value] = []
        for name in code.reads:
            value = self.env.get(name)
            if not isinstance(value, Value):
                raise error
            operands.append(value)
        reason = error.diagnostic.message
        results = [ANY] if expression else [ANY] * len(code.writes)
        names = [None] if expression else list(code.writes)
        attrs = {
            "kind": "expr" if expression else "stmt",
            "lines": tuple(code.lines),
            "raw_lines": tuple(code.raw_lines),
            "reads": tuple(code.reads),
            "writes": () if expression else tuple(code.writes),
            "occurrences": tuple(code.occurrences),
            "bare": tuple(code.bare),
            "module": self.source.module_name or "",
            "reason": reason,
        }
        if expression and isinstance(node, ATOMS):
            attrs["atom"] = True  # binds as tightly as a name: no parentheses where it is used
        with self.b.located(self.source.loc(node)):
            op = self.b.insert(ops.OpaqueOp(operands, results, attrs, result_names=names))
        self.epoch += 1
        self.ctx.breaks.append(Break(self.source.loc(node), reason))
        if expression:
            return op.result
        for name, value in zip(code.writes, op.results):
            self.env.set(name, value)
        return None



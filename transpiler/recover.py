"""Strict mode: lowering goes on past an error, so that one run reports every error of a file.

An expression that fails to lower stands for a value of type ERROR (ir/core/types.py); a statement
that fails is left out and the names it would bind hold such values. ERROR fits every type, so
what uses one lowers silently, and an error raised while lowering code that reads one is not
reported: it only follows from the first (`y = bad(x); z = y + 1` reports `bad` alone). The
function's lowering raises every diagnostic at its end (FunctionLowerer.lower), and nothing of it
is kept: passes never see an ERROR value. Permissive mode keeps such code as Python instead
(lower_python.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import ERROR
from transpiler.diagnostics import Diagnostic, UserError
from transpiler.syntax import assigned_names

if TYPE_CHECKING:
    from ir.core.builder import Builder
    from transpiler.context import FileContext
    from transpiler.env import Env
    from transpiler.source import SourceFile


class Recovery:
    """Mixin of FunctionLowerer."""

    ctx: FileContext
    source: SourceFile
    b: Builder
    env: Env
    node: cst.FunctionDef
    diagnostics: list[Diagnostic]  # what this function's lowering found so far
    error_reads: int = 0  # how many times an expression gave an ERROR value (see `follows`)

    @property
    def recovering(self) -> bool:
        return not self.ctx.permissive

    def error_value(self) -> Value:
        return self.b.create(ops.UninitializedOp, [], [ERROR]).result

    def follows(self, node: cst.CSTNode, reads_before: int) -> bool:
        """Whether an error in `node` may only follow from an earlier one: the lowering read an
        ERROR value since `reads_before`, or `node` names a local holding one."""
        if self.error_reads > reads_before:
            return True
        found = False
        env = self.env

        class Names(cst.CSTVisitor):
            def visit_Name(self, name: cst.Name) -> None:
                nonlocal found
                value = env.get(name.value)
                found = found or isinstance(value, Value) and value.type == ERROR

            def visit_Attribute(self, attr: cst.Attribute) -> bool:
                attr.value.visit(self)  # (not the attribute's own name)
                return False

            def visit_Arg(self, arg: cst.Arg) -> bool:
                arg.value.visit(self)  # (not a keyword's name)
                return False

        node.visit(Names())
        return found

    def record(self, error: UserError, node: cst.CSTNode, reads_before: int) -> None:
        self.keep(error, self.follows(node, reads_before))

    def keep(self, error: UserError, follows: bool = False) -> None:
        """Record `error`'s diagnostics; where it `follows` from an earlier error, only those of
        other functions (a callee that failed to lower, whatever it was passed). A message that
        names the ERROR type is about a value an earlier error made."""
        own = self.source.loc(self.node)
        for d in error.diagnostics:
            elsewhere = d.loc.file != own.file or not own.line <= d.loc.line <= own.end_line
            if (elsewhere or not follows) and str(ERROR) not in d.message:
                self.diagnostics.append(d)

    def go_on(self, error: UserError, node: cst.CSTNode | None = None) -> None:
        """Raise `error`, or in strict mode record it (unless `node` reads an ERROR value) and
        return: the caller goes on as if what failed were ERROR (a loop over a tensor still has
        its body checked; a name of two types after an if is ERROR, the others as they are)."""
        if not self.recovering:
            raise error
        self.keep(error, node is not None and self.follows(node, self.error_reads))

    def failed_statement(self, stmt: cst.CSTNode, error: UserError, reads_before: int) -> None:
        """After `stmt` raised `error` (and what it built was taken back): record the error, bind
        the names it assigns to ERROR values, and go on with the next statement. A compound
        statement's body reported its own errors already: only its header may cause this one."""
        header = stmt.test if isinstance(stmt, (cst.If, cst.While)) else stmt.iter if isinstance(stmt, cst.For) else None
        if header is not None:
            self.keep(error, self.follows(header, self.error_reads))
        else:
            self.record(error, stmt, reads_before)
        for name in sorted(assigned_names([stmt])):  # type: ignore[list-item]
            self.env.set(name, self.error_value())

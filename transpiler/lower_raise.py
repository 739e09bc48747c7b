"""Lowering of `raise`, `assert` and `with` statements: `RaiseLowering`, a mixin of
FunctionLowerer. A `raise` of a builtin exception class becomes `py.raise`; an `assert` raises
where its condition is false and refines what it tests past it; `with torch.no_grad():` is its
body, under an entry check that autograd records nothing."""

from __future__ import annotations

import builtins

import libcst as cst

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import ANY, BOOL
from transpiler.check import WITH_HINT, turns_grad_off
from transpiler.diagnostics import UserError
from transpiler.env import Exits, Raises
from transpiler.syntax import statements_of


class RaiseLowering:
    """Mixin of FunctionLowerer: `raise`, `assert`, `with`."""

    def raise_stmt(self, node: cst.Raise) -> Raises:
        """`raise E`, `raise E(args)` for a builtin exception class E."""
        if node.exc is None:
            raise self.error(node, "a bare `raise` is not supported", "raise an exception explicitly: raise RuntimeError(\"...\")")
        if node.cause is not None:
            raise self.error(node.cause, "`raise ... from ...` is not supported", "raise the exception without `from`")
        exc = node.exc
        called = isinstance(exc, cst.Call)
        cls_node = exc.func if isinstance(exc, cst.Call) else exc
        name = self.exception_class(cls_node)
        args: list[Value] = []
        kwnames: list[str] = []
        if isinstance(exc, cst.Call):
            positional, kwnames, kwargs, _ = self.call_arguments(exc)
            args = positional + kwargs
        attrs: dict = {"exc": name, "called": called}
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        self.op(ops.RaiseOp, args, [], **attrs)
        return Raises()

    def exception_class(self, node: cst.BaseExpression) -> str:
        qual = self.source.global_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if isinstance(node, cst.Name) and self.env.get(node.value) is not None:
            qual = None
        found = getattr(builtins, qual[len("builtins."):], None) if qual and qual.startswith("builtins.") else None
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            raise self.error(node, "only builtin exception classes can be raised in compiled code",
                             "raise one of Python's exceptions (ValueError, RuntimeError, ...)")
        return found.__name__

    def assert_stmt(self, node: cst.Assert) -> Exits:
        """`assert cond, msg`: raise AssertionError(msg) where cond is false, msg evaluated only
        then, as Python does (and TorchScript). Past it, `x is not None` in cond holds. A cond
        known now folds (specialization folds one on sizes known at entry); `assert False`
        always raises, like a raise statement."""
        with self.at(node.test):
            cond = self.condition_of(self.expr(node.test), node.test)
        known = self.known_bool(cond)
        if known is False:
            with self.at(node):
                message = [self.expr(node.msg)] if node.msg is not None else []
                self.op(ops.RaiseOp, message, [], exc="AssertionError", called=bool(message))
            return Raises()
        if known is not True:
            if_op = self.new_if(self.negated(cond), [])
            saved = self.env
            self.env = saved.copy()  # nothing the message computes is seen after the assert
            with self.b.at_end_of(if_op.then_block), self.at(node):
                message = [self.expr(node.msg)] if node.msg is not None else []
                self.op(ops.RaiseOp, message, [], exc="AssertionError", called=bool(message))
                self.b.create(ops.YieldOp, [])
            with self.b.at_end_of(if_op.else_block):
                self.b.create(ops.YieldOp, [])
            self.env = saved
        self.apply_refinements(self.refinements(node.test)[0], node.test)
        return Exits()

    def negated(self, cond: Value) -> Value:
        """`not cond`; `y is None` for `y is not None` (and `==`/`!=`, between values that are
        not Python objects of unknown type) so that the code reads as written."""
        owner = cond.owner
        inverse = {"is": "is not", "is not": "is", "==": "!=", "!=": "=="}
        if isinstance(owner, ops.CompareOp) and owner.attributes["op"] in inverse \
                and not any(v.type == ANY for v in owner.operands):
            return self.op(ops.CompareOp, list(owner.operands), [BOOL], op=inverse[owner.attributes["op"]]).result
        return self.op(ops.UnaryOp, [cond], [BOOL], op="not").result

    def with_stmt(self, node: cst.With) -> Exits:
        """`with torch.no_grad():` (or `inference_mode()`): compiled code runs only where
        autograd records nothing, so the block is its body; the entry checks that it does
        (py.check_no_autograd; script(instance) checks every call already). In code for
        autograd (the generic code; script()'s for calls autograd records) it stays Python."""
        for item in node.items:
            qual = self.source.global_name(item.item.func) if isinstance(item.item, cst.Call) else None
            if node.asynchronous is not None or item.asname is not None or not turns_grad_off(qual, item.item):
                raise UserError("with statements are not supported here", self.source.loc(node.items[0]), WITH_HINT)
        if self.ctx.autograd:
            # Code for autograd: the block stays Python, where it switches grad off as in eager
            # (its values stay out of the graph); one that cannot (a `return` in it) keeps the
            # check, and such a call runs eagerly.
            mark = self.mark()
            try:
                self.kept_as_python(node, UserError("a grad-off block runs as written, so that autograd records "
                                                    "none of it", self.source.loc(node.items[0])), expression=False)
                return Exits()
            except UserError:
                self.rollback(mark)
        if not self.ctx.recursive or self.ctx.autograd:
            with self.at(node.items[0]):
                self.op(ops.CheckNoAutogradOp, [], [])
        return self.stmts(statements_of(node.body))

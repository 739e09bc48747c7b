"""Lowering of `return`, `break` and `continue`: `ReturnLowering`, a mixin of FunctionLowerer.
Each gives the Exits its statement list leaves by; the enclosing `if` and loop turn them into flags
and results (lower_branches.py, lower_loops.py)."""

from __future__ import annotations

import libcst as cst

from ir.core.graph import Value
from ir.core.types import TensorType, fits
from transpiler.env import Exits
from transpiler.expr_messages import a_type


class ReturnLowering:
    """Mixin of FunctionLowerer: statements that leave a block early."""

    def return_stmt(self, node: cst.Return) -> Exits:
        value = self.expr(node.value) if node.value is not None else self.b.constant(None)
        value = self.coerce_return(value, node.value or node)
        return Exits(returned=True, ret_value=value, ret_loc=self.source.loc(node))

    def break_stmt(self, node: cst.Break) -> Exits:
        if not self.loop_depth:
            raise self.error(node, "break outside a loop", "break can only leave a for or while loop; use return here")
        return Exits(broke=True)

    def continue_stmt(self, node: cst.Continue) -> Exits:
        if not self.loop_depth:
            raise self.error(node, "continue outside a loop", "continue can only be used inside a for or while loop")
        return Exits(continued=True)

    def coerce_return(self, value: Value, node: cst.CSTNode) -> Value:
        self.returned_types.append(value.type)
        want = self.sig.result
        if fits(value.type, want):  # type: ignore[arg-type]
            return value
        if isinstance(value.type, TensorType) and isinstance(want, TensorType):
            return value
        raise self.error(node, f"returns {a_type(value.type)}, but `{self.sig.sym_name}` is declared to return {want}",
                         "fix the return annotation or the returned value")

"""Lowering of operators: arithmetic (`BINARY_OPS`; `AUG_OPS` for `x += y`), unary operators and
truth values, comparisons (folded where both sides are known), `and`/`or` (short-circuiting),
conditional expressions."""

from __future__ import annotations

import operator
from typing import Any, Callable

import libcst as cst

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    BOOL,
    ERROR,
    FLOAT,
    INT,
    NONE,
    STR,
    DictType,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    unify,
)
from ir.torchapi.signatures import SignatureError, binary_result_type, unary_result_type
from transpiler.expr_messages import a_type

BINARY_OPS: dict[type, str] = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
    cst.Modulo: "%", cst.Power: "**", cst.MatrixMultiply: "@", cst.BitAnd: "&", cst.BitOr: "|",
    cst.BitXor: "^", cst.LeftShift: "<<", cst.RightShift: ">>",
}
AUG_OPS: dict[type, str] = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//", cst.ModuloAssign: "%", cst.PowerAssign: "**",
    cst.MatrixMultiplyAssign: "@", cst.BitAndAssign: "&", cst.BitOrAssign: "|",
    cst.BitXorAssign: "^", cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
}
COMPARE_OPS: dict[type, str] = {
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=",
    cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.Is: "is", cst.IsNot: "is not",
    cst.In: "in", cst.NotIn: "not in",
}
UNARY_OPS: dict[type, str] = {cst.Minus: "-", cst.Plus: "+", cst.BitInvert: "~", cst.Not: "not"}

INT_ARITHMETIC: dict[str, Callable[[int, int], int]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
PYTHON_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class OperatorLowering:
    """Mixin of ExpressionLowering: operators, truth values, comparisons, `and`/`or`, `a if c else b`."""

    def binary_operation(self, node: cst.BinaryOperation) -> Value:
        return self.binary(BINARY_OPS[type(node.operator)], self.expr(node.left), self.expr(node.right), node)

    def binary(self, op: str, lhs: Value, rhs: Value, node: cst.CSTNode) -> Value:
        if op == "+" and any(isinstance(v.type, ListType) and not tuple_when_run(v) for v in (lhs, rhs)) \
                and any(isinstance(v.type, TupleType) for v in (lhs, rhs)):
            raise self.error(node, "`+` of a tuple and a list of ints not known to be sizes (a tuple when it runs) "
                                   "is not supported", "build the tuple from the sizes: (*x.shape[:-1], n)")
        try:
            t = binary_result_type(op, lhs.type, rhs.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None
        result = self.op(ops.BinaryOp, [lhs, rhs], [t], op=op).result
        a, b = self.known(lhs), self.known(rhs)  # type: ignore[attr-defined]
        if t == INT and type(a) is int and type(b) is int and op in INT_ARITHMETIC and not (op in ("//", "%") and b == 0):
            self.live[result] = INT_ARITHMETIC[op](a, b)  # (`self.blocks[i - 1]` in an unrolled loop)
        return result

    def unary(self, node: cst.UnaryOperation) -> Value:
        op = UNARY_OPS[type(node.operator)]
        value = self.expr(node.expression)
        if op == "not":
            value = self.truth(value, node.expression)
            known = self.known_bool(value)
            if known is not None:
                return self.b.constant(not known, BOOL)
            return self.op(ops.UnaryOp, [value], [BOOL], op="not").result
        try:
            t = unary_result_type(op, value.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None
        return self.op(ops.UnaryOp, [value], [t], op=op).result

    def truth(self, value: Value, node: cst.CSTNode) -> Value:
        """A bool for a condition. Tensors must be converted explicitly, as in TorchScript."""
        if value.type in (BOOL, ERROR):
            return value
        if isinstance(value.type, TensorType):
            self.go_on(self.error(  # type: ignore[attr-defined]
                node,
                "a tensor cannot be used as a condition",
                "write bool(t) (one element), or t.any() / t.all() wrapped in bool(...)",
            ), node)
            return self.error_value()  # type: ignore[attr-defined]  (strict mode: both sides checked)
        if value.type == NONE:
            return self.b.constant(False)
        if value.type in (INT, FLOAT, STR, ANY) or isinstance(value.type, (OptionalType, ListType, DictType)):
            result = self.op(ops.BuiltinCallOp, [value], [BOOL], callee="bool").result
            known = self.known(value)
            if known is not self._UNKNOWN:
                self.live[result] = bool(known)
            return result
        self.go_on(self.error(node, f"a value of type {value.type} used as a condition"), node)  # type: ignore[attr-defined]
        return self.error_value()  # type: ignore[attr-defined]

    def condition_of(self, value: Value, node: cst.CSTNode) -> Value:
        """The bool an assertion tests: Python's truth of `value`, a one-element tensor's too."""
        if isinstance(value.type, TensorType):
            return self.op(ops.BuiltinCallOp, [value], [BOOL], callee="bool").result
        return self.truth(value, node)

    def comparison(self, node: cst.Comparison) -> Value:
        left = self.expr(node.left)
        result: Value | None = None
        pieces: list[Callable[[], Value]] = []
        for i, target in enumerate(node.comparisons):
            op = COMPARE_OPS[type(target.operator)]
            pieces.append(self._compare_piece(op, target, i, node, left))
        # `a < b < c` is `a < b and b < c`, with b evaluated once and c only if needed.
        result = pieces[0]()
        for piece in pieces[1:]:
            if result.type != BOOL:  # `and` gives the first falsy operand, whatever its type
                raise self.error(node, f"a chained comparison of {a_type(result.type)} is not supported",
                                 "compare in separate steps")
            result = self.short_circuit("and", result, piece, node)
        return result

    def _compare_piece(self, op: str, target: cst.ComparisonTarget, i: int, node: cst.Comparison, left: Value) -> Callable[[], Value]:
        state = {"left": left}

        def piece() -> Value:
            lhs = state["left"] if i == 0 else self._chain_left
            rhs = self.expr(target.comparator)
            self._chain_left = rhs
            # Errors underline `a is 3`; in a chain `a < b < c`, the comparand of the failing link.
            return self.compare(op, lhs, rhs, node if len(node.comparisons) == 1 else target.comparator)

        return piece

    def compare(self, op: str, lhs: Value, rhs: Value, node: cst.CSTNode) -> Value:
        if op in ("in", "not in") and (rhs in self.empty_stars or rhs in self.star_items) \
                and (rhs in self.empty_stars or isinstance(self.known(lhs), str)):
            return self.b.constant((self.known(lhs) in self.star_items.get(rhs, {})) == (op == "in"))
        if op in ("is", "is not"):
            if isinstance(lhs.type, TensorType) and isinstance(rhs.type, TensorType):
                # identity of two tensors (`key is query`): decided once inlining shows one value
                return self.op(ops.CompareOp, [lhs, rhs], [BOOL], op=op).result
            if any(isinstance(v.owner, ops.ConstantOp) and type(v.owner.value) is bool for v in (lhs, rhs)):
                # `use_cache is True`: compared as Python compares it, when it runs (1 is not True)
                return self.op(ops.CompareOp, [lhs, rhs], [BOOL], op=op).result
            if NONE not in (lhs.type, rhs.type):
                raise self.error(node, f"`{op}` is only supported against None and between tensors",
                                 "use == for values")
            other = rhs.type if lhs.type == NONE else lhs.type
            if other == NONE or not (other == ANY or isinstance(other, OptionalType)):
                # Known now (a module's attribute that is None, or a value that cannot be), as
                # TorchScript decides it: the branch it guards is lowered only where it runs.
                return self.b.constant((other == NONE) == (op == "is"))
            return self.op(ops.CompareOp, [lhs, rhs], [BOOL], op=op).result
        if op in ("in", "not in"):
            if not isinstance(rhs.type, (ListType, TupleType, DictType)):
                raise self.error(node, f"`{op}` is only supported on lists, tuples and dicts")
            return self.op(ops.CompareOp, [lhs, rhs], [BOOL], op=op).result
        try:
            t = binary_result_type(op, lhs.type, rhs.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None
        result = self.op(ops.CompareOp, [lhs, rhs], [t], op=op).result
        a, b = self.known(lhs), self.known(rhs)
        if t == BOOL and a is not self._UNKNOWN and b is not self._UNKNOWN and op in PYTHON_COMPARE:
            self.live[result] = PYTHON_COMPARE[op](a, b)  # read from the instance: decided now
        return result

    def boolean(self, node: cst.BooleanOperation) -> Value:
        op = "and" if isinstance(node.operator, cst.And) else "or"
        value = self.expr(node.left)
        left = self.truth(value, node.left)
        if value.type == BOOL:
            return self.short_circuit(op, left, lambda: self.truth(self.expr(node.right), node.right), node)
        # Python's `a or b` / `a and b` give one of the operands, not a bool: `n or 7` is an int.
        if_op = ops.IfOp([left], [], regions=[ops.Region([ops.Block()]), ops.Region([ops.Block()])])
        self.b.insert(if_op)
        lazy, const = (if_op.then_block, if_op.else_block) if op == "and" else (if_op.else_block, if_op.then_block)
        with self.b.at_end_of(lazy):
            right = self.expr(node.right)
        t = unify(value.type, right.type)
        if t is None:
            raise self.error(node, f"the operands of `{op}` have types {value.type} and {right.type}",
                             "give both operands the same type, or write a conditional expression")
        with self.b.at_end_of(lazy):
            self.b.create(ops.YieldOp, [right])
        with self.b.at_end_of(const):
            self.b.create(ops.YieldOp, [value])
        result = ops.OpResult(t, if_op, 0)
        if_op.results = [result]
        return result

    def known_bool(self, value: Value) -> bool | None:
        known = self.known(value)
        return known if isinstance(known, bool) else None

    def short_circuit(self, op: str, left: Value, right: Callable[[], Value], node: cst.CSTNode) -> Value:
        """`left and right()` / `left or right()`: right is evaluated only when needed."""
        known = self.known_bool(left)
        if known is not None:  # `not torch.jit.is_scripting() and ...`: decided now
            return right() if known == (op == "and") else self.b.constant(known, BOOL)
        if_op = ops.IfOp([left], [BOOL], regions=[ops.Region([ops.Block()]), ops.Region([ops.Block()])])
        self.b.insert(if_op)
        lazy, const = (if_op.then_block, if_op.else_block) if op == "and" else (if_op.else_block, if_op.then_block)
        with self.b.at_end_of(lazy):
            value = right()
            if value.type != BOOL:
                raise self.error(node, f"`{op}` of {a_type(value.type)} is not supported", "compare in separate steps")
            self.b.create(ops.YieldOp, [value])
        with self.b.at_end_of(const):
            self.b.create(ops.YieldOp, [self.b.constant(op == "or")])
        if self.known_bool(value) == (op == "or"):  # `a and False` is False, `a or True` True, of a bool
            return self.b.constant(op == "or", BOOL)
        return if_op.result

    def if_expression(self, node: cst.IfExp) -> Value:
        cond = self.truth(self.expr(node.test), node.test)
        refine_then, refine_else = self.refinements(node.test)  # type: ignore[attr-defined]
        env = self.env

        def side(refinements: list[tuple], expr: cst.BaseExpression) -> Value:
            # `x if m is None else m(x)`: `m` is refined on each side, as an `if` statement refines it
            self.env = env.copy()
            try:
                self.apply_refinements(refinements, node.test)  # type: ignore[attr-defined]
                return self.expr(expr)
            finally:
                self.env = env

        known = self.known_bool(cond)  # type: ignore[attr-defined]
        if known is not None:  # (only the side Python takes: the other may not lower for this setting)
            return side(refine_then, node.body) if known else side(refine_else, node.orelse)
        return self.either(cond, lambda: side(refine_then, node.body), lambda: side(refine_else, node.orelse), node,  # type: ignore[attr-defined]
                           "the two sides of the conditional expression have types {a} and {c}")


def tuple_when_run(value: Value) -> bool:
    """A list[int] that is a tuple at run time: `x.shape` / `x.size()` of a tensor whose rank is
    not known when lowering (a torch.Size), a slice of one, a py.spread."""
    owner = value.owner
    if isinstance(owner, ops.SliceOp):
        return tuple_when_run(owner.operands[0])
    if isinstance(owner, ops.BuiltinCallOp) and owner.attributes["callee"] == "torch.Size":
        return True
    return isinstance(owner, ops.SpreadOp) or (
        isinstance(owner, ops.GetAttrOp) and owner.attributes.get("attr") == "shape") or (
        isinstance(owner, ops.TensorMethodOp) and owner.attributes.get("method") == "size" and len(owner.operands) == 1)

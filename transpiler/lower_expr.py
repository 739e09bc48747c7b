"""Lowering of expressions to IR ops (the statement half is in lower_stmt.py): `ExpressionLowering`,
a mixin of FunctionLowerer, lowers each libcst expression node by the rule `EXPRESSIONS` keys on
its class. The rules live in the mixins by what they lower: lower_names.py, lower_operators.py,
lower_subscripts.py, lower_calls.py (with lower_builtins.py and lower_module_calls.py); this
module holds the entry (`expr`, which keeps what fails as Python in permissive mode and records
the error in strict mode), displays and f-strings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import libcst as cst

from ir.core import ops
from ir.core.builder import Builder
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    ERROR,
    INT,
    STR,
    TENSOR,
    DictType,
    ListType,
    TensorType,
    TupleType,
    Type,
    unify,
    unify_all,
)
from transpiler.context import Lookup
from transpiler.diagnostics import UserError
from transpiler.env import Env
from transpiler.expr_messages import a_type, describe, hint_for
from transpiler.lower_builtins import BuiltinLowering
from transpiler.lower_calls import CallLowering
from transpiler.lower_module_calls import ModuleCallLowering
from transpiler.lower_names import NameLowering
from transpiler.lower_operators import OperatorLowering
from transpiler.lower_subscripts import SubscriptLowering
from transpiler.source import SourceFile, literal_value

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo
    from transpiler.context import FileContext


class ExpressionLowering(NameLowering, OperatorLowering, SubscriptLowering, CallLowering, BuiltinLowering,
                         ModuleCallLowering):
    """Mixin of FunctionLowerer: everything that turns a CST expression into an IR value."""

    source: SourceFile
    ctx: FileContext
    b: Builder
    env: Env
    class_info: ClassInfo | None
    self_value: Value | None
    empty_stars: set[Value]
    star_items: dict[Value, dict[str, Value]]
    dicts_made: dict[Value, int]
    functions_known: dict[Value, Lookup]
    loop_depth: int
    star_tuples: dict[Value, list[Value]]
    epoch: int  # (transpiler/lower_python.py)
    error_reads: int  # (transpiler/recover.py)
    # Values read from the live instance when compiling for one (script(instance)): objects the
    # modules hold (a config), and literals read from them, which entry checks pin
    # (ir/passes/specialize.py) so that the code may be specialised to them now.
    live: dict[Value, Any]

    # -- helpers -----------------------------------------------------------------------------------
    def error(self, node: cst.CSTNode, message: str, hint: str | None = None) -> UserError:
        return UserError(message, self.source.loc(node), hint)

    def op(self, cls: type[ops.Operation], operands: list[Value], result_types: list[Type], name: str | None = None, **attrs: Any) -> ops.Operation:
        return self.b.create(cls, operands, result_types, name, **attrs)

    def at(self, node: cst.CSTNode) -> Any:
        return self.b.located(self.source.loc(node))

    # -- entry -------------------------------------------------------------------------------------
    def expr(self, node: cst.BaseExpression, name: str | None = None) -> Value:
        """Lower `node`; `name` is the source name the value is assigned to, if any."""
        with self.at(node):
            value = self._expr_or_python(node) if self.ctx.permissive else self._expr_or_error(node)
        if value.type == ERROR:
            self.error_reads += 1  # (transpiler/recover.py)
        if name is not None and value.name is None and isinstance(value.owner, ops.Operation):
            if not isinstance(value.owner, (ops.ConstantOp,)):
                value.name = name
        return value

    def _expr_or_python(self, node: cst.BaseExpression) -> Value:
        """Permissive mode: an expression that does not lower stays Python."""
        mark = self.mark()  # type: ignore[attr-defined]
        try:
            return self._expr(node)
        except UserError as error:
            self.rollback(mark)  # type: ignore[attr-defined]
            return self.kept_as_python(node, error, expression=True)  # type: ignore[attr-defined]

    def _expr_or_error(self, node: cst.BaseExpression) -> Value:
        """Strict mode: an expression that does not lower records its error and stands for an
        ERROR value, so that lowering goes on (transpiler/recover.py)."""
        mark = self.mark()  # type: ignore[attr-defined]
        reads = self.error_reads
        try:
            return self._expr(node)
        except UserError as error:
            self.rollback(mark)  # type: ignore[attr-defined]
            self.record(error, node, reads)  # type: ignore[attr-defined]
            return self.error_value()  # type: ignore[attr-defined]

    def _expr(self, node: cst.BaseExpression) -> Value:
        rule = next((EXPRESSIONS[c] for c in type(node).__mro__ if c in EXPRESSIONS), None)
        if rule is None:
            what = describe(node)
            raise self.error(node, f"{what} {'are' if what.endswith('s') else 'is'} not supported", hint_for(node))
        return rule(self, node)

    # -- literals and displays ---------------------------------------------------------------------
    def literal(self, node: cst.Integer | cst.Float | cst.SimpleString | cst.ConcatenatedString) -> Value:
        if isinstance(node, cst.ConcatenatedString) and _has_fstring(node):
            return self.format_string(node)
        value = node.evaluated_value
        if not isinstance(value, (int, float, str)):
            raise self.error(node, "byte strings are not supported")
        return self.b.constant(value)

    def imaginary(self, node: cst.Imaginary) -> Value:
        raise self.error(node, "complex literals are not supported")

    def named_expression(self, node: cst.NamedExpr) -> Value:
        """`(n := value)`: the value, bound to the name from here on as an assignment binds it
        (the check pass refuses it where Python evaluates it only sometimes)."""
        value = self.expr(node.value, node.target.value if isinstance(node.target, cst.Name) else None)
        self.bind_target(node.target, value)  # type: ignore[attr-defined]
        return value

    def tuple_display(self, node: cst.Tuple) -> Value:
        return self.sequence([(e.value, isinstance(e, cst.StarredElement)) for e in node.elements])

    def sequence(self, parts: list[tuple[cst.BaseExpression, bool]]) -> Value:
        """A tuple display, `(*shape, -1, d)` (each part: its expression, whether it is starred).
        A starred tuple spreads into its elements; a starred list of ints, whose length is not
        known yet, makes a py.spread."""
        values: list[Value] = []
        starred: list[bool] = []
        for node, star in parts:
            v = self.expr(node)
            if star and isinstance(v.type, TupleType):
                values.extend(self.op(ops.UnpackOp, [v], list(v.type.elems)).results)
                starred.extend([False] * len(v.type.elems))
                continue
            if star and v.type != ListType(INT):
                raise self.error(node, f"starred {a_type(v.type)} is not supported",
                                 "spread a tuple, or a list of ints (a shape); else list the elements one by one")
            values.append(v)
            starred.append(star)
        if not any(starred):
            return self.op(ops.TupleOp, values, [TupleType(tuple(v.type for v in values))]).result
        for v, star in zip(values, starred):
            if not star and v.type not in (INT, ANY):
                raise self.error(parts[0][0], f"a {v.type} among spread ints is not supported", "spread only ints")
        return self.op(ops.SpreadOp, values, [ListType(INT)], starred=tuple(starred)).result

    def list_display(self, node: cst.List) -> Value:
        if not any(isinstance(e, cst.StarredElement) for e in node.elements):
            return self.make_list([self.expr(e.value) for e in node.elements], None, node)
        return self.spread_list(node)

    def spread_list(self, node: cst.List) -> Value:
        """`[*feats, x]`: a new list of the elements before the first starred one, then each
        starred list or tuple's items (as `extend`) and each later element (as `append`), in
        order, which is how Python builds it."""
        parts = [(self.expr(e.value), isinstance(e, cst.StarredElement), e) for e in node.elements]
        types: list[Type] = []
        for v, star, e in parts:
            if star and not isinstance(v.type, (ListType, TupleType)):
                raise self.error(e, f"starred {a_type(v.type)} in a list is not supported", "spread a list or a tuple")
            types.extend((list(v.type.elems) if isinstance(v.type, TupleType) else [v.type.elem]) if star  # type: ignore[attr-defined]
                         else [v.type])
        elem = unify_all(types) if types else None
        if elem is None:
            raise self.error(node, "list elements have different types", "a list holds one type; use a tuple")
        first = next(i for i, (_, star, _) in enumerate(parts) if star)
        result = self.make_list([v for v, _, _ in parts[:first]], ListType(TENSOR if isinstance(elem, TensorType) else elem),
                                node)
        for v, star, e in parts[first:]:
            if star:
                self.extend_by(result, v, e)  # type: ignore[attr-defined]
            else:
                self.append_to(result, v, e)  # type: ignore[attr-defined]
        return result

    def make_list(self, values: list[Value], declared: Type | None, node: cst.CSTNode) -> Value:
        elem: Type | None = declared.elem if isinstance(declared, ListType) else None
        for v in values:
            elem = v.type if elem is None else unify(elem, v.type)
            if elem is None:
                raise self.error(node, "list elements have different types", "a list holds one type; use a tuple")
        if elem is None:  # `[]` unannotated: a list of tensors, as TorchScript takes it
            elem = TENSOR
        if declared is None and isinstance(elem, TensorType):
            elem = TENSOR  # a list may be appended any tensor later, whatever its dtype or shape
        return self.op(ops.ListOp, values, [ListType(elem)]).result

    def dict_display(self, node: cst.Dict) -> Value:
        """`{"x1": x1, "x2": x2}`: literal string keys, values of one type (the type they unify
        to: Any in permissive mode where they do not). A Python dict; `**d` passes its items as
        keywords while nothing else has used it (call_arguments)."""
        keys: list[str] = []
        values: list[Value] = []
        for e in node.elements:
            key = literal_value(e.key) if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) else None
            if not isinstance(key, str) or key in keys:
                raise self.error(node, "dict displays are only supported with distinct literal string keys",
                                 'write each key as a string literal once: {"a": x, "b": y}')
            keys.append(key)
            values.append(self.expr(e.value))
        value_type = unify_all([v.type for v in values]) if values else TENSOR  # (`{}`: of tensors, as in TorchScript)
        if value_type is None and not self.ctx.permissive:
            raise self.error(node, "the values of this dict have different types", "a dict holds values of one type")
        if isinstance(value_type, TensorType):
            value_type = TENSOR  # (a dict may be given any tensor later)
        result = self.op(ops.DictOp, values, [DictType(STR, value_type or ANY)], keys=tuple(keys)).result
        self.star_items[result] = dict(zip(keys, values))
        self.dicts_made[result] = self.loop_depth
        return result

    def display_item(self, made: Value, key: Value) -> Value | None:
        """`d["x1"]` of a dict display that nothing has done more with than read (at the loop
        depth it was made at: a later iteration may see a store made after this read): the value
        the display holds under that key, with its type; None otherwise."""
        items = self.star_items.get(made)
        if items is None or self.dicts_made.get(made) != self.loop_depth or self.known(key) not in items:
            return None
        for use in made.uses:
            if not (isinstance(use.op, ops.GetItemOp) or isinstance(use.op, ops.CompareOp) and use.index == 1
                    or isinstance(use.op, ops.BuiltinCallOp) and use.op.attributes.get("callee") == "len"):
                return None
        return items[self.known(key)]

    # -- f-strings ---------------------------------------------------------------------------------
    def format_string(self, node: cst.BaseExpression) -> Value:
        """An f-string (or a concatenation with one): a py.format of its lowered values."""
        parts: list[tuple] = []
        values: list[Value] = []
        self._format_parts(node, parts, values)
        merged: list[tuple] = []
        for part in parts:  # adjacent literal pieces are one
            if part[0] == "text" and merged and merged[-1][0] == "text":
                merged[-1] = ("text", merged[-1][1] + part[1])
            elif part != ("text", ""):
                merged.append(part)
        return self.op(ops.FormatOp, values, [STR], parts=tuple(merged)).result

    def _format_parts(self, node: cst.BaseExpression, parts: list[tuple], values: list[Value]) -> None:
        if isinstance(node, cst.ConcatenatedString):
            self._format_parts(node.left, parts, values)
            self._format_parts(node.right, parts, values)
            return
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            if not isinstance(value, str):
                raise self.error(node, "byte strings are not supported")
            parts.append(("text", value))
            return
        assert isinstance(node, cst.FormattedString)
        quote = node.end
        prefix = node.start[: len(node.start) - len(quote)].lower().replace("f", "")
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                import ast

                text = ast.literal_eval(prefix + quote + part.value + quote)
                parts.append(("text", text.replace("{{", "{").replace("}}", "}")))
                continue
            assert isinstance(part, cst.FormattedStringExpression)
            if part.equal is not None:
                raise self.error(part, "`=` in an f-string replacement field is not supported",
                                 "write the name out: f\"x={x}\"")
            spec = ""
            for piece in part.format_spec or ():
                if not isinstance(piece, cst.FormattedStringText):
                    raise self.error(piece, "a replacement field inside a format spec is not supported",
                                     "write the format spec as literal text (e.g. {v:.3f})")
                spec += piece.value
            values.append(self.expr(part.expression))
            parts.append(("value", part.conversion, spec))


# The rule for each libcst expression node class (looked up along the node class's MRO).
EXPRESSIONS: dict[type, Callable[[ExpressionLowering, Any], Value]] = {
    cst.Integer: ExpressionLowering.literal,
    cst.Float: ExpressionLowering.literal,
    cst.SimpleString: ExpressionLowering.literal,
    cst.ConcatenatedString: ExpressionLowering.literal,  # (format_string where a part is an f-string)
    cst.FormattedString: ExpressionLowering.format_string,
    cst.Imaginary: ExpressionLowering.imaginary,
    cst.Name: ExpressionLowering.name,
    cst.Attribute: ExpressionLowering.attribute,
    cst.Call: ExpressionLowering.call,
    cst.BinaryOperation: ExpressionLowering.binary_operation,
    cst.UnaryOperation: ExpressionLowering.unary,
    cst.Comparison: ExpressionLowering.comparison,
    cst.BooleanOperation: ExpressionLowering.boolean,
    cst.NamedExpr: ExpressionLowering.named_expression,
    cst.IfExp: ExpressionLowering.if_expression,
    cst.Subscript: ExpressionLowering.subscript,
    cst.Tuple: ExpressionLowering.tuple_display,
    cst.List: ExpressionLowering.list_display,
    cst.ListComp: lambda self, node: self.list_comprehension(node),  # (lower_loops.py: a loop)
    cst.Dict: ExpressionLowering.dict_display,
}


def _has_fstring(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.ConcatenatedString):
        return _has_fstring(node.left) or _has_fstring(node.right)
    return isinstance(node, cst.FormattedString)

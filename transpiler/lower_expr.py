"""Lowering of expressions to IR ops (the statement half is in lower_stmt.py)."""

from __future__ import annotations

import difflib
import inspect
import math
import operator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

import libcst as cst
from torch import nn

from ir import ops
from ir.builder import Builder, literal_type
from ir.core import Value
from ir.torch_callinfo import effect_attributes
from ir.torch_signatures import (
    SignatureError,
    binary_result_type,
    is_known_function,
    resolve_attribute,
    resolve_function,
    resolve_method,
    unary_result_type,
)
from ir.types import (
    unify_all,
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    ERROR,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    DictType,
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    UnionType,
    is_subtype,
    unify,
)
from transpiler.check import left_to_python
from transpiler.diagnostics import UserError
from transpiler.context import GlobalRef, Lookup, is_static
from transpiler.env import Env, Signature, Unbound
from runtime.guards import is_plain_object
from transpiler.source import SourceFile, literal_value

if TYPE_CHECKING:
    from transpiler.context import FileContext
    from transpiler.classinfo import ClassInfo

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

PYTHON_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
MATH_CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "math.inf": math.inf, "math.tau": math.tau, "math.nan": math.nan}
TORCH_DTYPES = {
    f"torch.{n}"
    for n in (
        "float32 float float64 double float16 half bfloat16 int64 long int32 int int16 short "
        "int8 uint8 bool complex64 complex128"
    ).split()
}
BUILTIN_CALLS = {"len", "min", "max", "int", "float", "bool", "abs", "round", "isinstance", "range", "str",
                 "all", "any", "sum", "tuple", "list", "hasattr", "getattr", "next", "zip", "enumerate"}
NEXT_HINT = ("compiled code takes next(iter(xs)) of a list or tuple, and next(self.parameters()) / "
             "next(self.buffers()); else read the tensor by name (`self.fc.weight.device`) or index (`xs[0]`)")
UNROLLED_CALLS = {"all", "any", "sum", "tuple", "list"}
JIT_ANNOTATE = {"torch.jit.annotate", "torch._jit_internal.annotate"}
# Calls whose value in eager code is known: compiled code computes what eager computes.
CONSTANT_CALLS = {"torch.jit.is_scripting": False, "torch.jit.is_tracing": False,
                  "torch.jit._script.is_scripting": False, "torch._jit_internal.is_scripting": False}
MATH_INT_RESULTS = {"math.floor", "math.ceil", "math.trunc", "math.gcd", "math.factorial", "math.comb"}
MATH_BOOL_RESULTS = {"math.isnan", "math.isinf", "math.isfinite"}
PY_TYPES_FOR_ISINSTANCE = {
    "torch.Tensor": TENSOR, "builtins.int": INT, "builtins.float": FLOAT, "builtins.bool": BOOL,
    "builtins.str": STR, "builtins.tuple": None, "builtins.list": None,
}


UNROLL_LIMIT = 64  # layers of a module list whose loop is unrolled (script(instance, ...))


class ExpressionLowering:
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

    # -- helpers --------------------------------------------------------------------------------
    def error(self, node: cst.CSTNode, message: str, hint: str | None = None) -> UserError:
        return UserError(message, self.source.loc(node), hint)

    def op(self, cls: type[ops.Operation], operands: list[Value], result_types: list[Type], name: str | None = None, **attrs: Any) -> ops.Operation:
        return self.b.create(cls, operands, result_types, name, **attrs)

    def at(self, node: cst.CSTNode) -> Any:
        return self.b.located(self.source.loc(node))

    # -- entry ----------------------------------------------------------------------------------
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
        if isinstance(node, cst.FormattedString) or isinstance(node, cst.ConcatenatedString) and _has_fstring(node):
            return self.format_string(node)
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            value = node.evaluated_value
            if not isinstance(value, (int, float, str)):
                raise self.error(node, "byte strings are not supported")
            return self.b.constant(value)
        if isinstance(node, cst.Imaginary):
            raise self.error(node, "complex literals are not supported")
        if isinstance(node, cst.Name):
            return self.name(node)
        if isinstance(node, cst.Attribute):
            return self.attribute(node)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.BinaryOperation):
            return self.binary(BINARY_OPS[type(node.operator)], self.expr(node.left), self.expr(node.right), node)
        if isinstance(node, cst.UnaryOperation):
            return self.unary(node)
        if isinstance(node, cst.Comparison):
            return self.comparison(node)
        if isinstance(node, cst.BooleanOperation):
            return self.boolean(node)
        if isinstance(node, cst.IfExp):
            return self.if_expression(node)
        if isinstance(node, cst.Subscript):
            return self.subscript(node)
        if isinstance(node, cst.Tuple):
            return self.sequence([(e.value, isinstance(e, cst.StarredElement)) for e in node.elements])
        if isinstance(node, cst.List):
            values = [self.element(e) for e in node.elements]
            return self.make_list(values, None, node)
        if isinstance(node, cst.ListComp):
            return self.list_comprehension(node)  # type: ignore[attr-defined]
        if isinstance(node, cst.Dict):
            return self.dict_display(node)
        what = describe(node)
        raise self.error(node, f"{what} {'are' if what.endswith('s') else 'is'} not supported", hint_for(node))

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

    def element(self, e: cst.BaseElement) -> Value:
        if isinstance(e, cst.StarredElement):
            raise self.error(e, "starred expressions are not supported", "list the elements one by one")
        return self.expr(e.value)

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

    # -- f-strings ------------------------------------------------------------------------------
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

    # -- names ----------------------------------------------------------------------------------
    def name(self, node: cst.Name) -> Value:
        found = self.env.get(node.value)
        if isinstance(found, Value):
            return found
        if isinstance(found, Unbound):
            raise self.error(node, f"`{node.value}` is not bound on every path to here: {found.reason}",
                             f"assign `{node.value}` on every path before this use")
        if node.value in ("True", "False", "None"):
            return self.b.constant({"True": True, "False": False, "None": None}[node.value])
        qual = self.source.global_name(node)
        if qual is not None:
            return self.global_value(node, qual)
        raise self.error(node, f"`{node.value}` is not defined here", None)

    def global_value(self, node: cst.CSTNode, qual: str) -> Value:
        if qual in self.source.constants:
            value = self.source.constants[qual]
            try:
                return self.b.constant(value, literal_type(value))
            except TypeError:
                pass
        if "." not in qual:
            value = self.source.bound_once(qual)
            if value is None or type(value) in (bool, int, float, str):
                # (checked at entry: the imported module may hold another value in another process)
                self.op(ops.CheckGlobalOp, [], [], module=self.source.module_name or "", symbol=qual, expected=value)
                return self.b.constant(value, literal_type(value))
        if qual in MATH_CONSTANTS:
            return self.b.constant(MATH_CONSTANTS[qual], FLOAT)
        if qual in TORCH_DTYPES:
            return self.b.constant(qual, DTYPE)
        if qual in ("builtins.True", "builtins.False"):
            return self.b.constant(qual == "builtins.True")
        if self.ctx.functions is not None:
            member = self.ctx.functions.enum_value(self.source, node)
            if member is not None:  # (`Format.NCHW` of a str Enum: the str it equals)
                return self.b.constant(member, literal_type(member))
        code = self.source.code(node)
        shown = f"`{code}`" if qual in (code, f"builtins.{code}") else f"`{code}` ({qual})"
        raise self.error(
            node,
            f"{shown} cannot be used as a value in compiled code",
            "module-level constants must be literals (NAME = 1.0); pass other values as arguments "
            "or keep them on the module (self.NAME, set in __init__)",
        )

    def attribute(self, node: cst.Attribute) -> Value:
        qual = self.source.global_name(node)
        base_name = node.value.value if isinstance(node.value, cst.Name) else None
        if qual is not None and base_name is not None and self.env.get(base_name) is None:
            return self.global_value(node, qual)
        if isinstance(node.value, cst.Name) and node.value.value == "self" and self.self_value is not None:
            return self.self_attribute(node)
        obj = self.expr(node.value)
        attr = node.attr.value
        if obj in self.live and is_plain_object(self.live[obj]):
            return self.object_attribute(node, obj)
        if isinstance(obj.type, TensorType) or obj.type == ANY:
            try:
                t = resolve_attribute(attr, obj.type)
            except SignatureError as e:
                raise self.error(node.attr, str(e), getattr(e, "hint", None)) from None
            return self.op(ops.GetAttrOp, [obj], [t], attr=attr).result
        if isinstance(obj.type, ModuleType) and self.ctx.class_named(obj.type.qualname) is not None:
            return self.module_attribute(node, obj, self.ctx.class_named(obj.type.qualname))
        layer = self.named_layer(obj, attr)
        if layer is not None:
            return layer
        if obj.type == DEVICE and attr in ("type", "index"):
            return self.op(ops.GetAttrOp, [obj], [STR if attr == "type" else OptionalType(INT)], attr=attr).result
        raise self.error(node, f"attribute `{attr}` of a value of type {obj.type} is not supported")

    def self_attribute(self, node: cst.Attribute | cst.Call, attr: str | None = None) -> Value:
        """`self.attr` (`node`, or the getattr() call that reads `attr`): as refined here, or read."""
        key = f"self.{attr if attr is not None else node.attr.value}"  # type: ignore[union-attr]
        refined = self.env.get(key)
        if isinstance(refined, Value):
            return refined
        assert self.self_value is not None and self.class_info is not None
        return self.module_attribute(node, self.self_value, self.class_info, attr)

    def module_attribute(self, node: cst.Attribute | cst.Call, obj: Value, info: ClassInfo, attr: str | None = None) -> Value:
        """`obj.attr` of a module; `node` is the attribute, or the getattr() call that reads it."""
        attr = attr if attr is not None else node.attr.value  # type: ignore[union-attr]
        at = node.attr if isinstance(node, cst.Attribute) else node
        if attr in info.methods:
            raise self.error(node, f"method `{attr}` can only be called here", "call it: self.method(...)")
        found = info.attrs.get(attr)
        if found is None:
            close = difflib.get_close_matches(attr, [*info.attrs, *info.methods], n=1)
            elsewhere = assigned_in_method(info, attr)
            raise self.error(
                at,
                f"`{info.name}` has no attribute `{attr}` that the compiler can see",
                f"it is assigned in `__init__` (line {elsewhere[1]}) from a value whose type the compiler cannot "
                f"tell: declare it at class level, `{attr}: <type>` (e.g. `{attr}: bool`)"
                if elsewhere and elsewhere[0] == "__init__"
                else f"it is assigned in `{elsewhere[0]}` (line {elsewhere[1]}), which `__init__` does not call: "
                f"declare it at class level, `{attr}: <type>` (e.g. `{attr}: float`)" if elsewhere
                else f"did you mean `{close[0]}`?" if close
                else "assign it in __init__ or declare it at class level (e.g. `scale: float`)",
            )
        if found.kind == "unknown":
            raise self.error(
                at,
                f"the type of `self.{attr}` cannot be determined from __init__",
                f"declare it at class level, e.g. `{attr}: int` or `{attr}: Tensor`",
            )
        if isinstance(found.type, UnionType):
            # (an entry reading it is compiled per member, FileContext.entry_variants: the member here)
            member = dict(self.sig.attr_types).get(attr) if obj is self.self_value else None
            if member is None:
                raise self.error(at, f"`{info.name}.{attr}` is a {found.type}, whose member is decided only "
                                     "where the compiled entry's forward reads it",
                                 f"read it in forward and pass it on as an argument of the member's type")
            found = replace(found, type=member)
        if found.kind == "object":
            result = self.op(ops.GetAttrOp, [obj], [ANY], attr=attr).result
            self.live[result] = found.value
            return result
        # After Python code that may have set it (permissive mode), a read is its own: not merged
        # with earlier ones, and not assumed to hold what the entry checked (ir/shape_rules_python).
        after = {"after": self.epoch} if self.epoch else {}
        result = self.op(ops.GetAttrOp, [obj], [found.type], attr=attr, **after).result
        if not after and found.has_value and type(found.value) is bool:
            # a flag of every instance of this class variant (`self.training`): a branch on it
            # lowers one side, as on a setting; the read stays, and an entry check pins it
            self.live[result] = found.value
        return result

    def live_module(self, value: Value) -> nn.Module | None:
        """The submodule of the instance compiled for (script(instance, ...)) that module value
        `value` reads, through attribute reads from `self`; None where not known."""
        if value is self.self_value:
            return self.class_info.instance if self.class_info is not None else None
        op = value.owner
        if not isinstance(op, ops.GetAttrOp) or not isinstance(value.type, (ModuleType, ModuleListType)):
            return None
        parent = self.live_module(op.operands[0])
        child = parent._modules.get(op.attributes["attr"]) if parent is not None else None
        return child if isinstance(child, nn.Module) else None

    def named_layer(self, obj: Value, name: str) -> Value | None:
        """`obj.name` of a Sequential or ModuleList `obj` that holds a layer under that name (a
        Sequential built from an OrderedDict): the layer, its type the container's element type
        there; None otherwise. The name is what the instance compiled for holds; an entry check
        of the layer's call finds it on every call."""
        live = self.live_module(obj) if isinstance(obj.type, ModuleListType) and obj.type.length_known else None
        if live is None or name not in live._modules:
            return None
        index = list(live._modules).index(name)
        if index >= len(obj.type.elems):  # type: ignore[union-attr]
            return None
        return self.op(ops.GetAttrOp, [obj], [obj.type.elems[index]], attr=name).result  # type: ignore[union-attr]

    def module_hasattr(self, node: cst.Call, name: str) -> Value:
        """`hasattr(module, "name")`, `getattr(module, "name"[, default])` with a literal name, as
        TorchScript has them: decided when compiling, from the attributes every instance of the
        module's class variant has (transpiler/jit.py makes instances with other attribute names
        variants of their own) and its class's."""
        args = node.args
        n = 2 if name == "hasattr" else len(args)
        if n not in (2, 3) or len(args) != n or any(a.keyword is not None or a.star for a in args) \
                or not isinstance(args[1].value, cst.SimpleString):
            raise self.error(node, f"{name}() is supported with a module and a literal attribute name",
                             f"write {name}(self, \"name\"{', default' if name == 'getattr' else ''})")
        attr = literal_value(args[1].value)
        obj = self.expr(args[0].value)
        info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        if info is None or info.instance is None or not isinstance(attr, str):
            raise self.error(node, f"{name}() of a value of type {obj.type} is not supported",
                             "only a module's attributes are known when compiling")
        on_class = inspect.getattr_static(type(info.instance), attr, _ABSENT)
        if isinstance(on_class, property) or (on_class is _ABSENT and (
                attr.startswith("_") or attr not in info.attrs and info.node is None)):
            # (a property runs code; other instances of torch's layers, or private attributes,
            # are not told apart by variants)
            raise self.error(node, f"{name}() of `{attr}` is not decided when compiling",
                             "only a module's own public attributes and its class's are")
        present = attr in info.attrs or attr in info.methods or on_class is not _ABSENT or attr in vars(info.instance)
        if name == "hasattr":
            return self.b.constant(present)
        if present:
            return self.self_attribute(node, attr) if obj is self.self_value else self.module_attribute(node, obj, info, attr)
        if n == 3:
            return self.expr(args[2].value)
        raise self.error(node, f"`{info.name}` has no attribute `{attr}`", None)

    def object_attribute(self, node: cst.Attribute, obj: Value) -> Value:
        """`self.config.num_layers`: read from the live object now. A literal is what the code is
        specialised to (its read stays, and an entry check pins it); an object is read further;
        anything else is a Python object read at run time. Objects such as configs are assumed
        not to change during a call (docs/permissive.md)."""
        attr = node.attr.value
        try:
            value = getattr(self.live[obj], attr)
        except Exception:  # noqa: BLE001 - whatever the object's own attribute code raises
            raise self.error(node.attr, f"`{attr}` cannot be read from the {type(self.live[obj]).__name__} "
                             "when compiling") from None
        if is_plain_object(value):
            t: Type = ANY
        else:
            try:
                t = literal_type(value)
            except TypeError:
                return self.op(ops.GetAttrOp, [obj], [ANY], attr=attr).result
        result = self.op(ops.GetAttrOp, [obj], [t], attr=attr).result
        self.live[result] = value
        return result

    _UNKNOWN = object()

    def known(self, value: Value) -> Any:
        """The Python value `value` has when compiling (a constant, or a literal read from the
        instance), else `_UNKNOWN`."""
        owner = value.owner
        if isinstance(owner, ops.ConstantOp):
            return owner.value
        found = self.live.get(value, self._UNKNOWN)
        return self._UNKNOWN if is_plain_object(found) else found

    # -- operators ------------------------------------------------------------------------------
    def binary(self, op: str, lhs: Value, rhs: Value, node: cst.CSTNode) -> Value:
        if op == "+" and any(isinstance(v.type, ListType) and not _tuple_when_run(v) for v in (lhs, rhs)) \
                and any(isinstance(v.type, TupleType) for v in (lhs, rhs)):
            raise self.error(node, "`+` of a tuple and a list of ints not known to be sizes (a tuple when it runs) "
                                   "is not supported", "build the tuple from the sizes: (*x.shape[:-1], n)")
        try:
            t = binary_result_type(op, lhs.type, rhs.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None
        return self.op(ops.BinaryOp, [lhs, rhs], [t], op=op).result

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
        if_op = ops.IfOp([cond], [], regions=[ops.Region([ops.Block()]), ops.Region([ops.Block()])])
        self.b.insert(if_op)
        with self.b.at_end_of(if_op.then_block):
            a = side(refine_then, node.body)
        with self.b.at_end_of(if_op.else_block):
            c = side(refine_else, node.orelse)
        t = unify(a.type, c.type)
        if t is None:
            raise self.error(node, f"the two sides of the conditional expression have types {a.type} and {c.type}")
        with self.b.at_end_of(if_op.then_block):
            self.b.create(ops.YieldOp, [a])
        with self.b.at_end_of(if_op.else_block):
            self.b.create(ops.YieldOp, [c])
        result = ops.OpResult(t, if_op, 0)
        if_op.results = [result]
        return result

    # -- subscripts -----------------------------------------------------------------------------
    def subscript(self, node: cst.Subscript) -> Value:
        base = self.expr(node.value)
        if isinstance(base.type, (TensorType,)) or base.type == ANY and False:
            items, operands = self.index_items(node.slice)
            return self.op(ops.IndexOp, [base, *operands], [TENSOR], items=items).result
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice) \
                and (isinstance(base.type, (ListType, TupleType))
                     or isinstance(base.type, ModuleListType) and base.type.length_known):
            return self.sequence_slice(base, node.slice[0].slice, node)
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            raise self.error(node, f"slicing a value of type {base.type} is not supported", "index it with one int")
        index_node = node.slice[0].slice.value
        index = self.expr(index_node)
        if isinstance(base.type, DictType):  # (a KeyError where it runs, as in Python)
            if not is_subtype(index.type, base.type.key):
                raise self.error(index_node, f"a key of type {index.type} for a dict of {base.type.key} keys")
            held = self.display_item(base, index)
            if held is not None:
                return held
            return self.op(ops.GetItemOp, [base, index], [base.type.value]).result
        if index.type not in (INT, BOOL):
            raise self.error(index_node, f"index of type {index.type}; expected int")
        t = base.type
        if isinstance(t, TupleType):
            position = self.constant_int(index)
            if position is None:
                raise self.error(index_node, "a tuple index must be a constant", "index tuples with a literal")
            if not -len(t.elems) <= position < len(t.elems):
                raise self.error(index_node, f"tuple index {position} out of range for {t}",
                                 f"the indices of this tuple are 0 to {len(t.elems) - 1}" if t.elems else "the tuple is empty")
            elem = t.elems[position]
        elif isinstance(t, ListType):
            elem = t.elem
        elif isinstance(t, ModuleListType):
            position = self.constant_int(index)
            if t.length_known and position is not None:
                elem = t.elems[position]
            else:
                elem = unify_all(t.elems) or ANY
        elif t == ANY:
            elem = ANY
        else:
            raise self.error(node, f"a value of type {t} cannot be indexed")
        return self.op(ops.GetItemOp, [base, index], [elem]).result

    def sequence_slice(self, base: Value, part: cst.Slice, node: cst.CSTNode) -> Value:
        """`xs[a:b:c]`: of a list, a new list; of a tuple or a module list, with constant bounds,
        the tuple of those elements (its length must be known)."""
        bounds = [self.b.constant(None) if e is None else self.expr(e) for e in (part.lower, part.upper, part.step)]
        for bound, e in zip(bounds, (part.lower, part.upper, part.step)):
            if bound.type not in (INT, BOOL, NONE):
                raise self.error(e or node, f"a slice bound of type {bound.type}; expected int")
        if isinstance(base.type, ListType):
            return self.op(ops.SliceOp, [base, *bounds], [base.type]).result
        consts = [None if b.type == NONE else self.constant_int(b) for b in bounds]
        if any(c is None and b.type != NONE for c, b in zip(consts, bounds)) or consts[2] == 0:
            raise self.error(node, "a tuple or module list slice needs constant bounds", "slice with literals")
        positions = list(range(len(base.type.elems)))[slice(*consts)]  # type: ignore[attr-defined]
        items = [self._getter(base, i)() for i in positions]
        return self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result

    def constant_int(self, value: Value) -> int | None:
        owner = value.owner
        known = self.known(value)
        if isinstance(known, int):
            return int(known)
        if isinstance(owner, ops.UnaryOp) and owner.attributes["op"] == "-":
            inner = self.constant_int(owner.operands[0])
            return None if inner is None else -inner
        return None

    def index_items(self, elements: tuple[cst.SubscriptElement, ...] | list) -> tuple[tuple, list[Value]]:
        items: list[tuple] = []
        operands: list[Value] = []
        for element in elements:
            s = element.slice
            if isinstance(s, cst.Slice):
                parts = [s.lower, s.upper, s.step]
                for part in parts:
                    if part is not None:
                        v = self.expr(part)
                        if v.type not in (INT, BOOL, NONE, ANY) and not isinstance(v.type, (OptionalType, TensorType)):
                            raise self.error(part, f"slice bound of type {v.type}; expected int")
                        operands.append(v)
                items.append(("slice", *(p is not None for p in parts)))
            else:
                value_node = s.value
                if isinstance(value_node, cst.Name) and value_node.value == "None":
                    items.append(("none",))
                elif isinstance(value_node, cst.Ellipsis):
                    items.append(("ellipsis",))
                elif isinstance(value_node, cst.Tuple):
                    raise self.error(value_node, "nested tuples in an index are not supported", "flatten the index")
                else:
                    v = self.expr(value_node)
                    if not (v.type in (INT, BOOL, ANY) or isinstance(v.type, (TensorType, ListType))):
                        raise self.error(value_node, f"index of type {v.type}; expected int, a tensor, or a bool mask")
                    operands.append(v)
                    items.append(("value",))
        return tuple(items), operands

    # -- calls ----------------------------------------------------------------------------------
    def call_arguments(self, node: cst.Call, sizes: bool = False) -> tuple[list[Value], list[str], list[Value], list[cst.Arg]]:
        """The call's positional and keyword values. `sizes`: the callee takes its sizes as
        varargs or as one sequence alike (`x.view(*shape, -1)` is `x.view((*shape, -1))`)."""
        args: list[Value] = []
        kwnames: list[str] = []
        kwargs: list[Value] = []
        starred: set[int] = set()
        for arg in node.args:
            if arg.star and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.empty_stars:
                continue  # `**kwargs` of a function whose compiled callers pass none
            if arg.star == "*" and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.star_tuples:
                if kwnames:
                    raise self.error(arg, "positional argument after a keyword argument")
                args.extend(self.star_tuples[self.env.get(arg.value.value)])  # type: ignore[index]
                continue
            if arg.star == "**" and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.star_items:
                made = self.env.get(arg.value.value)
                if made in self.dicts_made and (made.uses or self.dicts_made[made] != self.loop_depth):  # type: ignore[union-attr]
                    raise self.error(arg, "`**` of a dict that other code may have changed is not supported",
                                     "pass the keywords one by one")
                for k, v in self.star_items[self.env.get(arg.value.value)].items():  # type: ignore[index]
                    kwnames.append(k)
                    kwargs.append(v)
                continue
            if arg.star == "*" and not kwnames:
                spread = self.expr(arg.value)
                if isinstance(spread.type, TupleType):  # `f(*pair)`: its elements
                    args.extend(self.op(ops.UnpackOp, [spread], list(spread.type.elems)).results)
                    continue
                if spread.type == ListType(INT) and sizes:  # `x.reshape(*shape, -1)`: one sequence of sizes
                    args.append(spread)
                    starred.add(len(args) - 1)
                    continue
            if arg.star:
                raise self.error(arg, f"`{arg.star}` arguments are not supported", "pass the arguments one by one")
            if arg.keyword is None:
                if kwnames:
                    raise self.error(arg, "positional argument after a keyword argument")
                args.append(self.expr(arg.value))
            else:
                kwnames.append(arg.keyword.value)
                kwargs.append(self.expr(arg.value))
        if starred:
            if not all(v.type in (INT, ANY) for i, v in enumerate(args) if i not in starred):
                raise self.error(node, "spreading a list into arguments that are not all sizes is not supported",
                                 "pass the sizes as one tuple")
            args = [self.op(ops.SpreadOp, args, [ListType(INT)], starred=tuple(i in starred for i in range(len(args)))).result]
        return args, kwnames, kwargs, list(node.args)

    def call(self, node: cst.Call) -> Value:
        func = node.func
        # self.method(...) and self.submodule(...)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and self.class_info is not None and func.attr.value in self.class_info.methods \
                and self.env.get("self") is not None:
            method = self.class_info.methods[func.attr.value]
            if left_to_python(self.class_info.method_source(func.attr.value) or self.source, method):
                return self.call_python_method(node, method)
            return self.call_method_of_self(node, func.attr.value)
        if isinstance(func, cst.Attribute) and func.attr.value == "__call__" and isinstance(func.value, cst.Call) \
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super" and not func.value.args \
                and self.class_info is not None and self.class_info.call_override is not None \
                and self.node.name.value == "__call__":  # type: ignore[attr-defined]
            return self.super_call(node)
        qual = self.source.global_name(func)
        base_is_local = isinstance(func, (cst.Name, cst.Attribute)) and self._root_is_local(func)
        if qual is not None and not base_is_local:
            return self.call_global(node, qual)
        if isinstance(func, cst.Attribute) and not node.args \
                and func.attr.value in ("items", "values", "keys", "children", "named_children"):
            listed = self.module_dict_view(func)
            if listed is not None:
                return listed
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and (self.env.get(func.value.value) in self.empty_stars or self.env.get(func.value.value) in self.star_items):
            return self.star_method(node, func.attr.value, self.star_items.get(self.env.get(func.value.value), {}))
        if isinstance(func, cst.Attribute):
            if isinstance(func.value, cst.Name) and func.value.value == "self" and self.self_value is not None:
                callee = self.expr(func)
                if isinstance(callee.type, (ModuleType, ModuleListType)) or callee.type == ANY:
                    return self.module_call(node, callee)
                if isinstance(callee.type, FunctionType) and callee.type.qualname.startswith("torch."):
                    return self.call_torch(node, callee.type.qualname)  # `self.activation = F.relu`
                raise self.error(func, f"`self.{func.attr.value}` is a {callee.type} and cannot be called")
            obj = self.expr(func.value)
            if isinstance(obj.type, (TensorType,)):
                return self.tensor_method(node, obj, func.attr.value)
            if isinstance(obj.type, ListType) and func.attr.value == "copy" and not node.args:
                none = self.b.constant(None)
                return self.op(ops.SliceOp, [obj, none, none, none], [obj.type]).result
            if isinstance(obj.type, ListType) and func.attr.value in ("append", "extend"):
                args, kwnames, kwargs, _ = self.call_arguments(node)
                if len(args) != 1 or kwnames:
                    raise self.error(node, f"list.{func.attr.value} takes one argument")
                if func.attr.value == "append":
                    self.append_to(obj, args[0], node.args[0].value)
                else:
                    self.extend_by(obj, args[0], node.args[0].value)
                return self.b.constant(None)
            layer = self.named_layer(obj, func.attr.value)
            if layer is not None:  # `self.head.fc(x)` of a Sequential built from an OrderedDict
                return self.module_call(node, layer)
            if func.attr.value == "forward" and (isinstance(obj.type, ModuleType) or isinstance(
                    obj.type, ModuleListType) and obj.type.kind == "Sequential"):
                # `down.forward(y)` (hrnet): the call without hooks, which the compiled call of a
                # module has too, its entry check finding the module unhooked
                return self.module_call(node, obj)
            if isinstance(obj.type, ModuleType):
                called = self.submodule_method(node, obj, func.attr.value)
                if called is not None:
                    return called
                raise self.error(func, f"calling a method of submodule ({obj.type}) is not supported",
                                 "call the submodule itself, or move the code into this module")
            if obj.type == ANY:
                raise self.error(func, "calling a method of a value whose type is not known")
            raise self.error(func, f"method `{func.attr.value}` of a value of type {obj.type} is not supported")
        callee = self.expr(func)
        if callee in self.functions_known:  # what a lookup returned (lookup_call)
            signature = self.ctx.looked_up_signature(self.functions_known[callee])
            args, kwnames, kwargs, _ = self.call_arguments(node)
            return self.call_compiled(node, signature, None, args, kwnames, kwargs)
        if isinstance(callee.type, (ModuleType, ModuleListType)) or callee.type == ANY:
            return self.module_call(node, callee)
        raise self.error(func, f"a value of type {callee.type} cannot be called")

    def extend_by(self, listed: Value, other: Value, node: cst.CSTNode) -> None:
        """`xs.extend(other)`, `xs += other`: a list or a tuple of elements the list holds."""
        elem = listed.type.elem  # type: ignore[attr-defined]
        elems = [other.type.elem] if isinstance(other.type, ListType) else \
            list(other.type.elems) if isinstance(other.type, TupleType) else None
        if elems is None or not all(is_subtype(t, elem) for t in elems):
            raise self.error(node, f"extending a {listed.type} by a {other.type}")
        self.op(ops.ListExtendOp, [listed, other], [])

    def append_to(self, listed: Value, value: Value, node: cst.CSTNode) -> None:
        elem = listed.type.elem  # type: ignore[attr-defined]
        if not is_subtype(value.type, elem):
            raise self.error(node, f"appending a {value.type} to a list of {elem}",
                             f"an unannotated `[]` is a list of tensors, as in TorchScript: annotate it, "
                             f"e.g. `xs: list[{value.type}] = []`" if elem == TENSOR else None)
        self.op(ops.ListAppendOp, [listed, value], [])

    def star_method(self, node: cst.Call, method: str, items: dict[str, Value]) -> Value:
        """`kwargs.get("k", d)` of `**kwargs` whose keywords are known: none where compiled
        callers pass none (the entry checks that its caller passed none), `items` in a variant
        compiled for one call or those an entry's decorators pass; `kwargs.pop("k", d)` of a key
        it does not hold; `kwargs.items()` and so on when there are none."""
        if method == "get" and 1 <= len(node.args) <= 2 and not any(a.keyword or a.star for a in node.args):
            key = self.expr(node.args[0].value)
            if items and not isinstance(self.known(key), str):
                raise self.error(node.args[0], "`.get()` of `**kwargs` with a key not known when compiling is not supported")
            if self.known(key) in items:
                return items[self.known(key)]
            return self.expr(node.args[1].value) if len(node.args) == 2 else self.b.constant(None)
        if method == "pop" and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args) \
                and isinstance(self.known(key := self.expr(node.args[0].value)), str) and self.known(key) not in items:
            return self.expr(node.args[1].value)  # (popping a key it does not hold changes nothing)
        if method in ("items", "keys", "values") and not node.args and not items:
            return self.b.constant(())
        raise self.error(node, f"`.{method}()` of `**kwargs` is not supported")

    def module_dict_view(self, func: cst.Attribute) -> Value | None:
        """`d.items()` / `values()` / `keys()` of an nn.ModuleDict, `m.children()` /
        `named_children()` of any module, seen through a live instance (script(instance, ...)):
        a tuple of its entries in order, so a loop over it unrolls. (children() skips None and
        yields a module registered twice once, as eager's does.)"""
        method = func.attr.value
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            info, obj = self.class_info, self.self_value
        else:
            obj = self.expr(func.value)
            info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        children = method in ("children", "named_children")
        if info is None or obj is None or not isinstance(info.instance, nn.ModuleDict if not children else nn.Module):
            return None
        return self.listed_modules(obj, info, method)

    def listed_modules(self, obj: Value, info: ClassInfo, method: str) -> Value | None:
        """A tuple of the submodules of module `obj` (`info` of its class variant, from a live
        instance), in order: as `method` ("children", "named_children", "values", "items",
        "keys", or "iter": what iterating over a Sequential or ModuleList yields) lists them;
        None where one is not known as a module."""
        assert info.instance is not None
        children = method in ("children", "named_children")
        entries, seen = [], set()
        for name, child in info.instance._modules.items():
            if children and (child is None or id(child) in seen):
                continue
            seen.add(id(child))
            attr = info.attrs.get(name)
            if attr is None or attr.kind != "module":
                return None
            key = self.b.constant(name)
            module = self.op(ops.GetAttrOp, [obj], [attr.type], attr=name).result
            if method == "keys":
                entries.append(key)
            elif method in ("values", "children", "iter"):
                entries.append(module)
            else:
                entries.append(self.op(ops.TupleOp, [key, module], [TupleType((STR, attr.type))]).result)
        return self.op(ops.TupleOp, entries, [TupleType(tuple(e.type for e in entries))]).result

    def iterated_modules(self, obj: Value) -> Value | None:
        """What a loop over module `obj` walks when its class is a Sequential or ModuleList with
        a forward of its own (`class SequentialList(nn.Sequential)` looping over `self`): a
        tuple of its layers, as for a plain one; else None."""
        info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        if info is None or not isinstance(info.instance, (nn.Sequential, nn.ModuleList)):
            return None
        return self.listed_modules(obj, info, "iter")

    def _root_is_local(self, node: cst.BaseExpression) -> bool:
        while isinstance(node, cst.Attribute):
            node = node.value
        return isinstance(node, cst.Name) and self.env.get(node.value) is not None

    def call_global(self, node: cst.Call, qual: str) -> Value:
        if qual in CONSTANT_CALLS:
            if node.args:
                raise self.error(node, f"{qual}() takes no arguments")
            # script(instance, ...) compiles what TorchScript's recursive scripting would: code
            # written for it keeps eager-only work (API-usage logging, checkpointing) under
            # `not torch.jit.is_scripting()`, so there it is True, as under TorchScript. Not in
            # code for autograd, which must do eager's eager-only work (densenet's checkpointing,
            # which under TorchScript raises).
            scripting = self.ctx.recursive and not self.ctx.autograd and qual.endswith("is_scripting")
            return self.b.constant(True if scripting else CONSTANT_CALLS[qual], BOOL)
        if qual.startswith("builtins."):
            return self.call_builtin(node, qual[len("builtins."):])
        if self.ctx.functions is not None and not qual.startswith(("torch.", "math.")):
            alias = self.ctx.functions.torch_name(self.source, node.func)
            if alias is not None:  # a torch function under another name (`from .utils import _assert`)
                return self.call_global(node, alias)
        signature = self.ctx.function_signature(qual, self.source, node.func) or self.ctx.static_signature(qual)
        if signature is not None:
            args, kwnames, kwargs, _ = self.call_arguments(node)
            return self.call_compiled(node, signature, None, args, kwnames, kwargs)
        if qual in self.source.functions or qual in self.source.classes:
            raise self.error(node.func, f"`{qual}` is not compiled",
                             f"decorate `{qual}` with @script, or create it outside the compiled code")
        if qual.startswith("math."):
            return self.call_math(node, qual)
        if qual == "torch._assert":
            return self.torch_assert(node)
        if qual in JIT_ANNOTATE:
            return self.jit_annotate(node)
        if qual == "torch.Size":
            return self.torch_size(node)
        if qual.startswith("torch."):
            return self.call_torch(node, qual)
        looked_up = self.lookup_call(node) if self.ctx.permissive and self.ctx.functions is not None else None
        if looked_up is not None:
            return looked_up
        raise self.error(node.func, f"calls of `{qual}` are not supported in compiled code",
                         "only torch.*, torch.nn.functional.*, math.*, builtins and @script code can be called")

    def lookup_call(self, node: cst.Call) -> Value | None:
        """A call of a module-level object with arguments known now (literals, settings read from
        the live instance, module-level names) that returns a function with source code, as HF's
        `ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, default)`: the
        call is made now, and calls of its result compile that function. A py.check_lookup
        makes the call again on entry and checks it returns the same function (specialize)."""
        if any(a.keyword is not None or a.star for a in node.args):
            return None
        operands: list[Value] = []
        args: list[tuple] = []
        for arg in node.args:
            qual = self.source.global_name(arg.value) if isinstance(arg.value, cst.Name) else None
            if qual is not None and "." not in qual and self.env.get(arg.value.value) is None:  # type: ignore[attr-defined]
                args.append(("global", qual))
                continue
            v = self.expr(arg.value)
            known = self.known(v)
            if known is self._UNKNOWN and isinstance(v.owner, ops.GetAttrOp) and "after" not in v.owner.attributes \
                    and isinstance(v.owner.operands[0].type, ModuleType):  # a module's setting (`self.impl`)
                info = self.ctx.class_named(v.owner.operands[0].type.qualname)
                found_attr = info.attrs.get(v.owner.attributes["attr"]) if info is not None else None
                known = found_attr.value if found_attr is not None and found_attr.has_value else self._UNKNOWN
            if known is not None and type(known) not in (bool, int, float, str):
                return None
            args.append(("const", known))
            operands.append(v)
        assert self.ctx.functions is not None
        found = self.ctx.functions.lookup(self.source, node.func, [GlobalRef(a[1]) if a[0] == "global" else a[1] for a in args])
        if found is None:
            return None
        result = self.op(ops.CheckLookupOp, operands, [FunctionType(found.qualname)], module=self.source.module_name or "",
                         callee=self.source.code(node.func), args=tuple(args), returns=(found.module, found.qualname)).result
        self.functions_known[result] = found
        return result

    def torch_assert(self, node: cst.Call) -> Value:
        """`torch._assert(cond, message)` is `assert cond, message`: AssertionError(message)
        when cond (a bool, or a one-element tensor) is false. The message is built only then."""
        if len(node.args) != 2 or any(a.star or a.keyword is not None and a.keyword.value not in ("condition", "message")
                                      for a in node.args):
            raise self.error(node, "torch._assert takes a condition and a message")
        cond_node, message_node = node.args[0].value, node.args[1].value
        cond = self.condition_of(self.expr(cond_node), cond_node)
        lazy = isinstance(message_node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
        message = None if lazy else self.expr(message_node)
        failed = self.op(ops.UnaryOp, [cond], [BOOL], op="not").result
        if_op = ops.IfOp([failed], [], regions=[ops.Region([ops.Block()]), ops.Region([ops.Block()])])
        self.b.insert(if_op)
        with self.b.at_end_of(if_op.then_block):
            if message is None:
                message = self.expr(message_node)
            self.op(ops.RaiseOp, [message], [], exc="AssertionError", called=True)
            self.b.create(ops.YieldOp, [])
        with self.b.at_end_of(if_op.else_block):
            self.b.create(ops.YieldOp, [])
        return self.b.constant(None)

    def jit_annotate(self, node: cst.Call) -> Value:
        """`torch.jit.annotate(T, value)`: `value` as a value of type T, as `v: T = value` is
        (an empty list of T's elements: `torch.jit.annotate(List[Tensor], [])`)."""
        from transpiler.annotations import annotation_type
        from transpiler.classinfo import module_class_names

        if len(node.args) != 2 or any(a.keyword is not None or a.star for a in node.args):
            raise self.error(node, "torch.jit.annotate() takes a type and a value")
        declared = annotation_type(self.source, node.args[0].value, module_class_names(self.source))
        return self.declared_value(declared, node.args[1].value, None, "annotated as")  # type: ignore[attr-defined]

    def torch_size(self, node: cst.Call) -> Value:
        """`torch.Size(sizes)` of a list or tuple of ints: a tuple of ints at run time, as
        `x.size()` is (a tuple type where the number of sizes is known now)."""
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames or len(args) > 1:
            raise self.error(node, "torch.Size takes one list or tuple of ints")
        seq = args[0] if args else self.b.constant(())
        t = seq.type
        elems = t.elems if isinstance(t, TupleType) else (t.elem,) if isinstance(t, ListType) else None
        if elems is None or not all(e in (INT, ANY) for e in elems):
            raise self.error(node.args[0] if node.args else node, f"torch.Size of {a_type(t)}",
                             "pass a list or a tuple of ints (x.shape and x.size() already are sizes)")
        if isinstance(seq.owner, ops.ListOp):  # a display: its length is known
            t = TupleType(tuple(v.type for v in seq.owner.operands))
        return self.op(ops.BuiltinCallOp, [seq], [t], callee="torch.Size").result

    def call_torch(self, node: cst.Call, qual: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node, sizes=qual in SIZE_VARARGS_FUNCTIONS)
        consts = self.constant_arguments(args, kwnames, kwargs)
        try:
            info = resolve_function(qual, [a.type for a in args], dict(zip(kwnames, (k.type for k in kwargs))), consts)
        except SignatureError as e:
            at = node.func if not is_known_function(qual) else self.argument_named_in(node, str(e))
            raise self.error(at, str(e), getattr(e, "hint", None)) from None
        return self.torch_op(ops.TorchCallOp, info, args + kwargs, kwnames, callee=qual)

    def tensor_method(self, node: cst.Call, obj: Value, method: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node, sizes=method in SIZE_VARARGS_METHODS)
        consts = self.constant_arguments(args, kwnames, kwargs)
        try:
            info = resolve_method(method, obj.type, [a.type for a in args], dict(zip(kwnames, (k.type for k in kwargs))), consts)
        except SignatureError as e:
            raise self.error(self.argument_named_in(node, str(e)), str(e), getattr(e, "hint", None)) from None
        return self.torch_op(ops.TensorMethodOp, info, [obj] + args + kwargs, kwnames, method=method)

    def argument_named_in(self, node: cst.Call, message: str) -> cst.CSTNode:
        """The keyword argument a signature error complains about, else the whole call."""
        for arg in node.args:
            if arg.keyword is not None and f"keyword argument '{arg.keyword.value}'" in message:
                return arg
        return node

    def torch_op(self, cls: type[ops.Operation], info: Any, operands: list[Value], kwnames: list[str], **attrs: Any) -> Value:
        attrs = dict(attrs)
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        attrs.update(effect_attributes(info))
        result_types = [] if info.result == NONE else [info.result]
        op = self.op(cls, operands, result_types, **attrs)
        return op.result if op.results else self.b.constant(None)

    def constant_arguments(self, args: list[Value], kwnames: list[str], kwargs: list[Value]) -> dict:
        consts: dict[int | str, object] = {}
        for i, a in enumerate(args):
            if isinstance(a.owner, ops.ConstantOp):
                consts[i] = a.owner.value
        for k, v in zip(kwnames, kwargs):
            if isinstance(v.owner, ops.ConstantOp):
                consts[k] = v.owner.value
        return consts

    def call_math(self, node: cst.Call, qual: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames:
            raise self.error(node, f"{qual} takes no keyword arguments")
        for a, arg_node in zip(args, node.args):
            if a.type not in (INT, FLOAT, BOOL, ANY):
                raise self.error(arg_node, f"{qual} takes numbers, not {a.type}", "use the torch function for tensors")
        t = INT if qual in MATH_INT_RESULTS else BOOL if qual in MATH_BOOL_RESULTS else FLOAT
        import math as _math
        if not callable(getattr(_math, qual[len("math."):], None)):
            raise self.error(node.func, f"`{qual}` is not a function of the math module")
        return self.op(ops.BuiltinCallOp, args, [t], callee=qual).result

    def enumerated(self, seq: Value) -> Value | None:
        """`enumerate(seq)` of a tuple or of a module list of known length: the tuple of its
        (index, item) pairs; None for anything else."""
        t = seq.type
        if not (isinstance(t, TupleType) or isinstance(t, ModuleListType) and t.length_known) \
                or len(t.elems) > UNROLL_LIMIT:
            return None
        pairs = []
        for i, elem in enumerate(t.elems):
            index = self.b.constant(i)
            item = self.op(ops.GetItemOp, [seq, index], [elem]).result
            pairs.append(self.op(ops.TupleOp, [index, item], [TupleType((INT, elem))]).result)
        return self.op(ops.TupleOp, pairs, [TupleType(tuple(p.type for p in pairs))]).result

    def zipped(self, seqs: list[Value]) -> Value | None:
        """`zip(a, b, ...)` of tuples and module lists of known length: the tuple of their items
        side by side, as long as the shortest; None for anything else."""
        if not all(isinstance(s.type, TupleType) or isinstance(s.type, ModuleListType) and s.type.length_known
                   for s in seqs):
            return None
        count = min(len(s.type.elems) for s in seqs)  # type: ignore[attr-defined]
        if count > UNROLL_LIMIT:
            return None
        rows = []
        for i in range(count):
            index = self.b.constant(i)
            items = [self.op(ops.GetItemOp, [s, index], [s.type.elems[i]]).result for s in seqs]  # type: ignore[attr-defined]
            rows.append(self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result)
        return self.op(ops.TupleOp, rows, [TupleType(tuple(r.type for r in rows))]).result

    def call_builtin(self, node: cst.Call, name: str) -> Value:
        if name not in BUILTIN_CALLS:
            raise self.error(node.func, f"the builtin `{name}` is not supported in compiled code",
                             f"compiled code can call {', '.join(sorted(BUILTIN_CALLS))}"
                             + ("; print outside the model" if name == "print" else ""))
        if name == "range":
            raise self.error(node, "range() is only supported as the iterable of a for loop")
        if name in ("zip", "enumerate") and node.args and all(not a.keyword and not a.star for a in node.args) \
                and (name == "zip" or len(node.args) == 1):
            # (`for i, (conv, bn) in enumerate(zip(self.convs, self.bns))`: unrolled)
            seqs = [self.expr(a.value) for a in node.args]
            unrolled = self.zipped(seqs) if name == "zip" else self.enumerated(seqs[0])
            if unrolled is not None:
                return unrolled
            raise self.error(node, f"{name}() of a value whose length is not known when compiling is not supported",
                             "iterate over tuples or module lists, or index a list by range(len(...))")
        if name == "isinstance":
            return self.isinstance_call(node)
        if name in ("hasattr", "getattr"):
            return self.module_hasattr(node, name)
        if name == "next":
            return self.next_call(node)
        if name in UNROLLED_CALLS:
            return self.unrolled_call(node, name)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames:
            raise self.error(node, f"{name}() keyword arguments are not supported")
        types = [a.type for a in args]
        if name in ("float", "int", "bool", "str") and len(args) == 1:
            owner = args[0].owner
            if name == "float" and isinstance(owner, ops.ConstantOp) and isinstance(owner.value, str):
                try:
                    return self.b.constant(float(owner.value), FLOAT)
                except ValueError:
                    raise self.error(node, f"float({owner.value!r}) is not a number") from None
            if isinstance(types[0], TensorType) or types[0] in (INT, FLOAT, BOOL, ANY) or (name == "str"):
                t = {"float": FLOAT, "int": INT, "bool": BOOL, "str": STR}[name]
                return self.op(ops.BuiltinCallOp, args, [t], callee=name).result
            raise self.error(node, f"{name}() of a {types[0]}")
        if name == "len" and len(args) == 1:
            if isinstance(types[0], (ListType, TupleType, TensorType, ModuleListType, DictType)) or types[0] in (STR, ANY):
                return self.op(ops.BuiltinCallOp, args, [INT], callee="len").result
            raise self.error(node, f"len() of a {types[0]}")
        if name == "abs" and len(args) == 1 and types[0] in (INT, FLOAT, BOOL, ANY):
            return self.op(ops.BuiltinCallOp, args, [INT if types[0] == BOOL else types[0]], callee="abs").result
        if name == "round" and 1 <= len(args) <= 2 and types[0] in (INT, FLOAT, ANY):
            t = INT if len(args) == 1 else types[0]  # round(t.item(), 1) is Any: the float or int it rounds
            return self.op(ops.BuiltinCallOp, args, [t], callee="round").result
        if name in ("min", "max") and len(args) >= 2 and all(t in (INT, FLOAT, BOOL, ANY) for t in types):
            t = FLOAT if FLOAT in types else INT
            if all(x == BOOL for x in types):
                t = BOOL
            if t == FLOAT and INT in types or ANY in types:
                t = ANY  # Python keeps the winner's type: max(1, 0.5) is the int 1; t.item() is either
            return self.op(ops.BuiltinCallOp, args, [t], callee=name).result
        if name in ("min", "max") and len(args) == 1 and isinstance(types[0], (ListType,)) and types[0].elem in (INT, FLOAT):
            return self.op(ops.BuiltinCallOp, args, [types[0].elem], callee=name).result
        raise self.error(node, f"this use of {name}() is not supported",
                         "min/max take numbers (use torch.minimum/maximum or .amin/.amax for tensors)")

    def unrolled_call(self, node: cst.Call, name: str) -> Value:
        """all/any/sum/tuple/list of a generator expression or list comprehension over a sequence
        of known length (a tuple, range of a constant), or of a tuple: one expression per element.
        A generator's elements are computed only as far as all/any read them."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
            raise self.error(node, f"{name}() takes one argument here")
        arg = node.args[0].value
        lazy = isinstance(arg, cst.GeneratorExp)
        if name == "list" and isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            return self.list_comprehension(arg)  # type: ignore[attr-defined]
        if isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            mark = self.mark()  # type: ignore[attr-defined]
            try:
                thunks = self.comprehension_elements(arg)
            except UserError:
                if name != "sum":
                    raise
                self.rollback(mark)  # type: ignore[attr-defined]  # (what the iterable built)
                return self.sum_of_list(self.list_comprehension(arg), arg)  # type: ignore[attr-defined]
        else:
            seq = self.expr(arg)
            if name == "list":
                return self.list_of(seq, arg)
            if name == "sum" and isinstance(seq.type, ListType):
                return self.sum_of_list(seq, arg)
            if not isinstance(seq.type, TupleType):
                raise self.error(arg, f"{name}() of a {seq.type} is not supported",
                                 "pass a tuple, or a generator expression over a tuple or range(<constant>)")
            thunks = [self._getter(seq, i) for i in range(len(seq.type.elems))]
            lazy = False
        if not lazy:
            values = [t() for t in thunks]
            thunks = [lambda v=v: v for v in values]
        if name == "tuple":
            values = [t() for t in thunks]
            return self.op(ops.TupleOp, values, [TupleType(tuple(v.type for v in values))]).result
        if name == "list":
            values = [t() for t in thunks]
            if not values:
                raise self.error(node, "the type of an empty list is not known", "annotate it: `xs: list[Tensor] = []`")
            return self.make_list(values, None, node)
        if name == "sum":
            total = self.b.constant(0)
            for t in thunks:
                total = self.binary("+", total, t(), node)
            return total
        op = "and" if name == "all" else "or"

        def truth_of(thunk: Callable[[], Value]) -> Value:
            v = thunk()
            if isinstance(v.type, TensorType):
                return self.op(ops.BuiltinCallOp, [v], [BOOL], callee="bool").result
            return self.truth(v, arg)

        if not thunks:
            return self.b.constant(name == "all")
        result = truth_of(thunks[0])
        for t in thunks[1:]:
            result = self.short_circuit(op, result, lambda t=t: truth_of(t), node)
        return result

    def sum_of_list(self, seq: Value, node: cst.CSTNode) -> Value:
        """`sum(xs)` of a list of numbers (of tensors it would be the int 0 when empty)."""
        elem = seq.type.elem  # type: ignore[attr-defined]
        if elem not in (INT, FLOAT, BOOL):
            raise self.error(node, f"sum() of a list of {elem} is not supported",
                             "sum() takes numbers here; add tensors in a for loop, or torch.stack(xs).sum(0)")
        return self.op(ops.BuiltinCallOp, [seq], [INT if elem == BOOL else elem], callee="sum").result

    def list_of(self, seq: Value, node: cst.CSTNode) -> Value:
        """`list(seq)`: a new list holding seq's items (a shallow copy of a list); a tuple's
        items must have one type."""
        if isinstance(seq.type, ListType) and _tuple_when_run(seq):  # a torch.Size: its slice is one too
            return self.op(ops.BuiltinCallOp, [seq], [seq.type], callee="list").result
        if isinstance(seq.type, ListType):
            none = self.b.constant(None)
            return self.op(ops.SliceOp, [seq, none, none, none], [seq.type]).result
        if isinstance(seq.type, TupleType):
            elem = unify_all(list(seq.type.elems)) if seq.type.elems else None
            if elem is None:
                raise self.error(node, f"list() of a {seq.type}: " + (
                    "its items have different types, and a list holds one type" if seq.type.elems
                    else "the type of an empty list is not known"),
                    "keep the tuple, or annotate an empty list: `xs: list[Tensor] = []`")
            items = [self._getter(seq, i)() for i in range(len(seq.type.elems))]
            return self.op(ops.ListOp, items, [ListType(TENSOR if isinstance(elem, TensorType) else elem)]).result
        raise self.error(node, f"list() of {a_type(seq.type)} is not supported",
                         "list() takes a list or a tuple in compiled code"
                         + ("; for a tensor's rows use list(t.unbind(0))" if isinstance(seq.type, TensorType) else ""))

    def _getter(self, seq: Value, i: int) -> Callable[[], Value]:
        def get() -> Value:
            return self.op(ops.GetItemOp, [seq, self.b.constant(i)], [seq.type.elems[i]]).result  # type: ignore[attr-defined]
        return get

    def comprehension_elements(self, node: cst.GeneratorExp | cst.ListComp) -> list[Callable[[], Value]]:
        """One function per element of `(elt for target in iterable)`, each lowering `elt` with
        the target bound to that element (in a scope of its own, as in Python)."""
        comp = node.for_in
        if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
            raise self.error(node, "only a single `for` without `if` is supported in a generator expression or comprehension",
                             "write a for loop")
        it = comp.iter
        count: int | None = None
        seq: Value | None = None
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.range" and self.env.get("range") is None:
            bounds = [self.expr(a.value) for a in it.args]
            consts = [self.constant_int(b) for b in bounds]
            if all(c is not None for c in consts) and 1 <= len(consts) <= 3 and not any(a.keyword for a in it.args):
                items = list(range(*consts))  # type: ignore[arg-type]
                elements = [lambda k=k: self.b.constant(k) for k in items]
                count = len(items)
        else:
            seq = self.expr(it)
            if isinstance(seq.type, TupleType):
                count = len(seq.type.elems)
                elements = [self._getter(seq, i) for i in range(count)]
        if count is None:
            raise self.error(node, f"{describe(node)} are only supported over a tuple or range(<constant>)",
                             "write a for loop (e.g. accumulate in a variable)")
        target = comp.target

        def element(get: Callable[[], Value]) -> Callable[[], Value]:
            def lower() -> Value:
                saved = self.env
                self.env = saved.copy()
                try:
                    self.bind_target(target, get())  # type: ignore[attr-defined]
                    return self.expr(node.elt)
                finally:
                    self.env = saved
            return lower

        return [element(g) for g in elements]

    def next_call(self, node: cst.Call) -> Value:
        """`next(iter(xs))` of a list or tuple: its first item (StopIteration when there is
        none, as Python); `next(self.parameters())` / `next(self.buffers())` (also in `iter()`):
        the module's first, as torch orders them (a live instance's, or ahead of time one of
        the class's own)."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
            raise self.error(node, "next() with a default is not supported", NEXT_HINT)
        arg = node.args[0].value
        if isinstance(arg, cst.Call) and self.source.global_name(arg.func) == "builtins.iter" \
                and self.env.get("iter") is None and len(arg.args) == 1 and not arg.args[0].star:
            arg = arg.args[0].value
        if isinstance(arg, cst.Call) and not arg.args and isinstance(arg.func, cst.Attribute) \
                and isinstance(arg.func.value, cst.Name) and arg.func.value.value == "self" \
                and arg.func.attr.value in ("parameters", "buffers") and self.class_info is not None \
                and self.self_value is not None and arg.func.attr.value not in self.class_info.methods:
            return self.first_tensor_of_self(node, arg.func.attr.value)
        seq = self.expr(arg)
        if isinstance(seq.type, TupleType) and seq.type.elems:
            return self._getter(seq, 0)()
        if isinstance(seq.type, ListType):
            empty = self.op(ops.UnaryOp, [seq], [BOOL], op="not").result
            if_op = ops.IfOp([empty], [], regions=[ops.Region([ops.Block()]), ops.Region([ops.Block()])])
            self.b.insert(if_op)
            with self.b.at_end_of(if_op.then_block):
                self.op(ops.RaiseOp, [], [], exc="StopIteration", called=False)
                self.b.create(ops.YieldOp, [])
            with self.b.at_end_of(if_op.else_block):
                self.b.create(ops.YieldOp, [])
            return self.op(ops.GetItemOp, [seq, self.b.constant(0)], [seq.type.elem]).result
        raise self.error(node, f"next() of {a_type(seq.type)} is not supported", NEXT_HINT)

    def first_tensor_of_self(self, node: cst.Call, kind: str) -> Value:
        """The first of `self.parameters()` / `self.buffers()`: a read by its path."""
        assert self.class_info is not None and self.self_value is not None
        instance = self.class_info.instance
        if instance is not None:
            named = instance.named_parameters() if kind == "parameters" else instance.named_buffers()
            path = next(iter(named), (None,))[0]
        else:  # ahead of time: torch lists the module's own before its submodules'
            own = "parameter" if kind == "parameters" else "buffer"
            path = next((n for n, a in self.class_info.attrs.items() if a.kind == own and a.type != NONE), None)
        if path is None:
            raise self.error(node, f"the compiler cannot tell which is the first of `self.{kind}()`"
                             + ("" if instance is None else f": `{type(instance).__name__}` has none"), NEXT_HINT)
        obj, info = self.self_value, self.class_info
        parts = path.split(".")
        for part in parts[:-1]:
            found = info.attrs.get(part) if info is not None else None
            if found is None or found.kind != "module":
                raise self.error(node, f"the first of `self.{kind}()` is `self.{path}`, which the compiler cannot read",
                                 NEXT_HINT)
            obj = self.op(ops.GetAttrOp, [obj], [found.type], attr=part).result
            info = self.ctx.class_named(found.type.qualname) if isinstance(found.type, ModuleType) else None
        return self.op(ops.GetAttrOp, [obj], [TENSOR], attr=parts[-1]).result

    def isinstance_call(self, node: cst.Call) -> Value:
        if len(node.args) != 2:
            raise self.error(node, "isinstance takes two arguments")
        value = self.expr(node.args[0].value)
        kinds = node.args[1].value
        names = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
        if isinstance(value.type, (ModuleType, ModuleListType)):
            return self.module_isinstance(value, names)
        result = False
        for n in names:
            qual = self.source.global_name(n)
            if qual not in PY_TYPES_FOR_ISINSTANCE:
                raise self.error(n, "isinstance is supported for Tensor, int, float, bool, str, tuple and list")
            want = PY_TYPES_FOR_ISINSTANCE[qual]
            t = value.type
            if isinstance(t, OptionalType) or t == ANY:
                raise self.error(node, "isinstance on a value whose type is not fixed is not supported",
                                 "use `is None` / `is not None` for Optional values")
            if qual == "builtins.tuple":
                result = result or isinstance(t, TupleType) or _tuple_when_run(value)
            elif qual == "builtins.list":
                result = result or isinstance(t, ListType) and not _tuple_when_run(value)
            elif want == INT:
                result = result or t in (INT, BOOL)
            elif want == TENSOR:
                result = result or isinstance(t, TensorType)
            else:
                result = result or t == want
        return self.b.constant(result, BOOL)

    def module_isinstance(self, module: Value, names: list[cst.BaseExpression]) -> Value:
        """`isinstance(t, nn.Identity)` of a module: decided when compiling from the class the
        module has (the instance's, script(instance, ...); ahead of time, a torch layer or a
        class of this file, by name), under an entry check that the module is of that class."""
        container = isinstance(module.type, ModuleListType)
        if container:  # (a subclass that keeps Sequential's forward passes its check too)
            qualname = "torch.nn.Sequential" if module.type.kind == "Sequential" else "torch.nn.ModuleList"  # type: ignore[union-attr]
        else:
            qualname = module.type.qualname  # type: ignore[union-attr]
        info = self.ctx.class_named(qualname) if not container else None
        actual: type | None = None
        if info is not None and info.instance is not None:
            actual = type(info.instance)
        elif qualname.startswith("torch.nn."):
            actual = getattr(nn, qualname[len("torch.nn."):], None)
        result = False
        for n in names:
            qual = self.source.global_name(n)
            wanted = self.ctx.functions.class_object(self.source, n) if self.ctx.functions is not None else None
            if wanted is None and qual is not None and qual.startswith("torch.nn."):
                wanted = getattr(nn, qual[len("torch.nn."):], None)
            if isinstance(wanted, type) and actual is not None and not (container and wanted is not actual
                                                                        and issubclass(wanted, actual)):
                result = result or issubclass(actual, wanted)
            elif qual is not None and qual in self.source.classes and actual is None:
                result = result or qual == qualname.split("@")[0]  # (ahead of time: the class itself)
            else:
                raise self.error(n, f"isinstance of a module with `{self.source.code(n)}` is not decided when compiling",
                                 "name a torch layer or a module class")
        self.op(ops.AssumeClassOp, [module], [], qualname=qualname)
        return self.b.constant(result, BOOL)

    def submodule_method(self, node: cst.Call, module: Value, method: str) -> Value | None:
        """`self.rel_pos.get_bias()`: a method other than forward of a submodule whose class is
        compiled, called as a method of `self` is (its code inlined under an entry check that the
        submodule is of that class: ir/passes/inline.py); None where the class has no such
        method, or it is static."""
        info = self.ctx.class_named(module.type.qualname) if isinstance(module.type, ModuleType) else None
        if info is None or method not in info.methods or method in ("forward", "__init__"):
            return None
        source = info.method_source(method) or self.source
        if left_to_python(source, info.methods[method]):
            return self.call_python_method(node, info.methods[method], module, info)
        if is_static(source, info.methods[method]):
            return None
        signature = self.ctx.method_signature(info, method, node)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        return self.call_compiled(node, signature, module, args, kwnames, kwargs, guard_self=True)

    def call_python_method(self, node: cst.Call, method: cst.FunctionDef, obj: Value | None = None,
                           info: ClassInfo | None = None) -> Value:
        """`self.m(...)` (or `obj.m(...)` of module `obj` of class `info`) of a method left to
        Python (`@torch.jit.unused`): a plain call, its result typed by the method's return
        annotation (Any without one, or one the compiler does not know)."""
        from transpiler.annotations import annotation_type
        from transpiler.classinfo import module_class_names

        info = info if info is not None else self.class_info
        obj = obj if obj is not None else self.self_value
        assert obj is not None
        args, kwnames, kwargs, _ = self.call_arguments(node)
        result: Type = ANY
        source = (info.method_source(method.name.value) if info is not None else None) or self.source
        if method.returns is not None:
            try:
                result = annotation_type(source, method.returns.annotation, module_class_names(source))
            except UserError:
                result = ANY
        attrs: dict[str, Any] = {"method": method.name.value}
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        op = self.op(ops.MethodCallOp, [obj, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)

    def call_method_of_self(self, node: cst.Call, method: str) -> Value:
        assert self.class_info is not None and self.self_value is not None
        signature = self.ctx.method_signature(self.class_info, method, node)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        static = is_static(self.class_info.method_source(method) or self.source, self.class_info.methods[method])
        return self.call_compiled(node, signature, None if static else self.self_value, args, kwnames, kwargs)

    def variant_for_call(self, info: ClassInfo, args: list[Value], kwnames: list[str],
                         kwargs: list[Value]) -> Signature | None:
        """Recursive mode: the forward of `info` compiled for this call of the module, where the
        call's arguments do not fit its annotations (`call_variant` says which) or it passes
        keywords to `**kwargs`; None where the plain forward fits (or there is none, or the
        variant does not compile: then the call runs the module as Python)."""
        if not self.ctx.recursive or "forward" not in info.methods:
            return None
        try:
            sig = self.ctx.method_signature(info, "forward")
        except UserError:  # it does not compile for its annotations: it may for this call's arguments
            sig = self.ctx.failed_signature(f"{info.name}.forward")
            if sig is None:
                return None
        try:
            return self.call_variant(sig, 1, args, kwnames, kwargs)
        except UserError:
            return None

    def call_variant(self, sig: Signature, skip: int, args: list[Value], kwnames: list[str],
                     kwargs: list[Value]) -> Signature | None:
        """The variant of `sig` (its first `skip` parameters bound already) for a call with these
        arguments (FileContext.call_variant), or None where `sig` itself fits them."""
        params = list(sig.params[skip:])
        types = dict(zip(sig.params, sig.types))
        takes = (len(sig.params) if sig.positional is None else sig.positional) - skip
        given = dict(zip(params[:takes], args))
        positional = [a.type for a in args[takes:]]
        if positional and sig.star is None:
            return None
        extras: list[tuple[str, Type]] = []
        for k, v in zip(kwnames, kwargs):
            if k in params:
                given[k] = v
            elif sig.kwstar is not None:
                extras.append((k, v.type))
        # An int passed where a float is declared stays an int in Python (`t * k` of an int tensor
        # stays integral): the variant takes it as an int; a tuple passed where a list is declared
        # (maxvit's `window_partition(x, self.partition_size)`) stays a tuple: the variant takes
        # the tuple, and compiles where the body only reads it. Permissive mode also takes what the
        # annotations do not allow (Python does not check them) and keywords into **kwargs.
        widened = {p: v.type for p, v in given.items() if not is_subtype(v.type, types[p])}  # type: ignore[arg-type]
        for p in params:  # a Union parameter takes the member passed (its default's type, left out)
            if isinstance(types[p], UnionType) and p not in widened:
                if p in given:
                    widened[p] = given[p].type
                elif p in sig.defaults:
                    widened[p] = literal_type(sig.defaults[p])
        if self.ctx.permissive:
            # ... and None where the call passes None or leaves a None default (HF's `past_key_values`,
            # `encoder_hidden_states`): `x is None` is then decided when lowering, as Python
            # would find it, so a name bound only on the side not taken is not read
            for p in params:
                passes_none = given[p].type == NONE if p in given else p in sig.defaults and sig.defaults[p] is None
                if passes_none and types[p] != NONE and p not in sig.kwstar_items + sig.star_items:
                    widened[p] = NONE
        if not self.ctx.permissive and (extras or positional or any(
                not (types[p] == FLOAT and t in (INT, BOOL)) and not _tuple_for_list(t, types[p])
                and not (isinstance(types[p], UnionType) and is_subtype(t, types[p])) for p, t in widened.items())):
            return None
        if not widened and not extras and not positional:
            return None
        return self.ctx.call_variant(sig, widened, extras, positional)

    def call_compiled(self, node: cst.Call, sig: Signature, self_value: Value | None,
                      args: list[Value], kwnames: list[str], kwargs: list[Value], guard_self: bool = False) -> Value:
        """A call of a compiled function: bind arguments to parameters, fill in defaults.
        `guard_self`: `self_value` is a submodule, whose class an entry check confirms."""
        # (ahead of time too, a call of an entry with Union parameters: the variant for its members)
        if (self.ctx.recursive or any(isinstance(t, UnionType) for t in sig.types)) and not sig.kwstar_items:
            variant = self.call_variant(sig, int(self_value is not None), args, kwnames, kwargs)
            if variant is not None:
                sig = variant
        params = list(sig.params)
        types = list(sig.types)
        if self_value is not None:
            params, types = params[1:], types[1:]
        bound: dict[str, Value] = {}
        if len(args) > len(params):
            raise self.error(node, f"{sig.sym_name}() takes {len(params)} arguments, {len(args)} given")
        if sig.positional is not None and len(args) > sig.positional - (self_value is not None):
            raise self.error(node, f"{sig.sym_name}() takes {sig.positional} positional arguments")
        for p, a in zip(params, args):
            bound[p] = a
        for k, v in zip(kwnames, kwargs):
            if k not in params:
                raise self.error(node, f"{sig.sym_name}() has no parameter `{k}`")
            if k in bound:
                raise self.error(node, f"{sig.sym_name}() got two values for `{k}`")
            bound[k] = v
        operands: list[Value] = [] if self_value is None else [self_value]
        for p, t in zip(params, types):
            if p not in bound:
                if p not in sig.defaults:
                    raise self.error(node, f"{sig.sym_name}() is missing the argument `{p}`")
                bound[p] = self.b.constant(sig.defaults[p])
            if not is_subtype(bound[p].type, t) and not (t == FLOAT and bound[p].type in (INT, BOOL)) \
                    and bound[p].type != ANY:  # type: ignore[arg-type]
                raise self.error(node, f"argument `{p}` of {sig.sym_name}() is {t}, got {bound[p].type}")
            operands.append(bound[p])
        result_types = [] if sig.result == NONE else [sig.result]
        attrs = {"guard_self": True} if guard_self else {}
        op = self.op(ops.FuncCallOp, operands, result_types, callee=sig.sym_name, **attrs)  # type: ignore[list-item]
        return op.result if op.results else self.b.constant(None)

    def module_call(self, node: cst.Call, module: Value) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node)
        t = module.type
        info = self.ctx.class_named(t.qualname) if isinstance(t, ModuleType) else None
        if info is not None and info.call_override is not None:
            return self.overridden_call(module, info, args, kwnames, kwargs)
        return self.plain_module_call(node, module, args, kwnames, kwargs)

    def overridden_call(self, module: Value, info: ClassInfo, args: list[Value], kwnames: list[str],
                        kwargs: list[Value]) -> Value:
        """A call of a module whose class has its own `__call__` (HF's GradientCheckpointingLayer),
        which runs instead of nn.Module's. Permissive recursive mode compiles that `__call__` for
        the call (inlining checks at entry that the module's `__call__` is still it); otherwise
        the call is a plain Python call, never inlined."""
        assert info.call_override is not None
        attrs: dict[str, Any] = {"kwnames": tuple(kwnames)} if kwnames else {}
        result: Type = ANY
        if self.ctx.permissive and self.ctx.recursive:
            try:
                sig = self.ctx.override_signature(info)
                sig = self.call_variant(sig, 1, args, kwnames, kwargs) or sig
                result = sig.result  # type: ignore[assignment]
                attrs.update(callee=sig.sym_name, call=info.call_override[2])
            except UserError:
                pass
        if "callee" not in attrs:
            attrs["opaque"] = True
        op = self.op(ops.ModuleCallOp, [module, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)

    def super_call(self, node: cst.Call) -> Value:
        """`super().__call__(*args, **kwargs)` in a class's own `__call__`: nn.Module's call of
        this module (its forward, with hooks), which inlining checks at entry as for any call."""
        assert self.self_value is not None and self.class_info is not None and self.class_info.call_override
        args, kwnames, kwargs, _ = self.call_arguments(node)
        return self.plain_module_call(node, self.self_value, args, kwnames, kwargs, self.class_info.call_override[2])

    def plain_module_call(self, node: cst.Call, module: Value, args: list[Value], kwnames: list[str],
                          kwargs: list[Value], call: str | None = None) -> Value:
        """A call that runs nn.Module.__call__: the module's forward. `call`: the module's own
        `__call__` that this call is made from (its entry check names it)."""
        t = module.type
        result: Type
        if isinstance(t, ModuleListType):
            if t.kind != "Sequential":
                raise self.error(node.func, "an nn.ModuleList cannot be called", "iterate over it")
            result = TENSOR
        attrs: dict[str, Any] = {"kwnames": tuple(kwnames)} if kwnames else {}
        info = self.ctx.class_named(t.qualname) if isinstance(t, ModuleType) else None
        overload = self.ctx.overload_signature(info, "forward", [a.type for a in args]) \
            if info is not None and info.overloads.get("forward") and not kwnames else None
        variant = self.variant_for_call(info, args, kwnames, kwargs) if overload is None and info is not None else None
        if overload is not None:
            result = overload.result  # type: ignore[assignment]
            attrs["callee"] = overload.sym_name  # (ir/passes/inline.py inlines this one)
        elif variant is not None:
            result = variant.result  # type: ignore[assignment]
            attrs["callee"] = variant.sym_name
        elif isinstance(t, ModuleType):
            result = self.ctx.module_result_type(t.qualname, node)
        elif not isinstance(t, ModuleListType):
            result = ANY
        if call is not None:
            attrs["call"] = call
        op = self.op(ops.ModuleCallOp, [module, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)


def _tuple_for_list(given: Type, declared: Type) -> bool:
    """A tuple whose items are all of the list's element type, passed for a `list[T]`."""
    return isinstance(given, TupleType) and isinstance(declared, ListType) \
        and all(is_subtype(e, declared.elem) for e in given.elems)


def _has_fstring(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.ConcatenatedString):
        return _has_fstring(node.left) or _has_fstring(node.right)
    return isinstance(node, cst.FormattedString)


_ABSENT = object()


def assigned_in_method(info: ClassInfo, attr: str) -> tuple[str, int] | None:
    """The method (and line) that assigns `self.<attr>`, for a class read from source."""
    if info.source is None:
        return None
    for name, method in info.methods.items():
        for node in _self_assignments(method):
            if node.attr.value == attr:
                return name, info.source.loc(node).line
    return None


def _self_assignments(method: cst.FunctionDef) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class Finder(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            t = node.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                found.append(t)

    method.body.visit(Finder())
    return found


def _tuple_when_run(value: Value) -> bool:
    """A list[int] that is a tuple at run time: `x.shape` / `x.size()` of a tensor whose rank is
    not known when lowering (a torch.Size), a slice of one, a py.spread."""
    owner = value.owner
    if isinstance(owner, ops.SliceOp):
        return _tuple_when_run(owner.operands[0])
    if isinstance(owner, ops.BuiltinCallOp) and owner.attributes["callee"] == "torch.Size":
        return True
    return isinstance(owner, ops.SpreadOp) or (
        isinstance(owner, ops.GetAttrOp) and owner.attributes.get("attr") == "shape") or (
        isinstance(owner, ops.TensorMethodOp) and owner.attributes.get("method") == "size" and len(owner.operands) == 1)


# Calls whose sizes may come as varargs or as one sequence, with the same meaning.
SIZE_VARARGS_METHODS = frozenset({"view", "reshape", "expand", "permute", "repeat", "tile", "flip",
                                  "new_zeros", "new_ones", "new_empty"})
SIZE_VARARGS_FUNCTIONS = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})


def a_type(t: object) -> str:
    """`t` with its indefinite article: "an int", "a Tensor"."""
    if t == ANY:
        return "a Python object (Any)"
    return f"an {t}" if str(t)[:1].lower() in tuple("aeiou") else f"a {t}"


def describe(node: cst.CSTNode) -> str:
    names = {
        cst.Lambda: "lambda expressions", cst.ListComp: "list comprehensions", cst.DictComp: "dict comprehensions",
        cst.SetComp: "set comprehensions", cst.GeneratorExp: "generator expressions", cst.Dict: "dict displays",
        cst.Set: "set displays", cst.FormattedString: "f-strings", cst.Await: "await", cst.Yield: "yield",
        cst.NamedExpr: "assignment expressions (:=)", cst.StarredElement: "starred expressions",
        cst.Ellipsis: "`...`",
    }
    return names.get(type(node), type(node).__name__)


def hint_for(node: cst.CSTNode) -> str | None:
    hints = {
        cst.ListComp: "write a for loop that appends to a list",
        cst.GeneratorExp: "use a list comprehension, or a for loop",
        cst.Lambda: "define a function decorated with @script",
        cst.Dict: "return a tuple, or pass values as separate arguments",
        cst.FormattedString: "compiled code cannot build strings; compute values and format outside",
    }
    return hints.get(type(node))

"""Annotations suggested for unannotated parameters and results, read off how the function body
uses them. Purely syntactic (libcst and torch's operator schemas, no lowering), so the same
answer serves two callers: the signature of a parameter that defaults to `None` (typed
`Optional[T]` without an annotation) and the diagnostic for a missing annotation in strict mode,
whose help line is the annotation (or the whole signature) to paste.

What decides a parameter's type, strongest first (the first use in the source wins within a
strength):

1. a tensor method or attribute on it (`mask.float()`, `x.shape`), tensor-style indexing
   (`x[:, 0]`), being combined or compared with a tensor, being passed where a torch function,
   a tensor method or an annotated function of the file takes a Tensor / int / float / bool
   (`torch.relu(x)`, `x.view(b, n)`, `F.dropout(x, p)`), `range(n)`, being assigned a value
   of known type (`mask = torch.ones_like(x)`);
2. arithmetic or comparison with a size (`n * x.size(0)`, `i < x.shape[1]`): int;
3. use only as a condition (`if flag:`, `not flag`): bool.

Nothing of these: Tensor, TorchScript's type for an unannotated parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import torch

from ir.core.types import (
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    ListType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
)
from transpiler.diagnostics import UserError
from transpiler.source import SourceFile, is_literal, literal_value
from transpiler.torch_arg_kinds import (
    tensor_method_param,
    torch_function_param,
    torch_function_result,
)


@dataclass(frozen=True)
class Suggestion:
    type: Type
    reason: str  # why, in words that follow "because" / sit in parentheses: "line 7 calls `mask.float()`"
    decided: bool = True  # False: nothing in the body decided it (the Tensor default)


# Strengths of evidence (lower wins).
_STRONG, _SIZE, _CONDITION = 0, 1, 2

# Methods of Python lists: a name they are called on is not (known to be) a tensor.
_LIST_METHODS = frozenset("append extend insert pop remove clear reverse sort index count copy".split())
# Tensor methods whose result is an int or a bool (everything else a tensor method returns is
# taken to be a tensor; `.item()`, `.tolist()`, `.size()` without a dim are not decided).
_INT_METHODS = frozenset("dim ndimension numel nelement element_size get_device".split())
_SIZED_METHODS = frozenset({"size", "stride"})  # int with a dim argument
_BOOL_METHODS = frozenset("is_contiguous is_floating_point is_complex is_signed equal allclose "
                          "is_nonzero is_same_size".split())
_UNDECIDED_METHODS = frozenset("item tolist size stride type".split())
_TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})


def _kind_name(t: Type) -> str:
    if isinstance(t, TensorType):
        return "a tensor"
    if t == INT:
        return "an int"
    if t == FLOAT:
        return "a float"
    if t == BOOL:
        return "a bool"
    if isinstance(t, TupleType):
        return f"a tuple of {len(t.elems)} values"
    if isinstance(t, OptionalType):
        return f"{_kind_name(t.elem)} or None"
    return f"a {t}"


def _plain(t: Type | None) -> Type | None:
    """Tensor facts (dtype, shape) dropped: suggestions name the kind only."""
    if isinstance(t, TensorType):
        return TENSOR
    if isinstance(t, TupleType):
        items = [_plain(i) for i in t.elems]
        return None if any(i is None for i in items) else TupleType(tuple(items))  # type: ignore[arg-type]
    if isinstance(t, OptionalType):
        inner = _plain(t.elem)
        return None if inner is None else OptionalType(inner)
    return t


# -- the function and what its names hold --------------------------------------------------------
def _is_self_chain(node: cst.BaseExpression) -> bool:
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value == "self"


class _Body:
    """One function: its parameters' and locals' known types and the helpers that type an
    expression."""

    def __init__(self, source: SourceFile, func: cst.FunctionDef, params: dict[str, Type]) -> None:
        self.source = source
        self.func = func
        self.env: dict[str, Type] = dict(params)
        self.sizes: set[str] = set()  # locals bound to a size (`b, c = x.shape`, `n = x.size(0)`)
        self.owner = _enclosing_class(source, func)
        self._collect_locals()

    def line(self, node: cst.CSTNode) -> int:
        return self.source.positions[node].start.line

    def snippet(self, node: cst.CSTNode, limit: int = 40) -> str:
        text = " ".join(self.source.code(node).split())
        return text if len(text) <= limit else text[:limit - 3] + "..."

    # Locals, in source order; a name keeps the first type it is known to have.
    def _collect_locals(self) -> None:
        body = self

        class Assignments(_BodyVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    body._bind(target.target, node.value)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                if isinstance(node.target, cst.Name):
                    t = body.annotation(node.annotation.annotation)
                    if t is not None:
                        body.env.setdefault(node.target.value, t)

            def visit_For(self, node: cst.For) -> None:
                if isinstance(node.target, cst.Name) and isinstance(node.iter, cst.Call) \
                        and body.source.global_name(node.iter.func) == "builtins.range":
                    body.env.setdefault(node.target.value, INT)

        self.func.body.visit(Assignments(self.func))

    def _bind(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            if _is_size(self, value):
                self.sizes.add(target.value)
            t = self.type_of(value)
            known = self.env.get(target.value)
            if isinstance(known, OptionalType) and t == known.elem:
                self.env[target.value] = t  # `if mask is None: mask = ...` fills it in
            elif t is not None:
                self.env.setdefault(target.value, t)
        elif isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value for e in target.elements]
            if _is_shape(value):  # b, c, h, w = x.shape
                for n in names:
                    if isinstance(n, cst.Name):
                        self.env.setdefault(n.value, INT)
                        self.sizes.add(n.value)
            elif isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(names):
                for n, v in zip(names, value.elements):
                    self._bind(n, v.value)

    def annotation(self, node: cst.BaseExpression) -> Type | None:
        return _annotation(self.source, node)

    def callee(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The function of this file a call names: `helper(...)`, `self.method(...)`."""
        if isinstance(func, cst.Name):
            return self.source.functions.get(func.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and func.value.value == "self" and self.owner is not None:
            for stmt in self.owner.body.body:
                if isinstance(stmt, cst.FunctionDef) and stmt.name.value == func.attr.value:
                    return stmt
        return None

    def callee_param(self, callee: cst.FunctionDef, position: int | None, keyword: str | None,
                     method: bool) -> Type | None:
        params = list(callee.params.params)[1 if method else 0:]
        if keyword is not None:
            chosen = [p for p in params if p.name.value == keyword]
        else:
            chosen = params[position:position + 1] if position is not None else []
        if not chosen or chosen[0].annotation is None:
            return None
        t = self.annotation(chosen[0].annotation.annotation)
        return t.elem if isinstance(t, OptionalType) else t

    # The type of an expression, as far as the syntax shows it; None when it does not.
    def type_of(self, e: cst.BaseExpression) -> Type | None:
        if isinstance(e, cst.Name):
            if e.value in ("True", "False"):
                return BOOL
            if e.value == "None":
                return NONE
            return self.env.get(e.value)
        if isinstance(e, cst.Integer):
            return INT
        if isinstance(e, cst.Float):
            return FLOAT
        if isinstance(e, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return STR
        if isinstance(e, cst.Call):
            return self._call_type(e)
        if isinstance(e, cst.Attribute):
            if e.attr.value == "ndim":
                return INT
            if e.attr.value in _TENSOR_ATTRS and isinstance(self.type_of(e.value), TensorType):
                return TENSOR
            return None
        if isinstance(e, cst.Subscript):
            if _is_shape(e.value):
                return INT
            base = self.type_of(e.value)
            if isinstance(base, TensorType):
                return TENSOR
            if isinstance(base, ListType):
                return base.elem
            return None
        if isinstance(e, cst.BinaryOperation):
            left, right = self.type_of(e.left), self.type_of(e.right)
            if isinstance(left, TensorType) or isinstance(right, TensorType):
                return TENSOR
            numbers = (INT, FLOAT, BOOL)
            if left in numbers and right in numbers:
                if isinstance(e.operator, cst.Divide) or FLOAT in (left, right):
                    return FLOAT
                return INT
            return None
        if isinstance(e, cst.UnaryOperation):
            if isinstance(e.operator, cst.Not):
                return BOOL
            inner = self.type_of(e.expression)
            return INT if inner == BOOL else inner
        if isinstance(e, cst.Comparison):
            operands = [e.left] + [c.comparator for c in e.comparisons]
            identity = all(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in e.comparisons)
            if not identity and any(isinstance(self.type_of(o), TensorType) for o in operands):
                return TENSOR
            return BOOL
        if isinstance(e, (cst.BooleanOperation, cst.IfExp)):
            a, b = (e.left, e.right) if isinstance(e, cst.BooleanOperation) else (e.body, e.orelse)
            ta, tb = self.type_of(a), self.type_of(b)
            return ta if ta == tb else None
        if isinstance(e, cst.Tuple):
            items = [self.type_of(el.value) for el in e.elements if isinstance(el, cst.Element)]
            if len(items) != len(e.elements) or any(i is None for i in items):
                return None
            return TupleType(tuple(items))  # type: ignore[arg-type]
        return None

    def _call_type(self, e: cst.Call) -> Type | None:
        qual = self.source.global_name(e.func)
        if qual is not None:
            if qual == "builtins.len":
                return INT
            if qual in ("builtins.int", "builtins.float", "builtins.bool"):
                return {"builtins.int": INT, "builtins.float": FLOAT, "builtins.bool": BOOL}[qual]
            if qual in ("builtins.min", "builtins.max", "builtins.abs"):
                found = {self.type_of(a.value) for a in e.args}
                return found.pop() if len(found) == 1 else None
            if qual.startswith("torch."):
                return torch_function_result(qual)
        callee = self.callee(e.func)
        if callee is not None:
            return self.annotation(callee.returns.annotation) if callee.returns is not None else None
        if qual is None and isinstance(e.func, cst.Attribute) and not _is_self_chain(e.func.value):
            method = e.func.attr.value
            if method in _INT_METHODS or (method in _SIZED_METHODS and e.args):
                return INT
            if method in _BOOL_METHODS:
                return BOOL
            if method in _UNDECIDED_METHODS or method in _LIST_METHODS:
                return None
            receiver = self.type_of(e.func.value)
            if isinstance(receiver, TensorType) or (receiver is None and hasattr(torch.Tensor, method)):
                return TENSOR
        return None


def _annotation(source: SourceFile, node: cst.BaseExpression) -> Type | None:
    from transpiler.annotations import annotation_type
    from transpiler.classinfo import module_class_names

    try:
        return _plain(annotation_type(source, node, module_class_names(source)))
    except UserError:
        return None  # reported where the signature is built


def _is_shape(e: cst.BaseExpression) -> bool:
    """`x.shape` or `x.size()`."""
    if isinstance(e, cst.Attribute):
        return e.attr.value == "shape"
    return isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "size" \
        and not e.args


def _is_size(body: _Body, e: cst.BaseExpression) -> bool:
    """An int that comes from a size: `x.size(0)`, `x.shape[1]`, `x.dim()`, `len(xs)`, a local
    bound to one, arithmetic on one."""
    if isinstance(e, cst.Name):
        return e.value in body.sizes
    if isinstance(e, cst.Subscript):
        return _is_shape(e.value)
    if isinstance(e, cst.Attribute):
        return e.attr.value == "ndim"
    if isinstance(e, cst.Call):
        if body.source.global_name(e.func) == "builtins.len":
            return True
        return isinstance(e.func, cst.Attribute) and (
            e.func.attr.value in _INT_METHODS or (e.func.attr.value in _SIZED_METHODS and bool(e.args)))
    if isinstance(e, cst.BinaryOperation):
        return _is_size(body, e.left) or _is_size(body, e.right)
    return False


def _enclosing_class(source: SourceFile, func: cst.FunctionDef) -> cst.ClassDef | None:
    for cls in source.classes.values():
        if any(stmt is func for stmt in cls.body.body):
            return cls
    return None


class _BodyVisitor(cst.CSTVisitor):
    """Visits one function's body, not the functions, classes and lambdas nested in it."""

    def __init__(self, func: cst.FunctionDef) -> None:
        super().__init__()
        self.func = func

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node is self.func

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


# -- the uses of one name --------------------------------------------------------------------------
class _Uses(_BodyVisitor):
    def __init__(self, body: _Body, name: str) -> None:
        super().__init__(body.func)
        self.body = body
        self.name = name
        self.found: list[tuple[int, int, int, Type, str]] = []  # strength, line, col, type, reason
        self._called: set[int] = set()

    def _is_it(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cst.Name) and node.value == self.name

    def _add(self, strength: int, at: cst.CSTNode, t: Type, reason: str) -> None:
        pos = self.body.source.positions[at].start
        self.found.append((strength, pos.line, pos.column, t, f"line {pos.line} {reason}"))

    def _expect(self, arg: cst.BaseExpression, t: Type, callee: str, at: cst.CSTNode) -> None:
        """`arg` stands where `t` is expected: the name itself, or (for numbers) an arithmetic
        operand (`x.view(b, n * 2)`)."""
        if self._is_it(arg):
            self._add(_STRONG, at, t, f"passes it to `{callee}`, which takes {_kind_name(t)} there")
        elif t in (INT, FLOAT) and isinstance(arg, cst.BinaryOperation) \
                and not isinstance(arg.operator, (cst.MatrixMultiply, cst.Divide)):
            self._expect(arg.left, t, callee, at)
            self._expect(arg.right, t, callee, at)
        elif t in (INT, FLOAT) and isinstance(arg, cst.UnaryOperation) and isinstance(arg.operator, cst.Minus):
            self._expect(arg.expression, t, callee, at)

    def visit_Call(self, node: cst.Call) -> None:
        self._called.add(id(node.func))
        body = self.body
        qual = body.source.global_name(node.func)
        callee_fn = body.callee(node.func)
        shown = body.snippet(node.func)
        position = -1
        for arg in node.args:
            if arg.star:
                continue
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword is None:
                position += 1
            at = None if keyword is not None else position
            want: Type | None = None
            if qual == "builtins.range":
                want = INT
            elif callee_fn is not None:
                want = body.callee_param(callee_fn, at, keyword, isinstance(node.func, cst.Attribute))
            elif qual is not None and qual.startswith("torch."):
                want = torch_function_param(qual, at, keyword)
            elif qual is None and isinstance(node.func, cst.Attribute) and not _is_self_chain(node.func.value):
                want = tensor_method_param(node.func.attr.value, at, keyword)
            if want is not None:
                self._expect(arg.value, want, shown, node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self._is_it(node.value):
            return
        attr = node.attr.value
        if attr in _LIST_METHODS or not hasattr(torch.Tensor, attr):
            return
        if id(node) in self._called:
            self._add(_STRONG, node, TENSOR, f"calls the tensor method `.{attr}()` on it")
        else:
            self._add(_STRONG, node, TENSOR, f"reads the tensor attribute `.{attr}` of it")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if not self._is_it(node.value):
            return
        elements = list(node.slice)
        # Several indexes, `None` or `...`: lists have no such indexing (one index or slice
        # could be either).
        tensor_like = len(elements) > 1 or any(
            isinstance(el.slice, cst.Index) and (isinstance(el.slice.value, cst.Ellipsis)
                                                 or (isinstance(el.slice.value, cst.Name)
                                                     and el.slice.value.value == "None"))
            for el in elements)
        if tensor_like:
            self._add(_STRONG, node, TENSOR, f"indexes it as a tensor (`{self.body.snippet(node)}`)")

    def _operands(self, node: cst.CSTNode, others: list[cst.BaseExpression], verb: str) -> None:
        for other in others:
            t = self.body.type_of(other)
            if isinstance(t, TensorType):
                self._add(_STRONG, node, TENSOR, f"{verb} a tensor (`{self.body.snippet(node)}`)")
                return
            if _is_size(self.body, other):
                self._add(_SIZE, node, INT, f"{verb} a size (`{self.body.snippet(node)}`)")
                return

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self._is_it(node.left):
            self._operands(node, [node.right], "combines it with")
        elif self._is_it(node.right):
            self._operands(node, [node.left], "combines it with")

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in node.comparisons):
            return
        operands = [node.left] + [c.comparator for c in node.comparisons]
        if any(self._is_it(o) for o in operands):
            self._operands(node, [o for o in operands if not self._is_it(o)], "compares it with")

    def _condition(self, test: cst.BaseExpression, at: cst.CSTNode) -> None:
        if self._is_it(test):
            self._add(_CONDITION, at, BOOL, "uses it as a condition")
        elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            self._condition(test.expression, at)
        elif isinstance(test, cst.BooleanOperation):
            self._condition(test.left, at)
            self._condition(test.right, at)

    def visit_If(self, node: cst.If) -> None:
        self._condition(node.test, node.test)

    def visit_While(self, node: cst.While) -> None:
        self._condition(node.test, node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._condition(node.test, node.test)

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self._is_it(t.target) for t in node.targets):
            self._assigned(node, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._is_it(node.target):
            self._operands(node, [node.value], "combines it with")

    def _assigned(self, node: cst.CSTNode, value: cst.BaseExpression) -> None:
        t = self.body.type_of(value)
        if t in (TENSOR, INT, FLOAT, BOOL):
            shown = self.body.snippet(node)
            self._add(_STRONG, node, t, f"assigns it {_kind_name(t)} (`{shown}`)")  # type: ignore[arg-type]

    def decision(self) -> tuple[Type, str] | None:
        if not self.found:
            return None
        _, _, _, t, reason = min(self.found, key=lambda f: f[:3])
        return t, reason


# -- public ----------------------------------------------------------------------------------------
def _param(func: cst.FunctionDef, name: str) -> cst.Param:
    params = func.params
    for p in (*params.posonly_params, *params.params, *params.kwonly_params):
        if p.name.value == name:
            return p
    raise KeyError(name)


def _declared_params(source: SourceFile, func: cst.FunctionDef, leave_out: str | None) -> dict[str, Type]:
    """What the signature itself says of the parameters: annotations and literal defaults."""
    found: dict[str, Type] = {}
    for p in func.params.params:
        name = p.name.value
        if name == leave_out or name == "self":
            continue
        if p.annotation is not None:
            t = _annotation(source, p.annotation.annotation)
        else:
            value = literal_value(p.default)
            t = _literal(value) if is_literal(value) and value is not None else None
        if t is not None:
            found[name] = t
    return found


def _literal(value: object) -> Type | None:
    from ir.core.builder import literal_type

    try:
        return literal_type(value)
    except TypeError:
        return None


def _infer(source: SourceFile, func: cst.FunctionDef, name: str,
           params: dict[str, Type]) -> tuple[Type, str] | None:
    uses = _Uses(_Body(source, func, params), name)
    func.body.visit(uses)
    return uses.decision()


def suggest_parameter(source: SourceFile, func: cst.FunctionDef, name: str) -> Suggestion:
    """The annotation `name` (a parameter of `func`, written in `source`) should have, and why:
    `Optional[T]` when its default is None, T from the body's uses of it."""
    p = _param(func, name)
    value = literal_value(p.default)
    if is_literal(value) and value is not None and _literal(value) is not None:
        return Suggestion(_literal(value), f"its default is {value!r}")  # type: ignore[arg-type]
    params = _declared_params(source, func, name)
    found = _infer(source, func, name, params)
    if found is None:
        # Another unannotated parameter may decide it (`mask * x` with `x` a tensor by its uses).
        for other in func.params.params:
            o = other.name.value
            if o not in params and o not in (name, "self") and other.default is None:
                decided = _infer(source, func, o, params)
                if decided is not None:
                    params[o] = decided[0]
        found = _infer(source, func, name, params)
    if found is None:
        t, reason, decided = TENSOR, "nothing in the body decides its type; Tensor is the default", False
    else:
        (t, reason), decided = found, True
    if is_literal(value) and value is None:
        return Suggestion(OptionalType(t), f"its default is None and {reason}", decided)
    return Suggestion(t, reason, decided)


# -- how the file spells it -----------------------------------------------------------------------
def _imported_names(source: SourceFile) -> dict[str, str]:
    """Qualified name -> the name the module binds it to, for its top-level imports."""
    found: dict[str, str] = {}
    for stmt in source.module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    full = source.code(alias.name)
                    local = alias.asname.name.value if alias.asname else full.split(".")[0]  # type: ignore[union-attr]
                    found.setdefault(full if alias.asname else local, local)
            elif isinstance(small, cst.ImportFrom) and small.module is not None \
                    and not isinstance(small.names, cst.ImportStar):
                module = source.code(small.module)
                for alias in small.names:
                    name = source.code(alias.name)
                    local = alias.asname.name.value if alias.asname else name  # type: ignore[union-attr]
                    found.setdefault(f"{module}.{name}", local)
    return found


def annotation_text(source: SourceFile, t: Type) -> str:
    """`t` as an annotation that the file's imports resolve: `Tensor` or `torch.Tensor`,
    `Optional[...]` where typing's Optional is imported, else `... | None`."""
    names = _imported_names(source)
    return _text(t, names)


def _text(t: Type, names: dict[str, str]) -> str:
    if isinstance(t, TensorType):
        if "torch.Tensor" in names:
            return names["torch.Tensor"]
        return f"{names.get('torch', 'torch')}.Tensor"
    if isinstance(t, OptionalType):
        inner = _text(t.elem, names)
        if "typing.Optional" in names:
            return f"{names['typing.Optional']}[{inner}]"
        if "typing" in names:
            return f"{names['typing']}.Optional[{inner}]"
        return f"{inner} | None"
    if isinstance(t, TupleType):
        return f"tuple[{', '.join(_text(i, names) for i in t.elems)}]" if t.elems else "tuple[()]"
    if isinstance(t, ListType):
        return f"list[{_text(t.elem, names)}]"
    if t == NONE:
        return "None"
    if isinstance(t, ScalarType):
        return t.name
    return str(t)


def suggested_signature(source: SourceFile, func: cst.FunctionDef, is_method: bool) -> str:
    """The `def` line of `func` with every parameter annotated (the annotations written kept, the
    others suggested)."""
    names = _imported_names(source)
    parts = []
    for i, p in enumerate(func.params.params):
        text = p.name.value
        annotated = not (i == 0 and is_method)
        if p.annotation is not None:
            text += f": {source.code(p.annotation.annotation)}"
        elif annotated:
            text += f": {_text(suggest_parameter(source, func, p.name.value).type, names)}"
        if p.default is not None:
            text += (" = " if annotated else "=") + source.code(p.default)  # PEP 8's spacing
        parts.append(text)
    returns = f" -> {source.code(func.returns.annotation)}" if func.returns is not None else ""
    return f"def {func.name.value}({', '.join(parts)}){returns}:"


def missing_parameters_error(source: SourceFile, func: cst.FunctionDef, missing: list[cst.Param],
                             is_method: bool) -> UserError:
    """One error for every unannotated parameter, at the first of them, with the annotation or
    whole signature to write (a missing return type is inferred: FileContext._request)."""
    first = missing[0]
    if len(missing) == 1:
        name = first.name.value
        s = suggest_parameter(source, func, name)
        text = annotation_text(source, s.type)
        if s.decided:
            hint = f"annotate it: `{name}: {text}` ({s.reason})"
        else:
            hint = f"annotate it, e.g. `{name}: {text}` if it is a tensor (or int, float, bool, ...)"
        return UserError(f"parameter `{name}` has no type annotation", source.loc(first.name), hint)
    names = [f"`{p.name.value}`" for p in missing]
    listed = ", ".join(names[:-1]) + " and " + names[-1]
    signature = suggested_signature(source, func, is_method)
    return UserError(f"parameters {listed} of `{func.name.value}` have no type annotations",
                     source.loc(first.name), f"annotate them: {signature}")

"""A parsed model file: libcst module, metadata, and what its top level defines."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import libcst as cst
from libcst.metadata import (
    ExpressionContextProvider,
    MetadataWrapper,
    PositionProvider,
    QualifiedName,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)

from ir.core.graph import Loc
from transpiler.diagnostics import Diagnostic, UserError

# Qualified names under which the decorator may be imported.
SCRIPT_NAMES = {"transpiler.script", "runtime.script", "runtime.dispatch.script"}
# A factory of a model the user did not write (runtime.dispatch.script_model): Target.options["factory"]
SCRIPT_MODEL_NAMES = {"transpiler.script_model", "runtime.script_model", "runtime.dispatch.script_model"}


@dataclass
class Target:
    """A module-level class or function decorated with @script."""

    name: str
    node: cst.ClassDef | cst.FunctionDef
    options: dict[str, object] = field(default_factory=dict)

    @property
    def is_factory(self) -> bool:
        """A `script_model` factory: compiled for the model it returns, never as code itself."""
        return self.options.get("factory") is True


class SourceFile:
    def __init__(self, path: Path, text: str, display: str | None = None) -> None:
        self.path = path
        self.display = display or str(path)  # how locations name the file
        self.text = text
        self.lines = text.splitlines()
        try:
            self.wrapper = MetadataWrapper(cst.parse_module(text))
        except cst.ParserSyntaxError as e:
            raise _syntax_error(self.display, text, e) from None
        self.module = self.wrapper.module
        self.positions = self.wrapper.resolve(PositionProvider)
        self.qualnames = self.wrapper.resolve(QualifiedNameProvider)
        self.classes: dict[str, cst.ClassDef] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.constants: dict[str, object] = {}  # NAME = <literal> at module level
        # NAME = <what could be a type> bound once at module level (`Size_ = Tuple[int, int]`):
        # an annotation naming it means what the right-hand side means
        self.aliases: dict[str, cst.BaseExpression] = {}
        self._scopes: tuple[Mapping, Mapping] | None = None
        self.star_imports = False  # `from helpers import *` at module level
        # The module's import name, when known (script(instance, ...)): Python code kept by
        # permissive mode reads the file's module-level names from it.
        self.module_name: str | None = None
        self._scan_top_level()

    @classmethod
    def read(cls, path: Path, display: str | None = None) -> SourceFile:
        return cls(path, path.read_text(encoding="utf-8"), display)

    def loc(self, node: cst.CSTNode) -> Loc:
        if node not in self.positions and isinstance(node, cst.SimpleStatementLine) and node.body:
            # (the line syntax.statements_of makes of a one-line body, `def f(x): return x`: the
            # span of its statements)
            first, last = self.positions[node.body[0]], self.positions[node.body[-1]]
            return Loc(self.display, first.start.line, first.start.column, last.end.line, last.end.column)
        pos = self.positions[node]
        return Loc(self.display, pos.start.line, pos.start.column, pos.end.line, pos.end.column)

    def scopes(self) -> tuple[Mapping, Mapping]:
        """libcst's scope and load/store context of every name (resolved on first use: only
        permissive compilation needs them)."""
        if self._scopes is None:
            self._scopes = (self.wrapper.resolve(ScopeProvider), self.wrapper.resolve(ExpressionContextProvider))
        return self._scopes

    def bound_once(self, name: str) -> object:
        """The value module-level `name` has in the imported module (script(instance, ...)) when it
        is a bool, int, float, str or None that the file binds exactly once and never declares
        `global` (`_is_torch_npu_available = is_torch_npu_available()`): compiled code takes it
        as a constant, as TorchScript takes module-level values. Else _NOT_LITERAL."""
        module = sys.modules.get(self.module_name) if self.module_name is not None else None
        if module is None or not hasattr(module, name):
            return _NOT_LITERAL
        scopes, _ = self.scopes()
        scope = scopes.get(self.module)
        bindings = len(scope.assignments[name]) if scope is not None else -1
        # (a name a star import brings is bound once too, by the import)
        if not (bindings == 1 or bindings == 0 and self.star_imports) or name in self._declared_global():
            return _NOT_LITERAL
        value = getattr(module, name)
        return value if value is None or type(value) in (bool, int, float, str) else _NOT_LITERAL

    def function_table(self, name: str) -> list[tuple[str, cst.BaseExpression]] | None:
        """The entries of module-level `name = {"relu": F.relu, "gelu": F.gelu}` (distinct literal
        str keys, each value a name or dotted name) when the file binds it once, never declares it
        `global`, and uses it nowhere but as `name[key]` read: a table compiled code may call
        through (`ACTS[self.act](x)`). None for anything else."""
        value = self._table_displays().get(name)
        scope = self.scopes()[0].get(self.module) if value is not None else None
        if scope is None or len(scope.assignments[name]) != 1 or name in self._declared_global():
            return None
        loads = sum(len(a.references) for a in scope.assignments[name])  # (in every scope)
        reads = self._table_reads().get(name, 0)
        if loads != reads:
            return None
        return [(e.key.evaluated_value, e.value) for e in value.elements]  # type: ignore[union-attr]

    def _table_displays(self) -> dict[str, cst.Dict]:
        found: dict[str, cst.Dict] = {}
        for stmt in self.module.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                target, value = _simple_assignment(small)
                if target is None or not isinstance(value, cst.Dict) or not value.elements:
                    continue
                keys = [e.key.evaluated_value if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString)
                        else None for e in value.elements]
                if all(isinstance(k, str) for k in keys) and len(set(keys)) == len(keys) \
                        and all(isinstance(e.value, (cst.Name, cst.Attribute)) for e in value.elements):
                    found[target] = value
        return found

    def _table_reads(self) -> dict[str, int]:
        """How many times each module-level name is read as `name[key]` (not assigned to)."""
        counts: dict[str, int] = {}
        stored: set[int] = set()

        class Visitor(cst.CSTVisitor):
            def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
                stored.add(id(node.target))

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                stored.add(id(node.target))

            def visit_Del(self, node: cst.Del) -> None:
                stored.add(id(node.target))

            def visit_Subscript(self, node: cst.Subscript) -> None:
                if isinstance(node.value, cst.Name) and id(node) not in stored:
                    counts[node.value.value] = counts.get(node.value.value, 0) + 1

        self.module.visit(Visitor())
        return counts

    def alias(self, name: str) -> cst.BaseExpression | None:
        """The type expression module-level `name` is bound to once (`Size_ = Tuple[int, int]`),
        or None."""
        value = self.aliases.get(name)
        if value is None:
            return None
        scope = self.scopes()[0].get(self.module)
        if scope is None or len(scope.assignments[name]) != 1 or name in self._declared_global():
            return None
        return value

    def _declared_global(self) -> set[str]:
        found: set[str] = set()

        class Visitor(cst.CSTVisitor):
            def visit_Global(self, node: cst.Global) -> None:
                found.update(item.name.value for item in node.names)

        self.module.visit(Visitor())
        return found

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def qualified_names(self, node: cst.CSTNode) -> set[QualifiedName]:
        found = self.qualnames.get(node, ())
        if callable(found):  # libcst computes qualified names lazily
            found = found()
        return set(found)

    def global_name(self, node: cst.CSTNode) -> str | None:
        """The qualified name of a Name/Attribute chain that refers to an import, a builtin or a
        module-level definition; None for locals and anything else."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name):
            return None
        names = self._global_names(node)
        if names:
            return names[0]
        if not self.qualified_names(node) and self.star_imports:
            return self._star_imported(node, root)
        return None

    def _global_names(self, node: cst.CSTNode) -> list[str]:
        """Every global a name may refer to, imports and builtins first, then module-level
        definitions, each group sorted. A name bound twice (`try: from transpiler import script`
        / `except ImportError: def script(...)`) has several; libcst gives them as a set, whose
        order changes with the process's hash seed, so it is sorted here."""
        imported = sorted(q.name for q in self.qualified_names(node)
                          if q.source in (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN))
        local = sorted(q.name for q in self.qualified_names(node)
                       if q.source == QualifiedNameSource.LOCAL and "<locals>" not in q.name)
        return imported + local

    def _star_imported(self, node: cst.CSTNode, root: cst.Name) -> str | None:
        """A name the file binds nowhere but has from a `from helpers import *` (script(instance,
        ...): the imported module holds it): a module's own qualified name for a module, else
        the name as the file's own (its value, or the function it calls, is read from the
        imported module, as for names the file binds)."""
        module = sys.modules.get(self.module_name) if self.module_name is not None else None
        value = getattr(module, root.value, None) if module is not None else None
        if value is None:
            return None
        text = self.code(node)
        if isinstance(value, type(sys)):
            return value.__name__ + text[len(root.value):]
        return text

    def _scan_top_level(self) -> None:
        bound: dict[str, int] = {}
        for stmt in self.module.body:
            if isinstance(stmt, cst.ClassDef):
                self.classes[stmt.name.value] = stmt
            elif isinstance(stmt, cst.FunctionDef):
                self.functions[stmt.name.value] = stmt
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.ImportFrom) and isinstance(small.names, cst.ImportStar):
                        self.star_imports = True
                    target, value = _simple_assignment(small)
                    if target is not None:
                        bound[target] = bound.get(target, 0) + 1
                        if _may_be_type(value) and bound[target] == 1:
                            self.aliases[target] = value  # type: ignore[assignment]
                        else:
                            self.aliases.pop(target, None)
                        literal = literal_value(value)
                        if literal is not _NOT_LITERAL:
                            self.constants[target] = literal
                        else:
                            self.constants.pop(target, None)

    def targets(self) -> list[Target]:
        found = []
        for stmt in self.module.body:
            if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)):
                for deco in stmt.decorators:
                    options = self._script_decorator(deco.decorator)
                    if options is not None:
                        found.append(Target(stmt.name.value, stmt, options))
        return found

    def option_loc(self, target: Target, keyword: str) -> Loc:
        """Where the decorator of `target` says `keyword=...` (else its name)."""
        for deco in target.node.decorators:
            if isinstance(deco.decorator, cst.Call):
                for arg in deco.decorator.args:
                    if arg.keyword is not None and arg.keyword.value == keyword:
                        return self.loc(arg)
        return self.loc(target.node.name)

    def why_no_targets(self) -> str:
        """Why `targets()` found nothing, for a note on a file named on the command line."""
        for stmt in self.module.body:
            if not isinstance(stmt, (cst.ClassDef, cst.FunctionDef)):
                continue
            for deco in stmt.decorators:
                expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
                spelled = expr.attr.value if isinstance(expr, cst.Attribute) else getattr(expr, "value", None)
                if spelled == "script":
                    line = self.loc(deco).line
                    return (f"the `@script` of `{stmt.name.value}` (line {line}) is not torchscribe's: "
                            "import it with `from transpiler import script`")
        return "no class or function is decorated with `@script`"

    def _script_decorator(self, expr: cst.BaseExpression) -> dict[str, object] | None:
        call_args: list[cst.Arg] = []
        if isinstance(expr, cst.Call):
            call_args = list(expr.args)
            expr = expr.func
        # Any binding will do: the fallback `def script` of an optional import is the same
        # decorator when torchscribe is installed.
        names = set(self._global_names(expr))
        if not names & (SCRIPT_NAMES | SCRIPT_MODEL_NAMES):
            return None
        options: dict[str, object] = {"factory": True} if names & SCRIPT_MODEL_NAMES else {}
        for arg in call_args:
            value = literal_value(arg.value)
            if isinstance(arg.value, cst.List):  # (devices=["cpu", "cuda"], as a tuple)
                value = literal_value(cst.Tuple(arg.value.elements))
            if arg.keyword is None or value is _NOT_LITERAL:
                raise UserError(
                    "@script options must be keyword arguments with literal values",
                    self.loc(arg),
                    "write e.g. @script(permissive=True)",
                )
            options[arg.keyword.value] = value
        return options


def _may_be_type(value: cst.BaseExpression | None) -> bool:
    """Whether `value` has the form of a type expression (`Tuple[int, int]`, `torch.Tensor`,
    `int | None`)."""
    if isinstance(value, cst.BinaryOperation):
        return isinstance(value.operator, cst.BitOr) and _may_be_type(value.left) and _may_be_type(value.right)
    return isinstance(value, (cst.Subscript, cst.Attribute, cst.Name))


def _simple_assignment(small: cst.BaseSmallStatement) -> tuple[str | None, cst.BaseExpression | None]:
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name):
            return target.value, small.value
    if isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
        return small.target.value, small.value
    return None, None


class _NotLiteral:
    def __repr__(self) -> str:
        return "<not a literal>"


_NOT_LITERAL = _NotLiteral()


def literal_value(node: cst.BaseExpression | None) -> object:
    """The Python value of a literal expression (numbers, strings, True/False/None, unary minus,
    tuples of literals), or _NOT_LITERAL."""
    if node is None:
        return _NOT_LITERAL
    if isinstance(node, (cst.Integer, cst.Float)):
        return node.evaluated_value
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.ConcatenatedString):
        value = node.evaluated_value
        return value if isinstance(value, str) else _NOT_LITERAL
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        inner = literal_value(node.expression)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.operator, cst.Minus) else inner
        return _NOT_LITERAL
    if isinstance(node, cst.Tuple):
        items = [literal_value(e.value) for e in node.elements if isinstance(e, cst.Element)]
        if len(items) != len(node.elements) or any(i is _NOT_LITERAL for i in items):
            return _NOT_LITERAL
        return tuple(items)
    return _NOT_LITERAL


def is_literal(value: object) -> bool:
    return value is not _NOT_LITERAL


def diagnostic_at(source: SourceFile, node: cst.CSTNode, message: str, hint: str | None = None) -> Diagnostic:
    return Diagnostic(message, source.loc(node), hint)


def _syntax_error(display: str, text: str, error: cst.ParserSyntaxError) -> UserError:
    """The syntax error as Python itself words and places it; libcst's parser reports the
    position of the next token and lists what it expected, which reads poorly."""
    try:
        compile(text, display, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as e:
        if e.lineno is not None:
            col = max(0, (e.offset or 1) - 1)
            end = (e.end_offset or 0) - 1 if e.end_lineno == e.lineno else -1
            loc = Loc(display, e.lineno, col, e.lineno, end if end > col else col + 1)
            return UserError(f"syntax error: {e.msg}", loc, "fix the Python syntax first")
    loc = Loc(display, error.raw_line, error.raw_column, error.raw_line, error.raw_column + 1)
    return UserError(f"syntax error: {error.message}", loc, "fix the Python syntax first")

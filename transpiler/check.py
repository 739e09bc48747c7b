"""The check pass: every construct outside the compiled subset, reported before lowering.

This pass walks every function that will be compiled with one read-only visitor and reports all
unsupported syntax at once, each with the span of the construct and what to write instead.
Semantic errors (types, unknown names, bindings) are lowering's business, which goes on past
each error (transpiler/recover.py) and also lowers the functions whose body alone this pass
rejected: what it says of a construct reported here is left out (compile.merge_diagnostics).
A function whose definition this pass rejected (a decorator, `async`, `*args`) is not lowered: its
body would not mean what lowering takes it to.

Which functions are compiled: every @script function, and for every @script class its `forward`
and the methods that code reaches through `self.<method>`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

from ir.core.graph import Loc
from transpiler.diagnostics import Diagnostic
from transpiler.source import SCRIPT_NAMES, SourceFile, Target, is_literal, literal_value

# Statements rejected wherever they appear in a compiled function: (message, hint).
STATEMENTS: dict[type, tuple[str, str]] = {
    cst.Try: ("try statements are not supported", "move error handling outside the compiled code"),
    cst.TryStar: ("try statements are not supported", "move error handling outside the compiled code"),
    cst.Global: ("global statements are not supported", "pass the value as an argument, or keep it on self"),
    cst.Nonlocal: ("nonlocal statements are not supported", "pass the value as an argument and return the result"),
    cst.Del: ("del statements are not supported", "let the name go out of use (or assign None to it)"),
    cst.Import: ("imports inside compiled functions are not supported", "import at module level"),
    cst.ImportFrom: ("imports inside compiled functions are not supported", "import at module level"),
    cst.Match: ("match statements are not supported", "use if/elif/else"),
    cst.TypeAlias: ("type alias statements are not supported", "define the alias at module level"),
}

# Context managers a compiled `with` may enter: they turn autograd off, and compiled code runs
# only where autograd records nothing (py.check_no_autograd), so the block is its body.
GRAD_OFF_CONTEXTS = {"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad",
                     "torch.inference_mode", "torch.autograd.grad_mode.inference_mode",
                     "torch.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"}
WITH_HINT = ("compiled code supports `with torch.no_grad():` and `with torch.inference_mode():`; "
             "move any other context manager outside the compiled code")


def turns_grad_off(qualname: str | None, call: cst.BaseExpression) -> bool:
    """Whether `call` (a `with` item or a decorator; `qualname`: what its callee names) makes
    one of GRAD_OFF_CONTEXTS that turns grad off: `no_grad()`, `inference_mode()` or `(True)`,
    `set_grad_enabled(False)`."""
    if not isinstance(call, cst.Call) or qualname not in GRAD_OFF_CONTEXTS:
        return False
    args = [a for a in call.args if not a.star]
    if len(args) != len(call.args) or len(args) > 1:
        return False
    if qualname.endswith("no_grad"):
        return not args
    value = args[0].value if args else None
    flag = value.value if isinstance(value, cst.Name) and value.value in ("True", "False") else None
    if qualname.endswith("inference_mode"):
        return not args or flag == "True"
    return flag == "False"


# Expressions rejected wherever they appear; the pass does not look inside them.
EXPRESSIONS: dict[type, tuple[str, str]] = {
    cst.Lambda: ("lambda expressions are not supported", "define a module-level function decorated with @script"),
    cst.SetComp: ("set comprehensions are not supported",
                  "compiled code has no sets; use a list comprehension (`[f(x) for x in xs]`)"),
    cst.DictComp: ("dict comprehensions are not supported",
                   "compiled code has no dicts; use a list or a tuple, or separate values"),
    cst.GeneratorExp: ("generator expressions are not supported",
                       "use a list comprehension (`[f(x) for x in xs]`), or a for loop"),
    cst.Set: ("set displays are not supported", "use a list or a tuple; `x in (a, b)` works for tests"),
    cst.StarredElement: ("starred expressions (`*x`) are not supported",
                         "list the elements one by one, or index the sequence"),
    cst.Await: ("await is not supported", "compiled functions are synchronous; await outside the model"),
    cst.Yield: ("yield is not supported: compiled functions cannot be generators",
                "build a list in a for loop and return it"),
    cst.Imaginary: ("complex literals are not supported", "build complex tensors with torch.complex(real, imag)"),
}

# Builtins whose one generator expression or list comprehension argument lowering unrolls when
# the iterable's length is known.
UNROLLED_REDUCTIONS = {"builtins.all", "builtins.any", "builtins.sum", "builtins.tuple", "builtins.list"}

# Methods left to Python: never compiled; compiled code calls them as plain methods.
PYTHON_DECORATORS = {"torch.jit.unused", "torch.jit.ignore", "torch.jit._script.unused", "torch.jit._script.ignore"}

DECORATOR_HINTS = {
    "builtins.property": "make it a method and call it: self.{name}()",
    "builtins.staticmethod": "make it a method taking self, or a module-level function decorated with @script",
    "builtins.classmethod": "make it a method taking self, or a module-level function decorated with @script",
}


@dataclass
class CheckResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: list[cst.FunctionDef] = field(default_factory=list)  # functions with at least one diagnostic
    # Spans of the functions whose definition was rejected, and of the uses of the functions in
    # `failed` (`self.helper(x)`), where lowering's errors would only be consequences of what the
    # check reported.
    covered: list[Loc] = field(default_factory=list)
    rejected: list[cst.FunctionDef] = field(default_factory=list)  # definition rejected: not lowered

    def has_errors(self, node: cst.FunctionDef) -> bool:
        return any(f is node for f in self.failed)

    def is_rejected(self, node: cst.FunctionDef) -> bool:
        return any(f is node for f in self.rejected)


def check_file(source: SourceFile, targets: list[Target]) -> CheckResult:
    """Report every unsupported construct in the functions that `targets` compile."""
    functions, uses = compiled_functions(targets, source)
    checker = SubsetChecker(source.display, functions)
    source.wrapper.visit(checker)
    failed = [f for f in functions if f in checker.failed]
    rejected = [f for f in functions if f in checker.rejected]
    covered = [source.loc(f) for f in rejected] + [source.loc(node) for f in failed for node in uses.get(f, [])]
    return CheckResult(checker.diagnostics, failed, covered, rejected)


def left_to_python(source: SourceFile | None, func: cst.FunctionDef) -> bool:
    """Whether `func` is decorated `@torch.jit.unused` or `@torch.jit.ignore` (also called, as in
    `@torch.jit.ignore(drop=True)`): compiled code calls it as a plain Python method."""
    for deco in func.decorators:
        expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
        name = source.global_name(expr) if source is not None else None
        if name is None:
            name = _code(expr)
        if name in PYTHON_DECORATORS:
            return True
    return False


def compiled_functions(targets: list[Target], source: SourceFile | None = None
                       ) -> tuple[dict[cst.FunctionDef, bool], dict[cst.FunctionDef, list[cst.CSTNode]]]:
    """The functions lowering will compile, each mapped to whether it is a method; and for each
    method, its uses (`self.name` and `self.name(...)`) in the others. Methods left to Python
    (`@torch.jit.unused`) are not compiled."""
    found: dict[cst.FunctionDef, bool] = {}
    uses: dict[cst.FunctionDef, list[cst.CSTNode]] = {}
    for target in targets:
        if isinstance(target.node, cst.FunctionDef):
            found[target.node] = False
            continue
        methods = {s.name.value: s for s in target.node.body.body if isinstance(s, cst.FunctionDef)}
        pending = [methods["forward"]] if "forward" in methods else []
        while pending:
            method = pending.pop()
            if method in found:
                continue
            found[method] = True
            for name, use in _self_references(method):
                if name in methods and name != "__init__" and not left_to_python(source, methods[name]):
                    pending.append(methods[name])
                    uses.setdefault(methods[name], []).append(use)
    return found, uses


def _self_references(func: cst.FunctionDef) -> list[tuple[str, cst.CSTNode]]:
    """`self.<name>` in a function body, as the call `self.<name>(...)` where it is called."""
    found: list[tuple[str, cst.CSTNode]] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if _is_self_attribute(node.func):
                found.append((node.func.attr.value, node))  # type: ignore[attr-defined]

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if _is_self_attribute(node):
                found.append((node.attr.value, node))

    func.body.visit(Finder())
    return found


def _is_self_attribute(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


class SubsetChecker(cst.CSTVisitor):
    """Read-only visitor over the whole module that reports, inside the functions to compile,
    every construct lowering does not support."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, display: str, functions: dict[cst.FunctionDef, bool]) -> None:
        super().__init__()
        self.display = display
        self.functions = functions
        self.diagnostics: list[Diagnostic] = []
        self.failed: set[cst.FunctionDef] = set()
        self.rejected: set[cst.FunctionDef] = set()  # (check_definition reported it)
        self.current: cst.FunctionDef | None = None
        self.unrolled: set[cst.CSTNode] = set()  # expressions lowering takes on itself (unrolls, spreads)
        # Parts of expressions Python evaluates only sometimes or again and again (`and`/`or`'s
        # right side, a conditional expression's sides, a while condition, a comprehension): an
        # assignment expression there would bind a name on some paths only. How deep inside one.
        self.sometimes: set[cst.CSTNode] = set()
        self.inside_sometimes = 0

    # -- reporting ------------------------------------------------------------------------------
    def loc(self, node: cst.CSTNode) -> Loc:
        pos = self.get_metadata(PositionProvider, node)
        return Loc(self.display, pos.start.line, pos.start.column, pos.end.line, pos.end.column)

    def header_loc(self, node: cst.CSTNode) -> Loc:
        """The span to underline: a compound statement's header (`with torch.no_grad()`, `try`),
        not its whole body; `/` and `*` without the comma their span runs on over."""
        loc = self.loc(node)
        if isinstance(node, cst.With):
            end = self.loc(node.items[-1])
            return Loc(loc.file, loc.line, loc.col, end.end_line, end.end_col)
        if isinstance(node, cst.Match):
            end = self.loc(node.subject)
            return Loc(loc.file, loc.line, loc.col, end.end_line, end.end_col)
        keyword = {cst.Try: "try", cst.TryStar: "try", cst.Else: "else", cst.ParamSlash: "/", cst.ParamStar: "*"}
        if type(node) in keyword:
            return Loc(loc.file, loc.line, loc.col, loc.line, loc.col + len(keyword[type(node)]))
        return loc

    def report(self, node: cst.CSTNode, message: str, hint: str | None) -> None:
        assert self.current is not None
        self.diagnostics.append(Diagnostic(message, self.header_loc(node), hint))
        self.failed.add(self.current)

    # -- traversal ------------------------------------------------------------------------------
    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.current is None:
            if isinstance(node, cst.FunctionDef) and node in self.functions:
                self.current = node
                found = len(self.diagnostics)
                self.check_definition(node, self.functions[node])
                if len(self.diagnostics) > found:
                    self.rejected.add(node)
            return True
        if isinstance(node, (cst.Decorator, cst.Parameters, cst.Annotation)):
            return False  # checked by check_definition; annotations are lowering's business
        if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].star and node.args[0].keyword is None \
                and isinstance(node.args[0].value, (cst.GeneratorExp, cst.ListComp)):
            found = self.get_metadata(QualifiedNameProvider, node.func, set())
            names = {q.name for q in (found() if callable(found) else found)}
            if names & UNROLLED_REDUCTIONS:
                self.unrolled.add(node.args[0].value)  # lowering unrolls it (or says why not)
        if isinstance(node, (cst.Tuple, cst.List)):
            # `[*feats, x]`, `(*shape, -1)`, `*lead, h, w = x.shape`: lowering spreads or binds
            # them, or says why it cannot (transpiler/lower_expr.py, lower_assign.py)
            self.unrolled.update(e for e in node.elements if isinstance(e, cst.StarredElement))
        if isinstance(node, cst.BooleanOperation):
            self.sometimes.add(node.right)
        elif isinstance(node, cst.IfExp):
            self.sometimes.update((node.body, node.orelse))
        elif isinstance(node, cst.While):
            self.sometimes.add(node.test)
        elif isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.DictComp, cst.SetComp)):
            self.sometimes.add(node)
        if node in self.sometimes:
            self.inside_sometimes += 1
        if isinstance(node, cst.NamedExpr) and self.inside_sometimes:
            self.report(node, "an assignment expression (:=) in `and`/`or`, a conditional expression, a while "
                        "condition or a comprehension is not supported", "assign to the name in a statement before")
        kind = type(node)
        if kind in EXPRESSIONS and node not in self.unrolled:
            self.report(node, *EXPRESSIONS[kind])
            return False
        if kind in STATEMENTS:
            self.report(node, *STATEMENTS[kind])
            return kind is not cst.Import and kind is not cst.ImportFrom
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            what = "function" if isinstance(node, cst.FunctionDef) else "class"
            self.report(node.name, f"nested {what} definitions are not supported",
                        f"define `{node.name.value}` at module level"
                        + (" and decorate it with @script" if what == "function" else ""))
            return False
        self.check_node(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if original_node is self.current:
            self.current = None
        if original_node in self.sometimes:
            self.inside_sometimes -= 1

    # -- rules ----------------------------------------------------------------------------------
    def check_node(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.With):
            for item in node.items:
                found = self.get_metadata(QualifiedNameProvider, item.item.func, set()) \
                    if isinstance(item.item, cst.Call) else set()
                names = {q.name for q in (found() if callable(found) else found)}
                if node.asynchronous is not None or item.asname is not None \
                        or not any(turns_grad_off(n, item.item) for n in names):
                    self.report(node, "with statements are not supported here", WITH_HINT)
                    return
        if isinstance(node, (cst.For, cst.While)):
            if node.orelse is not None:
                loop = "for" if isinstance(node, cst.For) else "while"
                self.report(node.orelse, f"`else` on a {loop} loop is not supported",
                            "set a flag before the loop, clear it where you break, and test it after the loop")
            if isinstance(node, cst.For) and node.asynchronous is not None:
                self.report(node.asynchronous, "async for loops are not supported", "use a plain for loop")
        elif isinstance(node, cst.SimpleString) and "b" in node.prefix.lower():
            self.report(node, "byte strings are not supported", "use a str, or a uint8 tensor for raw bytes")
        elif isinstance(node, cst.Raise):
            if node.exc is None:
                self.report(node, "a bare `raise` is not supported",
                            "raise an exception explicitly: raise RuntimeError(\"...\")")
            elif node.cause is not None:
                self.report(node.cause, "`raise ... from ...` is not supported", "raise the exception without `from`")
        elif isinstance(node, cst.AnnAssign) and node.value is None:
            self.report(node, "a declaration without a value is not supported",
                        f"assign a value: `{_code(node.target)}: ... = <value>`")

    def check_definition(self, func: cst.FunctionDef, is_method: bool) -> None:
        what = "method" if is_method else "function"
        if func.asynchronous is not None:
            self.report(func.asynchronous, f"async {what}s cannot be compiled", "remove `async`")
        for deco in func.decorators:
            expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
            found = self.get_metadata(QualifiedNameProvider, expr, set())
            names = {q.name for q in (found() if callable(found) else found)}
            if not is_method and names & SCRIPT_NAMES or is_method and names & {"builtins.staticmethod", "builtins.property"} \
                    or any(turns_grad_off(n, deco.decorator) for n in names):
                continue
            known = sorted(names & DECORATOR_HINTS.keys())
            hint = (DECORATOR_HINTS[known[0]].format(name=func.name.value) if known
                    else "remove it; compiled code does not apply decorators")
            self.report(deco, f"decorator `@{_code(deco.decorator)}` on a compiled {what} is not supported", hint)
        params = func.params
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.report(star, f"`{star.star}{star.name.value}` parameters are not supported",
                            "declare each parameter with its type")
        if params.posonly_params:
            self.report(params.posonly_ind if isinstance(params.posonly_ind, cst.ParamSlash) else params.posonly_params[0],
                        "positional-only parameters are not supported", "remove the `/` and use ordinary parameters")
        for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
            if p.default is not None and not is_literal(literal_value(p.default)):
                self.report(p.default, "default values must be literals",
                            "use None as the default and compute the value in the body")


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)

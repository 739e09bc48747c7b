"""Source code kept as Python in permissive mode: its text, and which names it reads and binds.

A statement or expression the compiler does not understand is copied into the generated
function. Its text stays as written; only the names in it that refer to the function's locals or
to its file's module-level names are marked, so that the emitter can put in the variables that
hold those values and read module-level names through the model's own module (the generated
module has other globals). Names bound inside it (a comprehension's variable, a lambda's
parameters) are its own and stay as they are.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import ExpressionContext, GlobalScope

from transpiler.source import SourceFile

# How an occurrence of a name is printed: the value read, the variable bound, or the module's.
# SUPER: a zero-argument `super()`, named "Class self" (its class and the method's first parameter).
READ, WRITE, GLOBAL, SUPER = "read", "write", "global", "super"


@dataclass
class OpaqueCode:
    lines: list[str]  # the text, without the indentation of its first line
    raw_lines: list[int]  # lines that continue a string literal: printed as they are
    reads: list[str] = field(default_factory=list)  # locals it reads, in order of appearance
    writes: list[str] = field(default_factory=list)  # locals it binds
    globals: list[str] = field(default_factory=list)  # module-level names of the file it reads
    # names it uses as they are: builtins, and the imports the generated module has too
    bare: list[str] = field(default_factory=list)
    # (line, column, end column, name, READ/WRITE/GLOBAL), positions in `lines`
    occurrences: list[tuple[int, int, int, str, str]] = field(default_factory=list)
    leaves: str | None = None  # why it cannot stay as Python (a return that leaves it, ...)


def analyze(source: SourceFile, node: cst.CSTNode, func: cst.FunctionDef, bound: set[str]) -> OpaqueCode:
    """The text of `node` (a statement or expression of `func`) and its names. `bound`: the
    function's names that hold a value here."""
    pos = source.positions[node]
    first, col = pos.start.line, pos.start.column
    last = pos.end.line
    lines = source.lines[first - 1: last]
    lines[-1] = lines[-1][: pos.end.column]
    raw = _string_lines(source, node, first)
    shift = [0] * len(lines)  # columns taken off the front of each line
    for i in range(len(lines)):
        if i == 0 or (i not in raw and lines[i][:col].strip() == ""):
            shift[i] = col
            lines[i] = lines[i][col:]
    code = OpaqueCode(lines, sorted(raw))
    scopes, contexts = source.scopes()
    func_scope = _scope_of(func, scopes)
    inside = set(_walk(node))
    owner = _method_of(source, func)
    calls = _zero_argument_super(node) if owner is not None else {}
    for name_node in _names(node):
        scope = scopes.get(name_node)
        if scope is None:
            continue
        name = name_node.value
        if owner is not None and not _bound_anywhere(scope, name) and (name_node in calls or name == "__class__"):
            # The generated function is not defined in the class: it has no `__class__` cell, which
            # `super()` and `__class__` read. Name the class (and the method's first parameter).
            klass, me = owner
            p = source.positions[calls.get(name_node, name_node)]
            line = p.start.line - first
            if p.end.line != p.start.line:
                continue
            span = (line, p.start.column - shift[line], p.end.column - shift[line])
            if name == "__class__":
                code.occurrences.append((*span, klass, GLOBAL))
            else:
                code.occurrences.append((*span, f"{klass} {me}", SUPER))
                if me not in code.reads:
                    code.reads.append(me)
            if klass not in code.globals:
                code.globals.append(klass)
            continue
        if _bound_inside(scope, name, func_scope, inside):
            continue
        p = source.positions[name_node].start
        line = p.line - first
        column = p.column - shift[line]
        where = (line, column, column + len(name), name)
        if scope is func_scope or _reaches(scope, func_scope):
            if func_scope is not None and func_scope.assignments[name]:
                context = contexts.get(name_node)
                augmented = _is_aug_target(node, name_node)
                if context in (ExpressionContext.STORE, ExpressionContext.DEL) and not augmented:
                    kind = WRITE
                    if name in bound and name not in code.reads:
                        code.reads.append(name)  # its value passes through when not rebound
                else:
                    kind = READ if not augmented else WRITE
                    if name not in code.reads:
                        code.reads.append(name)
                if kind == WRITE and name not in code.writes:
                    code.writes.append(name)
                code.occurrences.append((*where, kind))
                continue
        # A name bound nowhere in the file that is not a builtin is a global all the same (from a
        # `from helpers import *`): Python looks it up in the module, and so does the kept code.
        if (_module_level(scope, name) or not _bound_anywhere(scope, name) and not hasattr(builtins, name)) \
                and not _shared_import(source, name_node):
            if name not in code.globals:
                code.globals.append(name)
            code.occurrences.append((*where, GLOBAL))
        elif name not in code.bare:
            code.bare.append(name)
    code.leaves = _leaving(node)
    # A name the code binds before it reads it (in a loop body) has no value to pass in.
    code.reads = [n for n in code.reads if n in bound or n not in code.writes]
    for name in code.writes:  # a read of a rebound name reads the variable the result takes
        code.occurrences = [(*o[:4], WRITE) if o[3] == name else o for o in code.occurrences]
    return code


# What the generated module imports under the same names (codegen/module.py).
GENERATED_IMPORTS = {"torch": "torch", "F": "torch.nn.functional", "Tensor": "torch.Tensor", "math": "math"}


def _shared_import(source: SourceFile, name_node: cst.Name) -> bool:
    want = GENERATED_IMPORTS.get(name_node.value)
    return want is not None and any(q.name == want for q in source.qualified_names(name_node))


def _names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Visitor(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n)

    node.visit(Visitor())
    return found


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Visitor(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            found.append(n)
            return True

    node.visit(Visitor())
    return found


def _scope_of(func: cst.FunctionDef, scopes) -> object | None:
    for name_node in _names(func.params):
        scope = scopes.get(name_node)
        if scope is not None and getattr(scope, "node", None) is func:
            return scope
    for name_node in _names(func.body):
        scope = scopes.get(name_node)
        while scope is not None and getattr(scope, "node", None) is not func:
            scope = scope.parent if scope.parent is not scope else None
        if scope is not None:
            return scope
    return None


def _bound_inside(scope, name: str, func_scope, inside: set) -> bool:
    """Whether a scope nested in the kept code (a lambda, a comprehension) binds `name`."""
    while scope is not None and scope is not func_scope and getattr(scope, "node", None) in inside:
        if scope.assignments[name]:
            return True
        scope = scope.parent if scope.parent is not scope else None
    return False


def _reaches(scope, target) -> bool:
    while scope is not None and scope is not target:
        scope = scope.parent if scope.parent is not scope else None
    return scope is not None


def _module_level(scope, name: str) -> bool:
    while scope is not None and not isinstance(scope, GlobalScope):
        scope = scope.parent if scope.parent is not scope else None
    return scope is not None and bool(scope.assignments[name])


def _method_of(source: SourceFile, func: cst.FunctionDef) -> tuple[str, str] | None:
    """The module-level class that defines method `func`, and the name of its first parameter
    (None for a function, or a method without one)."""
    params = func.params.params or func.params.posonly_params
    for name, klass in source.classes.items():
        if any(stmt is func for stmt in klass.body.body) and params:
            return name, params[0].name.value
    return None


def _zero_argument_super(node: cst.CSTNode) -> dict[cst.Name, cst.Call]:
    """The `super` names of the `super()` calls in `node` (not in a class or function defined there)."""
    found: dict[cst.Name, cst.Call] = {}

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if isinstance(n.func, cst.Name) and n.func.value == "super" and not n.args:
                found[n.func] = n

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            return False

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

    node.visit(Visitor())
    return found


def _bound_anywhere(scope, name: str) -> bool:
    """Whether the file binds `name` in `scope` or a scope around it (builtins do not count)."""
    while True:
        if scope.assignments[name]:
            return True
        if isinstance(scope, GlobalScope) or scope.parent is scope:
            return False
        scope = scope.parent


def _is_aug_target(node: cst.CSTNode, name_node: cst.Name) -> bool:
    found = False

    class Visitor(cst.CSTVisitor):
        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            nonlocal found
            found |= n.target is name_node

    node.visit(Visitor())
    return found


def _string_lines(source: SourceFile, node: cst.CSTNode, first: int) -> set[int]:
    """Lines (relative to `first`) that start inside a string literal spanning lines."""
    lines: set[int] = set()

    class Visitor(cst.CSTVisitor):
        def visit_SimpleString(self, n: cst.SimpleString) -> None:
            self._span(n)

        def visit_FormattedString(self, n: cst.FormattedString) -> None:
            self._span(n)

        def _span(self, n: cst.CSTNode) -> None:
            p = source.positions[n]
            lines.update(range(p.start.line + 1 - first, p.end.line + 1 - first))

    node.visit(Visitor())
    return lines


def _leaving(node: cst.CSTNode) -> str | None:
    """What in the code would leave it other than by its end: Python code kept in the generated
    function cannot return from it, or break out of a loop that was compiled."""
    reason: list[str] = []

    class Visitor(cst.CSTVisitor):
        def __init__(self) -> None:
            self.loops = 0

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False  # its returns are its own

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            return False

        def visit_For(self, n: cst.For) -> None:
            self.loops += 1

        def leave_For(self, n: cst.For) -> None:
            self.loops -= 1

        def visit_While(self, n: cst.While) -> None:
            self.loops += 1

        def leave_While(self, n: cst.While) -> None:
            self.loops -= 1

        def visit_Return(self, n: cst.Return) -> None:
            reason.append("a `return` in it")

        def visit_Yield(self, n: cst.Yield) -> None:
            reason.append("a `yield` in it")

        def visit_Await(self, n: cst.Await) -> None:
            reason.append("an `await` in it")

        def visit_Global(self, n: cst.Global) -> None:
            reason.append("a `global` statement in it")

        def visit_Nonlocal(self, n: cst.Nonlocal) -> None:
            reason.append("a `nonlocal` statement in it")

        def visit_Break(self, n: cst.Break) -> None:
            if self.loops == 0:
                reason.append("a `break` in it that leaves a compiled loop")

        def visit_Continue(self, n: cst.Continue) -> None:
            if self.loops == 0:
                reason.append("a `continue` in it that leaves a compiled loop")

    node.visit(Visitor())
    return reason[0] if reason else None


# Reads of a dict that leave it as it is, by the node that holds the name.
_DICT_READS = ("get", "keys", "items", "values", "copy")


def may_change(node: cst.CSTNode, name: str) -> bool:
    """Whether kept code `node` may change the dict that local `name` holds: anything but reading
    it (`d["k"]`, `d.get(...)`, `"k" in d`, `**d`, `len(d)`, a test of it) may, a call that is
    passed it or a name that aliases it included."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    uses: list[cst.Name] = []
    stores: set[cst.CSTNode] = set()
    for parent in _walk(node):
        for child in parent.children:
            parents[child] = parent
        if isinstance(parent, cst.Name) and parent.value == name:
            uses.append(parent)
        for target in _targets(parent):
            stores.add(target)
    for use in uses:
        parent = parents.get(use)
        if isinstance(parent, cst.Subscript) and parent.value is use and parent not in stores:
            continue
        if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in _DICT_READS \
                and isinstance(parents.get(parent), cst.Call):
            continue
        if isinstance(parent, cst.ComparisonTarget) and isinstance(parent.operator, (cst.In, cst.NotIn)):
            continue
        if isinstance(parent, cst.Arg) and parent.star == "**":
            continue
        if isinstance(parent, cst.Arg) and isinstance(call := parents.get(parent), cst.Call) \
                and isinstance(call.func, cst.Name) and call.func.value in ("len", "bool") and len(call.args) == 1:
            continue
        if isinstance(parent, (cst.If, cst.While)) and parent.test is use \
                or isinstance(parent, (cst.UnaryOperation, cst.BooleanOperation)):
            continue
        return True
    return False


def _targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    """What an assignment or `del` statement stores into or deletes."""
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return [node.target]
    if isinstance(node, cst.Del):
        return [node.target]
    return []

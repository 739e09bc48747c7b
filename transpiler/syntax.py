"""What a list of statements says, read from the CST alone: its statements, whether it always
leaves, which names it assigns. Shared by the statement lowering and its error recovery."""

from __future__ import annotations

import libcst as cst


def statements_of(suite: cst.BaseSuite) -> list[cst.BaseStatement]:
    if isinstance(suite, cst.IndentedBlock):
        return list(suite.body)
    return [cst.SimpleStatementLine(body=list(suite.body))]  # type: ignore[attr-defined]


def else_statements(node: cst.If) -> list[cst.BaseStatement]:
    if node.orelse is None:
        return []
    if isinstance(node.orelse, cst.If):
        return [node.orelse]  # elif
    return statements_of(node.orelse.body)


def always_leaves(stmts: list[cst.BaseStatement]) -> bool:
    """Whether every path through `stmts` ends in return, break or continue."""
    for stmt in stmts:
        if isinstance(stmt, cst.SimpleStatementLine):
            if any(isinstance(s, (cst.Return, cst.Break, cst.Continue, cst.Raise)) for s in stmt.body):
                return True
        elif isinstance(stmt, cst.If):
            if always_leaves(statements_of(stmt.body)) and stmt.orelse is not None and always_leaves(else_statements(stmt)):
                return True
    return False


def contains(stmts: list[cst.BaseStatement], kind: type, stop_at_loops: bool = False) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> bool:
            return not stop_at_loops

        def visit_While(self, node: cst.While) -> bool:
            return not stop_at_loops

        def on_visit(self, node: cst.CSTNode) -> bool:
            nonlocal found
            if isinstance(node, kind):
                found = True
            return super().on_visit(node)

    for s in stmts:
        s.visit(Finder())
    return found


def has_jump(stmts: list[cst.BaseStatement]) -> bool:
    return contains(stmts, cst.Return) or contains(stmts, cst.Break, True) or contains(stmts, cst.Continue, True)


def assignment_targets(stmts: list[cst.BaseStatement]) -> list[tuple[str, cst.Name]]:
    """Every name `stmts` assign (loops and branches included), with its target, in order."""
    found: list[tuple[str, cst.Name]] = []

    def add_target(t: cst.BaseExpression) -> None:
        if isinstance(t, cst.Name):
            found.append((t.value, t))
        elif isinstance(t, (cst.Tuple, cst.List)):
            for e in t.elements:
                add_target(e.value)

    class Collector(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            add_target(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            add_target(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            add_target(node.target)

        def visit_For(self, node: cst.For) -> None:
            add_target(node.target)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            add_target(node.target)

    for s in stmts:
        s.visit(Collector())
    return found


def assigned_names(stmts: list[cst.BaseStatement]) -> set[str]:
    return {name for name, _ in assignment_targets(stmts)}


def assignment_of(stmts: list[cst.BaseStatement], name: str) -> cst.CSTNode | None:
    """The first target in `stmts` (loops and branches included) that assigns `name`."""
    return next((node for n, node in assignment_targets(stmts) if n == name), None)

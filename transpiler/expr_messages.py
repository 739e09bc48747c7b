"""Words of the front end's diagnostics about expressions: a type with its article (`a_type`),
what a construct is called (`describe`) and how to write it instead (`hint_for`)."""

from __future__ import annotations

import libcst as cst

from ir.core.types import ANY


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

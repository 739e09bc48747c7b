"""Python code that permissive mode kept as written (`py.opaque`, docs/permissive.md): its text
with the variables that hold the names it reads and binds, and module-level names read through
the model's module."""

from __future__ import annotations

from codegen.names import model_module_name
from codegen.python_emitter import PythonEmitter, Rules
from codegen.python_text import PREC, Expr, attribute_safe
from ir.core import ops
from ir.core.graph import Operation

RULES = Rules()


@RULES.expression(ops.OpaqueOp)
def kept_expression(em: PythonEmitter, op: Operation) -> Expr:
    """A one-line expression kept as Python, folded into its user."""
    a = op.attributes
    read = {n: attribute_safe(em.expr(v, PREC["atom"]).text) for n, v in zip(a["reads"], op.operands)}
    return Expr(python_text(em, op, read, {})[0], PREC["atom"] if a.get("atom") else 0)  # type: ignore[arg-type]



@RULES.statement(ops.OpaqueOp, quoted=False)
def kept_python(em: PythonEmitter, op: ops.OpaqueOp) -> None:
    """Python code permissive mode kept: its text, with the variables that hold its names."""
    a = op.attributes
    loc = op.loc
    if loc is not None:
        em.w.line(f"# kept as Python: {a['reason']}")
        em.last_line = (loc.file, loc.line)
    read: dict[str, str] = {}
    for name, value in zip(a["reads"], op.operands):
        text = em.expr(value).text
        if not text.isidentifier():  # a literal or expression: give it the name the code uses
            var = em.names.take(name)
            em.w.line(f"{var} = {text}")
            text = var
        read[name] = text
    written: dict[str, str] = {}
    if a["kind"] == "stmt":
        for name, result in zip(a["writes"], op.results):
            others = {v for n, v in read.items() if n != name}
            var = em.name_of(result) if result not in em.var else em.var[result]
            if var in others:
                var = em.var[result] = em.names.take(name)
            if name in read and read[name] != var:
                em.w.line(f"{var} = {read[name]}")  # the value it has if the code does not rebind it
            written[name] = var
    lines = python_text(em, op, read, written)
    if a["kind"] == "expr":
        # a value the source names keeps its name, used or not: `d = {...}` reads as written
        named = op.result.uses or op.result.name is not None
        lines[0] = f"{em.name_of(op.result, 'value')} = {lines[0]}" if named else lines[0]
    raw = set(op.raw_lines)
    for i, text in enumerate(lines):
        if i in raw:
            em.w.lines.append(text)
        else:
            em.w.line(text)


def python_text(em: PythonEmitter, op: ops.OpaqueOp, read: dict[str, str], written: dict[str, str]) -> list[str]:
    """The lines of kept Python code with the variables (and module reads) put in."""
    module = model_module_name(op.module)
    for name in op.bare:
        if name in ("F", "math"):
            em.needs.add(name)
    lines = list(op.lines)
    for line, col, end, name, kind in sorted(op.occurrences, key=lambda o: (o[0], -o[1])):
        if kind == "super":  # super(Class, self): the generated function has no __class__ cell
            klass, first = name.split()
            text: str | None = f"super({module}.{klass}, {read.get(first, first)})"
        else:
            text = {"read": read.get(name), "write": written.get(name), "global": f"{module}.{name}"}[kind]
        if text is None:  # an expression's read of a name it binds (a walrus): as written
            continue
        lines[line] = lines[line][:col] + text + lines[line][end:]
    return lines

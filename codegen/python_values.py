"""Values and containers in the emitted function: literals, operators, f-strings, reads of
attributes and items (a module's parameters, buffers and submodules past
nn.Module.__getattr__: `_guards.attr`, `_guards.item`, `_guards.at`), indexing and slices,
tuple, list and dict displays, and the statements that write into them (`x += y`, `y[i] = v`,
`obj.attr = v`, `xs.append(v)`, `a, b = t`)."""

from __future__ import annotations

from codegen.python_emitter import PythonEmitter, Rules
from codegen.names import model_module_name
from codegen.python_text import PREC, Expr, attribute_path, string_literal
from ir.core import ops
from ir.core.graph import Operation, Value
from ir.core.types import DataclassType, ModuleListType, ModuleType, OptionalType, ScalarType, TensorType

RULES = Rules()


@RULES.expression(ops.UninitializedOp)
def uninitialized(em: PythonEmitter, op: Operation) -> Expr:
    return Expr("None", PREC["atom"])


@RULES.expression(ops.ConstantOp)
def constant(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    if a["value"].__class__ is str and op.result.type in (ScalarType("dtype"), ScalarType("memory_format")):
        return Expr(a["value"], PREC["atom"])
    return em.literal(a["value"])


@RULES.expression(ops.BinaryOp)
def binary(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    return binary_text(em, a["op"], op.operands[0], op.operands[1])


@RULES.expression(ops.CompareOp)
def compare(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    lhs = em.expr(op.operands[0], PREC["cmp"] + 1).text
    rhs = em.expr(op.operands[1], PREC["cmp"] + 1).text
    return Expr(f"{lhs} {a['op']} {rhs}", PREC["cmp"])


@RULES.expression(ops.UnaryOp)
def unary(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    if a["op"] == "not":
        return Expr(f"not {em.expr(op.operands[0], PREC['not']).text}", PREC["not"])
    return Expr(f"{a['op']}{em.expr(op.operands[0], PREC['unary']).text}", PREC["unary"])


# -- reads -----------------------------------------------------------------------------------------
@RULES.expression(ops.GetAttrOp)
def attribute(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    if past_module_getattr(op):
        return module_read(em, op)
    return Expr(f"{em.expr(op.operands[0], PREC['atom']).text}.{a['attr']}", PREC["atom"])


@RULES.expression(ops.GetItemOp)
def item(em: PythonEmitter, op: Operation) -> Expr:
    if module_item(op):  # a layer of a Sequential: the fast read
        return module_read(em, op)
    record = op.operands[0].type
    if isinstance(record, DataclassType):  # a field, by name: a dataclass is not a tuple
        return Expr(f"{em.expr(op.operands[0], PREC['atom']).text}.{record.fields[op.operands[1].owner.value]}", PREC["atom"])
    return Expr(f"{em.expr(op.operands[0], PREC['atom']).text}[{em.expr(op.operands[1]).text}]", PREC["atom"])


@RULES.expression(ops.SliceOp)
def sliced(em: PythonEmitter, op: Operation) -> Expr:
    parts = ["" if isinstance(v.owner, ops.ConstantOp) and v.owner.value is None else em.expr(v).text
             for v in op.operands[1:]]
    text = ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
    return Expr(f"{em.expr(op.operands[0], PREC['atom']).text}[{text}]", PREC["atom"])


@RULES.expression(ops.IndexOp)
def indexed(em: PythonEmitter, op: Operation) -> Expr:
    return Expr(em.index_text(op), PREC["atom"])


def module_read(em: PythonEmitter, op: Operation) -> Expr:
    """A read of a submodule, parameter or buffer past nn.Module.__getattr__: `_guards.attr(m,
    "weight")`, `_guards.item(seq, 0)`, and for a chain of them folded into one another, one
    call for the path (`_guards.at(block1, "conv1.weight")`, as `block1.conv1.weight`)."""
    steps: list[str | int] = []
    while True:
        steps.append(op.attributes["attr"] if isinstance(op, ops.GetAttrOp) else op.operands[1].owner.value)  # type: ignore[union-attr]
        inner = op.operands[0].owner
        if not (isinstance(inner, Operation) and inner in em.folded and inner.results[0] not in em.var
                and (isinstance(inner, ops.GetAttrOp) and past_module_getattr(inner) or module_item(inner))):
            break
        op = inner
    base = em.expr(op.operands[0], PREC["atom"]).text
    if len(steps) > 1:
        return Expr(f"_guards.at({base}, {string_literal('.'.join(str(s) for s in reversed(steps)))})", PREC["atom"])
    if isinstance(steps[0], int):
        return Expr(f"_guards.item({base}, {steps[0]})", PREC["atom"])
    return Expr(attribute_path(base, (steps[0],)), PREC["atom"])


def module_item(op: Operation) -> bool:
    """`seq[i]` of an nn.Sequential or nn.ModuleList at a constant index (read with `_guards.item`)."""
    return isinstance(op, ops.GetItemOp) and isinstance(op.operands[0].type, ModuleListType) \
        and isinstance(op.operands[1].owner, ops.ConstantOp) and type(op.operands[1].owner.value) is int


def past_module_getattr(op: Operation) -> bool:
    """A read of a module's parameter, buffer or submodule, which a plain `m.weight` finds only
    through nn.Module.__getattr__ (about 1 us in torch 2.14): printed as `_guards.attr(m,
    "weight")`, which reads the same dicts in the same order for 0.2 us."""
    owner, result = op.operands[0].type, op.result.type
    if isinstance(result, OptionalType):
        result = result.elem
    return isinstance(owner, (ModuleType, ModuleListType)) and isinstance(result, (TensorType, ModuleType, ModuleListType))


# -- displays --------------------------------------------------------------------------------------
@RULES.expression(ops.TupleOp)
def tuple_expr(em: PythonEmitter, op: Operation) -> Expr:
    if op.attributes.get("named"):  # (the class, read from the model's file)
        cls = f"{model_module_name(op.attributes['module'])}.{op.attributes['named']}"
        record = op.result.type
        if isinstance(record, DataclassType):  # by keyword, as a keyword-only dataclass needs
            fields = ", ".join(f"{f}={em.expr(v, PREC['if']).text}" for f, v in zip(record.fields, op.operands))
            return Expr(f"{cls}({fields})", PREC["atom"])
        return Expr(f"{cls}({em.tuple_text(op.operands)})", PREC["atom"])
    if len(op.operands) == 1:
        return Expr(f"({em.expr(op.operands[0], PREC['if']).text},)", PREC["atom"])
    return Expr(f"({em.tuple_text(op.operands)})", PREC["atom"])


@RULES.expression(ops.ListOp)
def list_expr(em: PythonEmitter, op: Operation) -> Expr:
    return Expr("[" + ", ".join(em.expr(v, PREC["if"]).text for v in op.operands) + "]", PREC["atom"])


@RULES.expression(ops.DictOp)
def dict_expr(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    return Expr("{" + ", ".join(f"{string_literal(k)}: {em.expr(v, PREC['if']).text}" for k, v in zip(a["keys"], op.operands))
                + "}", PREC["atom"])


@RULES.expression(ops.SpreadOp)
def spread(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    parts = [("*" + em.expr(v, PREC["atom"]).text) if starred else em.expr(v, PREC["if"]).text
             for v, starred in zip(op.operands, a["starred"])]
    return Expr("(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")", PREC["atom"])


# -- writes ----------------------------------------------------------------------------------------
@RULES.statement(ops.InplaceOp)
def inplace(em: PythonEmitter, op: Operation) -> None:
    target = em.expr(op.operands[0]).text
    em.w.line(f"{target} {op.attributes['op']}= {em.expr(op.operands[1]).text}")
    em.share(op.result, target)


@RULES.statement(ops.IndexPutOp)
def index_put(em: PythonEmitter, op: Operation) -> None:
    em.w.line(f"{em.index_text(op)} = {em.expr(op.operands[-1]).text}")


@RULES.statement(ops.SetAttrOp)
def set_attribute(em: PythonEmitter, op: Operation) -> None:
    em.w.line(f"{em.expr(op.operands[0], PREC['atom']).text}.{op.attributes['attr']} = {em.expr(op.operands[1]).text}")


@RULES.statement(ops.ListAppendOp, ops.ListExtendOp)
def list_append(em: PythonEmitter, op: Operation) -> None:
    method = "append" if isinstance(op, ops.ListAppendOp) else "extend"
    em.w.line(f"{em.expr(op.operands[0], PREC['atom']).text}.{method}({em.expr(op.operands[1]).text})")


@RULES.statement(ops.ListInsertOp)
def list_insert(em: PythonEmitter, op: Operation) -> None:
    em.w.line(f"{em.expr(op.operands[0], PREC['atom']).text}.insert({em.expr(op.operands[1]).text}, "
              f"{em.expr(op.operands[2]).text})")


@RULES.expression(ops.ListPopOp)
def list_pop(em: PythonEmitter, op: Operation) -> Expr:
    index = em.expr(op.operands[1]).text if len(op.operands) > 1 else ""
    return Expr(f"{em.expr(op.operands[0], PREC['atom']).text}.pop({index})", PREC["atom"])


@RULES.statement(ops.ListSetItemOp, ops.DictSetItemOp)
def set_item(em: PythonEmitter, op: Operation) -> None:
    seq, index, value = (em.expr(v).text for v in op.operands)
    em.w.line(f"{em.expr(op.operands[0], PREC['atom']).text}[{index}] = {value}")


@RULES.statement(ops.UnpackOp)
def unpack(em: PythonEmitter, op: Operation) -> None:
    targets = [em.name_of(r) if r.uses else "_" for r in op.results]
    lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
    em.w.line(f"{lhs} = {em.expr(op.operands[0]).text}")


# -- text ------------------------------------------------------------------------------------------
@RULES.expression(ops.FormatOp)
def format_expr(em: PythonEmitter, op: Operation) -> Expr:
    """An f-string; a value whose text cannot sit inside one (a quote, a backslash) goes
    through format(), which is what the f-string calls."""
    values = iter(op.operands)
    pieces: list[tuple[str, str]] = []  # (f-string text, format() form)
    for part in op.attributes["parts"]:
        if part[0] == "text":
            text = part[1]
            escaped = text.encode("unicode_escape").decode("ascii").replace('"', '\\"')
            pieces.append((escaped.replace("{", "{{").replace("}", "}}"), string_literal(text)))
            continue
        _, conversion, spec = part
        inner = em.expr(next(values), PREC["if"]).text
        ok = not any(c in inner for c in "\\\"'{}") and all(c not in spec for c in "\\\"'{}")
        if ":" in inner or "!" in inner.replace("!=", ""):
            inner = f"({inner})"
        conv = f"!{conversion}" if conversion else ""
        fspec = f":{spec}" if spec else ""
        wrapped = {"r": "repr", "s": "str", "a": "ascii"}.get(conversion or "")
        plain = f"{wrapped}({inner})" if wrapped else inner
        pieces.append((f"{{{inner}{conv}{fspec}}}" if ok else "\0",
                       f"format({plain}, {string_literal(spec)})"))
    if all(f != "\0" for f, _ in pieces):
        return Expr('f"' + "".join(f for f, _ in pieces) + '"', PREC["atom"])
    if not pieces:
        return Expr('""', PREC["atom"])
    return Expr('"".join((' + ", ".join(p for _, p in pieces) + ",))", PREC["atom"])


def binary_text(em: PythonEmitter, op: str, lhs: Value, rhs: Value) -> Expr:
    prec = PREC[op] if op in PREC else PREC["|"]
    if op == "**":
        left = em.expr(lhs, PREC["**"] + 1).text
        right = em.expr(rhs, PREC["unary"]).text
    else:
        left = em.expr(lhs, prec).text
        right = em.expr(rhs, prec + 1).text
    return Expr(f"{left} {op} {right}", prec)

"""Control flow in the emitted function: `return`, `raise`, `if` statements and expressions,
`for` and `while` loops (loop-carried and branch-merged values share one variable, so loops need
no copies), and refinements, which print no code."""

from __future__ import annotations

from codegen.python_emitter import PythonEmitter, Rules
from codegen.python_text import PREC, Expr, is_effect_free
from ir.core import ops
from ir.core.graph import Block, Operation, Value

RULES = Rules()


@RULES.statement(ops.ReturnOp)
def return_statement(em: PythonEmitter, op: Operation) -> None:
    value = op.operands[0] if op.operands else None
    if value is None:
        em.w.line("return")
    elif isinstance(value.owner, ops.TupleOp) and value.owner in em.folded and len(value.owner.operands) > 1 \
            and not value.owner.named:
        # (a 1-tuple goes through expr(), which keeps its trailing comma)
        em.w.line("return " + em.tuple_text(value.owner.operands))
    else:
        em.w.line("return " + em.expr(value).text)


@RULES.statement(ops.YieldOp, ops.ConditionOp, quoted=False)
def terminator(em: PythonEmitter, op: Operation) -> None:
    """Printed by the op that owns the region."""


@RULES.statement(ops.RaiseOp)
def raise_statement(em: PythonEmitter, op: ops.RaiseOp) -> None:
    exc = op.exc
    if op.called:
        exc += f"({em.args_text(op.operands, op.kwnames)})"
    em.w.line(f"raise {exc}")


@RULES.expression(ops.RefineOp)
def refined(em: PythonEmitter, op: Operation) -> Expr:
    return em.expr(op.operands[0])


# -- if --------------------------------------------------------------------------------------------
@RULES.statement(ops.IfOp)
def if_statement(em: PythonEmitter, op: ops.IfOp) -> None:
    reuse_incoming(em, op)
    targets = assign_results(em, op.results)
    for block in (op.then_block, op.else_block):
        adopt_yields(em, block, targets)
    before = _assigned_before(em, op, targets)
    if before:  # `identity = x` then `if ...: identity = f(x)`, as the source reads, no `else:`
        copies(em, targets, op.else_block.terminator.operands)  # type: ignore[union-attr]
    em.w.line(f"if {_condition(em, op.cond)}:")
    _sides(em, op, targets, before)


def _condition(em: PythonEmitter, cond: Value) -> str:
    """An if's test: `bool(v)` prints as `v`, which `if` tests the same way."""
    owner = cond.owner
    if isinstance(owner, ops.BuiltinCallOp) and owner.attributes.get("callee") == "bool" and owner in em.folded \
            and len(owner.operands) == 1:
        return em.expr(owner.operands[0]).text
    return em.expr(cond).text


def _sides(em: PythonEmitter, op: ops.IfOp, targets: list[str], before: bool) -> None:
    """The then side, and the else side unless `before` (or it has nothing to do): as `elif`
    where it is one more if that gives the same variables (a source's `elif`, a table's keys)."""
    _side(em, op.then_block, targets)
    if before or not _has_code(em, op.else_block, targets):
        return
    inner = _chained_if(em, op)
    if inner is not None and any(em.var.get(r, t) != t for r, t in zip(inner.results, targets)):
        inner = None  # (its results hold other variables)
    if inner is None:
        em.w.line("else:")
        _side(em, op.else_block, targets)
        return
    for r, t in zip(inner.results, targets):
        em.var[r] = t
    for block in (inner.then_block, inner.else_block):
        adopt_yields(em, block, targets)
    em.w.line(f"elif {_condition(em, inner.cond)}:")
    _sides(em, inner, targets, False)


def _side(em: PythonEmitter, block: Block, targets: list[str]) -> None:
    with em.suite():
        em.block(block)
        term = block.terminator
        assert term is not None
        if not any(isinstance(o, ops.RaiseOp) for o in block.ops):
            copies(em, targets, term.operands)


def _chained_if(em: PythonEmitter, op: ops.IfOp) -> ops.IfOp | None:
    """The if that is all `op`'s else side does, yielding its results as `op`'s, in order."""
    block = op.else_block
    printed = [o for o in block.ops if o not in em.folded and not isinstance(o, (ops.YieldOp, ops.ConstantOp))]
    if len(printed) != 1 or not isinstance(printed[0], ops.IfOp) or printed[0] in em.folded:
        return None
    inner = printed[0]
    term = block.terminator
    if not isinstance(term, ops.YieldOp) or list(term.operands) != list(inner.results):
        return None
    return inner


@RULES.expression(ops.IfOp)
def if_expr(em: PythonEmitter, op: ops.IfOp) -> Expr:
    then_v = op.then_block.terminator.operands[0]  # type: ignore[union-attr]
    else_v = op.else_block.terminator.operands[0]  # type: ignore[union-attr]
    cond = op.cond
    else_const = else_v.owner if isinstance(else_v.owner, ops.ConstantOp) else None
    then_const = then_v.owner if isinstance(then_v.owner, ops.ConstantOp) else None
    if else_const is not None and else_const.value is False and then_v.type == cond.type:
        return Expr(f"{em.expr(cond, PREC['and']).text} and {em.expr(then_v, PREC['and'] + 1).text}", PREC["and"])
    if then_const is not None and then_const.value is True and else_v.type == cond.type:
        return Expr(f"{em.expr(cond, PREC['or']).text} or {em.expr(else_v, PREC['or'] + 1).text}", PREC["or"])
    truth = cond.owner if isinstance(cond.owner, ops.BuiltinCallOp) and cond.owner.attributes.get("callee") == "bool" else None
    if truth is not None and truth.operands[0] is then_v and truth in em.folded:
        # `a or b` of values that are not bools (`pad_r or pad_b`): Python's own, which gives a
        # when it is true, else b
        return Expr(f"{em.expr(then_v, PREC['or']).text} or {em.expr(else_v, PREC['or'] + 1).text}", PREC["or"])
    return Expr(
        f"{em.expr(then_v, PREC['if'] + 1).text} if {em.expr(cond, PREC['if'] + 1).text} else {em.expr(else_v, PREC['if']).text}",
        PREC["if"],
    )


@RULES.statement(ops.RefineOp, quoted=False)
def refine(em: PythonEmitter, op: Operation) -> None:
    """A narrowed type needs no code: the refined value is the same object."""
    # (an atom: the refined value's text stands where a variable would, `(a / 2).sum()`)
    source = em.expr(op.operands[0], PREC["atom"]).text
    if op.result in em.var and em.var[op.result] != source:
        em.source_comment(op)
        em.w.line(f"{em.var[op.result]} = {source}")
    else:
        em.share(op.result, source)


def assign_results(em: PythonEmitter, results: list[Value]) -> list[str]:
    return [em.name_of(r) for r in results]


def copies(em: PythonEmitter, targets: list[str], values: list[Value]) -> None:
    """Parallel assignment of `values` to `targets`, skipping ones already in place."""
    pairs = [(t, em.expr(v).text) for t, v in zip(targets, values)]
    pairs = [(t, e) for t, e in pairs if t != e]
    if not pairs:
        return
    if len(pairs) == 1:
        em.w.line(f"{pairs[0][0]} = {pairs[0][1]}")
    else:
        em.w.line(f"{', '.join(t for t, _ in pairs)} = {', '.join(e for _, e in pairs)}")


def adopt_yields(em: PythonEmitter, block: Block, targets: list[str]) -> None:
    """Let values defined in `block` and only yielded take the result variable directly,
    unless the variable's current value is still read after that point."""
    term = block.terminator
    assert term is not None
    values = term.operands if isinstance(term, ops.YieldOp) else term.operands[1:]
    for t, v in zip(targets, values):
        owner = v.owner
        if not isinstance(owner, Operation) or owner.parent is not block or v in em.var or owner in em.folded:
            continue
        if isinstance(owner, (ops.UnpackOp, ops.InplaceOp, ops.RefineOp)):
            # `x += y` rebinds x whatever variable its result is given, and a refined value
            # has no statement of its own: the copy at the end of the block assigns it.
            continue
        holders = [w for w, name in em.var.items() if name == t and w is not v]
        if any(_used_after(em, w, owner, block) for w in holders):
            continue
        em.var[v] = t


def _used_after(em: PythonEmitter, value: Value, op: Operation, block: Block) -> bool:
    """Whether `value` is read by `op`'s successors in `block` (or ops nested in them)."""
    later = block.ops[block.ops.index(op) + 1:]
    for use in value.uses:
        user = use.op
        while user is not None and user.parent is not block:
            user = user.parent_op()
        if user is not None and user in later:
            return True
    return False


def reuse_incoming(em: PythonEmitter, op: ops.IfOp) -> None:
    """`if c: x = f(x)`: a result that one side passes through from before the if takes
    that value's variable, when nothing reads the old value afterwards."""
    taken = set()
    for i, r in enumerate(op.results):
        if r in em.var or r.name is None:
            continue
        for block in (op.then_block, op.else_block):
            y = block.terminator.operands[i]  # type: ignore[union-attr]
            while isinstance(y.owner, ops.RefineOp):
                y = y.owner.operands[0]
            name = em.var.get(y)
            if name is None or name in taken or y.name != r.name or _inside(em, y, op):
                continue
            if not _read_after(em, y, op, nested_ok=True):
                em.var[r] = name
                taken.add(name)
                break


def _inside(em: PythonEmitter, value: Value, op: Operation) -> bool:
    owner = value.owner
    node = owner if isinstance(owner, Operation) else owner.parent.parent if owner.parent else None  # type: ignore[union-attr]
    while node is not None:
        if node is op:
            return True
        node = node.parent_op()
    return False


def _assigned_before(em: PythonEmitter, op: ops.IfOp, targets: list[str]) -> bool:
    """Whether the else side only assigns variables from before the if (names, not
    expressions), which the then side and the condition do not read: assigned before the
    if, the else side is left out."""
    block = op.else_block
    term = block.terminator
    if not isinstance(term, ops.YieldOp) or any(
            o not in em.folded and not isinstance(o, (ops.YieldOp, ops.RefineOp))
            and not (is_effect_free(o) and not any(r.uses for r in o.results)) for o in block.ops):
        return False
    copied = [(t, v) for t, v in zip(targets, term.operands) if t != expr_peek(em, v)]
    if not copied or any(_inside(em, v, op) or not em.expr(v).text.isidentifier() for _, v in copied):
        return False
    names = {t for t, _ in copied}
    read = [op.cond] + [v for inner in op.then_block.ops for o in inner.walk() for v in o.operands]
    return not any(em.var.get(v) in names and not _inside(em, v, op) for v in read)


def _has_code(em: PythonEmitter, block: Block, targets: list[str]) -> bool:
    if any(op not in em.folded and not isinstance(op, (ops.YieldOp, ops.RefineOp)) and not (is_effect_free(op) and not any(r.uses for r in op.results)) for op in block.ops):
        return True
    term = block.terminator
    return any(t != expr_peek(em, v) for t, v in zip(targets, term.operands))  # type: ignore[union-attr]


def expr_peek(em: PythonEmitter, value: Value) -> str:
    while value not in em.var and isinstance(value.owner, ops.RefineOp):
        value = value.owner.operands[0]  # printed as what it refines
    return em.var.get(value, "\0")


# -- loops -----------------------------------------------------------------------------------------
@RULES.statement(ops.ForRangeOp, ops.ForEachOp)
def for_statement(em: PythonEmitter, op: ops.ForRangeOp | ops.ForEachOp) -> None:
    body = op.body
    inits = op.inits
    names = loop_variables(em, op, body, 1)
    copies(em, names, inits)
    adopt_yields(em, body, names)
    elem = body.args[0]
    elem_name = em.name_of(elem, "i" if isinstance(op, ops.ForRangeOp) else "item") if elem.uses else "_"
    if isinstance(op, ops.ForRangeOp):
        start, stop, step = (em.expr(v) for v in op.operands[:3])
        if step.text == "1":
            header = f"range({stop.text})" if start.text == "0" else f"range({start.text}, {stop.text})"
        else:
            header = f"range({start.text}, {stop.text}, {step.text})"
    else:
        header = em.expr(op.operands[0]).text
    em.w.line(f"for {elem_name} in {header}:")
    with em.suite():
        em.block(body)
        loop_tail(em, body, names)


@RULES.statement(ops.WhileOp)
def while_statement(em: PythonEmitter, op: ops.WhileOp) -> None:
    names = loop_variables(em, op, op.after, 0)
    for a in op.before.args:
        em.var[a] = names[a.index]
    copies(em, names, op.operands)
    adopt_yields(em, op.after, names)
    cond_term = op.before.terminator
    assert isinstance(cond_term, ops.ConditionOp)
    simple = all(o in em.folded or isinstance(o, ops.ConditionOp) for o in op.before.ops)
    if simple:
        em.w.line(f"while {em.expr(cond_term.operands[0]).text}:")
        with em.suite():
            em.block(op.after)
            loop_tail(em, op.after, names)
        return
    em.w.line("while True:")
    with em.w.indent():
        em.block(op.before)
        em.w.line(f"if not {em.expr(cond_term.operands[0], PREC['not'] + 1).text}:")
        with em.w.indent():
            em.w.line("break")
        em.block(op.after)
        loop_tail(em, op.after, names)


def loop_variables(em: PythonEmitter, op: Operation, body: Block, n_extra: int) -> list[str]:
    """One variable per carried value, shared by the initial value (when it is not read
    later), the body argument, the result and the value yielded."""
    carried_args = body.args[n_extra:]
    names = []
    for i, r in enumerate(op.results):
        init = op.operands[len(op.operands) - len(op.results) + i]
        name = None
        if init in em.var and not _read_after(em, init, op) and (init.name == r.name or r.name is None):
            name = em.var[init]
            if name in [em.var.get(a) for a in op.results if a in em.var]:
                name = None
        if name is None:
            name = em.name_of(r)
        em.var[r] = name
        em.var[carried_args[i]] = name
        names.append(name)
    return names


def loop_tail(em: PythonEmitter, body: Block, names: list[str]) -> None:
    term = body.terminator
    if isinstance(term, ops.ConditionOp):
        copies(em, names, term.operands[1:])
        keep = term.operands[0]
        negated = keep.owner
        if isinstance(negated, ops.UnaryOp) and negated.attributes["op"] == "not" and negated in em.folded:
            stop = em.expr(negated.operands[0]).text  # `if broke: break`, not `if not not broke`
        else:
            stop = "not " + em.expr(keep, PREC["not"] + 1).text
        em.w.line(f"if {stop}:")
        with em.w.indent():
            em.w.line("break")
    else:
        assert term is not None
        copies(em, names, term.operands)


def _read_after(em: PythonEmitter, value: Value, op: Operation, nested_ok: bool = False) -> bool:
    """Whether `value` is read anywhere other than as an operand of `op` or before it
    (or, with `nested_ok`, inside `op`'s regions)."""
    block = op.parent
    assert block is not None
    position = block.ops.index(op)
    for use in value.uses:
        user = use.op
        if user is op:
            continue
        top = user
        while top is not None and top.parent is not block:
            top = top.parent_op()
        if nested_ok and top is op:
            continue
        if top is None or block.ops.index(top) >= position:
            return True
    return False

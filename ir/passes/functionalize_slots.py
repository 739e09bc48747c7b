"""IR surgery for functionalization: the results and loop-carried values a written root's new
value takes through ifs and loops (`add_result`, `add_carried`), dropped again where they carry
what another slot carries (`dedupe_slots`), the common type of what meets there
(`fit_merge_types`), and the pure ops the rewrite left unused (`erase_dead`).
"""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import Operation, OpResult, Value
from ir.core.types import ANY, Type, is_subtype, unify
from ir.passes.aliasing import LOOPS, Root, carried_slots


def add_result(op: Operation, root: Root) -> OpResult:
    r = OpResult(root.type, op, len(op.results), _root_hint(root))
    op.results.append(r)
    return r


def _root_hint(root: Root) -> str | None:
    return root.name.rsplit(".", 1)[-1] if root.name.replace(".", "").replace("_", "").isalnum() else None


def add_carried(op: Operation, init: Value, root: Root) -> tuple[Value, ...]:
    """A new loop-carried value starting at `init`: its block arguments and the loop's result
    (the terminators' operands are added after the walk)."""
    op._add_operand(init)
    hint = _root_hint(root)
    if isinstance(op, ops.WhileOp):
        args: tuple[Value, ...] = (op.before.add_arg(root.type, hint), op.after.add_arg(root.type, hint))
    else:
        args = (op.regions[0].block.add_arg(root.type, hint),)
    return args + (add_result(op, root),)


def _slot_values(op: Operation, j: int) -> list[Value]:
    """What decides slot j's value: the if's yields, the loop's initial value and what its
    terminators pass on (a block argument passed on unchanged stands for itself)."""
    if isinstance(op, ops.IfOp):
        return [b.terminator.operands[j] for b in (op.then_block, op.else_block)]  # type: ignore[union-attr]
    init, args, nexts, _ = carried_slots(op)[j]
    return [init, *[n if n not in args else "arg" for n in nexts]]  # type: ignore[list-item]


def dedupe_slots(added: list[tuple[Operation, int]]) -> None:
    """A slot this pass added that carries the same values as another of the same op (the
    carried `acc` of `acc += x` in a loop and the root it writes) gives way to that one; an if
    result it added that nothing reads goes."""
    for op, j in sorted(added, key=lambda s: -s[1]):
        if isinstance(op, ops.IfOp) and not op.results[j].uses:
            _drop_slot(op, j)
            continue
        mine = _slot_values(op, j)
        for i in range(j):
            if _slot_values(op, i) == mine:  # the same values (Values compare by identity)
                _merge_slot(op, j, i)
                break


def _merge_slot(op: Operation, j: int, i: int) -> None:
    op.results[j].replace_all_uses_with(op.results[i])
    if not isinstance(op, ops.IfOp):
        for arg_j, arg_i in zip(carried_slots(op)[j][1], carried_slots(op)[i][1]):
            arg_j.replace_all_uses_with(arg_i)
    _drop_slot(op, j)


def _drop_slot(op: Operation, j: int) -> None:
    """Remove result j of an if or loop, with its yields, initial value and block arguments."""
    if isinstance(op, ops.IfOp):
        places = [(b, None, 0) for b in (op.then_block, op.else_block)]
        first = None
    elif isinstance(op, ops.WhileOp):
        places, first = [(op.before, 0, 1), (op.after, 0, 0)], 0
    else:
        body = op.regions[0].block
        places = [(body, 1, 1 if isinstance(body.terminator, ops.ConditionOp) else 0)]
        first = 3 if isinstance(op, ops.ForRangeOp) else 1
    for block, arg0, term0 in places:
        term = block.terminator
        _set_operands(term, [v for k, v in enumerate(term.operands) if k != term0 + j])  # type: ignore[union-attr]
        if arg0 is not None:
            del block.args[arg0 + j]
            for k, a in enumerate(block.args):
                a.index = k
    if first is not None:
        _set_operands(op, [v for k, v in enumerate(op.operands) if k != first + j])
    del op.results[j]
    for k, r in enumerate(op.results):
        r.index = k


def _set_operands(op: Operation, values: list[Value]) -> None:
    op.drop_operands()
    for v in values:
        op._add_operand(v)


def fit_merge_types(func: ops.FuncOp) -> None:
    """Results and block arguments of ifs and loops whose incoming values are now typed less
    precisely (a view re-derived from a root of unknown shape) take the common type."""
    for op in func.walk():
        if isinstance(op, ops.IfOp):
            for i, r in enumerate(op.results):
                for v in _slot_values(op, i):
                    r.type = _widen(r.type, v.type)
        elif isinstance(op, LOOPS):
            for init, args, nexts, r in carried_slots(op):
                t = r.type
                for v in [init, *nexts]:
                    t = _widen(t, v.type)
                for v in [*args, r]:
                    v.type = t


def _widen(t: Type, incoming: Type) -> Type:
    if is_subtype(incoming, t):
        return t
    return unify(t, incoming) or ANY


def erase_dead(candidates: list[Value]) -> None:
    """Erase pure ops that the rewrite left without uses (the views an in-place op read, the
    tuples a returned value was rebuilt from)."""
    work = [v.owner for v in candidates if isinstance(v.owner, Operation)]
    while work:
        op = work.pop()
        if op.parent is None or not ops.is_pure(op) or any(r.uses for r in op.results):
            continue
        inputs = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.erase()
        work += inputs

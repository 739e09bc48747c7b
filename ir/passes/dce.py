"""Dead code elimination: drop ops without effects whose results nobody reads, and the results
of `scf.if` that nobody reads (with what only they needed)."""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import PURE, Block, Operation, Program


def dce(program: Program) -> None:
    for func in program.funcs:
        while _sweep(func.regions[0].block):
            pass


def _sweep(block: Block) -> bool:
    changed = False
    for op in reversed(list(block.ops)):
        for region in op.regions:
            for inner in region.blocks:
                changed |= _sweep(inner)
        if isinstance(op, ops.IfOp):
            changed |= _drop_unused_if_results(op)
        if _removable(op):
            op.erase()
            changed = True
    return changed


def _removable(op: Operation) -> bool:
    if any(r.uses for r in op.results):
        return False
    if op.has_trait(PURE) and not op.regions:
        return True
    # An if whose sides do nothing observable and which yields nothing anyone reads.
    if isinstance(op, ops.IfOp):
        return all(len(b.ops) == 1 for b in (op.then_block, op.else_block)) and not op.results
    return False


def _drop_unused_if_results(op: ops.IfOp) -> bool:
    keep = [i for i, r in enumerate(op.results) if r.uses]
    if len(keep) == len(op.results):
        return False
    for block in (op.then_block, op.else_block):
        term = block.terminator
        assert term is not None
        values = [term.operands[i] for i in keep]
        term.drop_operands()
        for v in values:
            term._add_operand(v)
    results = [op.results[i] for i in keep]
    for new_index, r in enumerate(results):
        r.index = new_index
    op.results = results
    return True

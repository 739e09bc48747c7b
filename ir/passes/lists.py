"""Lists built by appends in straight-line code, made SSA: each read of such a list reads a new
`py.list` of what the list held at that point, and the appends go.

A module loop unrolled at lowering (densenet's `features.append(layer(features))`) leaves one
list value that every layer reads and grows. Shape propagation must then describe all its
elements at once (`f32[1, ?, 56, 56]` for the `torch.cat` of it); after this pass each read sees
exactly the tensors it concatenates, so sizes are known and the ops on them can be fused.

The rewrite applies only where the list cannot be observed as one object: every use of it is in
the block that made it (none in a nested region, a loop body or branch), and is an append or an
op that reads the elements there and then (a torch call, an index, an unpack, a slice, `len`, a
`for` over it). A list that is returned, yielded, stored, set by index or passed to a call that
might keep it is left as it is.
"""

from __future__ import annotations

from ir import ops
from ir.core import Block, Operation, Program, Use

# Builtins that consume the whole list before they return (not `enumerate`, `zip`, `iter` or
# `reversed`, which return iterators that would see later appends).
_CONSUMING_BUILTINS = frozenset({"len", "sum", "min", "max", "any", "all", "tuple", "list", "sorted"})


def snapshot_lists(program: Program) -> None:
    for func in program.funcs:
        for op in list(func.walk()):
            if isinstance(op, ops.ListOp) and _appended_in_place(op):
                _snapshot(op)


def _reads_now(use: Use) -> bool:
    """`use` reads the list's elements when it runs, and keeps nothing that sees later appends."""
    op = use.op
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp, ops.GetItemOp, ops.UnpackOp, ops.SliceOp)):
        return True
    if isinstance(op, ops.BuiltinCallOp):
        return op.attributes.get("callee") in _CONSUMING_BUILTINS
    return isinstance(op, ops.ForEachOp) and use.index == 0


def _appended_in_place(listed: Operation) -> bool:
    uses = listed.result.uses
    if not any(isinstance(u.op, ops.ListAppendOp) for u in uses):
        return False
    return all(u.op.parent is listed.parent
               and ((isinstance(u.op, ops.ListAppendOp) and u.index == 0) or _reads_now(u))
               for u in uses)


def _snapshot(listed: Operation) -> None:
    block = listed.parent
    assert isinstance(block, Block)
    value = listed.result
    users = {id(u.op) for u in value.uses}
    held = list(listed.operands)
    grown = False
    for op in list(block.ops[block.ops.index(listed) + 1:]):
        if id(op) not in users:
            continue
        if isinstance(op, ops.ListAppendOp):
            held.append(op.operands[1])
            op.erase()
            grown = True
        elif grown:
            now = block.insert_before(op, ops.ListOp(held, [value.type], {}, [], op.loc, [value.name]))
            for i, operand in enumerate(op.operands):
                if operand is value:
                    op.set_operand(i, now.result)
    if not value.uses:
        listed.erase()

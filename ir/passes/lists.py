"""Lists built by appends and stores at constant indices in straight-line code, made SSA: each
read of such a list reads a new `py.list` of what the list held at that point, and the appends
and stores go.

A module loop unrolled at lowering (densenet's `features.append(layer(features))`) leaves one
list value that every layer reads and grows. Shape propagation must then describe all its
elements at once (`f32[1, ?, 56, 56]` for the `torch.cat` of it); after this pass each read sees
exactly the tensors it concatenates, so sizes are known and the ops on them can be fused.

The rewrite applies only where the list cannot be observed as one object: it is changed only
in the block that made it (not in a loop body or a branch), by appends, `xs[i] = v` with a
constant `i` in range there, `xs.insert(i, v)` with a constant `i`, and `xs.pop()` or
`xs.pop(i)` with a constant `i` of a list that holds one there (a U-Net's skips), and every other use is an op that reads the elements there and then
(a torch call, an index, an unpack, a slice, `len`, `bool`, a concatenation `xs + [x]`, a `for`
over it), in that block or inside an
op of it (a read in a branch sees what the list held when the branch ran). A list that is
returned, yielded, stored, changed in a branch or loop, set at an index not known or out of
range, or passed to a call that might keep it is left as it is.

Canonicalization applies the same rewrite (`snapshot`) once branches have folded: swin's
`shift_size = shift_size.copy()`, set to 0 under an `if` that specialization decides.

Before it, the pass decides what needs no facts: `xs is None` of None or of a display (a list
passed down to an inlined call that starts `if children is None: children = []`, DLA's trees),
a display refined from Optional is the display, and an item of a tuple display is the item (the
index of a loop unrolled over `enumerate`, so that hrnet's `x[i] = branch(x[i])` stores at a
constant). After it, `a + b` of two displays nothing
keeps is one display, so that shape propagation (next) sizes the `torch.cat` of it.
"""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import Block, Operation, Program, Use
from ir.core.rewrite import Rewriter, apply_rules
from ir.core.types import ListType
from ir.passes.fold import (
    concat_known_lists,
    fold_is_none_of_display,
    forward_refined_display,
    forward_tuple_item,
    forward_tuple_unpack,
    inline_constant_if,
)

# Builtins that consume the whole list before they return (not `enumerate`, `zip`, `iter` or
# `reversed`, which return iterators that would see later appends).
CONSUMING_BUILTINS = frozenset({"len", "bool", "sum", "min", "max", "any", "all", "tuple", "list", "sorted"})


def snapshot_lists(program: Program) -> None:
    for func in program.funcs:
        # (a list passed down to an inlined call that starts `if xs is None: xs = []` is then
        # the caller's display, grown in straight-line code; `xs[i] = v` in a loop unrolled over
        # `enumerate(...)` stores at the constant its pair holds)
        apply_rules(func, [fold_is_none_of_display, inline_constant_if, forward_refined_display, _forward_tuple_item])
        for op in list(func.walk()):
            if isinstance(op, ops.ListOp) and updated_in_place(op):
                snapshot(op)
        apply_rules(func, [concat_known_lists])  # (before shape propagation: `torch.cat` of it has a shape)


def _forward_tuple_item(op: Operation, rw: Rewriter) -> bool:
    """An item of a tuple display (not of a list: the snapshots below decide those) is the item."""
    if not isinstance(op, (ops.GetItemOp, ops.UnpackOp)) or not isinstance(op.operands[0].owner, ops.TupleOp):
        return False
    return forward_tuple_item(op, rw) if isinstance(op, ops.GetItemOp) else forward_tuple_unpack(op, rw)


def _reads_now(use: Use) -> bool:
    """`use` reads the list's elements when it runs, and keeps nothing that sees later appends."""
    op = use.op
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp, ops.GetItemOp, ops.UnpackOp, ops.SliceOp)):
        return True
    if isinstance(op, ops.BuiltinCallOp):
        return op.attributes.get("callee") in CONSUMING_BUILTINS
    if isinstance(op, ops.BinaryOp):  # (`xs + [x]`: a new list of the elements xs holds now)
        return op.attributes.get("op") == "+" and isinstance(op.result.type, ListType)
    return isinstance(op, ops.ForEachOp) and use.index == 0


def _store_index(op: Operation) -> int | None:
    """The index of `xs[i] = v` when it is an int constant."""
    index = op.operands[1].owner
    if isinstance(index, ops.ConstantOp) and type(index.value) is int:
        return index.value
    return None


def _is_update(use: Use) -> bool:
    if use.index != 0:
        return False
    if isinstance(use.op, ops.ListPopOp):  # `xs.pop()`, `xs.pop(0)`
        return len(use.op.operands) == 1 or _store_index(use.op) is not None
    return isinstance(use.op, ops.ListAppendOp) or (
        isinstance(use.op, (ops.ListSetItemOp, ops.ListInsertOp)) and _store_index(use.op) is not None)


def _insert_at(index: int, length: int) -> int:
    """Where `xs.insert(index, v)` puts v in a list of `length` items (Python clamps)."""
    return min(max(index + length if index < 0 else index, 0), length)


def _pop_at(op: Operation) -> int:
    return _store_index(op) if len(op.operands) > 1 else -1  # type: ignore[return-value]


def updated_in_place(listed: Operation) -> bool:
    """Whether `listed` (a py.list) is grown or stored into only in its own block, where each
    store is in range (an IndexError stays), and read only by ops that read it there and then,
    in that block or inside an op of it (a branch, a loop body)."""
    uses = listed.result.uses
    if not any(_is_update(u) for u in uses):
        return False
    block = listed.parent
    for u in uses:
        if _is_update(u):
            if u.op.parent is not block:
                return False
        elif not _reads_now(u) or _ancestor_in(block, u.op) is None:
            return False
    length = len(listed.operands)
    for op, _ in _users_in_order(listed):
        if isinstance(op, (ops.ListAppendOp, ops.ListInsertOp)):
            length += 1
        elif isinstance(op, (ops.ListSetItemOp, ops.ListPopOp)):
            index = _store_index(op) if isinstance(op, ops.ListSetItemOp) else _pop_at(op)
            assert index is not None
            if not -length <= index < length:
                return False  # (an IndexError stays Python's)
            length -= isinstance(op, ops.ListPopOp)
    return True


def _ancestor_in(block: Block | None, op: Operation) -> Operation | None:
    """`op`, or the op of `block` whose regions hold it; None when it is not under `block`."""
    node: Operation | None = op
    while node is not None and node.parent is not block:
        node = node.parent_op()
    return node


def _users_in_order(listed: Operation) -> list[tuple[Operation, list[Use]]]:
    """The ops of the list's block after it that use it, each with the uses under it."""
    block = listed.parent
    assert isinstance(block, Block)
    under: dict[int, list[Use]] = {}
    for u in listed.result.uses:
        ancestor = _ancestor_in(block, u.op)
        assert ancestor is not None
        under.setdefault(id(ancestor), []).append(u)
    return [(op, under[id(op)]) for op in block.ops[block.ops.index(listed) + 1:] if id(op) in under]


def snapshot(listed: Operation) -> list[Operation]:
    """Rewrite a list that `updated_in_place` accepts; the ops it made or changed."""
    block = listed.parent
    assert isinstance(block, Block)
    value = listed.result
    held = list(listed.operands)
    changed = False
    touched: list[Operation] = []
    for op, uses in _users_in_order(listed):
        if isinstance(op, ops.ListAppendOp):
            held.append(op.operands[1])
            op.erase()
            changed = True
        elif isinstance(op, ops.ListSetItemOp):
            index = _store_index(op)
            assert index is not None
            held[index] = op.operands[2]
            op.erase()
            changed = True
        elif isinstance(op, ops.ListInsertOp):
            held.insert(_insert_at(_store_index(op), len(held)), op.operands[2])  # type: ignore[arg-type]
            op.erase()
            changed = True
        elif isinstance(op, ops.ListPopOp):
            item = held.pop(_pop_at(op))
            op.result.replace_all_uses_with(item)
            op.erase()
            changed = True
        elif changed:
            now = block.insert_before(op, ops.ListOp(held, [value.type], {}, [], op.loc, [value.name]))
            for u in uses:
                u.op.set_operand(u.index, now.result)
                touched.append(u.op)
            touched.append(now)
    if not value.uses:
        listed.erase()
    return touched

"""Small IR surgery shared by passes: cloning ops and regions with a value map, moving ops, and
the worklist that runs local rewrite rules to a fixpoint (`apply_rules`, with the `Rewriter` the
rules change the IR through: canonicalize's rules and the folding rules of ir/passes/fold.py)."""

from __future__ import annotations

from typing import Any, Callable

from ir.core import ops
from ir.core.graph import Block, Operation, Region, Use, Value
from ir.core.types import Type


def clone_op(op: Operation, mapping: dict[Value, Value]) -> Operation:
    """A copy of `op` (with its regions) whose operands are looked up in `mapping` (values not
    in it are used as they are); the copy's results and block arguments are added to `mapping`."""
    operands = [mapping.get(v, v) for v in op.operands]
    new = type(op)(
        operands,
        [r.type for r in op.results],
        dict(op.attributes),
        [],
        op.loc,
        [r.name for r in op.results],
    )
    for old, result in zip(op.results, new.results):
        mapping[old] = result
    for region in op.regions:
        new.add_region(clone_region(region, mapping))
    return new


def clone_region(region: Region, mapping: dict[Value, Value]) -> Region:
    out = Region()
    for block in region.blocks:
        copy = Block([a.type for a in block.args], [a.name for a in block.args])
        for old, new in zip(block.args, copy.args):
            mapping[old] = new
        for op in block.ops:
            copy.append(clone_op(op, mapping))
        out.add_block(copy)
    return out


def inline_block_before(block: Block, anchor: Operation, args: list[Value]) -> list[Value]:
    """Copy the ops of `block` (its arguments bound to `args`) in front of `anchor`, all but the
    terminator; return the terminator's operands as mapped in the copy."""
    mapping: dict[Value, Value] = dict(zip(block.args, args))
    parent = anchor.parent
    assert parent is not None
    for op in block.ops[:-1]:
        parent.insert_before(anchor, clone_op(op, mapping))
    term = block.ops[-1]
    return [mapping.get(v, v) for v in term.operands]


# -- the worklist rewriter ------------------------------------------------------------------------
class Rewriter:
    """Changes the IR on behalf of the rules and queues the ops a change may make foldable."""

    def __init__(self) -> None:
        self.stack: list[Operation] = []
        self.queued: set[Operation] = set()

    def push(self, op: Operation | None) -> None:
        if op is not None and op not in self.queued:
            self.queued.add(op)
            self.stack.append(op)

    def pop(self) -> Operation:
        op = self.stack.pop()
        self.queued.discard(op)
        return op

    def _touched(self, op: Operation) -> None:
        self.push(op)
        self.push(op.parent_op())  # a yield or a loop body changed: the op owning it may fold

    def replace_use(self, use: Use, new: Value) -> None:
        self._touched(use.op)
        use.op.set_operand(use.index, new)

    def replace_value(self, old: Value, new: Value) -> None:
        if old.name is not None and new.name is None and old.uses and not isinstance(new.owner, ops.ConstantOp):
            new.name = old.name  # (as Value.replace_all_uses_with does)
        for use in list(old.uses):
            self.replace_use(use, new)

    def replace_op(self, op: Operation, values: list[Value]) -> None:
        """Every use of op's results reads `values` instead; op goes."""
        assert len(values) == len(op.results)
        for result, value in zip(op.results, values):
            self.replace_value(result, value)
        self.erase(op)

    def erase(self, op: Operation) -> None:
        for inner in op.walk():
            for value in inner.operands:
                self.push_owner(value)
        self.push(op.parent_op())
        op.erase()

    def push_owner(self, value: Value) -> None:
        owner = value.owner
        if isinstance(owner, Operation):
            self.push(owner)
        elif owner.parent is not None:
            self.push(owner.parent.parent)  # a block argument: its loop may drop it

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        assert anchor.parent is not None
        anchor.parent.insert_before(anchor, op)
        self.push(op)
        return op

    def constant(self, anchor: Operation, value: Any, type: Type) -> Value:
        """A new py.constant just before `anchor` (so it dominates whatever anchor's results did)."""
        return self.insert_before(anchor, ops.ConstantOp([], [type], {"value": value}, loc=anchor.loc)).result

    def inline_before(self, block: Block, anchor: Operation, args: list[Value]) -> list[Value]:
        """Move the ops of `block` (its arguments bound to `args`), all but the terminator, in
        front of `anchor`; return the terminator's operands."""
        for arg, value in zip(block.args, args):
            self.replace_value(arg, value)
        assert anchor.parent is not None
        for op in list(block.ops[:-1]):
            block.ops.remove(op)
            op.parent = None
            self.insert_before(anchor, op)
        return list(block.ops[-1].operands)


Rule = Callable[[Operation, Rewriter], bool]


def apply_rules(func: Operation, rules: list[Rule]) -> bool:
    """Run `rules` over every op of `func` until none applies; True if any did."""
    rw = Rewriter()
    for op in reversed(list(func.walk())[1:]):
        rw.push(op)  # popped in program order
    changed = False
    budget = 1000 + 200 * len(rw.stack)
    while rw.stack:
        op = rw.pop()
        if not _attached(op, func):
            continue
        for rule in rules:
            if rule(op, rw):
                changed = True
                if _attached(op, func):
                    rw.push(op)  # another rule may apply to what is left of it
                break
        budget -= 1
        assert budget > 0, f"canonicalize does not settle (last rule on {op.name})"
    return changed


def _attached(op: Operation, func: Operation) -> bool:
    node = op
    while node is not func:
        block = node.parent
        if block is None or block.parent is None or block.parent.parent is None:
            return False
        node = block.parent.parent
    return True

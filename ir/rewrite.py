"""Small IR surgery shared by passes: cloning ops and regions with a value map, moving ops."""

from __future__ import annotations

from ir.core import Block, Operation, Region, Value


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

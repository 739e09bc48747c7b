"""Re-inplacing: a functional write into a new tensor that nothing else reads becomes the write
in place it was before functionalization.

Functionalization (ir/passes/functionalize.py) turns `y[mask] = 0.0` into
`y_1 = y.index_put((mask,), y.new_full((), 0.0))` and `y[:, :4] = t` into
`y_1 = torch.slice_scatter(y, t.expand_as(y[:, :4]).clone(), 1, None, 4, 1)`: each a copy of the
whole of `y`, where eager writes a few elements. Late in the pipeline, when no pass will move or
fuse ops any more, such a write goes back in place when the tensor it writes is one nobody else
can see any more:

- its base is a tensor the function makes new in the same block (a `clone`, an operator's
  result, a kernel's output, an earlier such write), not an argument, a module's tensor or
  anything a call may keep;
- every value that may share the base's storage (views of it, containers holding it, what an op
  that may return its operand returns: `reshape`, `contiguous`, `to`) is read only by ops before
  the write, all in the same block and none of them a call we cannot see into. The write's
  result takes the base's place in every later use.

The write becomes `torch.index_put` (`y[mask] = v`, `y[:, :4] = t`, `y[0] = t`; marked
`reinplaced`): `index_put` of index tensors, `slice_scatter` and `select_scatter` of a constant
dim. Its value loses what functionalization added to make it a new tensor of the view's shape
and dtype, which the assignment does itself: the `clone` (or `.to(view.dtype, copy=True)`) and
the `expand_as` of the written view, when what is left cannot share the base's storage; and
`y.new_full((), c)` is the number `c`. A value that is the written view under one operator
(`y[0] + 1.0`) with the view's dtype and shape, and nothing reading the base between the two,
becomes the augmented assignment (`y[0] += 1.0`).

It runs before `reuse` and `plan`, which see the write as a use of the tensor.

Values are eager's bit for bit: an assignment copies what the scatter copied, and an in-place
operator computes what the out-of-place one did. Where eager raises is not kept: the copy a
functional write made of a value that broadcast past the view raised (`expand_as`) where the
assignment's own broadcast may not.
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.core import ops
from ir.core.graph import PURE, Block, Operation, OpResult, Program, Value
from ir.core.types import INT, NONE, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import op_name
from ir.passes.aliasing import holds_tensors
from ir.passes.canonicalize import immutable
from ir.passes.fuse import FRESH_RESULTS
from ir.passes.plan import FRESH_BUILTINS
from ir.torchapi.signatures import UNANNOTATED_ALIASES

FULL = ("slice", False, False, False)  # `:`
CONTAINERS = (ops.TupleOp, ops.ListOp, ops.GetItemOp, ops.UnpackOp)
AUGMENTED = frozenset({"+", "-", "*", "/"})  # operators whose in-place form computes the same values


def reinplace(program: Program) -> None:
    for func in program.funcs:
        if isinstance(func, ops.FuncOp):
            _block(func.regions[0].block)


def _block(block: Block) -> None:
    for op in list(block.ops):
        if op.parent is not block:
            continue  # (erased with a write rewritten before it)
        for region in op.regions:
            for inner in region.blocks:
                _block(inner)
        write = _functional_write(op)
        if write is not None and _fresh(write.base, block):
            chain = _nested(op, write, block)
            aliases = _aliases(write.base, block)
            if aliases is not None and _unread_after(aliases, chain):
                _rewrite(chain, aliases, block)


# -- which writes ----------------------------------------------------------------------------------
@dataclass
class Write:
    """A functional write: `base` with `base[items] = value` done, items as in torch.index."""

    base: Value
    items: tuple
    operands: list[Value]  # the slice bounds and indices the items hold
    value: Value
    scatter: bool = True  # a view's new value carried back (its value a copy functionalization made)


def _functional_write(op: Operation) -> Write | None:
    if len(op.results) != 1 or op.attributes.get("kwnames") or op.attributes.get("mutates"):
        return None
    name = op_name(op)
    if isinstance(op, ops.TensorMethodOp) and name == "index_put" and len(op.operands) == 3:
        base, indices, value = op.operands
        held = indices.owner.operands if isinstance(indices.owner, ops.TupleOp) else None
        if not held or not all(isinstance(v.type, TensorType) for v in held):
            return None
        return Write(base, (("value",),) * len(held), list(held), value, scatter=False)
    if not isinstance(op, ops.TorchCallOp):
        return None
    if name == "select_scatter" and len(op.operands) == 4:
        base, value, dim, index = op.operands
        if index.type != INT:
            return None
        item, operands = ("value",), [index]
    elif name == "slice_scatter" and len(op.operands) == 6:
        base, value, dim, *bounds = op.operands
        if any(b.type not in (INT, NONE) for b in bounds):
            return None
        start, stop, step = (None if _constant(b) is None else b for b in bounds)
        if step is not None and _constant(step) == 1:
            step = None
        item = ("slice", start is not None, stop is not None, step is not None)
        operands = [b for b in (start, stop, step) if b is not None]
    else:
        return None
    d = _constant(dim)
    if type(d) is not int:
        return None
    items = (FULL,) * d + (item,) if d >= 0 else (("ellipsis",), item) + (FULL,) * (-d - 1)
    return Write(base, items, operands, value)


def _nested(op: Operation, write: Write, block: Block) -> list[tuple[Operation, Write]]:
    """The write and those nested in its value, outermost first: `y[0, 0] = v` functionalized is
    `select_scatter(y, select_scatter(y[0], v, 0, 0), 0, 0)`, a write into the view `y[0]` of y
    carried back into y. Each inner one writes the view the one around it writes, and is read by
    it alone: done in place, into that view, it leaves nothing for the outer ones to do."""
    chain = [(op, write)]
    while True:
        outer_op, outer = chain[-1]
        inner_op = outer.value.owner
        inner = _functional_write(inner_op) if isinstance(inner_op, Operation) else None
        if not outer.scatter or inner is None or inner_op.parent is not block or len(outer.value.uses) != 1 \
                or not isinstance(inner.base.owner, ops.IndexOp) or not _is_view(inner.base, outer):
            return chain
        chain.append((inner_op, inner))  # type: ignore[arg-type]


def _constant(v: Value) -> object:
    return v.owner.attributes["value"] if isinstance(v.owner, ops.ConstantOp) else ...


# -- what may share the base's storage ---------------------------------------------------------------
def _fresh(v: Value, block: Block) -> bool:
    """Whether `v` is a new tensor made in `block`."""
    return (isinstance(v, OpResult) and v.op.parent is block and isinstance(v.type, TensorType)
            and _makes_new(v.op, v))


def _makes_new(op: Operation, r: Value) -> bool:
    """Whether result `r` of `op` is a tensor no operand's storage holds."""
    if not isinstance(r.type, TensorType):
        return False
    if isinstance(op, kernel_ops.KernelOp):
        k = op.results.index(r)  # type: ignore[arg-type]
        return k not in op.destinations and all(k != out for out, _ in op.attributes.get("reuse", ()))
    if isinstance(op, kernel_ops.Kernel):
        return True
    if isinstance(op, (ops.BinaryOp, ops.UnaryOp, ops.CompareOp)):  # (a Python operator on tensors: a new one)
        return all(isinstance(v.type, TensorType) or immutable(v.type) for v in op.operands)
    if isinstance(op, ops.BuiltinCallOp):
        return op.attributes["callee"] in FRESH_BUILTINS and not op.attributes.get("mutates")
    if not isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) or len(op.results) != 1:
        return False
    a = op.attributes
    if a.get("alias_of") is not None or a.get("mutates") or "out" in a.get("kwnames", ()) or not a.get("aten"):
        return False
    return op_name(op) in FRESH_RESULTS or op_name(op) not in UNANNOTATED_ALIASES


def _aliases(base: Value, block: Block) -> set[Value] | None:
    """The values of `block` that may share `base`'s storage, or None when some op could keep it
    where we do not see (a call, a list it is appended to, a region)."""
    found = {base}
    work = [base]
    while work:
        v = work.pop()
        for use in v.uses:
            user = use.op
            if user.parent is not block:
                return None  # (read inside a loop or a branch)
            shared = _sharing_results(user, v)
            if shared is None:
                return None
            for r in shared:
                if r not in found:
                    found.add(r)
                    work.append(r)
    return found


def _sharing_results(op: Operation, v: Value) -> list[Value] | None:
    """The results of `op` that may share the storage of its operand `v`; None when `op` may keep
    it where we do not see (a call, a list it is appended to, a region, another kind of object)."""
    if isinstance(op, (ops.ReturnOp, ops.YieldOp, ops.ConditionOp)):
        return []  # (the end of the block: after any write)
    if isinstance(op, kernel_ops.KernelOp):
        shared = [k for k, dest in op.destinations.items() if dest is v]
        shared += [k for k, j in op.attributes.get("reuse", ()) if op.operands[j] is v]
        return [op.results[k] for k in shared]
    if isinstance(op, kernel_ops.Kernel):
        return []
    if op.regions:
        return None
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
        if op_name(op) == "set_":
            return None
    elif isinstance(op, ops.BuiltinCallOp):
        if op.attributes.get("mutates") or op.attributes["callee"] not in FRESH_BUILTINS \
                and not all(immutable(r.type) for r in op.results):
            return None
    elif not (op.has_trait(PURE) or isinstance(op, (ops.InplaceOp, ops.IndexPutOp))):
        return None
    shared = []
    for r in op.results:
        if _makes_new(op, r) or immutable(r.type):
            continue
        if not holds_tensors(r.type) and not isinstance(op, CONTAINERS):
            return None  # (`x.tolist()`, `x.numpy()`: another object sees the values or the storage)
        shared.append(r)
    return shared


def _unread_after(aliases: set[Value], chain: list[tuple[Operation, Write]]) -> bool:
    """Whether every read of `aliases` is by an op before the innermost write of `chain`, but
    the writes' own reads of what they write (`y` and the view `y[0]` of `y[0, 0] = v`)."""
    inner = chain[-1][0]
    block = inner.parent
    position = {op: i for i, op in enumerate(block.ops)}  # type: ignore[union-attr]
    at = position[inner]
    own = {id(op) for op, _ in chain}
    for v in aliases:
        for use in v.uses:
            if use.index == 0 and id(use.op) in own:
                continue
            if position[use.op] >= at:
                return False
    return True


# -- the rewrite -------------------------------------------------------------------------------------
def _rewrite(chain: list[tuple[Operation, Write]], aliases: set[Value], block: Block) -> None:
    """The innermost write of `chain` in place, into the view it writes; the writes around it,
    which only carried it back, go."""
    outer = chain[0][0]
    outer.result.replace_all_uses_with(chain[0][1].base)
    old: list[Value] = []
    for op, _ in chain[:-1]:  # (each one's result is read by the one before it alone)
        old += op.operands
        op.erase()
    op, write = chain[-1]
    old += op.operands
    value, operands = _plain_value(op, write, aliases, block), write.operands
    augmented = _augmented(op, write, value, aliases, block)
    if augmented is not None:
        view, other = augmented
        block.ops.remove(view.owner)  # type: ignore[arg-type]
        view.owner.parent = None  # type: ignore[union-attr]
        block.insert_before(op, view.owner)  # type: ignore[arg-type]
        binary = value.owner
        assert isinstance(binary, ops.BinaryOp)
        update = ops.InplaceOp([view, other], [view.type], {"op": binary.attributes["op"], "reinplaced": True},
                               loc=binary.loc)
        block.insert_before(op, update)
        old.append(value)
        value, operands = update.result, view.owner.operands[1:]  # type: ignore[union-attr]
    else:
        value = _constant_fill(value, write) or value
    base, items = write.base, write.items
    view = base.owner
    if augmented is None and write.scatter and isinstance(view, ops.IndexOp) and len(chain) > 1 \
            and all(item == ("value",) for item in view.attributes["items"]) \
            and all(v.type == INT for v in view.operands[1:]):
        # `y[0][:, 1] = v` is `y[0, :, 1] = v` (ints index the leading dims)
        base, items, operands = view.operands[0], view.attributes["items"] + items, view.operands[1:] + operands
    put = ops.IndexPutOp([base, *operands, value], [], {"items": items, "reinplaced": True}, loc=outer.loc)
    block.insert_before(op, put)
    op.erase()
    _erase_dead(old)


def _plain_value(op: Operation, write: Write, aliases: set[Value], block: Block) -> Value:
    """The value without the copy functionalization made of it (a `clone` or `.to(dtype,
    copy=True)` of the view's dtype, an `expand_as` of the written view), which the assignment
    makes itself: when what is left cannot share the base's storage, and nothing between the
    copy and the write can change what it holds (only pure ops stand between)."""
    value = write.value
    copy = value.owner
    if not (write.scatter and isinstance(copy, ops.TensorMethodOp) and _only_use(value) and _is_copy(copy, write)
            and copy.parent is block and _pure_between(copy, op, block)):
        return value
    stripped = copy.operands[0]
    owner = stripped.owner
    if _only_use(stripped) and isinstance(owner, ops.TensorMethodOp) and op_name(owner) == "expand_as" \
            and not owner.attributes.get("kwnames") and len(owner.operands) == 2 and _is_view(owner.operands[1], write):
        stripped = owner.operands[0]
    return stripped if stripped not in aliases and isinstance(stripped.type, TensorType) else value


def _pure_between(first: Operation, last: Operation, block: Block) -> bool:
    """Whether every op of `block` strictly between `first` and `last` is pure: memory holds
    the same at both."""
    return all(o.has_trait(PURE) and not o.regions for o in block.ops[block.ops.index(first) + 1:block.ops.index(last)])


def _is_copy(op: ops.TensorMethodOp, write: Write) -> bool:
    """`x.clone()`, or `x.to(dtype)` / `x.to(dtype, copy=True)` to the written view's dtype."""
    name, a = op_name(op), op.attributes
    if name == "clone":
        return len(op.operands) == 1 and not a.get("kwnames")
    if name != "to" or not (len(op.operands) == 2 and not a.get("kwnames") or len(op.operands) == 3
                            and a.get("kwnames") == ("copy",) and _constant(op.operands[2]) is True):
        return False
    dtype = op.operands[1]
    if isinstance(dtype.owner, ops.GetAttrOp):
        return dtype.owner.attributes["attr"] == "dtype" and _is_view(dtype.owner.operands[0], write)
    base = write.base.type
    return isinstance(base, TensorType) and base.dtype is not None and _constant(dtype) == f"torch.{base.dtype}"


def _is_view(v: Value, write: Write) -> bool:
    """Whether `v` is the view `write` writes: `base[items]` (the base itself for no items)."""
    if all(item == FULL for item in write.items) and v is write.base:
        return True
    owner = v.owner
    return (isinstance(owner, ops.IndexOp) and owner.operands[0] is write.base
            and owner.attributes["items"] == write.items and _same(owner.operands[1:], write.operands))


def _same(a: list[Value], b: list[Value]) -> bool:
    return len(a) == len(b) and all(x is y or _constant(x) is not ... and _constant(x) == _constant(y)
                                    and x.type == y.type for x, y in zip(a, b))


def _only_use(v: Value) -> bool:
    return len(v.uses) == 1


def _constant_fill(value: Value, write: Write) -> Value | None:
    """The number `c` that functionalization made a tensor of for `base[...] = c`:
    `base.new_full((), c)` (`base[mask] = c`), `torch.full_like(view, c)` of the written view
    (or of a tensor of its dtype: the scatter takes a value of the view's shape)."""
    owner = value.owner
    if not (isinstance(owner, (ops.TensorMethodOp, ops.TorchCallOp)) and _only_use(value)
            and not owner.attributes.get("kwnames")):
        return None
    name, operands = op_name(owner), owner.operands
    if name == "new_full" and isinstance(owner, ops.TensorMethodOp) and len(operands) == 3:
        if operands[0] is not write.base or _constant(operands[1]) != ():
            return None
    elif name == "full_like" and isinstance(owner, ops.TorchCallOp) and len(operands) == 2 and write.scatter:
        like, base = operands[0].type, write.base.type
        if not (_is_view(operands[0], write) or isinstance(like, TensorType) and isinstance(base, TensorType)
                and like.dtype is not None and like.dtype == base.dtype):
            return None
    else:
        return None
    fill = operands[-1]
    return fill if type(_constant(fill)) in (int, float, bool) else None


def _augmented(op: Operation, write: Write, value: Value, aliases: set[Value],
               block: Block) -> tuple[Value, Value] | None:
    """(view, other) when the value is `view <op> other` of the written view, in its dtype and
    shape, with only pure ops between that operator and the write: the write is then
    `view <op>= other` (the operator's reads move to the write, where memory holds the same)."""
    binary = value.owner
    if not (isinstance(binary, ops.BinaryOp) and binary.attributes["op"] in AUGMENTED and _only_use(value)
            and binary.parent is block and len(binary.operands) == 2 and _pure_between(binary, op, block)):
        return None
    view, other = binary.operands
    if not (isinstance(view.owner, ops.IndexOp) and _is_view(view, write) and _only_use(view)) or other in aliases:
        return None
    vt, rt, ot = view.type, value.type, other.type
    if not (isinstance(vt, TensorType) and isinstance(rt, TensorType) and vt.dtype is not None and vt.dtype == rt.dtype
            and vt.shape is not None and None not in vt.shape and rt.shape == vt.shape):
        return None
    return (view, other) if isinstance(ot, TensorType) or immutable(ot) else None


def _erase_dead(values: list[Value]) -> None:
    """Erase the pure ops the rewrite left without uses (the index tuple, the copy of the value,
    the views it read for their shape)."""
    work = [v.owner for v in values if isinstance(v.owner, Operation)]
    while work:
        op = work.pop()
        if op.parent is None or op.regions or not op.has_trait(PURE) or any(r.uses for r in op.results):
            continue
        inputs = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        op.erase()
        work += inputs


__all__ = ["reinplace"]

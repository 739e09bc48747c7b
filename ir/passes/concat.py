"""Concatenation in place: the kernels that compute the parts of a `cat` write them into its
result.

`torch.cat([relu(a), relu(b)], 1)` runs two kernels that write fresh tensors, then `cat` copies
both into a third: every element is written twice and read once more than it needs to be
(squeezenet's Fire modules concatenate their two expand branches: `aten::cat` took 2.9 ms of a
40 ms call at batch 8). Here, when every part of a `cat` is the output of a pointwise kernel
that nothing else reads, the result is allocated first (`x.new_empty(sizes, dtype=)` of a
kernel input: its device) and each kernel writes its part into a view of it (`buf.narrow(dim,
start, length)`), given as a destination operand (KernelOp's `into`). The `cat` is gone; its
uses read the buffer. Two relu kernels and a cat of 8x(64+64)x55x55 NHWC parts took 1.26 ms,
the kernels writing into the result 0.38 ms. In squeezenet those kernels write into memory
that is not in cache (they wrote over their conv's output before), which gives back part of the
gain: 1.8 ms more in the kernels against the 2.9 ms of the copies.

The result has the strides torch's `cat` gives it (Tensor.suggest_memory_format of the parts):
a kernel's output is row-major, and so is the buffer. When every part is a row-major NHWC output
seen as NCHW (`.permute(0, 3, 1, 2)`, what the layout pass makes between convs), torch's result
is channels-last: the buffer is NHWC, filled along the matching dim, and the result is it
permuted the same way. When some part is row-major, so is the result, and an NHWC kernel writes
its part through `narrow(...).permute(0, 2, 3, 1)`. A permuted part whose channel or spatial
sizes are not known (whose memory format depends on them) leaves the `cat` alone.

The buffer is allocated just before the first of the kernels, each of which stays where it
was (it reads its inputs while they are still in cache: in squeezenet, the conv output that it
used to write over), and its view is made just before it. When a size of the buffer is known
only later (read from an input that is computed after the first kernel), the kernels move down
to just before the `cat` instead (they are pure; nothing between may write).

First, the cats of a list that grows (DenseNet's `torch.cat(features, 1)` after each layer
appends its output: each cat copies every part again) become prefixes of one buffer, allocated
at the first cat of the run, into which each part is copied once, where the first cat that lists
it stood. A prefix is not laid out as torch's `cat` result is (its rows are as long as the
whole buffer's), so a run takes only cats whose results are read by kernels, which take any
strides; read as NHWC rows (`.permute(0, 2, 3, 1)`, the layout pass's channels-last), the buffer
is NHWC. DenseNet-121 frozen, A/B in one process, medians: 43.8 against 43.0 ms and 51.0 against
50.5 at batch 1, 278.8 against 276.1 at batch 8. Less than the 62 cats took under the profiler
(5 to 9 ms at batch 1): the kernel after each cat now reads a prefix that is no longer in cache
and writes a tensor of its own, where it wrote over the cat's fresh result before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.core import ops
from ir.core.graph import Block, Operation, Program, Value
from ir.core.types import TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import op_name
from ir.kernel.vocabulary import known_tensor
from ir.passes.canonicalize import writes_in
from ir.passes.emitter import Dtype, Emitter, Facts, Unsupported, bind
from ir.passes.layout import TO_NCHW, TO_NHWC, replace_by_rows
from ir.passes.views import permutation
from ir.torchapi.callinfo import effect_attributes
from ir.torchapi.signatures import resolve_method

CATS = frozenset({"cat", "concat", "concatenate"})


def write_into_cats(program: Program) -> None:
    facts = Facts()
    for func in program.funcs:
        for block in [b for op in func.walk() for r in op.regions for b in r.blocks]:
            for chain in _growing_chains(block, facts):
                _share(chain, facts)
        for op in list(func.walk()):
            if op.parent is not None and op_name(op) in CATS and isinstance(op, ops.TorchCallOp):
                plan = _plan(op, facts)
                if plan is not None:
                    _rewrite(op, plan, facts)


class _Part:
    """One tensor of the list: the kernel output it is (seen through `permute`, when one is)."""

    def __init__(self, kernel: kernel_ops.KernelOp, output: int, permute: Operation | None) -> None:
        self.kernel, self.output, self.permute = kernel, output, permute

    @property
    def value(self) -> Value:
        """The kernel's output (the part in the kernel's iteration order)."""
        return self.kernel.results[self.output]

    @property
    def item(self) -> Value:
        """The tensor of the list."""
        return self.value if self.permute is None else self.permute.result


@dataclass
class _Plan:
    parts: list[_Part]
    along: int  # the dim of the buffer the parts are concatenated along
    channels_last: bool  # the result is channels-last: the buffer is NHWC, the result its permute
    move: bool  # the kernels move down to the cat (a size is known only after the first kernel)
    inputs: list[Value]  # what the buffer's sizes are read from


@dataclass
class _Cat:
    """A `cat` of a list made for it alone, along `dim` (made nonnegative): its tensors."""

    op: Operation
    parts: list[Value]
    dim: int


def _of_list(cat: Operation, facts: Facts) -> _Cat | None:
    """`cat` as a `_Cat`: a cat of a known tensor type, of a list or tuple made in its block for
    it alone, along a constant dim; None for any other."""
    if not (op_name(cat) in CATS and isinstance(cat, ops.TorchCallOp) and len(cat.results) == 1):
        return None
    try:
        call = bind(cat, facts)
    except Unsupported:
        return None
    listed, dim = call.operands.get("tensors"), call.args.get("dim")
    dim_value = dim.value if dim is not None else 0
    result = cat.result.type
    if set(call.args) - {"tensors", "dim"} or listed is None or type(dim_value) is not int \
            or not known_tensor(result) or not result.shape:  # type: ignore[union-attr]
        return None
    owner = listed.owner
    rank = len(result.shape)  # type: ignore[union-attr]
    if not (isinstance(owner, (ops.ListOp, ops.TupleOp)) and owner.parent is cat.parent and len(listed.uses) == 1
            and owner.operands and -rank <= dim_value < rank):
        return None
    return _Cat(cat, list(owner.operands), dim_value % rank)


def _plan(cat: Operation, facts: Facts) -> _Plan | None:
    """How the parts of `cat` are written into its result; None when the `cat` stays."""
    of_list = _of_list(cat, facts)
    if of_list is None or len(of_list.parts) < 2:
        return None
    result = cat.result.type
    rank = len(result.shape)  # type: ignore[union-attr]
    found = [_part(v, cat) for v in of_list.parts]
    parts = [p for p in found if p is not None]
    if len(parts) != len(found):
        return None
    for p in parts:
        t = p.value.type
        if t.dtype != result.dtype or t.device != result.device or len(t.shape) != rank:  # type: ignore[union-attr]
            return None
    layouts = [_layout(p) for p in parts]
    if None in layouts:
        return None
    channels_last = all(layout == "channels-last" for layout in layouts)
    block = cat.parent
    order = {o: i for i, o in enumerate(block.ops)}  # type: ignore[union-attr]
    first = min((p.kernel for p in parts), key=order.__getitem__)
    sizes = [d for p in parts for d in p.value.type.shape if type(d) is not int]  # type: ignore[union-attr]
    early = [v for v in _inputs(parts) if not (isinstance(v.owner, Operation) and v.owner in order
                                                and order[v.owner] > order[first])]
    move = any(size_source(d, early) is None for d in sizes)
    if move:
        inputs = _inputs(parts)
        if not all(_movable(p.kernel, cat, order) for p in parts):
            return None
        if any(size_source(d, inputs) is None for d in sizes):
            return None  # (a size no input has: the launcher broadcasts the inputs' shapes for it)
    return _Plan(parts, TO_NCHW[of_list.dim] if channels_last else of_list.dim, channels_last, move,
                 early if not move else inputs)


def _layout(p: _Part) -> str | None:
    """The memory format torch's `cat` sees in the part (Tensor.suggest_memory_format): a
    kernel's row-major output is "contiguous"; seen through `permute(0, 3, 1, 2)` it is
    "channels-last" when every size but the batch is known and nonzero, unless it is one
    element per image (which torch calls contiguous); None when that depends on sizes."""
    if p.permute is None:
        return "contiguous"
    shape = p.item.type.shape  # type: ignore[union-attr]
    if not all(type(d) is int and d >= 1 for d in shape[1:]):
        return None
    return "channels-last" if shape[1] * shape[2] * shape[3] > 1 else "contiguous"


def _inputs(parts: list[_Part]) -> list[Value]:
    return [v for p in parts for v in p.kernel.operands[:p.kernel.inputs]]


def _part(v: Value, cat: Operation) -> _Part | None:
    """`v` as a kernel output seen directly or through one `permute(0, 3, 1, 2)`, used only by
    the list (and the permute only by it), all in the `cat`'s block; None otherwise."""
    if len(v.uses) != 1:
        return None
    permute = None
    owner = v.owner
    if isinstance(owner, Operation) and op_name(owner) == "permute" and owner.parent is cat.parent:
        if permutation(owner.operands[1:], owner.attributes.get("kwnames", ())) != TO_NCHW:
            return None
        permute, v = owner, owner.operands[0]
        if len(v.uses) != 1:
            return None
        owner = v.owner
    if not (isinstance(owner, kernel_ops.PointwiseKernelOp) and owner.parent is cat.parent
            and not owner.into and not owner.reuse):
        return None
    return _Part(owner, owner.results.index(v), permute)


def _movable(kernel: kernel_ops.KernelOp, cat: Operation, order: dict[Operation, int]) -> bool:
    """Whether the kernel can run just before the `cat` instead: nothing between may write, and
    its outputs are read only by the `cat`'s list (or a permute into it) or after the `cat`."""
    block = cat.parent
    assert isinstance(block, Block)
    if any(writes_in(o) for o in block.ops[order[kernel] + 1:order[cat]]):
        return False
    listed = cat.operands[0].owner
    for r in kernel.results:
        for use in r.uses:
            top: Operation | None = use.op
            while top is not None and top.parent is not block:
                top = top.parent.parent if top.parent is not None else None  # type: ignore[assignment]
            if top is None:
                return False
            if top is listed or (op_name(top) == "permute" and all(u.op is listed for u in top.results[0].uses)):
                continue  # (the uses the rewrite drops)
            if order[top] <= order[cat]:
                return False
    return True


def _plus(e: Emitter, a: object, b: object) -> object:
    """a + b for sizes that are ints or int values."""
    if a == 0 or b == 0:
        return b if a == 0 else a
    if isinstance(a, Value) or isinstance(b, Value):
        return e.binary("+", a, b)
    return a + b  # type: ignore[operator]


def _rewrite(cat: Operation, plan: _Plan, facts: Facts) -> None:
    block = cat.parent
    assert isinstance(block, Block)
    order = {o: i for i, o in enumerate(block.ops)}
    kernels = sorted({p.kernel for p in plan.parts}, key=order.__getitem__)
    for k in kernels if plan.move else []:
        block.ops.remove(k)
        k.parent = None
        block.insert_before(cat, k)
    # the parts in the buffer's dim order: the kernels' outputs for an NHWC buffer, the list's
    # tensors (NCHW) for a row-major one
    shapes = [(p.value if plan.channels_last else p.item).type.shape for p in plan.parts]  # type: ignore[union-attr]
    inputs = plan.inputs
    e = Emitter(kernels[0], facts)
    sizes = []
    for d in range(len(shapes[0])):
        total: object = 0
        for dim in ([s[d] for s in shapes] if d == plan.along else [shapes[0][d]]):
            total = _plus(e, total, size_value(e, dim, inputs))
        sizes.append(total)
    out_type = cat.result.type
    assert isinstance(out_type, TensorType)
    shape = e.shape(sizes)
    buf = e.method("new_empty", inputs[0], shape, dtype=Dtype(out_type.dtype))  # type: ignore[arg-type]
    buf.type = TensorType(out_type.dtype, tuple(out_type.shape[i] for i in TO_NHWC) if plan.channels_last  # type: ignore[index]
                          else out_type.shape, out_type.device)
    buf.name = cat.result.name or "cat"
    starts, lengths = [], []
    for s in shapes:
        lengths.append(size_value(e, s[plan.along], inputs))
        starts.append(_plus(e, starts[-1], lengths[-2]) if starts else 0)
    e.commit()
    for p, start, length, s in zip(plan.parts, starts, lengths, shapes):  # (each view just before its kernel)
        e = Emitter(p.kernel, facts)
        view = e.method("narrow", buf, plan.along, start, length)
        view.type = TensorType(out_type.dtype, s, out_type.device)
        if p.permute is not None and not plan.channels_last:  # (an NHWC kernel into NCHW rows)
            view = e.method("permute", view, TO_NHWC)
            view.type = p.value.type
        e.commit()
        p.kernel._add_operand(view)
        p.kernel.into = (*p.kernel.into, p.output)
    if plan.channels_last:
        replace_by_rows(cat.result, buf, cat, facts)
    else:
        cat.result.replace_all_uses_with(buf)
    listed = cat.operands[0].owner
    cat.erase()
    listed.erase()  # type: ignore[union-attr]
    for p in plan.parts:
        if p.permute is not None:
            p.permute.erase()


def _growing_cats(block: Block, facts: Facts) -> list[_Cat]:
    """The cats of `block` whose every part has a known size along the dim, and whose results
    are read only by kernels (directly, or as NHWC rows through `.permute(0, 2, 3, 1)`), which
    take any strides: a prefix of a shared buffer is not laid out as torch's `cat` result is."""
    found = []
    for op in block.ops:
        cat = _of_list(op, facts)
        if cat is not None and all(_fits(v, cat.op.result.type, cat.dim) for v in cat.parts) \
                and _strided_read(op.result):  # type: ignore[arg-type]
            found.append(cat)
    return found


def _fits(part: Value, result: TensorType, dim: int) -> bool:
    t = part.type
    return (isinstance(t, TensorType) and t.shape is not None and len(t.shape) == len(result.shape)  # type: ignore[arg-type]
            and t.dtype == result.dtype and t.device == result.device and type(t.shape[dim]) is int)


def _strided_read(v: Value) -> bool:
    """Whether every use of `v` is a kernel's input, directly or through permutes to NHWC."""
    for use in v.uses:
        user = use.op
        if op_name(user) == "permute" and len(user.results) == 1 and \
                permutation(user.operands[1:], user.attributes.get("kwnames", ())) == TO_NHWC:
            if not _strided_read(user.result):
                return False
        elif not (isinstance(user, kernel_ops.KernelOp) and use.index < user.inputs):
            return False
    return True


def _growing_chains(block: Block, facts: Facts) -> list[list[_Cat]]:
    """Runs of cats of one block, each of a list that extends the list of the one before (the
    same tensors first, then more): DenseNet's `torch.cat(features, 1)` as `features` grows by
    one layer's output at a time. Only runs of two or more."""
    chains: list[list[_Cat]] = []
    for cat in _growing_cats(block, facts):
        for chain in chains:
            last = chain[-1]
            if last.dim == cat.dim and len(last.parts) < len(cat.parts) and \
                    all(a is b for a, b in zip(last.parts, cat.parts)):
                chain.append(cat)
                break
        else:
            chains.append([cat])
    return [c for c in chains if len(c) >= 2
            and all(size_source(d, c[0].parts[:1]) is not None for d in c[-1].op.result.type.shape  # type: ignore[union-attr]
                    if type(d) is not int)]


def _share(chain: list[_Cat], facts: Facts) -> None:
    """The cats of `chain` as prefixes of one buffer (allocated at the first), which each part
    is copied into once, where the first cat that lists it stands: every later cat of the run
    copied all the parts before it again. Later copies write past every earlier prefix, which
    stays as it was. When the results are read as NHWC rows (the layout pass's channels-last),
    the buffer is NHWC. The buffer is named for the list in the source (`features`)."""
    first, last = chain[0], chain[-1]
    out_type = last.op.result.type
    assert isinstance(out_type, TensorType) and out_type.shape is not None
    dim, rank = first.dim, len(out_type.shape)
    nhwc = rank == 4 and dim == 1 and all(op_name(u.op) == "permute" for c in chain for u in c.op.result.uses)
    along = 3 if nhwc else dim
    lengths = [v.type.shape[dim] for v in last.parts]  # type: ignore[union-attr]
    starts = [sum(lengths[:i]) for i in range(len(lengths) + 1)]
    e = Emitter(first.op, facts)
    sizes = [starts[-1] if d == dim else size_value(e, out_type.shape[d], first.parts[:1]) for d in range(rank)]
    if nhwc:
        sizes = [sizes[i] for i in TO_NHWC]
    buf = e.method("new_empty", first.parts[0], e.shape(sizes), dtype=Dtype(out_type.dtype))  # type: ignore[arg-type]
    buf.type = TensorType(out_type.dtype, tuple(out_type.shape[i] for i in TO_NHWC) if nhwc else out_type.shape,
                          out_type.device)
    buf.name = next((v.name for c in chain for v in (c.op.operands[0], c.op.result) if v.name), "cat")
    e.commit()
    copied = 0
    for cat in chain:
        e = Emitter(cat.op, facts)
        views: dict[tuple[int, int], Value] = {}  # (start, length) -> its narrow, made here
        for j in range(copied, len(cat.parts)):
            into = views[starts[j], lengths[j]] = _narrow(e, buf, along, starts[j], lengths[j])
            if nhwc:
                into = e.method("permute", into, TO_NCHW)
                into.type = cat.parts[j].type
            info = resolve_method("copy_", into.type, [cat.parts[j].type], {})
            e._add(ops.TensorMethodOp([into, cat.parts[j]], [into.type], {"method": "copy_", **effect_attributes(info)}))
        copied = len(cat.parts)
        prefix = buf if cat is last else views.get((0, starts[copied])) or _narrow(e, buf, along, 0, starts[copied])
        if prefix is not buf:
            prefix.name = cat.op.result.name  # (the cat's name in the source)
        e.commit()
        if nhwc:
            replace_by_rows(cat.op.result, prefix, cat.op, facts)
        else:
            cat.op.result.replace_all_uses_with(prefix)
        listed = cat.op.operands[0].owner
        cat.op.erase()
        listed.erase()  # type: ignore[union-attr]


def _narrow(e: Emitter, buf: Value, dim: int, start: int, length: int) -> Value:
    """`buf.narrow(dim, start, length)`."""
    t = buf.type
    assert isinstance(t, TensorType) and t.shape is not None
    view = e.method("narrow", buf, dim, start, length)
    view.type = TensorType(t.dtype, tuple(length if d == dim else n for d, n in enumerate(t.shape)), t.device)
    return view


def size_source(dim: object, inputs: list[Value]) -> tuple[Value, int] | None:
    """An input and the dim of it that has the size `dim`."""
    for v in inputs:
        t = v.type
        if isinstance(t, TensorType) and t.shape is not None and dim in t.shape:
            return v, list(t.shape).index(dim)
    return None


def size_value(e: Emitter, dim: object, inputs: list[Value]) -> object:
    """A size as an int, or as `x.size(d)` of an input that has it."""
    if type(dim) is int:
        return dim
    found = size_source(dim, inputs)
    assert found is not None  # (_plan checked)
    return e.size(*found)


__all__ = ["write_into_cats", "size_source", "size_value"]

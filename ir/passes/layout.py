"""Channels-last layout for 2-d convolutions on the CPU.

torch's CPU convolutions (oneDNN) run faster, often several times, on channels-last (NHWC)
tensors than on row-major NCHW ones, and a conv's output is channels-last when its input is
(benchmarks/RESULTS.md, the zoo: mobilenet_v2 at batch 8 went from 1.19x to 2.41x eager with
this pass). So the input of each conv that runs faster that way (`prefers_channels_last`: which
conv runs how is decided in ir/passes/conv_choices.py) is made channels-last
(`x.contiguous(memory_format=torch.channels_last)`, which returns `x` itself when it already is), and the pointwise ops between
convs (batch norm, activations, residual adds) compute in NHWC order: `f(a, b)` on NCHW values
becomes `f(a.permute(0, 2, 3, 1), b')` permuted back with `.permute(0, 3, 1, 2)`, where `b'` is
`b` broadcast the same way (a per-channel `[C, 1, 1]` becomes `[C]`). The permutes of a
channels-last tensor are row-major, so the fused kernels that `fuse` makes of those ops read and
write memory in order, and write over the conv's output (`reuse` looks through the permute).
A 1x1 conv of one image whose input is (or is made) channels-last becomes `linear` of the NHWC
rows instead (`as_linear_call`): the same product over channels, and its row-major result is the
conv's output in NHWC order; in a frozen program one of a batch not known to be one image runs
as `_prepacked.conv2d`, whose ways the runtime measures (`measured_1x1`). A 1x1 adaptive average pool of a value with NHWC rows is their
mean over H and W (`global_pool`), whose `[N, 1, 1, C]` result a squeeze-and-excitation block's
layers read as rows too. A 4-d result of
`linear` or `matmul` (row-major) permuted to NCHW is channels-last as well, so the pointwise ops
after convnext's linear layers over channels compute in NHWC order too.
ShuffleNet's channel shuffle (`x.view(N, g, C // g, H, W).transpose(1, 2).contiguous()` viewed
back) of a channels-last `x` is computed in NHWC order as well (`channel_shuffle`,
`_Rewriter.shuffle`): the `cat` of its `g` parts before it becomes a stack of their NHWC rows
along a last dim, a channels-last result, and a `chunk` of that result along channels is a
stack of slices of the parts, each piece dense. In row-major order each unit copied the cat,
the shuffle, and half of it again to channels-last for the next conv. The stacks are
`_stacking.stack_last(parts)` (runtime/stacking.py), `torch.stack(parts, 4)` written by one C++
loop: torch's stack along a last dim copies element by element (shufflenet_v2 at batch 1, A/B
in one process: 6.11 / 5.94, 6.21 / 6.04 and 6.32 / 6.27 ms). A shuffle of a channels-last
tensor that is not such a cat is its NHWC rows seen as `[g, C // g]`, transposed and made
contiguous; a shuffle followed by code that could see strides stays row-major.

In a frozen program a large float32 conv that is not depthwise, whose weight is made once
(`packable`, `made_once`), runs channels-last at any size as `_prepacked.conv2d(...)`: oneDNN's
conv with its weight reordered once, torch's conv, or for a 1x1 conv a `linear` of its NHWC rows,
whichever runtime/choices.py measures fastest on the first call (the `measured_1x1` convs above
too, which ir/passes/plan.py may give a kept buffer to write into). Another conv of a
channels-last input there reads its weight as `_prepacked.channels_last(w)`, made once
(`weight_channels_last`).

Values do not change, only strides. Code that sees strides could tell, so the pass follows every
value whose layout it may change (`_follow`: the convs' results and what is computed from them)
and rewrites only a function where each use of one is
- a pure op that reads values only: its result may then change layout too (unless it is a new
  row-major tensor, as a matmul's is);
- `view` (strides must allow it): it becomes `reshape` (the same view when the strides allow it,
  else a copy, which no one can tell from a view since every use is pure);
- the return: the value is made row-major first, as eager would return it.
A `contiguous()` result is row-major as eager's, except a channel shuffle's, followed too when
nothing after it can tell (else the function is followed again with it row-major).
Anything else (a write, a Python call, a submodule, a branch or loop using such a value, an op
that reads strides) leaves the function as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.core import helpers, ops
from ir.core.graph import PURE, TERMINATOR, Block, Operation, Program, Value
from ir.core.rewrite import clone_op
from ir.core.types import MEMORY_FORMAT, TensorType
from ir.kernel.primitives import Primitive, classify, op_name
from ir.passes.aliasing import holds_tensors
from ir.passes.conv_choices import (
    CHANNELS_LAST_WEIGHT,
    PACKED_CONV,
    as_linear_call,
    conv2d_on_cpu,
    made_once,
    measured_1x1,
    packable,
    pair,
    prefers_channels_last,
    will_pack,
)
from ir.passes.emitter import Call, Emitter, Facts, Unsupported, bind
from ir.passes.views import permutation

STACK_LAST = helpers.STACK_LAST.name
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# Ops whose result depends on strides, not only on values.
READS_STRIDES = frozenset({"stride", "is_contiguous", "as_strided", "data_ptr", "storage_offset",
                           "untyped_storage", "numpy", "unflatten", "view_as"})
# Ops whose result is a new row-major tensor whatever the layout of their operands.
ROW_MAJOR = frozenset({"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "mv", "dot"})
# Ops that keep a channels-last input channels-last (torch's CPU kernels for them do).
KEEPS_LAYOUT = frozenset({"max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"})
# (and `cat`, of channels-last tensors only: `all_channels_last`)


def channels_last(program: Program) -> None:
    for func in program.funcs:
        block = func.regions[0].block
        changed: set[Value] = set()
        # A lone conv pays the copy of its input to channels-last, and of a returned result back,
        # for itself alone: benchmarks.micro's depthwise_block ran 0.60x to 0.68x eager at batch
        # 1 and 8 that way. A chain of convs pays them once.
        wanted = sum(conv2d_on_cpu(op) and (prefers_channels_last(op) or (program.frozen and packable(op)))
                     for op in func.walk())
        if wanted < 2:
            continue
        # A channel shuffle's copy may change layout too (`_follow`), unless something after it
        # could tell: then the function is followed again with the shuffle's copy row-major.
        if _follow(block.ops, changed, shuffles=True) or (changed.clear() or _follow(block.ops, changed)):
            _Rewriter(changed, program.frozen).run(block)


def stack_rows(e: Emitter, rows: Value) -> Value:
    """`torch.stack(rows, 4)` of a tuple of NHWC rows of one shape, as `_stacking.stack_last(rows)`."""
    parts = rows.owner.operands  # type: ignore[union-attr]
    t = parts[0].type
    assert isinstance(t, TensorType) and t.shape is not None
    return e.builtin(STACK_LAST, TensorType(t.dtype, (*t.shape, len(parts)), t.device), rows)


def read_rows_directly(nchw: Value, rows: Value) -> None:
    """Uses of `nchw` (an NCHW view of the NHWC tensor `rows`) that permute it back to NHWC rows
    (`.permute(0, 2, 3, 1)`, for a conv run as a `linear`) read `rows` itself."""
    for use in list(nchw.uses):
        user = use.op
        if op_name(user) == "permute" and use.index == 0 and \
                permutation(user.operands[1:], user.attributes.get("kwnames", ())) == TO_NHWC:
            user.result.replace_all_uses_with(rows)
            user.erase()


def replace_by_rows(nchw: Value, rows: Value, anchor: Operation, facts: Facts) -> None:
    """Every use of `nchw` reads `rows.permute(0, 3, 1, 2)` instead (made before `anchor`, of
    `nchw`'s type), and a use that permutes it back to NHWC reads `rows` itself: what a pass that
    computes an NCHW result as NHWC rows (a pool, a cat's buffer) leaves its users."""
    e = Emitter(anchor, facts)
    view = e.method("permute", rows, TO_NCHW)
    view.type = nchw.type
    e.commit()
    read_rows_directly(nchw, rows)
    nchw.replace_all_uses_with(view)


def _follow(body: list[Operation], changed: set[Value], shuffles: bool = False) -> bool:
    """Add to `changed` what the ops of `body` compute from its values; False at a use that
    could tell a layout from another. The branches of an if are followed (its results are
    what they yield); a loop that reads such a value is not. A `contiguous()` result is
    row-major as in eager, except (with `shuffles`) the copy of a channel shuffle
    (`channel_shuffle`), which the rewriter makes channels-last."""
    for op in body:
        if conv2d_on_cpu(op):
            changed.add(op.result)
            continue
        if isinstance(op, ops.IfOp):
            if not all(_follow(region.block.ops, changed, shuffles) for region in op.regions):
                return False
            for region in op.regions:
                changed.update(r for r, v in zip(op.results, region.block.terminator.operands)  # type: ignore[union-attr]
                               if v in changed)
            continue
        nested = [inner for region in op.regions for b in region.blocks for o in b.ops for inner in o.walk()]
        if any(v in changed for inner in nested for v in inner.operands):
            return False  # (a loop sees one)
        if not any(v in changed for v in op.operands):
            continue
        if isinstance(op, ops.YieldOp) and isinstance(op.parent_op(), ops.IfOp):
            continue
        if op.has_trait(TERMINATOR):
            if not isinstance(op, ops.ReturnOp) or not all(returnable(v, op) for v in op.operands if v in changed):
                return False
            continue
        if isinstance(op, (ops.GuardOp, ops.EntryCheck)):
            continue
        if isinstance(op, (ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.ListInsertOp)):
            listed = op.operands[0]  # (the list now holds such a value: each of its readers must be pure)
            if any(u.op.parent is not op.parent or not (u.op.has_trait(PURE) or isinstance(
                    u.op, (ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.ListInsertOp))) for u in listed.uses):
                return False
            changed.add(listed)
            continue
        if not op.has_trait(PURE) or op.regions or op_name(op) in READS_STRIDES:
            return False
        if op_name(op) == "view" and not _reshapeable(op):
            return False
        if op_name(op) in ROW_MAJOR:  # (its 4-d result permuted to NCHW is channels-last: _Rewriter.block)
            changed.update(r for r in op.results if isinstance(r.type, TensorType) and r.type.shape is not None
                           and len(r.type.shape) == 4)
            continue
        if op_name(op) == "contiguous" and len(op.operands) == 1:
            if shuffles and channel_shuffle(op) is not None:
                changed.update(op.results)
            continue
        changed.update(r for r in op.results if holds_tensors(r.type))
    return True


def returnable(v: Value, ret: Operation) -> bool:
    """A tensor, or a tuple of them built for the return alone (in its block): what it returns
    can be made row-major."""
    if isinstance(v.type, TensorType):
        return True
    return isinstance(v.owner, ops.TupleOp) and len(v.uses) == 1 and v.owner.parent is ret.parent and all(
        isinstance(e.type, TensorType) or not holds_tensors(e.type) for e in v.owner.operands)


def _reshapeable(op: Operation) -> bool:
    """`x.view(sizes)` (not a dtype view), which `reshape` computes alike."""
    return isinstance(op, ops.TensorMethodOp) and not op.attributes.get("kwnames") and all(
        not isinstance(v.type, TensorType) and str(v.type) != "dtype" for v in op.operands[1:])


@dataclass
class Shuffle:
    """`x.view(N, g, C // g, H, W).transpose(1, 2).contiguous().view(N, C, H, W)` (ShuffleNet's
    channel shuffle; `reshape` or `flatten(1, 2)` back too, or a `reshape` of the transposed view
    itself without `contiguous()`): channel `j * g + i` of the result is channel `i * C // g + j`
    of `x`."""

    source: Value  # x, [N, C, H, W]
    split: Operation  # the view to [N, g, C // g, H, W]
    swap: Operation  # the permute (0, 2, 1, 3, 4)
    copy: Operation | None  # contiguous(), when the merge does not copy itself; its shape may be read too
    merge: Operation  # the view, reshape or flatten back to [N, C, H, W]
    groups: int


MERGES = frozenset({"view", "reshape", "flatten"})


def channel_shuffle(op: Operation) -> Shuffle | None:
    """The channel shuffle whose row-major copy `op` makes: its `contiguous()`, or the `reshape`
    (`flatten`) of the transposed view that copies it (a `view` of it fails in eager); each step
    the only use of the one before. None when `op` is not one."""
    if op_name(op) == "contiguous":
        others = [u.op for u in op.result.uses if not _reads_shape(u.op, 5)]  # (`flatten` reads its size)
        if len(op.operands) != 1 or len(others) != 1:
            return None
        copy, merge = op, others[0]
    elif op_name(op) in ("reshape", "flatten"):
        copy, merge = None, op
    else:
        return None
    if not (isinstance(merge, ops.TensorMethodOp) and op_name(merge) in MERGES and _reshapeable(merge)
            and (copy is None or merge.operands[0] is copy.result)):
        return None
    swap = (copy or merge).operands[0].owner
    if not (isinstance(swap, ops.TensorMethodOp) and op_name(swap) == "permute" and len(swap.result.uses) == 1
            and permutation(swap.operands[1:], swap.attributes.get("kwnames", ())) == (0, 2, 1, 3, 4)):
        return None
    split = swap.operands[0].owner
    if not (isinstance(split, ops.TensorMethodOp) and op_name(split) in ("view", "reshape") and _reshapeable(split)
            and len(split.result.uses) == 1):
        return None
    source = split.operands[0]
    x, parts, back = source.type, split.result.type, merge.result.type
    if not all(isinstance(t, TensorType) and t.shape is not None for t in (x, parts, back)):
        return None
    (n, c, h, w), cut = x.shape, parts.shape  # type: ignore[union-attr, misc]
    if len(x.shape) != 4 or len(cut) != 5 or back.shape != x.shape:  # type: ignore[union-attr, arg-type]
        return None
    g, each = cut[1], cut[2]
    if not (type(c) is int and type(g) is int and type(each) is int and g * each == c
            and (cut[0], cut[3], cut[4]) == (n, h, w)):
        return None
    return Shuffle(source, split, swap, copy, merge, g)


def _reads_shape(op: Operation, rank: int) -> bool:
    """`x.size()` only unpacked, `x.size(d)` for a constant `d` in range, `x.dim()` of an `x` of
    rank `rank`: what any tensor of x's shape answers alike, and ints from the type can stand
    for (`read_shape`; a `torch.Size` that is kept, compared or returned could not be a list)."""
    if not (isinstance(op, ops.TensorMethodOp) and op_name(op) in ("size", "dim") and not op.attributes.get("kwnames")):
        return False
    if len(op.operands) == 1:
        return op_name(op) == "dim" or all(isinstance(u.op, ops.UnpackOp) for u in op.result.uses)
    dim = op.operands[1].owner
    return len(op.operands) == 2 and isinstance(dim, ops.ConstantOp) and type(dim.value) is int \
        and -rank <= dim.value < rank


class _Rewriter:
    def __init__(self, changed: set[Value], frozen: bool = False) -> None:
        self.changed = changed  # values whose layout may change (_may_change)
        self.frozen = frozen  # Program.frozen: large conv weights may be packed once
        self.facts = Facts()
        self.nhwc: dict[Value, Value] = {}  # a value -> the same elements in NHWC order
        self.channels_last: set[Value] = set()  # values known to be channels-last
        # parts of a channels-last tensor split along its channels (`chunk`, `split`): NCHW
        # views whose channels are adjacent in memory, not dense
        self.channel_parts: set[Value] = set()
        # a shuffle's stacked result -> the NHWC parts it stacks, and the ops that made it of them
        self.stacked: dict[Value, tuple[list[Value], list[Operation]]] = {}
        self.row_major: set[Value] = set()  # 4-d results of matmuls and linears (ROW_MAJOR)
        self.unused: list[Operation] = []  # permutes back to NCHW and reshapes, erased when unused

    def run(self, block: Block) -> None:
        self.block(block)
        for op in reversed(self.unused):
            if op.parent is not None and not op.result.uses:
                constants = [v.owner for v in op.operands if isinstance(v.owner, ops.ConstantOp)]
                op.erase()
                for const in constants:
                    if const.parent is not None and not const.result.uses:
                        const.erase()

    def block(self, block: Block) -> None:
        for op in list(block.ops):
            if op.parent is None:  # (erased with a channel shuffle)
                continue
            if conv2d_on_cpu(op):
                self.conv(op)
            elif isinstance(op, ops.IfOp):
                for region in op.regions:
                    outer = dict(self.nhwc)  # (what a branch permutes is not seen after it)
                    self.block(region.block)
                    self.nhwc = outer
            elif isinstance(op, ops.ReturnOp):
                self.row_major_results(op)
            elif isinstance(op, ops.UnpackOp):
                self.split_channels(op)
            elif op_name(op) in ("contiguous", "reshape", "flatten") and op.result in self.changed \
                    and (shuffle := channel_shuffle(op)) is not None:
                self.shuffle(shuffle)
            elif op_name(op) == "view" and op.operands[0] in self.changed:
                op.attributes["method"] = "reshape"
                op.attributes["aten"] = "aten::reshape"
            elif self.pointwise(op):
                self.to_nhwc(op)
            elif op_name(op) == "adaptive_avg_pool2d" and self.global_pool(op):
                pass
            elif op_name(op) in KEEPS_LAYOUT and op.operands[0] in self.channels_last:
                self.channels_last.update(op.results)
            elif op_name(op) == "cat" and self.all_channels_last(op.operands[0]):
                self.channels_last.update(op.results)
            elif op_name(op) in ROW_MAJOR and len(op.results) == 1 and op.result in self.changed:
                self.row_major.add(op.result)
            elif self.keeps_row_major(op):  # (the bias add after a linear, until fuse puts it back)
                self.row_major.add(op.result)
            elif op_name(op) == "permute" and permutation(op.operands[1:], op.attributes.get("kwnames", ())) == TO_NCHW \
                    and op.operands[0] in self.row_major:
                # a row-major NHWC tensor seen as NCHW (convnext's block: linear layers over the
                # channels, then `.permute(0, 3, 1, 2)`): channels-last, and the pointwise ops on it
                # compute in NHWC order like those after a conv
                self.channels_last.add(op.result)
                self.nhwc[op.result] = op.operands[0]
                self.unused.append(op)

    def emit(self, anchor: Operation) -> Emitter:
        return Emitter(anchor, self.facts)

    def conv(self, op: Operation) -> None:
        x = op.operands[0]
        packed = self.frozen and (will_pack(op, self.facts) or measured_1x1(op, self.facts))
        call = None if packed else as_linear_call(op, self.facts)
        if call is not None and (prefers_channels_last(op) or x in self.channels_last or x in self.channel_parts):
            self.as_linear(call)
            return
        if not packed and not prefers_channels_last(op):
            if x in self.changed:  # (torch would follow its input's layout)
                e = self.emit(op)
                op.set_operand(0, e.method("contiguous", x))
                e.commit()
            return
        if x not in self.channels_last:
            e = self.emit(op)
            fmt = e._add(ops.ConstantOp([], [MEMORY_FORMAT], {"value": "torch.channels_last"}))
            op.set_operand(0, e.method("contiguous", x, memory_format=fmt))
            e.commit()
        if packed:
            self.pack(op)
        else:
            self.channels_last.add(op.result)
            self.weight_channels_last(op)

    def weight_channels_last(self, conv: Operation) -> None:
        """In a frozen program, a conv of a channels-last input reads its weight channels-last,
        made once (`_prepacked.channels_last`): torch's CPU conv copies a weight of another layout
        on every call. A weight of one input channel per group or of a 1x1 kernel is channels-last
        as it is."""
        w = conv.operands[1]
        t = w.type
        if not (self.frozen and isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 4
                and t.shape[1] != 1 and tuple(t.shape[2:]) != (1, 1) and made_once(w)):
            return
        e = self.emit(conv)
        made = e.builtin(CHANNELS_LAST_WEIGHT, t, w)
        e.commit()
        conv.set_operand(1, made)

    def pack(self, conv: Operation) -> None:
        """`F.conv2d(...)` as `_prepacked.conv2d(x, w, b, stride, padding, dilation, groups)`: the
        same conv, its weight in oneDNN's layout made once (runtime/prepacked.py)."""
        c = bind(conv, self.facts)
        e = self.emit(conv)
        bias = c.optional_tensor("bias")
        args = [c.tensor(), c.tensor("weight"), e.value(None) if bias is None else bias,
                *(e.value(pair(c.const(n))) for n in ("stride", "padding", "dilation")), e.value(c.const("groups"))]
        y = e.builtin(PACKED_CONV, conv.result.type, *args)
        y.name = conv.result.name
        e.commit()
        conv.result.replace_all_uses_with(y)
        conv.erase()
        self.channels_last.add(y)
        self.changed.add(y)

    def as_linear(self, call: Call) -> None:
        """`conv2d(x, w, b)` of a 1x1 kernel as `linear(x in NHWC order, w as [C_out, C_in], b)`,
        permuted back to NCHW: the product over channels that the conv computes, whose row-major
        result is the conv's output in channels-last order."""
        conv, x, w = call.op, call.tensor(), call.tensor("weight")
        bias = call.optional_tensor("bias")
        c_out, c_in = w.type.shape[0], w.type.shape[1]  # type: ignore[union-attr]
        e = self.emit(conv)
        xh = self.nhwc.get(x)
        if xh is None:
            if x not in self.channels_last and x not in self.channel_parts:  # (a part's rows are strided)
                fmt = e._add(ops.ConstantOp([], [MEMORY_FORMAT], {"value": "torch.channels_last"}))
                x = e.method("contiguous", x, memory_format=fmt)
            xh = e.method("permute", x, TO_NHWC)
        weight = e.method("reshape", w, (c_out, c_in))
        yh = e.call("torch.nn.functional.linear", xh, weight)
        if bias is not None:  # (as decompose splits linear's bias: it joins the kernel after, or goes back in)
            yh = e.binary("+", yh, bias)
        self.result_as_rows(e, conv, yh)

    def result_as_rows(self, e: Emitter, op: Operation, yh: Value) -> None:
        """`op`'s result replaced by the NHWC rows `yh` seen as NCHW (`yh.permute(0, 3, 1, 2)`,
        channels-last), whose NHWC form they are; commits `e` and erases `op`."""
        y = e.method("permute", yh, TO_NCHW)
        y.name = op.result.name
        e.commit()
        op.result.replace_all_uses_with(y)
        op.erase()
        self.nhwc[y] = yh
        self.channels_last.add(y)
        self.changed.add(y)
        self.unused.append(y.owner)  # type: ignore[arg-type]

    def global_pool(self, op: Operation) -> bool:
        """`adaptive_avg_pool2d(x, 1)` of a value with NHWC rows as the mean of the rows over H and W
        (torch computes a 1x1 output as that mean): the `[N, 1, 1, C]` mean is the NHWC form of
        the pooled value, which a squeeze-and-excitation block's 1x1 convs read as `linear` rows, and
        its pointwise ops in NHWC order, without a permute each way."""
        try:
            c = bind(op, self.facts)
            x, size = c.tensor(), c.const("output_size")
        except Unsupported:
            return False
        xh = self.nhwc.get(x)
        if xh is None or pair(size) != (1, 1) or len(op.results) != 1:
            return False
        e = self.emit(op)
        self.result_as_rows(e, op, e.call("torch.mean", xh, (1, 2), keepdim=True))
        return True

    def split_channels(self, unpack: Operation) -> None:
        """`a, b = x.chunk(2, dim=1)` (or `split`) of a channels-last `x`: the parts are views
        whose channels are adjacent in memory (`channel_parts`), in NHWC order as they are."""
        src = unpack.operands[0].owner
        if not (isinstance(src, (ops.TensorMethodOp, ops.TorchCallOp)) and op_name(src) in ("chunk", "split")):
            return
        try:
            call = bind(src, self.facts)
            x = call.tensor()
        except Unsupported:
            return
        if call.const("dim") not in (1, -3) or not self.has_nhwc_form(x):
            return
        if not self.split_shuffle(x, src, unpack):
            self.channel_parts.update(r for r in unpack.results if isinstance(r.type, TensorType)
                                      and r.type.shape is not None and len(r.type.shape) == 4)

    def split_shuffle(self, x: Value, split: Operation, unpack: Operation) -> bool:
        """`a, b = shuffled.chunk(2, dim=1)` of a shuffle of `g` stacked parts (`shuffle`), read by
        nothing else: each piece is itself a stack of the same slice of every part (channel `j *
        g + i` of the shuffle is channel `j` of part `i`, so a piece of `k * g` channels from `o *
        g` on is `k` channels from `o` of each part, interleaved). The pieces are then dense
        channels-last tensors, where slices of the whole were strided (the next conv copied its
        input to channels-last). False when the pieces do not split the parts evenly."""
        parts, made = self.stacked.get(x, (None, []))
        pieces = [r.type.shape[1] if isinstance(r.type, TensorType) and r.type.shape is not None else None
                  for r in unpack.results]
        if parts is None or len(x.uses) != 1 or len(split.result.uses) != 1 or not all(
                type(c) is int and c % len(parts) == 0 for c in pieces) or sum(pieces) != x.type.shape[1]:  # type: ignore[arg-type, union-attr]
            return False
        e = self.emit(unpack)
        start = 0
        for r, c in zip(list(unpack.results), pieces):
            each = c // len(parts)  # type: ignore[operator]
            rows = stack_rows(e, e.tuple(*(e.method("narrow", p, 3, start, each) for p in parts)))
            flat = e.method("flatten", rows, 3)
            y = e.method("permute", flat, TO_NCHW)
            y.name = flat.name = r.name  # (the piece's rows keep its name where they are all that is used)
            r.replace_all_uses_with(y)
            self.nhwc[y] = flat
            self.channels_last.add(y)
            self.changed.add(y)
            self.unused.append(y.owner)  # type: ignore[arg-type]
            start += each
        e.commit()
        unpack.erase()
        split.erase()
        self.unused.extend(made)
        return True

    def has_nhwc_form(self, v: Value) -> bool:
        """Whether `operand` reads `v` in NHWC order without a copy (a view of it, or its rows)."""
        return v in self.nhwc or v in self.channels_last or v in self.channel_parts

    def shuffle(self, shuffle: Shuffle) -> None:
        """A channel shuffle of a channels-last tensor computed in NHWC order: the result's
        channel `j * g + i` is the source's `i * C // g + j`, so in NHWC rows it is the source's
        rows seen as `[g, C // g]` transposed to `[C // g, g]`, a channels-last result. When the
        source is a `cat` of `g` parts of `C // g` channels (ShuffleNet's units), that is
        `torch.stack` of the parts' NHWC rows along a last dim: each element is copied once,
        where the row-major shuffle copied the cat, the shuffle, and the next conv's input to
        channels-last."""
        parts = self.cat_parts(shuffle)
        if parts is None and not self.has_nhwc_form(shuffle.source):
            return
        # (a cat's parts are stacked where it was: its size reads between then read the stack)
        e = self.emit(shuffle.copy or shuffle.merge if parts is None else shuffle.source.owner)  # type: ignore[arg-type]
        if parts is not None:
            stacked = [self.operand(e, v) for v in parts]
            rows_of_parts = e.tuple(*stacked)
            rows = stack_rows(e, rows_of_parts)
        else:
            xh = self.operand(e, shuffle.source)
            n, h, w, c = (e.size(xh, d) for d in range(4))
            cut = e.method("reshape", xh, n, h, w, shuffle.groups, c // shuffle.groups)  # type: ignore[operator]
            rows = e.method("contiguous", e.method("permute", cut, (0, 1, 2, 4, 3)))
        flat = e.method("flatten", rows, 3)
        y = e.method("permute", flat, TO_NCHW)
        e.commit()
        merged = shuffle.merge.result
        y.name = flat.name = merged.name
        merged.replace_all_uses_with(y)
        like = shuffle.source if parts is None else parts[0]  # (N, H and W as the source's)
        if shuffle.copy is not None:
            for use in list(shuffle.copy.result.uses):
                if use.op is not shuffle.merge:
                    self.read_shape(use.op, like, {0: 0, 3: 2, 4: 3})
        for op in (shuffle.merge, shuffle.copy, shuffle.swap, shuffle.split):
            if op is not None:
                op.erase()
        source = shuffle.source.owner
        if parts is not None:
            for use in list(shuffle.source.uses):  # (`_reads_shape`: read from a part instead)
                self.read_shape(use.op, parts[0], {0: 0, 2: 2, 3: 3})
        if parts is not None and isinstance(source, Operation) and not source.result.uses:
            listed = source.operands[0].owner
            source.erase()
            if isinstance(listed, Operation) and not listed.result.uses:
                listed.erase()
        self.nhwc[y] = flat
        self.channels_last.add(y)
        self.changed.add(y)
        self.unused.append(y.owner)  # type: ignore[arg-type]
        if parts is not None:
            made = [v.owner for v in (rows_of_parts, rows, flat, y)]  # (erased when a split reads the parts instead)
            self.stacked[y] = (stacked, made)  # type: ignore[assignment]

    def read_shape(self, op: Operation, like: Value, dims: dict[int, int]) -> None:
        """`op` (`_reads_shape` of a tensor about to be erased) answered from its type: an int
        where the type knows the size, else `like.size(dims[d])`."""
        shape = op.operands[0].type.shape  # type: ignore[union-attr]
        e = self.emit(op)

        def size(d: int) -> Value:
            return e.value(shape[d] if type(shape[d]) is int else e.size(like, dims[d]))

        if op_name(op) == "dim":
            value = e.value(len(shape))
        elif len(op.operands) == 1:
            value = e._add(ops.ListOp([size(d) for d in range(len(shape))], [op.result.type]))
        else:
            value = size(op.operands[1].owner.value % len(shape))  # type: ignore[union-attr]
        e.commit()
        op.result.replace_all_uses_with(value)
        op.erase()

    def cat_parts(self, shuffle: Shuffle) -> list[Value] | None:
        """The parts of the shuffle's source when it is a `cat` along channels, read only by the
        shuffle, of `g` parts of `C // g` channels each, every one with an NHWC form."""
        cat = shuffle.source.owner
        if not (isinstance(cat, ops.TorchCallOp) and op_name(cat) in ("cat", "concat", "concatenate")
                and all(u.op is shuffle.split or _reads_shape(u.op, 4) for u in shuffle.source.uses)):
            return None
        try:
            call = bind(cat, self.facts)
        except Unsupported:
            return None
        listed = call.operands.get("tensors")
        if listed is None or set(call.args) - {"tensors", "dim"} or call.const("dim") not in (1, -3):
            return None
        owner = listed.owner
        each = shuffle.source.type.shape[1] // shuffle.groups  # type: ignore[union-attr, operator]
        if not (isinstance(owner, (ops.ListOp, ops.TupleOp)) and len(owner.operands) == shuffle.groups):
            return None
        parts = list(owner.operands)
        if not all(isinstance(v.type, TensorType) and v.type.shape is not None and len(v.type.shape) == 4
                   and v.type.shape[1] == each and self.has_nhwc_form(v) for v in parts):
            return None
        return parts

    def row_major_results(self, ret: Operation) -> None:
        made: dict[Value, Value] = {}  # one copy per value: `return y, y` returns one tensor twice, as eager
        tuples = [v.owner for v in ret.operands if v in self.changed and isinstance(v.owner, ops.TupleOp)]
        tuples.sort(key=ret.parent.ops.index)  # type: ignore[union-attr]  (returnable: in the return's block)
        for op in (*tuples, ret):  # (in program order: a copy made for one is seen by the later ones)
            e = self.emit(op)  # type: ignore[arg-type]
            for i, v in enumerate(list(op.operands)):  # type: ignore[union-attr]
                if v in self.changed and isinstance(v.type, TensorType):
                    if v not in made:
                        made[v] = e.method("contiguous", v)
                    op.set_operand(i, made[v])  # type: ignore[union-attr]
            e.commit()

    def pointwise(self, op: Operation) -> bool:
        """A pointwise op with a 4-d result of which some operand is channels-last."""
        if not op.has_trait(PURE) or op.regions or len(op.results) != 1:
            return False
        prim = classify(op)
        if not (isinstance(prim, Primitive) and prim.kind == "pointwise"):
            return False
        r = op.result.type
        if not (isinstance(r, TensorType) and r.shape is not None and len(r.shape) == 4 and r.device == "cpu"):
            return False
        tensors = [v for v in op.operands if isinstance(v.type, TensorType)]
        if any(v.type.shape is None or len(v.type.shape) > 4 for v in tensors):  # type: ignore[union-attr]
            return False
        return any(v in self.channels_last or v in self.nhwc or v in self.channel_parts for v in tensors)

    def all_channels_last(self, listed: Value) -> bool:
        """A list or tuple built of channels-last tensors: torch's `cat` of them is channels-last
        too (densenet's concatenation of the features of each layer)."""
        owner = listed.owner
        return isinstance(owner, (ops.ListOp, ops.TupleOp)) and bool(owner.operands) and all(
            v in self.channels_last for v in owner.operands)

    def keeps_row_major(self, op: Operation) -> bool:
        """A pointwise op whose operands of its result's shape are row-major 4-d values: its
        result is one too (torch follows their layout; a fused kernel writes row-major)."""
        if not op.has_trait(PURE) or op.regions or len(op.results) != 1 or op.result not in self.changed:
            return False
        prim = classify(op)
        if not (isinstance(prim, Primitive) and prim.kind == "pointwise"):
            return False
        full = [v for v in op.operands if isinstance(v.type, TensorType) and v.type.shape == op.result.type.shape]  # type: ignore[union-attr]
        return bool(full) and all(v in self.row_major for v in full)

    def to_nhwc(self, op: Operation) -> None:
        e = self.emit(op)
        mapping = {v: self.operand(e, v) for v in op.operands if isinstance(v.type, TensorType)}
        e.commit()
        new = clone_op(op, mapping)
        shape = op.result.type.shape  # type: ignore[union-attr]
        new.result.type = TensorType(op.result.type.dtype, tuple(shape[i] for i in TO_NHWC),  # type: ignore[union-attr]
                                     op.result.type.device)  # type: ignore[union-attr]
        op.parent.insert_before(op, new)  # type: ignore[union-attr]
        self.result_as_rows(self.emit(op), op, new.result)

    def operand(self, e: Emitter, v: Value) -> Value:
        """`v` broadcast against an NCHW result, in NHWC order."""
        if v in self.nhwc:
            return self.nhwc[v]
        shape = tuple(v.type.shape)  # type: ignore[union-attr]
        padded = (1,) * (4 - len(shape)) + shape
        permuted = tuple(padded[i] for i in TO_NHWC)
        if len(shape) < 4 and all(type(d) is int for d in shape) and \
                [d for d in padded if d != 1] == [d for d in permuted if d != 1]:
            # the same order: what `v` reshapes, in the trailing dims (`[C]` for a channel's
            # `[C, 1, 1]`: it broadcasts against NHWC as it is)
            source = v
            if isinstance(v.owner, ops.TensorMethodOp) and op_name(v.owner) == "reshape":  # (an argument's owner is its block)
                source = v.owner.operands[0]  # type: ignore[union-attr]
                self.unused.append(v.owner)  # type: ignore[arg-type]
            trailing = permuted[next((i for i, d in enumerate(permuted) if d != 1), 4):]
            out = source if tuple(source.type.shape or ()) == trailing else e.method("reshape", source, trailing)  # type: ignore[union-attr]
        else:
            out = v
            for _ in range(4 - len(shape)):
                out = e.method("unsqueeze", out, 0)
            out = e.method("permute", out, TO_NHWC)
        self.nhwc[v] = out
        return out


__all__ = ["channels_last"]

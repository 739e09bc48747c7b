"""Channels-last convolutions in code autograd records.

Training a conv net on the CPU spends most of its step in oneDNN's convolutions, forward and
backward, and those run faster on channels-last (NHWC) tensors: a training step of torchvision's
mobilenet_v2 at batch 8 took 518 ms with NCHW inputs and 343 ms with the same input made
channels-last (eager, one process, the parameters left NCHW; resnet18 942 / 874 ms). torch's
batch norm, pooling and pointwise ops keep a channels-last input channels-last, forward and
backward, so converting the input of the convs is enough for the whole chain between them.

Code for autograd (ir/passes.AUTOGRAD_PASSES) calls eager's torch ops, unfunctionalized, so
this pass does not move ops to NHWC order as ir/passes/layout.py does for kernels: it only
changes which tensors are channels-last. The input of each conv that runs faster channels-last
(`prefers_channels_last`, the rule of the inference layout) becomes
`x.contiguous(memory_format=torch.channels_last)` where `x` is not already known to be; a conv
that does not prefer it reads a row-major copy of such a value, as eager's would be; a value
returned is made row-major first, as eager returns it; and a random op (dropout), whose draws
follow the memory order of its input, reads a row-major copy, so it draws eager's masks. Autograd
records each copy: the gradient of a `contiguous` is the gradient passed through. Values are
eager's but for the convs' rounding (another summation order in oneDNN).

Strides are invisible to the rest, but only where every use of a value whose layout may change
(`_follow`) is one that computes from its values alone: a torch op that does not read strides, an
in-place op (a write keeps its target's layout), an item of it, a container holding it that such
ops read. An op that may copy or may view (`reshape`, `flatten`, `contiguous()`) would alias in
eager where it copies here: it is allowed only of a value no op after it writes, and a
`view` only where a channels-last tensor gives the same view (a 1x1 spatial tensor, after global
pooling). Anything else (a Python call or submodule, a stride read, a list the function appends
it to, control flow reading it) leaves the function as it is.
"""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import TERMINATOR, Block, Operation, Program, Value
from ir.core.types import MEMORY_FORMAT, TensorType
from ir.kernel.primitives import op_name
from ir.kernel.vocabulary import FUSIBLE
from ir.passes.aliasing import Aliasing, holds_tensors, written_operands
from ir.passes.conv_choices import conv2d_on_cpu, prefers_channels_last
from ir.passes.emitter import Emitter, Facts
from ir.passes.layout import KEEPS_LAYOUT, READS_STRIDES, ROW_MAJOR, returnable

# Ops that read the values of their operands and nothing else about them (a torch op of a name in
# READS_STRIDES aside): their results may change layout with their operands.
VALUE_OPS = (ops.BinaryOp, ops.UnaryOp, ops.CompareOp, ops.InplaceOp, ops.TorchCallOp, ops.TensorMethodOp,
             ops.GetItemOp, ops.IndexOp, ops.IndexPutOp, ops.GetAttrOp, ops.RefineOp, ops.UnpackOp,
             ops.TupleOp, ops.ListOp)
# Ops that view their input where its strides allow and copy it where not (`contiguous()`: a
# row-major tensor is its own result): eager's result may alias where this one is a copy.
MAY_COPY = frozenset({"reshape", "flatten", "contiguous", "reshape_as"})
# Ops whose output is channels-last when their (first) input is.
KEEPS_CHANNELS_LAST = KEEPS_LAYOUT | {"batch_norm"}
# Activations (composites of the pointwise primitives, FUSIBLE) whose result has their input's layout.
ACTIVATIONS = frozenset({"relu", "relu6", "hardtanh", "silu", "gelu", "sigmoid", "hardswish", "hardsigmoid",
                         "leaky_relu", "elu", "mish", "softplus", "clamp"})


def autograd_channels_last(program: Program) -> None:
    if not program.autograd:
        return
    for func in program.funcs:
        if not isinstance(func, ops.FuncOp):
            continue
        block = func.regions[0].block
        preferred = [op for op in block.ops if conv2d_on_cpu(op) and prefers_channels_last(op)]
        if len(preferred) < 2:  # (a lone conv pays the copies for itself alone)
            continue
        followed: set[Value] = set()
        if _follow(block.ops, set(preferred), followed, _Writes(func)):
            _Rewriter(followed).run(block)


class _Writes:
    """What the function writes, for `MAY_COPY` ops: whether a value may share storage with a
    tensor that an op after a given one writes."""

    def __init__(self, func: ops.FuncOp) -> None:
        self.func = func
        self.aliasing: Aliasing | None = None
        self.order: dict[Operation, int] = {}
        self.writes: list[tuple[int, frozenset[tuple]]] = []  # (position, roots written)

    def written_after(self, v: Value, op: Operation) -> bool:
        if self.aliasing is None:
            self.aliasing = a = Aliasing(self.func)
            self.order = {o: i for i, o in enumerate(self.func.walk())}
            self.writes = [(i, frozenset(r for k in written_operands(o) for r in a.may_of(o.operands[k])))
                           for o, i in self.order.items() if written_operands(o)]
        at, roots = self.order[op], self.aliasing.may_of(v)
        return any(i > at and roots & written for i, written in self.writes)


def lays_out_channels_last(program: Program) -> bool:
    """Whether this pass made some conv's input channels-last in `program`."""
    return any(op_name(op) == "contiguous" and "memory_format" in op.attributes.get("kwnames", ())
               for op in program.walk())


def may_be_channels_last(func: ops.FuncOp) -> set[Value]:
    """The tensors of `func` that may be channels-last after this pass: what is computed from a
    `contiguous(memory_format=...)` result, but a row-major copy. (ir/passes/autograd_kernels.py
    forms no group of them: its kernels read and write row-major tensors.)"""
    found: set[Value] = set()
    for op in func.walk():
        name = op_name(op)
        if name == "contiguous" and len(op.operands) > 1:
            found.update(op.results)
        elif any(v in found for v in op.operands) and name not in ROW_MAJOR \
                and not (name == "contiguous" and len(op.operands) == 1):
            found.update(r for r in op.results if holds_tensors(r.type))
    return found


def _follow(body: list[Operation], preferred: set[Operation], followed: set[Value], writes: _Writes) -> bool:
    """Add to `followed` what may change layout; False at a use that could tell."""
    for op in body:
        if op in preferred:
            followed.add(op.result)
            continue
        if op.regions:
            if any(v in followed for inner in op.walk() for v in inner.operands):
                return False
            continue
        read = [v for v in op.operands if v in followed]
        if not read or isinstance(op, (ops.GuardOp, ops.EntryCheck)) or conv2d_on_cpu(op):
            continue  # (a conv's input: made row-major, as eager's, where it does not prefer channels-last)
        if op.has_trait(TERMINATOR):
            if not isinstance(op, ops.ReturnOp) or not all(returnable(v, op) for v in read):
                return False
            continue
        name = op_name(op)
        if not isinstance(op, VALUE_OPS) or name in READS_STRIDES:
            return False
        if op.attributes.get("random"):
            if op.attributes.get("mutates"):
                return False
            continue  # (its input made row-major: eager's draws, a result of eager's layout)
        if name == "view" and not _same_view(op):
            return False
        if name in MAY_COPY and any(writes.written_after(v, op) for v in read):
            return False
        if name in ROW_MAJOR or (name == "contiguous" and len(op.operands) == 1):
            continue  # (a new row-major tensor)
        followed.update(r for r in op.results if holds_tensors(r.type))
    return True


def _same_view(op: Operation) -> bool:
    """`x.view(...)` of an `[N, C, 1, 1]` tensor: channels-last or not, its strides are those of a
    row-major one for every dim of more than one element, so the view is the same."""
    t = op.operands[0].type
    return isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 4 and tuple(t.shape[2:]) == (1, 1)


class _Rewriter:
    def __init__(self, followed: set[Value]) -> None:
        self.followed = followed
        self.channels_last: set[Value] = set()  # values known to be channels-last
        self.facts = Facts()

    def run(self, block: Block) -> None:
        for op in list(block.ops):
            if conv2d_on_cpu(op) and op.result in self.followed:  # (a preferred conv)
                x = op.operands[0]
                if x not in self.channels_last:
                    e = Emitter(op, self.facts)
                    fmt = e._add(ops.ConstantOp([], [MEMORY_FORMAT], {"value": "torch.channels_last"}))
                    op.set_operand(0, e.method("contiguous", x, memory_format=fmt))
                    e.commit()
                self.channels_last.add(op.result)
            elif conv2d_on_cpu(op) or op.attributes.get("random"):
                self.row_major(op, [i for i, v in enumerate(op.operands) if v in self.followed])
            elif isinstance(op, ops.ReturnOp):
                for i, v in enumerate(op.operands):
                    if v in self.followed and isinstance(v.owner, ops.TupleOp):
                        self.row_major(v.owner, [j for j, e in enumerate(v.owner.operands) if e in self.followed])
                self.row_major(op, [i for i, v in enumerate(op.operands) if v in self.followed
                                    and isinstance(v.type, TensorType)])
            elif self.keeps_channels_last(op):
                self.channels_last.update(r for r in op.results if isinstance(r.type, TensorType))

    def row_major(self, op: Operation, indices: list[int]) -> None:
        """The tensors `op` reads at `indices` read as eager's would be laid out: `x.contiguous()`."""
        if not indices:
            return
        e = Emitter(op, self.facts)
        for i in indices:
            op.set_operand(i, e.method("contiguous", op.operands[i]))
        e.commit()

    def keeps_channels_last(self, op: Operation) -> bool:
        """Whether `op`'s result is channels-last as its input is: an in-place op's target, a
        batch norm's or pool's input, every operand of a pointwise op's full shape (a per-channel
        operand broadcasts into any layout)."""
        if len(op.results) != 1 or not isinstance(op.result.type, TensorType) or not op.operands:
            return False  # (an unpack's several results: not followed as one layout)
        alias = op.attributes.get("alias_of")
        if isinstance(op, ops.InplaceOp) or (alias == 0 and op.attributes.get("mutates")):
            return op.operands[0] in self.channels_last
        if op_name(op) in KEEPS_CHANNELS_LAST:
            return op.operands[0] in self.channels_last
        if op_name(op) not in FUSIBLE | ACTIVATIONS:
            return False
        full = [v for v in op.operands if isinstance(v.type, TensorType) and v.type.shape == op.result.type.shape]
        return bool(full) and all(v in self.channels_last for v in full)

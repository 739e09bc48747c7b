"""Memory planning: a large GEMM result takes the storage of a temporary that is dead by then.

On the CPU a fresh tensor of tens of megabytes is mapped anew on every call (glibc maps an
allocation over its mmap threshold, at most 32 MB, afresh and unmaps it on free; smaller ones
fault too when the heap's top is given back), and its pages fault on the first write: inside the
GEMM that writes it, on both threads. convnext_tiny at batch 8 faulted 39,000 pages a call; its
stage-1 `linear` of [25088, 96] by [96, 384] took 19.3 ms into a fresh 38.5 MB result and
11.3 ms into one whose pages were mapped. So `linear(x, w)` (the bias split off into the kernel
after it) writes, through `out=`, into the storage of a tensor of the same type
that nothing reads any more: `torch.matmul(x, w.t(), out=dead)`. The previous block's result
of the same layer usually is one.

A storage may be taken only when no value that can reach it is used later. Values share a
storage class (union-find) when one may alias the other: a view (`alias_of`), a kernel output
written over an input (`reuse`) or into a view (`into`), the result of any op that may return
its operand (not a fresh result: `contiguous`, `to`, `reshape`), containers and what is read out
of them, and anything an op with regions or a call we cannot see into touches (then pinned); the
packed conv and linear of runtime/prepacked.py return new tensors and only read their operands.
A class may be taken when it was allocated by this function (a fresh extern result or a
kernel's own output) and holds no argument, parameter, returned or pinned value. The class's
last use is the latest top-level op that uses any of its values; the GEMM must stand after it.
Only the function's own block is planned (a value used in a loop is used on every iteration).

Then the large outputs of fused kernels (pointwise and row-reduction), and the large GEMM results
no dead temporary was found for, that nothing outside the call can see go into
buffers the function keeps between calls (`keep_buffers`, runtime/buffers.py): how often a fresh
tensor faults depends on what the rest of the process allocated (glibc gives the heap's top back
once enough of it is free), and a kept buffer's pages stay mapped. A large result of a 1x1
`_prepacked.conv2d` of stride 1 (ir/passes/conv_choices.py, `measured_1x1`) is given the NHWC rows of
such a buffer as `out`, seen as NCHW: the runtime may write it there as a GEMM of the input's
rows, or return a new tensor from a conv way that measured faster (runtime/prepacked.py).

The function takes its set of buffers before the first (`py.take_buffers`), reads one slot per
output (`py.buffer`: `buffers.get(slot, sizes, dtype)`) and gives them back before the return
(`py.give_buffers`); each call takes a set of its own, and a call that raises gives nothing back.
Outputs whose lives do not overlap share a slot, the closest fit.
"""

from __future__ import annotations

import torch

from ir.core import ops
from ir.core.graph import AliasOf, Block, Operation, Program, Value
from ir.core.types import ANY, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import op_name
from ir.passes.aliasing import holds_tensors
from ir.passes.canonicalize import immutable
from ir.passes.concat import size_source, size_value
from ir.passes.conv_choices import PACKED_CONV
from ir.passes.emitter import Emitter, Facts
from ir.passes.fuse import FRESH_RESULTS, fresh_row_major
from ir.passes.layout import TO_NCHW, TO_NHWC
from ir.passes.pack import HELPER as PACKED_LINEAR

# runtime helpers whose result is a new tensor and that only read their operands
FRESH_BUILTINS = frozenset({PACKED_CONV, PACKED_LINEAR})
# the static part of a result's size (symbolic dims count as 1) from which a GEMM takes a dead
# storage: below it the allocator's free lists serve it without new pages
MIN_BYTES = 1 << 20
FLOATING = frozenset({"float32", "float64", "bfloat16", "float16"})


def plan_memory(program: Program) -> None:
    for func in program.funcs:
        if not any(isinstance(op, ops.OpaqueOp) for op in func.walk()):  # (Python may read locals by name)
            _Planner(func.regions[0].block).run()
            _Planner(func.regions[0].block).keep_buffers(func.sym_name)  # (classes as the GEMMs left them)


class _Planner:
    def __init__(self, block: Block) -> None:
        self.block = block
        self.parent: dict[Value, Value] = {}
        self.pinned: set[Value] = set()  # roots of classes that may not be taken
        self.allocated: dict[Value, Value] = {}  # root -> the value that allocated the class
        self.last: dict[Value, int] = {}  # root -> position of the last top-level use

    def find(self, v: Value) -> Value:
        root = v
        while self.parent.get(root, root) is not root:
            root = self.parent[root]
        self.parent[v] = root
        return root

    def union(self, a: Value, b: Value) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is rb:
            return
        self.parent[rb] = ra
        if rb in self.pinned:
            self.pinned.add(ra)
        if ra in self.allocated and rb in self.allocated:
            self.pinned.add(ra)  # (two allocations in one class: never take it)
        elif rb in self.allocated:
            self.allocated[ra] = self.allocated.pop(rb)
        self.last[ra] = max(self.last.get(ra, -1), self.last.pop(rb, -1))

    def run_analysis(self) -> None:
        """Storage classes, what each allocates, and the position of each class's last use."""
        for arg in self.block.args:
            self.pinned.add(self.find(arg))
        for i, op in enumerate(self.block.ops):
            self.classes_of(op)
            for v in self.values_used(op):
                root = self.find(v)
                self.last[root] = max(self.last.get(root, -1), i)

    def run(self) -> None:
        self.run_analysis()
        targets = [op for op in self.block.ops if self.target(op)]
        position = {op: i for i, op in enumerate(self.block.ops)}
        for op in targets:
            self.take(op, position[op], position)

    # -- classes ----------------------------------------------------------------------------
    def classes_of(self, op: Operation) -> None:
        tensors = [v for v in self.values_used(op) if holds_tensors(v.type)]
        if isinstance(op, ops.ReturnOp):
            for v in tensors:
                self.pinned.add(self.find(v))
            return
        if isinstance(op, kernel_ops.KernelOp):
            for k, j in op.reuse:
                self.union(op.results[k], op.operands[j])
            for k, dest in op.destinations.items():
                self.union(op.results[k], dest)
            taken = {k for k, _ in op.reuse} | set(op.destinations)
            for k, r in enumerate(op.results):
                if k not in taken:
                    self.allocate(r)
            return
        if isinstance(op, kernel_ops.Kernel):  # (fresh outputs, no writes)
            for r in op.results:
                self.allocate(r)
            return
        results = [r for r in op.results if holds_tensors(r.type)]
        if not all(immutable(r.type) or holds_tensors(r.type) for r in op.results):
            for v in tensors:  # (`x.numpy()`, `x.untyped_storage()`: something else sees the storage)
                self.pinned.add(self.find(v))
        if not results:
            return
        if isinstance(op, ops.BuiltinCallOp) and op.attributes["callee"] in FRESH_BUILTINS and len(results) == 1:
            self.allocate(results[0])  # (reads its operands, returns a new tensor)
            return
        if isinstance(op, (ops.BinaryOp, ops.UnaryOp)) and len(results) == 1 \
                and all(isinstance(v.type, TensorType) or immutable(v.type) for v in op.operands):
            self.allocate(results[0])  # (`a @ b`, `-x` on tensors: a new tensor)
            return
        if op.regions or not isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp, ops.ListOp, ops.TupleOp,
                                             ops.GetItemOp, ops.UnpackOp, ops.GetAttrOp, ops.ConstantOp)):
            for r in results:  # (a call we cannot see into: what it touches may be kept anywhere)
                for v in tensors:
                    self.union(r, v)
                self.pinned.add(self.find(r))
            for v in tensors:
                self.pinned.add(self.find(v))
            return
        if isinstance(op, (ops.GetAttrOp, ops.ConstantOp)):
            for r in results:
                self.pinned.add(self.find(r))  # (a parameter, a buffer: not ours to write)
            return
        alias = op.get_trait(AliasOf)
        if alias is not None and "out" in op.attributes.get("kwnames", ()):
            self.union(results[0], op.operands[alias.index])  # (`out=`: the result is that tensor; the rest are read)
            return
        fresh = (op_name(op) in FRESH_RESULTS or op_name(op) == "new_empty") and alias is None \
            and not op.attributes.get("mutates") and len(results) == 1
        if fresh:
            self.allocate(results[0])
            return
        for r in results:  # (a view, a container, or an op that may return its operand)
            for v in tensors:
                self.union(r, v)

    def allocate(self, v: Value) -> None:
        root = self.find(v)
        if root in self.allocated:
            self.pinned.add(root)
        else:
            self.allocated[root] = v

    def values_used(self, op: Operation) -> list[Value]:
        """The operands of `op` and of the ops nested in it that come from outside it."""
        inside = {r for inner in op.walk() for r in inner.results} | {a for inner in op.walk() for region in inner.regions
                                                                    for b in region.blocks for a in b.args}
        return list(dict.fromkeys(v for inner in op.walk() for v in inner.operands if v not in inside))

    # -- taking a dead storage -----------------------------------------------------------------
    def target(self, op: Operation) -> bool:
        """`linear(x, w)` of a 2-d weight (the bias split off), with a result of known type that is
        large enough and is this op's own new tensor. (Not `matmul` of batched operands yet: its
        `out=` form is not tested at these sizes.)"""
        if not isinstance(op, ops.TorchCallOp) or op_name(op) != "linear" or op.attributes.get("kwnames") \
                or len(op.operands) != 2 or len(op.results) != 1:
            return False
        t = op.result.type
        if not (isinstance(t, TensorType) and t.dtype in FLOATING and t.shape is not None and len(t.shape) >= 2
                and t.device == "cpu" and all(isinstance(v.type, TensorType) for v in op.operands)):
            return False
        if op.operands[1].type.shape is None or len(op.operands[1].type.shape) != 2:  # type: ignore[union-attr]
            return False
        return _static_bytes(t) >= MIN_BYTES and self.allocated.get(self.find(op.result)) is op.result

    def take(self, op: Operation, at: int, position: dict[Operation, int]) -> None:
        t = op.result.type
        found = None
        for root, v in self.allocated.items():
            if (self.find(root) is root and root not in self.pinned and v.type == t and v is not op.result
                    and (fresh_row_major(v) or _packed_linear(v))  # (so that a GEMM `out=` it has its own strides)
                    and self.last.get(root, -1) < at and isinstance(v.owner, Operation) and v.owner in position
                    and position[v.owner] < at):
                if found is None or self.last.get(root, -1) > self.last.get(found, -1):
                    found = root
        if found is None:
            return
        mine = self.find(op.result)
        self.allocated.pop(mine, None)  # (the GEMM allocates nothing now)
        self.union(found, mine)  # (its values share the dead tensor's storage, and live as long)
        gemm = _gemm_into(op, self.allocated[self.find(found)])
        self.parent[gemm.result] = self.find(found)

    # -- buffers kept between calls ------------------------------------------------------------
    def keep_buffers(self, key: str) -> None:
        """Each large output of a fused kernel, and each large GEMM result no dead temporary was
        found for (`run`), whose storage class this function allocates and nothing outside the
        call can see (not pinned) is written into a slot of the buffers the function keeps
        between calls (`py.buffer`, runtime/buffers.py), so the call maps and faults no new pages
        for it. Slots are shared by outputs whose lives do not overlap: a
        slot is free at an op once the last use of what it held comes before the op."""
        self.run_analysis()
        slots: list[list[int]] = []  # per slot: [position of the last use of what it holds, bytes]
        chosen: list[tuple[Operation, int, int]] = []
        for i, op in enumerate(self.block.ops):
            if self.target(op):  # (a GEMM no dead temporary was found for)
                outputs, inputs = [(0, op.result)], list(op.operands)
            elif _conv_1x1(op):  # (a 1x1 conv the runtime may run as a GEMM into the buffer)
                outputs, inputs = [(0, op.result)], [op.operands[0]]
            elif isinstance(op, kernel_ops.KernelOp) and not op.into:
                over = {k for k, _ in op.reuse}
                outputs = [(k, r) for k, r in enumerate(op.results) if k not in over]
                inputs = op.operands[:op.inputs]
            else:
                continue
            for k, r in outputs:
                t, root = r.type, self.find(r)
                if (not isinstance(t, TensorType) or t.device != "cpu" or root in self.pinned
                        or self.allocated.get(root) is not r or _static_bytes(t) < MIN_BYTES):
                    continue
                if any(type(d) is not int and size_source(d, inputs) is None for d in t.shape):  # type: ignore[union-attr]
                    continue  # (a size none of its inputs has)
                need = _static_bytes(t)
                free = [n for n, s in enumerate(slots) if s[0] < i]  # (what a slot held is dead before this op)
                n = min(free, key=lambda n: (slots[n][1] < need, abs(slots[n][1] - need)), default=len(slots))  # (the closest fit)
                if n == len(slots):
                    slots.append([0, 0])
                slots[n] = [max(self.last.get(root, i), i), max(slots[n][1], need)]
                chosen.append((op, k, n))
        if not chosen:
            return
        take = kernel_ops.TakeBuffersOp([], [ANY], {"key": key}, loc=chosen[0][0].loc)
        take.result.name = "buffers"
        self.block.insert_before(chosen[0][0], take)
        for op, k, slot in chosen:
            e = Emitter(op, Facts())
            inputs = op.operands[:op.inputs] if isinstance(op, kernel_ops.KernelOp) else list(op.operands)
            t = op.results[k].type
            conv = _conv_1x1(op)
            if conv:  # (the NHWC rows of its channels-last result)
                t = TensorType(t.dtype, tuple(t.shape[i] for i in TO_NHWC), t.device)  # type: ignore[union-attr]
            shape = e.shape([size_value(e, d, inputs) for d in t.shape])  # type: ignore[union-attr]
            e.commit()
            buffer = kernel_ops.BufferOp([take.result, shape], [t], {"slot": slot, "dtype": t.dtype}, loc=op.loc)  # type: ignore[union-attr]
            self.block.insert_before(op, buffer)
            if conv:
                e = Emitter(op, Facts())
                seen = e.method("permute", buffer.result, TO_NCHW)
                e.commit()
                op._add_operand(seen)
                op.attributes.update(mutates=(len(op.operands) - 1,), alias_of=len(op.operands) - 1)
            elif isinstance(op, kernel_ops.KernelOp):
                op._add_operand(buffer.result)
                op.into = (*op.into, k)
            else:
                _gemm_into(op, buffer.result)
        end = self.block.terminator
        assert end is not None
        self.block.insert_before(end, kernel_ops.GiveBuffersOp([take.result], [], {}, loc=end.loc))


def _gemm_into(op: Operation, dest: Value) -> Operation:
    """`linear(a, w)` replaced by `torch.matmul(a, w.t(), out=dest)`, the same GEMM."""
    e = Emitter(op, Facts())
    a, w = op.operands
    b = e.method("t", w)
    e.commit()
    gemm = ops.TorchCallOp([a, b, dest], [op.result.type], {"callee": "torch.matmul", "kwnames": ("out",), "mutates": (2,),
                                                           "alias_of": 2, "aten": "aten::matmul.out"}, loc=op.loc)
    op.parent.insert_before(op, gemm)  # type: ignore[union-attr]
    gemm.result.name = op.result.name
    op.result.replace_all_uses_with(gemm.result)
    op.erase()
    return gemm


def _conv_1x1(op: Operation) -> bool:
    """`_prepacked.conv2d(x, w, b, (1, 1), (0, 0), dilation, 1)` of a 1x1 weight, given no buffer
    yet: its result may be written by a GEMM of the input's NHWC rows (runtime/prepacked.py)."""
    if not (isinstance(op, ops.BuiltinCallOp) and op.attributes["callee"] == PACKED_CONV and len(op.operands) == 7):
        return False
    w = op.operands[1].type
    stride, padding, _, groups = (v.owner.attributes.get("value") if isinstance(v.owner, ops.ConstantOp) else None
                                  for v in op.operands[3:])
    return (isinstance(w, TensorType) and w.shape is not None and len(w.shape) == 4 and tuple(w.shape[2:]) == (1, 1)
            and stride == (1, 1) and padding == (0, 0) and groups == 1)


def _packed_linear(v: Value) -> bool:
    """The result of `_prepacked.linear`: a new row-major tensor, as `linear`'s."""
    return isinstance(v.owner, ops.BuiltinCallOp) and v.owner.attributes["callee"] == PACKED_LINEAR


def _static_bytes(t: TensorType) -> int:
    n = getattr(torch, t.dtype).itemsize  # type: ignore[arg-type]
    for d in t.shape or ():
        if type(d) is int:
            n *= d
    return n


__all__ = ["plan_memory", "MIN_BYTES"]

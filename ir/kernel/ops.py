"""The kernel ops: ops the compiled module computes with kernels it generates (C++ on the CPU,
Triton on the GPU), and the buffer ops that hand kernels their outputs' memory. The fuse, pool,
autograd_kernels and plan passes build them; codegen/ prints them."""

from __future__ import annotations

from ir.core.attrs import INTS, Attr, OneOf, Opt, Tup
from ir.core.graph import PURE, Block, Mutates, Operation, Trait, Value
from ir.core.ops import YieldOp
from ir.core.types import TensorType


class Kernel(Operation):
    """An op the compiled module computes with a kernel it generates (C++ and Triton): it calls
    the kernel's launcher, `kernel_name`, with the op's operands. Each subclass has its own
    emitters in codegen/."""

    kernel_name = Attr(str, key="name")  # (an op's `name` is its kind)


class PoolKernelOp(Kernel):
    """kernel.pool: the max over windows of the middle dims of a 4-d tensor [N, H, W, C] (NHWC
    rows, any strides; fastest with the channels contiguous), as `F.max_pool2d` of its NCHW view
    computes it (ir/passes/pool.py), dilation 1; the result [N, OH, OW, C] is a fresh row-major
    tensor whose OH and OW (and so ceil_mode) its type fixes. A window cut by the border takes the max of its elements inside
    it, as torch pads with -inf; NaN propagates."""

    name = "kernel.pool"
    traits = frozenset({PURE})
    kernel_size = Attr(Tup(int))  # each a pair of ints
    stride = Attr(Tup(int))
    padding = Attr(Tup(int))

    def verify_(self) -> list[str]:
        errors = []
        for key in ("kernel_size", "stride", "padding"):
            if len(getattr(self, key)) != 2:
                errors.append(f"`{key}` is a pair of ints")
        if len(self.operands) != 1 or len(self.results) != 1:
            return errors + ["kernel.pool takes one tensor and gives one"]
        x, r = self.operands[0].type, self.result.type
        if not (isinstance(x, TensorType) and isinstance(r, TensorType) and x.shape is not None
                and r.shape is not None and len(x.shape) == len(r.shape) == 4 and x.dtype == r.dtype):
            errors.append("kernel.pool maps a 4-d tensor to a 4-d tensor of its dtype")
        return errors


class AdaptiveAvgPoolKernelOp(Kernel):
    """kernel.adaptive_avg_pool: `F.adaptive_avg_pool1d` of a 2-d or 3-d float tensor (any
    strides) to the size its second operand (an int, known at run time) gives, as torch's CPU
    kernel computes it: output i of a row is the sum, in order and in the input's dtype, of its
    elements floor(i * L / S) to ceil((i + 1) * L / S) - 1, divided by their count. The result
    is a fresh contiguous tensor of the input's rank (ir/passes/pool.py)."""

    name = "kernel.adaptive_avg_pool"
    traits = frozenset({PURE})

    def verify_(self) -> list[str]:
        if len(self.operands) != 2 or len(self.results) != 1:
            return ["kernel.adaptive_avg_pool takes a tensor and an int and gives one tensor"]
        x, r = self.operands[0].type, self.result.type
        if not (isinstance(x, TensorType) and isinstance(r, TensorType) and x.shape is not None
                and r.shape is not None and len(x.shape) == len(r.shape) in (2, 3) and x.dtype == r.dtype):
            return ["kernel.adaptive_avg_pool maps a 2-d or 3-d tensor to one of its rank and dtype"]
        return []


class KernelOp(Kernel):
    """A fused kernel (ir/passes/fuse.py): one generated loop nest in place of a group of ops.
    Operands: the input tensors, then the scalar inputs (Python numbers); results: the output
    tensors. The region computes one element: its block takes one 0-d element per tensor input
    and the scalars, and ends in scf.yield of one element per output. `inputs`: how many operands
    are tensors.

    `into`, when not empty: for each output it lists, in order, one more operand after the
    scalars, a tensor of that output's type that the kernel writes the output into (a view
    of a larger buffer: ir/passes/concat.py; a kept buffer, py.buffer: ir/passes/plan.py); the
    output is then that tensor. Such a kernel writes its destinations, so it is not pure."""

    inputs = Attr(int)
    into = Attr(INTS, ())
    reuse = Attr(Tup(INTS), ())  # (output, input) pairs: the output written over the input (ir/passes/reuse.py)

    @property
    def traits(self) -> frozenset[Trait]:  # type: ignore[override]
        if not self.into:
            return frozenset({PURE})
        first = len(self.operands) - len(self.into)
        return frozenset(Mutates(i) for i in range(first, len(self.operands)))

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def scalar_inputs(self) -> list[Value]:
        """The operands after the tensor inputs that the body reads (not the destinations)."""
        return self.operands[self.inputs:len(self.body.args)]

    @property
    def destinations(self) -> dict[int, Value]:
        """Output index -> the tensor it is written into (`into`)."""
        return dict(zip(self.into, self.operands[len(self.operands) - len(self.into):]))

    @property
    def views_written(self) -> list[int]:
        """The outputs written into a view they are given (ir/passes/concat.py), whose strides
        the code takes, in order; an output given a kept buffer (py.buffer: dense, row-major)
        is written as a new output is."""
        return sorted(k for k, v in self.destinations.items() if not isinstance(v.owner, BufferOp))

    def verify_(self) -> list[str]:
        errors = []
        n, into = self.inputs, self.into
        if len(self.body.args) != len(self.operands) - len(into):
            errors.append("the body takes one argument per operand but the destinations")
        if len(set(into)) != len(into) or any(type(k) is not int or not 0 <= k < len(self.results) for k in into):
            errors.append("`into` names distinct outputs")
        for k, v in self.destinations.items():
            if v.type != self.results[k].type:
                errors.append(f"the destination of output {k} must have its type")
        for v, a in zip(self.operands[:n], self.body.args):
            if not isinstance(v.type, TensorType) or not isinstance(a.type, TensorType) or a.type.shape != ():
                errors.append("a tensor input's element must be a 0-d tensor")
                break
        term = self.body.terminator
        if not isinstance(term, YieldOp) or len(term.operands) != len(self.results):
            errors.append("the body must end in scf.yield of one element per result")
        for r in self.results:
            if not isinstance(r.type, TensorType) or r.type.dtype is None or r.type.shape is None:
                errors.append("results must be tensors of known dtype and rank")
                break
        return errors


class PointwiseKernelOp(KernelOp):
    """A fused pointwise kernel: every result has the iteration shape (the broadcast of the
    inputs), and the body computes each element independently."""

    name = "kernel.pointwise"


class ReductionKernelOp(KernelOp):
    """A fused row-reduction kernel: the iteration shape's last dim is reduced. The body holds
    `kernel.reduce` ops, each turning an element value into the value of its row; a result has
    either the iteration shape (an element output) or its rows' shape, the last dim 1 (a row
    output: a yielded value that depends on the row only). Code runs one row at a time: a pass
    over the row per level of reductions, then the element outputs."""

    name = "kernel.reduction"

    def verify_(self) -> list[str]:
        errors = super().verify_()
        if not any(isinstance(op, ReduceOp) for op in self.body.ops):
            errors.append("a reduction kernel holds at least one kernel.reduce")
        return errors


class BatchNormChainOp(PointwiseKernelOp):
    """kernel.batch_norm_chain: a kernel of a kernel.autograd group headed by a batch norm in
    train mode (`batch_norm` of AutogradKernelOp): the group's pointwise ops after the batch
    norm, on the element it normalised. Its block takes the normalised element of the first
    tensor input (x) in place of x's, then one element per other tensor input as a
    kernel.pointwise does (the batch norm's weight, bias and running statistics, which it does
    not read, then the tensors of x's shape the ops read) and the scalars. The forward yields
    the group's outputs; the backward (`backward`) also takes one gradient per output after the
    tensors and yields the gradient of the normalised element, then of each tensor of x's shape.
    Its C++ (codegen/norm_kernels.py) runs the block inside runtime/include's batch-norm loops,
    which compute the statistics, x's gradient and the weight's and bias's."""

    name = "kernel.batch_norm_chain"
    backward = Attr(bool, False)


class AutogradKernelOp(Kernel):
    """kernel.autograd: a group of pointwise ops in code autograd records, computed by a fused
    kernel that autograd records as one function (ir/passes/autograd_kernels.py,
    runtime/autograd_kernels.py). Operands: the tensor inputs (`inputs` of them), then the
    scalars; results: the outputs. Its one block holds two `kernel.pointwise` ops on its
    arguments (the operands, then one gradient per output): the forward, computing the results,
    and the backward, computing from the inputs and the gradients the gradient of each input
    `grads` lists, at the iteration shape. `kernel_name`: the function object the module binds.
    With `partial`, a third kernel.pointwise, the backward without the gradients of the
    function's own arguments, gives the gradients of those inputs.

    With `batch_norm`, the group is a batch norm in train mode (`F.batch_norm(x, running_mean,
    running_var, weight, bias, True, momentum, eps)`) and the pointwise ops after it: operands
    x, weight, bias, running_mean, running_var, the other tensors, the scalars, then momentum
    and eps; its kernels are kernel.batch_norm_chain (ir/passes/autograd_kernels.py)."""

    name = "kernel.autograd"
    traits = frozenset({PURE})
    inputs = Attr(int)
    grads = Attr(INTS)  # tensor input indices
    eager = Attr(str)  # the function of the group's torch ops, which a recorded backward runs
    depends = Attr(Tup(INTS))  # per output, the inputs it is computed from
    partial = Attr(Opt(INTS), None)
    batch_norm = Attr(bool, False)

    @property
    def forward(self) -> "PointwiseKernelOp":
        return self.regions[0].block.ops[0]  # type: ignore[return-value]

    @property
    def backward(self) -> "PointwiseKernelOp":
        return self.regions[0].block.ops[1]  # type: ignore[return-value]

    @property
    def partial_backward(self) -> "PointwiseKernelOp | None":
        return self.regions[0].block.ops[2] if self.partial is not None else None  # type: ignore[return-value]

    def verify_(self) -> list[str]:
        ops_ = self.regions[0].block.ops if self.regions else []
        kernels = 3 if self.partial is not None else 2
        if len(ops_) != kernels + 1 or not all(isinstance(o, PointwiseKernelOp) for o in ops_[:kernels]):
            return ["kernel.autograd holds a forward and a backward kernel.pointwise (and a partial one), then scf.yield"]
        if len(self.forward.results) != len(self.results):
            return ["the forward kernel gives one result per output"]
        if len(self.backward.results) != len(self.grads) - (2 if self.batch_norm else 0):
            # (a batch norm's backward kernel gives the gradient of x, whose C++ gives the
            # weight's and bias's beside it: kernel.batch_norm_chain)
            return ["the backward kernel gives one gradient per input in `grads`"]
        partial = self.partial_backward
        if partial is not None and len(partial.results) != len(self.partial):
            return ["the partial backward kernel gives one gradient per input in `partial`"]
        return []


class ReduceOp(Operation):
    """Inside a reduction kernel: operand 0, an element value, reduced over the kernel's row
    (with torch's semantics: amax and amin propagate NaN). The result is the row's value."""

    name = "kernel.reduce"
    traits = frozenset({PURE})
    KINDS = ("sum", "amax", "amin")
    kind = Attr(OneOf(KINDS))

    def verify_(self) -> list[str]:
        if len(self.operands) != 1:
            return ["kernel.reduce takes one operand"]
        return []


# -- buffers a function keeps between calls (ir/passes/plan.py, runtime/buffers.py) ---------------
class TakeBuffersOp(Operation):
    """`_buffers.take("<key>")`: the set of buffers this call writes its large temporaries into,
    taken from those earlier calls of the function (by `key`) gave back, or new: two calls
    running at once never share one. Pure as the function sees it (it reads and writes nothing
    the function can see), so code around it prints as expressions; plan runs last, so nothing
    merges or drops it."""

    name = "py.take_buffers"
    traits = frozenset({PURE})
    key = Attr(str)


class BufferOp(Operation):
    """`buffers.get(<slot>, sizes, <dtype>)`: a dense row-major tensor of the result's type in slot
    `slot` of the set of buffers operand 0 (py.take_buffers), whose storage outlives the call;
    operand 1 is the sizes (a tuple). What it held before is garbage: like `new_empty`, an
    allocation as the function sees it, so pure (the kernel or GEMM that writes it is not)."""

    name = "py.buffer"
    traits = frozenset({PURE})
    slot = Attr(int)
    dtype = Attr(str)

    def verify_(self) -> list[str]:
        t = self.results[0].type if len(self.results) == 1 else None
        if len(self.operands) != 2 or not isinstance(self.operands[0].owner, TakeBuffersOp):
            return ["py.buffer takes the buffers of py.take_buffers and the sizes"]
        if not (isinstance(t, TensorType) and t.dtype == self.attributes.get("dtype") and t.shape is not None):
            return ["py.buffer gives a tensor of its dtype and known rank"]
        return []


class GiveBuffersOp(Operation):
    """`_buffers.give(buffers)`: hands the set back for the function's next call, before it
    returns. (A call that raises does not: its set is dropped, so nothing it wrote is reused.)"""

    name = "py.give_buffers"

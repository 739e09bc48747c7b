"""Buffer reuse: a kernel writes an output over an input that dies into it.

A kernel's outputs are fresh tensors, and on the CPU a fresh tensor of a few hundred kilobytes
or more costs more than the memory traffic of the kernel itself (new pages are faulted in on the
first write: a large `x * c` into a new tensor takes twice as long as writing it over `x`). When
an input is a temporary only this kernel sees (`fuse.dead_temporary`: a matmul's result whose
only use is the bias-and-activation kernel after it, the output of an earlier kernel) and it has
an output's dtype and shape, the output takes its buffer: the kernel's `reuse` attribute lists
the (output, input) pairs, and the launcher passes that input's storage (made contiguous) as the
output.

Each element is read before it is written at the same index, so a pointwise kernel may always
do this. A row-reduction kernel reads its rows in several passes; it may write over an input
only with an output computed in the last pass (one that depends on every reduction of the
kernel), when every read of the row is done.
"""

from __future__ import annotations

from ir.core.graph import Operation, Program, Value
from ir.kernel import ops as kernel_ops
from ir.passes.fuse import dead_temporary, same_buffer_type


def reuse_buffers(program: Program) -> None:
    for func in program.funcs:
        for op in func.walk():
            if isinstance(op, kernel_ops.KernelOp):
                pairs = reuse_pairs(op)
                if pairs:
                    op.reuse = pairs


def reuse_pairs(kernel: kernel_ops.KernelOp) -> tuple[tuple[int, int], ...]:
    """(output, input) pairs: output k may be written over tensor input j."""
    n_in = kernel.inputs
    taken: set[int] = set()
    pairs = []
    outputs = kernel.body.terminator.operands  # type: ignore[union-attr]
    for k, r in enumerate(kernel.results):
        if k in kernel.destinations:
            continue  # (written into a view of a cat's result: ir/passes/concat.py)
        if isinstance(kernel, kernel_ops.ReductionKernelOp) and not _after_every_reduction(kernel, outputs[k]):
            continue
        for j, v in enumerate(kernel.operands[:n_in]):
            if j not in taken and dead_temporary(v, kernel) and same_buffer_type(v, r):
                pairs.append((k, j))
                taken.add(j)
                break
    return tuple(pairs)


def _after_every_reduction(kernel: kernel_ops.KernelOp, element: Value) -> bool:
    """Whether the element value depends on every `kernel.reduce` of the body."""
    reductions = {op for op in kernel.body.ops if isinstance(op, kernel_ops.ReduceOp)}
    seen: set[Operation] = set()
    stack = [element]
    while stack:
        owner = stack.pop().owner
        if isinstance(owner, Operation) and owner not in seen:
            seen.add(owner)
            stack.extend(owner.operands)
    return reductions <= seen


__all__ = ["reuse_buffers", "reuse_pairs"]

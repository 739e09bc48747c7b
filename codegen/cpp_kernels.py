"""C++ source for fused kernels (`kernel.pointwise` and `kernel.reduction` ops of
ir/passes/fuse.py).

One `extern "C"` function per kernel, `<name>_kernel` (runtime/kernels.py builds the library,
reads the parameters off these declarations and binds the functions to Python). The source a
module holds starts with `#include <torchscribe/kernels.h>` (PRELUDE): the math and helpers are
runtime/include's. Parameters, in order: the iteration sizes n0..n{N-1}; each output's data
pointer (outputs are fresh row-major tensors, but for an output written into a view of a larger
tensor, the kernel's `into`: its pointer is followed by all its strides); each tensor input's
data pointer and the strides of the dims it moves along, named after the tensor's own dims
(`in0_s0` for a per-channel [C, 1, 1] scale), none of a dim it broadcasts along; an input an
output is written over (`reuse`) has no parameters: it is read from that output, which is
dense (`out0[o + j]`); then the scalar inputs (int64_t or double). The launcher passes a
tensor for each pointer and the strides after it (`_lib.k(n0, 32, out0, in0)`). The kernel
computes what is computed once per call, then runs its rows (all dims but the last) in a
lambda, on one thread or on each OpenMP thread's share of them above PARALLEL_MIN elements
(`ts_rows`). The innermost loop is written once, for every layout: where an input steps along
the row by its stride, a lambda of `unit` (every such stride is 1) that steps each tensor by a
constant `1` in the version for unit strides, which the compiler vectorises as contiguous loads
and stores, by its stride in the other (`ts_unit_or_strided`; a reduction's row function is a
template of `unit`). Statements follow a comment quoting the source line they compute (`//
out = self.bn1(out)`, once per run), and parameter lists and declarations of several names
fill lines of WIDTH columns.

The text goes through codegen/writer.py's `Writer` (two-space levels, `block()` for a brace and
what it holds). What the kernel holds is written by smaller modules: the pointwise loops by
codegen/cpp_pointwise.py, a reduction's rows by codegen/cpp_rows.py, the element computation by
codegen/cpp_elements.py (spelled from codegen/elements.py's table, which the Triton emitter
shares), the walk over the rows by codegen/cpp_iteration.py and the text's layout by
codegen/cpp_text.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codegen.cpp_elements import CTYPE, Body
from codegen.cpp_iteration import strided_dims
from codegen.cpp_pointwise import pointwise_loops
from codegen.cpp_rows import RowPlan, row_driver, row_function
from codegen.cpp_text import joined_declarations, wrapped
from codegen.writer import Writer
from ir.core.types import FLOAT
from ir.kernel import ops as kernel_ops
from ir.kernel.vocabulary import kernel_shape

PARALLEL_MIN = 32768  # elements: below this, threads cost more than they save
FRESH_MIN = 8 << 20  # bytes of an output below which ts_fresh (kernels.h) does nothing


# What a module's kernel source starts with: the support code every kernel shares (the math,
# ts_rows, ts_max, the 16-bit conversions) is a checked-in header, not text in each module.
PRELUDE = "#include <torchscribe/kernels.h>\n"


@dataclass(frozen=True)
class Signature:
    """What the Python launcher passes: `args`, the names of the kernel's Python arguments in
    order (runtime/kernel_signatures.py: sizes `n0`, ..., the tensors `out0`, ...,
    `in0`, ..., each standing for its data pointer and the strides declared after it, and the
    scalars `s0`, ...)."""

    name: str
    outputs: tuple[str, ...]  # dtype names
    scalars: tuple[str, ...]  # "int64_t" or "double"
    args: tuple[str, ...]


def emit_kernel(op: kernel_ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> tuple[str, Signature]:
    """The C++ function of one kernel, and its signature for the launcher; `source_lines` (the
    lines of each source file) for the comments quoting the source line of each statement."""
    shape = kernel_shape(op)
    rank = len(shape)
    n_in = op.inputs
    tensors, scalars = op.operands[:n_in], op.scalar_inputs
    strided = [strided_dims(k, v.type, shape) for k, v in enumerate(tensors)]  # type: ignore[arg-type]
    name = op.kernel_name
    aliased = {j: k for k, j in op.reuse}  # input -> the output over it
    into = op.views_written  # outputs written into a view: their strides are parameters
    assert not into or (rank > 0 and isinstance(op, kernel_ops.PointwiseKernelOp))  # (ir/passes/concat.py)
    params = [("int64_t", f"n{i}") for i in range(rank)]  # (C++ type, name)
    for k, r in enumerate(op.results):
        params.append((f"ts_out<{CTYPE[r.type.dtype]}>", f"out{k}"))  # type: ignore[union-attr]
        if k in into:
            params += [("int64_t", f"out{k}_s{d}") for d in range(rank)]
    for k, (v, dims) in enumerate(zip(tensors, strided)):
        if k not in aliased:  # (an input written over is read from its output, which is dense)
            params.append((f"ts_in<{CTYPE[v.type.dtype]}>", f"in{k}"))  # type: ignore[union-attr]
            params += [("int64_t", stride) for stride in dims.values()]
    scalar_types = ["double" if v.type == FLOAT else "int64_t" for v in scalars]
    params += [(t, f"s{k}") for k, t in enumerate(scalar_types)]
    body = Body(op, source_lines)
    w = Writer("  ")
    # (the outputs the launcher allocated, each written whole: not one written into a view or
    # over an input, nor a reduction's one value per row; none where the sizes are known and small)
    plan = RowPlan(op, [rank - 1 in dims for dims in strided], source_lines) \
        if isinstance(op, kernel_ops.ReductionKernelOp) else None
    fresh = [k for k in range(len(op.results)) if k not in into and k not in aliased.values()
             and not (plan is not None and k in plan.row_outputs)]
    if plan is not None:
        row_function(w, name, rank, op, strided, scalar_types, plan, aliased)
        w.line()
    with w.block(*wrapped(f'extern "C" void {name}_kernel', [f"{t} {n}" for t, n in params], " {")):
        if rank > 0 and not (all(type(d) is int for d in shape) and math.prod(shape) * 8 < FRESH_MIN):
            w.extend(f"ts_fresh(out{k}, {' * '.join(f'n{i}' for i in range(rank))});" for k in fresh)
        if plan is not None:
            row_driver(w, name, rank, op, strided, plan, len(scalars), aliased)
        elif rank == 0:
            for j, k in aliased.items():
                w.line(f"const {CTYPE[tensors[j].type.dtype]}* in{j} = out{k};  // out{k} is written over in{j}")  # type: ignore[union-attr]
            body.statements(w, {k: f"in{k}[0]" for k in range(n_in)}, "0")
        else:
            pointwise_loops(w, shape, n_in, strided, body, aliased, into)
    args = [f"n{i}" for i in range(rank)] + [f"out{k}" for k in range(len(op.results))]
    args += [f"in{k}" for k in range(n_in) if k not in aliased] + [f"s{k}" for k in range(len(scalars))]
    sig = Signature(name, tuple(r.type.dtype for r in op.results), tuple(scalar_types), tuple(args))  # type: ignore[union-attr]
    return "\n".join(joined_declarations(w.lines)) + "\n", sig


__all__ = ["emit_kernel", "Signature", "PRELUDE", "PARALLEL_MIN"]

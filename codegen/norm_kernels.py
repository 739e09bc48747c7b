"""C++ source and launchers for `kernel.batch_norm_chain` (ir/passes/autograd_kernels.py): the
kernels of a group autograd records that a batch norm in train mode heads.

The loops are runtime/include's (kernels.h: `ts_batch_norm_train` and
`ts_batch_norm_train_backward`, the same in every module); a kernel passes them its pointers and
a lambda of the group's pointwise ops on one element, printed by codegen/cpp_elements.py as a
pointwise kernel's body is. Parameters, in order: the sizes n0 (N), n1 (C) and n2 (S, the
product of the dims after the channels) and `interleaved` (1 where x is channels-last, its
channels next to each other), which the runtime reads off x (runtime/autograd_kernels.py); the
outputs; then the inputs, data pointers only (every tensor of x's shape has x's layout, so one
offset `o` reaches an element in each); then the scalars.

- forward, `<name>_kernel`: outputs out0... (the group's), then the batch's mean and
  1 / sqrt(var + eps) per channel, which the backward reads; inputs x (in0), weight, bias, the
  running statistics (written), the other tensors; the group's scalars, then momentum and eps.
- backward, `<name>_backward_kernel`: outputs the gradients of x, weight and bias, then of each
  other tensor; inputs x, weight, bias, the forward's mean and rstd, the other tensors and the
  outputs' gradients; the group's scalars. Its lambda returns the gradient of the normalised
  element and, where `store` is true (the second pass), stores the other tensors' gradients.
"""

from __future__ import annotations

from codegen.cpp_elements import CTYPE, Body
from codegen.cpp_text import joined_declarations, lambda_call, wrapped
from codegen.writer import Writer
from ir.core.types import FLOAT
from ir.kernel import ops as kernel_ops

NORM_INPUTS = 5  # x, weight, bias, running_mean, running_var: the group's first tensor inputs


def cpp_kernel(op: kernel_ops.BatchNormChainOp, source_lines: dict[str, list[str]] | None = None) -> str:
    """The C++ function of one kernel (runtime.kernels.Library reads its parameters off its
    declaration)."""
    t = CTYPE[op.results[0].type.dtype]  # type: ignore[union-attr]
    scalars = ["double" if v.type == FLOAT else "int64_t" for v in op.scalar_inputs]
    params = ["int64_t n0", "int64_t n1", "int64_t n2", "int64_t interleaved"]
    if op.backward:
        params += [f"ts_out<{t}> out{k}" for k in range(2 + len(op.results))]
        params += [f"ts_in<{t}> in0", f"ts_in<{t}> in1", f"ts_in<{t}> in2", f"ts_in<{t}> mean", f"ts_in<{t}> rstd"]
        params += [f"ts_in<{t}> in{k}" for k in range(NORM_INPUTS, op.inputs)]
    else:
        params += [f"ts_out<{t}> out{k}" for k in range(len(op.results) + 2)]
        params += [f"ts_in<{t}> in0", f"ts_in<{t}> in1", f"ts_in<{t}> in2", f"ts_out<{t}> in3", f"ts_out<{t}> in4"]
        params += [f"ts_in<{t}> in{k}" for k in range(NORM_INPUTS, op.inputs)]
    params += [f"{c} s{k}" for k, c in enumerate(scalars)]
    if not op.backward:
        params += ["double momentum", "double eps"]
    body = Body(op, source_lines)
    loads = {k: f"in{k}[o]" for k in range(NORM_INPUTS, op.inputs)}
    w = Writer("  ")
    dims = "{n0, n1, n2, interleaved != 0}"
    with w.block(*wrapped(f'extern "C" void {op.kernel_name}_kernel', params, " {")):
        if op.backward:
            items = [dims, "in0", "in1", "in2", "mean", "rstd", "out0", "out1", "out2"]
            with lambda_call(w, f"ts_batch_norm_train_backward<{t}>", items,
                             ["int64_t o", "int64_t c", f"{t} a0", "auto store"], after=f" TS_INLINE -> {t}"):
                stores = {0: f"const {t} gy"} | {k: f"if (store) out{2 + k}[o]" for k in range(1, len(op.results))}
                body.statements(w, loads, "o", stores=stores)
                w.line("return gy;")
        else:
            n = len(op.results)
            items = [dims, "in0", "in1", "in2", "in3", "in4", "momentum", "eps", f"out{n}", f"out{n + 1}"]
            with lambda_call(w, f"ts_batch_norm_train<{t}>", items, ["int64_t o", "int64_t c", f"{t} a0"],
                             after=" TS_INLINE"):
                body.statements(w, loads, "o")
    return "\n".join(joined_declarations(w.lines)) + "\n"


def cpp_launcher(w: Writer, op: kernel_ops.BatchNormChainOp, suffix: str) -> None:
    """`<name>(dims, in0, ...)`: dims (N, C, S, interleaved) as the runtime read them off x;
    allocates the outputs (x's layout, `empty_like`) and calls the kernel."""
    dtype = op.results[0].type.dtype  # type: ignore[union-attr]
    channel = f"torch.empty(n1, dtype=torch.{dtype})"
    n_scalars = len(op.scalar_inputs)
    if op.backward:
        tensors = ["in0", "in1", "in2", "mean", "rstd", *(f"in{k}" for k in range(NORM_INPUTS, op.inputs))]
        outs = ["torch.empty_like(in0)", channel, channel] + ["torch.empty_like(in0)"] * (len(op.results) - 1)
        scalars = [f"s{k}" for k in range(n_scalars)]
    else:
        tensors = [f"in{k}" for k in range(op.inputs)]
        outs = ["torch.empty_like(in0)"] * len(op.results) + [channel, channel]
        scalars = [f"s{k}" for k in range(n_scalars)] + ["momentum", "eps"]
    count = len(outs)
    w.line(f"def {op.kernel_name}{suffix}(dims, {', '.join(tensors + scalars)}) -> tuple[{', '.join(['Tensor'] * count)}]:")
    with w.indent():
        w.line("n0, n1, n2, interleaved = dims")
        w.line(f"return _lib.{op.kernel_name}_kernel(n0, n1, n2, interleaved, {', '.join(outs + tensors + scalars)})")


__all__ = ["cpp_kernel", "cpp_launcher"]

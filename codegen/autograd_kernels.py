"""The lines of a compiled module that bind each group of pointwise ops autograd records to
its kernels (ir/passes/autograd_kernels.py, runtime/autograd_kernels.py): after the functions,
since each names its group's torch ops, a function of the module."""

from __future__ import annotations

from codegen.names import function_name
from codegen.writer import Writer
from ir.core.helpers import AUTOGRAD
from ir.kernel import ops as kernel_ops


def _tuple_text(items: tuple) -> str:
    return f"({items[0]!r},)" if len(items) == 1 else repr(tuple(items))


def emit_autograd_functions(w: Writer, groups: list[kernel_ops.AutogradKernelOp]) -> None:
    """`<name> = _autograd.Pointwise(<forward>, <backward>, <eager>, grads=..., depends=...)`
    (and `partial=(<backward without the arguments' gradients>, its inputs)`), once per name; a
    group a batch norm heads, `<name> = _autograd.BatchNorm(<forward>, <backward>, <eager>,
    others=..., depends=...)`."""
    done: set[str] = set()
    w.blank(2)
    w.line("# Each group of pointwise ops that autograd records: its forward kernel, its backward kernel")
    w.line("# and its torch ops, for a backward that is itself recorded (runtime/autograd_kernels.py).")
    for k in groups:
        name = k.kernel_name
        if name in done:
            continue
        done.add(name)
        depends = "(" + ", ".join(_tuple_text(d) for d in k.depends) + ("," if len(k.depends) == 1 else "") + ")"
        if k.batch_norm:  # (x, weight, bias, the running statistics, then the other tensors)
            w.line(f"{name} = {AUTOGRAD.alias}.BatchNorm({k.forward.kernel_name}, {k.backward.kernel_name}, "
                   f"{function_name(k.eager)}, others={k.inputs - 5}, depends={depends})")
            continue
        partial = k.partial_backward
        tail = "" if partial is None else f", partial=({partial.kernel_name}, {_tuple_text(k.partial)})"
        w.line(f"{name} = {AUTOGRAD.alias}.Pointwise({k.forward.kernel_name}, {k.backward.kernel_name}, "
               f"{function_name(k.eager)}, grads={_tuple_text(k.grads)}, depends={depends}{tail})")

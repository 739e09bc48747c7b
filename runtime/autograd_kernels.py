"""Fused pointwise kernels that autograd records (ir/passes/autograd_kernels.py): one
`torch.autograd.Function` for every group, driven by the group's `Pointwise` object, which a
compiled module binds once per group:

    gates_autograd = _autograd.Pointwise(gates, gates_backward, LSTM_forward_gates, grads=(0, 1, 2),
                                         depends=((0, 1), (0, 1, 2)))

and calls like a kernel's launcher (`h, c = gates_autograd(i, f, c)`). The forward runs the
forward kernel and saves the group's inputs alone (autograd's version counters then raise, as
for eager, where one is written before backward; the compiler forms no group where that could
differ from eager); the backward runs the backward kernel, which computes the group's values
again from the inputs and gives the gradient of each input at the kernel's iteration shape,
summed here to the input's own shape (a broadcast input), and returned only for the inputs
that need one; where no argument of the compiled function needs one, a second backward kernel
that does not compute those (`partial`) runs instead. A backward that autograd records (`create_graph=True`: a gradient of a gradient) runs the
group's torch ops (`eager`) instead and differentiates them, so it is recorded as eager's is.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
from torch import Tensor


class Pointwise:
    """One group: its forward and backward kernel launchers and its torch ops. `grads`: the
    tensor inputs the backward kernel gives gradients of, in its results' order; `depends`:
    per output, those of them it is computed from (an output computed from no input that
    requires grad does not require grad, as in eager)."""

    __slots__ = ("forward", "backward", "eager", "grads", "depends", "partial")

    def __init__(self, forward: Callable[..., Any], backward: Callable[..., Any], eager: Callable[..., Any], *,
                 grads: tuple[int, ...], depends: tuple[tuple[int, ...], ...],
                 partial: tuple[Callable[..., Any], tuple[int, ...]] | None = None) -> None:
        self.forward, self.backward, self.eager = forward, backward, eager
        self.grads, self.depends = grads, depends
        self.partial = partial  # (a backward giving fewer gradients, the inputs it gives them of)

    def __call__(self, *args: Any) -> Any:
        fused_from = _gate.fused_from
        for a in args:
            if isinstance(a, Tensor) and a.numel() >= fused_from:
                return _Fused.apply(self, *args)
        return self.eager(*args)  # (small: eager's ops, which autograd records as eager's)


def _tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


class _Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group: Pointwise, *args: Any) -> Any:  # type: ignore[override]
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx.group, ctx.scalars = group, args[len(tensors):]
        ctx.save_for_backward(*tensors)
        out = group.forward(*args)
        need = ctx.needs_input_grad[1:]
        for o, inputs in zip(_tuple(out), group.depends):
            if not any(need[i] for i in inputs):
                ctx.mark_non_differentiable(o)
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple:
        group: Pointwise = ctx.group
        inputs = ctx.saved_tensors
        need = ctx.needs_input_grad[1:]
        result: list[Tensor | None] = [None] * (1 + len(need))
        wanted = [i for i in group.grads if need[i]]
        if not wanted:
            return tuple(result)
        if torch.is_grad_enabled():  # (create_graph: the gradient is recorded too, as eager's)
            outputs = _tuple(group.eager(*inputs, *ctx.scalars))
            pairs = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
            found = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in wanted], [g for _, g in pairs],
                                        create_graph=True, allow_unused=True)
            for i, g in zip(wanted, found):
                result[1 + i] = g if g is not None else torch.zeros_like(inputs[i])
            return tuple(result)
        backward, given = group.backward, group.grads
        if group.partial is not None and all(i in group.partial[1] for i in wanted):
            backward, given = group.partial  # (no argument of the function needs a gradient)
        full = _tuple(backward(*inputs, *grads, *ctx.scalars))
        for i, g in zip(given, full):
            if need[i]:
                shape = inputs[i].shape
                result[1 + i] = g if g.shape == shape else g.sum_to_size(shape)
        return tuple(result)


class _Gate:
    """Below `fused_from` elements in its largest tensor, a group runs its torch ops instead of
    its kernels: a custom autograd Function costs some 30 us more per call than eager's nodes of
    a two-op chain (its forward and backward run Python), which the bytes its kernels save repay
    from between 16k and 64k float32 elements (rnn_cell's add and tanh, forward and backward,
    one thread: slower than eager at 16k elements, faster at 64k; measured in turns on a loaded
    two-core host). Longer chains pay earlier: a simple bound, not a cost model."""

    fused_from = 32768


_gate = _Gate()


@contextlib.contextmanager
def fused_from(elements: int) -> Iterator[None]:
    """Groups of fewer elements run their torch ops, for the block (tests: 0, kernels always)."""
    saved, _gate.fused_from = _gate.fused_from, elements
    try:
        yield
    finally:
        _gate.fused_from = saved


class ForAutograd:
    """A COMPILED entry's code for the calls autograd records, compiled from an example as its
    specialisation is and beside it (`"Cell.forward": (Cell_forward_example,
    _autograd.ForAutograd(Cell_forward_autograd), Cell_forward)`): runtime/dispatch.py tries it
    for those calls before the generic code, and never for the others, which the kernels serve."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


__all__ = ["ForAutograd", "Pointwise", "fused_from"]

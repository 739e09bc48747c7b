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


def _recorded_grads(outputs: tuple, grads: tuple, inputs: list[Tensor]) -> list[Tensor]:
    """The gradients of `inputs` through the group's torch ops run again (`outputs`), recorded
    (create_graph: a gradient of a gradient, as eager's); zeros where an input is not used."""
    pairs = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
    found = torch.autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=True,
                                allow_unused=True)
    return [g if g is not None else torch.zeros_like(t) for g, t in zip(found, inputs)]


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
            for i, g in zip(wanted, _recorded_grads(outputs, grads, [inputs[i] for i in wanted])):
                result[1 + i] = g
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


class BatchNorm:
    """A group that a batch norm in train mode heads (`F.batch_norm(x, running_mean, running_var,
    weight, bias, True, momentum, eps)` and the pointwise ops on its result), called as
    `(x, weight, bias, running_mean, running_var, *others, *scalars, momentum, eps)`. The
    forward kernel computes the batch's statistics, moves the running ones and writes the
    outputs; it saves x, the weight, the batch's mean and 1 / sqrt(var + eps) and the other
    tensors (eager's batch norm saves x and the weight too). The backward kernel gives the
    gradients of x, weight, bias and the others. The kernels read x dense, row-major or
    channels-last, and every other tensor laid out as x: a call with another layout, with one
    value per channel (eager raises) or below `fused_from` elements runs the group's torch ops.
    `others`: how many tensors follow the running statistics; `depends`: per output, the inputs
    (x 0, weight 1, bias 2, the others from 5) it is computed from."""

    __slots__ = ("forward", "backward", "eager", "others", "depends")

    def __init__(self, forward: Callable[..., Any], backward: Callable[..., Any], eager: Callable[..., Any], *,
                 others: int, depends: tuple[tuple[int, ...], ...]) -> None:
        self.forward, self.backward, self.eager = forward, backward, eager
        self.others, self.depends = others, depends

    def __call__(self, x: Tensor, weight: Tensor, bias: Tensor, running_mean: Tensor, running_var: Tensor,
                 *rest: Any) -> Any:
        dims = channel_dims(x, rest[:self.others]) if x.numel() >= _gate.fused_from else None
        if dims is None:
            return self.eager(x, weight, bias, running_mean, running_var, *rest)
        return _NormFused.apply(self, dims, x, weight, bias, running_mean, running_var, *rest)


def channel_dims(x: Tensor, others: tuple = ()) -> tuple[int, int, int, int] | None:
    """(N, C, S, interleaved) of x as the batch-norm kernels read it ([N, C, S], S the product of
    the dims after the channels; interleaved: channels-last), or None where they cannot: not
    dense row-major nor channels-last, one value per channel, or another tensor laid out
    otherwise."""
    if x.dim() < 2 or x.numel() == 0:
        return None
    n, c = x.shape[0], x.shape[1]
    s = x.numel() // (n * c)
    if n * s <= 1:
        return None
    if x.is_contiguous():
        interleaved = s == 1
    elif x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) \
            or x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d):
        interleaved = True
    else:
        return None
    strides = x.stride()
    if any(o.stride() != strides for o in others):
        return None
    return n, c, s, int(interleaved)


class _NormFused(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, group: BatchNorm, dims: tuple, x: Tensor, weight: Tensor, bias: Tensor,  # type: ignore[override]
                running_mean: Tensor, running_var: Tensor, *rest: Any) -> Any:
        others = rest[:group.others]
        *outputs, mean, rstd = group.forward(dims, x, weight, bias, running_mean, running_var, *rest)
        ctx.save_for_backward(x, weight, bias, mean, rstd, *others)
        ctx.group, ctx.dims, ctx.rest = group, dims, rest
        need = ctx.needs_input_grad[2:]
        for o, inputs in zip(outputs, group.depends):
            if not any(need[i] for i in inputs):
                ctx.mark_non_differentiable(o)
        return tuple(outputs) if len(outputs) > 1 else outputs[0]

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple:
        group: BatchNorm = ctx.group
        x, weight, bias, mean, rstd, *others = ctx.saved_tensors
        need = ctx.needs_input_grad[2:]
        result: list[Tensor | None] = [None] * (2 + len(need))
        if not any(need):
            return tuple(result)
        inputs = [x, weight, bias, None, None, *others]
        if torch.is_grad_enabled():  # (create_graph: the gradient is recorded too, as eager's; throwaway running statistics)
            stats = [torch.zeros_like(mean), torch.ones_like(mean)]
            outputs = _tuple(group.eager(x, weight, bias, *stats, *others, *ctx.rest[group.others:]))
            wanted = [i for i, v in enumerate(inputs) if v is not None and need[i]]
            for i, g in zip(wanted, _recorded_grads(outputs, grads, [inputs[i] for i in wanted])):
                result[2 + i] = g
            return tuple(result)
        strides = x.stride()
        grads = tuple(g if g.stride() == strides else torch.empty_like(x).copy_(g) for g in grads)
        scalars = ctx.rest[group.others:-2]
        grad_x, grad_weight, grad_bias, *grad_others = group.backward(ctx.dims, x, weight, bias, mean, rstd, *others,
                                                                      *grads, *scalars)
        for i, g in enumerate([grad_x, grad_weight, grad_bias, None, None, *grad_others]):
            if g is not None and need[i]:
                result[2 + i] = g
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


__all__ = ["BatchNorm", "ForAutograd", "Pointwise", "channel_dims", "fused_from"]

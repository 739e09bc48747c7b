"""What a compiled call is passed, as its entry checks (runtime/guards.py) ask it: whether tensors
share memory (`no_overlap`), whether autograd records the call (`records_autograd`).

Compiled code computes writes into its inputs out of place and copies the results back at the
end, so a read of another input (or buffer) that shares memory with a written one would not see
the write. `no_overlap` is the entry check for that: it fails when memory may be shared, and the
call runs eagerly. Generated modules call it as `_guards.no_overlap`.
"""

from __future__ import annotations

from typing import Any

import torch


def _spans(values: Any, out: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The byte ranges [first, last + 1) the tensors in `values` (tensors, None, nested tuples
    and lists) can touch; empty tensors touch nothing, sparse ones anything."""
    if isinstance(values, torch.Tensor):
        if values.layout != torch.strided:
            out.append((0, 1 << 64))  # no strides to tell: may share memory with anything
        elif values.numel():
            extent = sum((size - 1) * stride for size, stride in zip(values.shape, values.stride()))
            start = values.data_ptr()
            out.append((start, start + (extent + 1) * values.element_size()))
    elif isinstance(values, (tuple, list)):
        for v in values:
            _spans(v, out)
    return out


def no_overlap(written: Any, others: Any) -> bool:
    """Whether no tensor in `written` may share memory with another one of `written` or with a
    tensor in `others` (ranges of addresses, so interleaved views count as sharing)."""
    mine = _spans(written, [])
    rest = _spans(others, [])
    for i, (start, end) in enumerate(mine):
        for other_start, other_end in mine[i + 1:] + rest:
            if start < other_end and other_start < end:
                return False
    return True


def records_autograd(module: Any, args: Any, kwargs: dict) -> bool:
    """Whether autograd records a graph of this call: grad enabled, and a tensor argument (one in
    a list, tuple or dict too) or a parameter of `module` that requires grad."""
    if not torch.is_grad_enabled():
        return False
    return _requires_grad(args) or _requires_grad(kwargs.values()) or (
        module is not None and any(p.requires_grad for p in module.parameters()))


def _requires_grad(values: Any) -> bool:
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)):
            if _requires_grad(v):
                return True
        elif isinstance(v, dict) and _requires_grad(v.values()):
            return True
    return False

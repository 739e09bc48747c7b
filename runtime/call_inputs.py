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
from torch import nn

_grad_enabled = torch._C.is_grad_enabled


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
    if not _grad_enabled():
        return False
    return requires_grad_in(args) or bool(kwargs) and requires_grad_in(kwargs.values()) or (
        module is not None and parameters_require_grad(module))


def parameters_require_grad(module: Any) -> bool:
    """Whether a parameter of `module` (or of a submodule) requires grad. On the path of every
    call that autograd records: for an nn.Module it reads the `_parameters` and `_modules` dicts
    that `module.parameters()` walks, without that walk's generators, names and memo (4 us on a
    two-block ResNet stage, where the first parameter answers); a cycle of modules, which only
    the memo would stop, takes `parameters()` after all."""
    if not isinstance(module, nn.Module):
        return any(p.requires_grad for p in module.parameters())
    try:
        return _walk_parameters(module)
    except RecursionError:
        return any(p.requires_grad for p in module.parameters())


def _walk_parameters(module: nn.Module) -> bool:
    for p in module._parameters.values():
        if p is not None and p.requires_grad:
            return True
    for child in module._modules.values():
        if child is not None and _walk_parameters(child):
            return True
    return False


def requires_grad_in(values: Any) -> bool:
    """Whether a tensor in `values` (in a list, tuple or dict in it too) requires grad."""
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.requires_grad:
                return True
        elif isinstance(v, (list, tuple)):
            if requires_grad_in(v):
                return True
        elif isinstance(v, dict) and requires_grad_in(v.values()):
            return True
    return False

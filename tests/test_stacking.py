"""runtime/stacking.py: `stack_last(parts)` is `torch.stack(parts, -1)`: the same values, dtype
and shape, written by its C++ loop for CPU tensors of one shape and dtype, and by torch.stack
for anything else (with torch's errors). Hypothesis draws the parts: shapes, strides (slices,
transposes, broadcast views), dtypes of every element size, one to four parts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import stacking

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.uint8,
          torch.bool, torch.complex64]


def _native_or_skip() -> None:
    if stacking._native is None:
        pytest.skip("runtime/stacking.cpp is not built here: torch.stack runs")


def _same(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.is_contiguous()
    assert torch.equal(got, expected) or (got.is_floating_point() and torch.equal(got.isnan(), expected.isnan())
                                          and torch.equal(got.nan_to_num(), expected.nan_to_num()))


@st.composite
def strided_parts(draw):
    """Parts of one shape and dtype, each a view of its own base: a slice, a transpose or a
    broadcast, or the base itself."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 5), max_size=4))
    parts = []
    for seed in range(draw(st.integers(1, 4))):
        torch.manual_seed(seed)
        view = draw(st.sampled_from(["plain", "slice", "transpose", "broadcast"]))
        if view == "slice" and shape:
            base = torch.randn((*shape[:-1], shape[-1] * 2 + 1)).to(dtype)
            part = base[..., 1::2]
        elif view == "transpose" and len(shape) >= 2:
            base = torch.randn((*shape[:-2], shape[-1], shape[-2])).to(dtype)
            part = base.transpose(-1, -2)
        elif view == "broadcast" and shape:
            part = torch.randn((*shape[:-1], 1)).to(dtype).expand(*shape)
        else:
            part = torch.randn(tuple(shape)).to(dtype)
        parts.append(part)
    return tuple(parts)


@settings(max_examples=300, deadline=None)
@given(parts=strided_parts())
def test_stack_last_is_torch_stack_along_a_new_last_dim(parts) -> None:
    with torch.no_grad():
        _same(stacking.stack_last(parts), torch.stack(parts, -1))


def test_the_cpp_loop_runs_where_it_is_built(monkeypatch) -> None:
    """Parts it takes never reach torch.stack (a large result too, which OpenMP threads write)."""
    _native_or_skip()

    def refused(*args):
        raise AssertionError("torch.stack was called")

    for shape in ((1, 28, 28, 29), (8, 28, 28, 29), (3,), ()):
        parts = (torch.randn(shape), torch.randn(shape))
        expected = torch.stack(parts, -1)
        monkeypatch.setattr(torch, "stack", refused)
        got = stacking.stack_last(parts)
        monkeypatch.undo()
        _same(got, expected)


@pytest.mark.parametrize("case", ["shapes differ", "dtypes differ", "a list", "no parts", "grad", "complex128",
                                  "a subclass", "a negative view", "int64"])
def test_what_torch_stack_does_instead(case: str) -> None:
    """Anything but a tuple of plain strided CPU tensors of one shape and floating dtype, wanting
    no autograd graph, is torch.stack's: its result, or its error (a negative view's values are
    its data negated, which a copy of the bits would lose)."""
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    if case == "shapes differ":
        with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
            stacking.stack_last((a, torch.randn(3, 2)))
        return
    if case == "no parts":
        with pytest.raises((RuntimeError, IndexError)):
            stacking.stack_last(())
        return
    if case == "dtypes differ":
        parts = (a, b.double())
    elif case == "a list":
        parts = [a, b]
    elif case == "grad":
        parts = (a.requires_grad_(), b)
    elif case == "complex128":
        parts = (a.to(torch.complex128), b.to(torch.complex128))
    elif case == "a negative view":
        parts = (torch._neg_view(a), b)
    elif case == "int64":
        parts = (a.long(), b.long())
    else:
        parts = (torch.nn.Parameter(a), b)
    got = stacking.stack_last(parts)
    _same(got.detach(), torch.stack(parts, -1).detach())
    if case == "grad":
        got.sum().backward()
        assert torch.equal(a.grad, torch.ones(2, 3))


def test_without_the_cpp_loop_it_is_torch_stack(monkeypatch) -> None:
    """Where runtime/stacking.cpp cannot be built, `stack_last` is `torch.stack` itself."""
    monkeypatch.setattr(stacking, "_native", None)
    parts = (torch.randn(1, 4, 4, 3), torch.randn(1, 4, 4, 3))
    _same(stacking.stack_last(parts), torch.stack(parts, -1))

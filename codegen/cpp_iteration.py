"""How a C++ kernel walks its iteration space: the dims each input moves along (and their
stride parameters), an input's offset at a row, and the call that runs a row lambda on every row
of the outer dims (`ts_rows_of`; a rank-1 kernel's elements in parts, `ts_chunks_of`), on one
thread or each OpenMP thread's share."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from codegen.cpp_text import lambda_call
from codegen.writer import Writer
from ir.core.types import TensorType


def strided_dims(k: int, t: TensorType, shape: tuple) -> dict[int, str]:
    """The iteration dims where input `k` (of type `t`) moves (it is not broadcast there), each
    with its stride parameter: `in<k>_s<d>` for the tensor's own dim d (a lower-rank input, a
    per-channel scale of shape [C, 1, 1], numbers its dims from its first: `i1 * in0_s0`), as
    the runtime reads it off the tensor passed (`in0.stride(0)`). A kernel declares only these
    strides: it never reads the stride of a dim it broadcasts along."""
    rank, offset = len(shape), len(shape) - len(t.shape)  # type: ignore[arg-type]
    return {i: f"in{k}_s{i - offset}" for i in range(rank)
            if i >= offset and not (t.shape[i - offset] == 1 and shape[i] != 1)}  # type: ignore[index]


def offset_terms(k: int, strided: list[dict[int, str]], outer: list[int]) -> list[str]:
    """The terms of input `k`'s offset at the current row (`i1 * in0_s0`); a rank-1 kernel's
    elements start at `o`."""
    if not outer:
        return [f"o * {strided[k][0]}"] if 0 in strided[k] else []
    return [f"i{i} * {strided[k][i]}" for i in outer if i in strided[k]]


@contextmanager
def each_row(w: Writer, rank: int, row_strides: list[str], own: list[str] = []) -> Iterator[None]:
    """The statement that runs what is written inside (the row) on every row of the outer dims
    (`ts_rows_of`; a rank-1 kernel's elements in parts, `ts_chunks_of`), on the threads when the
    kernel is large enough. With `row_strides` (the tensors' strides along the row) the lambda
    takes `unit` first: true where every one of them is 1 (cpp_pointwise's `_steps`)."""
    inner = rank - 1
    head = ["{" + ", ".join(row_strides) + "}"] if row_strides else []
    params = ["auto unit"] if row_strides else []
    if rank == 1:
        with lambda_call(w, "ts_chunks_of", head + ["n0"], params + ["auto o", "auto end"]):
            yield
        return
    head += ["{" + ", ".join(f"n{i}" for i in range(inner)) + "}", f"n{inner}"]
    params += [f"auto i{i}" for i in range(inner)] + ["auto o"]
    with lambda_call(w, "ts_rows_of", head, params, own):
        yield


def flat_index(dims: list[int]) -> str:
    """The row-major index of the loop indices `dims` in the extents n<d>."""
    flat = ""
    for d in dims:
        flat = f"i{d}" if not flat else f"({flat}) * n{d} + i{d}"
    return flat


__all__ = ["strided_dims", "offset_terms", "each_row", "flat_index"]

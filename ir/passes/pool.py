"""Max pooling of channels-last tensors (kernel.pool) and adaptive average pooling of rows
(kernel.adaptive_avg_pool) by kernels of our own.

torch's CPU `max_pool2d` computes the index of every maximum and drops it, and its channels-last
loop is slow for channel counts that are not a multiple of its vector width. At batch 8, aten /
torch.compile / this kernel: squeezenet's 3x3/2 ceil-mode pools of 64x111x111 1.42 / 0.67 /
0.89 ms and of 128x55x55 0.94 / 0.24 / 0.27; shufflenet's 3x3/2 of 24x112x112 0.76 / 0.70 / 0.57.
Between convs the layout pass leaves the
pool's input as NHWC rows seen as NCHW (`rows.permute(0, 3, 1, 2)`), so here
`F.max_pool2d(rows.permute(0, 3, 1, 2), ...)` becomes `kernel.pool(rows).permute(0, 3, 1, 2)`:
a loop over the output rows, the channels innermost. The result is channels-last, as torch's is
for that input; a `.permute(0, 2, 3, 1)` of it (NHWC rows for the next conv as a `linear`) is
the kernel's output itself.

When the rows are the only output of a pointwise kernel that is a non-decreasing function of one
input (of the rows' shape) for fixed values of the others, which do not vary along H or W (a
bias add and a relu: `relu(max(x)) == max(relu(x))`, NaN propagating either way), the pool reads
that input and the kernel runs after it, on the pooled rows: squeezenet's first pool, after its
conv and relu, then reads the conv's output, and the relu touches a quarter of the elements
(squeezenet1_1 frozen at batch 8: 36.7 ms against 39.4 without this pass; torch.compile 36.9).

Only where every fact the kernel relies on is known: float dtypes, a CPU or CUDA tensor, static
H, W and output sizes, constant window settings with dilation 1 and padding at most half the
window (torch raises otherwise, and so still does), no indices, and rows that are a fresh
row-major tensor (a kernel's output, a GEMM's, a `new_empty` buffer), so that the input torch
sees is channels-last and the result's strides are torch's.

`F.adaptive_avg_pool1d(x, size)` of a float32/float64 CPU tensor of 2 or 3 dims becomes
kernel.adaptive_avg_pool whatever the size: the kernel reads it at run time (a loop over a list
of sizes keeps its loop). torch's CPU op goes through adaptive_avg_pool2d, which costs 3 to 8 us
at (1, 16, 56) and 5 to 47 us at (8, 16, 56) against the kernel's 2 to 4 and 4 to 14 (sizes 1 to
56, one thread); a size of 1, which torch computes as a `mean` (its own order of sums), may
differ from it in the last bit.
"""

from __future__ import annotations

from typing import Any

from ir.core import ops
from ir.core.graph import Block, Operation, Program, Value
from ir.core.types import INT, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.names import KernelNamer
from ir.kernel.primitives import op_name
from ir.passes.canonicalize import writes_in
from ir.passes.conv_choices import pair
from ir.passes.emitter import Facts, Unsupported, bind
from ir.passes.fuse import fresh_row_major
from ir.passes.layout import TO_NCHW, TO_NHWC, replace_by_rows
from ir.passes.views import permutation
from ir.shapes.values import UNKNOWN

DTYPES = frozenset({"float32", "float64", "bfloat16", "float16"})


def pool_kernels(program: Program) -> None:
    facts = Facts()
    for func in program.funcs:
        # (named from the source as fuse names its kernels: `pool`, `max_pool2d`)
        namer = KernelNamer(program.source_lines, (k.kernel_name for k in func.walk() if isinstance(k, kernel_ops.Kernel)))
        for op in list(func.walk()):
            if op.parent is None:
                continue
            if op_name(op) == "max_pool2d" and op.attributes.get("aten") == "aten::max_pool2d":
                window = _window(op, facts)
                if window is not None:
                    _rewrite(op, window, namer.take([op], ["max_pool2d"]), facts)
            elif op_name(op) == "adaptive_avg_pool1d" and op.attributes.get("aten") == "aten::adaptive_avg_pool1d":
                _adaptive_avg_pool(op, namer, facts)


def _adaptive_avg_pool(op: Operation, namer: KernelNamer, facts: Facts) -> None:
    """`F.adaptive_avg_pool1d(x, size)` as kernel.adaptive_avg_pool, where x is a 2-d or 3-d
    float32/float64 CPU tensor and the size an int (known or not: the kernel reads it at run
    time). CUDA tensors keep torch's op: only the C++ kernel was measured against it (its Triton
    twin serves TORCHSCRIBE_BACKEND=triton)."""
    try:
        call = bind(op, facts)
        x = call.tensor("self")
    except Unsupported:
        return
    t, r = x.type, op.result.type
    if not (isinstance(t, TensorType) and isinstance(r, TensorType) and t.dtype in ("float32", "float64")
            and t.device == "cpu" and r.device == "cpu" and r.dtype == t.dtype and t.shape is not None
            and r.shape is not None and len(t.shape) == len(r.shape) in (2, 3)):
        return
    size = call.const("output_size")
    if isinstance(size, tuple) and len(size) == 1:
        size = size[0]
    if size is UNKNOWN:
        size = call.operands.get("output_size")
        if not (isinstance(size, Value) and size.type == INT):
            return  # (a list or tuple of one int not known here)
    elif type(size) is not int:
        return
    if not isinstance(size, Value):
        constant = ops.ConstantOp([], [INT], {"value": size}, loc=op.loc)
        op.parent.insert_before(op, constant)  # type: ignore[union-attr]
        size = constant.result
    kernel = kernel_ops.AdaptiveAvgPoolKernelOp([x, size], [r], {"name": namer.take([op], ["adaptive_avg_pool1d"])},
                                                loc=op.loc)
    op.parent.insert_before(op, kernel)  # type: ignore[union-attr]
    kernel.result.name = op.result.name
    op.result.replace_all_uses_with(kernel.result)
    op.erase()


def _pair(value: Any) -> tuple[int, int] | None:
    """A window setting (an int or a pair) as a pair of ints; None otherwise."""
    two = pair(value)
    return two if two is not None and all(type(n) is int for n in two) else None  # type: ignore[return-value]


def _window(op: Operation, facts: Facts) -> dict[str, Any] | None:
    """kernel.pool's attributes for this `max_pool2d`, None where it does not apply."""
    try:
        call = bind(op, facts)
        x = call.tensor("self")
    except Unsupported:
        return None
    if _rows(x) is None:
        return None

    def setting(name: str, default: Any) -> Any:
        return call.const(name) if name in call.args else default

    size, padding, dilation = (_pair(setting(n, d)) for n, d in (("kernel_size", None), ("padding", 0), ("dilation", 1)))
    stride = setting("stride", None)
    stride = size if stride in (None, ()) else _pair(stride)
    if size is None or stride is None or padding is None or dilation != (1, 1):
        return None
    if min(size) < 1 or min(stride) < 1 or min(padding) < 0 or any(2 * p > k for p, k in zip(padding, size)):
        return None  # (torch raises)
    t, r = x.type, op.result.type
    assert isinstance(t, TensorType)
    if not (isinstance(r, TensorType) and r.shape is not None and len(r.shape) == 4 and t.shape is not None
            and all(type(n) is int and n > 0 for n in (*t.shape[2:], *r.shape[2:]))):
        return None
    return {"kernel_size": size, "stride": stride, "padding": padding}


def _rows(x: Value) -> Value | None:
    """The fresh row-major NHWC tensor that `x` is a `.permute(0, 3, 1, 2)` of, if it is one of
    a float dtype on the CPU or a CUDA device."""
    owner = x.owner
    if not (isinstance(owner, Operation) and op_name(owner) == "permute"
            and permutation(owner.operands[1:], owner.attributes.get("kwnames", ())) == TO_NCHW):
        return None
    rows = owner.operands[0]
    t = rows.type
    if not (isinstance(t, TensorType) and t.dtype in DTYPES and t.device in ("cpu", "cuda") and t.shape is not None
            and len(t.shape) == 4 and fresh_row_major(rows)):
        return None
    return rows


# Ops f(x, c...) that never decrease as x grows (c: values that do not depend on x), and
# propagate NaN in x: applied after the maximum of a window, they give the maximum of f over it.
_MONOTONE = frozenset({"add", "clamp_min", "clamp_max", "clamp", "maximum", "minimum", "relu", "hardtanh"})


def _monotone_in(kernel: kernel_ops.KernelOp, j: int) -> bool:
    """Whether the kernel's one output is a non-decreasing function of the element of its input
    j alone, for fixed values of the others (numbers, tensors constant over H and W)."""
    rising = {kernel.body.args[j]}
    for inner in kernel.body.ops:
        used = [k for k, v in enumerate(inner.operands) if v in rising]
        if isinstance(inner, ops.YieldOp):
            return used == [0] and len(inner.operands) == 1
        if not used:
            continue
        name, n = op_name(inner), len(inner.operands)
        if inner.attributes.get("kwnames") or len(inner.results) != 1 or len(used) != 1:
            return False
        k = used[0]
        if name in _MONOTONE and (k == 0 or (name in ("add", "maximum", "minimum") and n == 2)):
            pass
        elif name in ("sub", "div") and k == 0 and n == 2 and (name == "sub" or _positive(inner.operands[1])):
            pass
        elif name == "mul" and n == 2 and _positive(inner.operands[1 - k]):
            pass
        else:
            return False
        rising.add(inner.result)
    return False


def _positive(v: Value) -> bool:
    owner = v.owner
    value = owner.attributes.get("value") if isinstance(owner, ops.ConstantOp) else None
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _commuted(rows: Value, permute: Operation, pool: Operation) -> tuple[kernel_ops.KernelOp, int] | None:
    """(kernel, j) when `rows` is the only output of a pointwise kernel in the pool's block, read
    only through `permute`, that is a non-decreasing function of its input j (of rows' shape and
    dtype) and reads nothing else that varies along H or W, with nothing between it and the pool
    that may write: the pool can read input j and the kernel run on the pooled rows, a quarter
    of the elements for a 3x3/2 window."""
    kernel = rows.owner
    if not (isinstance(kernel, kernel_ops.PointwiseKernelOp) and len(kernel.results) == 1 and not kernel.into
            and len(rows.uses) == 1 and len(permute.result.uses) == 1 and kernel.parent is pool.parent):
        return None
    block = pool.parent
    assert isinstance(block, Block)
    between = block.ops[block.ops.index(kernel) + 1:block.ops.index(pool)]
    if any(writes_in(o) for o in between):
        return None  # (the kernel and the pool would read its inputs after the write)
    t = rows.type
    assert isinstance(t, TensorType) and t.shape is not None
    found = None
    for j, v in enumerate(kernel.operands[:kernel.inputs]):
        u = v.type
        assert isinstance(u, TensorType) and u.shape is not None
        if u.shape == t.shape and u.dtype == t.dtype and found is None and _monotone_in(kernel, j):
            found = j
        elif any(len(u.shape) >= k and u.shape[-k] != 1 for k in (2, 3)):
            return None  # (varies along H or W, when it is not the input read)
    return None if found is None else (kernel, found)


def _rewrite(op: Operation, window: dict[str, Any], name: str, facts: Facts) -> None:
    permute = op.operands[0].owner
    rows = _rows(op.operands[0])
    assert rows is not None and isinstance(rows.type, TensorType) and isinstance(permute, Operation)
    out = op.result.type
    assert isinstance(out, TensorType) and out.shape is not None
    t = rows.type
    pooled_type = TensorType(t.dtype, tuple(out.shape[i] for i in TO_NHWC), t.device)
    commuted = _commuted(rows, permute, op)
    read = rows if commuted is None else commuted[0].operands[commuted[1]]
    kernel = kernel_ops.PoolKernelOp([read], [pooled_type], {"name": name, **window}, loc=op.loc)
    op.parent.insert_before(op, kernel)  # type: ignore[union-attr]
    pooled = kernel.result
    if commuted is not None:  # the pointwise kernel moves after the pool, onto its output
        pointwise, j = commuted
        block = op.parent
        block.ops.remove(pointwise)  # type: ignore[union-attr]
        pointwise.parent = None
        block.insert_before(op, pointwise)  # type: ignore[union-attr]
        pointwise.set_operand(j, pooled)
        rows.type = pooled_type
        pooled = rows
    pooled.name = op.result.name
    replace_by_rows(op.result, pooled, op, facts)
    op.erase()
    if commuted is not None:
        permute.erase()  # (of the kernel's output before it moved)


__all__ = ["pool_kernels"]

"""Linear layers with their weight in oneDNN's layout, made once, in a frozen program.

torch's CPU `linear` of float32 calls MKL's GEMM, which packs the weight into its own blocks on
every call. oneDNN's linear with a weight reordered once into its layout
(`torch.ops.mkldnn._reorder_linear_weight`) ran
the transformer layers of the zoo faster on the machine of benchmarks/RESULTS.md (two threads,
best of 7x100 calls, packed / plain time): vit_b_16's MLP (768->3072) at 197 rows 0.66x, at
1576 rows 0.85x; nn.TransformerEncoderLayer's 256->1024 at 64 rows 0.60x to 0.79x; a
1280->1000 classifier at one row 0.62x. Its call costs about 15 us more, so a small product is
slower packed (96->384 at one row 3.8x, 128->128 at 196 rows 1.19x), and inside the CNNs at
batch 1, where small 1x1 convs run as `linear` (ir/passes/layout.py), packing them all made
efficientnet_b0 13.68 against 13.35 ms (480->80 at 196 rows alone: 1.39x). So a linear is packed
when its weight has at least 2**18 elements (reading it dominates, at any number of rows), or at
least 2**16 and the product at least 2**22 multiply-adds for the rows the input is known to
have (a symbolic dimension counts as one). With that rule efficientnet_b0, regnet_y_400mf and
shufflenet_v2 ran as fast as without the pass (12.62 / 12.61, 12.12 / 12.09, 7.05 / 7.14 ms), and
swin_t at batch 1 65.6 against 72.0 ms, nn.TransformerEncoderLayer 0.90 against 0.99 ms.

So `F.linear(x, w, b)` of float32 CPU tensors, whose weight is a parameter (or a view of one,
or a tensor computed once, ir/passes/hoist.py), becomes `_prepacked.linear(x, w, b)`
(runtime/prepacked.py), which reorders the weight on the first call and again when it is
another tensor or has been written. Only a frozen program may do this: a write through `p.data`
would go unseen, the freeze contract. Runs before `plan`, which gives the large results of the
GEMMs left a dead tensor's storage (`out=`, which oneDNN's linear lacks): packed with a fresh
result ran faster than planned into mapped storage, A/B in one process at batch 1 / 8 (ms):
vit_b_16 179 / 195 at batch 1, convnext_tiny 55 / 59 and 436 / 452, swin_t 63 / 64 and 514 / 526.
Values differ from eager's by rounding only (another GEMM's order of sums).

Those figures are oneDNN's, on an AMD EPYC. On an Intel Xeon MKL's GEMM with the weight packed
once for the call's rows is faster at most sizes, and oneDNN at some (96->384 at 3136 rows), so
the runtime measures which of oneDNN, MKL packed and torch's linear runs each kind of call fastest
on the machine, on its first call (runtime/choices.py); this pass only says which linears may be
packed at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from ir.core import ops
from ir.core.graph import Operation, Program, Value
from ir.core.helpers import PACKED_LINEAR
from ir.core.types import TensorType
from ir.kernel.primitives import op_name
from ir.passes.conv_choices import made_once
from ir.passes.emitter import Emitter, Facts, Unsupported, bind

HELPER = PACKED_LINEAR.name
MIN_WEIGHT = 2**18
MIN_WEIGHT_FOR_ROWS = 2**16
MIN_PRODUCT = 2**22


def pack_linears(program: Program) -> None:
    for op, facts, (x, weight, bias) in frozen_linears(program):
        _pack(op, facts, x, weight, bias)


def frozen_linears(program: Program) -> Iterator[tuple[Operation, Facts, tuple[Value, Value, Value | None]]]:
    """Each `F.linear(x, weight, bias)` of a frozen program (none in another) with its input,
    weight and bias (None when certainly None), as long as it is still in the program."""
    if not program.frozen:
        return
    facts = Facts()
    for func in program.funcs:
        for op in list(func.walk()):
            if op.parent is not None and op_name(op) == "linear" and isinstance(op, ops.TorchCallOp):
                try:
                    call = bind(op, facts)
                    args = call.tensor(), call.tensor("weight"), call.optional_tensor("bias")
                except Unsupported:
                    continue
                yield op, facts, args


def _pack(op: Operation, facts: Facts, x: Value, weight: Value, bias: Value | None) -> None:
    if not (_float32_cpu(x) and _float32_cpu(weight) and (bias is None or _float32_cpu(bias))
            and len(op.results) == 1 and worth_packing(x.type, weight.type) and made_once(weight)):  # type: ignore[arg-type]
        return
    e = Emitter(op, facts)
    packed = e.builtin(HELPER, op.result.type, x, weight, e.value(None) if bias is None else bias)
    packed.name = op.result.name
    e.commit()
    op.result.replace_all_uses_with(packed)
    op.erase()


def worth_packing(x: TensorType, weight: TensorType) -> bool:
    """A weight of known [N, K] sizes large enough, or whose product with the input's rows is,
    to pay for oneDNN's call."""
    if weight.shape is None or len(weight.shape) != 2 or not all(type(d) is int for d in weight.shape):
        return False
    n, k = weight.shape
    if n * k >= MIN_WEIGHT:
        return True
    if n * k < MIN_WEIGHT_FOR_ROWS or x.shape is None or not x.shape:
        return False
    return known_rows(x) * n * k >= MIN_PRODUCT


def known_rows(x: TensorType) -> int:
    """How many rows (all sizes but the last) a tensor of type x has at least: a symbolic size
    counts as one."""
    assert x.shape is not None
    return math.prod(d for d in x.shape[:-1] if type(d) is int)


def _float32_cpu(v: Value) -> bool:
    return isinstance(v.type, TensorType) and v.type.dtype == "float32" and v.type.device == "cpu"


__all__ = ["frozen_linears", "known_rows", "pack_linears", "worth_packing", "HELPER"]

"""A per-channel scale of a linear layer's input folded into its weight, in a frozen program.

A squeeze-and-excitation block ends with `linear(x * s, w)` once `layout` has made its 1x1 conv
a `linear` of NHWC rows: the gate `s` holds one value per input channel, the same for every row
(`[1, ..., 1, C]`: one image, or one gate for all). That is `linear(x, w * s)`: scaling the
`N x C` weight in place of the `rows x C` input saves writing the scaled input and reading it
again, which pays when the input has more rows than the weight (`rows > N`; the scaled weight is
written and read instead). efficientnet_b0 at batch 1 folds eleven of its sixteen gates (of
12544 to 196 rows); its last five, of 49 rows before 192 and 320 outputs, stay (mobilenet_v3_small
folds six, regnet_y_400mf four).

The scaled weight is `(w * s).reshape(N, C)`: `w` broadcast against `s` as it is, so that `fuse`
makes one kernel of the gate (a sigmoid of the excitation, computed once per channel) and the
product. It is made on each call, so `pack` leaves that linear to torch (`made_once`); a scale
that is itself made once (a module's tensor) is left as it is, so that a large weight stays
packable.

Frozen only: values differ from eager's by rounding, `x (s w)` against `(x s) w`, as folding a
batch norm into a conv's weight (ir/passes/freeze.py) does, and where one of the products
overflows and the other does not (`x s` beyond float's range with `s w` within it).
"""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import PURE, Operation, Program, Value
from ir.core.types import TensorType
from ir.passes.conv_choices import made_once
from ir.passes.emitter import Emitter, Facts, Unsupported
from ir.passes.pack import frozen_linears, known_rows


def fold_input_scales(program: Program) -> None:
    for op, facts, (scaled, weight, bias) in frozen_linears(program):
        _fold(op, facts, scaled, weight, bias)


def _fold(op: Operation, facts: Facts, scaled: Value, weight: Value, bias: Value | None) -> None:
    found = _input_and_scale(scaled, op)
    if found is None or len(op.results) != 1:
        return
    x, scale = found
    if made_once(scale):
        return  # (a module's scale: scaling the weight once would keep it packable; not done here)
    w = weight.type
    assert isinstance(w, TensorType)
    if not (w.shape is not None and len(w.shape) == 2 and all(type(d) is int for d in w.shape)
            and w.dtype == scale.type.dtype and w.device == scale.type.device  # type: ignore[union-attr]
            and w.shape[1] == scale.type.shape[-1] and known_rows(x.type) > w.shape[0]):  # type: ignore[union-attr]
        return
    e = Emitter(op, facts)
    try:
        scaled_weight = e.method("reshape", e.binary("*", weight, scale), *w.shape)
        scaled_weight.name = "gated_weight"  # (a statement of its own in the generated code)
        out = e.call(op.attributes["callee"], x, scaled_weight, *([] if bias is None else [bias]))
    except Unsupported:
        e.discard()
        return
    e.commit()
    out.type = op.result.type
    out.name = op.result.name
    op.result.replace_all_uses_with(out)
    op.erase()
    mul = scaled.owner
    # the weight's product and its reshape carry the source line of the product they replace
    # (`return scale * input`), which the generated code prints above them
    for made in (scaled_weight.owner, scaled_weight.owner.operands[0].owner):  # type: ignore[union-attr]
        made.loc = mul.loc  # type: ignore[union-attr]
    if isinstance(mul, Operation) and not scaled.uses:
        mul.erase()


def _input_and_scale(scaled: Value, linear: Operation) -> tuple[Value, Value] | None:
    """(x, s) when `scaled` is `x * s` (or `s * x`), used by `linear` alone, in its block, with `s`
    one value per channel of x's last dim, x of the product's type (so `s` broadcasts to x, never
    x to `s`) and of a floating dtype."""
    mul = scaled.owner
    if not (isinstance(mul, ops.BinaryOp) and mul.attributes["op"] == "*" and mul.has_trait(PURE)
            and mul.parent is linear.parent and len(scaled.uses) == 1):
        return None
    t = scaled.type
    if not (isinstance(t, TensorType) and t.shape and t.dtype in ("float32", "float64", "float16", "bfloat16")):
        return None
    for x, s in (mul.operands, reversed(mul.operands)):
        st = s.type
        if (x.type == t and isinstance(st, TensorType) and st.shape and st.dtype == t.dtype
                and st.device == t.device and len(st.shape) <= len(t.shape)
                and st.shape[-1] == t.shape[-1] and type(st.shape[-1]) is int
                and all(d == 1 for d in st.shape[:-1])):
            return x, s
    return None


__all__ = ["fold_input_scales"]

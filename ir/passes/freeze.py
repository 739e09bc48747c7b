"""Batch norm folded into the convolution before it, in a frozen program (`script(model, ...,
freeze=True)`, `Program.frozen`).

In eval mode `batch_norm(conv(x, w, b), mean, var, gamma, beta, eps=eps)` is `conv(x, w', b')`
with `w' = w * s` per output channel and `b' = (b - mean) * s + beta`, `s = gamma / sqrt(var +
eps)`: one pass over the conv's output fewer (torch.jit.freeze and Inductor's freezing fold it
too). The folded weights are computed at run time from the parameters, once, by
`runtime.prepacked.fold_batch_norm`, which computes them again when a parameter changes; only a
frozen program may do this, since a write through `p.data` would go unseen.

A conv is folded when the layout pass will run it with its weight in oneDNN's layout
(`conv_choices.will_pack`), where the folded bias costs nothing in oneDNN's call, and its
result's only use is the input of a `batch_norm` with `training=False`, running statistics and
a constant eps, in the same block, with parameters of the conv weight's dtype and device, made
once (module tensors, `conv_choices.made_once`: one made on each call would be folded on each
call).
Other convs keep their batch norm, which the pointwise kernel after the conv computes for
almost nothing: folded, their plain oneDNN convs with a bias ran slower than without (in
mobilenet_v3_small's profile, 10 to 30% a conv), and each fold is a call that checks its sources.
At batch 1, A/B in one process (folding every conv, the packed ones, not frozen):
mobilenet_v3_small 4.85, 4.59 (none packed there), 4.61 ms; regnet_y_400mf 12.78, 12.55, 12.19
ms; efficientnet_b0 13.59, 13.20, 13.24 ms.
"""

from __future__ import annotations

from ir.core import ops
from ir.core.graph import PURE, Operation, Program, Value
from ir.core.types import TensorType, TupleType
from ir.kernel.primitives import op_name
from ir.passes.conv_choices import FOLDED_WEIGHTS, made_once, will_pack
from ir.passes.emitter import Emitter, Facts, Unsupported, bind

HELPER = FOLDED_WEIGHTS


def fold_batch_norms(program: Program) -> None:
    if not program.frozen:
        return
    facts = Facts()
    for func in program.funcs:
        for op in list(func.walk()):
            if (op.parent is not None and op_name(op) == "conv2d" and op.has_trait(PURE) and len(op.results) == 1
                    and will_pack(op, facts)):
                _fold(op, facts)


def _fold(conv_op: Operation, facts: Facts) -> None:
    bn_op = _the_batch_norm_after(conv_op)
    if bn_op is None:
        return
    try:
        conv, bn = bind(conv_op, facts), bind(bn_op, facts)
        weight, bias = conv.tensor("weight"), conv.optional_tensor("bias")
        stats = bn.tensor("running_mean"), bn.tensor("running_var")
        gamma, beta = bn.optional_tensor("weight"), bn.optional_tensor("bias")
        eps = bn.number("eps")
        if bn.flag("training") or bn.tensor() is not conv_op.result:
            return
    except Unsupported:
        return
    w = weight.type
    params = [t for t in (bias, *stats, gamma, beta) if t is not None]
    if not (isinstance(w, TensorType) and w.shape and type(w.shape[0]) is int
            and all(_per_channel(t, w) and made_once(t) for t in params)):
        return  # (a parameter made on each call would be folded on each call)
    e = Emitter(bn_op, facts)  # (after the batch norm's operands, which follow the conv)
    bias_type = TensorType(w.dtype, (w.shape[0],), w.device)
    folded = e.builtin(HELPER, TupleType((w, bias_type)), weight, _or_none(e, bias), *stats,
                       _or_none(e, gamma), _or_none(e, beta), float(eps))
    folded.name = "folded"
    new_weight = e._add(ops.GetItemOp([folded, e.value(0)], [w]))
    new_bias = e._add(ops.GetItemOp([folded, e.value(1)], [bias_type]))
    try:
        out = e.call(conv_op.attributes["callee"], conv.tensor(), new_weight, new_bias,
                     *(conv.arg(n) for n in ("stride", "padding", "dilation", "groups")))
    except Unsupported:
        e.discard()
        return
    e.commit()
    out.type = bn_op.result.type
    out.name = bn_op.result.name or conv_op.result.name
    bn_op.result.replace_all_uses_with(out)
    bn_op.erase()
    conv_op.erase()


def _the_batch_norm_after(conv: Operation) -> Operation | None:
    """The batch_norm that is the only use of the conv's result, in the conv's block."""
    uses = conv.result.uses
    if len(uses) != 1:
        return None
    user = uses[0].op
    if not (isinstance(user, ops.TorchCallOp) and op_name(user) == "batch_norm" and user.parent is conv.parent
            and user.has_trait(PURE) and len(user.results) == 1):
        return None
    return user


def _per_channel(t: Value, weight: TensorType) -> bool:
    """A tensor of one value per output channel, of the weight's dtype and device."""
    return (isinstance(t.type, TensorType) and t.type.dtype == weight.dtype and t.type.device == weight.device
            and t.type.shape == (weight.shape[0],))  # type: ignore[index]


def _or_none(e: Emitter, t: Value | None) -> Value:
    return e.value(None) if t is None else t


__all__ = ["fold_batch_norms", "HELPER"]

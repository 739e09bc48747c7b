"""How each 2-d convolution runs on the CPU, for the layout pass (ir/passes/layout.py) and the
passes of a frozen program (freeze, pack, scales): whether oneDNN runs it faster on a channels-last
input (`prefers_channels_last`), whether a frozen program keeps its weight in oneDNN's layout
(`packable`, `will_pack`) or leaves the choice to the runtime (`measured_1x1`), whether a 1x1 conv
of one image is a `linear` of the NHWC rows (`as_linear_call`), and whether a weight is the same
tensor on every call (`made_once`). The measurements behind each bound are beside it.
"""

from __future__ import annotations

from ir.core import helpers, ops
from ir.core.graph import PURE, AliasOf, Operation, Value
from ir.core.types import ModuleType, TensorType
from ir.kernel.primitives import op_name
from ir.passes.emitter import Call, Facts, Unsupported, bind

DTYPES = frozenset({"float32", "float64", "bfloat16"})
PACKED_CONV = helpers.PACKED_CONV.name
CHANNELS_LAST_WEIGHT = helpers.CHANNELS_LAST_WEIGHT.name
FOLDED_WEIGHTS = helpers.FOLDED_WEIGHTS.name  # (ir/passes/freeze.py's)
# helpers whose result is made once from their tensor operands and cached against them
MADE_ONCE_CALLS = frozenset({CHANNELS_LAST_WEIGHT, FOLDED_WEIGHTS})


def conv2d_on_cpu(op: Operation) -> bool:
    """A pure 2-d convolution of a batched floating CPU tensor of known shape."""
    if op_name(op) != "conv2d" or not op.has_trait(PURE) or len(op.results) != 1 or not op.operands:
        return False
    x = op.operands[0].type
    return (isinstance(x, TensorType) and x.dtype in DTYPES and x.device == "cpu" and x.shape is not None
            and len(x.shape) == 4)


# A 1x1 conv whose weight has at most this many elements ran about as fast channels-last as NCHW
# at 7x7 outputs, or faster (channels-last / NCHW time, single convs, two threads, batch 8):
# 96->96 0.74x, 232->232 0.89x, 576->96 0.85x, 1152->192 0.94x, 464->464 1.01x, against
# 512->2048 1.12x, 1024->1024 1.33x and 2048->512 1.35x; at batch 1 0.72x to 1.13x (and such
# convs of one image run as `linear`). Between channels-last depthwise convs (mobilenets,
# ShuffleNet's last stage) NCHW cost two transposing copies a conv. Whole models at batch 8, A/B
# in one process: shufflenet_v2 22.3 against 23.1 ms, mobilenet_v3_small 12.0 / 12.6,
# mobilenet_v2 53.3 / 54.3, efficientnet_b0 90.0 / 90.6, regnet_y_400mf 64.4 / 64.1,
# densenet121 265 / 266.
SMALL_1X1 = 2**18


def prefers_channels_last(conv: Operation) -> bool:
    """Whether oneDNN runs this conv faster on a channels-last input, including the copy of the
    weight to channels-last it then makes on every call: for grouped convs (depthwise ones
    included) always, for 1x1 convs of a small weight (`SMALL_1X1`) always, for the others where
    each image gives at least 14x14 outputs. With fewer (the last stage of an ImageNet network:
    7x7 outputs of 512 to 2048 channels) NCHW was faster in timings of single convs on the machine
    of benchmarks/RESULTS.md, by up to 2.7x for a 1x1 conv of 2048 channels; converting every
    conv made resnet18 at batch 1 0.80x eager, this rule 1.21x (zoo table). The grouped 3x3 convs
    of regnet_y_400mf's last stage (8 channels a group at 7x7) ran faster channels-last: the
    model at batch 1 went from 33.9 to 32.0 ms (A/B of the two compiled modules)."""
    x, out, weight = conv.operands[0].type, conv.result.type, conv.operands[1].type
    if not (isinstance(out, TensorType) and out.shape is not None and isinstance(weight, TensorType)
            and weight.shape is not None and len(weight.shape) == 4):
        return False
    if weight.shape[1] == 1 or grouped(x, weight):
        return True
    if tuple(weight.shape[2:]) == (1, 1) and all(type(d) is int for d in weight.shape[:2]) \
            and weight.shape[0] * weight.shape[1] <= SMALL_1X1:
        return True
    h, w = out.shape[2], out.shape[3]
    return type(h) is int and type(w) is int and h * w >= 196


def grouped(x: object, weight: TensorType) -> bool:
    """A conv of more than one group: its weight has fewer input channels than its input."""
    assert weight.shape is not None
    return (isinstance(x, TensorType) and x.shape is not None and len(x.shape) == 4
            and type(x.shape[1]) is int and type(weight.shape[1]) is int and weight.shape[1] < x.shape[1])


# Weights of at least this many elements are worth oneDNN's blocked layout, made once in a frozen
# program (runtime/prepacked.py): reordering a weight on every call costs about as much as the
# conv itself at small batches. Timed on an idle 2-CPU host (two threads, channels-last input,
# best of 5x20 calls, microseconds at batch 1, plain / packed / `linear`): 512->2048 1x1 at 7x7
# 1181 / 498 / 857; 320->1280 1x1 at 7x7 320 / 220 / 318 (at batch 8 2188 / 1470 / 1724);
# 192->1152 1x1 at 7x7 154 / 133 / 157; 128->128 3x3 at 28x28 1177 / 1031. Smaller 1x1 convs ran
# about as fast as `linear` and faster than plain convs (480->80 at 14x14 122 / 101 / 88, 24->144
# at 56x56 156 / 149 / 142). Whole models, frozen, at batch 1 (A/B in one process), these bounds
# against 2**18 for all convs: densenet121 44.7 against 47.4 ms, resnet18 18.8 against 19.3 ms;
# regnet_y_400mf 11.9, 11.7 and 11.8 ms with 1x1 convs packed from 2**17, from 2**18 and never.
PACK_MIN_ELEMENTS = 2**14
PACK_MIN_ELEMENTS_1X1 = 2**17
# A packed conv also needs this many output positions per image: oneDNN's packed call costs about
# 30 us whatever its size, so the 1x1 convs of a squeeze-and-excitation block (one position) ran 5x
# slower packed (1152->48: 7 us plain, 34 packed, 6 as `linear`; efficientnet_b0 at batch 1 ran
# 14.3 ms frozen with them packed, 13.2 not frozen).
PACK_MIN_POSITIONS = 7 * 7


def packable(conv: Operation) -> bool:
    """A float32 2-d conv, not depthwise, whose weight is large enough to keep in oneDNN's
    layout, with enough outputs per image of known size to pay for oneDNN's call."""
    x, weight, out = conv.operands[0].type, conv.operands[1].type, conv.results[0].type
    if not (isinstance(weight, TensorType) and weight.dtype == "float32" and weight.shape is not None
            and len(weight.shape) == 4 and all(type(d) is int for d in weight.shape)
            and isinstance(x, TensorType) and x.dtype == "float32"
            and isinstance(out, TensorType) and out.shape is not None and len(out.shape) == 4
            and type(out.shape[2]) is int and type(out.shape[3]) is int):
        return False
    n = weight.shape[0] * weight.shape[1] * weight.shape[2] * weight.shape[3]
    least = PACK_MIN_ELEMENTS_1X1 if weight.shape[2] * weight.shape[3] == 1 else PACK_MIN_ELEMENTS
    # (a depthwise conv, one input channel per group, stays plain: packed, efficientnet_b0's ran
    # no faster at batch 1, 12.86 against 12.72 ms, though one 672-channel 5x5 conv alone went
    # from 109 to 78 us; other grouped convs gain, regnet_y_400mf's 440-channel ones 92 -> 55 us)
    return (n >= least and out.shape[2] * out.shape[3] >= PACK_MIN_POSITIONS
            and not (grouped(x, weight) and weight.shape[1] == 1))


def will_pack(conv: Operation, facts: Facts) -> bool:
    """Whether a frozen program's layout pass runs this conv packed: `packable`, with stride,
    padding, dilation and groups constant ints (as oneDNN's packed conv takes them; not padding
    "same" or "valid")."""
    if not packable(conv) or not made_once(conv.operands[1]):
        return False  # (a weight made on each call would be reordered on each call)
    try:
        c = bind(conv, facts)
        c.optional_tensor("bias")
    except Unsupported:
        return False
    pairs = [pair(c.const(n)) for n in ("stride", "padding", "dilation")]
    return all(p is not None and all(type(v) is int for v in p) for p in pairs) and type(c.const("groups")) is int


def made_once(weight: Value) -> bool:
    """A module's tensor attribute, a tensor computed once, a runtime/prepacked.py helper's
    result made once from such tensors (a conv's weight with its batch norm folded in), or a view
    of one: the same tensor on every call, so that a form of it made once (packed, channels-last)
    is made again only when it is replaced or written (runtime/prepacked.py)."""
    v = weight
    while isinstance(v.owner, Operation):
        owner = v.owner
        alias = owner.get_trait(AliasOf)
        if isinstance(owner, ops.ComputedOnceOp):
            return True
        if isinstance(owner, ops.GetAttrOp):
            return bool(owner.operands) and isinstance(owner.operands[0].type, ModuleType)
        if isinstance(owner, ops.BuiltinCallOp) and owner.attributes["callee"] in MADE_ONCE_CALLS:
            return all(made_once(t) for t in owner.operands if isinstance(t.type, TensorType))
        if isinstance(owner, ops.GetItemOp) and isinstance(owner.operands[0].owner, ops.BuiltinCallOp):
            v = owner.operands[0]  # (an item of a helper's tuple: the folded weight and bias)
            continue
        if alias is None or not isinstance(owner, (ops.TensorMethodOp, ops.TorchCallOp)):
            return False
        v = owner.operands[alias.index]
    return False


def as_linear_call(conv: Operation, facts: Facts, images_one: bool = True) -> Call | None:
    """A 1x1 convolution of stride 1, no padding and one group, of a batch known to be one image
    (or, with `images_one` false, of one not known to be: `measured_1x1`) (arguments by position
    or by name). On channels-last input it is a matrix product over
    channels, and torch's `linear` of the NHWC rows ran it as fast as oneDNN's convolution or
    faster at one image, and slower for more rows, on the machine of benchmarks/RESULTS.md (two
    threads). Single convs, linear / conv time, by rows (batch x positions): at 784 rows 0.64x to
    1.0x (58->58 and 32->192 channels at 28x28 the best), at 3136 0.58x to 1.2x, from 6272 1.05x
    to 2.1x (16->96 at 112x112, batch 8: 4.6 against 2.3 ms; MKL's product with few input
    channels writes its output slower than oneDNN). Whole models at batch 8 (symbolic batch), A/B
    in one process, linear for convs to at least as many channels against convs: mobilenet_v2
    57.2 / 53.9 and 60.0 / 55.6 ms, efficientnet_b0 102.4 / 82.1 and 101.5 / 96.4, resnet50 354.3 /
    349.5, regnet_y_400mf 64.2 / 63.0, shufflenet_v2 24.6 / 24.8. At one image linear won inside
    the models: shufflenet_v2 11.7 against 10.0 ms, mobilenet_v2 14.2 against 12.6 (its 1x1
    convs to fewer channels 0.36x to 0.84x the time). Returns the conv's arguments bound to their
    names, or None."""
    try:
        c = bind(conv, facts)
        shape, x_shape = c.tensor("weight").type.shape, c.tensor().type.shape  # type: ignore[union-attr]
        c.optional_tensor("bias")  # (a tensor, or known to be None)
    except Unsupported:
        return None
    if shape is None or len(shape) != 4 or not all(type(d) is int for d in shape) or tuple(shape[2:]) != (1, 1):
        return None
    padding = c.const("padding")
    one_image = x_shape is not None and x_shape[0] == 1
    fits = (pair(c.const("stride")) == (1, 1) and (padding in ("valid", "same") or pair(padding) == (0, 0))
            and type(c.const("groups")) is int and c.const("groups") == 1)
    return c if fits and one_image == images_one else None


def measured_1x1(conv: Operation, facts: Facts) -> bool:
    """In a frozen program, a float32 1x1 conv of stride 1 and one group, of a batch not known to
    be one image, whose weight is made once: it runs as `_prepacked.conv2d`, whose ways the
    runtime measures (a conv, oneDNN's with its weight reordered once, the `linear` of its NHWC
    rows, or for a large output a GEMM into a buffer the function keeps, ir/passes/plan.py).
    Which is fastest depends on the machine: on an Intel Xeon at batch 8, for efficientnet_b0's
    1x1 convs, the fastest of them took 0.9x torch's conv time over all, and the GEMM into a
    kept buffer 4.7 ms against 18.7 for the conv of 16 to 96 channels at 112x112 (its fresh
    38.5 MB output faults every page on every call); on an AMD EPYC `linear` was the slower
    (above), so the choice is not made here. Its batch norm stays (not folded): it joins the
    kernel after the conv, and the GEMM takes no bias."""
    x, weight = conv.operands[0].type, conv.operands[1].type
    call = as_linear_call(conv, facts, images_one=False)
    return (call is not None and not isinstance(call.const("padding"), str) and isinstance(x, TensorType)
            and x.dtype == "float32" and isinstance(weight, TensorType) and weight.dtype == "float32"
            and made_once(conv.operands[1]))


def pair(v: object) -> tuple[object, ...] | None:
    """An int or a pair of them (a conv's stride, padding) as a pair; None for anything else."""
    if isinstance(v, (tuple, list)) and len(v) in (1, 2):
        return tuple(v) * (3 - len(v)) if len(v) == 1 else tuple(v)
    return (v, v) if type(v) is int else None

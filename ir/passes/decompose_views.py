"""Decomposition rules for the views (transpose, movedim, flatten, ...), the layers that stay
extern calls in a simpler form (linear's bias add, a 1x1 convolution of 1x1 images as a GEMM),
and the ops whose result is their input (padding by nothing, dropout when not training). Merged
into decompose_rules.RULES."""

from __future__ import annotations

import math
from typing import Sequence

from ir.core.graph import Value
from ir.passes.decompose_common import Rule, _same_dtypes, registrar
from ir.passes.emitter import Call, Emitter, Operand, Unsupported, _dim, _dims, _rank, _shape
from ir.shapes.values import exact_div

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


# -- views ----------------------------------------------------------------------------------------
def _permute(e: Emitter, x: Value, perm: Sequence[int]) -> Value:
    return e.method("permute", x, tuple(perm))


def _swap(rank: int, a: int, b: int) -> list[int]:
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return perm


@rule("transpose", "swapaxes", "swapdims")
def transpose(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    names = ("dim0", "dim1") if "dim0" in c.args else ("axis0", "axis1")
    return _permute(e, x, _swap(rank, _dim(c.const(names[0]), rank), _dim(c.const(names[1]), rank)))


@rule("t")
def t(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if rank > 2:
        raise Unsupported("t() of more than 2 dims raises")
    return _permute(e, x, list(reversed(range(rank))))


@rule("T", "mT")
def transpose_attribute(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if c.name == "T":
        return _permute(e, x, list(reversed(range(rank))))
    if rank < 2:
        raise Unsupported("mT needs 2 dims")
    return _permute(e, x, _swap(rank, rank - 2, rank - 1))


@rule("movedim", "moveaxis")
def movedim(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    source = _dims(c.const("source"), rank, all_if_empty=False)
    destination = _dims(c.const("destination"), rank, all_if_empty=False)
    if len(source) != len(destination):
        raise Unsupported("source and destination differ in length")
    perm: list[int | None] = [None] * rank
    for s, dst in zip(source, destination):
        perm[dst] = s
    rest = iter(i for i in range(rank) if i not in source)
    return _permute(e, x, [p if p is not None else next(rest) for p in perm])


@rule("flatten")
def flatten(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    if rank == 0:
        return e.method("reshape", x, (1,))
    start = _dim(c.const("start_dim") if "start_dim" in c.args else 0, rank)
    end = _dim(c.const("end_dim") if "end_dim" in c.args else -1, rank)
    if start > end:
        raise Unsupported("start_dim after end_dim raises")
    if start == end:
        return x  # eager returns the input itself
    sizes = [e.size(x, i) for i in range(start)] + [e.count(x, range(start, end + 1))]
    sizes += [e.size(x, i) for i in range(end + 1, rank)]
    return e.method("reshape", x, e.shape(sizes))


@rule("unflatten")
def unflatten(e: Emitter, c: Call) -> Value:
    x = c.tensor()
    rank = _rank(x)
    dim = _dim(c.const("dim"), rank)
    sizes = c.const("sizes")
    if not isinstance(sizes, tuple) or not sizes or not all(type(s) is int for s in sizes):
        raise Unsupported("sizes")
    if sizes.count(-1) == 1:
        known = math.prod(s for s in sizes if s != -1)
        inferred = exact_div(_shape(x)[dim], known) if known else None
        if inferred is None:
            raise Unsupported("the -1 size is not known")
        if type(inferred) is not int:
            inferred = e.binary("//", e.size(x, dim), known)
        new: list[Operand] = [inferred if s == -1 else s for s in sizes]
    elif -1 in sizes or any(s < 0 for s in sizes):
        raise Unsupported("sizes")
    else:
        new = list(sizes)
    shape = [e.size(x, i) for i in range(dim)] + new + [e.size(x, i) for i in range(dim + 1, rank)]
    return e.method("view", x, e.shape(shape))


def _shaped_like(e: Emitter, c: Call, method: str) -> Value:
    other = c.tensor("other")
    return e.method(method, c.tensor(), e.shape([e.size(other, i) for i in range(_rank(other))]))


@rule("expand_as")
def expand_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "expand")


@rule("view_as")
def view_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "view")


@rule("reshape_as")
def reshape_as(e: Emitter, c: Call) -> Value:
    return _shaped_like(e, c, "reshape")


# -- extern ---------------------------------------------------------------------------------------
@rule("linear")
def linear(e: Emitter, c: Call) -> Value:
    """linear(x, weight) + bias: the GEMM stays an extern call (linear without a bias is one),
    the bias add joins the pointwise ops after it (where an activation usually follows). A 1-d
    weight is a matmul."""
    x, weight = c.tensor(), c.tensor("weight")
    bias = c.optional_tensor("bias")
    _same_dtypes(x, weight, bias)
    rank = _rank(weight)
    if rank not in (1, 2):
        raise Unsupported("weight must be 1-d or 2-d")
    if rank == 2 and bias is None:
        raise Unsupported("already a primitive")
    out = e.call("torch.nn.functional.linear", x, weight) if rank == 2 else e.call("torch.matmul", x, weight)
    return out if bias is None else e.binary("+", out, bias)


@rule("conv2d")
def conv2d_of_pixels(e: Emitter, c: Call) -> Value:
    """A 1x1 convolution of 1x1 images (a squeeze-and-excitation block's layers) is a linear
    layer. At batch 8 torch's convolution took 152 us for 96 to 24 channels, the GEMM with its
    reshapes 27; at batch 1 the convolution's im2col path is a little faster (11 us against
    15), so a batch of 1 keeps it. Any stride and dilation give a 1x1 output; padding must be
    none."""
    x, weight = c.tensor(), c.tensor("weight")
    bias = c.optional_tensor("bias")
    _same_dtypes(x, weight, bias)
    if _shape(x)[2:] != (1, 1) or _rank(x) != 4 or _shape(weight)[2:] != (1, 1) or _rank(weight) != 4:
        raise Unsupported("not a 1x1 convolution of 1x1 images")
    if _shape(x)[0] == 1:
        raise Unsupported("at batch 1 torch's convolution is the faster")
    if c.const("groups") != 1 or _shape(x)[1] != _shape(weight)[1]:
        raise Unsupported("grouped, or the channels differ (eager raises)")
    if c.const("padding") not in (0, (0,), (0, 0), [0], [0, 0], "valid", "same"):
        raise Unsupported("padding makes the output larger")
    for name in ("stride", "dilation"):
        value = c.const(name)
        steps = value if isinstance(value, (tuple, list)) else (value,)
        if len(steps) not in (1, 2) or any(type(v) is not int or v < 1 for v in steps):
            raise Unsupported(f"{name} is not known to be valid")
        if name == "stride" and c.const("padding") == "same" and any(v != 1 for v in steps):
            raise Unsupported("padding='same' with a stride raises in eager")
    rows = e.method("reshape", x, e.shape([e.size(x, 0), e.size(x, 1)]))
    out = e.call("torch.nn.functional.linear", rows, e.method("reshape", weight, e.shape([e.size(weight, 0), e.size(weight, 1)])))
    if bias is not None:
        out = e.binary("+", out, bias)
    return e.method("unsqueeze", e.method("unsqueeze", out, -1), -1)


# -- identities -----------------------------------------------------------------------------------
@rule("pad", "constant_pad_nd")
def pad_by_nothing(e: Emitter, c: Call) -> Value:
    """Padding by zero on every side: eager's result is a copy of the input. When only this op
    sees the input (a new tensor read nowhere else), the copy is the input itself: swin pads each
    attention's input to a multiple of its window, by nothing at 224x224 (12 copies a call)."""
    x = c.tensor()
    pads = c.const("pad")
    rank = _rank(x)
    if type(pads) is not tuple or not pads or any(type(p) is not int or p != 0 for p in pads) \
            or len(pads) % 2 or len(pads) // 2 > rank:
        raise Unsupported("padding by something, or not known (or eager raises)")
    if "mode" in c.args and c.const("mode") != "constant":
        raise Unsupported("not constant padding")
    return x  # (the driver keeps the call unless nothing else sees x: decompose._seen_only_by)


@rule("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout")
def dropout(e: Emitter, c: Call) -> Value:
    """Not training: the input itself (eager returns it), once p is known to be valid."""
    training = "training" if "training" in c.args else "train"
    if c.flag(training):
        raise Unsupported("training draws random numbers")
    p = c.number("p")
    if not 0 <= p <= 1:
        raise Unsupported("p outside [0, 1] raises")
    return c.tensor()

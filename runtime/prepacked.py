"""Weights a frozen module computes once from its parameters (`script(model, ..., freeze=True)`):
a batch norm folded into the convolution before it, a convolution's weight reordered into
oneDNN's blocked layout, which torch's CPU convolution otherwise does on every call (resnet18's
512-channel 3x3 convs at batch 1: 5.5 ms a call with the plain weight, 1.6 ms packed), a
convolution's weight in channels-last order (`channels_last`, which torch's convolution of a
channels-last input otherwise copies on every call), a linear layer's weight in oneDNN's layout
or packed by MKL (ir/passes/pack.py), and any tensor of parameters and constants alone
(`computed_once`, ir/passes/hoist.py: swin's relative position bias and attention masks).

Each derived tensor is cached against the tensors it was computed from, in a table keyed by
the first of them (the entry goes when that parameter goes, and is never saved with the model),
and computed again when any source is another object, has been written in place (its version
counter moved: `copy_`, `load_state_dict`, an optimizer step) or holds other storage (`p.data =
...`). One entry per weight and kind of call: a weight shared by convs followed by different
batch norms is folded again on each call, correctly. A write through `p.data` moves no version
counter and is not seen: that is the freeze contract, as with `torch.jit.freeze`.

A packed conv or linear can run through more than one library; which is fastest for its sizes on
this machine is measured on its first calls (runtime/choices.py), and only the pack of the way
chosen is kept.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from runtime import choices as _choices

# torch builds without oneDNN (and its own switch, torch.backends.mkldnn.enabled) run plain convs
# and linears.
_ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_convolution_pointwise")
_ONEDNN_LINEAR = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
_MKL_LINEAR = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
MKL_PACKS_KEPT = 2  # row counts one weight has MKL packs for: calls of others take another way


class _Cache:
    """What was computed from some tensors, by the identity of the first (a WeakKeyDictionary
    would compare tensors with ==): id -> (a weak reference to it, {key: (the other sources,
    their stamp, the value)}). An entry goes when its first source goes; the other sources are
    held while it lives, so that comparing identities is sound. One entry per key: a source
    replaced by another tensor replaces the entry."""

    def __init__(self) -> None:
        self.entries: dict[int, tuple[weakref.ref, dict[Any, tuple[tuple, tuple, Any]]]] = {}

    def get(self, first: Tensor, key: Any, others: tuple, stamp: tuple) -> Any:
        found = self.entries.get(id(first))
        if found is None or found[0]() is not first:
            return None
        entry = found[1].get(key)
        if entry is None or entry[1] != stamp:
            return None
        for held, given in zip(entry[0], others):
            if held is not given:
                return None
        return entry[2]

    def put(self, first: Tensor, key: Any, others: tuple, stamp: tuple, value: Any) -> Any:
        found = self.entries.get(id(first))
        if found is None or found[0]() is not first:
            k = id(first)
            found = (weakref.ref(first, lambda _, k=k, entries=self.entries: entries.pop(k, None)), {})
            self.entries[k] = found
        found[1][key] = (others, stamp, value)
        return value

    def has(self, first: Tensor, key: Any) -> bool:
        found = self.entries.get(id(first))
        return found is not None and found[0]() is first and key in found[1]

    def drop(self, first: Tensor, key: Any) -> None:
        found = self.entries.get(id(first))
        if found is not None and found[0]() is first:
            found[1].pop(key, None)


def _stamp(t: Tensor | None) -> tuple | None:
    """A source's stamp: its version counter (moved by every in-place write through it) and where
    its data is (moved by `p.data = ...`, which leaves the counter). A tensor made under
    `torch.inference_mode()` has no version counter, so a write to it inside inference mode could
    not be seen: its stamp is new on every call, and what is made from it is made again each
    time (sound, at the cost of the work; a model's parameters are not inference tensors unless
    the model was built under inference mode)."""
    if t is None:
        return None
    if t.is_inference():
        return (object(), t.data_ptr())
    return (t._version, t.data_ptr())


@contextlib.contextmanager
def _making() -> Iterator[None]:
    """The context a tensor made once is made in: no autograd graph, and outside inference mode
    whatever the caller's, so that the tensor has a version counter to stamp (`_stamp`) and may
    be read by later calls in any mode."""
    with torch.inference_mode(False), torch.no_grad():
        yield


_FOLDED = _Cache()
_PACKED = _Cache()
_ONCE = _Cache()
_CHANNELS_LAST = _Cache()
# compute -> {devices and dtypes of `like`: value}; the values hold no reference to `compute`,
# so an entry goes with the generated module that defined it
_ONCE_CONSTANT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def computed_once(compute: Callable[..., Any], sources: tuple[Tensor, ...], like: tuple[Tensor, ...] = ()) -> Any:
    """`compute(*sources, *like)`, a tensor of parameters and constants alone (ir/passes/hoist.py),
    computed on the first call and again when a source is another tensor or has been written;
    of the `like` tensors only the device and dtype count. Nothing may write the result: every
    call shares it."""
    kinds = tuple((t.device, t.dtype) for t in like)
    if not sources:
        table = _ONCE_CONSTANT.setdefault(compute, {})
        if kinds not in table:
            with _making():
                table[kinds] = compute(*like)
        return table[kinds]
    key = (compute, kinds)
    stamp = tuple(_stamp(s) for s in sources)
    found = _ONCE.get(sources[0], key, sources[1:], stamp)
    if found is not None:
        return found
    with _making():
        value = compute(*sources, *like)
    return _ONCE.put(sources[0], key, sources[1:], stamp, value)


def fold_batch_norm(weight: Tensor, bias: Tensor | None, mean: Tensor, var: Tensor, gamma: Tensor | None,
                    beta: Tensor | None, eps: float) -> tuple[Tensor, Tensor]:
    """The weight and bias of a convolution followed by an eval-mode batch norm: `conv(x, w', b')`
    is `batch_norm(conv(x, w, b), mean, var, gamma, beta, eps=eps)` up to rounding. Computed in
    float64 and rounded once."""
    others = (bias, mean, var, gamma, beta)
    stamp = (_stamp(weight), _stamp(mean), _stamp(var), _stamp(bias), _stamp(gamma), _stamp(beta))
    found = _FOLDED.get(weight, eps, others, stamp)
    if found is not None:
        return found
    with _making():
        scale = torch.rsqrt(var.double() + eps)
        if gamma is not None:
            scale = scale * gamma.double()
        shift = -mean.double() * scale if bias is None else (bias.double() - mean.double()) * scale
        if beta is not None:
            shift = shift + beta.double()
        w = (weight.double() * scale.reshape(-1, *[1] * (weight.dim() - 1))).to(weight.dtype)
        b = shift.to(weight.dtype)
    return _FOLDED.put(weight, eps, others, stamp, (w, b))


def channels_last(weight: Tensor) -> Tensor:
    """`weight.contiguous(memory_format=torch.channels_last)`, made once: torch's CPU conv of a
    channels-last input copies a weight of another layout on every call (regnet_y_400mf's stem and
    ten grouped 3x3 convs: 11 copies a call, 3 to 13 us each at batch 1), and returns a
    channels-last weight as it is. A view of a parameter (a new tensor on every call) is cached
    against the parameter, with its sizes, strides and offset, as `linear` below does."""
    base = weight if weight._base is None else weight._base
    key = ("channels_last", tuple(weight.shape), weight.stride(), weight.storage_offset())
    stamp = _stamp(base)
    found = _CHANNELS_LAST.get(base, key, (), stamp)
    if found is not None:
        return found
    with _making():
        made = weight.detach().contiguous(memory_format=torch.channels_last)
    return _CHANNELS_LAST.put(base, key, (), stamp, made)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int], padding: Sequence[int],
           dilation: Sequence[int], groups: int, out: Tensor | None = None) -> Tensor:
    """`F.conv2d(x, weight, bias, stride, padding, dilation, groups)` the fastest way measured
    here for convs of its sizes (runtime/choices.py): oneDNN's conv with the weight reordered once
    into its layout for inputs of `x`'s sizes (the default), torch's conv (channels-last weight,
    made once), or for a 1x1 conv of stride 1 of a channels-last input, `linear` (below) of its
    NHWC rows, or given `out` (a channels-last tensor of the result's sizes, from buffers the
    function keeps: ir/passes/plan.py), a GEMM of those rows written into it. Each gives torch's
    strides for a channels-last input (channels-last), which is what generated code passes
    (ir/passes/layout.py); another input takes oneDNN's way. The result is `out` or a new tensor.
    A call of a kind seen before (`_CONV_FAST`) takes the call decided then, as `linear`'s do."""
    key = (id(weight), None if bias is None else (bias.dtype, bias.device, bias.shape), x.shape, x.stride(),
           x.dtype, x.device, out is None, stride, padding, dilation, groups, torch.get_num_threads(),
           torch._C._get_mkldnn_enabled())
    try:
        call = _kept_call(_CONV_FAST, key, weight)
    except TypeError:  # (window settings given as lists: not a key)
        call = key = None
    if call is not None:
        return call(x, weight, bias, out)
    got, call = _conv2d(x, weight, bias, stride, padding, dilation, groups, out)
    if call is not None and key is not None:
        _keep_call(_CONV_FAST, key, weight, call)
    return got


def _conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], groups: int, out: Tensor | None) -> tuple[Tensor, Callable | None]:
    """`conv2d`, and the call that its decision makes for a later call of the same kind (None while
    it is being measured, and for inputs that take torch's plain conv)."""
    if not (_ONEDNN and torch.backends.mkldnn.enabled and x.device.type == "cpu" and x.dtype == torch.float32
            and x.dim() == 4 and weight.dim() == 4):
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups), None
    stride, padding, dilation = tuple(stride), tuple(padding), tuple(dilation)
    nhwc = x.is_contiguous(memory_format=torch.channels_last)
    family = ("conv2d", tuple(x.shape[1:]), nhwc, tuple(weight.shape), stride, padding, dilation, groups,
              bias is None, out is None, torch.get_num_threads())
    way = _choices.chosen(family, x.shape[0])
    if way == "onednn":
        got = _onednn_conv2d(x, weight, bias, stride, padding, dilation, groups)
        packed = _PACKED.get(weight, ("conv2d", stride, padding, dilation, groups), (),
                             (_stamp(weight), x.shape[1:]))
        args = (list(padding), list(stride), list(dilation), groups, "none", [], "")
        return got, (None if packed is None else
                     lambda x, w, b, out: torch.ops.mkldnn._convolution_pointwise(x, packed, b, *args))
    if way == "torch":
        laid = channels_last(weight)
        return (F.conv2d(x, laid, bias, stride, padding, dilation, groups),
                lambda x, w, b, out: F.conv2d(x, laid, b, stride, padding, dilation, groups))
    if way == "linear":
        return _conv1x1_as_linear(x, weight, bias), lambda x, w, b, out: _conv1x1_as_linear(x, w, b)
    if way == "gemm_into":
        return _conv1x1_into(x, weight, bias, out), _conv1x1_into  # type: ignore[arg-type]
    ways = {"onednn": lambda: _onednn_conv2d(x, weight, bias, stride, padding, dilation, groups)}
    if nhwc:  # (the layout generated code gives; oneDNN's result of another need not be torch's)
        ways["torch"] = lambda: F.conv2d(x, channels_last(weight), bias, stride, padding, dilation, groups)
    if (nhwc and weight.shape[2:] == (1, 1) and stride == (1, 1) and padding == (0, 0) and groups == 1
            and (weight.is_contiguous() or weight.is_contiguous(memory_format=torch.channels_last))):
        ways["linear"] = lambda: _conv1x1_as_linear(x, weight, bias)
        if out is not None:
            ways["gemm_into"] = lambda: _conv1x1_into(x, weight, bias, out)
    got = _choices.measure(family, x.shape[0], ways)
    if _choices.chosen(family, x.shape[0]) != "onednn":  # (its reordered weight is not kept for nothing)
        _PACKED.drop(weight, ("conv2d", stride, padding, dilation, groups))
    return got, None


def _onednn_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple, padding: tuple,
                   dilation: tuple, groups: int) -> Tensor:
    """oneDNN's conv with the weight reordered once for inputs of `x`'s sizes (ideep reorders it
    again, correctly, for a batch whose best layout differs)."""
    key = ("conv2d", stride, padding, dilation, groups)
    stamp = (_stamp(weight), x.shape[1:])  # (another image size: packed again)
    packed = _PACKED.get(weight, key, (), stamp)
    if packed is None:
        with _making():
            packed = _PACKED.put(weight, key, (), stamp, torch.ops.mkldnn._reorder_convolution_weight(
                weight.detach(), list(padding), list(stride), list(dilation), groups, list(x.shape)))
    return torch.ops.mkldnn._convolution_pointwise(
        x, packed, bias, list(padding), list(stride), list(dilation), groups, "none", [], "")


def _conv1x1_as_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """A 1x1 conv of stride 1 of a channels-last `x` as `linear` of its NHWC rows, whose
    row-major result is the conv's channels-last output."""
    return linear(x.permute(0, 2, 3, 1), weight.view(weight.shape[0], weight.shape[1]), bias).permute(0, 3, 1, 2)


def _conv1x1_into(x: Tensor, weight: Tensor, bias: Tensor | None, out: Tensor) -> Tensor:
    """A 1x1 conv of stride 1 of a channels-last `x` as a GEMM of its NHWC rows written into the
    NHWC rows of `out` (`torch.mm(..., out=)`, with the bias `addmm`'s): a fresh output of
    megabytes faults its pages on every call where the allocator gave them back. An `out` of other
    sizes or layout gets torch's conv, returned."""
    n, h, w, c_out = x.shape[0], x.shape[2], x.shape[3], weight.shape[0]
    if not (out.shape == (n, c_out, h, w) and out.dtype == x.dtype and out.device == x.device
            and out.is_contiguous(memory_format=torch.channels_last)):
        return F.conv2d(x, weight, bias)
    rows = x.permute(0, 2, 3, 1).reshape(n * h * w, x.shape[1])
    into = out.permute(0, 2, 3, 1).view(n * h * w, c_out)
    matrix = weight.view(c_out, weight.shape[1]).t()
    if bias is None:
        torch.mm(rows, matrix, out=into)
    else:
        torch.addmm(bias, rows, matrix, out=into)
    return out


# (the weight's id, the bias's dtype, device and sizes, x's sizes, dtype, device and contiguity, the
# thread count, oneDNN's switch) -> (a weak reference to the weight, its stamp, the decisions'
# epoch, the call the decision made for them): a later call of the same kind skips the checks, the
# lookups of the decision and of the pack (a tiny linear: 4.3 us a call, 7.9 without, MKL's own 2.8). The
# bias is passed to the call, so any bias of the same kind takes it (one computed on every call too).
_FAST: dict[tuple, tuple] = {}
# The same for convs: (the weight's id, the bias's dtype, device and sizes, x's sizes, strides, dtype
# and device, whether there is an `out`, the window settings, the thread count, oneDNN's switch) -> as above.
_CONV_FAST: dict[tuple, tuple] = {}
FAST_KEPT = 4096  # entries before the table is emptied (kinds of call, not calls)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """`F.linear(x, weight, bias)` the fastest way measured here for its sizes and number of rows
    (runtime/choices.py): oneDNN's linear with the weight reordered once into its layout (the
    default), MKL's GEMM with the weight packed once for that number of rows (MKL computes with a
    packed weight only at the rows it was packed for, so a weight has a pack for each of at most
    `MKL_PACKS_KEPT` row counts, and others take the fastest of the other ways), or torch's
    linear. A packed weight is cached against its
    parameter; a view of one (a conv's weight seen as a matrix) with its sizes, strides and
    offset. It records no autograd graph, as `conv2d` above: compiled code runs only where none
    is recorded (its entry checks send a call with grad enabled and a tensor requiring grad to
    eager). A call of a kind seen before (`_FAST`) takes the call decided then, while the weight is
    the same tensor, unwritten, and the decisions stand."""
    key = (id(weight), None if bias is None else (bias.dtype, bias.device, bias.shape), x.shape, x.dtype, x.device,
           x.is_contiguous(), torch.get_num_threads(), torch._C._get_mkldnn_enabled())
    call = _kept_call(_FAST, key, weight)
    if call is not None:
        return call(x, weight, bias)
    got, call = _linear(x, weight, bias)
    if call is not None:
        _keep_call(_FAST, key, weight, call)
    return got


def _kept_call(table: dict[tuple, tuple], key: tuple, weight: Tensor) -> Callable | None:
    """The call `table` (`_FAST`, `_CONV_FAST`) keeps for `key`, while the weight it was decided
    for is this tensor, unwritten, and the decisions stand; else None."""
    hit = table.get(key)
    if (hit is not None and hit[0]() is weight and hit[1] == (_stamp(weight), weight.shape)
            and hit[2] == _choices.epoch()):
        return hit[3]
    return None


def _keep_call(table: dict[tuple, tuple], key: tuple, weight: Tensor, call: Callable) -> None:
    """Keeps `call` for `key` in `table` until the weight goes (not for a view of a parameter,
    which is a new tensor on every call)."""
    if weight._base is not None:
        return
    if len(table) >= FAST_KEPT:
        table.clear()
    table[key] = (weakref.ref(weight, lambda r, k=key: table.pop(k) if table.get(k, (None,))[0] is r else None),
                  (_stamp(weight), weight.shape), _choices.epoch(), call)


def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> tuple[Tensor, Callable | None]:
    """`linear`, and the call that its decision makes for a later call of the same kind (None while
    it is being measured, or where there is nothing to keep)."""
    if not (_ONEDNN_LINEAR and torch.backends.mkldnn.enabled and x.device.type == "cpu" and x.dtype == torch.float32
            and weight.device.type == "cpu" and weight.dtype == torch.float32 and weight.dim() == 2
            and x.dim() >= 1 and x.shape[-1] == weight.shape[1]
            and (bias is None or (bias.device.type == "cpu" and bias.dtype == torch.float32
                                  and tuple(bias.shape) == (weight.shape[0],)))):
        return F.linear(x, weight, bias), None  # (and its errors, as eager's)
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    family = ("linear", tuple(weight.shape), weight.is_contiguous(), x.is_contiguous(), bias is None,
              torch.get_num_threads())
    way = _choices.chosen(family, rows)
    if way == "mkl":
        got = _mkl_linear(x, weight, bias, rows)
        if got is not None:
            packed = _PACKED.get(weight, _linear_key("mkl", weight, rows), (), _stamp(weight))
            return got, (None if packed is None else
                         lambda x, w, b: torch.ops.mkl._mkl_linear(x, packed, w, b, rows))
        way = _choices.without_per_size(family, rows)  # (the weight has packs for other rows)
        way = "onednn" if way == "onednn" else "torch"
    if way == "onednn":
        got = _onednn_linear(x, weight, bias)
        packed = _PACKED.get(weight, _linear_key("onednn", weight), (), _stamp(weight))
        return got, (None if packed is None else
                     lambda x, w, b: torch.ops.mkldnn._linear_pointwise(x, packed, b, "none", [], ""))
    if way == "torch":
        return F.linear(x, weight, bias), F.linear
    ways = {"onednn": lambda: _onednn_linear(x, weight, bias), "torch": lambda: F.linear(x, weight, bias)}
    if _MKL_LINEAR and rows > 0 and weight.numel() > 0 and _mkl_packs(weight) < MKL_PACKS_KEPT:
        ways["mkl"] = lambda: _mkl_linear(x, weight, bias, rows)  # type: ignore[return-value]
    got = _choices.measure(family, rows, ways, per_size=frozenset({"mkl"}))
    way = _choices.chosen(family, rows)
    base = weight if weight._base is None else weight._base
    if way != "onednn":  # (a pack not used is not kept)
        _PACKED.drop(base, _linear_key("onednn", weight))
    if way != "mkl":
        _PACKED.drop(base, _linear_key("mkl", weight, rows))
    return got, None


def _mkl_packs(weight: Tensor) -> int:
    """How many row counts MKL's packs of this weight (this view of its parameter) serve."""
    base = weight if weight._base is None else weight._base
    found = _PACKED.entries.get(id(base))
    if found is None or found[0]() is not base:
        return 0
    key = _linear_key("mkl", weight)
    return sum(k[:4] == key[:4] for k in found[1])


def _linear_key(way: str, weight: Tensor, rows: int | None = None) -> tuple:
    return (way, tuple(weight.shape), weight.stride(), weight.storage_offset(), rows)


def _onednn_linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    base = weight if weight._base is None else weight._base
    key = _linear_key("onednn", weight)
    stamp = _stamp(base)
    packed = _PACKED.get(base, key, (), stamp)
    if packed is None:
        with _making():
            packed = _PACKED.put(base, key, (), stamp,
                                 torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous()))
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def _mkl_linear(x: Tensor, weight: Tensor, bias: Tensor | None, rows: int) -> Tensor | None:
    """MKL's GEMM with the weight packed for `rows`; None where the weight has packs for
    MKL_PACKS_KEPT other row counts already (a pack is a copy of the weight)."""
    base = weight if weight._base is None else weight._base
    key = _linear_key("mkl", weight, rows)
    stamp = _stamp(base)
    packed = _PACKED.get(base, key, (), stamp)
    if packed is None:
        if not _PACKED.has(base, key) and _mkl_packs(weight) >= MKL_PACKS_KEPT:
            return None  # (a pack of these rows, made stale by a write, is made again in its place)
        with _making():
            packed = _PACKED.put(base, key, (), stamp,
                                 torch.ops.mkl._mkl_reorder_linear_weight(weight.detach().contiguous(), rows))
    # (the plain weight is what MKL's call falls back to at other rows: never here)
    return torch.ops.mkl._mkl_linear(x, packed, weight, bias, rows)


__all__ = ["fold_batch_norm", "channels_last", "conv2d", "linear", "computed_once"]

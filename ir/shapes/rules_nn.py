"""Shape rules for neural-network ops (convolution, pooling, interpolation, padding, embedding,
pixel shuffle) and the table of torch.nn layers: a layer call is the functional call it makes,
with the layer's parameters and settings read from the live module when the analysis has one.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import sympy
import torch

from ir.core.types import FLOAT, INT, STR, Dim, TensorType
from ir.shapes.rule_table import Call, RuleTable, TorchCall, sizes_of
from ir.shapes.values import (
    AV,
    UNKNOWN,
    const_av,
    exact_div,
    floor_div,
    product,
    simplify,
    size_of,
    tensor_av,
    tuple_av,
)

Shape = tuple[Dim, ...]

# This file's shape rules; ir/shapes/rules.py merges them with the other rule files'.
RULES = RuleTable()
rule = RULES.rule


def _expand(values: list[Dim] | None, n: int) -> list[Dim] | None:
    if values is None:
        return None
    if len(values) == 1:
        return values * n
    return values if len(values) == n else None


def conv_out(size: Dim, kernel: Dim, stride: Dim, pad: Dim, dilation: Dim, ceil_mode: bool = False) -> Dim:
    """Output size of a convolution or pooling window along one dimension."""
    if None in (size, kernel, stride, pad, dilation) or stride == 0:
        return None
    span = sympy.sympify(size) + 2 * pad - dilation * (kernel - 1) - 1  # type: ignore[operator]
    if not ceil_mode:
        out = floor_div(simplify(span), stride)
        return None if out is None else simplify(sympy.sympify(out) + 1)
    if not all(type(v) is int for v in (size, kernel, stride, pad, dilation)):
        return None
    out_i = -(-int(span) // stride) + 1  # type: ignore[operator]
    if (out_i - 1) * stride >= size + pad:  # type: ignore[operator]
        out_i -= 1  # the last window must start inside the input or the left padding
    return out_i


def _spatial(call: Call, n: int) -> tuple[Shape, Shape, int] | None:
    """(leading dims, spatial dims, n) of the input of an n-d window op."""
    shape = call.shape("self")
    if shape is None or len(shape) not in (n + 1, n + 2):
        return None
    return shape[:-n], shape[-n:], n


def _ndim(name: str) -> int | None:
    for n in (1, 2, 3):
        if f"{n}d" in name:
            return n
    return None


@rule("conv1d", "conv2d", "conv3d")
def conv(call: Call) -> AV | None:
    n = _ndim(call.name)
    w = call.shape("weight")
    got = _spatial(call, n)  # type: ignore[arg-type]
    if got is None or w is None or len(w) != n + 2:  # type: ignore[operator]
        return None
    lead, spatial, n = got
    pad_av = call.get("padding")
    stride = _expand(call.sizes("stride"), n)
    dilation = _expand(call.sizes("dilation"), n)
    if pad_av is not None and pad_av.type == STR:
        if pad_av.value == "same":
            out = list(spatial)
        elif pad_av.value == "valid":
            pad = [0] * n
            out = _window(spatial, w[2:], stride, pad, dilation)  # type: ignore[arg-type]
        else:
            return None
    else:
        pad = _expand(sizes_of(pad_av), n)
        out = _window(spatial, w[2:], stride, pad, dilation)  # type: ignore[arg-type]
    return tensor_av(None, lead[:-1] + (w[0],) + tuple(out))


def _window(spatial: Shape, kernel: list[Dim] | None, stride: list[Dim] | None, pad: list[Dim] | None,
            dilation: list[Dim] | None, ceil_mode: bool = False) -> list[Dim]:
    if kernel is None or stride is None or pad is None or dilation is None:
        return [None] * len(spatial)
    return [conv_out(i, k, s, p, d, ceil_mode) for i, k, s, p, d in zip(spatial, kernel, stride, pad, dilation)]


@rule("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def conv_transpose(call: Call) -> AV | None:
    n = _ndim(call.name)
    w = call.shape("weight")
    got = _spatial(call, n)  # type: ignore[arg-type]
    if got is None or w is None or len(w) != n + 2:  # type: ignore[operator]
        return None
    lead, spatial, n = got
    stride = _expand(call.sizes("stride"), n)
    pad = _expand(call.sizes("padding"), n)
    out_pad = _expand(call.sizes("output_padding"), n)
    dilation = _expand(call.sizes("dilation"), n)
    groups = call.size("groups")
    channels = product([w[1], groups])
    out: list[Dim] = []
    for i in range(n):
        parts = [spatial[i], w[2 + i]] + [v[i] if v is not None else None for v in (stride, pad, out_pad, dilation)]
        if any(p is None for p in parts):
            out.append(None)
            continue
        size, k, s, p, op, d = parts
        out.append(simplify((sympy.sympify(size) - 1) * s - 2 * p + d * (k - 1) + op + 1))  # type: ignore[operator]
    return tensor_av(None, lead[:-1] + (channels,) + tuple(out))


def _pool(call: Call, has_dilation: bool) -> tuple[Shape, list[Dim]] | None:
    n = _ndim(call.name)
    got = _spatial(call, n)  # type: ignore[arg-type]
    if got is None:
        return None
    lead, spatial, n = got
    kernel = _expand(call.sizes("kernel_size"), n)
    stride_list = call.sizes("stride")
    if stride_list is None and call.get("stride") is not None and call.value("stride") is None:
        stride_list = []
    stride = kernel if stride_list == [] else _expand(stride_list, n)
    pad = _expand(call.sizes("padding"), n)
    dilation = _expand(call.sizes("dilation"), n) if has_dilation else [1] * n
    ceil_mode = call.value("ceil_mode", default=False)
    if ceil_mode is UNKNOWN:
        return lead, [None] * n
    return lead, _window(spatial, kernel, stride, pad, dilation, bool(ceil_mode))


@rule("max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
      "max_pool3d_with_indices")
def max_pool(call: Call) -> AV | None:
    got = _pool(call, True)
    if got is None:
        return None
    shape = got[0] + tuple(got[1])
    t = call.tensor("self")
    indices = call.value("return_indices", default=False)
    if call.name.endswith("_with_indices") or indices is True:
        return tuple_av([tensor_av(t.dtype if t else None, shape), tensor_av("int64", shape)])
    if indices is UNKNOWN:
        return None
    return tensor_av(None, shape)


@rule("avg_pool1d", "avg_pool2d", "avg_pool3d")
def avg_pool(call: Call) -> AV | None:
    got = _pool(call, False)
    return None if got is None else tensor_av(None, got[0] + tuple(got[1]))


@rule("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
      "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def adaptive_pool(call: Call) -> AV | None:
    n = _ndim(call.name)
    got = _spatial(call, n)  # type: ignore[arg-type]
    if got is None:
        return None
    lead, spatial, n = got
    av = call.get("output_size")
    sizes = sizes_of(av)
    if av is not None and av.items is not None:
        sizes = [None if (i.known and i.value is None) else size_of(i) for i in av.items]
        sizes = [s if s is not None or not (i.known and i.value is None) else spatial[k]
                 for k, (s, i) in enumerate(zip(sizes, av.items))]
    sizes = _expand(sizes, n)
    out = tuple(sizes) if sizes is not None else (None,) * n
    shape = lead + out
    t = call.tensor("self")
    if "max" in call.name:
        indices = call.value("return_indices", default=UNKNOWN if call.aten is None else True)
        if call.aten is not None and call.aten.startswith("aten::adaptive_max_pool"):
            indices = True
        if indices is True:
            return tuple_av([tensor_av(t.dtype if t else None, shape), tensor_av("int64", shape)])
        if indices is UNKNOWN:
            return None
    return tensor_av(None, shape)


@rule("interpolate", "upsample")
def interpolate(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None or len(shape) < 3:
        return None
    n = len(shape) - 2
    size_av = call.get("size")
    if size_av is not None and not (size_av.known and size_av.value is None):
        sizes = _expand(sizes_of(size_av), n)
        return tensor_av(None, shape[:2] + (tuple(sizes) if sizes else (None,) * n))
    scale_av = call.get("scale_factor")
    if scale_av is None or (scale_av.known and scale_av.value is None):
        return None
    scales = scale_av.items if scale_av.items is not None else (scale_av,)
    values = [s.value if s.known else None for s in scales]
    if len(values) == 1:
        values = values * n
    if len(values) != n:
        return None
    out: list[Dim] = []
    for d, s in zip(shape[2:], values):
        if d is None or not isinstance(s, (int, float)):
            out.append(None)
        elif type(d) is int:
            out.append(math.floor(float(d) * float(s)))
        elif float(s).is_integer():
            out.append(simplify(d * int(s)))
        else:
            out.append(None)
    return tensor_av(None, shape[:2] + tuple(out))


@rule("pad", "constant_pad_nd")
def pad(call: Call) -> AV | None:
    shape = call.shape("self")
    amounts = call.sizes("pad")
    if shape is None or amounts is None or len(amounts) % 2 or len(amounts) // 2 > len(shape):
        return None
    out = list(shape)
    for i in range(len(amounts) // 2):
        k = len(shape) - 1 - i
        lo, hi = amounts[2 * i], amounts[2 * i + 1]
        out[k] = None if None in (out[k], lo, hi) else simplify(sympy.sympify(out[k]) + lo + hi)
    return tensor_av(None, out)


@rule("pixel_shuffle", "pixel_unshuffle")
def pixel_shuffle(call: Call) -> AV | None:
    shape = call.shape("self")
    r = call.size("upscale_factor", "downscale_factor")
    if shape is None or len(shape) < 3 or r is None:
        return None
    c, h, w = shape[-3:]
    if call.name == "pixel_shuffle":
        out = (exact_div(c, product([r, r])), product([h, r]), product([w, r]))
    else:
        out = (product([c, r, r]), exact_div(h, r), exact_div(w, r))
    return tensor_av(None, shape[:-3] + out)


@rule("im2col", "col2im")
def im2col(call: Call) -> AV | None:
    """`F.unfold` (im2col): [N, C, H, W] -> [N, C * kh * kw, L], L the number of windows; `F.fold`
    (col2im): [N, C * kh * kw, L] -> [N, C, *output_size]. Unbatched inputs drop N."""
    shape = call.shape("self")
    kernel = _expand(call.sizes("kernel_size"), 2)
    if shape is None or kernel is None:
        return None
    if call.name == "col2im":
        out = _expand(call.sizes("output_size"), 2)
        if len(shape) not in (2, 3) or out is None:
            return None
        return tensor_av(None, shape[:-2] + (exact_div(shape[-2], product(kernel)),) + tuple(out))
    if len(shape) not in (3, 4):
        return None
    dilation, padding, stride = (_expand(call.sizes(n), 2) for n in ("dilation", "padding", "stride"))
    if dilation is None or padding is None or stride is None:
        windows: Dim = None
    else:
        windows = product([conv_out(shape[-2 + i], kernel[i], stride[i], padding[i], dilation[i]) for i in range(2)])
    return tensor_av(None, shape[:-3] + (product([shape[-3], *kernel]), windows))


@rule("embedding")
def embedding(call: Call) -> AV | None:
    weight = call.tensor("weight")
    indices = call.get("indices") or call.get("self")
    if indices is None or indices.shape is None:
        return None
    last = weight.shape[1] if weight is not None and weight.shape is not None and len(weight.shape) == 2 else None
    return tensor_av(weight.dtype if weight is not None else None, indices.shape + (last,))


# -- torch.nn layers ---------------------------------------------------------------------------------
F = "torch.nn.functional."
SAME_AS_INPUT = frozenset(
    f"torch.nn.{n}" for n in (
        "ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh Hardswish Hardsigmoid Hardtanh LeakyReLU ELU SELU CELU "
        "Softplus Softsign Tanhshrink Threshold PReLU Softshrink Hardshrink LogSigmoid RReLU Dropout "
        "Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout Identity BatchNorm1d BatchNorm2d "
        "BatchNorm3d LayerNorm GroupNorm RMSNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d "
        "LocalResponseNorm Softmax LogSoftmax Softmin Softmax2d"
    ).split()
)

# ctx.attr(module_av, name) -> AV reads (and records) an attribute of the live module.
LayerBuilder = Callable[[Any, AV, AV, Any], "TorchCall | AV | None"]
LAYERS: dict[str, LayerBuilder] = {}


def layer(*names: str) -> Callable[[LayerBuilder], LayerBuilder]:
    def register(fn: LayerBuilder) -> LayerBuilder:
        for n in names:
            LAYERS[f"torch.nn.{n}"] = fn
        return fn

    return register


def _fcall(name: str, declared: Any, *pos: AV, **kw: AV) -> TorchCall:
    return TorchCall("function", name, list(pos), dict(kw), None, declared)


def _setting(m: torch.nn.Module, name: str) -> AV:
    """A layer's hyper-parameter (stride, padding...) as a constant: part of the layer's identity,
    not guarded (see ir/passes/shapes.py)."""
    return const_av(getattr(m, name))


@layer("Linear")
def linear_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    if mod.value is UNKNOWN:
        shape = x.shape
        return tensor_av(None, shape[:-1] + (None,)) if shape else None
    return _fcall(F + "linear", declared, x, ctx.attr(mod, "weight"), ctx.attr(mod, "bias"))


@layer("Conv1d", "Conv2d", "Conv3d")
def conv_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}conv{n}d", declared, x, ctx.attr(mod, "weight"), ctx.attr(mod, "bias"),
                  _setting(m, "stride"), _setting(m, "padding"), _setting(m, "dilation"), _setting(m, "groups"))


@layer("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
def conv_transpose_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}conv_transpose{n}d", declared, x, ctx.attr(mod, "weight"), ctx.attr(mod, "bias"),
                  _setting(m, "stride"), _setting(m, "padding"), _setting(m, "output_padding"),
                  _setting(m, "groups"), _setting(m, "dilation"))


@layer("MaxPool1d", "MaxPool2d", "MaxPool3d")
def max_pool_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}max_pool{n}d", declared, x, _setting(m, "kernel_size"), _setting(m, "stride"),
                  _setting(m, "padding"), _setting(m, "dilation"), ceil_mode=_setting(m, "ceil_mode"),
                  return_indices=_setting(m, "return_indices"))


@layer("AvgPool1d", "AvgPool2d", "AvgPool3d")
def avg_pool_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}avg_pool{n}d", declared, x, _setting(m, "kernel_size"), _setting(m, "stride"),
                  _setting(m, "padding"), _setting(m, "ceil_mode"), _setting(m, "count_include_pad"))


@layer("AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d")
def adaptive_avg_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}adaptive_avg_pool{n}d", declared, x, _setting(m, "output_size"))


@layer("AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d")
def adaptive_max_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    n = type(m).__name__[-2]
    return _fcall(f"{F}adaptive_max_pool{n}d", declared, x, _setting(m, "output_size"),
                  _setting(m, "return_indices"))


@layer("Flatten")
def flatten_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall("torch.flatten", declared, x, _setting(m, "start_dim"), _setting(m, "end_dim"))


@layer("Unflatten")
def unflatten_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return TorchCall("method", "unflatten", [x, _setting(m, "dim"), _setting(m, "unflattened_size")], {},
                     None, declared)


@layer("Embedding")
def embedding_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    if mod.value is UNKNOWN:
        return None
    return _fcall(F + "embedding", declared, x, ctx.attr(mod, "weight"))


@layer("Upsample")
def upsample_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall(F + "interpolate", declared, x, _setting(m, "size"), _setting(m, "scale_factor"),
                  _setting(m, "mode"), _setting(m, "align_corners"))


@layer("Unfold")
def unfold_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall(F + "unfold", declared, x, *(_setting(m, n) for n in ("kernel_size", "dilation", "padding", "stride")))


@layer("PixelShuffle")
def pixel_shuffle_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall(F + "pixel_shuffle", declared, x, _setting(m, "upscale_factor"))


@layer("ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
       "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
       "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d")
def pad_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall(F + "pad", declared, x, _setting(m, "padding"))


@layer("GLU")
def glu_layer(ctx: Any, mod: AV, x: AV, declared: Any) -> TorchCall | AV | None:
    m = mod.value
    if m is UNKNOWN:
        return None
    return _fcall(F + "glu", declared, x, _setting(m, "dim"))


def layer_call(ctx: Any, qualname: str, mod: AV, args: list[AV], declared: Any) -> TorchCall | AV | None:
    """What calling a torch.nn layer gives: an AV directly, or the functional call to infer."""
    if len(args) != 1:
        return None
    x = args[0]
    if qualname in SAME_AS_INPUT:
        t = x.tensor
        return None if t is None else AV(TensorType(t.dtype, t.shape, t.device))
    builder = LAYERS.get(qualname)
    if builder is None:
        return None
    return builder(ctx, mod, x, declared)


__all__ = ["conv_out", "layer_call", "LAYERS", "SAME_AS_INPUT", "ceil_div", "concrete", "FLOAT", "INT"]

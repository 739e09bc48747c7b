"""Shape rules for tensor ops: shape-preserving ops, reductions, matmul, factories, size
queries and losses (views, joining and splitting: ir/shapes/rules_views.py). Each rule gets the
call bound to parameter names (ir/shape_rule_table.Call) and returns the result's abstract
value, or None when it cannot tell.
Result dtypes are left to the front end and torch's dtype rules unless the rule knows better.
"""

from __future__ import annotations

import math
from typing import Any

import sympy

from ir.core.types import BOOL, FLOAT, INT, Dim, TensorType, TupleType
from ir.shapes.rule_table import Call, RuleTable, sizes_of
from ir.shapes.rules_views import agree, infer_view, merge_shapes, split_sizes  # noqa: F401
from ir.shapes.values import (
    AV,
    UNKNOWN,
    broadcast_shapes,
    ceil_div,
    clamp_min0,
    dims_equal,
    exact_div,
    floor_div,
    int_av,
    is_concrete,
    norm_dim,
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


def _same(call: Call, name: str = "self") -> AV | None:
    t = call.tensor(name)
    if t is None:
        return None
    return tensor_av(None, t.shape)


# -- shape-preserving ops -------------------------------------------------------------------------
SAME_SHAPE = (
    "softmax _softmax log_softmax _log_softmax softmin layer_norm group_norm batch_norm instance_norm "
    "rms_norm local_response_norm normalize dropout feature_dropout alpha_dropout feature_alpha_dropout "
    "dropout1d dropout2d dropout3d contiguous clone to type_as type detach detach_ cumsum cumprod "
    "logcumsumexp flip fliplr flipud roll tril triu fill fill_ zero_ requires_grad_ float double half "
    "bfloat16 int long bool byte char short cpu cuda pin_memory index_fill index_copy "
    "index_add scatter scatter_add scatter_reduce index_put renorm alias resolve_conj resolve_neg conj "
    "positive rrelu prelu gumbel_softmax relu6 hardtanh celu selu elu leaky_relu silu mish hardswish "
    "hardsigmoid softplus softsign tanhshrink softshrink hardshrink threshold logsigmoid gelu relu "
    "sigmoid tanh argsort msort nan_to_num bernoulli"
).split()


# (unbound_ok: x.double() binds to aten::to.dtype without its dtype argument)
@rule(*SAME_SHAPE, unbound_ok=True)
def same_shape(call: Call) -> AV | None:
    return _same(call)


@rule("sort", "cummax", "cummin")
def values_indices(call: Call) -> AV | None:
    t = call.tensor("self")
    if t is None:
        return None
    return tuple_av([tensor_av(t.dtype, t.shape), tensor_av("int64", t.shape)])


@rule("native_dropout")
def native_dropout(call: Call) -> AV | None:
    t = call.tensor("self")
    return None if t is None else tuple_av([tensor_av(t.dtype, t.shape), tensor_av("bool", t.shape)])


@rule("glu")
def glu(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    if d is None:
        return tensor_av(None, (None,) * len(shape))
    out = list(shape)
    out[d] = exact_div(shape[d], 2)
    return tensor_av(None, out)


# -- reductions -------------------------------------------------------------------------------------
# -- torch.fft --------------------------------------------------------------------------------------
# (kind, how many dims by default: 1, 2 or all): "c" keeps each size, "r" halves the last
# transformed one (real to complex: n // 2 + 1), "i" doubles it back (complex to real: 2 (m - 1))
_FFT = {
    **{f"fft_{n}": ("c", 1) for n in ("fft", "ifft")}, **{f"fft_{n}": ("c", 2) for n in ("fft2", "ifft2")},
    **{f"fft_{n}": ("c", 0) for n in ("fftn", "ifftn")},
    "fft_rfft": ("r", 1), "fft_rfft2": ("r", 2), "fft_rfftn": ("r", 0), "fft_ihfft": ("r", 1),
    "fft_irfft": ("i", 1), "fft_irfft2": ("i", 2), "fft_irfftn": ("i", 0), "fft_hfft": ("i", 1),
}


@rule(*_FFT)
def fft(call: Call) -> AV | None:
    """The sizes of an FFT's result (its dtype is the front end's: complex or real): the input's,
    but along the transformed dims the lengths `n` / `s` ask for, the last one halved plus one
    (real to complex) or doubled less two (complex to real) where `n` / `s` leave it."""
    shape = call.shape("self")
    if shape is None:
        return None
    kind, count = _FFT[call.name]
    rank = len(shape)
    if count == 1:
        n = call.value("n", default=None)
        lengths = None if n is None else [n]
    else:
        lengths = call.sizes("s") if call.has("s") else None
    if call.has("dim"):
        dims = call.sizes("dim")
    else:  # (fftn's default: the last len(s) dims, else all)
        dims = [-2, -1] if count == 2 else list(range(-len(lengths), 0)) if lengths else list(range(rank))
    if dims is None or lengths is UNKNOWN or lengths is not None and (
            len(lengths) != len(dims) or not all(type(v) is int for v in lengths)):
        return None
    axes = [norm_dim(d, rank) for d in dims]
    if None in axes or not dims:
        return None
    out = list(shape)
    for i, axis in enumerate(axes):
        last = i == len(axes) - 1
        given = lengths[i] if lengths is not None else None
        if kind == "i" and last:
            size = given if given is not None else None if shape[axis] is None else simplify(2 * (shape[axis] - 1))
        elif kind == "r" and last:
            size = floor_div(given if given is not None else shape[axis], 2)
            size = None if size is None else simplify(size + 1)
        else:
            size = given if given is not None else shape[axis]
        out[axis] = size
    return tensor_av(None, out)


@rule("fft_fftshift", "fft_ifftshift")
def fft_shift(call: Call) -> AV | None:
    return _same(call)


def reduce_shape(shape: Shape | None, dims: list[Dim] | None, keepdim: Any) -> Shape | None:
    """The shape after reducing `dims` (None: all of them)."""
    if keepdim is UNKNOWN:
        return None
    if dims is None or dims == []:
        if not keepdim:
            return ()
        return None if shape is None else (1,) * len(shape)
    if shape is None:
        return None
    norm = [norm_dim(d, len(shape)) for d in dims]
    if any(n is None for n in norm):
        return (None,) * len(shape) if keepdim else None
    if len(shape) == 0:
        return ()
    gone = set(norm)
    if keepdim:
        return tuple(1 if i in gone else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in gone)


def _dims_arg(call: Call, *names: str) -> tuple[bool, list[Dim] | None]:
    """(the dims are known, the dims or None for "all")."""
    av = call.get(*names)
    if av is None or (av.known and av.value is None):
        return True, None
    dims = sizes_of(av)
    if dims is None:
        return False, None
    return True, dims


def _reduce(call: Call, dim_names: tuple[str, ...] = ("dim",)) -> Shape | None:
    ok, dims = _dims_arg(call, *dim_names)
    keepdim = call.value("keepdim", "keepdims", default=False)
    shape = call.shape("self")
    if not ok:
        if keepdim is True and shape is not None:
            return (None,) * len(shape)
        return None
    return reduce_shape(shape, dims, keepdim)


REDUCTIONS = ("sum nansum mean nanmean prod amax amin all any logsumexp norm std var count_nonzero "
              "argmax argmin linalg_vector_norm").split()


@rule(*REDUCTIONS)
def reduction(call: Call) -> AV | None:
    if call.name == "norm" and call.get("dim") is None and call.get("self") is not None:
        return tensor_av(None, ())
    if call.name in ("argmax", "argmin") and (call.get("dim") is None or call.value("dim") is None):
        return tensor_av("int64", () if not call.value("keepdim", default=False) else None)
    shape = _reduce(call)
    return None if shape is None else tensor_av(None, shape)


@rule("max", "min")
def max_min(call: Call) -> AV | None:
    other = call.get("other")
    if other is not None and other.tensor is not None:
        return tensor_av(None, broadcast_shapes(call.shape("self"), other.shape))
    if call.get("dim") is None:
        return tensor_av(None, ())
    shape = _reduce(call)
    t = call.tensor("self")
    return tuple_av([tensor_av(t.dtype if t else None, shape), tensor_av("int64", shape)])


@rule("median", "nanmedian", "mode")
def median(call: Call) -> AV | None:
    if call.name != "mode" and call.get("dim") is None:
        return tensor_av(None, ())
    dim = call.get("dim")
    if dim is None:
        dim = int_av(-1)
    shape = reduce_shape(call.shape("self"), sizes_of(dim), call.value("keepdim", default=False))
    t = call.tensor("self")
    return tuple_av([tensor_av(t.dtype if t else None, shape), tensor_av("int64", shape)])


@rule("std_mean", "var_mean", "aminmax")
def two_reductions(call: Call) -> AV | None:
    shape = _reduce(call)
    return tuple_av([tensor_av(None, shape), tensor_av(None, shape)])


@rule("kthvalue", "topk")
def kth(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    dim = call.size("dim") if call.get("dim") is not None else -1
    d = norm_dim(dim, len(shape))
    t = call.tensor("self")
    if call.name == "kthvalue":
        out = reduce_shape(shape, [dim], call.value("keepdim", default=False))
    else:
        if d is None:
            out = (None,) * len(shape)
        else:
            out = shape[:d] + (call.size("k"),) + shape[d + 1:]
    return tuple_av([tensor_av(t.dtype if t else None, out), tensor_av("int64", out)])


# -- matmul --------------------------------------------------------------------------------------
def matmul_shape(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None or not a or not b:
        return None
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 2 and len(b) == 2:
        return (a[0], b[1])
    if len(a) == 1 and len(b) == 2:
        return (b[1],)
    if len(a) == 2 and len(b) == 1:
        return (a[0],)
    batch_a = a[:-2] if len(a) >= 2 else ()
    batch_b = b[:-2] if len(b) >= 2 else ()
    batch = broadcast_shapes(batch_a, batch_b)
    if batch is None:
        return None
    out = list(batch)
    if len(a) >= 2:
        out.append(a[-2])
    if len(b) >= 2:
        out.append(b[-1])
    return tuple(out)


@rule("matmul", "__matmul__")
def matmul(call: Call) -> AV | None:
    return tensor_av(None, matmul_shape(call.shape("self"), call.shape("other")))


@rule("mm")
def mm(call: Call) -> AV | None:
    a, b = call.shape("self"), call.shape("mat2")
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return tensor_av(None, (None, None))
    return tensor_av(None, (a[0], b[1]))


@rule("bmm")
def bmm(call: Call) -> AV | None:
    a, b = call.shape("self"), call.shape("mat2")
    if a is None or b is None or len(a) != 3 or len(b) != 3:
        return tensor_av(None, (None, None, None))
    return tensor_av(None, (agree(a[0], b[0]), a[1], b[2]))


@rule("mv")
def mv(call: Call) -> AV | None:
    a = call.shape("self")
    return tensor_av(None, (a[0],) if a is not None and len(a) == 2 else (None,))


@rule("dot", "vdot", "inner_1d")
def dot(call: Call) -> AV | None:
    return tensor_av(None, ())


@rule("outer", "ger")
def outer(call: Call) -> AV | None:
    a, b = call.shape("self"), call.shape("vec2")
    if a is None or b is None or len(a) != 1 or len(b) != 1:
        return tensor_av(None, (None, None))
    return tensor_av(None, (a[0], b[0]))


@rule("addmm")
def addmm(call: Call) -> AV | None:
    a, b = call.shape("mat1"), call.shape("mat2")
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return tensor_av(None, (None, None))
    return tensor_av(None, (a[0], b[1]))


@rule("baddbmm")
def baddbmm(call: Call) -> AV | None:
    a, b = call.shape("batch1"), call.shape("batch2")
    if a is None or b is None or len(a) != 3 or len(b) != 3:
        return tensor_av(None, (None, None, None))
    return tensor_av(None, (agree(a[0], b[0]), a[1], b[2]))


@rule("addmv")
def addmv(call: Call) -> AV | None:
    a = call.shape("mat")
    return tensor_av(None, (a[0],) if a is not None and len(a) == 2 else (None,))


@rule("linear")
def linear(call: Call) -> AV | None:
    x, w = call.shape("self"), call.shape("weight")
    if x is None or not x:
        return None
    if w is None:
        return tensor_av(None, x[:-1] + (None,))
    if len(w) == 1:
        return tensor_av(None, x[:-1])
    if len(w) == 2:
        return tensor_av(None, x[:-1] + (w[0],))
    return None


@rule("scaled_dot_product_attention")
def sdpa(call: Call) -> AV | None:
    q, v = call.shape("query"), call.shape("value")
    if q is None or v is None or not q or not v:
        return None
    query = call.tensor("query")  # the result is on the query's device (an optional mask hides it from torch's rules)
    return tensor_av(None, q[:-1] + v[-1:], query.device if query is not None else None)


# -- factories -------------------------------------------------------------------------------------
def _size_list(call: Call) -> list[Dim] | None:
    sizes = call.sizes("size")
    if sizes is None:
        return None
    return [s if s is None or type(s) is int or s.is_nonnegative else None for s in sizes]  # type: ignore[union-attr]


@rule("zeros", "ones", "empty", "rand", "randn", "full", "randint", "empty_strided", "new_zeros", "new_ones",
      "new_empty", "new_full", "empty_permuted")
def factory(call: Call) -> AV | None:
    sizes = _size_list(call)
    return None if sizes is None else tensor_av(None, sizes)


@rule("zeros_like", "ones_like", "empty_like", "rand_like", "randn_like", "full_like", "randint_like")
def like(call: Call) -> AV | None:
    return _same(call)


@rule("arange")
def arange(call: Call) -> AV | None:
    end = call.get("end")
    start = call.get("start")
    step = call.get("step")
    parts = [start if start is not None else AV(INT, 0), end, step if step is not None else AV(INT, 1)]
    if any(p is None or not p.known for p in parts):
        return tensor_av(None, (None,))
    a, b, s = (p.value for p in parts)  # type: ignore[union-attr]
    if any(isinstance(v, float) for v in (a, b, s)) or any(isinstance(v, bool) for v in (a, b, s)):
        if any(isinstance(v, sympy.Expr) for v in (a, b, s)):
            return tensor_av(None, (None,))
        n = math.ceil((float(b) - float(a)) / float(s))
        return tensor_av(None, (max(n, 0),))
    if type(s) is not int or s == 0:
        return tensor_av(None, (None,))
    if s > 0:
        return tensor_av(None, (ceil_div(clamp_min0(simplify(sympy.sympify(b) - a)), s),))
    return tensor_av(None, (ceil_div(clamp_min0(simplify(sympy.sympify(a) - b)), -s),))


@rule("linspace", "logspace")
def linspace(call: Call) -> AV | None:
    return tensor_av(None, (call.size("steps"),))


@rule("eye")
def eye(call: Call) -> AV | None:
    n = call.size("n")
    m = call.size("m") if call.get("m") is not None else n
    return tensor_av(None, (n, m))


@rule("scalar_tensor")
def scalar_tensor(call: Call) -> AV | None:
    return tensor_av(None, ())


def _data_shape(av: AV) -> tuple[Dim, ...] | None:
    if av.items is None:
        if av.type in (INT, FLOAT, BOOL):
            return ()
        return None
    if not av.items:
        return (0,)
    inner = [_data_shape(i) for i in av.items]
    if any(s is None for s in inner) or any(s != inner[0] for s in inner):
        return None
    return (len(av.items),) + inner[0]  # type: ignore[operator]


@rule("tensor", "as_tensor")
def tensor(call: Call) -> AV | None:
    data = call.get("data") or (call.pos[0] if call.pos else None)
    if data is None:
        return None
    return tensor_av(None, _data_shape(data))


# -- sizes ------------------------------------------------------------------------------------------
@rule("size", "sym_size", unbound_ok=True)
def size(call: Call) -> AV | None:
    self_av = call.get("self") or (call.pos[0] if call.pos else None)
    shape = self_av.shape if self_av is not None else None
    dim_av = call.get("dim")
    if dim_av is None and len(call.pos) > 1:
        dim_av = call.pos[1]
    if dim_av is None:
        if shape is None:
            return None
        return tuple_av([int_av(d) for d in shape])
    if shape is None:
        return None
    d = norm_dim(size_of(dim_av), len(shape))
    return int_av(None if d is None else shape[d])



@rule("dim", "ndimension", unbound_ok=True)
def ndim(call: Call) -> AV | None:
    shape = call.shape("self")
    return None if shape is None else int_av(len(shape))


@rule("numel", "nelement", unbound_ok=True)
def numel(call: Call) -> AV | None:
    shape = call.shape("self")
    return None if shape is None else int_av(product(shape))


@rule("__len__", unbound_ok=True)
def length(call: Call) -> AV | None:
    shape = call.shape("self")
    return None if shape is None or not shape else int_av(shape[0])



# -- losses ----------------------------------------------------------------------------------------
ELEMENTWISE_LOSSES = ("mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy "
                      "binary_cross_entropy_with_logits soft_margin_loss kl_div poisson_nll_loss").split()


@rule(*ELEMENTWISE_LOSSES)
def elementwise_loss(call: Call) -> AV | None:
    reduction = call.value("reduction", default="mean")
    if reduction in ("mean", "sum", "batchmean") or reduction == 1 or reduction == 2:
        return tensor_av(None, ())
    if reduction in ("none", 0):
        return tensor_av(None, broadcast_shapes(call.shape("self"), call.shape("target")))
    return None


@rule("cross_entropy", "nll_loss")
def class_loss(call: Call) -> AV | None:
    reduction = call.value("reduction", default="mean")
    if reduction in ("mean", "sum", 1, 2):
        return tensor_av(None, ())
    target = call.tensor("target")
    if reduction in ("none", 0) and target is not None and target.dtype == "int64":
        return tensor_av(None, target.shape)
    return None


def same_dims(a: Shape | None, b: Shape | None) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(
        dims_equal(x, y) is True for x, y in zip(a, b))


__all__ = ["matmul_shape", "reduce_shape", "infer_view", "split_sizes", "merge_shapes", "agree",
           "same_dims", "is_concrete", "TensorType", "TupleType"]


@rule("einsum", unbound_ok=True)
def einsum(call: Call) -> AV | None:
    """`torch.einsum("bnp,pd->bnd", a, b)` (or its operands in one list): each letter's size from
    the operands (a size of 1 broadcasts), `...` the broadcast of what it stands for, the result
    in the order the output names, or, without `->`, the letters named once, sorted."""
    if not call.pos or not isinstance(call.pos[0].value, str):
        return None
    operands = list(call.pos[1:])
    if len(operands) == 1 and operands[0].items is not None:
        operands = list(operands[0].items)
    shapes = [o.tensor.shape if o.tensor is not None else None for o in operands]
    lhs, arrow, rhs = call.pos[0].value.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes) or any(s is None for s in shapes):
        return None
    sizes: dict[str, Dim] = {}
    ellipsis: Shape | None = None
    for term, shape in zip(terms, shapes):
        head, dots, tail = term.partition("...")
        if "." in tail or len(head) + len(tail) > len(shape) or not dots and len(term) != len(shape):
            return None
        middle = shape[len(head):len(shape) - len(tail)] if dots else ()
        if dots:
            ellipsis = middle if ellipsis is None else broadcast_shapes(ellipsis, middle)
            if ellipsis is None:
                return None
        for letter, d in zip(head + tail, shape[:len(head)] + shape[len(shape) - len(tail):]):  # type: ignore[operator]
            if not letter.isalpha():
                return None
            old = sizes.get(letter)
            sizes[letter] = d if old is None and letter not in sizes or old == 1 else old if d == 1 else agree(old, d)
    if not arrow:  # (the implicit output: the letters named once, in alphabetical order)
        rhs = ("..." if ellipsis is not None else "") + "".join(sorted(c for c in sizes if lhs.count(c) == 1))
    head, dots, tail = rhs.partition("...")
    if any(c not in sizes for c in head + tail) or dots and ellipsis is None:
        return None
    return tensor_av(None, tuple(sizes[c] for c in head) + (ellipsis if dots else ()) + tuple(sizes[c] for c in tail))  # type: ignore[operator]

"""Shape rules for views and reshapes (view/reshape with -1 inference, flatten, permute,
transpose, unsqueeze/squeeze, expand, repeat, narrow/select/slice) and for joining and splitting
(cat, stack, split, chunk, unbind, index_select, gather, masked_select, nonzero, where)."""

from __future__ import annotations

from typing import Any

import sympy

from ir.core.types import INT, Dim, ListType
from ir.shapes.rule_table import Call, RuleTable, sizes_of
from ir.shapes.values import (
    AV,
    broadcast_shapes,
    concrete,
    exact_div,
    list_av,
    norm_dim,
    product,
    simplify,
    size_of,
    slice_length,
    tensor_av,
)

Shape = tuple[Dim, ...]

# This file's shape rules; ir/shapes/rules.py merges them with the other rule files'.
RULES = RuleTable()
rule = RULES.rule


def agree(a: Dim, b: Dim) -> Dim:
    """Two sizes torch requires to be equal: the better known one (any is right when it runs)."""
    if a is None:
        return b
    if b is None or type(a) is int:
        return a
    return b if type(b) is int else a


def merge_shapes(shapes: list[Shape | None]) -> Shape | None:
    """Shapes torch requires to be equal (stack, cat's other dims): per dimension the best known."""
    known = [s for s in shapes if s is not None]
    if not known or any(len(s) != len(known[0]) for s in known):
        return None
    out = list(known[0])
    for s in known[1:]:
        out = [agree(a, b) for a, b in zip(out, s)]
    return tuple(out)


# -- views and reshapes -----------------------------------------------------------------------------
def infer_view(in_shape: Shape | None, sizes: list[Dim] | None) -> Shape | None:
    """view/reshape: one -1 is inferred from the element count when that divides exactly."""
    if sizes is None:
        return None
    holes = [i for i, s in enumerate(sizes) if s == -1]
    out: list[Dim] = [s if s is None or type(s) is int or s.is_nonnegative else None for s in sizes]  # type: ignore[union-attr]
    if len(holes) > 1:
        return None
    if holes:
        numel = product(in_shape) if in_shape is not None else None
        rest = product([s for i, s in enumerate(out) if i != holes[0]])
        out[holes[0]] = exact_div(numel, rest)
    return tuple(out)


@rule("view", "reshape", "_unsafe_view", "_reshape_alias", "view_copy", "_reshape_copy")
def view(call: Call) -> AV | None:
    if call.aten == "aten::view.dtype":
        return None
    return tensor_av(None, infer_view(call.shape("self"), call.sizes("size", "shape", single_ok=True)))


@rule("view_as", "reshape_as", "expand_as")
def view_as(call: Call) -> AV | None:
    return tensor_av(None, call.shape("other"))


@rule("flatten")
def flatten(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    if len(shape) == 0:
        return tensor_av(None, (1,))
    start = norm_dim(call.size("start_dim"), len(shape))
    end = norm_dim(call.size("end_dim"), len(shape))
    if start is None or end is None or start > end:
        return None
    return tensor_av(None, shape[:start] + (product(shape[start:end + 1]),) + shape[end + 1:])


@rule("unflatten")
def unflatten(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    sizes = call.sizes("sizes")
    if d is None or sizes is None:
        return None
    inner = infer_view((shape[d],), sizes)
    if inner is None:
        return None
    return tensor_av(None, shape[:d] + inner + shape[d + 1:])


@rule("permute")
def permute(call: Call) -> AV | None:
    shape = call.shape("self")
    dims = call.sizes("dims")
    if shape is None or dims is None or len(dims) != len(shape):
        return None
    norm = [norm_dim(d, len(shape)) for d in dims]
    if any(n is None for n in norm):
        return tensor_av(None, (None,) * len(shape))
    return tensor_av(None, tuple(shape[n] for n in norm))  # type: ignore[index]


def _swap(shape: Shape | None, a: Dim, b: Dim) -> AV | None:
    if shape is None:
        return None
    i, j = norm_dim(a, len(shape)), norm_dim(b, len(shape))
    if i is None or j is None:
        return tensor_av(None, (None,) * len(shape))
    out = list(shape)
    out[i], out[j] = out[j], out[i]
    return tensor_av(None, out)


@rule("transpose", "swapaxes", "swapdims")
def transpose(call: Call) -> AV | None:
    return _swap(call.shape("self"), call.size("dim0", "axis0"), call.size("dim1", "axis1"))


@rule("t")
def t(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None or len(shape) > 2:
        return None
    return tensor_av(None, tuple(reversed(shape)))


@rule("numpy_T")
def numpy_t(call: Call) -> AV | None:
    shape = call.shape("self")
    return None if shape is None else tensor_av(None, tuple(reversed(shape)))


@rule("adjoint", "mT", "mH")
def matrix_t(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None or len(shape) < 2:
        return None
    return _swap(shape, -2, -1)


@rule("movedim", "moveaxis")
def movedim(call: Call) -> AV | None:
    shape = call.shape("self")
    src, dst = call.sizes("source"), call.sizes("destination")
    if shape is None or src is None or dst is None or len(src) != len(dst):
        return None
    n = len(shape)
    s = [norm_dim(d, n) for d in src]
    t_ = [norm_dim(d, n) for d in dst]
    if any(x is None for x in s + t_):
        return tensor_av(None, (None,) * n)
    order: list[int | None] = [None] * n
    for a, b in zip(s, t_):
        order[b] = a  # type: ignore[index]
    rest = iter(i for i in range(n) if i not in s)
    perm = [o if o is not None else next(rest) for o in order]
    return tensor_av(None, tuple(shape[p] for p in perm))


@rule("unsqueeze")
def unsqueeze(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape), extra=1)
    if d is None:
        return tensor_av(None, (None,) * (len(shape) + 1))
    return tensor_av(None, shape[:d] + (1,) + shape[d:])


@rule("squeeze")
def squeeze(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    av = call.get("dim")
    if av is None or (av.known and av.value is None):
        dims = list(range(len(shape)))
    else:
        given = sizes_of(av)
        if given is None:
            return None
        norm = [norm_dim(d, len(shape)) for d in given]
        if any(n is None for n in norm):
            return None
        dims = norm  # type: ignore[assignment]
    out = []
    for i, d in enumerate(shape):
        if i in dims:
            if d == 1:
                continue
            if d is None or (type(d) is not int):
                return None  # a size that may be 1: the rank is not known
        out.append(d)
    return tensor_av(None, out)


@rule("expand", "broadcast_to")
def expand(call: Call) -> AV | None:
    shape = call.shape("self")
    sizes = call.sizes("size", "shape")
    if sizes is None:
        return None
    out: list[Dim] = []
    lead = len(sizes) - (len(shape) if shape is not None else 0)
    for i, s in enumerate(sizes):
        if s == -1:
            if shape is None or i < lead:
                out.append(None)
            else:
                out.append(shape[i - lead])
        elif s is None or type(s) is int or s.is_nonnegative:  # type: ignore[union-attr]
            out.append(s)
        else:
            out.append(None)
    return tensor_av(None, out)


@rule("repeat", "tile")
def repeat(call: Call) -> AV | None:
    shape = call.shape("self")
    reps = call.sizes("repeats", "dims")
    if shape is None or reps is None:
        return None
    if call.name == "tile" and len(reps) < len(shape):
        reps = [1] * (len(shape) - len(reps)) + reps
    if len(reps) < len(shape):
        return None
    padded = (1,) * (len(reps) - len(shape)) + tuple(shape)
    return tensor_av(None, [product([a, b]) for a, b in zip(padded, reps)])


@rule("narrow")
def narrow(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    if d is None:
        return tensor_av(None, (None,) * len(shape))
    out = list(shape)
    out[d] = call.size("length")
    return tensor_av(None, out)


@rule("select")
def select(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None or not shape:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    if d is None:
        return tensor_av(None, (None,) * (len(shape) - 1))
    return tensor_av(None, shape[:d] + shape[d + 1:])


@rule("slice")
def slice_(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    out = list(shape)
    if d is None:
        return tensor_av(None, (None,) * len(shape))
    start = call.get("start")
    end = call.get("end")
    s = None if start is None or (start.known and start.value is None) else size_of(start)
    e = None if end is None or (end.known and end.value is None) else size_of(end)
    if (start is not None and not start.known) or (end is not None and not end.known):
        out[d] = None
    else:
        out[d] = slice_length(shape[d], s, e, call.size("step") if call.get("step") else 1)
    return tensor_av(None, out)


# -- joining and splitting -----------------------------------------------------------------------------
def _tensor_items(av: AV | None) -> tuple[list[AV] | None, AV | None]:
    """(the tensors of a list/tuple argument when their number is known, the element type)."""
    if av is None:
        return None, None
    if av.items is not None:
        return list(av.items), None
    if isinstance(av.type, ListType):
        return None, AV(av.type.elem)
    return None, None


@rule("cat", "concat", "concatenate")
def cat(call: Call) -> AV | None:
    items, elem = _tensor_items(call.get("tensors"))
    dim = call.size("dim")
    if items is not None:
        # Legacy rule: 1-d empty tensors are skipped; keep only items whose rank is known > 0 or
        # whose shape is known not to be (0,).
        shapes = [i.shape for i in items]
        if any(s is None for s in shapes):
            ranks = {len(s) for s in shapes if s is not None}
            return tensor_av(None, (None,) * ranks.pop()) if len(ranks) == 1 and all(
                s is None or len(s) > 1 for s in shapes) else None
        shapes = [s for s in shapes if s != (0,)]  # type: ignore[comparison-overlap]
        if not shapes:
            return tensor_av(None, (0,))
        rank = len(shapes[0])  # type: ignore[arg-type]
        if any(len(s) != rank for s in shapes):  # type: ignore[arg-type]
            return None
        d = norm_dim(dim, rank)
        if d is None:
            return tensor_av(None, (None,) * rank)
        others = merge_shapes([s[:d] + (0,) + s[d + 1:] for s in shapes])  # type: ignore[index]
        if others is None:
            return None
        out = list(others)
        total: Any = 0
        for s in shapes:
            if s[d] is None:  # type: ignore[index]
                total = None
                break
            total = total + s[d]  # type: ignore[index]
        out[d] = simplify(total) if isinstance(total, sympy.Expr) else total
        return tensor_av(None, out)
    if elem is not None and elem.shape is not None and len(elem.shape) > 1:
        d = norm_dim(dim, len(elem.shape))
        if d is None:
            return tensor_av(None, (None,) * len(elem.shape))
        out = list(elem.shape)
        out[d] = None
        return tensor_av(None, out)
    return None


@rule("stack")
def stack(call: Call) -> AV | None:
    items, elem = _tensor_items(call.get("tensors"))
    dim = call.size("dim")
    if items is not None:
        shape = merge_shapes([i.shape for i in items])
        count: Dim = len(items)
    elif elem is not None:
        shape, count = elem.shape, None
    else:
        return None
    if shape is None:
        return None
    d = norm_dim(dim, len(shape), extra=1)
    if d is None:
        return tensor_av(None, (None,) * (len(shape) + 1))
    return tensor_av(None, shape[:d] + (count,) + shape[d:])


def _pieces(shape: Shape, d: int, sizes: list[Dim]) -> AV:
    items = []
    for s in sizes:
        out = list(shape)
        out[d] = s
        items.append(tensor_av(None, out))
    return list_av(items)


def _unknown_pieces(shape: Shape, d: int, size: Dim = None) -> AV:
    out = list(shape)
    out[d] = size
    return list_av(None, tensor_av(None, out))


def split_sizes(n: Dim, size: Dim) -> list[Dim] | None:
    """torch.split(x, size): the piece sizes when their number is known."""
    if n is None or size is None:
        return None
    if type(n) is int and type(size) is int:
        if size <= 0:
            return None
        if n == 0:
            return [0]
        count = -(-n // size)
        return [size] * (count - 1) + [n - size * (count - 1)]
    count = exact_div(n, size)
    if type(count) is int and count > 0:
        return [size] * count  # divides exactly: every piece is `size`
    return None


@rule("split", "split_with_sizes", "unsafe_split", "split_copy")
def split(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim") if call.get("dim") is not None else 0, len(shape))
    if d is None:
        return None
    arg = call.get("split_size", "split_size_or_sections", "split_sizes")
    if arg is None:
        return None
    if arg.type == INT:
        sizes = split_sizes(shape[d], size_of(arg))
        if sizes is None:
            return _unknown_pieces(shape, d)
        return _pieces(shape, d, sizes)
    given = sizes_of(arg, single_ok=False)
    if given is None:
        return _unknown_pieces(shape, d)
    return _pieces(shape, d, given)


@rule("chunk", "unsafe_chunk")
def chunk(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None:
        return None
    d = norm_dim(call.size("dim") if call.get("dim") is not None else 0, len(shape))
    chunks = concrete(call.size("chunks"))
    if d is None or chunks is None or chunks <= 0:
        return None
    n = shape[d]
    if type(n) is int:
        size = -(-n // chunks)
        return _pieces(shape, d, split_sizes(n, size) if size else [0] * min(chunks, 1))  # type: ignore[arg-type]
    each = exact_div(n, chunks)
    if each is not None:
        return _pieces(shape, d, [each] * chunks)
    return _unknown_pieces(shape, d)


@rule("unbind")
def unbind(call: Call) -> AV | None:
    shape = call.shape("self")
    if shape is None or not shape:
        return None
    d = norm_dim(call.size("dim") if call.get("dim") is not None else 0, len(shape))
    if d is None:
        return list_av(None, tensor_av(None, (None,) * (len(shape) - 1)))
    rest = shape[:d] + shape[d + 1:]
    n = shape[d]
    if type(n) is int:
        return list_av([tensor_av(None, rest) for _ in range(n)])
    return list_av(None, tensor_av(None, rest))


@rule("index_select")
def index_select(call: Call) -> AV | None:
    shape = call.shape("self")
    index = call.shape("index")
    if shape is None:
        return None
    d = norm_dim(call.size("dim"), len(shape))
    if d is None:
        return tensor_av(None, (None,) * len(shape))
    out = list(shape)
    out[d] = product(index) if index is not None else None
    return tensor_av(None, out)


@rule("gather", "take_along_dim")
def gather(call: Call) -> AV | None:
    return tensor_av(None, call.shape("indices", "index"))


@rule("take")
def take(call: Call) -> AV | None:
    return tensor_av(None, call.shape("index"))


@rule("masked_select")
def masked_select(call: Call) -> AV | None:
    return tensor_av(None, (None,))  # data-dependent count


@rule("nonzero", "argwhere")
def nonzero(call: Call) -> AV | None:
    shape = call.shape("self")
    if call.value("as_tuple", default=False) is True:
        return None
    return tensor_av("int64", (None, len(shape)) if shape is not None else (None, None))


@rule("one_hot")
def one_hot(call: Call) -> AV | None:
    shape = call.shape("self")
    n = call.size("num_classes")
    if shape is None:
        return None
    known = n if (type(n) is int and n >= 0) or (n is not None and type(n) is not int) else None
    return tensor_av("int64", shape + (known,))


@rule("where")
def where(call: Call) -> AV | None:
    shapes = [av.shape for av in (call.get("condition"), call.get("self"), call.get("other"))
              if av is not None and av.tensor is not None]
    if call.get("self") is None and call.get("other") is None:
        return None  # torch.where(cond): data-dependent
    return tensor_av(None, broadcast_shapes(*shapes))

"""The abstract values of the shape analysis and the size algebra they use.

An `AV` says what the analysis knows about one value: its IR type with every fact found (tensor
dtype, shape, device), its Python value when known (an int may be a sympy expression of size
symbols), the elements of a tuple or list, and where a module attribute came from. `join` keeps
the facts two paths share. Sizes are ints, sympy expressions over positive integer symbols
(`ir.core.types.sym`), or None; the helpers here decide equality, broadcasting, exact division and
slice lengths symbolically, and answer None whenever it cannot be decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import sympy
import torch

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    NONE,
    STR,
    Dim,
    ListType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
    as_dim,
    unify,
)
from ir.torchapi import dtypes as dt


# -- abstract values ---------------------------------------------------------------------------
class _Unknown:
    _instance: "_Unknown | None" = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class AV:
    """What the analysis knows about one value.

    `type`: the IR type with every fact found (tensor dtype, shape, device).
    `value`: the Python value when known: an int (or a sympy expression of the size symbols), a
    float, bool, str or None; a dtype as its name ("float32"); a device as its str; a live
    nn.Module. UNKNOWN otherwise.
    `items`: the elements of a tuple or list (or torch.Size) when their number is known.
    `origin`: where a module or attribute value comes from, as a path from a function argument
    (("self", "qkv", "weight")), for guards.
    """

    type: Type
    value: Any = UNKNOWN
    items: tuple["AV", ...] | None = None
    origin: tuple[str | int, ...] | None = None

    @property
    def known(self) -> bool:
        return self.value is not UNKNOWN

    @property
    def tensor(self) -> TensorType | None:
        return self.type if isinstance(self.type, TensorType) else None

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        t = self.tensor
        return None if t is None else t.shape

    def __repr__(self) -> str:
        parts = [str(self.type)]
        if self.known:
            parts.append(f"= {self.value!r}")
        if self.items is not None:
            parts.append(f"items={list(self.items)!r}")
        return f"AV({' '.join(parts)})"


BOTTOM_TYPE = ScalarType("<unreachable>")
BOTTOM = AV(BOTTOM_TYPE)  # a value on no path (py.uninitialized): the identity of join


def is_bottom(av: AV) -> bool:
    return av.type is BOTTOM_TYPE


def same_value(a: Any, b: Any) -> bool:
    if a is UNKNOWN or b is UNKNOWN:
        return False
    if type(a) is not type(b) and not (_is_int(a) and _is_int(b)):
        return False
    if isinstance(a, (torch.nn.Module,)):
        return a is b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are not the same
        return False


def join(a: AV, b: AV) -> AV:
    """The facts `a` and `b` share (a value that is `a` on one path and `b` on another)."""
    if is_bottom(a):
        return b
    if is_bottom(b):
        return a
    if a == b:
        return a
    t = unify(a.type, b.type)
    if t is None:
        t = ANY
    value = a.value if same_value(a.value, b.value) else UNKNOWN
    items = None
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join(x, y) for x, y in zip(a.items, b.items))
    origin = a.origin if a.origin == b.origin else None
    return AV(t, value, items, origin)


def join_all(avs: Iterable[AV]) -> AV:
    out = BOTTOM
    for av in avs:
        out = join(out, av)
    return out


def literal_of(av: AV) -> Any:
    """The constant `av` stands for where every part of it is known (a number, a string, None,
    or a tuple or list of such, nested: crossvit's list of image sizes); UNKNOWN otherwise."""
    if av.known:
        return av.value if av.value is None or isinstance(av.value, (bool, int, float, str)) else UNKNOWN
    if av.items is None:
        return UNKNOWN
    items = tuple(literal_of(i) for i in av.items)
    if any(i is UNKNOWN for i in items):
        return UNKNOWN
    return list(items) if isinstance(av.type, ListType) else items


def const_av(value: Any) -> AV:
    """The abstract value of a Python constant."""
    if value is None:
        return AV(NONE, None)
    if isinstance(value, bool):
        return AV(BOOL, value)
    if _is_int(value):
        return AV(INT, as_dim(value))
    if isinstance(value, float):
        return AV(FLOAT, value)
    if isinstance(value, str):
        return AV(STR, value)
    if isinstance(value, torch.dtype):
        return AV(DTYPE, dt.dtype_name(value))
    if isinstance(value, torch.device):
        return AV(DEVICE, str(value))
    if isinstance(value, (tuple, list)):
        items = tuple(const_av(v) for v in value)
        if isinstance(value, list):
            return AV(ListType(join_all(items).type if items else ANY), UNKNOWN, items)
        return AV(TupleType(tuple(i.type for i in items)), UNKNOWN, items)
    if isinstance(value, torch.Tensor):
        return AV(tensor_type_of(value))
    return AV(ANY, value)


def tensor_type_of(t: torch.Tensor) -> TensorType:
    """The exact type of a real tensor (the device as its type: "cpu", "cuda")."""
    return TensorType(dt.dtype_name(t.dtype), tuple(int(d) for d in t.shape), t.device.type)


def int_av(value: Any) -> AV:
    return AV(INT, UNKNOWN if value is None else as_dim(value))


def tuple_av(items: Sequence[AV]) -> AV:
    return AV(TupleType(tuple(i.type for i in items)), UNKNOWN, tuple(items))


def list_av(items: Sequence[AV] | None, elem: AV | None = None) -> AV:
    if items is not None:
        return AV(ListType(join_all(items).type if items else ANY), UNKNOWN, tuple(items))
    return AV(ListType(elem.type if elem is not None else ANY))


def tensor_av(dtype: str | None, shape: Sequence[Dim] | None, device: str | None = None) -> AV:
    return AV(TensorType(dtype, None if shape is None else tuple(shape), device))


def _is_int(v: Any) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, sympy.Expr) and v.is_integer is True)


# -- the size algebra --------------------------------------------------------------------------
def size_of(av: AV | None) -> Dim:
    """An int argument's value as a size: an int, a sympy expression, or None when unknown."""
    if av is None or not av.known:
        return None
    v = av.value
    if isinstance(v, bool):
        return int(v)
    if _is_int(v):
        return as_dim(v)
    return None


def concrete(d: Dim) -> int | None:
    return d if type(d) is int else None


def is_concrete(shape: Sequence[Dim] | None) -> bool:
    return shape is not None and all(type(d) is int for d in shape)


def simplify(e: Any) -> Dim:
    """A size expression in normal form; None unless it is provably an integer."""
    if e is None:
        return None
    if isinstance(e, sympy.Expr):
        if e.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            return None
        # sympy.simplify is slow; only Min/Max (from slice bounds) need it to fold away.
        e = sympy.simplify(e) if e.has(sympy.Min, sympy.Max) else sympy.expand(e)
        if e.is_integer is not True and not e.is_Integer:
            return None
    return as_dim(e)


def dims_equal(a: Dim, b: Dim) -> bool | None:
    """True when provably equal, False when provably different, None when it cannot be told."""
    if a is None or b is None:
        return None
    if a == b:
        return True
    diff = sympy.expand(sympy.sympify(a) - sympy.sympify(b))
    if diff == 0:
        return True
    if diff.is_zero is False:
        return False
    return None


def at_least(d: Dim, n: int) -> bool:
    """Whether the size is provably >= n."""
    if d is None:
        return False
    if type(d) is int:
        return d >= n
    return bool((sympy.sympify(d) - n).is_nonnegative)


def broadcast_dim(a: Dim, b: Dim) -> Dim:
    """The size two broadcast dimensions give, when torch accepts them."""
    if a == 1:
        return b
    if b == 1:
        return a
    if a is not None and b is not None and dims_equal(a, b):
        return a
    # A concrete size other than 1 wins: the other side must be 1 or the same for the op to run.
    if type(a) is int:
        return a
    if type(b) is int:
        return b
    if a is None or b is None:
        return None
    # Both symbolic: torch accepts them when equal or one is 1, and the result is then the larger.
    if at_least(a, 1) and at_least(b, 1):
        m = sympy.Max(a, b)
        if m == a or m == b:
            return as_dim(m)
    return None


def broadcast_shapes(*shapes: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Dim] = []
    for i in range(rank):
        d: Dim = 1
        for s in shapes:
            k = i - (rank - len(s))  # type: ignore[arg-type]
            if k >= 0:
                d = broadcast_dim(d, s[k])  # type: ignore[index]
        out.append(d)
    return tuple(out)


def product(dims: Iterable[Dim]) -> Dim:
    out: Any = 1
    for d in dims:
        if d is None:
            return None
        out = out * d
    return simplify(out) if isinstance(out, sympy.Expr) else out


def exact_div(a: Dim, b: Dim) -> Dim:
    """a / b when it is provably an integer; None otherwise."""
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        return a // b if a % b == 0 else None
    q = sympy.expand(sympy.cancel(sympy.sympify(a) / sympy.sympify(b)))
    return as_dim(q) if q.is_integer is True else None


def ceil_div(a: Dim, b: Dim) -> Dim:
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        return -(-a // b)
    return simplify(sympy.ceiling(sympy.sympify(a) / b))


def floor_div(a: Dim, b: Dim) -> Dim:
    if a is None or b is None or b == 0:
        return None
    if type(a) is int and type(b) is int:
        return a // b
    return simplify(sympy.floor(sympy.sympify(a) / b))


def clamp_min0(d: Dim) -> Dim:
    if d is None:
        return None
    if type(d) is int:
        return max(d, 0)
    if (sympy.sympify(d)).is_nonnegative:
        return d
    return simplify(sympy.Max(0, d))


def norm_dim(d: Dim, rank: int | None, extra: int = 0) -> int | None:
    """A dimension index made non-negative (for a tensor of `rank`, or `rank + extra` for ops
    like unsqueeze that index the result); None when it is not a valid concrete index."""
    if rank is None or type(d) is not int:
        return None
    n = rank + extra
    if n == 0 and d in (0, -1):
        return 0  # scalars accept dim 0 / -1
    if not -n <= d < n:
        return None
    return d + n if d < 0 else d


def slice_length(n: Dim, start: Dim | None, stop: Dim | None, step: Dim | None) -> Dim:
    """len(range(n)[start:stop:step]) for step > 0; None stands for an absent part. Only sizes whose
    sign is known are accepted as bounds (a negative bound counts from the end)."""
    step_v = 1 if step is None else step
    if type(step_v) is not int or step_v <= 0:
        return None

    def bound(b: Dim, default: Dim) -> Dim:
        if b is None:
            return default
        if n is None:
            return None
        if type(b) is int:
            if b < 0:
                return clamp_min0(simplify(n + b) if not isinstance(n, int) else n + b)
            return b if type(n) is int and b <= n else (simplify(sympy.Min(b, n)) if type(n) is not int else min(b, n))
        e = sympy.sympify(b)
        if e.is_nonnegative:
            return simplify(sympy.Min(e, n))
        if e.is_negative:
            return clamp_min0(simplify(n + e))
        return None

    if stop is None and type(start) is int and start < 0 and n is not None and type(n) is not int:
        length: Dim = simplify(sympy.Min(n, -start))  # x[-k:]
        return ceil_div(length, step_v) if step_v != 1 else length
    lo = bound(start, 0)
    hi = bound(stop, n)
    if lo is None or hi is None:
        return None
    length = clamp_min0(simplify(sympy.sympify(hi) - lo) if not (type(hi) is int and type(lo) is int) else hi - lo)
    if length is None:
        return None
    return ceil_div(length, step_v) if step_v != 1 else length

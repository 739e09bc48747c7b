"""The shape of `base[items]` (torch.index): basic indexing (ints, slices with constant or
symbolic bounds, None, Ellipsis, Python bools) and advanced indexing (integer tensors and lists,
boolean masks) with torch's placement rule: ints select first; the advanced indices' broadcast
shape goes where they stand when they are adjacent, else in front. A boolean mask gives a
data-dependent (unknown) size.
"""

from __future__ import annotations

from typing import Any, Sequence

from ir.core.types import BOOL, INT, NONE, Dim, TensorType
from ir.shapes.values import AV, UNKNOWN, broadcast_shapes, size_of, slice_length, tensor_av
from ir.torchapi.dtypes import INTEGRAL_DTYPES

Shape = tuple[Dim, ...]


class _Unknown(Exception):
    """The result's rank cannot be told."""


def _bound(av: AV | None) -> tuple[bool, Dim]:
    """(the bound is known, its value; None for an absent bound)."""
    if av is None or (av.type == NONE):
        return True, None
    if av.type in (INT, BOOL) and av.known:
        return True, size_of(av)
    return False, None


def _entry(item: tuple, parts: list[AV]) -> tuple[str, Any]:
    """One index item as (kind, data): ("slice", (start, stop, step) AVs), ("none", None),
    ("ellipsis", None), ("int", None), ("bool", value), ("adv", (shape, consumed dims))."""
    kind = item[0]
    if kind == "slice":
        return "slice", parts
    if kind in ("none", "ellipsis"):
        return kind, None
    av = parts[0]
    t = av.type
    if t == INT:
        return "int", None
    if t == BOOL:
        return "bool", av.value
    if t == NONE:
        return "none", None
    if isinstance(t, TensorType):
        if t.dtype in ("bool", "uint8"):
            if t.shape is None:
                raise _Unknown
            return "adv", ((None,), len(t.shape))
        if t.dtype in INTEGRAL_DTYPES:
            return "adv", (t.shape, 1)
        raise _Unknown
    if av.items is not None and all(i.type == INT for i in av.items):
        return "adv", ((len(av.items),), 1)
    raise _Unknown


def index_shape(base: Shape | None, items: Sequence[tuple], operands: Sequence[AV]) -> Shape | None:
    if base is None:
        return None
    ops = list(operands)
    entries: list[tuple[str, Any]] = []
    try:
        for item in items:
            if item[0] == "slice":
                present = [bool(p) for p in item[1:4]]
                parts = [ops.pop(0) if p else None for p in present]
                entries.append(_entry(item, parts))  # type: ignore[arg-type]
            elif item[0] == "value":
                entries.append(_entry(item, [ops.pop(0)]))
            else:
                entries.append(_entry(item, []))
    except _Unknown:
        return None
    consumed = 0
    for kind, data in entries:
        if kind in ("slice", "int"):
            consumed += 1
        elif kind == "adv":
            consumed += data[1]
    if consumed > len(base) or sum(1 for k, _ in entries if k == "ellipsis") > 1:
        return None
    if not any(k == "ellipsis" for k, _ in entries):
        entries.append(("ellipsis", None))
    # Walk the items against the base's dimensions.
    out: list[Any] = []  # dims, or the marker "adv" where the advanced indices' shape goes
    adv_shapes: list[Shape | None] = []
    adv_positions: list[int] = []  # positions among the non-int entries
    position = 0
    d = 0
    for kind, data in entries:
        if kind == "int":
            d += 1
            continue
        if kind == "slice":
            known = [_bound(p) for p in data]
            if all(k for k, _ in known):
                start, stop, step = (v for _, v in known)
                out.append(slice_length(base[d], start, stop, step))
            else:
                out.append(None)
            d += 1
        elif kind == "none":
            out.append(1)
        elif kind == "bool":
            out.append(None if data is UNKNOWN else int(bool(data)))
        elif kind == "ellipsis":
            n = len(base) - consumed
            out.extend(base[d:d + n])
            d += n
        elif kind == "adv":
            adv_shapes.append(data[0])
            adv_positions.append(position)
            if len(adv_shapes) == 1:
                out.append("adv")
            d += data[1]
        position += 1
    if not adv_shapes:
        return tuple(out)
    adv = broadcast_shapes(*adv_shapes)
    if adv is None:
        return None
    adjacent = adv_positions == list(range(adv_positions[0], adv_positions[0] + len(adv_positions)))
    at = out.index("adv")
    rest = [x for x in out if x != "adv"]
    if adjacent:
        return tuple(rest[:at]) + adv + tuple(rest[at:])
    return adv + tuple(rest)


def index_result(base: AV, items: Sequence[tuple], operands: Sequence[AV]) -> AV:
    t = base.tensor
    shape = index_shape(t.shape if t is not None else None, items, operands)
    return tensor_av(t.dtype if t else None, shape, t.device if t else None)

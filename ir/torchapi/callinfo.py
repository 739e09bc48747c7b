"""The answer ir/torchapi/signatures.py gives about a call, its error type, and helpers shared by
the modules that compute it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    STR,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.torchapi import dtypes as dt

Consts = dict  # dict[int | str, object]: constant argument values, by position or keyword


@dataclass(frozen=True)
class CallInfo:
    result: Type  # IR type of the result (TupleType for multiple returns, NONE for none)
    aten: str | None  # "aten::name.overload" when the call binds to one aten overload
    mutates: tuple[int, ...]  # operands written in place
    random: bool  # consumes the global RNG: never reorder, CSE or drop
    alias_of: int | None  # operand the result may alias (views, in-place ops)
    # Every operand the result (or an element of a list/tuple result) may share storage with;
    # includes alias_of. More than one for e.g. torch.broadcast_tensors(a, b), einsum.
    aliases: tuple[int, ...] = ()
    # Field names of a tuple result that torch returns as a named tuple: torch.max(x, 1) gives
    # ("values", "indices"), so `.values` is element 0. Empty otherwise.
    result_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.alias_of is not None and self.alias_of not in self.aliases:
            object.__setattr__(self, "aliases", tuple(sorted({*self.aliases, self.alias_of})))


def effect_attributes(info: CallInfo) -> dict[str, Any]:
    """The attributes a torch.call / torch.method op carries for what `info` says of its
    effects: `mutates`, `alias_of`, `random`, `aten` (ir/core/ops.py derives its traits from them)."""
    attrs: dict[str, Any] = {}
    if info.mutates:
        attrs["mutates"] = tuple(info.mutates)
    if info.alias_of is not None:
        attrs["alias_of"] = info.alias_of
    if info.random:
        attrs["random"] = True
    if info.aten:
        attrs["aten"] = info.aten
    return attrs


class SignatureError(Exception):
    """A call the compiler does not accept. str(): a one-line message; .hint: what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


# -- helpers --------------------------------------------------------------------------------------
def tensor_devices(types: list[Type]) -> str | None:
    """The device all tensor operands share, when every one of them is known and equal."""
    found: set[str | None] = set()

    def walk(t: Type) -> None:
        if isinstance(t, TensorType):
            found.add(t.device)
        elif isinstance(t, OptionalType):
            walk(t.elem)
        elif isinstance(t, (TupleType, ListType)):
            for e in (t.elems if isinstance(t, TupleType) else (t.elem,)):
                walk(e)
        elif t == ANY:
            found.add(None)

    for t in types:
        walk(t)
    if len(found) == 1:
        return next(iter(found))
    return None


def has_tensor(types: list[Type]) -> bool:
    def walk(t: Type) -> bool:
        if isinstance(t, TensorType):
            return True
        if isinstance(t, OptionalType):
            return walk(t.elem)
        if isinstance(t, TupleType):
            return any(walk(e) for e in t.elems)
        if isinstance(t, ListType):
            return walk(t.elem)
        return False

    return any(walk(t) for t in types)


def type_from_desc(kind: str, desc: Any, device: str | None, optional: bool = False) -> Type:
    """IR type of a result of schema kind `kind`, with dtypes from the oracle's `desc`."""
    if kind == "Tensor":
        t: Type = TensorType(desc if isinstance(desc, str) else None, None, device)
    elif kind == "Tensor[]":
        elem = None
        if isinstance(desc, tuple) and desc and all(d == desc[0] for d in desc) and isinstance(desc[0], str):
            elem = desc[0]
        t = ListType(TensorType(elem, None, device))
    elif kind == "Scalar":
        t = {int: INT, float: FLOAT, bool: BOOL, complex: dt.COMPLEX}.get(desc, ANY)  # type: ignore[arg-type]
    else:
        t = {"int": INT, "float": FLOAT, "bool": BOOL, "complex": dt.COMPLEX, "str": STR,
             "dtype": DTYPE, "device": DEVICE, "int[]": ListType(INT), "float[]": ListType(FLOAT),
             "bool[]": ListType(BOOL)}.get(kind, ANY)
    return OptionalType(t) if optional and t != ANY else t


def shape_type(self_type: Type) -> Type:
    """x.shape / x.size(): a tuple of ints when the rank is known (torch.Size is a tuple)."""
    if isinstance(self_type, TensorType) and self_type.shape is not None:
        return TupleType((INT,) * len(self_type.shape))
    return ListType(INT)


def arg_desc(args: list[Type], kwargs: dict[str, Type], self_type: Type | None = None) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def tensor_operands(types: list[Type | None]) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(types) if t is not None and has_tensor([t]))


def call_function(fn: Callable) -> Callable[[list[Any], dict[str, Any]], Any]:
    return dt.keyed(lambda a, k: fn(*a, **k), ("fn", fn))


def call_method(name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    return dt.keyed(lambda a, k: getattr(a[0], name)(*a[1:], **k), ("method", name))

"""Result dtypes of torch calls, computed by torch itself.

Torch's type promotion has many special cases (zero-dim tensors vs dimensioned tensors vs Python
scalars, integer true division, comparisons, reductions that widen ints, ops that require a
floating input...). Rather than re-deriving them, `infer` runs the call on small placeholder
tensors (one element on the CPU, or on the "meta" device, which allocates nothing and draws no
random numbers) built from what the IR types say, and reads the dtypes off the real result.

What the types leave open is enumerated: a tensor of unknown dtype is tried with every dtype, a
tensor of unknown rank both as a zero-dim and as a dimensioned tensor, an Optional both ways. A
dtype is reported only when every combination that torch accepts gives the same answer; anything
else (an unknown non-constant argument that matters, a call that fails for every placeholder)
gives "unknown", never a guess.

Also here: the result types of Python's own operators on Python scalars.
"""

from __future__ import annotations

import functools
import itertools
import warnings
from typing import Any, Callable

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
    ListType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
)

# The default dtype torch gives Python floats, float factories and int/int true division. Compiled
# code assumes torch's default (torch.set_default_dtype changes it at run time; we do not follow).
DEFAULT_FLOAT = "float32"
COMPLEX = ScalarType("complex")

ALL_DTYPES: tuple[str, ...] = (
    "bool", "uint8", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
_TORCH_DTYPE = {name: getattr(torch, name) for name in ALL_DTYPES}
INTEGRAL_DTYPES = frozenset({"uint8", "int8", "int16", "int32", "int64"})
COMPLEX_DTYPES = frozenset({"complex64", "complex128"})

MAX_COMBINATIONS = 1024  # placeholder combinations tried for one call before giving up


class Unknowable(Exception):
    """A placeholder cannot be built for an argument: the result dtype cannot be computed."""


# -- dtype names --------------------------------------------------------------------------------
def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def as_torch_dtype(value: object) -> torch.dtype | None:
    """A dtype given as a constant: torch.float16, "torch.float16", "float16", "torch.half"."""
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str):
        attr = getattr(torch, value.removeprefix("torch."), None)
        if isinstance(attr, torch.dtype):
            return attr
    return None


def as_dtype_name(value: object) -> str | None:
    dt = as_torch_dtype(value)
    return None if dt is None else dtype_name(dt)


def as_device_name(value: object) -> str | None:
    """A device given as a constant ("cuda", "cuda:1", torch.device("cpu")), as its str()."""
    if isinstance(value, (str, torch.device)):
        try:
            return str(torch.device(value))
        except (RuntimeError, ValueError):
            return None
    return None


# -- placeholders -------------------------------------------------------------------------------
class _Slot:
    """One place in the arguments where a choice is enumerated."""

    def __init__(self, kind: str, choices: list[Any]) -> None:
        self.kind = kind  # "dtype", "rank", "opt"
        self.choices = choices


class _Plan:
    """Arguments as a tree of placeholders, with the slots to enumerate."""

    def __init__(self, int_hints: dict[object, int]) -> None:
        self.slots: list[_Slot] = []
        self.int_hints = int_hints
        self.tensor_dtypes: list[str | None] = []
        self.unknown_rank = 0
        self.big_constant = False
        self.ints = 0  # unknown ints so far (their positions for the "iota" placeholders)

    def slot(self, kind: str, choices: list[Any]) -> int:
        self.slots.append(_Slot(kind, choices))
        return len(self.slots) - 1

    def build(self, t: Type, key: object, const: object, has_const: bool) -> tuple:
        """A spec tree: ("value", v) | ("tensor", dtype_slot_or_name, shape_or_rankslot) | ..."""
        if has_const and not isinstance(t, (TensorType, OptionalType, TupleType, ListType)):
            if isinstance(const, int) and not isinstance(const, bool) and abs(const) > 16:
                self.big_constant = True
            if t == DTYPE:
                dt = as_torch_dtype(const)
                if dt is None:
                    raise Unknowable
                return ("value", dt)
            if t == DEVICE or (t == STR and as_device_name(const) is not None and key in ("device",)):
                return ("device",)
            return ("value", const)
        if has_const and isinstance(t, (TupleType, ListType)) and isinstance(const, (tuple, list)):
            for v in const:
                if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 16:
                    self.big_constant = True
            return ("value", const)
        if isinstance(t, TensorType):
            if t.dtype is not None:
                dtype: object = t.dtype
            else:
                dtype = self.slot("dtype", list(ALL_DTYPES))
            self.tensor_dtypes.append(t.dtype)
            if t.shape is not None:
                shape: object = tuple(t.shape)
            else:
                shape = self.slot("rank", ["dim", "zero"])
                self.unknown_rank += 1
            return ("tensor", dtype, shape)
        if t == INT:
            self.ints += 1
            return ("int", self.int_hints.get(key, 1), self.ints - 1)
        if t == FLOAT:
            return ("value", 1.0)
        if t == BOOL:
            return ("value", True)  # True, not False: x // flag must not divide by zero
        if t == NONE:
            return ("value", None)
        if t == DEVICE:
            return ("device",)
        if isinstance(t, OptionalType):
            inner = self.build(t.elem, key, None, False)
            return ("opt", self.slot("opt", [False, True]), inner)
        if isinstance(t, TupleType):
            return ("tuple", [self.build(e, key, None, False) for e in t.elems])
        if isinstance(t, ListType):
            elem = self.build(t.elem, key, None, False)
            if elem[0] == "value":
                return ("list", [elem])
            return ("list", [elem, elem])
        raise Unknowable  # STR, DTYPE without a value, ANY, modules...


def _materialize(spec: tuple, choice: tuple, device: str, rank: int, concrete: bool, iota: bool = False) -> Any:
    """A placeholder for `spec`. Unknown ints are their hint (1, or 0 for dims), or with `iota`
    their position among the arguments (x.permute(a, b, c) needs distinct dims)."""
    kind = spec[0]
    if kind == "value":
        return spec[1]
    if kind == "int":
        return spec[2] if iota else spec[1]
    if kind == "device":
        return device
    if kind == "tensor":
        _, dtype, shape = spec
        if isinstance(dtype, int):
            dtype = choice[dtype]
        if isinstance(shape, int):
            shape = () if choice[shape] == "zero" else (1,) * rank
        else:
            shape = tuple(d if concrete and isinstance(d, int) else 1 for d in shape)
        tdt = _TORCH_DTYPE[dtype]
        if device == "meta":
            return torch.empty(shape, dtype=tdt, device="meta")
        return torch.ones(shape, dtype=tdt)
    if kind == "opt":
        return _materialize(spec[2], choice, device, rank, concrete, iota) if choice[spec[1]] else None
    if kind == "tuple":
        return tuple(_materialize(s, choice, device, rank, concrete, iota) for s in spec[1])
    if kind == "list":
        return [_materialize(s, choice, device, rank, concrete, iota) for s in spec[1]]
    raise AssertionError(kind)


def _describe(result: Any) -> Any:
    """The dtype structure of a real result: dtype names for tensors, Python types otherwise."""
    if isinstance(result, torch.Tensor):
        return dtype_name(result.dtype)
    if isinstance(result, (tuple, list)):
        return tuple(_describe(r) for r in result)
    return type(result)


def infer(
    invoke: Callable[[list[Any], dict[str, Any]], Any],
    args: list[Type],
    kwargs: dict[str, Type],
    consts: dict[int | str, object] | None,
    *,
    random: bool = False,
    int_hints: dict[int | str, int] | None = None,
) -> Any | None:
    """The dtype structure of `invoke(args, kwargs)`'s result (see `_describe`), or None.

    `invoke` receives placeholder values for the operands and must make the call; exceptions it
    raises mean "torch rejects this combination".
    """
    status, desc, _, _ = infer_status(invoke, args, kwargs, consts, random=random, int_hints=int_hints)
    return desc if status == "ok" else None


def infer_status(
    invoke: Callable[[list[Any], dict[str, Any]], Any],
    args: list[Type],
    kwargs: dict[str, Type],
    consts: dict[int | str, object] | None,
    *,
    random: bool = False,
    int_hints: dict[int | str, int] | None = None,
) -> tuple[str, Any, str | None, bool]:
    """(status, dtype structure, first error, cpu_rejected).

    status: "ok"; "ambiguous" (placeholders that torch accepts disagree); "failed" (torch rejected
    every placeholder); "unknowable" (an argument has no placeholder, or too many combinations).
    cpu_rejected: the CPU kernels rejected every combination (meta kernels check less: they may
    still have accepted some)."""
    consts = consts or {}
    int_hints = int_hints or {}
    key = getattr(invoke, "cache_key", None)
    cache_key = None
    if key is not None:
        cache_key = (key, tuple(args), tuple(kwargs.items()), _freeze(consts), random, _freeze(int_hints))
        hit = _CACHE.get(cache_key)
        if hit is not None:
            return hit
    got = _infer_uncached(invoke, list(args), dict(kwargs), consts, random, int_hints)
    if cache_key is not None:
        _CACHE[cache_key] = got
    return got


def keyed(invoke: Callable, key: object) -> Callable:
    """Mark an invoke function with a hashable identity so that its results are cached."""
    invoke.cache_key = key  # type: ignore[attr-defined]
    return invoke


def _freeze(d: dict) -> tuple:
    out = []
    for k, v in d.items():
        try:
            hash(v)
        except TypeError:
            v = repr(v)
        out.append((str(k), type(v).__name__, v))
    return tuple(sorted(out, key=repr))


_CACHE: dict[tuple, tuple[str, Any, str | None, bool]] = {}


def _infer_uncached(invoke, args, kwargs, consts, random, int_hints) -> tuple[str, Any, str | None, bool]:
    plan = _Plan(int_hints)
    try:
        arg_specs = [plan.build(t, i, consts.get(i), i in consts) for i, t in enumerate(args)]
        kw_specs = {k: plan.build(t, k, consts.get(k), k in consts) for k, t in kwargs.items()}
    except Unknowable:
        return "unknowable", None, None, False
    # Zero-dim vs dimensioned only changes the dtype when tensors of different dtypes meet.
    known = {d for d in plan.tensor_dtypes if d is not None}
    dimness_matters = len(plan.tensor_dtypes) > 1 and (len(known) > 1 or None in plan.tensor_dtypes)
    choices = []
    for slot in plan.slots:
        if slot.kind == "rank" and not dimness_matters:
            choices.append(["dim"])
        else:
            choices.append(slot.choices)
    total = 1
    for c in choices:
        total *= len(c)
    if total > MAX_COMBINATIONS:
        return "unknowable", None, None, False
    devices = ("meta",) if random or plan.big_constant else ("cpu", "meta")
    found: Any = None
    ok = False
    error: list[str] = []
    on_cpu: list[bool] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for choice in itertools.product(*choices):
            got = _run(invoke, arg_specs, kw_specs, choice, devices, plan.unknown_rank > 0, plan.ints > 0,
                       error, on_cpu)
            if got is _FAILED:
                continue
            if ok and got != found:
                return "ambiguous", None, None, False
            found, ok = got, True
        if not ok and not dimness_matters and plan.unknown_rank:
            # Dimensioned placeholders did not fit; an unknown rank may also be zero-dim.
            for choice in itertools.product(*[s.choices for s in plan.slots]):
                if "zero" not in choice:
                    continue
                got = _run(invoke, arg_specs, kw_specs, choice, devices, True, plan.ints > 0, error, on_cpu)
                if got is _FAILED:
                    continue
                if ok and got != found:
                    return "ambiguous", None, None, False
                found, ok = got, True
    cpu_rejected = "cpu" in devices and not any(on_cpu)
    if not ok:
        return "failed", None, error[0] if error else None, cpu_rejected
    return "ok", found, error[0] if error else None, cpu_rejected


_FAILED = object()


def _run(invoke, arg_specs, kw_specs, choice, devices, vary_rank: bool, ints: bool, error: list[str],
         on_cpu: list[bool]) -> Any:
    ranks = (1, 2, 3, 4) if vary_rank else (1,)
    for device in devices:
        for concrete in ((False, True) if device == "meta" else (False,)):
            for iota in ((False, True) if ints else (False,)):
                for rank in ranks:
                    try:
                        a = [_materialize(s, choice, device, rank, concrete, iota) for s in arg_specs]
                        k = {n: _materialize(s, choice, device, rank, concrete, iota) for n, s in kw_specs.items()}
                        result = invoke(a, k)
                    except Exception as e:  # noqa: BLE001 - any failure means "not this placeholder"
                        if not error:
                            text = str(e).strip()
                            error.append(text.splitlines()[0] if text else type(e).__name__)
                        continue
                    on_cpu.append(device == "cpu")
                    return _describe(result)
    return _FAILED


@functools.lru_cache(maxsize=None)
def promote_dtypes(*names: str) -> str:
    """torch.promote_types over several dtypes."""
    out = _TORCH_DTYPE[names[0]]
    for n in names[1:]:
        out = torch.promote_types(out, _TORCH_DTYPE[n])
    return dtype_name(out)


# -- Python operators on Python scalars ------------------------------------------------------------
_ARITH = {"+", "-", "*", "/", "//", "%", "**"}
_BITS = {"&", "|", "^", "<<", ">>"}
_ORDER = {"<", "<=", ">", ">="}
_EQ = {"==", "!=", "is", "is not"}


def python_binary(op: str, a: Type, b: Type) -> Type | None:
    """Result type of `a op b` for Python scalars (int, float, bool, str, None); None if Python
    raises TypeError for it. Either operand ANY gives ANY (except ==, !=, is: bool)."""
    if op in _EQ:
        return BOOL
    if op in ("in", "not in"):
        return BOOL
    if ANY in (a, b):
        return ANY
    nums = (INT, FLOAT, BOOL)
    if a in nums and b in nums:
        if op in _ORDER:
            return BOOL
        if op == "/":
            return FLOAT
        if op in _ARITH:
            if FLOAT in (a, b):
                return FLOAT
            return INT  # int/bool with int/bool: +,-,*,//,%,** (** with a negative int exponent gives float)
        if op in _BITS:
            if FLOAT in (a, b):
                return None
            if op in ("&", "|", "^") and a == BOOL and b == BOOL:
                return BOOL
            return INT
        return None  # @
    if a == STR and b == STR:
        if op == "+":
            return STR
        if op in _ORDER:
            return BOOL
        return None
    if a == STR and op == "%":
        return STR
    if op == "*" and {a, b} in ({STR, INT}, {STR, BOOL}):
        return STR
    return None


def python_unary(op: str, t: Type) -> Type | None:
    if op == "not":
        return BOOL
    if t == ANY:
        return ANY
    if op in ("-", "+"):
        return {INT: INT, BOOL: INT, FLOAT: FLOAT}.get(t)  # type: ignore[arg-type]
    if op == "~":
        return INT if t in (INT, BOOL) else None
    return None

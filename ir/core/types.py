"""IR types: frozen dataclasses that compare and hash by value.

A type says what a value is as far as the compiler knows it. Tensor facts that are not known
(dtype, rank, a dimension, the device) are `None`, never guessed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

import sympy

# A dimension is a concrete size, a symbolic size (a sympy expression over positive integer
# symbols: `B`, `T*C`, `floor(T/2) + 1`), or unknown (None). A symbol name given as a str ("B",
# as annotations spell it) becomes `sym("B")`; a sympy integer becomes an int.
Dim = Union[int, sympy.Expr, None]


@functools.lru_cache(maxsize=None)
def sym(name: str) -> sympy.Symbol:
    """The size symbol `name`: a positive integer, the same object for the same name."""
    return sympy.Symbol(name, integer=True, positive=True)


_DIM_FUNCTIONS = {"floor": sympy.floor, "ceiling": sympy.ceiling, "Min": sympy.Min, "Max": sympy.Max,
                  "Mod": sympy.Mod}
_DIM_NAME = re.compile(r"[A-Za-z_]\w*")
_DIM_TEXT = re.compile(r"[\w\s+\-*/(),]*")


def parse_dim(text: str) -> Dim:
    """A dimension as IR text writes it: "?", "4", "B", "T*C", "floor((T - 1)/2) + 1"."""
    text = text.strip()
    if text == "?":
        return None
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if not _DIM_TEXT.fullmatch(text):
        raise ValueError(f"not a dimension: {text!r}")
    names = {n: _DIM_FUNCTIONS.get(n) or sym(n) for n in _DIM_NAME.findall(text)}
    try:
        expr = sympy.sympify(text, locals=names)
    except (sympy.SympifyError, SyntaxError, TypeError) as e:
        raise ValueError(f"not a dimension: {text!r}") from e
    if not isinstance(expr, sympy.Expr):
        raise ValueError(f"not a dimension: {text!r}")
    return as_dim(expr)


def as_dim(d: object) -> Dim:
    """Normalize a dimension: str names become symbols, sympy integers become ints."""
    if d is None or (isinstance(d, int) and not isinstance(d, bool)):
        return d  # type: ignore[return-value]
    if isinstance(d, str):
        return sym(d) if d.isidentifier() else parse_dim(d)
    if isinstance(d, sympy.Expr):
        if d.is_Integer:
            return int(d)
        return d
    raise TypeError(f"not a dimension: {d!r}")

# Short dtype names used in IR text, in the order torch promotes them (roughly).
DTYPE_SHORT = {
    "bool": "bool",
    "uint8": "u8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
}
DTYPE_LONG = {short: long for long, short in DTYPE_SHORT.items()}


class Type:
    """Base of all IR types."""

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass(frozen=True)
class TensorType(Type):
    dtype: str | None = None  # torch dtype name without "torch.", e.g. "float32"
    shape: tuple[Dim, ...] | None = None  # None: rank unknown
    device: str | None = None  # "cpu", "cuda", ... when known

    def __post_init__(self) -> None:
        if self.shape is not None and not all(d is None or type(d) is int for d in self.shape):
            object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __str__(self) -> str:
        head = DTYPE_SHORT.get(self.dtype, self.dtype) if self.dtype else "Tensor"
        if self.shape is not None:
            head += "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        elif self.dtype:
            head += "[*]"
        if self.device:
            head += "@" + self.device
        return head


@dataclass(frozen=True)
class ScalarType(Type):
    """A Python scalar or simple value: int, float, bool, str, None, complex, dtype, device."""

    name: str

    def __str__(self) -> str:
        return self.name


INT = ScalarType("int")
FLOAT = ScalarType("float")
BOOL = ScalarType("bool")
STR = ScalarType("str")
NONE = ScalarType("None")
DTYPE = ScalarType("dtype")
DEVICE = ScalarType("device")
MEMORY_FORMAT = ScalarType("memory_format")  # torch.channels_last, torch.contiguous_format
ANY = ScalarType("Any")  # a dynamic Python value the compiler does not reason about
# What an expression that failed to lower stands for, so that lowering goes on and reports every
# error of a file (transpiler/recover.py). It fits everywhere and mixes with everything, so that
# its uses report nothing more; a function holding one is never passed on (the verifier refuses it).
ERROR = ScalarType("<error>")
NUMBER_TYPES = (INT, FLOAT, BOOL)


@dataclass(frozen=True)
class OptionalType(Type):
    elem: Type

    def __str__(self) -> str:
        return f"Optional[{self.elem}]"


@dataclass(frozen=True)
class TupleType(Type):
    elems: tuple[Type, ...]

    def __str__(self) -> str:
        if not self.elems:
            return "tuple[()]"
        return "tuple[" + ", ".join(str(e) for e in self.elems) + "]"


@dataclass(frozen=True)
class NamedTupleType(TupleType):
    """A `typing.NamedTuple` class of the model's file: a tuple whose items have names."""

    name: str = ""
    fields: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DataclassType(NamedTupleType):
    """A `@dataclass` class of the model's file, held in the IR as a record of its fields: made by
    its constructor, its fields read by name. It is not a tuple in Python (no indexing, unpacking
    or len), which the front end refuses; a field assigned makes a new record (transpiler/
    lower_assign.py says when that is the same as changing the one object)."""

    frozen: bool = False


def tuple_like(t: Type, elems: tuple[Type, ...]) -> TupleType:
    """A tuple type of `elems`, named as `t` is where it names its fields."""
    if isinstance(t, DataclassType):
        return DataclassType(elems, t.name, t.fields, t.frozen)
    return NamedTupleType(elems, t.name, t.fields) if isinstance(t, NamedTupleType) else TupleType(elems)


@dataclass(frozen=True)
class ListType(Type):
    elem: Type

    def __str__(self) -> str:
        return f"list[{self.elem}]"


@dataclass(frozen=True)
class DictType(Type):
    """A Python dict whose keys are of type `key` and values of type `value` (a display of
    literal string keys, `Dict[str, Tensor]`, a module's dict attribute)."""

    key: Type
    value: Type

    def __str__(self) -> str:
        return f"dict[{self.key}, {self.value}]"


@dataclass(frozen=True)
class TensorValues:
    """What an entry check expects of a dict a module holds and fills as it runs (a cache of
    tensors by device): every value a tensor of this dtype, device type and shape (None: any
    size there; None for the shape: any rank). Not a type: the expected value of a
    `py.check_value`, printed as runtime.guards' class of the same name."""

    dtype: str
    device: str
    shape: tuple[int | None, ...] | None

    def __repr__(self) -> str:
        return f"TensorValues({self.dtype}, {self.device}, {self.shape})"


@dataclass(frozen=True)
class UnionType(Type):
    """`Union[Tensor, List[Tensor]]` of a parameter (script(instance, ...)): no value has this
    type; each call compiles the function for the member its argument is (a variant)."""

    members: tuple[Type, ...]

    def __str__(self) -> str:
        return f"Union[{', '.join(str(m) for m in self.members)}]"


@dataclass(frozen=True)
class ModuleType(Type):
    """An nn.Module instance of a known class, named by its qualified name."""

    qualname: str

    def __str__(self) -> str:
        return f"Module[{self.qualname}]"


@dataclass(frozen=True)
class ModuleListType(Type):
    """nn.ModuleList / nn.Sequential: the element types in order when the length is known,
    else one element type for all (`length` None)."""

    kind: str  # "ModuleList" or "Sequential"
    elems: tuple[Type, ...]
    length_known: bool = True

    def __str__(self) -> str:
        inner = ", ".join(str(e) for e in self.elems)
        if not self.length_known:
            inner += ", ..."
        return f"{self.kind}[{inner}]"


@dataclass(frozen=True)
class FunctionType(Type):
    """A reference to a compiled function (for calls), named by its qualified name."""

    qualname: str

    def __str__(self) -> str:
        return f"Function[{self.qualname}]"


TENSOR = TensorType()


def is_tensor(t: Type) -> bool:
    return isinstance(t, TensorType)


def is_number(t: Type) -> bool:
    return t in NUMBER_TYPES


def is_subtype(a: Type, b: Type) -> bool:
    """Whether every value of type `a` is also a value of type `b`."""
    if a == b or b == ANY or a == ERROR or b == ERROR:
        return True
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return (
            (b.dtype is None or a.dtype == b.dtype)
            and (b.device is None or a.device == b.device)
            and (
                b.shape is None
                or (
                    a.shape is not None
                    and len(a.shape) == len(b.shape)
                    and all(y is None or x == y for x, y in zip(a.shape, b.shape))
                )
            )
        )
    if isinstance(b, UnionType):
        return any(is_subtype(a, m) for m in b.members)
    if isinstance(b, OptionalType):
        if a == NONE:
            return True
        inner = a.elem if isinstance(a, OptionalType) else a
        return is_subtype(inner, b.elem)
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.elems) == len(b.elems) and all(is_subtype(x, y) for x, y in zip(a.elems, b.elems))
    if isinstance(a, ListType) and isinstance(b, ListType):
        return a.elem == b.elem or b.elem == ANY
    if isinstance(a, DictType) and isinstance(b, DictType):
        return a.key == b.key and (a.value == b.value or b.value == ANY)
    return False


def fits(t: Type, want: Type) -> bool:
    """A value of type `t` may flow where `want` is expected: a subtype, or Any where the type is
    not known (`return x.sum().item()` from a function declared to return float: Python does
    not check, so neither do we)."""
    if t == ANY or is_subtype(t, want):
        return True
    if isinstance(t, TupleType) and isinstance(want, TupleType) and len(t.elems) == len(want.elems):
        return all(fits(a, b) for a, b in zip(t.elems, want.elems))
    return False


def unify(a: Type, b: Type) -> Type | None:
    """The type both `a` and `b` fit, keeping only the facts they share; None if they do not mix."""
    if a == b:
        return a
    if a == ERROR or b == ERROR:
        return ERROR
    if a == ANY or b == ANY:
        return ANY
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        shape: tuple[Dim, ...] | None = None
        if a.shape is not None and b.shape is not None and len(a.shape) == len(b.shape):
            shape = tuple(x if x == y else None for x, y in zip(a.shape, b.shape))
        return TensorType(
            a.dtype if a.dtype == b.dtype else None,
            shape,
            a.device if a.device == b.device else None,
        )
    if a == NONE and b != NONE:
        return b if isinstance(b, OptionalType) else OptionalType(b)
    if b == NONE and a != NONE:
        return a if isinstance(a, OptionalType) else OptionalType(a)
    if isinstance(a, OptionalType) or isinstance(b, OptionalType):
        ea = a.elem if isinstance(a, OptionalType) else a
        eb = b.elem if isinstance(b, OptionalType) else b
        inner = unify(ea, eb)
        return None if inner is None else OptionalType(inner)
    if isinstance(a, DataclassType) != isinstance(b, DataclassType) and isinstance(a, TupleType) \
            and isinstance(b, TupleType):
        return None
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elems) == len(b.elems):
        parts = [unify(x, y) for x, y in zip(a.elems, b.elems)]
        if any(p is None for p in parts):
            return None
        elems = tuple(p for p in parts if p is not None)
        same_class = isinstance(a, NamedTupleType) and type(a) is type(b) and a.name == b.name  # type: ignore[attr-defined]
        return tuple_like(a, elems) if same_class else TupleType(elems)
    if isinstance(a, ListType) and isinstance(b, ListType):
        inner = unify(a.elem, b.elem)
        return None if inner is None else ListType(inner)
    if isinstance(a, DictType) and isinstance(b, DictType) and a.key == b.key:
        inner = unify(a.value, b.value)
        return None if inner is None else DictType(a.key, inner)
    return None


def unify_all(types: Sequence[Type]) -> Type | None:
    """The type all of `types` fit (unify over them); None if they do not mix."""
    out: Type | None = None
    for t in types:
        out = t if out is None else unify(out, t)
        if out is None:
            return None
    return out

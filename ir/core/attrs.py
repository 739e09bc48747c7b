"""Declared op attributes: what each op kind holds, with its type and, where optional, its default.

An op class declares its attributes as class fields, in the order the printer writes them:

    class ReduceOp(Operation):
        kind = Attr(OneOf(("sum", "amax", "amin")))

and subclasses inherit them (a mixin's too). `op.kind` then reads `op.attributes["kind"]`, or
the default where the op does not hold it; the verifier checks every op's attributes against its
class's declaration (ir/core/verifier.py), the printer writes them in declaration order and the
parser converts what it reads by the declared type. `op.attributes` stays the one store: code
that handles any op reads it by key.

The types are a few small checkers: a Python class (`int`, `str`, `Type`, ...), `Tup(of)` a tuple
of elements of a type, `Opt(t)` t or None, `Union(...)`, `OneOf(...)` literal choices, `Dict(k, v)`,
`PINNED`, any Python value (what a module attribute held when compiling), and `LITERAL`, any
value the IR text can write (None, bool, int, float, str, Type, and tuples, lists
and dicts of those: a list stays one, as a pinned list attribute is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ir.core.types import Type

_REQUIRED = object()


class AttrType:
    """A checker of attribute values; `convert` turns what the parser read into this type."""

    def check(self, value: Any) -> bool:
        raise NotImplementedError

    def convert(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class Is(AttrType):
    """An instance of `cls` (exactly int for int: a bool is not one; int or float for float)."""

    cls: type

    def check(self, value: Any) -> bool:
        if self.cls is int:
            return type(value) is int
        if self.cls is float:
            return type(value) in (int, float)
        return isinstance(value, self.cls)

    def convert(self, value: Any) -> Any:
        return float(value) if self.cls is float and type(value) is int else value

    def __str__(self) -> str:
        return self.cls.__name__


@dataclass(frozen=True)
class Tup(AttrType):
    """A tuple whose elements are of type `of` (any value: None)."""

    of: AttrType | type | None = None

    def __post_init__(self) -> None:
        if self.of is not None:
            object.__setattr__(self, "of", _as_attr_type(self.of))

    def check(self, value: Any) -> bool:
        return isinstance(value, tuple) and (self.of is None or all(self.of.check(v) for v in value))

    def convert(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple(value if self.of is None else (self.of.convert(v) for v in value))
        return value

    def __str__(self) -> str:
        return f"tuple[{self.of or 'Any'}, ...]"


@dataclass(frozen=True)
class Opt(AttrType):
    of: AttrType | type

    def __post_init__(self) -> None:
        object.__setattr__(self, "of", _as_attr_type(self.of))

    def check(self, value: Any) -> bool:
        return value is None or self.of.check(value)

    def convert(self, value: Any) -> Any:
        return None if value is None else self.of.convert(value)

    def __str__(self) -> str:
        return f"Optional[{self.of}]"


@dataclass(frozen=True)
class Union(AttrType):
    members: tuple[AttrType | type, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(_as_attr_type(m) for m in self.members))

    def check(self, value: Any) -> bool:
        return any(m.check(value) for m in self.members)

    def convert(self, value: Any) -> Any:
        for m in self.members:
            converted = m.convert(value)
            if m.check(converted):
                return converted
        return value

    def __str__(self) -> str:
        return " | ".join(str(m) for m in self.members)


@dataclass(frozen=True)
class OneOf(AttrType):
    """One of a few literal values."""

    choices: tuple[Any, ...]

    def check(self, value: Any) -> bool:
        return any(type(value) is type(c) and value == c for c in self.choices)

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)


@dataclass(frozen=True)
class Dict(AttrType):
    key: AttrType | type
    value: AttrType | type

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _as_attr_type(self.key))
        object.__setattr__(self, "value", _as_attr_type(self.value))

    def check(self, value: Any) -> bool:
        return isinstance(value, dict) and all(self.key.check(k) and self.value.check(v) for k, v in value.items())

    def convert(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.key.convert(k): self.value.convert(v) for k, v in value.items()}
        return value

    def __str__(self) -> str:
        return f"dict[{self.key}, {self.value}]"


class _Literal(AttrType):
    def check(self, value: Any) -> bool:
        if value is None or type(value) in (bool, int, float, str) or isinstance(value, Type):
            return True
        if isinstance(value, (tuple, list)):
            return all(self.check(v) for v in value)
        if isinstance(value, dict):
            return all(self.check(k) and self.check(v) for k, v in value.items())
        return False

    def __str__(self) -> str:
        return "literal"


def _as_attr_type(spec: AttrType | type) -> AttrType:
    return spec if isinstance(spec, AttrType) else Is(spec)


class _Pinned(AttrType):
    def check(self, value: Any) -> bool:
        return True

    def __str__(self) -> str:
        return "any value"


LITERAL = _Literal()
PINNED = _Pinned()  # a value compiled code took from a module or model file as it found it (a numpy scalar too)
INTS, STRS = Tup(int), Tup(str)


class Attr:
    """One declared attribute: `Attr(type)` is required, `Attr(type, default)` optional (an op
    that lacks it reads `default`). `key` is the name in `op.attributes` and the IR text where it
    differs from the field's (a kernel's `name` is `kernel_name`: ops' `name` is their kind)."""

    def __init__(self, type: AttrType | type, default: Any = _REQUIRED, key: str | None = None) -> None:
        self.type = _as_attr_type(type)
        self.default = default
        self.key = key or ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = self.key or name

    def __get__(self, op: Any, owner: type | None = None) -> Any:
        if op is None:
            return self
        if self.required:
            return op.attributes[self.key]
        return op.attributes.get(self.key, self.default)

    def __set__(self, op: Any, value: Any) -> None:
        op.attributes[self.key] = value

    def __repr__(self) -> str:
        return f"Attr({self.key}: {self.type}{'' if self.required else f' = {self.default!r}'})"


def declared_attrs(cls: type) -> dict[str, Attr]:
    """The attributes `cls` declares and inherits, by key: a base class's first, each class's in
    the order it declares them."""
    found: dict[str, Attr] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            if isinstance(value, Attr):
                found[value.key] = value
    return found


def attr_problems(op: Any) -> list[str]:
    """What is wrong with an op's attributes by its class's declaration (`attrs`): undeclared
    keys, values of the wrong type, required ones missing."""
    declared: dict[str, Attr] = type(op).attrs
    op_name = op.name
    problems = []
    for key, value in op.attributes.items():
        spec = declared.get(key)
        if spec is None:
            problems.append(f"{op_name} declares no attribute `{key}`")
        elif not spec.type.check(value):
            problems.append(f"{op_name}'s attribute `{key}` is {value!r}, not {spec.type}")
    problems += [f"{op_name} lacks its attribute `{key}`" for key, spec in declared.items()
                 if spec.required and key not in op.attributes]
    return problems

"""SSA environments: which IR value each Python name holds at a point of a function."""

from __future__ import annotations

from dataclasses import dataclass, field

from ir.core.graph import Loc, Value


@dataclass(frozen=True)
class Unbound:
    """A name that is not bound on every path to here, and why."""

    reason: str


@dataclass
class Env:
    """Name -> value. Keys are Python names, or "self.<attr>" for refined attribute reads."""

    values: dict[str, Value | Unbound] = field(default_factory=dict)

    def copy(self) -> Env:
        return Env(dict(self.values))

    def get(self, name: str) -> Value | Unbound | None:
        return self.values.get(name)

    def set(self, name: str, value: Value | Unbound) -> None:
        self.values[name] = value

    def names(self) -> list[str]:
        return list(self.values)


@dataclass
class Exits:
    """How control may leave a statement list other than by falling through its end.

    Each flag is a constant (False: never; True: always) or a bool IR value decided at run time.
    `ret_value` holds what a `return` returned, valid where `returned` is true."""

    returned: Value | bool = False
    ret_value: Value | None = None
    broke: Value | bool = False
    continued: Value | bool = False
    ret_loc: Loc | None = None  # where a single unconditional `return` stands

    def always(self) -> bool:
        return self.returned is True or self.broke is True or self.continued is True

    def never(self) -> bool:
        return self.returned is False and self.broke is False and self.continued is False

    def flags(self) -> list[tuple[str, Value | bool]]:
        return [("returned", self.returned), ("broke", self.broke), ("continued", self.continued)]


FLAG_NAMES = ("returned", "broke", "continued")


@dataclass
class Raises(Exits):
    """A statement list that always raises: it leaves like a return (nothing after it runs, it
    contributes no names to a merge) but with no value, and its exit flags are whatever the
    other side of a merge needs."""

    returned: Value | bool = True


@dataclass(frozen=True)
class Signature:
    """What a caller needs to know of a compiled function."""

    sym_name: str
    params: tuple[str, ...]
    types: tuple[object, ...]  # ir.core.types.Type per parameter
    defaults: dict[str, object]
    result: object  # ir.core.types.Type
    loc: Loc | None = None
    # Permissive mode: `*args` / `**kwargs` names (compiled code passes them nothing) and how many
    # parameters may be passed by position (the rest are keyword-only); None: all of them.
    star: str | None = None
    kwstar: str | None = None
    positional: int | None = None
    # A variant compiled for one call (FileContext.call_variant): the keyword-only parameters that
    # stand for the keywords the call puts in `**kwargs`
    kwstar_items: tuple[str, ...] = ()
    star_items: tuple[str, ...] = ()  # and the parameters that stand for what it puts in `*args`
    # Strict mode: errors of its annotations (the types ERROR, or a missing one's suggestion);
    # lowering its body reports them with the body's own, and its callers report nothing more
    # (transpiler/recover.py).
    errors: tuple = ()
    # A variant of an entry whose parameters are Unions, compiled for one member of each: (name,
    # class) per such parameter ("list", "Tensor"), checked at entry (FileContext.entry_variants)
    arg_classes: tuple[tuple[str, str], ...] = ()
    attr_types: tuple[tuple[str, object], ...] = ()  # and the member each `self.<attr>` Union is
    # Recursive mode: parameters without an annotation, typed Tensor by TorchScript's rule; a call
    # that passes another type (hrnet's `SequentialList.forward(self, x)` of a list) gets a
    # variant for what it passes, as Python does not check
    untyped: tuple[str, ...] = ()

"""What a shape rule file builds on: the call a rule is given (`Call`: a torch call bound to
parameter names; `TorchCall`: one as the analysis sees it, before binding) and the table a rule
file registers its rules in (`RuleTable`). A rule file fills its own table; ir/shapes/rules.py,
which binds calls and dispatches on the rules, merges the tables of the rule files it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ir.core.types import BOOL, INT, Dim, TensorType, Type, as_dim
from ir.shapes.values import AV, UNKNOWN, _is_int, size_of


@dataclass
class Call:
    """A torch call bound to parameter names: `args` maps canonical names ("self" for the input
    tensor, schema names otherwise) to abstract values, defaults included."""

    name: str  # op name: the aten name without overload, or the function/method name
    aten: str | None
    args: dict[str, AV]
    declared: Type  # the front end's result type
    pointwise: bool = False
    ctx: Any = None  # the analysis (for rules that need it, e.g. module calls)
    pos: list[AV] = field(default_factory=list)  # the arguments as written (self first for methods)
    kw: dict[str, AV] = field(default_factory=dict)

    def get(self, *names: str) -> AV | None:
        for n in names:
            if n in self.args:
                return self.args[n]
        return None

    def tensor(self, *names: str) -> TensorType | None:
        av = self.get(*names)
        return None if av is None else av.tensor

    def shape(self, *names: str) -> tuple[Dim, ...] | None:
        t = self.tensor(*names)
        return None if t is None else t.shape

    def size(self, *names: str) -> Dim:
        return size_of(self.get(*names))

    def value(self, *names: str, default: Any = UNKNOWN) -> Any:
        av = self.get(*names)
        if av is None:
            return default
        return av.value

    def sizes(self, *names: str, single_ok: bool = True) -> list[Dim] | None:
        """An int-list argument: its elements (each a size or None), or None when the list itself
        is unknown. A lone int counts as a one-element list when `single_ok`."""
        av = self.get(*names)
        return sizes_of(av, single_ok)

    def has(self, name: str) -> bool:
        av = self.args.get(name)
        return av is not None and not (av.known and av.value is None)


def sizes_of(av: AV | None, single_ok: bool = True) -> list[Dim] | None:
    if av is None:
        return None
    if av.items is not None:
        return [size_of(i) for i in av.items]
    if single_ok and av.type in (INT, BOOL) and av.known:
        return [size_of(av)]
    if av.known and isinstance(av.value, (tuple, list)):
        return [as_dim(v) if _is_int(v) else None for v in av.value]
    return None


@dataclass
class TorchCall:
    """One call into torch as the analysis sees it: a function (by qualname) or a method, its
    positional and keyword arguments, the aten overload the front end chose."""

    kind: str  # "function" or "method" (pos[0] is the tensor)
    name: str  # "torch.cat", "torch.nn.functional.linear"; the method name for methods
    pos: list[AV]
    kw: dict[str, AV]
    aten: str | None
    declared: Type
    mutates: tuple[int, ...] = ()
    alias_of: int | None = None
    ctx: Any = None
    notes: list[str] = field(default_factory=list)

    @property
    def op_name(self) -> str:
        if self.aten:
            return self.aten.removeprefix("aten::").split(".")[0]
        return self.name.rsplit(".", 1)[-1]


# -- rule tables ----------------------------------------------------------------------------------
Rule = Callable[[Call], "AV | None"]


class RuleTable:
    """Shape rules by op name (aten base names or Python names), and the rules that read the raw
    arguments when binding fails (`x.size()`), which get the call all the same."""

    def __init__(self) -> None:
        self.rules: dict[str, Rule] = {}
        self.unbound_ok: set[Rule] = set()

    def rule(self, *names: str, unbound_ok: bool = False) -> Callable[[Rule], Rule]:
        """Register a shape rule for the ops called `names`."""

        def register(fn: Rule) -> Rule:
            for n in names:
                assert n not in self.rules, f"two rules for {n}"
                self.rules[n] = fn
            if unbound_ok:
                self.unbound_ok.add(fn)
            return fn

        return register

    @staticmethod
    def merged(*tables: RuleTable) -> RuleTable:
        """One table of the rules of `tables`; an op with a rule in two of them is an error."""
        out = RuleTable()
        for table in tables:
            for name, fn in table.rules.items():
                assert name not in out.rules, f"two rules for {name}"
                out.rules[name] = fn
            out.unbound_ok |= table.unbound_ok
        return out

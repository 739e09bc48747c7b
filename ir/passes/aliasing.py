"""Alias analysis of one function: which values may share storage with which.

Every tensor value shares storage with one or more *roots*: a tensor argument (or a tensor in a
tuple argument), a tensor attribute of a module argument reached by a static path of attribute
reads (`self.count`, `self.bn.running_mean`), a tensor an op makes fresh, what a list may hold,
or a tensor the compiler cannot name. A list the function makes and no other name reaches
(`private_lists`) holds what is put into it; any other list may hold whatever is put into a list
that is not one of those. `Aliasing` gives every value the roots it may share storage with and,
where that is certain, its *exact alias*: one root and the chain of view ops from it (`y[:, 0]`
is `y` then `[:, 0]`; views: ir/passes/views.py). `reshape`, `contiguous`, `to` may copy, so
their results only may alias. If results and loop-carried values are exact
when every incoming value is the same alias (an optimistic fixpoint: `acc += x` in a loop). An
if result made of fresh tensors that nothing reads after the if is a fresh root of its own (the
output of `nn.ReLU(inplace=True)`, which the layer lowering makes an if on `inplace`): `analyse`.
A call the compiler does not see into may reach (`reachable`) and return what its operands and
modules hold. ir/passes/functionalize.py rewrites writes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ir.core import ops
from ir.core.graph import OPAQUE, BlockArg, Operation, Value
from ir.core.helpers import PLAIN_MODULE
from ir.core.types import (
    ANY,
    INT,
    NONE,
    DictType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.passes.views import ATTRIBUTE_VIEWS, Step, constant_of, index_prims, index_values, view_name
from ir.torchapi.signatures import UNANNOTATED_ALIASES

# Root kinds. Inputs and attributes are what the caller can observe.
INPUT, ATTR, FRESH, CONTENTS, UNKNOWN = "input", "attribute", "fresh", "list contents", "unknown"


def private_lists(order: Sequence[Operation]) -> list[Value]:
    """The lists a function makes (a display, `torch.split`'s result) that no other name can
    reach: each use reads its items, changes it in place, or passes it to a torch op (which keeps
    no reference to a Python list). A list stored elsewhere, passed to a call or carried by a
    loop or an if may be changed through the other name, so it is not one of them."""
    found = []
    for op in order:
        if not isinstance(op, (ops.ListOp, ops.TorchCallOp, ops.TensorMethodOp)):
            continue
        for r in op.results:
            if isinstance(r.type, ListType) and all(_private_use(u.op, u.index) for u in r.uses):
                found.append(r)
    return found


def _private_use(op: Operation, index: int) -> bool:
    if isinstance(op, (ops.GetItemOp, ops.UnpackOp, ops.ListAppendOp, ops.ListSetItemOp)):
        return index == 0
    if isinstance(op, ops.ListExtendOp):
        return True  # the target, or the list its items are copied from
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
        return index not in op.attributes.get("mutates", ())
    return isinstance(op, ops.BuiltinCallOp) and op.attributes.get("callee") == "len"


# -- roots and aliases ---------------------------------------------------------------------------
@dataclass(eq=False)
class Root:
    """Storage a tensor value may live in."""

    key: tuple  # the same in every copy of the function: ("entry", arg, path), ("op", n, i), ...
    kind: str
    name: str  # for reasons and guards: "x", "self.count", "w"
    type: Type
    value: Value | None  # the arg, the first read of an attribute, the fresh op's result
    entry: tuple = ()  # INPUT/ATTR: how to read it from its argument: ((part, type), ...)

    @property
    def label(self) -> str:
        if self.kind == FRESH and (self.value is None or self.value.name is None):
            loc = self.value.owner.loc if self.value is not None and isinstance(self.value.owner, Operation) else None
            return f"the tensor made at {loc}" if loc else "a new tensor"
        return f"`{self.name}`"

    @property
    def observable(self) -> bool:
        return self.kind != FRESH

    @property
    def trackable(self) -> bool:
        return self.kind in (INPUT, ATTR, FRESH) and isinstance(self.type, TensorType)


@dataclass(frozen=True)
class Alias:
    """A value is `root` seen through `chain` (views applied in order)."""

    root: tuple
    chain: tuple[Step, ...] = ()


TOP = "top"  # exactness not known yet (optimistic start of the fixpoint), or never read


def holds_tensors(t: Type) -> bool:
    if isinstance(t, TensorType) or t == ANY:
        return True
    if isinstance(t, (OptionalType, ListType)):
        return holds_tensors(t.elem)
    if isinstance(t, DictType):
        return holds_tensors(t.value)
    if isinstance(t, TupleType):
        return any(holds_tensors(e) for e in t.elems)
    return False


def module_like(t: Type) -> bool:
    return isinstance(t, (ModuleType, ModuleListType))


# Torch layers whose forward is one functional call on the input: under a `plain_module` guard
# (exactly that class, no hooks) a call reads its tensor arguments, returns a new tensor and
# writes nothing but the layer's own buffers (BatchNorm's running statistics, kept in training).
READ_ONLY_LAYERS = frozenset(f"torch.nn.{name}" for name in (
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",
    "LayerNorm", "GroupNorm", "Linear", "Conv1d", "Conv2d", "Conv3d",
))


# -- the analysis ----------------------------------------------------------------------------------
def written_operands(op: Operation) -> tuple[int, ...]:
    """The tensor operands `op` writes into (not counting this pass's own write-backs)."""
    if isinstance(op, (ops.InplaceOp, ops.IndexPutOp)):
        return (0,)
    if isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) and not op.attributes.get("writeback"):
        return tuple(op.attributes.get("mutates", ()))
    return ()


LOOPS = (ops.ForRangeOp, ops.ForEachOp, ops.WhileOp)


class Aliasing:
    """May-alias roots and exact aliases of the values of one function (see the module
    docstring). `merges` are the if results to treat as fresh roots of their own."""

    def __init__(self, func: ops.FuncOp, merges: frozenset[Value] = frozenset()) -> None:
        self.func = func
        self.merges = merges
        self.roots: dict[tuple, Root] = {}
        self.may: dict[Value, frozenset[tuple]] = {}
        self.exact: dict[Value, Any] = {}  # Alias, None (not exact) or TOP
        self.merged_from: dict[Value, frozenset[tuple]] = {}  # a merge root's incoming roots
        self.steps: dict[Operation, Step] = {}
        self.list_roots: frozenset[tuple] = frozenset()  # what any list may hold
        self.shared_roots: frozenset[tuple] = frozenset()  # what a list not in `contents` may hold
        self.order = list(func.walk())
        # What each list of the function's own making holds that no other name can reach: an item
        # read from `torch.split(out, w)` is not what another list holds.
        self.contents: dict[Value, frozenset[tuple]] = {v: frozenset() for v in private_lists(self.order)}
        self.position = {op: i for i, op in enumerate(self.order)}
        self.assigned = {op.attributes["attr"]: op for op in self.order if isinstance(op, ops.SetAttrOp)}
        self._args()
        # A fixpoint: may-alias sets only grow, exact aliases only go from TOP to an alias to None.
        self.changed = True
        while self.changed:
            self.changed = False
            for op in self.order[1:]:
                self._transfer(op)

    # -- queries --------------------------------------------------------------------------------
    def may_of(self, v: Value) -> frozenset[tuple]:
        if isinstance(v.type, ListType):
            held = self.contents.get(v)
            return (self.shared_roots if held is None else held) | self.may.get(v, frozenset())
        return self.may.get(v, frozenset())

    def exact_of(self, v: Value) -> Alias | None:
        a = self.exact.get(v)
        return a if isinstance(a, Alias) else None

    # -- state ----------------------------------------------------------------------------------
    def _set(self, v: Value, may: frozenset[tuple], exact: Any = None) -> None:
        """Record what `v` may alias (accumulated over the fixpoint) and its exact alias (as the
        transfer function now computes it)."""
        if not holds_tensors(v.type):
            return
        old_may, old_exact = self.may.get(v, frozenset()), self.exact.get(v, TOP)
        may = old_may | may
        if may != old_may or exact != old_exact:
            self.may[v], self.exact[v] = may, exact
            self.changed = True

    def _root(self, key: tuple, kind: str, name: str, t: Type, value: Value | None, entry: tuple = ()) -> tuple:
        if key not in self.roots:
            self.roots[key] = Root(key, kind, name, t, value, entry)
        return key

    def _fresh(self, v: Value) -> tuple:
        key = ("op", self.position[v.owner], v.index)  # type: ignore[index]
        return self._root(key, FRESH, v.name or "tensor", v.type, v)

    def _same_as(self, v: Value, source: Value) -> None:
        self._set(v, self.may_of(source), self.exact.get(source, TOP))

    def _union(self, values: Sequence[Value]) -> frozenset[tuple]:
        out: frozenset[tuple] = frozenset()
        for v in values:
            out |= self.may_of(v)
        return out

    def _args(self) -> None:
        for arg in self.func.args:
            if module_like(arg.type):
                continue
            leaves = self._leaves(arg, arg.type, (), ())
            if isinstance(arg.type, (TensorType, OptionalType)) and leaves:
                self._set(arg, leaves, Alias(next(iter(leaves))))
            elif isinstance(arg.type, ListType):
                self._set(arg, leaves, None)
            elif leaves or arg.type == ANY:
                self._set(arg, leaves or frozenset({self._unknown()}), None)

    def _leaves(self, arg: BlockArg, t: Type, parts: tuple, entry: tuple) -> frozenset[tuple]:
        """The roots of the tensors in argument `arg` (in a tuple argument, at item `parts`)."""
        if isinstance(t, TupleType):
            out: frozenset[tuple] = frozenset()
            for k, e in enumerate(t.elems):
                out |= self._leaves(arg, e, parts + (("item", k),), entry + ((("item", k), e),))
            return out
        name = (arg.name or "arg") + "".join(f"[{p[1]}]" for p in parts)
        if isinstance(t, ListType) and holds_tensors(t):
            key = self._root(("contents", arg.index, *parts), CONTENTS, f"{name}[...]", t, arg, entry)
            self.list_roots |= {key}
            self.shared_roots |= {key}
            return frozenset({key})
        if isinstance(t, (TensorType, OptionalType)) and holds_tensors(t):
            return frozenset({self._root(("entry", arg.index, *parts), INPUT, name, t, arg, entry)})
        if t == ANY:
            return frozenset({self._unknown()})
        return frozenset()

    def _unknown(self) -> tuple:
        return self._root(("unknown",), UNKNOWN, "a tensor the compiler cannot name", ANY, None)

    # -- transfer functions ---------------------------------------------------------------------
    def _transfer(self, op: Operation) -> None:
        if isinstance(op, ops.IfOp):
            self._if(op)
        elif isinstance(op, LOOPS):
            self._loop(op)
        elif isinstance(op, (ops.RefineOp, ops.InplaceOp)):
            self._same_as(op.result, op.operands[0])
        elif isinstance(op, ops.UninitializedOp):
            pass  # never read: fits any merge
        elif isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
            self._torch(op)
        elif isinstance(op, ops.IndexOp):
            self._index(op)
        elif isinstance(op, ops.GetAttrOp):
            self._getattr(op)
        elif isinstance(op, (ops.GetItemOp, ops.UnpackOp, ops.ListPopOp)):
            self._extract(op)
        elif isinstance(op, ops.TupleOp):
            self._set(op.result, self._union(op.operands), None)
        elif isinstance(op, (ops.ListOp, ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.ListInsertOp, ops.DictOp,
                             ops.DictSetItemOp)):
            held = self._union(op.operands if isinstance(op, (ops.ListOp, ops.DictOp)) else op.operands[1:])
            target = op.result if isinstance(op, (ops.ListOp, ops.DictOp)) else op.operands[0]
            old = self.list_roots, self.shared_roots, self.contents.get(target)
            self.list_roots |= held
            if target in self.contents:
                self.contents[target] |= held
            else:
                self.shared_roots |= held
            self.changed |= old != (self.list_roots, self.shared_roots, self.contents.get(target))
        elif op.has_trait(OPAQUE) or isinstance(op, ops.BuiltinCallOp):
            self._opaque(op)
        else:
            for r in op.results:
                if holds_tensors(r.type):
                    key = self._fresh(r)
                    self._set(r, frozenset({key}), Alias(key))

    def _torch(self, op: Operation) -> None:
        if not op.results:
            return
        r = op.result
        a = op.attributes
        alias_of = a.get("alias_of")
        if alias_of is not None and alias_of in a.get("mutates", ()):
            self._same_as(r, op.operands[alias_of])  # an in-place op returns its target
        elif view_name(op) is not None:
            self._view(op, op.operands[0])
        elif alias_of is not None or _base_name(op) in UNANNOTATED_ALIASES:
            # may return (a view of) an operand, or a new tensor
            sources = [op.operands[alias_of]] if alias_of is not None else op.operands
            self._set(r, self._union(sources) | {self._fresh(r)}, None)
        elif holds_tensors(r.type):
            key = self._fresh(r)
            self._set(r, frozenset({key}), Alias(key) if isinstance(r.type, TensorType) else None)

    def _view(self, op: Operation, base: Value) -> None:
        step = self.steps.get(op)
        if step is None:
            step = self.steps[op] = Step.make(type(op), op.attributes, op.operands[1:], op.result.type, op.loc,
                                              op.result.name)
        a = self.exact.get(base, TOP)
        exact = Alias(a.root, a.chain + (step,)) if isinstance(a, Alias) else a
        self._set(op.result, self.may_of(base), exact)

    def _index(self, op: ops.IndexOp) -> None:
        items, operands = op.attributes["items"], op.operands[1:]
        parts = [v.type for v in operands]
        values = index_values(items, operands)
        if index_prims(items, operands) is not None and all(t in (INT, NONE) for t in parts):
            self._view(op, op.operands[0])
        elif all(v.type == INT or isinstance(v.type, TensorType) for v in values):
            key = self._fresh(op.result)  # advanced indexing copies
            self._set(op.result, frozenset({key}), Alias(key))
        else:
            self._set(op.result, self.may_of(op.operands[0]) | {self._fresh(op.result)}, None)

    def _getattr(self, op: ops.GetAttrOp) -> None:
        r, obj, attr = op.result, op.operands[0], op.attributes["attr"]
        if not holds_tensors(r.type):
            return
        if module_like(obj.type):
            self._attribute(op)
        elif isinstance(obj.type, TensorType) and attr in ATTRIBUTE_VIEWS:
            self._view(op, obj)
        else:  # x.grad, x.real, a field of a named tuple
            self._set(r, self.may_of(obj) or frozenset({self._unknown()}), None)

    def _attribute(self, op: ops.GetAttrOp) -> None:
        """A tensor attribute of a module: a root when the module has a static path from an
        argument; when the function assigns the attribute, a read may see any assigned value."""
        r, attr = op.result, op.attributes["attr"]
        path = entry_path(r, self.func)
        if path is None:
            self._set(r, frozenset({self._unknown()} | self._attribute_roots()), None)
            return
        key = self._entry_root(r, path)
        if attr in self.assigned:
            assigned = [s.operands[1] for s in self.order
                        if isinstance(s, ops.SetAttrOp) and s.attributes["attr"] == attr]
            self._set(r, frozenset({key}) | self._union(assigned), None)
        else:
            self._set(r, frozenset({key}), Alias(key))

    def _attribute_roots(self, prefix: tuple | None = None) -> frozenset[tuple]:
        """Attribute roots (below the module at `prefix`, when given)."""
        return frozenset(k for k, root in self.roots.items()
                         if root.kind == ATTR and (prefix is None or k[:len(prefix)] == prefix))

    def reachable(self, op: Operation) -> frozenset[tuple]:
        """Roots a call the compiler does not see into can reach: through its tensor operands,
        and the attributes of each module it gets (any attribute, for a module without a static
        path); a guarded read-only layer, only its own attributes."""
        layer = guarded_layer_call(op, self.func)
        if layer is not None:
            return self._attribute_roots(layer)
        out = self._union(op.operands)
        if isinstance(op, ops.OpaqueOp):
            # Python code kept as written reaches whatever the caller can (the module through a
            # global, an input stored on it): every input and attribute tensor.
            out |= frozenset(k for k, r in self.roots.items() if r.observable)
        for v in op.operands:
            if module_like(v.type):
                prefix = module_prefix(v, self.func)
                out |= self._attribute_roots(prefix) | ({self._unknown()} if prefix is None else frozenset())
        return out

    def _entry_root(self, value: Value, path: tuple) -> tuple:
        arg, steps = path
        parts = tuple(part for _, _, part in steps)
        if isinstance(arg.type, TupleType):
            return next(iter(self._leaves(arg, arg.type, (), ()) & {("entry", arg.index, *parts)}), self._unknown())
        name = arg.name or "arg"
        for p in parts:
            name += f".{p[1]}" if p[0] == "attr" else f"[{p[1]}]"
        entry = tuple((part, op.results[i].type) for op, i, part in steps)
        return self._root(("entry", arg.index, *parts), ATTR, name, value.type, value, entry)

    def _extract(self, op: Operation) -> None:
        """An item of a tuple (the item itself when the tuple is built here or is an argument),
        of a list (anything a list may hold)."""
        container = op.operands[0]
        for r in op.results:
            if not holds_tensors(r.type):
                continue
            path = entry_path(r, self.func)
            in_argument = path is not None and isinstance(path[0].type, TupleType)
            if in_argument and isinstance(r.type, (TensorType, OptionalType)):
                key = self._entry_root(r, path)  # a tensor of a tuple argument
                self._set(r, frozenset({key}), Alias(key) if self.roots[key].kind == INPUT else None)
                continue
            item = _tuple_item(op, r)
            if item is not None:
                self._same_as(r, item)
            else:
                self._set(r, self.may_of(container) or frozenset({self._unknown()}), None)

    def _opaque(self, op: Operation) -> None:
        """A call the compiler does not see into may return any tensor it can reach."""
        if guarded_layer_call(op, self.func) is not None and isinstance(op.result.type, TensorType):
            key = self._fresh(op.result)
            self._set(op.result, frozenset({key}), Alias(key))
            return
        reach = self.reachable(op)
        for r in op.results:
            if holds_tensors(r.type):
                self._set(r, reach | {self._fresh(r)}, None)

    # -- control flow ---------------------------------------------------------------------------
    def _if(self, op: ops.IfOp) -> None:
        for i, r in enumerate(op.results):
            incoming = [b.terminator.operands[i] for b in (op.then_block, op.else_block)]  # type: ignore[union-attr]
            if r in self.merges:
                self.merged_from[r] = self._union(incoming)
                key = self._root(("merge", self.position[op], i), FRESH, r.name or "tensor", r.type, r)
                self._set(r, frozenset({key}), Alias(key))
            else:
                self._set(r, self._union(incoming), _meet_all(self.exact.get(v, TOP) for v in incoming))

    def _loop(self, op: Operation) -> None:
        for j, (init, args, nexts, result) in enumerate(carried_slots(op)):
            incoming = [init, *nexts]
            may = self._union(incoming)
            exact = _meet_all(self.exact.get(v, TOP) for v in incoming)
            for arg in args:
                self._set(arg, may, exact)
            self._set(result, may, exact)
        if isinstance(op, ops.ForEachOp):
            elem, iterable = op.body.args[0], op.operands[0]
            self._set(elem, self.may_of(iterable) or frozenset({self._unknown()}), None)


def _base_name(op: Operation) -> str:
    aten = op.attributes.get("aten") or ""
    return aten.removeprefix("aten::").partition(".")[0]


def _tuple_item(op: Operation, r: Value) -> Value | None:
    """The operand of a `py.tuple` that extraction result `r` is."""
    built = op.operands[0].owner
    if not isinstance(built, ops.TupleOp):
        return None
    if isinstance(op, ops.UnpackOp):
        return built.operands[r.index]  # type: ignore[attr-defined]
    index = constant_of(op.operands[1])
    if type(index) is int and -len(built.operands) <= index < len(built.operands):
        return built.operands[index]
    return None


def _meet(a: Any, b: Any) -> Any:
    if a is TOP:
        return b
    if b is TOP:
        return a
    return a if a == b else None


def _meet_all(values: Iterator[Any]) -> Any:
    out: Any = TOP
    for v in values:
        out = _meet(out, v)
    return out


def carried_slots(op: Operation) -> list[tuple[Value, list[Value], list[Value], Value]]:
    """For each loop-carried value: its initial value, the block arguments that hold it, the
    values the terminators pass on, and the loop's result."""
    out = []
    if isinstance(op, ops.WhileOp):
        cond, yld = op.before.terminator, op.after.terminator
        for j, r in enumerate(op.results):
            out.append((op.operands[j], [op.before.args[j], op.after.args[j]],
                        [cond.operands[1 + j], yld.operands[j]], r))  # type: ignore[union-attr]
        return out
    body = op.regions[0].block
    term = body.terminator
    first = 3 if isinstance(op, ops.ForRangeOp) else 1
    shift = 1 if isinstance(term, ops.ConditionOp) else 0
    for j, r in enumerate(op.results):
        nxt = term.operands[shift + j]  # type: ignore[union-attr]
        out.append((op.operands[first + j], [body.args[1 + j]], [nxt], r))
    return out


def guarded_layer_call(op: Operation, func: ops.FuncOp) -> tuple | None:
    """For a call of a `READ_ONLY_LAYERS` module that an entry guard checks, the key prefix of
    the module's attributes (what the call may write)."""
    if not isinstance(op, ops.ModuleCallOp) or not isinstance(op.operands[0].type, ModuleType):
        return None
    qualname = op.operands[0].type.qualname
    path = entry_path(op.operands[0], func)
    if qualname not in READ_ONLY_LAYERS or path is None:
        return None
    text = ".".join(str(part[1]) for _, _, part in path[1])
    for guard in func.body.ops:
        if isinstance(guard, ops.BuiltinCallOp) and guard.callee == PLAIN_MODULE.name \
                and guard.operands[0] is path[0] and [constant_of(v) for v in guard.operands[1:3]] == [text, qualname]:
            return ("entry", path[0].index, *(part for _, _, part in path[1]))
    return None


def module_prefix(module: Value, func: ops.FuncOp) -> tuple | None:
    """The key prefix of the attributes of a module value: from its static path, or for the
    element of a loop over a module list, from the list's path (any index)."""
    while isinstance(module.owner, ops.RefineOp):
        module = module.owner.operands[0]
    path = entry_path(module, func)
    if path is not None:
        return ("entry", path[0].index, *(part for _, _, part in path[1]))
    if isinstance(module, BlockArg) and module.index == 0 and module.block.parent is not None:
        loop = module.block.parent.parent
        if isinstance(loop, ops.ForEachOp) and module.block is loop.body:
            return module_prefix(loop.operands[0], func)
    return None


def entry_path(value: Value, func: ops.FuncOp) -> tuple[BlockArg, tuple] | None:
    """How `value` is read from an argument of `func` by attribute reads of modules and constant
    items of tuples and module lists: (argument, ((op, result index, part), ...)) with parts
    ("attr", name) and ("item", k); None when it is not."""
    steps = []
    while not isinstance(value, BlockArg):
        op = value.owner
        obj = op.operands[0] if op.operands else None
        if isinstance(op, ops.GetAttrOp) and module_like(obj.type):
            steps.append((op, 0, ("attr", op.attributes["attr"])))
        elif isinstance(op, ops.GetItemOp) and isinstance(obj.type, (TupleType, ModuleListType)):
            index = constant_of(op.operands[1])
            if type(index) is not int:
                return None
            steps.append((op, 0, ("item", index)))
        elif isinstance(op, ops.UnpackOp) and isinstance(obj.type, TupleType):
            steps.append((op, value.index, ("item", value.index)))  # type: ignore[attr-defined]
        else:
            return None
        value = obj
    if value.block is not func.body:
        return None
    return value, tuple(reversed(steps))


def analyse(func: ops.FuncOp) -> Aliasing:
    """The alias analysis, with every if result that can be a fresh root of its own made one:
    a tensor result whose incoming values are fresh tensors of the if's block that nothing
    reads after the if (`out = self.relu(out)` with an in-place ReLU). Candidates that fail the
    check are dropped until the rest pass."""
    first = Aliasing(func)
    merges = {r for op in first.order if isinstance(op, ops.IfOp) for r in op.results
              if _merge_candidate(first, op, r)}
    while True:
        a = Aliasing(func, frozenset(merges))
        dead = {r for r in merges if not _unread_after(a, r)}
        if not dead:
            return a
        merges -= dead


def _merge_candidate(a: Aliasing, op: ops.IfOp, r: Value) -> bool:
    if not isinstance(r.type, TensorType) or a.exact.get(r) is not None or not a.may_of(r):
        return False
    for key in a.may_of(r):
        root = a.roots[key]
        owner = root.value.owner if root.value is not None else None
        if root.kind != FRESH or not isinstance(owner, Operation):
            return False
        while owner is not None and owner.parent is not op.parent:
            owner = owner.parent_op()
        if owner is None:
            return False  # made in an enclosing loop's earlier iteration, or outside
    return True


def _unread_after(a: Aliasing, r: Value) -> bool:
    """Whether no value that may alias the roots merged into `r` is read after r's if."""
    op = r.owner
    assert isinstance(op, ops.IfOp)
    start = a.position[op]
    end = start + sum(1 for _ in op.walk()) - 1
    for v, may in a.may.items():
        if may & a.merged_from[r]:
            for use in v.uses:
                if a.position.get(use.op, end + 1) > end:
                    return False
    return True


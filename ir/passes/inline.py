"""Inlining: calls of compiled functions and of submodules whose forward is compiled in the same
file are replaced by a copy of the callee's body.

- `func.call` of a function of the program: the callee's body, its arguments bound to the call's
  operands. The caller runs only where the dispatcher chose compiled code, and so would the call.
  A call of a submodule's method (`guard_self`: `self.rel_pos.get_bias()`) needs the entry guard
  a module call needs: the submodule is exactly of the method's class; one left a call keeps
  that guard, or, where the submodule's path is not known at entry, calls the method as Python.
- `module.call` of a module typed `Module[C]` where the program holds `C.forward`: the body of
  `C.forward` with `self` bound to the module value. Calling a module runs `nn.Module.__call__`
  (hooks) and whatever forward the instance really has, so this needs an entry guard: the module
  is exactly a `C` without hooks (`runtime.guards.plain_module`). A guard reads the module at
  function entry, so the module value must be a chain of attribute reads (and constant indices)
  from a module argument of the function (`module_path`); a module reached through a loop over a
  ModuleList cannot be checked there, and its call stays.

Recursive functions are not inlined (into themselves or elsewhere), nor those the program keeps
`separate` (an @script class's forward in ahead-of-time generic code: it has compiled code of
its own, reached through its module's call). The callee's ops keep their
locations: the compiled code says which source lines it runs. Guards of an inlined callee move to
the caller's entry, their module paths extended by where the callee's `self` lives. Functions
that are no longer called stay: the runtime's COMPILED table may name them.

Kept eager (`Program.kept_eager`, from `script(model, ..., keep_eager=...)`: regions measured
slower compiled, transpiler/regions.py): a call, in the entry's module's own functions, of a
submodule at one of those paths below it stays the call of the live module (`kept = "eager"`),
neither inlined nor lowered, so it runs eager's own code; an entry guard pins its class (and a
Sequential's length), whose forward the shape analysis still reads for the result.

Containers: a call of an `nn.Sequential` of known length becomes a call of each layer, under a
guard on the container's class and length (in generic code only where that reaches a forward to
inline: its standard layers stay calls there), and so does a module list or Sequential whose
items the code reads by position (an unrolled loop, `zip`, `enumerate`). A module's class that a
decision when compiling rests on (`py.assume_class`, from `isinstance(t, nn.Identity)`) becomes
an entry guard too.

The module-guard helpers here (`module_path`, `add_module_guard`) are shared with the layer
lowering (ir/passes/layers.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from ir.core import ops
from ir.core.builder import literal_type
from ir.core.graph import BlockArg, Loc, Operation, Program, Value
from ir.core.helpers import GUARDS, PLAIN_MODULE, home_of
from ir.core.rewrite import clone_op
from ir.core.types import BOOL, INT, STR, ModuleListType, ModuleType, OptionalType, is_subtype

GUARD_HELPER = PLAIN_MODULE.name  # runtime/guards.py
SEQUENTIAL = "torch.nn.Sequential"

# What each condition a guard may name (runtime/guards.py _LAYER_CONDITIONS) means, for reasons.
CONDITION_TEXT = {
    "eval": "in eval mode",
    "running_stats": "with running statistics",
    "zeros_padding": "with padding_mode 'zeros'",
    "no_max_norm": "without max_norm",
    "no_indices": "without return_indices",
    "valid_p": "with 0 <= p <= 1",
}


# -- module paths and entry guards -----------------------------------------------------------------
@dataclass(frozen=True)
class ModulePath:
    """Where a module value lives at function entry: `root` (a module argument of the function)
    and the attribute names / constant indices below it. A part ending in "?" was Optional and
    is used only after a `not None` check."""

    root: BlockArg
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return ".".join(self.parts)

    def display(self) -> str:
        out = self.root.name or "module"
        for part in self.parts:
            name = part.rstrip("?")
            out += f"[{name}]" if name.lstrip("-").isdigit() else f".{name}"
        return out

    def extended(self, more: tuple[str, ...]) -> ModulePath:
        return ModulePath(self.root, self.parts + more)


def assigned_attributes(program: Program) -> set[str]:
    """Names the program assigns with `obj.<name> = ...`: a module path through one of them may
    not hold at entry what it holds later, so no guard is built on it."""
    return {op.attributes["attr"] for op in program.walk() if isinstance(op, ops.SetAttrOp)}


def module_path(value: Value, func: ops.FuncOp, assigned: set[str]) -> ModulePath | None:
    """The path of a module value from a module argument of `func`, or None when it is not a
    chain of attribute reads, constant indices and `not None` refinements from one."""
    parts: list[str] = []
    optional = False
    while True:
        if isinstance(value, BlockArg):
            if value.block is not func.body or optional:
                return None
            if not isinstance(value.type, (ModuleType, ModuleListType)):
                return None
            return ModulePath(value, tuple(reversed(parts)))
        element = tuple_element(value)
        if element is not None:  # an element of a tuple display (a loop over d.items()): that value
            value = element
            continue
        op = value.owner
        if isinstance(op, ops.RefineOp) and isinstance(op.operands[0].type, OptionalType) and not optional:
            optional = True
            value = op.operands[0]
            continue
        if isinstance(op, ops.GetAttrOp):
            name = op.attributes["attr"]
            if name in assigned or not _is_module_like(op.operands[0].type):
                return None
            parts.append(name + ("?" if optional else ""))
        elif isinstance(op, ops.GetItemOp) and isinstance(op.operands[0].type, ModuleListType):
            index = op.operands[1].owner
            if optional or not isinstance(index, ops.ConstantOp) or type(index.value) is not int:
                return None
            parts.append(str(index.value))
        else:
            return None
        optional = False
        value = op.operands[0]


def tuple_element(value: Value) -> Value | None:
    """The value a constant index or an unpacking takes out of a tuple display (through nested
    displays), or None."""
    op = value.owner
    if isinstance(op, ops.GetItemOp):
        index = op.operands[1].owner
        if not isinstance(index, ops.ConstantOp) or type(index.value) is not int:
            return None
        position = index.value
    elif isinstance(op, ops.UnpackOp):
        position = op.results.index(value)
    else:
        return None
    container: Value | None = op.operands[0]
    while container is not None and not isinstance(container.owner, ops.TupleOp):
        container = tuple_element(container)  # (an element of an element: `enumerate(zip(a, b))`)
    if container is None or not -len(container.owner.operands) <= position < len(container.owner.operands):
        return None
    return container.owner.operands[position]


def _is_module_like(t: object) -> bool:
    return isinstance(t, (ModuleType, ModuleListType))


@dataclass(frozen=True)
class ModuleGuard:
    """A guard `plain_module(root, path, qualname, *conditions)` found in a function."""

    op: ops.GuardOp
    path: ModulePath
    qualname: str
    conditions: tuple[str, ...]

    @property
    def key(self) -> tuple:
        return (self.path, self.qualname, self.conditions)


def module_guards(func: ops.FuncOp) -> list[ModuleGuard] | None:
    """The module guards of `func`; None when it has a guard of another kind (which this pass
    cannot move into a caller)."""
    found = []
    for op in func.walk():
        if not isinstance(op, ops.GuardOp):
            continue
        guard = _as_module_guard(op, func)
        if guard is None:
            return None
        found.append(guard)
    return found


def _as_module_guard(op: ops.GuardOp, func: ops.FuncOp) -> ModuleGuard | None:
    call = op.operands[0].owner
    if not (isinstance(call, ops.BuiltinCallOp) and call.attributes["callee"] == GUARD_HELPER):
        return None
    root, *rest = call.operands
    consts = [v.owner for v in rest]
    if not isinstance(root, BlockArg) or root.block is not func.body or op.parent is not func.body:
        return None
    if len(consts) < 2 or not all(isinstance(c, ops.ConstantOp) and isinstance(c.value, str) for c in consts):
        return None
    values = [c.value for c in consts]  # type: ignore[union-attr]
    parts = tuple(values[0].split(".")) if values[0] else ()
    return ModuleGuard(op, ModulePath(root, parts), values[1], tuple(values[2:]))


def guard_reason(path: ModulePath, qualname: str, conditions: tuple[str, ...]) -> str:
    name, _, call = qualname.partition("!")
    text = f"{path.display()} is not an unhooked {name}" + (f" whose __call__ is {call}" if call else "")
    for c in conditions:
        n = c.partition("len=")[2]
        text += " " + (f"of {n} layers" if n else CONDITION_TEXT.get(c, f"with {c}"))
    return text


def add_module_guard(func: ops.FuncOp, path: ModulePath, qualname: str,
                     conditions: tuple[str, ...] = (), loc: Loc | None = None) -> None:
    """Add `py.guard(plain_module(root, "a.b", qualname, *conditions))` at the entry of `func`,
    after the guards already there; nothing if the same guard is there."""
    existing = module_guards(func) or []
    if any(g.key == (path, qualname, conditions) for g in existing):
        return
    body = func.body
    anchor = body.ops[guard_prefix_end(func)]
    consts = []
    for text in (path.text, qualname, *conditions):
        c = ops.ConstantOp([], [STR], {"value": text}, loc=loc)
        body.insert_before(anchor, c)
        consts.append(c.result)
    call = ops.BuiltinCallOp([path.root, *consts], [BOOL], {"callee": GUARD_HELPER}, loc=loc)
    body.insert_before(anchor, call)
    guard = ops.GuardOp([call.result], [], {"reason": guard_reason(path, qualname, conditions)}, loc=loc)
    body.insert_before(anchor, guard)


def name_shared_modules(func: ops.FuncOp) -> None:
    """Give a submodule whose attributes are read several times (and which is used for nothing
    else) its attribute's name, so the generated code reads `bn1 = self.bn1` once and then
    `bn1.weight`, `bn1.bias` (`gates_module` where the source names a value `gates`)."""
    taken = {v.name for v in _values(func) if v.name is not None and not _is_module_like(v.type)}
    for op in func.walk():
        if isinstance(op, ops.GetAttrOp) and _is_module_like(op.result.type) and op.result.name is None:
            uses = op.result.uses
            if len(uses) > 1 and all(isinstance(u.op, ops.GetAttrOp) or (isinstance(u.op, ops.ModuleCallOp) and u.index == 0)
                                     for u in uses):
                name = op.attributes["attr"]
                op.result.name = f"{name}_module" if name in taken else name


def _values(func: ops.FuncOp) -> Iterator[Value]:
    yield from func.args
    for op in func.walk():
        yield from op.results
        for region in op.regions:
            for block in region.blocks:
                yield from block.args


def guard_prefix_end(func: ops.FuncOp) -> int:
    """Index after the last guard of the run of guards and entry checks (and what computes
    them) that opens the body."""
    end = 0
    for i, op in enumerate(func.body.ops):
        if isinstance(op, (ops.GuardOp, ops.EntryCheck)):
            end = i + 1
        elif isinstance(op, ops.ConstantOp) or (
            isinstance(op, ops.BuiltinCallOp) and home_of(op.callee) is GUARDS
        ):
            continue
        else:
            break
    return end


# -- the pass --------------------------------------------------------------------------------------
def inline(program: Program) -> None:
    funcs = {f.sym_name: f for f in program.funcs if isinstance(f, ops.FuncOp)}
    graph = {name: _callees(f, funcs) for name, f in funcs.items()}
    recursive = {name for name in funcs if _reaches(graph, name, name)}
    assigned = assigned_attributes(program)
    inlinable = {name: f for name, f in funcs.items() if name not in program.separate}
    # Generic code lowers no layer: a Sequential unrolls only to reach a forward it inlines.
    unroll = (lambda t: _holds_inlinable(t, inlinable)) if program.generic else (lambda t: True)
    own = _entry_module_functions(program, funcs) if program.kept_eager else set()
    for name in _callees_first(graph, list(funcs)):
        _check_lengths(funcs[name], assigned)
        kept = program.kept_eager if name in own else frozenset()
        if _inline_into(funcs[name], inlinable, recursive, assigned, unroll, kept):
            name_shared_modules(funcs[name])
    for func in funcs.values():
        _guard_submodule_methods(func, assigned)
        _guard_assumed_classes(func, assigned)


def _entry_module_functions(program: Program, funcs: dict[str, ops.FuncOp]) -> set[str]:
    """The functions whose `self` is the module an entry is compiled for (its forward, and the
    methods inlined into it): there a module path is a path below that module."""
    types = {funcs[name].args[0].type for name, given in program.entry_inputs.items()
             if name in funcs and given and funcs[name].args and isinstance(funcs[name].args[0].type, ModuleType)}
    return {name for name, f in funcs.items() if f.args and f.args[0].type in types}


def _keep_eager(func: ops.FuncOp, kept: frozenset[str], assigned: set[str]) -> None:
    """Mark the calls of submodules at the `kept` paths below `func`'s `self` as calls of the
    live module (`kept = "eager"`), each under an entry guard of its class."""
    for call in [op for op in func.walk() if isinstance(op, ops.ModuleCallOp)]:
        if call.attributes.get("kept") or call.attributes.get("opaque"):
            continue
        path = module_path(call.operands[0], func, assigned)
        if path is None or path.root is not func.args[0] or path.text not in kept:
            continue
        call.attributes["kept"] = "eager"
        t = call.operands[0].type
        if isinstance(t, ModuleType):
            add_module_guard(func, path, t.qualname, (), call.loc)
        elif isinstance(t, ModuleListType) and t.kind == "Sequential" and t.length_known:
            add_module_guard(func, path, SEQUENTIAL, (f"len={len(t.elems)}",), call.loc)


def _guard_assumed_classes(func: ops.FuncOp, assigned: set[str]) -> None:
    """A module's class that a decision rests on (`py.assume_class`) becomes its entry guard;
    where its path from an argument is not known at entry, a guard where it is read."""
    for op in [op for op in func.walk() if isinstance(op, ops.AssumeClassOp)]:
        path = module_path(op.operands[0], func, assigned)
        if path is not None:
            add_module_guard(func, path, op.attributes["qualname"], (), op.loc)
        else:
            text = [ops.ConstantOp([], [STR], {"value": v}, loc=op.loc) for v in ("", op.attributes["qualname"])]
            check = ops.BuiltinCallOp([op.operands[0], *(c.result for c in text)], [BOOL],
                                      {"callee": GUARD_HELPER}, loc=op.loc)
            guard = ops.GuardOp([check.result], [], {"reason": f"a module is not a {op.attributes['qualname']}"},
                                loc=op.loc)
            for new in (*text, check, guard):
                op.parent.insert_before(op, new)  # type: ignore[union-attr]
        op.erase()


def _guard_submodule_methods(func: ops.FuncOp, assigned: set[str]) -> None:
    """A call of a submodule's method left as a call (`guard_self`: `self.rel_pos.get_bias()`,
    not inlined) runs the compiled method only under an entry check that the submodule is of its
    class; where the submodule's path is not known at entry, it calls the module's own method
    as Python."""
    for call in [op for op in func.walk() if isinstance(op, ops.FuncCallOp) and op.attributes.get("guard_self")]:
        path = module_path(call.operands[0], func, assigned)
        owner, _, method = call.attributes["callee"].rpartition(".")
        del call.attributes["guard_self"]
        if path is not None:
            add_module_guard(func, path, owner, (), call.loc)
            continue
        python = ops.MethodCallOp(list(call.operands), [r.type for r in call.results], {"method": method}, loc=call.loc)
        call.parent.insert_before(call, python)  # type: ignore[union-attr]
        for old, new in zip(call.results, python.results):
            old.replace_all_uses_with(new)
        call.erase()


def _callee_of(op: Operation, funcs: dict[str, ops.FuncOp]) -> ops.FuncOp | None:
    if isinstance(op, ops.FuncCallOp):
        return funcs.get(op.attributes["callee"])
    if isinstance(op, ops.ModuleCallOp) and isinstance(op.operands[0].type, ModuleType) \
            and not op.attributes.get("opaque") and not op.attributes.get("kept"):
        # an overloaded forward names the body compiled for its declaration (`Block.forward#1`)
        return funcs.get(op.attributes.get("callee") or f"{op.operands[0].type.qualname}.forward")
    return None


def _callees(func: ops.FuncOp, funcs: dict[str, ops.FuncOp]) -> list[str]:
    out: list[str] = []
    for op in func.walk():
        callee = _callee_of(op, funcs)
        if callee is not None and callee.sym_name not in out:
            out.append(callee.sym_name)
    return out


def _reaches(graph: dict[str, list[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    stack = list(graph[start])
    while stack:
        name = stack.pop()
        if name == goal:
            return True
        if name not in seen:
            seen.add(name)
            stack.extend(graph[name])
    return False


def _callees_first(graph: dict[str, list[str]], names: list[str]) -> list[str]:
    """Every function after the functions it calls (cycles broken where first met), so that
    what is copied into a caller has already had its own calls inlined."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if name in state:
            return
        state[name] = 0
        for callee in graph[name]:
            visit(callee)
        order.append(name)

    for name in names:
        visit(name)
    return order


def _holds_inlinable(t: ModuleListType, funcs: dict[str, ops.FuncOp]) -> bool:
    """Whether a Sequential holds a module whose forward `funcs` has (or such a Sequential)."""
    return any(isinstance(e, ModuleType) and f"{e.qualname}.forward" in funcs
               or isinstance(e, ModuleListType) and e.kind == "Sequential" and e.length_known and _holds_inlinable(e, funcs)
               for e in t.elems)


def _inline_into(func: ops.FuncOp, funcs: dict[str, ops.FuncOp], recursive: set[str], assigned: set[str],
                 unroll: Callable[[ModuleListType], bool], kept: frozenset[str] = frozenset()) -> bool:
    """Inline every call in `func` that can be (also those copied in), unrolling the
    Sequentials `unroll` says, but the calls of modules at the `kept` paths; whether any was."""
    rejected: set[Operation] = set()
    changed = False
    while True:
        if kept:  # (before each unrolling: a kept Sequential stays one call)
            _keep_eager(func, kept, assigned)
        while _unroll_sequentials(func, assigned, unroll):
            changed = True
            if kept:
                _keep_eager(func, kept, assigned)
        site = next((op for op in _calls(func, funcs) if op not in rejected), None)
        if site is None:
            return changed
        if _inline_call(func, site, funcs, recursive, assigned):
            changed = True
        else:
            rejected.add(site)


def _calls(func: ops.FuncOp, funcs: dict[str, ops.FuncOp]) -> Iterator[Operation]:
    for op in func.walk():
        if op is not func and _callee_of(op, funcs) is not None:
            yield op


def _inline_call(func: ops.FuncOp, call: Operation, funcs: dict[str, ops.FuncOp],
                 recursive: set[str], assigned: set[str]) -> bool:
    """Inline one call if every condition holds; False (and nothing changed) otherwise."""
    callee = _callee_of(call, funcs)
    assert callee is not None
    if callee.sym_name in recursive or callee is func or not _single_return(callee):
        return False
    if callee.grad_off and not func.grad_off:
        return False  # (code for autograd: it runs under its own torch.no_grad(), as eager's)
    bound = _bind(call, callee)
    if bound is None:
        return False
    guards = module_guards(callee)
    if guards is None:
        return False
    # Where the module and every module a callee guard starts from live in the caller.
    entry_guards: list[tuple[ModulePath, str, tuple[str, ...], Loc | None]] = []
    if isinstance(call, ops.ModuleCallOp) or call.attributes.get("guard_self"):
        path = module_path(call.operands[0], func, assigned)
        if path is None:
            return False
        qualname = callee.sym_name.rsplit(".", 1)[0]
        if call.attributes.get("call"):  # the module's class has its own __call__: that one
            qualname += "!" + call.attributes["call"]
        entry_guards.append((path, qualname, (), call.loc))
    for g in guards:
        value = bound[g.path.root.index]
        base = module_path(value, func, assigned) if isinstance(value, Value) else None
        if base is None:
            return False
        entry_guards.append((base.extended(g.path.parts), g.qualname, g.conditions, g.op.loc))
    ret = callee.body.ops[-1]
    results = ret.operands[: len(call.results)]
    if len(results) != len(call.results):
        return False
    if not all(is_subtype(v.type, r.type) for v, r in zip(results, call.results)):
        return False

    for path, qualname, conditions, loc in entry_guards:
        add_module_guard(func, path, qualname, conditions, loc)
    skip = _guard_ops(callee, guards)
    mapping: dict[Value, Value] = {}
    block = call.parent
    assert block is not None
    for arg, value in zip(callee.args, bound):
        if isinstance(value, ops.ConstantOp):  # a default filled in
            block.insert_before(call, value)
            value = value.result
        mapping[arg] = value
    for op in callee.body.ops[:-1]:
        if op not in skip:
            block.insert_before(call, clone_op(op, mapping))
    for old, new in zip(call.results, results):
        old.replace_all_uses_with(mapping.get(new, new))
    call.erase()
    return True


def _check_lengths(func: ops.FuncOp, assigned: set[str]) -> None:
    """A module list (or Sequential) of known length whose items the code reads by position (a
    loop over it unrolled, `zip`, `enumerate`, `self.layers[0]`) holds as many modules as when it
    was compiled: an entry guard says so (a layer appended since would be skipped)."""
    for op in list(func.walk()):
        t = op.operands[0].type if isinstance(op, ops.GetItemOp) else None
        if not (isinstance(t, ModuleListType) and t.length_known):
            continue
        path = module_path(op.operands[0], func, assigned)
        if path is not None:
            kind = SEQUENTIAL if t.kind == "Sequential" else "torch.nn.ModuleList"
            add_module_guard(func, path, kind, (f"len={len(t.elems)}",), op.loc)


def _unroll_sequentials(func: ops.FuncOp, assigned: set[str], unroll: Callable[[ModuleListType], bool]) -> bool:
    """`seq(x)` of an nn.Sequential of known length becomes `seq[0](x)`, `seq[1](...)`, ...: what
    Sequential.forward does, each layer's call then inlined or lowered on its own. The entry
    guard says the container is a plain Sequential (a subclass that keeps its forward too) of
    that length; a container whose path from an argument is not known keeps its call."""
    changed = False
    for call in [op for op in func.walk() if isinstance(op, ops.ModuleCallOp)]:
        t = call.operands[0].type
        if not (isinstance(t, ModuleListType) and t.kind == "Sequential" and t.length_known) \
                or len(call.operands) != 2 or call.attributes.get("kwnames") or len(call.results) != 1 \
                or call.attributes.get("kept") or not unroll(t):
            continue
        path = module_path(call.operands[0], func, assigned)
        if path is None:
            continue
        add_module_guard(func, path, SEQUENTIAL, (f"len={len(t.elems)}",), call.loc)
        block = call.parent
        assert block is not None
        value = call.operands[1]
        for i, elem in enumerate(t.elems):
            index = ops.ConstantOp([], [INT], {"value": i}, loc=call.loc)
            layer = ops.GetItemOp([call.operands[0], index.result], [elem], loc=call.loc)
            step = ops.ModuleCallOp([layer.result, value], [call.results[0].type], loc=call.loc)
            for op in (index, layer, step):
                block.insert_before(call, op)
            value = step.result
        call.results[0].replace_all_uses_with(value)
        call.erase()
        changed = True
    return changed


def _single_return(callee: ops.FuncOp) -> bool:
    """The body ends in its only func.return (early returns are already structured)."""
    body = callee.body
    if not body.ops or not isinstance(body.ops[-1], ops.ReturnOp):
        return False
    return sum(isinstance(op, ops.ReturnOp) for op in callee.walk()) == 1


def _bind(call: Operation, callee: ops.FuncOp) -> list | None:
    """The value for each callee argument (a ConstantOp not yet inserted for a default), or None
    when the call does not bind exactly, or a value's type does not fit its parameter's."""
    params = callee.args
    if isinstance(call, ops.FuncCallOp):
        if len(call.operands) != len(params):
            return None
        bound: list = list(call.operands)
    else:
        kwnames = call.attributes.get("kwnames", ())
        values = call.operands[1:]
        positional = values[: len(values) - len(kwnames)]
        by_name = dict(zip(kwnames, values[len(values) - len(kwnames):]))
        if len(positional) + 1 > min(len(params), callee.attributes.get("positional", len(params))):
            return None
        bound = [call.operands[0], *positional]
        defaults = callee.attributes["defaults"]
        for arg in params[len(bound):]:
            if arg.name in by_name:
                bound.append(by_name.pop(arg.name))
            elif arg.name in defaults:
                try:
                    t = literal_type(defaults[arg.name])
                except TypeError:
                    return None
                bound.append(ops.ConstantOp([], [t], {"value": defaults[arg.name]}, loc=call.loc))
            else:
                return None
        if by_name:
            return None
    for arg, value in zip(params, bound):
        t = value.results[0].type if isinstance(value, ops.ConstantOp) else value.type
        if not is_subtype(t, arg.type):
            return None
    return bound


def _guard_ops(callee: ops.FuncOp, guards: list[ModuleGuard]) -> set[Operation]:
    """The callee's guards and what only they use: they are rebuilt at the caller's entry."""
    skip: set[Operation] = set()
    for g in guards:
        skip.add(g.op)
        call = g.op.operands[0].owner
        assert isinstance(call, Operation)
        if all(u.op in skip for u in call.results[0].uses):
            skip.add(call)
            for v in call.operands:
                owner = v.owner
                if isinstance(owner, ops.ConstantOp) and all(u.op in skip for u in owner.result.uses):
                    skip.add(owner)
    return skip

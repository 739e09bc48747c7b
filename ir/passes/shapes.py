"""Shape and dtype propagation: an abstract interpreter over the IR.

Every tensor value gets its dtype, rank, symbolic shape (sympy) and device where they can be
known; what cannot be known stays unknown (None), never guessed. Sources, strongest first: the
argument types given to `propagate_shapes` (from example inputs: ir/passes/example_types.py), shape
strings in annotations (already in the argument types), the live module when one is given
(parameter and buffer shapes, Python attributes, submodules), and propagation through every op.

The interpreter walks each function in program order with a table of per-op rules (`OP_RULES`
here for Python values and control flow; ir/shape_rules*.py for torch calls). Branches are joined
(`ir.shapes.values.join`: facts that differ become unknown); loops are iterated until their
carried values stop changing; a loop over a live nn.ModuleList / nn.Sequential is unrolled.
Calls of other compiled functions (`func.call`, `module.call` of a class compiled in the same
program) are analysed per call context and their facts joined over contexts.

The result is written into the IR (`Value.type`, each function's `result_type`) and returned as
a typed side table, `ShapeFacts`: symbolic values of ints (`x.size(0)` is `B`) and the facts
read from live modules. What the refined types assume about the function's arguments and module
attributes, the checks generated code runs at entry, is listed by ir/passes/entry_guards.py.

Soundness notes. Size symbols are positive integers: a guard checks each symbol's size is >= 1.
Live-module settings that are not tensors or Python constants read through `py.getattr`
(a Conv2d's stride, which submodule is which) are taken as part of the module's identity and
not guarded. `self.training` is never specialised. A function with an in-place op that changes
shapes (`x.unsqueeze_(0)`) is left as the front end typed it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import sympy
import torch

from ir.core import ops
from ir.core.graph import Block, Operation, Program, Value
from ir.core.types import (
    ANY,
    INT,
    STR,
    DictType,
    Dim,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    is_subtype,
    unify,
)
from ir.shapes.frame import DictKey, Frame, Path
from ir.shapes.rule_table import TorchCall
from ir.shapes.rules import infer_call, refine_type
from ir.shapes.rules_nn import layer_call
from ir.shapes.rules_python import OP_RULES, _declared, loop_runs_python, runs_python
from ir.shapes.values import (
    AV,
    BOTTOM,
    UNKNOWN,
    const_av,
    is_bottom,
    join,
    join_all,
    size_of,
    tensor_type_of,
)
from runtime.guards import is_plain_object

DEBUG = False  # let rule errors propagate (tests)
# In-place ops that change their target's shape: the SSA types of the target would lie after them.
SHAPE_CHANGING_INPLACE = frozenset({
    "unsqueeze_", "squeeze_", "transpose_", "t_", "swapdims_", "swapaxes_", "resize_", "resize_as_",
    "as_strided_", "set_",
})


# -- results --------------------------------------------------------------------------------------
@dataclass
class ShapeFacts:
    """What propagate_shapes found, besides the refined types it wrote into the IR."""

    values: dict[Value, AV] = field(default_factory=dict)  # joined over every call context
    # sym_name -> attribute path (("self", "qkv", "weight")) -> what was read from the live module
    attrs: dict[str, dict[Path, AV]] = field(default_factory=dict)

    def int_value(self, value: Value) -> Dim:
        """The value of an int as a size (an int or a sympy expression), None if unknown."""
        av = self.values.get(value)
        return size_of(av) if av is not None and av.type == INT else None


# -- the interpreter ------------------------------------------------------------------------------
class _Interpreter:
    def __init__(self, program: Program, dict_types: dict[DictKey, AV | None] | None = None) -> None:
        self.funcs = {f.sym_name: f for f in program.funcs if isinstance(f, ops.FuncOp)}
        self.summary: dict[Value, AV] = {}
        self.returns: dict[ops.FuncOp, AV] = {}
        self.attr_facts: dict[ops.FuncOp, dict[Path, AV]] = {}
        self.cache: dict[tuple, tuple[AV, dict[Path, AV]]] = {}
        self.active: set[tuple] = set()
        self.analysed: set[ops.FuncOp] = set()
        self.setattr_names = {op.attributes.get("attr") for op in program.walk() if isinstance(op, ops.SetAttrOp)}
        self.appends: dict[Value, list[Value]] = {}
        self.escaped: set[Value] = set()
        self.frozen: set[ops.FuncOp] = set()
        self.read_after_python: set[Operation] = set()  # module attribute reads Python may have set
        # Dicts of tensors live modules hold (levit's attention biases cached by device): a read
        # is of the type of every tensor the dict held at compile time and every tensor the
        # program puts in it, which an entry check pins ("tensor_values"); `dict_types` are the
        # types an earlier round found (None: no type), since a read may come before a write.
        self.dict_types = dict(dict_types or {})
        self.dict_contents: dict[DictKey, AV] = {}
        self.dict_writes: dict[DictKey, list[AV]] = {}
        self.dict_reads: dict[DictKey, AV] = {}
        self.escaped_dict_attrs: set[Any] = set()
        for func in self.funcs.values():
            self._scan(func)
        # list attributes some read may change or keep: no read of that name is a known list,
        # since the list may no longer be what the entry check saw
        self.changed_list_attrs = {op.attributes.get("attr") for func in self.funcs.values() for op in func.walk()
                                   if isinstance(op, ops.GetAttrOp) and isinstance(op.result.type, ListType)
                                   and (op.result in self.appends or op.result in self.escaped)}

    def _scan(self, func: ops.FuncOp) -> None:
        for op in func.walk():
            if isinstance(op, ops.GetAttrOp) and isinstance(op.results[0].type, DictType) \
                    and not all(_reads_or_fills(use) for use in op.results[0].uses):
                self.escaped_dict_attrs.add(op.attributes.get("attr") or op.attributes.get("name"))
            if isinstance(op, ops.ListAppendOp):
                self.appends.setdefault(op.operands[0], []).append(op.operands[1])
                if isinstance(op.operands[1].type, ListType):
                    self.escaped.add(op.operands[1])
            elif not isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp, ops.GetItemOp, ops.UnpackOp,
                                     ops.BuiltinCallOp, ops.ForEachOp, ops.SliceOp, ops.SpreadOp,
                                     ops.BinaryOp, ops.CompareOp)):  # (`a + b` of lists makes a new one)
                for v in op.operands:
                    if isinstance(v.type, ListType) and not isinstance(op, (ops.YieldOp, ops.ConditionOp)):
                        self.escaped.add(v)
            if isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") in SHAPE_CHANGING_INPLACE \
                    and op.attributes.get("mutates"):
                self.frozen.add(func)
            if isinstance(op, (ops.YieldOp, ops.ConditionOp, ops.ReturnOp)):
                for v in op.operands:
                    if isinstance(v.type, ListType):
                        self.escaped.add(v)

    # -- functions --------------------------------------------------------------------------
    def run_function(self, func: ops.FuncOp, args: Sequence[AV], parent: Frame | None = None,
                     origins: Sequence[Path | None] | None = None) -> AV:
        names = [a.name or f"arg{i}" for i, a in enumerate(func.args)]
        rebased = _checkable([_rebase(av, (n,)) for av, n in zip(args, names)])
        key = (func, tuple(rebased), parent is not None and parent.python)
        arg_origins = dict(zip(names, origins or [None] * len(names)))
        if key in self.active:
            return AV(func.result_type)
        if key in self.cache:
            result, facts = self.cache[key]
            self._replay(parent, arg_origins, facts)
            return result
        self.active.add(key)
        self.analysed.add(func)
        frame = Frame(func, parent, arg_origins)
        try:
            for arg, av in zip(func.args, rebased):
                self.record(frame, arg, av)
            if func in self.frozen:
                result = AV(func.result_type)
            else:
                outs = self.run_block(frame, func.body)
                result = outs[0] if outs else const_av(None)
                if is_bottom(result):
                    result = AV(func.result_type)
        finally:
            self.active.discard(key)
        self.returns[func] = join(self.returns.get(func, BOTTOM), result)
        self.cache[key] = (result, dict(frame.facts))
        self._replay(parent, arg_origins, frame.facts)
        return result

    def _replay(self, parent: Frame | None, arg_origins: dict[str, Path | None], facts: dict[Path, AV]) -> None:
        if parent is None:
            return
        for path, av in facts.items():
            origin = arg_origins.get(path[0])
            if origin is not None:
                self.record_fact(parent, origin + tuple(path[1:]), av)

    def record_fact(self, frame: Frame, path: Path, av: AV) -> None:
        frame.facts[path] = join(frame.facts.get(path, BOTTOM), av)
        table = self.attr_facts.setdefault(frame.func, {})
        table[path] = join(table.get(path, BOTTOM), av)

    # -- blocks and values ------------------------------------------------------------------
    def record(self, frame: Frame, value: Value, av: AV) -> None:
        frame.env[value] = av
        self.summary[value] = join(self.summary.get(value, BOTTOM), av)

    def read(self, frame: Frame, value: Value) -> AV:
        av = frame.env.get(value)
        if av is None or is_bottom(av):
            return AV(value.type)
        return av

    def read_raw(self, frame: Frame, value: Value) -> AV:
        av = frame.env.get(value)
        return AV(value.type) if av is None else av

    def run_block(self, frame: Frame, block: Block) -> list[AV]:
        for op in block.ops:
            if op is block.terminator:
                return [self.read_raw(frame, v) for v in op.operands]
            handler = OP_RULES.get(op.name, _declared)
            try:
                results = handler(self, frame, op)
            except (TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError, KeyError,
                    RecursionError):
                if DEBUG:
                    raise
                results = [AV(r.type) for r in op.results]
            for r, av in zip(op.results, results):
                self.record(frame, r, av)
            if runs_python(op):
                frame.python = True
        return []

    def list_elem(self, frame: Frame, value: Value, av: AV) -> AV:
        """What an element of a list that is appended to may be: its first elements and every
        value appended to it anywhere (as far as analysed; the declared type otherwise)."""
        declared_elem = AV(av.type.elem if isinstance(av.type, ListType) else ANY)
        if value in self.escaped or not isinstance(value.owner, ops.ListOp):
            return declared_elem
        out = join_all(self.read(frame, v) for v in value.owner.operands)
        for appended in self.appends.get(value, []):
            seen = self.summary.get(appended)
            out = join(out, seen if seen is not None and not is_bottom(seen) else AV(appended.type))
        return declared_elem if is_bottom(out) else out

    def operand(self, frame: Frame, value: Value) -> AV:
        """An operand as a torch op sees it (lists that are appended to: their element facts)."""
        av = self.read(frame, value)
        if isinstance(av.type, ListType) and (value in self.appends or value in self.escaped):
            elem = self.list_elem(frame, value, av)
            return AV(ListType(refine_type(av.type.elem, elem.type)))
        return av

    # -- dicts of tensors modules hold ----------------------------------------------------------
    def track_dict(self, frame: Frame, value: Value, module: Any, name: str, path: Path | None) -> None:
        """`value` is `module.<name>`, a dict: tracked when the program only reads it by key,
        tests keys and puts values in (anything else may change it unseen), and it holds only
        tensors now."""
        live = module.__dict__.get(name) if isinstance(module, torch.nn.Module) else None
        if type(live) is not dict or name in self.escaped_dict_attrs or name in self.setattr_names \
                or not all(isinstance(v, torch.Tensor) for v in live.values()):
            return
        key = (id(module), name)
        self.dict_contents[key] = join_all(AV(tensor_type_of(v)) for v in live.values())
        frame.dicts[value] = (key, path)

    def dict_read(self, frame: Frame, value: Value) -> AV | None:
        """What `value[key]` is, `value` a tracked dict: None when nothing that an entry check
        can pin is known (or Python code may have changed the dict since the entry)."""
        entry = frame.dicts.get(value)
        if entry is None or frame.python:
            return None
        key, path = entry
        if key in self.dict_types and self.dict_types[key] is None:
            return None
        seen = join_all([self.dict_contents[key], *self.dict_writes.get(key, []), self.dict_types.get(key) or BOTTOM])
        t = _pinnable(seen)
        if t is None:
            self.dict_reads.setdefault(key, BOTTOM)  # (a write further on may give it a type)
            return None
        self.dict_reads[key] = join(self.dict_reads.get(key, BOTTOM), AV(t))
        if path is not None:
            self.record_fact(frame, path, AV(DictType(STR, t)))
        return AV(t)

    def dict_write(self, frame: Frame, value: Value, written: AV) -> None:
        entry = frame.dicts.get(value)
        if entry is not None:
            self.dict_writes.setdefault(entry[0], []).append(AV(written.type))

    def unsettled_dicts(self) -> dict[DictKey, AV | None]:
        """The dicts some read took for another type than all that was put in them: each with
        the type a next round's reads take, None for none. The first guess leaves out writes of
        unknown type, which may be unknown only because a read was (a value computed from the
        read itself); the next round then checks the guess, or gives up on the dict."""
        out: dict[DictKey, AV | None] = {}
        for key, read in self.dict_reads.items():
            writes = self.dict_writes.get(key, [])
            t = _pinnable(join_all([self.dict_contents[key], *writes]))
            if t is not None and AV(t) == read:
                continue
            guess = _pinnable(join_all([self.dict_contents[key], *(w for w in writes if _pinnable(w) is not None)]))
            out[key] = None if guess is None or key in self.dict_types else AV(guess)
        return out

    # -- modules ----------------------------------------------------------------------------
    def attr(self, frame: Frame, mod: AV, name: str, declared: Type = ANY, lists: bool = False) -> AV:
        """`mod.<name>` of a live module; recorded as a fact about the module's argument (a list
        too where `lists` says the code only reads it)."""
        m = mod.value
        if not isinstance(m, torch.nn.Module) or name in self.setattr_names:
            return AV(declared)
        path = mod.origin + (name,) if mod.origin is not None else None
        if name in m._parameters:
            value: Any = m._parameters[name]
        elif name in m._buffers:
            value = m._buffers[name]
        elif name in m._modules:
            value = m._modules[name]
        elif name in m.__dict__:
            value = m.__dict__[name]
        else:
            value = _class_setting(type(m), name)
            if value is UNKNOWN:
                return AV(declared)
        if isinstance(value, torch.nn.Module):
            return module_av(value, declared, path)
        return self.value_av(frame, value, declared, path, lists)

    def value_av(self, frame: Frame, value: Any, declared: Type, path: Path | None, lists: bool = False) -> AV:
        """What a read of `value` from a live module (or from an object it holds) is known to be;
        recorded as a fact about the function's argument, which an entry check then pins. A list
        of literals (torchvision's `Permute.dims`) only where `lists` says the code reads it and
        does not change it or pass it on."""
        if is_plain_object(value):  # a config: its literal attributes are the facts
            return AV(declared, value, origin=path)
        if isinstance(value, torch.Tensor):
            av = AV(tensor_type_of(value), origin=path)
        elif value is None or isinstance(value, (bool, int, float, str)):
            av = AV(refine_type(declared, const_av(value).type), const_av(value).value, origin=path)
        elif isinstance(value, tuple) and all(isinstance(v, (bool, int, float, str)) for v in value):
            c = const_av(value)
            av = AV(c.type, UNKNOWN, c.items, origin=path)
        elif lists and type(value) is list and value and (all(type(v) is int for v in value) or all(
                type(v) is tuple and len(v) == len(value[0]) and all(type(e) is int for e in v) for v in value)):
            c = const_av(tuple(value))  # (ints, or tuples of ints alike: crossvit's image sizes)
            av = AV(ListType(c.items[0].type), UNKNOWN, c.items, origin=path)
        else:
            return AV(declared)
        if path is not None:
            self.record_fact(frame, path, av)
        return av

    def call_module(self, frame: Frame, mod: AV, args: list[AV], kw: dict[str, AV], declared: Type,
                    arg_origins: list[Path | None]) -> AV:
        m = mod.value
        t = mod.type
        if isinstance(t, ModuleType) and f"{t.qualname}.forward" in self.funcs:
            qualname = t.qualname  # (the variant of its class the call was typed with: `Stage@2`)
        elif isinstance(m, torch.nn.Module):
            qualname = module_qualname(m)
        elif isinstance(t, ModuleType):
            qualname = t.qualname
        elif isinstance(t, ModuleListType) and t.kind == "Sequential":
            qualname = "torch.nn.Sequential"
        else:
            return AV(declared)
        if qualname == "torch.nn.Sequential":
            if mod.items is None or kw or len(args) != 1:
                return AV(declared)
            x = args[0]
            for item in mod.items:
                x = self.call_module(frame, item, [x], {}, TensorType(), [None])
            return AV(refine_type(declared, x.type), x.value, x.items)
        callee = self.funcs.get(f"{qualname}.forward")
        if callee is not None:
            bound = _bind_compiled(callee, [mod] + args, kw)
            if bound is None:
                return AV(declared)
            origins = [mod.origin] + arg_origins + [None] * (len(bound) - 1 - len(arg_origins))
            return self.run_function(callee, bound, frame, origins)
        if kw:
            return AV(declared)
        got = layer_call(_AttrReader(self, frame), qualname, mod, args, declared)
        if got is None:
            return AV(declared)
        if isinstance(got, TorchCall):
            return infer_call(got)
        return AV(refine_type(declared, got.type), got.value, got.items)


class _AttrReader:
    """What the layer table gets to read a live module's parameters."""

    def __init__(self, interp: _Interpreter, frame: Frame) -> None:
        self.interp = interp
        self.frame = frame

    def attr(self, mod: AV, name: str) -> AV:
        return self.interp.attr(self.frame, mod, name, OptionalType(TensorType()))


def _rebase(av: AV, path: Path) -> AV:
    """A live module passed as an argument: its attribute paths start at the parameter now."""
    if not isinstance(av.value, torch.nn.Module):
        return AV(av.type, av.value, av.items)
    items = None if av.items is None else tuple(_rebase(i, path + (k,)) for k, i in enumerate(av.items))
    return AV(av.type, av.value, items, path)


def _checkable(args: list[AV]) -> list[AV]:
    """Argument facts an entry guard can check: live modules (their identity is assumed), tensor
    types whose sizes are ints or symbols that some non-Optional tensor argument defines, and
    expressions of those. Other Python values are not specialised (nothing checks them)."""
    defined: set[sympy.Symbol] = set()

    def collect(t: Type) -> None:
        if isinstance(t, TensorType) and t.shape is not None:
            defined.update(d for d in t.shape if isinstance(d, sympy.Symbol))
        elif isinstance(t, TupleType):
            for e in t.elems:
                collect(e)

    for av in args:
        collect(av.type)

    def clean(t: Type) -> Type:
        if isinstance(t, TensorType) and t.shape is not None:
            shape = tuple(d if d is None or type(d) is int or d.free_symbols <= defined else None  # type: ignore[union-attr]
                          for d in t.shape)
            return TensorType(t.dtype, shape, t.device)
        if isinstance(t, OptionalType):
            return OptionalType(clean(t.elem))
        if isinstance(t, TupleType):
            return TupleType(tuple(clean(e) for e in t.elems))
        if isinstance(t, ListType):
            return ListType(clean(t.elem))
        return t

    out = []
    for av in args:
        if isinstance(av.value, torch.nn.Module):
            out.append(av)
        else:
            out.append(AV(clean(av.type)))
    return out


def module_qualname(m: torch.nn.Module) -> str:
    cls = type(m)
    if getattr(torch.nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    return cls.__qualname__


def module_av(m: torch.nn.Module, declared: Type, path: Path | None) -> AV:
    if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
        items = tuple(module_av(child, ModuleType(module_qualname(child)),
                                path + (i,) if path is not None else None) for i, child in enumerate(m))
        t = declared if isinstance(declared, (ModuleListType, OptionalType)) else ModuleListType(
            "Sequential" if isinstance(m, torch.nn.Sequential) else "ModuleList",
            tuple(i.type for i in items), True)
        if isinstance(t, OptionalType):
            t = t.elem
        return AV(t, m, items, path)
    t = declared if isinstance(declared, ModuleType) else ModuleType(module_qualname(m))
    return AV(t, m, None, path)


def _bind_compiled(func: ops.FuncOp, pos: list[AV], kw: dict[str, AV]) -> list[AV] | None:
    names = [a.name for a in func.args]
    if len(pos) > len(names):
        return None
    bound: dict[str, AV] = dict(zip(names, pos))
    for k, v in kw.items():
        if k not in names or k in bound:
            return None
        bound[k] = v
    defaults = func.attributes.get("defaults", {})
    out = []
    for n, arg in zip(names, func.args):
        if n in bound:
            out.append(bound[n])
        elif n in defaults:
            out.append(AV(arg.type, const_av(defaults[n]).value, const_av(defaults[n]).items))
        else:
            return None
    return out


# -- the pass -------------------------------------------------------------------------------------
def propagate_shapes(program: Program, inputs: dict[str, Sequence[Any]] | None = None) -> ShapeFacts:
    """Refine every value's type in place with the facts found; return the side table.

    `inputs` maps a function's sym_name to what its arguments are: one entry per argument (the
    `self` of a method may be left out), each a Type (see ir/passes/example_types.py), a live
    nn.Module (for `self`: its parameters, buffers, submodules and Python attributes are read),
    or None for the declared type. Functions not named and not called from a named one are
    analysed with their declared argument types.
    """
    inputs = inputs or {}
    dict_types: dict[DictKey, AV | None] = {}
    while True:  # (once more where a dict's read came before a write of another type: twice at most)
        interp = _Interpreter(program, dict_types)
        for name, given in inputs.items():
            func = interp.funcs.get(name)
            if func is None:
                raise KeyError(f"no function {name!r} in the program")
            interp.run_function(func, _entry_args(func, list(given)))
        for func in interp.funcs.values():
            if func not in interp.analysed:
                interp.run_function(func, [AV(a.type) for a in func.args])
        unsettled = interp.unsettled_dicts()
        if not unsettled:
            break
        dict_types.update(unsettled)
    _commit(program, interp)
    for func in program.funcs:
        if isinstance(func, ops.FuncOp):
            number_reads_after_python(func, interp.read_after_python)
    facts = ShapeFacts(dict(interp.summary), {f.sym_name: dict(t) for f, t in interp.attr_facts.items()})
    return facts


def _reads_or_fills(use: Any) -> bool:
    """A use of a module's dict that neither changes it unseen nor keeps it: `d[k]`, `d[k] = v`,
    `k in d`."""
    op = use.op
    return (isinstance(op, (ops.GetItemOp, ops.DictSetItemOp)) and use.index == 0) or (
        isinstance(op, ops.CompareOp) and op.attributes.get("op") in ("in", "not in") and use.index == 1)


def _pinnable(av: AV) -> TensorType | None:
    """The tensor type an entry check can pin on every value of a dict: dtype and device
    known; sizes that are ints (a size symbol is bound to this call's inputs, while the dict may
    hold a tensor from another call)."""
    t = av.tensor
    if t is None or t.dtype is None or t.device is None:
        return None
    shape = None if t.shape is None else tuple(d if type(d) is int else None for d in t.shape)
    return TensorType(t.dtype, shape, t.device)


def _entry_args(func: ops.FuncOp, given: list[Any]) -> list[AV]:
    args = list(func.args)
    if len(given) == len(args) - 1 and args and isinstance(args[0].type, ModuleType):
        given = [None] + given
    if len(given) != len(args):
        raise ValueError(f"{func.sym_name} takes {len(args)} arguments, {len(given)} types were given")
    out = []
    for arg, g in zip(args, given):
        name = arg.name or "arg"
        if g is None:
            out.append(AV(arg.type))
        elif isinstance(g, torch.nn.Module):
            out.append(module_av(g, arg.type, (name,)))
        elif isinstance(g, Type):
            out.append(AV(refine_type(arg.type, g)))
        else:
            raise TypeError(f"inputs of {func.sym_name}: expected a Type, an nn.Module or None, got {g!r}")
    return out


def _commit(program: Program, interp: _Interpreter) -> None:
    declared: dict[Value, Type] = {}
    for value, av in interp.summary.items():
        if is_bottom(av):
            continue
        declared[value] = value.type
        t = value.type
        if isinstance(t, OptionalType) and av.origin is not None and isinstance(av.type, TensorType):
            t = t.elem  # a tensor read from the live module: its entry check says it is not None
        value.type = refine_type(t, av.type)
    for value in interp.appends:  # a list built by appends: what was put in it
        if value in interp.summary and isinstance(value.owner, ops.ListOp) and value not in interp.escaped:
            parts = [interp.summary.get(v, AV(v.type)) for v in list(value.owner.operands) + interp.appends[value]]
            elem = join_all(parts)
            if not is_bottom(elem) and isinstance(value.type, ListType):
                value.type = ListType(refine_type(value.type.elem, elem.type))
    for func in program.funcs:
        if not isinstance(func, ops.FuncOp):
            continue
        ret = interp.returns.get(func)
        if ret is not None and not is_bottom(ret):
            func.attributes["result_type"] = refine_type(func.result_type, ret.type)
        for op in _post_order(func):
            _harmonize(op, declared)
        _widen_lists(func)
        term = func.body.terminator
        if term is not None and term.operands and not is_subtype(term.operands[0].type, func.result_type):
            merged = unify(func.result_type, term.operands[0].type)
            func.attributes["result_type"] = merged if merged is not None else func.result_type


def _widen_lists(func: Operation) -> None:
    """A list's type names its element type exactly (lists are mutable, so list[Tensor[]] does
    not fit list[Tensor]): where a refined list flows into a control-flow result of a wider list
    type, the list's own type is widened to it (always sound), until nothing changes."""
    changed = True
    while changed:
        changed = False
        for op in func.walk():
            if not isinstance(op, (ops.YieldOp, ops.ConditionOp)) or op.parent is None:
                continue
            owner = op.parent_op()
            if owner is None:
                continue
            values = op.operands[1:] if isinstance(op, ops.ConditionOp) else op.operands
            targets = [r.type for r in owner.results]  # scf.if; a loop's condition
            if isinstance(owner, (ops.ForRangeOp, ops.ForEachOp)):
                targets = [a.type for a in owner.body.args[1:]]
            elif isinstance(owner, ops.WhileOp) and isinstance(op, ops.YieldOp):
                targets = [a.type for a in owner.before.args]
            for k, (v, t) in enumerate(zip(values, targets)):
                if isinstance(v.type, ListType) and isinstance(t, ListType) and v.type != t and is_subtype(v.type.elem, t.elem):
                    v.type = t
                    changed = True
                elif isinstance(owner, ops.IfOp) and isinstance(v.type, ListType) and isinstance(t, ListType) \
                        and v.type != t and is_subtype(t.elem, v.type.elem):
                    owner.results[k].type = v.type  # a list widened elsewhere: so is the merge
                    changed = True


def _post_order(op: Operation) -> list[Operation]:
    out: list[Operation] = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                out.extend(_post_order(inner))
    out.append(op)
    return out


def _unify_values(values: list[Value], declared: dict[Value, Type]) -> Type:
    """The type all of `values` fit. Placeholders (py.uninitialized: never read) do not count;
    they get the result."""
    real = [v for v in values if not _is_placeholder(v)] or values[:1]
    t: Type | None = None
    for v in real:
        t = v.type if t is None else unify(t, v.type)
        if t is None:
            break
    if t is None:
        t = declared.get(real[0], real[0].type)
    for v in values:
        if _is_placeholder(v):
            v.type = t
    return t


def _is_placeholder(v: Value) -> bool:
    return isinstance(v.owner, ops.UninitializedOp)


def _harmonize(op: Operation, declared: dict[Value, Type]) -> None:
    """Make control-flow types agree again, as the verifier wants (results fit what flows in)."""
    if isinstance(op, ops.IfOp):
        for i, r in enumerate(op.results):
            group = [r] + [b.terminator.operands[i] for b in (op.then_block, op.else_block)
                           if b.terminator is not None and i < len(b.terminator.operands)]
            if not all(is_subtype(v.type, r.type) for v in group if not _is_placeholder(v)):
                r.type = _unify_values(group, declared)
            else:
                for v in group:
                    if _is_placeholder(v):
                        v.type = r.type
    elif isinstance(op, (ops.ForRangeOp, ops.ForEachOp)):
        body = op.body
        term = body.terminator
        offset = 1 if isinstance(term, ops.ConditionOp) else 0
        for i, r in enumerate(op.results):
            group = [r, body.args[1 + i], op.inits[i]]
            if term is not None and offset + i < len(term.operands):
                group.append(term.operands[offset + i])
            t = _unify_values(group, declared)
            r.type = t
            body.args[1 + i].type = t
    elif isinstance(op, ops.WhileOp):
        cond_term = op.before.terminator
        after_term = op.after.terminator
        for i, r in enumerate(op.results):
            before = [op.before.args[i], op.operands[i]]
            if after_term is not None and i < len(after_term.operands):
                before.append(after_term.operands[i])
            t = _unify_values(before, declared)
            op.before.args[i].type = t
            group = [r, op.after.args[i]]
            if cond_term is not None and 1 + i < len(cond_term.operands):
                group.append(cond_term.operands[1 + i])
            t = _unify_values(group, declared)
            r.type = t
            op.after.args[i].type = t
        # The after region's yields must fit the before region's arguments.
        if after_term is not None:
            for i, v in enumerate(after_term.operands):
                if i < len(op.before.args) and not is_subtype(v.type, op.before.args[i].type):
                    op.before.args[i].type = _unify_values([op.before.args[i], v], declared)


__all__ = ["propagate_shapes", "ShapeFacts"]


def number_reads_after_python(func: ops.FuncOp, after: set[Operation]) -> None:
    """Module attribute reads that Python code may precede (found by the analysis, or by the
    lowering within one function) get `after`: how many kept Python ops come before them in the
    function, so that CSE merges no two reads with Python between them. Counted after inlining,
    so a callee's reads count its caller's Python too."""
    count = 0

    def visit(block: Block) -> None:
        nonlocal count
        for op in block.ops:
            if isinstance(op, ops.GetAttrOp) and (op in after or op.attributes.get("after")):
                op.attributes["after"] = count + 1
            if op.regions and loop_runs_python(op) and not isinstance(op, ops.IfOp):
                count += 1  # (an iteration after the first follows the Python of the one before)
            for region in op.regions:
                for inner in region.blocks:
                    visit(inner)
            if runs_python(op):
                count += 1

    visit(func.body)


def _class_setting(cls: type, name: str) -> Any:
    """A literal a module's class holds (HF's `gradient_checkpointing = False`), which instances
    read unless they set their own (an entry check pins what is read), else UNKNOWN."""
    for klass in cls.__mro__:
        if name in vars(klass):
            value = vars(klass)[name]
            return value if value is None or type(value) in (bool, int, float, str) else UNKNOWN
    return UNKNOWN

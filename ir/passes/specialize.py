"""Specialisation: shape and dtype propagation, then entry checks for every fact it assumed.

`propagate_shapes` refines each value's type from what the function's arguments are: the declared
annotations (symbolic shapes from `Annotated`/jaxtyping-style strings) and, when the program was
compiled for a live instance with example inputs (`Program.entry_inputs`), the instance's
parameters, buffers and attributes and the examples' dtypes and sizes. Later passes fold sizes and
branches and choose kernels from those types, so each fact about an argument becomes an entry
check (`py.check_tensor`, `py.check_size`, `py.check_value`): an input that breaks one takes the
eager path. The checks of one tensor are one op (one runtime call): dtype, device and every size.

The propagation is ir/passes/shapes.py's abstract interpreter (per-op rules: ir/shapes/rules.py).
A module's attribute, or a literal its class holds, read as a value is pinned by `py.check_value`
and the read becomes a constant; a list of literals only if the code only reads it. A read that
Python code kept in the function may run before is read at run time instead, and numbered apart
so CSE does not merge it with an earlier one (`number_reads_after_python`). Then `hoist_module_checks`
moves checks of module-level state to the entry, once each: `py.check_global` (a module-level flag
taken as a constant), `py.check_no_autograd` (a `with torch.no_grad():` block compiled as its
body) and `py.check_lookup` (a dispatch call made when compiling, docs/permissive.md).
"""

from __future__ import annotations

from collections import defaultdict

import sympy

from ir.core import ops
from ir.core.graph import Operation, Program, Value
from ir.core.types import ListType
from ir.passes.entry_guards import ShapeGuard, shape_guards, symbol_bindings, tensor_values
from ir.passes.fold import fits, literal_type
from ir.passes.inline import guard_prefix_end
from ir.passes.lists import CONSUMING_BUILTINS
from ir.passes.shapes import ShapeFacts, propagate_shapes
from ir.shapes.values import UNKNOWN, literal_of


def specialize(program: Program) -> None:
    facts = propagate_shapes(program, program.entry_inputs)
    for func in program.funcs:
        if isinstance(func, ops.FuncOp):
            guards = shape_guards(func, facts)
            add_entry_checks(func, guards)
            checked = {g.path for g in guards if g.kind == "value"}
            hoist_module_checks(func, facts, checked)
            fold_checked_attributes(func, facts, checked)


def hoist_module_checks(func: ops.FuncOp, facts: ShapeFacts, checked: set[tuple]) -> None:
    """Checks of module-level state go to the entry, after the entry checks, once each: a
    py.check_global, a py.check_no_autograd, and a py.check_lookup whose arguments are literals or values those checks
    pin (its call is then made once per call of the function, before any effect)."""
    first: dict[tuple, Operation] = {}
    for op in list(func.walk()):
        if not isinstance(op, (ops.CheckLookupOp, ops.CheckGlobalOp, ops.CheckNoAutogradOp)):
            continue
        if not all(isinstance(v.owner, ops.ConstantOp) or
                   (facts.values.get(v) is not None and facts.values[v].origin in checked) for v in op.operands):
            continue  # (a value no entry check pins: the check stays where the call was)
        key = (op.name, *sorted(op.attributes.items()))
        if key in first:
            for mine, kept in zip(op.results, first[key].results):
                mine.replace_all_uses_with(kept)
            op.erase()
            continue
        first[key] = op
        op.drop_operands()  # (pinned: the entry checks compare them with the attributes' values)
        assert op.parent is not None
        op.parent.ops.remove(op)
        op.parent = None
    at = guard_prefix_end(func)  # (after taking them out: one of them may have ended the prefix)
    anchor = func.body.ops[at] if at < len(func.body.ops) else None
    for op in first.values():
        if anchor is None:
            func.body.append(op)
        else:
            func.body.insert_before(anchor, op)


def fold_checked_attributes(func: ops.FuncOp, facts: ShapeFacts, checked: set[tuple]) -> None:
    """A module attribute read whose value an entry check pins (`self.num_heads == 4`) becomes
    that constant, so canonicalization folds what depends on it. A pinned list of literals
    (swin's `window_size`) becomes a tuple where torch takes either alike (`x.permute(dims)`),
    else a list display of constants where the code only reads it: a new list in place of
    the module's is then the same to the code."""
    for op in list(func.walk()):
        if not isinstance(op, ops.GetAttrOp):
            continue
        av = facts.values.get(op.result)
        if av is None or av.origin not in checked:
            continue
        if av.known:
            value = av.value
        elif av.items is not None and literal_of(av) is not UNKNOWN:
            value = tuple(literal_of(av))  # conv strides, normalized_shape
            if isinstance(av.type, ListType) and not all(
                    isinstance(u.op, (ops.TorchCallOp, ops.TensorMethodOp)) for u in op.result.uses):
                if _only_read(op.result):
                    _as_list_display(op, value)
                continue
        else:
            continue
        t = literal_type(value)
        if t is None or not fits(value, t):
            continue
        const = ops.ConstantOp([], [t], {"value": value}, loc=op.loc)
        assert op.parent is not None
        op.parent.insert_before(op, const)
        op.result.replace_all_uses_with(const.result)


# What may read a list without keeping it, changing it or telling it from a copy (not `is`).
_LIST_READERS = (ops.TorchCallOp, ops.TensorMethodOp, ops.GetItemOp, ops.UnpackOp, ops.SliceOp, ops.SpreadOp,
                 ops.BinaryOp)


def _only_read(value: Value) -> bool:
    """Whether every use of the list reads its elements and nothing else about it."""
    for use in value.uses:
        op = use.op
        if isinstance(op, ops.CompareOp) and op.attributes["op"] not in ("is", "is not"):
            continue
        if isinstance(op, ops.BuiltinCallOp) and op.attributes.get("callee") in CONSUMING_BUILTINS:
            continue
        if isinstance(op, ops.ForEachOp) and use.index == 0:
            continue
        if not isinstance(op, _LIST_READERS):
            return False
    return True


def _as_list_display(op: Operation, items: tuple) -> None:
    assert op.parent is not None and isinstance(op.result.type, ListType)
    consts = []
    for item in items:
        t = literal_type(item)
        if t is None or not fits(item, t):
            return
        consts.append(ops.ConstantOp([], [t], {"value": item}, loc=op.loc))
    display = ops.ListOp([c.result for c in consts], [op.result.type], {}, [], op.loc, [op.result.name])
    for new in (*consts, display):
        op.parent.insert_before(op, new)
    op.result.replace_all_uses_with(display.result)


def add_entry_checks(func: ops.FuncOp, guards: list[ShapeGuard]) -> None:
    """Insert the checks for `guards` at the entry of `func`, after the guards already there (a
    module guard says that the attributes these checks read exist)."""
    args = {a.name: a for a in func.args}
    symbols = symbol_bindings(guards)
    body = func.body
    at = guard_prefix_end(func)
    anchor = body.ops[at] if at < len(body.ops) else None
    loc = func.loc

    def insert(op: Operation) -> None:
        if anchor is None:
            body.append(op)
        else:
            body.insert_before(anchor, op)

    tensors: dict[tuple, dict] = defaultdict(dict)  # path -> facts, in the order first seen
    later: list[ShapeGuard] = []
    for g in guards:
        if g.path[0] not in args:
            continue
        if g.kind in ("dtype", "device", "rank", "size", "symbol"):
            facts = tensors[(g.path, g.optional)]
            if g.kind == "dtype":
                facts["dtype"] = g.expected
            elif g.kind == "device":
                facts["device"] = g.expected
            elif g.kind == "rank":
                facts["shape"] = [None] * g.expected
            else:
                facts["shape"][g.dim] = g.expected
        else:
            later.append(g)
    for (path, optional), facts in tensors.items():
        shape = facts.get("shape")
        attrs = {"path": path[1:], "dtype": facts.get("dtype"), "device": facts.get("device"),
                 "shape": tuple(shape) if shape is not None else None, "optional": optional}
        insert(ops.CheckTensorOp([args[path[0]]], [], attrs, loc=loc))
    for g in later:
        if g.kind in ("value", "tensor_values"):
            expected = g.expected if g.kind == "value" else tensor_values(g.expected)
            insert(ops.CheckValueOp([args[g.path[0]]], [], {"path": g.path[1:], "expected": expected}, loc=loc))
            continue
        if g.kind == "same_size":  # equal to a size read elsewhere: name it by its symbol
            other, d = g.expected
            name = next((n for n, where in symbols.items() if where == (other, d)), "size")
            expr: sympy.Expr = sympy.Symbol(name)
            binding = {name: (other, d)}
        else:
            expr = g.expected
            binding = {s.name: symbols[s.name] for s in expr.free_symbols}
        operands = [args[g.path[0]]]
        refs = []
        for name in sorted(binding):
            where, d = binding[name]
            root = args[where[0]]
            if root not in operands:
                operands.append(root)
            refs.append((name, operands.index(root), where[1:], d))
        attrs = {"path": g.path[1:], "dim": g.dim, "expected": str(expr), "symbols": tuple(refs),
                 "optional": g.optional}
        insert(ops.CheckSizeOp(operands, [], attrs, loc=loc))


__all__ = ["specialize", "add_entry_checks"]

"""Hoisting, in a frozen program: tensors computed from parameters and constants alone are
computed once, not on every call.

swin's relative position bias (a parameter table gathered by a buffer of indices, reordered)
and its shifted-window attention mask (a map built by nine slice stores, then compared with
itself) do not depend on the input, and eager PyTorch computes them again on every call: 17
times a call in swin_t, about 60 ops. Here each such tensor that the rest of the function reads
becomes `_prepacked.computed_once(helper, sources, like)` (ir/ops.ComputedOnceOp), where
`helper` is a new function holding the ops that compute it (`<func>.<name>`, after the tensor's
name in the source: `SwinTransformer.forward.attn_mask`), `sources` the parameters and
buffers it reads, and `like` the tensors whose device and dtype it is made of (`x.new_zeros`).
The runtime (runtime/prepacked.py) computes it on the first call and again whenever a source
is another tensor or has been written in place; that is the freeze contract
(`script(..., freeze=True)`), as for the folded batch norms of ir/passes/freeze.py.

A tensor is hoisted when computing it costs more than the cached call (`_worth_a_call`: an op
that makes new values and that no kernel would fuse, or many elements), in the function's own block, by pure ops whose operands are constants,
parameters or buffers (a module's tensor attribute), or other such tensors; `x.new_zeros(sizes)`
and its kind count as such with `x` as `like`. Sizes then come from constants and sources only
(never from the batch), so they are the same on every call the entry checks let in. What reads it must
not keep it or write it (a return, a store, an op that is not pure, through views too): the
cached tensor is shared by every call. A function that writes anything is left alone, since
the write could change a source between the check and the use.
"""

from __future__ import annotations

import math
from enum import Enum

from ir.core import ops
from ir.core.graph import AliasOf, Mutates, Operation, Program, Value
from ir.core.helpers import helper
from ir.core.ops import is_pure
from ir.core.rewrite import clone_op
from ir.core.types import ModuleListType, ModuleType, TensorType
from ir.kernel.vocabulary import pointwise_fusible

_MODULES = (ModuleType, ModuleListType)

# Methods that read only the dtype and device of the tensor they are called on.
_LIKE_METHODS = frozenset({"new_zeros", "new_ones", "new_full"})


class Kind(Enum):
    CONSTANT = "constant"
    MODULE = "module"
    SOURCE = "source"  # a module's tensor attribute
    COMPUTED = "computed"


def hoist_constants(program: Program) -> None:
    if not program.frozen:
        return
    helpers = {op.callee for op in program.walk() if isinstance(op, ops.ComputedOnceOp)}
    for func in list(program.funcs):
        if isinstance(func, ops.FuncOp) and func.sym_name not in helpers:
            _hoist(program, func)


def _hoist(program: Program, func: ops.FuncOp) -> None:
    if any(op.has_trait(Mutates) for op in func.walk()):
        return
    kinds = static_kinds(func)
    made = 0
    for op in list(func.body.ops):
        if len(op.results) != 1 or kinds.get(op.result) is not Kind.COMPUTED:
            continue
        v = op.result
        if not isinstance(v.type, TensorType) or not _read_elsewhere(v, kinds) or not _only_consumed(v):
            continue
        computing = _slice(v, kinds)
        if not _worth_a_call(v, computing):
            continue
        helper, sources, like = _outline(func, v, computing, kinds, _helper_name(program, func, v, computing))
        program.funcs.insert(program.funcs.index(func), helper)
        call = ops.ComputedOnceOp([*sources, *like], [v.type], {"callee": helper.sym_name, "sources": len(sources)},
                                  loc=op.loc, result_names=[v.name])
        func.body.insert_before(op, call)
        for use in [u for u in v.uses if not _is_static_user(u.op, kinds)]:
            use.op.set_operand(use.index, call.result)
        made += 1
    if made:
        _erase_dead(func, kinds)


def static_kinds(func: ops.FuncOp) -> dict[Value, Kind]:
    """What each value of the function's own block that does not depend on the inputs is."""
    kinds: dict[Value, Kind] = {}
    for arg in func.args:
        if isinstance(arg.type, _MODULES):
            kinds[arg] = Kind.MODULE
    for op in func.body.ops:
        if isinstance(op, ops.ConstantOp):
            kinds[op.result] = Kind.CONSTANT
        elif isinstance(op, (ops.GetAttrOp, ops.GetItemOp)) and op.operands and kinds.get(op.operands[0]) is Kind.MODULE:
            if len(op.results) == 1 and isinstance(op.result.type, _MODULES):
                kinds[op.result] = Kind.MODULE
            elif len(op.results) == 1 and isinstance(op.result.type, TensorType) and isinstance(op, ops.GetAttrOp):
                kinds[op.result] = Kind.SOURCE
        elif _computable(op, kinds):
            for r in op.results:
                kinds[r] = Kind.COMPUTED
    return kinds


def _computable(op: Operation, kinds: dict[Value, Kind]) -> bool:
    if not is_pure(op) or isinstance(op, (ops.EntryCheck, ops.ComputedOnceOp)) or not op.results:
        return False
    if isinstance(op, ops.BuiltinCallOp) and helper(op.callee) is not None:
        return False  # (runtime helpers: _guards, _prepacked)
    if any(isinstance(r.type, _MODULES) for r in op.results):
        return False
    for i, v in enumerate(op.operands):
        if kinds.get(v) in (Kind.CONSTANT, Kind.SOURCE, Kind.COMPUTED):
            continue
        if i == 0 and _like_operand(op):
            continue
        return False
    return True


def _like_operand(op: Operation) -> bool:
    """`x.new_zeros(sizes)`: operand 0 gives only a dtype and device (of its static type)."""
    if not (isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") in _LIKE_METHODS):
        return False
    t = op.operands[0].type
    return isinstance(t, TensorType) and t.dtype is not None and t.device is not None


def _is_static_user(op: Operation, kinds: dict[Value, Kind]) -> bool:
    """An op of the function's own block computed from constants and parameters (`kinds` holds
    only such ops' results; one in a branch or loop is never one of them)."""
    return bool(op.results) and all(kinds.get(r) is Kind.COMPUTED for r in op.results)


def _read_elsewhere(v: Value, kinds: dict[Value, Kind]) -> bool:
    """Whether an op that is not itself computed from constants and parameters reads `v`."""
    return any(not _is_static_user(u.op, kinds) for u in v.uses)


def _only_consumed(v: Value) -> bool:
    """Whether every reader of `v`, and of every view of it, computes from it and keeps nothing:
    the cached tensor must not reach the caller or be written."""
    for use in v.uses:
        user = use.op
        if not is_pure(user) or isinstance(user, (ops.TupleOp, ops.ListOp)):
            return False
        alias = user.get_trait(AliasOf)
        if alias is not None and alias.index == use.index and not all(_only_consumed(r) for r in user.results):
            return False
    return True


def _makes_values(op: Operation) -> bool:
    """An op that computes, beyond taking a view or filling a new tensor (`x.new_zeros`): a
    gather by a tensor of indices counts."""
    if isinstance(op, ops.IndexOp):
        return any(isinstance(v.type, TensorType) for v in op.operands[1:])
    if isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") in _LIKE_METHODS:
        return False
    return not op.has_trait(AliasOf) and any(isinstance(r.type, TensorType) for r in op.results) \
        and not isinstance(op, ops.ConstantOp)


def _worth_a_call(v: Value, computing: list[Operation]) -> bool:
    """Whether computing `v` costs more than a cached call (a few microseconds of Python): it
    takes an op that makes values and that no kernel would fuse (a gather, a slice store), or
    it is large. Per-channel batch norm coefficients (`1 / sqrt(var + eps) * w`), a few hundred
    pointwise values, fuse into the kernel that applies them at no cost: cached, mobilenet_v3_small
    ran 7.3 ms a call at batch 1 against 6.7, shufflenet_v2 8.7 against 8.0."""
    if any(_makes_values(o) and not pointwise_fusible(o) for o in computing):
        return True
    shape = v.type.shape if isinstance(v.type, TensorType) else None
    return shape is not None and all(type(d) is int for d in shape) and math.prod(shape) >= LARGE


LARGE = 1 << 16  # elements: a pointwise computation of this many costs more than the cached call


def _slice(v: Value, kinds: dict[Value, Kind]) -> list[Operation]:
    """The computed ops `v` depends on, in program order."""
    seen: set[Operation] = set()
    stack = [v.owner]
    while stack:
        op = stack.pop()
        if not isinstance(op, Operation) or op in seen:
            continue
        seen.add(op)
        for i, operand in enumerate(op.operands):
            if kinds.get(operand) is Kind.COMPUTED:
                stack.append(operand.owner)
    block = v.owner.parent  # type: ignore[union-attr]
    return [op for op in block.ops if op in seen]  # type: ignore[union-attr]


def _helper_name(program: Program, func: ops.FuncOp, v: Value, computing: list[Operation]) -> str:
    """`<func>.<name>`: the name the source gives the tensor (the last named value it is computed
    through: swin's `attn_mask`, whose `.unsqueeze(1).unsqueeze(0)` is what is read), numbered
    from 2 when taken."""
    named = [r.name for op in computing for r in op.results if r.name]
    base = f"{func.sym_name}.{v.name or (named[-1] if named else 'computed')}"
    taken = {f.sym_name for f in program.funcs if isinstance(f, ops.FuncOp)}
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


def _outline(func: ops.FuncOp, v: Value, computing: list[Operation], kinds: dict[Value, Kind],
             name: str) -> tuple[ops.FuncOp, list[Value], list[Value]]:
    """A function computing `v` from its sources and like tensors; and those, as the caller
    passes them."""
    sources: list[Value] = []
    like: list[Value] = []
    for op in computing:
        for i, operand in enumerate(op.operands):
            if kinds.get(operand) is Kind.SOURCE and operand not in sources:
                sources.append(operand)
            elif kinds.get(operand) is None and i == 0 and _like_operand(op) and operand not in like:
                like.append(operand)
    names = _argument_names(sources + like)
    helper = ops.FuncOp.build(name, [a.type for a in sources + like], names, v.type,
                              loc=v.owner.loc)  # type: ignore[union-attr]
    mapping: dict[Value, Value] = dict(zip(sources + like, helper.args))
    body = helper.body
    for op in computing:
        for operand in op.operands:
            if kinds.get(operand) is Kind.CONSTANT and operand not in mapping:
                body.append(clone_op(operand.owner, mapping))  # type: ignore[arg-type]
        body.append(clone_op(op, mapping))
    body.append(ops.ReturnOp([mapping[v]], loc=v.owner.loc))  # type: ignore[union-attr]
    return helper, sources, like


def _argument_names(values: list[Value]) -> list[str]:
    """A source is named by its attribute (`relative_position_index`), a like tensor by its own
    name; repeats get a number."""
    names: list[str] = []
    for v in values:
        owner = v.owner
        base = owner.attributes["attr"] if isinstance(owner, ops.GetAttrOp) else (v.name or "like")
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return names


def _erase_dead(func: ops.FuncOp, kinds: dict[Value, Kind]) -> None:
    """The computed ops and constants nothing reads any more (they moved into the helpers)."""
    for op in reversed(list(func.body.ops)):
        if op.results and all(kinds.get(r) in (Kind.COMPUTED, Kind.CONSTANT) and not r.uses for r in op.results):
            op.erase()


__all__ = ["hoist_constants", "static_kinds"]

"""Canonicalization: small exact rewrites run to a fixpoint, then common subexpressions merged.

Each rule is a function `rule(op, rewriter) -> bool` that looks at one op and rewrites it (and
returns True) or leaves the IR alone; a worklist (ir/core/rewrite.py `apply_rules`) visits every op
and revisits what a rewrite may have made foldable. The rules:

- constants (ir/passes/fold.py): Python operators, comparisons and builtins on constants,
  tuples of constants, items and unpacking of tuples the compiler sees, len() of them, sizes
  and ranks of tensors whose type fixes them, `x is None` decided by x's type;
- lists: items, slices and sums of list displays nothing changes or keeps; a list changed by
  appends and constant-index stores in straight-line code becomes one display per read
  (ir/passes/lists.py), once the branches around those changes have folded;
- control flow: an if on a constant runs one side, and so does an if whose sides do the same;
  loops that never run; a while whose condition is constant False; results that both sides of
  an if yield alike; loop-carried values passed on unchanged or never read; a module's
  attribute read in a loop that assigns none, read once before it;
- effects: a torch call marked random for an argument not known when lowered (dropout's
  `training`) is resolved again once it is a constant;
- dead code: pure ops and ifs and for loops with nothing observable and no results read;
- algebra (ir/passes/fold.py) on values that are certainly Python ints or bools (x + 0,
  x * 1, not not b, ...), never on floats (x + 0.0 turns -0.0 into 0.0) or tensors (x * 1 is
  a new tensor);
- conversions that change nothing (ir/passes/fold.py): `x.to(dtype)` to the dtype x has (eager
  returns x itself), `x.expand_as(t)` to the shape x has where nothing could tell the view
  from x (what functionalization's `(x + y).to(x.dtype).expand_as(x)` for `x += y` leaves).

Then `cse` merges a pure op into an identical earlier one that dominates it, when nothing that
might write what it reads runs in between (mutation is still in the IR before
functionalization) and the two results cannot be told apart (see `_may_merge`).

Every rewrite keeps what eager Python computes, raises and returns exactly: what would raise at
run time (1 // 0, an unpack of the wrong length, a size out of range) is left in place, unless
nothing reads it: dead pure code goes, raising or not, as ir/passes/dce.py removes it.
"""

from __future__ import annotations

from typing import Any

from ir.core import ops
from ir.core.graph import OPAQUE, PURE, TERMINATOR, Block, Operation, Program, Value
from ir.core.ops import is_pure
from ir.core.rewrite import Rewriter, Rule, apply_rules
from ir.core.types import (
    BOOL,
    INT,
    DataclassType,
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
    is_subtype,
)
from ir.passes.fold import (
    UNKNOWN,
    constant_key,
    constant_value,
    exact_bool,
    fold_binary,
    fold_builtin,
    fold_compare,
    fold_constant_tuple,
    fold_is_none_by_type,
    fold_is_none_of_display,
    fold_len,
    forward_refined_display,
    fold_tensor_size,
    fold_dtype_info,
    fold_unary,
    inline_constant_if,
    forward_tuple_item,
    forward_tuple_unpack,
    known_elements,
    private,
    same_constant,
    simplify_double_not,
    simplify_int_identity,
    simplify_int_times_zero,
    simplify_redundant_conversion,
    simplify_same_dtype_cast,
    simplify_same_shape_expand,
    slice_known_list,
    concat_known_lists,
)
from ir.passes.lists import snapshot, updated_in_place

MAX_ROUNDS = 50  # rule sweeps + CSE; real programs settle in two or three


def canonicalize(program: Program) -> None:
    for func in program.funcs:
        for _ in range(MAX_ROUNDS):
            changed = apply_rules(func, RULES)
            changed |= cse(func)
            if not changed:
                break


def snapshot_updated_list(op: Operation, rw: Rewriter) -> bool:
    """A list display changed in straight-line code: each read reads a display of what it held."""
    if not isinstance(op, ops.ListOp) or not updated_in_place(op):
        return False
    for touched in snapshot(op):
        rw.push(touched)
    return True


# -- control flow ---------------------------------------------------------------------------------
def forward_if_same_yields(op: Operation, rw: Rewriter) -> bool:
    """A result that both sides yield alike (one outer value, or equal constants) is that value."""
    if not isinstance(op, ops.IfOp):
        return False
    changed = False
    for i, result in enumerate(op.results):
        a, b = (_yielded(block, i) for block in (op.then_block, op.else_block))
        if not result.uses:
            continue
        if a is b:  # one value yielded by both sides is defined outside the if
            new = a
        else:
            ca, cb = constant_value(a), constant_value(b)
            if ca is UNKNOWN or cb is UNKNOWN or a.type != b.type or not same_constant(ca, cb):
                continue
            if not is_subtype(a.type, result.type):
                continue
            new = rw.constant(op, ca, a.type)
        rw.replace_value(result, new)
        changed = True
    return changed


def merge_identical_sides(op: Operation, rw: Rewriter) -> bool:
    """An if whose two sides do the same (equal ops, in order, on the same values, yielding
    alike) runs that once, whatever the condition: `F.relu(x) if m.inplace else F.relu(x)`,
    what functionalization leaves of `nn.ReLU(inplace=True)`. The condition is still computed;
    nothing reads it now, so it goes with the dead code when it is pure (a read)."""
    if not isinstance(op, ops.IfOp) or not _same_block(op.then_block, op.else_block, {}):
        return False
    yields = _terminator(op.then_block).operands
    if not all(is_subtype(v.type, r.type) for v, r in zip(yields, op.results)):
        return False
    for value, result in zip(yields, op.results):
        if result.name is not None and value.owner in op.then_block.ops:
            value.name = result.name  # the source's name of what the if merged (`out`, not `out_4`)
    rw.replace_op(op, rw.inline_before(op.then_block, op, []))
    return True


def _same_block(a: Block, b: Block, pairs: dict[Value, Value]) -> bool:
    """Whether blocks `a` and `b` compute the same: each op of `b` equals the op of `a` at its
    place (kind, attributes, result types, regions) and reads the same outer values, or the
    values that op's counterparts in `a` computed (`pairs`: a's value -> b's)."""
    if len(a.ops) != len(b.ops) or [x.type for x in a.args] != [y.type for y in b.args]:
        return False
    pairs.update(zip(a.args, b.args))
    for x, y in zip(a.ops, b.ops):
        if type(x) is not type(y) or len(x.operands) != len(y.operands) or len(x.regions) != len(y.regions):
            return False
        if [r.type for r in x.results] != [r.type for r in y.results] or _freeze(x.attributes) != _freeze(y.attributes):
            return False
        if any(pairs.get(u, u) is not v for u, v in zip(x.operands, y.operands)):
            return False
        for rx, ry in zip(x.regions, y.regions):
            if len(rx.blocks) != len(ry.blocks) or not all(_same_block(bx, by, pairs) for bx, by in zip(rx.blocks, ry.blocks)):
                return False
        pairs.update(zip(x.results, y.results))
    return True


def if_to_condition(op: Operation, rw: Rewriter) -> bool:
    """`True if c else False` is c (when c is surely a bool); `False if c else True` is `not c`."""
    if not isinstance(op, ops.IfOp):
        return False
    changed = False
    for i, result in enumerate(op.results):
        pair = (constant_value(_yielded(op.then_block, i)), constant_value(_yielded(op.else_block, i)))
        if result.type != BOOL or not result.uses or not all(type(v) is bool for v in pair):
            continue
        if pair == (True, False) and exact_bool(op.cond):
            rw.replace_value(result, op.cond)
            changed = True
        elif pair == (False, True):
            negated = ops.UnaryOp([op.cond], [BOOL], {"op": "not"}, loc=op.loc)
            rw.replace_value(result, rw.insert_before(op, negated).result)
            changed = True
    return changed


def remove_zero_trip_loop(op: Operation, rw: Rewriter) -> bool:
    """A for loop over an empty range or an empty tuple never runs: its results are the initial values."""
    if isinstance(op, ops.ForRangeOp):
        bounds = [constant_value(v) for v in op.operands[:3]]
        if not all(type(b) in (int, bool) for b in bounds) or bounds[2] == 0:
            return False  # range(a, b, 0) raises
        if len(range(*bounds)) != 0:
            return False
    elif isinstance(op, ops.ForEachOp):
        if known_elements(op.operands[0]) != []:
            return False
    else:
        return False
    rw.replace_op(op, list(op.inits))
    return True


def remove_while_false(op: Operation, rw: Rewriter) -> bool:
    """A while whose condition is constant False runs its condition region once, then stops."""
    if not isinstance(op, ops.WhileOp):
        return False
    term = op.before.terminator
    if term is None or constant_value(term.operands[0]) is not False:
        return False
    values = rw.inline_before(op.before, op, list(op.operands))
    rw.replace_op(op, values[1:])
    return True


def condition_true_to_yield(op: Operation, rw: Rewriter) -> bool:
    """A for-loop body ending in scf.condition(True, ...) never leaves early: it yields."""
    if not isinstance(op, ops.ConditionOp) or not isinstance(op.parent_op(), (ops.ForRangeOp, ops.ForEachOp)):
        return False
    if constant_value(op.operands[0]) is not True:
        return False
    rw.insert_before(op, ops.YieldOp(op.operands[1:], loc=op.loc))
    rw.erase(op)
    return True


def _yielded(block: Block, index: int) -> Value:
    term = block.terminator
    assert term is not None
    return term.operands[index]


# -- loop-carried values --------------------------------------------------------------------------
def _loop_layout(op: Operation) -> tuple[int, list[tuple[Block, int, int]]] | None:
    """Where a loop keeps carried value j: operand `first + j` is its initial value, and in each
    (block, arg0, term0) it is block argument `arg0 + j` and terminator operand `term0 + j`."""
    if isinstance(op, ops.ForRangeOp):
        first, blocks = 3, [op.body]
    elif isinstance(op, ops.ForEachOp):
        first, blocks = 1, [op.body]
    elif isinstance(op, ops.WhileOp):
        return 0, [(op.before, 0, 1), (op.after, 0, 0)]
    else:
        return None
    return first, [(b, 1, 1 if isinstance(b.terminator, ops.ConditionOp) else 0) for b in blocks]


def forward_loop_invariant(op: Operation, rw: Rewriter) -> bool:
    """A loop-carried value that every iteration passes on unchanged is its initial value."""
    layout = _loop_layout(op)
    if layout is None:
        return False
    first, blocks = layout
    changed = False
    for j, result in enumerate(op.results):
        if not all(_terminator(b).operands[t + j] is b.args[a + j] for b, a, t in blocks):
            continue
        init = op.operands[first + j]
        for block, a, t in blocks:
            term = _terminator(block)
            for use in list(block.args[a + j].uses):
                if not (use.op is term and use.index == t + j):
                    rw.replace_use(use, init)
                    changed = True
        if result.uses:
            rw.replace_value(result, init)
            changed = True
    return changed


_LOOPS = (ops.ForRangeOp, ops.ForEachOp, ops.WhileOp)


def hoist_module_attribute(op: Operation, rw: Rewriter) -> bool:
    """A read of a module's attribute inside a loop (`self.cell`, `cell.ih.weight` in a time
    loop) moves before the loop, where the module is defined outside it and nothing in the loop
    could assign an attribute (no `py.setattr`, nothing opaque): it reads the same object on
    every iteration. A loop that runs no iteration then reads it once where eager does not;
    the attributes read are ones the class sets up, which exist."""
    loop = op.parent_op()
    if not isinstance(op, ops.GetAttrOp) or op.after or not isinstance(loop, _LOOPS) \
            or not isinstance(op.operands[0].type, (ModuleType, ModuleListType)):
        return False
    inner = [o for o in loop.walk() if o is not loop]
    owner = op.operands[0].owner
    defined_by = owner.parent.parent if isinstance(owner, Block) and owner.parent is not None else owner
    if defined_by is loop or defined_by in inner or any(o.has_trait(OPAQUE) for o in inner):
        return False  # (defined in the loop, or something in it may assign an attribute)
    op.parent.ops.remove(op)  # type: ignore[union-attr]
    op.parent = None
    rw.insert_before(loop, op)
    rw.push(loop)
    return True


def drop_unused_carried(op: Operation, rw: Rewriter) -> bool:
    """A loop-carried value that nothing reads but the loop computing its next value goes."""
    layout = _loop_layout(op)
    if layout is None:
        return False
    dead = [j for j, r in enumerate(op.results) if not r.uses and all(
        _feeds_only(b.args[a + j], _terminator(b), t + j) for b, a, t in layout[1])]
    if not dead or _pass_on_unchanged(op, layout, dead, rw):
        return bool(dead)
    ready = [j for j in dead if all(
        all(u.op is _terminator(b) and u.index == t + j for u in b.args[a + j].uses) for b, a, t in layout[1])]
    if ready:  # else the ops that computed the next values go first
        _remove_carried(op, layout, ready, rw)
    return bool(ready)


def _pass_on_unchanged(op: Operation, layout: tuple[int, list[tuple[Block, int, int]]], dead: list[int],
                       rw: Rewriter) -> bool:
    """Let each body pass the dead values on unchanged, so that what computed them dies."""
    rewired = False
    for block, a, t in layout[1]:
        term = _terminator(block)
        for j in dead:
            arg = block.args[a + j]
            if term.operands[t + j] is not arg and is_subtype(arg.type, op.results[j].type):
                rw.push_owner(term.operands[t + j])
                term.set_operand(t + j, arg)
                rewired = True
    return rewired


def _remove_carried(op: Operation, layout: tuple[int, list[tuple[Block, int, int]]], dead: list[int],
                    rw: Rewriter) -> None:
    first, blocks = layout
    for block, a, t in blocks:
        term = _terminator(block)
        _set_operands(term, [v for i, v in enumerate(term.operands) if i - t not in dead])
        block.args = [arg for i, arg in enumerate(block.args) if i - a not in dead]
        for index, arg in enumerate(block.args):
            arg.index = index
    for j in dead:
        rw.push_owner(op.operands[first + j])
    _set_operands(op, [v for i, v in enumerate(op.operands) if i - first not in dead])
    op.results = [r for j, r in enumerate(op.results) if j not in dead]
    for index, r in enumerate(op.results):
        r.index = index


def _feeds_only(value: Value, term: Operation, index: int, seen: dict[Value, bool] | None = None) -> bool:
    """Whether `value` reaches nothing but operand `index` of `term`, through pure ops."""
    seen = {} if seen is None else seen
    if value not in seen:
        seen[value] = all(
            use.index == index if use.op is term
            else is_pure(use.op) and all(_feeds_only(r, term, index, seen) for r in use.op.results)
            for use in value.uses
        )
    return seen[value]


def _terminator(block: Block) -> Operation:
    term = block.terminator
    assert term is not None
    return term


def _set_operands(op: Operation, values: list[Value]) -> None:
    op.drop_operands()
    for v in values:
        op._add_operand(v)


# -- dead code ------------------------------------------------------------------------------------
def erase_dead_pure_op(op: Operation, rw: Rewriter) -> bool:
    """A pure op whose results nobody reads goes."""
    if not is_pure(op) or any(r.uses for r in op.results):
        return False
    rw.erase(op)
    return True


def drop_unused_if_results(op: Operation, rw: Rewriter) -> bool:
    """Results of an if that nobody reads go, with their yields."""
    if not isinstance(op, ops.IfOp) or all(r.uses for r in op.results):
        return False
    keep = [i for i, r in enumerate(op.results) if r.uses]
    for block in (op.then_block, op.else_block):
        term = _terminator(block)
        for value in term.operands:
            rw.push_owner(value)
        _set_operands(term, [term.operands[i] for i in keep])
    op.results = [op.results[i] for i in keep]
    for index, r in enumerate(op.results):
        r.index = index
    return True


def erase_empty_if(op: Operation, rw: Rewriter) -> bool:
    """An if without results whose sides only yield goes."""
    if not isinstance(op, ops.IfOp) or op.results:
        return False
    if any(len(b.ops) != 1 for b in (op.then_block, op.else_block)):
        return False
    rw.erase(op)
    return True


def erase_effect_free_loop(op: Operation, rw: Rewriter) -> bool:
    """A for loop without results whose body does nothing observable goes."""
    # (A while loop stays, even an empty one: it may not end.)
    if not isinstance(op, (ops.ForRangeOp, ops.ForEachOp)) or op.results:
        return False
    if not all(_effect_free(inner) for inner in op.walk()):
        return False
    rw.erase(op)
    return True


def _effect_free(op: Operation) -> bool:
    """The op does nothing observable but compute its results (or raise like a pure op)."""
    if isinstance(op, ops.ForRangeOp):
        step = constant_value(op.operands[2])
        return all(v.type in (INT, BOOL) for v in op.operands[:3]) and type(step) in (int, bool) and step != 0
    if isinstance(op, ops.ForEachOp):
        return isinstance(op.operands[0].type, (TupleType, ListType, ModuleListType))
    if isinstance(op, ops.IfOp) or op.has_trait(TERMINATOR):
        return True
    return is_pure(op)


# -- effects known from constants ------------------------------------------------------------------
def settle_random_call(op: Operation, rw: Rewriter) -> bool:
    """A torch call that was marked random when lowered because an argument deciding it was not
    known then (`F.dropout(x, p, training=training)` in a function that is passed `training`)
    is resolved again once that argument is a constant: with `training=False` (or `p=0`) it
    draws nothing, and the input it returns is recorded as its alias (eager returns it)."""
    if not isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) or not op.attributes.get("random"):
        return False
    from ir.torchapi.callinfo import SignatureError
    from ir.torchapi.signatures import resolve_function, resolve_method

    kwnames = list(op.attributes.get("kwnames", ()))
    method = isinstance(op, ops.TensorMethodOp)
    operands = op.operands[1:] if method else op.operands
    positional = operands[:len(operands) - len(kwnames)]
    keywords = dict(zip(kwnames, operands[len(positional):]))
    consts: dict[int | str, object] = {i: constant_value(v) for i, v in enumerate(positional)}
    consts.update({k: constant_value(v) for k, v in keywords.items()})
    consts = {k: v for k, v in consts.items() if v is not UNKNOWN}
    types, kw_types = [v.type for v in positional], {k: v.type for k, v in keywords.items()}
    try:
        info = (resolve_method(op.attributes["method"], op.operands[0].type, types, kw_types, consts) if method
                else resolve_function(op.attributes["callee"], types, kw_types, consts))
    except SignatureError:
        return False
    if info.random or info.mutates:
        return False
    op.attributes.pop("random", None)
    if info.alias_of is not None:
        op.attributes["alias_of"] = info.alias_of  # (printed where its class declares it)
    return True


# Removing dead code also removes what would raise in it (a dead `1 // 0`, an unused view of
# the wrong size), as ir/passes/dce.py does; the other rules never remove a raise.
DEAD_CODE_RULES: list[Rule] = [erase_dead_pure_op, drop_unused_if_results, erase_empty_if, erase_effect_free_loop]

RULES: list[Rule] = [
    erase_dead_pure_op,
    settle_random_call,
    fold_binary,
    fold_unary,
    fold_compare,
    fold_builtin,
    fold_constant_tuple,
    fold_is_none_by_type,
    fold_is_none_of_display,
    forward_refined_display,
    forward_tuple_item,
    forward_tuple_unpack,
    fold_len,
    slice_known_list,
    concat_known_lists,
    snapshot_updated_list,
    fold_tensor_size,
    fold_dtype_info,
    simplify_int_identity,
    simplify_int_times_zero,
    simplify_double_not,
    simplify_redundant_conversion,
    simplify_same_dtype_cast,
    simplify_same_shape_expand,
    inline_constant_if,
    forward_if_same_yields,
    merge_identical_sides,
    if_to_condition,
    drop_unused_if_results,
    erase_empty_if,
    remove_zero_trip_loop,
    remove_while_false,
    condition_true_to_yield,
    forward_loop_invariant,
    hoist_module_attribute,
    drop_unused_carried,
    erase_effect_free_loop,
]


# -- common subexpressions ------------------------------------------------------------------------
def cse(func: Operation) -> bool:
    """Merge each pure op into an identical one that dominates it, where that is safe."""
    sweep = _Cse(func)
    sweep.block(func.regions[0].block)
    return sweep.changed


class _Cse:
    """One walk in program order with a scope of seen ops per block and a count of the ops that
    might write (an op seen at count n has no write between it and any op seen at count n)."""

    def __init__(self, func: Operation) -> None:
        self.writes = 0
        self.scopes: list[dict[Any, tuple[Operation, int]]] = [{}]
        self.changed = False
        self.func_writes = any(may_write(op) for op in func.walk())

    def block(self, block: Block) -> None:
        for op in list(block.ops):
            if op.regions and not isinstance(op, ops.IfOp) and writes_in(op):
                self.writes += 1  # a loop: its later iterations run its writes before its first ops
            if self.merge(op):
                continue
            if may_write(op):
                self.writes += 1
            for region in op.regions:
                for inner in region.blocks:
                    self.scopes.append({})
                    self.block(inner)
                    self.scopes.pop()

    def merge(self, op: Operation) -> bool:
        key = _cse_key(op)
        if key is None:
            return False
        seen = next((scope[key] for scope in reversed(self.scopes) if key in scope), None)
        if seen is None or not self._may_merge(seen[0], op, seen[1]):
            self.scopes[-1][key] = (op, self.writes)
            return False
        for old, new in zip(op.results, seen[0].results):
            old.replace_all_uses_with(new)
        op.erase()
        self.changed = True
        return True

    def _may_merge(self, earlier: Operation, later: Operation, writes_then: int) -> bool:
        if _reads_mutable(later) and writes_then != self.writes:
            return False  # something in between may have changed what both read
        if _makes_new_object(later):
            # Two new tensors (lists, views) become one object: only when nothing could ever
            # tell: no writes in the function, and neither result escapes or is kept.
            if self.func_writes:
                return False
            return all(private(r) for r in earlier.results + later.results)
        return True


def _cse_key(op: Operation) -> Any:
    if op.regions or not op.results or not op.has_trait(PURE) or op.attributes.get("random"):
        return None
    if isinstance(op, ops.UninitializedOp):
        return None
    return (op.name, tuple(op.operands), _freeze(op.attributes), tuple(r.type for r in op.results))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ("dict", tuple((str(k), _freeze(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))))
    if isinstance(value, (tuple, list)):
        return ("seq", tuple(_freeze(v) for v in value))
    if isinstance(value, Type):
        return value
    return constant_key(value)


def may_write(op: Operation) -> bool:
    """An op that might change some object: anything not pure (a mutation, a call the compiler
    does not see into), except control flow (its ops count), entry guards and random ops that
    only advance the random number generator (which no pure op reads)."""
    if op.regions or op.has_trait(PURE) or op.has_trait(TERMINATOR) or isinstance(op, (ops.GuardOp, ops.EntryCheck)):
        return False
    return not (op.attributes.get("random") and not op.attributes.get("mutates"))  # only the RNG state


def writes_in(op: Operation) -> bool:
    """Whether `op` may write, or an op nested in it does (a loop or branch: the writes in it)."""
    return any(may_write(inner) for inner in op.walk())


_IMMUTABLE = {"int", "float", "bool", "str", "None", "dtype", "device"}


def immutable(t: Type) -> bool:
    """A type whose values nothing can change (numbers, strings, dtypes, tuples of them)."""
    if isinstance(t, ScalarType):
        return t.name in _IMMUTABLE
    if isinstance(t, TupleType):
        return all(immutable(e) for e in t.elems)
    if isinstance(t, OptionalType):
        return immutable(t.elem)
    return isinstance(t, FunctionType)


def _reads_mutable(op: Operation) -> bool:
    return any(not immutable(v.type) for v in op.operands)


def _makes_new_object(op: Operation) -> bool:
    """Whether the op's results may hold a mutable object made by the op (a tensor, a view, a
    list), rather than one that exists already (an item, an attribute of a module)."""
    if isinstance(op, ops.TupleOp) and isinstance(op.result.type, DataclassType):
        return True  # a dataclass instance: mutable, one object per constructor call
    if isinstance(op, (ops.RefineOp, ops.GetItemOp, ops.UnpackOp, ops.TupleOp, ops.ConstantOp)):
        return False  # the same objects (a tuple of them is immutable)
    if isinstance(op, ops.GetAttrOp) and not isinstance(op.operands[0].type, TensorType):
        return False  # a module's attribute is one object (x.T of a tensor is a new view)
    return any(not immutable(r.type) for r in op.results)

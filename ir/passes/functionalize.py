"""Functionalization: after this pass no tensor op writes into memory, except the deliberate
write-backs of what the caller can observe (`copy_` ops marked `writeback`).

Roots and aliases. Every tensor value shares storage with one or more *roots*: a tensor argument,
a tensor attribute of a module argument reached by a static path, or a tensor an op makes fresh;
the alias analysis (ir/passes/aliasing.py) gives each value the roots it may share storage with
and, where that is certain, its *exact alias*: one root and the chain of view ops from it
(`y[:, 0]` is `y` then `[:, 0]`; views and their steps: ir/passes/views.py).

The rewrite (`_Trial`) walks each function in program order and keeps, for each written root, the
SSA value of its current contents (`cur`). A write through an exact alias (`x.add_(y)`, `x += y`,
`x[i] = v`, `F.relu(x, inplace=True)`, `v.mul_(2)` with `v = y[:, 0]`):

1. computes the written view's new value out of place (`add_` -> `add`, `x[m] = v` ->
   `index_put`, `copy_` and basic-index assignment -> a broadcast, cast copy), in the target's
   dtype (an in-place op keeps it where the functional op promotes) and shape (`expand_as` raises
   where eager's in-place op would), both only where the types do not settle it
   (ir/passes/functionalize_writes.py);
2. carries it back to the root through the inverse of each view (`select_scatter`,
   `slice_scatter`, `diagonal_scatter`, `reshape_as`, the inverse permutation, the transpose
   itself): that is the root's new value;
3. later reads of any alias of that root re-apply their view chain to the new value, at the first
   read after the write (cached per block).

A write in a branch makes the root's new value an if result; a write in a loop makes it a
loop-carried value. Arguments and attributes the function writes are read once at entry; at
`func.return` each gets one write-back, and a returned alias of one is a view of the caller's
tensor itself, as in eager (for an early return, inside its branch). When a written argument or
attribute may share memory with another one the function reads, an entry guard
(`_guards.no_overlap`, runtime/call_inputs.py) sends the call down the eager path.

What is left as it is. Writes into a root the pass cannot follow stay (correct, not functional),
each marked `unfunctionalized` with the reason (also `functionalize_function(...).notes`):

- writes through a value that may be one of several tensors (an if result or loop-carried value
  mixing roots, the result of `reshape`/`contiguous`/`to`, an item of a list or of an opaque
  call's result), into a tensor stored in a list or a module attribute (`py.setattr`), passed to a
  call the compiler does not see into (`module.call`, `func.call`; a `plain_module`-guarded torch
  layer in `READ_ONLY_LAYERS` writes only its own buffers), into an Optional tensor, or into an
  attribute the function also assigns;
- writes through a view without an inverse here: `expand`, `unfold`, `as_strided`, `real`/`imag`,
  `view(dtype)`, `narrow` from a start that is not a constant >= 0, `permute` of non-constant
  dims, items of `split`/`chunk`/`unbind`; index assignment with an index tensor after a slice,
  None or Ellipsis (`x[:, idx] = v`), or a mask of unknown rank followed by more items;
- random in-place ops (`uniform_`, `bernoulli_`, ...), ops that change metadata (`resize_`,
  `unsqueeze_`, `t_`, ...), ops writing other than their first tensor (`out=`, F.batch_norm's
  running statistics);
- a root read, after a write, through a value that may alias it, or returned through one.

Finding such a root can invalidate rewrites already made for it, so each function is rewritten
on a copy, and again with the newly excluded roots until no new reason turns up.

Semantics kept only where eager does not raise: with dtypes unknown at compile time, an in-place
op whose promoted dtype eager cannot cast back (an int tensor `+=` a float tensor) is computed and
cast instead of raising; eager's error on a write whose input partly overlaps the written tensor
is not reproduced; `x[i] = v` with more leading size-1 dims in v than the view has raises
(`expand_as`) where eager drops them. The guard does not cover tensors of modules without a static
path (an element of a loop over a ModuleList) nor the `Any`-typed configuration attributes of
torch layers; it compares address ranges, so interleaved views count as overlapping.
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.core import ops
from ir.core.graph import OPAQUE, Block, BlockArg, Operation, Program, Value
from ir.core.rewrite import clone_op
from ir.core.types import ANY, BOOL, ModuleType, TupleType, tuple_like
from ir.passes.aliasing import (
    ATTR,
    CONTENTS,
    INPUT,
    LOOPS,
    Alias,
    Root,
    analyse,
    entry_path,
    holds_tensors,
    module_like,
    written_operands,
)
from ir.passes.functionalize_slots import (
    add_carried,
    add_result,
    dedupe_slots,
    erase_dead,
    fit_merge_types,
)
from ir.passes.functionalize_writes import (
    ConstantPool,
    Emitter,
    Unsupported,
    describe,
    functional_value,
    index_put_view,
    invert,
)
from ir.core.helpers import NO_OVERLAP
from ir.passes.inline import guard_prefix_end
from ir.passes.views import Step

GUARD_HELPER = NO_OVERLAP.name  # runtime/call_inputs.py


class _Trial:
    """One rewrite of one function, with the roots in `excluded` left alone. Collects the
    reasons it finds for leaving more roots alone in `found`."""

    def __init__(self, func: ops.FuncOp, excluded: dict[tuple, str]) -> None:
        self.func = func
        self.a = analyse(func)
        self.roots = self.a.roots
        self.excluded = dict(excluded)
        self.found: dict[tuple, str] = {}
        self.exact: dict[Value, Alias] = {}  # of values this pass makes
        self.may: dict[Value, frozenset[tuple]] = {}
        self.captured: dict[Value, dict[tuple, Value | None]] = {}  # root -> its value at definition
        self.cur: dict[tuple, Value] = {}
        self.storage: dict[tuple, Value] = {}
        self.cache: list[dict] = [{}]  # (root, chain, root's value) -> that view, per block
        self.erased_inputs: list[Value] = []
        self.added_slots: list[tuple[Operation, int]] = []
        self.pushed: set[Value] = set()
        self.rebuilt: dict[tuple[Operation, Value], Value] = {}  # returned tuples remade with returned views
        self.returned: set[tuple[Operation, int]] = set()
        self.pool = ConstantPool(func)
        self.opaque_reach: frozenset[tuple] = frozenset()  # what calls the compiler does not see into reach

    def emitter(self, at: Operation) -> Emitter:
        return Emitter(at, pool=self.pool)

    # -- driver ---------------------------------------------------------------------------------
    def run(self) -> None:
        self._exclude_statically()
        self.tracked = self._tracked()
        self.loop_writes = self._loop_writes()
        self._find_returned()
        self._enter()
        self.block(self.func.body)
        dedupe_slots(self.added_slots)
        fit_merge_types(self.func)
        erase_dead(self.erased_inputs)

    def _tracked(self) -> list[tuple]:
        """Roots written through an exact alias and not left alone, in program order."""
        out: list[tuple] = []
        for op in self.a.order:
            for i in written_operands(op):
                alias = self.a.exact_of(op.operands[i])
                if alias is not None and alias.root not in self.excluded and alias.root not in out:
                    out.append(alias.root)
        return out

    def _exclude(self, key: tuple, reason: str, written: set[tuple]) -> None:
        if key in written and key not in self.excluded:
            self.excluded[key] = reason

    def _exclude_statically(self) -> None:
        """Roots whose writes cannot be made functional, whatever the order of ops."""
        written = {k for op in self.a.order for i in written_operands(op) for k in self.a.may_of(op.operands[i])}
        for op in self.a.order:
            at = _at(op)
            for i in written_operands(op):
                target = op.operands[i]
                alias = self.a.exact_of(target)
                if alias is None:
                    for k in sorted(self.a.may_of(target), key=repr):
                        self._exclude(k, f"{self.roots[k].label} is written{at} through a value that may be one of "
                                         "several tensors", written)
                    continue
                root = self.roots[alias.root]
                if not root.trackable:
                    self._exclude(root.key, f"{root.label} ({root.kind}, {root.type}) is written{at}", written)
                for step in _written_chain(op, alias):
                    if not step.kind:
                        self._exclude(root.key, f"{root.label} is written{at} through {step.label}, which has no "
                                                "inverse", written)
            if op.has_trait(OPAQUE) and not isinstance(op, (ops.GuardOp, ops.SetAttrOp)):
                self.opaque_reach |= self.a.reachable(op)
                for k in sorted(self.a.reachable(op), key=repr):
                    self._exclude(k, f"{self.roots[k].label} is passed to `{describe(op)}`{at}, which may read or "
                                     "write it", written)
            if isinstance(op, ops.SetAttrOp):  # the value escapes into the module
                for k in sorted(self.a.may_of(op.operands[1]), key=repr):
                    self._exclude(k, f"{self.roots[k].label} is stored in `{describe(op)}`{at}", written)
        for loop in self.a.order:
            if isinstance(loop, ops.WhileOp):
                # Its new value would leave the condition region through scf.condition, which the
                # Python emitter expects to pass the region's own arguments on unchanged.
                for op in loop.before.ops:
                    for inner in op.walk():
                        for i in written_operands(inner):
                            alias = self.a.exact_of(inner.operands[i])
                            if alias is not None:
                                self._exclude(alias.root, f"{self.roots[alias.root].label} is written in the "
                                                          f"condition of a while loop{_at(inner)}", written)
        settled = self._settled_before_listed()
        for k in sorted(self.a.list_roots - settled, key=repr):
            self._exclude(k, f"{self.roots[k].label} is stored in a list", written)

    def _settled_before_listed(self) -> set[tuple]:
        """Roots stored in lists only by ops of the function's own block (not in a loop), after
        every write to them (`torch.cat([F.relu(a, inplace=True), b])`): a list then holds
        their final value, which the rewrite passes it."""
        stores: dict[tuple, list[Operation]] = {}
        writes: dict[tuple, list[int]] = {}
        for op in self.a.order:
            if isinstance(op, (ops.ListOp, ops.ListAppendOp, ops.ListExtendOp, ops.ListSetItemOp, ops.ListInsertOp, ops.DictOp,
                               ops.DictSetItemOp)):
                held = op.operands if isinstance(op, (ops.ListOp, ops.DictOp)) else op.operands[1:]
                for k in self.a._union(held):
                    stores.setdefault(k, []).append(op)
            for i in written_operands(op):
                for k in self.a.may_of(op.operands[i]):
                    writes.setdefault(k, []).append(self.a.position[op])
        top = self.a.func.regions[0].block
        return {k for k, listed in stores.items()
                if all(op.parent is top for op in listed)
                and all(w < min(self.a.position[op] for op in listed) for w in writes.get(k, []))}

    def _loop_writes(self) -> dict[Operation, list[tuple]]:
        out: dict[Operation, list[tuple]] = {}
        for loop in self.a.order:
            if isinstance(loop, LOOPS):
                keys = []
                for op in list(loop.walk())[1:]:
                    for i in written_operands(op):
                        alias = self.a.exact_of(op.operands[i])
                        if alias is not None and alias.root in self.tracked and alias.root not in keys:
                            keys.append(alias.root)
                out[loop] = keys
        return out

    def _find_returned(self) -> None:
        """Operand positions whose value is what the function returns: the return's, and, for a
        returned if result (an early return) or a returned tuple holding one, the yields."""
        term = self.func.body.terminator
        work = [(term, i) for i in range(len(term.operands))] if term is not None else []
        while work:
            op, i = work.pop()
            self.returned.add((op, i))
            self._returned_value(op.operands[i], work)

    def _returned_value(self, v: Value, work: list) -> None:
        owner = v.owner
        if isinstance(owner, ops.TupleOp) and len(v.uses) == 1:
            for e in owner.operands:
                self._returned_value(e, work)
        elif isinstance(owner, ops.IfOp) and len(v.uses) == 1 and holds_tensors(v.type):
            self.pushed.add(v)
            for block in (owner.then_block, owner.else_block):
                work.append((block.terminator, v.index))  # type: ignore[attr-defined]

    # -- entry: reads of what the caller passes, and the overlap guard ---------------------------
    def _enter(self) -> None:
        body = self.func.body
        em = Emitter(body.ops[guard_prefix_end(self.func)], self.func.loc, self.pool)
        cache: dict[tuple, Value] = {}
        for key in self.tracked:
            root = self.roots[key]
            if root.observable:
                self.storage[key] = self._read_at_entry(root, em, cache)
                self.cur[key] = self.storage[key]
        written = [k for k in self.tracked if self.roots[k].observable]
        if written:
            others = [k for k, r in self.roots.items() if r.kind in (INPUT, ATTR, CONTENTS) and k not in written
                      and self._used(r)]
            self._guard(em, written, others, cache)
        for arg in self.func.args:
            self._define_value(arg, storage=True)

    def _read_at_entry(self, root: Root, em: Emitter, cache: dict[tuple, Value]) -> Value:
        """The root's tensor as the caller passed it: the argument, or a fresh read of the same
        attributes and items at entry (where the original read may sit in a branch)."""
        arg = self.func.args[root.key[1]]
        value: Value = arg
        for n, (part, t) in enumerate(root.entry):
            key = (root.key[1], *(p for p, _ in root.entry[:n + 1]))
            if key not in cache:
                if part[0] == "attr":
                    op = ops.GetAttrOp([value], [t], {"attr": part[1]}, result_names=[None])
                else:
                    op = ops.GetItemOp([value, em.const(part[1])], [t])
                cache[key] = em.add(op).result
            value = cache[key]
        if root.entry:
            value.name = root.name.rsplit(".", 1)[-1].split("[")[0] if root.kind == ATTR else value.name
            self._register(value, Alias(root.key), {root.key: value})
        return value

    def _used(self, root: Root) -> bool:
        """Whether the function reads this tensor the caller passes (an attribute of unknown type
        of a standard torch layer is its configuration, as the layer lowering reads it: not a
        tensor)."""
        if root.value is None:
            return False
        if root.kind == ATTR and root.type == ANY:
            module = root.entry[-2][1] if len(root.entry) > 1 else self.func.args[root.key[1]].type
            return not (isinstance(module, ModuleType) and module.qualname.startswith("torch.nn."))
        return bool(root.value.uses) if isinstance(root.value, BlockArg) else True

    def _guard(self, em: Emitter, written: list[tuple], others: list[tuple], cache: dict[tuple, Value]) -> None:
        def values(keys: list[tuple]) -> Value:
            vs = []
            for k in keys:
                v = self.storage.get(k) or self._read_at_entry(self.roots[k], em, cache)
                if k not in self.opaque_reach:
                    self.storage[k] = v  # later reads read this one (nothing can re-bind it)
                vs.append(v)
            return em.add(ops.TupleOp(vs, [TupleType(tuple(v.type for v in vs))])).result

        if len(written) < 2 and not others:
            return
        call = em.add(ops.BuiltinCallOp([values(written), values(others)], [BOOL], {"callee": GUARD_HELPER}))
        names = ", ".join(f"{self.roots[k].label}" for k in written)
        reason = f"{names} (written) may share memory with another tensor argument or attribute"
        em.add(ops.GuardOp([call.result], [], {"reason": reason}))

    # -- the walk -------------------------------------------------------------------------------
    def block(self, block: Block) -> None:
        for op in list(block.ops):
            self.visit(op)

    def visit(self, op: Operation) -> None:
        if isinstance(op, ops.IfOp):
            self.if_op(op)
        elif isinstance(op, LOOPS):
            self.loop(op)
        elif isinstance(op, (ops.ReturnOp, ops.YieldOp, ops.ConditionOp)):
            self.terminator(op)
        elif written_operands(op):
            self.write(op)
        else:
            self.uses(op)
            self.define(op)

    # -- values -----------------------------------------------------------------------------------
    def exact_of(self, v: Value) -> Alias | None:
        return self.exact.get(v) or self.a.exact_of(v)

    def may_of(self, v: Value) -> frozenset[tuple]:
        return self.may.get(v) or self.a.may_of(v)

    def _register(self, v: Value, alias: Alias, captured: dict[tuple, Value | None]) -> None:
        self.exact[v] = alias
        self.may[v] = frozenset({alias.root})
        self.captured[v] = captured

    def uses(self, op: Operation) -> None:
        for i, v in enumerate(list(op.operands)):
            new = self.current(v, op)
            if new is not v:
                op.set_operand(i, new)

    def current(self, v: Value, at: Operation) -> Value:
        """`v` as a value holding what it holds now: an exact alias of a written root is its view
        chain applied to the root's current value."""
        alias = self.exact_of(v)
        if alias is not None and alias.root in self.cur and self._stale(v, alias.root):
            return self.materialize(alias.root, alias.chain, self.emitter(at))
        for k in sorted(self.may_of(v), key=repr):
            if k in self.cur and self._stale(v, k) and not (v in self.pushed and self.roots[k].observable):
                self._problem(k, f"{self.roots[k].label} is read{_at(at)} through a value that may alias it, "
                                 "after a write")
        return v

    def _stale(self, v: Value, key: tuple) -> bool:
        return self.captured.get(v, {}).get(key, self.cur.get(key)) is not self.cur.get(key)

    def materialize(self, key: tuple, chain: tuple[Step, ...], em: Emitter) -> Value:
        """The current value of root `key` seen through `chain`, re-using views made earlier in
        this block (or an enclosing one) since the root's last write."""
        return self._view_of(key, chain, self.cur[key], em)

    def from_storage(self, key: tuple, chain: tuple[Step, ...], em: Emitter) -> Value:
        """The root's own tensor (as the caller passed it) seen through `chain`: what a returned
        alias of an input or attribute is."""
        return self._view_of(key, chain, self.storage[key], em)

    def _view_of(self, key: tuple, chain: tuple[Step, ...], root_value: Value, em: Emitter) -> Value:
        if not chain:
            return root_value
        for scope in reversed(self.cache):
            hit = scope.get((key, chain, root_value))
            if hit is not None:
                return hit
        base = self._view_of(key, chain[:-1], root_value, em)
        value = em.add(chain[-1].view(base, chain[-1].hint)).result
        self._register(value, Alias(key, chain), {key: root_value})
        self.cache[-1][(key, chain, root_value)] = value
        return value

    def define(self, op: Operation) -> None:
        extracts = isinstance(op, (ops.GetItemOp, ops.UnpackOp))
        for r in op.results:
            if isinstance(op, ops.GetAttrOp) and module_like(op.operands[0].type) or \
                    extracts and entry_path(r, self.func) is not None:
                alias = self.exact_of(r)
                if alias is not None and alias.root in self.storage and r.uses:
                    r.replace_all_uses_with(self.storage[alias.root])  # read once, at entry
                    self.erased_inputs.append(r)
                    continue
                self._define_value(r, storage=True)  # the caller's tensor
            else:
                self._define_value(r, source=op.operands[0] if extracts else None)

    def _define_value(self, v: Value, storage: bool = False, source: Value | None = None) -> None:
        """Note which version of each written root `v` holds: the caller's tensor for reads of
        arguments and attributes, the container's for items, else the current one."""
        keys = [k for k in self.may_of(v) if k in self.tracked]
        if not keys:
            return
        if storage:
            self.captured[v] = {k: self.storage.get(k) for k in keys}
        elif source is not None and source in self.captured:
            self.captured[v] = {k: self.captured[source].get(k) for k in keys}
        else:
            self.captured[v] = {k: self.cur.get(k) for k in keys}
        alias = self.exact_of(v)
        if alias is None:
            return
        if not alias.chain and self.roots[alias.root].value is v and alias.root in self.tracked \
                and not self.roots[alias.root].observable:
            self.cur[alias.root] = v  # a fresh tensor: its own first version
            self.captured[v] = {alias.root: v}
        elif alias.chain and alias.root in self.cur and not self._stale(v, alias.root):
            self.cache[-1][(alias.root, alias.chain, self.cur[alias.root])] = v  # a view to re-use

    def _problem(self, key: tuple, reason: str) -> None:
        if key not in self.excluded:
            self.excluded[key] = reason
            self.found[key] = reason

    def _leave(self, op: Operation, reason: str) -> None:
        self.uses(op)
        op.attributes["unfunctionalized"] = reason
        self.define(op)

    # -- writes ---------------------------------------------------------------------------------
    def write(self, op: Operation) -> None:
        written = written_operands(op)
        target = op.operands[written[0]]
        alias = self.exact_of(target)
        if alias is None:
            self._leave(op, self._uncertain_target(target))
            return
        if alias.root not in self.tracked:
            self._leave(op, self.excluded.get(alias.root, "writes a tensor the compiler cannot name"))
            return
        try:
            if len(written) != 1:
                raise Unsupported(f"`{describe(op)}` writes into several tensors")
            self.uses(op)
            em = self.emitter(op)
            done = functional_value(op, alias, self, em)
            if done is not None:
                if op.results and op.results[0].name:
                    done[1].name = op.results[0].name  # `t = x.add_(1)`: the new value is t
                self.commit(alias.root, *done, em)
        except Unsupported as e:
            self._problem(alias.root, f"{self.roots[alias.root].label} is written{_at(op)}: {e}")
            self._leave(op, str(e))
            return
        if done is not None:
            for r in op.results:  # an in-place op returns its target, which now holds the new value
                r.replace_all_uses_with(done[1])
        self.erased_inputs += list(op.operands)
        op.erase()

    def _uncertain_target(self, target: Value) -> str:
        read = target
        while isinstance(read.owner, ops.RefineOp):
            read = read.owner.operands[0]
        attr = read.owner.attributes.get("attr") if isinstance(read.owner, ops.GetAttrOp) else None
        if attr in self.a.assigned:
            return f"writes attribute `{attr}`, which the function also assigns{_at(self.a.assigned[attr])}"
        names = ", ".join(self.roots[k].label for k in sorted(self.may_of(target), key=repr))
        return f"writes through a value that may be one of several tensors ({names})"

    def commit(self, key: tuple, chain: tuple[Step, ...], new: Value, em: Emitter) -> None:
        """Carry the written view's new value back to the root through each step's inverse."""
        bases = [self.materialize(key, chain[:i], em) for i in range(len(chain))]
        value = new
        for step, base in zip(reversed(chain), reversed(bases)):
            value = invert(step, em, base, value)
        self.cur[key] = value
        self._register(value, Alias(key), {key: value})
        self._register(new, Alias(key, chain), {key: value})
        if chain:
            self.cache[-1][(key, chain, value)] = new

    # -- control flow ---------------------------------------------------------------------------
    def scoped(self, block: Block, cur: dict[tuple, Value]) -> dict[tuple, Value]:
        """Walk `block` starting from `cur`; the roots' values at its end."""
        saved = self.cur
        self.cur = dict(cur)
        self.cache.append({})
        loop = block.parent.parent if block.parent is not None else None
        for arg in block.args:
            element = isinstance(loop, ops.ForEachOp) and arg.index == 0
            self._define_value(arg, source=loop.operands[0] if element else None)  # type: ignore[union-attr]
        self.block(block)
        self.cache.pop()
        out, self.cur = self.cur, saved
        return out

    def if_op(self, op: ops.IfOp) -> None:
        self.uses(op)
        ends = [self.scoped(b, self.cur) for b in (op.then_block, op.else_block)]
        for key in list(self.cur):
            values = [end[key] for end in ends]
            if values[0] is values[1]:
                self.cur[key] = values[0]
                continue
            for block, v in zip((op.then_block, op.else_block), values):
                block.terminator._add_operand(v)  # type: ignore[union-attr]
            self.cur[key] = add_result(op, self.roots[key])
            self._register(self.cur[key], Alias(key), {key: self.cur[key]})
            self.added_slots.append((op, len(op.results) - 1))
        self.define(op)

    def loop(self, op: Operation) -> None:
        self.uses(op)
        keys = [k for k in self.loop_writes[op] if k in self.cur]
        slots = [add_carried(op, self.cur[k], self.roots[k]) for k in keys]
        for k, slot in zip(keys, slots):
            for v in slot:
                self._register(v, Alias(k), {k: v})
        for j in range(len(keys)):
            self.added_slots.append((op, len(op.results) - len(keys) + j))
        if isinstance(op, ops.WhileOp):
            before = self.scoped(op.before, {**self.cur, **{k: s[0] for k, s in zip(keys, slots)}})
            for k in keys:
                op.before.terminator._add_operand(before[k])  # type: ignore[union-attr]
            after = self.scoped(op.after, {**self.cur, **{k: s[1] for k, s in zip(keys, slots)}})
            for k in keys:
                op.after.terminator._add_operand(after[k])  # type: ignore[union-attr]
        else:
            body = op.regions[0].block
            end = self.scoped(body, {**self.cur, **{k: s[0] for k, s in zip(keys, slots)}})
            for k in keys:
                body.terminator._add_operand(end[k])  # type: ignore[union-attr]
        for k, s in zip(keys, slots):
            self.cur[k] = s[-1]
        self.define(op)

    def terminator(self, op: Operation) -> None:
        if isinstance(op, ops.ReturnOp):
            self.write_back(op)
        for i, v in enumerate(list(op.operands)):
            new = self.returned_value(v, op) if (op, i) in self.returned else self.current(v, op)
            if new is not v:
                op.set_operand(i, new)

    # -- what the caller sees -------------------------------------------------------------------
    def write_back(self, ret: Operation) -> None:
        """One `copy_` into each written tensor the caller can see."""
        em = self.emitter(ret)
        for key in self.tracked:
            if self.roots[key].observable and self.cur.get(key) is not self.storage[key]:
                em.method("copy_", [self.storage[key], self.cur[key]], t=self.storage[key].type, writeback=True)

    def returned_value(self, v: Value, at: Operation) -> Value:
        """A returned value: an alias of a written input or attribute is a view of the caller's
        tensor itself (which the write-back updates), as eager returns the same object."""
        alias = self.exact_of(v)
        em = self.emitter(at)
        if alias is not None and alias.root in self.tracked:
            if self.roots[alias.root].observable:
                return self.from_storage(alias.root, alias.chain, em)
            return self.current(v, at)
        owner = v.owner
        if isinstance(owner, ops.TupleOp) and v not in self.pushed:
            if (at, v) in self.rebuilt:  # (one object, returned twice: `return out, out`)
                return self.rebuilt[at, v]
            items = [self.returned_value(e, at) for e in owner.operands]
            if all(a is b for a, b in zip(items, owner.operands)):
                return v
            new = em.add(ops.TupleOp(items, [tuple_like(v.type, tuple(i.type for i in items))], dict(owner.attributes),
                                     result_names=[v.name])).result
            self.erased_inputs.append(v)
            self.rebuilt[at, v] = new
            return new
        if v not in self.pushed:
            for k in sorted(self.may_of(v), key=repr):
                if k in self.cur and self.roots[k].observable:
                    self._problem(k, f"{self.roots[k].label} may be returned{_at(at)} through a value that may "
                                     "be one of several tensors")
        return self.current(v, at)


def _written_chain(op: Operation, alias: Alias) -> tuple[Step, ...]:
    """The view chain of what `op` writes: its target's, and for `x[i] = v` the basic part of
    the indexing."""
    if isinstance(op, ops.IndexPutOp):
        step = index_put_view(op)
        if step is not None:
            return alias.chain + (step,)
    return alias.chain


def _at(op: Operation) -> str:
    return f" at {op.loc}" if op.loc is not None else ""


# -- the pass --------------------------------------------------------------------------------------
@dataclass
class Functionalized:
    func: ops.FuncOp
    notes: list[str]  # "<loc>: <why>" for each write left as it is


def functionalize_function(func: ops.FuncOp) -> Functionalized:
    """A functional copy of `func` (see the module docstring), and why writes were left alone."""
    excluded: dict[tuple, str] = {}
    while True:
        trial = _Trial(clone_op(func, {}), excluded)  # type: ignore[arg-type]
        trial.run()
        if not trial.found:
            notes = [f"{op.loc}: " * (op.loc is not None) + op.attributes["unfunctionalized"]
                     for op in trial.func.walk() if "unfunctionalized" in op.attributes]
            return Functionalized(trial.func, notes)
        excluded.update(trial.found)


def functionalize(program: Program) -> None:
    for i, func in enumerate(program.funcs):
        if isinstance(func, ops.FuncOp):
            program.funcs[i] = functionalize_function(func).func

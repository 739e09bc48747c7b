"""Lowering of loops and list comprehensions: `LoopLowering`, a mixin of FunctionLowerer.

Names assigned in a loop body that existed before it become loop-carried values; where the body
changes a carried name's type the body is lowered again with the wider type (`build_loop`). A loop
that may `break` or `return` ends its body in `scf.condition(keep_going, ...)`; a `while` loop
with exits carries a `done` flag checked before its condition. Loops over a tuple or a module list
of mixed classes (and small `range(<constant>)` comprehensions) are unrolled."""

from __future__ import annotations

from typing import Callable, Iterator

import libcst as cst

from ir.core import ops
from ir.core.graph import Block, Region, Value
from ir.core.types import (
    ANY,
    BOOL,
    ERROR,
    INT,
    TENSOR,
    ListType,
    ModuleListType,
    ModuleType,
    TensorType,
    TupleType,
    Type,
    unify,
    unify_all,
)
from transpiler.diagnostics import UserError
from transpiler.env import Exits, Unbound
from transpiler.expr_messages import a_type
from transpiler.lower_builtins import UNROLL_LIMIT
from transpiler.syntax import assigned_names, assignment_of, contains, statements_of


class LoopLowering:
    """Mixin of FunctionLowerer: `for` and `while` loops, list comprehensions."""

    def loop_stmt(self, node: cst.For | cst.While) -> Exits:
        if node.orelse is not None:
            raise self.error(node.orelse, "`else` on a loop is not supported", "use a flag variable")
        if isinstance(node, cst.For):
            return self.for_stmt(node)
        return self.while_stmt(node)

    def carried_names(self, node: cst.For | cst.While) -> list[str]:
        assigned = assigned_names(statements_of(node.body))
        return [n for n in self.env.names() if n in assigned and isinstance(self.env.get(n), Value)]

    def for_stmt(self, node: cst.For) -> Exits:
        with self.at(node.iter):
            zipped = self.zip_with_lists(node.iter)
        if zipped is not None:
            return self.unrolled_zip(node, *zipped)
        with self.at(node.iter):
            loop, head, elem = self.iteration(node.iter, lambda: leaves_loop(statements_of(node.body)))
        if loop is None:
            return self.unrolled_loop(node, head[0])
        indices = self.unrolled_range(node, head) if loop is ops.ForRangeOp else None
        if indices is not None:
            return self.unrolled_loop(node, indices)
        return self.build_loop(node, loop, head, elem)

    def unrolled_range(self, node: cst.For, head: list[Value]) -> Value | None:
        """`for i in range(<constants>):` whose body picks a module by the index (script(instance,
        ...)), `layers[i]` of a module list of known length or `getattr(self, f"block{i}")`: the
        tuple of the indices, to unroll the loop over, so that each layer's call is one the
        inliner can follow (as a loop over the list itself)."""
        bounds = [self.known_bound(v) for v in head]
        if not self.ctx.recursive or not isinstance(node.target, cst.Name) or any(type(b) is not int for b in bounds) \
                or bounds[2] == 0 or leaves_loop(statements_of(node.body)):
            return None
        indices = range(*bounds)  # type: ignore[arg-type]
        if len(indices) > UNROLL_LIMIT or not self.picks_module_by(node.body, node.target.value):
            return None
        consts = [self.b.constant(i) for i in indices]
        return self.op(ops.TupleOp, consts, [TupleType((INT,) * len(consts))]).result

    def known_bound(self, value: Value) -> int | None:
        """A bound of range() known whatever the call: `_known_int`'s, or an int attribute of a
        module that the entry checks pin (`range(self.blocks)`)."""
        bound = _known_int(value)
        op = value.owner
        if bound is None and isinstance(op, ops.GetAttrOp) and "after" not in op.attributes \
                and isinstance(op.operands[0].type, ModuleType):
            info = self.ctx.class_named(op.operands[0].type.qualname)
            found = info.attrs.get(op.attributes["attr"]) if info is not None else None
            if found is not None and found.has_value and type(found.value) is int:
                bound = found.value
        return bound

    def picks_module_by(self, body: cst.BaseSuite, name: str) -> bool:
        """Whether `body` subscripts a module list of known length (a name or attribute chain
        that names one) by `name`, or reads a module's attribute with getattr() by a name built
        from `name`."""
        found = False
        lowerer = self

        class Subscripts(cst.CSTVisitor):
            def visit_Call(self, call: cst.Call) -> None:
                nonlocal found
                if found or not isinstance(call.func, cst.Name) or call.func.value not in ("getattr", "hasattr") \
                        or len(call.args) < 2 or not isinstance(call.args[0].value, cst.Name):
                    return
                owner = lowerer.env.get(call.args[0].value.value)
                found = isinstance(owner, Value) and isinstance(owner.type, ModuleType) \
                    and _mentions(call.args[1].value, name)

            def visit_Subscript(self, sub: cst.Subscript) -> None:
                nonlocal found
                index = sub.slice[0].slice if len(sub.slice) == 1 else None
                chain = sub.value
                while isinstance(chain, cst.Attribute):
                    chain = chain.value
                if found or not isinstance(index, cst.Index) or not isinstance(index.value, cst.Name) \
                        or index.value.value != name or not isinstance(chain, cst.Name) \
                        or not isinstance(lowerer.env.get(chain.value), Value):
                    return
                t = lowerer.expr(sub.value).type  # (a read of names and attributes: nothing runs)
                found = isinstance(t, ModuleListType) and t.length_known

        body.visit(Subscripts())
        return found

    def iteration(self, it: cst.BaseExpression, jumps: Callable[[], bool]
                  ) -> tuple[type[ops.Operation] | None, list[Value], Type | None]:
        """How a for loop (or a comprehension) walks `it`: the loop op, its head operands and the
        element type; or (None, [seq], None) to run the body once per element of seq, a tuple or
        module list. `jumps`: whether the body may leave early (such a loop is not unrolled)."""
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.range" and self.env.get("range") is None:
            args, kwnames, _, _ = self.call_arguments(it)
            bad = [(a, arg) for a, arg in zip(args, it.args) if a.type not in (INT, BOOL, ERROR)]
            if bad:  # (strict mode checks the body all the same)
                self.go_on(self.error(bad[0][1], f"range() takes ints, not {a_type(bad[0][0].type)}",
                                      "convert it with int(...), or loop over an int count"), bad[0][1])
            if kwnames or not 1 <= len(args) <= 3:
                raise self.error(it, "range() takes one to three int arguments")
            start, stop, step = (
                (self.b.constant(0), args[0], self.b.constant(1)) if len(args) == 1
                else (args[0], args[1], self.b.constant(1)) if len(args) == 2 else tuple(args)
            )
            return ops.ForRangeOp, [start, stop, step], INT
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.enumerate" \
                and self.env.get("enumerate") is None and len(it.args) == 1 and not it.args[0].keyword \
                and not it.args[0].star:
            inner = it.args[0].value
            zipped = self.zip_arguments(inner)  # enumerate(zip(a, b)): over the zipped tuple
            seq = zipped if zipped is not None else None if self._builtin_call(inner, "zip") else self.expr(inner)
            pairs = self.enumerated(seq) if seq is not None else None
            if pairs is not None:  # a module list or tuple: its (index, item) pairs, unrolled
                return None, [pairs], None
        tuples = self.zip_arguments(it)
        if tuples is not None:  # module lists or tuples: their items side by side, unrolled
            return None, [tuples], None
        walked = self.walked_module_lists(it)
        if walked is not None:
            return ops.ForEachOp, [walked], walked.type.elem  # type: ignore[attr-defined]
        iterable = self.expr(it)
        layers = self.iterated_modules(iterable)
        if layers is not None:
            iterable = layers
        t = iterable.type
        if isinstance(t, ListType):
            return ops.ForEachOp, [iterable], t.elem
        if isinstance(t, ModuleListType) and t.length_known and self.ctx.recursive and len(t.elems) <= UNROLL_LIMIT \
                and not jumps():
            # Unrolled, as TorchScript does: each layer's call is then one the inliner can follow.
            return None, [iterable], None
        if isinstance(t, ModuleListType) and (not t.length_known or len(set(t.elems)) <= 1):
            return ops.ForEachOp, [iterable], unify_all(t.elems) or ModuleType("torch.nn.Module")
        if isinstance(t, (TupleType, ModuleListType)):
            return None, [iterable], None
        if isinstance(t, TensorType):
            name = self.source.code(it) if isinstance(it, (cst.Name, cst.Attribute)) else "t"
            self.go_on(self.error(it, "iterating over a tensor is not supported",
                                  f"loop over range({name}.size(0)) and index {name}[i], or over {name}.unbind(0)"), it)
        elif t != ERROR:
            self.go_on(self.error(it, f"iterating over a value of type {t} is not supported"), it)
        return ops.ForEachOp, [iterable], ERROR  # (its body checked all the same)

    def _builtin_call(self, it: cst.BaseExpression, name: str) -> bool:
        """Whether `it` calls Python's builtin `name` with plain positional arguments."""
        return isinstance(it, cst.Call) and self.source.global_name(it.func) == f"builtins.{name}" \
            and self.env.get(name) is None and bool(it.args) and all(not a.keyword and not a.star for a in it.args)

    def walked_module_lists(self, it: cst.BaseExpression) -> Value | None:
        """`enumerate(layers)`, `zip(a, b)` or `enumerate(zip(a, b))` of module lists whose length
        is not known (ahead of time: built by `append` in `__init__`): the one pass Python makes
        over them, typed as the list of the tuples it yields, for a loop to walk. None for
        anything else (a list of tensors too: its items would alias the list's)."""
        if self._builtin_call(it, "enumerate") and len(it.args) == 1:  # type: ignore[attr-defined]
            inner = it.args[0].value  # type: ignore[attr-defined]
            seq = self.walked_module_lists(inner) if self._builtin_call(inner, "zip") else self.expr(inner)
            if seq is None:
                return None
            elem = seq.type.elem if isinstance(seq.type, ListType) else _layer_type(seq.type)
            if elem is None:
                return None
            pairs = ListType(TupleType((INT, elem)))
            return self.op(ops.BuiltinCallOp, [seq], [pairs], callee="enumerate").result
        if self._builtin_call(it, "zip"):
            seqs = [self.expr(a.value) for a in it.args]  # type: ignore[attr-defined]
            elems = [_layer_type(s.type) for s in seqs]
            if any(e is None for e in elems):
                return None
            return self.op(ops.BuiltinCallOp, seqs, [ListType(TupleType(tuple(elems)))], callee="zip").result  # type: ignore[arg-type]
        return None

    def zip_arguments(self, it: cst.BaseExpression) -> Value | None:
        """`zip(a, b, ...)` of tuples and module lists of known length: the tuple of their items
        side by side (`zipped`); None where `it` is no such call."""
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.zip" \
                and self.env.get("zip") is None and it.args and all(not a.keyword and not a.star for a in it.args):
            return self.zipped([self.expr(a.value) for a in it.args])
        return None

    def zip_with_lists(self, it: cst.BaseExpression) -> tuple[list[Value], bool] | None:
        """`zip(heads, features)` (or `enumerate` of it) where tuples or module lists of known
        length bound the number of items and lists, whose length is known only when running,
        take part: the zipped values, and whether enumerated. None for anything else."""
        enumerated = self._builtin_call(it, "enumerate") and len(it.args) == 1  # type: ignore[attr-defined]
        inner = it.args[0].value if enumerated else it  # type: ignore[attr-defined]
        if not self._builtin_call(inner, "zip"):
            return None
        mark = self.mark()
        seqs = [self.expr(a.value) for a in inner.args]  # type: ignore[attr-defined]
        fixed = [_fixed_length(s.type) for s in seqs]
        if all(n is None for n in fixed) or all(n is not None for n in fixed) \
                or any(n is None and not isinstance(s.type, ListType) for n, s in zip(fixed, seqs)) \
                or min(n for n in fixed if n is not None) > UNROLL_LIMIT:
            self.rollback(mark)
            return None
        return seqs, enumerated

    def unrolled_zip(self, node: cst.For, seqs: list[Value], enumerated: bool) -> Exits:
        """A loop over `zip_with_lists`, unrolled (`zip_items`)."""
        if leaves_loop(statements_of(node.body)):
            raise self.error(node, "break and return in a loop over a tuple or a module list are not supported",
                             "loop over a list of one type instead")
        for cond, item in self.zip_items(seqs, enumerated, node.iter):
            def element(item: Callable[[], Value] = item) -> Exits:
                self.bind_target(node.target, item())
                self.loop_depth += 1
                try:
                    return self.stmts(statements_of(node.body))
                finally:
                    self.loop_depth -= 1

            with self.at(node):
                exits = self.branch(cond, element, Exits)
            assert exits.returned is False and exits.broke is False
        return Exits()

    def zip_items(self, seqs: list[Value], enumerated: bool, at: cst.CSTNode
                  ) -> Iterator[tuple[Value, Callable[[], Value]]]:
        """The items of `zip_with_lists`, one per item of the shortest fixed-length sequence: the
        condition that every list has one there (`len(features) > i`, read before each, as
        Python's list iterator reads it, so a shorter list ends the loop as in Python), and what
        reads the item, for the side of the branch it holds on."""
        count = min(n for n in map(_fixed_length, (s.type for s in seqs)) if n is not None)
        for i in range(count):
            with self.at(at):
                index = self.b.constant(i)
                lists = [s for s in seqs if isinstance(s.type, ListType)]
                cond = self.has_item(lists[0], index)
                for more in lists[1:]:
                    cond = self.short_circuit("and", cond, lambda more=more: self.has_item(more, index), at)

            def item(i: int = i, index: Value = index) -> Value:
                with self.at(at):
                    items = [self.op(ops.GetItemOp, [s, index], [s.type.elem if isinstance(s.type, ListType)
                                                                  else s.type.elems[i]]).result  # type: ignore[attr-defined]
                             for s in seqs]
                    elem = self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result
                    if enumerated:
                        elem = self.op(ops.TupleOp, [index, elem], [TupleType((INT, elem.type))]).result
                return elem

            yield cond, item

    def has_item(self, seq: Value, index: Value) -> Value:
        length = self.op(ops.BuiltinCallOp, [seq], [INT], callee="len").result
        return self.op(ops.CompareOp, [length, index], [BOOL], op=">").result

    def unrolled_loop(self, node: cst.For, iterable: Value) -> Exits:
        """A loop over a tuple or a mixed module list runs its body once per element; a
        `continue` ends the element's run (what follows it in the body is lowered under the
        other side of its `if`, or under a flag)."""
        if leaves_loop(statements_of(node.body)):
            raise self.error(node, "break and return in a loop over a tuple or a mixed module list are not supported",
                             "loop over a list of one type instead")
        t = iterable.type
        count = len(t.elems)  # type: ignore[attr-defined]
        display = iterable.owner if isinstance(iterable.owner, ops.TupleOp) else None
        for i in range(count):
            with self.at(node.iter):
                if display is not None:  # (a tuple built here: its element itself)
                    elem = display.operands[i]
                else:
                    index = self.b.constant(i)
                    elem = self.op(ops.GetItemOp, [iterable, index], [t.elems[i]]).result  # type: ignore[attr-defined]
            self.bind_target(node.target, elem)
            self.loop_depth += 1
            try:
                exits = self.stmts(statements_of(node.body))
            finally:
                self.loop_depth -= 1
            assert exits.returned is False and exits.broke is False  # (a `continue`: the next element)
        return Exits()

    def build_loop(self, node: cst.For | cst.While, op_class: type[ops.Operation], head: list[Value], elem_type: Type | None) -> Exits:
        """Build a loop op; lowering the body twice when its carried types must widen."""
        carried = self.carried_names(node)
        body_stmts = statements_of(node.body)
        returns = contains(body_stmts, cst.Return)
        breaks = contains(body_stmts, cst.Break, stop_at_loops=True)
        before = self.env
        inits = [before.get(n) for n in carried]
        carried_types = [v.type for v in inits]  # type: ignore[union-attr]
        extra_inits: list[Value] = []
        extra_types: list[Type] = []
        with self.at(node):
            if returns:
                extra_inits = [self.b.constant(False), self.uninitialized(self.sig.result)]  # type: ignore[arg-type]
                extra_types = [BOOL, self.sig.result]  # type: ignore[list-item]
        for _attempt in range(3):
            found = len(self.diagnostics)
            op, yielded_types = self.try_loop(node, op_class, head, elem_type, carried, inits, carried_types,
                                              extra_inits, extra_types, returns, breaks)  # type: ignore[arg-type]
            widened = self.widened(node, carried, carried_types, yielded_types, found)
            if widened == carried_types:
                break
            op.erase()
            carried_types = widened  # type: ignore[assignment]
        self.env = before.copy()
        results = op.results
        for name, r in zip(carried, results):
            self.env.set(name, r)
        for name in assigned_names(body_stmts):
            if name not in carried and self.env.get(name) is None:
                self.env.set(name, Unbound("it is assigned only inside the loop"))
        if isinstance(node.target if isinstance(node, cst.For) else None, cst.Name):
            target_name = node.target.value  # type: ignore[union-attr]
            if target_name not in carried and self.env.get(target_name) is None:
                self.env.set(target_name, Unbound("it is the variable of a loop that may not run"))
        if returns:
            flag, value = results[len(carried)], results[len(carried) + 1]
            return Exits(returned=flag, ret_value=value)
        return Exits()

    def widened(self, node: cst.For | cst.While, carried: list[str], before: list[Type], inside: list[Type],
                found: int) -> list[Type]:
        """The types of the loop-carried names after one lowering of the body, which reported
        `diagnostics[found:]` (strict mode goes on past a name whose type does not fit, as ERROR)."""
        out = [self.widen(a, y) for a, y in zip(before, inside)]
        if [ERROR if w is None else w for w in out] != before and not any(w in (None, ERROR) for w in out):
            # The body is lowered again with wider types: what it reports then is what counts
            # (not where an error made a name ERROR: that lowering reports nothing of it).
            del self.diagnostics[found:]
        for name, w, a, y in zip(carried, out, before, inside):
            if w is None:
                self.go_on(self.loop_type_error(node, name, a, y))
        return [ERROR if w is None else w for w in out]

    def widen(self, before: Type, inside: Type) -> Type | None:
        """The type of a loop-carried name; in permissive mode Any where types disagree."""
        t = unify(before, inside)
        return ANY if t is None and self.ctx.permissive else t

    def loop_type_error(self, node: cst.For | cst.While, name: str, before: Type, inside: Type) -> UserError:
        """A loop-carried name whose type the body changes, shown where the body assigns it."""
        at = assignment_of(statements_of(node.body), name) or node
        return self.error(at, f"`{name}` is {a_type(before)} before the loop and becomes {a_type(inside)} in its body",
                          f"give `{name}` one type: start it as {a_type(inside)} before the loop "
                          "(or declare Optional[T] there if it starts as None)")

    def try_loop(self, node, op_class, head, elem_type, carried, inits, carried_types, extra_inits, extra_types,
                 returns, breaks):
        """One attempt at building a for / plain while loop. For loops that may leave early end
        their body in scf.condition(keep_going, ...)."""
        all_types = list(carried_types) + list(extra_types)
        is_while = op_class is ops.WhileOp
        block = Block(([] if is_while else [elem_type]) + all_types)
        regions = [Region([Block(all_types)]), Region([block])] if is_while else [Region([block])]
        op = op_class([*head, *inits, *extra_inits], all_types, regions=regions, loc=self.source.loc(node),
                      result_names=list(carried) + ["returned", "result"][: len(extra_types)])
        self.b.insert(op)
        before = self.env
        offset = 0 if is_while else 1
        if is_while:
            cond_block = regions[0].block
            self.env = before.copy()
            for name, arg in zip(carried, cond_block.args):
                arg.name = name
                self.env.set(name, arg)
            with self.b.at_end_of(cond_block), self.at(node.test):
                cond = self.truth(self.expr(node.test), node.test)
                self.b.create(ops.ConditionOp, [cond, *cond_block.args])
        self.env = before.copy()
        for name, arg in zip(carried, block.args[offset:]):
            arg.name = name
            self.env.set(name, arg)
        extra_args = block.args[offset + len(carried):]
        for arg, name in zip(extra_args, ("returned", "result")):
            arg.name = name
        yielded_types: list[Type] = []
        self.loop_depth += 1
        with self.b.at_end_of(block):
            if not is_while:
                if isinstance(node.target, cst.Name):
                    block.args[0].name = node.target.value
                self.bind_target(node.target, block.args[0])
            exits = self.stmts(statements_of(node.body))
            yields = []
            for name in carried:
                v = self.env.get(name)
                if not isinstance(v, Value):
                    raise self.error(node, f"`{name}` is not bound at the end of the loop body")
                yields.append(v)
                yielded_types.append(v.type)
            tail: list[Value] = []
            if returns:
                ret_flag = exits.returned if isinstance(exits.returned, Value) else self.b.constant(bool(exits.returned))
                tail = [ret_flag, exits.ret_value if exits.ret_value is not None else extra_args[1]]
            if breaks or returns:
                keep = self.keep_going([f for f in (exits.broke, exits.returned) if f is not False])
                self.b.create(ops.ConditionOp, [keep, *yields, *tail])
            else:
                self.b.create(ops.YieldOp, yields + tail)
        self.loop_depth -= 1
        self.env = before
        return op, yielded_types

    def any_of(self, flags: list) -> Value:
        values = [f if isinstance(f, Value) else self.b.constant(bool(f)) for f in flags]
        out = values[0]
        for v in values[1:]:
            out = self.op(ops.BinaryOp, [out, v], [BOOL], op="|").result
        return out

    def keep_going(self, stop: list) -> Value:
        if not stop:
            return self.b.constant(True)
        return self.op(ops.UnaryOp, [self.any_of(stop)], [BOOL], op="not").result

    # -- while ----------------------------------------------------------------------------------
    def while_stmt(self, node: cst.While) -> Exits:
        body_stmts = statements_of(node.body)
        breaks = contains(body_stmts, cst.Break, stop_at_loops=True)
        returns = contains(body_stmts, cst.Return)
        if breaks or returns:
            return self.while_with_exits(node, breaks, returns)
        return self.build_loop(node, ops.WhileOp, [], None)

    def while_with_exits(self, node: cst.While, breaks: bool, returns: bool) -> Exits:
        """`while c: ... break/return ...` as a while loop whose carried `stop` flag is checked
        before the condition, so the condition is not evaluated after an exit."""
        carried = self.carried_names(node)
        body_stmts = statements_of(node.body)
        before = self.env
        inits = [before.get(n) for n in carried]
        carried_types = [v.type for v in inits]  # type: ignore[union-attr]
        with self.at(node):
            extra_inits = [self.b.constant(False)]
            extra_types: list[Type] = [BOOL]
            if returns:
                extra_inits += [self.b.constant(False), self.uninitialized(self.sig.result)]  # type: ignore[arg-type]
                extra_types += [BOOL, self.sig.result]  # type: ignore[list-item]
        for _attempt in range(3):
            found = len(self.diagnostics)
            op, yielded = self._while_exits_once(node, carried, inits, carried_types, extra_inits, extra_types, returns)
            widened = self.widened(node, carried, carried_types, yielded, found)
            if widened == carried_types:
                break
            op.erase()
            carried_types = widened  # type: ignore[assignment]
        self.env = before.copy()
        for name, r in zip(carried, op.results):
            self.env.set(name, r)
        for name in assigned_names(body_stmts):
            if name not in carried and self.env.get(name) is None:
                self.env.set(name, Unbound("it is assigned only inside the loop"))
        if returns:
            n = len(carried)
            return Exits(returned=op.results[n + 1], ret_value=op.results[n + 2])
        return Exits()

    def _while_exits_once(self, node, carried, inits, carried_types, extra_inits, extra_types, returns):
        all_types = list(carried_types) + list(extra_types)
        cond_block, body = Block(all_types), Block(all_types)
        extra_names = ["done", "returned", "result"][: len(extra_types)]
        op = ops.WhileOp([*inits, *extra_inits], all_types, regions=[Region([cond_block]), Region([body])],
                         loc=self.source.loc(node), result_names=list(carried) + extra_names)
        self.b.insert(op)
        before = self.env
        n = len(carried)
        for block in (cond_block, body):
            for name, arg in zip(list(carried) + extra_names, block.args):
                arg.name = name
        # Condition: stop ? False : <test>
        self.env = before.copy()
        for name, arg in zip(carried, cond_block.args):
            self.env.set(name, arg)
        with self.b.at_end_of(cond_block):
            with self.at(node.test):
                stop = cond_block.args[n]
                go_on = self.op(ops.UnaryOp, [stop], [BOOL], op="not").result
                test = self.short_circuit("and", go_on, lambda: self.truth(self.expr(node.test), node.test), node.test)
                self.b.create(ops.ConditionOp, [test, *cond_block.args])
        # Body
        self.env = before.copy()
        for name, arg in zip(carried, body.args):
            self.env.set(name, arg)
        yielded: list[Type] = []
        self.loop_depth += 1
        with self.b.at_end_of(body):
            exits = self.stmts(statements_of(node.body))
            values = []
            for name in carried:
                v = self.env.get(name)
                if not isinstance(v, Value):
                    raise self.error(node, f"`{name}` is not bound at the end of the loop body")
                values.append(v)
                yielded.append(v.type)
            stop_flags = [f for f in (exits.broke, exits.returned) if f is not False]
            stop_value = self.any_of(stop_flags) if stop_flags else self.b.constant(False)
            extra = [stop_value]
            if returns:
                ret_flag = exits.returned if isinstance(exits.returned, Value) else self.b.constant(bool(exits.returned))
                extra += [ret_flag, exits.ret_value if exits.ret_value is not None else body.args[n + 2]]
            self.b.create(ops.YieldOp, values + extra)
        self.loop_depth -= 1
        self.env = before
        return op, yielded

    # -- comprehensions -------------------------------------------------------------------------
    def list_comprehension(self, node: cst.ListComp | cst.GeneratorExp) -> Value:
        """`[elt for t in it if c ...]`: a new list, appended to by the loops it stands for (a
        loop as a for statement over `it` would be, unrolled over a tuple or range(<constant>));
        `if` clauses guard the rest. Its targets live in a scope of their own, as in Python 3."""
        with self.at(node):
            result = self.op(ops.ListOp, [], [ListType(ANY)]).result  # its type: what is appended
        appended: list[Value] = []
        saved = self.env
        self.env = saved.copy()
        try:
            self.comprehension_for(node, node.for_in, result, appended)
        finally:
            self.env = saved
        elem = unify_all([v.type for v in appended])
        if elem is None:
            raise self.error(node.elt, "the elements of this list comprehension have different types"
                             if appended else "the type of an empty list is not known",
                             "a list holds one type: convert the elements to one, or build a tuple")
        result.type = ListType(TENSOR if isinstance(elem, TensorType) else elem)
        return result

    def comprehension_for(self, node: cst.ListComp | cst.GeneratorExp, comp: cst.CompFor, result: Value,
                          appended: list[Value]) -> None:
        if comp.asynchronous is not None:
            raise self.error(comp, "async comprehensions are not supported", "use a plain `for`")

        def body() -> None:
            self.comprehension_ifs(node, comp, list(comp.ifs), result, appended)

        with self.at(comp.iter):
            zipped = self.zip_with_lists(comp.iter)
        if zipped is not None:
            for cond, item in self.zip_items(*zipped, comp.iter):
                def element(item: Callable[[], Value] = item) -> Exits:
                    self.bind_target(comp.target, item())
                    body()
                    return Exits()

                with self.at(comp):
                    self.branch(cond, element, Exits)
            return
        with self.at(comp.iter):
            loop, head, elem = self.iteration(comp.iter, lambda: False)
            bounds = [self.constant_int(v) for v in head] if loop is ops.ForRangeOp else []
            if bounds and all(b is not None for b in bounds) and bounds[2] != 0 \
                    and len(range(*bounds)) <= UNROLL_LIMIT:  # type: ignore[misc]
                items = [self.b.constant(i) for i in range(*bounds)]  # type: ignore[misc]
                loop, head = None, [self.op(ops.TupleOp, items, [TupleType((INT,) * len(items))]).result]
        if loop is None:  # once per element
            seq = head[0]
            for i, elem_type in enumerate(seq.type.elems):  # type: ignore[attr-defined]
                with self.at(comp.iter):
                    item = self.op(ops.GetItemOp, [seq, self.b.constant(i)], [elem_type]).result
                self.bind_target(comp.target, item)
                body()
            return
        block = Block([elem])  # type: ignore[list-item]
        op = loop([*head], [], regions=[Region([block])], loc=self.source.loc(comp))
        self.b.insert(op)
        before = self.env
        self.env = before.copy()
        self.loop_depth += 1
        with self.b.at_end_of(block):
            if isinstance(comp.target, cst.Name):
                block.args[0].name = comp.target.value
            self.bind_target(comp.target, block.args[0])
            body()
            self.b.create(ops.YieldOp, [])
        self.loop_depth -= 1
        self.env = before

    def comprehension_ifs(self, node: cst.ListComp | cst.GeneratorExp, comp: cst.CompFor, ifs: list[cst.CompIf],
                          result: Value, appended: list[Value]) -> None:
        """The `if` clauses left, each evaluated only where those before it held; then the
        inner `for`, or the element appended."""
        if not ifs:
            if comp.inner_for_in is not None:
                self.comprehension_for(node, comp.inner_for_in, result, appended)
                return
            value = self.expr(node.elt)
            with self.at(node.elt):
                self.op(ops.ListAppendOp, [result, value], [])
            appended.append(value)
            return
        test = ifs[0].test
        with self.at(test):
            cond = self.truth(self.expr(test), test)
        refine_then, _ = self.refinements(test)
        known = self.known_bool(cond)

        def then() -> Exits:
            self.apply_refinements(refine_then, test)
            self.comprehension_ifs(node, comp, ifs[1:], result, appended)
            return Exits()

        if known is not None:
            if known:
                then()
            return
        with self.at(ifs[0]):
            self.branch(cond, then, lambda: Exits())


def _known_int(value: Value) -> int | None:
    """An int `value` holds whatever the call: a constant, or the length of a module list of
    known length (`range(len(self.layers))`; its length is an entry check where its layers
    are read by position)."""
    op = value.owner
    if isinstance(op, ops.ConstantOp):
        return op.value if type(op.value) is int else None
    if isinstance(op, ops.BuiltinCallOp) and op.attributes.get("callee") == "len" and len(op.operands) == 1:
        t = op.operands[0].type
        if isinstance(t, ModuleListType) and t.length_known:
            return len(t.elems)
    return None


def _fixed_length(t: Type) -> int | None:
    """How many items a tuple or a module list of known length holds; None for other types."""
    if isinstance(t, TupleType) or isinstance(t, ModuleListType) and t.length_known:
        return len(t.elems)
    return None


def _mentions(node: cst.CSTNode, name: str) -> bool:
    """Whether the expression `node` reads the variable `name`."""
    return any(isinstance(n, cst.Name) and n.value == name for n in _walk(node))


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    found = [node]
    for child in node.children:
        found.extend(_walk(child))
    return found


def leaves_loop(stmts: list[cst.BaseStatement]) -> bool:
    """Whether `stmts`, a loop's body, may leave the loop (`break`, `return`): an unrolled loop
    cannot; a `continue` it can take."""
    return contains(stmts, cst.Return) or contains(stmts, cst.Break, True)


def _layer_type(t: Type) -> Type | None:
    """The type of the layers of a module list whose length is not known, else None."""
    if not isinstance(t, ModuleListType) or t.length_known:
        return None
    return unify_all(t.elems) or ModuleType("torch.nn.Module")


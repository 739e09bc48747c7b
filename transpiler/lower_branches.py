"""Lowering of `if` statements to structured control flow: `BranchLowering`, a mixin of
FunctionLowerer. Names assigned on a side and live after the `if` become `scf.if` results
(`merge`); exit flags (`return`, `break`, `continue` on one side) merge the same way. A condition
known when compiling lowers only the side Python takes. `x is None` tests refine an Optional on
each side (`refinements`, also used by `a if c else b` and `assert`)."""

from __future__ import annotations

from typing import Callable, Sequence

import libcst as cst

from ir.core import ops
from ir.core.graph import Block, Region, Value
from ir.core.types import ANY, BOOL, ERROR, NamedTupleType, OptionalType, Type, unify
from transpiler.diagnostics import UserError
from transpiler.env import FLAG_NAMES, Env, Exits, Raises, Unbound
from transpiler.expr_messages import a_type
from transpiler.syntax import else_statements, statements_of


class BranchLowering:
    """Mixin of FunctionLowerer: `if` statements, and the `scf.if` other statements build."""

    def raise_when(self, cond: Value, exc: str, args: Callable[[], list[Value]] = list, called: bool = True) -> None:
        """`if cond: raise exc(*args())`: the arguments computed only where it raises."""
        if_op = self.new_if(cond, [])
        with self.b.at_end_of(if_op.then_block):
            self.op(ops.RaiseOp, args(), [], exc=exc, called=called)
            self.b.create(ops.YieldOp, [])
        with self.b.at_end_of(if_op.else_block):
            self.b.create(ops.YieldOp, [])

    def either(self, cond: Value, then_side: Callable[[], Value | None], else_side: Callable[[], Value | None],
               node: cst.CSTNode, mismatch: str) -> Value:
        """The value `then_side()` gives where `cond` holds, else `else_side()`'s, each lowered in
        its own side of an scf.if; a side that gives None raised there. `mismatch` is the error
        where their types do not mix ("{a}" and "{c}" stand for them)."""
        if_op = self.new_if(cond, [])
        with self.b.at_end_of(if_op.then_block):
            a = then_side()
        with self.b.at_end_of(if_op.else_block):
            c = else_side()
        assert a is not None or c is not None
        t = a.type if c is None else c.type if a is None else unify(a.type, c.type)
        if t is None:
            raise self.error(node, mismatch.format(a=a.type, c=c.type))  # type: ignore[union-attr]
        for block, v in ((if_op.then_block, a), (if_op.else_block, c)):
            with self.b.at_end_of(block):
                self.b.create(ops.YieldOp, [v if v is not None else self.uninitialized(t)])
        result = ops.OpResult(t, if_op, 0)
        if_op.results = [result]
        return result

    def select(self, cond: Value, a: Value, c: Value, t: Type) -> Value:
        if_op = self.new_if(cond, [t])
        with self.b.at_end_of(if_op.then_block):
            self.b.create(ops.YieldOp, [a])
        with self.b.at_end_of(if_op.else_block):
            self.b.create(ops.YieldOp, [c])
        return if_op.result

    def new_if(self, cond: Value, result_types: Sequence[Type], names: Sequence[str | None] | None = None) -> ops.IfOp:
        op = ops.IfOp([cond], list(result_types), regions=[Region([Block()]), Region([Block()])], result_names=names)
        self.b.insert(op)
        return op  # type: ignore[return-value]

    def if_stmt(self, node: cst.If, rest_then: list | None = None, rest_else: list | None = None) -> Exits:
        with self.at(node.test):
            cond = self.truth(self.expr(node.test), node.test)
        refine_then, refine_else = self.refinements(node.test)
        then_stmts = statements_of(node.body) + (rest_then or [])
        else_stmts = else_statements(node) + (rest_else or [])
        known = self.known_bool(cond)
        if known is not None:
            # Known when compiling (`torch.jit.is_scripting()`, `isinstance(x, Tensor)`, a config
            # setting): only the side Python takes is lowered; the other may hold code for
            # another setting.
            self.apply_refinements(refine_then if known else refine_else, node.test)
            return self.stmts(then_stmts if known else else_stmts)

        def then() -> Exits:
            self.apply_refinements(refine_then, node.test)
            return self.stmts(then_stmts)

        def orelse() -> Exits:
            self.apply_refinements(refine_else, node.test)
            return self.stmts(else_stmts)

        with self.at(node):
            return self.branch(cond, then, orelse)

    def branch(self, cond: Value, then: Callable[[], Exits], orelse: Callable[[], Exits], incoming: Exits | None = None) -> Exits:
        """Build an scf.if whose sides are lowered by `then`/`orelse`, merging names and exits.
        `incoming` are exits already taken before (the else side of a guard passes them on)."""
        before = self.env
        if_op = self.new_if(cond, [])
        sides: list[tuple[Env, Exits, Block]] = []
        for fn, block in ((then, if_op.then_block), (orelse, if_op.else_block)):
            self.env = before.copy()
            with self.b.at_end_of(block):
                exits = fn()
            if incoming is not None and block is if_op.else_block:
                exits = incoming
            sides.append((self.env, exits, block))
        self.env = before
        return self.merge(if_op, before, sides)

    def merge(self, if_op: ops.IfOp, before: Env, sides: list[tuple[Env, Exits, Block]]) -> Exits:
        (env_a, ex_a, block_a), (env_b, ex_b, block_b) = sides
        yields_a: list[Value] = []
        yields_b: list[Value] = []
        types: list[Type] = []
        names: list[str | None] = []
        keys: list[str] = []

        def add(key: str, a: Value | None, c: Value | None, t: Type) -> None:
            with self.b.at_end_of(block_a):
                yields_a.append(a if a is not None else self.uninitialized(t))
            with self.b.at_end_of(block_b):
                yields_b.append(c if c is not None else self.uninitialized(t))
            types.append(t)
            keys.append(key)
            flag_name = {"%ret": "result"}.get(key, key[1:])  # %returned -> returned
            names.append(None if "." in key else flag_name if key.startswith("%") else key)

        # Names: a side that always returns contributes nothing; one that breaks or continues
        # carries its values to the end of the loop body.
        live = [(env, ex) for env, ex, _ in sides if ex.returned is not True]
        all_names = list(dict.fromkeys(env_a.names() + env_b.names()))
        merged_env = before.copy()
        for key in all_names:
            va = env_a.get(key) if ex_a.returned is not True else None
            vb = env_b.get(key) if ex_b.returned is not True else None
            if not live:
                break
            if va is vb and va is not None:
                merged_env.set(key, va)
                continue
            if len(live) == 1:
                v = va if ex_a.returned is not True else vb
                if v is not None and v is before.get(key):
                    merged_env.set(key, v)  # unchanged on the side that goes on: the same value, facts kept
                elif isinstance(v, Value):
                    add(key, v if v is va else None, v if v is vb else None, v.type)
                elif v is not None:
                    merged_env.set(key, v)
                elif key in merged_env.values:
                    del merged_env.values[key]
                continue
            if isinstance(va, Value) and isinstance(vb, Value):
                t = unify(va.type, vb.type)
                if t is None and self.ctx.permissive:
                    t = ANY  # a plain Python object from here on
                if t is None:
                    self.go_on(self.error_at_if(if_op, f"`{key}` is {a_type(va.type)} on one side of the if and {a_type(vb.type)} on the other",
                                                "give it the same type on both sides (Optional[T] for None)"))
                    t = ERROR
                add(key, va, vb, t)
            elif isinstance(va, Value) or isinstance(vb, Value):
                if "." in key:
                    merged_env.values.pop(key, None)  # a refinement that holds on one side only
                else:
                    merged_env.set(key, Unbound(f"it is assigned on only one side of the if at line {if_op.loc.line if if_op.loc else '?'}"))
            else:
                merged_env.set(key, va or vb)  # type: ignore[arg-type]
        # Exit flags and the returned value. A side that raises takes the other side's flags.
        if isinstance(ex_a, Raises) and isinstance(ex_b, Raises):
            for block in (block_a, block_b):
                with self.b.at_end_of(block):
                    self.b.create(ops.YieldOp, [])
            if_op.results = []
            self.env = merged_env
            return Raises()
        exits = Exits()
        flag_keys: list[str] = []
        for flag in FLAG_NAMES:
            fa, fb = getattr(ex_a, flag), getattr(ex_b, flag)
            if isinstance(ex_a, Raises):
                fa = fb if not isinstance(fb, Value) else False
            elif isinstance(ex_b, Raises):
                fb = fa if not isinstance(fa, Value) else False
            if fa is False and fb is False:
                continue
            if fa is True and fb is True:
                setattr(exits, flag, True)
                continue
            with self.b.at_end_of(block_a):
                va_flag = fa if isinstance(fa, Value) else self.b.constant(bool(fa))
            with self.b.at_end_of(block_b):
                vb_flag = fb if isinstance(fb, Value) else self.b.constant(bool(fb))
            add("%" + flag, va_flag, vb_flag, BOOL)
            flag_keys.append(flag)
        ret_index = None
        if ex_a.ret_value is not None or ex_b.ret_value is not None:
            add("%ret", ex_a.ret_value, ex_b.ret_value, self.sig.result)  # type: ignore[arg-type]
            ret_index = len(types) - 1
        for block, values in ((block_a, yields_a), (block_b, yields_b)):
            with self.b.at_end_of(block):
                self.b.create(ops.YieldOp, values)
        results = [ops.OpResult(t, if_op, i, n) for i, (t, n) in enumerate(zip(types, names))]
        if_op.results = results
        for key, r in zip(keys, results):
            if not key.startswith("%"):
                merged_env.set(key, r)
        for flag in flag_keys:
            setattr(exits, flag, results[keys.index("%" + flag)])
        if ret_index is not None:
            exits.ret_value = results[ret_index]
        self.env = merged_env
        return exits

    def error_at_if(self, if_op: ops.Operation, message: str, hint: str) -> UserError:
        assert if_op.loc is not None
        return UserError(message, if_op.loc, hint)

    def uninitialized(self, t: Type) -> Value:
        return self.op(ops.UninitializedOp, [], [t]).result

    def refinements(self, test: cst.BaseExpression) -> tuple[list[tuple], list[tuple]]:
        """`x is None` / `x is not None` (also on self.attr), and `and` / `or` / `not` of them:
        names whose Optional is decided in each branch; (key, is_none, comparison) each."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            then, orelse = self.refinements(test.expression)
            return orelse, then
        if isinstance(test, cst.BooleanOperation):
            left_then, left_else = self.refinements(test.left)
            right_then, right_else = self.refinements(test.right)
            if isinstance(test.operator, cst.And):  # both hold in the then-branch
                return left_then + right_then, []
            return [], left_else + right_else  # `or`: both fail in the else-branch
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return [], []
        target = test.comparisons[0]
        if not (isinstance(target.comparator, cst.Name) and target.comparator.value == "None"):
            return [], []
        key = None
        left = test.left.target if isinstance(test.left, cst.NamedExpr) else test.left  # (`(m := self.mask) is None`)
        if isinstance(left, cst.Name):
            key = left.value
        elif isinstance(test.left, cst.Attribute) and isinstance(test.left.value, cst.Name) and test.left.value.value == "self":
            key = f"self.{test.left.attr.value}"
        elif isinstance(test.left, cst.Attribute) and isinstance(test.left.value, cst.Name):
            record = self.env.get(test.left.value.value)  # `batch.mask`: a field of a NamedTuple or dataclass
            if isinstance(record, Value) and isinstance(record.type, NamedTupleType) \
                    and test.left.attr.value in record.type.fields:
                key = f"{test.left.value.value}.{test.left.attr.value}"
        if key is None:
            return [], []
        if isinstance(target.operator, cst.Is):
            return [(key, True, test)], [(key, False, test)]
        if isinstance(target.operator, cst.IsNot):
            return [(key, False, test)], [(key, True, test)]
        return [], []

    def apply_refinements(self, refinements: list[tuple], node: cst.BaseExpression) -> None:
        for key, is_none, comparison in refinements:
            if key.startswith("self."):
                attr_node = comparison.left
                with self.at(attr_node):
                    current = self.self_attribute(attr_node)
            elif "." in key:  # a record's field, refined while its name holds that record
                with self.at(comparison.left):
                    current = self.expr(comparison.left)
                self.field_bases[key] = self.env.get(key.split(".")[0])  # type: ignore[assignment]
            else:
                found = self.env.get(key)
                if not isinstance(found, Value):
                    continue
                current = found
            if not isinstance(current.type, OptionalType):
                continue
            with self.at(node):
                if is_none:
                    refined = self.b.constant(None)
                else:
                    refined = self.op(ops.RefineOp, [current], [current.type.elem], name=None if "." in key else key).result
            self.env.set(key, refined)

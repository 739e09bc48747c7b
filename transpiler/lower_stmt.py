"""Lowering of a function body: statements, SSA construction and structured control flow.

Names assigned in a branch become `scf.if` results; names assigned in a loop body that existed
before it become loop-carried values. `return`, `break` and `continue` that leave a block early are
rewritten into that form: when one branch of an `if` always leaves, the statements after the `if`
move into the other branch; otherwise bool flags say at run time whether to skip the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import libcst as cst

from ir import ops
from ir.builder import Builder
from ir.core import Block, Loc, Region, Value
from ir.types import (
    unify_all,
    ANY,
    ERROR,
    fits,
    BOOL,
    DictType,
    INT,
    NONE,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TENSOR,
    TensorType,
    TupleType,
    Type,
    is_subtype,
    unify,
)
from transpiler.annotations import annotation_type
from transpiler.classinfo import module_class_names
from transpiler.check import WITH_HINT, turns_grad_off
from transpiler.context import Break, Lookup, applied_decorators
from transpiler.diagnostics import UserError
from transpiler.env import Env, Exits, Signature, Unbound
from transpiler.expr_messages import a_type
from transpiler.lower_builtins import UNROLL_LIMIT
from transpiler.lower_expr import ExpressionLowering
from transpiler.lower_operators import AUG_OPS
from transpiler.lower_python import KeptAsPython
from transpiler.recover import Recovery
from transpiler.syntax import (
    always_leaves,
    assigned_names,
    assignment_of,
    contains,
    else_statements,
    has_jump,
    statements_of,
)
from transpiler.source import SourceFile

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo
    from transpiler.context import FileContext

FLAG_NAMES = ("returned", "broke", "continued")


@dataclass
class Raises(Exits):
    """A statement list that always raises: it leaves like a return (nothing after it runs, it
    contributes no names to a merge) but with no value, and its exit flags are whatever the
    other side of a merge needs."""

    returned: Value | bool = True


class FunctionLowerer(ExpressionLowering, KeptAsPython, Recovery):
    def __init__(self, ctx: FileContext, node: cst.FunctionDef, sig: Signature, class_info: ClassInfo | None,
                 source: SourceFile | None = None):
        self.ctx = ctx
        self.source: SourceFile = source or ctx.source
        self.returned_types: list[Type] = []  # what each return statement returns (result inference)
        self.diagnostics = list(sig.errors)  # (transpiler/recover.py; its annotations' first)
        self.node = node
        self.sig = sig
        self.class_info = class_info
        extra = {k: v for k, v in (("star", sig.star), ("kwstar", sig.kwstar), ("positional", sig.positional),
                                   ("arg_classes", sig.arg_classes or None)) if v is not None}
        self.func = ops.FuncOp.build(
            sig.sym_name, list(sig.types), list(sig.params), sig.result, sig.defaults, self.source.loc(node),  # type: ignore[arg-type]
            **extra,
        )
        self.b = Builder(self.func.body)
        self.env = Env({name: arg for name, arg in zip(sig.params, self.func.args)})
        self.empty_stars: set[Value] = set()  # `*args` / `**kwargs` of a compiled call: empty
        self.star_items: dict[Value, dict[str, Value]] = {}  # `**kwargs` of a variant: its keywords
        self.star_tuples: dict[Value, list[Value]] = {}  # `*args` of a variant: its values
        self.functions_known: dict[Value, Lookup] = {}  # what lookups returned (lower_calls.lookup_call)
        self.dicts_made: dict[Value, int] = {}  # dict displays (also in star_items): the loop depth they are made at
        self.live: dict[Value, Any] = {}
        with self.b.located(self.source.loc(node)):
            if sig.star is not None and sig.star_items:  # a variant for one call: what it passes
                items = [self.env.get(n) for n in sig.star_items]
                star = self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result  # type: ignore[union-attr]
                self.env.set(sig.star, star)
                self.star_tuples[star] = items  # type: ignore[assignment]
            elif sig.star is not None:
                self.env.set(sig.star, self.b.constant(()))
                self.empty_stars.add(self.env.get(sig.star))  # type: ignore[arg-type]
            if sig.kwstar is not None:
                self.bind_kwstar(sig, node)
        self.self_value = self.func.args[0] if class_info is not None else None
        self.loop_depth = 0
        self._chain_left: Value | None = None

    def bind_kwstar(self, sig: Signature, node: cst.FunctionDef) -> None:
        """`**kwargs`: a decorated entry's are what its caller passed (the decorators, kept around
        it, may add some: HF's add `use_cache`), unless its wrappers were seen to pass none
        (transpiler/jit.py); a variant compiled for one call (FileContext.
        call_variant) has that call's keywords; other functions are compiled for calls that pass
        none (an entry check says so). The value is a dict made by a pure py.opaque."""
        name = sig.kwstar
        assert name is not None
        passed = self.ctx.permissive and sig.sym_name in self.ctx.entry_names \
            and sig.sym_name not in self.ctx.entry_kwargs_empty and bool(applied_decorators(self.source, node))
        expected = self.ctx.entry_kwargs_passed.get(sig.sym_name) if passed else None
        items = sig.kwstar_items
        text = name if passed else "{" + ", ".join(f'"{n}": {n}' for n in items) + "}"
        reason = f"**{name}, " + ("the keywords its decorators pass" if expected else "as the caller passed them"
                                  if passed else "the keywords this call passes" if items else "empty when compiled code runs")
        at = [text.index(f'"{n}": {n}') + len(n) + 4 for n in items]
        value = self.b.insert(ops.OpaqueOp(
            [self.env.get(n) for n in items], [ANY],  # type: ignore[misc]
            {"kind": "expr", "lines": (text,), "raw_lines": (), "reads": items, "writes": (),
             "occurrences": tuple((0, c, c + len(n), n, "read") for c, n in zip(at, items)),
             "bare": (text,) if passed else (), "module": "", "reason": reason, "fresh": True},
            result_names=[name])).result
        self.env.set(name, value)
        if expected:  # what the entry's decorators pass (jit._what_decorators_pass), checked at entry
            self.func.attributes["kwstar_expected"] = tuple(sorted(expected.items()))
            self.star_items[value] = {k: self.b.constant(v) for k, v in sorted(expected.items())}  # type: ignore[misc]
        elif passed:
            self.func.attributes["kwstar_passed"] = True
        elif items:
            self.star_items[value] = {n: self.env.get(n) for n in items}  # type: ignore[misc]
        else:
            self.empty_stars.add(value)

    # -- entry ----------------------------------------------------------------------------------
    def lower(self) -> ops.FuncOp:
        if self.ctx.permissive and self.sig.sym_name in self.ctx.entry_names:
            self.note_decorators()
        if (not self.ctx.recursive or self.ctx.autograd) and any(turns_grad_off(self.source.global_name(d.decorator.func), d.decorator)
                                          for d in self.node.decorators if isinstance(d.decorator, cst.Call)):
            with self.at(self.node):  # `@torch.no_grad()`: as a `with` around the body
                self.op(ops.CheckNoAutogradOp, [], [])
        body = statements_of(self.node.body)
        try:
            exits = self.stmts(body)
        except UserError:
            raise
        except Exception:
            if self.diagnostics:  # (a failure past an error is taken for its consequence: the user's errors first)
                raise UserError.of(self.diagnostics) from None
            raise
        if self.diagnostics:
            # Strict mode: every error of the function; its IR is dropped. Whether it can fall off
            # its end is not asked: a statement left out (a `return`, a `raise`, a `yield`) may
            # be why.
            raise UserError.of(self.diagnostics)
        if not exits.always():
            self.returned_types.append(NONE)
            if self.sig.result != NONE:
                # Python returns None when falling off the end; that only fits Optional results.
                if not is_subtype(NONE, self.sig.result):  # type: ignore[arg-type]
                    raise UserError(
                        f"`{self.sig.sym_name}` can reach its end without returning a {self.sig.result}",
                        self.source.loc(self.node.name),
                        "add a return statement at the end",
                    )
            none = self.b.constant(None)
            self.finish_return(exits, none)
        elif exits.ret_value is None:
            assert isinstance(exits, Raises)
            # Never reached: the body raised. The function body still ends in a return.
            value = self.b.constant(None) if self.sig.result == NONE else self.uninitialized(self.sig.result)  # type: ignore[arg-type]
            self.b.create(ops.ReturnOp, [value])
        else:
            with self.b.located(exits.ret_loc or self.b.loc):
                self.b.create(ops.ReturnOp, [exits.ret_value])
        return self.func

    def note_decorators(self) -> None:
        """Permissive mode: an entry's decorators (`@can_return_tuple`) are not compiled; the
        runtime wraps the compiled function in them as they wrap the source's (transpiler/jit.py)."""
        applied = applied_decorators(self.source, self.node)
        if applied:
            self.ctx.breaks.append(Break(self.source.loc(applied[0]), "decorators, applied to the compiled function"))

    def finish_return(self, exits: Exits, fallthrough: Value) -> None:
        value = fallthrough
        if exits.returned is not False:
            assert exits.ret_value is not None and isinstance(exits.returned, Value)
            value = self.select(exits.returned, exits.ret_value, fallthrough, self.sig.result)  # type: ignore[arg-type]
        self.b.create(ops.ReturnOp, [value])

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

    # -- statement lists ------------------------------------------------------------------------
    def stmts(self, stmts: Sequence[cst.BaseStatement]) -> Exits:
        """Lower a statement list into the current block; self.env holds the fall-through state."""
        for i, stmt in enumerate(stmts):
            rest = list(stmts[i + 1:])
            if self.ctx.permissive and not isinstance(stmt, cst.SimpleStatementLine):
                mark = self.mark()
                try:
                    done, exits = self.statement(stmt, rest)
                except UserError as error:
                    self.rollback(mark)
                    self.kept_as_python(stmt, error, expression=False)
                    done, exits = False, Exits()
            elif not isinstance(stmt, cst.SimpleStatementLine):
                mark, reads = self.mark(), self.error_reads
                try:
                    done, exits = self.statement(stmt, rest)
                except UserError as error:
                    self.rollback(mark)
                    self.failed_statement(stmt, error, reads)
                    done, exits = False, Exits()
            else:
                done, exits = self.statement(stmt, rest)
            if done:
                return exits
            if exits.always():
                return exits  # anything after is unreachable
            if not exits.never() and rest:
                return self.guard_rest(exits, rest)
            if not exits.never():
                return exits
        return Exits()

    def header_loc(self, stmt: cst.BaseStatement) -> Loc:
        """A simple statement line's span; a compound statement's up to its body."""
        loc = self.source.loc(stmt)
        body = getattr(stmt, "body", None)
        if isinstance(stmt, cst.SimpleStatementLine) or not isinstance(body, cst.BaseSuite):
            return loc
        start = self.source.positions[body].start
        return Loc(loc.file, loc.line, loc.col, start.line, start.column)

    def statement(self, stmt: cst.BaseStatement, rest: list[cst.BaseStatement]) -> tuple[bool, Exits]:
        """Lower one statement; (True, exits) when it took `rest` in as well."""
        self.ctx.lowered.append(self.header_loc(stmt))
        if isinstance(stmt, cst.If):
            then_leaves = always_leaves(statements_of(stmt.body))
            else_leaves = always_leaves(else_statements(stmt))
            if rest and then_leaves != else_leaves:
                # The statements after the if run only on the side that falls through.
                return True, self.if_stmt(stmt, rest_then=[] if then_leaves else rest, rest_else=rest if then_leaves else [])
            exits = self.if_stmt(stmt)
        elif isinstance(stmt, (cst.For, cst.While)):
            exits = self.loop_stmt(stmt)
        elif isinstance(stmt, cst.SimpleStatementLine):
            exits = self.simple_line(stmt)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            raise self.error(stmt, "nested function and class definitions are not supported",
                             "define it at module level (decorated with @script)")
        elif isinstance(stmt, cst.Try):
            raise self.error(stmt, "try statements are not supported", "move error handling outside the compiled code")
        elif isinstance(stmt, cst.With):
            exits = self.with_stmt(stmt)
        else:
            raise self.error(stmt, f"{type(stmt).__name__} statements are not supported")
        return False, exits

    def simple_line(self, line: cst.SimpleStatementLine) -> Exits:
        for small in line.body:
            with self.at(small):
                if self.ctx.permissive:
                    mark = self.mark()
                    try:
                        exits = self.small_stmt(small)
                    except UserError as error:
                        self.rollback(mark)
                        self.kept_as_python(small, error, expression=False)
                        exits = Exits()
                else:
                    mark, reads = self.mark(), self.error_reads
                    try:
                        exits = self.small_stmt(small)
                    except UserError as error:
                        self.rollback(mark)
                        self.failed_statement(small, error, reads)
                        exits = Exits()
            if not exits.never():
                return exits
        return Exits()

    def guard_rest(self, exits: Exits, rest: list[cst.BaseStatement]) -> Exits:
        """Run `rest` only where no flag of `exits` is set."""
        flags = [v for _, v in exits.flags() if isinstance(v, Value)]
        any_flag = flags[0]
        for f in flags[1:]:
            any_flag = self.op(ops.BinaryOp, [any_flag, f], [BOOL], op="|").result
        go_on = self.op(ops.UnaryOp, [any_flag], [BOOL], op="not").result
        if len(flags) == 1:
            # The skipping side is taken only when that one flag is set.
            exits = Exits(**{name: (True if v is flags[0] else v) for name, v in exits.flags()}, ret_value=exits.ret_value)
        return self.branch(go_on, lambda: self.stmts(rest), lambda: Exits(), incoming=exits)

    # -- if -------------------------------------------------------------------------------------
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
            names.append(None if key.startswith("self.") else flag_name if key.startswith("%") else key)

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
                if key.startswith("self."):
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
        if isinstance(test.left, cst.Name):
            key = test.left.value
        elif isinstance(test.left, cst.Attribute) and isinstance(test.left.value, cst.Name) and test.left.value.value == "self":
            key = f"self.{test.left.attr.value}"
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
                    refined = self.op(ops.RefineOp, [current], [current.type.elem], name=None if key.startswith("self.") else key).result
            self.env.set(key, refined)

    # -- loops ----------------------------------------------------------------------------------
    def loop_stmt(self, node: cst.For | cst.While) -> Exits:
        if node.orelse is not None:
            raise self.error(node.orelse, "`else` on a loop is not supported", "use a flag variable")
        if isinstance(node, cst.For):
            return self.for_stmt(node)
        return self.while_stmt(node)

    def carried_names(self, node: cst.For | cst.While) -> list[str]:
        assigned = assigned_names(statements_of(node.body))
        return [n for n in self.env.names() if n in assigned and isinstance(self.env.get(n), Value)]

    def declared_value(self, declared: Type, node: cst.BaseExpression, name: str | None, what: str) -> Value:
        """`node` lowered as a value of the `declared` type (`xs: List[Tensor] = []`,
        `torch.jit.annotate(List[Tensor], [])`): an empty list display is a list of its element
        type; another value must fit it, and an Optional is refined to it."""
        if isinstance(node, cst.List) and not node.elements:
            value = self.make_list([], declared, node)
        elif isinstance(node, cst.Dict) and not node.elements and isinstance(declared, DictType):
            value = self.op(ops.DictOp, [], [declared], keys=()).result
        else:
            value = self.expr(node, name=name)
        fits = is_subtype(value.type, declared) or declared.__class__ is type(value.type) and unify(declared, value.type)
        if self.ctx.permissive and (declared == ANY or not fits):
            declared = value.type  # (nor checks it)
        if not is_subtype(value.type, declared) and not (declared.__class__ is type(value.type) and unify(declared, value.type)):
            raise self.error(node, f"value of type {value.type} {what} {declared}")
        if value.type != declared and isinstance(declared, OptionalType):
            value = self.op(ops.RefineOp, [value], [declared]).result
        return value

    def for_stmt(self, node: cst.For) -> Exits:
        with self.at(node.iter):
            loop, head, elem = self.iteration(node.iter, lambda: has_jump(statements_of(node.body)))
        if loop is None:
            return self.unrolled_loop(node, head[0])
        return self.build_loop(node, loop, head, elem)

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
            pairs = self.enumerated(self.expr(it.args[0].value))
            if pairs is not None:  # a module list or tuple: its (index, item) pairs, unrolled
                return None, [pairs], None
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.zip" \
                and self.env.get("zip") is None and it.args and all(not a.keyword and not a.star for a in it.args):
            tuples = self.zipped([self.expr(a.value) for a in it.args])
            if tuples is not None:  # module lists or tuples: their items side by side, unrolled
                return None, [tuples], None
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

    def unrolled_loop(self, node: cst.For, iterable: Value) -> Exits:
        """A loop over a tuple or a mixed module list runs its body once per element."""
        if has_jump(statements_of(node.body)):
            raise self.error(node, "break, continue and return in a loop over a tuple or a mixed module list are not supported",
                             "loop over a list of one type instead")
        t = iterable.type
        count = len(t.elems)  # type: ignore[attr-defined]
        for i in range(count):
            with self.at(node.iter):
                index = self.b.constant(i)
                elem_type = t.elems[i]  # type: ignore[attr-defined]
                elem = self.op(ops.GetItemOp, [iterable, index], [elem_type]).result
            self.bind_target(node.target, elem)
            exits = self.stmts(statements_of(node.body))
            assert exits.never()
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

    # -- with -----------------------------------------------------------------------------------
    def with_stmt(self, node: cst.With) -> Exits:
        """`with torch.no_grad():` (or `inference_mode()`): compiled code runs only where
        autograd records nothing, so the block is its body; the entry checks that it does
        (py.check_no_autograd; script(instance) checks every call already). In code for
        autograd (the generic code; script()'s for calls autograd records) it stays Python."""
        for item in node.items:
            qual = self.source.global_name(item.item.func) if isinstance(item.item, cst.Call) else None
            if node.asynchronous is not None or item.asname is not None or not turns_grad_off(qual, item.item):
                raise UserError("with statements are not supported here", self.source.loc(node.items[0]), WITH_HINT)
        if self.ctx.autograd:
            # Code for autograd: the block stays Python, where it switches grad off as in eager
            # (its values stay out of the graph); one that cannot (a `return` in it) keeps the
            # check, and such a call runs eagerly.
            mark = self.mark()
            try:
                self.kept_as_python(node, UserError("a grad-off block runs as written, so that autograd records "
                                                    "none of it", self.source.loc(node.items[0])), expression=False)
                return Exits()
            except UserError:
                self.rollback(mark)
        if not self.ctx.recursive or self.ctx.autograd:
            with self.at(node.items[0]):
                self.op(ops.CheckNoAutogradOp, [], [])
        return self.stmts(statements_of(node.body))

    # -- simple statements ----------------------------------------------------------------------
    def small_stmt(self, node: cst.BaseSmallStatement) -> Exits:
        if isinstance(node, cst.Return):
            value = self.expr(node.value) if node.value is not None else self.b.constant(None)
            value = self.coerce_return(value, node.value or node)
            return Exits(returned=True, ret_value=value, ret_loc=self.source.loc(node))
        if isinstance(node, cst.Break):
            if not self.loop_depth:
                raise self.error(node, "break outside a loop", "break can only leave a for or while loop; use return here")
            return Exits(broke=True)
        if isinstance(node, cst.Continue):
            if not self.loop_depth:
                raise self.error(node, "continue outside a loop", "continue can only be used inside a for or while loop")
            return Exits(continued=True)
        if isinstance(node, cst.Pass):
            return Exits()
        if isinstance(node, cst.Expr):
            if isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
                return Exits()  # docstrings and `...`
            self.expr(node.value)
            return Exits()
        if isinstance(node, cst.Assign):
            value = self.expr(node.value, name=_single_name(node.targets))
            for target in node.targets:
                self.assign(target.target, value)
            return Exits()
        if isinstance(node, cst.AnnAssign):
            try:
                declared = annotation_type(self.source, node.annotation.annotation, module_class_names(self.source))
            except UserError:
                if not self.ctx.permissive or node.value is None:
                    raise
                declared = ANY  # Python does not evaluate a local's annotation: a plain assignment
            if node.value is None:
                raise self.error(node, "a declaration without a value is not supported", "assign a value")
            name = node.target.value if isinstance(node.target, cst.Name) else None
            self.assign(node.target, self.declared_value(declared, node.value, name, "assigned to a name declared"))
            return Exits()
        if isinstance(node, cst.AugAssign):
            self.aug_assign(node)
            return Exits()
        if isinstance(node, cst.Assert):
            return self.assert_stmt(node)
        if isinstance(node, cst.Raise):
            self.raise_stmt(node)
            return Raises()
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            raise self.error(node, f"{type(node).__name__.lower()} statements are not supported")
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            raise self.error(node, "imports inside compiled functions are not supported", "import at module level")
        if isinstance(node, cst.Del):
            raise self.error(node, "del statements are not supported", "let the name go out of use")
        raise self.error(node, f"{type(node).__name__} statements are not supported")

    def assert_stmt(self, node: cst.Assert) -> Exits:
        """`assert cond, msg`: raise AssertionError(msg) where cond is false, msg evaluated only
        then, as Python does (and TorchScript). Past it, `x is not None` in cond holds. A cond
        known now folds (specialization folds one on sizes known at entry); `assert False`
        always raises, like a raise statement."""
        with self.at(node.test):
            cond = self.condition_of(self.expr(node.test), node.test)
        known = self.known_bool(cond)
        if known is False:
            with self.at(node):
                message = [self.expr(node.msg)] if node.msg is not None else []
                self.op(ops.RaiseOp, message, [], exc="AssertionError", called=bool(message))
            return Raises()
        if known is not True:
            if_op = self.new_if(self.negated(cond), [])
            saved = self.env
            self.env = saved.copy()  # nothing the message computes is seen after the assert
            with self.b.at_end_of(if_op.then_block), self.at(node):
                message = [self.expr(node.msg)] if node.msg is not None else []
                self.op(ops.RaiseOp, message, [], exc="AssertionError", called=bool(message))
                self.b.create(ops.YieldOp, [])
            with self.b.at_end_of(if_op.else_block):
                self.b.create(ops.YieldOp, [])
            self.env = saved
        self.apply_refinements(self.refinements(node.test)[0], node.test)
        return Exits()

    def negated(self, cond: Value) -> Value:
        """`not cond`; `y is None` for `y is not None` (and `==`/`!=`, between values that are
        not Python objects of unknown type) so that the code reads as written."""
        owner = cond.owner
        inverse = {"is": "is not", "is not": "is", "==": "!=", "!=": "=="}
        if isinstance(owner, ops.CompareOp) and owner.attributes["op"] in inverse \
                and not any(v.type == ANY for v in owner.operands):
            return self.op(ops.CompareOp, list(owner.operands), [BOOL], op=inverse[owner.attributes["op"]]).result
        return self.op(ops.UnaryOp, [cond], [BOOL], op="not").result

    def raise_stmt(self, node: cst.Raise) -> None:
        """`raise E`, `raise E(args)` for a builtin exception class E."""
        if node.exc is None:
            raise self.error(node, "a bare `raise` is not supported", "raise an exception explicitly: raise RuntimeError(\"...\")")
        if node.cause is not None:
            raise self.error(node.cause, "`raise ... from ...` is not supported", "raise the exception without `from`")
        exc = node.exc
        called = isinstance(exc, cst.Call)
        cls_node = exc.func if isinstance(exc, cst.Call) else exc
        name = self.exception_class(cls_node)
        args: list[Value] = []
        kwnames: list[str] = []
        if isinstance(exc, cst.Call):
            positional, kwnames, kwargs, _ = self.call_arguments(exc)
            args = positional + kwargs
        attrs: dict = {"exc": name, "called": called}
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        self.op(ops.RaiseOp, args, [], **attrs)

    def exception_class(self, node: cst.BaseExpression) -> str:
        import builtins

        qual = self.source.global_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        if isinstance(node, cst.Name) and self.env.get(node.value) is not None:
            qual = None
        found = getattr(builtins, qual[len("builtins."):], None) if qual and qual.startswith("builtins.") else None
        if not (isinstance(found, type) and issubclass(found, BaseException)):
            raise self.error(node, "only builtin exception classes can be raised in compiled code",
                             "raise one of Python's exceptions (ValueError, RuntimeError, ...)")
        return found.__name__

    def coerce_return(self, value: Value, node: cst.CSTNode) -> Value:
        self.returned_types.append(value.type)
        want = self.sig.result
        if fits(value.type, want):  # type: ignore[arg-type]
            return value
        if isinstance(value.type, TensorType) and isinstance(want, TensorType):
            return value
        raise self.error(node, f"returns {a_type(value.type)}, but `{self.sig.sym_name}` is declared to return {want}",
                         "fix the return annotation or the returned value")

    def assign(self, target: cst.BaseExpression, value: Value) -> None:
        self.bind_target(target, value)

    def bind_target(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            if value.name is None and isinstance(value.owner, ops.Operation) and not isinstance(value.owner, ops.ConstantOp):
                value.name = target.value
            self.env.set(target.value, value)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                raise self.error(target, "starred assignment targets are not supported")
            t = value.type
            n = len(elements)
            if isinstance(t, TupleType):
                if len(t.elems) != n:
                    raise self.error(target, f"cannot unpack a tuple of {len(t.elems)} values into {n} names",
                                     f"write {len(t.elems)} names on the left, or index the tuple")
                types = list(t.elems)
            elif isinstance(t, ListType):
                types = [t.elem] * n
            elif isinstance(t, TensorType):
                raise self.error(target, "unpacking a tensor is not supported", "use t.unbind(0) or index it")
            elif t == ANY and self.ctx.permissive:
                types = [ANY] * n  # a Python object, unpacked as Python does
            else:
                raise self.error(target, f"cannot unpack a value of type {t}")
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in elements]
            unpack = self.op(ops.UnpackObjectOp if t == ANY else ops.UnpackOp, [value], types)
            for r, nm in zip(unpack.results, names):
                r.name = nm
            for e, r in zip(elements, unpack.results):
                self.bind_target(e.value, r)
            return
        if isinstance(target, cst.Subscript):
            base = self.expr(target.value)
            if isinstance(base.type, ListType) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                index = self.expr(target.slice[0].slice.value)
                if index.type not in (INT, BOOL):
                    raise self.error(target.slice[0], f"a list index of type {index.type}; expected int")
                if not is_subtype(value.type, base.type.elem):
                    raise self.error(target, f"assigning a {value.type} into a list of {base.type.elem}")
                self.op(ops.ListSetItemOp, [base, index, value], [])
                return
            if isinstance(base.type, DictType) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                key = self.expr(target.slice[0].slice.value)
                if not is_subtype(key.type, base.type.key):
                    raise self.error(target.slice[0], f"a key of type {key.type} for a dict of {base.type.key} keys")
                if not is_subtype(value.type, base.type.value) and not (
                        isinstance(value.type, TensorType) and isinstance(base.type.value, TensorType)):
                    raise self.error(target, f"storing a {value.type} in a dict of {base.type.value}")
                self.op(ops.DictSetItemOp, [base, key, value], [])
                self.star_items.pop(base, None)  # (what it holds is known when it runs)
                return
            if not isinstance(base.type, TensorType):
                raise self.error(target, f"item assignment on a {base.type} is not supported",
                                 "only tensors, lists and dicts support index assignment in compiled code")
            items, operands = self.index_items(target.slice)
            self.op(ops.IndexPutOp, [base, *operands, value], [], items=items)
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" \
                and self.self_value is not None and self.class_info is not None:
            attr = target.attr.value
            found = self.class_info.attrs.get(attr)
            if found is None or found.kind == "module":
                raise self.error(target, f"assigning `self.{attr}` is not supported",
                                 "only existing tensor and Python attributes can be assigned")
            if not is_subtype(value.type, found.type) and not (isinstance(found.type, TensorType) and isinstance(value.type, TensorType)):
                raise self.error(target, f"assigning a {value.type} to `self.{attr}` of type {found.type}")
            self.op(ops.SetAttrOp, [self.self_value, value], [], attr=attr)
            self.env.values.pop(f"self.{attr}", None)
            return
        raise self.error(target, "unsupported assignment target")

    def aug_assign(self, node: cst.AugAssign) -> None:
        op = AUG_OPS[type(node.operator)]
        target = node.target
        if isinstance(target, cst.Subscript):
            # y[i] += v is: t = y[i]; t += v; y[i] = t (in place on the selected part).
            base = self.expr(target.value)
            if not isinstance(base.type, TensorType):
                raise self.error(target, f"augmented item assignment on a {base.type} is not supported")
            items, operands = self.index_items(target.slice)
            part = self.op(ops.IndexOp, [base, *operands], [base.type if False else TensorType()], items=items).result
            rhs = self.expr(node.value)
            updated = self.inplace(op, part, rhs, node)
            self.op(ops.IndexPutOp, [base, *operands, updated], [], items=items)
            return
        current = self.expr(target)
        if isinstance(current.type, ListType) and op == "+":
            self.extend_list(current, node.value)  # (list.__iadd__: the one list object grows)
            return
        rhs = self.expr(node.value)
        if isinstance(current.type, TensorType):
            result = self.inplace(op, current, rhs, node)
            if isinstance(target, cst.Attribute):
                return  # the tensor attribute was updated in place; Python's re-set is a no-op
        else:
            result = self.binary(op, current, rhs, node)
            if result.type != current.type and not is_subtype(result.type, current.type):
                if isinstance(target, cst.Name):
                    pass
        if isinstance(target, cst.Name):
            result.name = target.value
            self.env.set(target.value, result)
        else:
            self.bind_target(target, result)

    def extend_list(self, listed: Value, items: cst.BaseExpression) -> None:
        """`xs += [a, b]` appends each element, which the lists pass can make SSA; `xs += ys`
        extends the list by another."""
        if isinstance(items, cst.List) and not any(isinstance(e, cst.StarredElement) for e in items.elements):
            for element in items.elements:
                self.append_to(listed, self.expr(element.value), element.value)
            return
        self.extend_by(listed, self.expr(items), items)

    def inplace(self, op: str, target: Value, rhs: Value, node: cst.CSTNode) -> Value:
        t = self.binary_type_checked(op, target, rhs, node)
        if isinstance(t, TensorType) and isinstance(target.type, TensorType):
            if t.dtype is not None and target.type.dtype is not None and t.dtype != target.type.dtype:
                promoted = t.dtype
                # torch refuses to write a float result into an integer tensor in place.
                if target.type.dtype.startswith(("int", "uint", "bool")) and promoted.startswith(("float", "bfloat", "complex")):
                    raise self.error(node, f"in-place `{op}=` would store a {promoted} result in a {target.type.dtype} tensor",
                                     "convert the tensor first (x = x.float()) or use the out-of-place operator")
        return self.op(ops.InplaceOp, [target, rhs], [target.type], op=op).result

    def binary_type_checked(self, op: str, lhs: Value, rhs: Value, node: cst.CSTNode) -> Type:
        from ir.torch_signatures import SignatureError, binary_result_type

        try:
            return binary_result_type(op, lhs.type, rhs.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None


def _single_name(targets: Sequence[cst.AssignTarget]) -> str | None:
    if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
        return targets[0].target.value
    return None

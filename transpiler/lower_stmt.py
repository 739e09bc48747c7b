"""Lowering of a function body: `FunctionLowerer` turns one libcst FunctionDef into a FuncOp.

Each statement is lowered by the rule `STATEMENTS` (compound statements) or `SMALL_STATEMENTS`
(the parts of a simple statement line) keys on its libcst node class. The rules live in mixins by
what they lower: lower_assign.py, lower_branches.py (`if`), lower_loops.py (`for`, `while`,
comprehensions), lower_raise.py (`raise`, `assert`, `with`), lower_returns.py (`return`, `break`,
`continue`); expressions are lower_expr.py's. This module holds the function's entry and
statement lists.

Names assigned in a branch become `scf.if` results; names assigned in a loop body that existed
before it become loop-carried values. `return`, `break` and `continue` that leave a block early are
rewritten into that form: when one branch of an `if` always leaves, the statements after the `if`
move into the other branch; otherwise bool flags say at run time whether to skip the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import libcst as cst

from ir.core import ops
from ir.core.builder import Builder
from ir.core.graph import Loc, Value
from ir.core.types import ANY, BOOL, NONE, DataclassType, TupleType, Type, is_subtype
from transpiler.check import turns_grad_off
from transpiler.context import Break, Lookup, applied_decorators
from transpiler.diagnostics import UserError
from transpiler.env import Env, Exits, Raises, Signature
from transpiler.lower_assign import AssignmentLowering
from transpiler.lower_branches import BranchLowering
from transpiler.lower_expr import ExpressionLowering
from transpiler.lower_loops import LoopLowering
from transpiler.lower_python import KeptAsPython
from transpiler.lower_raise import RaiseLowering
from transpiler.lower_returns import ReturnLowering
from transpiler.recover import Recovery
from transpiler.source import SourceFile
from transpiler.syntax import always_leaves, else_statements, statements_of

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo
    from transpiler.context import FileContext


class FunctionLowerer(AssignmentLowering, BranchLowering, LoopLowering, RaiseLowering, ReturnLowering,
                      ExpressionLowering, KeptAsPython, Recovery):
    def __init__(self, ctx: FileContext, node: cst.FunctionDef, sig: Signature, class_info: ClassInfo | None,
                 source: SourceFile | None = None):
        self.ctx = ctx
        self.source: SourceFile = source or ctx.source
        self.returned_types: list[Type] = []  # what each return statement returns (result inference)
        self.diagnostics = list(sig.errors)  # (transpiler/recover.py; its annotations' first)
        self.node = node
        self.sig = sig
        self.class_info = class_info
        self.field_reads: set[ops.Operation] = set()  # `out.logits` of a dataclass (dataclass_misuse)
        self.field_bases: dict[str, Value] = {}  # "batch.mask" refined -> the record `batch` held then
        self.result_fields: dict[Value, tuple[str, ...]] = {}  # a torch call's named results (CallInfo)
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
        turned_off = [qual for d in self.node.decorators if isinstance(d.decorator, cst.Call)
                      and turns_grad_off(qual := self.source.global_name(d.decorator.func), d.decorator)]
        grad_off = bool(turned_off)
        if grad_off and self.ctx.autograd:
            # Code for autograd: the function runs under its own grad-off decorator, as in
            # eager (inference_mode's results are inference tensors there too), and callers
            # call it rather than inlining it (ir/passes/inline.py).
            self.func.grad_off = "inference_mode" if turned_off[0].endswith("inference_mode") else "no_grad"
        elif grad_off and not self.ctx.recursive:
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
        misuse = dataclass_misuse(self.func, self.field_reads)
        if misuse is not None:
            t = next(v.type for v in misuse.operands if isinstance(v.type, DataclassType))
            raise UserError(f"`{t.name}` is a dataclass, not a tuple: it cannot be indexed, unpacked, iterated, "
                            "measured or used as an operand here", misuse.loc or self.source.loc(self.node),
                            f"read its fields by name (`.{t.fields[0] if t.fields else 'field'}`)")
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
        if isinstance(stmt, cst.If) and rest:
            then_leaves = always_leaves(statements_of(stmt.body))
            else_leaves = always_leaves(else_statements(stmt))
            if then_leaves != else_leaves:
                # The statements after the if run only on the side that falls through.
                return True, self.if_stmt(stmt, rest_then=[] if then_leaves else rest, rest_else=rest if then_leaves else [])
        rule = _rule(STATEMENTS, stmt)
        if rule is None:
            raise self.error(stmt, f"{type(stmt).__name__} statements are not supported")
        return False, rule(self, stmt)

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

    def small_stmt(self, node: cst.BaseSmallStatement) -> Exits:
        rule = _rule(SMALL_STATEMENTS, node)
        if rule is None:
            raise self.error(node, f"{type(node).__name__} statements are not supported")
        return rule(self, node)

    def expression_stmt(self, node: cst.Expr) -> Exits:
        if not isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):  # (docstrings, `...`)
            self.expr(node.value)
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


Rule = Callable[[FunctionLowerer, Any], Exits]


def _refused(message: str, hint: str | None = None) -> Rule:
    """The rule for a statement compiled code does not support."""

    def rule(self: FunctionLowerer, node: cst.CSTNode) -> Exits:
        raise self.error(node, message, hint)

    return rule


def _rule(table: dict[type, Rule], node: cst.CSTNode) -> Rule | None:
    return next((table[c] for c in type(node).__mro__ if c in table), None)


STATEMENTS: dict[type, Rule] = {
    cst.SimpleStatementLine: FunctionLowerer.simple_line,
    cst.If: FunctionLowerer.if_stmt,  # (`statement` passes it the statements after it where needed)
    cst.For: FunctionLowerer.loop_stmt,
    cst.While: FunctionLowerer.loop_stmt,
    cst.With: FunctionLowerer.with_stmt,
    cst.Try: _refused("try statements are not supported", "move error handling outside the compiled code"),
    cst.FunctionDef: _refused("nested function and class definitions are not supported",
                              "define it at module level (decorated with @script)"),
    cst.ClassDef: _refused("nested function and class definitions are not supported",
                           "define it at module level (decorated with @script)"),
}

SMALL_STATEMENTS: dict[type, Rule] = {
    cst.Expr: FunctionLowerer.expression_stmt,
    cst.Pass: lambda self, node: Exits(),
    cst.Assign: FunctionLowerer.assign_stmt,
    cst.AnnAssign: FunctionLowerer.annotated_assign,
    cst.AugAssign: FunctionLowerer.aug_assign,
    cst.Return: FunctionLowerer.return_stmt,
    cst.Break: FunctionLowerer.break_stmt,
    cst.Continue: FunctionLowerer.continue_stmt,
    cst.Raise: FunctionLowerer.raise_stmt,
    cst.Assert: FunctionLowerer.assert_stmt,
    cst.Global: _refused("global statements are not supported"),
    cst.Nonlocal: _refused("nonlocal statements are not supported"),
    cst.Import: _refused("imports inside compiled functions are not supported", "import at module level"),
    cst.ImportFrom: _refused("imports inside compiled functions are not supported", "import at module level"),
    cst.Del: _refused("del statements are not supported", "let the name go out of use"),
}


# What a dataclass value may be used by, beyond its field reads: ops that hold or pass the object
# whole (containers, calls, returns, merges, `is None`). A tuple's operations (an index, unpacking,
# len(), iteration, + and ==) would run on a tuple in compiled code and raise in Python.
PASSES_OBJECT = (ops.TupleOp, ops.ListOp, ops.DictOp, ops.ListAppendOp, ops.ListSetItemOp, ops.ListInsertOp, ops.DictSetItemOp,
                 ops.FuncCallOp, ops.ModuleCallOp, ops.MethodCallOp, ops.ReturnOp, ops.YieldOp, ops.SetAttrOp,
                 ops.RefineOp, ops.OpaqueOp, ops.ForRangeOp, ops.WhileOp, ops.ConditionOp)  # (loops: carried values)


def dataclass_misuse(func: ops.FuncOp, field_reads: set[ops.Operation]) -> ops.Operation | None:
    """The first op of `func` that uses a dataclass value as a tuple, or None."""
    for op in func.walk():
        if op in field_reads or isinstance(op, PASSES_OBJECT):
            continue
        if isinstance(op, ops.CompareOp) and op.op in ("is", "is not"):
            continue
        used = op.operands[:1] if isinstance(op, ops.ForEachOp) else op.operands  # (the iterable; the rest carried)
        if any(isinstance(v.type, DataclassType) for v in used):
            return op
    return None

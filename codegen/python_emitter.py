"""The core of the Python emitter: one IR function's planning, names, writer and blocks.

Planning happens before printing: which values are folded into the expression that uses them
(`torch.tanh(self.linear(x) + h)` rather than three assignments), and which Python variable holds
each remaining value. Folding never changes the order in which effects happen; variables of
loop-carried and branch-merged values are shared so that loops need no copies.

What an op prints as comes from `Rules`, tables keyed on the op's class (looked up along its
class's MRO): a statement and an expression each. The modules that fill them, by what they print
(python_control, python_calls, python_values, python_checks, python_kept), take the emitter as
their first argument; codegen/python_function.py puts their tables together.
"""

from __future__ import annotations

import builtins
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

from codegen.launcher_text import kernel_args, source_text
from codegen.names import Namespace
from codegen.pyformat import LINE_LENGTH as FORMATTED_LENGTH
from codegen.python_text import PREC, Expr, is_effect_free, string_literal, type_comment
from codegen.writer import Writer
from ir.core import ops
from ir.core.graph import Block, Operation, Value
from ir.core.types import ModuleListType, ModuleType, TensorType
from ir.kernel import ops as kernel_ops

Statement = Callable[["PythonEmitter", Operation], None]
Expression = Callable[["PythonEmitter", Operation], Expr]


@dataclass(frozen=True)
class StatementRule:
    emit: Statement
    quoted: bool  # whether the statement's source line is quoted above it


class Rules:
    """What each op class prints as: a statement (`@rules.statement(ops.IfOp)`) and an expression
    (`@rules.expression(ops.TupleOp)`). An op without a statement rule is an assignment of its
    expression (or the expression alone); one without an expression has no Python form."""

    def __init__(self) -> None:
        self.statements: dict[type, StatementRule] = {}
        self.expressions: dict[type, Expression] = {}

    def statement(self, *classes: type, quoted: bool = True) -> Callable[[Statement], Statement]:
        def register(fn: Statement) -> Statement:
            for cls in classes:
                assert cls not in self.statements, f"two statements for {cls.__name__}"
                self.statements[cls] = StatementRule(fn, quoted)
            return fn
        return register

    def expression(self, *classes: type) -> Callable[[Expression], Expression]:
        def register(fn: Expression) -> Expression:
            for cls in classes:
                assert cls not in self.expressions, f"two expressions for {cls.__name__}"
                self.expressions[cls] = fn
            return fn
        return register

    @staticmethod
    def merge(*tables: Rules) -> Rules:
        out = Rules()
        for table in tables:
            for cls, rule in table.statements.items():
                out.statement(cls, quoted=rule.quoted)(rule.emit)
            for cls, fn in table.expressions.items():
                out.expression(cls)(fn)
        return out

    def statement_of(self, op: Operation) -> StatementRule | None:
        return next((self.statements[c] for c in type(op).__mro__ if c in self.statements), None)

    def expression_of(self, op: Operation) -> Expression | None:
        return next((self.expressions[c] for c in type(op).__mro__ if c in self.expressions), None)


class PythonEmitter:
    rules = Rules()  # (codegen/python_function.py FunctionEmitter gives the full tables)

    def __init__(self, func: ops.FuncOp, source_lines: dict[str, list[str]] | None, reserved: set[str]) -> None:
        self.func = func
        self.source_lines = source_lines
        self.names = Namespace(reserved)
        self.var: dict[Value, str] = {}
        self.folded: set[Operation] = set()  # ops printed inside their user's expression
        self.w = Writer()
        self.last_line: tuple[str, int] | None = None
        self.needs: set[str] = set()  # names of imports the text uses ("math", "F", "Optional", "_prepacked")
        self.bound: dict[tuple[Value, tuple], str] = {}  # (root, path) -> the local an entry check read it into
        self.entry_locals: dict[tuple[Value, tuple], bool] | None = None  # (python_checks.entry_plan)
        self._last_read: dict[Value, int] = {}  # top-level tensor -> index of the statement reading it last
        self.tables: dict[Operation, list[Operation]] = {}  # first check -> the checks of its table
        self.in_table: set[Operation] = set()
        self.module_lines: list[str] = []  # module-level statements the function reads (its tables)
        self.quotes: list[tuple[int, str]] = []  # (line, source text) of each comment quoting the function's own source
        self.typed: dict[str, str] = {}  # name -> the type comment its last typed assignment printed
        self.absorbed: set[Operation] = set()  # reads and views a kernel's launcher makes (kernel_args)
        self.module_args: dict[Value, list[Operation]] = {}  # module -> the kernel calls passing it

    # -- planning -------------------------------------------------------------------------------
    def plan(self) -> None:
        for op in self.func.walk():
            if isinstance(op, ops.OpaqueOp):  # kept Python code reads these names as they are
                self.names.taken |= set(op.attributes["bare"])
            if isinstance(op, kernel_ops.Kernel):  # what its launcher reads in the call's place is not printed
                passed = kernel_args(op)
                self.absorbed |= passed.absorbed
                for v in passed.values[:len(passed.params)]:
                    if isinstance(v.type, ModuleType):
                        self.module_args.setdefault(v, []).append(op)
        for arg in self.func.args:
            self.var[arg] = self.names.take(arg.name or "arg")
        self._plan_block(self.func.body)

    def _plan_block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, kernel_ops.Kernel):
                continue  # its body is the kernel's C++
            for region in op.regions:
                for inner in region.blocks:
                    self._plan_block(inner)
        self._plan_folding(block)

    def _plan_folding(self, block: Block) -> None:
        """Decide which ops print inside their single user, walking the block backwards so the
        users' decisions are known."""
        index = {op: i for i, op in enumerate(block.ops)}
        for op in reversed(block.ops):
            if op in self.absorbed:
                self.folded.add(op)  # (never printed: the launcher reads it)
                continue
            if not self._foldable(op):
                continue
            user, index_in_user = self._printed_uses(op.results[0])[0]
            if user.parent is not block:
                continue
            if isinstance(user, ops.InplaceOp) and index_in_user == 0:
                continue  # `x += y` needs a name to update
            between = block.ops[index[op] + 1: index[user]]
            ok = True
            for other in between:
                if self._folds_into(other, user) or isinstance(other, (ops.ConstantOp, ops.UninitializedOp)):
                    continue  # literals print where they are used and evaluate to themselves
                if not (is_effect_free(other) and is_effect_free(op)):
                    ok = False
                    break
            if ok:
                self.folded.add(op)

    def _foldable(self, op: Operation) -> bool:
        if len(op.results) != 1 or isinstance(op, (ops.InplaceOp, ops.UnpackOp, ops.ConstantOp, ops.UninitializedOp)):
            return False
        if isinstance(op, ops.OpaqueOp) and (op.attributes["kind"] != "expr" or len(op.attributes["lines"]) > 1):
            return False
        if op.regions and not self._is_expression_if(op) and not isinstance(op, kernel_ops.Kernel):
            return False
        uses = self._printed_uses(op.results[0])
        if op.results[0].name is not None and not isinstance(op, ops.ConstantOp):
            # A value the source names keeps its own statement; a submodule read once prints
            # where it is read (`bn1_relu(_guards.attr(block1, "bn1"), out)`, `_guards.at(block1,
            # "conv1.weight")`).
            return isinstance(op, (ops.GetAttrOp, ops.GetItemOp)) and isinstance(op.results[0].type, ModuleType) \
                and len(uses) == 1
        return len(uses) == 1

    def _printed_uses(self, value: Value) -> list[tuple[Operation, int]]:
        """The (op, operand index) of each use of `value` that prints it: not the reads a launcher
        makes in a kernel call's place, which takes the module read from instead."""
        uses = [(u.op, u.index) for u in value.uses if u.op not in self.absorbed]
        return uses + [(k, -1) for k in self.module_args.get(value, [])]

    def _is_expression_if(self, op: Operation) -> bool:
        """An scf.if with one result whose sides are single expressions: printed as
        `a if c else b` (or `c and b`, `c or b`)."""
        if not isinstance(op, ops.IfOp) or len(op.results) != 1:
            return False
        for block in (op.then_block, op.else_block):
            term = block.terminator
            assert term is not None
            for inner in block.ops[:-1]:
                if not is_effect_free(inner) or len(inner.results) != 1 or len(inner.results[0].uses) != 1:
                    return False
                if inner not in self.folded and not isinstance(inner, (ops.ConstantOp, ops.UninitializedOp)):
                    return False  # it keeps its own statement (a named value), which an expression cannot hold
        return True

    def _folds_into(self, op: Operation, user: Operation) -> bool:
        while op in self.folded:
            nxt = self._fold_user(op)
            if nxt is user:
                return True
            op = nxt
        return False

    # -- names ----------------------------------------------------------------------------------
    def name_of(self, value: Value, hint: str | None = None) -> str:
        if value not in self.var:
            name = value.name or hint or self._read_name(value) or "tmp"
            # The source's name, or one it was numbered to (`out_1`) whose values are dead by
            # this statement: a kernel's result written over its input keeps its name, no `del`.
            taken = dict.fromkeys(n for n in self.var.values() if re.fullmatch(rf"{re.escape(name)}(_\d+)?", n))
            reused = next((n for n in ([name] if name in taken else []) + [n for n in taken if n != name]
                           if self._can_reuse(value, n)), None) if value.name else None
            self.var[value] = reused if reused is not None else self.names.take(name)
        return self.var[value]

    def _read_name(self, value: Value) -> str | None:
        """A name for what a value read, where the source gives it none: an attribute of an object
        that is not a tensor (`downsample = _guards.attr(self, "downsample")`, `num_heads =
        self.num_heads`), a layer of a Sequential after its container (`downsample_0`)."""
        op = value.owner
        if isinstance(op, ops.GetAttrOp) and not isinstance(op.operands[0].type, TensorType):
            name = op.attributes["attr"]
            return None if hasattr(builtins, name) else name  # (`max = self.max` would hide max())
        if isinstance(op, ops.GetItemOp) and isinstance(op.operands[0].type, ModuleListType) \
                and isinstance(op.operands[1].owner, ops.ConstantOp) and type(op.operands[1].owner.value) is int:
            container = op.operands[0]
            while container not in self.var and isinstance(container.owner, ops.RefineOp):
                container = container.owner.operands[0]
            if container in self.var:  # (a name it already has: naming it here could print one never bound)
                return f"{self.var[container]}_{op.operands[1].owner.value}".replace("-", "")
        return None

    def _can_reuse(self, value: Value, name: str) -> bool:
        """`q = q.view(...)`: a new value may take the name of older ones that nobody reads
        after it is defined (reads folded into later statements count where they print)."""
        op = value.owner
        if not isinstance(op, Operation) or op.parent is None:
            return False
        block = op.parent
        holders = [w for w, n in self.var.items() if n == name]
        if not holders:
            return False
        position = block.ops.index(op)
        for w in holders:
            for use in w.uses:
                user = self._printed_at(use.op)
                while user is not None and user.parent is not block:
                    user = user.parent_op()
                if user is None or block.ops.index(user) > position:
                    return False
        return True

    def _printed_at(self, op: Operation) -> Operation:
        """The statement an op is printed in (itself, or the user it folds into)."""
        while op in self.folded:
            op = self._fold_user(op)
        return op

    def _fold_user(self, op: Operation) -> Operation:
        """The op a folded op prints inside."""
        printed = self._printed_uses(op.results[0])
        return printed[0][0] if printed else op.results[0].uses[0].op

    def share(self, value: Value, name: str) -> None:
        self.var.setdefault(value, name)

    # -- statements -----------------------------------------------------------------------------
    def block(self, block: Block) -> None:
        skip: set[Operation] = set()
        dying = self._dying_tensors() if block is self.func.body else {}
        for op in block.ops:
            if op in self.folded or op in skip or isinstance(op, (ops.ConstantOp, ops.UninitializedOp)):
                continue
            sugared = self.augmented_assignment(op, block)
            if sugared:
                skip.update(sugared)
                continue
            self.statement(op)
            if isinstance(op, ops.RaiseOp):
                break  # the rest of the block is unreachable
            if op in dying:
                self.delete(dying, op)

    @contextmanager
    def suite(self) -> Iterator[None]:
        """An indented suite; `pass` when nothing but comments was written into it."""
        start = len(self.w.lines)
        with self.w.indent():
            yield
            if all(line.strip().startswith("#") for line in self.w.lines[start:]):
                self.w.line("pass")

    def statement(self, op: Operation) -> None:
        if is_effect_free(op) and not any(r.uses for r in op.results):
            return  # dead and harmless
        rule = self.rules.statement_of(op)
        if rule is None or rule.quoted:
            self.source_comment(op)
            self.kept_comments(op)
        if rule is not None:
            rule.emit(self, op)
        else:
            self.assignment(op)

    def assignment(self, op: Operation) -> None:
        """The statement of an op without a rule of its own: its result assigned to its variable
        (with a type comment), or, when nothing reads it, the expression alone."""
        if (op.attributes.get("writeback") and not op.results[0].uses
                and isinstance(op.operands[1].owner, (ops.IfOp, ops.ForRangeOp, ops.ForEachOp, ops.WhileOp))):
            # a path that did not write hands back the tensor itself: no copy onto itself
            target, value = self.expr(op.operands[0]).text, self.expr(op.operands[1]).text
            self.w.line(f"if {value} is not {target}:")
            with self.w.indent():
                self.w.line(self.op_expr(op).text)
        elif op.results:
            result = op.results[0]
            text = self.op_expr(op).text
            if not result.uses:
                self.w.line(text)
            else:
                self.typed_line(f"{self.name_of(result)} = {text}", type_comment(result.type))
        else:
            self.w.line(self.op_expr(op).text)

    def typed_line(self, statement: str, comment: str) -> None:
        """`statement` with its type comment after it; on a line of its own above it (`# out:
        f32[B, 32, 8, 8]@cpu`) where the comment alone would make a line that fits too long,
        which the formatter would split over three; none where the name's last typed
        assignment printed the same (`out = bn1_relu(..., out)` after `out: f32[B, 32, 8, 8]`)."""
        width = len(self.w.unit) * self.w.depth + len(statement)
        target = statement.split(" = ", 1)[0]
        if comment and self.typed.get(target) == comment:
            comment = ""  # (the type the name held, said where it was assigned before)
        elif comment:
            self.typed[target] = comment
        if comment and width <= FORMATTED_LENGTH < width + len(comment):
            self.w.line(f"# {statement.split(' = ', 1)[0]}: {comment.removeprefix('  # ')}")
            comment = ""
        self.w.line(statement + comment)

    def source_comment(self, op: Operation) -> None:
        """The source line a statement comes from, quoted (no line number: a line inserted above
        the function would change every comment); `(inlined)` where it is another function's."""
        loc = op.loc
        if loc is None or (loc.file, loc.line) == self.last_line:
            return
        self.last_line = (loc.file, loc.line)
        text = source_text(loc, self.source_lines)
        if text is None:
            return
        own = self.func.loc
        inside = own is not None and own.file == loc.file and own.line <= loc.line <= max(own.end_line, own.line)
        if inside:
            self.quotes.append((len(self.w.lines), text))
        self.w.line(f"# {'' if inside else '(inlined) '}{text}")

    def kept_comments(self, op: Operation) -> None:
        """Say which parts of the statement are Python code kept as written (folded into it)."""
        pending = list(op.operands)
        while pending:
            owner = pending.pop().owner
            if isinstance(owner, Operation) and owner in self.folded:
                if isinstance(owner, ops.OpaqueOp) and owner.loc is not None:
                    self.w.line(f"# kept as Python: {owner.attributes['reason']}")
                pending += owner.operands

    def augmented_assignment(self, op: Operation, block: Block) -> list[Operation]:
        """`y[i] += v` and `self.count += 1` were lowered to read, update in place, (write
        back); print them as the one statement they came from. Returns the ops printed."""
        if not isinstance(op, (ops.IndexOp, ops.GetAttrOp)) or len(op.result.uses) != 1:
            return []
        update = op.result.uses[0].op
        if not isinstance(update, ops.InplaceOp) or update.parent is not block or op.result.uses[0].index != 0:
            return []
        if self._next_statement(op, block) is not update:
            return []
        rhs = self.expr(update.operands[1]).text
        if isinstance(op, ops.GetAttrOp):
            if update.result.uses:
                return []
            self.source_comment(update)
            self.w.line(f"{self.expr(op.operands[0], PREC['atom']).text}.{op.attributes['attr']} {update.attributes['op']}= {rhs}")
            return [op, update]
        if len(update.result.uses) != 1:
            return []
        put = update.result.uses[0].op
        if not (isinstance(put, ops.IndexPutOp) and put.operands[:-1] == op.operands
                and put.attributes["items"] == op.attributes["items"] and self._next_statement(update, block) is put):
            return []
        self.source_comment(update)
        self.w.line(f"{self.index_text(op)} {update.attributes['op']}= {rhs}")
        return [op, update, put]

    def _next_statement(self, op: Operation, block: Block) -> Operation | None:
        """The next op of `block` after `op` that prints as a statement of its own."""
        for other in block.ops[block.ops.index(op) + 1:]:
            if other in self.folded or isinstance(other, (ops.ConstantOp, ops.UninitializedOp)):
                continue
            return other
        return None

    # -- freeing temporaries --------------------------------------------------------------------
    # A tensor held in a local lives until the function returns. Eager code drops each
    # intermediate as soon as the next op has read it; held to the end, several are freed at
    # once, and glibc returns that much memory at the top of its heap to the system, so every
    # call faults its pages in again (examples/conv_bn_relu: 480 page faults a call, 1.38 ms
    # against eager's 0.34 ms). So a named tensor of the function's own block is deleted after
    # the statement that reads it last, as Inductor's wrappers do.


    def _dying_tensors(self) -> dict[Operation, list[Value]]:
        """For each statement of the function's block, the named tensors it reads last (a read
        inside a loop or branch counts at that statement). Nothing when the function keeps
        Python code, which may read locals by name."""
        body = self.func.body
        if any(isinstance(op, ops.OpaqueOp) for op in self.func.walk()):
            return {}
        statements = [op for op in body.ops if op not in self.folded
                      and not isinstance(op, (ops.ConstantOp, ops.UninitializedOp))]
        index = {op: i for i, op in enumerate(statements)}
        dying: dict[Operation, list[Value]] = {}
        for op in statements:
            for r in op.results:
                if not isinstance(r.type, TensorType) or not r.uses or isinstance(op, (ops.GetAttrOp, ops.RefineOp)):
                    continue  # (a parameter or buffer read: deleting the local frees nothing; a
                    # refinement prints no code, its text is its operand's, which may be an expression)
                at = self._read_statements(r, body)
                if any(s not in index for s in at):
                    continue
                last = max(index[s] for s in at)  # type: ignore[index]
                self._last_read[r] = last
                if not isinstance(statements[last], ops.ReturnOp):
                    dying.setdefault(statements[last], []).append(r)
        return dying

    def _read_statements(self, v: Value, body: Block) -> list[Operation | None]:
        """The statements of `body` that read `v`. A refinement prints no code of its own, and
        the result of `x += y` is printed as its target: the text that reads `v` is printed where
        those results are read, so those count too."""
        out = []
        for use in v.uses:
            op = self._printed_at(use.op)
            if isinstance(op, (ops.RefineOp, ops.InplaceOp)):
                out += self._read_statements(op.result, body)
            out.append(self._statement_of(op, body))
        return out

    def _statement_of(self, op: Operation, body: Block) -> Operation | None:
        """The statement of `body` that prints `op` (itself, the user it folds into, or the loop
        or branch it is in)."""
        while True:
            op = self._printed_at(op)
            if op.parent is body:
                return op
            parent = op.parent_op()
            if parent is None or parent is self.func:
                return None
            op = parent

    def delete(self, dying: dict[Operation, list[Value]], op: Operation) -> None:
        """`del` the locals of the tensors `op` read last, where no value still to be read holds
        the same name (a name is reused once its values are dead: `q = q.view(...)`)."""
        here = self._last_read[dying[op][0]]
        names = []
        for v in dying[op]:
            name = self.var.get(v)
            holders = [w for w, n in self.var.items() if n == name]
            if name is None or name in names or any(
                    not isinstance(w.owner, Operation) or self._last_read.get(w, here + 1) > here for w in holders):
                continue
            names.append(name)
        if names:
            self.w.line(f"del {', '.join(names)}")

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, value: Value, min_prec: int = 0) -> Expr:
        owner = value.owner
        if isinstance(owner, Operation) and (owner in self.folded or isinstance(owner, (ops.ConstantOp, ops.UninitializedOp))):
            e = self.op_expr(owner)
        elif value in self.var:
            e = Expr(self.var[value], PREC["atom"])
        elif isinstance(owner, ops.RefineOp):
            e = self.expr(owner.operands[0])
        else:
            e = Expr(self.name_of(value), PREC["atom"])
        if e.prec < min_prec:
            return Expr(f"({e.text})", PREC["atom"])
        return e

    def op_expr(self, op: Operation) -> Expr:
        rule = self.rules.expression_of(op)
        if rule is None:
            raise NotImplementedError(f"no Python form for {op.name}")
        return rule(self, op)

    def tuple_display(self, values: list[Value]) -> str:
        inner = ", ".join(self.expr(v, PREC["if"]).text for v in values)
        return f"({inner},)" if len(values) == 1 else f"({inner})"

    def tuple_text(self, values: list[Value]) -> str:
        if len(values) == 1:
            return self.expr(values[0]).text
        return ", ".join(self.expr(v, PREC["if"] + 1).text for v in values)

    def args_text(self, values: list[Value], kwnames: tuple[str, ...]) -> str:
        positional = values[: len(values) - len(kwnames)]
        keyword = values[len(values) - len(kwnames):]
        parts = [self.expr(v, PREC["if"]).text for v in positional]
        parts += [f"{k}={self.expr(v, PREC['if']).text}" for k, v in zip(kwnames, keyword)]
        return ", ".join(parts)

    def literal(self, value: object) -> Expr:
        if isinstance(value, float):
            if math.isnan(value):
                self.needs.add("math")
                return Expr("math.nan", PREC["atom"])
            if math.isinf(value):
                self.needs.add("math")
                return Expr("math.inf", PREC["atom"]) if value > 0 else Expr("-math.inf", PREC["unary"])
            text = repr(float(value))  # (numpy's float64 is a float whose repr names numpy)
            return Expr(text, PREC["unary"] if text.startswith("-") else PREC["atom"])
        if isinstance(value, int) and not isinstance(value, bool):
            return Expr(repr(int(value)), PREC["unary"] if value < 0 else PREC["atom"])
        if isinstance(value, tuple):
            inner = ", ".join(self.literal(v).text for v in value)
            return Expr(f"({inner},)" if len(value) == 1 else f"({inner})", PREC["atom"])
        if isinstance(value, str):
            return Expr(string_literal(value), PREC["atom"])
        return Expr(repr(value), PREC["atom"])

    def index_text(self, op: Operation) -> str:
        base = self.expr(op.operands[0], PREC["atom"]).text
        values = iter(op.operands[1:])
        parts = []
        for item in op.attributes["items"]:
            kind = item[0]
            if kind == "none":
                parts.append("None")
            elif kind == "ellipsis":
                parts.append("...")
            elif kind == "value":
                parts.append(self.expr(next(values), PREC["if"]).text)
            else:
                has_start, has_stop, has_step = item[1:]
                start = self.expr(next(values), PREC["if"]).text if has_start else ""
                stop = self.expr(next(values), PREC["if"]).text if has_stop else ""
                text = f"{start}:{stop}"
                if has_step:
                    text += ":" + self.expr(next(values), PREC["if"]).text
                parts.append(text)
        if not parts:
            return f"{base}[()]"
        return f"{base}[{', '.join(parts)}]"

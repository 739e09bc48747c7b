"""Emit one IR function as a Python function that calls torch.

Planning happens before printing: which values are folded into the expression that uses them
(`torch.tanh(self.linear(x) + h)` rather than three assignments), and which Python variable holds
each remaining value. Folding never changes the order in which effects happen; variables of
loop-carried and branch-merged values are shared so that loops need no copies.
"""

from __future__ import annotations

import builtins
import math
import re
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator
from pathlib import PurePath

import torch

from codegen.launcher_text import kernel_args, source_text
from codegen.pyformat import LINE_LENGTH as FORMATTED_LENGTH
from codegen.names import Namespace, function_name, model_module_name
from codegen.writer import Writer
from ir import ops
from ir.core import PURE, Block, Operation, Value
from ir.passes.inline import guard_prefix_end
from ir.torch_schemas import Param, schemas
from ir.types import (
    INT,
    DictType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
)

# Python operator precedence, loosest first; atoms and calls bind tightest.
PREC = {
    "if": 1, "or": 2, "and": 3, "not": 4, "cmp": 5, "|": 6, "^": 7, "&": 8, "<<": 9, ">>": 9,
    "+": 10, "-": 10, "*": 11, "@": 11, "/": 11, "//": 11, "%": 11, "unary": 12, "**": 13, "atom": 16,
}
FUNCTION_ALIASES = (("torch.nn.functional.", "F."),)
# Tensor methods whose one argument of sizes may be passed spread: `x.view(2, 3)` is `x.view((2, 3))`.
SIZE_VARARG_METHODS = frozenset({"permute", "reshape", "view", "expand", "repeat"})
LINE_LENGTH = 100
# A function with this many entry checks below a module argument or more makes them with one
# `_guards.check_entry(self, <table>)` call, the table a module-level constant beside it.
ENTRY_TABLE_MIN = 3


@dataclass
class Expr:
    text: str
    prec: int


def annotation(t: Type) -> str | None:
    if isinstance(t, TensorType):
        return "Tensor"
    if isinstance(t, ScalarType):
        return {"Any": None, "dtype": "torch.dtype", "device": "torch.device"}.get(t.name, t.name)
    if isinstance(t, OptionalType):
        inner = annotation(t.elem)
        return None if inner is None else f"Optional[{inner}]"
    if isinstance(t, TupleType):
        parts = [annotation(e) for e in t.elems]
        if any(p is None for p in parts):
            return None
        return "tuple[" + (", ".join(parts) if parts else "()") + "]"  # type: ignore[arg-type]
    if isinstance(t, ListType):
        inner = annotation(t.elem)
        return None if inner is None else f"list[{inner}]"
    if isinstance(t, DictType):
        key, value = annotation(t.key), annotation(t.value)
        return None if key is None or value is None else f"dict[{key}, {value}]"
    return None


def _attribute_safe(text: str) -> str:
    """An atom's text that `.name` may follow: `0.clone()` does not parse, `(0).clone()` does."""
    return f"({text})" if text[:1].isdigit() else text


def _literal(value: object) -> str:
    """A Python literal for an attribute value (str, int, float, bool, None, tuples and lists of them)."""
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, float):  # (numpy's float64 is a float whose repr names numpy)
        return repr(float(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(int(value))
    return repr(value)


def optional_prefix(root_type: Type, path: tuple) -> int | None:
    """How many parts of `path` lead to the first value that may be None, when that is not the
    whole path: a check of the value then belongs under `if <prefix> is not None:`."""
    t = root_type
    for i, part in enumerate(path):
        if isinstance(t, OptionalType):
            return i
        if isinstance(t, TupleType) and isinstance(part, int) and 0 <= part < len(t.elems):
            t = t.elems[part]
        else:
            return None
    return None


def string_literal(text: str) -> str:
    """A double-quoted Python string literal, as formatters write them."""
    r = repr(text)
    if r.startswith("'") and '"' not in text:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


def type_comment(t: Type) -> str:
    """`# f32[B, 4]` for tensors whose dtype or shape is known; nothing otherwise."""
    if isinstance(t, TensorType) and t.shape is not None:
        return f"  # {t}"
    return ""


def _reads_attributes(path: tuple) -> bool:
    """Whether an entry check's path reads attributes (of a module), not only indexes a tuple."""
    return any(isinstance(part, str) for part in path)


def _module_check_path(call: Operation) -> tuple[Value, tuple] | None:
    """(root, path) of the submodule a `plain_module` call checks; None where a part of the path
    may be None ("downsample?.0") or the path is not a constant."""
    path = call.operands[1].owner
    if not (isinstance(path, ops.ConstantOp) and isinstance(path.attributes["value"], str)) \
            or "?" in path.attributes["value"] or not path.attributes["value"]:
        return None
    return call.operands[0], tuple(int(p) if p.lstrip("-").isdigit() else p for p in path.attributes["value"].split("."))


def _read_text(base: str, steps: tuple) -> str:
    """`base` followed by `steps` as entry checks read it: indices as indexing, an attribute past
    nn.Module.__getattr__ (`_guards.attr(self_layers[0], "fc")`), a path with more attributes
    than one with `_guards.at(base, "block1.downsample.0")`."""
    if sum(isinstance(step, str) for step in steps) > 1:
        return f"_guards.at({base}, {string_literal('.'.join(str(step) for step in steps))})"
    for step in steps:
        base = f"{base}[{step}]" if isinstance(step, int) else f"_guards.attr({base}, {string_literal(step)})"
    return base


def _module_item(op: Operation) -> bool:
    """`seq[i]` of an nn.Sequential or nn.ModuleList at a constant index (read with `_guards.item`)."""
    return isinstance(op, ops.GetItemOp) and isinstance(op.operands[0].type, ModuleListType) \
        and isinstance(op.operands[1].owner, ops.ConstantOp) and type(op.operands[1].owner.value) is int


def _past_module_getattr(op: Operation) -> bool:
    """A read of a module's parameter, buffer or submodule, which a plain `m.weight` finds only
    through nn.Module.__getattr__ (about 1 us in torch 2.14): printed as `_guards.attr(m,
    "weight")`, which reads the same dicts in the same order for 0.2 us."""
    owner, result = op.operands[0].type, op.result.type
    if isinstance(result, OptionalType):
        result = result.elem
    return isinstance(owner, (ModuleType, ModuleListType)) and isinstance(result, (TensorType, ModuleType, ModuleListType))


TABLE_WIDTH = 100  # columns a long row of an entry-check table fills (as the C++ kernels' lines)


def _alike_rows(rows: list[tuple[str, list[str], list[str]]]) -> list[tuple[list[str], list[str]]]:
    """The rows of an entry-check table, (path, qualname and conditions, attributes) each, as the
    table's items: the rows of submodules checked alike as one, whose path is a tuple of paths
    (`(("block1.bn1", "block2.bn1"), "torch.nn.BatchNorm2d", "running_stats", {...})`: five
    32-channel batch norms are one row, not ten lines), where the first of them stands, when every
    module a later one is read through is checked before that (runtime/guards.py entry_checks
    makes of it the rows it stood for: the same checks, with the same messages)."""
    groups: list[tuple[int, list[str], list[str], list[str]]] = []  # (position, paths, rest, attributes)
    for i, (path, rest, attributes) in enumerate(rows):
        parents = [j for j, (before, _, _) in enumerate(rows[:i]) if before == "" or path.startswith(before + ".")]
        alike = next((g for g in groups if g[2] == rest and g[3] == attributes and all(j < g[0] for j in parents)), None)
        if alike is not None:
            alike[1].append(path)
        else:
            groups.append((i, [path], rest, attributes))
    items = [string_literal(paths[0]) if len(paths) == 1 else f"({', '.join(map(string_literal, paths))})"
             for _, paths, _, _ in groups]
    return [([item] + rest, attributes) for item, (_, _, rest, attributes) in zip(items, groups)]


def _table_lines(head: str, rows: list[tuple[list[str], list[str]]], keywords: list[str]) -> list[str]:
    """`head` (`X_checks = _guards.entry_checks(`), one line per row (its leading items, then its
    attributes as a dict), the keyword arguments, `)`. Where a row is longer than a formatter's
    line (FORMATTED_LENGTH), it is filled into lines of TABLE_WIDTH columns, its
    continuations indented, and the table sits between `# fmt: off` and `# fmt: on`, which black
    and our formatter leave as written: exploded one item a line, a layer's checks would take a
    dozen lines."""
    lines, long = [head], False
    for items, attributes in rows:
        text = "    (" + ", ".join(items + ([f"{{{', '.join(attributes)}}}"] if attributes else [])) + "),"
        if len(text) <= FORMATTED_LENGTH:
            lines.append(text)
            continue
        long = True
        pieces = [f"{item}," for item in items] + [f"{{{a}," if i == 0 else f"{a}," for i, a in enumerate(attributes)]
        pieces[-1] = pieces[-1][:-1] + ("})," if attributes else "),")
        line = "    (" + pieces[0]
        for piece in pieces[1:]:
            if len(line) + 1 + len(piece) > TABLE_WIDTH:
                lines.append(line)
                line = "        " + piece
            else:
                line += " " + piece
        lines.append(line)
    lines += [f"    {keyword}," for keyword in keywords] + [")"]
    return ["# fmt: off"] + lines + ["# fmt: on"] if long else lines


def _restates(lines: list[str], at: int, source: str) -> bool:
    """Whether the comment at `at` quotes a source line that the one statement after it reads as
    (`out = _guards.attr(self, "conv1")(x)` under `# out = self.conv1(x)`: the same code, its
    reads past nn.Module.__getattr__ spelt as plain reads, a type comment after it), no other
    statement at its depth following before the next comment: such a comment says nothing."""
    if at + 1 >= len(lines):
        return False
    depth = len(lines[at]) - len(lines[at].lstrip())
    statement = lines[at + 1]
    if len(statement) - len(statement.lstrip()) != depth:
        return False
    for after in lines[at + 2:]:
        indent = len(after) - len(after.lstrip())
        if after.strip() and indent <= depth:
            if indent == depth and not after.lstrip().startswith(("#", "del ")):
                return False
            break
    code, previous = _TYPE_COMMENT.sub("", statement.strip()), None
    while code != previous:
        previous = code
        code = _ATTR_READ.sub(r"\1.\2", _ITEM_READ.sub(r"\1[\2]", code))
        code = _PATH_READ.sub(lambda m: m[1] + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in m[2].split(".")), code)
    return code == source.strip()


_TYPE_COMMENT = re.compile(r"  # [^\"']*$")
_ATTR_READ = re.compile(r'_guards\.attr\(([\w.\[\]]+), "(\w+)"\)')
_ITEM_READ = re.compile(r"_guards\.item\(([\w.\[\]]+), (-?\d+)\)")
_PATH_READ = re.compile(r'_guards\.at\(([\w.\[\]]+), "([\w.]+)"\)')


def _default_tail(callee: str, values: list[Value]) -> int:
    """How many of the last arguments of a call of `callee` (positional, `values`) go without
    saying: constants that every overload of its operator has as the default there
    (`F.conv2d(x, w, None, (2, 2), (1, 1))`, not `..., (1, 1), 1)`), where the function is
    torch's own binding of `aten::<name>`, which fills in the defaults of its schema."""
    module, _, name = callee.rpartition(".")
    fn = getattr(torch.nn.functional if module == "torch.nn.functional" else torch if module == "torch" else None, name, None)
    if fn is None or fn is not getattr(torch, name, None) or not isinstance(fn, types.BuiltinFunctionType):
        return 0
    overloads = schemas(name)
    dropped = 0
    for i in range(len(values) - 1, -1, -1):
        owner = values[i].owner
        if not overloads or not isinstance(owner, ops.ConstantOp) \
                or not all(_is_default(sig.params[i], owner.attributes["value"]) if i < len(sig.params) else False
                           for sig in overloads):
            break
        dropped += 1
    return dropped


def _is_default(param: Param, value: object) -> bool:
    """Whether `value` is what `param` (positional, with a default) takes when it is left out: an
    `int[N]` default is a lone int standing for N of them."""
    if param.kwarg_only or not param.has_default:
        return False
    default = param.default
    if type(default) is int and param.size and isinstance(value, tuple):
        return len(value) == param.size and all(type(v) is int and v == default for v in value)
    if isinstance(default, list) and isinstance(value, tuple):
        return list(value) == default and all(type(v) is type(d) for v, d in zip(value, default))
    return type(value) is type(default) and value == default


def is_effect_free(op: Operation) -> bool:
    # (a kernel's region is C++, not control flow)
    return op.has_trait(PURE) and (not op.regions or isinstance(op, ops.Kernel))


class FunctionEmitter:
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
        self._entry_plan: dict[tuple[Value, tuple], bool] | None = None
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
            if isinstance(op, ops.Kernel):  # what its launcher reads in the call's place is not printed
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
            if isinstance(op, ops.Kernel):
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
        if op.regions and not self._is_expression_if(op) and not isinstance(op, ops.Kernel):
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

    # -- emission -------------------------------------------------------------------------------
    def emit(self) -> list[str]:
        self.plan()
        self.tables = self._entry_tables()
        self.in_table = {guard for group in self.tables.values() for guard in group}
        f = self.func
        params = []
        defaults = f.attributes["defaults"]
        for arg in f.args:
            text = self.var[arg]
            ann = annotation(arg.type) if not isinstance(arg.type, ModuleType) else None
            if ann:
                text += f": {ann}"
                self._note_annotation(ann)
            if arg.name in defaults:
                text += (" = " if ann else "=") + self.literal(defaults[arg.name]).text
            params.append(text)
        star, kwstar = f.attributes.get("star"), f.attributes.get("kwstar")
        positional = f.attributes.get("positional", len(params))
        if star is not None or positional < len(params):
            params.insert(positional, f"*{star}" if star is not None else "*")
        if kwstar is not None:
            params.append(f"**{kwstar}")
        ret = annotation(f.result_type)
        if ret:
            self._note_annotation(ret)
        tail = (f" -> {ret}" if ret else "") + ":"
        head = f"def {function_name(f.sym_name)}({', '.join(params)}){tail}"
        if f.attributes.get("rows"):  # compiled for (rows, last) views (ir/rows.py)
            self.w.line(f"@_guards.over_rows({', '.join(string_literal(n) for n in f.attributes['rows'])})")
        if len(head) <= LINE_LENGTH:
            self.w.line(head)
        else:  # one parameter a line, as formatters lay out long signatures
            self.w.line(f"def {function_name(f.sym_name)}(")
            with self.w.indent():
                for p in params:
                    self.w.line(p + ",")
            self.w.line(")" + tail)
        with self.w.indent():
            expected = f.attributes.get("kwstar_expected")
            checked = (star, None if f.attributes.get("kwstar_passed") or expected else kwstar)
            extra = " or ".join(n for n in checked if n is not None)
            if extra:  # compiled code is specialised to calls that pass them nothing
                self.w.line(f"if {extra}:")
                with self.w.indent():
                    self.w.line(f"raise _guards.GuardFailure({string_literal(f'called with {extra}, which the compiled code does not take')})")
            if expected:  # ... or the literal keywords its decorators pass
                items = ", ".join(f"{string_literal(k)}: {self.literal(v).text}" for k, v in expected)
                self.w.line(f"_guards.check_keywords({kwstar}, {{{items}}}, {string_literal('**' + kwstar)})")
            self.guards()
            self.block(f.body)
        said = {at for at, text in self.quotes if _restates(self.w.lines, at, text)}
        self.w.lines = [line for at, line in enumerate(self.w.lines) if at not in said]
        return self.w.lines

    def _note_annotation(self, text: str) -> None:
        if "Optional[" in text:
            self.needs.add("Optional")

    def guards(self) -> None:
        """`check_type` for each argument of a variant compiled for one member of its Union
        annotation (FuncOp `arg_classes`: a tensor's is `check_tensor`), first, as later checks
        read into it; `check_tensor` for each tensor argument that no entry check of the body
        covers."""
        for name, cls in self.func.attributes.get("arg_classes", ()):
            if name.startswith("self."):  # an attribute of the module (`self.padding`)
                read = f"{self.var[self.func.args[0]]}.{name[len('self.'):]}"  # (as the body reads it)
                self.w.line(f"_guards.check_type({read}, {'torch.Tensor' if cls == 'Tensor' else cls}, "
                            f"{string_literal(name)})")
            elif cls != "Tensor":
                arg = next(a for a in self.func.args if a.name == name)
                self.w.line(f"_guards.check_type({self.var[arg]}, {cls}, {string_literal(name)})")
        checked = {op.operands[0] for op in self.func.body.ops
                   if isinstance(op, ops.CheckTensorOp) and not op.attributes["path"]}
        for arg in self.func.args:
            if isinstance(arg.type, TensorType) and arg not in checked:
                self.w.line(f'_guards.check_tensor({self.var[arg]}, "{arg.name}")')

    def module_check(self, cond: Value) -> str | None:
        """`_guards.check_module(...)` for a guard on `_guards.plain_module(...)`: one line that
        raises GuardFailure itself. It returns the submodule: when entry checks below read
        through it (`self.fc1.bias`), the line binds it (`self_fc1 = _guards.check_module(self,
        "fc1", ...)`) and they read on from there."""
        call = self._module_check_call(cond)
        if call is None:
            return None
        text = f"_guards.check_module({self.args_text(list(call.operands), ())})"
        key = _module_check_path(call)
        if key is not None:  # from the nearest submodule a check before returned, not from the root
            base, rest = self._nearest(key[0], key[1][:-1])
            if base != self.var[key[0]]:
                path = string_literal(".".join(str(step) for step in (*rest, key[1][-1])))
                text = f"_guards.check_module({', '.join([base, path, self.args_text(list(call.operands[2:]), ())])})"
        if key is None or key not in self.entry_plan() or key in self.bound:
            return text
        name = self.bound[key] = self.names.take(self._bound_name(*key))
        return f"{name} = {text}"

    def _module_check_call(self, cond: Value) -> Operation | None:
        call = cond.owner
        if isinstance(call, ops.BuiltinCallOp) and call.attributes["callee"] == "_guards.plain_module" \
                and call in self.folded:
            return call
        return None

    def _entry_tables(self) -> dict[Operation, list[Operation]]:
        """The entry checks that print as a table: for each module argument with
        ENTRY_TABLE_MIN or more checks of what hangs below it (submodules whose paths, classes
        and conditions are constants; tensors and values read through attributes, outside any
        `if ... is not None:`), those checks in order, keyed by the first."""
        groups: dict[Value, list[Operation]] = {}
        for op in self.func.body.ops[:guard_prefix_end(self.func)]:
            root = self._table_root(op)
            if root is not None and root in self.func.args and isinstance(root.type, ModuleType):
                groups.setdefault(root, []).append(op)
        return {group[0]: group for group in groups.values() if len(group) >= ENTRY_TABLE_MIN}

    def _table_root(self, op: Operation) -> Value | None:
        """The root of a check that a table can hold; None for any other op."""
        if isinstance(op, ops.GuardOp):
            call = self._module_check_call(op.operands[0])
            if call is not None and all(isinstance(v.owner, ops.ConstantOp) and isinstance(v.owner.attributes["value"], str)
                                        for v in call.operands[1:]):
                return call.operands[0]
        elif isinstance(op, (ops.CheckTensorOp, ops.CheckValueOp)) and _reads_attributes(op.attributes["path"]) \
                and optional_prefix(op.operands[0].type, op.attributes["path"]) is None:
            return op.operands[0]
        return None

    def entry_table(self, checks: list[Operation]) -> str:
        """The module-level table of `checks`, one row per submodule checked, with what is read
        there (`<function>_checks = _guards.entry_checks(("block1.conv1", "torch.nn.Conv2d",
        "zeros_padding", {"weight": [32, 16, 3, 3], "bias": None, ...}), ...)`: a list is a
        tensor's shape, of the table's most common dtype and device, `tensors=`), and the line
        that makes the checks, binding the submodules that checks outside the table read through
        (`self_block1 = _guards.check_entry(self, <function>_checks)`)."""
        root = self._table_root(checks[0])
        assert root is not None
        rows: dict[str, list[str]] = {}  # path -> qualname and conditions (a row of attributes only: none)
        attributes: dict[str, list[str]] = {"": []}  # path -> `"name": expected`
        keys: list[tuple[str, tuple[Value, tuple] | None]] = []  # (path, entry-plan key) of each module row
        for op in checks:
            if isinstance(op, ops.GuardOp):
                call = self._module_check_call(op.operands[0])
                assert call is not None
                path, *rest = (v.owner.attributes["value"] for v in call.operands[1:])  # type: ignore[union-attr]
                rows[path] = [string_literal(text) for text in rest]
                attributes[path] = []
                keys.append((path, _module_check_path(call)))
        tensors = [op.attributes for op in checks if isinstance(op, ops.CheckTensorOp)]
        kinds = [(a["dtype"], a["device"]) for a in tensors if a["dtype"] and a["device"] and a["shape"] is not None]
        common = max(dict.fromkeys(kinds), key=kinds.count, default=None)  # (the first of the most common)
        for op in checks:
            if isinstance(op, ops.GuardOp):
                continue
            a = op.attributes
            path = ".".join(str(step) for step in a["path"])
            row = max((p for p in attributes if p and "?" not in p and path.startswith(p + ".")), key=len, default="")
            name = path[len(row) + 1:] if row else path
            if isinstance(op, ops.CheckValueOp):
                expected = _literal(a["expected"])
                if isinstance(a["expected"], list):  # (a bare list is a tensor's shape)
                    expected = f"_guards.ListValue({expected})"
            elif (a["dtype"], a["device"]) == common and a["shape"] is not None:
                expected = _literal(list(a["shape"]))
            else:
                dtype = f"torch.{a['dtype']}" if a["dtype"] else "None"
                device = string_literal(a["device"]) if a["device"] else "None"
                shape = _literal(a["shape"]) if a["shape"] is not None else "None"
                expected = f"_guards.TensorCheck({dtype}, {device}, {shape})"
            attributes[row].append(f"{string_literal(name + ('?' if op.attributes.get('optional') else ''))}: {expected}")
        returned = [(path, key) for path, key in keys if key is not None and self.entry_plan().get(key) is False]
        suffix = "" if root is self.func.args[0] else f"_{self.var[root]}"
        table = self.names.take(f"{function_name(self.func.sym_name)}{suffix}_checks")
        entries = _alike_rows([(path, rows.get(path, []), attributes[path])
                               for path in attributes if path in rows or attributes[path]])
        keywords = [f"tensors=(torch.{common[0]}, {string_literal(common[1])})"] if common else []
        if returned:
            keywords.append(f"returns={_literal(tuple(path for path, _ in returned))}")
        if root.name != "self":
            keywords.append(f"root={string_literal(root.name or self.var[root])}")
        self.module_lines += _table_lines(f"{table} = _guards.entry_checks(", entries, keywords)
        targets = []
        for _, key in returned:
            assert key is not None
            self.bound[key] = self.names.take(self._bound_name(*key))
            targets.append(self.bound[key])
        text = f"_guards.check_entry({self.var[root]}, {table})"
        return f"{', '.join(targets)} = {text}" if targets else text

    # -- entry checks ---------------------------------------------------------------------------
    # Entry checks of parameters and attributes read them past nn.Module.__getattr__
    # (`_guards.attr(self_fc1, "bias")`; a plain `self.fc1.bias` costs about 0.4 us a step), and
    # each submodule on the way once: the one a module check returned, or, when two checks or
    # more read through the same submodule, a local read once.

    def entry_plan(self) -> dict[tuple[Value, tuple], bool]:
        """Which (root, path)s the entry checks hold in locals: False for a submodule that its
        module check returns and a check reads through; True for an object two reads or more go
        through (`self.layers[0].fc` for `.weight` and `.bias`, then `self.layers[0]` for `.fc`
        and `.norm`), read into a local before the first check that needs it."""
        if self._entry_plan is not None:
            return self._entry_plan
        modules = set()
        reads: list[tuple[Value, tuple]] = []
        for op in self.func.body.ops:
            call = self._module_check_call(op.operands[0]) if isinstance(op, ops.GuardOp) else None
            if call is not None and _module_check_path(call) is not None:
                modules.add(_module_check_path(call))
                if op not in self.in_table:  # (a table's checks read from the root)
                    reads.append(_module_check_path(call))  # (a check reads through its parents too)
            elif isinstance(op, ops.EntryCheck) and op not in self.in_table:
                reads.append((op.operands[0], op.attributes["path"]))
                if isinstance(op, ops.CheckSizeOp):
                    reads += [(op.operands[index], path) for _, index, path, _ in op.attributes["symbols"]]
        reads = [(root, path) for root, path in reads if _reads_attributes(path)]
        prefixes = sorted({(root, path[:n]) for root, path in reads for n in range(1, len(path))},
                          key=lambda key: -len(key[1]))
        plan: dict[tuple[Value, tuple], bool] = {}
        for root, prefix in prefixes:  # the longest first: `reads` are what is still read from further up
            through = [(r, p) for r, p in reads if r is root and p[:len(prefix)] == prefix and len(p) > len(prefix)]
            if (root, prefix) in modules and through:
                plan[(root, prefix)] = False  # (its module check reads it from the root)
                reads = [read for read in reads if read not in through]
            elif len(through) > 1:
                plan[(root, prefix)] = True
                reads = [read for read in reads if read not in through] + [(root, prefix)]
        self._entry_plan = plan
        return plan

    def _bound_name(self, root: Value, path: tuple) -> str:
        return "_".join([self.var[root], *(str(part) for part in path)])

    def _nearest(self, root: Value, path: tuple) -> tuple[str, tuple]:
        """The local holding the longest bound prefix of `path` (the root's own name when none
        is), and the rest of the path."""
        for n in range(len(path), 0, -1):
            name = self.bound.get((root, path[:n]))
            if name is not None:
                return name, path[n:]
        return self.var[root], path

    def bind_prefixes(self, root: Value, path: tuple) -> None:
        """Before the first check that reads through an object the entry plan holds in a local,
        read it (after the ones it is read through)."""
        plan = self.entry_plan()
        for n in range(1, len(path)):
            key = (root, path[:n])
            if plan.get(key) and key not in self.bound:
                name = self.names.take(self._bound_name(*key))
                self.w.line(f"{name} = {self.read_text(*key)}")
                self.bound[key] = name

    def read_text(self, root: Value, path: tuple, plain_last: bool = False) -> str:
        """An expression for `root.<path>` for an entry check: from the nearest bound local on,
        attributes read with `_guards.attr` (`_guards.at` for several), or the last one with a
        plain read when `plain_last` (a Python attribute of the instance, which Python finds
        first); indices print as indexing."""
        if not _reads_attributes(path):
            return self.path_text(root, path)
        base, rest = self._nearest(root, path)
        if plain_last and rest and isinstance(rest[-1], str):
            return f"{_read_text(base, rest[:-1])}.{rest[-1]}"
        return _read_text(base, rest)

    def path_text(self, root: Value, path: tuple) -> str:
        out = self.var[root]
        for part in path:
            out += f"[{part}]" if isinstance(part, int) else f".{part}"
        return out

    def entry_check(self, op: ops.EntryCheck) -> None:
        a = op.attributes
        root = op.operands[0]
        self.bind_prefixes(root, a["path"])
        # (a Python value: read as Python does; one pinned to None may be a parameter, buffer or
        # submodule set to None, which a plain read finds only through nn.Module.__getattr__)
        plain_last = isinstance(op, ops.CheckValueOp) and a["expected"] is not None
        where = self.read_text(root, a["path"], plain_last)
        name = string_literal(self.path_text(root, a["path"]) if root.name is None
                              else self.path_text(root, a["path"]).replace(self.var[root], root.name, 1))
        if isinstance(op, ops.CheckTensorOp):
            args = [where, name]
            named = {"dtype": f"torch.{a['dtype']}" if a["dtype"] else None,
                     "device_type": string_literal(a["device"]) if a["device"] else None,
                     "shape": _literal(a["shape"]) if a["shape"] is not None else None}
            positional = True
            for key, text in named.items():
                if text is None:
                    positional = False
                elif positional:
                    args.append(text)
                else:
                    args.append(f"{key}={text}")
            prefix = optional_prefix(root.type, a["path"])
            if a["optional"] and prefix is None:
                args.append("optional=True")
            line = f"_guards.check_tensor({', '.join(args)})"
        elif isinstance(op, ops.CheckSizeOp):
            expected = a["expected"]
            for sym_name, index, path, dim in sorted(a["symbols"], key=lambda s: -len(s[0])):
                self.bind_prefixes(op.operands[index], path)
                expected = re.sub(rf"\b{re.escape(sym_name)}\b",
                                  f"{self.read_text(op.operands[index], path)}.size({dim})", expected)
            line = f"_guards.check_size({where}, {a['dim']}, {expected}, {name})"
            prefix = optional_prefix(root.type, a["path"]) if a["optional"] else None
            if a["optional"] and prefix is None:
                self.w.line(f"if {where} is not None:")
                with self.w.indent():
                    self.w.line(line)
                return
        else:
            line = f"_guards.check_value({where}, {_literal(a['expected'])}, {name})"
            prefix = None
        if prefix is not None:
            self.w.line(f"if {self.path_text(root, a['path'][:prefix])} is not None:")
            with self.w.indent():
                self.w.line(line)
        else:
            self.w.line(line)

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

    @contextmanager
    def suite(self) -> Iterator[None]:
        """An indented suite; `pass` when nothing but comments was written into it."""
        start = len(self.w.lines)
        with self.w.indent():
            yield
            if all(line.strip().startswith("#") for line in self.w.lines[start:]):
                self.w.line("pass")

    def statement(self, op: Operation) -> None:
        if isinstance(op, ops.ReturnOp):
            self.source_comment(op)
            self.kept_comments(op)
            value = op.operands[0] if op.operands else None
            if value is None:
                self.w.line("return")
            elif isinstance(value.owner, ops.TupleOp) and value.owner in self.folded and len(value.owner.operands) > 1:
                # (a 1-tuple goes through expr(), which keeps its trailing comma)
                self.w.line("return " + self.tuple_text(value.owner.operands))
            else:
                self.w.line("return " + self.expr(value).text)
            return
        if isinstance(op, (ops.YieldOp, ops.ConditionOp)):
            return  # printed by the op that owns the region
        if not op.results and is_effect_free(op):
            return
        if op.results and all(not r.uses for r in op.results) and is_effect_free(op):
            return  # dead and harmless
        if isinstance(op, ops.RefineOp):
            self.refine(op)
            return
        if op in self.in_table:
            if op in self.tables:
                self.w.line(self.entry_table(self.tables[op]))
            return
        if isinstance(op, ops.EntryCheck):  # right after the def line: no source comment
            self.entry_check(op)
            return
        if isinstance(op, ops.OpaqueOp):
            self.kept_python(op)
            return
        if not isinstance(op, ops.GuardOp):
            self.source_comment(op)
            self.kept_comments(op)
        if isinstance(op, ops.IfOp):
            self.if_statement(op)
        elif isinstance(op, (ops.ForRangeOp, ops.ForEachOp)):
            self.for_statement(op)
        elif isinstance(op, ops.WhileOp):
            self.while_statement(op)
        elif isinstance(op, ops.InplaceOp):
            target = self.expr(op.operands[0]).text
            self.w.line(f"{target} {op.attributes['op']}= {self.expr(op.operands[1]).text}")
            self.share(op.result, target)
        elif isinstance(op, ops.GuardOp) and (check := self.module_check(op.operands[0])) is not None:
            self.w.line(check)
        elif isinstance(op, ops.GuardOp):
            cond = self.expr(op.operands[0], PREC["not"] + 1).text
            self.w.line(f"if not {cond}:")
            with self.w.indent():
                self.w.line(f"raise _guards.GuardFailure({string_literal(op.attributes['reason'])})")
        elif isinstance(op, ops.IndexPutOp):
            self.w.line(f"{self.index_text(op)} = {self.expr(op.operands[-1]).text}")
        elif isinstance(op, ops.SetAttrOp):
            self.w.line(f"{self.expr(op.operands[0], PREC['atom']).text}.{op.attributes['attr']} = {self.expr(op.operands[1]).text}")
        elif isinstance(op, (ops.ListAppendOp, ops.ListExtendOp)):
            method = "append" if isinstance(op, ops.ListAppendOp) else "extend"
            self.w.line(f"{self.expr(op.operands[0], PREC['atom']).text}.{method}({self.expr(op.operands[1]).text})")
        elif isinstance(op, (ops.ListSetItemOp, ops.DictSetItemOp)):
            seq, index, value = (self.expr(v).text for v in op.operands)
            self.w.line(f"{self.expr(op.operands[0], PREC['atom']).text}[{index}] = {value}")
        elif isinstance(op, ops.Kernel) and len(op.results) > 1 and any(r.uses for r in op.results):
            targets = [self.name_of(r) if r.uses else "_" for r in op.results]
            self.w.line(f"{', '.join(targets)} = {self.op_expr(op).text}")
        elif (op.attributes.get("writeback") and not op.results[0].uses
              and isinstance(op.operands[1].owner, (ops.IfOp, ops.ForRangeOp, ops.ForEachOp, ops.WhileOp))):
            # a path that did not write hands back the tensor itself: no copy onto itself
            target, value = self.expr(op.operands[0]).text, self.expr(op.operands[1]).text
            self.w.line(f"if {value} is not {target}:")
            with self.w.indent():
                self.w.line(self.op_expr(op).text)
        elif isinstance(op, ops.RaiseOp):
            exc = op.attributes["exc"]
            if op.attributes.get("called", True):
                exc += f"({self.args_text(op.operands, op.attributes.get('kwnames', ()))})"
            self.w.line(f"raise {exc}")
        elif isinstance(op, ops.UnpackOp):
            targets = [self.name_of(r) if r.uses else "_" for r in op.results]
            lhs = ", ".join(targets) + ("," if len(targets) == 1 else "")
            self.w.line(f"{lhs} = {self.expr(op.operands[0]).text}")
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

    def kept_python(self, op: ops.OpaqueOp) -> None:
        """Python code permissive mode kept: its text, with the variables that hold its names."""
        a = op.attributes
        loc = op.loc
        if loc is not None:
            self.w.line(f"# kept as Python: {a['reason']}")
            self.last_line = (loc.file, loc.line)
        read: dict[str, str] = {}
        for name, value in zip(a["reads"], op.operands):
            text = self.expr(value).text
            if not text.isidentifier():  # a literal or expression: give it the name the code uses
                var = self.names.take(name)
                self.w.line(f"{var} = {text}")
                text = var
            read[name] = text
        written: dict[str, str] = {}
        if a["kind"] == "stmt":
            for name, result in zip(a["writes"], op.results):
                others = {v for n, v in read.items() if n != name}
                var = self.name_of(result) if result not in self.var else self.var[result]
                if var in others:
                    var = self.var[result] = self.names.take(name)
                if name in read and read[name] != var:
                    self.w.line(f"{var} = {read[name]}")  # the value it has if the code does not rebind it
                written[name] = var
        lines = self.python_text(op, read, written)
        if a["kind"] == "expr":
            # a value the source names keeps its name, used or not: `d = {...}` reads as written
            named = op.result.uses or op.result.name is not None
            lines[0] = f"{self.name_of(op.result, 'value')} = {lines[0]}" if named else lines[0]
        raw = set(a["raw_lines"])
        for i, text in enumerate(lines):
            if i in raw:
                self.w.lines.append(text)
            else:
                self.w.line(text)

    def kept_comments(self, op: Operation) -> None:
        """Say which parts of the statement are Python code kept as written (folded into it)."""
        pending = list(op.operands)
        while pending:
            owner = pending.pop().owner
            if isinstance(owner, Operation) and owner in self.folded:
                if isinstance(owner, ops.OpaqueOp) and owner.loc is not None:
                    self.w.line(f"# kept as Python: {owner.attributes['reason']}")
                pending += owner.operands

    def python_text(self, op: ops.OpaqueOp, read: dict[str, str], written: dict[str, str]) -> list[str]:
        """The lines of kept Python code with the variables (and module reads) put in."""
        a = op.attributes
        module = model_module_name(a["module"])
        for name in a["bare"]:
            if name in ("F", "math"):
                self.needs.add(name)
        lines = list(a["lines"])
        for line, col, end, name, kind in sorted(a["occurrences"], key=lambda o: (o[0], -o[1])):
            if kind == "super":  # super(Class, self): the generated function has no __class__ cell
                klass, first = name.split()
                text: str | None = f"super({module}.{klass}, {read.get(first, first)})"
            else:
                text = {"read": read.get(name), "write": written.get(name), "global": f"{module}.{name}"}[kind]
            if text is None:  # an expression's read of a name it binds (a walrus): as written
                continue
            lines[line] = lines[line][:col] + text + lines[line][end:]
        return lines

    # -- control flow ---------------------------------------------------------------------------
    def assign_results(self, results: list[Value]) -> list[str]:
        return [self.name_of(r) for r in results]

    def copies(self, targets: list[str], values: list[Value]) -> None:
        """Parallel assignment of `values` to `targets`, skipping ones already in place."""
        pairs = [(t, self.expr(v).text) for t, v in zip(targets, values)]
        pairs = [(t, e) for t, e in pairs if t != e]
        if not pairs:
            return
        if len(pairs) == 1:
            self.w.line(f"{pairs[0][0]} = {pairs[0][1]}")
        else:
            self.w.line(f"{', '.join(t for t, _ in pairs)} = {', '.join(e for _, e in pairs)}")

    def adopt_yields(self, block: Block, targets: list[str]) -> None:
        """Let values defined in `block` and only yielded take the result variable directly,
        unless the variable's current value is still read after that point."""
        term = block.terminator
        assert term is not None
        values = term.operands if isinstance(term, ops.YieldOp) else term.operands[1:]
        for t, v in zip(targets, values):
            owner = v.owner
            if not isinstance(owner, Operation) or owner.parent is not block or v in self.var or owner in self.folded:
                continue
            if isinstance(owner, (ops.UnpackOp, ops.InplaceOp, ops.RefineOp)):
                # `x += y` rebinds x whatever variable its result is given, and a refined value
                # has no statement of its own: the copy at the end of the block assigns it.
                continue
            holders = [w for w, name in self.var.items() if name == t and w is not v]
            if any(self._used_after(w, owner, block) for w in holders):
                continue
            self.var[v] = t

    def _used_after(self, value: Value, op: Operation, block: Block) -> bool:
        """Whether `value` is read by `op`'s successors in `block` (or ops nested in them)."""
        later = block.ops[block.ops.index(op) + 1:]
        for use in value.uses:
            user = use.op
            while user is not None and user.parent is not block:
                user = user.parent_op()
            if user is not None and user in later:
                return True
        return False

    def if_statement(self, op: ops.IfOp) -> None:
        self.reuse_incoming(op)
        targets = self.assign_results(op.results)
        for block in (op.then_block, op.else_block):
            self.adopt_yields(block, targets)
        before = self._assigned_before(op, targets)
        if before:  # `identity = x` then `if ...: identity = f(x)`, as the source reads, no `else:`
            self.copies(targets, op.else_block.terminator.operands)  # type: ignore[union-attr]
        self.w.line(f"if {self.expr(op.cond).text}:")
        for i, block in enumerate((op.then_block, op.else_block)):
            if i == 1:
                if before or not self._has_code(block, targets):
                    break
                self.w.line("else:")
            with self.suite():
                self.block(block)
                term = block.terminator
                assert term is not None
                if not any(isinstance(o, ops.RaiseOp) for o in block.ops):
                    self.copies(targets, term.operands)

    def refine(self, op: Operation) -> None:
        """A narrowed type needs no code: the refined value is the same object."""
        # (an atom: the refined value's text stands where a variable would, `(a / 2).sum()`)
        source = self.expr(op.operands[0], PREC["atom"]).text
        if op.result in self.var and self.var[op.result] != source:
            self.source_comment(op)
            self.w.line(f"{self.var[op.result]} = {source}")
        else:
            self.share(op.result, source)

    def reuse_incoming(self, op: ops.IfOp) -> None:
        """`if c: x = f(x)`: a result that one side passes through from before the if takes
        that value's variable, when nothing reads the old value afterwards."""
        taken = set()
        for i, r in enumerate(op.results):
            if r in self.var or r.name is None:
                continue
            for block in (op.then_block, op.else_block):
                y = block.terminator.operands[i]  # type: ignore[union-attr]
                while isinstance(y.owner, ops.RefineOp):
                    y = y.owner.operands[0]
                name = self.var.get(y)
                if name is None or name in taken or y.name != r.name or self._inside(y, op):
                    continue
                if not self._read_after(y, op, nested_ok=True):
                    self.var[r] = name
                    taken.add(name)
                    break

    def _inside(self, value: Value, op: Operation) -> bool:
        owner = value.owner
        node = owner if isinstance(owner, Operation) else owner.parent.parent if owner.parent else None  # type: ignore[union-attr]
        while node is not None:
            if node is op:
                return True
            node = node.parent_op()
        return False

    def _assigned_before(self, op: ops.IfOp, targets: list[str]) -> bool:
        """Whether the else side only assigns variables from before the if (names, not
        expressions), which the then side and the condition do not read: assigned before the
        if, the else side is left out."""
        block = op.else_block
        term = block.terminator
        if not isinstance(term, ops.YieldOp) or any(
                o not in self.folded and not isinstance(o, (ops.YieldOp, ops.RefineOp))
                and not (is_effect_free(o) and not any(r.uses for r in o.results)) for o in block.ops):
            return False
        copied = [(t, v) for t, v in zip(targets, term.operands) if t != self.expr_peek(v)]
        if not copied or any(self._inside(v, op) or not self.expr(v).text.isidentifier() for _, v in copied):
            return False
        names = {t for t, _ in copied}
        read = [op.cond] + [v for inner in op.then_block.ops for o in inner.walk() for v in o.operands]
        return not any(self.var.get(v) in names and not self._inside(v, op) for v in read)

    def _has_code(self, block: Block, targets: list[str]) -> bool:
        if any(op not in self.folded and not isinstance(op, (ops.YieldOp, ops.RefineOp)) and not (is_effect_free(op) and not any(r.uses for r in op.results)) for op in block.ops):
            return True
        term = block.terminator
        return any(t != self.expr_peek(v) for t, v in zip(targets, term.operands))  # type: ignore[union-attr]

    def expr_peek(self, value: Value) -> str:
        while value not in self.var and isinstance(value.owner, ops.RefineOp):
            value = value.owner.operands[0]  # printed as what it refines
        return self.var.get(value, "\0")

    def loop_variables(self, op: Operation, body: Block, n_extra: int) -> list[str]:
        """One variable per carried value, shared by the initial value (when it is not read
        later), the body argument, the result and the value yielded."""
        carried_args = body.args[n_extra:]
        names = []
        for i, r in enumerate(op.results):
            init = op.operands[len(op.operands) - len(op.results) + i]
            name = None
            if init in self.var and not self._read_after(init, op) and (init.name == r.name or r.name is None):
                name = self.var[init]
                if name in [self.var.get(a) for a in op.results if a in self.var]:
                    name = None
            if name is None:
                name = self.name_of(r)
            self.var[r] = name
            self.var[carried_args[i]] = name
            names.append(name)
        return names

    def _read_after(self, value: Value, op: Operation, nested_ok: bool = False) -> bool:
        """Whether `value` is read anywhere other than as an operand of `op` or before it
        (or, with `nested_ok`, inside `op`'s regions)."""
        block = op.parent
        assert block is not None
        position = block.ops.index(op)
        for use in value.uses:
            user = use.op
            if user is op:
                continue
            top = user
            while top is not None and top.parent is not block:
                top = top.parent_op()
            if nested_ok and top is op:
                continue
            if top is None or block.ops.index(top) >= position:
                return True
        return False

    def for_statement(self, op: ops.ForRangeOp | ops.ForEachOp) -> None:
        body = op.body
        inits = op.inits
        names = self.loop_variables(op, body, 1)
        self.copies(names, inits)
        self.adopt_yields(body, names)
        elem = body.args[0]
        elem_name = self.name_of(elem, "i" if isinstance(op, ops.ForRangeOp) else "item") if elem.uses else "_"
        if isinstance(op, ops.ForRangeOp):
            start, stop, step = (self.expr(v) for v in op.operands[:3])
            if step.text == "1":
                header = f"range({stop.text})" if start.text == "0" else f"range({start.text}, {stop.text})"
            else:
                header = f"range({start.text}, {stop.text}, {step.text})"
        else:
            header = self.expr(op.operands[0]).text
        self.w.line(f"for {elem_name} in {header}:")
        with self.suite():
            self.block(body)
            self.loop_tail(body, names)

    def loop_tail(self, body: Block, names: list[str]) -> None:
        term = body.terminator
        if isinstance(term, ops.ConditionOp):
            self.copies(names, term.operands[1:])
            keep = term.operands[0]
            negated = keep.owner
            if isinstance(negated, ops.UnaryOp) and negated.attributes["op"] == "not" and negated in self.folded:
                stop = self.expr(negated.operands[0]).text  # `if broke: break`, not `if not not broke`
            else:
                stop = "not " + self.expr(keep, PREC["not"] + 1).text
            self.w.line(f"if {stop}:")
            with self.w.indent():
                self.w.line("break")
        else:
            assert term is not None
            self.copies(names, term.operands)

    def while_statement(self, op: ops.WhileOp) -> None:
        names = self.loop_variables(op, op.after, 0)
        for a in op.before.args:
            self.var[a] = names[a.index]
        self.copies(names, op.operands)
        self.adopt_yields(op.after, names)
        cond_term = op.before.terminator
        assert isinstance(cond_term, ops.ConditionOp)
        simple = all(o in self.folded or isinstance(o, ops.ConditionOp) for o in op.before.ops)
        if simple:
            self.w.line(f"while {self.expr(cond_term.operands[0]).text}:")
            with self.suite():
                self.block(op.after)
                self.loop_tail(op.after, names)
            return
        self.w.line("while True:")
        with self.w.indent():
            self.block(op.before)
            self.w.line(f"if not {self.expr(cond_term.operands[0], PREC['not'] + 1).text}:")
            with self.w.indent():
                self.w.line("break")
            self.block(op.after)
            self.loop_tail(op.after, names)

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

    def _tuple_display(self, values: list[Value]) -> str:
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

    def spread_sizes(self, op: Operation) -> str | None:
        """`x.permute(0, 2, 3, 1)` for `x.permute((0, 2, 3, 1))`: the methods that take their sizes
        as one sequence or spread parse a tuple through a slower path (about 1.5 against 1.0 us a
        `permute`, 1.3 against 0.8 a `reshape`; many a call in channels-last models). Only a tuple
        written out (a literal or a display of one item or more) is spread."""
        if op.attributes["method"] not in SIZE_VARARG_METHODS or len(op.operands) != 2 or op.attributes.get("kwnames"):
            return None
        owner = op.operands[1].owner
        if isinstance(owner, ops.ConstantOp) and isinstance(owner.value, tuple) and owner.value \
                and all(type(v) is int for v in owner.value):
            return ", ".join(self.literal(v).text for v in owner.value)
        if isinstance(owner, ops.TupleOp) and owner.operands and owner in self.folded \
                and all(v.type == INT for v in owner.operands):
            return ", ".join(self.expr(v, PREC["if"]).text for v in owner.operands)
        return None

    def module_read(self, op: Operation) -> Expr:
        """A read of a submodule, parameter or buffer past nn.Module.__getattr__: `_guards.attr(m,
        "weight")`, `_guards.item(seq, 0)`, and for a chain of them folded into one another, one
        call for the path (`_guards.at(block1, "conv1.weight")`, as `block1.conv1.weight`)."""
        steps: list[str | int] = []
        while True:
            steps.append(op.attributes["attr"] if isinstance(op, ops.GetAttrOp) else op.operands[1].owner.value)  # type: ignore[union-attr]
            inner = op.operands[0].owner
            if not (isinstance(inner, Operation) and inner in self.folded and inner.results[0] not in self.var
                    and (isinstance(inner, ops.GetAttrOp) and _past_module_getattr(inner) or _module_item(inner))):
                break
            op = inner
        base = self.expr(op.operands[0], PREC["atom"]).text
        if len(steps) > 1:
            return Expr(f"_guards.at({base}, {string_literal('.'.join(str(s) for s in reversed(steps)))})", PREC["atom"])
        if isinstance(steps[0], int):
            return Expr(f"_guards.item({base}, {steps[0]})", PREC["atom"])
        return Expr(_read_text(base, (steps[0],)), PREC["atom"])

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

    def op_expr(self, op: Operation) -> Expr:
        a = op.attributes
        if isinstance(op, ops.ConstantOp):
            if a["value"].__class__ is str and op.result.type in (ScalarType("dtype"), ScalarType("memory_format")):
                return Expr(a["value"], PREC["atom"])
            return self.literal(a["value"])
        if isinstance(op, ops.UninitializedOp):
            return Expr("None", PREC["atom"])
        if isinstance(op, ops.RefineOp):
            return self.expr(op.operands[0])
        if isinstance(op, ops.BinaryOp):
            return self.binary_text(a["op"], op.operands[0], op.operands[1])
        if isinstance(op, ops.CompareOp):
            lhs = self.expr(op.operands[0], PREC["cmp"] + 1).text
            rhs = self.expr(op.operands[1], PREC["cmp"] + 1).text
            return Expr(f"{lhs} {a['op']} {rhs}", PREC["cmp"])
        if isinstance(op, ops.UnaryOp):
            if a["op"] == "not":
                return Expr(f"not {self.expr(op.operands[0], PREC['not']).text}", PREC["not"])
            return Expr(f"{a['op']}{self.expr(op.operands[0], PREC['unary']).text}", PREC["unary"])
        if isinstance(op, ops.TorchCallOp):
            callee = a["callee"]
            for long, short in FUNCTION_ALIASES:
                if callee.startswith(long):
                    callee = short + callee[len(long):]
                    self.needs.add("F")
            values = op.operands if a.get("kwnames") else op.operands[:len(op.operands) - _default_tail(a["callee"], op.operands)]
            return Expr(f"{callee}({self.args_text(values, a.get('kwnames', ()))})", PREC["atom"])
        if isinstance(op, ops.TensorMethodOp):
            obj = self.expr(op.operands[0], PREC["atom"]).text
            spread = self.spread_sizes(op)
            args = spread if spread is not None else self.args_text(op.operands[1:], a.get("kwnames", ()))
            return Expr(f"{obj}.{a['method']}({args})", PREC["atom"])
        if isinstance(op, ops.ModuleCallOp):
            obj = self.expr(op.operands[0], PREC["atom"]).text
            return Expr(f"{obj}({self.args_text(op.operands[1:], a.get('kwnames', ()))})", PREC["atom"])
        if isinstance(op, ops.MethodCallOp):
            obj = self.expr(op.operands[0], PREC["atom"]).text
            return Expr(f"{obj}.{a['method']}({self.args_text(op.operands[1:], a.get('kwnames', ()))})", PREC["atom"])
        if isinstance(op, ops.FormatOp):
            return self.format_expr(op)
        if isinstance(op, ops.OpaqueOp):  # a one-line expression kept as Python, folded into its user
            read = {n: _attribute_safe(self.expr(v, PREC["atom"]).text) for n, v in zip(a["reads"], op.operands)}
            return Expr(self.python_text(op, read, {})[0], PREC["atom"] if a.get("atom") else 0)
        if isinstance(op, ops.Kernel):  # the module's launcher of the kernel (codegen/launcher_text.py kernel_args)
            return Expr(f"{a['name']}({self.args_text(list(kernel_args(op).values), ())})", PREC["atom"])
        if isinstance(op, ops.FuncCallOp):
            return Expr(f"{function_name(a['callee'])}({self.args_text(op.operands, ())})", PREC["atom"])
        if isinstance(op, ops.ComputedOnceOp):  # (ir/passes/hoist.py)
            self.needs.add("_prepacked")
            n = a["sources"]
            parts = [function_name(a["callee"]), self._tuple_display(op.operands[:n])]
            if op.operands[n:]:
                parts.append(self._tuple_display(op.operands[n:]))
            return Expr(f"_prepacked.computed_once({', '.join(parts)})", PREC["atom"])
        if isinstance(op, ops.TakeBuffersOp):  # (ir/passes/plan.py: buffers kept between calls)
            self.needs.add("_buffers")
            return Expr(f"_buffers.take({string_literal(a['key'])})", PREC["atom"])
        if isinstance(op, ops.BufferOp):
            buffers, sizes = (self.expr(v, PREC["atom"]).text for v in op.operands)
            return Expr(f"{buffers}.get({a['slot']}, {sizes}, torch.{a['dtype']})", PREC["atom"])
        if isinstance(op, ops.GiveBuffersOp):
            return Expr(f"_buffers.give({self.expr(op.operands[0]).text})", PREC["atom"])
        if isinstance(op, ops.BuiltinCallOp):
            if a["callee"].startswith("math."):
                self.needs.add("math")
            if a["callee"].startswith(("_prepacked.", "_stacking.")):
                self.needs.add(a["callee"].partition(".")[0])
            return Expr(f"{a['callee']}({self.args_text(op.operands, ())})", PREC["atom"])
        if isinstance(op, ops.GetAttrOp):
            if _past_module_getattr(op):
                return self.module_read(op)
            return Expr(f"{self.expr(op.operands[0], PREC['atom']).text}.{a['attr']}", PREC["atom"])
        if isinstance(op, ops.TupleOp):
            if len(op.operands) == 1:
                return Expr(f"({self.expr(op.operands[0], PREC['if']).text},)", PREC["atom"])
            return Expr(f"({self.tuple_text(op.operands)})", PREC["atom"])
        if isinstance(op, ops.ListOp):
            return Expr("[" + ", ".join(self.expr(v, PREC["if"]).text for v in op.operands) + "]", PREC["atom"])
        if isinstance(op, ops.CheckGlobalOp):
            name = string_literal(f"{a['module'] or PurePath(op.loc.file if op.loc else '').stem}.{a['symbol']}")
            return Expr(f"_guards.check_value({model_module_name(a['module'])}.{a['symbol']}, {_literal(a['expected'])}, "
                        f"{name})", PREC["atom"])
        if isinstance(op, ops.CheckNoAutogradOp):  # (of the entry's arguments: specialize put it there)
            method = bool(self.func.args) and isinstance(self.func.args[0].type, ModuleType)
            args = self.func.args[1:] if method else self.func.args
            module = self.expr(self.func.args[0]).text if method else "None"
            listed = ", ".join(self.expr(v).text for v in args) + ("," if len(args) == 1 else "")
            return Expr(f"_guards.check_no_autograd({module}, ({listed}), {{}})", PREC["atom"])
        if isinstance(op, ops.CheckLookupOp):
            module = model_module_name(a["module"])
            # (its arguments as compiled for; where an entry check does not pin one, as they are now)
            pinned = iter(op.operands)
            args = [f"{module}.{value}" if kind == "global" else
                    self.expr(next(pinned)).text if op.operands else _literal(value) for kind, value in a["args"]]
            returns = f"{model_module_name(a['returns'][0])}.{a['returns'][1]}"
            where = string_literal(f"{a['callee']}(...)")  # (no line number: one inserted above would change it)
            return Expr(f"_guards.check_lookup({module}.{a['callee']}({', '.join(args)}), {returns}, {where})", PREC["atom"])
        if isinstance(op, ops.DictOp):
            return Expr("{" + ", ".join(f"{string_literal(k)}: {self.expr(v, PREC['if']).text}" for k, v in zip(a["keys"], op.operands))
                        + "}", PREC["atom"])
        if isinstance(op, ops.SpreadOp):
            parts = [("*" + self.expr(v, PREC["atom"]).text) if starred else self.expr(v, PREC["if"]).text
                     for v, starred in zip(op.operands, a["starred"])]
            return Expr("(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")", PREC["atom"])
        if isinstance(op, ops.GetItemOp):
            if _module_item(op):  # a layer of a Sequential: the fast read
                return self.module_read(op)
            return Expr(f"{self.expr(op.operands[0], PREC['atom']).text}[{self.expr(op.operands[1]).text}]", PREC["atom"])
        if isinstance(op, ops.SliceOp):
            parts = ["" if isinstance(v.owner, ops.ConstantOp) and v.owner.value is None else self.expr(v).text
                     for v in op.operands[1:]]
            text = ":".join(parts[:2]) + (f":{parts[2]}" if parts[2] else "")
            return Expr(f"{self.expr(op.operands[0], PREC['atom']).text}[{text}]", PREC["atom"])
        if isinstance(op, ops.IndexOp):
            return Expr(self.index_text(op), PREC["atom"])
        if isinstance(op, ops.IfOp):
            return self.if_expr(op)
        raise NotImplementedError(f"no Python form for {op.name}")

    def format_expr(self, op: Operation) -> Expr:
        """An f-string; a value whose text cannot sit inside one (a quote, a backslash) goes
        through format(), which is what the f-string calls."""
        values = iter(op.operands)
        pieces: list[tuple[str, str]] = []  # (f-string text, format() form)
        for part in op.attributes["parts"]:
            if part[0] == "text":
                text = part[1]
                escaped = text.encode("unicode_escape").decode("ascii").replace('"', '\\"')
                pieces.append((escaped.replace("{", "{{").replace("}", "}}"), string_literal(text)))
                continue
            _, conversion, spec = part
            inner = self.expr(next(values), PREC["if"]).text
            ok = not any(c in inner for c in "\\\"'{}") and all(c not in spec for c in "\\\"'{}")
            if ":" in inner or "!" in inner.replace("!=", ""):
                inner = f"({inner})"
            conv = f"!{conversion}" if conversion else ""
            fspec = f":{spec}" if spec else ""
            wrapped = {"r": "repr", "s": "str", "a": "ascii"}.get(conversion or "")
            plain = f"{wrapped}({inner})" if wrapped else inner
            pieces.append((f"{{{inner}{conv}{fspec}}}" if ok else "\0",
                           f"format({plain}, {string_literal(spec)})"))
        if all(f != "\0" for f, _ in pieces):
            return Expr('f"' + "".join(f for f, _ in pieces) + '"', PREC["atom"])
        if not pieces:
            return Expr('""', PREC["atom"])
        return Expr('"".join((' + ", ".join(p for _, p in pieces) + ",))", PREC["atom"])

    def binary_text(self, op: str, lhs: Value, rhs: Value) -> Expr:
        prec = PREC[op] if op in PREC else PREC["|"]
        if op == "**":
            left = self.expr(lhs, PREC["**"] + 1).text
            right = self.expr(rhs, PREC["unary"]).text
        else:
            left = self.expr(lhs, prec).text
            right = self.expr(rhs, prec + 1).text
        return Expr(f"{left} {op} {right}", prec)

    def if_expr(self, op: ops.IfOp) -> Expr:
        then_v = op.then_block.terminator.operands[0]  # type: ignore[union-attr]
        else_v = op.else_block.terminator.operands[0]  # type: ignore[union-attr]
        cond = op.cond
        else_const = else_v.owner if isinstance(else_v.owner, ops.ConstantOp) else None
        then_const = then_v.owner if isinstance(then_v.owner, ops.ConstantOp) else None
        if else_const is not None and else_const.value is False and then_v.type == cond.type:
            return Expr(f"{self.expr(cond, PREC['and']).text} and {self.expr(then_v, PREC['and'] + 1).text}", PREC["and"])
        if then_const is not None and then_const.value is True and else_v.type == cond.type:
            return Expr(f"{self.expr(cond, PREC['or']).text} or {self.expr(else_v, PREC['or'] + 1).text}", PREC["or"])
        return Expr(
            f"{self.expr(then_v, PREC['if'] + 1).text} if {self.expr(cond, PREC['if'] + 1).text} else {self.expr(else_v, PREC['if']).text}",
            PREC["if"],
        )

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

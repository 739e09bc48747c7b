"""Entry checks in the emitted function: the checks of its arguments' types (`guards`), module
checks (`_guards.check_module`), the checks of tensors and values below a module argument
(`entry_check`) or, where there are ENTRY_TABLE_MIN of them or more, one module-level table of
them (`entry_table`: `_guards.check_entry(self, <function>_checks)`), and the guards of module
state (`check_global`, `check_no_autograd`, `check_lookup`).

Entry checks of parameters and attributes read them past nn.Module.__getattr__
(`_guards.attr(self_fc1, "bias")`; a plain `self.fc1.bias` costs about 0.4 us a step), and
each submodule on the way once: the one a module check returned, or, when two checks or
more read through the same submodule, a local read once (`entry_plan`).
"""

from __future__ import annotations

import re
from pathlib import PurePath

from codegen.names import function_name, model_module_name
from codegen.pyformat import LINE_LENGTH as FORMATTED_LENGTH
from codegen.python_emitter import PythonEmitter, Rules
from codegen.python_text import PREC, Expr, attribute_path, python_literal, string_literal
from ir.core import ops
from ir.core.graph import Operation, Value
from ir.core.helpers import PLAIN_MODULE
from ir.core.types import DataclassType, ModuleType, OptionalType, TensorType, TupleType, Type
from ir.passes.inline import guard_prefix_end

RULES = Rules()

# A function with this many entry checks below a module argument or more makes them with one
# `_guards.check_entry(self, <table>)` call, the table a module-level constant beside it.
ENTRY_TABLE_MIN = 3
TABLE_WIDTH = 100  # columns a long row of an entry-check table fills (as the C++ kernels' lines)


@RULES.statement(ops.GuardOp, quoted=False)
def guard(em: PythonEmitter, op: Operation) -> None:
    if in_table(em, op):
        return
    check = module_check(em, op.operands[0])
    if check is not None:
        em.w.line(check)
        return
    cond = em.expr(op.operands[0], PREC["not"] + 1).text
    em.w.line(f"if not {cond}:")
    with em.w.indent():
        em.w.line(f"raise _guards.GuardFailure({string_literal(op.attributes['reason'])})")


@RULES.statement(ops.EntryCheck, quoted=False)  # (right after the def line: no source comment)
def entry_check_statement(em: PythonEmitter, op: Operation) -> None:
    if not in_table(em, op):
        entry_check(em, op)  # type: ignore[arg-type]


def in_table(em: PythonEmitter, op: Operation) -> bool:
    """Whether a table holds the check `op`; the table's line is printed at its first check."""
    if op not in em.in_table:
        return False
    if op in em.tables:
        em.w.line(entry_table(em, em.tables[op]))
    return True



@RULES.expression(ops.CheckGlobalOp)
def check_global(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    name = string_literal(f"{a['module'] or PurePath(op.loc.file if op.loc else '').stem}.{a['symbol']}")
    return Expr(f"_guards.check_value({model_module_name(a['module'])}.{a['symbol']}, {python_literal(a['expected'])}, "
                f"{name})", PREC["atom"])


@RULES.expression(ops.CheckNoAutogradOp)  # (of the entry's arguments: specialize put it there)
def check_no_autograd(em: PythonEmitter, op: Operation) -> Expr:
    method = bool(em.func.args) and isinstance(em.func.args[0].type, ModuleType)
    args = em.func.args[1:] if method else em.func.args
    module = em.expr(em.func.args[0]).text if method else "None"
    listed = ", ".join(em.expr(v).text for v in args) + ("," if len(args) == 1 else "")
    return Expr(f"_guards.check_no_autograd({module}, ({listed}), {{}})", PREC["atom"])


@RULES.expression(ops.CheckLookupOp)
def check_lookup(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    module = model_module_name(a["module"])
    # (its arguments as compiled for; where an entry check does not pin one, as they are now)
    pinned = iter(op.operands)
    args = [f"{module}.{value}" if kind == "global" else
            em.expr(next(pinned)).text if op.operands else python_literal(value) for kind, value in a["args"]]
    returns = f"{model_module_name(a['returns'][0])}.{a['returns'][1]}"
    where = string_literal(f"{a['callee']}(...)")  # (no line number: one inserted above would change it)
    return Expr(f"_guards.check_lookup({module}.{a['callee']}({', '.join(args)}), {returns}, {where})", PREC["atom"])


# -- argument and module checks --------------------------------------------------------------------
def guards(em: PythonEmitter) -> None:
    """`check_type` for each argument of a variant compiled for one member of its Union
    annotation (FuncOp `arg_classes`: a tensor's is `check_tensor`), first, as later checks
    read into it; `check_tensor` for each tensor argument that no entry check of the body
    covers."""
    for name, cls in em.func.attributes.get("arg_classes", ()):
        if name.startswith("self."):  # an attribute of the module (`self.padding`)
            read = f"{em.var[em.func.args[0]]}.{name[len('self.'):]}"  # (as the body reads it)
            em.w.line(f"_guards.check_type({read}, {'torch.Tensor' if cls == 'Tensor' else cls}, "
                      f"{string_literal(name)})")
        elif cls != "Tensor":
            arg = next(a for a in em.func.args if a.name == name)
            em.w.line(f"_guards.check_type({em.var[arg]}, {cls}, {string_literal(name)})")
    checked = {op.operands[0] for op in em.func.body.ops
               if isinstance(op, ops.CheckTensorOp) and not op.attributes["path"]}
    for arg in em.func.args:
        if isinstance(arg.type, TensorType) and arg not in checked:
            em.w.line(f'_guards.check_tensor({em.var[arg]}, "{arg.name}")')


def module_check(em: PythonEmitter, cond: Value) -> str | None:
    """`_guards.check_module(...)` for a guard on `_guards.plain_module(...)`: one line that
    raises GuardFailure itself. It returns the submodule: when entry checks below read
    through it (`self.fc1.bias`), the line binds it (`self_fc1 = _guards.check_module(self,
    "fc1", ...)`) and they read on from there."""
    call = module_check_call(em, cond)
    if call is None:
        return None
    text = f"_guards.check_module({em.args_text(list(call.operands), ())})"
    key = _module_check_path(call)
    if key is not None:  # from the nearest submodule a check before returned, not from the root
        base, rest = _nearest(em, key[0], key[1][:-1])
        if base != em.var[key[0]]:
            path = string_literal(".".join(str(step) for step in (*rest, key[1][-1])))
            text = f"_guards.check_module({', '.join([base, path, em.args_text(list(call.operands[2:]), ())])})"
    if key is None or key not in entry_plan(em) or key in em.bound:
        return text
    name = em.bound[key] = em.names.take(_bound_name(em, *key))
    return f"{name} = {text}"


def module_check_call(em: PythonEmitter, cond: Value) -> Operation | None:
    call = cond.owner
    if isinstance(call, ops.BuiltinCallOp) and call.callee == PLAIN_MODULE.name \
            and call in em.folded:
        return call
    return None


def _module_check_path(call: Operation) -> tuple[Value, tuple] | None:
    """(root, path) of the submodule a `plain_module` call checks; None where a part of the path
    may be None ("downsample?.0") or the path is not a constant."""
    path = call.operands[1].owner
    if not (isinstance(path, ops.ConstantOp) and isinstance(path.attributes["value"], str)) \
            or "?" in path.attributes["value"] or not path.attributes["value"]:
        return None
    return call.operands[0], tuple(int(p) if p.lstrip("-").isdigit() else p for p in path.attributes["value"].split("."))


# -- tables ----------------------------------------------------------------------------------------
def entry_tables(em: PythonEmitter) -> dict[Operation, list[Operation]]:
    """The entry checks that print as a table: for each module argument with
    ENTRY_TABLE_MIN or more checks of what hangs below it (submodules whose paths, classes
    and conditions are constants; tensors and values read through attributes, outside any
    `if ... is not None:`), those checks in order, keyed by the first."""
    groups: dict[Value, list[Operation]] = {}
    for op in em.func.body.ops[:guard_prefix_end(em.func)]:
        root = _table_root(em, op)
        if root is not None and root in em.func.args and isinstance(root.type, ModuleType):
            groups.setdefault(root, []).append(op)
    return {group[0]: group for group in groups.values() if len(group) >= ENTRY_TABLE_MIN}


def _table_root(em: PythonEmitter, op: Operation) -> Value | None:
    """The root of a check that a table can hold; None for any other op."""
    if isinstance(op, ops.GuardOp):
        call = module_check_call(em, op.operands[0])
        if call is not None and all(isinstance(v.owner, ops.ConstantOp) and isinstance(v.owner.attributes["value"], str)
                                    for v in call.operands[1:]):
            return call.operands[0]
    elif isinstance(op, (ops.CheckTensorOp, ops.CheckValueOp)) and _reads_attributes(op.attributes["path"]) \
            and optional_prefix(op.operands[0].type, op.attributes["path"]) is None:
        return op.operands[0]
    return None


def entry_table(em: PythonEmitter, checks: list[Operation]) -> str:
    """The module-level table of `checks`, one row per submodule checked, with what is read
    there (`<function>_checks = _guards.entry_checks(("block1.conv1", "torch.nn.Conv2d",
    "zeros_padding", {"weight": [32, 16, 3, 3], "bias": None, ...}), ...)`: a list is a
    tensor's shape, of the table's most common dtype and device, `tensors=`), and the line
    that makes the checks, binding the submodules that checks outside the table read through
    (`self_block1 = _guards.check_entry(self, <function>_checks)`)."""
    root = _table_root(em, checks[0])
    assert root is not None
    rows: dict[str, list[str]] = {}  # path -> qualname and conditions (a row of attributes only: none)
    attributes: dict[str, list[str]] = {"": []}  # path -> `"name": expected`
    keys: list[tuple[str, tuple[Value, tuple] | None]] = []  # (path, entry-plan key) of each module row
    for op in checks:
        if isinstance(op, ops.GuardOp):
            call = module_check_call(em, op.operands[0])
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
            expected = python_literal(a["expected"])
            if isinstance(a["expected"], list):  # (a bare list is a tensor's shape)
                expected = f"_guards.ListValue({expected})"
        elif (a["dtype"], a["device"]) == common and a["shape"] is not None:
            expected = python_literal(list(a["shape"]))
        else:
            dtype = f"torch.{a['dtype']}" if a["dtype"] else "None"
            device = string_literal(a["device"]) if a["device"] else "None"
            shape = python_literal(a["shape"]) if a["shape"] is not None else "None"
            expected = f"_guards.TensorCheck({dtype}, {device}, {shape})"
        attributes[row].append(f"{string_literal(name + ('?' if op.attributes.get('optional') else ''))}: {expected}")
    returned = [(path, key) for path, key in keys if key is not None and entry_plan(em).get(key) is False]
    suffix = "" if root is em.func.args[0] else f"_{em.var[root]}"
    table = em.names.take(f"{function_name(em.func.sym_name)}{suffix}_checks")
    entries = _alike_rows([(path, rows.get(path, []), attributes[path])
                           for path in attributes if path in rows or attributes[path]])
    keywords = [f"tensors=(torch.{common[0]}, {string_literal(common[1])})"] if common else []
    if returned:
        keywords.append(f"returns={python_literal(tuple(path for path, _ in returned))}")
    if root.name != "self":
        keywords.append(f"root={string_literal(root.name or em.var[root])}")
    em.module_lines += _table_lines(f"{table} = _guards.entry_checks(", entries, keywords)
    targets = []
    for _, key in returned:
        assert key is not None
        em.bound[key] = em.names.take(_bound_name(em, *key))
        targets.append(em.bound[key])
    text = f"_guards.check_entry({em.var[root]}, {table})"
    return f"{', '.join(targets)} = {text}" if targets else text


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


# -- checks as lines -------------------------------------------------------------------------------
def entry_check(em: PythonEmitter, op: ops.EntryCheck) -> None:
    a = op.attributes
    root = op.operands[0]
    bind_prefixes(em, root, a["path"])
    # (a Python value: read as Python does; one pinned to None may be a parameter, buffer or
    # submodule set to None, which a plain read finds only through nn.Module.__getattr__)
    plain_last = isinstance(op, ops.CheckValueOp) and a["expected"] is not None
    where = read_text(em, root, a["path"], plain_last)
    name = string_literal(path_text(em, root, a["path"]) if root.name is None
                          else path_text(em, root, a["path"]).replace(em.var[root], root.name, 1))
    if isinstance(op, ops.CheckTensorOp):
        args = [where, name]
        named = {"dtype": f"torch.{a['dtype']}" if a["dtype"] else None,
                 "device_type": string_literal(a["device"]) if a["device"] else None,
                 "shape": python_literal(a["shape"]) if a["shape"] is not None else None}
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
            bind_prefixes(em, op.operands[index], path)
            expected = re.sub(rf"\b{re.escape(sym_name)}\b",
                              f"{read_text(em, op.operands[index], path)}.size({dim})", expected)
        line = f"_guards.check_size({where}, {a['dim']}, {expected}, {name})"
        prefix = optional_prefix(root.type, a["path"]) if a["optional"] else None
        if a["optional"] and prefix is None:
            em.w.line(f"if {where} is not None:")
            with em.w.indent():
                em.w.line(line)
            return
    else:
        line = f"_guards.check_value({where}, {python_literal(a['expected'])}, {name})"
        prefix = None
    if prefix is not None:
        em.w.line(f"if {path_text(em, root, a['path'][:prefix])} is not None:")
        with em.w.indent():
            em.w.line(line)
    else:
        em.w.line(line)


def entry_plan(em: PythonEmitter) -> dict[tuple[Value, tuple], bool]:
    """Which (root, path)s the entry checks hold in locals: False for a submodule that its
    module check returns and a check reads through; True for an object two reads or more go
    through (`self.layers[0].fc` for `.weight` and `.bias`, then `self.layers[0]` for `.fc`
    and `.norm`), read into a local before the first check that needs it."""
    if em.entry_locals is not None:
        return em.entry_locals
    modules = set()
    reads: list[tuple[Value, tuple]] = []
    for op in em.func.body.ops:
        call = module_check_call(em, op.operands[0]) if isinstance(op, ops.GuardOp) else None
        if call is not None and _module_check_path(call) is not None:
            modules.add(_module_check_path(call))
            if op not in em.in_table:  # (a table's checks read from the root)
                reads.append(_module_check_path(call))  # (a check reads through its parents too)
        elif isinstance(op, ops.EntryCheck) and op not in em.in_table:
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
    em.entry_locals = plan
    return plan


def _bound_name(em: PythonEmitter, root: Value, path: tuple) -> str:
    return "_".join([em.var[root], *(str(part) for part in path)])


def _nearest(em: PythonEmitter, root: Value, path: tuple) -> tuple[str, tuple]:
    """The local holding the longest bound prefix of `path` (the root's own name when none
    is), and the rest of the path."""
    for n in range(len(path), 0, -1):
        name = em.bound.get((root, path[:n]))
        if name is not None:
            return name, path[n:]
    return em.var[root], path


def bind_prefixes(em: PythonEmitter, root: Value, path: tuple) -> None:
    """Before the first check that reads through an object the entry plan holds in a local,
    read it (after the ones it is read through)."""
    plan = entry_plan(em)
    for n in range(1, len(path)):
        key = (root, path[:n])
        if plan.get(key) and key not in em.bound:
            name = em.names.take(_bound_name(em, *key))
            em.w.line(f"{name} = {read_text(em, *key)}")
            em.bound[key] = name


def read_text(em: PythonEmitter, root: Value, path: tuple, plain_last: bool = False) -> str:
    """An expression for `root.<path>` for an entry check: from the nearest bound local on,
    attributes read with `_guards.attr` (`_guards.at` for several), or the last one with a
    plain read when `plain_last` (a Python attribute of the instance, which Python finds
    first); indices print as indexing."""
    if not _reads_attributes(path) or _through_records(root.type, path):
        return path_text(em, root, path)
    base, rest = _nearest(em, root, path)
    if plain_last and rest and isinstance(rest[-1], str):
        return f"{attribute_path(base, rest[:-1])}.{rest[-1]}"
    return attribute_path(base, rest)


def _through_records(t: Type, path: tuple) -> bool:
    """Whether `path` reads fields of dataclasses and items of tuples only (plain reads: no
    module's `__getattr__` on the way)."""
    for part in path:
        t = t.elem if isinstance(t, OptionalType) else t
        if isinstance(t, DataclassType) and part in t.fields:
            t = t.elems[t.fields.index(part)]
        elif isinstance(t, TupleType) and isinstance(part, int) and 0 <= part < len(t.elems):
            t = t.elems[part]
        else:
            return False
    return True


def path_text(em: PythonEmitter, root: Value, path: tuple) -> str:
    out = em.var[root]
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _reads_attributes(path: tuple) -> bool:
    """Whether an entry check's path reads attributes (of a module), not only indexes a tuple."""
    return any(isinstance(part, str) for part in path)


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

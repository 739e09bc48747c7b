"""Assemble the compiled module: header, imports, one function per compiled function, and the
table the runtime dispatches through."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codegen.autograd_kernels import emit_autograd_functions
from codegen.kernel_launchers import emit_kernels
from codegen.kernel_names import name_kernels
from codegen.names import function_name, model_module_name
from codegen.pyformat import format_python
from codegen.python_function import FunctionEmitter
from codegen.writer import Writer
from ir.core.graph import Program
from ir.core.helpers import AUTOGRAD, GUARDS, KERNELS, MODULES
from ir.core.ops import CheckGlobalOp, CheckLookupOp, FuncOp, OpaqueOp, TupleOp
from ir.kernel.ops import AutogradKernelOp, Kernel
from runtime.loader import with_body_hash

FORMAT = 1


@dataclass(frozen=True)
class Header:
    source_file: str  # relative to the compiled module's directory
    source_hash: str
    regenerate: str  # the command that regenerates this file
    torchscribe_version: str
    torch_version: str  # major.minor
    # (path relative to the compiled module's directory, source hash) of every other file whose
    # @script code the module holds, sorted; written as SOURCES when there is any
    sources: tuple[tuple[str, str], ...] = ()
    # (distribution, version) of every installed library whose code the module holds (a model
    # from torchvision); written as LIBRARIES when there is any
    libraries: tuple[tuple[str, str], ...] = ()
    permissive: bool = False  # compiled with --permissive: written as PERMISSIVE = True
    # (script_model factory, "module.Class" of the model it returned): written as MODELS; the
    # runtime runs the factory's entry only for an instance of exactly that class
    models: tuple[tuple[str, str], ...] = ()
    # the project's [tool.torchscribe] settings, when not the defaults: written as SETTINGS
    # (transpiler/settings.py), so that a change of them makes the module stale
    settings: dict[str, list[str]] | None = None


@dataclass(frozen=True)
class ForAutograd:
    """In a COMPILED entry, before its generic function: the function for the calls autograd
    records (runtime.autograd_kernels.ForAutograd)."""

    sym: str


def _entry_text(sym: str | tuple[str, ...] | ForAutograd | None) -> str:
    """One function of a COMPILED entry: None where there is no generic code, and for an entry
    with Union parameters, its generic functions (one per member) as one."""
    if isinstance(sym, ForAutograd):
        return f"_autograd.ForAutograd({function_name(sym.sym)})"
    if isinstance(sym, tuple):
        return f"_guards.either({', '.join(function_name(s) for s in sym)})"
    return function_name(sym) if sym else "None"


def _share_tables(lines: list[str], seen: dict[str, str]) -> list[str]:
    """Module-level statements (`X_checks = _guards.entry_checks(...)`, between `# fmt: off` and
    `# fmt: on` where long), each one that repeats an earlier one's value (the code for autograd
    compiled from the same example as a specialisation checks what it checks) as a name for it."""
    statements: list[list[str]] = []
    depth, fenced = 0, False  # (open brackets; inside `# fmt: off`)
    for line in lines:
        if not statements or depth == 0 and not fenced:
            statements.append([])
        statements[-1].append(line)
        fenced = line == "# fmt: off" or fenced and line != "# fmt: on"
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
    out: list[str] = []
    for statement in statements:
        head = next((i for i, line in enumerate(statement) if " = " in line and not line[0].isspace()), None)
        if head is None:
            out += statement
            continue
        name, _, value = statement[head].partition(" = ")
        key = "\n".join([value, *(line for line in statement[head + 1:] if line != "# fmt: on")])
        if key in seen:
            out.append(f"{name} = {seen[key]}")
        else:
            seen[key] = name
            out += statement
    return out


def emit_module(program: Program, header: Header, entries: Mapping[str, str | tuple[Any, ...]],
                source_lines: dict[str, list[str]] | list[str] | None) -> str:
    """`entries` maps the runtime's COMPILED keys ("MyCell.forward") to function sym_names (a
    tuple: the specialisations to try in order, then the generic function, itself a tuple of
    one function per member for an entry with Union parameters);
    `source_lines` holds the lines of each file by the name locations give (a list: those of the
    program's own file), for the comments that quote the source."""
    if isinstance(source_lines, list):
        source_lines = {program.source_file: source_lines}
    name_kernels(program, {function_name(f.sym_name) for f in program.funcs if isinstance(f, FuncOp)}, source_lines)
    # (the functions left: name_kernels drops a group's function of torch ops that another's serves)
    reserved = {function_name(f.sym_name) for f in program.funcs if isinstance(f, FuncOp)}
    every = [op for op in program.walk() if isinstance(op, Kernel)]
    # (a group autograd records is a function object of its own kernels: bound after the functions)
    grouped = [op for op in every if isinstance(op, AutogradKernelOp)]
    kernels = [op for op in every if not isinstance(op, AutogradKernelOp)]
    reserved |= {k.kernel_name for k in grouped} | ({AUTOGRAD.alias} if grouped else set())
    reserved |= {k.kernel_name for k in kernels} | ({"KERNELS_CPP", KERNELS.alias, "_lib"} if kernels else set())
    # Kept Python code (permissive mode) reads module-level names through the model's modules.
    model_modules = sorted({op.module for op in program.walk() if isinstance(op, OpaqueOp)
                            and any(o[4] in ("global", "super") for o in op.occurrences)}
                           | {m for op in program.walk() if isinstance(op, CheckLookupOp) for m in (op.module, op.returns[0])}
                           | {op.module for op in program.walk() if isinstance(op, CheckGlobalOp)}
                           | {op.module for op in program.walk() if isinstance(op, TupleOp) and op.named})
    reserved |= {model_module_name(m) for m in model_modules}
    bodies: list[list[str]] = []
    needs: set[str] = set()
    tables_seen: dict[str, str] = {}
    for func in program.funcs:
        assert isinstance(func, FuncOp)
        emitter = FunctionEmitter(func, source_lines, reserved)
        body = emitter.emit()
        # (module-level constants the function reads: above it)
        tables = _share_tables(emitter.module_lines, tables_seen)
        bodies.append(tables + ["", ""] + body if tables else body)
        needs |= emitter.needs
    w = Writer()
    w.line(f"# Generated by torchscribe {header.torchscribe_version} from {header.source_file}. Do not edit.")
    w.line(f"# Regenerate with: {header.regenerate}")
    w.line("from __future__ import annotations")
    w.blank()
    if "math" in needs:
        w.line("import math")
    if "Optional" in needs:
        w.line("from typing import Optional")
    if needs & {"math", "Optional"}:
        w.blank()
    w.line("import torch")
    if "F" in needs:
        w.line("import torch.nn.functional as F")
    w.line("from torch import Tensor")
    w.blank()
    needs |= {GUARDS.alias} | ({AUTOGRAD.alias} if grouped else set()) | ({KERNELS.alias} if kernels else set())
    for module in MODULES:
        if module.alias in needs:
            w.line(module.import_line)
    w.blank()
    w.line(f"TORCHSCRIBE_FORMAT = {FORMAT}")
    w.line(f'TORCHSCRIBE_VERSION = "{header.torchscribe_version}"')
    w.line(f'SOURCE_FILE = "{header.source_file}"')
    w.line(f'SOURCE_HASH = "{header.source_hash}"')
    w.line('BODY_HASH = ""')  # (filled in below, once the text is final)
    w.line(f'TORCH_VERSION = "{header.torch_version}"')
    if header.permissive:
        w.line("PERMISSIVE = True")
    if header.settings:
        w.line("SETTINGS = {")
        with w.indent():
            for key, names in header.settings.items():
                quoted = ", ".join(f'"{name}"' for name in names)
                w.line(f'"{key}": [{quoted}],')
        w.line("}")
    if header.sources:
        w.line("SOURCES = {")
        with w.indent():
            for rel, digest in header.sources:
                w.line(f'"{rel}": "{digest}",')
        w.line("}")
    if header.libraries:
        w.line("LIBRARIES = {")
        with w.indent():
            for name, version in header.libraries:
                w.line(f'"{name}": "{version}",')
        w.line("}")
    if model_modules:
        w.blank()
        for m in model_modules:
            where = f'"{m}"' if m else "__name__, SOURCE_FILE"
            w.line(f"{model_module_name(m)} = _guards.model_module({where})")
    if kernels:
        emit_kernels(w, kernels, source_lines, program.devices)
    for body in bodies:
        w.blank(2)
        w.lines.extend(body)
    if grouped:
        emit_autograd_functions(w, grouped)
    if header.models:
        w.blank(2)
        w.line("MODELS = {")
        with w.indent():
            for factory, model in header.models:
                w.line(f'"{factory}": "{model}",')
        w.line("}")
    w.blank(2)
    w.line("COMPILED = {")
    with w.indent():
        for key, sym in entries.items():
            if isinstance(sym, tuple) and len(sym) > 1:
                w.line(f'"{key}": ({", ".join(_entry_text(s) for s in sym)}),')
            else:
                w.line(f'"{key}": {_entry_text(sym if isinstance(sym, str) else sym[0])},')
    w.line("}")
    return with_body_hash(format_python(w.text()))  # black's style: a user's black hook agrees with ours

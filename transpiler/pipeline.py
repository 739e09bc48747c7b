"""The pipeline for one source file: parse, lower every @script object, run the passes, emit."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import libcst as cst
import torch

from codegen.module import Header, emit_module
from ir.core.graph import Loc, Program
from ir.core.ops import ComputedOnceOp, FuncCallOp, FuncOp, ModuleCallOp
from ir.core.types import ModuleType
from ir.kernel.ops import AutogradKernelOp
from ir.passes import autograd_skips, run_pipeline
from ir.passes.example_types import example_input_types
from runtime.loader import VERSION
from runtime.source_hash import read_source_text, source_hash
from transpiler.check import CheckResult, check_file
from transpiler.classinfo import ClassInfo
from transpiler.context import FileContext, FunctionFinder
from transpiler.diagnostics import CompileError, Diagnostic, UserError
from transpiler.lower_stmt import FunctionLowerer
from transpiler.source import SourceFile, Target


@dataclass
class CompiledFile:
    program: Program
    entries: dict[str, str]  # COMPILED key -> function sym_name
    text: str
    files: tuple[str, ...] = ()  # other source files compiled from (script(instance, ...))
    notes: tuple[str, ...] = ()  # "file:line:col: note: ..." for the command line to print


def torch_version() -> str:
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def lower_file(source: SourceFile, targets: list[Target] | None = None,
               instance_classes: dict[str, ClassInfo] | None = None,
               functions: FunctionFinder | None = None, permissive: bool = False,
               examples: Sequence[Any] | None = None, autograd: bool = False) -> tuple[Program, dict[str, str]]:
    """Lower the file's @script objects (and what they call) to IR. `functions` (script(instance, ...)) makes the compilation
    recursive, as TorchScript's: see FileContext.recursive. `examples`: the first target's example
    inputs. An entry compiled once per member of its Union parameters has its variants in
    `Program.alternatives`, the first of them in the entries. Raises CompileError with every
    diagnostic found."""
    targets = source.targets() if targets is None else targets
    # The check pass reports every unsupported construct at once; lowering reports the rest
    # (merge_diagnostics leaves out what it says of a construct the check reported), but does
    # not lower a function whose definition the check rejected.
    # Permissive mode (the caller's option, or @script(permissive=True) on any object of the
    # file) keeps what does not lower as Python instead: nothing is rejected up front.
    permissive = permissive or any(t.options.get("permissive") is True for t in targets)
    check = check_file(source, targets) if not permissive else CheckResult()
    # What the file decorates is compiled code the targets may call, also when one object is
    # compiled now (script(fn, example_inputs=...) passes just that target).
    ctx = FileContext(source, {t.name for t in targets} | {t.name for t in source.targets() if not t.is_factory},
                      recursive=functions is not None, functions=functions, permissive=permissive,
                      autograd=autograd, lowerer=FunctionLowerer)
    ctx.skip_eager_only = any(t.options.get("skip_eager_only") is True for t in targets)
    ctx.entry_names = {f"{t.name}.forward" if t.name in source.classes else t.name for t in targets}
    ctx.entry_kwargs_empty = {f"{t.name}.forward" if t.name in source.classes else t.name for t in targets
                              if t.options.get("kwargs_empty")}
    for t in targets:  # (what a decorated entry's wrappers pass the body: jit._what_decorators_pass)
        entry = f"{t.name}.forward" if t.name in source.classes else t.name
        ctx.entry_passed[entry] = {name: kind for kind in ("none", "tensor") for name in t.options.get(f"passed_{kind}", ())}
        ctx.entry_passed[entry].update({name: "keyword" for name in t.options.get("example_keywords", ())})
        if t.options.get("left_out_none"):
            ctx.left_out_none.add(entry)
        if t.options.get("kwargs_passed"):
            ctx.entry_kwargs_passed[entry] = dict(t.options["kwargs_passed"])  # type: ignore[arg-type]
    if examples is not None and targets:
        first = targets[0].name
        ctx.entry_examples = (f"{first}.forward" if first in source.classes else first, len(examples))
        ctx.entry_example_values = tuple(examples)
    if instance_classes:
        ctx.classes.update(instance_classes)
        if not permissive:
            check = _check_other_files(check, {id(t.node) for t in targets}, instance_classes)
    diagnostics: list[Diagnostic] = []
    entries: dict[str, str] = {}
    alternatives: dict[str, tuple[str, ...]] = {}
    for target in targets:
        try:
            if target.name in source.classes:
                info = ctx.class_named(target.name)
                assert info is not None
                if "forward" not in info.methods:
                    raise UserError(f"`{target.name}` has no forward method to compile",
                                    source.loc(target.node.name), "define forward(self, ...)")
                if check.is_rejected(info.methods["forward"]):
                    continue
                sig = ctx.entry_signature(info)
                key = f"{target.name}.forward"
            else:
                if isinstance(target.node, cst.FunctionDef) and check.is_rejected(target.node):
                    continue
                found = ctx.function_signature(target.name)
                assert found is not None
                sig, key = found, target.name
            variants = ctx.entry_variants(sig)
            entries[key] = variants[0].sym_name
            if len(variants) > 1:
                alternatives[key] = tuple(v.sym_name for v in variants)
        except UserError as e:
            diagnostics.extend(e.diagnostics)
    if ctx.recursive:
        # Calls of these classes appear once nn.Sequential calls are unrolled (ir/passes/inline.py):
        # their forwards are compiled whether or not the source calls them by name.
        for info in list(ctx.classes.values()):
            if "forward" in info.methods and info.node is not None:
                try:
                    ctx.method_signature(info, "forward")
                except UserError as e:
                    if not permissive:  # (permissive: where it is called, the call stays Python)
                        diagnostics.extend(e.diagnostics)
    funcs = []
    done = 0
    while done < len(ctx.worklist):
        pending = ctx.worklist[done]
        done += 1
        if check.is_rejected(pending.node):
            continue
        try:
            funcs.append(ctx.lowerer(ctx, pending.node, pending.sig, pending.class_info, pending.source).lower())
        except UserError as e:
            diagnostics.extend(e.diagnostics)
        except Exception:
            if not check.has_errors(pending.node):
                raise  # (a compiler bug; in a function the check rejected, what lowering finds is a bonus)
    if ctx.recursive:
        check = lowered_only(check, ctx)
    if diagnostics or check.diagnostics:
        raise CompileError(merge_diagnostics(check, diagnostics, list(ctx.sources())), ctx.sources())
    # The entry file's functions first, in source order; then each other file's.
    order = {name: i for i, name in enumerate(ctx.sources())}
    funcs.sort(key=lambda f: (order.get(f.loc.file, len(order)), f.loc.file, f.loc.line, f.loc.col)
               if f.loc else (0, "", 0, 0))
    program = Program(source.display, funcs)
    program.source_lines = ctx.sources()
    program.dependencies = ctx.source_paths()
    program.breaks = list(ctx.breaks)
    program.alternatives = alternatives
    return program, entries


def _check_other_files(check: CheckResult, checked: set[int], classes: dict[str, ClassInfo]) -> CheckResult:
    """`check` with the check pass's findings on the classes (of any file) not checked yet."""
    by_file: dict[str, tuple[SourceFile, list[Target]]] = {}
    for name, info in classes.items():
        if info.source is None or info.node is None or id(info.node) in checked:
            continue
        checked.add(id(info.node))
        by_file.setdefault(info.source.display, (info.source, []))[1].append(Target(name, info.node))
    for other, targets in by_file.values():
        found = check_file(other, targets)
        check = CheckResult(check.diagnostics + found.diagnostics, check.failed + found.failed,
                            check.covered + found.covered, check.rejected + found.rejected)
    return check


def lowered_only(check: CheckResult, ctx: FileContext) -> CheckResult:
    """`check` without what it says of code that lowering did not lower (recursive mode): a
    method nothing compiled calls (densenet's checkpointing helper, called under
    `self.grad_checkpointing`, False), a branch decided when compiling (coat's dict of
    intermediate features under `not torch.jit.is_scripting()`). What it says of the definition
    of a function that compiled code calls (a decorator, `*args`) stays."""

    def inside(loc: Loc, r: Loc) -> bool:
        return r.file == loc.file and (r.line, r.col) <= (loc.line, loc.col) < (r.end_line, r.end_col)

    headers = []
    for pending in ctx.worklist:
        start, body = pending.source.loc(pending.node), pending.source.positions[pending.node.body].start
        headers.append(Loc(start.file, start.line, start.col, body.line, body.column))
    kept = [d for d in check.diagnostics if any(inside(d.loc, r) for r in ctx.lowered + headers)]
    return replace(check, diagnostics=kept)


def merge_diagnostics(check: CheckResult, lowering: list[Diagnostic], files: Sequence[str] = ()) -> list[Diagnostic]:
    """The check's diagnostics and lowering's, sorted by position (the entry file's first, then
    each other file's, in the order of `files`). Lowering's whose span overlaps a construct the
    check reported (its own words for it) or lies at a use of a function the check rejected
    (`self.helper(x)` of a @staticmethod helper) are consequences of what the check reported, so
    they are left out; so are exact duplicates."""

    def inside(d: Diagnostic, r: Loc) -> bool:
        return r.file == d.loc.file and (r.line, r.col) <= (d.loc.line, d.loc.col) < (r.end_line, r.end_col)

    def overlaps(a: Loc, b: Loc) -> bool:
        end_a, end_b = (a.end_line, a.end_col), (b.end_line, b.end_col)
        return a.file == b.file and (a.line, a.col) < max(end_b, (b.line, b.col + 1)) \
            and (b.line, b.col) < max(end_a, (a.line, a.col + 1))

    def covered(d: Diagnostic) -> bool:
        return any(inside(d, r) for r in check.covered) or any(overlaps(d.loc, c.loc) for c in check.diagnostics)

    merged = list(check.diagnostics) + [d for d in lowering if not covered(d)]
    unique = list(dict.fromkeys(merged))
    order = {name: i for i, name in enumerate(files)}
    return sorted(unique, key=lambda d: (order.get(d.loc.file, len(order)), d.loc.file, d.loc.line, d.loc.col,
                                         d.loc.end_line, d.loc.end_col))


def compile_source(
    source: SourceFile,
    regenerate: str,
    source_file_name: str,
    targets: list[Target] | None = None,
    instance_classes: dict[str, ClassInfo] | None = None,
    after_pass: Callable[[str, Program], None] | None = None,
    instance: Any = None,
    example_inputs: Sequence[Any] | None = None,
    functions: FunctionFinder | None = None,
    permissive: bool = False,
    frozen: bool = False,
    devices: tuple[str, ...] = ("cpu",),
    autograd: bool = False,
) -> CompiledFile:
    """`instance` (an nn.Module) and `example_inputs` specialise the first target to what it
    will be called with (script(instance, example_inputs=...)); entry checks guard that.
    `frozen`: script(..., freeze=True), see runtime/prepacked.py. `devices`: Program.devices,
    where the kernels may run (Triton code only with "cuda"). `autograd`: see build_program."""
    program, entries = build_program(source, targets, instance_classes, after_pass, instance, example_inputs,
                                     functions, permissive, frozen, devices=devices, autograd=autograd)
    text = emit_module(program, module_header(source, regenerate, source_file_name, program, permissive),
                       {**entries, **generic_entries(program)}, program.source_lines)
    return CompiledFile(program, entries, text)


def build_program(
    source: SourceFile,
    targets: list[Target] | None = None,
    instance_classes: dict[str, ClassInfo] | None = None,
    after_pass: Callable[[str, Program], None] | None = None,
    instance: Any = None,
    example_inputs: Sequence[Any] | None = None,
    functions: FunctionFinder | None = None,
    permissive: bool = False,
    frozen: bool = False,
    entry_types: Mapping[str, list[Any]] | None = None,
    devices: tuple[str, ...] = ("cpu",),
    autograd: bool = False,
    kept_eager: frozenset[str] = frozenset(),
) -> tuple[Program, dict[str, str]]:
    """The program of `compile_source` after the passes, with its COMPILED entries.
    `entry_types` (COMPILED key -> a Type or None per argument, `self` included) compiles those
    entries for arguments of those types (transpiler/annotated.py). `autograd`: for calls that
    autograd records, eager's torch ops without kernels (ir/passes.AUTOGRAD_PASSES). `kept_eager`:
    paths of the instance's submodules whose calls stay eager's (`Program.kept_eager`)."""
    program, entries = lower_file(source, targets, instance_classes, functions, permissive, example_inputs, autograd)
    program.frozen = frozen
    program.kept_eager = kept_eager
    program.devices = devices
    program.autograd = autograd
    if instance is None and example_inputs is None and not entry_types:
        # Generic code calls another @script class's module (its own compiled code) rather than
        # holding a copy of its forward: without kernels, inlining saves only a Python call.
        program.generic = True
        program.separate = frozenset(f"{t.name}.forward" for t in source.targets()
                                     if t.name in source.classes and not t.is_factory)
    for key, types in (entry_types or {}).items():
        if key in entries:
            program.entry_inputs[entries[key]] = list(types)
    if instance is not None or example_inputs is not None:
        assert targets
        entry = entries.get(f"{targets[0].name}.forward", entries.get(targets[0].name))
        func = next((f for f in program.funcs if isinstance(f, FuncOp) and f.sym_name == entry), None)
        if func is not None:
            given: list[Any] = [instance] if instance is not None else []
            if example_inputs is not None:
                given += example_input_types(func, example_inputs)
            elif instance is not None:
                given += [None] * (len(func.args) - 1)
            program.entry_inputs[func.sym_name] = given
    if after_pass is not None:
        after_pass("lower", program)
    # TORCHSCRIBE_VERIFY=1 (the test suite sets it) runs the verifier before and after each pass.
    run_pipeline(program, after_pass, check=os.environ.get("TORCHSCRIBE_VERIFY") == "1",
                 skip=autograd_skips() if autograd else frozenset())
    # The module serves its entries: what inlining copied into them (a method, a dozen submodule
    # classes, helpers from other files) is not printed again as code nothing calls (a one-line
    # edit of an inlined method would show twice in the diff).
    program.funcs = reachable(program, set(entries.values()).union(*program.alternatives.values()))
    return program, entries


def module_header(source: SourceFile, regenerate: str, source_file_name: str, program: Program,
                  permissive: bool, models: tuple[tuple[str, str], ...] = (),
                  settings: dict[str, list[str]] | None = None) -> Header:
    sources, libraries = dependency_hashes(source.path, program.dependencies)
    return Header(
        source_file=source_file_name,
        source_hash=source_hash(source.text),
        regenerate=regenerate,
        torchscribe_version=VERSION,
        torch_version=torch_version(),
        sources=sources,
        libraries=libraries,
        permissive=permissive,
        models=models,
        settings=settings,
    )


def reachable(program: Program, roots: set[str]) -> list:
    """The functions of `program` that the `roots` call, directly or not, in program order."""
    funcs = {f.sym_name: f for f in program.funcs if isinstance(f, FuncOp)}
    seen: set[str] = set()
    pending = [r for r in roots if r in funcs]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for op in funcs[name].walk():
            callee = op.attributes.get("callee") if isinstance(op, (FuncCallOp, ModuleCallOp, ComputedOnceOp)) else None
            if isinstance(op, AutogradKernelOp):  # (its torch ops, for a recorded backward)
                callee = op.attributes["eager"]
            if isinstance(op, ModuleCallOp) and op.attributes.get("kept") == "eager":
                continue  # (the live module's own forward runs: nothing of the program)
            if isinstance(op, ModuleCallOp) and callee is None and isinstance(op.operands[0].type, ModuleType):
                callee = f"{op.operands[0].type.qualname}.forward"
            if callee in funcs and callee not in seen:
                pending.append(callee)
    return [f for f in program.funcs if not isinstance(f, FuncOp) or f.sym_name in seen]


def dependency_hashes(source_path: Path, dependencies: Sequence[Path]) \
        -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """The header's SOURCES and LIBRARIES for the other files the program was compiled from.
    SOURCES: (path relative to the model file's directory, POSIX separators; its source hash) of
    each file of the user's own, sorted; the runtime and --check resolve them against the
    compiled module's directory (the model file's). LIBRARIES: (distribution, version) of each
    installed library a file comes from (torchvision's resnet.py): its path differs between
    machines, its version names what it holds. torchscribe's own files (transpiler/torch_layers.py)
    are neither: the module's TORCHSCRIBE_VERSION covers them. Relative paths and versions keep
    the output the same on every machine."""
    base = Path(source_path).resolve().parent
    own = Path(source_path).resolve()
    ours = Path(__file__).resolve().parent.parent
    found: dict[str, str] = {}
    libraries: dict[str, str] = {}
    for dep in dependencies:
        resolved = Path(dep).resolve()
        if resolved == own or resolved.is_relative_to(ours) and resolved.parent.name in ("transpiler", "runtime"):
            continue
        library = installed_distribution(resolved)
        if library is not None:
            libraries[library[0]] = library[1]
            continue
        rel = Path(os.path.relpath(resolved, base)).as_posix()
        found[rel] = source_hash(read_source_text(resolved))
    return tuple(sorted(found.items())), tuple(sorted(libraries.items()))


def installed_distribution(path: Path) -> tuple[str, str] | None:
    """(distribution name, version) of the installed package that holds `path`, or None for a
    file that no installed distribution holds (the user's own)."""
    import importlib.metadata

    for entry in sys.path:
        root = Path(entry or ".").resolve()
        if root.name not in ("site-packages", "dist-packages") or not path.is_relative_to(root):
            continue
        top = path.relative_to(root).parts[0].removesuffix(".py")
        for dist in importlib.metadata.packages_distributions().get(top, []):
            try:
                return dist, importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return None


def generic_entries(program: Program) -> dict[str, tuple[tuple[str, ...]]]:
    """The COMPILED entries of functions with Union parameters: their generic functions, one per
    member, tried as one (codegen.module's `_guards.either`)."""
    return {key: (alternatives,) for key, alternatives in program.alternatives.items()}

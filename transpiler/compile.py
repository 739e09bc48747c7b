"""A model file compiled for the ahead-of-time path: its generic code (transpiler/pipeline.py)
and the specialisations its annotations, settings and example factories ask for, in one module."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from codegen.module import ForAutograd, emit_module
from ir.core.graph import Program
from transpiler import annotated
from transpiler import examples as _examples
from transpiler.diagnostics import CompileError, Diagnostic
from transpiler.pipeline import CompiledFile, build_program, generic_entries, module_header
from transpiler.settings import project_settings, targets_settings
from transpiler.source import SourceFile, Target
from transpiler.specialisations import merge, pays


def project_relative(path: Path) -> str:
    """`path` relative to the nearest enclosing project (pyproject.toml or .git), so the
    regenerate command in a header is the same on every machine and from every directory."""
    resolved = path.resolve()
    for parent in resolved.parents:
        if (parent / "pyproject.toml").exists() or (parent / ".git").exists():
            return resolved.relative_to(parent).as_posix()
    return path.name


def compile_path(path: Path, display: str | None = None,
                 after_pass: Callable[[str, Program], None] | None = None,
                 permissive: bool = False, examples: str = "child") -> CompiledFile | None:
    """Compile a model file for the ahead-of-time path; None when it has no @script objects.
    A file whose targets name example factories (`@script(example=...)`) is imported and the
    factories run: with `examples="here"` in this process, else ExamplesNeedAChild is raised
    (transpiler/batch.py runs this in a child process)."""
    source = SourceFile.read(path, display or os.path.relpath(path))
    targets = source.targets()
    if not targets:
        return None
    with_examples = _examples.example_targets(targets)
    if with_examples and examples != "here":
        raise _examples.ExamplesNeedAChild(path)
    regenerate = f"torchscribe {'--permissive ' if permissive else ''}{project_relative(path)}"
    notes: list[str] = []
    failed: list[Target] = []
    targets = [t for t in targets if not t.is_factory]
    project, _ = project_settings(path)
    settings = targets_settings(source, targets, project)  # (bad options: before any example runs)
    try:
        program, entries = build_program(source, targets, None, after_pass, permissive=permissive,
                                         autograd=True) if targets \
            else (Program(source.display), {})
    except CompileError as e:
        # A class with an example may hold what ahead-of-time code cannot type (a submodule of a
        # class from another file): it keeps its specialisation, without generic code.
        failed = [t for t in with_examples if any(_inside(d, source, t) for d in e.diagnostics)]
        if not failed or any(not any(_inside(d, source, t) for t in failed) for d in e.diagnostics):
            raise
        for t in failed:
            first = next(d for d in e.diagnostics if _inside(d, source, t))
            notes.append(f"{source.loc(t.node.name)}: note: `{t.name}` has no generic code ({first.message}, at line "
                         f"{first.loc.line}): a call its example's entry checks refuse runs its code for autograd, "
                         "compiled from the example, or eagerly where that refuses it too")
        rest = [t for t in targets if t not in failed]
        program, entries = build_program(source, rest, None, after_pass, permissive=permissive,
                                         autograd=True) if rest \
            else (Program(source.display), {})
        program.source_lines = program.source_lines or {source.display: source.lines}
    from_examples = []
    if with_examples:
        try:
            from_examples = _examples.specialisations(source, with_examples, permissive,
                                                      frozenset(t.name for t in failed), notes)
        except CompileError as e:
            # (a specialisation's diagnostics name the file, and others it compiled from)
            raise CompileError(e.diagnostics, {source.display: source.lines, **e.sources}) from None
    # Tried in this order: the examples' (their sizes), then the annotations' (any size), those in
    # the order of the settings (the first device and dtype named first).
    for spec in [s for s in from_examples if not pays(s)]:
        from_examples.remove(spec)
        notes.append(f"{source.display}: note: the `{spec.label}` specialisation of {spec.entry} has no kernel and "
                     "calls only what the generic code calls: it is left out")
    found = from_examples + annotated.specialisations(source, targets, program, entries, settings, permissive,
                                                      [s for s in from_examples if not s.beside_generic])
    table: dict[str, Any] = {**entries, **generic_entries(program)}
    if found:
        program, table = merge(program, entries, found)
    header = module_header(source, regenerate, path.name, program, permissive,
                           tuple((spec.entry, spec.model) for spec in found if spec.model and not spec.autograd), project.header())
    return CompiledFile(program, {key: _first_function(syms) for key, syms in table.items()} if found else entries,
                        emit_module(program, header, table, program.source_lines), notes=tuple(notes))


def _first_function(syms: tuple[Any, ...]) -> str:
    """The sym_name of the first function of a COMPILED entry's tuple."""
    first = syms[0]
    return first if isinstance(first, str) else first.sym if isinstance(first, ForAutograd) else first[0]


def _inside(d: Diagnostic, source: SourceFile, target: Target) -> bool:
    """Whether diagnostic `d` lies in the source of `target` (its decorators included)."""
    span = source.positions[target.node]
    return d.loc.file == source.display and span.start.line - len(target.node.decorators) <= d.loc.line <= span.end.line

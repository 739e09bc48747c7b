"""Kernels from an example: `@script(example="make_example")` (shared/DESIGN.md §4b).

The named module-level function of the same file returns `(instance, inputs)` for a class (the
inputs, for a function). The file is imported and the factory run in a child process (the
command line's own process, and its workers, never import user code: transpiler/batch.py
starts it), where the class is compiled for that instance and those inputs exactly as
`script(instance, example_inputs=...)` compiles it now (and with `freeze=True` as `script(..., freeze=True)` does); the result is a
specialisation of the file's module (transpiler/specialisations.py). The child sends back the
whole file's result (`batch.FileResult`): an example that raises is a diagnostic at the line
that raised, never a traceback.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from ir.core.graph import Loc
from transpiler.diagnostics import UserError
from transpiler.source import SourceFile, Target
from transpiler.specialisations import Specialisation


class ExamplesNeedAChild(Exception):
    """The file names example factories: it compiles in a child process (`batch.run_in_child`)."""


def example_targets(targets: list[Target]) -> list[Target]:
    """The targets compiled for what a factory returns: `@script(example=...)` and `script_model`."""
    return [t for t in targets if t.options.get("example") is not None or t.is_factory]


def specialisations(source: SourceFile, targets: list[Target], permissive: bool,
                    without_generic: frozenset[str] = frozenset(), notes: list[str] | None = None
                    ) -> list[Specialisation]:
    """Each example target compiled for its factory's instance and inputs (in this process,
    which imports the file). A target without generic code (a script_model factory; a class
    named in `without_generic`, whose generic compile failed) also gets code for calls autograd
    records, compiled from its (first) example (`Specialisation.autograd`). Code for autograd does
    eager's eager-only work under `not torch.jit.is_scripting()`; where that does not compile
    (torchvision's API-usage logging) it skips it, as TorchScript does, and `notes` says so; where
    the code does not compile either way, such calls run eagerly and `notes` says why."""
    from transpiler.diagnostics import CompileError

    module = import_model_file(source)
    found = []
    for target in targets:
        if target.is_factory:
            found.append(_specialise_model(source, module, target, permissive))
            for_autograd = functools.partial(_specialise_model, source, module, target, permissive, autograd=True)
        else:
            names = target.options["example"]
            names = (names,) if isinstance(names, str) else names
            made = [_specialise(source, module, target, str(name), permissive) for name in names]  # type: ignore[union-attr]
            found += made
            if target.name not in without_generic:
                # (from the first example, and where that is in eval() mode, from the first in
                # train() mode if any: the first's checks refuse training calls, the calls autograd
                # records most)
                modes = {made[0].training: str(names[0])}
                for name, spec in zip(names[1:], made[1:]):  # type: ignore[index]
                    if spec.training:
                        modes.setdefault(True, str(name))
                for k, name in enumerate(modes.values()):
                    beside = _autograd_beside_generic(source, module, target, name, permissive, first=k == 0)
                    if beside is not None:
                        found.append(beside)
                continue
            for_autograd = functools.partial(_specialise, source, module, target, str(names[0]), permissive,
                                             autograd=True)
        try:
            found.append(for_autograd())
        except CompileError as e:
            first = e.diagnostics[0]
            try:
                found.append(for_autograd(skip_eager_only=True))
            except CompileError:
                if notes is not None:
                    notes.append(f"{source.loc(target.node.name)}: note: `{target.name}` has no code for calls "
                                 f"autograd records ({first.message}, at {first.loc}): such calls run eagerly")
                continue
            if notes is not None:
                notes.append(f"{source.loc(target.node.name)}: note: `{target.name}`'s code for calls autograd "
                             f"records skips the eager-only work under `not torch.jit.is_scripting()`, as "
                             f"TorchScript does: it does not compile ({first.message}, at {first.loc})")
    return found


def _autograd_beside_generic(source: SourceFile, module: Any, target: Target, factory_name: str,
                             permissive: bool, first: bool = True) -> Specialisation | None:
    """Code for the calls autograd records, compiled from the target's (first) example, for an
    entry that has generic code too (`first`: from its first example; else from its first in
    train() mode, where the first is in eval()): kept where one of its groups is a kernel with a
    backward kernel (ir/passes/autograd_kernels.py) or its convs read channels-last inputs
    (ir/passes/layout_autograd.py), which the generic code, knowing no types, cannot do; else it
    would call what the generic code calls, with more entry checks. One that does not compile
    leaves such calls to the generic code, as before it."""
    from ir.kernel.ops import AutogradKernelOp
    from ir.passes.layout_autograd import lays_out_channels_last
    from transpiler.diagnostics import CompileError

    try:
        spec = _specialise(source, module, target, factory_name, permissive, autograd=True)
    except CompileError:
        try:  # (eager-only work that does not compile: skipped, as TorchScript does)
            spec = _specialise(source, module, target, factory_name, permissive, autograd=True, skip_eager_only=True)
        except CompileError:
            return None
    if not any(isinstance(op, AutogradKernelOp) for op in spec.program.walk()) \
            and not lays_out_channels_last(spec.program):
        return None
    spec.beside_generic = True
    if not first:  # (named for its example: `_example_train_autograd`)
        spec.label = f"{example_label(factory_name)}_autograd"
    return spec


def example_label(factory: str) -> str:
    """The word a specialisation's functions are named with: `make_example_train` -> `example_train`."""
    return factory.removeprefix("make_") or factory


def import_model_file(source: SourceFile) -> Any:
    """The model file imported under the name a program that imports it from its project would
    give it: the package path of its directories that hold an `__init__.py`."""
    path = Path(source.path).resolve()
    parts = [path.stem]
    root = path.parent
    while (root / "__init__.py").is_file():
        parts.insert(0, root.name)
        root = root.parent
    name = ".".join(parts)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(name)
    except BaseException as error:  # noqa: BLE001 - the user's code: any failure is a diagnostic
        raise _raised(source, error, f"importing {path.name} to run its examples raised") from None
    source.module_name = name
    return module


def _specialise(source: SourceFile, module: Any, target: Target, factory_name: str,
                permissive: bool, autograd: bool = False, skip_eager_only: bool = False) -> Specialisation:
    from transpiler.jit import instance_program
    from transpiler.pipeline import build_program

    where = source.option_loc(target, "example")
    factory = getattr(module, factory_name, None)
    if factory_name not in source.functions or not callable(factory):
        raise UserError(f"the example factory `{factory_name}` is not a module-level function of {source.display}",
                        where, f"define `def {factory_name}()` at module level, returning "
                        + ("(instance, inputs)" if target.name in source.classes else "the inputs"))
    try:
        made = factory()
    except BaseException as error:  # noqa: BLE001 - the user's code
        raise _raised(source, error, f"the example factory `{factory_name}` raised") from None
    factory_loc = source.loc(source.functions[factory_name].name)
    frozen = target.options.get("freeze") is True and not autograd
    if target.name in source.classes:
        cls = getattr(module, target.name)
        if not (isinstance(made, tuple) and len(made) == 2 and type(made[0]) is cls
                and isinstance(made[1], (tuple, list))):
            raise UserError(f"the example factory `{factory_name}` must return (instance, inputs): an instance of "
                            f"{target.name} and a tuple of its forward's arguments; it returned {_describe(made)}",
                            factory_loc, f"return e.g. `{target.name}(...), (torch.randn(8, 16),)`")
        instance, inputs = made
        program, entries, files = instance_program(instance, source, target.node, tuple(inputs), permissive,
                                                   frozen=frozen, autograd=autograd, beside_generic=True,
                                                   skip_eager_only=skip_eager_only)
    else:
        function = getattr(module, target.name)
        if isinstance(made, tuple) and len(made) == 2 and made[0] is function and isinstance(made[1], (tuple, list)):
            made = made[1]  # (function, inputs), as `script(function, example_inputs=inputs)` takes them
        if not isinstance(made, (tuple, list)):
            raise UserError(f"the example factory `{factory_name}` must return a tuple of {target.name}'s arguments; "
                            f"it returned {_describe(made)}", factory_loc,
                            "return e.g. `(torch.randn(8, 16),)`")
        options = {"left_out_none": True, **({"skip_eager_only": True} if skip_eager_only else {})}
        program, entries = build_program(source, [Target(target.name, target.node, options)],
                                         example_inputs=tuple(made), permissive=permissive, autograd=autograd)
        files = ()
    return Specialisation("autograd" if autograd else example_label(factory_name), program, entries, files,
                          autograd=autograd, training=getattr(made[0], "training", None)
                          if target.name in source.classes else None)


def _specialise_model(source: SourceFile, module: Any, target: Target, permissive: bool,
                      autograd: bool = False, skip_eager_only: bool = False) -> Specialisation:
    """A `script_model` factory's model, compiled from the files that define its classes
    (torchvision's, installed), as `script(model, example_inputs=...)` compiles it."""
    from torch import nn

    from transpiler import jit

    factory_loc = source.loc(target.node.name)
    try:
        made = getattr(module, target.name)()
    except BaseException as error:  # noqa: BLE001 - the user's code
        raise _raised(source, error, f"the model factory `{target.name}` raised") from None
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module)
            and isinstance(made[1], (tuple, list))):
        raise UserError(f"the model factory `{target.name}` must return (model, inputs): an nn.Module and a tuple of "
                        f"its forward's arguments; it returned {_describe(made)}", factory_loc,
                        "return e.g. `torchvision.models.resnet18().eval(), (torch.randn(8, 3, 224, 224),)`")
    instance, inputs = made
    cls = type(instance)
    if jit._called_through_holder(instance, tuple(inputs), None):
        raise UserError(f"the model factory `{target.name}` returned a {cls.__qualname__}, whose forward is torch's own: "
                        "a model from a factory needs a forward in Python source", factory_loc,
                        "wrap it in a module class that calls it, or decorate that class with @script(example=...)")
    path = jit._source_path(cls)
    if Path(path).resolve() == Path(source.path).resolve():
        defining = source
    else:
        defining = jit._read_source(path)
        defining.module_name = jit._module_name_of(path)
    node = defining.classes.get(cls.__name__)
    if node is None or cls.__qualname__ != cls.__name__:
        raise UserError(f"the model factory `{target.name}` returned a {cls.__qualname__}, which is not defined at "
                        "module level of a file with source", factory_loc)
    frozen = target.options.get("freeze") is True and not autograd
    program, entries, files = jit.instance_program(instance, defining, node, tuple(inputs), permissive, frozen=frozen,
                                                   autograd=autograd, skip_eager_only=skip_eager_only)
    return Specialisation(f"{target.name}_autograd" if autograd else target.name, program,
                          {target.name: entries[f"{cls.__name__}.forward"]}, files,
                          model=f"{cls.__module__}.{cls.__qualname__}", autograd=autograd)


def _raised(source: SourceFile, error: BaseException, what: str) -> UserError:
    """A diagnostic at the deepest line of the model file in the traceback of `error`."""
    own = str(Path(source.path).resolve())
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.realpath(f.filename) == own]
    message = f"{what} {type(error).__name__}: {error}".rstrip(": ")
    if frames and frames[-1].lineno:
        line = frames[-1].lineno
        text = source.lines[line - 1] if line <= len(source.lines) else ""
        col = len(text) - len(text.lstrip())
        loc = Loc(source.display, line, col, line, len(text.rstrip()))
    else:
        loc = Loc(source.display, 1, 0, 1, 1)
    return UserError(message, loc, "the example runs when torchscribe compiles this file; fix it, or remove the "
                                   "`example=` option of @script")


def _describe(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value[:4])})"
    return f"a {type(value).__name__}"


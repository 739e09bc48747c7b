"""Kernels from annotations: the default specialisations of the checked-in module (shared/DESIGN.md §4b).

Ahead of time, annotations give a tensor parameter its rank (`Float32[Tensor, "B T 64"]`,
`Annotated[Tensor, "N C"]`) but nothing gives its device, and a plain `Float[...]` no dtype,
which kernels need. For each device and dtype of its settings (transpiler/settings.py: the
decorator's `devices=`/`dtypes=`, the project's `[tool.torchscribe]`, else float32 on the CPU) a
decorated function or module forward is compiled again with those parameters typed so (an
annotation's own dtype kept; the integer family `Int[...]` taken as int64): the `specialize` pass
pins what it assumes in entry checks, `fuse` makes kernels. A specialisation that has no kernel
would be the generic code again: it is left out. A function with no ranked parameter that
computes row by row (ir/kernel/rows.py) is compiled for the (rows, last) views of its tensors instead,
unless an example says what it is called with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import libcst as cst

from ir.core.graph import Program
from ir.core.ops import FuncOp
from ir.core.types import TensorType
from ir.kernel.ops import Kernel
from ir.kernel.rows import NotRowWise, RowPlan, row_plan
from transpiler.annotations import integer_family
from transpiler.pipeline import build_program, reachable
from transpiler.settings import Settings
from transpiler.source import SourceFile, Target
from transpiler.specialisations import Specialisation


@dataclass
class _Plan:
    """One specialisation to build: its device and, per COMPILED key, the entry's argument types."""

    device: str
    targets: list[Target] = field(default_factory=list)
    types: dict[str, list[Any]] = field(default_factory=dict)
    rows: dict[str, tuple[str, ...]] = field(default_factory=dict)  # key -> its row parameters (ir/kernel/rows.py)


def specialisations(source: SourceFile, targets: list[Target], generic: Program, entries: dict[str, str],
                    settings: dict[str, Settings], permissive: bool,
                    others: Sequence[Specialisation] = ()) -> list[Specialisation]:
    """The default specialisations of the file's targets, from the entry functions of the generic
    program (`entries`: COMPILED key -> sym_name) and their annotations, for each target's
    `settings` (transpiler/settings.targets_settings), in the order of their devices and dtypes;
    none that one of `others` (an example's) repeats."""
    funcs = {f.sym_name: f for f in generic.funcs if isinstance(f, FuncOp)}
    plans: dict[str, _Plan] = {}
    taken = _entry_types(others)
    for target in targets:
        key = f"{target.name}.forward" if target.name in source.classes else target.name
        func = funcs.get(entries.get(key, ""))
        if func is None:
            continue
        rows = None
        if not any(_ranked(arg.type) for arg in func.args):
            # (an example's specialisation says what the function is called with)
            rows = _row_plan(key, func) if not any(key in spec.entries for spec in others) else None
            if rows is None:
                continue
        integers = _integer_parameters(source, target)
        for device in settings[target.name].devices:
            for dtype in settings[target.name].dtypes:
                if rows is None:
                    types = [_specialised(arg.type, arg.name in integers, dtype, device) for arg in func.args]
                else:
                    types = [_row_type(arg.name, rows, dtype, device) for arg in func.args]
                if types in taken.get(key, []):
                    continue
                label = "_".join(dict.fromkeys(t.dtype for t in types if t is not None)) + "_" + device
                plan = plans.setdefault(label, _Plan(device))
                if key not in plan.types:
                    plan.targets.append(target)
                    plan.types[key] = types
                    if rows is not None:
                        plan.rows[key] = rows.rows
    found = []
    for label, plan in plans.items():
        program, built = build_program(source, plan.targets, permissive=permissive, entry_types=plan.types)
        kept = {key: sym for key, sym in built.items() if key in plan.types and _has_kernels(program, sym)}
        if not kept:
            continue
        for func in program.funcs:
            if isinstance(func, FuncOp) and func.sym_name in kept.values():
                key = next(k for k, sym in kept.items() if sym == func.sym_name)
                if key in plan.rows:
                    func.attributes["rows"] = plan.rows[key]
        program.funcs = reachable(program, set(kept.values()))
        program.devices = (plan.device,)
        found.append(Specialisation(label, program, kept))
    return found


def _entry_types(found: Sequence[Specialisation]) -> dict[str, list[list[Any]]]:
    """Per COMPILED key of a function (not a method: an example's instance makes its own checks),
    the argument types of the specialisations `found` made: the same types would make the
    same code."""
    taken: dict[str, list[list[Any]]] = {}
    for spec in found:
        funcs = {f.sym_name: f for f in spec.program.funcs if isinstance(f, FuncOp)}
        for key, sym in spec.entries.items():
            func = funcs.get(sym)
            if func is not None and not key.endswith(".forward"):
                taken.setdefault(key, []).append([a.type if _ranked(a.type) else None for a in func.args])
    return taken


def _row_plan(key: str, func: FuncOp) -> RowPlan | None:
    """A function of tensors without a rank gets kernels over (rows, last) views when it is
    row-wise (ir/kernel/rows.py); a method's module state is not."""
    if key.endswith(".forward"):
        return None
    try:
        return row_plan(func)
    except NotRowWise:
        return None


def _row_type(name: str, plan: RowPlan, dtype: str, device: str) -> TensorType | None:
    if name in plan.rows:
        return TensorType(dtype, ("rows", "last"), device)
    if name in plan.vectors:
        return TensorType(dtype, ("last",), device)
    return None


def _ranked(declared: Any) -> bool:
    return isinstance(declared, TensorType) and declared.shape is not None


def _specialised(declared: Any, integer: bool, dtype: str, device: str) -> TensorType | None:
    """The type a parameter takes in a specialisation for `dtype` on `device`; None (its declared
    type) for one without a rank."""
    if not _ranked(declared):
        return None
    return TensorType(declared.dtype or ("int64" if integer else dtype), declared.shape, device)


def _integer_parameters(source: SourceFile, target: Target) -> set[str]:
    node = target.node
    if isinstance(node, cst.ClassDef):
        node = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "forward"), None)
    if not isinstance(node, cst.FunctionDef):
        return set()
    params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
    return {p.name.value for p in params if p.annotation is not None and integer_family(source, p.annotation.annotation)}


def _has_kernels(program: Program, sym: str) -> bool:
    return any(isinstance(op, Kernel) for f in reachable(program, {sym}) for op in f.walk())

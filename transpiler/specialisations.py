"""One checked-in module, several compilations of each function (shared/DESIGN.md §4b).

The generic program serves every call (aten-level code, no kernels: nothing about devices or
dtypes is known). A specialisation is the same entry compiled again for what it will be called
with (an example factory's instance and inputs, transpiler/examples.py; a device and dtype for
the ranks the annotations give, transpiler/annotated.py), with its kernels and the entry checks
that pin what they assume. `merge` puts them into one program: each specialisation's functions
renamed with its label (`ResNetStage.forward` -> `ResNetStage.forward:example`; their kernels
are named apart when the module is written, codegen/kernel_names.py), and each
COMPILED key mapped to its functions in the order they are tried, the generic one last
(runtime/dispatch.py runs the first whose entry checks accept the call)."""

from __future__ import annotations

from dataclasses import dataclass, field

from codegen.module import ForAutograd
from ir.core.graph import Program
from ir.core.helpers import BUFFERS, PREPACKED, STACKING, home_of
from ir.core.ops import BuiltinCallOp, ComputedOnceOp, FuncCallOp, FuncOp, ModuleCallOp
from ir.kernel.ops import AutogradKernelOp, Kernel


@dataclass
class Specialisation:
    label: str  # a word for the function names: "example", "float32_cpu"
    program: Program  # after the passes
    entries: dict[str, str]  # COMPILED key -> sym_name in `program`
    files: tuple[str, ...] = field(default=())  # other source files it was compiled from
    model: str | None = None  # a script_model factory's: the "module.Class" it was compiled for
    # Code for calls autograd records (build_program's `autograd`: no kernels), compiled from the
    # example for an entry without generic code (a script_model factory's; a class whose generic
    # compile failed): the entry's last resort in place of the generic code.
    autograd: bool = False
    # ... or, for an entry with generic code, tried before it for those calls alone (where its
    # pointwise groups are kernels with backward kernels: transpiler/examples.py)
    beside_generic: bool = False
    training: bool | None = None  # the example instance's mode (a class's; None for a function)

    @property
    def entry(self) -> str:
        """Its COMPILED key (a specialisation serves one entry)."""
        return next(iter(self.entries))


def pays(spec: Specialisation) -> bool:
    """Whether `spec` does what the generic code cannot: a kernel, or a runtime helper (weights in
    oneDNN's layout, a tensor computed once, a kept buffer). One that does not is the generic code
    with more entry checks: noise in the module. (Code for autograd stands for missing generic code.)"""
    return spec.autograd or any(isinstance(op, (Kernel, ComputedOnceOp)) or isinstance(op, BuiltinCallOp)
               and home_of(op.callee) in (PREPACKED, STACKING, BUFFERS)
               for op in spec.program.walk())


def merge(generic: Program, entries: dict[str, str], specialisations: list[Specialisation]) \
        -> tuple[Program, dict[str, tuple[str | None, ...]]]:
    """`generic` with the functions of every specialisation added after its own, and the
    COMPILED table: key -> (specialised sym_names..., code for autograd beside the generic code
    (ForAutograd), generic sym_name, or None for an entry without generic code)."""
    specialised: dict[str, list[str]] = {key: [] for key in entries}
    last = dict(entries)  # key -> the function tried last: the generic one, else the code for autograd
    recording: dict[str, list[ForAutograd]] = {}  # key -> code for autograd beside the generic one
    taken_syms = {f.sym_name for f in generic.funcs if isinstance(f, FuncOp)}
    for spec in specialisations:
        renamed = _rename_functions(spec.program, spec.label, taken_syms)
        generic.funcs.extend(spec.program.funcs)
        for key, sym in spec.entries.items():
            if spec.autograd and spec.beside_generic:
                recording.setdefault(key, []).append(ForAutograd(renamed[sym]))
            elif spec.autograd:
                last.setdefault(key, renamed[sym])
                specialised.setdefault(key, [])
            else:
                specialised.setdefault(key, []).append(renamed[sym])
        for name, lines in spec.program.source_lines.items():
            generic.source_lines.setdefault(name, lines)
        generic.breaks.extend(spec.program.breaks)
        generic.devices = tuple(dict.fromkeys((*generic.devices, *spec.program.devices)))
        generic.dependencies.extend(p for p in spec.program.dependencies if p not in generic.dependencies)
    # (tried in the order given: the specialisations, then the generic function)
    # (an entry with Union parameters: its variants, one per member, stand for the generic function)
    # (the code for autograd after the specialisations: it serves only the calls they cannot)
    table = {key: (*syms, *recording.get(key, ()), generic.alternatives.get(key, last.get(key)))
             for key, syms in specialised.items()}
    return generic, table


def _rename_functions(program: Program, label: str, taken: set[str]) -> dict[str, str]:
    renames: dict[str, str] = {}
    for func in program.funcs:
        if isinstance(func, FuncOp):
            name = f"{func.sym_name}:{label}"
            while name in taken:
                name += "_"
            taken.add(name)
            renames[func.sym_name] = name
    for func in program.funcs:
        if isinstance(func, FuncOp):
            func.attributes["sym_name"] = renames[func.sym_name]
    for op in program.walk():
        if isinstance(op, (FuncCallOp, ModuleCallOp, ComputedOnceOp)) and op.attributes.get("callee") in renames:
            op.attributes["callee"] = renames[op.attributes["callee"]]
        if isinstance(op, AutogradKernelOp) and op.attributes["eager"] in renames:  # (its torch ops' function)
            op.attributes["eager"] = renames[op.attributes["eager"]]
    return renames

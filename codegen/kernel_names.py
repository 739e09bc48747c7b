"""Kernel names across a module, and each kernel written once.

Kernels are named per function (ir/kernel/names.py); a module holds several functions (the
specialisations, the code for autograd, the generic code), and this names their kernels apart
and shares them:

- a kernel whose text is an earlier kernel's but for its name (the same source lines, sizes and
  dtypes: resnet's blocks, the forward kernel of a group autograd records and the no-grad
  kernel of the same lines) is that kernel: it takes its name, and the module writes it once;
- a group autograd records (kernel.autograd) is named as one: its forward kernel `b`, its
  backward kernels `b_backward` and `b_backward_weights`, and its function object
  `b_autograd` keep one stem; a group whose kernels, torch ops and attributes are an earlier
  group's (the blocks of a ModuleList) is that group, and takes its name; a group whose torch
  ops are an earlier group's calls that group's function of them (the module holds it once);
- any other name an earlier function's kernel has is prefixed with the function's name in the
  source (`b_softmax`), so that an edit of one function renames no kernel of another beyond the
  one whose name it comes to share (a number would shift every later one); a module-level name
  (the function `softmax`) takes a number (`softmax_2`).

Names depend on the program alone, in module order: deterministic. The kernel ops are renamed,
so the IR says what the module does.
"""

from __future__ import annotations

from typing import Hashable

from codegen.kernel_launchers import kernel_text
from codegen.names import function_name
from ir.core.graph import Program
from ir.core.ops import FuncOp
from ir.core.printer import print_op
from ir.kernel.ops import AutogradKernelOp, Kernel


def _units(func: FuncOp) -> list[list[Kernel]]:
    """The function's kernels, a group's together (its forward kernel first, the group's op last)."""
    units: list[list[Kernel]] = []
    inside: set[Kernel] = set()
    for op in func.walk():
        if isinstance(op, AutogradKernelOp):
            members: list[Kernel] = [o for o in op.regions[0].block.ops if isinstance(o, Kernel)]
            inside.update(members)
            units.append(members + [op])
        elif isinstance(op, Kernel) and op not in inside:
            units.append([op])
    return units


def _eager_text(program: Program, sym: str) -> str:
    """The IR of a group's function of torch ops, but for its name."""
    func = next(f for f in program.funcs if isinstance(f, FuncOp) and f.sym_name == sym)
    return print_op(func).replace(f"@{sym}(", "@(", 1)


def _keys(program: Program, units: list[list[Kernel]], source_lines: dict[str, list[str]] | None) \
        -> dict[Kernel, Hashable]:
    """What makes two kernels one: a kernel's text but for its name; a group's, its kernels'
    texts, the IR of its function of torch ops but for its name, and its attributes."""
    keys: dict[Kernel, Hashable] = {}
    for unit in units:
        for k in unit:
            if isinstance(k, AutogradKernelOp):
                keys[k] = (tuple(keys[m] for m in unit[:-1]), _eager_text(program, k.eager), k.inputs, k.grads,
                           k.depends, k.partial)
            else:
                keys[k] = kernel_text(k, source_lines, program.devices)
    return keys


def _free(base: str, fresh: list[tuple[Kernel, str]], keys: dict[Kernel, Hashable],
          *holders: dict[str, Hashable]) -> bool:
    """Whether each kernel of `fresh` (with its suffix) may be named `base` + suffix: no holder
    has the name for another text (one of the same text is that kernel)."""
    return all(h.get(base + s, keys[k]) == keys[k] for k, s in fresh for h in holders)


def name_kernels(program: Program, taken: set[str], source_lines: dict[str, list[str]] | None) -> None:
    """Names the kernels of `program` apart and shares each kernel of one text (see the module
    docstring); `taken`: the names the module binds otherwise (its functions). Drops the
    function of torch ops of each group that shares an earlier group's."""
    module: dict[str, Hashable] = {name: None for name in taken}  # name -> the text of what has it
    seen: dict[Hashable, str] = {}  # text -> its name
    eager: dict[str, str] = {}  # the text of a group's function of torch ops -> the function kept
    dropped: set[str] = set()
    for func in list(program.funcs):
        if not isinstance(func, FuncOp):
            continue
        units = _units(func)
        keys = _keys(program, units, source_lines)
        own = {k.kernel_name: keys[k] for unit in units for k in unit}  # (this function's names, as named)
        for unit in units:
            stem = unit[0].kernel_name
            suffixes = [k.kernel_name[len(stem):] if k.kernel_name.startswith(stem) else "" for k in unit]
            fresh = [(k, s) for k, s in zip(unit, suffixes) if keys[k] not in seen]
            # (a group whose forward kernel is an earlier kernel: that kernel's name first)
            base = next((b for b in (seen.get(keys[unit[0]]), stem) if b and _free(b, fresh, keys, module, own)), stem)
            if not _free(base, fresh, keys, module, own):
                # another function's kernel: the source's function (`b`, `Block.forward`), then the
                # specialisation's own (`b:float32_cpu`), then a number; a module-level name (the
                # function `softmax` itself): a number
                clash = any(module.get(stem + s, 0) is None for s in suffixes)
                for owner in dict.fromkeys(() if clash else (func.sym_name.partition(":")[0], func.sym_name)):
                    base = f"{function_name(owner)}_{stem}"
                    if _free(base, fresh, keys, module, own):
                        break
                prefix, n = base, 1
                while not _free(base, fresh, keys, module, own):
                    n += 1
                    base = f"{prefix}_{n}"
            for k, s in zip(unit, suffixes):
                k.kernel_name = seen.setdefault(keys[k], base + s)
                module[k.kernel_name] = own[k.kernel_name] = keys[k]
            group = unit[-1]
            if isinstance(group, AutogradKernelOp):
                kept = eager.setdefault(keys[group][1], group.eager)  # type: ignore[index]
                if kept != group.eager:  # (an earlier group's: its function of torch ops serves both)
                    dropped.add(group.eager)
                    group.eager = kept
    program.funcs = [f for f in program.funcs if not (isinstance(f, FuncOp) and f.sym_name in dropped)]


__all__ = ["name_kernels"]

"""The kernels part of a compiled module, in three sections:

- C++, for the kernels on CPU tensors: their source as one string, which includes the support
  code every module shares (`#include <torchscribe/kernels.h>`, runtime/include), the library
  built from it (runtime/kernels.py, which reads each kernel's parameters off its `extern "C"`
  declaration), and one launcher per kernel, `<name>_cpp`, that allocates the outputs (but those
  the kernel writes into a view it is given, `into`: its last arguments) and passes the sizes and
  the tensors in the order codegen/cpp_kernels.py declares them (a tensor stands for its data
  pointer and the strides declared after it; codegen/pool_kernels.py writes both of a
  `kernel.pool` and of a `kernel.adaptive_avg_pool`, codegen/norm_kernels.py of a
  `kernel.batch_norm_chain`);
- Triton, for every kernel (codegen/triton_kernels.py: `<name>_triton`), under
  `if triton is not None:`, as Triton is imported only where some kernel runs on it, with the
  helpers of runtime/triton_helpers.py they call; only in a module whose `Program.devices` holds
  "cuda" (or with a kernel on CUDA tensors): a module for CPU tensors holds C++ alone;
- one line per kernel binding `<name>`, the name the compiled functions call, to the launcher
  chosen at import (runtime/kernels.launcher: by the kernel's device, or TORCHSCRIBE_BACKEND).

A module whose kernels all run on CUDA tensors has no C++ section, so it needs no C++ compiler.
"""

from __future__ import annotations

from codegen import norm_kernels, pool_kernels, triton_kernels
from codegen.cpp_kernels import PRELUDE, Signature, emit_kernel
from codegen.launcher_text import kernel_args, module_reads, size_texts
from codegen.writer import Writer
from ir.kernel import ops as kernel_ops
from ir.kernel.vocabulary import kernel_shape


def kernel_device(k: kernel_ops.Kernel) -> str:
    """The device of a kernel's tensors: "cpu" or "cuda" (ir/passes/fuse.py: one per kernel)."""
    return k.results[0].type.device  # type: ignore[union-attr,return-value]


def kernel_text(k: kernel_ops.Kernel, source_lines: dict[str, list[str]] | None, devices: tuple[str, ...]) -> str:
    """The kernel's text, launchers included, but for its name: two kernels of one text are one
    kernel (resnet's blocks: the same source lines, sizes and dtypes), which the module writes
    once under one name (codegen/kernel_names.name_kernels)."""
    name = k.kernel_name
    k.kernel_name = "kernel"
    try:
        w = Writer()
        emit_kernels(w, [k], source_lines, devices)
        return w.text()
    finally:
        k.kernel_name = name


def emit_kernels(w: Writer, kernels: list[kernel_ops.Kernel], source_lines: dict[str, list[str]] | None,
                 devices: tuple[str, ...] = ("cpu",)) -> None:
    """The three sections; Triton's where `devices` (Program.devices) or a kernel's tensors are
    on CUDA. Kernels that share a name (one text: codegen/kernel_names.name_kernels) are written once."""
    once: dict[str, kernel_ops.Kernel] = {}
    for k in kernels:
        once.setdefault(k.kernel_name, k)
    kernels = list(once.values())
    cpu = [k for k in kernels if kernel_device(k) == "cpu"]
    triton = "cuda" in devices or len(cpu) < len(kernels)
    if cpu:  # (for CPU tensors alone, the C++ launcher is the kernel's: `_lib` refuses other backends)
        _emit_cpp(w, cpu, source_lines, "_cpp" if triton else "")
    if not triton:
        return
    _emit_triton(w, kernels, source_lines)
    w.blank(2)
    w.line("# The launcher each kernel runs, chosen now (runtime/kernels.py): C++ for CPU tensors,")
    w.line("# Triton for CUDA tensors, unless TORCHSCRIBE_BACKEND names one.")
    for k in kernels:
        name = k.kernel_name
        w.line(f'{name} = _kernels.launcher(globals(), "{name}", "{kernel_device(k)}")')


def _emit_triton(w: Writer, kernels: list[kernel_ops.Kernel], source_lines: dict[str, list[str]] | None) -> None:
    devices = sorted({kernel_device(k) for k in kernels})
    w.blank(2)
    w.line("triton = _kernels.import_triton({" + ", ".join(f'"{d}"' for d in devices) + "})")
    w.line("if triton is not None:")
    emitted = [pool_kernels.triton_kernel(k, source_lines) if isinstance(k, kernel_ops.PoolKernelOp)
               else pool_kernels.adaptive_triton_kernel(k, source_lines)
               if isinstance(k, kernel_ops.AdaptiveAvgPoolKernelOp)
               else triton_kernels.emit_triton_kernel(k, source_lines) for k in kernels]  # type: ignore[arg-type]
    with w.indent():
        # (`triton` itself is bound above)
        imports = [line for line in triton_kernels.IMPORTS.splitlines() if line != "import triton"]
        helpers = triton_kernels.helper_import([text for e in emitted for text in (e.source, e.launcher)])
        for line in imports + [""] + helpers.splitlines():
            w.line(line)
        for e in emitted:
            for text in (e.source, e.launcher):
                w.blank(2)
                for line in text.rstrip("\n").splitlines():
                    w.line(line)


def _emit_cpp(w: Writer, kernels: list[kernel_ops.Kernel], source_lines: dict[str, list[str]] | None, suffix: str) -> None:
    sources, signatures = [], []
    for k in kernels:
        sig = None
        if isinstance(k, kernel_ops.BatchNormChainOp):
            text = norm_kernels.cpp_kernel(k, source_lines)
        elif isinstance(k, kernel_ops.PoolKernelOp):
            text = pool_kernels.cpp_kernel(k, source_lines)
        elif isinstance(k, kernel_ops.AdaptiveAvgPoolKernelOp):
            text = pool_kernels.adaptive_cpp_kernel(k, source_lines)
        else:
            assert isinstance(k, kernel_ops.KernelOp)
            text, sig = emit_kernel(k, source_lines)
        sources.append(text)
        signatures.append(sig)
    w.blank(2)
    w.line('KERNELS_CPP = r"""')
    w.lines.extend(PRELUDE.rstrip("\n").splitlines())
    for text in sources:
        w.blank()
        w.lines.extend(text.rstrip("\n").splitlines())
    w.line('"""')
    w.line("_lib = _kernels.Library(KERNELS_CPP)")
    for k, sig in zip(kernels, signatures):
        w.blank(2)
        if isinstance(k, kernel_ops.BatchNormChainOp):
            norm_kernels.cpp_launcher(w, k, suffix)
        elif isinstance(k, kernel_ops.AdaptiveAvgPoolKernelOp):
            pool_kernels.adaptive_cpp_launcher(w, k, suffix)
        elif sig is None:
            pool_kernels.cpp_launcher(w, k, suffix)  # type: ignore[arg-type]
        else:
            _launcher(w, k, sig, suffix)  # type: ignore[arg-type]


def _launcher(w: Writer, k: kernel_ops.KernelOp, sig: Signature, suffix: str) -> None:
    """`<name>_cpp(in0, ...)` (`<name>` in a module without Triton code): calls the kernel with
    its sizes (one tuple: an input's shape where one has the kernel's, `in4.shape`, so that
    kernels alike at other sizes are one), its outputs (fresh, `in4.contiguous()` for one written
    over an input, or the tensor given) and its inputs, in the order of its declaration
    (`sig.args`; the library passes each tensor's data pointer and the strides the kernel
    declares after it), and returns what the library returns: the outputs. No docstring: the
    kernel's C++ quotes the source line of each statement."""
    n_in = k.inputs
    passed = kernel_args(k)
    params = list(passed.params)
    params += [f"s{i}: {'float' if t == 'double' else 'int'}" for i, t in enumerate(sig.scalars)]
    given = list(k.into)  # outputs written into a tensor passed in, in operand order
    params += [f"into{m}" for m in range(len(given))]
    result = "Tensor" if len(sig.outputs) == 1 else f"tuple[{', '.join(['Tensor'] * len(sig.outputs))}]"
    w.line(f"def {sig.name}{suffix}({', '.join(params)}) -> {result}:")
    with w.indent():
        for line in module_reads(passed):
            w.line(line)
        shape = kernel_shape(k)
        over = {o: i for o, i in k.reuse}
        fresh = [o for o in range(len(sig.outputs)) if o not in over and o not in given]
        sizes = _sizes(w, k, shape, passed.padded, spread=bool(fresh))
        outs = []
        for o, (dtype, r) in enumerate(zip(sig.outputs, k.results)):
            if o in over:  # in{i} dies here: its storage holds the output
                outs.append(f"in{over[o]}.contiguous()")
            elif o in given:  # a view of a larger tensor (ir/passes/concat.py), or a kept buffer (plan.py)
                outs.append(f"into{given.index(o)}")
            else:
                dims = sizes if r.type.shape == shape else sizes[:-1] + ["1"]  # type: ignore[union-attr]
                outs.append(f"torch.empty({', '.join(dims) or '()'}, dtype=torch.{dtype})")
        args = (sizes if shape else []) + [outs[int(a[3:])] if a.startswith("out") else a for a in sig.args
                                           if not (a[0] == "n" and a[1:].isdigit())]
        w.line(f"return _lib.{sig.name}_kernel({', '.join(args)})")


def _sizes(w: Writer, k: kernel_ops.KernelOp, shape: tuple, padded: dict[int, int], spread: bool) -> list[str]:
    """The kernel's sizes as the launcher passes them: literals where they are all known; else
    the shape of an input that has them all, one tuple (`in4.shape`: the text the same at other
    sizes), or, where outputs are allocated too, its sizes read into names (`n0, n1 = in0.shape`:
    torch.empty of a torch.Size, or of its items spread, took 0.1 to 1 us more than of ints); else
    each size from an input that has it (`n0 = in0.shape[0]`), or the broadcast of the inputs'
    shapes."""
    names = [f"n{i}" for i in range(len(shape))]
    if all(type(d) is int for d in shape):
        return [str(d) for d in shape]
    n_in = k.inputs
    full = next((j for j, v in enumerate(k.operands[:n_in]) if j not in padded and v.type.shape == shape), None)  # type: ignore[union-attr]
    parts = size_texts(k, shape)
    if full is None and parts is None:
        w.line(f"{', '.join(names)}{',' if len(names) == 1 else ''} = torch.broadcast_shapes("
               + ", ".join(f"in{j}.shape" for j in range(n_in)) + ")")
        return names
    if full is not None and not spread:
        return [f"in{full}.shape"]
    if full is not None:
        w.line(f"{', '.join(names)}{',' if len(names) == 1 else ''} = in{full}.shape")
        return names
    assert parts is not None
    for i, text in enumerate(parts):
        if not text.isdigit():
            w.line(f"n{i} = {text}")
            parts[i] = f"n{i}"
    return parts

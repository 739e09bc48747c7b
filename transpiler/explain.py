"""`torchscribe explain PATH...`: what the compiler made of each compiled function.

For every function of the program after the pass pipeline (the IR the code generator reads,
compiled as `torchscribe PATH` compiles it): its kernels (kind, the ops each fuses with their
source lines, inputs and outputs with their types, an output written over an input: `reuse`),
the torch calls left to torch's own kernels (extern), the entry checks, the tensor ops that stayed
Python calls and why, and an estimate of the memory traffic each call saves against eager.

The estimate: eager materialises the result of every source-level call that another call reads;
inside a kernel such a value lives in registers. For each kernel, every value in its body that is
the last op of one source-level call (its location's span) and is read by an op of another, is
not an output, and whose call has no part outside the kernel (a linear's bias add after its
matmul: the compiled code writes the matmul's result instead) counts once written and once read:
2 x its size (the kernel's iteration shape, or its rows for a value computed once per row) x its
element size. Symbolic sizes stay symbols (`8·B KiB`); a size that is not known leaves the
estimate partial (said so).

`--example` compiles for the instance and inputs the file's `make_example()` returns, as
`script(instance, example_inputs=...)` does: dtypes, devices and shapes are then known, which
fusion needs (ahead of time, only annotations give shapes and nothing gives the device).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import sympy
import torch

from ir.core import ops
from ir.core.graph import BlockArg, Operation, Program, Value
from ir.core.types import ModuleType, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import LeftAsIs, classify, is_tensor_op, op_name
from ir.kernel.rows import NotRowWise, row_plan
from ir.kernel.vocabulary import kernel_shape, pointwise_fusible, row_reduction
from ir.passes.layers import LAYERS

_DTYPE_SIZE = {
    name: torch.empty((), dtype=getattr(torch, name)).element_size()
    for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                 "complex64", "complex128")
}


# -- walking --------------------------------------------------------------------------------------
def _ops(op: Operation) -> Iterator[Operation]:
    """The ops nested in `op`'s regions, in order, not looking into kernel bodies."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                yield inner
                if not isinstance(inner, (kernel_ops.KernelOp, kernel_ops.AutogradKernelOp)):
                    yield from _ops(inner)


def _line(op: Operation) -> int | None:
    return op.loc.line if op.loc is not None else None


def _span(op: Operation) -> tuple | None:
    loc = op.loc
    return None if loc is None else (loc.file, loc.line, loc.col, loc.end_line, loc.end_col)


def _describe(value: Value) -> str:
    """How the source would name a value: an argument, an attribute chain, a local, or the call
    that made it."""
    if isinstance(value, BlockArg):
        return value.name or f"argument {value.index}"
    owner = value.owner
    if isinstance(owner, ops.GetAttrOp) and owner.operands:
        return f"{_describe(owner.operands[0])}.{owner.attributes.get('attr')}"
    if isinstance(owner, ops.ConstantOp):
        return repr(owner.attributes.get("value"))
    what = "kernel " + owner.kernel_name if isinstance(owner, kernel_ops.Kernel) else op_name(owner)
    line = _line(owner)
    base = f"{what} (line {line})" if line is not None else what
    if value.name:
        return f"{value.name} = {base}"
    return f"the result of {base}"


def _path_text(root: Value, path: tuple) -> str:
    out = root.name or "argument"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# -- sizes ----------------------------------------------------------------------------------------
def _elements(shape: tuple) -> Any:
    """The element count of a shape, sympy when symbolic; None when a size is unknown."""
    total: Any = 1
    for d in shape:
        if d is None:
            return None
        total = total * d
    return sympy.sympify(total)


def format_bytes(amount: Any) -> str:
    """`4 KiB`, `16·B KiB`, `(64·B + 2) KiB`, `1536·B bytes`: the largest binary unit that
    divides every coefficient."""
    amount = sympy.expand(sympy.sympify(amount))
    if amount == 0:
        return "0 bytes"
    coeffs = list(amount.as_coefficients_dict().values())
    if not all(c.is_Integer for c in coeffs):
        return f"{amount} bytes"
    g = 0
    for c in coeffs:
        g = math.gcd(g, int(c))
    scale, unit = 1, "bytes"  # (not "B": a size symbol is often called B)
    for name in ("KiB", "MiB", "GiB"):
        if g % (scale * 1024) == 0:
            scale, unit = scale * 1024, name
        else:
            break
    text = str(sympy.expand(amount / scale)).replace("**", "^").replace("*", "·")
    if amount.is_Add:
        text = f"({text})"
    return f"{text} {unit}"


# -- kernels --------------------------------------------------------------------------------------
def _broadcast(shapes: list[tuple]) -> tuple:
    out = list(shapes[0])
    for shape in shapes[1:]:
        out = [b if a == 1 else a for a, b in zip(out, shape)]
    return tuple(out)


def _value_shapes(kernel: kernel_ops.KernelOp, shape: tuple) -> dict[Value, tuple]:
    """The shape eager would give each body value: the broadcast of the inputs it is computed
    from (padded to the kernel's rank), the last dim 1 after a reduction."""
    rank = len(shape)
    shapes: dict[Value, tuple] = {}
    for operand, arg in zip(kernel.operands, kernel.body.args):
        t = operand.type
        if isinstance(t, TensorType) and t.shape is not None:
            shapes[arg] = (1,) * (rank - len(t.shape)) + tuple(t.shape)
        else:
            shapes[arg] = (1,) * rank
    ones = (1,) * rank
    for op in kernel.body.ops:
        known = [shapes.get(v, ones) for v in op.operands] or [ones]
        result = _broadcast(known)
        if isinstance(op, kernel_ops.ReduceOp):
            result = result[:-1] + (1,)
        for r in op.results:
            shapes[r] = result
    return shapes


def _kernel_savings(kernel: kernel_ops.KernelOp, func: ops.FuncOp) -> tuple[list[tuple[Operation, Any]], bool]:
    """(the intermediates eager would write and read, each with its size in bytes or None when
    unknown), per the module docstring."""
    shape = kernel_shape(kernel)
    shapes = _value_shapes(kernel, shape)
    n = kernel.attributes["inputs"]
    # A call whose full-size result comes from an op outside the kernel (a linear's matmul, then
    # its bias add inside): the compiled code writes that result where eager writes the call's.
    split = {_span(v.owner) for v in kernel.operands[:n] if isinstance(v.owner, Operation)
             and shapes[kernel.body.args[kernel.operands.index(v)]] == tuple(shape)}
    yielded = set(kernel.body.terminator.operands) if kernel.body.terminator is not None else set()
    found: list[tuple[Operation, Any]] = []
    for op in kernel.body.ops:
        if isinstance(op, (ops.ConstantOp, ops.YieldOp)) or len(op.results) != 1:
            continue
        value = op.result
        if value in yielded or not isinstance(value.type, TensorType) or _span(op) is None:
            continue
        if not any(_span(use.op) != _span(op) for use in value.uses):
            continue  # inside one source-level call: eager's kernel for it keeps it too
        if _span(op) in split:
            continue
        count = _elements(shapes[value])
        size = _DTYPE_SIZE.get(value.type.dtype or "")
        found.append((op, None if count is None or size is None else 2 * count * size))
    outputs = kernel.body.terminator.operands if kernel.body.terminator is not None else []
    for k in kernel.destinations:  # (written into a cat's result: eager writes it, then cat reads it)
        value, op = outputs[k], outputs[k].owner
        if isinstance(op, Operation) and _span(op) is not None:
            count, size = _elements(shapes[value]), _DTYPE_SIZE.get(kernel.results[k].type.dtype or "")  # type: ignore[union-attr]
            found.append((op, None if count is None or size is None else 2 * count * size))
    return found, all(s is not None for _, s in found)


def _fused_text(kernel: kernel_ops.KernelOp) -> str:
    by_line: dict[int | None, list[str]] = {}
    for op in kernel.body.ops:
        if isinstance(op, (ops.ConstantOp, ops.YieldOp)):
            continue
        name = op.attributes.get("kind", "reduce") if isinstance(op, kernel_ops.ReduceOp) else op_name(op)
        by_line.setdefault(_line(op), []).append(name)
    return "; ".join(f"line {line}: {', '.join(names)}" if line is not None else ", ".join(names)
                     for line, names in by_line.items())


def _kernel_lines(kernel: kernel_ops.KernelOp, func: ops.FuncOp) -> tuple[list[str], Any, bool]:
    kind = "reduction" if isinstance(kernel, kernel_ops.ReductionKernelOp) else "pointwise"
    shape = kernel_shape(kernel)
    head = f"{kernel.attributes['name']}: {kind} over [{', '.join(str(d) for d in shape)}]"
    if kernel.loc is not None:
        head += f" (line {kernel.loc.line})"
    lines = [head, f"  fuses: {_fused_text(kernel)}"]
    n = kernel.attributes["inputs"]
    for i, v in enumerate(kernel.operands[:len(kernel.body.args)]):
        what = "input" if i < n else "scalar"
        lines.append(f"  {what} {i}: {_describe(v)}: {v.type}")
    reuse = {out: inp for out, inp in kernel.attributes.get("reuse", ())}
    for j, r in enumerate(kernel.results):
        text = f"  output {j}: {r.name + ': ' if r.name else ''}{r.type}"
        if j in reuse:
            text += f", written over input {reuse[j]}"
        if j in kernel.destinations:
            text += ", written into its part of a cat's result"
        lines.append(text)
    saved, known = _kernel_savings(kernel, func)
    total: Any = sum((s for _, s in saved if s is not None), sympy.Integer(0))
    if not saved:
        lines.append("  saves: nothing eager would write (every value it keeps is inside one call)")
    else:
        parts = ", ".join(f"{op_name(op)} (line {_line(op)})" for op, _ in saved)
        lines.append(f"  saves: {format_bytes(total)}{'' if known else ' + unknown'}: writing and reading {parts}")
    return lines, total, known


def _autograd_lines(group: kernel_ops.AutogradKernelOp) -> list[str]:
    """A pointwise group of code for autograd (ir/passes/autograd_kernels.py): its kernels and
    what they fuse; no savings estimate (the backward's traffic is autograd's to compare)."""
    forward, backward = group.forward, group.backward
    kind = "a train-mode batch norm and the pointwise ops after it" if group.batch_norm else "a pointwise group"
    head = (f"{group.attributes['name']}: {kind}, which autograd records as one function, over "
            f"[{', '.join(str(d) for d in kernel_shape(forward))}]")
    if group.loc is not None:
        head += f" (line {group.loc.line})"
    lines = [head, f"  forward kernel {forward.attributes['name']} fuses: {_fused_text(forward)}",
             f"  backward kernel {backward.attributes['name']}: the gradients of inputs "
             f"{', '.join(str(i) for i in group.attributes['grads'])}"]
    lines += [f"  input {i}: {_describe(v)}: {v.type}" for i, v in enumerate(group.operands)]
    return lines


def _pool_lines(kernel: kernel_ops.PoolKernelOp) -> list[str]:
    a = kernel.attributes
    (kh, kw), (sh, sw), (ph, pw) = a["kernel_size"], a["stride"], a["padding"]
    return _one_input_lines(kernel, f"{a['name']}: max pool of NHWC rows, {kh}x{kw} windows, stride {sh}x{sw}, "
                                    f"padding {ph}x{pw}",
                            "nothing by itself (torch's max_pool2d, without the indices torch computes)")


def _adaptive_pool_lines(kernel: kernel_ops.AdaptiveAvgPoolKernelOp) -> list[str]:
    return _one_input_lines(kernel, f"{kernel.kernel_name}: adaptive average pool over the last dim, the output size "
                                    "read at run time",
                            "no memory traffic; the time of torch's adaptive_avg_pool2d loop, which "
                            "adaptive_avg_pool1d calls")


def _one_input_lines(kernel: Operation, head: str, saves: str) -> list[str]:
    """A kernel of one input and one output: what it is (with its line), its tensors, what it saves."""
    if kernel.loc is not None:
        head += f" (line {kernel.loc.line})"
    x, r = kernel.operands[0], kernel.result
    return [head, f"  input 0: {_describe(x)}: {x.type}", f"  output 0: {r.name + ': ' if r.name else ''}{r.type}",
            f"  saves: {saves}"]


# -- what stayed Python ---------------------------------------------------------------------------
def _why_python(op: Operation) -> tuple[str, str] | None:
    """(category, reason) of a tensor op left as a Python/torch call; None for no tensor op."""
    if "unfunctionalized" in op.attributes:
        return "write", f"a write kept as is: {op.attributes['unfunctionalized']}"
    if op.attributes.get("reinplaced"):
        return "write", "a write in place into a new tensor nothing else reads (ir/passes/reinplace.py)"
    if isinstance(op, (ops.IfOp, ops.ForRangeOp, ops.ForEachOp, ops.WhileOp)):
        return "control", "control flow (a kernel does not span it)"
    if isinstance(op, ops.ModuleCallOp):
        layer = op.operands[0].type
        if isinstance(layer, ModuleType) and layer.qualname in LAYERS:
            return "call", (f"{layer.qualname.removeprefix('torch.nn.')}: a standard layer called as eager calls it "
                            "(lowered to its torch call where kernels may form: for known inputs)")
        return "call", "a module call that was not inlined (its class is not compiled here, or its path cannot be guarded)"
    if not is_tensor_op(op):
        return None
    kind = classify(op)
    if isinstance(kind, LeftAsIs):
        return "other", kind.reason
    if kind is None:
        return "composite", "a composite op not decomposed (the facts its decomposition needs are not known)"
    if kind.kind == "extern":
        return "extern", "torch's own kernel"
    if kind.kind == "view":
        return "view", "a view (moves no data)"
    if kind.kind == "creation":
        return "creation", "creates a tensor"
    if kind.kind == "other":
        return "other", "data movement, a copy or a metadata query"
    if pointwise_fusible(op) or row_reduction(op) is not None:
        return kind.kind, "a lone op with nothing to fuse with (one torch call)"
    t = op.results[0].type if op.results else None
    if isinstance(t, TensorType) and (t.dtype is None or t.shape is None or t.device is None):
        missing = [name for name in ("dtype", "shape", "device") if getattr(t, name) is None]
        verb = "is" if len(missing) == 1 else "are"
        return kind.kind, (f"its {' and '.join(missing)} {verb} not known, which fusion needs "
                           f"(explain --example compiles for make_example()'s inputs)")
    return kind.kind, "not fusible here (keyword arguments, dtype, or a reduction not over the last dim)"


# -- functions ------------------------------------------------------------------------------------
def _guard_lines(func: ops.FuncOp) -> list[str]:
    # (a variant for one member of a Union, FileContext.entry_variants: the member it takes)
    out = [f"{name} is {cls}" for name, cls in func.attributes.get("arg_classes", ()) if cls != "Tensor"]
    for op in func.body.ops:
        if isinstance(op, ops.GuardOp):
            out.append(f"eager when {op.attributes.get('reason', 'a guard fails')}")
        elif isinstance(op, ops.CheckTensorOp):
            a = op.attributes
            facts = []
            if a.get("dtype"):
                facts.append(a["dtype"])
            if a.get("device"):
                facts.append(a["device"])
            if a.get("shape") is not None:
                facts.append("[" + ", ".join("?" if d is None else str(d) for d in a["shape"]) + "]")
            text = f"{_path_text(op.operands[0], a.get('path', ()))} is a tensor {' '.join(facts)}".rstrip()
            out.append(text + (" or None" if a.get("optional") else ""))
        elif isinstance(op, ops.CheckSizeOp):
            a = op.attributes
            out.append(f"{_path_text(op.operands[0], a.get('path', ()))}.shape[{a['dim']}] == {a['expected']}")
        elif isinstance(op, ops.CheckValueOp):
            a = op.attributes
            out.append(f"{_path_text(op.operands[0], a.get('path', ()))} == {a['expected']!r}")
    return out


def _annotation_hint(func: ops.FuncOp) -> str | None:
    """For a function whose tensor parameters have no annotated rank, while some of its ops would
    fuse if the facts were known: which annotation gives it kernels ahead of time (a specialisation
    for the settings' devices and dtypes, transpiler/annotated.py)."""
    unranked = [a.name for a in func.args if isinstance(a.type, TensorType) and a.type.shape is None and a.name]
    if not unranked or any(isinstance(a.type, TensorType) and a.type.shape is not None for a in func.args):
        return None
    # (a composite, softmax or layer norm, decomposes into them once the facts are known)
    if not any(kind is None or getattr(kind, "kind", None) in ("pointwise", "reduction")
               for kind in (classify(op) for op in _ops(func) if is_tensor_op(op))):
        return None
    names = ", ".join(unranked)
    try:
        row_plan(func)
        why = ""
    except NotRowWise as reason:  # (a row-wise function gets kernels over (rows, last) views)
        why = f"  no kernels without a rank: {reason}\n"
    return (f"{why}  for fused kernels, annotate {names} with a shape, one name or size per dimension: "
            f"e.g. {unranked[0]}: Float32[Tensor, \"N D\"] (jaxtyping) or Annotated[Tensor, \"N D\"]")


def explain_function(func: ops.FuncOp, hints: bool = False, specialised: tuple[str, ...] = ()) -> str:
    where = f" ({func.loc.file}:{func.loc.line})" if func.loc is not None else ""
    lines = [f"{func.sym_name}{where}"]
    if specialised:
        lines.append(f"  the generic code, for the calls that {', '.join(specialised)} (below) do not take")
    hint = _annotation_hint(func) if hints and not specialised else None
    if hint is not None:
        lines.append(hint)
    guards = _guard_lines(func)
    lines.append(f"  guards ({len(guards)}):" if guards else "  guards: none")
    lines += [f"    {g}" for g in guards]
    kernels = [op for op in _ops(func) if isinstance(op, kernel_ops.Kernel)]
    lines.append(f"  kernels ({len(kernels)}):" if kernels else "  kernels: none")
    total: Any = sympy.Integer(0)
    known = True
    for k in kernels:
        if isinstance(k, kernel_ops.PoolKernelOp):
            lines += [f"    {t}" for t in _pool_lines(k)]
            continue
        if isinstance(k, kernel_ops.AdaptiveAvgPoolKernelOp):
            lines += [f"    {t}" for t in _adaptive_pool_lines(k)]
            continue
        if isinstance(k, kernel_ops.AutogradKernelOp):
            lines += [f"    {t}" for t in _autograd_lines(k)]
            continue
        assert isinstance(k, kernel_ops.KernelOp)
        k_lines, k_total, k_known = _kernel_lines(k, func)
        lines += [f"    {t}" for t in k_lines]
        total += k_total
        known &= k_known
    externs: list[str] = []
    python: list[str] = []
    for op in _ops(func):
        if isinstance(op, kernel_ops.Kernel):
            continue
        why = _why_python(op)
        if why is None:
            continue
        category, reason = why
        line = _line(op)
        name = op.name if category == "control" else op_name(op)
        if category == "extern":
            externs.append(f"{name} (line {line})")
        else:
            python.append(f"line {line}: {name}: {reason}")
    lines.append(f"  extern calls: {', '.join(externs)}" if externs else "  extern calls: none")
    python = list(dict.fromkeys(python))
    lines.append(f"  stayed Python ({len(python)}):" if python else "  stayed Python: none")
    lines += [f"    {p}" for p in python]
    saved = format_bytes(total) + ("" if known else " + unknown sizes")
    lines.append(f"  memory traffic saved against eager: {saved} per call")
    return "\n".join(lines)


def explain_program(program: Program, hints: bool = False) -> str:
    """The explanation of every function of a program after the pipeline, in source order (the
    generic functions first, then each specialisation's). `hints`: ahead of time, say which
    annotations would give a function kernels."""
    funcs = [f for f in program.funcs if isinstance(f, ops.FuncOp)]
    # (transpiler/specialisations.py names a specialisation `<generic>:<label>`)
    parts = [explain_function(f, hints, tuple(g.sym_name for g in funcs if g.sym_name.startswith(f.sym_name + ":")))
             for f in funcs]
    return "\n\n".join(parts) + "\n"


# -- compiling ------------------------------------------------------------------------------------
def compile_for_example(path: Path) -> Program:
    """The program of the file compiled for what its `make_example()` returns ((model, inputs),
    an nn.Module instance or a @script function), as script(instance, example_inputs=...) would."""
    from transpiler import jit
    from transpiler.pipeline import compile_source
    from transpiler.source import SourceFile, Target

    resolved = path.resolve()
    name = jit._module_name_of(str(resolved))
    module = sys.modules.get(name) if name else None
    if module is None:
        name = f"_torchscribe_explain_{resolved.stem}"
        spec = importlib.util.spec_from_file_location(name, resolved)
        if spec is None or spec.loader is None:
            raise ExampleError(f"{path}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise ExampleError(f"{path}: importing it raised {e!r}") from e
    make = getattr(module, "make_example", None)
    if make is None:
        raise ExampleError(f"{path}: --example needs a module-level make_example() returning (model, inputs); "
                           "define one, or run without --example")
    try:
        obj, inputs = make()
    except Exception as e:
        raise ExampleError(f"{path}: make_example() raised {e!r}") from e
    source = SourceFile.read(path, os.path.relpath(path))
    if isinstance(obj, torch.nn.Module):
        cls = type(obj)
        compiled = jit.compile_instance(obj, source, source.classes[cls.__name__], inputs, "explain")
    else:
        fn = getattr(obj, "__wrapped__", obj)
        targets = [Target(fn.__name__, source.functions[fn.__name__])]
        compiled = compile_source(source, "explain", path.name, targets, example_inputs=inputs)
    return compiled.program


class ExampleError(Exception):
    """A file `--example` cannot take (no make_example(), or it or the import raised): the user's."""


def explain_path(path: Path, example: bool = False) -> str | None:
    """The explanation of one model file; None when it has no @script objects."""
    from transpiler.compile import compile_path

    if example:
        return explain_program(compile_for_example(path))
    # (what the checked-in module holds: the specialisations of `@script(example=...)` too, whose
    # factories run in this process, as --example runs make_example())
    compiled = compile_path(path, examples="here")
    return None if compiled is None else explain_program(compiled.program, hints=True)


def main(argv: list[str]) -> int:
    """`torchscribe explain [--example] PATH...`; exit status as for `torchscribe PATH` (2 a user
    error, 3 an internal error)."""
    import traceback

    try:
        return _main(argv)
    except Exception:  # a bug in torchscribe
        if os.environ.get("TORCHSCRIBE_DEBUG"):
            traceback.print_exc()
        else:
            print(f"torchscribe explain: internal error: {sys.exc_info()[1]!r}\n"
                  "Rerun with TORCHSCRIBE_DEBUG=1 for the traceback.", file=sys.stderr)
        return 3


def _main(argv: list[str]) -> int:
    from transpiler.diagnostics import CompileError, UserError
    from transpiler.model_files import find_sources, mentions_script

    parser = argparse.ArgumentParser(
        prog="torchscribe explain",
        description="Print, for every compiled function, its kernels and what each fuses, the extern calls, "
                    "the entry checks, what stayed Python and why, and the memory traffic saved against eager.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="model files or directories (searched recursively)")
    parser.add_argument("--example", action="store_true",
                        help="compile for the (model, inputs) the file's make_example() returns, so that dtypes, "
                             "devices and shapes are known (this imports and runs the file)")
    args = parser.parse_args(argv)
    sources, missing = find_sources(args.paths)
    for m in missing:
        print(f"torchscribe: error: no such file or directory: {m}", file=sys.stderr)
    if missing:
        return 2
    failed = False
    first = True
    for path in sources:
        if not mentions_script(path):
            continue
        try:
            text = explain_path(path, args.example)
        except CompileError as e:
            print(e.render(), file=sys.stderr)
            failed = True
            continue
        except UserError as e:
            print("\n\n".join(d.render(None) for d in e.diagnostics), file=sys.stderr)
            failed = True
            continue
        except ExampleError as e:
            print(f"torchscribe explain: error: {e}", file=sys.stderr)
            failed = True
            continue
        if text is None:
            continue
        if not first:
            print()
        first = False
        print(f"== {os.path.relpath(path)}")
        print(text, end="")
    return 2 if failed else 0

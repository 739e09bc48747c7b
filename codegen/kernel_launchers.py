"""The kernels part of a compiled module: the C++ source of every kernel as one string, the
library built from it (runtime/kernels.py), and one Python launcher per kernel that allocates
the outputs and passes sizes, data pointers and strides in the order codegen/cpp_kernels.py
declares them."""

from __future__ import annotations

import sympy

from codegen.cpp_kernels import PRELUDE, Signature, emit_kernel
from codegen.writer import Writer
from ir import ops
from ir.passes.fuse import kernel_shape
from ir.primitives import op_name
from ir.types import TensorType


def emit_kernels(w: Writer, kernels: list[ops.KernelOp], source_file: str | bool) -> None:
    sources, signatures = [], []
    for k in kernels:
        text, sig = emit_kernel(k)
        sources.append(text)
        signatures.append(sig)
    w.blank(2)
    w.line('KERNELS_CPP = r"""')
    w.lines.extend(PRELUDE.rstrip("\n").splitlines())
    for text in sources:
        w.blank()
        w.lines.extend(text.rstrip("\n").splitlines())
    w.line('"""')
    w.line("_lib = _kernels.Library(KERNELS_CPP, {")
    with w.indent():
        for sig in signatures:
            w.line(f'"{sig.name}": "{_kinds(sig)}",')
    w.line("})")
    for k, sig in zip(kernels, signatures):
        w.blank(2)
        _launcher(w, k, sig, source_file)


def _kinds(sig: Signature) -> str:
    kinds = "i" * sig.rank + "p" * len(sig.outputs)
    for _, dims in sig.inputs:
        kinds += "p" + "i" * len(dims)
    return kinds + "".join("d" if t == "double" else "i" for t in sig.scalars)


def _launcher(w: Writer, k: ops.KernelOp, sig: Signature, source_file: str | bool) -> None:
    n_in = k.attributes["inputs"]
    params = [f"in{i}: Tensor" for i in range(n_in)]
    params += [f"s{i}: {'float' if t == 'double' else 'int'}" for i, t in enumerate(sig.scalars)]
    result = "Tensor" if len(sig.outputs) == 1 else f"tuple[{', '.join(['Tensor'] * len(sig.outputs))}]"
    w.line(f"def {sig.name}({', '.join(params)}) -> {result}:")
    with w.indent():
        w.line(f'"""{_describe(k, source_file)}"""')
        shape = kernel_shape(k)
        outs = [f"out{i}" for i in range(len(sig.outputs))]
        for name, dtype, r in zip(outs, sig.outputs, k.results):
            w.line(f"{name} = torch.empty({_shape_text(k, r.type.shape)}, dtype=torch.{dtype})")  # type: ignore[union-attr]
        full = next((o for o, r in zip(outs, k.results) if r.type.shape == shape), None)  # type: ignore[union-attr]
        if not sig.rank:
            args = []
        elif full is not None:
            args = [f"*{full}.shape"]
        else:
            args = [_shape_text(k, shape)[1:-1].rstrip(",")]
        args += [f"{o}.data_ptr()" for o in outs]
        for i, (_, dims) in enumerate(sig.inputs):
            args.append(f"in{i}.data_ptr()")
            offset = sig.rank - len(k.operands[i].type.shape)  # type: ignore[union-attr]
            args += [f"in{i}.stride({d - offset})" for d in dims]
        args += [f"s{i}" for i in range(len(sig.scalars))]
        w.line(f"_lib.{sig.name}({', '.join(args)})")
        w.line(f"return {', '.join(outs)}")


def _shape_text(k: ops.KernelOp, shape: tuple) -> str:
    """`shape` as Python: literal sizes, symbolic ones read from an input."""
    n_in = k.attributes["inputs"]
    rank = len(shape)
    parts = []
    for i, d in enumerate(shape):
        if type(d) is int:
            parts.append(str(d))
            continue
        found = None
        for j, v in enumerate(k.operands[:n_in]):
            t = v.type
            assert isinstance(t, TensorType) and t.shape is not None
            at = i - (rank - len(t.shape))
            if at >= 0 and t.shape[at] == d:
                found = f"in{j}.size({at})"
                break
        if found is None or not isinstance(d, sympy.Symbol):
            return "torch.broadcast_shapes(" + ", ".join(f"in{j}.shape" for j in range(n_in)) + ")"
        parts.append(found)
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _describe(k: ops.KernelOp, source_file: str | bool) -> str:
    names = ", ".join(dict.fromkeys(op.attributes["kind"] if isinstance(op, ops.ReduceOp) else op_name(op)
                                    for op in k.body.ops if not isinstance(op, (ops.YieldOp, ops.ConstantOp))))
    lines = sorted({op.loc.line for op in k.body.ops if op.loc is not None})
    where = ""
    if lines and isinstance(source_file, str):
        where = f" from {source_file}:" + ",".join(str(n) for n in lines)
    return f"Fused: {names}{where}."

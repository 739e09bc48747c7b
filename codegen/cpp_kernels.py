"""C++ source for fused kernels (`kernel.pointwise` ops of ir/passes/fuse.py).

One `extern "C"` function per kernel, called through ctypes (runtime/native.py builds and loads
the library). Arguments, in order: the iteration sizes n0..n{N-1}; each output's data pointer
(outputs are fresh row-major tensors); each tensor input's data pointer and its strides in the
iteration dims where it is not broadcast (a broadcast dim has stride 0 and no argument); the
scalar inputs (int64_t or double). The outer dims are one parallel loop nest; the innermost loop
has a unit-stride version the compiler vectorises and a strided one for other layouts.

The body computes one element with torch's semantics: operands are converted to the op's
computation dtype (torch.result_type of the operands, found with meta tensors), NaN propagates
through maximum/minimum/clamp, casts to bool test `!= 0`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ir import ops
from ir.core import Operation, Value
from codegen.cpp_math import MATH_HEADER
from ir.passes.fuse import FUSIBLE
from ir.primitives import op_name
from ir.types import BOOL, FLOAT, INT, TensorType

CTYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "bool"}
FLOATING = {"float32", "float64"}
PARALLEL_MIN = 32768  # elements: below this, threads cost more than they save

PRELUDE = MATH_HEADER + """
// Selects are bit-mask blends (math_detail::sel) so that loops with them still vectorise.
using torchscribe::math_detail::sel;
template <typename T> static inline T ts_max(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a > b ? a : b)); }
template <typename T> static inline T ts_min(T a, T b) { return (a != a) ? a : ((b != b) ? b : (a < b ? a : b)); }
static inline float ts_max(float a, float b) { return sel(a != a, a, sel(b != b, b, sel(a > b, a, b))); }
static inline double ts_max(double a, double b) { return sel(a != a, a, sel(b != b, b, sel(a > b, a, b))); }
static inline float ts_min(float a, float b) { return sel(a != a, a, sel(b != b, b, sel(a < b, a, b))); }
static inline double ts_min(double a, double b) { return sel(a != a, a, sel(b != b, b, sel(a < b, a, b))); }
"""


@dataclass(frozen=True)
class Signature:
    """What the Python launcher passes, in order (see the module docstring)."""

    name: str
    rank: int
    outputs: tuple[str, ...]  # dtype names
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # dtype, iteration dims it has a stride for
    scalars: tuple[str, ...]  # "int64_t" or "double"


def emit_kernel(op: ops.PointwiseKernelOp) -> tuple[str, Signature]:
    """The C++ function of one kernel, and its signature for the launcher."""
    rank = len(op.results[0].type.shape)  # type: ignore[union-attr]
    shape = op.results[0].type.shape  # type: ignore[union-attr]
    n_in = op.attributes["inputs"]
    tensors, scalars = op.operands[:n_in], op.operands[n_in:]
    strided = [_strided_dims(v.type, shape) for v in tensors]  # type: ignore[arg-type]
    name = op.attributes["name"]
    params = [f"int64_t n{i}" for i in range(rank)]
    params += [f"{CTYPE[r.type.dtype]}* __restrict out{k}" for k, r in enumerate(op.results)]  # type: ignore[union-attr]
    for k, (v, dims) in enumerate(zip(tensors, strided)):
        params.append(f"const {CTYPE[v.type.dtype]}* __restrict in{k}")  # type: ignore[union-attr]
        params += [f"int64_t in{k}_s{d}" for d in dims]
    scalar_types = ["double" if v.type == FLOAT else "int64_t" for v in scalars]
    params += [f"{t} s{k}" for k, t in enumerate(scalar_types)]
    body = _Body(op)
    lines = [f'extern "C" void {name}({", ".join(params)}) {{']
    if rank == 0:
        loads = {k: f"in{k}[0]" for k in range(n_in)}
        lines += ["  " + line for line in body.statements(loads, "0")]
    else:
        lines += _loops(rank, n_in, strided, body)
    lines.append("}")
    sig = Signature(name, rank, tuple(r.type.dtype for r in op.results),  # type: ignore[union-attr]
                    tuple((v.type.dtype, tuple(dims)) for v, dims in zip(tensors, strided)),  # type: ignore[union-attr]
                    tuple(scalar_types))
    return "\n".join(lines) + "\n", sig


def _strided_dims(t: TensorType, shape: tuple) -> list[int]:
    """The iteration dims where an input of type `t` moves (it is not broadcast there)."""
    rank, offset = len(shape), len(shape) - len(t.shape)  # type: ignore[arg-type]
    return [i for i in range(rank) if i >= offset and not (t.shape[i - offset] == 1 and shape[i] != 1)]  # type: ignore[index]


def _loops(rank: int, n_in: int, strided: list[list[int]], body: "_Body") -> list[str]:
    inner = rank - 1
    outer = list(range(inner))
    total = " * ".join(f"n{i}" for i in range(rank))
    lines: list[str] = []
    unit = " && ".join(f"in{k}_s{inner} == 1" for k in range(n_in) if inner in strided[k]) or "true"
    lines.append(f"  const bool unit = {unit};")
    pad = "  "
    if outer:
        collapse = f" collapse({len(outer)})" if len(outer) > 1 else ""
        lines.append(f"  #pragma omp parallel for{collapse} if({total} >= {PARALLEL_MIN})")
        for i in outer:
            lines.append(f"{pad}for (int64_t i{i} = 0; i{i} < n{i}; ++i{i}) {{")
            pad += "  "
        flat = "0"
        for i in outer:
            flat = f"i{i}" if flat == "0" else f"({flat}) * n{i} + i{i}"
        out_base = f"({flat}) * n{inner}"
        bases = {k: " + ".join([f"in{k}"] + [f"i{i} * in{k}_s{i}" for i in outer if i in strided[k]])
                 for k in range(n_in)}
    else:
        out_base = "0"
        bases = {k: f"in{k}" for k in range(n_in)}
    for k in range(n_in):
        lines.append(f"{pad}const auto* p{k} = {bases[k]};")
    lines.append(f"{pad}const int64_t o = {out_base};")
    for variant in ("unit", "strided"):
        lines.append(f"{pad}{'if (unit) {' if variant == 'unit' else '} else {'}")
        loads = {}
        for k in range(n_in):
            if inner not in strided[k]:
                loads[k] = f"p{k}[0]"
            else:
                loads[k] = f"p{k}[j]" if variant == "unit" else f"p{k}[j * in{k}_s{inner}]"
        pragma = "#pragma omp simd" if outer else f"#pragma omp parallel for simd if(n{inner} >= {PARALLEL_MIN})"
        lines.append(f"{pad}  {pragma}")
        lines.append(f"{pad}  for (int64_t j = 0; j < n{inner}; ++j) {{")
        lines += [f"{pad}    {s}" for s in body.statements(loads, "o + j")]
        lines.append(f"{pad}  }}")
    lines.append(f"{pad}}}")
    for _ in outer:
        pad = pad[:-2]
        lines.append(f"{pad}}}")
    return lines


class _Body:
    """The element computation: one C++ statement per op of the kernel's region."""

    def __init__(self, op: ops.PointwiseKernelOp) -> None:
        self.op = op
        self.n_in = op.attributes["inputs"]

    def statements(self, loads: dict[int, str], index: str) -> list[str]:
        names: dict[Value, str] = {}
        out: list[str] = []
        args = self.op.body.args
        for k, a in enumerate(args):
            if k < self.n_in:
                names[a] = f"a{k}"
                out.append(f"const {CTYPE[a.type.dtype]} a{k} = {loads[k]};")  # type: ignore[union-attr]
            else:
                names[a] = f"s{k - self.n_in}"
        for n, inner in enumerate(self.op.body.ops):
            if isinstance(inner, ops.YieldOp):
                for k, v in enumerate(inner.operands):
                    out.append(f"out{k}[{index}] = {names[v]};")
                continue
            if isinstance(inner, ops.ConstantOp):
                names[inner.result] = _literal(inner.attributes["value"])
                continue
            names[inner.result] = f"v{n}"
            out.append(f"const {CTYPE[inner.result.type.dtype]} v{n} = {element(inner, names)};")  # type: ignore[union-attr]
        return out


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "NAN"
        if value in (float("inf"), float("-inf")):
            return "INFINITY" if value > 0 else "-INFINITY"
        return repr(value)
    if isinstance(value, int):
        return f"int64_t({value})"
    if isinstance(value, torch.dtype):
        return str(value)
    return repr(value)


def _dtype_of(v: Value) -> str | None:
    return v.type.dtype if isinstance(v.type, TensorType) else None


def compute_dtype(op: Operation) -> str:
    """torch.result_type of the operands (the dtype an op computes in), from meta tensors."""
    probes: list[object] = []
    for v in op.operands:
        if isinstance(v.type, TensorType):
            probes.append(torch.empty((1,) if v.type.shape else (), dtype=getattr(torch, v.type.dtype), device="meta"))
        elif v.type == FLOAT:
            probes.append(1.5)
        elif v.type == INT:
            probes.append(2)
        elif v.type == BOOL:
            probes.append(True)
    if len(probes) == 1:
        return str(probes[0].dtype).removeprefix("torch.")  # type: ignore[union-attr]
    result = torch.result_type(probes[0], probes[1])  # type: ignore[arg-type]
    for p in probes[2:]:
        result = torch.promote_types(result, torch.result_type(torch.empty((), dtype=result, device="meta"), p))  # type: ignore[arg-type]
    return str(result).removeprefix("torch.")


# Transcendentals from codegen/cpp_math.py (vectorisable, within 2 ulp of the correctly rounded
# result; docs/cpp_math.md); what the hardware does exactly stays std::.
_UNARY_FLOAT = {"exp": "torchscribe::ts_exp", "expm1": "torchscribe::ts_expm1", "log": "torchscribe::ts_log",
                "log1p": "torchscribe::ts_log1p", "tanh": "torchscribe::ts_tanh", "erf": "torchscribe::ts_erf",
                "sin": "torchscribe::ts_sin", "cos": "torchscribe::ts_cos", "sqrt": "std::sqrt",
                "floor": "std::floor", "ceil": "std::ceil", "trunc": "std::trunc"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def element(op: Operation, names: dict[Value, str]) -> str:
    """A C++ expression for one element of `op`'s result."""
    name = op_name(op)
    result = op.result.type.dtype  # type: ignore[union-attr]
    rt = CTYPE[result]
    if name == "to":
        (x,) = [names[op.operands[0]]]
        return f"({x} != 0)" if result == "bool" else f"static_cast<{rt}>({x})"
    ct = CTYPE[compute_dtype(op)] if name in _COMPARE else rt
    args = [_as(v, names[v], ct) for v in op.operands]
    if name in _ARITH:
        return f"{args[0]} {_ARITH[name]} {args[1]}"
    if name in _COMPARE:
        return f"{args[0]} {_COMPARE[name]} {args[1]}"
    if name == "neg":
        return f"-{args[0]}"
    if name == "abs":
        return f"std::abs({args[0]})"
    if name in _UNARY_FLOAT:
        return f"{_UNARY_FLOAT[name]}({args[0]})" if result in FLOATING else args[0]
    if name == "rsqrt":
        return f"{rt}(1) / std::sqrt({args[0]})"
    if name == "reciprocal":
        return f"{rt}(1) / {args[0]}"
    if name in ("maximum", "clamp_min"):
        return f"ts_max({args[0]}, {args[1]})"
    if name in ("minimum", "clamp_max"):
        return f"ts_min({args[0]}, {args[1]})"
    if name == "where":
        cond = names[op.operands[0]]
        if result in FLOATING:
            return f"sel({cond}, {args[1]}, {args[2]})"
        return f"({cond} ? {args[1]} : {args[2]})"
    if name == "logical_not":
        return f"!({names[op.operands[0]]} != 0)"
    if name == "pow":
        return _pow(op, args, rt)
    raise NotImplementedError(f"no C++ for pointwise {name!r}")


def _as(v: Value, text: str, ctype: str) -> str:
    """`text` (the element or scalar `v`) as a `ctype`: a cast only where the types differ."""
    if isinstance(v.type, TensorType) and CTYPE[v.type.dtype] == ctype:  # type: ignore[index]
        return text
    if isinstance(v.owner, ops.ConstantOp) and type(v.owner.attributes["value"]) in (int, float):
        value = v.owner.attributes["value"]
        if ctype == "float" and value == value and abs(value) != float("inf"):
            return f"{float(value)!r}f"
        if ctype == "double":
            return _literal(float(value))
    if v.type == FLOAT and ctype == "double":
        return text
    return f"static_cast<{ctype}>({text})"


def _pow(op: Operation, args: list[str], rt: str) -> str:
    """x ** c with a constant exponent as torch's CPU kernel special-cases it."""
    exponent = op.operands[1].owner
    c = exponent.attributes.get("value") if isinstance(exponent, ops.ConstantOp) else None
    if c == 2:
        return f"{args[0]} * {args[0]}"
    if c == 0.5:
        return f"std::sqrt({args[0]})"
    if c == 1:
        return args[0]
    if c == -1:
        return f"{rt}(1) / {args[0]}"
    return f"static_cast<{rt}>(std::pow({args[0]}, {args[1]}))"


__all__ = ["emit_kernel", "element", "compute_dtype", "Signature", "PRELUDE", "CTYPE", "FUSIBLE"]

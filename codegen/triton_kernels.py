"""Triton source for fused kernels (`kernel.pointwise` and `kernel.reduction` ops of
ir/passes/fuse.py): the GPU counterpart of codegen/cpp_kernels.py, from the same kernel IR.

`emit_triton_kernel(op)` gives a `TritonKernel`: the `@triton.jit` function(s) of one kernel and
its Python launcher. Both run in a module that holds IMPORTS, the helpers and block size
heuristics of runtime/triton_helpers.py they use (`helper_import`), and `torch`, `Tensor`.

Layout. The columns are the iteration shape's last dim, the rows its outer dims flattened. A
pointwise kernel computes one ROWS x COLS tile per program (one program axis, split into a row
block and a column block): a row's outer indices are decomposed once per row (a [ROWS, 1]
vector), not per element, and columns are unit steps, so that a contiguous input loads as
vectors; when the last dim is shorter than a tile, more rows fill it. Inputs come with all
their strides (`*x.stride()`; a broadcast dim's stride is not read), outputs are fresh row-major
tensors (an output written into a view, the kernel's `into`, comes with its strides too), masks cover the tails, and a zero-size iteration launches nothing. Indices are int64.

A reduction kernel computes ROWS whole rows per program. When the row fits one block (up to
TS_ROW_BLOCK_MAX columns), `<name>_block` holds it in registers and evaluates the body once in
order, each `kernel.reduce` a tl.sum / tl.max over the columns. Longer rows take `<name>_loop`:
as in the C++ row function, one loop over the row per level of reductions (a pass), the values
that depend on the row only computed once between passes; a pass recomputes the element values
it needs from the inputs (no row buffer) and accumulates per column lane, reduced after the
loop. Sums accumulate in the value's dtype (float32 for 16-bit floats); max and min propagate
NaN (tl.max skips it: ts_max_rows checks).

Elements have torch's semantics, as in the C++ emitter: operands are converted to the op's
computation dtype (elements.compute_dtype), maximum/minimum/clamp propagate NaN, casts to
bool test `!= 0`, `c / x` for a number `c` is `reciprocal(x) * c` (Tensor.__rtruediv__).
bfloat16 and float16 values are held as float32 and rounded after every op, as eager rounds each
op's result; a number joins their math in float32, as torch's CUDA kernels read a scalar (its
CPU kernels round it to 16 bits first for some ops: within the 16-bit tolerance). Float
scalars are passed as their float64's bits (Triton passes a Python float as float32). The
transcendentals Triton lacks (tanh, expm1, log1p, trunc, pow) are helper functions over tl.exp
and tl.log: libdevice, which has them, does not run in Triton's interpreter (TRITON_INTERPRET=1),
where CI runs these kernels.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

import runtime
from codegen.elements import Parts, compute_dtype, element_of, value_names
from codegen.launcher_text import kernel_args, module_reads, size_texts, with_source
from codegen.writer import Writer
from ir.core import ops
from ir.core.graph import Operation, Value
from ir.core.types import BOOL, FLOAT, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.vocabulary import kernel_shape

TL = {"float32": "tl.float32", "float64": "tl.float64", "int32": "tl.int32", "int64": "tl.int64", "bool": "tl.int1",
      "float16": "tl.float16", "bfloat16": "tl.bfloat16"}
HALF = frozenset({"float16", "bfloat16"})
FLOATING = frozenset({"float32", "float64"}) | HALF


IMPORTS = """\
import triton
import triton.language as tl
"""

# runtime/triton_helpers.py: the helpers and block size heuristics every module's Triton kernels
# share, imported by name (a kernel calls `ts_maximum`, a global of its own module)
HELPERS_FILE = Path(runtime.__file__).resolve().parent / "triton_helpers.py"


@functools.lru_cache(maxsize=None)
def helper_names() -> frozenset[str]:
    """The public names runtime/triton_helpers.py defines (read from its text: importing it would
    import Triton)."""
    text = HELPERS_FILE.read_text(encoding="utf-8")
    return frozenset(re.findall(r"^(?:def |)(ts_\w+|TS_\w+)\b", text, re.MULTILINE))


def helper_import(texts: list[str]) -> str:
    """`from runtime.triton_helpers import ...` of the helpers `texts` (Triton source) use."""
    used = sorted({name for text in texts for name in re.findall(r"\b(?:ts|TS)_\w+", text)} & helper_names())
    return f"from runtime.triton_helpers import {', '.join(used)}\n" if used else ""


@dataclass(frozen=True)
class TritonKernel:
    """One kernel for the Triton backend. `source`: its `@triton.jit` function(s) (`<name>_kernel`;
    a reduction has `<name>_block` and `<name>_loop`); `launcher`: `def <name>_triton(in0, ...,
    s0, ...)`, the tensor inputs then the scalars as the C++ launcher takes them, returning the
    outputs (allocated on in0's device)."""

    name: str
    source: str
    launcher: str

    @property
    def launcher_name(self) -> str:
        return f"{self.name}_triton"


def emit_triton_kernel(op: kernel_ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> TritonKernel:
    k = _Kernel(op, source_lines)
    if isinstance(op, kernel_ops.ReductionKernelOp):
        source = _block_function(k) + "\n\n" + _loop_function(k)
    else:
        source = _pointwise_function(k)
    return TritonKernel(k.name, source, _launcher(k, source_lines))


def _strided_dims(t: TensorType, shape: tuple) -> set[int]:
    """The iteration dims where an input of type `t` moves (it is not broadcast there)."""
    rank, offset = len(shape), len(shape) - len(t.shape)  # type: ignore[arg-type]
    return {i for i in range(rank) if i >= offset and not (t.shape[i - offset] == 1 and shape[i] != 1)}  # type: ignore[index]


class _Kernel:
    """Facts of one kernel shared by its functions and launcher, and its element computation."""

    def __init__(self, op: kernel_ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> None:
        self.op = op
        self.source_lines = source_lines
        self.name: str = op.kernel_name
        self.shape = kernel_shape(op)
        self.rank = len(self.shape)
        self.last = self.rank - 1
        self.n_in: int = op.inputs
        self.tensors = op.operands[:self.n_in]
        self.scalars = op.scalar_inputs
        self.into = op.views_written  # outputs written into views, with all their strides
        self.given = list(op.into)  # outputs written into a tensor passed in
        assert not self.into or (self.rank > 0 and isinstance(op, kernel_ops.PointwiseKernelOp))  # (ir/passes/concat.py)
        self.strided = [_strided_dims(v.type, self.shape) for v in self.tensors]  # type: ignore[arg-type]
        self.body = op.body
        self.names: dict[Value, str] = value_names(op)
        self.yielded = list(self.body.terminator.operands)
        # Size arguments: the number of rows, then the sizes the kernel decomposes a row index with
        # (dims 1 .. rank-2) and the last dim's.
        self.sizes = [f"n{d}" for d in range(1, self.rank)] if self.rank > 1 else ["n0"]

    # -- signature ----------------------------------------------------------------------------
    def params(self, constexprs: list[str]) -> list[str]:
        out = []
        for k in range(len(self.op.results)):
            out.append(f"out{k}")
            if k in self.into:
                out += [f"out{k}_s{d}" for d in range(self.rank)]
        for k, v in enumerate(self.tensors):
            out.append(f"in{k}")
            out += [f"in{k}_s{d}" for d in range(self.rank - len(v.type.shape), self.rank)]  # type: ignore[union-attr]
        out += [f"s{k}" for k in range(len(self.scalars))]
        if self.rank:
            out += ["n_rows"] + self.sizes
        return out + [f"{c}: tl.constexpr" for c in constexprs]

    def decorator(self) -> str:
        scalars = [f'"s{k}"' for k in range(len(self.scalars))]
        # (a scalar's value would otherwise pick a compiled variant: 1 is a constant, for one)
        return f"@triton.jit(do_not_specialize=[{', '.join(scalars)}])" if scalars else "@triton.jit"

    def is_row_output(self, k: int) -> bool:
        return isinstance(self.op, kernel_ops.ReductionKernelOp) and self.op.results[k].type.shape[-1:] == (1,)  # type: ignore[union-attr]

    # -- prologue: row indices, row pointers, loads ---------------------------------------------
    def row_indices(self, w: Writer) -> None:
        """The outer indices of each row the inputs need, from the flat row index `r`."""
        outer = self.rank - 1
        needed = sorted({d for dims in self.strided for d in dims if d < outer} | set(range(outer) if self.into else ()))
        if needed and outer > 1:
            w.line("# each row's outer indices")
        for d in needed:
            divisors = "".join(f" // n{e}" for e in range(outer - 1, d, -1))
            w.line(f"i{d} = r{divisors}" + (f" % n{d}" if d > 0 else ""))
        for k, dims in enumerate(self.strided):
            terms = [f"i{d} * in{k}_s{d}" for d in sorted(dims) if d < outer]
            if terms:
                w.line(f"p{k} = in{k} + {' + '.join(terms)}  # in{k} at the row")
        for k in self.into:
            if outer:
                w.line(f"q{k} = out{k} + {' + '.join(f'i{d} * out{k}_s{d}' for d in range(outer))}  # out{k} at the row")

    def moves_along_rows(self, k: int) -> bool:
        return any(d < self.rank - 1 for d in self.strided[k])

    def pointer(self, k: int) -> str:
        """Input k's pointer at the row (at the start when it does not move along the rows)."""
        return f"p{k}" if self.moves_along_rows(k) else f"in{k}"

    def varies(self, k: int) -> bool:
        """Whether input k moves along the row (the last dim)."""
        return self.rank > 0 and self.last in self.strided[k]

    def load(self, k: int, masks: dict[str, str]) -> str:
        """`a<k> = tl.load(...)`: the element of input k; `masks` names the mask of a block that
        moves along rows and columns ("both"), along rows only ("rows"), columns only ("cols")."""
        along_rows = self.moves_along_rows(k)
        if self.varies(k):
            where, mask = f"{self.pointer(k)} + c * in{k}_s{self.last}", masks["both" if along_rows else "cols"]
        else:
            where, mask = self.pointer(k), masks["rows"] if along_rows else ""
        text = f"tl.load({where}, mask={mask})" if mask else f"tl.load({where})"
        dtype = self.tensors[k].type.dtype  # type: ignore[union-attr]
        return f"a{k} = {text}" + (".to(tl.float32)" if dtype in HALF else "")

    def scalar_prologue(self, w: Writer) -> None:
        for k, v in enumerate(self.scalars):
            if v.type == FLOAT:
                w.line(f"s{k} = ts_double(s{k})")

    def store(self, k: int, mask: str) -> str:
        """Output k's store; `mask` is the row mask for a row output."""
        v = self.names[self.yielded[k]]
        dtype = self.op.results[k].type.dtype  # type: ignore[union-attr]
        value = f"{v}.to({TL[dtype]})" if dtype in HALF else v
        if self.rank == 0:
            return f"tl.store(out{k}, {value})"
        if self.is_row_output(k):
            return f"tl.store(out{k} + r, {value}, mask={mask})"
        if k in self.into:
            return f"tl.store({'q' if self.rank > 1 else 'out'}{k} + c * out{k}_s{self.last}, {value}, mask={mask})"
        return f"tl.store(out{k} + r * n{self.last} + c, {value}, mask={mask})"

    # -- elements ----------------------------------------------------------------------------
    def statement(self, inner: Operation) -> str:
        return f"{self.names[inner.result]} = {self.element(inner)}"

    def write(self, w: Writer, items: list[tuple[Operation | None, str]]) -> None:
        """Statements with the op each computes (None: a load, a store), each run of them from
        one source line after a comment quoting it."""
        for line in with_source(items, self.source_lines, "#"):
            w.line(line)

    def statements(self, w: Writer, computed: list[Operation]) -> None:
        self.write(w, [(o, self.statement(o)) for o in computed])

    def element(self, op: Operation) -> str:
        """A Triton expression for one element of `op`'s result (codegen/elements.py spells it; a
        16-bit float as float32, rounded unless the result is exact in its operand's dtype)."""
        e = element_of(op)
        result = op.result.type.dtype  # type: ignore[union-attr]
        computed = compute_dtype(op) if e.computes_in == "promoted" else result
        operands = op.operands[:e.arity]
        converted = iter(self.operands([v for v, kind in zip(operands, e.operands) if kind == "value"], computed))
        args = [next(converted) if kind == "value" else self.operand(v, None if kind == "as is" else result)
                for v, kind in zip(operands, e.operands)]

        def typed(i: int) -> str:
            return _typed(operands[i], result) if isinstance(operands[i].owner, ops.ConstantOp) else args[i]

        if e.floats_only and result not in FLOATING:
            text = args[0]
        else:
            text = Parts(args, "1.0", "", result in FLOATING, lambda x: _rounded(x, result), typed).fill(e.triton)
        return _rounded(text, result) if e.rounds(operands_16bit=False) else text

    def operands(self, values: list[Value], dtype: str) -> list[str]:
        """`values` as `dtype`; when none of them has a Triton type (all constants), the first
        is made a typed constant (a Python number alone would be int32 or float32)."""
        texts = [self.operand(v, dtype) for v in values]
        if texts and all(isinstance(v.owner, ops.ConstantOp) for v in values):
            texts[0] = _typed(values[0], dtype)
        return texts

    def operand(self, v: Value, dtype: str | None) -> str:
        """The element or scalar `v` as a value of `dtype` (None: as it is). A constant is a
        Python number, which Triton types as the other operand."""
        if isinstance(v.owner, ops.ConstantOp):
            return _literal(v.owner.attributes["value"], dtype)
        text = self.names[v]
        if isinstance(v.type, TensorType):
            source = v.type.dtype
        elif v.type == FLOAT:
            source = "float64"  # (after ts_double)
        else:
            source = "bool" if v.type == BOOL else "int"  # (an int scalar: int32 or int64, by its value)
        if dtype is None or source == dtype:
            return text
        if dtype in HALF and not isinstance(v.type, TensorType):
            return _convert(text, source, "float32")  # (a scalar joins 16-bit math as float32, torch's opmath)
        return _convert(text, source, dtype)


def _rounded(text: str, dtype: str) -> str:
    """A 16-bit float result, computed in float32, rounded to its dtype (and held as float32)."""
    return f"({text}).to({TL[dtype]}).to(tl.float32)" if dtype in HALF else text


def _convert(text: str, source: str, dtype: str) -> str:
    """A value of dtype `source` ("int": an int scalar) as `dtype`."""
    if dtype == "bool":
        return f"({text} != 0)"
    if dtype in HALF:
        if source == "bool":
            return f"{text}.to(tl.float32)"
        widened = text if source in HALF or source == "float32" else f"{text}.to(tl.float32)"
        return f"{widened}.to({TL[dtype]}).to(tl.float32)"
    if source in HALF and dtype == "float32":
        return text
    return f"{text}.to({TL[dtype]})"


def _literal(value: object, dtype: str | None) -> str:
    """A constant as a Python number of `dtype`'s kind (Triton gives it the other operand's
    type): ints wrapped to int32's range, floats beyond float32's an infinity there."""
    if dtype == "bool" or (dtype is None and isinstance(value, bool)):
        return repr(bool(value))
    if dtype in ("int32", "int64") or (dtype is None and isinstance(value, int)):
        n = int(value)  # type: ignore[call-overload]
        return repr((n + 2**31) % 2**32 - 2**31 if dtype == "int32" else n)
    f = float(value)  # type: ignore[arg-type]
    if dtype in ("float32", *HALF) and math.isinf(torch.tensor(f, dtype=torch.float32).item()):
        f = math.copysign(math.inf, f)
    if f != f:
        return 'float("nan")'
    if math.isinf(f):
        return 'float("inf")' if f > 0 else '-float("inf")'
    return repr(f)


def _typed(v: Value, dtype: str) -> str:
    """A constant as a 0-d Triton value of `dtype` (16-bit floats as float32)."""
    tl_type = "tl.float32" if dtype in HALF else TL[dtype]
    return f"tl.full([], {_literal(v.owner.attributes['value'], dtype)}, {tl_type})"  # type: ignore[union-attr]


# -- pointwise ---------------------------------------------------------------------------------
def _pointwise_function(k: _Kernel) -> str:
    w = Writer()
    w.line(k.decorator())
    if k.rank == 0:
        w.line(f"def {k.name}_kernel({', '.join(k.params([]))}):")
        with w.indent():
            k.scalar_prologue(w)
            for j in range(k.n_in):
                w.line(k.load(j, {}))
            _body_statements(k, w)
            for j in range(len(k.op.results)):
                w.line(k.store(j, ""))
        return w.text()
    n = f"n{k.last}"
    w.line(f"def {k.name}_kernel({', '.join(k.params(['ROWS', 'COLS']))}):")
    with w.indent():
        w.line("# a tile of ROWS rows (the outer dims, flattened) by COLS columns (the last dim)")
        w.line("pid = tl.program_id(0)")
        w.line(f"col_blocks = tl.cdiv({n}, COLS)")
        w.line("r = (pid // col_blocks).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]")
        w.line("c = (pid % col_blocks).to(tl.int64) * COLS + tl.arange(0, COLS)[None, :]")
        w.line("row_mask = r < n_rows")
        w.line(f"col_mask = c < {n}")
        w.line("mask = row_mask & col_mask")
        k.row_indices(w)
        k.scalar_prologue(w)
        masks = {"both": "mask", "rows": "row_mask", "cols": "col_mask"}
        for j in range(k.n_in):
            w.line(k.load(j, masks))
        _body_statements(k, w)
        for j in range(len(k.op.results)):
            w.line(k.store(j, "mask"))
    return w.text()


def _body_statements(k: _Kernel, w: Writer) -> None:
    k.statements(w, [inner for inner in k.body.ops if not isinstance(inner, (ops.ConstantOp, ops.YieldOp))])


# -- row reductions ----------------------------------------------------------------------------
def _row_prologue(k: _Kernel, w: Writer, first_row: str) -> None:
    w.line(f"r = {first_row} + tl.arange(0, ROWS)[:, None]")
    w.line("row_mask = r < n_rows")
    k.row_indices(w)
    k.scalar_prologue(w)


def _reduce_block(k: _Kernel, red: kernel_ops.ReduceOp, mask: str) -> str:
    """A `kernel.reduce` over the whole row held in one block."""
    x, kind = k.names[red.operands[0]], red.kind
    if kind == "sum":
        text = f"tl.sum(tl.where({mask}, {x}, 0.0), axis=1, keep_dims=True)"
    else:
        helper, pad = ("ts_max_rows", '-float("inf")') if kind == "amax" else ("ts_min_rows", 'float("inf")')
        text = f"{helper}(tl.where({mask}, {x}, {pad}))"
    return f"{k.names[red.result]} = {_rounded(text, red.result.type.dtype)}"  # type: ignore[union-attr]


def _block_function(k: _Kernel) -> str:
    w = Writer()
    w.line(k.decorator())
    w.line(f"def {k.name}_block({', '.join(k.params(['ROWS', 'BLOCK']))}):")
    with w.indent():
        w.line(f"# ROWS rows per program, each whole in one block of BLOCK >= n{k.last} columns")
        _row_prologue(k, w, "tl.program_id(0).to(tl.int64) * ROWS")
        w.line("c = tl.arange(0, BLOCK)[None, :].to(tl.int64)")
        w.line(f"mask = row_mask & (c < n{k.last})")
        masks = {"both": "mask", "rows": "row_mask", "cols": f"c < n{k.last}"}
        for j in range(k.n_in):
            w.line(k.load(j, masks))
        k.write(w, [(inner, _reduce_block(k, inner, "mask") if isinstance(inner, kernel_ops.ReduceOp) else k.statement(inner))
                    for inner in k.body.ops if not isinstance(inner, (ops.ConstantOp, ops.YieldOp))])
        for j in range(len(k.op.results)):
            w.line(k.store(j, "row_mask" if k.is_row_output(j) else "mask"))
    return w.text()


class _Passes:
    """When each value of a reduction kernel is computed in the loop version (as the C++
    `RowPlan` of codegen/cpp_rows.py, without row buffers). Element values (those that vary
    along the row) belong to the first pass after every row value they use exists; a row value's
    depth is the number of passes before it (a reduction's: one more than its operand's pass)."""

    def __init__(self, k: _Kernel) -> None:
        self.k = k
        level: dict[Value, int] = {}
        self.elem: set[Value] = set()
        for j, a in enumerate(k.body.args):
            level[a] = 0
            if j < k.n_in and k.varies(j):
                self.elem.add(a)
        self.ops = [o for o in k.body.ops if not isinstance(o, (ops.ConstantOp, ops.YieldOp))]
        for o in self.ops:
            if isinstance(o, kernel_ops.ReduceOp):
                level[o.result] = level[o.operands[0]] + 1
                continue
            level[o.result] = max((level[v] for v in o.operands if v in level), default=0)
            if any(v in self.elem for v in o.operands):
                self.elem.add(o.result)
        self.level = level
        self.reductions: dict[int, list[kernel_ops.ReduceOp]] = {}
        for o in self.ops:
            if isinstance(o, kernel_ops.ReduceOp):
                self.reductions.setdefault(level[o.operands[0]], []).append(o)
        self.element_outputs: dict[int, list[int]] = {}
        for j, v in enumerate(k.yielded):
            if not k.is_row_output(j):
                self.element_outputs.setdefault(level[v], []).append(j)
        self.passes = sorted(set(self.reductions) | set(self.element_outputs))

    def element_ops(self, p: int) -> tuple[list[int], list[Operation]]:
        """The inputs pass p loads and the element ops it computes: what its reductions and
        element outputs need, in body order."""
        roots = [r.operands[0] for r in self.reductions.get(p, [])]
        roots += [self.k.yielded[j] for j in self.element_outputs.get(p, [])]
        seen: set[Value] = set()
        stack = [v for v in roots if v in self.elem]
        while stack:
            v = stack.pop()
            if v not in seen:
                seen.add(v)
                if isinstance(v.owner, Operation):
                    stack += [u for u in v.owner.operands if u in self.elem]
        loads = [j for j in range(self.k.n_in) if self.k.body.args[j] in seen]
        return loads, [o for o in self.ops if o.result in seen]

    def row_ops(self, depth: int) -> list[Operation]:
        """The row values of `depth` other than reductions."""
        return [o for o in self.ops if o.result not in self.elem and not isinstance(o, kernel_ops.ReduceOp)
                and self.level[o.result] == depth]


_ACC_INIT = {"sum": "0.0", "amax": '-float("inf")', "amin": 'float("inf")'}


def _loop_function(k: _Kernel) -> str:
    plan = _Passes(k)
    n = f"n{k.last}"
    w = Writer()
    w.line(k.decorator())
    w.line(f"def {k.name}_loop({', '.join(k.params(['ROWS', 'BLOCK']))}):")
    with w.indent():
        w.line("# ROWS rows per program, longer than a block: one loop over the row per level of reductions")
        _row_prologue(k, w, "tl.program_id(0).to(tl.int64) * ROWS")
        row_masks = {"both": "mask", "rows": "row_mask", "cols": f"c < {n}"}
        for j in range(k.n_in):
            if not k.varies(j):
                w.line(k.load(j, row_masks))
        depth_done = -1
        for number, p in enumerate(plan.passes, start=1):
            for d in range(depth_done + 1, p + 1):
                k.statements(w, plan.row_ops(d))
            depth_done = p
            reds = plan.reductions.get(p, [])
            what = [f"{r.kind} {k.names[r.result]}" for r in reds]
            what += [f"out{j}" for j in plan.element_outputs.get(p, [])]
            w.line(f"# pass {number} over the row: {', '.join(what)}")
            for r in reds:
                dtype = "float32" if r.result.type.dtype in HALF else r.result.type.dtype  # type: ignore[union-attr]
                init = _ACC_INIT[r.kind]
                w.line(f"acc{k.names[r.result][1:]} = tl.full([ROWS, BLOCK], {init}, {TL[dtype]})")
            loads, computed = plan.element_ops(p)
            w.line(f"for start in range(0, {n}, BLOCK):")
            with w.indent():
                w.line("c = start + tl.arange(0, BLOCK)[None, :].to(tl.int64)")
                w.line(f"mask = row_mask & (c < {n})")
                for j in loads:
                    w.line(k.load(j, row_masks))
                k.statements(w, computed)
                for r in reds:
                    acc, x, kind = f"acc{k.names[r.result][1:]}", k.names[r.operands[0]], r.kind
                    masked = f"tl.where(mask, {x}, {_ACC_INIT[kind]})"
                    if kind == "sum":
                        w.line(f"{acc} += {masked}")
                    else:
                        w.line(f"{acc} = {'ts_maximum' if kind == 'amax' else 'ts_minimum'}({acc}, {masked})")
                for j in plan.element_outputs.get(p, []):
                    w.line(k.store(j, "mask"))
            for r in reds:
                acc, kind = f"acc{k.names[r.result][1:]}", r.kind
                text = {"sum": f"tl.sum({acc}, axis=1, keep_dims=True)", "amax": f"ts_max_rows({acc})",
                        "amin": f"ts_min_rows({acc})"}[kind]
                w.line(f"{k.names[r.result]} = {_rounded(text, r.result.type.dtype)}")  # type: ignore[union-attr]
        for d in range(depth_done + 1, max(plan.level.values(), default=0) + 1):
            k.statements(w, plan.row_ops(d))
        for j in range(len(k.op.results)):
            if k.is_row_output(j):
                w.line(k.store(j, "row_mask"))
    return w.text()


# -- launcher ----------------------------------------------------------------------------------
def _launcher(k: _Kernel, source_lines: dict[str, list[str]] | None) -> str:
    w = Writer()
    passed = kernel_args(k.op)
    params = list(passed.params)
    params += [f"s{j}: {'float' if v.type == FLOAT else 'bool' if v.type == BOOL else 'int'}"
               for j, v in enumerate(k.scalars)]
    params += [f"into{m}" for m in range(len(k.given))]
    outs = [f"out{j}" for j in range(len(k.op.results))]
    result = "Tensor" if len(outs) == 1 else f"tuple[{', '.join(['Tensor'] * len(outs))}]"
    w.line(f"def {k.name}_triton({', '.join(params)}) -> {result}:")
    with w.indent():
        for line in module_reads(passed):
            w.line(line)
        sizes = size_texts(k.op, k.shape)
        if sizes is None:  # (a size only the broadcast of the inputs gives)
            w.line("shape = torch.broadcast_shapes(" + ", ".join(f"in{j}.shape" for j in range(k.n_in)) + ")")
            sizes = [f"shape[{i}]" for i in range(k.rank)]
        for i, text in enumerate(sizes):
            if not text.isdigit():
                w.line(f"n{i} = {text}")
                sizes[i] = f"n{i}"
        for j, r in enumerate(k.op.results):
            if j in k.given:  # a view of a larger tensor (ir/passes/concat.py), or a kept buffer (plan.py)
                w.line(f"out{j} = into{k.given.index(j)}")
                continue
            dims = ", ".join(sizes[:-1] + ["1"] if k.is_row_output(j) else sizes) or "()"
            w.line(f"out{j} = torch.empty({dims}, dtype=torch.{r.type.dtype}, device=in0.device)")  # type: ignore[union-attr]
        args = []
        for j, name in enumerate(outs):
            args.append(name)
            if j in k.into:
                args.append(f"*{name}.stride()")
        for j, v in enumerate(k.tensors):
            args.append(f"in{j}")
            if v.type.shape:  # type: ignore[union-attr]
                # (a tensor passed without the trailing dims of 1 its type has: strides never read)
                args.append(f"*in{j}.stride()" + ", 0" * passed.padded.get(j, 0))
        for j, v in enumerate(k.scalars):
            args.append(f"ts_bits(s{j})" if v.type == FLOAT else f"s{j}")
        if k.rank == 0:
            w.line(f"{k.name}_kernel[(1,)]({', '.join(args)})")
            w.line(f"return {', '.join(outs)}")
            return w.text()
        outer = sizes[:-1]
        n_rows = str(math.prod(int(s) for s in outer)) if all(s.isdigit() for s in outer) else " * ".join(outer)
        if " * " in n_rows:
            w.line(f"n_rows = {n_rows}")
            n_rows = "n_rows"
        args += [n_rows] + [sizes[int(s[1:])] for s in k.sizes]
        n = sizes[-1]
        reduction = isinstance(k.op, kernel_ops.ReductionKernelOp)
        # no elements: launch nothing (a reduction's rows still have values when the row is empty)
        empty = [n_rows] if reduction else [n_rows, n]
        static_zero = any(t == "0" for t in empty)
        if not static_zero:
            symbolic = [t for t in empty if not t.isdigit()]
            if symbolic:
                w.line(f"if {' == 0 or '.join(symbolic)} == 0:")
                with w.indent():
                    w.line(f"return {', '.join(outs)}")
            if reduction:
                w.line(f"rows, block, warps = ts_row_tile({n_rows}, {n})")
                w.line(f"kernel = {k.name}_block if block >= {n} else {k.name}_loop")
                w.line(f"kernel[(triton.cdiv({n_rows}, rows),)]({', '.join(args)}, ROWS=rows, BLOCK=block, num_warps=warps)")
            else:
                w.line(f"rows, cols, warps = ts_tile({n_rows}, {n})")
                w.line(f"grid = (triton.cdiv({n_rows}, rows) * triton.cdiv({n}, cols),)")
                w.line(f"{k.name}_kernel[grid]({', '.join(args)}, ROWS=rows, COLS=cols, num_warps=warps)")
        w.line(f"return {', '.join(outs)}")
    return w.text()


__all__ = ["emit_triton_kernel", "TritonKernel", "IMPORTS", "TL", "helper_import", "helper_names"]

"""C++ source for fused kernels (`kernel.pointwise` and `kernel.reduction` ops of
ir/passes/fuse.py).

One `extern "C"` function per kernel, `<name>_kernel` (runtime/kernels.py builds the library,
reads the parameters off these declarations and binds the functions to Python). The source a
module holds starts with `#include <torchscribe/kernels.h>` (PRELUDE): the math and helpers are
runtime/include's. Parameters, in order: the iteration sizes n0..n{N-1}; each output's data
pointer (outputs are fresh row-major tensors, but for an output written into a view of a larger
tensor, the kernel's `into`: its pointer is followed by all its strides); each tensor input's
data pointer and the strides of the dims it moves along, named after the tensor's own dims
(`in0_s0` for a per-channel [C, 1, 1] scale), none of a dim it broadcasts along; an input an
output is written over (`reuse`) has no parameters: it is read from that output, which is
dense (`out0[o + j]`); then the scalar inputs (int64_t or double). The launcher passes a
tensor for each pointer and the strides after it (`_lib.k(n0, 32, out0, in0)`). The kernel
computes what is computed once per call, then runs its rows (all dims but the last) in a
lambda, on one thread or on each OpenMP thread's share of them above PARALLEL_MIN elements
(`ts_rows`). The innermost loop is written once, for every layout: where an input steps along
the row by its stride, a lambda of `unit` (every such stride is 1) that steps each tensor by a
constant `1` in the version for unit strides, which the compiler vectorises as contiguous loads
and stores, by its stride in the other (`ts_unit_or_strided`; a reduction's row function is a
template of `unit`). Statements follow a comment quoting the source line they compute (`//
out = self.bn1(out)`, once per run), and parameter lists and declarations of several names
fill lines of WIDTH columns.

A reduction kernel runs one row (the last dim) per row of the outer dims: the values
that depend on the row only are computed once, and each level of reductions is one pass over the
row (vectorised reductions; see _reduction_pass for how sums stay accurate and maxima exact).

The body computes one element with torch's semantics: operands are converted to the op's
computation dtype (torch.result_type of the operands, found with meta tensors), NaN propagates
through maximum/minimum/clamp, casts to bool test `!= 0`. bfloat16 and float16 values are floats
rounded to 16 bits after every op, as torch's CPU kernels compute them (VALUE, _operand), so a
chain of them gives eager's bits up to the math functions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

import torch

from ir import ops
from ir.core import BlockArg, Operation, Value
from codegen.launcher_text import last_line, with_source
from codegen.elements import Element, Parts, compute_dtype, divides, element_of, is_transcendental
from ir.passes.fuse import SCALARS, kernel_shape
from ir.types import FLOAT, TensorType

# The C type of a tensor element in memory.
CTYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "bool",
         "bfloat16": "uint16_t", "float16": "uint16_t"}
# 16-bit floats are computed in float and rounded back to 16 bits after every op, as torch's CPU
# kernels do: a value of such a dtype is the float it widens to (VALUE), loaded, rounded and
# stored by the ts_<op>_<suffix> helpers of runtime/include/torchscribe/kernels.h.
HALF = {"bfloat16": "bf16", "float16": "f16"}
VALUE = {**CTYPE, "bfloat16": "float", "float16": "float"}
FLOATING = {"float32", "float64", *HALF}
PARALLEL_MIN = 32768  # elements: below this, threads cost more than they save
FRESH_MIN = 8 << 20  # bytes of an output below which ts_fresh (kernels.h) does nothing

# What a module's kernel source starts with: the support code every kernel shares (the math,
# ts_rows, ts_max, the 16-bit conversions) is a checked-in header, not text in each module.
PRELUDE = "#include <torchscribe/kernels.h>\n"


@dataclass(frozen=True)
class Signature:
    """What the Python launcher passes: `args`, the names of the kernel's Python arguments in
    order (runtime/kernel_signatures.py: sizes `n0`, ..., the tensors `out0`, ...,
    `in0`, ..., each standing for its data pointer and the strides declared after it, and the
    scalars `s0`, ...)."""

    name: str
    outputs: tuple[str, ...]  # dtype names
    scalars: tuple[str, ...]  # "int64_t" or "double"
    args: tuple[str, ...]


def emit_kernel(op: ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> tuple[str, Signature]:
    """The C++ function of one kernel, and its signature for the launcher; `source_lines` (the
    lines of each source file) for the comments quoting the source line of each statement."""
    shape = kernel_shape(op)
    rank = len(shape)
    n_in = op.attributes["inputs"]
    tensors, scalars = op.operands[:n_in], op.scalar_inputs
    strided = [_strided_dims(k, v.type, shape) for k, v in enumerate(tensors)]  # type: ignore[arg-type]
    name = op.attributes["name"]
    aliased = {j: k for k, j in op.attributes.get("reuse", ())}  # input -> the output over it
    into = op.views_written  # outputs written into a view: their strides are parameters
    assert not into or (rank > 0 and isinstance(op, ops.PointwiseKernelOp))  # (ir/passes/concat.py)
    params = [("int64_t", f"n{i}") for i in range(rank)]  # (C++ type, name)
    for k, r in enumerate(op.results):
        params.append((f"ts_out<{CTYPE[r.type.dtype]}>", f"out{k}"))  # type: ignore[union-attr]
        if k in into:
            params += [("int64_t", f"out{k}_s{d}") for d in range(rank)]
    for k, (v, dims) in enumerate(zip(tensors, strided)):
        if k not in aliased:  # (an input written over is read from its output, which is dense)
            params.append((f"ts_in<{CTYPE[v.type.dtype]}>", f"in{k}"))  # type: ignore[union-attr]
            params += [("int64_t", stride) for stride in dims.values()]
    scalar_types = ["double" if v.type == FLOAT else "int64_t" for v in scalars]
    params += [(t, f"s{k}") for k, t in enumerate(scalar_types)]
    body = _Body(op, source_lines)
    lines = wrapped(f'extern "C" void {name}_kernel', [f"{t} {n}" for t, n in params], " {")
    # (the outputs the launcher allocated, each written whole: not one written into a view or
    # over an input, nor a reduction's one value per row; none where the sizes are known and small)
    plan = _RowPlan(op, [rank - 1 in dims for dims in strided], source_lines) \
        if isinstance(op, ops.ReductionKernelOp) else None
    fresh = [k for k in range(len(op.results)) if k not in into and k not in aliased.values()
             and not (plan is not None and k in plan.row_outputs)]
    if rank > 0 and not (all(type(d) is int for d in shape) and math.prod(shape) * 8 < FRESH_MIN):
        lines += [f"  ts_fresh(out{k}, {' * '.join(f'n{i}' for i in range(rank))});" for k in fresh]
    if plan is not None:
        row = _row_function(name, rank, op, strided, scalar_types, plan, aliased)
        lines = row + [""] + lines + _row_driver(name, rank, op, strided, plan, len(scalars), aliased)
    elif rank == 0:
        for j, k in aliased.items():
            lines.append(f"  const {CTYPE[tensors[j].type.dtype]}* in{j} = out{k};  // out{k} is written over in{j}")  # type: ignore[union-attr]
        loads = {k: f"in{k}[0]" for k in range(n_in)}
        lines += ["  " + line for line in body.statements(loads, "0")]
    else:
        lines += _loops(shape, n_in, strided, body, aliased, into)
    lines.append("}")
    lines = _joined_declarations(lines)
    args = [f"n{i}" for i in range(rank)] + [f"out{k}" for k in range(len(op.results))]
    args += [f"in{k}" for k in range(n_in) if k not in aliased] + [f"s{k}" for k in range(len(scalars))]
    sig = Signature(name, tuple(r.type.dtype for r in op.results), tuple(scalar_types), tuple(args))  # type: ignore[union-attr]
    return "\n".join(lines) + "\n", sig


WIDTH = 100  # columns a parameter or argument list fills before it wraps


def wrapped(head: str, items: list[str], tail: str = "", indent: str = "") -> list[str]:
    """`head(items)tail` as C++ lines: one where it fits in WIDTH columns, else the items filled
    onto lines of their own, indented four spaces more than `indent`."""
    one = f"{indent}{head}({', '.join(items)}){tail}"
    if len(one) <= WIDTH or not items:
        return [one]
    lines, line, pad = [f"{indent}{head}("], "", indent + "    "
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else f"){tail}")
        if line and len(pad) + len(line) + 1 + len(piece) > WIDTH:
            lines.append(pad + line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return lines + [pad + line]


def _strided_dims(k: int, t: TensorType, shape: tuple) -> dict[int, str]:
    """The iteration dims where input `k` (of type `t`) moves (it is not broadcast there), each
    with its stride parameter: `in<k>_s<d>` for the tensor's own dim d (a lower-rank input, a
    per-channel scale of shape [C, 1, 1], numbers its dims from its first: `i1 * in0_s0`), as
    the runtime reads it off the tensor passed (`in0.stride(0)`). A kernel declares only these
    strides: it never reads the stride of a dim it broadcasts along."""
    rank, offset = len(shape), len(shape) - len(t.shape)  # type: ignore[arg-type]
    return {i: f"in{k}_s{i - offset}" for i in range(rank)
            if i >= offset and not (t.shape[i - offset] == 1 and shape[i] != 1)}  # type: ignore[index]


def _row_pointers(rank: int, strided: list[dict[int, str]], aliased: dict[int, int], into: list[int],
                  pointers: list[int]) -> list[str]:
    """Inside the kernel's row (the lambda `ts_rows_of` runs with the outer indices i0, ... and
    `o`, the row's first element; of a rank-1 kernel, `ts_chunks_of` with its elements from
    `o`): the pointer at the row of each input of `pointers` (`p0`, ...; an input written over by
    an output is at the output's row), and that of each output written into a view (`q0`, ...)."""
    outer = list(range(rank - 1))
    lines = []
    for k in pointers:
        base = f"out{aliased[k]} + o" if k in aliased else " + ".join([f"in{k}"] + _moves(k, strided, outer))
        lines.append(f"const auto* p{k} = {base};")
    for k in into:
        moves = [f"i{i} * out{k}_s{i}" for i in outer] or [f"o * out{k}_s0"]
        lines.append(f"auto* q{k} = {' + '.join([f'out{k}'] + moves)};")
    return lines


def _moves(k: int, strided: list[dict[int, str]], outer: list[int]) -> list[str]:
    """The terms of input `k`'s offset at the current row (`i1 * in0_s0`); a rank-1 kernel's
    elements start at `o`."""
    if not outer:
        return [f"o * {strided[k][0]}"] if 0 in strided[k] else []
    return [f"i{i} * {strided[k][i]}" for i in outer if i in strided[k]]


def _each_row(rank: int, row_strides: list[str], body: list[str], own: list[str] = []) -> list[str]:
    """The statement that runs `body` (the lines of the row, indented two spaces) on every row of
    the outer dims (`ts_rows_of`; a rank-1 kernel's elements in parts, `ts_chunks_of`), on the
    threads when the kernel is large enough. With `row_strides` (the tensors' strides along the
    row) the lambda takes `unit` first: true where every one of them is 1 (`_steps`)."""
    inner = rank - 1
    head = ["{" + ", ".join(row_strides) + "}"] if row_strides else []
    params = ["auto unit"] if row_strides else []
    if rank == 1:
        return _lambda_call("ts_chunks_of", head + ["n0"], params + ["auto o", "auto end"], body)
    head += ["{" + ", ".join(f"n{i}" for i in range(inner)) + "}", f"n{inner}"]
    params += [f"auto i{i}" for i in range(inner)] + ["auto o"]
    return _lambda_call("ts_rows_of", head, params, body, own)


def _lambda_call(callee: str, items: list[str], params: list[str], body: list[str], own: list[str] = []) -> list[str]:
    """`callee(items, [&](params) {`, the lines of `body`, `});`: the kernel's code as the lambda
    a helper of kernels.h runs (and inlines: TS_ROWS), the call wrapped at WIDTH columns, the
    lambda's brace ending it; `own`, what it captures by value (a gatherer `g0`: each thread's
    copy its own)."""
    lines = wrapped(callee, items + [f"[{', '.join(['&', *own])}]({', '.join(params)})"], " {", "  ")
    lines[-1] = lines[-1][:-len(") {")] + " {"
    return lines + ["    " + t for t in body] + ["  });"]


def _merge_into_inner(shape: tuple, n_in: int, strided: list[dict[int, str]], aliased: dict[int, int],
                      into: list[int]) -> list[str]:
    """The statement that folds outer dims into the inner one while every input walks them as
    one (both broadcast, or strided with s[d] == s[inner] * n[inner]; an input written over is
    read as its dense output is, which any dims fold in): a (1, 1280, 7, 7) batch-norm kernel
    then runs 1280 rows of 49 elements, not 8960 rows of 7, whose loop overhead dominated. One
    `ts_fold_into` per dim, from the inner one out, joined by `&&`: a dim is folded whole while
    the row stays short, else in part (its size and strides divided by what goes into the row),
    and the folding stops there: rows of a few thousand elements remain for the threads. What
    the sizes the entry checks fix decide is decided here: a dim of extent 1 folds in with
    nothing to do, and one an input broadcasts along and not along the inner one never does
    (`n1 == 1` of 32 channels)."""
    inner = len(shape) - 1
    folds: list[str] = []
    for d in range(inner - 1, -1, -1):
        if shape[d] == 1:
            continue
        conditions: list[str] | None = []
        scaled: list[str] = []
        for k in range(n_in):
            if k in aliased:
                continue
            if (d in strided[k]) != (inner in strided[k]):
                conditions = None  # broadcast along one dim and not the other: never one dim
                break
            if d in strided[k]:
                conditions.append(f"{strided[k][d]} == {strided[k][inner]} * n{inner}")
                scaled.append(strided[k][d])
        if conditions is None:
            if type(shape[d]) is int:
                break
            folds.append(f"ts_fold_into(n{d}, n{inner}, false)")  # (only where it is 1)
            continue
        conditions += [f"out{k}_s{d} == out{k}_s{inner} * n{inner}" for k in into]
        scaled += [f"out{k}_s{d}" for k in into]
        folds.append(f"ts_fold_into({', '.join([f'n{d}', f'n{inner}', ' && '.join(conditions) or 'true', *scaled])})")
    while folds and folds[-1].endswith(", false)"):  # (folding a 1 in with nothing after it does nothing)
        folds.pop()
    return _filled("  ", folds, ";", " &&") if folds else []


def _loops(shape: tuple, n_in: int, strided: list[dict[int, str]], body: "_Body", aliased: dict[int, int],
           into: list[int]) -> list[str]:
    """The kernel's body after its declaration: the dims folded into the inner one, then the rows
    of the outer dims, all on one thread or each thread's share (`ts_rows_of`, runtime/include's
    kernels.h), each row computing what does not vary along it once and then its elements in a
    vectorised loop. The row is a lambda inside the kernel, not the loop of an `omp parallel
    for`, which gcc compiles as an outlined function reading sizes and pointers through a shared
    struct even when its `if` clause runs it serially (a serial batch-norm + hardswish kernel ran
    35% slower); nor a function of its own taking the kernel's parameters again (as fast,
    measured on a batch norm and an LSTM cell's gates, and twice the text). Where an input steps
    along the row by its stride, the row is written once, a lambda that ts_rows_of runs with
    `unit` known to the compiler (`_steps`), both versions inlined there: as a template of a
    function called through a pointer, a sin/cos/exp chain ran 1.5% slower."""
    rank = len(shape)
    inner = rank - 1
    outer = list(range(inner))
    ones = {d for d, n in enumerate(shape) if n == 1}  # (sizes the entry checks fix)
    # (an input written over by an output is read from it, dense: `out0[o + j]`)
    moving = [k for k in range(n_in) if inner in strided[k] and k not in aliased]
    strides = [strided[k][inner] for k in moving] + [f"out{k}_s{inner}" for k in into]
    lines = _merge_into_inner(shape, n_in, strided, aliased, into)
    # What does not vary along the row (a per-channel batch-norm scale) is computed once per row:
    # with a short row (7 x 7 feature maps) the vectorised loop never runs, and per element a
    # square root and a division cost more than the load and store.
    fixed = {k for k in range(n_in) if inner not in strided[k]}
    hoisted = body.invariant_ops(fixed)
    # What varies along the row and not along some outer dim, the same in every row there (a
    # per-channel batch-norm scale of a channels-last kernel: 1/sqrt(var + eps); a squeeze-and-
    # excitation gate, per image and channel: sigmoid(s)), is computed once per call into rows
    # of its own.
    along, dims = _partial_inputs(rank, n_in, strided, aliased, ones) if outer else (set(), [])
    rowwise, kept = body.row_ops(along, set(hoisted))
    if kept:  # (after the dims are merged: rows as long as the loop nest's)
        lines += _row_buffers(inner, body, along, dims, strided, rowwise, kept)
    loads = {k: f"p{k}[j * in{k}_step]" for k in moving
             if not (kept and k in along and not body.used_beyond(k, rowwise))}
    row = _row_pointers(rank, strided, aliased, into, [k for k in loads if _moves(k, strided, outer)])
    loads = {k: at if _moves(k, strided, outer) else f"in{at[1:]}" for k, at in loads.items()}  # (the same in every row)
    if kept and len(dims) > 1:
        row.append(f"const int64_t r = ({_flat(dims[:-1])}) * n{inner};")
    fixed_loads = {k: f"in{k}[{' + '.join(_moves(k, strided, outer)) or '0'}]" for k in sorted(fixed)}
    per_row = body.placed(body.computed(hoisted, fixed_loads), fixed_loads)
    row += body.quoted(per_row)
    row += _steps([f"in{k}_step = unit ? 1 : {strided[k][inner]}" for k in loads]
                  + [f"out{k}_step = unit ? 1 : out{k}_s{inner}" for k in into], "")
    loads = dict(sorted({**loads, **{k: f"out{o}[o + j]" for k, o in aliased.items()}}.items()))
    skip = set(hoisted) | (set(rowwise) if kept else set())
    # An element with three or more transcendentals, a dependency chain longer than the core
    # overlaps across loop iterations, is computed four at a time, interleaved (ts_elements,
    # kernels.h: the element's stores are the lambda it returns); others in a plain loop, where
    # that gains less than compiling the element's code five times costs (pointwise_chain's
    # kernel: 3.1 s to build, 1.6 s two at a time, 0.7 s one at a time).
    four = sum(is_transcendental(op) for op in body.op.body.ops if op not in skip) >= 3
    n = f"n{inner}" if outer else "end - o"
    row += [f"ts_elements<{ELEMENT_WAYS}>({n}, [&](int64_t j) TS_INLINE {{"] if four else \
        ["#pragma omp simd", f"for (int64_t j = 0; j < {n}; ++j) {{"]
    row += [f"  {body.row_load(v, 'r + j' if len(dims) > 1 else 'j')}" for v in kept]
    stores = {k: f"q{k}[j * out{k}_step]" for k in into}
    # (the loop's first statements from the line the row's last came from: quoted once, above)
    last = last_line(per_row) if not kept else None
    row += [f"  {t}" for t in body.statements(loads, "o + j", skip=skip, stores=stores, last=last, deferred=four)]
    row += ["});" if four else "}"]
    return lines + _each_row(rank, strides, row)


def _same_line(a: Operation, b: Operation) -> bool:
    return a.loc is not None and b.loc is not None and (a.loc.file, a.loc.line) == (b.loc.file, b.loc.line)


def _bare_arguments(text: str) -> str:
    """`text` without the parentheses around a whole argument of a call (`std::sqrt((x + e))`
    is `std::sqrt(x + e)`): a folded value is parenthesized for the operator it may meet."""
    chars = list(text)
    stack: list[int] = []
    pairs: dict[int, int] = {}
    for i, c in enumerate(chars):
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            pairs[stack.pop()] = i
    drop = set()
    for start, end in pairs.items():
        before = text[:start].rstrip()
        if before.endswith(("(", ",")) and text[end + 1:end + 2] in (")", ",") \
                and (not before.endswith("(") or re.search(r"[\w>]\($", before)):
            drop |= {start, end}
    return "".join(c for i, c in enumerate(chars) if i not in drop)


def _atomic(text: str) -> bool:
    """Whether a C++ expression reads as one operand: a name, a literal or a call (`std::sqrt(x)`,
    `ts_max(a, b)`), or one in parentheses."""
    if re.fullmatch(r"[\w.:]+", text):
        return True
    head = re.match(r"[\w:<>]*\(", text)
    if head is None or not text.endswith(")"):
        return False
    depth = 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if depth == 0 and i >= head.end() - 1:
            return i == len(text) - 1
    return False


def _grouped(index: str) -> str:
    """`index` as an operand of `*`: in parentheses where it is a sum."""
    return f"({index})" if " " in index else index


# One declaration `const T name = value;` of a line (no pointer type: `const auto* p0 = a, p1 = b`
# would not declare p1 a pointer; no comment after it).
_DECLARATION = re.compile(r"( *)(const [\w:<>]+) (\w+) = ([^;]*);")


def _joined_declarations(lines: list[str]) -> list[str]:
    """Runs of declarations of one type, one a line, as one declaration of several names filled
    into lines of WIDTH columns: `const float v1 = a0 + 1e-05f, v2 = std::sqrt(v1), ...;`, a
    chain of values read left to right (a batch norm's six statements on two lines). A comment,
    a store or a loop between them ends a run, so each stays under the source line it quotes."""
    out: list[str] = []
    run: list[re.Match[str]] = []

    def flush() -> None:
        if run:
            out.extend(_filled(f"{run[0][1]}{run[0][2]} ", [f"{m[3]} = {m[4]}" for m in run], ";"))
            run.clear()

    for line in lines:
        match = _DECLARATION.fullmatch(line)
        if match is None or (run and (match[1], match[2]) != (run[0][1], run[0][2])):
            flush()
        if match is None:
            out.append(line)
        else:
            run.append(match)
    flush()
    return out


def _steps(steps: list[str], indent: str = "  ") -> list[str]:
    """The declaration of each tensor's step along the row: 1 where `unit` is a compile-time true
    (a std::true_type of ts_unit_or_strided, or a template parameter: the compiler sees unit
    steps and vectorises contiguous loads and stores), its stride otherwise. One loop body
    serves both."""
    return _filled(indent + "const int64_t ", steps, ";") if steps else []


def _filled(head: str, items: list[str], tail: str, separator: str = ",") -> list[str]:
    """`head` and the `items` (each but the last followed by `separator`), then `tail`, filled
    into lines of WIDTH columns (continuation lines indented four spaces more than `head`)."""
    pad = " " * (len(head) - len(head.lstrip()) + 4)
    lines, line = [], head
    for i, item in enumerate(items):
        piece = item + (separator if i < len(items) - 1 else tail)
        if line.strip() and line != head and len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = pad + piece
        else:
            line = line + piece if line == head else f"{line} {piece}"
    return lines + [line]


def _partial_inputs(rank: int, n_in: int, strided: list[dict[int, str]], aliased: dict[int, int],
                    ones: set[int]) -> tuple[set[int], list[int]]:
    """The inputs that move along the row but not along every dim, and the dims they move along
    together (the row's last), when some dim is left; else those that move along the row only.
    Dims of extent 1 (`ones`: a batch of one) count for none: nothing moves along them."""
    inner = rank - 1
    live = set(range(rank)) - ones
    moves = [set(dims) & live for dims in strided]
    along = {k for k in range(n_in) if inner in moves[k] and moves[k] != live and k not in aliased}
    dims = sorted({d for k in along for d in moves[k]})
    if set(dims) == live:
        along, dims = {k for k in along if moves[k] == {inner}}, [inner]
    return along, dims


def _flat(dims: list[int]) -> str:
    """The row-major index of the loop indices `dims` in the extents n<d>."""
    flat = ""
    for d in dims:
        flat = f"i{d}" if not flat else f"({flat}) * n{d} + i{d}"
    return flat


def _row_buffers(inner: int, body: "_Body", along: set[int], dims: list[int], strided: list[dict[int, str]],
                 rowwise: list[Operation], kept: list[Value]) -> list[str]:
    """The loops, before the loop nest, that compute the values `kept` (of the ops `rowwise`,
    from the inputs `along`, which move along the dims `dims` only, the row's last) into one row
    per index of the other `dims` (`r3[j]`, or `r3[r + j]`)."""
    size = " * ".join(f"n{d}" for d in dims)
    # (an array, not a std::vector: std::vector<bool> packs bits, which no loop reads as vectors)
    lines = [f"  std::unique_ptr<{VALUE[v.type.dtype]}[]> r{body.names[v][1:]}(new {VALUE[v.type.dtype]}[{size}]);"  # type: ignore[union-attr]
             for v in kept]
    pad = "  "
    for d in dims[:-1]:
        lines.append(f"{pad}for (int64_t i{d} = 0; i{d} < n{d}; ++i{d}) {{")
        pad += "  "
    lines.append(f"{pad}for (int64_t j = 0; j < n{inner}; ++j) {{")
    read = {v for op in rowwise for v in op.operands}
    for k in sorted(along):
        if body.op.body.args[k] in read:
            at = " + ".join([f"i{d} * {strided[k][d]}" for d in dims[:-1] if d in strided[k]] + [f"j * {strided[k][inner]}"])
            lines.append(f"{pad}  {body.load(k, f'in{k}[{at}]')}")
    lines += [f"{pad}  {t}" for t in body.quoted([(op, body.compute(op)) for op in rowwise])]
    index = f"({_flat(dims[:-1])}) * n{inner} + j" if len(dims) > 1 else "j"
    lines += [f"{pad}  r{body.names[v][1:]}[{index}] = {body.names[v]};" for v in kept]
    for _ in range(len(dims)):
        lines.append(f"{pad}}}")
        pad = pad[:-2]
    return lines


class _Body:
    """The element computation: one C++ statement per op of the kernel's region."""

    def __init__(self, op: ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> None:
        self.op = op
        self.source_lines = source_lines
        self.n_in = op.attributes["inputs"]
        self.names: dict[Value, str] = {}
        for k, a in enumerate(op.body.args):
            self.names[a] = f"a{k}" if k < self.n_in else f"s{k - self.n_in}"
        for n, inner in enumerate(op.body.ops):
            if isinstance(inner, ops.ConstantOp):
                self.names[inner.result] = _literal(inner.attributes["value"])
            elif inner.results:
                self.names[inner.result] = f"v{n}"

    def load(self, k: int, at: str) -> str:
        dtype = self.op.body.args[k].type.dtype  # type: ignore[union-attr]
        return f"const {VALUE[dtype]} a{k} = {_load(dtype, at)};"

    def compute(self, inner: Operation) -> str:
        return f"const {VALUE[inner.result.type.dtype]} {self.names[inner.result]} = {_bare_arguments(element(inner, self.names))};"  # type: ignore[union-attr]

    def quoted(self, items: list[tuple[Operation | None, str]], last: tuple[str, int] | None = None) -> list[str]:
        """Statements with the op each computes (None: a load, a store), each run of them from one
        source line after a comment quoting it (not again for the line of `last`, quoted just
        before)."""
        return with_source(items, self.source_lines, "//", last)

    def placed(self, items: list[tuple[Operation | None, str, set[Value]]], loads: dict[int, str]) \
            -> list[tuple[Operation | None, str]]:
        """`items` (statements with the op each computes and the values it reads) with the load
        of each input of `loads` (input -> where it is read) just before the first statement
        that reads it, under that statement's source line (`const float a4 = out0[o + j], v7 = a4
        * v4, ...`); the loads no statement here reads (a value the kernel stores as it is, or
        sums) first."""
        args = self.op.body.args
        first: dict[int, int] = {}
        for i, (_, _, reads) in enumerate(items):
            for k in loads:
                if k not in first and args[k] in reads:
                    first[k] = i
        out: list[tuple[Operation | None, str]] = [(None, self.load(k, at)) for k, at in loads.items() if k not in first]
        for i, (op, text, _) in enumerate(items):
            out += [(op, self.load(k, loads[k])) for k in loads if first.get(k) == i]
            out.append((op, text))
        return out

    def computed(self, chosen: list[Operation], loads: dict[int, str] | None = None) \
            -> list[tuple[Operation, str, set[Value]]]:
        """The statements computing the ops `chosen` (in this order, in one place), each with
        the values it reads. An op whose value one later op of `chosen` from the same source line
        alone reads is printed inside that op's expression, in parentheses where it is not a
        call (`v4 = (float(1) / std::sqrt(in0[i1 * in0_s0] + 1e-05f)) * a1`): the same
        operations in the same order (no contraction: -ffp-contract=off), one name instead of
        four; so is the load of an input (of `loads`, input -> where it is read) that one op
        alone reads, and that loads is then done. Not a load of an input an output is written
        over (`out0[o + j]`): a store may come between."""
        listed = set(chosen)
        inside: set[Operation] = set()
        for op in chosen:
            uses = op.result.uses
            if len(uses) == 1 and uses[0].op in listed and not isinstance(uses[0].op, ops.ReduceOp) \
                    and _same_line(op, uses[0].op):
                inside.add(op)
        args = self.op.body.args
        written = {k for _, k in self.op.attributes.get("reuse", ())}
        for k, at in list((loads or {}).items()):
            uses = args[k].uses
            if len(uses) == 1 and uses[0].op in listed and k not in written and not isinstance(uses[0].op, ops.ReduceOp):
                self.names[args[k]] = _load(args[k].type.dtype, at)  # type: ignore[union-attr]
                del loads[k]  # type: ignore[index]
        reads: dict[Operation, set[Value]] = {}
        items = []
        for op in chosen:
            reads[op] = set(op.operands).union(*(reads[v.owner] for v in op.operands if v.owner in inside))  # type: ignore[index]
            if op in inside:
                text = element(op, self.names)
                self.names[op.result] = text if _atomic(text) else f"({text})"
                continue
            items.append((op, self.compute(op), reads[op]))
        return items

    def statements(self, loads: dict[int, str], index: str, skip: set[Operation] = set(),
                   stores: dict[int, str] = {}, last: tuple[str, int] | None = None,
                   deferred: bool = False) -> list[str]:
        """The element's statements; output k is stored at `out<k>[index]`, or at `stores[k]`:
        the expression of the op that computes it, where the store alone reads it
        (`out0[o + j] = ts_max(v8, 0.0f);`). `deferred`: the stores are left to a lambda that the
        statements return last (ts_elements in kernels.h), which stores the values by name, an
        expression the store alone reads as `y<k>` (`const float y0 = ts_max(v8, 0.0f);` and
        `return [=] { out0[o + j] = y0; };`)."""
        yielded = self.op.body.terminator.operands
        stored = {v.owner for v in yielded if isinstance(v.owner, Operation) and v.owner not in skip
                  and v.owner.parent is self.op.body and len(v.uses) == 1 and not isinstance(v.owner, ops.ConstantOp)}
        chosen = [inner for inner in self.op.body.ops
                  if not isinstance(inner, (ops.ConstantOp, ops.YieldOp)) and inner not in skip]
        items: list[tuple[Operation | None, str, set[Value]]] = []
        by_op = {}
        loads = dict(loads)
        for op, text, reads in self.computed(chosen, loads):
            if op in stored:
                by_op[op] = reads
            else:
                items.append((op, text, reads))
        later: list[str] = []  # (deferred: the stores)
        for k, v in enumerate(self.op.body.terminator.operands):
            target = stores.get(k, f"out{k}[{index}]")
            if v.owner in stored:
                value = _store(v, _bare_arguments(element(v.owner, self.names)))  # type: ignore[arg-type]
            else:
                value = _store(v, self.names[v])
            if not deferred:
                items.append((v.owner if v.owner in stored else None, f"{target} = {value};",
                              by_op[v.owner] if v.owner in stored else {v}))  # type: ignore[index]
            elif v.owner in stored or not isinstance(v.owner, Operation) or isinstance(v.owner, ops.ConstantOp):
                # (a load or a constant needs a statement here, the load its place among the loads)
                items.append((v.owner if v.owner in stored else None,
                              f"const {CTYPE[v.type.dtype]} y{k} = {value};",  # type: ignore[union-attr]
                              by_op[v.owner] if v.owner in stored else {v}))  # type: ignore[index]
                later.append(f"{target} = y{k};")
            else:
                later.append(f"{target} = {value};")
        lines = self.quoted(self.placed(items, loads), last)
        if deferred:
            stored_later = f"return [=] {{ {' '.join(later)} }};"
            lines += [stored_later] if len(stored_later) <= 80 else ["return [=] {", *("  " + t for t in later), "};"]
        return lines

    def invariant_ops(self, fixed_inputs: set[int]) -> list[Operation]:
        """The ops whose operands are all fixed along the row: those inputs, scalars, constants
        and other such ops (ops that only forward a value, a load's conversion, count too)."""
        args = self.op.body.args
        fixed: set[Value] = {args[k] for k in fixed_inputs} | set(args[self.n_in:])
        found = []
        for inner in self.op.body.ops:
            if isinstance(inner, ops.ConstantOp):
                fixed.add(inner.result)
            elif not isinstance(inner, ops.YieldOp) and inner.results \
                    and all(v in fixed for v in inner.operands):
                fixed.add(inner.result)
                found.append(inner)
        return found


    def row_ops(self, along: set[int], invariant: set[Operation]) -> tuple[list[Operation], list[Value]]:
        """The ops that depend on the inputs `along` (which move along the row only) and on
        nothing that moves across rows, and of their values those that the rest of the element
        computation reads, when one of those ops is worth a row of its own (a square root, a
        division, a transcendental function: not a lone add)."""
        args = self.op.body.args
        same: set[Value] = {args[k] for k in along} | set(args[self.n_in:])
        found: list[Operation] = []
        for inner in self.op.body.ops:
            if isinstance(inner, ops.ConstantOp):
                same.add(inner.result)
            elif not isinstance(inner, ops.YieldOp) and inner.results and inner not in invariant \
                    and all(v in same for v in inner.operands) \
                    and any(v in same and not isinstance(v.owner, ops.ConstantOp) for v in inner.operands):
                same.add(inner.result)
                found.append(inner)
        if not any(is_transcendental(inner) or divides(inner) for inner in found):
            return [], []
        inside = set(found)
        kept = [inner.result for inner in found if any(u.op not in inside for u in inner.result.uses)]
        return found, kept

    def used_beyond(self, k: int, rowwise: list[Operation]) -> bool:
        """Whether input `k` is read by more than the ops computed into rows."""
        inside = set(rowwise)
        return any(u.op not in inside for u in self.op.body.args[k].uses)

    def row_load(self, v: Value, at: str) -> str:
        return f"const {VALUE[v.type.dtype]} {self.names[v]} = r{self.names[v][1:]}[{at}];"  # type: ignore[union-attr]


class _RowPlan:
    """When each value of a reduction kernel is computed. Element values (those that vary along
    the row) belong to a pass: the first pass after every row value they use exists. Row values
    have a depth: the number of passes that must come before them (a reduction's is one more
    than its operand's pass). A transcendental element value a later pass needs again is kept in
    a row buffer rather than computed twice (softmax: exp once)."""

    def __init__(self, op: ops.ReductionKernelOp, varies: list[bool],
                 source_lines: dict[str, list[str]] | None = None) -> None:
        self.body = _Body(op, source_lines)
        level: dict[Value, int] = {}  # pass of an element value, depth of a row value
        self.elem: set[Value] = set()
        for k, a in enumerate(op.body.args):
            level[a] = 0
            if k < len(varies) and varies[k]:
                self.elem.add(a)
        self.ops = [o for o in op.body.ops if not isinstance(o, (ops.ConstantOp, ops.YieldOp))]
        for o in self.ops:
            operands = [v for v in o.operands if v in level]
            if isinstance(o, ops.ReduceOp):
                level[o.result] = level[o.operands[0]] + 1
                continue
            level[o.result] = max((level[v] for v in operands), default=0)
            if any(v in self.elem for v in operands):
                self.elem.add(o.result)
        self.level = level
        self.yielded = op.body.terminator.operands
        self.element_outputs: dict[int, list[int]] = {}  # pass -> output numbers
        self.row_outputs: list[int] = []
        for k, (v, r) in enumerate(zip(self.yielded, op.results)):
            if v not in self.elem and r.type.shape[-1] == 1:  # type: ignore[union-attr]
                self.row_outputs.append(k)
            else:
                self.element_outputs.setdefault(level.get(v, 0), []).append(k)
        self.reductions: dict[int, list[ops.ReduceOp]] = {}
        for o in self.ops:
            if isinstance(o, ops.ReduceOp):
                self.reductions.setdefault(level[o.operands[0]], []).append(o)
        self.passes = sorted(set(self.reductions) | set(self.element_outputs))
        # What each pass computes, and the values it stores for later passes.
        self.computed: dict[int, list[Operation]] = {}
        self.stored: dict[int, list[Value]] = {}
        available: set[Value] = set()
        for i, p in enumerate(self.passes):
            computed = self._closure(self.roots(p), available)
            later = self._closure([v for q in self.passes[i + 1:] for v in self.roots(q)], set())
            later_values = {o.result for o in later}
            self.computed[p] = computed
            stored = [o.result for o in computed
                      if is_transcendental(o) and o.result in later_values and o.result not in available]
            self.stored[p] = list(dict.fromkeys(self._forward(v, computed, later) for v in stored))
            available |= set(self.stored[p])
        self.available_before = {p: {v for q in self.passes if q < p for v in self.stored[q]} for p in self.passes}

    def _forward(self, v: Value, computed: list[Operation], later: list[Operation]) -> Value:
        """What to keep of `v` for the later passes (`later`: the ops they need): the value of
        the one op that uses `v` there, where this pass computes it too and it has v's dtype,
        and so on down. Softmax keeps where(x - max < -87, 0, exp(...)), the value its last pass
        divides, which then reads neither x nor exp again."""
        while True:
            users = [o for o in later if v in o.operands]
            if len(users) != 1 or users[0] not in computed or users[0].result.type.dtype != v.type.dtype:  # type: ignore[union-attr]
                return v
            v = users[0].result

    def reads(self, p: int) -> set[int]:
        """The inputs pass `p` loads (those its values are computed from, past its buffers)."""
        available = self.available_before[p]
        used = {v for o in self.computed[p] if o.result not in available for v in o.operands} | set(self.roots(p))
        return {k for k, a in enumerate(self.body.op.body.args) if a in used}

    def roots(self, p: int) -> list[Value]:
        return ([r.operands[0] for r in self.reductions.get(p, [])]
                + [self.yielded[k] for k in self.element_outputs.get(p, [])])

    def _closure(self, roots: list[Value], available: set[Value]) -> list[Operation]:
        """The element ops computing `roots` (values in `available` are read from their buffer),
        in body order."""
        seen: set[Value] = set()
        stack = [v for v in roots if v in self.elem]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if isinstance(v.owner, Operation) and v not in available:
                stack += [u for u in v.owner.operands if u in self.elem]
        return [o for o in self.ops if o.result in seen]

    def row_statements(self, depth: int, varies_inputs: set[int]) -> list[str]:
        """Row values of `depth` (the loads of row inputs at depth 0), except reductions."""
        out: list[tuple[Operation | None, str]] = []
        if depth == 0:
            out += [(None, self.body.load(k, f"p{k}[0]")) for k in range(self.body.n_in) if k not in varies_inputs]
        for o in self.ops:
            if o.result not in self.elem and not isinstance(o, ops.ReduceOp) and self.level[o.result] == depth:
                out.append((o, self.body.compute(o)))
        return self.body.quoted(out)


ELEMENT_WAYS = 4  # elements a long chain of math computes at a time (ts_elements, kernels.h)
_IDENTITY = {"sum": "0", "amax": "-INFINITY", "amin": "INFINITY"}
SUM_BLOCK = 1024  # elements of a float sum's row summed in float lanes (_reduction_pass)


def _row_function(name: str, rank: int, op: ops.ReductionKernelOp, strided: list[dict[int, str]],
                  scalar_types: list[str], plan: _RowPlan, aliased: dict[int, int]) -> list[str]:
    """`static void <name>_row(...)`: the kernel on one contiguous row, its pointers already at
    the row (a function of its own, so that the compiler sees restrict pointers and local sizes,
    which it does not inside an OpenMP region), kept a call (TS_NOINLINE) as it was when the
    driver called it through a pointer. Every input that varies along the row steps by 1: the
    driver gathers a strided row into a contiguous one first (`ts_contiguous`), so that every
    pass is one vectorised loop."""
    inner = rank - 1
    n = f"n{inner}"
    n_in = op.attributes["inputs"]
    varies = {k for k in range(n_in) if inner in strided[k]}
    body = plan.body
    names = body.names
    params = [f"int64_t {n}"]
    params += [f"ts_out<{CTYPE[r.type.dtype]}> out{k}" for k, r in enumerate(op.results)]  # type: ignore[union-attr]
    params += [f"ts_in<{CTYPE[v.type.dtype]}> p{k}" for k, v in enumerate(op.operands[:n_in])  # type: ignore[union-attr]
               if k not in aliased]
    params += [f"{t} s{k}" for k, t in enumerate(scalar_types)]
    lines = wrapped(f"static TS_NOINLINE void {name}_row", params, " {")
    for k, o in aliased.items():  # (read in the passes before the last; the last writes over it)
        lines.append(f"  const {CTYPE[op.operands[k].type.dtype]}* p{k} = out{o};")  # type: ignore[union-attr]
    pad = "  "
    hosts = _buffer_hosts(plan, op, aliased)
    for p in plan.passes:
        for v in plan.stored[p]:
            ct = VALUE[v.type.dtype]  # type: ignore[union-attr]
            buf = f"b{names[v][1:]}"
            if v in hosts:
                lines.append(f"{pad}{ct}* {buf}p = out{hosts[v]};  // {names[v]} along the row, in the output row until the last pass")
                continue
            lines.append(f"{pad}static thread_local std::vector<{ct}> {buf};  // {names[v]} along the row, for a later pass")
            lines.append(f"{pad}if ((int64_t){buf}.size() < {n}) {buf}.resize({n});")
            lines.append(f"{pad}{ct}* __restrict {buf}p = {buf}.data();")

    def element_lines(p: int, roots: list[Value] | None = None, effects: bool = True) -> list[str]:
        """The loads, the computation and (with `effects`) the buffer stores of pass `p` at element j."""
        available = plan.available_before[p]
        needed = plan.computed[p] if roots is None else plan._closure(roots, available)
        used = {v for o in needed if o.result not in available for v in o.operands} | set(plan.roots(p))
        out: list[tuple[Operation | None, str]] = [
            (None, body.load(k, f"p{k}[j]")) for k in sorted(varies) if body.op.body.args[k] in used]
        for o in needed:
            if o.result in available:
                out.append((o, f"const {VALUE[o.result.type.dtype]} {names[o.result]} = b{names[o.result][1:]}p[j];"))  # type: ignore[union-attr]
            else:
                out.append((o, body.compute(o)))
        if effects:
            out += [(None, f"b{names[v][1:]}p[j] = {names[v]};") for v in plan.stored[p]]
            out += [(None, f"out{k}[j] = {_store(plan.yielded[k], names[plan.yielded[k]])};")
                    for k in plan.element_outputs.get(p, [])]
        return body.quoted(out)

    depth_done = -1
    for p in plan.passes:
        for d in range(depth_done + 1, p + 1):
            lines += [pad + t for t in plan.row_statements(d, varies)]
        depth_done = p
        reds = plan.reductions.get(p, [])
        what = ", ".join([f"{r.attributes['kind']} {names[r.result]}" for r in reds]
                         + [f"out{k}" for k in plan.element_outputs.get(p, [])])
        lines.append(f"{pad}// pass {plan.passes.index(p) + 1} over the row: {what}")
        if not reds:
            lines.append(f"{pad}#pragma omp simd")
            lines.append(f"{pad}for (int64_t j = 0; j < {n}; ++j) {{")
            lines += [f"{pad}  {t}" for t in element_lines(p)]
            lines.append(f"{pad}}}")
            continue
        lines += _reduction_pass(pad, n, p, reds, names, element_lines)
    for d in range(depth_done + 1, max(plan.level.values(), default=0) + 1):
        lines += [pad + t for t in plan.row_statements(d, varies)]
    for k in plan.row_outputs:
        lines.append(f"{pad}out{k}[0] = {_store(plan.yielded[k], names[plan.yielded[k]])};")
    lines.append("}")
    return lines


def _buffer_hosts(plan: _RowPlan, op: ops.ReductionKernelOp, aliased: dict[int, int]) -> dict[Value, int]:
    """The row buffers kept in an output's row instead (buffer value -> output number): one
    per element output of the last pass, of the buffer's C type, unless it is written over an
    input that a pass after the buffer's reads. The pass that fills the buffer then writes the
    output's memory while it computes (softmax's exp pass), and the last pass reads and writes
    it in cache; with a buffer of its own, the last pass wrote the whole output to memory after
    the rest (2048 rows of 2048: 2.7 against 2.4 ms)."""
    free = list(plan.element_outputs.get(plan.passes[-1], [])) if plan.passes else []
    hosts: dict[Value, int] = {}
    for p in plan.passes:
        later = set().union(*(plan.reads(q) for q in plan.passes if q > p))
        for v in plan.stored[p]:
            fits = [k for k in free if CTYPE[op.results[k].type.dtype] == VALUE[v.type.dtype]  # type: ignore[union-attr]
                    and not any(o == k and i in later for i, o in aliased.items())]
            if fits:
                hosts[v] = fits[0]
                free.remove(fits[0])
    return hosts


def _row_driver(name: str, rank: int, op: ops.ReductionKernelOp, strided: list[dict[int, str]], plan: _RowPlan,
                n_scalars: int, aliased: dict[int, int]) -> list[str]:
    """The extern "C" function's body: the row function on every row (`ts_rows_of`; in parallel
    when there is enough work), each output and input at its row; an input that steps along the
    row by a stride other than 1 (a LayerNorm2d's channels of an NCHW tensor, H * W apart) is
    gathered into a contiguous row of the thread's first (`g0`, a `ts_gather`), once, and the
    passes read that in cache, vectorised, where each pass read the strided row again (1.2 to
    1.8x eager's time, which copies the tensor to a contiguous one first). Where every stride
    along the row is 1 (`unit`, ts_rows_of's), the gatherers pass the pointers through."""
    inner = rank - 1
    n_in = op.attributes["inputs"]
    outer = list(range(inner))
    row_outputs = set(plan.row_outputs)
    args = [f"n{inner}"]
    args += [f"out{k} + {_grouped(_flat(outer))}" if k in row_outputs and outer else
             f"out{k} + o" if outer else f"out{k}" for k in range(len(op.results))]
    gathered: list[tuple[str, str]] = []  # (name, type) of each input's gatherer
    for k in range(n_in):
        if k in aliased:  # (an input written over is read from its output: the row function's own)
            continue
        at = " + ".join([f"in{k}"] + (_moves(k, strided, outer) if outer else []))
        if inner not in strided[k]:
            args.append(at)
            continue
        gathered.append((f"g{k}", f"ts_gather<{k}, {CTYPE[op.operands[k].type.dtype]}>"))  # type: ignore[union-attr]
        last = inner - 1  # (the rows side by side: the next ones along the last outer dim)
        side = [strided[k][last], f"n{last} - i{last}"] if outer and last in strided[k] else ["0", "1"]
        args.append(f"g{k}({', '.join(['unit', at, f'n{inner}', strided[k][inner], *side])})")
    args += [f"s{k}" for k in range(n_scalars)]
    declared = [f"  const {t} {g}{{}};" for g, t in gathered]
    strides = [strided[k][inner] for k in range(n_in) if k not in aliased and inner in strided[k]]
    call = wrapped(f"{name}_row", args, ";")
    if rank == 1:  # one row
        if not strides:
            return wrapped(f"{name}_row", args, ";", "  ")
        return declared + _lambda_call("ts_unit_or_strided", ["{" + ", ".join(strides) + "}"], ["auto unit"], call)
    return declared + _each_row(rank, strides, call, [g for g, _ in gathered])


def _reduction_pass(pad: str, n: str, p: int, reds: list[ops.ReduceOp], names: dict[Value, str],
                    element_lines: Callable[..., list[str]]) -> list[str]:
    """One pass over the row that accumulates `reds`, in one vectorised loop. A float sum (also
    of 16-bit floats, computed in float) goes in blocks of SUM_BLOCK elements: each block summed
    in float lanes, the blocks' sums added in double. Each lane adds 64 elements of a block (128 with AVX2's 8
    lanes), few enough that a long row of large values with a small mean keeps its mean (a double
    for every element, converted, took twice as long: a layer norm's three sums, 1.4 against 0.6
    ms on 2048 rows of 2048). A float64 sum is in double. A maximum or minimum is the plain vectorised one (right
    for infinities: a causal mask's -inf rows stay on it), with a count of the row's NaNs; a row
    with one takes the exact NaN-propagating loop."""
    lines: list[str] = []
    clauses, updates, blocked = [], [], []
    for r in reds:
        acc, x, kind = f"acc{names[r.result][1:]}", names[r.operands[0]], r.attributes["kind"]
        if kind == "sum":
            lines.append(f"{pad}double {acc} = 0;")
            if r.result.type.dtype == "float64":  # type: ignore[union-attr]
                clauses.append(f"reduction(+:{acc})")
                updates.append(f"{acc} += {x};")
            else:
                blocked.append(r)
                clauses.append(f"reduction(+:part{acc[3:]})")
                updates.append(f"part{acc[3:]} += {x};")
        else:
            lines.append(f"{pad}{VALUE[r.result.type.dtype]} {acc} = {_IDENTITY[kind]}, {acc}_check = 0;")  # type: ignore[union-attr]
            clauses.append(f"reduction({'max' if kind == 'amax' else 'min'}:{acc}) reduction(+:{acc}_check)")
            cmp = ">" if kind == "amax" else "<"
            updates += [f"{acc} = {x} {cmp} {acc} ? {x} : {acc};", f"{acc}_check += static_cast<{VALUE[r.result.type.dtype]}>({x} != {x});"]  # type: ignore[union-attr]
    loop, start, end = pad, "0", n
    if blocked:  # (the loop over the row runs in each block)
        lines.append(f"{pad}for (int64_t j0 = 0; j0 < {n}; j0 += {SUM_BLOCK}) {{  // blocks: summed in float, added in double")
        loop, start, end = pad + "  ", "j0", "j1"
        lines.append(f"{loop}const int64_t j1 = std::min({n}, j0 + {SUM_BLOCK});")
        lines += [f"{loop}float part{names[r.result][1:]} = 0;" for r in blocked]
    lines.append(f"{loop}#pragma omp simd {' '.join(clauses)}")
    lines.append(f"{loop}for (int64_t j = {start}; j < {end}; ++j) {{")
    lines += [f"{loop}  {t}" for t in element_lines(p) + updates]
    lines.append(f"{loop}}}")
    if blocked:
        lines += [f"{loop}acc{names[r.result][1:]} += part{names[r.result][1:]};" for r in blocked]
        lines.append(f"{pad}}}")
    for r in reds:
        if r.attributes["kind"] == "sum":
            continue
        acc, x = f"acc{names[r.result][1:]}", names[r.operands[0]]
        lines.append(f"{pad}if ({acc}_check != 0) {{  // a NaN in the row: the exact, NaN-propagating loop")
        lines.append(f"{pad}  {acc} = {_IDENTITY[r.attributes['kind']]};")
        lines.append(f"{pad}  for (int64_t j = 0; j < {n}; ++j) {{")
        lines += [f"{pad}    {t}" for t in element_lines(p, [r.operands[0]], effects=False)]
        lines.append(f"{pad}    {acc} = {'ts_max' if r.attributes['kind'] == 'amax' else 'ts_min'}({acc}, {x});")
        lines.append(f"{pad}  }}")
        lines.append(f"{pad}}}")
    for r in reds:
        dtype = r.result.type.dtype  # type: ignore[union-attr]
        v, acc, ct = names[r.result], f"acc{names[r.result][1:]}", VALUE[dtype]
        if r.attributes["kind"] == "sum" and ct != "double":  # (a 16-bit sum is rounded from its float)
            lines.append(f"{pad}const {ct} {v} = {_rounded(dtype, f'static_cast<{ct}>({acc})')};")
        else:  # (a maximum or minimum is one of the row's values)
            lines.append(f"{pad}const {ct} {v} = {acc};")
    return lines


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


def element(op: Operation, names: dict[Value, str]) -> str:
    """A C++ expression for one element of `op`'s result (codegen/elements.py spells it), rounded
    to 16 bits when that is the result's dtype (not where the result is an operand's value or an
    integer, or a cast, which rounds itself)."""
    e = element_of(op)
    result = op.result.type.dtype  # type: ignore[union-attr]
    rt = VALUE[result]
    computed = compute_dtype(op) if e.computes_in == "promoted" else result
    args = []
    for i, kind in enumerate(e.operands):
        v = op.operands[i]
        if kind == "value":
            args.append(_operand(op, e, i, names, computed))
        else:
            args.append(names[v] if kind == "as is" else _cast(v, names[v], result))
    if e.floats_only and result not in FLOATING:
        text = args[0]
    else:
        text = Parts(args, f"{rt}(1)", rt, result in FLOATING, lambda x: _rounded(result, x), args.__getitem__).fill(e.cpp)
    return _rounded(result, text) if e.rounding == "rounded" else text


def _cast(v: Value, x: str, dtype: str) -> str:
    """The element `x` of `v` as `dtype`: a bool tests `!= 0`; a 16-bit float is rounded."""
    if dtype == "bool":
        return f"({x} != 0)"
    rt = VALUE[dtype]
    return _rounded(dtype, x if VALUE[v.type.dtype] == rt else f"static_cast<{rt}>({x})")  # type: ignore[union-attr]


def _operand(op: Operation, e: Element, i: int, names: dict[Value, str], dtype: str) -> str:
    """Operand `i` of `op` as a value of `dtype`, the dtype the op computes in. Eager converts an
    operand of another type to a 16-bit `dtype` first (rounding it), except where its entry `e`
    reads a one-element operand in float (mul and div's second, a number on either side of `*`)."""
    v = op.operands[i]
    text = _as(v, names[v], VALUE[dtype])
    own = v.type.dtype if isinstance(v.type, TensorType) else None
    if dtype not in HALF or own in (dtype, "bool") or _read_in_float(op, e, i):
        return text
    if isinstance(v.owner, ops.ConstantOp) and type(v.owner.attributes["value"]) in (int, float, bool):
        value = v.owner.attributes["value"]
        exact = torch.tensor(value, dtype=torch.float64 if type(value) is float else torch.int64).float()
        rounded = exact.to(getattr(torch, dtype)).item()
        return f"{rounded!r}f" if abs(rounded) != float("inf") and rounded == rounded else _literal(rounded)
    return _rounded(dtype, text)


def _read_in_float(op: Operation, e: Element, i: int) -> bool:
    v = op.operands[i]
    if v.type in SCALARS:
        return e.reads_in_float(i, number=True)
    if not e.reads_in_float(i, number=False) or not isinstance(v, BlockArg):
        return False  # (a value computed in the kernel counts as more than one element)
    kernel = v.block.parent.parent  # type: ignore[union-attr]
    return all(d == 1 for d in kernel.operands[v.index].type.shape)  # type: ignore[union-attr]


def _load(dtype: str, text: str) -> str:
    """An element in memory (`text`) as the value of its dtype."""
    return f"ts_load_{HALF[dtype]}({text})" if dtype in HALF else text


def _store(v: Value, text: str) -> str:
    """The value `text` of `v` as the element in memory."""
    dtype = v.type.dtype  # type: ignore[union-attr]
    return f"ts_store_{HALF[dtype]}({text})" if dtype in HALF else text


def _rounded(dtype: str, text: str) -> str:
    """The float `text` rounded to `dtype` when that is a 16-bit float."""
    return f"ts_round_{HALF[dtype]}({text})" if dtype in HALF else text


def _as(v: Value, text: str, ctype: str) -> str:
    """`text` (the element or scalar `v`) as a `ctype`: a cast only where the types differ."""
    if isinstance(v.type, TensorType) and VALUE[v.type.dtype] == ctype:  # type: ignore[index]
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


__all__ = ["emit_kernel", "element", "Signature", "PRELUDE", "CTYPE"]

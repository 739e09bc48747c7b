"""The rows of a C++ reduction kernel. A reduction kernel runs one row (the last dim) per row of
the outer dims: `row_function` computes one contiguous row, the values that depend on the row
only once, and each level of reductions is one pass over the row (vectorised reductions; see
_reduction_pass for how sums stay accurate and maxima exact); `row_driver` runs it on every row
(`RowPlan`: which pass computes what)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Callable

from codegen.cpp_elements import CTYPE, VALUE, Body, rounded_to, to_memory
from codegen.cpp_iteration import each_row, flat_index, offset_terms
from codegen.cpp_text import grouped, lambda_call, wrapped, write_wrapped
from codegen.elements import is_transcendental
from codegen.writer import Writer
from ir.core import ops
from ir.core.graph import Operation, Value
from ir.kernel import ops as kernel_ops


class RowPlan:
    """When each value of a reduction kernel is computed. Element values (those that vary along
    the row) belong to a pass: the first pass after every row value they use exists. Row values
    have a depth: the number of passes that must come before them (a reduction's is one more
    than its operand's pass). A transcendental element value a later pass needs again is kept in
    a row buffer rather than computed twice (softmax: exp once)."""

    def __init__(self, op: kernel_ops.ReductionKernelOp, varies: list[bool],
                 source_lines: dict[str, list[str]] | None = None) -> None:
        self.body = Body(op, source_lines)
        level: dict[Value, int] = {}  # pass of an element value, depth of a row value
        self.elem: set[Value] = set()
        for k, a in enumerate(op.body.args):
            level[a] = 0
            if k < len(varies) and varies[k]:
                self.elem.add(a)
        self.ops = [o for o in op.body.ops if not isinstance(o, (ops.ConstantOp, ops.YieldOp))]
        for o in self.ops:
            operands = [v for v in o.operands if v in level]
            if isinstance(o, kernel_ops.ReduceOp):
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
        self.reductions: dict[int, list[kernel_ops.ReduceOp]] = {}
        for o in self.ops:
            if isinstance(o, kernel_ops.ReduceOp):
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
            if o.result not in self.elem and not isinstance(o, kernel_ops.ReduceOp) and self.level[o.result] == depth:
                out.append((o, self.body.compute(o)))
        return self.body.quoted(out)


_IDENTITY = {"sum": "0", "amax": "-INFINITY", "amin": "INFINITY"}
SUM_BLOCK = 1024  # elements of a float sum's row summed in float lanes (_reduction_pass)


def row_function(w: Writer, name: str, rank: int, op: kernel_ops.ReductionKernelOp, strided: list[dict[int, str]],
                 scalar_types: list[str], plan: RowPlan, aliased: dict[int, int]) -> None:
    """`static void <name>_row(...)`: the kernel on one contiguous row, its pointers already at
    the row (a function of its own, so that the compiler sees restrict pointers and local sizes,
    which it does not inside an OpenMP region), kept a call (TS_NOINLINE) as it was when the
    driver called it through a pointer. Every input that varies along the row steps by 1: the
    driver gathers a strided row into a contiguous one first (`ts_contiguous`), so that every
    pass is one vectorised loop."""
    inner = rank - 1
    n = f"n{inner}"
    n_in = op.inputs
    varies = {k for k in range(n_in) if inner in strided[k]}
    params = [f"int64_t {n}"]
    params += [f"ts_out<{CTYPE[r.type.dtype]}> out{k}" for k, r in enumerate(op.results)]  # type: ignore[union-attr]
    params += [f"ts_in<{CTYPE[v.type.dtype]}> p{k}" for k, v in enumerate(op.operands[:n_in])  # type: ignore[union-attr]
               if k not in aliased]
    params += [f"{t} s{k}" for k, t in enumerate(scalar_types)]
    with w.block(*wrapped(f"static TS_NOINLINE void {name}_row", params, " {")):
        _row_body(w, n, op, plan, varies, aliased)


def _row_body(w: Writer, n: str, op: kernel_ops.ReductionKernelOp, plan: RowPlan, varies: set[int],
              aliased: dict[int, int]) -> None:
    """The row function's statements: its row buffers, then each pass over the row (`n`
    elements) after the row values it needs, then the row outputs."""
    body = plan.body
    names = body.names
    for k, o in aliased.items():  # (read in the passes before the last; the last writes over it)
        w.line(f"const {CTYPE[op.operands[k].type.dtype]}* p{k} = out{o};")  # type: ignore[union-attr]
    hosts = _buffer_hosts(plan, op, aliased)
    for p in plan.passes:
        for v in plan.stored[p]:
            ct = VALUE[v.type.dtype]  # type: ignore[union-attr]
            buf = f"b{names[v][1:]}"
            if v in hosts:
                w.line(f"{ct}* {buf}p = out{hosts[v]};  // {names[v]} along the row, in the output row until the last pass")
                continue
            w.line(f"static thread_local std::vector<{ct}> {buf};  // {names[v]} along the row, for a later pass")
            w.line(f"if ((int64_t){buf}.size() < {n}) {buf}.resize({n});")
            w.line(f"{ct}* __restrict {buf}p = {buf}.data();")

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
            out += [(None, f"out{k}[j] = {to_memory(plan.yielded[k], names[plan.yielded[k]])};")
                    for k in plan.element_outputs.get(p, [])]
        return body.quoted(out)

    depth_done = -1
    for p in plan.passes:
        for d in range(depth_done + 1, p + 1):
            w.extend(plan.row_statements(d, varies))
        depth_done = p
        reds = plan.reductions.get(p, [])
        what = ", ".join([f"{r.kind} {names[r.result]}" for r in reds]
                         + [f"out{k}" for k in plan.element_outputs.get(p, [])])
        w.line(f"// pass {plan.passes.index(p) + 1} over the row: {what}")
        if not reds:
            with w.block("#pragma omp simd", f"for (int64_t j = 0; j < {n}; ++j) {{"):
                w.extend(element_lines(p))
            continue
        _reduction_pass(w, n, p, reds, names, element_lines)
    for d in range(depth_done + 1, max(plan.level.values(), default=0) + 1):
        w.extend(plan.row_statements(d, varies))
    for k in plan.row_outputs:
        w.line(f"out{k}[0] = {to_memory(plan.yielded[k], names[plan.yielded[k]])};")


def _buffer_hosts(plan: RowPlan, op: kernel_ops.ReductionKernelOp, aliased: dict[int, int]) -> dict[Value, int]:
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


def row_driver(w: Writer, name: str, rank: int, op: kernel_ops.ReductionKernelOp, strided: list[dict[int, str]],
               plan: RowPlan, n_scalars: int, aliased: dict[int, int]) -> None:
    """The extern "C" function's body: the row function on every row (`ts_rows_of`; in parallel
    when there is enough work), each output and input at its row; an input that steps along the
    row by a stride other than 1 (a LayerNorm2d's channels of an NCHW tensor, H * W apart) is
    gathered into a contiguous row of the thread's first (`g0`, a `ts_gather`), once, and the
    passes read that in cache, vectorised, where each pass read the strided row again (1.2 to
    1.8x eager's time, which copies the tensor to a contiguous one first). Where every stride
    along the row is 1 (`unit`, ts_rows_of's), the gatherers pass the pointers through."""
    inner = rank - 1
    n_in = op.inputs
    outer = list(range(inner))
    row_outputs = set(plan.row_outputs)
    args = [f"n{inner}"]
    args += [f"out{k} + {grouped(flat_index(outer))}" if k in row_outputs and outer else
             f"out{k} + o" if outer else f"out{k}" for k in range(len(op.results))]
    gathered: list[tuple[str, str]] = []  # (name, type) of each input's gatherer
    for k in range(n_in):
        if k in aliased:  # (an input written over is read from its output: the row function's own)
            continue
        at = " + ".join([f"in{k}"] + (offset_terms(k, strided, outer) if outer else []))
        if inner not in strided[k]:
            args.append(at)
            continue
        gathered.append((f"g{k}", f"ts_gather<{k}, {CTYPE[op.operands[k].type.dtype]}>"))  # type: ignore[union-attr]
        last = inner - 1  # (the rows side by side: the next ones along the last outer dim)
        side = [strided[k][last], f"n{last} - i{last}"] if outer and last in strided[k] else ["0", "1"]
        args.append(f"g{k}({', '.join(['unit', at, f'n{inner}', strided[k][inner], *side])})")
    args += [f"s{k}" for k in range(n_scalars)]
    strides = [strided[k][inner] for k in range(n_in) if k not in aliased and inner in strided[k]]
    if rank == 1 and not strides:  # one row
        write_wrapped(w, f"{name}_row", args, ";")
        return
    w.extend(f"const {t} {g}{{}};" for g, t in gathered)
    if rank == 1:
        row = lambda_call(w, "ts_unit_or_strided", ["{" + ", ".join(strides) + "}"], ["auto unit"])
    else:
        row = each_row(w, rank, strides, [g for g, _ in gathered])
    with row:  # (filled to WIDTH as from column 0, as the call always was: the kernels' text stays)
        w.extend(wrapped(f"{name}_row", args, ";"))


def _reduction_pass(w: Writer, n: str, p: int, reds: list[kernel_ops.ReduceOp], names: dict[Value, str],
                    element_lines: Callable[..., list[str]]) -> None:
    """One pass over the row that accumulates `reds`, in one vectorised loop. A float sum (also
    of 16-bit floats, computed in float) goes in blocks of SUM_BLOCK elements: each block summed
    in float lanes, the blocks' sums added in double. Each lane adds 64 elements of a block (128 with AVX2's 8
    lanes), few enough that a long row of large values with a small mean keeps its mean (a double
    for every element, converted, took twice as long: a layer norm's three sums, 1.4 against 0.6
    ms on 2048 rows of 2048). A float64 sum is in double. A maximum or minimum is the plain vectorised one (right
    for infinities: a causal mask's -inf rows stay on it), with a count of the row's NaNs; a row
    with one takes the exact NaN-propagating loop."""
    clauses, updates, blocked = [], [], []
    for r in reds:
        acc, x, kind = f"acc{names[r.result][1:]}", names[r.operands[0]], r.kind
        if kind == "sum":
            w.line(f"double {acc} = 0;")
            if r.result.type.dtype == "float64":  # type: ignore[union-attr]
                clauses.append(f"reduction(+:{acc})")
                updates.append(f"{acc} += {x};")
            else:
                blocked.append(r)
                clauses.append(f"reduction(+:part{acc[3:]})")
                updates.append(f"part{acc[3:]} += {x};")
        else:
            w.line(f"{VALUE[r.result.type.dtype]} {acc} = {_IDENTITY[kind]}, {acc}_check = 0;")  # type: ignore[union-attr]
            clauses.append(f"reduction({'max' if kind == 'amax' else 'min'}:{acc}) reduction(+:{acc}_check)")
            cmp = ">" if kind == "amax" else "<"
            updates += [f"{acc} = {x} {cmp} {acc} ? {x} : {acc};", f"{acc}_check += static_cast<{VALUE[r.result.type.dtype]}>({x} != {x});"]  # type: ignore[union-attr]
    with ExitStack() as blocks:
        start, end = "0", n
        if blocked:  # (the loop over the row runs in each block)
            blocks.enter_context(w.block(
                f"for (int64_t j0 = 0; j0 < {n}; j0 += {SUM_BLOCK}) {{  // blocks: summed in float, added in double"))
            start, end = "j0", "j1"
            w.line(f"const int64_t j1 = std::min({n}, j0 + {SUM_BLOCK});")
            w.extend(f"float part{names[r.result][1:]} = 0;" for r in blocked)
        with w.block(f"#pragma omp simd {' '.join(clauses)}", f"for (int64_t j = {start}; j < {end}; ++j) {{"):
            w.extend(element_lines(p) + updates)
        w.extend(f"acc{names[r.result][1:]} += part{names[r.result][1:]};" for r in blocked)
    for r in reds:
        if r.kind == "sum":
            continue
        acc, x = f"acc{names[r.result][1:]}", names[r.operands[0]]
        with w.block(f"if ({acc}_check != 0) {{  // a NaN in the row: the exact, NaN-propagating loop"):
            w.line(f"{acc} = {_IDENTITY[r.kind]};")
            with w.block(f"for (int64_t j = 0; j < {n}; ++j) {{"):
                w.extend(element_lines(p, [r.operands[0]], effects=False))
                w.line(f"{acc} = {'ts_max' if r.kind == 'amax' else 'ts_min'}({acc}, {x});")
    for r in reds:
        dtype = r.result.type.dtype  # type: ignore[union-attr]
        v, acc, ct = names[r.result], f"acc{names[r.result][1:]}", VALUE[dtype]
        if r.kind == "sum" and ct != "double":  # (a 16-bit sum is rounded from its float)
            w.line(f"const {ct} {v} = {rounded_to(dtype, f'static_cast<{ct}>({acc})')};")
        else:  # (a maximum or minimum is one of the row's values)
            w.line(f"const {ct} {v} = {acc};")


__all__ = ["RowPlan", "row_function", "row_driver", "SUM_BLOCK"]

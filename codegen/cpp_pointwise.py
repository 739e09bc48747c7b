"""The loops of a C++ pointwise kernel (`pointwise_loops`): dims folded into the row where
every input walks them as one, values that do not vary along the row computed once per row or
into rows of their own, and the vectorised loop over the row's elements."""

from __future__ import annotations

from contextlib import ExitStack

from codegen.cpp_elements import VALUE, Body
from codegen.cpp_iteration import each_row, flat_index, offset_terms
from codegen.cpp_text import filled
from codegen.elements import is_transcendental
from codegen.launcher_text import last_line
from codegen.writer import Writer
from ir.core.graph import Operation, Value


def _row_pointers(rank: int, strided: list[dict[int, str]], aliased: dict[int, int], into: list[int],
                  pointers: list[int]) -> list[str]:
    """Inside the kernel's row (the lambda `ts_rows_of` runs with the outer indices i0, ... and
    `o`, the row's first element; of a rank-1 kernel, `ts_chunks_of` with its elements from
    `o`): the pointer at the row of each input of `pointers` (`p0`, ...; an input written over by
    an output is at the output's row), and that of each output written into a view (`q0`, ...)."""
    outer = list(range(rank - 1))
    lines = []
    for k in pointers:
        base = f"out{aliased[k]} + o" if k in aliased else " + ".join([f"in{k}"] + offset_terms(k, strided, outer))
        lines.append(f"const auto* p{k} = {base};")
    for k in into:
        moves = [f"i{i} * out{k}_s{i}" for i in outer] or [f"o * out{k}_s0"]
        lines.append(f"auto* q{k} = {' + '.join([f'out{k}'] + moves)};")
    return lines


def _merge_into_inner(w: Writer, shape: tuple, n_in: int, strided: list[dict[int, str]], aliased: dict[int, int],
                      into: list[int]) -> None:
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
    if folds:
        w.extend(filled("", folds, ";", " &&", len(w.prefix)))


ELEMENT_WAYS = 4  # elements a long chain of math computes at a time (ts_elements, kernels.h)


def pointwise_loops(w: Writer, shape: tuple, n_in: int, strided: list[dict[int, str]], body: Body,
                    aliased: dict[int, int], into: list[int]) -> None:
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
    _merge_into_inner(w, shape, n_in, strided, aliased, into)
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
        _row_buffers(w, inner, body, along, dims, strided, rowwise, kept)
    loads = {k: f"p{k}[j * in{k}_step]" for k in moving
             if not (kept and k in along and not body.used_beyond(k, rowwise))}
    with each_row(w, rank, strides):
        w.extend(_row_pointers(rank, strided, aliased, into, [k for k in loads if offset_terms(k, strided, outer)]))
        loads = {k: at if offset_terms(k, strided, outer) else f"in{at[1:]}" for k, at in loads.items()}  # (the same in every row)
        if kept and len(dims) > 1:
            w.line(f"const int64_t r = ({flat_index(dims[:-1])}) * n{inner};")
        fixed_loads = {k: f"in{k}[{' + '.join(offset_terms(k, strided, outer)) or '0'}]" for k in sorted(fixed)}
        per_row = body.placed(body.computed(hoisted, fixed_loads), fixed_loads)
        w.extend(body.quoted(per_row))
        # (filled to WIDTH as from column 0, as the steps always were: the kernels' text stays)
        w.extend(_steps([f"in{k}_step = unit ? 1 : {strided[k][inner]}" for k in loads]
                        + [f"out{k}_step = unit ? 1 : out{k}_s{inner}" for k in into]))
        loads = dict(sorted({**loads, **{k: f"out{o}[o + j]" for k, o in aliased.items()}}.items()))
        skip = set(hoisted) | (set(rowwise) if kept else set())
        # An element with three or more transcendentals, a dependency chain longer than the core
        # overlaps across loop iterations, is computed four at a time, interleaved (ts_elements,
        # kernels.h: the element's stores are the lambda it returns); others in a plain loop, where
        # that gains less than compiling the element's code five times costs (pointwise_chain's
        # kernel: 3.1 s to build, 1.6 s two at a time, 0.7 s one at a time).
        four = sum(is_transcendental(op) for op in body.op.body.ops if op not in skip) >= 3
        n = f"n{inner}" if outer else "end - o"
        if four:
            loop = w.block(f"ts_elements<{ELEMENT_WAYS}>({n}, [&](int64_t j) TS_INLINE {{", close="});")
        else:
            loop = w.block("#pragma omp simd", f"for (int64_t j = 0; j < {n}; ++j) {{")
        with loop:
            w.extend(body.row_load(v, "r + j" if len(dims) > 1 else "j") for v in kept)
            stores = {k: f"q{k}[j * out{k}_step]" for k in into}
            # (the loop's first statements from the line the row's last came from: quoted once, above)
            last = last_line(per_row) if not kept else None
            body.statements(w, loads, "o + j", skip=skip, stores=stores, last=last, deferred=four)


def _steps(steps: list[str]) -> list[str]:
    """The declaration of each tensor's step along the row: 1 where `unit` is a compile-time true
    (a std::true_type of ts_unit_or_strided, or a template parameter: the compiler sees unit
    steps and vectorises contiguous loads and stores), its stride otherwise. One loop body
    serves both."""
    return filled("const int64_t ", steps, ";") if steps else []


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


def _row_buffers(w: Writer, inner: int, body: Body, along: set[int], dims: list[int], strided: list[dict[int, str]],
                 rowwise: list[Operation], kept: list[Value]) -> None:
    """The loops, before the loop nest, that compute the values `kept` (of the ops `rowwise`,
    from the inputs `along`, which move along the dims `dims` only, the row's last) into one row
    per index of the other `dims` (`r3[j]`, or `r3[r + j]`)."""
    size = " * ".join(f"n{d}" for d in dims)
    # (an array, not a std::vector: std::vector<bool> packs bits, which no loop reads as vectors)
    for v in kept:
        ct = VALUE[v.type.dtype]  # type: ignore[union-attr]
        w.line(f"std::unique_ptr<{ct}[]> r{body.names[v][1:]}(new {ct}[{size}]);")
    with ExitStack() as loops:
        for d in dims[:-1]:
            loops.enter_context(w.block(f"for (int64_t i{d} = 0; i{d} < n{d}; ++i{d}) {{"))
        loops.enter_context(w.block(f"for (int64_t j = 0; j < n{inner}; ++j) {{"))
        read = {v for op in rowwise for v in op.operands}
        for k in sorted(along):
            if body.op.body.args[k] in read:
                at = " + ".join([f"i{d} * {strided[k][d]}" for d in dims[:-1] if d in strided[k]] + [f"j * {strided[k][inner]}"])
                w.line(body.load(k, f"in{k}[{at}]"))
        w.extend(body.quoted([(op, body.compute(op)) for op in rowwise]))
        index = f"({flat_index(dims[:-1])}) * n{inner} + j" if len(dims) > 1 else "j"
        w.extend(f"r{body.names[v][1:]}[{index}] = {body.names[v]};" for v in kept)


__all__ = ["pointwise_loops", "ELEMENT_WAYS"]

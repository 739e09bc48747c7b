"""C++ and Triton source, and launchers, for `kernel.pool` (ir/passes/pool.py): the max over
windows of the middle dims of NHWC rows [N, H, W, C]; and for `kernel.adaptive_avg_pool`
(below).

Window settings, H, W and the output's OH and OW are literals of the kernel; N and C are read
from the input at run time. Both backends compute what torch's `max_pool2d` does: the window is
cut to the input (torch pads with -inf and starts from -inf), and an element replaces the
running maximum when it is greater or NaN, so that NaN propagates and, of equal values, the
first one read stays (as torch's loop keeps it: -0.0 before 0.0 stays -0.0). 16-bit floats are
compared as the floats they widen to and stored as they were read.

C++: one `extern "C"` function, `<name>_kernel`, arguments n0 (N), n3 (C), the output's data
pointer (a fresh row-major [N, OH, OW, C] tensor), the input's data pointer and its four strides.
It runs the output rows (image, oh) on OpenMP's threads above cpp_kernels.PARALLEL_MIN output
elements. An output position's channels go 32 floats (16 doubles) at a time through the window,
their running maxima in two 64-byte vectors (`ts_pool_block`), and the rest, and channels that
are not contiguous, through a plain loop (`ts_pool_channels`): both are the same in every
module, templates of runtime/include/torchscribe/kernels.h.

Triton: one program per tile of ROWS output positions by COLS channels (sized as the pointwise
kernels' tiles, ts_tile), the window unrolled (`tl.static_range`), masked loads outside the input.
"""

from __future__ import annotations

from codegen.cpp_elements import CTYPE, HALF
from codegen.cpp_kernels import PARALLEL_MIN
from codegen.cpp_text import wrapped, write_wrapped
from codegen.launcher_text import source_comment
from codegen.triton_kernels import TL, TritonKernel
from codegen.writer import Writer
from ir.core.types import TensorType
from ir.kernel import ops as kernel_ops


class _Pool:
    """What both backends read off the op."""

    def __init__(self, op: kernel_ops.PoolKernelOp) -> None:
        self.op = op
        self.name: str = op.kernel_name
        x, r = op.operands[0].type, op.result.type
        assert isinstance(x, TensorType) and isinstance(r, TensorType) and x.shape and r.shape
        self.dtype: str = x.dtype  # type: ignore[assignment]
        (self.kh, self.kw), (self.sh, self.sw), (self.ph, self.pw) = op.kernel_size, op.stride, op.padding
        self.h, self.w = x.shape[1], x.shape[2]
        self.oh, self.ow = r.shape[1], r.shape[2]
        # N and C as the launchers pass them: literals, or read into n0 / n3
        self.sizes = {i: str(x.shape[i]) if type(x.shape[i]) is int else f"in0.shape[{i}]" for i in (0, 3)}
        self.n0, self.n3 = (text if text.isdigit() else f"n{i}" for i, text in self.sizes.items())

    def sizes_and_output(self, w: Writer, device: str = "") -> None:
        for i, text in self.sizes.items():
            if not text.isdigit():
                w.line(f"n{i} = {text}")
        w.line(f"out0 = torch.empty({self.n0}, {self.oh}, {self.ow}, {self.n3}, dtype=torch.{self.dtype}{device})")


def _start(index: str, stride: int, padding: int) -> str:
    """Where the window of output position `index` starts in the input (before cutting)."""
    text = index if stride == 1 else f"{index} * {stride}"
    return f"{text} - {padding}" if padding else text


# -- C++ --------------------------------------------------------------------------------------
def cpp_kernel(op: kernel_ops.PoolKernelOp, source_lines: dict[str, list[str]] | None = None) -> str:
    """The C++ function (runtime.kernels.Library reads its parameters off its declaration)."""
    p = _Pool(op)
    t = CTYPE[p.dtype]
    size = 2 if p.dtype in HALF else 4 if p.dtype == "float32" else 8  # (bytes of an element)
    block = 2 * 64 // size  # (channels a block takes: ts_pool_width, two 64-byte vectors' worth)
    # (the loops over a window: ts_pool_channels and ts_pool_block of runtime/include's kernels.h)
    element = f"ts_pool_{HALF[p.dtype]}" if p.dtype in HALF else f"ts_pool_float<{t}>"
    w = Writer("  ")
    comment = source_comment(op.loc, source_lines, "//")
    if comment:
        w.line(comment)
    start_h, start_w = _start("oh", p.sh, p.ph), _start("ow", p.sw, p.pw)
    with w.block(*wrapped(f'extern "C" void {p.name}_kernel', [
            "int64_t n0", "int64_t n3", f"ts_out<{t}> out0", f"ts_in<{t}> in0", "int64_t in0_s0",
            "int64_t in0_s1", "int64_t in0_s2", "int64_t in0_s3"], " {")):
        with w.block("const auto rows = [=](int64_t begin, int64_t end) {", close="};"):
            with w.block("for (int64_t r = begin; r < end; ++r) {  // the output row oh of image b"):
                w.line(f"const int64_t b = r / {p.oh}, oh = r % {p.oh};")
                w.line(f"const int64_t h0 = std::max<int64_t>({start_h}, 0), "
                       f"h1 = std::min<int64_t>({start_h} + {p.kh}, {p.h});")
                with w.block(f"for (int64_t ow = 0; ow < {p.ow}; ++ow) {{"):
                    w.line(f"const int64_t w0 = std::max<int64_t>({start_w}, 0), "
                           f"w1 = std::min<int64_t>({start_w} + {p.kw}, {p.w});")
                    w.line(f"{t}* __restrict o = out0 + (r * {p.ow} + ow) * n3;")
                    w.line(f"const {t}* __restrict x = in0 + b * in0_s0 + h0 * in0_s1 + w0 * in0_s2;")
                    w.line("const int64_t nh = h1 - h0, nw = w1 - w0;")
                    w.line("int64_t c = 0;")
                    with w.block("if (in0_s3 == 1) {"), w.block(f"for (; c + {block} <= n3; c += {block}) {{"):
                        if p.dtype in HALF:
                            write_wrapped(w, f"ts_pool_channels<{element}>", [
                                "o + c", "x + c", str(block), "1", "nh", "nw", "in0_s1", "in0_s2"], ";")
                        else:
                            w.line("ts_pool_block(o + c, x + c, nh, nw, in0_s1, in0_s2);")
                    with w.block(f"for (; c < n3; c += {block}) {{"):
                        write_wrapped(w, f"ts_pool_channels<{element}>", [
                            "o + c", "x + c * in0_s3", f"std::min<int64_t>(n3 - c, {block})", "in0_s3", "nh", "nw",
                            "in0_s1", "in0_s2"], ";")
        w.line(f"ts_rows(rows, n0 * {p.oh}, n0 * n3 * {p.oh * p.ow} >= {PARALLEL_MIN});")
    return w.text()


def cpp_launcher(w: Writer, op: kernel_ops.PoolKernelOp, suffix: str = "_cpp") -> None:
    p = _Pool(op)
    w.line(f"def {p.name}{suffix}(in0) -> Tensor:")
    with w.indent():
        p.sizes_and_output(w)
        w.line(f"return _lib.{p.name}_kernel({p.n0}, {p.n3}, out0, in0)")


# -- Triton -----------------------------------------------------------------------------------
def triton_kernel(op: kernel_ops.PoolKernelOp, source_lines: dict[str, list[str]] | None = None) -> TritonKernel:
    p = _Pool(op)
    acc = "tl.float64" if p.dtype == "float64" else "tl.float32"
    w = Writer()
    w.line("@triton.jit")
    w.line(f"def {p.name}_kernel(out0, in0, n_rows, n3, in0_s0, in0_s1, in0_s2, in0_s3, "
           "ROWS: tl.constexpr, COLS: tl.constexpr):")
    with w.indent():
        w.line("# a tile of ROWS output positions (image, oh, ow) by COLS channels")
        w.line("pid = tl.program_id(0)")
        w.line("r = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]")
        w.line("c = tl.program_id(1).to(tl.int64) * COLS + tl.arange(0, COLS)[None, :]")
        w.line("mask = (r < n_rows) & (c < n3)")
        w.line(f"ow = r % {p.ow}")
        w.line(f"oh = (r // {p.ow}) % {p.oh}")
        w.line(f"b = r // {p.oh * p.ow}")
        w.line(f"acc = tl.full([ROWS, COLS], float(\"-inf\"), {acc})")
        w.line(f"for i in tl.static_range({p.kh}):")
        with w.indent():
            w.line(f"h = {_start('oh', p.sh, p.ph)} + i")
            w.line(f"for j in tl.static_range({p.kw}):")
            with w.indent():
                w.line(f"w = {_start('ow', p.sw, p.pw)} + j")
                w.line(f"inside = (h >= 0) & (h < {p.h}) & (w >= 0) & (w < {p.w})")
                w.line("v = tl.load(in0 + b * in0_s0 + h * in0_s1 + w * in0_s2 + c * in0_s3, mask=mask & inside, "
                       f"other=float(\"-inf\")).to({acc})")
                w.line("acc = tl.where((v > acc) | (v != v), v, acc)")
        stored = "acc" if TL[p.dtype] == acc else f"acc.to({TL[p.dtype]})"
        w.line(f"tl.store(out0 + r * n3 + c, {stored}, mask=mask)")
    source = w.text()
    w = Writer()
    w.line(f"def {p.name}_triton(in0) -> Tensor:")
    with w.indent():
        p.sizes_and_output(w, ", device=in0.device")
        n_rows = str(int(p.n0) * p.oh * p.ow) if p.n0.isdigit() else "n_rows"
        if not p.n0.isdigit():
            w.line(f"n_rows = {p.n0} * {p.oh * p.ow}")
        if "0" in (n_rows, p.n3):  # (no elements: nothing to launch)
            w.line("return out0")
            return TritonKernel(p.name, source, w.text())
        symbolic = [t for t in (n_rows, p.n3) if not t.isdigit()]
        if symbolic:
            w.line(f"if {' == 0 or '.join(symbolic)} == 0:")
            with w.indent():
                w.line("return out0")
        w.line(f"rows, cols, warps = ts_tile({n_rows}, {p.n3})")
        w.line(f"grid = (triton.cdiv({n_rows}, rows), triton.cdiv({p.n3}, cols))")
        w.line(f"{p.name}_kernel[grid](out0, in0, {n_rows}, {p.n3}, *in0.stride(), ROWS=rows, COLS=cols, num_warps=warps)")
        w.line("return out0")
    return TritonKernel(p.name, source, w.text())


# -- kernel.adaptive_avg_pool ----------------------------------------------------------------
# The input [N, C, L] (a 2-d one is given as [1, C, L]), L and the output size S read at run
# time. Window i of a row: [floor(i * L / S), ceil((i + 1) * L / S)), summed in order in the
# input's dtype and divided by its length, as torch's CPU loop (adaptive_avg_pool2d's, with a
# window one high) computes it. Sizes torch refuses (S < 1, L == 0) and empty inputs go to torch
# itself, from the launcher.


def _adaptive(op: kernel_ops.AdaptiveAvgPoolKernelOp) -> tuple[str, str, int]:
    x = op.operands[0].type
    assert isinstance(x, TensorType) and x.shape is not None and x.dtype is not None
    return op.kernel_name, x.dtype, len(x.shape)


def adaptive_cpp_kernel(op: kernel_ops.AdaptiveAvgPoolKernelOp, source_lines: dict[str, list[str]] | None = None) -> str:
    name, dtype, _ = _adaptive(op)
    t = CTYPE[dtype]
    w = Writer("  ")
    comment = source_comment(op.loc, source_lines, "//")
    if comment:
        w.line(comment)
    with w.block(*wrapped(f'extern "C" void {name}_kernel', [
            "int64_t n0", "int64_t n1", "int64_t n2", "int64_t s0", f"ts_out<{t}> out0", f"ts_in<{t}> in0",
            "int64_t in0_s0", "int64_t in0_s1", "int64_t in0_s2"], " {")):
        w.line("// each window's first element and its end, the same in every row (two divisions each)")
        w.line("std::unique_ptr<int64_t[]> ends(new int64_t[2 * s0]);")
        with w.block("for (int64_t i = 0; i < s0; ++i) {"):
            w.line("ends[2 * i] = i * n2 / s0;")
            w.line("ends[2 * i + 1] = ((i + 1) * n2 + s0 - 1) / s0;")
        w.line("const int64_t* window = ends.get();")
        with w.block("const auto rows = [=](int64_t begin, int64_t end) {", close="};"):
            with w.block("for (int64_t r = begin; r < end; ++r) {  // row r % n1 of [n1, n2] matrix r / n1"):
                w.line(f"const {t}* __restrict x = in0 + (r / n1) * in0_s0 + (r % n1) * in0_s1;")
                w.line(f"{t}* __restrict o = out0 + r * s0;")
                with w.block("for (int64_t i = 0; i < s0; ++i) {"):
                    w.line("const int64_t a = window[2 * i], b = window[2 * i + 1];")
                    w.line(f"{t} sum = 0;")
                    w.line("for (int64_t j = a; j < b; ++j) sum += x[j * in0_s2];")
                    w.line(f"o[i] = sum / static_cast<{t}>(b - a);")
        w.line(f"ts_rows(rows, n0 * n1, n0 * n1 * (n2 + s0) >= {PARALLEL_MIN});")
    return w.text()


def _adaptive_head(w: Writer, dtype: str, rank: int, device: str = "") -> None:
    """The launcher's first lines: torch for what the kernel does not take; the sizes, the output."""
    w.line("if s0 < 1 or in0.numel() == 0:  # (torch's errors, and its empty results)")
    with w.indent():
        w.line("return torch.adaptive_avg_pool1d(in0, s0)")
    if rank == 3:
        w.line("n0, n1, n2 = in0.shape")
        w.line(f"out0 = torch.empty(n0, n1, s0, dtype=torch.{dtype}{device})")
    else:
        w.line("n0, (n1, n2) = 1, in0.shape")
        w.line(f"out0 = torch.empty(n1, s0, dtype=torch.{dtype}{device})")
        w.line("in0 = in0.unsqueeze(0)")


def adaptive_cpp_launcher(w: Writer, op: kernel_ops.AdaptiveAvgPoolKernelOp, suffix: str = "") -> None:
    name, dtype, rank = _adaptive(op)
    w.line(f"def {name}{suffix}(in0, s0: int) -> Tensor:")
    with w.indent():
        _adaptive_head(w, dtype, rank)
        w.line(f"return _lib.{name}_kernel(n0, n1, n2, s0, out0, in0)")


def adaptive_triton_kernel(op: kernel_ops.AdaptiveAvgPoolKernelOp,
                           source_lines: dict[str, list[str]] | None = None) -> TritonKernel:
    name, dtype, rank = _adaptive(op)
    acc = "tl.float64" if dtype == "float64" else "tl.float32"
    w = Writer()
    w.line("@triton.jit")
    w.line(f"def {name}_kernel(out0, in0, n_rows, n1, n2, s0, in0_s0, in0_s1, in0_s2, widest, "
           "ROWS: tl.constexpr, COLS: tl.constexpr):")
    with w.indent():
        w.line("# a tile of ROWS rows (b, c) by COLS outputs i, each the mean of its window")
        w.line("r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]")
        w.line("i = tl.program_id(1).to(tl.int64) * COLS + tl.arange(0, COLS)[None, :]")
        w.line("mask = (r < n_rows) & (i < s0)")
        w.line("a = i * n2 // s0")
        w.line("b = ((i + 1) * n2 + s0 - 1) // s0")
        w.line("x = in0 + (r // n1) * in0_s0 + (r % n1) * in0_s1")
        w.line(f"acc = tl.zeros([ROWS, COLS], {acc})")
        w.line("for k in range(0, widest):")
        with w.indent():
            w.line(f"acc += tl.load(x + (a + k) * in0_s2, mask=mask & (a + k < b), other=0.0).to({acc})")
        stored = f"acc / (b - a).to({acc})"
        if TL[dtype] != acc:
            stored = f"({stored}).to({TL[dtype]})"
        w.line(f"tl.store(out0 + r * s0 + i, {stored}, mask=mask)")
    source = w.text()
    w = Writer()
    w.line(f"def {name}_triton(in0, s0: int) -> Tensor:")
    with w.indent():
        _adaptive_head(w, dtype, rank, ", device=in0.device")
        w.line("rows, cols, warps = ts_tile(n0 * n1, s0)")
        w.line("grid = (triton.cdiv(n0 * n1, rows), triton.cdiv(s0, cols))")
        w.line("widest = (n2 + s0 - 1) // s0 + 1  # (the longest window)")
        w.line(f"{name}_kernel[grid](out0, in0, n0 * n1, n1, n2, s0, *in0.stride(), widest, ROWS=rows, COLS=cols, "
               "num_warps=warps)")
        w.line("return out0")
    return TritonKernel(name, source, w.text())


__all__ = ["adaptive_cpp_kernel", "adaptive_cpp_launcher", "adaptive_triton_kernel", "cpp_kernel", "cpp_launcher",
           "triton_kernel"]

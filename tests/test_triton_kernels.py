"""The Triton kernel emitter (codegen/triton_kernels.py): the generated source of one pointwise
and one reduction kernel, pinned; and every kernel kind run through Triton's interpreter on CPU
tensors against eager: transcendental chains, broadcasting, strided and offset inputs, tails,
zero sizes, scalars, NaN and infinities, integers, 16-bit floats, and row reductions (softmax,
log_softmax, layer norm + GELU, mean/var) both with the row in one block and looped over it.

On a machine without a GPU the kernels run in Triton's interpreter, which must be chosen before
Triton is imported (its own jit functions, tl.sum or tl.cdiv, are interpreted then too): this
module sets TRITON_INTERPRET=1 when it is the first to import Triton, and the setting stays for
the process (Triton cannot run otherwise without a GPU). With a GPU and the variable unset, the
kernels run on it."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest
import torch

from triton_setup import DEVICE  # noqa: E402  (sets TRITON_INTERPRET first)
# (the interpreter computes with numpy, which warns of the infinities and NaNs the tests ask for)
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

from closeness import assert_close_to_eager  # noqa: E402
from source_module import imported_source  # noqa: E402
from codegen.triton_kernels import IMPORTS, TritonKernel, emit_triton_kernel, helper_import  # noqa: E402
from ir.kernel import ops as kernel_ops  # noqa: E402
from runtime import triton_helpers  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes.fuse import fuse  # noqa: E402
from test_fuse import CHAIN  # noqa: E402
from test_fuse_reductions import SOFTMAX  # noqa: E402


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=DEVICE)


def randint(low: int, high: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.randint(low, high, shape, dtype=dtype, device=DEVICE)


_counter = itertools.count()


def load(kernels: list[TritonKernel], directory: Path) -> ModuleType:
    """A module holding the kernels (Triton reads a kernel's source from its file)."""
    texts = [k.source + "\n\n" + k.launcher for k in kernels]
    parts = ["import torch\nfrom torch import Tensor\n" + IMPORTS + helper_import(texts)] + texts
    name = f"triton_kernels_{next(_counter)}"
    path = directory / f"{name}.py"
    path.write_text("\n\n".join(parts))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernels_of(text: str) -> list[kernel_ops.KernelOp]:
    program = parse_program(text)
    fuse(program)
    return [op for op in program.walk() if isinstance(op, kernel_ops.KernelOp)]


class Compiled:
    """The one kernel a function compiles to, called through its Triton launcher with the
    function's arguments (matched by name)."""

    def __init__(self, kernel: kernel_ops.KernelOp, directory: Path) -> None:
        self.kernel = kernel
        self.module = load([emit_triton_kernel(kernel)], directory)
        self.launcher = getattr(self.module, f"{kernel.attributes['name']}_triton")

    def __call__(self, **args: object) -> object:
        return self.launcher(*(args[v.name] for v in self.kernel.operands))  # type: ignore[index]


# -- the emitted text ------------------------------------------------------------------------------
def test_pointwise_source() -> None:
    [kernel] = kernels_of(CHAIN)
    emitted = emit_triton_kernel(kernel)
    assert emitted.source + "\n" + emitted.launcher == '''\
@triton.jit
def exp_mul_add_kernel(out0, in0, in0_s0, in0_s1, in1, in1_s1, n_rows, n1, ROWS: tl.constexpr, COLS: tl.constexpr):
    # a tile of ROWS rows (the outer dims, flattened) by COLS columns (the last dim)
    pid = tl.program_id(0)
    col_blocks = tl.cdiv(n1, COLS)
    r = (pid // col_blocks).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    c = (pid % col_blocks).to(tl.int64) * COLS + tl.arange(0, COLS)[None, :]
    row_mask = r < n_rows
    col_mask = c < n1
    mask = row_mask & col_mask
    i0 = r
    p0 = in0 + i0 * in0_s0  # in0 at the row
    a0 = tl.load(p0 + c * in0_s1, mask=mask)
    a1 = tl.load(in1 + c * in1_s1, mask=col_mask)
    v0 = tl.exp(a0)
    v1 = v0 * a1
    v2 = v1 + 0.5
    tl.store(out0 + r * n1 + c, v2, mask=mask)

def exp_mul_add_triton(in0, in1) -> Tensor:
    n0 = in0.shape[0]
    out0 = torch.empty(n0, 8, dtype=torch.float32, device=in0.device)
    if n0 == 0:
        return out0
    rows, cols, warps = ts_tile(n0, 8)
    grid = (triton.cdiv(n0, rows) * triton.cdiv(8, cols),)
    exp_mul_add_kernel[grid](out0, in0, *in0.stride(), in1, *in1.stride(), n0, 8, ROWS=rows, COLS=cols, num_warps=warps)
    return out0
'''


def test_reduction_source() -> None:
    [kernel] = kernels_of(SOFTMAX)
    emitted = emit_triton_kernel(kernel)
    assert emitted.source + "\n" + emitted.launcher == '''\
@triton.jit
def amax_sub_exp_block(out0, in0, in0_s0, in0_s1, n_rows, n1, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows per program, each whole in one block of BLOCK >= n1 columns
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    row_mask = r < n_rows
    i0 = r
    p0 = in0 + i0 * in0_s0  # in0 at the row
    c = tl.arange(0, BLOCK)[None, :].to(tl.int64)
    mask = row_mask & (c < n1)
    a0 = tl.load(p0 + c * in0_s1, mask=mask)
    v0 = ts_max_rows(tl.where(mask, a0, -float("inf")))
    v1 = a0 - v0
    v2 = tl.exp(v1)
    v3 = tl.sum(tl.where(mask, v2, 0.0), axis=1, keep_dims=True)
    v4 = v2 / v3
    tl.store(out0 + r * n1 + c, v4, mask=mask)


@triton.jit
def amax_sub_exp_loop(out0, in0, in0_s0, in0_s1, n_rows, n1, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows per program, longer than a block: one loop over the row per level of reductions
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    row_mask = r < n_rows
    i0 = r
    p0 = in0 + i0 * in0_s0  # in0 at the row
    # pass 1 over the row: amax v0
    acc0 = tl.full([ROWS, BLOCK], -float("inf"), tl.float32)
    for start in range(0, n1, BLOCK):
        c = start + tl.arange(0, BLOCK)[None, :].to(tl.int64)
        mask = row_mask & (c < n1)
        a0 = tl.load(p0 + c * in0_s1, mask=mask)
        acc0 = ts_maximum(acc0, tl.where(mask, a0, -float("inf")))
    v0 = ts_max_rows(acc0)
    # pass 2 over the row: sum v3
    acc3 = tl.full([ROWS, BLOCK], 0.0, tl.float32)
    for start in range(0, n1, BLOCK):
        c = start + tl.arange(0, BLOCK)[None, :].to(tl.int64)
        mask = row_mask & (c < n1)
        a0 = tl.load(p0 + c * in0_s1, mask=mask)
        v1 = a0 - v0
        v2 = tl.exp(v1)
        acc3 += tl.where(mask, v2, 0.0)
    v3 = tl.sum(acc3, axis=1, keep_dims=True)
    # pass 3 over the row: out0
    for start in range(0, n1, BLOCK):
        c = start + tl.arange(0, BLOCK)[None, :].to(tl.int64)
        mask = row_mask & (c < n1)
        a0 = tl.load(p0 + c * in0_s1, mask=mask)
        v1 = a0 - v0
        v2 = tl.exp(v1)
        v4 = v2 / v3
        tl.store(out0 + r * n1 + c, v4, mask=mask)

def amax_sub_exp_triton(in0) -> Tensor:
    n0 = in0.shape[0]
    out0 = torch.empty(n0, 40, dtype=torch.float32, device=in0.device)
    if n0 == 0:
        return out0
    rows, block, warps = ts_row_tile(n0, 40)
    kernel = amax_sub_exp_block if block >= 40 else amax_sub_exp_loop
    kernel[(triton.cdiv(n0, rows),)](out0, in0, *in0.stride(), n0, 40, ROWS=rows, BLOCK=block, num_warps=warps)
    return out0
'''


def test_every_reduction_has_triton() -> None:
    """(The element ops are codegen/elements.py's table: tests/test_elements.py.)"""
    from codegen import triton_kernels

    source = Path(triton_kernels.__file__).read_text()
    for name in kernel_ops.ReduceOp.KINDS:
        assert f'"{name}"' in source, name


# -- functions compiled whole, their kernel against eager --------------------------------------
SOURCE = '''
import torch
import torch.nn.functional as F
from torch import Tensor


def chain(x: Tensor, y: Tensor) -> Tensor:
    a = torch.exp(-x * x) + y
    b = torch.tanh(a) * 0.5 + torch.sigmoid(x) + torch.erf(y) - torch.expm1(x * 0.1) + torch.log1p(x.abs())
    c = torch.where(b > 0.1, b, y - 1.0)
    d = (torch.sin(x) * torch.cos(y) + torch.floor(x * 3) + torch.ceil(y) + torch.trunc(x * 2.5)
         + torch.sqrt(x.abs()) + torch.rsqrt(1 + y * y))
    return (torch.maximum(c, x.abs()) / (1.0 + x * x) + torch.clamp(d, -2.0, 2.0) + torch.minimum(x, y)
            + (x * 0.5) ** 3.0 + torch.reciprocal(2 + y) + 2.0 / (3.0 + y))


def compare(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    m = x > y
    n = torch.logical_not(m) == (x < 0.5)
    return m, torch.where(n, (x * 2 + y).to(torch.float64) - 1.5, -x.abs())


def ints(x: Tensor, y: Tensor) -> Tensor:
    return torch.where(x > 0, x * 3 + y - 1, -y) - torch.maximum(x, y) + x.abs()


def softmax(x: Tensor) -> Tensor:
    return F.softmax(x, dim=-1)


def log_softmax(x: Tensor) -> Tensor:
    return F.log_softmax(x, dim=-1)


def layer_norm_gelu(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def stats(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True)
    return mean, var, (x - mean) * torch.rsqrt(var + 1e-5)


def extrema(x: Tensor) -> Tensor:
    return x.amax(-1, keepdim=True) - x.amin(-1, keepdim=True) + x


def centered(x: Tensor) -> Tensor:
    return x - x.sum(-1, keepdim=True) / 3
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, Path, dict]]:
    root = tmp_path_factory.mktemp("triton_models")
    with imported_source(root, "triton_models", SOURCE) as module:
        yield module, root, {}


def compiled(models: tuple[ModuleType, Path, dict], name: str, example: tuple) -> Compiled:
    """`name`'s kernel, compiled for arguments like `example` (its leading size symbolic)."""
    from transpiler.pipeline import compile_source
    from transpiler.source import SourceFile, Target

    module, root, cache = models
    key = (name, tuple((a.dtype, a.shape[1:]) for a in example))  # (the leading size is symbolic)
    if key not in cache:
        path = root / "triton_models.py"
        source = SourceFile(path, path.read_text(), "triton_models.py")
        result = compile_source(source, "test", "triton_models.py", [Target(name, source.functions[name])],
                                example_inputs=example)
        kernels = [op for op in result.program.walk() if isinstance(op, kernel_ops.KernelOp)]
        assert len(kernels) == 1 and all(v.name for v in kernels[0].operands), f"{name} is not one kernel"
        cache[key] = Compiled(kernels[0], root)
    return cache[key]


def special(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Values with NaN, infinities and signed zeros in them."""
    x = randn(*shape, dtype=dtype)
    flat = x.view(-1)
    values = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, -1e-30]
    flat[:len(values)] = torch.tensor(values, dtype=dtype, device=DEVICE)[:flat.numel()]
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pointwise_chain(models, dtype) -> None:
    fn = models[0].chain
    f = compiled(models, "chain", (randn(4, 37, dtype=dtype), randn(37, dtype=dtype)))
    y = randn(37, dtype=dtype)
    for x, what in [(randn(5, 37, dtype=dtype), "broadcast y, a tail of 37"),
                    (randn(37, 6, dtype=dtype).t(), "transposed"),
                    (randn(7, 37, dtype=dtype)[1:], "storage offset"),
                    (special((3, 37), dtype), "NaN, inf, signed zeros")]:
        assert_close_to_eager(f(x=x, y=y), fn(x, y), what)


def test_comparisons_casts_and_several_outputs(models) -> None:
    fn = models[0].compare
    f = compiled(models, "compare", (randn(4, 9), randn(4, 9)))
    x, y = special((3, 9), torch.float32), randn(3, 9)
    assert_close_to_eager(f(x=x, y=y), fn(x, y))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_kernels_wrap_like_torch(models, dtype) -> None:
    fn = models[0].ints
    f = compiled(models, "ints", (randint(-50, 50, (6, 11), dtype=dtype), randint(-50, 50, (11,), dtype=dtype)))
    info = torch.iinfo(dtype)
    x = randint(-50, 50, (3, 11), dtype=dtype)
    x[0, :4] = torch.tensor([info.max, info.min, info.max // 2, -5], dtype=dtype, device=DEVICE)
    y = randint(-50, 50, (11,), dtype=dtype)
    assert torch.equal(f(x=x, y=y), fn(x, y))


NAMES = ["softmax", "log_softmax", "layer_norm_gelu", "stats", "extrema", "centered"]


def _row_inputs(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> dict[str, torch.Tensor]:
    args = {"x": randn(*shape, dtype=dtype)}
    if name == "layer_norm_gelu":
        args |= {"w": randn(shape[-1], dtype=dtype), "b": randn(shape[-1], dtype=dtype)}
    return args


@pytest.mark.parametrize("looped", [False, True], ids=["block", "loop"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", NAMES)
def test_row_reductions(models, name, dtype, looped, monkeypatch) -> None:
    fn = getattr(models[0], name)
    f = compiled(models, name, tuple(_row_inputs(name, (2, 3, 37), dtype).values()))
    if looped:  # rows longer than a block: a loop of 16-column steps, the last one a tail
        monkeypatch.setattr(triton_helpers, "TS_ROW_BLOCK_MAX", 16)  # (ts_row_tile reads them there)
        monkeypatch.setattr(triton_helpers, "TS_LOOP_BLOCK", 16)
    args = _row_inputs(name, (5, 3, 37), dtype)  # 15 rows: a tail of rows in a program too
    assert_close_to_eager(f(**args), fn(*args.values()), "rows")
    strided = randn(37, 3, 2, dtype=dtype).permute(2, 1, 0)  # the row is not unit-stride
    assert_close_to_eager(f(**{**args, "x": strided}), fn(strided, *list(args.values())[1:]), "strided rows")
    offset = randn(3, 3, 37, dtype=dtype)[1:]
    assert_close_to_eager(f(**{**args, "x": offset}), fn(offset, *list(args.values())[1:]), "storage offset")
    x = randn(4, 3, 37, dtype=dtype)
    x[0, 0, 3] = float("inf")
    x[0, 1, 20] = -float("inf")
    x[1, 0, :] = -float("inf")
    x[1, 1, 7] = float("nan")
    x[2, 2, 36] = float("nan")  # (in the last, partial step of a loop)
    x[3, 2, :] = float("inf")
    assert_close_to_eager(f(**{**args, "x": x}), fn(x, *list(args.values())[1:]), "inf and NaN rows")


def test_a_long_row_loops(models) -> None:
    """100k columns take the looped kernel (float32 sums accumulate per column lane)."""
    x = randn(1, 1, 100_000) * 1000 + 0.5
    f = compiled(models, "stats", (x,))
    assert_close_to_eager(f(x=x), models[0].stats(x), "a long row")


def test_a_whole_tensor_row_of_any_length(models) -> None:
    """A 1-d input is one row of symbolic length: an empty one (the kernel runs, every lane
    masked), and 5000 columns, which loop."""
    f = compiled(models, "centered", (randn(6),))
    for n in (0, 1, 17, 5000):
        x = randn(n)
        assert_close_to_eager(f(x=x), models[0].centered(x), f"length {n}")


# -- kernels from IR text: scalars, zero sizes, rank 0 and 4, 16-bit floats, the math helpers ------
SCALARS = """\
func @f(%x: f64[B, 5]@cpu, %i: i32[B, 5]@cpu, %a: float, %n: int) -> tuple[f64[B, 5]@cpu, i32[B, 5]@cpu] {
  %0 : f64[B, 5]@cpu = py.binary(%x, %a) {op = "*"}
  %1 : f64[B, 5]@cpu = py.binary(%0, %n) {op = "+"}
  %2 : i32[B, 5]@cpu = py.binary(%i, %n) {op = "*"}
  %3 : i32[B, 5]@cpu = py.binary(%2, %i) {op = "+"}
  %4 : tuple[f64[B, 5]@cpu, i32[B, 5]@cpu] = py.tuple(%1, %3)
  func.return(%4)
}
"""


def test_scalar_inputs(tmp_path) -> None:
    """A float scalar reaches a float64 kernel with all its digits; an int scalar wraps with int32."""
    module = load([emit_triton_kernel(k) for k in kernels_of(SCALARS)], tmp_path)
    x, i = randn(3, 5, dtype=torch.float64), randint(-9, 9, (3, 5), dtype=torch.int32)
    a, n = 0.1 + 1e-13, 2**31 + 3  # (n as int32 is -2**31 + 3)
    assert torch.equal(module.mul_add_triton(x, a, n), x * a + n)
    assert torch.equal(module.mul_add_2_triton(i, n), i * n + i)
    assert torch.equal(module.mul_add_triton(x, 1.0, 1), x + 1)  # (1 is not compiled in)


ZERO = """\
func @f(%x: f32[B, 0]@cpu, %y: f32[B, 1]@cpu) -> f32[B, 0]@cpu {
  %0 : f32[B, 0]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 0]@cpu = py.binary(%0, %y) {op = "*"}
  func.return(%1)
}
"""


def test_zero_sizes_launch_nothing(tmp_path) -> None:
    [kernel] = kernels_of(ZERO)
    emitted = emit_triton_kernel(kernel)
    assert "[grid]" not in emitted.launcher, emitted.launcher
    assert load([emitted], tmp_path).exp_mul_triton(randn(3, 0), randn(3, 1)).shape == (3, 0)
    [kernel] = kernels_of(CHAIN)
    chain = load([emit_triton_kernel(kernel)], tmp_path).exp_mul_add_triton
    assert chain(randn(0, 8), randn(8)).shape == (0, 8)


RANKS = """\
func @f(%s: f32[]@cpu, %t: f32[]@cpu, %x: f32[B, 3, 4, 5]@cpu, %y: f32[3, 1, 5]@cpu) -> tuple[f32[]@cpu, f32[B, 3, 4, 5]@cpu] {
  %0 : f32[]@cpu = torch.call(%s) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[]@cpu = py.binary(%0, %t) {op = "*"}
  %2 : f32[B, 3, 4, 5]@cpu = py.binary(%x, %y) {op = "*"}
  %3 : f32[B, 3, 4, 5]@cpu = torch.call(%2) {callee = "torch.tanh", aten = "aten::tanh"}
  %4 : tuple[f32[]@cpu, f32[B, 3, 4, 5]@cpu] = py.tuple(%1, %3)
  func.return(%4)
}
"""


def test_rank_0_and_rank_4_with_broadcasting(tmp_path) -> None:
    scalar, rank4 = kernels_of(RANKS)
    module = load([emit_triton_kernel(scalar), emit_triton_kernel(rank4)], tmp_path)
    s, t = torch.tensor(0.5, device=DEVICE), torch.tensor(3.0, device=DEVICE)
    assert_close_to_eager(module.exp_mul_triton(s, t), torch.exp(s) * t)
    y = randn(5, 3).t().unsqueeze(1)  # (3, 1, 5), not contiguous
    for x in (randn(2, 3, 4, 5), randn(5, 4, 3, 2).permute(3, 2, 1, 0)):
        assert_close_to_eager(module.mul_tanh_triton(x, y), torch.tanh(x * y), str(x.stride()))


MATH = """\
func @f(%x: f32[N]@cpu) -> f32[N]@cpu {
  %0 : f32[N]@cpu = torch.call(%x) {callee = "torch.OP", aten = "aten::OP"}
  %1 : float = py.constant() {value = 2.0}
  %2 : f32[N]@cpu = py.binary(%0, %1) {op = "*"}
  func.return(%2)
}
"""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["tanh", "expm1", "log1p", "erf", "trunc"])
def test_math_is_accurate_near_zero_and_far(tmp_path, name, dtype) -> None:
    """The helpers that stand in for libdevice: within a few units of the last place of torch,
    relative error, from subnormal to large arguments, both signs, special values exact."""
    short = "f32" if dtype == torch.float32 else "f64"
    [kernel] = kernels_of(MATH.replace("OP", name).replace("f32", short))
    f = getattr(load([emit_triton_kernel(kernel)], tmp_path), f"{name}_mul_triton")
    tiny = torch.finfo(dtype).tiny
    magnitudes = torch.logspace(-30, 2.5, 400, dtype=torch.float64).to(dtype)
    x = torch.cat([magnitudes, -magnitudes, torch.tensor([0.0, -0.0, tiny / 4, -tiny / 4, 0.2499, 0.25, -0.25, 0.55,
                                                          float("inf"), -float("inf"), float("nan")], dtype=dtype)])
    x = x.to(DEVICE)
    if name == "log1p":
        x = x.clamp_min(-1.0)
    got, expected = f(x), getattr(torch, name)(x) * 2
    ulp = torch.finfo(dtype).eps
    torch.testing.assert_close(got, expected, rtol=4 * ulp, atol=0.0, equal_nan=True)
    assert torch.equal(got.signbit(), expected.signbit()) or name == "erf"


HALF = """\
func @f(%x: f16[B, 37]@cpu, %y: f16[37]@cpu) -> tuple[f16[B, 37]@cpu, f16[B, 37]@cpu] {
  %0 : f16[B, 37]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f16[B, 37]@cpu = py.binary(%0, %y) {op = "*"}
  %2 : float = py.constant() {value = 0.1}
  %3 : f16[B, 37]@cpu = py.binary(%1, %2) {op = "+"}
  %4 : int = py.constant() {value = 1}
  %5 : bool = py.constant() {value = True}
  %6 : f16[B, 1]@cpu = torch.call(%3, %4, %5) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %7 : f16[B, 37]@cpu = py.binary(%3, %6) {op = "-"}
  %8 : f16[B, 37]@cpu = torch.call(%7) {callee = "torch.exp", aten = "aten::exp"}
  %9 : f16[B, 1]@cpu = torch.call(%8, %4, %5) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %10 : f16[B, 37]@cpu = py.binary(%8, %9) {op = "/"}
  %11 : f16[B, 37]@cpu = torch.call(%10) {callee = "torch.tanh", aten = "aten::tanh"}
  %12 : tuple[f16[B, 37]@cpu, f16[B, 37]@cpu] = py.tuple(%3, %11)
  func.return(%12)
}
"""


@pytest.mark.parametrize("looped", [False, True], ids=["block", "loop"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_floats(tmp_path, monkeypatch, dtype, looped) -> None:
    """Values held as float32, rounded after every op; sums accumulate in float32. (The fusion
    pass is told to take 16-bit tensors, whether or not it does by default.)"""
    vocabulary = sys.modules["ir.kernel.vocabulary"]
    monkeypatch.setattr(vocabulary, "DTYPES", vocabulary.DTYPES | {"float16", "bfloat16"})
    monkeypatch.setattr(vocabulary, "REDUCTION_DTYPES", vocabulary.REDUCTION_DTYPES | {"float16", "bfloat16"})
    short = "f16" if dtype == torch.float16 else "bf16"
    [kernel] = kernels_of(HALF.replace("f16", short))
    module = load([emit_triton_kernel(kernel)], tmp_path)
    if looped:
        monkeypatch.setattr(triton_helpers, "TS_ROW_BLOCK_MAX", 16)
        monkeypatch.setattr(triton_helpers, "TS_LOOP_BLOCK", 16)
    x, y = randn(5, 37, dtype=dtype), randn(37, dtype=dtype)
    a = torch.exp(x) * y + 0.1
    expected = (a, torch.tanh(torch.softmax(a, dim=-1)))
    assert_close_to_eager(module.exp_mul_add_triton(x, y), expected)

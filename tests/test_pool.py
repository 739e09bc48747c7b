"""Max pooling by kernel.pool (ir/passes/pool.py, codegen/pool_kernels.py): which `max_pool2d`s
become the kernel (IR in, IR out), and generated functions against eager on values (NaN, -inf,
signed zeros, cut windows) and strides, with the C++ and the Triton kernels."""

from __future__ import annotations

import os
import re

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from closeness import assert_close_to_eager
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.passes.pool import pool_kernels
from pass_text import after
from source_module import imported_source
from triton_setup import INTERPRETED

POOL = """\
func @f(%x: f32[B, 16, 16, 8]@cpu) -> f32[B, 8, 8, 8]@cpu {
  %two : float = py.constant() {value = 2.0}
  %zero : int = py.constant() {value = 0}
  %a : f32[B, 16, 16, 8]@cpu = py.binary(%x, %two) {op = "*"}
  %0 : f32[B, 16, 16, 8]@cpu = torch.call(%a, %zero) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %1 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %2 : f32[B, 8, 16, 16]@cpu = torch.method(%0, %1) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %k : int = py.constant() {value = 3}
  %s : int = py.constant() {value = 2}
  %p : int = py.constant() {value = 1}
  %c : bool = py.constant() {value = True}
  %3 : f32[B, 8, 8, 8]@cpu = torch.call(%2, %k, %s, %p, %c) {callee = "torch.nn.functional.max_pool2d", kwnames = ("ceil_mode",), aten = "aten::max_pool2d"}
  %4 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %5 : f32[B, 8, 8, 8]@cpu = torch.method(%3, %4) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %6 : f32[B, 8, 8, 8]@cpu = torch.call(%5) {callee = "torch.tanh", aten = "aten::tanh"}
  %7 : f32[B, 8, 8, 8]@cpu = torch.call(%3) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %8 : f32[B, 8, 8, 8]@cpu = py.binary(%6, %7) {op = "+"}
  func.return(%8)
}
"""


def pooled(text: str) -> str:
    return after(text, fuse, pool_kernels, dce)


def test_a_max_pool_of_nhwc_rows_seen_as_nchw_is_a_pool_kernel() -> None:
    # tanh is no non-decreasing op the pool could go before: it reads the kernel's output. The
    # NCHW result is the pool's output permuted; its NHWC rows (%5) are the output itself.
    assert pooled(POOL.replace('torch.call(%a, %zero) {callee = "torch.clamp_min", aten = "aten::clamp_min"}',
                               'torch.call(%a) {callee = "torch.tanh", aten = "aten::tanh"}')) == """\
func @f(%x: f32[B, 16, 16, 8]@cpu) -> f32[B, 8, 8, 8]@cpu {
  %0 : f32[B, 16, 16, 8]@cpu = kernel.pointwise(%x) {name = "mul_tanh", inputs = 1} {
    ^(%x_1: f32[]@cpu):
    %two : float = py.constant() {value = 2.0}
    %a : f32[]@cpu = py.binary(%x_1, %two) {op = "*"}
    %1 : f32[]@cpu = torch.call(%a) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%1)
  }
  %2 : f32[B, 8, 8, 8]@cpu = kernel.pool(%0) {name = "max_pool2d", kernel_size = (3, 3), stride = (2, 2), padding = (1, 1)}
  %3 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %4 : f32[B, 8, 8, 8]@cpu = torch.method(%2, %3) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %5 : f32[B, 8, 8, 8]@cpu = torch.call(%4) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %6 : f32[B, 8, 8, 8]@cpu = kernel.pointwise(%2, %5) {name = "tanh_add", inputs = 2} {
    ^(%7: f32[]@cpu, %8: f32[]@cpu):
    %9 : f32[]@cpu = torch.call(%7) {callee = "torch.tanh", aten = "aten::tanh"}
    %10 : f32[]@cpu = py.binary(%9, %8) {op = "+"}
    scf.yield(%10)
  }
  func.return(%6)
}
"""


def test_a_non_decreasing_kernel_runs_after_the_pool() -> None:
    """max(relu(2x)) over a window is relu(2 max(x)): the pool reads x, and the kernel runs on
    the pooled rows."""
    assert pooled(POOL) == """\
func @f(%x: f32[B, 16, 16, 8]@cpu) -> f32[B, 8, 8, 8]@cpu {
  %0 : f32[B, 8, 8, 8]@cpu = kernel.pool(%x) {name = "max_pool2d", kernel_size = (3, 3), stride = (2, 2), padding = (1, 1)}
  %1 : f32[B, 8, 8, 8]@cpu = kernel.pointwise(%0) {name = "mul_clamp_min", inputs = 1} {
    ^(%x_1: f32[]@cpu):
    %two : float = py.constant() {value = 2.0}
    %a : f32[]@cpu = py.binary(%x_1, %two) {op = "*"}
    %zero : int = py.constant() {value = 0}
    %2 : f32[]@cpu = torch.call(%a, %zero) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
    scf.yield(%2)
  }
  %3 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %4 : f32[B, 8, 8, 8]@cpu = torch.method(%1, %3) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %5 : f32[B, 8, 8, 8]@cpu = torch.call(%4) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %6 : f32[B, 8, 8, 8]@cpu = kernel.pointwise(%1, %5) {name = "tanh_add", inputs = 2} {
    ^(%7: f32[]@cpu, %8: f32[]@cpu):
    %9 : f32[]@cpu = torch.call(%7) {callee = "torch.tanh", aten = "aten::tanh"}
    %10 : f32[]@cpu = py.binary(%9, %8) {op = "+"}
    scf.yield(%10)
  }
  func.return(%6)
}
"""


@pytest.mark.parametrize("change", [
    ("%two : float = py.constant() {value = 2.0}", "%two : float = py.constant() {value = -2.0}"),  # decreasing
    ('py.binary(%x, %two) {op = "*"}', 'py.binary(%two, %x) {op = "-"}'),  # decreasing
    ('py.binary(%x, %two) {op = "*"}', 'py.binary(%x, %x) {op = "*"}'),  # x * x
    ("%x: f32[B, 16, 16, 8]@cpu", "%x: f32[B, 16, 16, 8]@cpu, %y: f32[B, 16, 16, 8]@cpu"),  # + y, varying along H, W
    ("%x: f32[B, 16, 16, 8]@cpu", "%x: f32[B, 16, 16, 8]@cpu, %y: f32[16, 8]@cpu"),  # + y, varying along W
    # a write between the kernel and the pool: both would read x after it
    ("  %k : int", '  %w : f32[B, 16, 16, 8]@cpu = torch.method(%x, %two) {method = "mul_", mutates = (0,), '
                   'alias_of = 0, aten = "aten::mul_.Scalar"}\n  %k : int'),
])
def test_kernels_the_pool_does_not_go_before(change: tuple[str, str]) -> None:
    text = POOL.replace(*change)
    if "%y" in change[1]:  # (x + y)
        text = text.replace('py.binary(%x, %two) {op = "*"}', 'py.binary(%x, %y) {op = "+"}')
    out = pooled(text)
    assert "kernel.pool(%0)" in out and "kernel.pointwise(%x" in out


@pytest.mark.parametrize("change", [
    # the input is an argument: its strides are not known, nor so the layout of torch's result
    ("%2 : f32[B, 8, 16, 16]@cpu = torch.method(%0, %1)", "%2 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %1)"),
    # NCHW rows (no permute to look through)
    ("(0, 3, 1, 2)", "(0, 1, 2, 3)"),
    # indices asked for
    ('aten = "aten::max_pool2d"', 'aten = "aten::max_pool2d_with_indices"'),
    # padding over half the window: torch raises, and so must the program
    ("%p : int = py.constant() {value = 1}", "%p : int = py.constant() {value = 2}"),
    # a dtype the kernel does not take
    ("f32[B, 16, 16, 8]@cpu", "i64[B, 16, 16, 8]@cpu"),
    # unknown spatial sizes
    ("f32[B, 16, 16, 8]@cpu", "f32[B, H, 16, 8]@cpu"),
])
def test_max_pools_that_stay(change: tuple[str, str]) -> None:
    text = POOL.replace(*change)
    if "i64" in change[1]:
        text = text.replace("f32[B, 8", "i64[B, 8").replace('%two : float = py.constant() {value = 2.0}',
                                                            '%two : int = py.constant() {value = 2}')
    if "[B, H" in change[1]:
        text = text.replace("f32[B, 8, 16, 16]", "f32[B, 8, H, 16]")
    assert "kernel.pool" not in pooled(text)


def test_dilation_other_than_one_stays() -> None:
    text = POOL.replace('%c : bool = py.constant() {value = True}', '%c : int = py.constant() {value = 2}') \
        .replace('kwnames = ("ceil_mode",)', 'kwnames = ("dilation",)')
    assert "kernel.pool" not in pooled(text)


# -- generated functions against eager --------------------------------------------------------
def _source(kernel: int, stride: int | None, padding: int, ceil: bool, rows: str = "x * 2.0 * 0.5") -> str:
    return f"""\
import torch
import torch.nn.functional as F
from torch import Tensor


def f(x: Tensor) -> Tensor:
    rows = {rows}
    return F.max_pool2d(rows.permute(0, 3, 1, 2), {kernel}, {stride}, {padding}, ceil_mode={ceil})
"""


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0]
# what the pool reads: kernels the pool goes before (non-decreasing), and one it does not
ROWS = ["x * 2.0 * 0.5", "torch.relu(x - 0.25) + 1.0", "torch.tanh(x) * 3.0"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kernel=st.integers(1, 4), stride=st.sampled_from([None, 1, 2, 3]), data=st.data(), ceil=st.booleans(),
       channels=st.sampled_from([1, 3, 8, 24, 33, 70]), backend=st.sampled_from(["cpp", "triton"]),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
       special=st.lists(st.sampled_from(SPECIAL), max_size=4), rows=st.sampled_from(ROWS))
def test_compiled_pools_match_eager(kernel, stride, data, ceil, channels, backend, dtype, special, rows, tmp_path,
                                    monkeypatch) -> None:
    from transpiler import script

    if backend == "triton" and not INTERPRETED:
        pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    padding = data.draw(st.integers(0, kernel // 2), "padding")
    h, w = data.draw(st.integers(max(kernel - 2 * padding, 1), 9), "h"), data.draw(st.integers(max(kernel - 2 * padding, 1), 9), "w")
    cache = Path(tempfile.mkdtemp(dir=tmp_path))
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    if backend == "triton":
        monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
    with imported_source(cache, "pools", _source(kernel, stride, padding, ceil, rows)) as mod:
        x = torch.randn(2, h, w, channels, dtype=dtype)
        compiled = script(mod.f, example_inputs=(x,))
        text = next((cache / "jit").glob("*.py")).read_text()
        assert "kernel.pool" not in text and re.search(r"def max_pool2d(_cpp)?\(", text)
        for batch in (2, 3):
            x = torch.randn(batch, h, w, channels, dtype=dtype)
            flat = x.view(-1)
            for i, value in enumerate(special):  # (spread over the first window positions)
                if flat.numel():
                    flat[(i * 7919) % flat.numel()] = value
            with runtime.mode("strict"):
                got = compiled(x)
            expected = mod.f(x)
            assert_close_to_eager(got, expected)
            assert torch.equal(got.signbit() & ~got.isnan(), expected.signbit() & ~expected.isnan())  # (-0.0 kept)
            assert got.stride() == expected.stride() or channels == 1


def test_strided_channels_take_the_general_loop(tmp_path, monkeypatch) -> None:
    """The kernel reads any strides: rows whose channels are not contiguous (a launcher called
    directly with a permuted tensor) give eager's result too."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "strided_pool", _source(3, 2, 1, False)) as mod:
        script(mod.f, example_inputs=(torch.randn(2, 9, 9, 40),))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        name = re.search(r"def (max_pool2d\w*)\(", text)[1]
        namespace: dict = {}
        exec(compile(text, "pools_compiled", "exec"), namespace)
        rows = torch.randn(2, 40, 9, 9).permute(0, 2, 3, 1)  # (channels at stride 81)
        got = namespace[name](rows)
        expected = torch.nn.functional.max_pool2d(rows.permute(0, 3, 1, 2), 3, 2, 1).permute(0, 2, 3, 1)
        assert torch.equal(got, expected)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_pool_of_one_image_has_static_sizes(backend, tmp_path, monkeypatch) -> None:
    """Compiled for one image, the batch is no symbol: the launchers get literal sizes."""
    from transpiler import script

    if backend == "triton" and not INTERPRETED:
        pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", backend)
    with imported_source(tmp_path, "one_image_pool", _source(3, 2, 1, True, "torch.tanh(x) * 3.0")) as mod:
        x = torch.randn(1, 9, 7, 40)
        compiled = script(mod.f, example_inputs=(x,))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        assert "torch.empty(1, 5, 4, 40, dtype=torch.float32" in text
        assert ("ts_tile(20, 40)" in text) == (backend == "triton")  # (C++ only: no Triton code)
        with runtime.mode("strict"):
            got = compiled(x)
        assert_close_to_eager(got, mod.f(x))
        assert got.stride() == mod.f(x).stride()


# -- adaptive average pooling (kernel.adaptive_avg_pool) ---------------------------------------
ADAPTIVE = """\
func @f(%x: f32[B, 16, ?]@cpu, %size: int) -> f32[B, 16, ?]@cpu {
  %0 : f32[B, 16, ?]@cpu = torch.call(%x, %size) {callee = "torch.nn.functional.adaptive_avg_pool1d", aten = "aten::adaptive_avg_pool1d"}
  func.return(%0)
}
"""


def test_an_adaptive_average_pool_of_any_size_is_a_kernel() -> None:
    """The output size need not be known: the kernel takes it as an argument."""
    assert after(ADAPTIVE, pool_kernels) == """\
func @f(%x: f32[B, 16, ?]@cpu, %size: int) -> f32[B, 16, ?]@cpu {
  %0 : f32[B, 16, ?]@cpu = kernel.adaptive_avg_pool(%x, %size) {name = "adaptive_avg_pool1d"}
  func.return(%0)
}
"""


def test_a_constant_adaptive_pool_size_becomes_the_kernels_operand() -> None:
    text = ADAPTIVE.replace("%x: f32[B, 16, ?]@cpu, %size: int", "%x: f64[16, 40]@cpu").replace(
        "f32[B, 16, ?]@cpu = torch.call(%x, %size)", "f64[16, 5]@cpu = torch.call(%x, %size)").replace(
        "-> f32[B, 16, ?]@cpu", "-> f64[16, 5]@cpu").replace(
        "  %0 :", "  %size : tuple[int] = py.constant() {value = (5,)}\n  %0 :")
    assert after(text, pool_kernels, dce) == """\
func @f(%x: f64[16, 40]@cpu) -> f64[16, 5]@cpu {
  %0 : int = py.constant() {value = 5}
  %1 : f64[16, 5]@cpu = kernel.adaptive_avg_pool(%x, %0) {name = "adaptive_avg_pool1d"}
  func.return(%1)
}
"""


@pytest.mark.parametrize("change", [
    ("f32[B, 16, ?]@cpu", "f32[B, 16, ?]@cuda"),  # (no Triton kernel for it: torch's own on CUDA)
    ("f32[B, 16, ?]@cpu", "f16[B, 16, ?]@cpu"),  # (torch sums 16-bit floats in float32)
    ("f32[B, 16, ?]@cpu", "f32[B, 2, 16, ?]@cpu"),  # (adaptive_avg_pool1d takes 2-d and 3-d)
    ("%size: int", "%size: list[int]"),  # (a list whose length is not known here)
])
def test_adaptive_pools_that_stay(change: tuple[str, str]) -> None:
    text = ADAPTIVE.replace(*change)
    assert after(text, pool_kernels) == after(text)


ADAPTIVE_SOURCE = """\
import torch
import torch.nn.functional as F
from torch import Tensor


def f(x: Tensor, sizes: list[int]) -> list[Tensor]:
    return [F.adaptive_avg_pool1d(x, size) for size in sizes]
"""


def _adaptive_compiled(mod, example: torch.Tensor, cache: Path, monkeypatch) -> tuple:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    compiled = script(mod.f, example_inputs=(example, [3]))
    text = next((cache / "jit").glob("*.py")).read_text()
    assert "adaptive_avg_pool1d_kernel(" in text
    assert ("def adaptive_avg_pool1d_triton(" in text) == (os.environ["TORCHSCRIBE_BACKEND"] == "triton")
    namespace: dict = {}
    exec(compile(text, "adaptive_compiled", "exec"), namespace)
    return compiled, namespace[re.search(r"def (adaptive_avg_pool1d\w*)\(", text)[1]]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_adaptive_pools_match_eager(dtype, backend, tmp_path, monkeypatch) -> None:
    """Windows that overlap, that are one element, that cover the row; sizes above the length;
    strided and 2-d inputs; torch's refusals and empty results (a size of 0) through torch. Bit for bit, but
    a size of 1, where torch takes `mean`'s path (its own order of sums)."""
    if backend == "triton" and not INTERPRETED:
        pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", backend)
    sizes = [1, 2, 3, 7, 13, 49, 50, 51, 64, 200]
    with imported_source(tmp_path, "adaptive", ADAPTIVE_SOURCE) as mod:
        for example, calls in (
                (torch.randn(4, 6, 50, dtype=dtype), (torch.randn(4, 6, 50, dtype=dtype), torch.randn(1, 6, 50, dtype=dtype),
                                                      torch.randn(4, 50, 6, dtype=dtype).transpose(1, 2))),
                (torch.randn(6, 50, dtype=dtype), (torch.randn(6, 50, dtype=dtype), torch.randn(50, 6, dtype=dtype).t()))):
            compiled, launcher = _adaptive_compiled(mod, example, tmp_path / f"cache{example.dim()}", monkeypatch)
            for x in calls:
                with runtime.mode("strict"):
                    got = compiled(x, sizes)
                for size, g, e in zip(sizes, got, mod.f(x, sizes)):
                    assert g.shape == e.shape and g.is_contiguous()
                    if size == 1:
                        assert_close_to_eager(g, e)
                    else:
                        assert torch.equal(g, e), size
            empty = torch.randn(0, 6, 50, dtype=dtype) if example.dim() == 3 else torch.randn(6, 0, dtype=dtype)
            assert launcher(example, 0).shape == example.shape[:-1] + (0,)
            if example.dim() == 3:
                assert launcher(empty, 7).shape == (0, 6, 7)
            for bad in ((example, -2),) + (((empty, 3),) if example.dim() == 2 else ()):
                with pytest.raises(RuntimeError):
                    launcher(*bad)

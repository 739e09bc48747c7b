"""Concatenation in place (ir/passes/concat.py): which `cat`s have their parts written into
their result by the kernels that compute them (IR in, IR out), and generated functions against
eager on values and on the strides of the result, with the C++ and the Triton kernels."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from closeness import assert_close_to_eager
from ir.passes.concat import write_into_cats
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.passes.reuse import reuse_buffers
from pass_text import after
from source_module import imported_source
from triton_setup import INTERPRETED

ROW_MAJOR = """\
func @f(%x: f32[B, 8, 4]@cpu, %y: f32[B, 6, 4]@cpu) -> f32[B, 14, 4]@cpu {
  %two : float = py.constant() {value = 2.0}
  %dim : int = py.constant() {value = 1}
  %0 : f32[B, 8, 4]@cpu = py.binary(%x, %two) {op = "*"}
  %1 : f32[B, 8, 4]@cpu = torch.call(%0) {callee = "torch.tanh", aten = "aten::tanh"}
  %2 : f32[B, 6, 4]@cpu = py.binary(%y, %two) {op = "+"}
  %3 : f32[B, 6, 4]@cpu = torch.call(%2) {callee = "torch.tanh", aten = "aten::tanh"}
  %4 : list[Tensor] = py.list(%1, %3)
  %5 : f32[B, 14, 4]@cpu = torch.call(%4, %dim) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%5)
}
"""
PERMUTE = 'torch.method(%{x}, %nchw) {{method = "permute", alias_of = 0, aten = "aten::permute"}}'
# the parts as the layout pass leaves them between convs: NHWC kernels, seen as NCHW
NHWC = f"""\
func @f(%x: f32[B, 5, 5, 8]@cpu, %y: f32[B, 5, 5, 6]@cpu) -> f32[B, 14, 5, 5]@cpu {{
  %two : float = py.constant() {{value = 2.0}}
  %dim : int = py.constant() {{value = 1}}
  %nchw : tuple[int, int, int, int] = py.constant() {{value = (0, 3, 1, 2)}}
  %0 : f32[B, 5, 5, 8]@cpu = py.binary(%x, %two) {{op = "*"}}
  %1 : f32[B, 5, 5, 8]@cpu = torch.call(%0) {{callee = "torch.tanh", aten = "aten::tanh"}}
  %p : f32[B, 8, 5, 5]@cpu = {PERMUTE.format(x="1")}
  %2 : f32[B, 5, 5, 6]@cpu = py.binary(%y, %two) {{op = "+"}}
  %3 : f32[B, 5, 5, 6]@cpu = torch.call(%2) {{callee = "torch.tanh", aten = "aten::tanh"}}
  %q : f32[B, 6, 5, 5]@cpu = {PERMUTE.format(x="3")}
  %4 : list[Tensor] = py.list(%p, %q)
  %5 : f32[B, 14, 5, 5]@cpu = torch.call(%4, %dim) {{callee = "torch.cat", aten = "aten::cat"}}
  func.return(%5)
}}
"""


def written_in(text: str) -> str:
    return after(text, fuse, write_into_cats, dce, reuse_buffers)


def test_kernels_write_their_parts_into_the_result() -> None:
    assert written_in(ROW_MAJOR) == """\
func @f(%x: f32[B, 8, 4]@cpu, %y: f32[B, 6, 4]@cpu) -> f32[B, 14, 4]@cpu {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 14}
  %3 : int = py.constant() {value = 4}
  %4 : tuple[int, int, int] = py.tuple(%1, %2, %3)
  %5 : dtype = py.constant() {value = "torch.float32"}
  %cat : f32[B, 14, 4]@cpu = torch.method(%x, %4, %5) {method = "new_empty", kwnames = ("dtype",), aten = "aten::new_empty"}
  %6 : int = py.constant() {value = 1}
  %7 : int = py.constant() {value = 0}
  %8 : int = py.constant() {value = 8}
  %9 : f32[B, 8, 4]@cpu = torch.method(%cat, %6, %7, %8) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %10 : f32[B, 8, 4]@cpu = kernel.pointwise(%x, %9) {name = "mul_tanh", inputs = 1, into = (0,)} {
    ^(%x_1: f32[]@cpu):
    %two : float = py.constant() {value = 2.0}
    %11 : f32[]@cpu = py.binary(%x_1, %two) {op = "*"}
    %12 : f32[]@cpu = torch.call(%11) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%12)
  }
  %13 : int = py.constant() {value = 1}
  %14 : int = py.constant() {value = 8}
  %15 : int = py.constant() {value = 6}
  %16 : f32[B, 6, 4]@cpu = torch.method(%cat, %13, %14, %15) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %17 : f32[B, 6, 4]@cpu = kernel.pointwise(%y, %16) {name = "add_tanh", inputs = 1, into = (0,)} {
    ^(%y_1: f32[]@cpu):
    %two_1 : float = py.constant() {value = 2.0}
    %18 : f32[]@cpu = py.binary(%y_1, %two_1) {op = "+"}
    %19 : f32[]@cpu = torch.call(%18) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%19)
  }
  func.return(%cat)
}
"""


def test_nhwc_parts_seen_as_nchw_make_a_channels_last_result() -> None:
    """As torch's `cat` of channels-last tensors is channels-last: an NHWC buffer, filled along
    its last dim, seen as NCHW."""
    out = written_in(NHWC)
    assert '%cat : f32[B, 5, 5, 14]@cpu = torch.method(%x, %4, %5) {method = "new_empty"' in out
    assert 'f32[B, 5, 5, 6]@cpu = torch.method(%cat, %13, %14, %15) {method = "narrow"' in out
    assert "%13 : int = py.constant() {value = 3}" in out and "%14 : int = py.constant() {value = 8}" in out
    assert out.endswith("""\
  %20 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %21 : f32[B, 14, 5, 5]@cpu = torch.method(%cat, %20) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%21)
}
""")


def test_nhwc_rows_of_a_channels_last_result_are_the_buffer() -> None:
    """`.permute(0, 2, 3, 1)` of the result (the layout pass's NHWC rows for a 1x1 conv run as
    `linear`) is the buffer itself, not a permute of its permute."""
    text = NHWC.replace("-> f32[B, 14, 5, 5]@cpu {", "-> f32[B, 5, 5, 14]@cpu {").replace("  func.return(%5)", f"""\
  %nhwc : tuple[int, int, int, int] = py.constant() {{value = (0, 2, 3, 1)}}
  %6 : f32[B, 5, 5, 14]@cpu = torch.method(%5, %nhwc) {{method = "permute", alias_of = 0, aten = "aten::permute"}}
  func.return(%6)""")
    out = written_in(text)
    assert "func.return(%cat)" in out and '"permute"' not in out


def test_a_row_major_part_makes_a_row_major_result() -> None:
    """torch's `cat` is row-major when one of its tensors is: the NHWC kernel writes its part
    through a permuted view of the rows."""
    mixed = NHWC.replace("%y: f32[B, 5, 5, 6]@cpu", "%y: f32[B, 6, 5, 5]@cpu")
    mixed = mixed.replace("%2 : f32[B, 5, 5, 6]@cpu", "%2 : f32[B, 6, 5, 5]@cpu").replace("%3 : f32[B, 5, 5, 6]@cpu", "%3 : f32[B, 6, 5, 5]@cpu")
    mixed = mixed.replace(f"  %q : f32[B, 6, 5, 5]@cpu = {PERMUTE.format(x='3')}\n", "").replace("py.list(%p, %q)", "py.list(%p, %3)")
    out = written_in(mixed)
    assert '%cat : f32[B, 14, 5, 5]@cpu = torch.method(%x, %4, %5) {method = "new_empty"' in out
    assert """\
  %9 : f32[B, 8, 5, 5]@cpu = torch.method(%cat, %6, %7, %8) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %10 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %11 : f32[B, 5, 5, 8]@cpu = torch.method(%9, %10) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %12 : f32[B, 5, 5, 8]@cpu = kernel.pointwise(%x, %11) {name = "mul_tanh", inputs = 1, into = (0,)}""" in out
    assert "func.return(%cat)" in out


def test_the_kernels_stay_where_they_are() -> None:
    """The buffer is allocated before the first kernel, where its sizes are known: the kernels
    run where they ran (here with a matmul between them)."""
    text = ROW_MAJOR.replace("%y: f32[B, 6, 4]@cpu)", "%y: f32[B, 6, 3]@cpu, %w: f32[3, 4]@cpu)").replace(
        '  %2 : f32[B, 6, 4]@cpu = py.binary(%y, %two) {op = "+"}', """\
  %m : f32[B, 6, 4]@cpu = torch.call(%y, %w) {callee = "torch.matmul", aten = "aten::matmul"}
  %2 : f32[B, 6, 4]@cpu = py.binary(%m, %two) {op = "+"}""")
    out = written_in(text)
    assert out.index('"new_empty"') < out.index("mul_tanh") < out.index("torch.matmul") < out.index("add_tanh")


def test_a_kernel_moves_down_to_the_cat_when_a_size_is_known_only_there() -> None:
    """N, the second part's length, is read from the matmul's result: the kernels move down to
    the `cat`, after it."""
    text = ROW_MAJOR.replace("%y: f32[B, 6, 4]@cpu)", "%y: f32[B, N, 3]@cpu, %w: f32[3, 4]@cpu)").replace(
        '  %2 : f32[B, 6, 4]@cpu = py.binary(%y, %two) {op = "+"}', """\
  %m : f32[B, N, 4]@cpu = torch.call(%y, %w) {callee = "torch.matmul", aten = "aten::matmul"}
  %2 : f32[B, N, 4]@cpu = py.binary(%m, %two) {op = "+"}""")
    text = text.replace("%3 : f32[B, 6, 4]", "%3 : f32[B, N, 4]").replace("[B, 14, 4]", "[B, N + 8, 4]")
    out = written_in(text)
    assert out.index("torch.matmul") < out.index('"new_empty"') < out.index("mul_tanh") < out.index("add_tanh")
    assert 'torch.method(%m, %' in out and '{method = "size"' in out
    # a write between the first kernel and the cat: the kernel cannot move past it
    written = text.replace("  %4 : list[Tensor] = py.list(%1, %3)",
                           '  %v : f32[B, 8, 4]@cpu = torch.method(%x, %two) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_"}\n'
                           "  %4 : list[Tensor] = py.list(%1, %3)")
    out = written_in(written)
    assert "torch.cat" in out and "into" not in out


@pytest.mark.parametrize("change", [
    # a part is read by something else too
    ("  func.return(%5)", "  %6 : tuple[Tensor, Tensor] = py.tuple(%5, %1)\n  func.return(%6)"),
    # a part is not a kernel's output
    ("py.list(%1, %3)", "py.list(%1, %y)"),
    # the parts' dtypes differ from the result's (cat promotes)
    ('%3 : f32[B, 6, 4]@cpu = torch.call(%2) {callee = "torch.tanh", aten = "aten::tanh"}',
     '%3 : f64[B, 6, 4]@cpu = torch.call(%2) {callee = "torch.tanh", aten = "aten::tanh"}'),
    # the list is read by something else
    ("  func.return(%5)", "  %6 : int = py.call(%4) {callee = \"len\"}\n  func.return(%5)"),
])
def test_cats_that_stay(change: tuple[str, str]) -> None:
    text = ROW_MAJOR.replace(*change)
    if "%6 : tuple" in text:
        text = text.replace("-> f32[B, 14, 4]@cpu {", "-> tuple[f32[B, 14, 4]@cpu, f32[B, 8, 4]@cpu] {")
    if "f64[B, 6, 4]" in text:
        text = text.replace("%y: f32[B, 6, 4]@cpu", "%y: f64[B, 6, 4]@cpu").replace("%2 : f32[B, 6, 4]", "%2 : f64[B, 6, 4]")
    out = written_in(text)
    assert "torch.cat" in out and "into" not in out


def test_a_permuted_part_of_unknown_channels_stays() -> None:
    """Whether torch calls such a part channels-last depends on its sizes."""
    text = NHWC.replace("[B, 5, 5, 6]", "[B, 5, 5, C]").replace("[B, 6, 5, 5]", "[B, C, 5, 5]").replace(
        "[B, 14, 5, 5]", "[B, 8 + C, 5, 5]")
    out = written_in(text)
    assert "torch.cat" in out and "into" not in out


# -- the cats of a growing list: prefixes of one buffer ---------------------------------------
# DenseNet's `torch.cat(features, 1)` as `features` grows, each result read by a kernel
CHAIN = """\
func @f(%x: f32[B, 2, 4]@cpu, %y: f32[B, 3, 4]@cpu, %z: f32[B, 4, 4]@cpu) -> tuple[f32[B, 2, 4]@cpu, f32[B, 5, 4]@cpu, f32[B, 9, 4]@cpu] {
  %dim : int = py.constant() {value = 1}
  %0 : list[Tensor] = py.list(%x)
  %1 : f32[B, 2, 4]@cpu = torch.call(%0, %dim) {callee = "torch.cat", aten = "aten::cat"}
  %2 : f32[B, 2, 4]@cpu = torch.call(%1) {callee = "torch.tanh", aten = "aten::tanh"}
  %3 : list[Tensor] = py.list(%x, %y)
  %4 : f32[B, 5, 4]@cpu = torch.call(%3, %dim) {callee = "torch.cat", aten = "aten::cat"}
  %5 : f32[B, 5, 4]@cpu = torch.call(%4) {callee = "torch.tanh", aten = "aten::tanh"}
  %6 : list[Tensor] = py.list(%x, %y, %z)
  %7 : f32[B, 9, 4]@cpu = torch.call(%6, %dim) {callee = "torch.cat", aten = "aten::cat"}
  %8 : f32[B, 9, 4]@cpu = torch.call(%7) {callee = "torch.tanh", aten = "aten::tanh"}
  %9 : tuple[f32[B, 2, 4]@cpu, f32[B, 5, 4]@cpu, f32[B, 9, 4]@cpu] = py.tuple(%2, %5, %8)
  func.return(%9)
}
"""


def test_the_cats_of_a_growing_list_are_prefixes_of_one_buffer() -> None:
    """Each part is copied once into the buffer, where the first cat that lists it was; each cat
    is the prefix of the parts it lists (the first part's own view for the first cat), the last
    the whole buffer."""
    assert written_in(CHAIN) == """\
func @f(%x: f32[B, 2, 4]@cpu, %y: f32[B, 3, 4]@cpu, %z: f32[B, 4, 4]@cpu) -> tuple[f32[B, 2, 4]@cpu, f32[B, 5, 4]@cpu, f32[B, 9, 4]@cpu] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 9}
  %3 : int = py.constant() {value = 4}
  %4 : tuple[int, int, int] = py.tuple(%1, %2, %3)
  %5 : dtype = py.constant() {value = "torch.float32"}
  %cat : f32[B, 9, 4]@cpu = torch.method(%x, %4, %5) {method = "new_empty", kwnames = ("dtype",), aten = "aten::new_empty"}
  %6 : int = py.constant() {value = 1}
  %7 : int = py.constant() {value = 0}
  %8 : int = py.constant() {value = 2}
  %9 : f32[B, 2, 4]@cpu = torch.method(%cat, %6, %7, %8) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %10 : f32[B, 2, 4]@cpu = torch.method(%9, %x) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_"}
  %11 : f32[B, 2, 4]@cpu = kernel.pointwise(%9) {name = "tanh", inputs = 1} {
    ^(%12: f32[]@cpu):
    %13 : f32[]@cpu = torch.call(%12) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%13)
  }
  %14 : int = py.constant() {value = 1}
  %15 : int = py.constant() {value = 2}
  %16 : int = py.constant() {value = 3}
  %17 : f32[B, 3, 4]@cpu = torch.method(%cat, %14, %15, %16) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %18 : f32[B, 3, 4]@cpu = torch.method(%17, %y) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_"}
  %19 : int = py.constant() {value = 0}
  %20 : int = py.constant() {value = 5}
  %21 : f32[B, 5, 4]@cpu = torch.method(%cat, %14, %19, %20) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %22 : f32[B, 5, 4]@cpu = kernel.pointwise(%21) {name = "tanh_2", inputs = 1} {
    ^(%23: f32[]@cpu):
    %24 : f32[]@cpu = torch.call(%23) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%24)
  }
  %25 : int = py.constant() {value = 1}
  %26 : int = py.constant() {value = 5}
  %27 : int = py.constant() {value = 4}
  %28 : f32[B, 4, 4]@cpu = torch.method(%cat, %25, %26, %27) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %29 : f32[B, 4, 4]@cpu = torch.method(%28, %z) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_"}
  %30 : f32[B, 9, 4]@cpu = kernel.pointwise(%cat) {name = "tanh_3", inputs = 1} {
    ^(%31: f32[]@cpu):
    %32 : f32[]@cpu = torch.call(%31) {callee = "torch.tanh", aten = "aten::tanh"}
    scf.yield(%32)
  }
  %33 : tuple[f32[B, 2, 4]@cpu, f32[B, 5, 4]@cpu, f32[B, 9, 4]@cpu] = py.tuple(%11, %22, %30)
  func.return(%33)
}
"""


def test_growing_cats_read_as_nhwc_rows_share_an_nhwc_buffer() -> None:
    """Read through `.permute(0, 2, 3, 1)` (NHWC rows, what the layout pass makes for kernels
    between convs): the buffer is NHWC, its prefixes along the channels are the rows read, and
    each part is copied into a prefix's view as NCHW."""
    text = CHAIN.replace("f32[B, 2, 4]", "f32[B, 2, 3, 3]").replace("f32[B, 3, 4]", "f32[B, 3, 3, 3]")
    text = text.replace("f32[B, 4, 4]", "f32[B, 4, 3, 3]").replace("f32[B, 5, 4]", "f32[B, 5, 3, 3]")
    text = text.replace("f32[B, 9, 4]", "f32[B, 9, 3, 3]")
    for cat, n in (("1", 2), ("4", 5), ("7", 9)):
        text = text.replace(f"torch.call(%{cat}) {{callee = \"torch.tanh\"",
                            f"torch.call(%p{cat}) {{callee = \"torch.tanh\"")
        text = text.replace(f"  %{int(cat) + 1} : f32[B, {n}, 3, 3]@cpu = torch.call(%p{cat})", f"""\
  %p{cat} : f32[B, 3, 3, {n}]@cpu = torch.method(%{cat}, %nhwc) {{method = "permute", alias_of = 0, aten = "aten::permute"}}
  %{int(cat) + 1} : f32[B, 3, 3, {n}]@cpu = torch.call(%p{cat})""")
    text = text.replace("  %dim : int", "  %nhwc : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}\n  %dim : int")
    text = text.replace("tuple[f32[B, 2, 3, 3]@cpu, f32[B, 5, 3, 3]@cpu, f32[B, 9, 3, 3]@cpu]",
                        "tuple[f32[B, 3, 3, 2]@cpu, f32[B, 3, 3, 5]@cpu, f32[B, 3, 3, 9]@cpu]")
    out = written_in(text)
    assert "torch.cat" not in out and '"permute"' in out
    assert '%cat : f32[B, 3, 3, 9]@cpu = torch.method(%x, %4, %5) {method = "new_empty"' in out
    assert """\
  %p4 : f32[B, 3, 3, 5]@cpu = torch.method(%cat, %14, %20, %21) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %22 : f32[B, 3, 3, 5]@cpu = kernel.pointwise(%p4) {name = "tanh_2", inputs = 1} {""" in out
    assert """\
  %27 : f32[B, 3, 3, 4]@cpu = torch.method(%cat, %24, %25, %26) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %28 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %29 : f32[B, 4, 3, 3]@cpu = torch.method(%27, %28) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %30 : f32[B, 4, 3, 3]@cpu = torch.method(%29, %z) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_"}
  %31 : f32[B, 3, 3, 9]@cpu = kernel.pointwise(%cat) {name = "tanh_3", inputs = 1} {""" in out


@pytest.mark.parametrize(("change", "cats_left"), [
    # the last result is returned (as torch's cat: its strides), the two before still share
    (("py.tuple(%2, %5, %8)", "py.tuple(%2, %5, %7)"), 1),
    # read by a matmul, which takes no prefix of the buffer for what torch's cat gives it
    (("%5 : f32[B, 5, 4]@cpu = torch.call(%4) {callee = \"torch.tanh\"",
      "%5 : f32[B, 5, 4]@cpu = torch.call(%4, %w) {callee = \"torch.matmul\""), 1),
    # a part of unknown length: its cats stay, and one cat left is no run
    (("%y: f32[B, 3, 4]@cpu", "%y: f32[B, C, 4]@cpu"), 3),
    # the third list does not extend the second: a run of two, then a cat of its own
    (("py.list(%x, %y, %z)", "py.list(%y, %x, %z)"), 1),
    # dim -2 is dim 1 of these: the same run
    (("%7 : f32[B, 9, 4]@cpu = torch.call(%6, %dim)", "%7 : f32[B, 9, 4]@cpu = torch.call(%6, %one)"), 0),
])
def test_growing_cats_that_stay(change: tuple[str, str], cats_left: int) -> None:
    text = CHAIN.replace(*change).replace("  %dim : int", "  %one : int = py.constant() {value = -2}\n  %dim : int")
    if "%w" in text:
        text = text.replace("%z: f32[B, 4, 4]@cpu)", "%z: f32[B, 4, 4]@cpu, %w: f32[4, 4]@cpu)")
    if "f32[B, C, 4]" in text:
        text = text.replace("f32[B, 5, 4]", "f32[B, 2 + C, 4]").replace("f32[B, 9, 4]", "f32[B, 6 + C, 4]")
    out = written_in(text)
    assert out.count("torch.cat") == cats_left, out


# -- generated functions against eager --------------------------------------------------------
PARTS = ["torch.tanh({x} * 2.0)", "torch.relu({x} - 0.5) * 3.0", "torch.sigmoid({x}) + {x}", "{x} * {x} + 1.0",
         "torch.exp(-{x}.abs())"]


def _source(parts: list[tuple[str, bool]], dim: int, permuted: bool) -> str:
    """f(x0, x1, ...): the `cat` of one expression of each input (or the input itself, which is
    no kernel's output), NHWC parts seen as NCHW when `permuted`."""
    items = []
    for i, (expr, is_kernel) in enumerate(parts):
        item = expr.format(x=f"x{i}") if is_kernel else f"x{i}"
        items.append(f"({item}).permute(0, 3, 1, 2)" if permuted else item)
    params = ", ".join(f"x{i}: Tensor" for i in range(len(parts)))
    return f"""\
import torch
from torch import Tensor


def f({params}) -> Tensor:
    return torch.cat([{", ".join(items)}], dim={dim})
"""


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(st.sampled_from(PARTS), st.booleans()), min_size=2, max_size=4),
       rank=st.integers(1, 4), data=st.data(), backend=st.sampled_from(["cpp", "triton"]),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
def test_compiled_cats_match_eager_in_values_and_strides(parts, rank, data, backend, dtype, tmp_path, monkeypatch) -> None:
    from transpiler import script

    if backend == "triton" and not INTERPRETED:
        pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    permuted = rank == 4 and data.draw(st.booleans(), "permuted")
    dim = data.draw(st.integers(-rank, rank - 1), "dim")
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank), "sizes")
    lengths = data.draw(st.lists(st.integers(1, 6), min_size=len(parts), max_size=len(parts)), "lengths")
    along = (0, 3, 1, 2)[dim % rank] if permuted else dim % rank  # (in the inputs' dims)
    shapes = [tuple(n if d == along else s for d, s in enumerate(sizes)) for n in lengths]
    cache = Path(tempfile.mkdtemp(dir=tmp_path))
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    if backend == "triton":
        monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
    with imported_source(cache, "cats", _source(parts, dim, permuted)) as mod:
        inputs = [torch.randn(s, dtype=dtype) for s in shapes]
        compiled = script(mod.f, example_inputs=inputs)
        text = next((cache / "jit").glob("*.py")).read_text()
        assert (".narrow(" in text) == all(is_kernel for _, is_kernel in parts)
        batches = [sizes[0]] + ([sizes[0] + 2] if sizes[0] > 1 and along != 0 else [])  # (a size symbol)
        for batch in batches:
            inputs = [torch.randn((batch,) + s[1:] if batch != sizes[0] else s, dtype=dtype) for s in shapes]
            with runtime.mode("strict"):
                got = compiled(*inputs)
            expected = mod.f(*inputs)
            assert_close_to_eager(got, expected)
            assert got.stride() == expected.stride()


def test_a_cat_of_two_outputs_of_one_kernel(tmp_path, monkeypatch) -> None:
    """sigmoid(x) and exp(x) read x: horizontal fusion makes them one kernel, which writes both
    of its outputs into the result."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = """\
import torch
from torch import Tensor


def f(x: Tensor, y: Tensor) -> Tensor:
    return torch.cat((torch.sigmoid(x), torch.relu(y) * 3.0, torch.exp(x)), dim=0)
"""
    with imported_source(tmp_path, "two_outputs", source) as mod:
        x, y = torch.randn(4, 7), torch.randn(3, 7)
        compiled = script(mod.f, example_inputs=(x, y))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        assert text.count(".narrow(") == 3
        for n in (4, 1):
            x = torch.randn(n, 7)
            with runtime.mode("strict"):
                assert_close_to_eager(compiled(x, y), mod.f(x, y))



DENSE = """\
import torch
from torch import nn


class Dense(nn.Module):
    \"\"\"DenseNet's block: each layer reads the cat of every output before it.\"\"\"

    def __init__(self, first: int, growth: int, layers: int, kernel: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([
            nn.Sequential(nn.BatchNorm2d(first + i * growth), nn.ReLU(),
                          nn.Conv2d(first + i * growth, growth, kernel, padding=kernel // 2, bias=False))
            for i in range(layers)])
        self.norm = nn.BatchNorm2d(first + layers * growth)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return torch.relu(self.norm(torch.cat(features, 1)))
"""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.integers(1, 9), growth=st.integers(1, 6), layers=st.integers(1, 3), kernel=st.sampled_from([1, 3]),
       size=st.integers(1, 6), batch=st.integers(1, 3), freeze=st.booleans(),
       backend=st.sampled_from(["cpp", "triton"]))
def test_a_dense_block_matches_eager(first, growth, layers, kernel, size, batch, freeze, backend, tmp_path) -> None:
    """The cats of the growing list as prefixes of one buffer (named for the list), frozen and
    not, with the C++ and the Triton kernels reading the prefixes, against eager (running
    statistics randomized, the module's state unchanged by the calls), at the batch compiled for
    and (past one image) another."""
    from transpiler import script

    if backend == "triton" and not INTERPRETED:
        pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    cache = Path(tempfile.mkdtemp(dir=tmp_path))
    with pytest.MonkeyPatch.context() as mp, imported_source(cache, "dense", DENSE) as mod:
        mp.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
        if backend == "triton":
            mp.setenv("TORCHSCRIBE_BACKEND", "triton")
        torch.manual_seed(0)
        net = mod.Dense(first, growth, layers, kernel).eval()
        with torch.no_grad():
            for m in net.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-1, 1)
                    m.running_var.uniform_(0.5, 2)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-1, 1)
        state = {k: v.clone() for k, v in net.state_dict().items()}
        x = torch.randn(batch, first, size, size)
        with torch.no_grad():
            compiled = script(net, example_inputs=(x,), freeze=freeze)
            text = next((cache / "jit").glob("*.py")).read_text()
            code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("#", "//", '"""')))
            assert "features = x.new_empty(" in code and ".narrow(" in code and "torch.cat" not in code, code
            for n in [batch] + [batch + 1] * (batch > 1):  # (one image compiles for one image only)
                x = torch.randn(n, first, size, size)
                with runtime.mode("strict"):
                    assert_close_to_eager(compiled(x), net(x))
        for k, v in net.state_dict().items():
            assert torch.equal(v, state[k]), k

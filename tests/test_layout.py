"""Channels-last layout (ir/passes/layout.py): which convolutions take channels-last inputs and
how the pointwise ops between them move to NHWC order (IR in, IR out), what leaves a function as
it is, and compiled conv nets against eager, on values and on the layout of what they return
(hypothesis builds the nets)."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from closeness import assert_close_to_eager
from conv_nets import LAYERS, STEPS, net_source
from ir.core.parser import parse_program
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.passes.conv_choices import prefers_channels_last
from ir.passes.layout import channels_last
from ir.kernel.primitives import op_name
from ir.passes.reuse import reuse_buffers
from ir.core.printer import print_program
from pass_text import after
from source_module import imported_source

CONV = 'torch.call(%{x}, %w, %none, %one, %one, %one, %g) {{callee = "torch.nn.functional.conv2d"}}'
HEAD = """\
func @f(%x: f32[B, 8, 16, 16]@cpu, %w: f32[8, 8, 3, 3]@cpu, %scale: f32[8]@cpu) -> f32[B, 8, 16, 16]@cpu {
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %g : int = py.constant() {value = 1}
  %shape : tuple[int, int, int] = py.constant() {value = (8, 1, 1)}
  %zero : int = py.constant() {value = 0}
"""
CONV_SCALE_RELU_CONV = HEAD + f"""\
  %0 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="x")}
  %1 : f32[8, 1, 1]@cpu = torch.method(%scale, %shape) {{method = "reshape", alias_of = 0, aten = "aten::reshape"}}
  %2 : f32[B, 8, 16, 16]@cpu = py.binary(%0, %1) {{op = "*"}}
  %3 : f32[B, 8, 16, 16]@cpu = torch.call(%2, %zero) {{callee = "torch.clamp_min", aten = "aten::clamp_min"}}
  %4 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="3")}
  func.return(%4)
}}
"""


def laid_out(text: str) -> str:
    return after(text, channels_last)


def test_pointwise_ops_between_convs_compute_in_nhwc_order() -> None:
    # (the reshape of the scale to [8, 1, 1] is gone: [8] broadcasts against NHWC as it is)
    head = HEAD.replace("  %shape : tuple[int, int, int] = py.constant() {value = (8, 1, 1)}\n", "")
    assert laid_out(CONV_SCALE_RELU_CONV) == head + """\
  %0 : memory_format = py.constant() {value = "torch.channels_last"}
  %1 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %0) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %2 : f32[B, 8, 16, 16]@cpu = torch.call(%1, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %3 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %4 : f32[B, 16, 16, 8]@cpu = torch.method(%2, %3) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %5 : f32[B, 16, 16, 8]@cpu = py.binary(%4, %scale) {op = "*"}
  %6 : f32[B, 16, 16, 8]@cpu = torch.call(%5, %zero) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %7 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %8 : f32[B, 8, 16, 16]@cpu = torch.method(%6, %7) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %9 : f32[B, 8, 16, 16]@cpu = torch.call(%8, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %10 : f32[B, 8, 16, 16]@cpu = torch.method(%9) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  func.return(%10)
}
"""


def test_the_kernel_between_convs_writes_over_the_first_convs_output() -> None:
    out = after(CONV_SCALE_RELU_CONV, channels_last, fuse, dce, reuse_buffers)
    assert 'kernel.pointwise(%4, %scale) {name = "mul_clamp_min", inputs = 2, reuse = ((0, 0),)}' in out


@pytest.mark.parametrize("use", [
    # a Python statement (permissive mode) could read strides
    '%9 : Any = py.opaque(%4) {kind = "expr", lines = ("y.stride()",), reads = ("y",), writes = (), reason = "kept"}',
    # so could a submodule
    '%9 : f32[B, 8, 16, 16]@cpu = module.call(%m, %4)',
    # an op that reads strides
    '%9 : tuple[int, int, int, int] = torch.method(%4) {method = "stride", aten = "aten::stride"}',
    # a write
    '%9 : f32[B, 8, 16, 16]@cpu = torch.method(%4) {method = "relu_", mutates = (0,), alias_of = 0, aten = "aten::relu_"}',
])
def test_a_function_where_code_could_see_strides_is_left_as_it_is(use: str) -> None:
    text = CONV_SCALE_RELU_CONV.replace(") -> f32[B, 8, 16, 16]@cpu {", ", %m: Module[M]) -> f32[B, 8, 16, 16]@cpu {")
    text = text.replace("  func.return(%4)", f"  {use}\n  func.return(%4)")
    assert laid_out(text) == print_program(parse_program(text), with_locs=False)


def test_a_loop_that_reads_a_conv_output_leaves_the_function_as_it_is() -> None:
    text = CONV_SCALE_RELU_CONV.replace("  func.return(%4)", """\
  %n : int = py.constant() {value = 2}
  %5 : f32[B, 8, 16, 16]@cpu = scf.for(%g, %n, %g, %4) {
    ^(%i: int, %acc: f32[B, 8, 16, 16]@cpu):
    %6 : f32[B, 8, 16, 16]@cpu = py.binary(%acc, %acc) {op = "+"}
    scf.yield(%6)
  }
  func.return(%5)""")
    assert laid_out(text) == print_program(parse_program(text), with_locs=False)


def test_view_of_a_conv_output_becomes_reshape() -> None:
    text = CONV_SCALE_RELU_CONV.replace("-> f32[B, 8, 16, 16]@cpu {", "-> f32[B, 2048]@cpu {").replace(
        "  func.return(%4)", """\
  %b : int = torch.method(%4, %g) {method = "size", aten = "aten::size.int"}
  %n : int = py.constant() {value = 2048}
  %5 : f32[B, 2048]@cpu = torch.method(%4, %b, %n) {method = "view", alias_of = 0, aten = "aten::view"}
  func.return(%5)""")
    out = laid_out(text)
    assert '= torch.method(%9, %b, %n) {method = "reshape", alias_of = 0, aten = "aten::reshape"}' in out
    assert '"view"' not in out


def test_a_value_returned_twice_is_one_tensor_twice() -> None:
    """`return y, y`: eager returns one tensor twice; so does the compiled code (one copy)."""
    text = CONV_SCALE_RELU_CONV.replace("-> f32[B, 8, 16, 16]@cpu {", "-> tuple[f32[B, 8, 16, 16]@cpu, f32[B, 8, 16, 16]@cpu] {")
    text = text.replace("  func.return(%4)", """  %5 : tuple[f32[B, 8, 16, 16]@cpu, f32[B, 8, 16, 16]@cpu] = py.tuple(%4, %4)
  func.return(%5)""")
    out = laid_out(text)
    assert out.count('method = "contiguous", alias_of = 0') == 1
    assert "py.tuple(%10, %10)" in out


@pytest.mark.parametrize("second", ["%0", "%x"])
def test_a_cat_of_channels_last_tensors_is_channels_last(second: str) -> None:
    """densenet: the features of each layer concatenated, then batch norm and relu. Where every
    tensor in the list is channels-last so is torch's `cat` of them, and the ops after it
    compute in NHWC order; a row-major one in the list (the input `%x`) makes it row-major."""
    text = HEAD + f"""\
  %0 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="x")}
  %1 : f32[B, 8, 16, 16]@cpu = {CONV.format(x="0")}
  %2 : list[f32[B, 8, 16, 16]@cpu] = py.list({second}, %1)
  %3 : f32[B, 16, 16, 16]@cpu = torch.call(%2, %g) {{callee = "torch.cat", aten = "aten::cat"}}
  %4 : f32[B, 16, 16, 16]@cpu = torch.call(%3, %zero) {{callee = "torch.clamp_min", aten = "aten::clamp_min"}}
  func.return(%4)
}}
"""
    out = laid_out(text.replace("-> f32[B, 8, 16, 16]@cpu {", "-> f32[B, 16, 16, 16]@cpu {"))
    nhwc = re.search(r"= torch.method\(%\d+, %\d+\) \{method = \"permute\".*\n.*clamp_min", out)
    assert (nhwc is not None) == (second == "%0"), out


def test_a_lone_conv_stays_nchw() -> None:
    """Its input's copy to channels-last (and its result's back) would cost what it saves."""
    lone = CONV_SCALE_RELU_CONV.replace(f"  %4 : f32[B, 8, 16, 16]@cpu = {CONV.format(x='3')}\n  func.return(%4)",
                                        "  func.return(%3)")
    assert "channels_last" not in laid_out(lone)


def test_convs_with_few_outputs_per_image_stay_nchw() -> None:
    """7x7 outputs of a 3x3 conv: NCHW is faster there (prefers_channels_last), unless the conv
    is grouped."""
    small = CONV_SCALE_RELU_CONV.replace("16, 16", "7, 7")
    assert "channels_last" not in laid_out(small)
    depthwise = small.replace("%w: f32[8, 8, 3, 3]@cpu", "%w: f32[8, 1, 3, 3]@cpu").replace(
        '%g : int = py.constant() {value = 1}', '%g : int = py.constant() {value = 8}')
    assert "channels_last" in laid_out(depthwise)
    grouped = small.replace("%w: f32[8, 8, 3, 3]@cpu", "%w: f32[8, 4, 3, 3]@cpu").replace(
        '%g : int = py.constant() {value = 1}', '%g : int = py.constant() {value = 2}')
    text = laid_out(grouped)  # grouped convs too (regnet's 8 channels a group at 7x7)
    assert text.count('{value = "torch.channels_last"}') == 1  # (the input, once)
    assert "f32[B, 7, 7, 8]@cpu = py.binary(%4, %scale)" in text


POINTWISE_CONV = """\
func @f(%x: f32[B, 8, 16, 16]@cpu, %w: f32[{c_out}, 8, 1, 1]@cpu, %w2: f32[8, {c_out}, 3, 3]@cpu) -> f32[B, 8, 16, 16]@cpu {{
  %none : None = py.constant() {{value = None}}
  %one : tuple[int, int] = py.constant() {{value = (1, 1)}}
  %stride : tuple[int, int] = py.constant() {{value = {stride}}}
  %zero : tuple[int, int] = py.constant() {{value = (0, 0)}}
  %g : int = py.constant() {{value = {groups}}}
  %g1 : int = py.constant() {{value = 1}}
  %z : int = py.constant() {{value = 0}}
  %0 : f32[B, {c_out}, 16, 16]@cpu = torch.call(%x, %w, %none, %stride, %zero, %one, %g) {{callee = "torch.nn.functional.conv2d"}}
  %1 : f32[B, {c_out}, 16, 16]@cpu = torch.call(%0, %z) {{callee = "torch.clamp_min", aten = "aten::clamp_min"}}
  %2 : f32[B, 8, 16, 16]@cpu = torch.call(%1, %w2, %none, %one, %one, %one, %g1) {{callee = "torch.nn.functional.conv2d"}}
  func.return(%2)
}}
"""


def test_a_1x1_conv_of_one_image_is_a_linear_of_the_nhwc_rows() -> None:
    """A 1x1 conv of one image is a matrix product over channels: on NHWC rows, `linear` gives
    the conv's output in channels-last order, and its consumers read it as it is."""
    text = POINTWISE_CONV.format(c_out=32, stride=(1, 1), groups=1).replace("[B, ", "[1, ")
    head = text[:text.index("  %0 :")]
    assert laid_out(text) == head + """\
  %0 : memory_format = py.constant() {value = "torch.channels_last"}
  %1 : f32[1, 8, 16, 16]@cpu = torch.method(%x, %0) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %2 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %3 : f32[1, 16, 16, 8]@cpu = torch.method(%1, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %4 : tuple[int, int] = py.constant() {value = (32, 8)}
  %5 : f32[32, 8]@cpu = torch.method(%w, %4) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %6 : f32[1, 16, 16, 32]@cpu = torch.call(%3, %5) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %7 : f32[1, 16, 16, 32]@cpu = torch.call(%6, %z) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %8 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %9 : f32[1, 32, 16, 16]@cpu = torch.method(%7, %8) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %10 : f32[1, 8, 16, 16]@cpu = torch.call(%9, %w2, %none, %one, %one, %one, %g1) {callee = "torch.nn.functional.conv2d"}
  %11 : f32[1, 8, 16, 16]@cpu = torch.method(%10) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  func.return(%11)
}
"""
    narrowing = laid_out(POINTWISE_CONV.format(c_out=4, stride=(1, 1), groups=1).replace("[B, ", "[1, "))
    assert "f32[1, 16, 16, 4]@cpu = torch.call(%3, %5) {callee = \"torch.nn.functional.linear\"" in narrowing


@pytest.mark.parametrize(("c_out", "stride", "groups", "batch"), [
    (32, (1, 1), 1, "B"),  # a batch that may exceed 1 image: oneDNN's conv was faster (as_linear_call)
    (4, (1, 1), 1, "B"),  # (to fewer channels, too)
    (32, (2, 2), 1, "1"),  # a stride skips pixels: not one product over all rows
    (32, (1, 1), 2, "1"),  # groups: a product per group
])
def test_other_1x1_convs_stay_convs(c_out: int, stride: tuple[int, int], groups: int, batch: str) -> None:
    text = POINTWISE_CONV.format(c_out=c_out, stride=stride, groups=groups).replace(
        "%w: f32[{0}, 8, 1, 1]".format(c_out), "%w: f32[{0}, {1}, 1, 1]".format(c_out, 8 // groups))
    out = laid_out(text.replace("[B, ", f"[{batch}, "))
    assert "linear" not in out and "channels_last" in out


@pytest.mark.parametrize(("weight", "expected"), [
    ("232, 232, 1, 1", True),  # ShuffleNet's last stage: between depthwise convs
    ("1152, 192, 1, 1", True),
    ("464, 464, 1, 1", True),
    ("1024, 1024, 1, 1", False),  # a large 1x1 weight: NCHW up to 1.35x faster at 7x7
    ("2048, 512, 1, 1", False),
    ("64, 64, 3, 3", False),  # not 1x1
])
def test_which_convs_of_7x7_outputs_prefer_channels_last(weight: str, expected: bool) -> None:
    c_out, c_in = weight.split(", ")[:2]
    program = parse_program(f"""\
func @f(%x: f32[B, {c_in}, 7, 7]@cpu, %w: f32[{weight}]@cpu) -> f32[B, {c_out}, 7, 7]@cpu {{
  %none : None = py.constant() {{value = None}}
  %one : tuple[int, int] = py.constant() {{value = (1, 1)}}
  %g : int = py.constant() {{value = 1}}
  %0 : f32[B, {c_out}, 7, 7]@cpu = torch.call(%x, %w, %none, %one, %one, %one, %g) {{callee = "torch.nn.functional.conv2d"}}
  func.return(%0)
}}
""")
    conv = next(op for op in program.funcs[0].walk() if op_name(op) == "conv2d")
    assert prefers_channels_last(conv) is expected


# -- channel shuffles ---------------------------------------------------------------------------
SHUFFLE_HEAD = """\
func @f(%x: f32[B, 8, 16, 16]@cpu, %w: f32[4, 8, 3, 3]@cpu, %w2: f32[4, 4, 3, 3]@cpu) -> f32[B, 4, 16, 16]@cpu {
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %g : int = py.constant() {value = 1}
  %zero : int = py.constant() {value = 0}
  %two : int = py.constant() {value = 2}
  %four : int = py.constant() {value = 4}
  %eight : int = py.constant() {value = 8}
  %s : int = py.constant() {value = 16}
  %swap_dims : tuple[int, int, int, int, int] = py.constant() {value = (0, 2, 1, 3, 4)}
"""
SHUFFLE = """\
  %n : int = torch.method(%cat, %zero) {method = "size", aten = "aten::size.int"}
  %split : f32[B, 2, 4, 16, 16]@cpu = torch.method(%cat, %n, %two, %four, %s, %s) {method = "view", alias_of = 0, aten = "aten::view"}
  %swap : f32[B, 4, 2, 16, 16]@cpu = torch.method(%split, %swap_dims) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %copy : f32[B, 4, 2, 16, 16]@cpu = torch.method(%swap) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  %y : f32[B, 8, 16, 16]@cpu = torch.method(%copy, %n, %eight, %s, %s) {method = "view", alias_of = 0, aten = "aten::view"}
"""
CAT_OF_CONVS = f"""\
  %a : f32[B, 4, 16, 16]@cpu = {CONV.format(x="x")}
  %b0 : f32[B, 4, 16, 16]@cpu = {CONV.format(x="x")}
  %b : f32[B, 4, 16, 16]@cpu = torch.call(%b0, %zero) {{callee = "torch.clamp_min", aten = "aten::clamp_min"}}
  %parts : tuple[f32[B, 4, 16, 16]@cpu, f32[B, 4, 16, 16]@cpu] = py.tuple(%a, %b)
  %cat : f32[B, 8, 16, 16]@cpu = torch.call(%parts, %g) {{callee = "torch.cat", kwnames = ("dim",), aten = "aten::cat"}}
"""
# ShuffleNet's unit: the shuffled halves, one through a conv
UNIT = SHUFFLE_HEAD + CAT_OF_CONVS + SHUFFLE + f"""\
  %pieces : list[f32[B, 4, 16, 16]@cpu] = torch.method(%y, %two, %g) {{method = "chunk", kwnames = ("dim",), alias_of = 0, aten = "aten::chunk"}}
  %y1 : f32[B, 4, 16, 16]@cpu, %y2 : f32[B, 4, 16, 16]@cpu = py.unpack(%pieces)
  %c : f32[B, 4, 16, 16]@cpu = {CONV.format(x="y2").replace("%w,", "%w2,")}
  %out : f32[B, 4, 16, 16]@cpu = py.binary(%c, %y1) {{op = "+"}}
  func.return(%out)
}}
"""


def test_a_shuffle_of_a_cat_is_a_stack_of_nhwc_rows_and_its_halves_stacks_of_the_parts_halves() -> None:
    """Channel `2j + i` of the shuffle is channel `j` of part `i`: in NHWC rows, a stack of the
    parts along a last dim (`_stacking.stack_last`, runtime/stacking.py). Its first half (channels 0 to 3) is channels 0 and 1 of both
    parts interleaved, its second half channels 2 and 3: each half a dense channels-last tensor
    (the conv after reads it without a copy), and the whole shuffle is never made."""
    assert laid_out(UNIT) == SHUFFLE_HEAD + """\
  %0 : memory_format = py.constant() {value = "torch.channels_last"}
  %1 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %0) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %a : f32[B, 4, 16, 16]@cpu = torch.call(%1, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %2 : memory_format = py.constant() {value = "torch.channels_last"}
  %3 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %2) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %b0 : f32[B, 4, 16, 16]@cpu = torch.call(%3, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %4 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %5 : f32[B, 16, 16, 4]@cpu = torch.method(%b0, %4) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %b : f32[B, 16, 16, 4]@cpu = torch.call(%5, %zero) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %6 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %7 : f32[B, 16, 16, 4]@cpu = torch.method(%a, %6) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %8 : int = py.constant() {value = 0}
  %9 : int = torch.method(%a, %8) {method = "size", aten = "aten::size.int"}
  %10 : int = py.constant() {value = 3}
  %11 : int = py.constant() {value = 0}
  %12 : int = py.constant() {value = 2}
  %13 : f32[B, 16, 16, 2]@cpu = torch.method(%7, %10, %11, %12) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %14 : f32[B, 16, 16, 2]@cpu = torch.method(%b, %10, %11, %12) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %15 : tuple[f32[B, 16, 16, 2]@cpu, f32[B, 16, 16, 2]@cpu] = py.tuple(%13, %14)
  %16 : f32[B, 16, 16, 2, 2]@cpu = py.call(%15) {callee = "_stacking.stack_last"}
  %y1 : f32[B, 16, 16, 4]@cpu = torch.method(%16, %10) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}
  %17 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %18 : f32[B, 16, 16, 2]@cpu = torch.method(%7, %10, %12, %12) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %19 : f32[B, 16, 16, 2]@cpu = torch.method(%b, %10, %12, %12) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %20 : tuple[f32[B, 16, 16, 2]@cpu, f32[B, 16, 16, 2]@cpu] = py.tuple(%18, %19)
  %21 : f32[B, 16, 16, 2, 2]@cpu = py.call(%20) {callee = "_stacking.stack_last"}
  %y2 : f32[B, 16, 16, 4]@cpu = torch.method(%21, %10) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}
  %y2_1 : f32[B, 4, 16, 16]@cpu = torch.method(%y2, %17) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %c : f32[B, 4, 16, 16]@cpu = torch.call(%y2_1, %w2, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %22 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %23 : f32[B, 16, 16, 4]@cpu = torch.method(%c, %22) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %out : f32[B, 16, 16, 4]@cpu = py.binary(%23, %y1) {op = "+"}
  %24 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %out_1 : f32[B, 4, 16, 16]@cpu = torch.method(%out, %24) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %25 : f32[B, 4, 16, 16]@cpu = torch.method(%out_1) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  func.return(%25)
}
"""


@pytest.mark.parametrize("merge", [
    '%y : f32[B, 8, 16, 16]@cpu = torch.method(%copy, %g, %two) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}',
    '%y : f32[B, 8, 16, 16]@cpu = torch.method(%copy, %n, %eight, %s, %s) {method = "reshape", alias_of = 0, aten = "aten::reshape"}',
    # no contiguous(): the reshape of the transposed view copies it
    '%y : f32[B, 8, 16, 16]@cpu = torch.method(%swap, %n, %eight, %s, %s) {method = "reshape", alias_of = 0, aten = "aten::reshape"}',
])
def test_other_ways_back_from_the_shuffles_groups_are_the_same_stacks(merge: str) -> None:
    lines = UNIT.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("  %y : "))
    lines[at] = "  " + merge
    if "%swap," in merge:
        lines = [line for line in lines if not line.startswith("  %copy : ")]
    assert laid_out("\n".join(lines)) == laid_out(UNIT)


def test_a_cat_whose_size_is_kept_is_shuffled_in_nhwc_order_without_a_stack() -> None:
    """The cat's `size()` is returned, not only unpacked: a list of ints could not stand for the
    `torch.Size` it is, so the cat stays and its rows are transposed (still channels-last)."""
    kept = UNIT.replace("-> f32[B, 4, 16, 16]@cpu {", "-> tuple[f32[B, 4, 16, 16]@cpu, list[int]] {").replace(
        "  func.return(%out)", """\
  %sizes : list[int] = torch.method(%cat) {method = "size"}
  %both : tuple[f32[B, 4, 16, 16]@cpu, list[int]] = py.tuple(%out, %sizes)
  func.return(%both)""")
    out = laid_out(kept)
    assert "stack" not in out and "{value = (0, 1, 2, 4, 3)}" in out
    assert '%sizes : list[int] = torch.method(%cat) {method = "size"}' in out


def test_a_returned_shuffle_of_a_cat_is_one_stack_made_row_major_for_the_caller() -> None:
    returned = SHUFFLE_HEAD.replace("-> f32[B, 4, 16, 16]@cpu", "-> f32[B, 8, 16, 16]@cpu") + CAT_OF_CONVS + SHUFFLE \
        + "  func.return(%y)\n}\n"
    out = laid_out(returned)
    assert out.count('{callee = "_stacking.stack_last"}') == 1
    assert "f32[B, 16, 16, 4, 2]@cpu = py.call(" in out and "torch.cat" not in out
    assert re.search(r'= torch.method\(%y_1\) \{method = "contiguous", [^\n]*\n  func.return\(%\d+\)\n}\n$', out)


def test_a_shuffle_of_another_channels_last_tensor_transposes_its_nhwc_rows() -> None:
    """Not a cat of `g` equal parts (here one conv's output): the rows seen as `[g, C // g]`,
    transposed, made contiguous: still channels-last, one copy."""
    head = SHUFFLE_HEAD.replace("%w: f32[4, 8, 3, 3]", "%w: f32[8, 8, 3, 3]").replace(
        "-> f32[B, 4, 16, 16]@cpu", "-> f32[B, 8, 16, 16]@cpu")
    out = laid_out(head + f"""\
  %cat : f32[B, 8, 16, 16]@cpu = {CONV.format(x="x")}
""" + SHUFFLE + f"""\
  %c : f32[B, 8, 16, 16]@cpu = {CONV.format(x="y")}
  func.return(%c)
}}
""")
    assert "f32[B, 16, 16, 2, 4]@cpu = torch.method(" in out  # the rows as [g, C // g]
    assert "f32[B, 16, 16, 4, 2]@cpu = torch.method(" in out and "{value = (0, 1, 2, 4, 3)}" in out
    assert out.count('{value = "torch.channels_last"}') == 1  # (the input only: the shuffle stays channels-last)
    assert "%swap" not in out.replace("%swap_dims", "") and "stack" not in out


def test_a_shuffle_whose_strides_are_read_stays_row_major() -> None:
    """Something after the shuffle reads strides: its copy stays row-major as eager's, and the
    rest of the function is still laid out."""
    strided = UNIT.replace("  func.return(%out)", """\
  %st : tuple[int, int, int, int] = torch.method(%y1) {method = "stride"}
  func.return(%out)""")
    out = laid_out(strided)
    assert "stack" not in out and '{method = "contiguous", alias_of = 0, aten = "aten::contiguous"}' in out
    assert "%swap : f32[B, 4, 2, 16, 16]@cpu = torch.method(%split, %swap_dims)" in out
    assert out.count('{value = "torch.channels_last"}') == 3  # (both convs' input, and y2 for the last conv)


# -- compiled nets against eager --------------------------------------------------------------
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(sorted(LAYERS)), st.sampled_from(sorted(STEPS)), st.booleans()),
                      min_size=1, max_size=5),
       seed=st.integers(0, 2**16))
def test_compiled_conv_nets_match_eager_in_values_and_layout(steps, seed, tmp_path, monkeypatch) -> None:
    from transpiler import script

    cache = Path(tempfile.mkdtemp(dir=tmp_path))  # (one per example: the test reads its module)
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    c = 8
    with imported_source(cache, "net", net_source(steps, c)) as mod:
        torch.manual_seed(seed)
        net = mod.Net().eval()
        for m in net.modules():  # batch norm statistics that are not the identity
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
        x = torch.randn(2, c, 16, 16)
        with torch.no_grad():
            compiled = script(net, example_inputs=(x,))
            text = next((cache / "jit").glob("*.py")).read_text()
            convs = sum(1 if layer in ("conv", "pointwise", "depthwise", "grouped") else 2 if layer == "expand" else 0
                        for layer, _, _ in steps)
            if all(step != "squeeze" for _, step, _ in steps):  # (a squeeze's convs see 1x1 images, judged apart)
                assert ("memory_format=torch.channels_last" in text) == (convs >= 2)  # (a lone conv: not worth it)
            for batch in (2, 3):
                x = torch.randn(batch, c, 16, 16)
                with runtime.mode("strict"):
                    got = compiled(x)
                expected = net(x)
                assert_close_to_eager(got, expected)
                for g, e in zip(got, expected):
                    assert g.is_contiguous() or not e.is_contiguous()  # row-major where eager's is


@contextlib.contextmanager
def _compiled_net(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[tuple[str, str, bool]],
                  batch: int) -> Iterator[tuple[torch.nn.Module, Any, str]]:
    """The net of `steps` (8 channels, seeded), compiled for a batch of `batch` 16x16 images:
    (the net, the compiled net, the generated module's text), under no_grad."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "net_" + tmp_path.name, net_source(steps, 8)) as mod:
        torch.manual_seed(0)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(batch, 8, 16, 16),))
            yield net, compiled, next((tmp_path / "cache" / "jit").glob("*.py")).read_text()


@pytest.mark.parametrize("batch", [1, 2])
def test_shufflenet_units_compile_to_stacks_of_nhwc_rows_and_match_eager(tmp_path, monkeypatch, batch) -> None:
    """Channel shuffles of cats and of a conv's output, halves of shuffles into convs (a
    `linear` of one image, a depthwise conv): no shuffle is made row-major, and what the net
    returns is row-major as eager's."""
    steps = [("conv", "shuffle", True), ("pointwise", "unit", False), ("depthwise", "unit", False),
             ("bn", "shuffle4", False), ("conv", "unit", True)]
    with _compiled_net(tmp_path, monkeypatch, steps, batch) as (net, compiled, text):
        forward = text[text.index("def Net_forward(self"):]
        assert forward.count("_stacking.stack_last(") == 5 and "(0, 2, 1, 3, 4)" not in forward
        for b in {batch, 2 * batch + 1} if batch > 1 else {1}:
            x = torch.randn(b, 8, 16, 16)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x))
            assert all(g.is_contiguous() for g in got)


@pytest.mark.parametrize("batch", [1, 2])
def test_a_squeeze_and_excitation_pools_nhwc_rows_with_mean(tmp_path, monkeypatch, batch) -> None:
    """The 1x1 pools of channels-last values are means of their NHWC rows over H and W, and the
    1x1 convs on them (a `linear` of one image) read those means as they are: no permute left
    around the pools of the gates; values and the returned layout as eager's."""
    steps = [("conv", "layer", True), ("pointwise", "squeeze", True), ("expand", "squeeze", False),
             ("bn", "gate", False), ("conv", "layer", False)]
    with _compiled_net(tmp_path, monkeypatch, steps, batch) as (net, compiled, text):
        code = [line for line in text[text.index("def Net_forward(self"):].splitlines()
                if not line.lstrip().startswith(("#", "//"))]
        # (the last pool is of the last conv's output, which has no NHWC rows: it stays a pool)
        assert sum(line.count("torch.mean(") for line in code) == 3
        assert sum(line.count("adaptive_avg_pool2d") for line in code) == 1
        for b in {batch, 3} if batch > 1 else {1}:
            x = torch.randn(b, 8, 16, 16)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x))
            assert all(g.is_contiguous() for g in got)


SHUFFLE_NET = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d({c}, {c}, 3, padding=1)
        self.b = nn.Conv2d({c}, {c}, 1)

    def forward(self, x):
        {parts} = self.a(x).split({part_sizes}, dim=1)
        y = torch.cat([{changed_parts}], 1)
        n, c, h, w = y.size()
        y = {shuffle}
        {pieces} = y.split({piece_sizes}, dim=1)
        return self.b(torch.cat([{changed_pieces}], 1))
"""


SHUFFLE_FORMS = {  # ways to write a channel shuffle of y in `g` groups
    "view": "y.view(n, {g}, c // {g}, h, w).transpose(1, 2).contiguous().view(n, c, h, w)",
    "flatten": "y.view(n, {g}, c // {g}, h, w).transpose(1, 2).contiguous().flatten(1, 2)",
    "reshape": "y.reshape(n, {g}, c // {g}, h, w).transpose(1, 2).reshape(n, -1, h, w)",
    "permute": "y.view(n, {g}, -1, h, w).permute(0, 2, 1, 3, 4).contiguous().view(n, -1, h, w)",
}


def _shuffle_net(c: int, groups: int, part_sizes: list[int], piece_sizes: list[int], form: str = "view") -> str:
    parts = [f"p{i}" for i in range(len(part_sizes))]
    pieces = [f"q{i}" for i in range(len(piece_sizes))]
    return SHUFFLE_NET.format(
        c=c, part_sizes=part_sizes, piece_sizes=piece_sizes, shuffle=SHUFFLE_FORMS[form].format(g=groups),
        parts=", ".join(parts) + ("," if len(parts) == 1 else ""),
        pieces=", ".join(pieces) + ("," if len(pieces) == 1 else ""),
        changed_parts=", ".join(f"torch.relu({p})" if i % 2 else f"{p} * 0.5" for i, p in enumerate(parts)),
        changed_pieces=", ".join(f"torch.tanh({q})" if i % 2 else q for i, q in enumerate(pieces)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.integers(2, 4), each=st.integers(1, 4), equal=st.booleans(),
       cuts=st.lists(st.integers(1, 15), max_size=3), batch=st.sampled_from([1, 2]), seed=st.integers(0, 2**16),
       form=st.sampled_from(sorted(SHUFFLE_FORMS)))
def test_compiled_shuffles_of_any_parts_and_pieces_match_eager(groups, each, equal, cuts, batch, seed, form, tmp_path,
                                                                monkeypatch) -> None:
    """A shuffle (written in any of `SHUFFLE_FORMS`) of `g` groups of a cat (of `g` equal parts,
    or of parts of other sizes: then not a stack of them), split into pieces that do or do not
    divide every part evenly."""
    from transpiler import script

    c = groups * each
    part_sizes = [each] * groups if equal else [c - 1, 1] if c > 2 else [c]
    piece_sizes = sorted({0, c, *(k % c for k in cuts)})
    piece_sizes = [b - a for a, b in zip(piece_sizes, piece_sizes[1:])]
    cache = Path(tempfile.mkdtemp(dir=tmp_path))
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    with imported_source(cache, "shuffle_net", _shuffle_net(c, groups, part_sizes, piece_sizes, form)) as mod:
        torch.manual_seed(seed)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(batch, c, 14, 14),))  # (channels-last from 14x14)
            x = torch.randn(batch, c, 14, 14)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x))
            assert got.is_contiguous()
            text = next((cache / "jit").glob("*.py")).read_text()
            assert ("_stacking.stack_last(" in text) == (equal and len(part_sizes) == groups)


def test_a_channels_last_input_gives_what_eager_gives(tmp_path, monkeypatch) -> None:
    steps = [("conv", "residual", True), ("bn", "layer", False), ("depthwise", "layer", False)]
    with _compiled_net(tmp_path, monkeypatch, steps, 2) as (net, compiled, text):
        assert "memory_format=torch.channels_last" in text and ".permute(0, 2, 3, 1)" in text
        x = torch.randn(2, 8, 16, 16).contiguous(memory_format=torch.channels_last)
        with runtime.mode("strict"):
            got = compiled(x)
        assert_close_to_eager(got, net(x))


def _rows_and_once(text: str) -> tuple[str, str]:
    """The C++ of the first kernel in a generated module: its rows (the loop nest, the lambda
    `ts_rows_of` runs) and what runs once per call before them."""
    kernel = text[text.index('extern "C" void'):]
    kernel = kernel[:kernel.index("\n}\n")]
    return kernel[kernel.index("ts_rows_of("):], kernel[:kernel.index("ts_rows_of(")]


def test_a_per_channel_scale_is_computed_once_per_call_in_channels_last_kernels(tmp_path, monkeypatch) -> None:
    """Batch norm after a channels-last conv: the channel is the kernel's row, and 1/sqrt(var +
    eps) is the same in every row, so the C++ kernel computes it once per call into a row of its
    own (`std::unique_ptr<float[]> r3`, before the rows run), not per element. Values as eager's, at batch 1 and 3."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = net_source([("depthwise", "layer", False), ("bn", "layer", False), ("depthwise", "layer", False)], 8)
    with imported_source(tmp_path, "net_rows", source) as mod:
        torch.manual_seed(0)
        net = mod.Net().eval()
        for m in net.modules():  # (statistics other than the initial ones)
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.uniform_(0.5, 2.0)
                m.running_mean.uniform_(-1.0, 1.0)
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 8, 16, 16),))
            text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
            rows, once = _rows_and_once(text)
            assert "std::unique_ptr<float[]> r" in once and once.count("std::sqrt") == 1, once
            assert "std::sqrt" not in rows, rows
            for batch in (1, 3):
                x = torch.randn(batch, 8, 16, 16)
                with runtime.mode("strict"):
                    got = compiled(x)
                assert_close_to_eager(got, net(x))


def test_row_buffers_hold_only_what_every_row_shares(tmp_path, monkeypatch) -> None:
    """`sqrt(r + 1)` and `tanh(r)` of a row-only input go into row buffers; `where(m > 0, ...)`
    also reads `m`, which changes from row to row, so it stays in the loop (it once went into
    the buffer loop, where `m > 0` is not computed: the C++ did not build)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = '''
        import torch


        def f(x: torch.Tensor, r: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            return x * torch.sqrt(r + 1.0) + torch.where(m > 0, torch.tanh(r), -0.5)
        '''
    with imported_source(tmp_path, "rows_shared", source) as mod:
        x, r, m = torch.randn(4, 8), torch.rand(8), torch.randn(4, 1)
        compiled = script(mod.f, example_inputs=(x, r, m))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        assert text.count("std::unique_ptr<float[]> r") == 2, text
        for batch in (1, 5):
            x, m = torch.randn(batch, 8), torch.randn(batch, 1)
            with runtime.mode("strict"):
                got = compiled(x, r, m)
            assert_close_to_eager(got, mod.f(x, r, m))


def test_a_row_buffer_of_booleans(tmp_path, monkeypatch) -> None:
    """`r != m / s` of row-only inputs is a bool row buffer (once a std::vector<bool>, which has
    no data() to pass to the rows function: the C++ did not build; found by test_programs)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = '''
        import torch


        def f(x: torch.Tensor, r: torch.Tensor, m: torch.Tensor, s: float) -> torch.Tensor:
            return torch.where(r != m / s, x, -x)
        '''
    with imported_source(tmp_path, "rows_bool", source) as mod:
        x, r, m = torch.randn(4, 8), torch.randn(8), torch.randn(8)
        r[::2] = m[::2] / 2.0
        compiled = script(mod.f, example_inputs=(x, r, m, 2.0))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        assert "std::unique_ptr<bool[]> r" in text, text
        with runtime.mode("strict"):
            got = compiled(x, r, m, 2.0)
        assert_close_to_eager(got, mod.f(x, r, m, 2.0))


@pytest.mark.parametrize("gate_shape", [(1, 1, 1, 5), (3, 1, 1, 5), (3, 1, 4, 5), (1, 6, 1, 5)])
def test_a_gate_per_image_and_channel_is_computed_once_per_call(gate_shape, tmp_path, monkeypatch) -> None:
    """A squeeze-and-excitation gate on channels-last values, `x * sigmoid(s)` with `s` of
    `[B, 1, 1, C]`: `sigmoid(s)` goes into rows (one per image, `r[i0 * n3 + j]`) computed before
    the loop nest, not per element; likewise for `s` broadcast along other dims. Values as
    eager's, with inputs of other strides too."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = '''
        import torch


        def f(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(s) + torch.exp(s) * 0.5
        '''
    with imported_source(tmp_path, "gate_rows", source) as mod:
        x, s = torch.randn(3, 6, 4, 5), torch.randn(gate_shape)
        compiled = script(mod.f, example_inputs=(x, s))
        text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
        rows, once = _rows_and_once(text)
        assert once.count("ts_exp") == 2 and "ts_exp" not in rows, once + rows
        for x in (torch.randn(3, 6, 4, 5), torch.randn(3, 5, 4, 6).transpose(1, 3)):
            for gate in (s, s.transpose(0, 2).contiguous().transpose(0, 2)):
                with runtime.mode("strict"):
                    got = compiled(x, gate)
                assert_close_to_eager(got, mod.f(x, gate))


def test_a_net_of_one_image_computes_its_1x1_convs_as_linear(tmp_path, monkeypatch) -> None:
    """A batch of one stays 1 in the compiled code (not the batch symbol), so the projection
    (24 to 8 channels) runs as linear too; values and the returned layout as eager's."""
    steps = [("expand", "residual", True), ("bn", "layer", False), ("depthwise", "layer", False), ("hardswish", "layer", False)]
    with _compiled_net(tmp_path, monkeypatch, steps, 1) as (net, compiled, text):
        assert text.count("F.linear(") == 2 and "F.conv2d(" in text  # (the depthwise conv stays one)
        x = torch.randn(1, 8, 16, 16)
        with runtime.mode("strict"):
            got = compiled(x)
        assert_close_to_eager(got, net(x))
        assert all(g.is_contiguous() for g in got)


LINEAR_OVER_CHANNELS = """\
func @f(%x: f32[B, 8, 16, 16]@cpu, %w: f32[8, 1, 3, 3]@cpu, %lw: f32[8, 8]@cpu, %scale: f32[8, 1, 1]@cpu) -> f32[B, 8, 16, 16]@cpu {
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %g : int = py.constant() {value = 8}
  %to_nhwc : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %to_nchw : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %0 : f32[B, 8, 16, 16]@cpu = torch.call(%x, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %1 : f32[B, 16, 16, 8]@cpu = torch.method(%0, %to_nhwc) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %2 : f32[B, 16, 16, 8]@cpu = torch.call(%1, %lw) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %3 : f32[B, 8, 16, 16]@cpu = torch.method(%2, %to_nchw) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %4 : f32[B, 8, 16, 16]@cpu = py.binary(%scale, %3) {op = "*"}
  %5 : f32[B, 8, 16, 16]@cpu = py.binary(%4, %0) {op = "+"}
  %6 : f32[B, 8, 16, 16]@cpu = torch.call(%5, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  func.return(%6)
}
"""


def test_a_linear_over_channels_permuted_to_nchw_is_channels_last() -> None:
    """convnext's block: linear layers on NHWC rows, `.permute(0, 3, 1, 2)`, then a layer scale
    and the residual add. The permuted linear is channels-last, so the pointwise ops on it
    compute in NHWC order (reading the linear's result as it is) and the next conv takes their
    result without a copy; before, the kernel wrote NCHW and the conv copied it back."""
    head = LINEAR_OVER_CHANNELS[:LINEAR_OVER_CHANNELS.index("  %0 :")].replace(
        "  %to_nchw : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}\n", "")  # (its permute is gone)
    assert laid_out(LINEAR_OVER_CHANNELS) == head + """\
  %0 : memory_format = py.constant() {value = "torch.channels_last"}
  %1 : f32[B, 8, 16, 16]@cpu = torch.method(%x, %0) {method = "contiguous", kwnames = ("memory_format",), alias_of = 0, aten = "aten::contiguous"}
  %2 : f32[B, 8, 16, 16]@cpu = torch.call(%1, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %3 : f32[B, 16, 16, 8]@cpu = torch.method(%2, %to_nhwc) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %4 : f32[B, 16, 16, 8]@cpu = torch.call(%3, %lw) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %5 : tuple[int] = py.constant() {value = (8,)}
  %6 : f32[8]@cpu = torch.method(%scale, %5) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %7 : f32[B, 16, 16, 8]@cpu = py.binary(%6, %4) {op = "*"}
  %8 : tuple[int, int, int, int] = py.constant() {value = (0, 2, 3, 1)}
  %9 : f32[B, 16, 16, 8]@cpu = torch.method(%2, %8) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %10 : f32[B, 16, 16, 8]@cpu = py.binary(%7, %9) {op = "+"}
  %11 : tuple[int, int, int, int] = py.constant() {value = (0, 3, 1, 2)}
  %12 : f32[B, 8, 16, 16]@cpu = torch.method(%10, %11) {method = "permute", alias_of = 0, aten = "aten::permute"}
  %13 : f32[B, 8, 16, 16]@cpu = torch.call(%12, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %14 : f32[B, 8, 16, 16]@cpu = torch.method(%13) {method = "contiguous", alias_of = 0, aten = "aten::contiguous"}
  func.return(%14)
}
"""


def test_a_net_with_linear_layers_over_channels(tmp_path, monkeypatch) -> None:
    """convnext's pattern compiled: the layer-scaled linear block and the residual add run in
    NHWC order, so only the net's input is copied to channels-last; values as eager's."""
    steps = [("depthwise", "layer", True), ("over_channels", "residual", False), ("depthwise", "layer", False)]
    with _compiled_net(tmp_path, monkeypatch, steps, 2) as (net, compiled, text):
        assert text.count("memory_format=torch.channels_last") == 1, text
        for batch in (2, 3):
            x = torch.randn(batch, 8, 16, 16)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x))


def test_a_1x1_conv_with_keyword_arguments_is_a_linear_with_its_bias() -> None:
    """`F.conv2d(x, w, bias=b, padding="valid")`: the arguments are read by name."""
    text = POINTWISE_CONV.format(c_out=32, stride=(1, 1), groups=1).replace(
        "%w2: f32[8, 32, 3, 3]@cpu)", "%w2: f32[8, 32, 3, 3]@cpu, %b: f32[32]@cpu)").replace(
        'torch.call(%x, %w, %none, %stride, %zero, %one, %g) {callee = "torch.nn.functional.conv2d"}',
        '%valid : str = py.constant() {value = "valid"}\n  %0 : f32[B, 32, 16, 16]@cpu = '
        'torch.call(%x, %w, %b, %valid) {callee = "torch.nn.functional.conv2d", kwnames = ("bias", "padding")}', 1)
    text = text.replace("  %0 : f32[B, 32, 16, 16]@cpu = %valid", "  %valid").replace("[B, ", "[1, ")
    out = laid_out(text)
    # (the bias add apart, as decompose splits linear's: fuse puts it into the kernel after, or back)
    assert 'f32[1, 16, 16, 32]@cpu = torch.call(%3, %5) {callee = "torch.nn.functional.linear"' in out, out
    assert "f32[1, 16, 16, 32]@cpu = py.binary(%6, %b) {op = \"+\"}" in out, out

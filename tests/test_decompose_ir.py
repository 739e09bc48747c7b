"""Decomposition (ir/passes/decompose.py), IR in and IR out: every rule on typed input (symbolic
sizes, float16 inputs computing in float32, negative dims normalized, sizes read at run time),
and the calls that stay as they are because a fact is missing or eager would behave otherwise.
The numeric checks against eager are in tests/test_decompose.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core.parser import parse_program  # noqa: E402
import ir.passes.decompose as decompose_pass  # noqa: E402
from ir.passes.decompose import RULES, decompose  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.verifier import verify  # noqa: E402


decompose_pass.DEBUG = True  # a rule that raises is a bug, not "left as is"


def run(text: str) -> str:
    program = parse_program(text)
    verify(program)
    decompose(program)
    verify(program)
    out = print_program(program)
    assert print_program(parse_program(out)) == out
    again = parse_program(out)
    decompose(again)
    assert print_program(again) == out, "decompose is not idempotent"
    return out




# -- IR text: one composite in, its primitives out ------------------------------------------
# Inputs as lowering and shape propagation type them; the constants the call no longer uses stay
# for dead-code elimination. (Generated once from source, then checked by hand.)
TEXT_CASES: dict[str, tuple[str, str]] = {
    "softmax": (
        """\
func @f(%x: f16[B, T, 8]) -> f16[B, T, 8] {
  %0 : int = py.constant() {value = -1}
  %1 : f16[B, T, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.softmax", kwnames = ("dim",), aten = "aten::softmax.int"}
  func.return(%1)
}
""",
        """\
func @f(%x: f16[B, T, 8]) -> f16[B, T, 8] {
  %0 : int = py.constant() {value = -1}
  %1 : dtype = py.constant() {value = "torch.float32"}
  %2 : f32[B, T, 8] = torch.method(%x, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %3 : int = py.constant() {value = 2}
  %4 : bool = py.constant() {value = True}
  %5 : f32[B, T, 1] = torch.call(%2, %3, %4) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %6 : f32[B, T, 8] = py.binary(%2, %5) {op = "-"}
  %7 : float = py.constant() {value = -87.0}
  %8 : f32[B, T, 8] = torch.call(%6, %7) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %9 : f32[B, T, 8] = torch.call(%8) {callee = "torch.exp", aten = "aten::exp"}
  %10 : bool[B, T, 8] = py.compare(%6, %7) {op = "<"}
  %11 : float = py.constant() {value = 0.0}
  %12 : f32[B, T, 8] = torch.call(%10, %11, %9) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  %13 : f32[B, T, 1] = torch.call(%12, %3, %4) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %14 : f32[B, T, 8] = py.binary(%12, %13) {op = "/"}
  %15 : dtype = py.constant() {value = "torch.float16"}
  %16 : f16[B, T, 8] = torch.method(%14, %15) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%16)
}
""",
    ),
    "special_softmax": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.special.softmax", aten = "aten::special_softmax"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 0}
  %2 : bool = py.constant() {value = True}
  %3 : f32[1, 8] = torch.call(%x, %1, %2) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %4 : f32[B, 8] = py.binary(%x, %3) {op = "-"}
  %5 : float = py.constant() {value = -87.0}
  %6 : f32[B, 8] = torch.call(%4, %5) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %7 : f32[B, 8] = torch.call(%6) {callee = "torch.exp", aten = "aten::exp"}
  %8 : bool[B, 8] = py.compare(%4, %5) {op = "<"}
  %9 : float = py.constant() {value = 0.0}
  %10 : f32[B, 8] = torch.call(%8, %9, %7) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  %11 : f32[1, 8] = torch.call(%10, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %12 : f32[B, 8] = py.binary(%10, %11) {op = "/"}
  func.return(%12)
}
""",
    ),
    "log_softmax": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, T, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.log_softmax", aten = "aten::log_softmax.int"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 1, 8] = torch.call(%x, %1, %2) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %4 : f32[B, T, 8] = py.binary(%x, %3) {op = "-"}
  %5 : f32[B, T, 8] = torch.call(%4) {callee = "torch.exp", aten = "aten::exp"}
  %6 : f32[B, 1, 8] = torch.call(%5, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %7 : f32[B, 1, 8] = torch.call(%6) {callee = "torch.log", aten = "aten::log"}
  %8 : f32[B, T, 8] = py.binary(%4, %7) {op = "-"}
  func.return(%8)
}
""",
    ),
    "special_log_softmax": (
        """\
func @f(%x: f64[B, 8]) -> f64[B, 8] {
  %0 : int = py.constant() {value = -1}
  %1 : f64[B, 8] = torch.call(%x, %0) {callee = "torch.special.log_softmax", aten = "aten::special_log_softmax"}
  func.return(%1)
}
""",
        """\
func @f(%x: f64[B, 8]) -> f64[B, 8] {
  %0 : int = py.constant() {value = -1}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.constant() {value = True}
  %3 : f64[B, 1] = torch.call(%x, %1, %2) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %4 : f64[B, 8] = py.binary(%x, %3) {op = "-"}
  %5 : f64[B, 8] = torch.call(%4) {callee = "torch.exp", aten = "aten::exp"}
  %6 : f64[B, 1] = torch.call(%5, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %7 : f64[B, 1] = torch.call(%6) {callee = "torch.log", aten = "aten::log"}
  %8 : f64[B, 8] = py.binary(%4, %7) {op = "-"}
  func.return(%8)
}
""",
    ),
    "softmin": (
        """\
func @f(%x: f32[B, 8]) -> f64[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : dtype = py.constant() {value = "torch.float64"}
  %2 : f64[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.softmin", kwnames = ("dtype",)}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f64[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : dtype = py.constant() {value = "torch.float64"}
  %2 : f32[B, 8] = py.unary(%x) {op = "-"}
  %3 : dtype = py.constant() {value = "torch.float64"}
  %4 : f64[B, 8] = torch.method(%2, %3) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %5 : int = py.constant() {value = 0}
  %6 : bool = py.constant() {value = True}
  %7 : f64[1, 8] = torch.call(%4, %5, %6) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %8 : f64[B, 8] = py.binary(%4, %7) {op = "-"}
  %9 : float = py.constant() {value = -708.0}
  %10 : f64[B, 8] = torch.call(%8, %9) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %11 : f64[B, 8] = torch.call(%10) {callee = "torch.exp", aten = "aten::exp"}
  %12 : bool[B, 8] = py.compare(%8, %9) {op = "<"}
  %13 : float = py.constant() {value = 0.0}
  %14 : f64[B, 8] = torch.call(%12, %13, %11) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  %15 : f64[1, 8] = torch.call(%14, %5, %6) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %16 : f64[B, 8] = py.binary(%14, %15) {op = "/"}
  func.return(%16)
}
""",
    ),
    "layer_norm": (
        """\
func @f(%x: f32[B, T, C], %w: f32[C], %b: f32[C]) -> f32[B, T, C] {
  %0 : list[int] = py.getattr(%x) {attr = "shape"}
  %1 : int = py.constant() {value = -1}
  %2 : int = py.getitem(%0, %1)
  %3 : tuple[int] = py.tuple(%2)
  %4 : float = py.constant() {value = 1e-05}
  %5 : f32[B, T, C] = torch.call(%x, %3, %w, %b, %4) {callee = "torch.nn.functional.layer_norm", aten = "aten::layer_norm"}
  func.return(%5)
}
""",
        """\
func @f(%x: f32[B, T, C], %w: f32[C], %b: f32[C]) -> f32[B, T, C] {
  %0 : list[int] = py.getattr(%x) {attr = "shape"}
  %1 : int = py.constant() {value = -1}
  %2 : int = py.getitem(%0, %1)
  %3 : tuple[int] = py.tuple(%2)
  %4 : float = py.constant() {value = 1e-05}
  %5 : int = py.constant() {value = 2}
  %6 : bool = py.constant() {value = True}
  %7 : f32[B, T, 1] = torch.call(%x, %5, %6) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %8 : int = torch.method(%x, %5) {method = "size", aten = "aten::size.int"}
  %9 : f32[B, T, 1] = py.binary(%7, %8) {op = "/"}
  %10 : f32[B, T, C] = py.binary(%x, %9) {op = "-"}
  %11 : f32[B, T, 1] = torch.call(%10, %5, %6) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %12 : f32[B, T, 1] = py.binary(%11, %8) {op = "/"}
  %13 : f32[B, T, 1] = py.binary(%9, %12) {op = "+"}
  %14 : f32[B, T, C] = py.binary(%x, %13) {op = "-"}
  %15 : f32[B, T, C] = py.binary(%14, %14) {op = "*"}
  %16 : f32[B, T, 1] = torch.call(%15, %5, %6) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %17 : f32[B, T, 1] = py.binary(%16, %8) {op = "/"}
  %18 : float = py.constant() {value = 1e-05}
  %19 : f32[B, T, 1] = py.binary(%17, %18) {op = "+"}
  %20 : f32[B, T, 1] = torch.call(%19) {callee = "torch.rsqrt", aten = "aten::rsqrt"}
  %21 : f32[B, T, C] = py.binary(%14, %20) {op = "*"}
  %22 : f32[B, T, C] = py.binary(%21, %w) {op = "*"}
  %23 : f32[B, T, C] = py.binary(%22, %b) {op = "+"}
  func.return(%23)
}
""",
    ),
    "rms_norm": (
        """\
func @f(%x: f16[B, 4, 8], %w: f16[4, 8]) -> f16[B, 4, 8] {
  %0 : tuple[int, int] = py.constant() {value = (4, 8)}
  %1 : f16[B, 4, 8] = torch.call(%x, %0, %w) {callee = "torch.nn.functional.rms_norm", aten = "aten::rms_norm"}
  func.return(%1)
}
""",
        """\
func @f(%x: f16[B, 4, 8], %w: f16[4, 8]) -> f16[B, 4, 8] {
  %0 : tuple[int, int] = py.constant() {value = (4, 8)}
  %1 : dtype = py.constant() {value = "torch.float32"}
  %2 : f32[B, 4, 8] = torch.method(%x, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %3 : f32[B, 4, 8] = py.binary(%2, %2) {op = "*"}
  %4 : tuple[int, int] = py.constant() {value = (1, 2)}
  %5 : bool = py.constant() {value = True}
  %6 : f32[B, 1, 1] = torch.call(%3, %4, %5) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %7 : int = py.constant() {value = 32}
  %8 : f32[B, 1, 1] = py.binary(%6, %7) {op = "/"}
  %9 : float = py.constant() {value = 1.1920928955078125e-07}
  %10 : f32[B, 1, 1] = py.binary(%8, %9) {op = "+"}
  %11 : f32[B, 1, 1] = torch.call(%10) {callee = "torch.rsqrt", aten = "aten::rsqrt"}
  %12 : f32[B, 4, 8] = py.binary(%2, %11) {op = "*"}
  %13 : f32[B, 4, 8] = py.binary(%12, %w) {op = "*"}
  %14 : dtype = py.constant() {value = "torch.float16"}
  %15 : f16[B, 4, 8] = torch.method(%13, %14) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%15)
}
""",
    ),
    "group_norm": (
        """\
func @f(%x: f32[B, 6, H, W], %w: f32[6]) -> f32[B, 6, H, W] {
  %0 : int = py.constant() {value = 2}
  %1 : f32[B, 6, H, W] = torch.call(%x, %0, %w) {callee = "torch.nn.functional.group_norm", aten = "aten::group_norm"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 6, H, W], %w: f32[6]) -> f32[B, 6, H, W] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 2}
  %2 : int = torch.method(%x, %1) {method = "size", aten = "aten::size.int"}
  %3 : int = py.constant() {value = 3}
  %4 : int = torch.method(%x, %3) {method = "size", aten = "aten::size.int"}
  %5 : int = py.binary(%2, %4) {op = "*"}
  %6 : int = py.binary(%5, %3) {op = "*"}
  %7 : int = py.constant() {value = 0}
  %8 : int = torch.method(%x, %7) {method = "size", aten = "aten::size.int"}
  %9 : tuple[int, int, int] = py.tuple(%8, %1, %6)
  %10 : f32[B, 2, 3*H*W] = torch.method(%x, %9) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %11 : bool = py.constant() {value = True}
  %12 : f32[B, 2, 1] = torch.call(%10, %1, %11) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %13 : int = torch.method(%10, %1) {method = "size", aten = "aten::size.int"}
  %14 : f32[B, 2, 1] = py.binary(%12, %13) {op = "/"}
  %15 : f32[B, 2, 3*H*W] = py.binary(%10, %14) {op = "-"}
  %16 : f32[B, 2, 3*H*W] = py.binary(%15, %15) {op = "*"}
  %17 : f32[B, 2, 1] = torch.call(%16, %1, %11) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %18 : f32[B, 2, 1] = py.binary(%17, %13) {op = "/"}
  %19 : float = py.constant() {value = 1e-05}
  %20 : f32[B, 2, 1] = py.binary(%18, %19) {op = "+"}
  %21 : f32[B, 2, 1] = torch.call(%20) {callee = "torch.rsqrt", aten = "aten::rsqrt"}
  %22 : f32[B, 2, 3*H*W] = py.binary(%15, %21) {op = "*"}
  %23 : int = py.constant() {value = 6}
  %24 : tuple[int, int, int, int] = py.tuple(%8, %23, %2, %4)
  %25 : f32[B, 6, H, W] = torch.method(%22, %24) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %26 : tuple[int, int, int] = py.constant() {value = (6, 1, 1)}
  %27 : f32[6, 1, 1] = torch.method(%w, %26) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %28 : f32[B, 6, H, W] = py.binary(%25, %27) {op = "*"}
  func.return(%28)
}
""",
    ),
    "instance_norm": (
        """\
func @f(%x: f32[B, 6, 5], %w: f32[6]) -> f32[B, 6, 5] {
  %0 : float = py.constant() {value = 0.001}
  %1 : f32[B, 6, 5] = torch.call(%x, %w, %0) {callee = "torch.nn.functional.instance_norm", kwnames = ("weight", "eps"), aten = "aten::instance_norm"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 6, 5], %w: f32[6]) -> f32[B, 6, 5] {
  %0 : float = py.constant() {value = 0.001}
  %1 : int = py.constant() {value = 2}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 6, 1] = torch.call(%x, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %4 : int = py.constant() {value = 5}
  %5 : f32[B, 6, 1] = py.binary(%3, %4) {op = "/"}
  %6 : f32[B, 6, 5] = py.binary(%x, %5) {op = "-"}
  %7 : f32[B, 6, 5] = py.binary(%6, %6) {op = "*"}
  %8 : f32[B, 6, 1] = torch.call(%7, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %9 : f32[B, 6, 1] = py.binary(%8, %4) {op = "/"}
  %10 : float = py.constant() {value = 0.001}
  %11 : f32[B, 6, 1] = py.binary(%9, %10) {op = "+"}
  %12 : f32[B, 6, 1] = torch.call(%11) {callee = "torch.rsqrt", aten = "aten::rsqrt"}
  %13 : f32[B, 6, 5] = py.binary(%6, %12) {op = "*"}
  %14 : tuple[int, int] = py.constant() {value = (6, 1)}
  %15 : f32[6, 1] = torch.method(%w, %14) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %16 : f32[B, 6, 5] = py.binary(%13, %15) {op = "*"}
  func.return(%16)
}
""",
    ),
    "batch_norm": (
        """\
func @f(%x: f16[B, 3, H, W], %m: f32[3], %v: f32[3], %w: f32[3], %b: f32[3]) -> f16[B, 3, H, W] {
  %0 : bool = py.constant() {value = False}
  %1 : float = py.constant() {value = 0.1}
  %2 : float = py.constant() {value = 1e-05}
  %3 : f16[B, 3, H, W] = torch.call(%x, %m, %v, %w, %b, %0, %1, %2) {callee = "torch.nn.functional.batch_norm", aten = "aten::batch_norm"}
  func.return(%3)
}
""",
        """\
func @f(%x: f16[B, 3, H, W], %m: f32[3], %v: f32[3], %w: f32[3], %b: f32[3]) -> f16[B, 3, H, W] {
  %0 : bool = py.constant() {value = False}
  %1 : float = py.constant() {value = 0.1}
  %2 : float = py.constant() {value = 1e-05}
  %3 : dtype = py.constant() {value = "torch.float32"}
  %4 : f32[B, 3, H, W] = torch.method(%x, %3) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %5 : float = py.constant() {value = 1e-05}
  %6 : f32[3] = py.binary(%v, %5) {op = "+"}
  %7 : f32[3] = torch.call(%6) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %8 : f32[3] = torch.call(%7) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  %9 : f32[3] = py.binary(%8, %w) {op = "*"}
  %10 : f32[3] = py.binary(%m, %9) {op = "*"}
  %11 : f32[3] = py.binary(%b, %10) {op = "-"}
  %12 : tuple[int, int, int] = py.constant() {value = (3, 1, 1)}
  %13 : f32[3, 1, 1] = torch.method(%9, %12) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %14 : f32[B, 3, H, W] = py.binary(%4, %13) {op = "*"}
  %15 : f32[3, 1, 1] = torch.method(%11, %12) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %16 : f32[B, 3, H, W] = py.binary(%14, %15) {op = "+"}
  %17 : dtype = py.constant() {value = "torch.float16"}
  %18 : f16[B, 3, H, W] = torch.method(%16, %17) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%18)
}
""",
    ),
    "gelu": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.gelu", aten = "aten::gelu"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.7071067811865476}
  %1 : f32[B, 8] = py.binary(%x, %0) {op = "*"}
  %2 : f32[B, 8] = torch.call(%1) {callee = "torch.erf", aten = "aten::erf"}
  %3 : float = py.constant() {value = 0.5}
  %4 : f32[B, 8] = py.binary(%x, %3) {op = "*"}
  %5 : int = py.constant() {value = 1}
  %6 : f32[B, 8] = py.binary(%5, %2) {op = "+"}
  %7 : f32[B, 8] = py.binary(%4, %6) {op = "*"}
  func.return(%7)
}
""",
    ),
    "gelu_tanh": (
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : str = py.constant() {value = "tanh"}
  %1 : f16[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.gelu", kwnames = ("approximate",), aten = "aten::gelu"}
  func.return(%1)
}
""",
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : str = py.constant() {value = "tanh"}
  %1 : dtype = py.constant() {value = "torch.float32"}
  %2 : f32[B, 8] = torch.method(%x, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %3 : f32[B, 8] = py.binary(%2, %2) {op = "*"}
  %4 : f32[B, 8] = py.binary(%3, %2) {op = "*"}
  %5 : float = py.constant() {value = 0.044715}
  %6 : f32[B, 8] = py.binary(%5, %4) {op = "*"}
  %7 : f32[B, 8] = py.binary(%2, %6) {op = "+"}
  %8 : float = py.constant() {value = 0.7978845608028654}
  %9 : f32[B, 8] = py.binary(%8, %7) {op = "*"}
  %10 : f32[B, 8] = torch.call(%9) {callee = "torch.tanh", aten = "aten::tanh"}
  %11 : float = py.constant() {value = 0.5}
  %12 : f32[B, 8] = py.binary(%11, %2) {op = "*"}
  %13 : int = py.constant() {value = 1}
  %14 : f32[B, 8] = py.binary(%13, %10) {op = "+"}
  %15 : f32[B, 8] = py.binary(%12, %14) {op = "*"}
  %16 : dtype = py.constant() {value = "torch.float16"}
  %17 : f16[B, 8] = torch.method(%15, %16) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%17)
}
""",
    ),
    "silu": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.silu", aten = "aten::silu"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = py.unary(%x) {op = "-"}
  %1 : f32[B, 8] = torch.call(%0) {callee = "torch.exp", aten = "aten::exp"}
  %2 : int = py.constant() {value = 1}
  %3 : f32[B, 8] = py.binary(%2, %1) {op = "+"}
  %4 : f32[B, 8] = py.binary(%x, %3) {op = "/"}
  func.return(%4)
}
""",
    ),
    "sigmoid": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = py.unary(%x) {op = "-"}
  %1 : f32[B, 8] = torch.call(%0) {callee = "torch.exp", aten = "aten::exp"}
  %2 : int = py.constant() {value = 1}
  %3 : f32[B, 8] = py.binary(%2, %1) {op = "+"}
  %4 : f32[B, 8] = torch.call(%3) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  func.return(%4)
}
""",
    ),
    "special_expit": (
        """\
func @f(%x: f64[B, 8]) -> f64[*] {
  %0 : f64[*] = torch.call(%x) {callee = "torch.special.expit", aten = "aten::special_expit"}
  func.return(%0)
}
""",
        """\
func @f(%x: f64[B, 8]) -> f64[*] {
  %0 : f64[B, 8] = py.unary(%x) {op = "-"}
  %1 : f64[B, 8] = torch.call(%0) {callee = "torch.exp", aten = "aten::exp"}
  %2 : int = py.constant() {value = 1}
  %3 : f64[B, 8] = py.binary(%2, %1) {op = "+"}
  %4 : f64[B, 8] = torch.call(%3) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  func.return(%4)
}
""",
    ),
    "mish": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.mish", aten = "aten::mish"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 8] = torch.call(%0) {callee = "torch.log1p", aten = "aten::log1p"}
  %2 : f32[B, 8] = torch.call(%1) {callee = "torch.tanh", aten = "aten::tanh"}
  %3 : f32[B, 8] = py.binary(%x, %2) {op = "*"}
  func.return(%3)
}
""",
    ),
    "hardswish": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.hardswish", aten = "aten::hardswish"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 3}
  %1 : f32[B, 8] = py.binary(%x, %0) {op = "+"}
  %2 : int = py.constant() {value = 0}
  %3 : f32[B, 8] = torch.call(%1, %2) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %4 : int = py.constant() {value = 6}
  %5 : f32[B, 8] = torch.call(%3, %4) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  %6 : f32[B, 8] = py.binary(%x, %5) {op = "*"}
  %7 : f32[B, 8] = py.binary(%6, %4) {op = "/"}
  func.return(%7)
}
""",
    ),
    "hardsigmoid": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.hardsigmoid", aten = "aten::hardsigmoid"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 3}
  %1 : f32[B, 8] = py.binary(%x, %0) {op = "+"}
  %2 : int = py.constant() {value = 0}
  %3 : f32[B, 8] = torch.call(%1, %2) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %4 : int = py.constant() {value = 6}
  %5 : f32[B, 8] = torch.call(%3, %4) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  %6 : f32[B, 8] = py.binary(%5, %4) {op = "/"}
  func.return(%6)
}
""",
    ),
    "elu": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.5}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.elu", aten = "aten::elu"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.5}
  %1 : f32[B, 8] = torch.call(%x) {callee = "torch.expm1", aten = "aten::expm1"}
  %2 : float = py.constant() {value = 0.5}
  %3 : f32[B, 8] = py.binary(%1, %2) {op = "*"}
  %4 : int = py.constant() {value = 0}
  %5 : bool[B, 8] = py.compare(%x, %4) {op = "<="}
  %6 : f32[B, 8] = torch.call(%5, %3, %x) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%6)
}
""",
    ),
    "selu": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.selu", aten = "aten::selu"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.expm1", aten = "aten::expm1"}
  %1 : float = py.constant() {value = 1.7580993408473766}
  %2 : f32[B, 8] = py.binary(%0, %1) {op = "*"}
  %3 : float = py.constant() {value = 1.0507009873554805}
  %4 : f32[B, 8] = py.binary(%x, %3) {op = "*"}
  %5 : int = py.constant() {value = 0}
  %6 : bool[B, 8] = py.compare(%x, %5) {op = "<="}
  %7 : f32[B, 8] = torch.call(%6, %2, %4) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%7)
}
""",
    ),
    "celu": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 2.0}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.celu", aten = "aten::celu"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 2.0}
  %1 : float = py.constant() {value = 0.5}
  %2 : f32[B, 8] = py.binary(%x, %1) {op = "*"}
  %3 : f32[B, 8] = torch.call(%2) {callee = "torch.expm1", aten = "aten::expm1"}
  %4 : float = py.constant() {value = 2.0}
  %5 : f32[B, 8] = py.binary(%3, %4) {op = "*"}
  %6 : int = py.constant() {value = 0}
  %7 : bool[B, 8] = py.compare(%x, %6) {op = "<="}
  %8 : f32[B, 8] = torch.call(%7, %5, %x) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%8)
}
""",
    ),
    "leaky_relu": (
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : float = py.constant() {value = 0.2}
  %1 : f16[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.leaky_relu", aten = "aten::leaky_relu"}
  func.return(%1)
}
""",
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : float = py.constant() {value = 0.2}
  %1 : dtype = py.constant() {value = "torch.float32"}
  %2 : f32[B, 8] = torch.method(%x, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %3 : int = py.constant() {value = 0}
  %4 : bool[B, 8] = py.compare(%2, %3) {op = ">"}
  %5 : float = py.constant() {value = 0.2}
  %6 : f32[B, 8] = py.binary(%2, %5) {op = "*"}
  %7 : f32[B, 8] = torch.call(%4, %2, %6) {callee = "torch.where", aten = "aten::where.self"}
  %8 : dtype = py.constant() {value = "torch.float16"}
  %9 : f16[B, 8] = torch.method(%7, %8) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%9)
}
""",
    ),
    "prelu": (
        """\
func @f(%x: f32[B, 3, 4, 5], %w: f32[3]) -> f32[B, 3, 4, 5] {
  %0 : f32[B, 3, 4, 5] = torch.call(%x, %w) {callee = "torch.nn.functional.prelu", aten = "aten::prelu"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 3, 4, 5], %w: f32[3]) -> f32[B, 3, 4, 5] {
  %0 : tuple[int, int, int] = py.constant() {value = (3, 1, 1)}
  %1 : f32[3, 1, 1] = torch.method(%w, %0) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %2 : int = py.constant() {value = 0}
  %3 : bool[B, 3, 4, 5] = py.compare(%x, %2) {op = ">"}
  %4 : f32[B, 3, 4, 5] = py.binary(%1, %x) {op = "*"}
  %5 : f32[B, 3, 4, 5] = torch.call(%3, %x, %4) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%5)
}
""",
    ),
    "softplus": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 2.0}
  %1 : float = py.constant() {value = 10.0}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.softplus", kwnames = ("beta", "threshold"), aten = "aten::softplus"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 2.0}
  %1 : float = py.constant() {value = 10.0}
  %2 : float = py.constant() {value = 2.0}
  %3 : f32[B, 8] = py.binary(%x, %2) {op = "*"}
  %4 : f32[B, 8] = torch.call(%3) {callee = "torch.exp", aten = "aten::exp"}
  %5 : f32[B, 8] = torch.call(%4) {callee = "torch.log1p", aten = "aten::log1p"}
  %6 : f32[B, 8] = py.binary(%5, %2) {op = "/"}
  %7 : float = py.constant() {value = 10.0}
  %8 : bool[B, 8] = py.compare(%3, %7) {op = ">"}
  %9 : f32[B, 8] = torch.call(%8, %x, %6) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%9)
}
""",
    ),
    "log_sigmoid": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.logsigmoid", aten = "aten::log_sigmoid"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.abs", aten = "aten::abs"}
  %1 : f32[B, 8] = py.unary(%0) {op = "-"}
  %2 : f32[B, 8] = torch.call(%1) {callee = "torch.exp", aten = "aten::exp"}
  %3 : f32[B, 8] = torch.call(%2) {callee = "torch.log1p", aten = "aten::log1p"}
  %4 : int = py.constant() {value = 0}
  %5 : f32[B, 8] = torch.call(%x, %4) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  %6 : f32[B, 8] = py.binary(%5, %3) {op = "-"}
  func.return(%6)
}
""",
    ),
    "tanhshrink": (
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : f16[B, 8] = torch.call(%x) {callee = "torch.nn.functional.tanhshrink"}
  func.return(%0)
}
""",
        """\
func @f(%x: f16[B, 8]) -> f16[B, 8] {
  %0 : f16[B, 8] = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %1 : f16[B, 8] = py.binary(%x, %0) {op = "-"}
  func.return(%1)
}
""",
    ),
    "softsign": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.softsign"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.abs", aten = "aten::abs"}
  %1 : int = py.constant() {value = 1}
  %2 : f32[B, 8] = py.binary(%0, %1) {op = "+"}
  %3 : f32[B, 8] = py.binary(%x, %2) {op = "/"}
  func.return(%3)
}
""",
    ),
    "glu": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 4] {
  %0 : f32[B, T, 4] = torch.call(%x) {callee = "torch.nn.functional.glu", aten = "aten::glu"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 4] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 0}
  %2 : int = py.constant() {value = 4}
  %3 : f32[B, T, 4] = torch.method(%x, %0, %1, %2) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %4 : f32[B, T, 4] = torch.method(%x, %0, %2, %2) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %5 : f32[B, T, 4] = py.unary(%4) {op = "-"}
  %6 : f32[B, T, 4] = torch.call(%5) {callee = "torch.exp", aten = "aten::exp"}
  %7 : int = py.constant() {value = 1}
  %8 : f32[B, T, 4] = py.binary(%7, %6) {op = "+"}
  %9 : f32[B, T, 4] = torch.call(%8) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  %10 : f32[B, T, 4] = py.binary(%3, %9) {op = "*"}
  func.return(%10)
}
""",
    ),
    "glu_symbolic": (
        """\
func @f(%x: f32[B, 2*T]) -> f32[B, T] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, T] = torch.call(%x, %0) {callee = "torch.nn.functional.glu", aten = "aten::glu"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 2*T]) -> f32[B, T] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 1}
  %2 : int = torch.method(%x, %1) {method = "size", aten = "aten::size.int"}
  %3 : int = py.constant() {value = 2}
  %4 : int = py.binary(%2, %3) {op = "//"}
  %5 : int = py.constant() {value = 0}
  %6 : f32[B, T] = torch.method(%x, %1, %5, %4) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %7 : f32[B, T] = torch.method(%x, %1, %4, %4) {method = "narrow", alias_of = 0, aten = "aten::narrow"}
  %8 : f32[B, T] = py.unary(%7) {op = "-"}
  %9 : f32[B, T] = torch.call(%8) {callee = "torch.exp", aten = "aten::exp"}
  %10 : f32[B, T] = py.binary(%1, %9) {op = "+"}
  %11 : f32[B, T] = torch.call(%10) {callee = "torch.reciprocal", aten = "aten::reciprocal"}
  %12 : f32[B, T] = py.binary(%6, %11) {op = "*"}
  func.return(%12)
}
""",
    ),
    "relu": (
        """\
func @f(%x: i64[B, 8]) -> i64[B, 8] {
  %0 : i64[B, 8] = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
  func.return(%0)
}
""",
        """\
func @f(%x: i64[B, 8]) -> i64[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : i64[B, 8] = torch.call(%x, %0) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  func.return(%1)
}
""",
    ),
    "relu6": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.relu6", aten = "aten::relu6"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %2 : int = py.constant() {value = 6}
  %3 : f32[B, 8] = torch.call(%1, %2) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  func.return(%3)
}
""",
    ),
    "hardtanh": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = -2.0}
  %1 : float = py.constant() {value = 2.0}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.hardtanh", aten = "aten::hardtanh"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = -2.0}
  %1 : float = py.constant() {value = 2.0}
  %2 : float = py.constant() {value = -2.0}
  %3 : f32[B, 8] = torch.call(%x, %2) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %4 : float = py.constant() {value = 2.0}
  %5 : f32[B, 8] = torch.call(%3, %4) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  func.return(%5)
}
""",
    ),
    "threshold": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : float = py.constant() {value = 20.0}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.threshold", aten = "aten::threshold"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : float = py.constant() {value = 20.0}
  %2 : float = py.constant() {value = 0.1}
  %3 : bool[B, 8] = py.compare(%x, %2) {op = "<="}
  %4 : float = py.constant() {value = 20.0}
  %5 : f32[B, 8] = torch.call(%3, %4, %x) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  func.return(%5)
}
""",
    ),
    "clamp": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = -1.0}
  %1 : float = py.constant() {value = 1.0}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.clamp", aten = "aten::clamp"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = -1.0}
  %1 : float = py.constant() {value = 1.0}
  %2 : float = py.constant() {value = -1.0}
  %3 : f32[B, 8] = torch.call(%x, %2) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %4 : float = py.constant() {value = 1.0}
  %5 : f32[B, 8] = torch.call(%3, %4) {callee = "torch.clamp_max", aten = "aten::clamp_max"}
  func.return(%5)
}
""",
    ),
    "clip_tensor": (
        """\
func @f(%x: f32[B, 8], %lo: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %lo) {callee = "torch.clip", kwnames = ("min",), aten = "aten::clip.Tensor"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8], %lo: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %lo) {callee = "torch.clamp_min", aten = "aten::clamp_min.Tensor"}
  func.return(%0)
}
""",
    ),
    "addcmul": (
        """\
func @f(%x: f16[B, 8], %a: f16[B, 8], %b: f16[8]) -> f16[B, 8] {
  %0 : float = py.constant() {value = 0.5}
  %1 : f16[B, 8] = torch.call(%x, %a, %b, %0) {callee = "torch.addcmul", kwnames = ("value",), aten = "aten::addcmul"}
  func.return(%1)
}
""",
        """\
func @f(%x: f16[B, 8], %a: f16[B, 8], %b: f16[8]) -> f16[B, 8] {
  %0 : float = py.constant() {value = 0.5}
  %1 : dtype = py.constant() {value = "torch.float32"}
  %2 : f32[B, 8] = torch.method(%x, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %3 : f32[B, 8] = torch.method(%a, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %4 : f32[8] = torch.method(%b, %1) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %5 : float = py.constant() {value = 0.5}
  %6 : f32[B, 8] = py.binary(%5, %3) {op = "*"}
  %7 : f32[B, 8] = py.binary(%6, %4) {op = "*"}
  %8 : f32[B, 8] = py.binary(%2, %7) {op = "+"}
  %9 : dtype = py.constant() {value = "torch.float16"}
  %10 : f16[B, 8] = torch.method(%8, %9) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%10)
}
""",
    ),
    "addcdiv": (
        """\
func @f(%x: f32[B, 8], %a: f32[B, 8], %b: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %a, %b) {callee = "torch.addcdiv", aten = "aten::addcdiv"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8], %a: f32[B, 8], %b: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = py.binary(%a, %b) {op = "/"}
  %1 : f32[B, 8] = py.binary(%x, %0) {op = "+"}
  func.return(%1)
}
""",
    ),
    "lerp": (
        """\
func @f(%x: f32[B, 8], %y: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.75}
  %1 : f32[B, 8] = torch.call(%x, %y, %0) {callee = "torch.lerp", aten = "aten::lerp.Scalar"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8], %y: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.75}
  %1 : f32[B, 8] = py.binary(%y, %x) {op = "-"}
  %2 : float = py.constant() {value = 0.25}
  %3 : f32[B, 8] = py.binary(%1, %2) {op = "*"}
  %4 : f32[B, 8] = py.binary(%y, %3) {op = "-"}
  func.return(%4)
}
""",
    ),
    "lerp_tensor": (
        """\
func @f(%x: f32[B, 8], %y: f32[B, 8], %w: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %y, %w) {callee = "torch.lerp", aten = "aten::lerp.Tensor"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8], %y: f32[B, 8], %w: f32[8]) -> f32[B, 8] {
  %0 : f32[B, 8] = py.binary(%y, %x) {op = "-"}
  %1 : f32[B, 8] = py.binary(%w, %0) {op = "*"}
  %2 : f32[B, 8] = py.binary(%x, %1) {op = "+"}
  %3 : int = py.constant() {value = 1}
  %4 : f32[8] = py.binary(%3, %w) {op = "-"}
  %5 : f32[B, 8] = py.binary(%0, %4) {op = "*"}
  %6 : f32[B, 8] = py.binary(%y, %5) {op = "-"}
  %7 : f32[8] = torch.call(%w) {callee = "torch.abs", aten = "aten::abs"}
  %8 : float = py.constant() {value = 0.5}
  %9 : bool[8] = py.compare(%7, %8) {op = "<"}
  %10 : f32[B, 8] = torch.call(%9, %2, %6) {callee = "torch.where", aten = "aten::where.self"}
  func.return(%10)
}
""",
    ),
    "square": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.square", aten = "aten::square"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = py.binary(%x, %x) {op = "*"}
  func.return(%0)
}
""",
    ),
    "masked_fill": (
        """\
func @f(%x: f32[B, 8], %m: bool[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.0}
  %1 : f32[B, 8] = torch.method(%x, %m, %0) {method = "masked_fill", aten = "aten::masked_fill.Scalar"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8], %m: bool[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.0}
  %1 : float = py.constant() {value = 0.0}
  %2 : f32[B, 8] = torch.call(%m, %1, %x) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  func.return(%2)
}
""",
    ),
    "type_as": (
        """\
func @f(%x: i64[B, 8], %y: f32[3]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.method(%x, %y) {method = "type_as", aten = "aten::type_as"}
  func.return(%0)
}
""",
        """\
func @f(%x: i64[B, 8], %y: f32[3]) -> f32[B, 8] {
  %0 : dtype = py.constant() {value = "torch.float32"}
  %1 : f32[B, 8] = torch.method(%x, %0) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%1)
}
""",
    ),
    "mean": (
        """\
func @f(%x: f16[B, T, 8]) -> f16[1, T, 1] {
  %0 : tuple[int, int] = py.constant() {value = (0, -1)}
  %1 : bool = py.constant() {value = True}
  %2 : f16[1, T, 1] = torch.method(%x, %0, %1) {method = "mean", kwnames = ("keepdim",), aten = "aten::mean.dim"}
  func.return(%2)
}
""",
        """\
func @f(%x: f16[B, T, 8]) -> f16[1, T, 1] {
  %0 : tuple[int, int] = py.constant() {value = (0, -1)}
  %1 : bool = py.constant() {value = True}
  %2 : dtype = py.constant() {value = "torch.float32"}
  %3 : f32[B, T, 8] = torch.method(%x, %2) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %4 : tuple[int, int] = py.constant() {value = (0, 2)}
  %5 : bool = py.constant() {value = True}
  %6 : f32[1, T, 1] = torch.call(%3, %4, %5) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %7 : int = py.constant() {value = 0}
  %8 : int = torch.method(%x, %7) {method = "size", aten = "aten::size.int"}
  %9 : int = py.constant() {value = 8}
  %10 : int = py.binary(%9, %8) {op = "*"}
  %11 : f32[1, T, 1] = py.binary(%6, %10) {op = "/"}
  %12 : dtype = py.constant() {value = "torch.float16"}
  %13 : f16[1, T, 1] = torch.method(%11, %12) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  func.return(%13)
}
""",
    ),
    "mean_all": (
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : f32[] = torch.method(%x) {method = "mean", aten = "aten::mean"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : tuple[int, int] = py.constant() {value = (0, 1)}
  %1 : bool = py.constant() {value = False}
  %2 : f32[] = torch.call(%x, %0, %1) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %3 : int = py.constant() {value = 0}
  %4 : int = torch.method(%x, %3) {method = "size", aten = "aten::size.int"}
  %5 : int = py.constant() {value = 8}
  %6 : int = py.binary(%5, %4) {op = "*"}
  %7 : f32[] = py.binary(%2, %6) {op = "/"}
  func.return(%7)
}
""",
    ),
    "var": (
        """\
func @f(%x: f32[B, 8, T]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 2}
  %1 : f32[B, 8] = torch.method(%x, %0) {method = "var", aten = "aten::var.dim"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8, T]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 2}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 8, 1] = torch.call(%x, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %4 : int = torch.method(%x, %1) {method = "size", aten = "aten::size.int"}
  %5 : f32[B, 8, 1] = py.binary(%3, %4) {op = "/"}
  %6 : f32[B, 8, T] = py.binary(%x, %5) {op = "-"}
  %7 : f32[B, 8, T] = py.binary(%6, %6) {op = "*"}
  %8 : bool = py.constant() {value = False}
  %9 : f32[B, 8] = torch.call(%7, %1, %8) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %10 : int = py.constant() {value = 1}
  %11 : int = py.binary(%4, %10) {op = "-"}
  %12 : int = py.constant() {value = 0}
  %13 : int = py.call(%12, %11) {callee = "max"}
  %14 : f32[B, 8] = py.binary(%9, %13) {op = "/"}
  func.return(%14)
}
""",
    ),
    "var_concrete": (
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = -1}
  %1 : int = py.constant() {value = 2}
  %2 : f32[B] = torch.call(%x, %0, %1) {callee = "torch.var", kwnames = ("correction",), aten = "aten::var.correction"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = -1}
  %1 : int = py.constant() {value = 2}
  %2 : int = py.constant() {value = 1}
  %3 : bool = py.constant() {value = True}
  %4 : f32[B, 1] = torch.call(%x, %2, %3) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %5 : int = py.constant() {value = 8}
  %6 : f32[B, 1] = py.binary(%4, %5) {op = "/"}
  %7 : f32[B, 8] = py.binary(%x, %6) {op = "-"}
  %8 : f32[B, 8] = py.binary(%7, %7) {op = "*"}
  %9 : bool = py.constant() {value = False}
  %10 : f32[B] = torch.call(%8, %2, %9) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %11 : int = py.constant() {value = 6}
  %12 : f32[B] = py.binary(%10, %11) {op = "/"}
  func.return(%12)
}
""",
    ),
    "std": (
        """\
func @f(%x: f32[B, T]) -> f32[B, 1] {
  %0 : int = py.constant() {value = -1}
  %1 : bool = py.constant() {value = True}
  %2 : bool = py.constant() {value = False}
  %3 : f32[B, 1] = torch.method(%x, %0, %1, %2) {method = "std", kwnames = ("keepdim", "unbiased"), aten = "aten::std.dim"}
  func.return(%3)
}
""",
        """\
func @f(%x: f32[B, T]) -> f32[B, 1] {
  %0 : int = py.constant() {value = -1}
  %1 : bool = py.constant() {value = True}
  %2 : bool = py.constant() {value = False}
  %3 : int = py.constant() {value = 1}
  %4 : bool = py.constant() {value = True}
  %5 : f32[B, 1] = torch.call(%x, %3, %4) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %6 : int = torch.method(%x, %3) {method = "size", aten = "aten::size.int"}
  %7 : f32[B, 1] = py.binary(%5, %6) {op = "/"}
  %8 : f32[B, T] = py.binary(%x, %7) {op = "-"}
  %9 : f32[B, T] = py.binary(%8, %8) {op = "*"}
  %10 : f32[B, 1] = torch.call(%9, %3, %4) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %11 : f32[B, 1] = py.binary(%10, %6) {op = "/"}
  %12 : f32[B, 1] = torch.call(%11) {callee = "torch.sqrt", aten = "aten::sqrt"}
  func.return(%12)
}
""",
    ),
    "var_mean": (
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : tuple[f32[B], f32[B]] = torch.call(%x, %0) {callee = "torch.var_mean", aten = "aten::var_mean.dim"}
  %2 : f32[B] = py.getitem(%1, %0)
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 1] = torch.call(%x, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %4 : int = py.constant() {value = 8}
  %5 : f32[B, 1] = py.binary(%3, %4) {op = "/"}
  %6 : f32[B, 8] = py.binary(%x, %5) {op = "-"}
  %7 : f32[B, 8] = py.binary(%6, %6) {op = "*"}
  %8 : bool = py.constant() {value = False}
  %9 : f32[B] = torch.call(%7, %1, %8) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %10 : int = py.constant() {value = 7}
  %11 : f32[B] = py.binary(%9, %10) {op = "/"}
  %12 : f32[B] = torch.call(%5, %1) {callee = "torch.squeeze", alias_of = 0, aten = "aten::squeeze.dim"}
  %13 : tuple[f32[B], f32[B]] = py.tuple(%11, %12)
  %14 : f32[B] = py.getitem(%13, %0)
  func.return(%14)
}
""",
    ),
    "std_mean": (
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : tuple[f32[B], f32[B]] = torch.call(%x, %0) {callee = "torch.std_mean", aten = "aten::std_mean.dim"}
  %2 : int = py.constant() {value = 0}
  %3 : f32[B] = py.getitem(%1, %2)
  func.return(%3)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 1] = torch.call(%x, %1, %2) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %4 : int = py.constant() {value = 8}
  %5 : f32[B, 1] = py.binary(%3, %4) {op = "/"}
  %6 : f32[B, 8] = py.binary(%x, %5) {op = "-"}
  %7 : f32[B, 8] = py.binary(%6, %6) {op = "*"}
  %8 : bool = py.constant() {value = False}
  %9 : f32[B] = torch.call(%7, %1, %8) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %10 : int = py.constant() {value = 7}
  %11 : f32[B] = py.binary(%9, %10) {op = "/"}
  %12 : f32[B] = torch.call(%11) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %13 : f32[B] = torch.call(%5, %1) {callee = "torch.squeeze", alias_of = 0, aten = "aten::squeeze.dim"}
  %14 : tuple[f32[B], f32[B]] = py.tuple(%12, %13)
  %15 : int = py.constant() {value = 0}
  %16 : f32[B] = py.getitem(%14, %15)
  func.return(%16)
}
""",
    ),
    "logsumexp": (
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B] = torch.call(%x, %0) {callee = "torch.logsumexp", aten = "aten::logsumexp"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.constant() {value = True}
  %3 : f32[B, 1] = torch.call(%x, %1, %2) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %4 : bool[B, 1] = torch.call(%3) {callee = "torch.isinf", aten = "aten::isinf"}
  %5 : float = py.constant() {value = 0.0}
  %6 : f32[B, 1] = torch.call(%4, %5, %3) {callee = "torch.where", aten = "aten::where.ScalarSelf"}
  %7 : f32[B, 8] = py.binary(%x, %6) {op = "-"}
  %8 : f32[B, 8] = torch.call(%7) {callee = "torch.exp", aten = "aten::exp"}
  %9 : bool = py.constant() {value = False}
  %10 : f32[B] = torch.call(%8, %1, %9) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %11 : f32[B] = torch.call(%6, %1) {callee = "torch.squeeze", alias_of = 0, aten = "aten::squeeze.dim"}
  %12 : f32[B] = torch.call(%10) {callee = "torch.log", aten = "aten::log"}
  %13 : f32[B] = py.binary(%12, %11) {op = "+"}
  func.return(%13)
}
""",
    ),
    "linalg_vector_norm": (
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = -1}
  %1 : f32[B] = torch.call(%x, %0) {callee = "torch.linalg.vector_norm", kwnames = ("dim",), aten = "aten::linalg_vector_norm"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = -1}
  %1 : f32[B, 8] = py.binary(%x, %x) {op = "*"}
  %2 : int = py.constant() {value = 1}
  %3 : bool = py.constant() {value = False}
  %4 : f32[B] = torch.call(%1, %2, %3) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %5 : f32[B] = torch.call(%4) {callee = "torch.sqrt", aten = "aten::sqrt"}
  func.return(%5)
}
""",
    ),
    "norm": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 1] {
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 1] = torch.call(%x, %0, %0, %1) {callee = "torch.norm", kwnames = ("p", "dim", "keepdim")}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 1] {
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 8] = torch.call(%x) {callee = "torch.abs", aten = "aten::abs"}
  %3 : int = py.constant() {value = 1}
  %4 : bool = py.constant() {value = True}
  %5 : f32[B, 1] = torch.call(%2, %3, %4) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  func.return(%5)
}
""",
    ),
    "normalize": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.normalize", kwnames = ("dim",)}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, 8] = py.binary(%x, %x) {op = "*"}
  %2 : int = py.constant() {value = 1}
  %3 : bool = py.constant() {value = True}
  %4 : f32[B, 1] = torch.call(%1, %2, %3) {callee = "torch.sum", kwnames = ("keepdim",), aten = "aten::sum.dim_IntList"}
  %5 : f32[B, 1] = torch.call(%4) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %6 : float = py.constant() {value = 1e-12}
  %7 : f32[B, 1] = torch.call(%5, %6) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %8 : f32[B, 8] = py.binary(%x, %7) {op = "/"}
  func.return(%8)
}
""",
    ),
    "max": (
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : f32[] = torch.method(%x) {method = "max", aten = "aten::max"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : tuple[()] = py.constant() {value = ()}
  %1 : f32[] = torch.call(%x, %0) {callee = "torch.amax", aten = "aten::amax"}
  func.return(%1)
}
""",
    ),
    "min": (
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : f32[] = torch.call(%x) {callee = "torch.min", aten = "aten::min"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[] {
  %0 : tuple[()] = py.constant() {value = ()}
  %1 : f32[] = torch.call(%x, %0) {callee = "torch.amin", aten = "aten::amin"}
  func.return(%1)
}
""",
    ),
    "transpose": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[8, T, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = -1}
  %2 : f32[8, T, B] = torch.method(%x, %0, %1) {method = "transpose", alias_of = 0, aten = "aten::transpose.int"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[8, T, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = -1}
  %2 : tuple[int, int, int] = py.constant() {value = (2, 1, 0)}
  %3 : f32[8, T, B] = torch.method(%x, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%3)
}
""",
    ),
    "swapaxes": (
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : f32[8, B] = torch.call(%x, %0, %1) {callee = "torch.swapaxes", alias_of = 0, aten = "aten::swapaxes"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : tuple[int, int] = py.constant() {value = (1, 0)}
  %3 : f32[8, B] = torch.method(%x, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%3)
}
""",
    ),
    "swapdims": (
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : f32[8, B] = torch.method(%x, %0, %1) {method = "swapdims", alias_of = 0, aten = "aten::swapdims"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : tuple[int, int] = py.constant() {value = (1, 0)}
  %3 : f32[8, B] = torch.method(%x, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%3)
}
""",
    ),
    "t": (
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : f32[8, B] = torch.method(%x) {method = "t", alias_of = 0, aten = "aten::t"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[8, B] {
  %0 : tuple[int, int] = py.constant() {value = (1, 0)}
  %1 : f32[8, B] = torch.method(%x, %0) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%1)
}
""",
    ),
    "T": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[8, T, B] {
  %0 : f32[8, T, B] = py.getattr(%x) {attr = "T"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[8, T, B] {
  %0 : tuple[int, int, int] = py.constant() {value = (2, 1, 0)}
  %1 : f32[8, T, B] = torch.method(%x, %0) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%1)
}
""",
    ),
    "mT": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, 8, T] {
  %0 : f32[B, 8, T] = py.getattr(%x) {attr = "mT"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, 8, T] {
  %0 : tuple[int, int, int] = py.constant() {value = (0, 2, 1)}
  %1 : f32[B, 8, T] = torch.method(%x, %0) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%1)
}
""",
    ),
    "movedim": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[T, 8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = -1}
  %2 : f32[T, 8, B] = torch.call(%x, %0, %1) {callee = "torch.movedim", alias_of = 0, aten = "aten::movedim.int"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[T, 8, B] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = -1}
  %2 : tuple[int, int, int] = py.constant() {value = (1, 2, 0)}
  %3 : f32[T, 8, B] = torch.method(%x, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%3)
}
""",
    ),
    "moveaxis": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[T, B, 8] {
  %0 : tuple[int, int] = py.constant() {value = (0, 1)}
  %1 : tuple[int, int] = py.constant() {value = (1, 0)}
  %2 : f32[T, B, 8] = torch.method(%x, %0, %1) {method = "moveaxis", alias_of = 0, aten = "aten::moveaxis.intlist"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[T, B, 8] {
  %0 : tuple[int, int] = py.constant() {value = (0, 1)}
  %1 : tuple[int, int] = py.constant() {value = (1, 0)}
  %2 : tuple[int, int, int] = py.constant() {value = (1, 0, 2)}
  %3 : f32[T, B, 8] = torch.method(%x, %2) {method = "permute", alias_of = 0, aten = "aten::permute"}
  func.return(%3)
}
""",
    ),
    "flatten": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, 8*T] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, 8*T] = torch.method(%x, %0) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, 8*T] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 0}
  %2 : int = torch.method(%x, %1) {method = "size", aten = "aten::size.int"}
  %3 : int = py.constant() {value = 1}
  %4 : int = torch.method(%x, %3) {method = "size", aten = "aten::size.int"}
  %5 : int = py.constant() {value = 8}
  %6 : int = py.binary(%5, %4) {op = "*"}
  %7 : tuple[int, int] = py.tuple(%2, %6)
  %8 : f32[B, 8*T] = torch.method(%x, %7) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  func.return(%8)
}
""",
    ),
    "flatten_one": (
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, T, 8] = torch.method(%x, %0, %0) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}
  func.return(%1)
}
""",
        """\
func @f(%x: f32[B, T, 8]) -> f32[B, T, 8] {
  %0 : int = py.constant() {value = 1}
  func.return(%x)
}
""",
    ),
    "unflatten": (
        """\
func @f(%x: f32[B, 2*T]) -> f32[B, 2, T] {
  %0 : int = py.constant() {value = 1}
  %1 : tuple[int, int] = py.constant() {value = (2, -1)}
  %2 : f32[B, 2, T] = torch.method(%x, %0, %1) {method = "unflatten", alias_of = 0, aten = "aten::unflatten.int"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 2*T]) -> f32[B, 2, T] {
  %0 : int = py.constant() {value = 1}
  %1 : tuple[int, int] = py.constant() {value = (2, -1)}
  %2 : int = py.constant() {value = 1}
  %3 : int = torch.method(%x, %2) {method = "size", aten = "aten::size.int"}
  %4 : int = py.constant() {value = 2}
  %5 : int = py.binary(%3, %4) {op = "//"}
  %6 : int = py.constant() {value = 0}
  %7 : int = torch.method(%x, %6) {method = "size", aten = "aten::size.int"}
  %8 : tuple[int, int, int] = py.tuple(%7, %4, %5)
  %9 : f32[B, 2, T] = torch.method(%x, %8) {method = "view", alias_of = 0, aten = "aten::view"}
  func.return(%9)
}
""",
    ),
    "expand_as": (
        """\
func @f(%x: f32[1, 8], %y: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.method(%x, %y) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[1, 8], %y: f32[B, 8]) -> f32[B, 8] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%y, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 8}
  %3 : tuple[int, int] = py.tuple(%1, %2)
  %4 : f32[B, 8] = torch.method(%x, %3) {method = "expand", alias_of = 0, aten = "aten::expand"}
  func.return(%4)
}
""",
    ),
    "view_as": (
        """\
func @f(%x: f32[B, 8], %y: f32[B, 2, 4]) -> f32[B, 2, 4] {
  %0 : f32[B, 2, 4] = torch.method(%x, %y) {method = "view_as", alias_of = 0, aten = "aten::view_as"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8], %y: f32[B, 2, 4]) -> f32[B, 2, 4] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%y, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 2}
  %3 : int = py.constant() {value = 4}
  %4 : tuple[int, int, int] = py.tuple(%1, %2, %3)
  %5 : f32[B, 2, 4] = torch.method(%x, %4) {method = "view", alias_of = 0, aten = "aten::view"}
  func.return(%5)
}
""",
    ),
    "reshape_as": (
        """\
func @f(%x: f32[2, 4], %y: f32[8]) -> f32[8] {
  %0 : f32[8] = torch.method(%x, %y) {method = "reshape_as", alias_of = 0, aten = "aten::reshape_as"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[2, 4], %y: f32[8]) -> f32[8] {
  %0 : tuple[int] = py.constant() {value = (8,)}
  %1 : f32[8] = torch.method(%x, %0) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  func.return(%1)
}
""",
    ),
    "linear": (
        """\
func @f(%x: f32[B, T, 8], %w: f32[4, 8], %b: f32[4]) -> f32[B, T, 4] {
  %0 : f32[B, T, 4] = torch.call(%x, %w, %b) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, T, 8], %w: f32[4, 8], %b: f32[4]) -> f32[B, T, 4] {
  %0 : f32[B, T, 4] = torch.call(%x, %w) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %1 : f32[B, T, 4] = py.binary(%0, %b) {op = "+"}
  func.return(%1)
}
""",
    ),
    "conv2d": (
        """\
func @f(%x: f32[B, 8, 1, 1], %w: f32[4, 8, 1, 1], %b: f32[4]) -> f32[B, 4, 1, 1] {
  %0 : f32[B, 4, 1, 1] = torch.call(%x, %w, %b) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}
  func.return(%0)
}
""",
        """\
func @f(%x: f32[B, 8, 1, 1], %w: f32[4, 8, 1, 1], %b: f32[4]) -> f32[B, 4, 1, 1] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 8}
  %3 : tuple[int, int] = py.tuple(%1, %2)
  %4 : f32[B, 8] = torch.method(%x, %3) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %5 : tuple[int, int] = py.constant() {value = (4, 8)}
  %6 : f32[4, 8] = torch.method(%w, %5) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %7 : f32[B, 4] = torch.call(%4, %6) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  %8 : f32[B, 4] = py.binary(%7, %b) {op = "+"}
  %9 : int = py.constant() {value = -1}
  %10 : f32[B, 4, 1] = torch.method(%8, %9) {method = "unsqueeze", alias_of = 0, aten = "aten::unsqueeze"}
  %11 : f32[B, 4, 1, 1] = torch.method(%10, %9) {method = "unsqueeze", alias_of = 0, aten = "aten::unsqueeze"}
  func.return(%11)
}
""",
    ),
    "pad": (  # swin's pad to a multiple of the window, by nothing: the new tensor itself
        """\
func @f(%x: f32[B, 56, 56, 96]) -> f32[B, 56, 56, 96] {
  %0 : f32[B, 56, 56, 96] = py.unary(%x) {op = "-"}
  %1 : tuple[int, int, int, int, int, int] = py.constant() {value = (0, 0, 0, 0, 0, 0)}
  %2 : f32[B, 56, 56, 96] = torch.call(%0, %1) {callee = "torch.nn.functional.pad", aten = "aten::pad"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 56, 56, 96]) -> f32[B, 56, 56, 96] {
  %0 : f32[B, 56, 56, 96] = py.unary(%x) {op = "-"}
  %1 : tuple[int, int, int, int, int, int] = py.constant() {value = (0, 0, 0, 0, 0, 0)}
  func.return(%0)
}
""",
    ),
    "constant_pad_nd": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : tuple[int, int] = py.constant() {value = (0, 0)}
  %2 : f32[B, 8] = torch.call(%0, %1) {callee = "torch.constant_pad_nd", aten = "aten::constant_pad_nd"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : tuple[int, int] = py.constant() {value = (0, 0)}
  func.return(%0)
}
""",
    ),
    "dropout": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.dropout", alias_of = 0, aten = "aten::dropout"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  func.return(%x)
}
""",
    ),
    "alpha_dropout": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.alpha_dropout", alias_of = 0, aten = "aten::alpha_dropout"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  func.return(%x)
}
""",
    ),
    "feature_dropout": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.feature_dropout", alias_of = 0, aten = "aten::feature_dropout"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  func.return(%x)
}
""",
    ),
    "feature_alpha_dropout": (
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.feature_alpha_dropout", alias_of = 0, aten = "aten::feature_alpha_dropout"}
  func.return(%2)
}
""",
        """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.1}
  %1 : bool = py.constant() {value = False}
  func.return(%x)
}
""",
    ),
}


@pytest.mark.parametrize("name", list(TEXT_CASES))
def test_rule(name: str) -> None:
    before, after = TEXT_CASES[name]
    assert run(before) == after


def test_every_rule_has_a_text_case() -> None:
    """Cases are named after their rule, or the rule and a variant ("gelu_tanh")."""
    missing = [r for r in RULES if not any(n == r or n.startswith(r + "_") for n in TEXT_CASES)]
    assert not missing


# -- what stays ---------------------------------------------------------------------------------------
KEPT: dict[str, str] = {
    "rank unknown: a negative dim cannot be normalized": """\
func @f(%x: f32[*]) -> f32[*] {
  %0 : int = py.constant() {value = -1}
  %1 : f32[*] = torch.call(%x, %0) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%1)
}
""",
    "dtype unknown: the computation dtype is not known": """\
func @f(%x: Tensor[B, 8]) -> Tensor[B, 8] {
  %0 : int = py.constant() {value = -1}
  %1 : Tensor[B, 8] = torch.call(%x, %0) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%1)
}
""",
    "an integer softmax raises in eager": """\
func @f(%x: i64[B, 8]) -> Tensor[B, 8] {
  %0 : int = py.constant() {value = 1}
  %1 : Tensor[B, 8] = torch.call(%x, %0) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%1)
}
""",
    "softmax over a dim that may be empty (amax of nothing raises)": """\
func @f(%x: f32[B, ?]) -> f32[B, ?] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, ?] = torch.call(%x, %0) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%1)
}
""",
    "softmax over an empty dim": """\
func @f(%x: f32[B, 0]) -> f32[B, 0] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, 0] = torch.call(%x, %0) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%1)
}
""",
    "a dim that is not a constant": """\
func @f(%x: f32[B, 8], %d: int) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %d) {callee = "torch.softmax", aten = "aten::softmax.int"}
  func.return(%0)
}
""",
    "batch_norm in training updates its running statistics": """\
func @f(%x: f32[B, 3], %m: f32[3], %v: f32[3]) -> f32[B, 3] {
  %0 : bool = py.constant() {value = True}
  %1 : f32[B, 3] = torch.call(%x, %m, %v, %0) {callee = "torch.nn.functional.batch_norm", kwnames = ("training",), aten = "aten::batch_norm"}
  func.return(%1)
}
""",
    "batch_norm whose training flag is not known": """\
func @f(%x: f32[B, 3], %m: f32[3], %v: f32[3], %t: bool) -> f32[B, 3] {
  %0 : f32[B, 3] = torch.call(%x, %m, %v, %t) {callee = "torch.nn.functional.batch_norm", kwnames = ("training",), aten = "aten::batch_norm"}
  func.return(%0)
}
""",
    "layer_norm whose normalized_shape does not match the input (eager raises)": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : tuple[int] = py.constant() {value = (4,)}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.layer_norm", aten = "aten::layer_norm"}
  func.return(%1)
}
""",
    "layer_norm whose weight shape is not known": """\
func @f(%x: f32[B, 8], %w: f32[*]) -> f32[B, 8] {
  %0 : tuple[int] = py.constant() {value = (8,)}
  %1 : f32[B, 8] = torch.call(%x, %0, %w) {callee = "torch.nn.functional.layer_norm", aten = "aten::layer_norm"}
  func.return(%1)
}
""",
    "group_norm with channels not a multiple of the groups (eager raises)": """\
func @f(%x: f32[B, 6, 4]) -> f32[B, 6, 4] {
  %0 : int = py.constant() {value = 4}
  %1 : f32[B, 6, 4] = torch.call(%x, %0) {callee = "torch.nn.functional.group_norm", aten = "aten::group_norm"}
  func.return(%1)
}
""",
    "instance_norm whose spatial size may be 1 (F.instance_norm raises then)": """\
func @f(%x: f32[B, 6, L]) -> f32[B, 6, L] {
  %0 : f32[B, 6, L] = torch.call(%x) {callee = "torch.nn.functional.instance_norm", aten = "aten::instance_norm"}
  func.return(%0)
}
""",
    "group_norm with one value per group possible (F.group_norm raises then)": """\
func @f(%x: f32[B, 2, H]) -> f32[B, 2, H] {
  %0 : int = py.constant() {value = 2}
  %1 : f32[B, 2, H] = torch.call(%x, %0) {callee = "torch.nn.functional.group_norm", aten = "aten::group_norm"}
  func.return(%1)
}
""",
    "gelu with an approximation that is not known": """\
func @f(%x: f32[B, 8], %a: str) -> f32[B, 8] {
  %0 : f32[B, 8] = torch.call(%x, %a) {callee = "torch.nn.functional.gelu", kwnames = ("approximate",), aten = "aten::gelu"}
  func.return(%0)
}
""",
    "an in-place activation (functionalization's business)": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : bool = py.constant() {value = True}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
  func.return(%1)
}
""",
    "dropout in training draws random numbers": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.5}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.dropout", random = True, aten = "aten::dropout"}
  func.return(%2)
}
""",
    "dropout with p outside [0, 1] (eager raises)": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 1.5}
  %1 : bool = py.constant() {value = False}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.dropout", kwnames = ("training",), alias_of = 0, aten = "aten::dropout"}
  func.return(%2)
}
""",
    "glu over a dim not known to be even (eager raises on odd)": """\
func @f(%x: f32[B, T]) -> f32[B, ?] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, ?] = torch.call(%x, %0) {callee = "torch.nn.functional.glu", aten = "aten::glu"}
  func.return(%1)
}
""",
    "linear with a 1-d weight and a bias that broadcasts differently": """\
func @f(%x: f32[B, T, 8], %w: f32[8], %b: f32[8]) -> f32[B, T] {
  %0 : f32[B, T] = torch.call(%x, %w, %b) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%0)
}
""",
    "conv2d of images larger than 1x1": """\
func @f(%x: f32[B, 8, 2, 2], %w: f32[4, 8, 1, 1]) -> f32[B, 4, 2, 2] {
  %0 : f32[B, 4, 2, 2] = torch.call(%x, %w) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}
  func.return(%0)
}
""",
    "conv2d of one image (the convolution is faster)": """\
func @f(%x: f32[1, 8, 1, 1], %w: f32[4, 8, 1, 1]) -> f32[1, 4, 1, 1] {
  %0 : f32[1, 4, 1, 1] = torch.call(%x, %w) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}
  func.return(%0)
}
""",
    "conv2d with padding='same' and a stride (eager raises)": """\
func @f(%x: f32[B, 8, 1, 1], %w: f32[4, 8, 1, 1]) -> f32[B, 4, 1, 1] {
  %none : None = py.constant() {value = None}
  %0 : int = py.constant() {value = 2}
  %1 : str = py.constant() {value = "same"}
  %2 : f32[B, 4, 1, 1] = torch.call(%x, %w, %none, %0, %1) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d.padding"}
  func.return(%2)
}
""",
    "conv2d with padding": """\
func @f(%x: f32[B, 8, 1, 1], %w: f32[4, 8, 1, 1]) -> f32[B, 4, 3, 3] {
  %none : None = py.constant() {value = None}
  %0 : int = py.constant() {value = 1}
  %1 : f32[B, 4, 3, 3] = torch.call(%x, %w, %none, %0, %0) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}
  func.return(%1)
}
""",
    "linear of mixed dtypes (eager raises)": """\
func @f(%x: f16[B, 8], %w: f32[4, 8]) -> Tensor[B, 4] {
  %0 : Tensor[B, 4] = torch.call(%x, %w) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%0)
}
""",
    "max with a dim is a primitive (values and indices)": """\
func @f(%x: f32[B, 8]) -> tuple[f32[B], i64[B]] {
  %0 : int = py.constant() {value = 1}
  %1 : tuple[f32[B], i64[B]] = torch.method(%x, %0) {method = "max", aten = "aten::max.dim"}
  func.return(%1)
}
""",
    "a complex variance": """\
func @f(%x: c64[B, 8]) -> f32[B] {
  %0 : int = py.constant() {value = 1}
  %1 : f32[B] = torch.method(%x, %0) {method = "var", aten = "aten::var.dim"}
  func.return(%1)
}
""",
    "mean to another dtype": """\
func @f(%x: f32[B, 8]) -> f64[B] {
  %0 : int = py.constant() {value = 1}
  %1 : dtype = py.constant() {value = "torch.float64"}
  %2 : f64[B] = torch.method(%x, %0, %1) {method = "mean", kwnames = ("dtype",), aten = "aten::mean.dim"}
  func.return(%2)
}
""",
    "flatten with start_dim after end_dim (eager raises)": """\
func @f(%x: f32[B, 4, 8]) -> Tensor {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 1}
  %2 : Tensor = torch.method(%x, %0, %1) {method = "flatten", alias_of = 0, aten = "aten::flatten.using_ints"}
  func.return(%2)
}
""",
    "hardtanh with min_val > max_val (F.hardtanh raises)": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 2.0}
  %1 : float = py.constant() {value = 1.0}
  %2 : f32[B, 8] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.hardtanh", aten = "aten::hardtanh"}
  func.return(%2)
}
""",
    "a pad by nothing of an argument (eager's copy is another tensor)": """\
func @f(%x: f32[B, 8]) -> f32[B, 8] {
  %0 : tuple[int, int] = py.constant() {value = (0, 0)}
  %1 : f32[B, 8] = torch.call(%x, %0) {callee = "torch.nn.functional.pad", aten = "aten::pad"}
  func.return(%1)
}
""",
    "a pad by nothing of a tensor read again after it": """\
func @f(%x: f32[B, 8]) -> tuple[f32[B, 8], f32[B, 8]] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : tuple[int, int] = py.constant() {value = (0, 0)}
  %2 : f32[B, 8] = torch.call(%0, %1) {callee = "torch.nn.functional.pad", aten = "aten::pad"}
  %3 : tuple[f32[B, 8], f32[B, 8]] = py.tuple(%0, %2)
  func.return(%3)
}
""",
    "a pad by something": """\
func @f(%x: f32[B, 8]) -> f32[B, 9] {
  %0 : f32[B, 8] = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : tuple[int, int] = py.constant() {value = (0, 1)}
  %2 : f32[B, 9] = torch.call(%0, %1) {callee = "torch.nn.functional.pad", aten = "aten::pad"}
  func.return(%2)
}
""",
    "a layer norm whose batch size is not known: its primitives could not fuse": """\
func @f(%x: f32[?, 65, 64], %w: f32[64], %b: f32[64]) -> f32[?, 65, 64] {
  %0 : tuple[int] = py.constant() {value = (64,)}
  %1 : float = py.constant() {value = 1e-05}
  %2 : f32[?, 65, 64] = torch.call(%x, %0, %w, %b, %1) {callee = "torch.nn.functional.layer_norm", aten = "aten::layer_norm"}
  func.return(%2)
}
""",
    "a sigmoid on a tensor of unknown rank": """\
func @f(%x: f32[*]) -> f32[*] {
  %0 : f32[*] = torch.call(%x) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  func.return(%0)
}
""",
    "masked_fill whose mask is not known to be bool": """\
func @f(%x: f32[B, 8], %m: Tensor[B, 8]) -> f32[B, 8] {
  %0 : float = py.constant() {value = 0.0}
  %1 : f32[B, 8] = torch.method(%x, %m, %0) {method = "masked_fill", aten = "aten::masked_fill.Scalar"}
  func.return(%1)
}
""",
}


@pytest.mark.parametrize("why", list(KEPT))
def test_kept(why: str) -> None:
    text = KEPT[why]
    assert run(text) == text


def test_decomposes_inside_branches() -> None:
    text = """\
func @f(%x: f32[B, 8], %c: bool) -> f32[B, 8] {
  %0 : f32[B, 8] = scf.if(%c) {
    %1 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%1)
  } {
    scf.yield(%x)
  }
  func.return(%0)
}
"""
    assert run(text) == """\
func @f(%x: f32[B, 8], %c: bool) -> f32[B, 8] {
  %0 : f32[B, 8] = scf.if(%c) {
    %1 : int = py.constant() {value = 0}
    %2 : f32[B, 8] = torch.call(%x, %1) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
    scf.yield(%2)
  } {
    scf.yield(%x)
  }
  func.return(%0)
}
"""

"""Canonicalization, IR in and IR out: constant folding with Python's exact semantics (and what
must not fold), constant branches and loops, CSE only where nothing can tell, dead code, exact
int/bool algebra. Then every example compiled through the pass against eager, and random
int/float/bool expressions folded against Python."""

from __future__ import annotations

import importlib
import math
import operator
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core import ops  # noqa: E402
from ir.core.graph import Block, Program, Region, Value  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes.canonicalize import DEAD_CODE_RULES, RULES, canonicalize, cse  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.rewrite import apply_rules  # noqa: E402
from ir.core.types import BOOL, FLOAT, INT, ListType, Type  # noqa: E402
from ir.torchapi.dtypes import python_binary, python_unary  # noqa: E402
from ir.core.verifier import verify  # noqa: E402

EXAMPLES = sorted(
    p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


def run(text: str) -> str:
    program = parse_program(text)
    verify(program)
    canonicalize(program)
    verify(program)
    out = print_program(program)
    again = parse_program(out)
    canonicalize(again)
    assert print_program(again) == out, "canonicalize is not idempotent"
    return out


def check(before: str, after: str) -> None:
    assert run(before) == after


def unchanged(text: str) -> None:
    check(text, text)


# -- constant folding -----------------------------------------------------------------------------
def test_python_arithmetic_folds_with_python_semantics() -> None:
    check(
        """\
func @f() -> tuple[int, int, float, int, int, int, bool, int] {
  %0 : int = py.constant() {value = 7}
  %1 : int = py.constant() {value = 2}
  %2 : int = py.unary(%1) {op = "-"}
  %3 : int = py.binary(%0, %2) {op = "//"}
  %4 : int = py.unary(%0) {op = "-"}
  %5 : int = py.constant() {value = 3}
  %6 : int = py.binary(%4, %5) {op = "%"}
  %7 : float = py.binary(%0, %1) {op = "/"}
  %8 : int = py.constant() {value = 10}
  %9 : int = py.binary(%1, %8) {op = "**"}
  %10 : bool = py.constant() {value = True}
  %11 : int = py.binary(%10, %10) {op = "+"}
  %12 : int = py.binary(%0, %5) {op = "^"}
  %13 : bool = py.compare(%4, %6) {op = "<"}
  %14 : int = py.unary(%10) {op = "~"}
  %15 : tuple[int, int, float, int, int, int, bool, int] = py.tuple(%3, %6, %7, %9, %11, %12, %13, %14)
  func.return(%15)
}
""",
        """\
func @f() -> tuple[int, int, float, int, int, int, bool, int] {
  %0 : tuple[int, int, float, int, int, int, bool, int] = py.constant() {value = (-4, 2, 3.5, 1024, 2, 4, True, -2)}
  func.return(%0)
}
""",
    )


def test_builtins_and_exact_math_functions_fold() -> None:
    check(
        """\
func @f() -> tuple[int, float, int, int, float, int, int, int, bool, int, float] {
  %0 : float = py.constant() {value = 2.5}
  %1 : int = py.call(%0) {callee = "int"}
  %2 : int = py.constant() {value = 3}
  %3 : float = py.call(%2) {callee = "float"}
  %4 : int = py.call(%0) {callee = "round"}
  %5 : int = py.unary(%2) {op = "-"}
  %6 : int = py.call(%5) {callee = "abs"}
  %7 : float = py.constant() {value = 16.0}
  %8 : float = py.call(%7) {callee = "math.sqrt"}
  %9 : int = py.call(%0) {callee = "math.floor"}
  %10 : int = py.call(%2, %5) {callee = "min"}
  %11 : str = py.constant() {value = "abc"}
  %12 : int = py.call(%11) {callee = "len"}
  %13 : bool = py.call(%11) {callee = "bool"}
  %14 : int = py.call(%0) {callee = "math.ceil"}
  %15 : float = py.call(%0, %2) {callee = "round"}
  %16 : tuple[int, float, int, int, float, int, int, int, bool, int, float] = py.tuple(%1, %3, %4, %6, %8, %9, %10, %12, %13, %14, %15)
  func.return(%16)
}
""",
        """\
func @f() -> tuple[int, float, int, int, float, int, int, int, bool, int, float] {
  %0 : tuple[int, float, int, int, float, int, int, int, bool, int, float] = py.constant() {value = (2, 3.0, 2, 3, 4.0, 2, -3, 3, True, 3, 2.5)}
  func.return(%0)
}
""",
    )


def test_comparisons_and_none_fold() -> None:
    check(
        """\
func @f(%x: Tensor) -> tuple[bool, bool, bool, bool, bool, bool] {
  %0 : int = py.constant() {value = 1}
  %1 : float = py.constant() {value = 1.0}
  %2 : bool = py.compare(%0, %1) {op = "=="}
  %3 : None = py.constant() {value = None}
  %4 : bool = py.compare(%3, %3) {op = "is"}
  %5 : bool = py.compare(%0, %3) {op = "is not"}
  %6 : bool = py.compare(%x, %3) {op = "is"}
  %7 : str = py.constant() {value = "a"}
  %8 : str = py.constant() {value = "b"}
  %9 : bool = py.compare(%7, %8) {op = "<"}
  %10 : tuple[int, float] = py.tuple(%0, %1)
  %11 : int = py.constant() {value = 2}
  %12 : bool = py.compare(%11, %10) {op = "in"}
  %13 : tuple[bool, bool, bool, bool, bool, bool] = py.tuple(%2, %4, %5, %6, %9, %12)
  func.return(%13)
}
""",
        """\
func @f(%x: Tensor) -> tuple[bool, bool, bool, bool, bool, bool] {
  %0 : tuple[bool, bool, bool, bool, bool, bool] = py.constant() {value = (True, True, True, False, True, False)}
  func.return(%0)
}
""",
    )


def test_membership_in_a_list_display_of_constants_folds_when_nothing_else_sees_the_list() -> None:
    """`mode not in ["batch", "row"]` (torchvision's stochastic depth); a list another op also
    reads (and could change) is left as it is."""
    text = """\
func @f() -> bool {
  %0 : str = py.constant() {value = "row"}
  %1 : str = py.constant() {value = "batch"}
  %2 : list[str] = py.list(%1, %0)
  %3 : bool = py.compare(%0, %2) {op = "not in"}
  func.return(%3)
}
"""
    check(text, """\
func @f() -> bool {
  %0 : bool = py.constant() {value = False}
  func.return(%0)
}
""")
    shared = text.replace("  func.return(%3)", """  %4 : None = py.list_append(%2, %1)
  func.return(%3)""")
    assert 'op = "not in"' in run(shared)


def test_a_dropout_lowered_as_random_settles_once_training_is_known() -> None:
    """`F.dropout(x, p, training=training)` in a helper: lowered before `training` was known, so
    marked random (not pure: never merged or removed). Once inlining makes `training` the
    constant False, it draws nothing and returns its input (alias_of = 0), and a dead one goes;
    with `training` True, or unknown, it stays random."""
    check("""\
func @f(%x: f32[4], %t: bool) -> tuple[f32[4], f32[4]] {
  %0 : float = py.constant() {value = 0.5}
  %1 : bool = py.constant() {value = False}
  %2 : f32[4] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %3 : f32[4] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %4 : bool = py.constant() {value = True}
  %5 : f32[4] = torch.call(%x, %0, %4) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %6 : f32[4] = torch.call(%x, %0, %t) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %7 : tuple[f32[4], f32[4]] = py.tuple(%2, %5)
  func.return(%7)
}
""", """\
func @f(%x: f32[4], %t: bool) -> tuple[f32[4], f32[4]] {
  %0 : float = py.constant() {value = 0.5}
  %1 : bool = py.constant() {value = False}
  %2 : f32[4] = torch.call(%x, %0, %1) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), alias_of = 0, aten = "aten::dropout"}
  %3 : bool = py.constant() {value = True}
  %4 : f32[4] = torch.call(%x, %0, %3) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %5 : f32[4] = torch.call(%x, %0, %t) {callee = "torch.nn.functional.dropout", kwnames = ("p", "training"), random = True, aten = "aten::dropout"}
  %6 : tuple[f32[4], f32[4]] = py.tuple(%2, %4)
  func.return(%6)
}
""")


def test_a_cast_to_the_dtype_a_tensor_has_is_the_tensor() -> None:
    """`x.to(torch.float32)` and `x.to(y.dtype)` of a float32 x return x itself in eager; a cast to
    another dtype, or of a tensor whose dtype is not known, stays."""
    check("""\
func @f(%x: f32[4], %y: f32[4], %z: f64[4], %u: Tensor) -> tuple[f32[4], f32[4], f64[4], Tensor] {
  %0 : dtype = py.constant() {value = "torch.float32"}
  %1 : f32[4] = torch.method(%x, %0) {method = "to", aten = "aten::to.dtype"}
  %2 : dtype = py.getattr(%y) {attr = "dtype"}
  %3 : f32[4] = torch.method(%x, %2) {method = "to", aten = "aten::to.dtype"}
  %4 : dtype = py.constant() {value = "torch.float64"}
  %5 : f64[4] = torch.method(%x, %4) {method = "to", aten = "aten::to.dtype"}
  %6 : Tensor = torch.method(%u, %0) {method = "to", aten = "aten::to.dtype"}
  %7 : tuple[f32[4], f32[4], f64[4], Tensor] = py.tuple(%1, %3, %5, %6)
  func.return(%7)
}
""", """\
func @f(%x: f32[4], %y: f32[4], %z: f64[4], %u: Tensor) -> tuple[f32[4], f32[4], f64[4], Tensor] {
  %0 : dtype = py.constant() {value = "torch.float32"}
  %1 : dtype = py.constant() {value = "torch.float64"}
  %2 : f64[4] = torch.method(%x, %1) {method = "to", aten = "aten::to.dtype"}
  %3 : Tensor = torch.method(%u, %0) {method = "to", aten = "aten::to.dtype"}
  %4 : tuple[f32[4], f32[4], f64[4], Tensor] = py.tuple(%x, %x, %2, %3)
  func.return(%4)
}
""")


def test_a_cast_to_its_own_dtype_and_an_expand_to_its_own_shape_are_the_tensor() -> None:
    """`x.to(x.dtype)` is x whatever its dtype. `x.expand_as(t)` is x where t is x or the types
    give both one shape (a symbol is one size), in a function that changes no tensor but by
    write-backs (functionalized code) and tells no tensors apart by identity: only that could
    tell eager's new view from x. Unknown or different shapes, and a function that writes in
    place or compares tensors with `is`, keep it."""
    check("""\
func @f(%x: Tensor, %y: Tensor, %p: f32[B, 4], %q: f32[B, 4], %r: f32[?, 4]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor] {
  %0 : dtype = py.getattr(%x) {attr = "dtype"}
  %1 : Tensor = torch.method(%x, %0) {method = "to", aten = "aten::to.dtype"}
  %2 : Tensor = torch.method(%y, %0) {method = "to", aten = "aten::to.dtype"}
  %3 : Tensor = torch.method(%x, %x) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %4 : f32[B, 4] = torch.method(%p, %q) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %5 : f32[?, 4] = torch.method(%p, %r) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %6 : Tensor = torch.method(%x, %y) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %7 : Tensor = torch.method(%y, %4) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  %8 : tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor] = py.tuple(%1, %2, %3, %4, %5, %6)
  func.return(%8)
}
func @g(%x: Tensor, %y: Tensor) -> tuple[Tensor, bool] {
  %0 : Tensor = torch.method(%x, %x) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %1 : bool = py.compare(%0, %y) {op = "is"}
  %2 : tuple[Tensor, bool] = py.tuple(%0, %1)
  func.return(%2)
}
func @h(%x: Tensor) -> Tensor {
  %0 : Tensor = torch.method(%x, %x) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %1 : Tensor = torch.method(%0) {method = "t_", mutates = (0,), alias_of = 0, aten = "aten::t_"}
  func.return(%x)
}
""", """\
func @f(%x: Tensor, %y: Tensor, %p: f32[B, 4], %q: f32[B, 4], %r: f32[?, 4]) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor] {
  %0 : dtype = py.getattr(%x) {attr = "dtype"}
  %1 : Tensor = torch.method(%y, %0) {method = "to", aten = "aten::to.dtype"}
  %2 : f32[?, 4] = torch.method(%p, %r) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %3 : Tensor = torch.method(%x, %y) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %4 : Tensor = torch.method(%y, %p) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  %5 : tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor] = py.tuple(%x, %1, %x, %p, %2, %3)
  func.return(%5)
}

func @g(%x: Tensor, %y: Tensor) -> tuple[Tensor, bool] {
  %0 : Tensor = torch.method(%x, %x) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %1 : bool = py.compare(%0, %y) {op = "is"}
  %2 : tuple[Tensor, bool] = py.tuple(%0, %1)
  func.return(%2)
}

func @h(%x: Tensor) -> Tensor {
  %0 : Tensor = torch.method(%x, %x) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %1 : Tensor = torch.method(%0) {method = "t_", mutates = (0,), alias_of = 0, aten = "aten::t_"}
  func.return(%x)
}
""")


def test_an_expand_to_the_sizes_a_tensor_has_is_the_tensor() -> None:
    """`x.expand(y.size(0), 4)` where the types give y's dim 0 and 4 as x's sizes (or -1) is x,
    under the same conditions as expand_as; a size not known, or more dims, keep it."""
    check("""\
func @f(%x: f32[B, 4], %y: f32[B, 8], %z: f32[?, 4]) -> tuple[f32[B, 4], f32[B, 4], f32[B, 4], f32[B, 3, 4]] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%y, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 4}
  %3 : f32[B, 4] = torch.method(%x, %1, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %4 : int = py.constant() {value = -1}
  %5 : f32[B, 4] = torch.method(%x, %4, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %6 : int = torch.method(%z, %0) {method = "size", aten = "aten::size.int"}
  %7 : f32[B, 4] = torch.method(%x, %6, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %8 : int = py.constant() {value = 3}
  %9 : f32[B, 3, 4] = torch.method(%x, %1, %8, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %10 : tuple[f32[B, 4], f32[B, 4], f32[B, 4], f32[B, 3, 4]] = py.tuple(%3, %5, %7, %9)
  func.return(%10)
}
""", """\
func @f(%x: f32[B, 4], %y: f32[B, 8], %z: f32[?, 4]) -> tuple[f32[B, 4], f32[B, 4], f32[B, 4], f32[B, 3, 4]] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%y, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 4}
  %3 : int = torch.method(%z, %0) {method = "size", aten = "aten::size.int"}
  %4 : f32[B, 4] = torch.method(%x, %3, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %5 : int = py.constant() {value = 3}
  %6 : f32[B, 3, 4] = torch.method(%x, %1, %5, %2) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %7 : tuple[f32[B, 4], f32[B, 4], f32[B, 4], f32[B, 3, 4]] = py.tuple(%x, %x, %4, %6)
  func.return(%7)
}
""")


def test_what_raises_or_would_change_type_or_platform_is_not_folded() -> None:
    """Division by zero, huge ints, a float result typed int (2 ** -1), a bool result typed int
    (min(True, 5)), functions of the C library (exp, float ** float), domain errors and NaN
    stay as they are."""
    unchanged(
        """\
func @f() -> tuple[int, int, float, int, int, int, int, float, float, int, float, float] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 0}
  %2 : int = py.binary(%0, %1) {op = "//"}
  %3 : int = py.binary(%0, %1) {op = "%"}
  %4 : float = py.binary(%0, %1) {op = "/"}
  %5 : int = py.constant() {value = 2}
  %6 : int = py.constant() {value = 100}
  %7 : int = py.binary(%5, %6) {op = "**"}
  %8 : int = py.binary(%0, %6) {op = "<<"}
  %9 : int = py.constant() {value = -1}
  %10 : int = py.binary(%5, %9) {op = "**"}
  %11 : bool = py.constant() {value = True}
  %12 : int = py.call(%11, %6) {callee = "min"}
  %13 : float = py.constant() {value = 1.0}
  %14 : float = py.call(%13) {callee = "math.exp"}
  %15 : float = py.constant() {value = -1.0}
  %16 : float = py.call(%15) {callee = "math.sqrt"}
  %17 : float = py.constant() {value = inf}
  %18 : int = py.call(%17) {callee = "int"}
  %19 : float = py.binary(%17, %17) {op = "-"}
  %20 : float = py.constant() {value = 0.5}
  %21 : float = py.binary(%5, %20) {op = "**"}
  %22 : tuple[int, int, float, int, int, int, int, float, float, int, float, float] = py.tuple(%2, %3, %4, %7, %8, %10, %12, %14, %16, %18, %19, %21)
  func.return(%22)
}
"""
    )


def test_float_power_folds_only_when_exact() -> None:
    """2 ** -3 is exactly 0.125 everywhere; 3 ** -1 and 2.0 ** 0.5 depend on C's pow()."""
    check(
        """\
func @f() -> tuple[float, float, float] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 3}
  %2 : int = py.unary(%1) {op = "-"}
  %3 : float = py.binary(%0, %2) {op = "**"}
  %4 : int = py.constant() {value = 1}
  %5 : int = py.unary(%4) {op = "-"}
  %6 : float = py.binary(%1, %5) {op = "**"}
  %7 : float = py.constant() {value = 2.0}
  %8 : float = py.constant() {value = 0.5}
  %9 : float = py.binary(%7, %8) {op = "**"}
  %10 : tuple[float, float, float] = py.tuple(%3, %6, %9)
  func.return(%10)
}
""",
        """\
func @f() -> tuple[float, float, float] {
  %0 : int = py.constant() {value = 3}
  %1 : float = py.constant() {value = 0.125}
  %2 : int = py.constant() {value = -1}
  %3 : float = py.binary(%0, %2) {op = "**"}
  %4 : float = py.constant() {value = 2.0}
  %5 : float = py.constant() {value = 0.5}
  %6 : float = py.binary(%4, %5) {op = "**"}
  %7 : tuple[float, float, float] = py.tuple(%1, %3, %6)
  func.return(%7)
}
""",
    )


def test_tuple_items_and_unpacking_forward_the_elements() -> None:
    check(
        """\
func @f(%x: Tensor, %n: int) -> tuple[Tensor, int, int] {
  %0 : tuple[Tensor, int] = py.tuple(%x, %n)
  %1 : int = py.constant() {value = 0}
  %2 : Tensor = py.getitem(%0, %1)
  %a : Tensor, %b : int = py.unpack(%0)
  %3 : int = py.call(%0) {callee = "len"}
  %4 : Tensor = torch.call(%2, %a) {callee = "torch.add"}
  %5 : tuple[Tensor, int, int] = py.tuple(%4, %b, %3)
  func.return(%5)
}
""",
        """\
func @f(%x: Tensor, %n: int) -> tuple[Tensor, int, int] {
  %0 : int = py.constant() {value = 2}
  %1 : Tensor = torch.call(%x, %x) {callee = "torch.add"}
  %2 : tuple[Tensor, int, int] = py.tuple(%1, %n, %0)
  func.return(%2)
}
""",
    )


def test_the_truth_of_a_list_display_folds_but_not_a_tensors() -> None:
    check(
        """\
func @f(%x: Tensor) -> tuple[bool, bool, bool] {
  %xs : list[Tensor] = py.list(%x)
  %0 : bool = py.call(%xs) {callee = "bool"}
  %e : list[Tensor] = py.list()
  %1 : bool = py.call(%e) {callee = "bool"}
  %2 : bool = py.call(%x) {callee = "bool"}
  %3 : tuple[bool, bool, bool] = py.tuple(%0, %1, %2)
  func.return(%3)
}
""",
        """\
func @f(%x: Tensor) -> tuple[bool, bool, bool] {
  %0 : bool = py.constant() {value = True}
  %1 : bool = py.constant() {value = False}
  %2 : bool = py.call(%x) {callee = "bool"}
  %3 : tuple[bool, bool, bool] = py.tuple(%0, %1, %2)
  func.return(%3)
}
""",
    )


def test_len_of_a_list_display_folds_only_when_nothing_can_grow_it() -> None:
    check(
        """\
func @f(%x: Tensor, %c: bool) -> tuple[int, int, int] {
  %xs : list[Tensor] = py.list(%x, %x)
  %0 : int = py.call(%xs) {callee = "len"}
  %ys : list[Tensor] = py.list(%x)
  scf.if(%c) {
    py.list_append(%ys, %x)
    scf.yield()
  } {
    scf.yield()
  }
  %1 : int = py.call(%ys) {callee = "len"}
  %zs : list[Tensor] = py.list(%x)
  py.list_append(%zs, %x)
  %2 : int = py.call(%zs) {callee = "len"}
  %3 : tuple[int, int, int] = py.tuple(%0, %1, %2)
  func.return(%3)
}
""",
        """\
func @f(%x: Tensor, %c: bool) -> tuple[int, int, int] {
  %0 : int = py.constant() {value = 2}
  %ys : list[Tensor] = py.list(%x)
  scf.if(%c) {
    py.list_append(%ys, %x)
    scf.yield()
  } {
    scf.yield()
  }
  %1 : int = py.call(%ys) {callee = "len"}
  %2 : tuple[int, int, int] = py.tuple(%0, %1, %0)
  func.return(%2)
}
""",
    )


def test_items_slices_and_sums_of_a_list_display_nothing_changes_fold() -> None:
    """swin's `shift_size = shift_size.copy()` of a pinned `[3, 3]`, set to 0 where the window
    covers the feature map (here under a branch that folds), then `sum(shift_size) > 0` and
    `-shift_size[0]`: all constants. A list that a store at an unknown index may change stays."""
    check(
        """\
func @f(%i: int) -> tuple[int, bool, int, int] {
  %0 : int = py.constant() {value = 0}
  %three : int = py.constant() {value = 3}
  %none : None = py.constant() {value = None}
  %t : bool = py.constant() {value = True}
  %pinned : list[int] = py.list(%three, %three)
  %copy : list[int] = py.slice(%pinned, %none, %none, %none)
  scf.if(%t) {
    py.list_setitem(%copy, %0, %0)
    scf.yield()
  } {
    scf.yield()
  }
  %s : int = py.call(%copy) {callee = "sum"}
  %pos : bool = py.compare(%s, %0) {op = ">"}
  %first : int = py.getitem(%copy, %0)
  %other : list[int] = py.list(%three, %three)
  py.list_setitem(%other, %i, %0)
  %unknown : int = py.getitem(%other, %0)
  %1 : tuple[int, bool, int, int] = py.tuple(%s, %pos, %first, %unknown)
  func.return(%1)
}
""",
        """\
func @f(%i: int) -> tuple[int, bool, int, int] {
  %0 : int = py.constant() {value = 0}
  %three : int = py.constant() {value = 3}
  %1 : bool = py.constant() {value = True}
  %other : list[int] = py.list(%three, %three)
  py.list_setitem(%other, %i, %0)
  %unknown : int = py.getitem(%other, %0)
  %2 : tuple[int, bool, int, int] = py.tuple(%three, %1, %0, %unknown)
  func.return(%2)
}
""",
    )


def test_out_of_range_items_and_length_mismatches_stay() -> None:
    unchanged(
        """\
func @f(%n: int) -> int {
  %0 : tuple[int, int] = py.tuple(%n, %n)
  %1 : int = py.constant() {value = 2}
  %2 : int = py.getitem(%0, %1)
  %a : int, %b : int, %c : int = py.unpack(%0)
  %3 : int = py.binary(%2, %c) {op = "+"}
  func.return(%3)
}
"""
    )


def test_sizes_fixed_by_the_type_fold_symbols_stay() -> None:
    check(
        """\
func @f(%x: f32[2, B, 4]) -> tuple[int, int, int, int, int, int, int, int, int, int] {
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 1}
  %3 : int = py.unary(%2) {op = "-"}
  %4 : int = torch.method(%x, %3) {method = "size", aten = "aten::size.int"}
  %5 : int = torch.method(%x, %2) {method = "size", aten = "aten::size.int"}
  %6 : int = torch.method(%x) {method = "dim", aten = "aten::dim"}
  %7 : int = py.getattr(%x) {attr = "ndim"}
  %8 : int = torch.method(%x) {method = "numel", aten = "aten::numel"}
  %9 : tuple[int, int, int] = py.getattr(%x) {attr = "shape"}
  %10 : int = py.constant() {value = 2}
  %11 : int = py.getitem(%9, %10)
  %12 : tuple[int, int, int] = torch.method(%x) {method = "size"}
  %a : int, %b : int, %c : int = py.unpack(%12)
  %13 : int = py.call(%9) {callee = "len"}
  %14 : tuple[int, int, int, int, int, int, int, int, int, int] = py.tuple(%1, %4, %5, %6, %7, %8, %11, %a, %b, %13)
  func.return(%14)
}
""",
        """\
func @f(%x: f32[2, B, 4]) -> tuple[int, int, int, int, int, int, int, int, int, int] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 1}
  %2 : int = py.constant() {value = 4}
  %3 : int = torch.method(%x, %1) {method = "size", aten = "aten::size.int"}
  %4 : int = py.constant() {value = 3}
  %5 : int = torch.method(%x) {method = "numel", aten = "aten::numel"}
  %6 : tuple[int, int, int] = torch.method(%x) {method = "size"}
  %a : int, %b : int, %c : int = py.unpack(%6)
  %7 : tuple[int, int, int, int, int, int, int, int, int, int] = py.tuple(%0, %2, %3, %4, %4, %5, %2, %0, %b, %4)
  func.return(%7)
}
""",
    )


def test_sizes_of_unknown_shapes_and_out_of_range_dims_stay() -> None:
    unchanged(
        """\
func @f(%x: f32[2, 3], %y: Tensor) -> tuple[int, int, int] {
  %0 : int = py.constant() {value = 2}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 0}
  %3 : int = torch.method(%y, %2) {method = "size", aten = "aten::size.int"}
  %4 : int = torch.method(%y) {method = "dim", aten = "aten::dim"}
  %5 : tuple[int, int, int] = py.tuple(%1, %3, %4)
  func.return(%5)
}
"""
    )


# -- control flow ---------------------------------------------------------------------------------
def test_if_on_a_constant_runs_one_side() -> None:
    check(
        """\
func @f(%x: Tensor, %xs: list[Tensor]) -> Tensor {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 2}
  %2 : bool = py.compare(%0, %1) {op = "<"}
  %y : Tensor = scf.if(%2) {
    py.list_append(%xs, %x)
    %3 : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%3)
  } {
    %4 : Tensor = torch.call(%x) {callee = "torch.relu"}
    scf.yield(%4)
  }
  %5 : bool = py.unary(%2) {op = "not"}
  %z : Tensor = scf.if(%5) {
    scf.yield(%x)
  } {
    %6 : Tensor = torch.call(%y) {callee = "torch.exp"}
    scf.yield(%6)
  }
  func.return(%z)
}
""",
        """\
func @f(%x: Tensor, %xs: list[Tensor]) -> Tensor {
  py.list_append(%xs, %x)
  %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
  %z : Tensor = torch.call(%y) {callee = "torch.exp"}
  func.return(%z)
}
""",
    )


def test_if_results_both_sides_yield_alike_and_bool_ifs() -> None:
    """`c and True` is c when c is surely a bool (not when c is an argument: `1 and True` is
    True); `False if c else True` is `not c`; equal constants and one outer value forward."""
    check(
        """\
func @f(%x: Tensor, %b: bool, %xs: list[int]) -> tuple[bool, bool, bool, int, Tensor] {
  %n : int = py.call(%xs) {callee = "len"}
  %c : bool = py.compare(%n, %n) {op = "<"}
  %r : bool, %s : bool, %k : int, %y : Tensor = scf.if(%c) {
    %0 : bool = py.constant() {value = True}
    %1 : bool = py.constant() {value = False}
    %2 : int = py.constant() {value = 3}
    scf.yield(%0, %1, %2, %x)
  } {
    %3 : bool = py.constant() {value = False}
    %4 : bool = py.constant() {value = True}
    %5 : int = py.constant() {value = 3}
    scf.yield(%3, %4, %5, %x)
  }
  %t : bool = scf.if(%b) {
    %6 : bool = py.constant() {value = True}
    scf.yield(%6)
  } {
    %7 : bool = py.constant() {value = False}
    scf.yield(%7)
  }
  %8 : tuple[bool, bool, bool, int, Tensor] = py.tuple(%r, %s, %t, %k, %y)
  func.return(%8)
}
""",
        """\
func @f(%x: Tensor, %b: bool, %xs: list[int]) -> tuple[bool, bool, bool, int, Tensor] {
  %n : int = py.call(%xs) {callee = "len"}
  %c : bool = py.compare(%n, %n) {op = "<"}
  %0 : int = py.constant() {value = 3}
  %s : bool = py.unary(%c) {op = "not"}
  %t : bool = scf.if(%b) {
    %1 : bool = py.constant() {value = True}
    scf.yield(%1)
  } {
    %2 : bool = py.constant() {value = False}
    scf.yield(%2)
  }
  %3 : tuple[bool, bool, bool, int, Tensor] = py.tuple(%c, %s, %t, %0, %x)
  func.return(%3)
}
""",
    )


def test_an_if_whose_sides_do_the_same_runs_one_side() -> None:
    """What functionalization leaves of `nn.ReLU(inplace=True)`: `F.relu(x) if m.inplace else
    F.relu(x)`. Equal ops on the same values (the sides' own values paired, nested regions too)
    run once before the if; a pure condition (a read of `inplace`) then goes as dead code, one
    that may do something (a call) stays. Sides that differ in a constant, an attribute or an
    operand stay an if."""
    check(
        """\
func @f(%m: Module[torch.nn.ReLU], %x: Tensor, %b: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor] {
  %c : bool = py.getattr(%m) {attr = "inplace"}
  %y : Tensor = scf.if(%c) {
    %y_1 : Tensor = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%y_1)
  } {
    %0 : Tensor = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%0)
  }
  %d : bool = py.call(%m) {callee = "_guards.some_test", mutates = (0,)}
  %z : Tensor = scf.if(%d) {
    %1 : int = py.constant() {value = 2}
    %2 : Tensor = py.binary(%y, %1) {op = "*"}
    %3 : Tensor = scf.if(%b) {
      %4 : Tensor = torch.call(%2) {callee = "torch.tanh"}
      scf.yield(%4)
    } {
      scf.yield(%2)
    }
    scf.yield(%3)
  } {
    %5 : int = py.constant() {value = 2}
    %6 : Tensor = py.binary(%y, %5) {op = "*"}
    %7 : Tensor = scf.if(%b) {
      %8 : Tensor = torch.call(%6) {callee = "torch.tanh"}
      scf.yield(%8)
    } {
      scf.yield(%6)
    }
    scf.yield(%7)
  }
  %u : Tensor = scf.if(%b) {
    %9 : int = py.constant() {value = 2}
    %10 : Tensor = py.binary(%x, %9) {op = "*"}
    scf.yield(%10)
  } {
    %11 : int = py.constant() {value = 3}
    %12 : Tensor = py.binary(%x, %11) {op = "*"}
    scf.yield(%12)
  }
  %v : Tensor = scf.if(%b) {
    %13 : Tensor = py.binary(%x, %y) {op = "*"}
    scf.yield(%13)
  } {
    %14 : Tensor = py.binary(%x, %y) {op = "+"}
    scf.yield(%14)
  }
  %w : Tensor = scf.if(%b) {
    %15 : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%15)
  } {
    %16 : Tensor = torch.call(%y) {callee = "torch.tanh"}
    scf.yield(%16)
  }
  %17 : tuple[Tensor, Tensor, Tensor, Tensor, Tensor] = py.tuple(%y, %z, %u, %v, %w)
  func.return(%17)
}
""",
        """\
func @f(%m: Module[torch.nn.ReLU], %x: Tensor, %b: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor] {
  %y : Tensor = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
  %d : bool = py.call(%m) {callee = "_guards.some_test", mutates = (0,)}
  %0 : int = py.constant() {value = 2}
  %1 : Tensor = py.binary(%y, %0) {op = "*"}
  %z : Tensor = scf.if(%b) {
    %2 : Tensor = torch.call(%1) {callee = "torch.tanh"}
    scf.yield(%2)
  } {
    scf.yield(%1)
  }
  %u : Tensor = scf.if(%b) {
    %3 : Tensor = py.binary(%x, %0) {op = "*"}
    scf.yield(%3)
  } {
    %4 : int = py.constant() {value = 3}
    %5 : Tensor = py.binary(%x, %4) {op = "*"}
    scf.yield(%5)
  }
  %v : Tensor = scf.if(%b) {
    %6 : Tensor = py.binary(%x, %y) {op = "*"}
    scf.yield(%6)
  } {
    %7 : Tensor = py.binary(%x, %y) {op = "+"}
    scf.yield(%7)
  }
  %w : Tensor = scf.if(%b) {
    %8 : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%8)
  } {
    %9 : Tensor = torch.call(%y) {callee = "torch.tanh"}
    scf.yield(%9)
  }
  %10 : tuple[Tensor, Tensor, Tensor, Tensor, Tensor] = py.tuple(%y, %z, %u, %v, %w)
  func.return(%10)
}
""",
    )


def test_for_loops_that_never_run() -> None:
    check(
        """\
func @f(%x: Tensor) -> tuple[Tensor, Tensor, Tensor] {
  %0 : int = py.constant() {value = 5}
  %1 : int = py.constant() {value = 0}
  %2 : int = py.constant() {value = 1}
  %a : Tensor = scf.for(%0, %1, %2, %x) {
    ^(%i: int, %a_1: Tensor):
    %3 : Tensor = torch.call(%a_1) {callee = "torch.tanh"}
    scf.yield(%3)
  }
  %4 : int = py.unary(%2) {op = "-"}
  %b : Tensor = scf.for(%1, %0, %4, %x) {
    ^(%j: int, %b_1: Tensor):
    %5 : Tensor = torch.call(%b_1) {callee = "torch.tanh"}
    scf.yield(%5)
  }
  %6 : tuple[()] = py.tuple()
  %c : Tensor = scf.for_each(%6, %x) {
    ^(%e: int, %c_1: Tensor):
    %7 : Tensor = torch.call(%c_1) {callee = "torch.tanh"}
    scf.yield(%7)
  }
  %8 : tuple[Tensor, Tensor, Tensor] = py.tuple(%a, %b, %c)
  func.return(%8)
}
""",
        """\
func @f(%x: Tensor) -> tuple[Tensor, Tensor, Tensor] {
  %0 : tuple[Tensor, Tensor, Tensor] = py.tuple(%x, %x, %x)
  func.return(%0)
}
""",
    )


def test_loops_that_run_or_raise_stay() -> None:
    """A step of 0 raises in range(); a non-empty range runs; a while with a condition not
    known to be false may run."""
    unchanged(
        """\
func @f(%x: Tensor, %n: int) -> tuple[Tensor, Tensor, Tensor] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 5}
  %a : Tensor = scf.for(%0, %1, %0, %x) {
    ^(%i: int, %a_1: Tensor):
    %2 : Tensor = torch.call(%a_1) {callee = "torch.tanh"}
    scf.yield(%2)
  }
  %3 : int = py.constant() {value = 1}
  %b : Tensor = scf.for(%0, %3, %3, %x) {
    ^(%j: int, %b_1: Tensor):
    %4 : Tensor = torch.call(%b_1) {callee = "torch.tanh"}
    scf.yield(%4)
  }
  %c : Tensor, %k : int = scf.while(%x, %0) {
    ^(%c_1: Tensor, %k_1: int):
    %5 : bool = py.compare(%k_1, %n) {op = "<"}
    scf.condition(%5, %c_1, %k_1)
  } {
    ^(%c_2: Tensor, %k_2: int):
    %6 : Tensor = torch.call(%c_2) {callee = "torch.tanh"}
    %k_3 : int = py.binary(%k_2, %3) {op = "+"}
    scf.yield(%6, %k_3)
  }
  %7 : tuple[Tensor, Tensor, Tensor] = py.tuple(%a, %b, %c)
  func.return(%7)
}
"""
    )


def test_while_with_a_false_condition_runs_its_condition_region_once() -> None:
    check(
        """\
func @f(%x: Tensor, %xs: list[Tensor]) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %y : Tensor, %k : int = scf.while(%x, %0) {
    ^(%y_1: Tensor, %k_1: int):
    py.list_append(%xs, %y_1)
    %1 : bool = py.constant() {value = False}
    %2 : Tensor = torch.call(%y_1) {callee = "torch.tanh"}
    scf.condition(%1, %2, %k_1)
  } {
    ^(%y_2: Tensor, %k_2: int):
    scf.yield(%y_2, %k_2)
  }
  func.return(%y)
}
""",
        """\
func @f(%x: Tensor, %xs: list[Tensor]) -> Tensor {
  py.list_append(%xs, %x)
  %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
  func.return(%y)
}
""",
    )


def test_early_exit_condition_that_is_always_true_becomes_a_yield() -> None:
    check(
        """\
func @f(%x: Tensor, %n: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %y : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %y_1: Tensor):
    %2 : Tensor = torch.call(%y_1) {callee = "torch.tanh"}
    %3 : bool = py.constant() {value = True}
    scf.condition(%3, %2)
  }
  func.return(%y)
}
""",
        """\
func @f(%x: Tensor, %n: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %y : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %y_1: Tensor):
    %2 : Tensor = torch.call(%y_1) {callee = "torch.tanh"}
    scf.yield(%2)
  }
  func.return(%y)
}
""",
    )


def test_loop_carried_values_passed_on_unchanged_or_never_read_go() -> None:
    check(
        """\
func @f(%x: Tensor, %n: int, %s: float) -> tuple[Tensor, float] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %y : Tensor, %scale : float, %unused : int = scf.for(%0, %n, %1, %x, %s, %0) {
    ^(%i: int, %y_1: Tensor, %scale_1: float, %unused_1: int):
    %2 : Tensor = py.binary(%y_1, %scale_1) {op = "*"}
    %3 : int = py.binary(%unused_1, %i) {op = "+"}
    scf.yield(%2, %scale_1, %3)
  }
  %z : Tensor, %k : int = scf.while(%y, %0) {
    ^(%z_1: Tensor, %k_1: int):
    %4 : bool = py.compare(%k_1, %n) {op = "<"}
    scf.condition(%4, %z_1, %k_1)
  } {
    ^(%z_2: Tensor, %k_2: int):
    %k_3 : int = py.binary(%k_2, %1) {op = "+"}
    scf.yield(%z_2, %k_3)
  }
  %5 : tuple[Tensor, float] = py.tuple(%z, %scale)
  func.return(%5)
}
""",
        """\
func @f(%x: Tensor, %n: int, %s: float) -> tuple[Tensor, float] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %y : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %y_1: Tensor):
    %2 : Tensor = py.binary(%y_1, %s) {op = "*"}
    scf.yield(%2)
  }
  %k : int = scf.while(%0) {
    ^(%k_1: int):
    %3 : bool = py.compare(%k_1, %n) {op = "<"}
    scf.condition(%3, %k_1)
  } {
    ^(%k_2: int):
    %k_3 : int = py.binary(%k_2, %1) {op = "+"}
    scf.yield(%k_3)
  }
  %4 : tuple[Tensor, float] = py.tuple(%y, %s)
  func.return(%4)
}
""",
    )


def test_for_loops_without_results_or_effects_go_while_loops_stay() -> None:
    check(
        """\
func @f(%x: Tensor, %n: int, %xs: list[int], %out: list[Tensor]) -> None {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  scf.for(%0, %n, %1) {
    ^(%i: int):
    %2 : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield()
  }
  scf.for_each(%xs) {
    ^(%e: int):
    %3 : bool = py.compare(%e, %n) {op = "<"}
    scf.condition(%3)
  }
  scf.for(%0, %n, %1) {
    ^(%j: int):
    py.list_append(%out, %x)
    scf.yield()
  }
  scf.while() {
    %4 : bool = py.compare(%n, %0) {op = ">"}
    scf.condition(%4)
  } {
    scf.yield()
  }
  %5 : None = py.constant() {value = None}
  func.return(%5)
}
""",
        """\
func @f(%x: Tensor, %n: int, %xs: list[int], %out: list[Tensor]) -> None {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  scf.for(%0, %n, %1) {
    ^(%j: int):
    py.list_append(%out, %x)
    scf.yield()
  }
  scf.while() {
    %2 : bool = py.compare(%n, %0) {op = ">"}
    scf.condition(%2)
  } {
    scf.yield()
  }
  %3 : None = py.constant() {value = None}
  func.return(%3)
}
""",
    )


def test_a_for_loop_whose_step_is_not_known_stays() -> None:
    """range(0, n, step) raises for step 0, even with an empty body."""
    unchanged(
        """\
func @f(%n: int, %step: int) -> None {
  %0 : int = py.constant() {value = 0}
  scf.for(%0, %n, %step) {
    ^(%i: int):
    scf.yield()
  }
  %1 : None = py.constant() {value = None}
  func.return(%1)
}
"""
    )


# -- algebra --------------------------------------------------------------------------------------
def test_int_identities_on_surely_int_values() -> None:
    check(
        """\
func @f(%xs: list[Tensor], %b: bool) -> tuple[int, int, int, int, int, bool, bool] {
  %n : int = py.call(%xs) {callee = "len"}
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : int = py.binary(%n, %0) {op = "+"}
  %3 : int = py.binary(%1, %2) {op = "*"}
  %4 : int = py.binary(%3, %1) {op = "//"}
  %5 : int = py.binary(%4, %0) {op = "-"}
  %6 : int = py.binary(%0, %n) {op = "+"}
  %7 : int = py.binary(%n, %0) {op = "*"}
  %8 : int = py.call(%6) {callee = "int"}
  %9 : bool = py.compare(%n, %1) {op = ">"}
  %10 : bool = py.unary(%9) {op = "not"}
  %11 : bool = py.unary(%10) {op = "not"}
  %12 : bool = py.call(%11) {callee = "bool"}
  %13 : tuple[int, int, int, int, int, bool, bool] = py.tuple(%5, %6, %7, %8, %n, %12, %b)
  func.return(%13)
}
""",
        """\
func @f(%xs: list[Tensor], %b: bool) -> tuple[int, int, int, int, int, bool, bool] {
  %n : int = py.call(%xs) {callee = "len"}
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : bool = py.compare(%n, %1) {op = ">"}
  %3 : tuple[int, int, int, int, int, bool, bool] = py.tuple(%n, %n, %0, %n, %n, %2, %b)
  func.return(%3)
}
""",
    )


def test_no_algebra_on_arguments_floats_or_tensors() -> None:
    """An int argument may hold a bool (True + 0 is 1), x + 0.0 turns -0.0 into 0.0, and x * 1
    on a tensor is a new tensor; `not not b` of a bool argument may not be a bool."""
    unchanged(
        """\
func @f(%n: int, %y: float, %x: Tensor, %b: bool) -> tuple[int, float, Tensor, bool] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.binary(%n, %0) {op = "+"}
  %2 : float = py.constant() {value = 0.0}
  %3 : float = py.binary(%y, %2) {op = "+"}
  %4 : int = py.constant() {value = 1}
  %5 : Tensor = py.binary(%x, %4) {op = "*"}
  %6 : bool = py.unary(%b) {op = "not"}
  %7 : bool = py.unary(%6) {op = "not"}
  %8 : tuple[int, float, Tensor, bool] = py.tuple(%1, %3, %5, %7)
  func.return(%8)
}
"""
    )


# -- common subexpressions ------------------------------------------------------------------------
def test_cse_of_constants_and_python_values() -> None:
    check(
        """\
func @f(%self: Module[M], %x: Tensor, %c: bool) -> tuple[int, int, int, int, float, float] {
  %0 : int = py.constant() {value = 1}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 1}
  %3 : int = torch.method(%x, %2) {method = "size", aten = "aten::size.int"}
  %4 : int = py.getattr(%self) {attr = "heads"}
  %5 : int = scf.if(%c) {
    %6 : int = py.getattr(%self) {attr = "heads"}
    scf.yield(%6)
  } {
    scf.yield(%4)
  }
  %7 : float = py.constant() {value = 0.0}
  %8 : float = py.constant() {value = -0.0}
  %9 : tuple[int, int, int, int, float, float] = py.tuple(%1, %3, %4, %5, %7, %8)
  func.return(%9)
}
""",
        """\
func @f(%self: Module[M], %x: Tensor, %c: bool) -> tuple[int, int, int, int, float, float] {
  %0 : int = py.constant() {value = 1}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.getattr(%self) {attr = "heads"}
  %3 : float = py.constant() {value = 0.0}
  %4 : float = py.constant() {value = -0.0}
  %5 : tuple[int, int, int, int, float, float] = py.tuple(%1, %1, %2, %2, %3, %4)
  func.return(%5)
}
""",
    )


def test_no_cse_across_a_write_or_a_call() -> None:
    """x.sum() after x.add_(1), self.heads after a submodule call, x.size(0) inside a loop that
    resizes x later in its body: each may differ from the first."""
    unchanged(
        """\
func @f(%self: Module[M], %x: Tensor, %n: int) -> tuple[bool, bool, int, int, int, int] {
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.call(%x) {callee = "bool"}
  %2 : int = py.constant() {value = 1}
  %3 : Tensor = torch.method(%x, %2) {method = "add_", mutates = (0,), alias_of = 0}
  %4 : bool = py.call(%x) {callee = "bool"}
  %5 : int = py.getattr(%self) {attr = "heads"}
  %6 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %7 : Tensor = module.call(%6, %x)
  %8 : int = py.getattr(%self) {attr = "heads"}
  %9 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %k : int = scf.for(%0, %n, %2, %0) {
    ^(%i: int, %k_1: int):
    %10 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
    %11 : Tensor = torch.method(%x) {method = "unsqueeze_", mutates = (0,), alias_of = 0}
    scf.yield(%10)
  }
  %12 : tuple[bool, bool, int, int, int, int] = py.tuple(%1, %4, %5, %8, %9, %k)
  func.return(%12)
}
"""
    )


def test_cse_of_new_tensors_only_where_nothing_can_tell_them_apart() -> None:
    """Two `x * 2` merge when both are only read; not when one is returned (the caller could
    mutate one), and random ops never merge."""
    check(
        """\
func @f(%x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor] {
  %0 : int = py.constant() {value = 2}
  %a : Tensor = py.binary(%x, %0) {op = "*"}
  %b : Tensor = py.binary(%x, %0) {op = "*"}
  %1 : Tensor = torch.call(%a, %b) {callee = "torch.add"}
  %c : Tensor = py.binary(%x, %0) {op = "*"}
  %d : Tensor = py.binary(%x, %0) {op = "*"}
  %r : Tensor = torch.call(%x) {callee = "torch.rand_like", random = True}
  %s : Tensor = torch.call(%x) {callee = "torch.rand_like", random = True}
  %2 : tuple[Tensor, Tensor, Tensor, Tensor] = py.tuple(%1, %c, %d, %r)
  %3 : Tensor = torch.call(%s) {callee = "torch.tanh"}
  func.return(%2)
}
""",
        """\
func @f(%x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor] {
  %0 : int = py.constant() {value = 2}
  %a : Tensor = py.binary(%x, %0) {op = "*"}
  %1 : Tensor = torch.call(%a, %a) {callee = "torch.add"}
  %c : Tensor = py.binary(%x, %0) {op = "*"}
  %d : Tensor = py.binary(%x, %0) {op = "*"}
  %r : Tensor = torch.call(%x) {callee = "torch.rand_like", random = True}
  %s : Tensor = torch.call(%x) {callee = "torch.rand_like", random = True}
  %2 : tuple[Tensor, Tensor, Tensor, Tensor] = py.tuple(%1, %c, %d, %r)
  func.return(%2)
}
""",
    )


def test_no_cse_of_new_tensors_or_views_in_a_function_that_mutates() -> None:
    """`a = x[0]; b = x[0]; a.add_(1)`: merging the views would also change b's later reads;
    the same for two fresh `x * 2`."""
    unchanged(
        """\
func @f(%x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %a : Tensor = torch.index(%x, %0) {items = (("value",),)}
  %b : Tensor = torch.index(%x, %0) {items = (("value",),)}
  %1 : Tensor = torch.call(%a, %b) {callee = "torch.add"}
  %2 : int = py.constant() {value = 2}
  %c : Tensor = py.binary(%x, %2) {op = "*"}
  %d : Tensor = py.binary(%x, %2) {op = "*"}
  %3 : Tensor = torch.call(%c, %d) {callee = "torch.add"}
  %4 : Tensor = torch.method(%1, %3) {method = "add_", mutates = (0,), alias_of = 0}
  func.return(%4)
}
"""
    )


def test_cse_respects_dominance() -> None:
    """An op inside an if reuses one before it; one after the if does not reuse one inside."""
    check(
        """\
func @f(%n: int, %c: bool) -> tuple[int, int, int] {
  %0 : int = py.binary(%n, %n) {op = "*"}
  %a : int, %b : int = scf.if(%c) {
    %1 : int = py.binary(%n, %n) {op = "*"}
    %2 : int = py.binary(%n, %n) {op = "-"}
    scf.yield(%1, %2)
  } {
    scf.yield(%n, %n)
  }
  %3 : int = py.binary(%n, %n) {op = "-"}
  %4 : tuple[int, int, int] = py.tuple(%a, %b, %3)
  %5 : int = py.binary(%0, %0) {op = "+"}
  %6 : tuple[int, int, int] = py.tuple(%5, %b, %3)
  func.return(%6)
}
""",
        """\
func @f(%n: int, %c: bool) -> tuple[int, int, int] {
  %0 : int = py.binary(%n, %n) {op = "*"}
  %b : int = scf.if(%c) {
    %1 : int = py.binary(%n, %n) {op = "-"}
    scf.yield(%1)
  } {
    scf.yield(%n)
  }
  %2 : int = py.binary(%n, %n) {op = "-"}
  %3 : int = py.binary(%0, %0) {op = "+"}
  %4 : tuple[int, int, int] = py.tuple(%3, %b, %2)
  func.return(%4)
}
""",
    )


def test_cse_into_a_loop_without_writes_and_is_none_only_where_sure() -> None:
    """A loop whose body writes nothing reuses what was computed before it. `m is None` stays
    for an Optional argument and a module's tensor attribute (it may have been set to None)."""
    check(
        """\
func @f(%self: Module[M], %x: Tensor, %m: Optional[Tensor], %n: int) -> tuple[int, bool, bool] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %k : int = scf.for(%0, %n, %1, %0) {
    ^(%i: int, %k_1: int):
    %3 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
    %4 : int = py.binary(%k_1, %3) {op = "+"}
    scf.yield(%4)
  }
  %5 : None = py.constant() {value = None}
  %6 : bool = py.compare(%m, %5) {op = "is"}
  %7 : Tensor = py.getattr(%self) {attr = "mask"}
  %8 : bool = py.compare(%7, %5) {op = "is"}
  %9 : int = py.binary(%k, %2) {op = "+"}
  %10 : tuple[int, bool, bool] = py.tuple(%9, %6, %8)
  func.return(%10)
}
""",
        """\
func @f(%self: Module[M], %x: Tensor, %m: Optional[Tensor], %n: int) -> tuple[int, bool, bool] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %2 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %k : int = scf.for(%0, %n, %1, %0) {
    ^(%i: int, %k_1: int):
    %3 : int = py.binary(%k_1, %2) {op = "+"}
    scf.yield(%3)
  }
  %4 : None = py.constant() {value = None}
  %5 : bool = py.compare(%m, %4) {op = "is"}
  %6 : Tensor = py.getattr(%self) {attr = "mask"}
  %7 : bool = py.compare(%6, %4) {op = "is"}
  %8 : int = py.binary(%k, %2) {op = "+"}
  %9 : tuple[int, bool, bool] = py.tuple(%8, %5, %7)
  func.return(%9)
}
""",
    )


def test_a_module_tensor_an_entry_check_pins_is_not_none() -> None:
    """`self.bn.count is None` is False where an entry check pins that path as a tensor (not
    optional), in a function that assigns no attribute; without the check, or for another
    path, it stays."""
    text = """\
func @f(%self: Module[M]) -> tuple[bool, bool] {
  py.check_tensor(%self) {path = ("bn", "count"), dtype = "int64", device = "cpu", shape = (), optional = False}
  %0 : None = py.constant() {value = None}
  %bn : Module[B] = py.getattr(%self) {attr = "bn"}
  %1 : i64[]@cpu = py.getattr(%bn) {attr = "count"}
  %2 : bool = py.compare(%1, %0) {op = "is not"}
  %3 : i64[]@cpu = py.getattr(%bn) {attr = "other"}
  %4 : bool = py.compare(%3, %0) {op = "is not"}
  %5 : tuple[bool, bool] = py.tuple(%2, %4)
  func.return(%5)
}
"""
    out = run(text)
    assert "%1 : bool = py.constant() {value = True}" in out and out.count("py.compare") == 1, out
    unchecked = run(text.replace('  py.check_tensor(%self) {path = ("bn", "count")', '  py.check_tensor(%self) {path = ("bn", "counts")'))
    assert unchecked.count("py.compare") == 2, unchecked


def test_a_module_tensor_reached_through_a_sequential_item_is_not_none() -> None:
    """`self.features[0].count is not None`: the entry check's path holds the item's index
    (an nn.Sequential's batch norm in training decides its branch on it)."""
    text = """\
func @f(%self: Module[M]) -> bool {
  py.check_tensor(%self) {path = ("features", 0, "count"), dtype = "int64", device = "cpu", shape = (), optional = False}
  %0 : None = py.constant() {value = None}
  %features : Module[torch.nn.Sequential] = py.getattr(%self) {attr = "features"}
  %1 : int = py.constant() {value = 0}
  %bn : Module[B] = py.getitem(%features, %1)
  %2 : i64[]@cpu = py.getattr(%bn) {attr = "count"}
  %3 : bool = py.compare(%2, %0) {op = "is not"}
  func.return(%3)
}
"""
    out = run(text)
    assert "py.compare" not in out and "{value = True}" in out, out
    assert "py.compare" in run(text.replace('("features", 0, "count")', '("features", 1, "count")'))


# -- examples: compiled through canonicalize vs eager --------------------------------------------
def _compile_with_canonicalize(path: Path) -> str | None:
    """transpiler.compile.compile_path, with canonicalize as the pipeline."""
    from codegen.module import Header, emit_module
    from ir.passes import run_pipeline
    from runtime.loader import VERSION
    from runtime.source_hash import source_hash
    from transpiler.pipeline import lower_file, torch_version
    from transpiler.source import SourceFile

    source = SourceFile.read(path, path.name)
    if not source.targets():
        return None
    program, entries = lower_file(source)
    run_pipeline(program, check=True, passes=[("canonicalize", canonicalize)])
    text = print_program(program)
    canonicalize(program)
    assert print_program(program) == text, f"canonicalize is not idempotent on {path.name}"
    header = Header(path.name, source_hash(source.text), f"torchscribe {path.name}", VERSION, torch_version())
    return emit_module(program, header, entries, source.lines)


@pytest.fixture(scope="module")
def canonical_examples(tmp_path_factory: pytest.TempPathFactory):
    """The examples copied into a fresh package, compiled through canonicalize."""
    package = f"canonicalized_examples_{id(tmp_path_factory)}"
    root = tmp_path_factory.mktemp("canonicalize")
    target = root / package
    target.mkdir()
    for path in (ROOT / "examples").glob("*.py"):
        if not path.stem.endswith("_compiled"):
            shutil.copy(path, target / path.name)
    for stem in EXAMPLES:
        text = _compile_with_canonicalize(target / f"{stem}.py")
        if text is not None:
            (target / f"{stem}_compiled.py").write_text(text)
    sys.path.insert(0, str(root))
    yield package
    sys.path.remove(str(root))
    import runtime

    runtime.reset()


@pytest.mark.parametrize("stem", EXAMPLES)
def test_examples_compiled_through_canonicalize_match_eager(canonical_examples: str, stem: str) -> None:
    import runtime
    from benchmarks.compare import compare, factories, observe, snapshot

    module = importlib.import_module(f"{canonical_examples}.{stem}")
    for variant, factory in factories(module):
        seen = {}
        for mode in ("off", "strict"):
            model, inputs = factory()
            with runtime.mode(mode), torch.no_grad():
                out = model(*inputs)
            seen[mode] = snapshot(observe(model, inputs, out))
        result = compare(seen["off"], seen["strict"], atol=0.0, rtol=0.0)
        assert result.ok, f"{stem}[{variant}]: {result.mismatches}"


# -- random Python expressions: folded vs evaluated -----------------------------------------------
class TooBig(Exception):
    """An int that would take long to compute (both evaluations stop alike)."""


_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "&": operator.and_,
           "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}
_UNARY = {"-": operator.neg, "+": operator.pos, "~": operator.invert, "not": operator.not_}
_CALLS = {"abs": abs, "int": int, "float": float, "bool": bool, "round": round, "min": min, "max": max,
          "math.sqrt": math.sqrt, "math.floor": math.floor, "math.ceil": math.ceil, "math.fabs": math.fabs,
          "math.exp": math.exp, "math.trunc": math.trunc}


def _binary(op: str, a: Any, b: Any) -> Any:
    if op == "**" and isinstance(b, int) and isinstance(a, int) and abs(a) > 1 and b > 0 and abs(a).bit_length() * b > 4096:
        raise TooBig
    if op == "<<" and isinstance(b, int) and b > 4096:
        raise TooBig
    if op in ("*", "<<") and isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > 8192:
        raise TooBig
    return _BINARY[op](a, b)


def _call_type(name: str, types: list[Type]) -> Type | None:
    """The result type the front end gives these calls (transpiler/lower_calls.py)."""
    if any(t not in (INT, FLOAT, BOOL) for t in types):
        return None
    if name in ("int", "float", "bool"):
        return {"int": INT, "float": FLOAT, "bool": BOOL}[name]
    if name == "abs":
        return INT if types[0] == BOOL else types[0]
    if name == "round":
        return INT
    if name in ("min", "max"):
        if all(t == BOOL for t in types):
            return BOOL
        return None if FLOAT in types and INT in types else FLOAT if FLOAT in types else INT
    return INT if name in ("math.floor", "math.ceil", "math.trunc") else FLOAT


class _Build:
    """Builds the IR of an expression tree, tracking types as the front end does."""

    def __init__(self, func: ops.FuncOp) -> None:
        self.args = {a.name: a for a in func.args}

    def emit(self, block: Block, node: tuple) -> Value:
        kind = node[0]
        if kind == "const":
            value = node[1]
            t = {bool: BOOL, int: INT, float: FLOAT}[type(value)]
            return block.append(ops.ConstantOp([], [t], {"value": value})).result
        if kind == "arg":
            return self.args[node[1]]
        if kind == "len":
            return block.append(ops.BuiltinCallOp([self.args["xs"]], [INT], {"callee": "len"})).result
        if kind == "if":
            cond = self.emit(block, node[1])
            if cond.type != BOOL:
                cond = block.append(ops.BuiltinCallOp([cond], [BOOL], {"callee": "bool"})).result
            if_op = ops.IfOp([cond], [], regions=[Region([Block()]), Region([Block()])])
            block.append(if_op)
            a = self.emit(if_op.then_block, node[2])
            b = self.emit(if_op.else_block, node[3])
            assume(a.type == b.type)
            if_op.then_block.append(ops.YieldOp([a]))
            if_op.else_block.append(ops.YieldOp([b]))
            if_op.results = [ops.OpResult(a.type, if_op, 0)]
            return if_op.results[0]
        operands = [self.emit(block, child) for child in node[2:]]
        types = [v.type for v in operands]
        if kind == "bin":
            t, cls = python_binary(node[1], *types), ops.BinaryOp
        elif kind == "cmp":
            t, cls = python_binary(node[1], *types), ops.CompareOp
        elif kind == "un":
            t, cls = python_unary(node[1], types[0]), ops.UnaryOp
        else:
            t, cls = _call_type(node[1], types), ops.BuiltinCallOp
        assume(t is not None)
        attrs = {"callee": node[1]} if kind == "call" else {"op": node[1]}
        return block.append(cls(operands, [t], attrs)).result


def _interpret(func: ops.FuncOp, args: dict[str, Any]) -> Any:
    env: dict[Value, Any] = {a: args[a.name] for a in func.args}

    def run_block(block: Block) -> list[Any]:
        for op in block.ops:
            vals = [env[v] for v in op.operands]
            a = op.attributes
            if isinstance(op, (ops.ReturnOp, ops.YieldOp)):
                return vals
            if isinstance(op, ops.ConstantOp):
                out = [a["value"]]
            elif isinstance(op, ops.BinaryOp):
                out = [_binary(a["op"], *vals)]
            elif isinstance(op, ops.CompareOp):
                out = [_COMPARE[a["op"]](*vals)]
            elif isinstance(op, ops.UnaryOp):
                out = [_UNARY[a["op"]](*vals)]
            elif isinstance(op, ops.BuiltinCallOp):
                out = [_CALLS[a["callee"]](*vals) if a["callee"] != "len" else len(vals[0])]
            elif isinstance(op, ops.TupleOp):
                out = [tuple(vals)]
            elif isinstance(op, ops.IfOp):
                out = run_block(op.then_block if vals[0] else op.else_block)
            else:
                raise AssertionError(f"cannot interpret {op.name}")
            env.update(zip(op.results, out))
        raise AssertionError("block without terminator")

    return run_block(func.body)[0]


def _outcome(func: ops.FuncOp, args: dict[str, Any]) -> tuple:
    try:
        value = _interpret(func, args)
    except TooBig:
        return ("too big",)
    except (ArithmeticError, ValueError, TypeError) as e:
        return ("raises", type(e).__name__)
    return ("value", type(value).__name__, repr(value))


_SMALL_INTS = st.integers(-9, 9) | st.sampled_from([0, 1, -1, 2**31, -(2**62), 63, 64])
_FLOATS = st.sampled_from([0.0, -0.0, 0.5, -2.5, 1.0, 3.0, 1e308, -1e-310, math.inf, -math.inf, math.nan]) | st.floats(-100, 100)
_LEAVES = st.one_of(
    st.tuples(st.just("const"), _SMALL_INTS | _FLOATS | st.booleans()),
    st.tuples(st.just("arg"), st.sampled_from(["n", "y", "b"])),
    st.just(("len",)),
)


def _grow(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(sorted(_BINARY)), children, children),
        st.tuples(st.just("cmp"), st.sampled_from(sorted(_COMPARE)), children, children),
        st.tuples(st.just("un"), st.sampled_from(sorted(_UNARY)), children),
        st.tuples(st.just("call"), st.sampled_from(["abs", "int", "float", "bool", "round", "math.sqrt", "math.floor",
                                                    "math.ceil", "math.fabs", "math.exp", "math.trunc"]), children),
        st.tuples(st.just("call"), st.sampled_from(["min", "max"]), children, children),
        st.tuples(st.just("if"), children, children, children),
    )


EXPRESSIONS = st.recursive(_LEAVES, _grow, max_leaves=12)
# Arguments typed int may hold a bool at run time, and float ones an int: the pass must not
# rely on the annotation for identities like n + 0 -> n.
ARGS = st.fixed_dictionaries({
    "n": _SMALL_INTS | st.booleans(),
    "y": _FLOATS | st.integers(-3, 3),
    "b": st.booleans(),
    "xs": st.lists(st.integers(), max_size=3),
})


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(EXPRESSIONS, st.lists(ARGS, min_size=1, max_size=3))
def test_random_python_expressions_fold_like_python(tree: tuple, arg_sets: list[dict[str, Any]]) -> None:
    func = ops.FuncOp.build("f", [INT, FLOAT, BOOL, ListType(INT)], ["n", "y", "b", "xs"], INT)
    value = _Build(func).emit(func.body, tree)
    func.attributes["result_type"] = value.type
    func.body.append(ops.ReturnOp([value]))
    program = Program("f.py", [func])
    verify(program)
    before = [_outcome(func, args) for args in arg_sets]
    text = print_program(program)
    # Without the dead-code rules nothing that raises may go: outcomes are equal.
    kept = parse_program(text)
    for _ in range(20):
        if not (apply_rules(kept.funcs[0], [r for r in RULES if r not in DEAD_CODE_RULES]) | cse(kept.funcs[0])):
            break
    verify(kept)
    folded = [_outcome(kept.funcs[0], args) for args in arg_sets]  # type: ignore[arg-type]
    assert before == folded, f"{text}\n--- after ---\n{print_program(kept)}"
    # With them a raise in code nothing reads goes too (`if int(inf): 0 else: 0` is 0).
    canonicalize(program)
    verify(program)
    after = [_outcome(func, args) for args in arg_sets]
    assert all(a == b or (b[0] == "raises" and a[0] == "value") for a, b in zip(after, before)), (
        f"{text}\n--- after ---\n{print_program(program)}")


def test_a_modules_attribute_read_in_a_loop_moves_before_it() -> None:
    """`self.cell.weight` read in a loop that assigns no attribute and runs nothing opaque is read
    once, before the loop; a loop with a module call in it, and a module defined in the loop (a
    loop over a module list), keep their reads."""
    text = """\
func @f(%self: Module[Net], %x: Tensor, %n: int) -> tuple[Tensor, Tensor] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %a : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %a_1: Tensor):
    %cell : Module[torch.nn.Linear] = py.getattr(%self) {attr = "cell"}
    %w : Tensor = py.getattr(%cell) {attr = "weight"}
    %2 : Tensor = torch.call(%a_1, %w) {callee = "torch.nn.functional.linear"}
    scf.yield(%2)
  }
  %b : Tensor = scf.for(%0, %n, %1, %a) {
    ^(%j: int, %b_1: Tensor):
    %cell_1 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "cell"}
    %3 : Tensor = module.call(%cell_1, %b_1)
    scf.yield(%3)
  }
  %layers : ModuleList[Module[torch.nn.Linear], ...] = py.getattr(%self) {attr = "layers"}
  %c : Tensor = scf.for_each(%layers, %b) {
    ^(%layer: Module[torch.nn.Linear], %c_1: Tensor):
    %v : Tensor = py.getattr(%layer) {attr = "weight"}
    %4 : Tensor = torch.call(%c_1, %v) {callee = "torch.nn.functional.linear"}
    scf.yield(%4)
  }
  %5 : tuple[Tensor, Tensor] = py.tuple(%a, %c)
  func.return(%5)
}
"""
    out = run(text)
    first_loop = out.index("scf.for(")
    assert out.index('{attr = "weight"}') < first_loop < out.index("torch.nn.functional.linear")
    second = out[out.index("scf.for(", first_loop + 1):]
    assert second.index('py.getattr(%self) {attr = "cell"}') < second.index("scf.yield")  # (a module call in it)
    third = out[out.index("scf.for_each("):]
    assert 'py.getattr(%layer) {attr = "weight"}' in third  # (the element's own attribute)

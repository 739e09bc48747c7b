"""Functionalization (ir/passes/functionalize.py), IR in and IR out for each rule: in-place
methods and operators, index assignment, writes through views of inputs and of fresh tensors,
writes in branches and loops, buffers, returned aliases of inputs, the entry guard against inputs
sharing memory, and what is left as it is (with its reason). Then hand-written models compiled
through the pass against eager (values, the final contents of inputs and buffers, which outputs
are or share memory with inputs), and generated programs (tests/program_gen.py) likewise."""

from __future__ import annotations

import copy
import importlib
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
from hypothesis import given, settings

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import program_gen as pg  # noqa: E402
import test_programs as tp  # noqa: E402
from test_programs import program_dir  # noqa: E402,F401  (a fixture)

import ir.passes as passes  # noqa: E402
from ir.core import ops  # noqa: E402
import runtime  # noqa: E402
from codegen.module import Header, emit_module  # noqa: E402
from ir.core.graph import Program  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes import run_pipeline  # noqa: E402
from ir.passes.canonicalize import canonicalize  # noqa: E402
from ir.passes.dce import dce  # noqa: E402
from ir.passes.aliasing import written_operands  # noqa: E402
from ir.passes.functionalize import functionalize, functionalize_function  # noqa: E402
from ir.passes.inline import inline  # noqa: E402
from ir.passes.layers import LAYERS, lower_layers  # noqa: E402
from ir.passes.shapes import propagate_shapes  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.verifier import verify  # noqa: E402
from runtime import guards  # noqa: E402
from runtime.loader import VERSION  # noqa: E402
from runtime.source_hash import source_hash  # noqa: E402
from transpiler.pipeline import lower_file, torch_version  # noqa: E402
from transpiler.source import SourceFile  # noqa: E402


def writes_left(program: Program) -> list[str]:
    """The writes after functionalization: each must be a write-back or left with a reason."""
    left = []
    for op in program.walk():
        if written_operands(op):
            assert "unfunctionalized" in op.attributes, f"{op.name} at {op.loc} still writes, without a reason"
            left.append(op.attributes["unfunctionalized"])
    return left


def run(text: str) -> str:
    program = parse_program(text)
    verify(program)
    functionalize(program)
    verify(program)
    writes_left(program)
    out = print_program(program)
    again = parse_program(out)
    assert print_program(again) == out, "the output does not print back the same"
    functionalize(again)
    assert print_program(again) == out, "functionalize is not idempotent"
    return out


def check(before: str, after: str) -> None:
    assert run(before) == after


# -- the rules, IR in and IR out --------------------------------------------------------------------
def test_inplace_methods_on_an_input_become_functional_ops_and_one_write_back() -> None:
    """`add_`/`relu_` on an argument: out of place, one `copy_` into x at the end (an entry guard, as y is
    read), and the returned alias of x is x itself."""
    check(
        """\
func @f(%x: f32[3, 4], %y: f32[3, 4]) -> f32[3, 4] {
  %0 : f32[3, 4] = torch.method(%x, %y) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %t : f32[3, 4] = torch.method(%x) {method = "relu_", mutates = (0,), alias_of = 0, aten = "aten::relu_"}
  func.return(%t)
}
""",
        """\
func @f(%x: f32[3, 4], %y: f32[3, 4]) -> f32[3, 4] {
  %0 : tuple[f32[3, 4]] = py.tuple(%x)
  %1 : tuple[f32[3, 4]] = py.tuple(%y)
  %2 : bool = py.call(%0, %1) {callee = "_guards.no_overlap"}
  py.guard(%2) {reason = "`x` (written) may share memory with another tensor argument or attribute"}
  %x_1 : f32[3, 4] = torch.method(%x, %y) {method = "add", aten = "aten::add.Tensor"}
  %t : f32[3, 4] = torch.method(%x_1) {method = "relu", aten = "aten::relu"}
  %3 : f32[3, 4] = torch.method(%x, %t) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%x)
}
""",
    )


def test_augmented_assignment_keeps_the_targets_dtype_and_checks_its_shape() -> None:
    """`w += y` computes `w + y` and keeps w's dtype (f64 would promote: a cast back to f32) and shape;
    where dtypes or shapes are not known, the cast and an `expand_as` check are there."""
    check(
        """\
func @f(%x: f32[3, 4], %y: f64[4], %z: Tensor) -> tuple[f32[3, 4], Tensor] {
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %w_1 : f32[3, 4] = py.inplace(%w, %x) {op = "*"}
  %w_2 : f32[3, 4] = py.inplace(%w_1, %y) {op = "+"}
  %0 : int = py.constant() {value = 2}
  %v : Tensor = torch.method(%z) {method = "clone", aten = "aten::clone"}
  %v_1 : Tensor = py.inplace(%v, %z) {op = "-"}
  %v_2 : Tensor = py.inplace(%v_1, %0) {op = "*"}
  %1 : tuple[f32[3, 4], Tensor] = py.tuple(%w_2, %v_2)
  func.return(%1)
}
""",
        """\
func @f(%x: f32[3, 4], %y: f64[4], %z: Tensor) -> tuple[f32[3, 4], Tensor] {
  %0 : dtype = py.constant() {value = "torch.float32"}
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %w_1 : f32[3, 4] = py.binary(%w, %x) {op = "*"}
  %1 : f64[*] = py.binary(%w_1, %y) {op = "+"}
  %w_2 : f32[3, 4] = torch.method(%1, %0) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %2 : int = py.constant() {value = 2}
  %v : Tensor = torch.method(%z) {method = "clone", aten = "aten::clone"}
  %3 : Tensor = py.binary(%v, %z) {op = "-"}
  %4 : dtype = py.getattr(%v) {attr = "dtype"}
  %5 : Tensor = torch.method(%3, %4) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %v_1 : Tensor = torch.method(%5, %v) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %v_2 : Tensor = py.binary(%v_1, %2) {op = "*"}
  %6 : tuple[f32[3, 4], Tensor] = py.tuple(%w_2, %v_2)
  func.return(%6)
}
""",
    )


def test_writes_through_views_update_the_base_and_later_views() -> None:
    """`v = y[:, 0]; v.mul_(2)` writes y: select_scatter carries the view back; a write through
    `y.t().select(0, 0)` goes back through both views; later reads of y and v read the new values."""
    check(
        """\
func @f(%y: f32[3, 4]) -> f32[4] {
  %0 : int = py.constant() {value = 0}
  %v : f32[3] = torch.index(%y, %0) {items = (("slice", False, False, False), ("value",))}
  %1 : int = py.constant() {value = 2}
  %2 : f32[3] = torch.method(%v, %1) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
  %yt : f32[4, 3] = torch.method(%y) {method = "t", alias_of = 0, aten = "aten::t"}
  %3 : f32[4] = torch.method(%yt, %0, %0) {method = "select", alias_of = 0, aten = "aten::select.int"}
  %4 : f32[4] = torch.method(%3) {method = "neg_", mutates = (0,), alias_of = 0, aten = "aten::neg_"}
  %5 : f32[4] = torch.method(%y, %0) {method = "sum", aten = "aten::sum.dim_IntList"}
  %6 : f32[4] = py.binary(%5, %v) {op = "+"}
  func.return(%6)
}
""",
        """\
func @f(%y: f32[3, 4]) -> f32[4] {
  %0 : int = py.constant() {value = 1}
  %1 : int = py.constant() {value = 0}
  %v : f32[3] = torch.index(%y, %1) {items = (("slice", False, False, False), ("value",))}
  %2 : int = py.constant() {value = 2}
  %v_1 : f32[3] = torch.method(%v, %2) {method = "mul", aten = "aten::mul.Tensor"}
  %y_1 : f32[3, 4] = torch.call(%y, %v_1, %0, %1) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %yt : f32[4, 3] = torch.method(%y_1) {method = "t", alias_of = 0, aten = "aten::t"}
  %3 : f32[4] = torch.method(%yt, %1, %1) {method = "select", alias_of = 0, aten = "aten::select.int"}
  %4 : f32[4] = torch.method(%3) {method = "neg", aten = "aten::neg"}
  %yt_1 : f32[4, 3] = torch.call(%yt, %4, %1, %1) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %y_2 : f32[3, 4] = torch.method(%yt_1) {method = "t", alias_of = 0, aten = "aten::t"}
  %5 : f32[4] = torch.method(%y_2, %1) {method = "sum", aten = "aten::sum.dim_IntList"}
  %v_2 : f32[3] = torch.index(%y_2, %1) {items = (("slice", False, False, False), ("value",))}
  %6 : f32[4] = py.binary(%5, %v_2) {op = "+"}
  %7 : f32[3, 4] = torch.method(%y, %y_2) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%6)
}
""",
    )


def test_index_assignment_with_masks_ints_slices_and_augmented_items() -> None:
    """`w[m] = 0.0` is index_put; `w[0] = v`, `w[:, 1:3] = 0.0`, `w[:, -1] = c` are a broadcast, cast copy
    scattered into w; `w[1] += 2.0` adds to the row and scatters it once (the write-back of the item
    onto itself goes)."""
    check(
        """\
func @f(%x: f32[3, 4], %m: bool[3, 4], %v: f32[4], %c: f64[3]) -> f32[3, 4] {
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %0 : float = py.constant() {value = 0.0}
  torch.index_put(%w, %m, %0) {items = (("value",),)}
  %1 : int = py.constant() {value = 0}
  torch.index_put(%w, %1, %v) {items = (("value",),)}
  %2 : int = py.constant() {value = 1}
  %3 : int = py.constant() {value = 3}
  torch.index_put(%w, %2, %3, %0) {items = (("slice", False, False, False), ("slice", True, True, False))}
  %4 : int = py.constant() {value = -1}
  torch.index_put(%w, %4, %c) {items = (("slice", False, False, False), ("value",))}
  %5 : f32[4] = torch.index(%w, %2) {items = (("value",),)}
  %6 : float = py.constant() {value = 2.0}
  %7 : f32[4] = py.inplace(%5, %6) {op = "+"}
  torch.index_put(%w, %2, %7) {items = (("value",),)}
  func.return(%w)
}
""",
        """\
func @f(%x: f32[3, 4], %m: bool[3, 4], %v: f32[4], %c: f64[3]) -> f32[3, 4] {
  %0 : tuple[()] = py.constant() {value = ()}
  %1 : int = py.constant() {value = 0}
  %2 : int = py.constant() {value = 1}
  %3 : dtype = py.constant() {value = "torch.float32"}
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %4 : float = py.constant() {value = 0.0}
  %5 : tuple[bool[3, 4]] = py.tuple(%m)
  %6 : f32[*] = torch.method(%w, %0, %4) {method = "new_full", aten = "aten::new_full"}
  %w_1 : f32[3, 4] = torch.method(%w, %5, %6) {method = "index_put", aten = "aten::index_put"}
  %7 : int = py.constant() {value = 0}
  %8 : f32[*] = torch.index(%w_1, %7) {items = (("value",),)}
  %9 : f32[*] = torch.method(%v, %8) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %10 : f32[*] = torch.method(%9) {method = "clone", aten = "aten::clone"}
  %w_2 : f32[3, 4] = torch.call(%w_1, %10, %1, %7) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %11 : int = py.constant() {value = 1}
  %12 : int = py.constant() {value = 3}
  %13 : f32[*] = torch.index(%w_2, %11, %12) {items = (("slice", False, False, False), ("slice", True, True, False))}
  %14 : f32[*] = torch.call(%13, %4) {callee = "torch.full_like", aten = "aten::full_like"}
  %w_3 : f32[3, 4] = torch.call(%w_2, %14, %2, %11, %12, %2) {callee = "torch.slice_scatter", aten = "aten::slice_scatter"}
  %15 : int = py.constant() {value = -1}
  %16 : f32[*] = torch.index(%w_3, %15) {items = (("slice", False, False, False), ("value",))}
  %17 : f64[*] = torch.method(%c, %16) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %18 : f32[*] = torch.method(%17, %3) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %w_4 : f32[3, 4] = torch.call(%w_3, %18, %2, %15) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %19 : f32[4] = torch.index(%w_4, %11) {items = (("value",),)}
  %20 : float = py.constant() {value = 2.0}
  %21 : f32[4] = py.binary(%19, %20) {op = "+"}
  %w_5 : f32[3, 4] = torch.call(%w_4, %21, %1, %11) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  func.return(%w_5)
}
""",
    )


def test_two_views_of_one_fresh_tensor() -> None:
    """`a = w[0]; b = w.t(); a.fill_(1.0)`: w gets the new row, b is derived again from it; no write-back,
    w is not the caller's."""
    check(
        """\
func @f(%x: f32[3, 4]) -> tuple[f32[4, 3], f32[4]] {
  %0 : int = py.constant() {value = 3}
  %1 : int = py.constant() {value = 4}
  %w : f32[3, 4] = torch.call(%0, %1) {callee = "torch.zeros", aten = "aten::zeros"}
  %2 : int = py.constant() {value = 0}
  %a : f32[4] = torch.index(%w, %2) {items = (("value",),)}
  %b : f32[4, 3] = torch.method(%w) {method = "t", alias_of = 0, aten = "aten::t"}
  %3 : float = py.constant() {value = 1.0}
  %4 : f32[4] = torch.method(%a, %3) {method = "fill_", mutates = (0,), alias_of = 0, aten = "aten::fill_.Scalar"}
  %5 : f32[4, 3] = py.binary(%b, %x) {op = "*"}
  %6 : tuple[f32[4, 3], f32[4]] = py.tuple(%5, %a)
  func.return(%6)
}
""",
        """\
func @f(%x: f32[3, 4]) -> tuple[f32[4, 3], f32[4]] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 3}
  %2 : int = py.constant() {value = 4}
  %w : f32[3, 4] = torch.call(%1, %2) {callee = "torch.zeros", aten = "aten::zeros"}
  %3 : int = py.constant() {value = 0}
  %a : f32[4] = torch.index(%w, %3) {items = (("value",),)}
  %b : f32[4, 3] = torch.method(%w) {method = "t", alias_of = 0, aten = "aten::t"}
  %4 : float = py.constant() {value = 1.0}
  %a_1 : f32[4] = torch.call(%a, %4) {callee = "torch.full_like", aten = "aten::full_like"}
  %w_1 : f32[3, 4] = torch.call(%w, %a_1, %0, %3) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %b_1 : f32[4, 3] = torch.method(%w_1) {method = "t", alias_of = 0, aten = "aten::t"}
  %5 : f32[4, 3] = py.binary(%b_1, %x) {op = "*"}
  %6 : tuple[f32[4, 3], f32[4]] = py.tuple(%5, %a_1)
  func.return(%6)
}
""",
    )


def test_writes_in_branches_become_if_results() -> None:
    """Each side yields its version of every tensor written on either side."""
    check(
        """\
func @f(%x: f32[3, 4], %n: int) -> f32[3, 4] {
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.compare(%n, %0) {op = ">"}
  scf.if(%1) {
    %2 : int = py.constant() {value = 2}
    %3 : f32[3, 4] = torch.method(%w, %2) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
    scf.yield()
  } {
    %4 : f32[4] = torch.index(%x, %0) {items = (("value",),)}
    %5 : f32[4] = torch.method(%4) {method = "zero_", mutates = (0,), alias_of = 0, aten = "aten::zero_"}
    scf.yield()
  }
  %6 : f32[3, 4] = py.binary(%w, %x) {op = "+"}
  func.return(%6)
}
""",
        """\
func @f(%x: f32[3, 4], %n: int) -> f32[3, 4] {
  %0 : int = py.constant() {value = 0}
  %w : f32[3, 4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %1 : int = py.constant() {value = 0}
  %2 : bool = py.compare(%n, %1) {op = ">"}
  %x_1 : f32[3, 4], %w_1 : f32[3, 4] = scf.if(%2) {
    %3 : int = py.constant() {value = 2}
    %w_2 : f32[3, 4] = torch.method(%w, %3) {method = "mul", aten = "aten::mul.Tensor"}
    scf.yield(%x, %w_2)
  } {
    %4 : f32[4] = torch.index(%x, %1) {items = (("value",),)}
    %5 : f32[4] = torch.call(%4) {callee = "torch.zeros_like", aten = "aten::zeros_like"}
    %x_2 : f32[3, 4] = torch.call(%x, %5, %0, %1) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
    scf.yield(%x_2, %w)
  }
  %6 : f32[3, 4] = py.binary(%w_1, %x_1) {op = "+"}
  %7 : f32[3, 4] = torch.method(%x, %x_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%6)
}
""",
    )


def test_writes_in_loops_become_loop_carried_values() -> None:
    """`acc += x` in a for loop: acc is already carried (no second copy); x written in a while loop
    becomes carried through both regions and is written back after the loop."""
    check(
        """\
func @f(%x: f32[3, 4], %n: int) -> f32[3, 4] {
  %acc : f32[3, 4] = torch.call(%x) {callee = "torch.zeros_like", aten = "aten::zeros_like"}
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %acc_1 : f32[3, 4] = scf.for(%0, %n, %1, %acc) {
    ^(%i: int, %acc_2: f32[3, 4]):
    %acc_3 : f32[3, 4] = py.inplace(%acc_2, %x) {op = "+"}
    scf.yield(%acc_3)
  }
  %n_1 : int = scf.while(%n) {
    ^(%n_2: int):
    %2 : bool = py.compare(%n_2, %0) {op = ">"}
    scf.condition(%2, %n_2)
  } {
    ^(%n_3: int):
    %3 : float = py.constant() {value = 0.5}
    %4 : f32[3, 4] = torch.method(%x, %3) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
    %n_4 : int = py.binary(%n_3, %1) {op = "-"}
    scf.yield(%n_4)
  }
  func.return(%acc_1)
}
""",
        """\
func @f(%x: f32[3, 4], %n: int) -> f32[3, 4] {
  %acc : f32[3, 4] = torch.call(%x) {callee = "torch.zeros_like", aten = "aten::zeros_like"}
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %acc_1 : f32[3, 4] = scf.for(%0, %n, %1, %acc) {
    ^(%i: int, %acc_2: f32[3, 4]):
    %acc_3 : f32[3, 4] = py.binary(%acc_2, %x) {op = "+"}
    scf.yield(%acc_3)
  }
  %n_1 : int, %x_1 : f32[3, 4] = scf.while(%n, %x) {
    ^(%n_2: int, %x_2: f32[3, 4]):
    %2 : bool = py.compare(%n_2, %0) {op = ">"}
    scf.condition(%2, %n_2, %x_2)
  } {
    ^(%n_3: int, %x_3: f32[3, 4]):
    %3 : float = py.constant() {value = 0.5}
    %x_4 : f32[3, 4] = torch.method(%x_3, %3) {method = "mul", aten = "aten::mul.Tensor"}
    %n_4 : int = py.binary(%n_3, %1) {op = "-"}
    scf.yield(%n_4, %x_4)
  }
  %4 : f32[3, 4] = torch.method(%x, %x_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%acc_1)
}
""",
    )


def test_buffer_updates_are_read_at_entry_and_written_back() -> None:
    """`self.count += 1` in a branch: count is read once at entry (a later read reads the new value),
    written back at the end; `self.calls += 1` (an int attribute) stays as it is."""
    check(
        """\
func @M.forward(%self: Module[M], %x: f32[4]) -> f32[4] {
  %0 : bool = py.getattr(%self) {attr = "training"}
  scf.if(%0) {
    %count : i64[] = py.getattr(%self) {attr = "count"}
    %1 : int = py.constant() {value = 1}
    %2 : i64[] = py.inplace(%count, %1) {op = "+"}
    scf.yield()
  } {
    scf.yield()
  }
  %calls : int = py.getattr(%self) {attr = "calls"}
  %3 : int = py.constant() {value = 1}
  %4 : int = py.binary(%calls, %3) {op = "+"}
  py.setattr(%self, %4) {attr = "calls"}
  %count_1 : i64[] = py.getattr(%self) {attr = "count"}
  %5 : f32[4] = py.binary(%x, %count_1) {op = "*"}
  func.return(%5)
}
""",
        """\
func @M.forward(%self: Module[M], %x: f32[4]) -> f32[4] {
  %count : i64[] = py.getattr(%self) {attr = "count"}
  %0 : tuple[i64[]] = py.tuple(%count)
  %1 : tuple[f32[4]] = py.tuple(%x)
  %2 : bool = py.call(%0, %1) {callee = "_guards.no_overlap"}
  py.guard(%2) {reason = "`self.count` (written) may share memory with another tensor argument or attribute"}
  %3 : bool = py.getattr(%self) {attr = "training"}
  %count_1 : i64[] = scf.if(%3) {
    %4 : int = py.constant() {value = 1}
    %count_2 : i64[] = py.binary(%count, %4) {op = "+"}
    scf.yield(%count_2)
  } {
    scf.yield(%count)
  }
  %calls : int = py.getattr(%self) {attr = "calls"}
  %5 : int = py.constant() {value = 1}
  %6 : int = py.binary(%calls, %5) {op = "+"}
  py.setattr(%self, %6) {attr = "calls"}
  %7 : f32[4] = py.binary(%x, %count_1) {op = "*"}
  %8 : i64[] = torch.method(%count, %count_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%7)
}
""",
    )


def test_returned_aliases_of_written_inputs_are_the_inputs_themselves() -> None:
    """Eager returns x itself for `t = x.add_(1); return t`, and views of x: so does the compiled code,
    after the write-back; for an early return (an if result) inside the branch."""
    check(
        """\
func @f(%x: f32[3, 4], %n: int) -> tuple[f32[3, 4], f32[4]] {
  %0 : int = py.constant() {value = 1}
  %t : f32[3, 4] = torch.method(%x, %0) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %1 : int = py.constant() {value = 0}
  %2 : f32[4] = torch.index(%x, %1) {items = (("value",),)}
  %3 : tuple[f32[3, 4], f32[4]] = py.tuple(%t, %2)
  func.return(%3)
}

func @g(%x: f32[3, 4], %n: int) -> f32[4] {
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.compare(%n, %0) {op = ">"}
  %2 : f32[4] = scf.if(%1) {
    %3 : f32[4] = torch.index(%x, %0) {items = (("value",),)}
    %4 : f32[4] = torch.method(%3) {method = "neg_", mutates = (0,), alias_of = 0, aten = "aten::neg_"}
    scf.yield(%4)
  } {
    %5 : f32[4] = torch.method(%x, %0) {method = "sum", aten = "aten::sum.dim_IntList"}
    scf.yield(%5)
  }
  func.return(%2)
}
""",
        """\
func @f(%x: f32[3, 4], %n: int) -> tuple[f32[3, 4], f32[4]] {
  %0 : int = py.constant() {value = 1}
  %t : f32[3, 4] = torch.method(%x, %0) {method = "add", aten = "aten::add.Tensor"}
  %1 : int = py.constant() {value = 0}
  %2 : f32[3, 4] = torch.method(%x, %t) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  %3 : f32[4] = torch.index(%x, %1) {items = (("value",),)}
  %4 : tuple[f32[3, 4], f32[4]] = py.tuple(%x, %3)
  func.return(%4)
}

func @g(%x: f32[3, 4], %n: int) -> f32[4] {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 0}
  %2 : bool = py.compare(%n, %1) {op = ">"}
  %3 : f32[4], %x_1 : f32[3, 4] = scf.if(%2) {
    %4 : f32[4] = torch.index(%x, %1) {items = (("value",),)}
    %5 : f32[4] = torch.method(%4) {method = "neg", aten = "aten::neg"}
    %x_2 : f32[3, 4] = torch.call(%x, %5, %0, %1) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
    scf.yield(%4, %x_2)
  } {
    %6 : f32[4] = torch.method(%x, %1) {method = "sum", aten = "aten::sum.dim_IntList"}
    scf.yield(%6, %x)
  }
  %7 : f32[3, 4] = torch.method(%x, %x_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%3)
}
""",
    )


def test_inplace_activation_output_is_a_fresh_tensor() -> None:
    """The layer lowering's `F.relu(h, inplace=True) if act.inplace else F.relu(h)`: h is not read
    afterwards, so the result is a fresh tensor whatever the branch, and `+= 1` on it is functional."""
    check(
        """\
func @M.forward(%self: Module[M], %x: Tensor) -> Tensor {
  %0 : str = py.constant() {value = "act"}
  %1 : str = py.constant() {value = "torch.nn.ReLU"}
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}
  py.guard(%2) {reason = "self.act is not an unhooked torch.nn.ReLU"}
  %h : Tensor = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %3 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %4 : bool = py.getattr(%3) {attr = "inplace"}
  %h_1 : Tensor = scf.if(%4) {
    %5 : bool = py.constant() {value = True}
    %6 : Tensor = torch.call(%h, %5) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
    scf.yield(%6)
  } {
    %7 : Tensor = torch.call(%h) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%7)
  }
  %8 : float = py.constant() {value = 1.0}
  %h_2 : Tensor = py.inplace(%h_1, %8) {op = "+"}
  func.return(%h_2)
}
""",
        """\
func @M.forward(%self: Module[M], %x: Tensor) -> Tensor {
  %0 : str = py.constant() {value = "act"}
  %1 : str = py.constant() {value = "torch.nn.ReLU"}
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}
  py.guard(%2) {reason = "self.act is not an unhooked torch.nn.ReLU"}
  %h : Tensor = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %3 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %4 : bool = py.getattr(%3) {attr = "inplace"}
  %h_1 : Tensor = scf.if(%4) {
    %h_2 : Tensor = torch.call(%h) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%h_2)
  } {
    %5 : Tensor = torch.call(%h) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%5)
  }
  %6 : float = py.constant() {value = 1.0}
  %h_2_1 : Tensor = py.binary(%h_1, %6) {op = "+"}
  func.return(%h_2_1)
}
""",
    )


def test_a_layers_number_settings_neither_promote_nor_grow_an_inplace_activation() -> None:
    """`nn.Hardtanh(inplace=True)` lowers to `F.hardtanh(h, m.min_val, m.max_val, inplace=True)`
    with the settings typed Any. F.hardtanh annotates them `float` and aten::hardtanh_ takes
    Scalars, so they are numbers: the functional call keeps h's dtype and shape and needs no
    `.to(h.dtype).expand_as(h)`, and both sides of the layer's if are the same call. An Any
    operand that may be a tensor (`h.mul_(w)`) still gets them."""
    check(
        """\
func @f(%m: Module[torch.nn.Hardtanh], %x: Tensor, %w: Any) -> Tensor {
  %h : Tensor = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %0 : bool = py.getattr(%m) {attr = "inplace"}
  %h_1 : Tensor = scf.if(%0) {
    %1 : Any = py.getattr(%m) {attr = "min_val"}
    %2 : Any = py.getattr(%m) {attr = "max_val"}
    %3 : bool = py.constant() {value = True}
    %4 : Tensor = torch.call(%h, %1, %2, %3) {callee = "torch.nn.functional.hardtanh", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::hardtanh_"}
    scf.yield(%4)
  } {
    %5 : Any = py.getattr(%m) {attr = "min_val"}
    %6 : Any = py.getattr(%m) {attr = "max_val"}
    %7 : Tensor = torch.call(%h, %5, %6) {callee = "torch.nn.functional.hardtanh", aten = "aten::hardtanh"}
    scf.yield(%7)
  }
  %8 : Tensor = torch.method(%h_1, %w) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
  func.return(%8)
}
""",
        """\
func @f(%m: Module[torch.nn.Hardtanh], %x: Tensor, %w: Any) -> Tensor {
  %h : Tensor = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}
  %0 : bool = py.getattr(%m) {attr = "inplace"}
  %h_1 : Tensor = scf.if(%0) {
    %1 : Any = py.getattr(%m) {attr = "min_val"}
    %2 : Any = py.getattr(%m) {attr = "max_val"}
    %h_2 : Tensor = torch.call(%h, %1, %2) {callee = "torch.nn.functional.hardtanh", aten = "aten::hardtanh"}
    scf.yield(%h_2)
  } {
    %3 : Any = py.getattr(%m) {attr = "min_val"}
    %4 : Any = py.getattr(%m) {attr = "max_val"}
    %5 : Tensor = torch.call(%h, %3, %4) {callee = "torch.nn.functional.hardtanh", aten = "aten::hardtanh"}
    scf.yield(%5)
  }
  %6 : Tensor = torch.method(%h_1, %w) {method = "mul", aten = "aten::mul.Tensor"}
  %7 : dtype = py.getattr(%h_1) {attr = "dtype"}
  %8 : Tensor = torch.method(%6, %7) {method = "to", alias_of = 0, aten = "aten::to.dtype"}
  %h_1_1 : Tensor = torch.method(%8, %h_1) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  func.return(%h_1_1)
}
""",
    )


INPLACE_LAYERS = sorted(q for q, layer in LAYERS.items() if layer.lowering is not None and layer.lowering.inplace)


@pytest.mark.parametrize("qualname", INPLACE_LAYERS)
def test_an_inplace_activation_is_one_call_whatever_its_inplace(qualname: str) -> None:
    """Every layer the lowering turns into `F.act(h, ..., inplace=True) if m.inplace else
    F.act(h, ...)`: functionalized, both sides are the same call, and canonicalize leaves that
    one call, without the if or the read of `inplace`."""
    program = parse_program(f"""\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {{
  %0 : Module[{qualname}] = py.getattr(%self) {{attr = "m"}}
  %h : Tensor = torch.call(%x) {{callee = "torch.tanh", aten = "aten::tanh"}}
  %y : Tensor = module.call(%0, %h)
  func.return(%y)
}}
""")
    run_pipeline(program, passes=[("layers", lower_layers), ("functionalize", functionalize),
                                  ("canonicalize", canonicalize)], check=True)
    func = program.funcs[0]
    assert not any(isinstance(op, ops.IfOp) for op in func.walk())
    assert not any(isinstance(op, ops.GetAttrOp) and op.attributes["attr"] == "inplace" for op in func.walk())
    [call] = [op for op in func.walk() if isinstance(op, ops.TorchCallOp) and op.attributes["callee"] != "torch.tanh"]
    assert "inplace" not in call.attributes.get("kwnames", ()) and not call.attributes.get("mutates")


def test_an_entry_guard_only_where_a_written_tensor_may_share_memory() -> None:
    """Written x and self.total may share memory with each other, y or self.weight: one entry guard. A
    function writing only its own fresh tensors needs none."""
    check(
        """\
func @M.forward(%self: Module[M], %x: f32[4], %y: f32[4]) -> f32[4] {
  %total : f32[4] = py.getattr(%self) {attr = "total"}
  %0 : f32[4] = torch.method(%total, %x) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %1 : f32[4] = torch.method(%x) {method = "sigmoid_", mutates = (0,), alias_of = 0, aten = "aten::sigmoid_"}
  %w : f32[4] = py.getattr(%self) {attr = "weight"}
  %2 : f32[4] = py.binary(%y, %w) {op = "*"}
  func.return(%2)
}

func @fresh_only(%x: f32[4]) -> f32[4] {
  %w : f32[4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %0 : f32[4] = torch.method(%w) {method = "exp_", mutates = (0,), alias_of = 0, aten = "aten::exp_"}
  func.return(%w)
}
""",
        """\
func @M.forward(%self: Module[M], %x: f32[4], %y: f32[4]) -> f32[4] {
  %total : f32[4] = py.getattr(%self) {attr = "total"}
  %0 : tuple[f32[4], f32[4]] = py.tuple(%total, %x)
  %weight : f32[4] = py.getattr(%self) {attr = "weight"}
  %1 : tuple[f32[4], f32[4]] = py.tuple(%y, %weight)
  %2 : bool = py.call(%0, %1) {callee = "_guards.no_overlap"}
  py.guard(%2) {reason = "`self.total`, `x` (written) may share memory with another tensor argument or attribute"}
  %total_1 : f32[4] = torch.method(%total, %x) {method = "add", aten = "aten::add.Tensor"}
  %x_1 : f32[4] = torch.method(%x) {method = "sigmoid", aten = "aten::sigmoid"}
  %3 : f32[4] = py.binary(%y, %weight) {op = "*"}
  %4 : f32[4] = torch.method(%total, %total_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  %5 : f32[4] = torch.method(%x, %x_1) {method = "copy_", mutates = (0,), alias_of = 0, aten = "aten::copy_", writeback = True}
  func.return(%3)
}

func @fresh_only(%x: f32[4]) -> f32[4] {
  %w : f32[4] = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %w_1 : f32[4] = torch.method(%w) {method = "exp", aten = "aten::exp"}
  func.return(%w_1)
}
""",
    )


LEFT_ALONE = """\
func @f(%self: Module[M], %x: f32[4], %y: f32[4], %c: bool) -> f32[4] {
  %0 : int = py.constant() {value = 3}
  %1 : int = py.constant() {value = 4}
  %e : f32[3, 4] = torch.method(%x, %0, %1) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %2 : f32[3, 4] = torch.method(%e) {method = "zero_", mutates = (0,), alias_of = 0, aten = "aten::zero_"}
  %t : f32[4] = scf.if(%c) {
    scf.yield(%x)
  } {
    scf.yield(%y)
  }
  %3 : f32[4] = torch.method(%t, %0) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
  %r : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %4 : f32[4] = torch.method(%r) {method = "uniform_", mutates = (0,), alias_of = 0, random = True, aten = "aten::uniform_"}
  %w : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %ws : list[Tensor] = py.list(%w)
  %5 : f32[4] = torch.method(%w) {method = "neg_", mutates = (0,), alias_of = 0, aten = "aten::neg_"}
  %6 : f32[4] = torch.call(%ws) {callee = "torch.stack", aten = "aten::stack"}
  %h : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %7 : Module[Block] = py.getattr(%self) {attr = "block"}
  %8 : f32[4] = module.call(%7, %h)
  %9 : f32[4] = torch.method(%h) {method = "sigmoid_", mutates = (0,), alias_of = 0, aten = "aten::sigmoid_"}
  %10 : f32[4] = py.binary(%6, %r) {op = "+"}
  func.return(%10)
}
"""


def test_writes_that_cannot_be_made_functional_stay_with_their_reason() -> None:
    """Through `.expand()` (no inverse), through a value that is x or y, a random in-place op, a tensor
    held by a list, a tensor passed to a module call the compiler does not see into."""
    check(
        LEFT_ALONE,
        """\
func @f(%self: Module[M], %x: f32[4], %y: f32[4], %c: bool) -> f32[4] {
  %0 : int = py.constant() {value = 3}
  %1 : int = py.constant() {value = 4}
  %e : f32[3, 4] = torch.method(%x, %0, %1) {method = "expand", alias_of = 0, aten = "aten::expand"}
  %2 : f32[3, 4] = torch.method(%e) {method = "zero_", mutates = (0,), alias_of = 0, aten = "aten::zero_", unfunctionalized = "`x` is written through `.expand()`, which has no inverse"}
  %t : f32[4] = scf.if(%c) {
    scf.yield(%x)
  } {
    scf.yield(%y)
  }
  %3 : f32[4] = torch.method(%t, %0) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor", unfunctionalized = "writes through a value that may be one of several tensors (`x`, `y`)"}
  %r : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %4 : f32[4] = torch.method(%r) {method = "uniform_", mutates = (0,), alias_of = 0, random = True, aten = "aten::uniform_", unfunctionalized = "`r` is written: `uniform_` draws random numbers"}
  %w : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %ws : list[Tensor] = py.list(%w)
  %5 : f32[4] = torch.method(%w) {method = "neg_", mutates = (0,), alias_of = 0, aten = "aten::neg_", unfunctionalized = "`w` is stored in a list"}
  %6 : f32[4] = torch.call(%ws) {callee = "torch.stack", aten = "aten::stack"}
  %h : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %7 : Module[Block] = py.getattr(%self) {attr = "block"}
  %8 : f32[4] = module.call(%7, %h)
  %9 : f32[4] = torch.method(%h) {method = "sigmoid_", mutates = (0,), alias_of = 0, aten = "aten::sigmoid_", unfunctionalized = "`h` is passed to `module.call`, which may read or write it"}
  %10 : f32[4] = py.binary(%6, %r) {op = "+"}
  func.return(%10)
}
""",
    )


def test_a_tensor_written_before_it_is_put_in_a_list_is_functional() -> None:
    """`torch.cat([F.relu(a, inplace=True), b])` (squeezenet's Fire module): the list holds the
    written value; a write after the list was built stays (test above)."""
    out = run("""\
func @f(%y: f32[4]) -> f32[8] {
  %w : f32[4] = torch.method(%y) {method = "clone", aten = "aten::clone"}
  %0 : f32[4] = torch.method(%w) {method = "neg_", mutates = (0,), alias_of = 0, aten = "aten::neg_"}
  %ws : list[Tensor] = py.list(%0, %y)
  %1 : f32[8] = torch.call(%ws) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%1)
}
""")
    assert "unfunctionalized" not in out and "neg_" not in out
    assert '%ws : list[Tensor] = py.list(%w_1, %y)' in out and '%w_1 : f32[4] = torch.method(%w) {method = "neg"' in out


SPLIT_THEN_LIST = """\
func @f(%self: Module[M], %x: f32[4, 4]) -> f32[4, 4] {
  %0 : int = py.constant() {value = 2}
  %1 : int = py.constant() {value = 1}
  %i : int = py.constant() {value = 0}
  %parts : list[f32[4, 2]] = torch.call(%x, %0, %1) {callee = "torch.split", alias_of = 0, aten = "aten::split.Tensor"}
  %a : f32[4, 2] = py.getitem(%parts, %i)
  %b : f32[4, 2] = torch.method(%a) {method = "exp", aten = "aten::exp"}
  %c : f32[4, 2] = torch.method(%b) {method = "relu_", mutates = (0,), alias_of = 0, aten = "aten::relu_"}
  %d : f32[4, 2] = py.getitem(%parts, %1)
  %e : f32[4, 2] = py.binary(%c, %d) {op = "+"}
  %outs : list[Tensor] = py.list(%c, %e)
  %r : f32[4, 4] = torch.call(%outs, %1) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%r)
}
"""


def test_an_item_of_a_split_is_not_what_another_list_holds() -> None:
    """Res2Net's branches: items of `torch.split(x, w)` read after an in-place activation of a
    tensor that goes into another list. Each list the function makes and keeps to itself holds
    only what is put into it, so the read is not of the written tensor: the write is functional."""
    out = run(SPLIT_THEN_LIST)
    assert "unfunctionalized" not in out and "relu_" not in out, out


def test_lists_another_name_can_reach_may_hold_what_the_other_holds() -> None:
    """The same, with the split's list passed to a module call and the list of results put in a
    tuple: through other names either may gain the other's items, so the call may reach the
    written tensor, and the write stays."""
    text = SPLIT_THEN_LIST.replace(
        '  %a : f32[4, 2] = py.getitem(%parts, %i)\n',
        '  %m : Module[Block] = py.getattr(%self) {attr = "block"}\n'
        '  %n : f32[4, 2] = module.call(%m, %parts)\n'
        '  %a : f32[4, 2] = py.getitem(%parts, %i)\n').replace(
        '  %r : f32[4, 4]', '  %t : tuple[list[Tensor]] = py.tuple(%outs)\n  %r : f32[4, 4]')
    out = run(text)
    assert 'aten = "aten::relu_", unfunctionalized = "`b` is passed to `module.call`' in out, out


def test_notes_say_where_and_why_writes_were_left() -> None:
    notes = functionalize_function(parse_program(LEFT_ALONE).funcs[0]).notes  # type: ignore[arg-type]
    assert notes == [
        "`x` is written through `.expand()`, which has no inverse",
        "writes through a value that may be one of several tensors (`x`, `y`)",
        "`r` is written: `uniform_` draws random numbers",
        "`w` is stored in a list",
        "`h` is passed to `module.call`, which may read or write it",
    ]


# -- hand-written models against eager --------------------------------------------------------------
MODELS = '''\
"""Models that write tensors in place (their inputs, buffers, views, fresh tensors)."""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


@script
def inplace_ops(x: Tensor, y: Tensor) -> Tensor:
    x.add_(y)
    x.mul_(2)
    x.clamp_(min=-1.0, max=1.0)
    x += y
    x *= torch.tanh(y)
    return x.relu_()


@script
def dtypes(x: Tensor, y: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
    x.add_(y)
    x /= 3
    i += 3
    i.mul_(2)
    i[0] = 7.9
    w = x.clone()
    w.gt_(0)
    w += 1
    return w, i


@script
def copies(x: Tensor, r: Tensor, i: Tensor) -> tuple[Tensor, Tensor]:
    w = torch.zeros(3, 4, dtype=torch.float64)
    w.copy_(r)
    i.copy_(x * 10)
    i[1] = x[1] * 100
    w[2].fill_(w[0, 0] + 1.0)
    x.zero_()
    return w, i


@script
def activations(x: Tensor, y: Tensor) -> Tensor:
    F.relu(x, inplace=True)
    torch.sigmoid_(y)
    h = F.leaky_relu(x - y, 0.1, True)
    F.hardtanh_(h)
    return h


@script
def indexing(x: Tensor, m: Tensor, v: Tensor) -> Tensor:
    w = x.clone()
    w[m] = 0.5
    w[0] = v
    w[:, 1:3] = 2.0
    w[1] += 1.0
    w[-1, ::2] = v[::2]
    w[..., 0] = -1.0
    w[w > 1.5] = w[w > 1.5] * 10
    w[None, 2] *= 3.0
    x[:, 0] = w.sum(1)
    return w


@script
def views(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    v = y[:, 0]
    v.mul_(2)
    c = x.t()
    c[0].add_(1.0)
    d = x.transpose(0, 1).unsqueeze(0)
    d.sub_(0.5)
    p = x.permute(1, 0)
    p[1:].neg_()
    x.view(-1)[::5].fill_(9.0)
    return v, y.sum(0), c


@script
def fresh_views(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    w = torch.zeros(3, 4)
    a = w[0]
    b = w.t()
    a.fill_(1.0)
    b[1].add_(x[0, 0])
    d = w.diagonal()
    d.mul_(3.0)
    n = w.narrow(1, 1, 2)
    n.copy_(x[:, :2])
    m = w.movedim(0, 1)
    m[0].sub_(1.0)
    return a, b, w


@script
def control_flow(x: Tensor, n: int) -> tuple[Tensor, Tensor]:
    w = x.clone()
    if n > 1:
        w.mul_(2)
        x.add_(1)
    else:
        x[0] = 0.0
    for i in range(n):
        w[i % 3] += 1.0
        if i == 2:
            x.sub_(w)
            break
    k = n
    while k > 0:
        x.mul_(0.5)
        k -= 1
    return w, x


@script
def early_return(x: Tensor, n: int) -> Tensor:
    x.add_(1)
    if n > 0:
        return x
    v = x[0]
    v.zero_()
    return v


@script
def returned_aliases(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    t = x.add_(1)
    r = y[1:]
    r.mul_(3)
    return t, x[0], r, y


@script
def pair(p: tuple[Tensor, Tensor]) -> Tensor:
    a, b = p
    a.add_(b)
    return a * 2


@script
def split_branches(x: Tensor) -> Tensor:
    parts = torch.split(x, 2, 1)
    outs: list[Tensor] = []
    h = F.relu(parts[0] * 2.0, inplace=True)
    outs.append(h)
    h = F.relu(h + parts[1], inplace=True)
    outs.append(h)
    outs.append(parts[2])
    return torch.cat(outs, 1)


@script
def listed_then_written(x: Tensor, n: int) -> Tensor:
    a = x * 2.0
    outs: list[Tensor] = [a]
    for i in range(n):
        outs.append(x[i] * 1.0)
    a.mul_(3.0)
    b = outs[-1]
    b.add_(1.0)
    return outs[0] + torch.stack(outs[1:]).sum(0)


@script
def left_alone(x: Tensor, y: Tensor, c: bool) -> Tensor:
    t = x if c else y
    t.mul_(2)
    return x + y


@script
class Tracker(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.register_buffer("total", torch.zeros(4))
        self.bn = nn.BatchNorm1d(4)
        self.act = nn.ReLU(inplace=True)
        self.calls = 0

    def forward(self, x: Tensor) -> Tensor:
        self.calls += 1
        if self.training:
            self.count += 1
        self.total.mul_(0.9).add_(x.mean(0), alpha=0.1)
        h = self.act(self.bn(x))
        h += self.total
        return self.act(h)
'''

PASSES = [("inline", inline), ("layers", lower_layers), ("canonicalize", canonicalize), ("shapes", propagate_shapes),
          ("functionalize", functionalize), ("dce", dce)]


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype)


# name -> (inputs, whether every write becomes functional)
FUNCTIONS: dict[str, tuple[Callable[[], list[Any]], bool]] = {
    "inplace_ops": (lambda: [randn(3, 4), randn(3, 4, seed=1)], True),
    "dtypes": (lambda: [randn(3, 4), randn(4, seed=1, dtype=torch.float64), torch.arange(12).reshape(3, 4)], True),
    "copies": (lambda: [randn(3, 4), randn(4, seed=1), torch.zeros(3, 4, dtype=torch.int64)], True),
    "activations": (lambda: [randn(3, 4), randn(3, 4, seed=1)], True),
    "indexing": (lambda: [randn(3, 4), randn(3, 4, seed=1) > 0, randn(4, seed=2)], True),
    "views": (lambda: [randn(3, 4), randn(3, 4, seed=1)], True),
    "fresh_views": (lambda: [randn(3, 4)], True),
    "control_flow": (lambda: [randn(3, 4), 4], True),
    "early_return": (lambda: [randn(3, 4), 0], True),
    "returned_aliases": (lambda: [randn(3, 4), randn(3, 4, seed=1)], True),
    "pair": (lambda: [(randn(3, 4), randn(3, 4, seed=1))], True),
    "split_branches": (lambda: [randn(3, 6)], True),
    "listed_then_written": (lambda: [randn(3, 4), 3], False),
    "left_alone": (lambda: [randn(3, 4), randn(3, 4, seed=1), True], False),
}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    """MODELS written as a module with its compiled module (through PASSES) next to it."""
    directory = tmp_path_factory.mktemp("functionalize_models")
    path = directory / "functionalize_models.py"
    path.write_text(MODELS)
    source = SourceFile.read(path, path.name)
    program, entries = lower_file(source)
    run_pipeline(program, passes=PASSES, check=True)
    left = {f.sym_name: writes_left(Program(path.name, [f])) for f in program.funcs}
    header = Header(path.name, source_hash(source.text), f"torchscribe {path.name}", VERSION, torch_version())
    (directory / "functionalize_models_compiled.py").write_text(emit_module(program, header, entries, source.lines))
    sys.path.insert(0, str(directory))
    try:
        module = importlib.import_module("functionalize_models")
    finally:
        sys.path.remove(str(directory))
    yield module, left
    sys.modules.pop("functionalize_models", None)
    sys.modules.pop("functionalize_models_compiled", None)
    runtime.reset()


def call(fn: Any, args: list[Any], mode: str) -> Any:
    with runtime.mode(mode), torch.no_grad():
        return fn(*args)


def inputs_of(args: list[Any]) -> list[Any]:
    """The tensors the caller passed (those in a tuple argument too)."""
    out: list[Any] = []
    for a in args:
        out += list(a) if isinstance(a, tuple) else [a]
    return out


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_functions_compiled_through_functionalize_match_eager(models, name: str) -> None:
    module, left = models
    make, functional = FUNCTIONS[name]
    fn = getattr(module, name)
    args_e, args_c = make(), make()
    expected = call(fn, args_e, "off")
    got = call(fn, args_c, "strict")
    tp.assert_same(expected, got, "result")
    tp.assert_same(args_e, args_c, "arguments after the call")
    assert tp.alias_pattern(got, inputs_of(args_c)) == tp.alias_pattern(expected, inputs_of(args_e))
    assert (left[name] == []) == functional, left[name]


@pytest.mark.parametrize("training", [True, False])
def test_module_with_buffers_and_inplace_layers_matches_eager(models, training: bool) -> None:
    module, left = models
    assert left["Tracker.forward"] == []
    torch.manual_seed(0)
    eager = module.Tracker().train(training)
    compiled = copy.deepcopy(eager)
    for k in range(3):
        x = randn(5, 4, seed=k)
        expected = call(eager, [x.clone()], "off")
        got = call(compiled, [x.clone()], "strict")
        tp.assert_same(expected, got, f"call {k}")
    assert compiled.calls == eager.calls == 3
    for key, value in eager.state_dict().items():
        tp.assert_same(value, compiled.state_dict()[key], key)


def test_inputs_sharing_memory_take_the_eager_path(models) -> None:
    """A written input that shares memory with another (or with a buffer) fails the entry guard:
    eager runs instead, and strict mode raises."""
    module, _ = models
    runtime.reset()
    x = randn(3, 4)
    y = x.clone()
    expected = call(module.inplace_ops, [y, y], "off")
    with pytest.warns(runtime.TorchscribeWarning, match="may share memory"):
        got = call(module.inplace_ops, [x, x], "on")
    tp.assert_same(expected, got, "result")
    tp.assert_same(y, x, "the input after the call")
    assert runtime.fallback_counts() == {"functionalize_models.inplace_ops": 1}
    with pytest.raises(runtime.TorchscribeError, match="may share memory"):
        call(module.inplace_ops, [x, x[0]], "strict")
    model = module.Tracker().eval()
    expected_model = copy.deepcopy(model)
    expected = call(expected_model, [expected_model.total.expand(2, 4)], "off")
    with pytest.warns(runtime.TorchscribeWarning, match="may share memory"):
        got = call(model, [model.total.expand(2, 4)], "on")
    tp.assert_same(expected, got, "result")
    tp.assert_same(expected_model.total, model.total, "self.total")
    assert runtime.fallback_counts()["functionalize_models.Tracker.forward"] == 1
    runtime.reset()


def test_no_overlap_looks_at_memory_ranges() -> None:
    x = torch.zeros(4, 6)
    assert guards.no_overlap((x[0],), (x[1], x[:, 0].clone(), None, [torch.zeros(0)]))
    assert not guards.no_overlap((x[0],), (x[:, 2],))  # a column crosses row 0
    assert not guards.no_overlap((x, x), ())
    assert not guards.no_overlap((x[1:3],), ((None, x.t()),))
    assert guards.no_overlap((x[0, :3],), (x[0, 3:],))
    assert not guards.no_overlap((x,), (torch.zeros(2, 2).to_sparse(),))  # no strides: eager


# -- the examples, through the pipeline with functionalization --------------------------------------
EXAMPLES = sorted(
    p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)
WRITING_EXAMPLES = {"indexing", "residual_block", "running_stats"}  # they write tensors in place


@pytest.fixture(scope="module")
def functional_examples(tmp_path_factory: pytest.TempPathFactory):
    """The examples copied into a fresh package and compiled through PASSES: (package, the writes
    each example's compiled functions keep)."""
    package = f"functional_examples_{id(tmp_path_factory)}"
    root = tmp_path_factory.mktemp("functionalize_examples")
    (root / package).mkdir()
    left: dict[str, list[str]] = {}
    for stem in EXAMPLES + ["__init__"]:
        shutil.copy(ROOT / "examples" / f"{stem}.py", root / package / f"{stem}.py")
    for stem in EXAMPLES:
        path = root / package / f"{stem}.py"
        source = SourceFile.read(path, path.name)
        if not source.targets():
            continue
        program, entries = lower_file(source)
        run_pipeline(program, passes=PASSES, check=True)
        left[stem] = writes_left(program)
        header = Header(path.name, source_hash(source.text), f"torchscribe {path.name}", VERSION, torch_version())
        path.with_name(f"{stem}_compiled.py").write_text(emit_module(program, header, entries, source.lines))
    sys.path.insert(0, str(root))
    yield package, left
    sys.path.remove(str(root))
    runtime.reset()


@pytest.mark.parametrize("stem", EXAMPLES)
def test_examples_compiled_through_functionalize_match_eager(functional_examples, stem: str) -> None:
    from benchmarks.compare import compare, factories, observe, snapshot

    package, left = functional_examples
    if stem in WRITING_EXAMPLES:
        assert left[stem] == [], left[stem]
    module = importlib.import_module(f"{package}.{stem}")
    for variant, factory in factories(module):
        seen = {}
        for mode in ("off", "strict"):
            model, inputs = factory()
            with runtime.mode(mode), torch.no_grad():
                out = model(*inputs)
            seen[mode] = snapshot(observe(model, inputs, out))
        result = compare(seen["off"], seen["strict"], atol=0.0, rtol=0.0)
        assert result.ok, f"{stem}[{variant}]: {result.mismatches}"


# -- generated programs against eager ---------------------------------------------------------------
def functionalize_and_check(program: Program) -> None:
    functionalize(program)
    verify(program)
    writes_left(program)


@pytest.fixture
def pipeline_with_functionalize(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI (which the generated-program tests drive) compiles through PASSES, checked."""
    monkeypatch.setattr(passes, "PIPELINE", [(name, functionalize_and_check if fn is functionalize else fn)
                                             for name, fn in PASSES])


@settings(max_examples=25, **tp.SETTINGS)
@given(prog=pg.programs(mutate_inputs=True))
def test_generated_functions_writing_their_inputs_match_eager(program_dir: Path, pipeline_with_functionalize: None,
                                                              prog: pg.Program) -> None:
    tp.differential(program_dir, prog)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=15, **tp.SETTINGS)
@given(prog=pg.module_programs())
def test_generated_modules_updating_buffers_match_eager(program_dir: Path, pipeline_with_functionalize: None,
                                                        prog: pg.Program) -> None:
    tp.test_generated_modules.hypothesis.inner_test(program_dir, prog)  # type: ignore[attr-defined]

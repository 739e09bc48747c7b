"""Inlining and layer lowering: IR in and IR out for each rule, then compiled vs eager on small
models using every lowered layer (eval and train, with and without hooks) and on every example."""

from __future__ import annotations

import copy
import importlib
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import runtime  # noqa: E402
from benchmarks.compare import compare, factories, observe, snapshot  # noqa: E402
from codegen.module import Header, emit_module  # noqa: E402
from codegen.python_function import FunctionEmitter  # noqa: E402
from ir.core import ops  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes import run_pipeline  # noqa: E402
from ir.passes.dce import dce  # noqa: E402
from ir.passes.inline import inline  # noqa: E402
from ir.passes.layers import LAYERS, lower_layers  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.verifier import verify  # noqa: E402
from runtime import guards  # noqa: E402
from runtime.source_hash import source_hash  # noqa: E402
from transpiler.pipeline import lower_file  # noqa: E402
from transpiler.source import SourceFile  # noqa: E402

PASSES = [("inline", inline), ("layers", lower_layers), ("dce", dce)]


def run_passes(text: str, *passes) -> str:
    program = parse_program(text)
    verify(program)
    for p in passes:
        p(program)
        verify(program)
    out = print_program(program)
    for p in passes:  # a second run changes nothing
        p(program)
    assert print_program(program) == out, "not idempotent"
    return out


def check(before: str, after: str, *passes) -> None:
    got = run_passes(before, *(passes or (inline,)))
    assert got == after, "\n" + got


# -- inlining, IR in and IR out ---------------------------------------------------------------------
def test_straight_line_call_is_replaced_by_the_body() -> None:
    check(
        """\
func @scale(%x: Tensor, %k: float) -> Tensor {  # f.py:1:1
  %y : Tensor = py.binary(%x, %k) {op = "*"}  # f.py:2:5
  %z : Tensor = torch.call(%y) {callee = "torch.tanh", aten = "aten::tanh"}  # f.py:3:5
  func.return(%z)  # f.py:4:5
}

func @f(%a: Tensor) -> Tensor {  # f.py:7:1
  %0 : float = py.constant() {value = 2.0}  # f.py:8:20
  %b : Tensor = func.call(%a, %0) {callee = "scale"}  # f.py:8:9
  %c : Tensor = py.binary(%b, %a) {op = "+"}  # f.py:9:9
  func.return(%c)  # f.py:10:5
}
""",
        """\
func @scale(%x: Tensor, %k: float) -> Tensor {  # f.py:1:1
  %y : Tensor = py.binary(%x, %k) {op = "*"}  # f.py:2:5
  %z : Tensor = torch.call(%y) {callee = "torch.tanh", aten = "aten::tanh"}  # f.py:3:5
  func.return(%z)  # f.py:4:5
}

func @f(%a: Tensor) -> Tensor {  # f.py:7:1
  %0 : float = py.constant() {value = 2.0}  # f.py:8:20
  %y : Tensor = py.binary(%a, %0) {op = "*"}  # f.py:2:5
  %z : Tensor = torch.call(%y) {callee = "torch.tanh", aten = "aten::tanh"}  # f.py:3:5
  %c : Tensor = py.binary(%z, %a) {op = "+"}  # f.py:9:9
  func.return(%c)  # f.py:10:5
}
""",
    )


def test_callee_with_control_flow_and_a_returned_argument() -> None:
    """Regions are copied with their block arguments; a callee returning its own argument
    makes the call's result that argument's value in the caller."""
    check(
        """\
func @clip(%x: Tensor, %n: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.compare(%n, %0) {op = ">"}
  %r : Tensor = scf.if(%1) {
    %2 : int = py.constant() {value = 1}
    %3 : Tensor = scf.for(%0, %n, %2, %x) {
      ^(%i: int, %acc: Tensor):
      %4 : Tensor = torch.call(%acc) {callee = "torch.tanh"}
      scf.yield(%4)
    }
    scf.yield(%3)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}

func @same(%x: Tensor) -> Tensor {
  func.return(%x)
}

func @f(%a: Tensor, %n: int) -> Tensor {
  %b : Tensor = func.call(%a, %n) {callee = "clip"}
  %c : Tensor = func.call(%b) {callee = "same"}
  func.return(%c)
}
""",
        """\
func @clip(%x: Tensor, %n: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.compare(%n, %0) {op = ">"}
  %r : Tensor = scf.if(%1) {
    %2 : int = py.constant() {value = 1}
    %3 : Tensor = scf.for(%0, %n, %2, %x) {
      ^(%i: int, %acc: Tensor):
      %4 : Tensor = torch.call(%acc) {callee = "torch.tanh"}
      scf.yield(%4)
    }
    scf.yield(%3)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}

func @same(%x: Tensor) -> Tensor {
  func.return(%x)
}

func @f(%a: Tensor, %n: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : bool = py.compare(%n, %0) {op = ">"}
  %r : Tensor = scf.if(%1) {
    %2 : int = py.constant() {value = 1}
    %3 : Tensor = scf.for(%0, %n, %2, %a) {
      ^(%i: int, %acc: Tensor):
      %4 : Tensor = torch.call(%acc) {callee = "torch.tanh"}
      scf.yield(%4)
    }
    scf.yield(%3)
  } {
    scf.yield(%a)
  }
  func.return(%r)
}
""",
    )


def test_nested_calls_inside_regions_are_all_inlined() -> None:
    """f calls g inside a branch, g calls h: f ends up with h's body, in the branch."""
    check(
        """\
func @h(%x: Tensor) -> Tensor {
  %y : Tensor = torch.call(%x) {callee = "torch.relu"}
  func.return(%y)
}

func @g(%x: Tensor) -> Tensor {
  %y : Tensor = func.call(%x) {callee = "h"}
  %z : Tensor = func.call(%y) {callee = "h"}
  func.return(%z)
}

func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    %y : Tensor = func.call(%x) {callee = "g"}
    scf.yield(%y)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
""",
        """\
func @h(%x: Tensor) -> Tensor {
  %y : Tensor = torch.call(%x) {callee = "torch.relu"}
  func.return(%y)
}

func @g(%x: Tensor) -> Tensor {
  %y : Tensor = torch.call(%x) {callee = "torch.relu"}
  %y_1 : Tensor = torch.call(%y) {callee = "torch.relu"}
  func.return(%y_1)
}

func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.relu"}
    %y_1 : Tensor = torch.call(%y) {callee = "torch.relu"}
    scf.yield(%y_1)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
""",
    )


def test_recursion_is_left_alone() -> None:
    """A function on a call cycle is not inlined, neither into itself nor into others."""
    text = """\
func @fact(%n: int) -> int {
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.compare(%n, %0) {op = "<="}
  %r : int = scf.if(%1) {
    scf.yield(%0)
  } {
    %2 : int = py.binary(%n, %0) {op = "-"}
    %3 : int = func.call(%2) {callee = "fact"}
    %4 : int = py.binary(%n, %3) {op = "*"}
    scf.yield(%4)
  }
  func.return(%r)
}

func @ping(%n: int) -> int {
  %0 : int = func.call(%n) {callee = "pong"}
  func.return(%0)
}

func @pong(%n: int) -> int {
  %0 : int = func.call(%n) {callee = "ping"}
  func.return(%0)
}

func @f(%n: int) -> int {
  %a : int = func.call(%n) {callee = "fact"}
  %b : int = func.call(%a) {callee = "ping"}
  func.return(%b)
}
"""
    check(text, text)


def test_calls_that_do_not_bind_exactly_stay() -> None:
    """An argument whose type does not fit the parameter (an int for a float: Python passes
    the int, the callee's IR says float) keeps the call."""
    text = """\
func @g(%x: Tensor, %k: float) -> Tensor {
  %y : Tensor = py.binary(%x, %k) {op = "*"}
  func.return(%y)
}

func @f(%x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 2}
  %y : Tensor = func.call(%x, %0) {callee = "g"}
  func.return(%y)
}
"""
    check(text, text)


SUBMODULE = """\
func @Block.forward(%self: Module[Block], %x: Tensor, %scale: float = 1.0, %bias: Optional[Tensor] = None) -> Tensor {  # m.py:5:5
  %0 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "fc"}  # m.py:6:13
  %y : Tensor = module.call(%0, %x)  # m.py:6:13
  %y_1 : Tensor = py.binary(%y, %scale) {op = "*"}  # m.py:7:13
  func.return(%y_1)  # m.py:8:9
}

func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {  # m.py:12:5
  %0 : Module[Block] = py.getattr(%self) {attr = "block"}  # m.py:13:13
  %1 : float = py.constant() {value = 3.0}  # m.py:13:35
  %y : Tensor = module.call(%0, %x, %1) {kwnames = ("scale",)}  # m.py:13:13
  %2 : ModuleList[Module[Block], ...] = py.getattr(%self) {attr = "layers"}  # m.py:14:24
  %out : Tensor = scf.for_each(%2, %y) {  # m.py:14:9
    ^(%layer: Module[Block], %h: Tensor):
    %h_1 : Tensor = module.call(%layer, %h)  # m.py:15:17
    scf.yield(%h_1)  # m.py:15:17
  }
  func.return(%out)  # m.py:16:9
}
"""


def test_submodule_call_is_inlined_behind_an_entry_guard() -> None:
    """`self.block(x, scale=3.0)` gets Block.forward's body with self bound to `self.block` and
    the default filled in; the guard at entry checks that self.block is exactly a Block without
    hooks. The call of a layer reached through the ModuleList loop stays: it cannot be checked
    at entry."""
    check(
        SUBMODULE,
        SUBMODULE.split("\n\n")[0] + "\n\n" + """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {  # m.py:12:5
  %0 : str = py.constant() {value = "block"}  # m.py:13:13
  %1 : str = py.constant() {value = "Block"}  # m.py:13:13
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}  # m.py:13:13
  py.guard(%2) {reason = "self.block is not an unhooked Block"}  # m.py:13:13
  %3 : Module[Block] = py.getattr(%self) {attr = "block"}  # m.py:13:13
  %4 : float = py.constant() {value = 3.0}  # m.py:13:35
  %5 : None = py.constant() {value = None}  # m.py:13:13
  %6 : Module[torch.nn.Linear] = py.getattr(%3) {attr = "fc"}  # m.py:6:13
  %y : Tensor = module.call(%6, %x)  # m.py:6:13
  %y_1 : Tensor = py.binary(%y, %4) {op = "*"}  # m.py:7:13
  %7 : ModuleList[Module[Block], ...] = py.getattr(%self) {attr = "layers"}  # m.py:14:24
  %out : Tensor = scf.for_each(%7, %y_1) {  # m.py:14:9
    ^(%layer: Module[Block], %h: Tensor):
    %h_1 : Tensor = module.call(%layer, %h)  # m.py:15:17
    scf.yield(%h_1)  # m.py:15:17
  }
  func.return(%out)  # m.py:16:9
}
""",
    )


def test_guards_of_an_inlined_callee_move_to_the_callers_entry() -> None:
    """Lowering layers first puts `plain_module(self, "fc", ...)` into Block.forward; inlining
    Block into Net moves it to Net's entry as `plain_module(self, "block.fc", ...)`."""
    out = run_passes(SUBMODULE, lower_layers, inline, dce)
    net = out.split("\n\n")[1]
    assert net == """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {  # m.py:12:5
  %0 : str = py.constant() {value = "block"}  # m.py:13:13
  %1 : str = py.constant() {value = "Block"}  # m.py:13:13
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}  # m.py:13:13
  py.guard(%2) {reason = "self.block is not an unhooked Block"}  # m.py:13:13
  %3 : str = py.constant() {value = "block.fc"}  # m.py:6:13
  %4 : str = py.constant() {value = "torch.nn.Linear"}  # m.py:6:13
  %5 : bool = py.call(%self, %3, %4) {callee = "_guards.plain_module"}  # m.py:6:13
  py.guard(%5) {reason = "self.block.fc is not an unhooked torch.nn.Linear"}  # m.py:6:13
  %6 : Module[Block] = py.getattr(%self) {attr = "block"}  # m.py:13:13
  %7 : float = py.constant() {value = 3.0}  # m.py:13:35
  %fc : Module[torch.nn.Linear] = py.getattr(%6) {attr = "fc"}  # m.py:6:13
  %8 : Tensor = py.getattr(%fc) {attr = "weight"}  # m.py:6:13
  %9 : Optional[Tensor] = py.getattr(%fc) {attr = "bias"}  # m.py:6:13
  %y : Tensor = torch.call(%x, %8, %9) {callee = "torch.nn.functional.linear", aten = "aten::linear"}  # m.py:6:13
  %y_1 : Tensor = py.binary(%y, %7) {op = "*"}  # m.py:7:13
  %10 : ModuleList[Module[Block], ...] = py.getattr(%self) {attr = "layers"}  # m.py:14:24
  %out : Tensor = scf.for_each(%10, %y_1) {  # m.py:14:9
    ^(%layer: Module[Block], %h: Tensor):
    %h_1 : Tensor = module.call(%layer, %h)  # m.py:15:17
    scf.yield(%h_1)  # m.py:15:17
  }
  func.return(%out)  # m.py:16:9
}
"""


def test_optional_submodule_is_inlined_under_its_none_check() -> None:
    """`if self.extra is not None: self.extra(x)` on an Optional[Module[Block]]: the guard's
    path marks the Optional link ("extra?": None passes, the call is not reached then)."""
    text = """\
func @Block.forward(%self: Module[Block], %x: Tensor) -> Tensor {
  %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
  func.return(%y)
}

func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : Optional[Module[Block]] = py.getattr(%self) {attr = "extra"}
  %1 : None = py.constant() {value = None}
  %2 : bool = py.compare(%0, %1) {op = "is not"}
  %r : Tensor = scf.if(%2) {
    %3 : Optional[Module[Block]] = py.getattr(%self) {attr = "extra"}
    %4 : Module[Block] = py.refine(%3)
    %5 : Tensor = module.call(%4, %x)
    scf.yield(%5)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    out = run_passes(text, inline, dce).split("\n\n")[1]
    assert out == """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : str = py.constant() {value = "extra?"}
  %1 : str = py.constant() {value = "Block"}
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}
  py.guard(%2) {reason = "self.extra is not an unhooked Block"}
  %3 : Optional[Module[Block]] = py.getattr(%self) {attr = "extra"}
  %4 : None = py.constant() {value = None}
  %5 : bool = py.compare(%3, %4) {op = "is not"}
  %r : Tensor = scf.if(%5) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%y)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""


def test_modules_that_cannot_be_checked_at_entry_keep_their_call() -> None:
    """A path through an attribute the program assigns, a module chosen by a branch, and a
    callee with a guard of another kind stay calls."""
    text = """\
func @Block.forward(%self: Module[Block], %x: Tensor) -> Tensor {
  %0 : bool = py.call(%x) {callee = "_guards.something_else"}
  py.guard(%0) {reason = "other"}
  func.return(%x)
}

func @Leaf.forward(%self: Module[Leaf], %x: Tensor) -> Tensor {
  func.return(%x)
}

func @Net.forward(%self: Module[Net], %x: Tensor, %c: bool) -> Tensor {
  %0 : Module[Block] = py.getattr(%self) {attr = "block"}
  %1 : Tensor = module.call(%0, %x)
  %2 : Module[Leaf] = py.getattr(%self) {attr = "swapped"}
  %3 : Tensor = module.call(%2, %1)
  py.setattr(%self, %0) {attr = "swapped"}
  %m : Module[Leaf] = scf.if(%c) {
    %4 : Module[Leaf] = py.getattr(%self) {attr = "a"}
    scf.yield(%4)
  } {
    %5 : Module[Leaf] = py.getattr(%self) {attr = "b"}
    scf.yield(%5)
  }
  %6 : Tensor = module.call(%m, %3)
  func.return(%6)
}
"""
    check(text, text)


# -- layers, IR in and IR out -----------------------------------------------------------------------
def test_batch_norm_lowers_to_f_batch_norm_in_eval_and_keeps_the_call_in_training() -> None:
    check(
        """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {  # m.py:9:5
  %0 : Module[torch.nn.BatchNorm2d] = py.getattr(%self) {attr = "bn"}  # m.py:10:16
  %y : Tensor = module.call(%0, %x)  # m.py:10:16
  func.return(%y)  # m.py:11:9
}
""",
        """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {  # m.py:9:5
  %0 : str = py.constant() {value = "bn"}  # m.py:10:16
  %1 : str = py.constant() {value = "torch.nn.BatchNorm2d"}  # m.py:10:16
  %2 : str = py.constant() {value = "running_stats"}  # m.py:10:16
  %3 : bool = py.call(%self, %0, %1, %2) {callee = "_guards.plain_module"}  # m.py:10:16
  py.guard(%3) {reason = "self.bn is not an unhooked torch.nn.BatchNorm2d with running statistics"}  # m.py:10:16
  %bn : Module[torch.nn.BatchNorm2d] = py.getattr(%self) {attr = "bn"}  # m.py:10:16
  %4 : bool = py.getattr(%bn) {attr = "training"}  # m.py:10:16
  %y : Tensor = scf.if(%4) {  # m.py:10:16
    %y_1 : Tensor = module.call(%bn, %x) {kept = "training"}  # m.py:10:16
    scf.yield(%y_1)  # m.py:10:16
  } {
    %5 : Tensor = py.getattr(%bn) {attr = "running_mean"}  # m.py:10:16
    %6 : Tensor = py.getattr(%bn) {attr = "running_var"}  # m.py:10:16
    %7 : Optional[Tensor] = py.getattr(%bn) {attr = "weight"}  # m.py:10:16
    %8 : Optional[Tensor] = py.getattr(%bn) {attr = "bias"}  # m.py:10:16
    %9 : bool = py.constant() {value = False}  # m.py:10:16
    %10 : float = py.constant() {value = 0.0}  # m.py:10:16
    %11 : Any = py.getattr(%bn) {attr = "eps"}  # m.py:10:16
    %12 : Tensor = torch.call(%x, %5, %6, %7, %8, %9, %10, %11) {callee = "torch.nn.functional.batch_norm", aten = "aten::batch_norm"}  # m.py:10:16
    scf.yield(%12)  # m.py:10:16
  }
  func.return(%y)  # m.py:11:9
}
""",
        lower_layers,
    )


def test_inplace_activation_writes_exactly_when_the_module_would() -> None:
    """ReLU reads `inplace` at run time: the in-place call (mutates, aliases its input) on one
    side, the functional one on the other. Dropout in eval is its input itself (the call stays for training); the same
    module called twice is guarded once."""
    check(
        """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %y : Tensor = module.call(%0, %x)
  %1 : Module[torch.nn.Dropout] = py.getattr(%self) {attr = "drop"}
  %z : Tensor = module.call(%1, %y)
  %2 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %w : Tensor = module.call(%2, %z)
  func.return(%w)
}
""",
        """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : str = py.constant() {value = "act"}
  %1 : str = py.constant() {value = "torch.nn.ReLU"}
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}
  py.guard(%2) {reason = "self.act is not an unhooked torch.nn.ReLU"}
  %3 : str = py.constant() {value = "drop"}
  %4 : str = py.constant() {value = "torch.nn.Dropout"}
  %5 : str = py.constant() {value = "valid_p"}
  %6 : bool = py.call(%self, %3, %4, %5) {callee = "_guards.plain_module"}
  py.guard(%6) {reason = "self.drop is not an unhooked torch.nn.Dropout with 0 <= p <= 1"}
  %7 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %8 : bool = py.getattr(%7) {attr = "inplace"}
  %y : Tensor = scf.if(%8) {
    %9 : bool = py.constant() {value = True}
    %10 : Tensor = torch.call(%x, %9) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
    scf.yield(%10)
  } {
    %11 : Tensor = torch.call(%x) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%11)
  }
  %drop : Module[torch.nn.Dropout] = py.getattr(%self) {attr = "drop"}
  %12 : bool = py.getattr(%drop) {attr = "training"}
  %z : Tensor = scf.if(%12) {
    %z_1 : Tensor = module.call(%drop, %y) {kept = "training"}
    scf.yield(%z_1)
  } {
    scf.yield(%y)
  }
  %13 : Module[torch.nn.ReLU] = py.getattr(%self) {attr = "act"}
  %14 : bool = py.getattr(%13) {attr = "inplace"}
  %w : Tensor = scf.if(%14) {
    %15 : bool = py.constant() {value = True}
    %16 : Tensor = torch.call(%z, %15) {callee = "torch.nn.functional.relu", kwnames = ("inplace",), mutates = (0,), alias_of = 0, aten = "aten::relu_"}
    scf.yield(%16)
  } {
    %17 : Tensor = torch.call(%z) {callee = "torch.nn.functional.relu", aten = "aten::relu"}
    scf.yield(%17)
  }
  func.return(%w)
}
""",
        lower_layers,
        dce,
    )


def test_layers_that_stay_module_calls() -> None:
    """A layer outside the table, keyword or extra arguments, a non-tensor input, a rank eager
    would reject, and a layer reached through a loop keep the call."""
    text = """\
func @Net.forward(%self: Module[Net], %x: f32[2, 3], %n: int) -> Tensor {
  %0 : Module[torch.nn.Unflatten] = py.getattr(%self) {attr = "up"}
  %1 : Tensor = module.call(%0, %x)
  %2 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "fc"}
  %3 : Tensor = module.call(%2, %1) {kwnames = ("input",)}
  %4 : Module[torch.nn.Identity] = py.getattr(%self) {attr = "id"}
  %5 : Tensor = module.call(%4, %3, %3)
  %6 : Module[torch.nn.Identity] = py.getattr(%self) {attr = "id"}
  %7 : Tensor = module.call(%6, %n)
  %8 : Module[torch.nn.BatchNorm2d] = py.getattr(%self) {attr = "bn"}
  %9 : Tensor = module.call(%8, %x)
  %10 : ModuleList[Module[torch.nn.Linear], ...] = py.getattr(%self) {attr = "layers"}
  %11 : Tensor = scf.for_each(%10, %9) {
    ^(%layer: Module[torch.nn.Linear], %h: Tensor):
    %12 : Tensor = module.call(%layer, %h)
    scf.yield(%12)
  }
  func.return(%11)
}
"""
    check(text, text, lower_layers)


# What each lowered layer's call becomes in the generated Python (after the guard).
EXPECTED_PYTHON = {
    "Linear": ["m = _guards.attr(self, \"m\")", "y = F.linear(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"))"],
    "Conv1d": ["m = _guards.attr(self, \"m\")", "y = F.conv1d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.dilation, m.groups)"],
    "Conv2d": ["m = _guards.attr(self, \"m\")", "y = F.conv2d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.dilation, m.groups)"],
    "Conv3d": ["m = _guards.attr(self, \"m\")", "y = F.conv3d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.dilation, m.groups)"],
    "ConvTranspose1d": ["m = _guards.attr(self, \"m\")", "y = F.conv_transpose1d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.output_padding, m.groups, m.dilation)"],
    "ConvTranspose2d": ["m = _guards.attr(self, \"m\")", "y = F.conv_transpose2d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.output_padding, m.groups, m.dilation)"],
    "ConvTranspose3d": ["m = _guards.attr(self, \"m\")", "y = F.conv_transpose3d(x, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.stride, m.padding, m.output_padding, m.groups, m.dilation)"],
    "BatchNorm1d": ["m = _guards.attr(self, \"m\")", "if m.training:", "    y = m(x)", "else:", "    y = F.batch_norm(x, _guards.attr(m, \"running_mean\"), _guards.attr(m, \"running_var\"), _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), False, 0.0, m.eps)"],
    "BatchNorm2d": ["m = _guards.attr(self, \"m\")", "if m.training:", "    y = m(x)", "else:", "    y = F.batch_norm(x, _guards.attr(m, \"running_mean\"), _guards.attr(m, \"running_var\"), _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), False, 0.0, m.eps)"],
    "BatchNorm3d": ["m = _guards.attr(self, \"m\")", "if m.training:", "    y = m(x)", "else:", "    y = F.batch_norm(x, _guards.attr(m, \"running_mean\"), _guards.attr(m, \"running_var\"), _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), False, 0.0, m.eps)"],
    "LayerNorm": ["m = _guards.attr(self, \"m\")", "y = F.layer_norm(x, m.normalized_shape, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.eps)"],
    "GroupNorm": ["m = _guards.attr(self, \"m\")", "y = F.group_norm(x, m.num_groups, _guards.attr(m, \"weight\"), _guards.attr(m, \"bias\"), m.eps)"],
    "RMSNorm": ["m = _guards.attr(self, \"m\")", "y = F.rms_norm(x, m.normalized_shape, _guards.attr(m, \"weight\"), m.eps)"],
    "Dropout": ["m = _guards.attr(self, \"m\")", "y = x", "if m.training:", "    y = m(x)"],
    "Dropout1d": ["m = _guards.attr(self, \"m\")", "y = x", "if m.training:", "    y = m(x)"],
    "Dropout2d": ["m = _guards.attr(self, \"m\")", "y = x", "if m.training:", "    y = m(x)"],
    "Identity": ["return x"],
    "Flatten": ["m = _guards.attr(self, \"m\")", "y = x.flatten(m.start_dim, m.end_dim)"],
    "Embedding": ["m = _guards.attr(self, \"m\")", "y = F.embedding(x, _guards.attr(m, \"weight\"), m.padding_idx, None, m.norm_type, m.scale_grad_by_freq, m.sparse)"],
    "MaxPool1d": ["m = _guards.attr(self, \"m\")", "y = F.max_pool1d(x, m.kernel_size, m.stride, m.padding, m.dilation, ceil_mode=m.ceil_mode)"],
    "MaxPool2d": ["m = _guards.attr(self, \"m\")", "y = F.max_pool2d(x, m.kernel_size, m.stride, m.padding, m.dilation, ceil_mode=m.ceil_mode)"],
    "AvgPool1d": ["m = _guards.attr(self, \"m\")", "y = F.avg_pool1d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad)"],
    "AvgPool2d": ["m = _guards.attr(self, \"m\")", "y = F.avg_pool2d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, m.divisor_override)"],
    "Unfold": ["m = _guards.attr(self, \"m\")", "y = F.unfold(x, m.kernel_size, m.dilation, m.padding, m.stride)"],
    "AdaptiveAvgPool1d": ["y = F.adaptive_avg_pool1d(x, _guards.attr(self, \"m\").output_size)"],
    "AdaptiveAvgPool2d": ["y = F.adaptive_avg_pool2d(x, _guards.attr(self, \"m\").output_size)"],
    "AdaptiveMaxPool2d": ["y = F.adaptive_max_pool2d(x, _guards.attr(self, \"m\").output_size, False)"],
    "Upsample": ["m = _guards.attr(self, \"m\")", "y = F.interpolate(x, m.size, m.scale_factor, m.mode, m.align_corners, "
                 "recompute_scale_factor=m.recompute_scale_factor)"],
    "PixelShuffle": ["y = F.pixel_shuffle(x, _guards.attr(self, \"m\").upscale_factor)"],
    "ZeroPad2d": ["m = _guards.attr(self, \"m\")", "y = F.pad(x, m.padding, \"constant\", m.value)"],
    "ConstantPad2d": ["m = _guards.attr(self, \"m\")", "y = F.pad(x, m.padding, \"constant\", m.value)"],
    "ReLU": ["if _guards.attr(self, \"m\").inplace:", "    y = F.relu(x, inplace=True)", "else:", "    y = F.relu(x)"],
    "ReLU6": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.hardtanh(x, m.min_val, m.max_val, inplace=True)", "else:",
              "    y = F.hardtanh(x, m.min_val, m.max_val)"],
    "Hardtanh": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.hardtanh(x, m.min_val, m.max_val, inplace=True)", "else:",
                 "    y = F.hardtanh(x, m.min_val, m.max_val)"],
    "LeakyReLU": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.leaky_relu(x, m.negative_slope, inplace=True)", "else:",
                  "    y = F.leaky_relu(x, m.negative_slope)"],
    "ELU": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.elu(x, m.alpha, inplace=True)", "else:", "    y = F.elu(x, m.alpha)"],
    "CELU": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.celu(x, m.alpha, inplace=True)", "else:", "    y = F.celu(x, m.alpha)"],
    "SELU": ["if _guards.attr(self, \"m\").inplace:", "    y = F.selu(x, inplace=True)", "else:", "    y = F.selu(x)"],
    "SiLU": ["if _guards.attr(self, \"m\").inplace:", "    y = F.silu(x, inplace=True)", "else:", "    y = F.silu(x)"],
    "Mish": ["if _guards.attr(self, \"m\").inplace:", "    y = F.mish(x, inplace=True)", "else:", "    y = F.mish(x)"],
    "Hardswish": ["if _guards.attr(self, \"m\").inplace:", "    y = F.hardswish(x, inplace=True)", "else:", "    y = F.hardswish(x)"],
    "Hardsigmoid": ["if _guards.attr(self, \"m\").inplace:", "    y = F.hardsigmoid(x, inplace=True)", "else:", "    y = F.hardsigmoid(x)"],
    "Threshold": ["m = _guards.attr(self, \"m\")", "if m.inplace:", "    y = F.threshold(x, m.threshold, m.value, inplace=True)", "else:",
                  "    y = F.threshold(x, m.threshold, m.value)"],
    "GELU": ["y = F.gelu(x, approximate=_guards.attr(self, \"m\").approximate)"],
    "Sigmoid": ["y = torch.sigmoid(x)"],
    "Tanh": ["y = torch.tanh(x)"],
    "Softplus": ["m = _guards.attr(self, \"m\")", "y = F.softplus(x, m.beta, m.threshold)"],
    "Softsign": ["y = F.softsign(x)"],
    "Tanhshrink": ["y = F.tanhshrink(x)"],
    "GLU": ["y = F.glu(x, _guards.attr(self, \"m\").dim)"],
    "PReLU": ["y = F.prelu(x, _guards.at(self, \"m.weight\"))"],
    "Softmax": ["y = F.softmax(x, _guards.attr(self, \"m\").dim)"],
    "LogSoftmax": ["y = F.log_softmax(x, _guards.attr(self, \"m\").dim)"],
    "Softmin": ["y = F.softmin(x, _guards.attr(self, \"m\").dim)"],
}
ONE_LAYER = """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : Module[QUALNAME] = py.getattr(%self) {attr = "m"}
  %y : Tensor = module.call(%0, %x)
  func.return(%y)
}
"""


def test_every_layer_in_the_table_has_an_expected_lowering() -> None:
    assert sorted(EXPECTED_PYTHON) == sorted(q.removeprefix("torch.nn.") for q in LAYERS)
    conditions = {c for layer in LAYERS.values() for c in layer.conditions}
    assert conditions <= set(guards._LAYER_CONDITIONS), "a condition the runtime does not know"


@pytest.mark.parametrize("name", sorted(EXPECTED_PYTHON))
def test_each_layer_lowers_to_its_forwards_torch_call(name: str) -> None:
    qualname = f"torch.nn.{name}"
    program = parse_program(ONE_LAYER.replace("QUALNAME", qualname))
    run_pipeline(program, passes=[("layers", lower_layers), ("dce", dce)], check=True)
    func = program.funcs[0]
    # (the call stays only where eager runs it: a layer that acts differently in training)
    assert not any(isinstance(op, ops.ModuleCallOp) and not op.attributes.get("kept") for op in func.walk())
    lines = [line[4:] for line in FunctionEmitter(func, None, set()).emit()[2:]]  # after check_tensor
    layer = LAYERS[qualname]
    args = ", ".join(f'"{a}"' for a in ("m", qualname, *layer.conditions) if a != "eval")
    assert lines[0] == f"_guards.check_module(self, {args})"
    body = lines[1:] if lines[-1] == "return x" else lines[1:-1]
    assert body == EXPECTED_PYTHON[name]


# -- compiled vs eager ------------------------------------------------------------------------------
def compile_model_file(path: Path) -> str:
    """What compile_source does, with this task's passes: the compiled module's text."""
    from runtime.loader import VERSION
    from transpiler.pipeline import torch_version

    source = SourceFile.read(path, path.name)
    program, entries = lower_file(source)
    run_pipeline(program, passes=PASSES, check=True)
    header = Header(path.name, source_hash(source.text), f"torchscribe {path.name}", VERSION, torch_version())
    return emit_module(program, header, entries, source.lines)


_counter = [0]


def load_compiled(tmp_path: Path, text: str, stem: str | None = None):
    """Write `text` as a model file with its compiled module next to it; import the model."""
    _counter[0] += 1
    stem = stem or f"inline_models_{_counter[0]}"
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    compiled = compile_model_file(path)
    (tmp_path / f"{stem}_compiled.py").write_text(compiled)
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(stem)
    finally:
        sys.path.remove(str(tmp_path))
    return module, compiled


@pytest.fixture(autouse=True)
def _fresh_runtime():
    runtime.reset()
    yield
    runtime.reset()


MODELS = '''\
"""Small models using every lowered layer."""
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@script
class Vision(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv_same = nn.Conv2d(8, 8, 3, padding="same", bias=False, groups=2)
        self.gn = nn.GroupNorm(2, 8)
        self.drop2d = nn.Dropout2d(0.3)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(3, stride=1, padding=1, ceil_mode=True, count_include_pad=False)
        self.hsw = nn.Hardswish()
        self.relu6 = nn.ReLU6(inplace=True)
        self.amax = nn.AdaptiveMaxPool2d((2, 2))
        self.apool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8, 4)
        self.lsm = nn.LogSoftmax(dim=1)
        self.pad = nn.ZeroPad2d((1, 0, 2, 0))
        self.fill = nn.ConstantPad2d(1, 0.5)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = self.relu(self.bn(self.conv(x)))
        h = self.gn(self.conv_same(h))
        h = self.avg(self.pool(self.drop2d(h)))
        h = self.relu6(self.hsw(h))
        m = self.amax(self.shuffle(self.up(self.fill(self.pad(h)))))
        return self.lsm(self.fc(self.flat(self.apool(h)))), m


@script
class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=2, dilation=2, bias=False)
        self.bn = nn.BatchNorm1d(6, affine=False)
        self.drop1d = nn.Dropout1d(0.2)
        self.elu = nn.ELU(alpha=0.5, inplace=True)
        self.mp = nn.MaxPool1d(3, stride=2, padding=1, ceil_mode=True)
        self.ap = nn.AvgPool1d(2)
        self.aap = nn.AdaptiveAvgPool1d(3)
        self.celu = nn.CELU(0.7)
        self.selu = nn.SELU()
        self.hardtanh = nn.Hardtanh(-0.5, 0.5)

    def forward(self, x: Tensor) -> Tensor:
        h = self.elu(self.drop1d(self.bn(self.conv(x))))
        h = self.aap(self.ap(self.mp(h)))
        return self.hardtanh(self.selu(self.celu(h)))


@script
class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8, padding_idx=0)
        self.ln = nn.LayerNorm(8, eps=1e-3)
        self.rms = nn.RMSNorm(8)
        self.gelu = nn.GELU(approximate="tanh")
        self.silu = nn.SiLU()
        self.mish = nn.Mish()
        self.leaky = nn.LeakyReLU(0.2, inplace=True)
        self.drop = nn.Dropout(0.1)
        self.softmax = nn.Softmax(dim=-1)
        self.sigmoid = nn.Sigmoid()
        self.tanh = nn.Tanh()
        self.softplus = nn.Softplus(beta=2.0, threshold=5.0)
        self.softsign = nn.Softsign()
        self.tanhshrink = nn.Tanhshrink()
        self.glu = nn.GLU(dim=-1)
        self.prelu = nn.PReLU()
        self.softmin = nn.Softmin(dim=1)
        self.threshold = nn.Threshold(0.1, 20.0)
        self.hardsigmoid = nn.Hardsigmoid()
        self.identity = nn.Identity()

    def forward(self, idx: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h = self.ln(self.emb(idx))
        h = self.silu(self.gelu(self.rms(h)))
        h = self.drop(self.leaky(self.mish(h)))
        a = self.softmax(h) + self.sigmoid(h) + self.tanh(h)
        b = self.tanhshrink(self.softsign(self.softplus(h)))
        c = self.softmin(self.prelu(self.glu(h)))
        return self.identity(a), self.threshold(b), self.hardsigmoid(c)


@script
class Volume(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3, stride=2)
        self.bn = nn.BatchNorm3d(4, momentum=None)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(self.conv(x))


@script
class InPlace(nn.Module):
    """In-place activations applied to the input itself: the caller sees it change."""

    def __init__(self) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=True)
        self.leaky = nn.LeakyReLU(0.1, inplace=False)
        self.drop = nn.Dropout(0.5, inplace=True)

    def forward(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a = self.relu(x)
        b = self.leaky(y)
        return a, b, self.drop(a)


@script
class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)
        self.act = nn.GELU()

    def forward(self, x: Tensor, scale: float = 1.0) -> Tensor:
        return x + scale * self.act(self.fc(self.norm(x)))


@script
def scaled_tanh(x: Tensor, k: float) -> Tensor:
    return torch.tanh(x) * k


@script
class Pair(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.first = Block(dim)
        self.second = Block(dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.mix(self.second(self.first(x), scale=0.5))

    def mix(self, h: Tensor) -> Tensor:
        return h + scaled_tanh(h, 0.25)


@script
class Tower(nn.Module):
    """Submodules of submodules, an Optional one, and a ModuleList whose calls stay."""

    extra: Optional[Block]

    def __init__(self, dim: int, extra: bool) -> None:
        super().__init__()
        self.pair = Pair(dim)
        self.extra = Block(dim) if extra else None
        self.layers = nn.ModuleList([Block(dim) for _ in range(2)])
        self.head = nn.Linear(dim, 3)

    def forward(self, x: Tensor) -> Tensor:
        h = self.pair(x)
        if self.extra is not None:
            h = self.extra(h)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


@script
class Reflect(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect")

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(x)


@script
class Renorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4, max_norm=1.0)

    def forward(self, idx: Tensor) -> Tensor:
        return self.emb(idx)


def examples() -> dict:
    torch.manual_seed(0)
    vision = Vision()
    for m in vision.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return {
        "vision": (vision, (torch.randn(2, 3, 8, 8),)),
        "sequence": (Sequence(), (torch.randn(3, 4, 12),)),
        "tokens": (Tokens(), (torch.randint(0, 20, (2, 5)),)),
        "volume": (Volume(), (torch.randn(2, 2, 7, 7, 7),)),
        "inplace": (InPlace(), (torch.randn(4, 5), torch.randn(4, 5))),
        "tower": (Tower(6, True), (torch.randn(2, 6),)),
        "tower_without_extra": (Tower(6, False), (torch.randn(2, 6),)),
        "reflect": (Reflect(), (torch.randn(1, 2, 5, 5),)),
        "renorm": (Renorm(), (torch.tensor([[1, 2, 3], [4, 5, 9]]),)),
    }
'''

# Models whose guards fail in every mode: the lowering's conditions do not hold.
ALWAYS_EAGER = {"reflect", "renorm"}
# Models with a layer whose lowering holds only in eval mode (BatchNorm, Dropout).
EVAL_ONLY: set[str] = set()  # training runs the layers' own calls inside the compiled code


@pytest.fixture(scope="module")
def models_module(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inline_models")
    module, compiled = load_compiled(tmp, MODELS, "inline_models_all")
    yield module, compiled
    sys.modules.pop("inline_models_all", None)


def run_model(model: nn.Module, inputs: tuple, mode: str) -> dict:
    model = copy.deepcopy(model)
    inputs = tuple(copy.deepcopy(inputs))
    torch.manual_seed(1234)  # dropout in training draws the same numbers in both runs
    with runtime.mode(mode), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", runtime.TorchscribeWarning)  # "running eagerly", once
        out = model(*inputs)
    return snapshot(observe(model, inputs, out))


def test_the_compiled_models_call_torch_functions_not_layers(models_module) -> None:
    module, compiled = models_module
    code = "\n".join(line for line in compiled.splitlines() if not line.strip().startswith(("#", "//")))
    for call in ("self.conv(", "self.bn(", "self.fc(", "self.relu(", "self.pair(", "self.first(", "self.extra("):
        assert call not in code, call
    # Inlined Pair.forward and Block.forward into Tower.forward: its layers are checked through
    # paths, in one table that one call runs (a row for the layers alike: one class, conditions
    # and attributes).
    tower = compiled[compiled.index("Tower_forward_checks = "):compiled.index("def Tower_forward")]
    for row in ('("pair", "Pair")', '(("pair.first", "pair.second", "extra?"), "Block")',
                '(("pair.first.act", "pair.second.act", "extra?.act"), "torch.nn.GELU")'):
        assert f"    {row},\n" in tower, row
    assert '"pair.first.fc"' in tower and '"extra?.norm"' in tower
    assert "    _guards.check_entry(self, Tower_forward_checks)\n" in compiled
    assert "layer(h)" in compiled  # the ModuleList's elements are still called
    # The method and the @script function Pair calls are inlined too (and still compiled).
    pair = code[code.index("def Pair_forward"):code.index("def Pair_mix")]
    assert "Pair_mix(" not in pair and "scaled_tanh(" not in pair and "torch.tanh(" in pair
    assert '"scaled_tanh": scaled_tanh,' in code


@pytest.mark.parametrize("name", ["vision", "sequence", "tokens", "volume", "inplace", "tower",
                                  "tower_without_extra", "reflect", "renorm"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_compiled_matches_eager(models_module, name: str, training: bool) -> None:
    module, _ = models_module
    model, inputs = module.examples()[name]
    model.train(training)
    expected = run_model(model, inputs, "off")
    falls_back = name in ALWAYS_EAGER or (training and name in EVAL_ONLY)
    before = sum(runtime.fallback_counts().values())
    got = run_model(model, inputs, "on" if falls_back else "strict")
    result = compare(expected, got, atol=0.0, rtol=0.0)
    assert result.ok, result.mismatches
    fell_back = sum(runtime.fallback_counts().values()) - before
    assert fell_back == (1 if falls_back else 0)


def test_a_hook_on_a_lowered_layer_makes_the_call_eager(models_module) -> None:
    module, _ = models_module
    model, inputs = module.examples()["vision"]
    model.eval()
    seen = []

    def hook(mod, args, out):
        seen.append(mod)
        return out * 2

    expected_model = copy.deepcopy(model)
    expected_model.fc.register_forward_hook(hook)
    expected = run_model(expected_model, inputs, "off")
    model.fc.register_forward_hook(hook)
    seen.clear()
    got = run_model(model, inputs, "on")
    assert len(seen) == 1 and runtime.fallback_counts() == {"inline_models_all.Vision.forward": 1}
    assert compare(expected, got, atol=0.0, rtol=0.0).ok
    with pytest.raises(runtime.TorchscribeError, match="submodule 'fc' is not an unhooked torch.nn.Linear"):
        run_model(model, inputs, "strict")


def test_script_instance_inlines_and_lowers(tmp_path: Path, monkeypatch) -> None:
    """script(instance, ...) with these passes in the pipeline: the layers are lowered (the
    types come from the instance); values and buffers as eager, in eval and in training."""
    import ir.passes
    from examples import conv_bn_relu, mlp
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ir.passes, "PIPELINE", PASSES)
    for factory, lowered in ((conv_bn_relu.make_example, "F.batch_norm("), (conv_bn_relu.make_example_train, "F.batch_norm("),
                             (mlp.make_example, "F.layer_norm(")):
        model, inputs = factory()
        eager_model = copy.deepcopy(model)
        scripted = script(model, example_inputs=inputs)
        assert any(lowered in p.read_text() for p in tmp_path.rglob("*.py"))
        with torch.no_grad(), runtime.mode("off"):
            expected = eager_model(*inputs)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            got = scripted(*inputs)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        for (k, a), (_, b) in zip(eager_model.state_dict().items(), model.state_dict().items()):
            assert torch.equal(a, b), k


def test_pre_hooks_global_hooks_and_swapped_modules_make_the_call_eager(models_module) -> None:
    module, _ = models_module
    model, inputs = module.examples()["tower"]
    model.eval()
    calls = []
    expected = run_model(model, inputs, "off")

    def counts() -> dict:
        return {k.removeprefix("inline_models_all."): v for k, v in runtime.fallback_counts().items()}

    pre = model.pair.first.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    assert compare(expected, run_model(model, inputs, "on"), atol=0.0, rtol=0.0).ok
    pre.remove()
    # Tower's guard on pair.first fails, then Pair's own compiled code (called eagerly) too.
    assert calls == ["pre"] and counts() == {"Tower.forward": 1, "Pair.forward": 1}
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: calls.append("global"))
    try:
        assert compare(expected, run_model(model, inputs, "on"), atol=0.0, rtol=0.0).ok
    finally:
        handle.remove()
    # A global hook: every compiled forward falls back (Tower, Pair, and five Blocks).
    assert "global" in calls and counts() == {"Tower.forward": 2, "Pair.forward": 2, "Block.forward": 5}

    class Scaled(nn.Linear):
        def forward(self, x: Tensor) -> Tensor:
            return super().forward(x) * 3

    swapped = copy.deepcopy(model)
    old = swapped.pair.second.fc
    swapped.pair.second.fc = Scaled(6, 6)
    swapped.pair.second.fc.load_state_dict(old.state_dict())
    expected = run_model(swapped, inputs, "off")
    assert compare(expected, run_model(swapped, inputs, "on"), atol=0.0, rtol=0.0).ok
    assert counts() == {"Tower.forward": 3, "Pair.forward": 3, "Block.forward": 6}
    # Nothing hooked any more: the compiled code runs again.
    assert compare(run_model(model, inputs, "off"), run_model(model, inputs, "strict"), atol=0.0, rtol=0.0).ok


def test_plain_module_checks_class_hooks_and_conditions() -> None:
    net = nn.Sequential(nn.BatchNorm1d(3), nn.Linear(3, 3))
    holder = nn.Module()
    holder.net = net
    holder.missing = None
    assert guards.plain_module(holder, "net.0", "torch.nn.BatchNorm1d", "running_stats")
    assert not guards.plain_module(holder, "net.0", "torch.nn.BatchNorm1d", "eval")  # training
    net.eval()
    assert guards.plain_module(holder, "net.0", "torch.nn.BatchNorm1d", "eval", "running_stats")
    assert not guards.plain_module(holder, "net.1", "torch.nn.BatchNorm1d")  # another class
    assert not guards.plain_module(holder, "net.5", "torch.nn.Linear")  # no such index
    assert not guards.plain_module(holder, "nothing.fc", "torch.nn.Linear")  # no such attribute
    assert guards.plain_module(holder, "missing?.fc", "torch.nn.Linear")  # None: never called
    assert not guards.plain_module(holder, "missing", "torch.nn.Linear")
    net[1].forward = lambda x: x  # a forward of the instance's own
    assert not guards.plain_module(holder, "net.1", "torch.nn.Linear")
    del net[1].forward
    assert guards.plain_module(holder, "net.1", "torch.nn.Linear")
    handle = net[1].register_full_backward_hook(lambda *a: None)
    assert not guards.plain_module(holder, "net.1", "torch.nn.Linear")
    with pytest.raises(guards.GuardFailure, match="submodule .net.1. is not an unhooked torch.nn.Linear"):
        guards.check_module(holder, "net.1", "torch.nn.Linear")
    handle.remove()


# -- every example, through inlining and layer lowering ------------------------------------------------
EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_compiled_with_inlining_match_eager(tmp_path: Path, example: Path) -> None:
    stem = f"inl_{example.stem}"
    shutil.copy(example, tmp_path / f"{stem}.py")
    module, _ = load_compiled(tmp_path, (tmp_path / f"{stem}.py").read_text(), stem)
    try:
        for variant, factory in factories(module):
            torch.manual_seed(0)
            model, inputs = factory()
            # In eval mode every guard holds (strict: the compiled code ran); in training a
            # BatchNorm or Dropout guard may fail and the call runs eagerly.
            training = isinstance(model, nn.Module) and any(m.training for m in model.modules())
            expected = run_model(model, inputs, "off")
            got = run_model(model, inputs, "on" if training else "strict")
            result = compare(expected, got, atol=0.0, rtol=0.0)
            assert result.ok, f"{example.stem}[{variant}]: {result.mismatches}"
    finally:
        sys.modules.pop(stem, None)

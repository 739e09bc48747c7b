"""Dead code elimination, IR in and IR out: dead pure ops go, ops with effects stay, unused
scf.if results go together with what their yields alone needed, in nested regions too."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core import ops  # noqa: E402
from ir.core.graph import PURE  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes.dce import dce  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.verifier import verify  # noqa: E402

EXAMPLES = sorted(
    p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


def run_dce(text: str) -> str:
    program = parse_program(text)
    verify(program)
    dce(program)
    verify(program)
    out = print_program(program)
    dce(program)
    assert print_program(program) == out, "dce is not idempotent"
    return out


def check(before: str, after: str) -> None:
    assert run_dce(before) == after


def test_dead_pure_ops_are_removed() -> None:
    check(
        """\
func @f(%x: Tensor, %n: int) -> Tensor {  # f.py:1:1
  %0 : int = py.constant() {value = 2}  # f.py:2:5
  %1 : int = py.binary(%n, %0) {op = "*"}  # f.py:2:5
  %2 : Tensor = torch.call(%x) {callee = "torch.tanh", aten = "aten::tanh"}  # f.py:3:5
  %3 : tuple[Tensor, int] = py.tuple(%2, %1)  # f.py:4:5
  %a : Tensor, %b : int = py.unpack(%3)  # f.py:4:5
  %4 : Module[torch.nn.Linear] = py.getattr(%x) {attr = "fc"}  # f.py:5:5
  %5 : Tensor = torch.index(%x, %n) {items = (("value",),)}  # f.py:6:5
  %y : Tensor = torch.method(%x) {method = "view", alias_of = 0}  # f.py:7:5
  %6 : Tensor = torch.call(%y) {callee = "torch.relu", aten = "aten::relu"}  # f.py:8:5
  func.return(%6)  # f.py:9:5
}
""",
        """\
func @f(%x: Tensor, %n: int) -> Tensor {  # f.py:1:1
  %y : Tensor = torch.method(%x) {method = "view", alias_of = 0}  # f.py:7:5
  %0 : Tensor = torch.call(%y) {callee = "torch.relu", aten = "aten::relu"}  # f.py:8:5
  func.return(%0)  # f.py:9:5
}
""",
    )


def test_ops_with_effects_are_kept_with_their_operands() -> None:
    text = """\
func @f(%self: Module[Net], %x: Tensor, %xs: list[Tensor], %m: bool[*]) -> None {
  %0 : int = py.constant() {value = 2}
  %1 : Tensor = torch.method(%x, %0) {method = "mul_", mutates = (0,), alias_of = 0}
  %2 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "fc"}
  %3 : Tensor = module.call(%2, %x)
  %4 : Tensor = torch.call(%x) {callee = "torch.tanh"}
  py.list_append(%xs, %4)
  %5 : float = py.constant() {value = 0.0}
  torch.index_put(%x, %m, %5) {items = (("value",),)}
  %6 : Tensor = py.inplace(%x, %5) {op = "+"}
  %7 : Tensor = torch.call(%x) {callee = "torch.rand_like", random = True}
  py.setattr(%self, %0) {attr = "steps"}
  %8 : None = py.constant() {value = None}
  func.return(%8)
}
"""
    check(text, text)


def test_a_pure_chain_feeding_only_dead_ops_goes_entirely() -> None:
    check(
        """\
func @f(%x: Tensor) -> Tensor {
  %0 : Tensor = torch.call(%x) {callee = "torch.tanh"}
  %1 : Tensor = py.binary(%0, %0) {op = "+"}
  %2 : list[Tensor] = py.list(%1, %0)
  %3 : Tensor = torch.call(%2) {callee = "torch.cat"}
  func.return(%x)
}
""",
        """\
func @f(%x: Tensor) -> Tensor {
  func.return(%x)
}
""",
    )


def test_unused_if_results_are_dropped_with_their_yields() -> None:
    check(
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %a : Tensor, %b : Tensor, %n : int = scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    %z : Tensor = torch.call(%x) {callee = "torch.relu"}
    %0 : int = py.constant() {value = 1}
    scf.yield(%y, %z, %0)
  } {
    %1 : int = py.constant() {value = 2}
    scf.yield(%x, %x, %1)
  }
  func.return(%b)
}
""",
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %b : Tensor = scf.if(%c) {
    %z : Tensor = torch.call(%x) {callee = "torch.relu"}
    scf.yield(%z)
  } {
    scf.yield(%x)
  }
  func.return(%b)
}
""",
    )


def test_if_without_used_results_or_effects_is_removed() -> None:
    check(
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %0 : bool = py.unary(%c) {op = "not"}
  %a : Tensor = scf.if(%0) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%y)
  } {
    scf.yield(%x)
  }
  scf.if(%c) {
    %1 : int = py.constant() {value = 1}
    scf.yield()
  } {
    scf.yield()
  }
  func.return(%x)
}
""",
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  func.return(%x)
}
""",
    )


def test_if_with_effects_keeps_its_effects_and_loses_its_results() -> None:
    check(
        """\
func @f(%c: bool, %m: Module[torch.nn.Linear], %x: Tensor, %xs: list[Tensor]) -> Tensor {
  %a : Tensor, %b : Tensor = scf.if(%c) {
    %0 : int = py.constant() {value = 1}
    %y : Tensor = torch.method(%x, %0) {method = "add_", mutates = (0,), alias_of = 0}
    %w : Tensor = module.call(%m, %x)
    scf.yield(%y, %w)
  } {
    py.list_append(%xs, %x)
    %d : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%d, %x)
  }
  func.return(%x)
}
""",
        """\
func @f(%c: bool, %m: Module[torch.nn.Linear], %x: Tensor, %xs: list[Tensor]) -> Tensor {
  scf.if(%c) {
    %0 : int = py.constant() {value = 1}
    %y : Tensor = torch.method(%x, %0) {method = "add_", mutates = (0,), alias_of = 0}
    %w : Tensor = module.call(%m, %x)
    scf.yield()
  } {
    py.list_append(%xs, %x)
    scf.yield()
  }
  func.return(%x)
}
""",
    )


def test_nested_regions() -> None:
    """Dead ops inside loop bodies and nested ifs go; an outer value used only by a dead inner
    op goes too; loops stay (a while loop may not end)."""
    check(
        """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %scale : float = py.constant() {value = 0.5}
  %x_1 : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %x_2: Tensor):
    %2 : bool = py.compare(%i, %0) {op = ">"}
    %x_3 : Tensor, %3 : Tensor = scf.if(%2) {
      %x_4 : Tensor = torch.call(%x_2) {callee = "torch.tanh"}
      %4 : Tensor = py.binary(%x_4, %scale) {op = "*"}
      scf.yield(%x_4, %4)
    } {
      %5 : Tensor = py.binary(%x_2, %scale) {op = "*"}
      scf.yield(%x_2, %5)
    }
    %6 : Tensor = py.binary(%3, %3) {op = "+"}
    scf.yield(%x_3)
  }
  %x_5 : Tensor, %k : int = scf.while(%x_1, %0) {
    ^(%x_6: Tensor, %k_1: int):
    %7 : bool = py.compare(%k_1, %n) {op = "<"}
    %8 : bool = py.unary(%7) {op = "not"}
    scf.condition(%7, %x_6, %k_1)
  } {
    ^(%x_7: Tensor, %k_2: int):
    %9 : Tensor = py.binary(%x_7, %x_7) {op = "*"}
    %k_3 : int = py.binary(%k_2, %1) {op = "+"}
    scf.yield(%x_7, %k_3)
  }
  func.return(%x_1)
}
""",
        """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %x_1 : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %x_2: Tensor):
    %2 : bool = py.compare(%i, %0) {op = ">"}
    %x_3 : Tensor = scf.if(%2) {
      %x_4 : Tensor = torch.call(%x_2) {callee = "torch.tanh"}
      scf.yield(%x_4)
    } {
      scf.yield(%x_2)
    }
    scf.yield(%x_3)
  }
  %x_5 : Tensor, %k : int = scf.while(%x_1, %0) {
    ^(%x_6: Tensor, %k_1: int):
    %3 : bool = py.compare(%k_1, %n) {op = "<"}
    scf.condition(%3, %x_6, %k_1)
  } {
    ^(%x_7: Tensor, %k_2: int):
    %k_3 : int = py.binary(%k_2, %1) {op = "+"}
    scf.yield(%x_7, %k_3)
  }
  func.return(%x_1)
}
""",
    )


def test_if_results_feeding_only_another_dead_if() -> None:
    check(
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %a : Tensor = scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%y)
  } {
    scf.yield(%x)
  }
  %b : Tensor, %d : Tensor = scf.if(%c) {
    %z : Tensor = scf.if(%c) {
      %u : Tensor = torch.call(%a) {callee = "torch.relu"}
      scf.yield(%u)
    } {
      scf.yield(%a)
    }
    scf.yield(%z, %x)
  } {
    scf.yield(%a, %x)
  }
  func.return(%d)
}
""",
        """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %d : Tensor = scf.if(%c) {
    scf.yield(%x)
  } {
    scf.yield(%x)
  }
  func.return(%d)
}
""",
    )


@pytest.mark.parametrize("stem", EXAMPLES)
def test_examples_after_dce_hold_no_dead_code(stem: str) -> None:
    from transpiler.pipeline import lower_file
    from transpiler.source import SourceFile

    path = ROOT / "examples" / f"{stem}.py"
    program, _ = lower_file(SourceFile.read(path, path.name))
    text = run_dce(print_program(program))
    for op in parse_program(text).walk():
        if op.has_trait(PURE) and not op.regions:
            assert any(r.uses for r in op.results), f"dead {op.name} left in {stem}"
        if isinstance(op, ops.IfOp):
            assert all(r.uses for r in op.results), f"unused scf.if result left in {stem}"

"""The verifier accepts every example's IR and rejects broken IR, marking the offending op's
line in the printed IR (`<-- error: ...`). Bad cases are written as IR text."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core.graph import Program  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes import run_pipeline  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.verifier import VerifyError, verify  # noqa: E402

EXAMPLES = sorted(
    p.stem for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


def lowered(stem: str) -> Program:
    from transpiler.pipeline import lower_file
    from transpiler.source import SourceFile

    path = ROOT / "examples" / f"{stem}.py"
    return lower_file(SourceFile.read(path, path.name))[0]


@pytest.mark.parametrize("stem", EXAMPLES)
def test_verifier_accepts_examples(stem: str) -> None:
    program = lowered(stem)
    verify(program)
    verify(parse_program(print_program(program)))
    run_pipeline(program, check=True)
    verify(parse_program(print_program(program)))


def rejection(text: str) -> str:
    with pytest.raises(VerifyError) as info:
        verify(parse_program(text))
    return str(info.value)


def marked_line(message: str, fragment: str) -> str:
    """The one line of the printed IR in `message` that holds `fragment`."""
    lines = [line for line in message.splitlines() if fragment in line and not line.startswith("error:")]
    assert len(lines) == 1, f"{fragment!r} on {len(lines)} lines of:\n{message}"
    return lines[0]


def assert_marked(text: str, fragment: str, error: str) -> str:
    """Verifying `text` fails with `error`, marked on the printed line holding `fragment`, and
    only there."""
    message = rejection(text)
    assert message.startswith("IR verification failed:\n")
    line = marked_line(message, fragment)
    assert "<-- error: " in line and error in line, message
    assert f"error: {error}" in message
    others = [ln for ln in message.splitlines() if "<-- error:" in ln and ln != line]
    assert not others, message
    return message


def test_use_before_definition() -> None:
    text = """\
func @f(%x: Tensor) -> Tensor {  # f.py:1:1
  %y : Tensor = py.binary(%z, %x) {op = "+"}  # f.py:2:9
  %z : Tensor = torch.call(%x) {callee = "torch.tanh"}  # f.py:3:9
  func.return(%y)  # f.py:4:5
}
"""
    message = assert_marked(text, "%y : Tensor = py.binary", "operand #0 is not defined before this use")
    assert "(py.binary at f.py:2:9)" in message
    # The message holds the whole program as printed, marks aside.
    unmarked = "\n".join(line.split("  <-- error:")[0] for line in message.splitlines())
    assert text in unmarked + "\n"


def test_value_used_outside_its_region() -> None:
    text = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield()
  } {
    scf.yield()
  }
  func.return(%y)
}
"""
    assert_marked(text, "func.return(%y)", "operand #0 is not defined before this use")


def test_value_from_a_sibling_region() -> None:
    text = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
    scf.yield(%y)
  } {
    scf.yield(%y)
  }
  func.return(%r)
}
"""
    message = rejection(text)
    lines = [ln for ln in message.splitlines() if "scf.yield(%y)" in ln]
    assert len(lines) == 2 and "<-- error:" not in lines[0]
    assert "<-- error: operand #0 is not defined before this use" in lines[1]


def test_if_yields_that_do_not_fit_the_results() -> None:
    text = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {  # f.py:2:5
    %n : int = py.constant() {value = 1}
    scf.yield(%n)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    assert_marked(text, "%r : Tensor = scf.if(%c) {", "scf.yield types do not fit the results")


def test_if_yielding_too_many_values() -> None:
    text = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    scf.yield(%x, %x)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    assert_marked(text, "%r : Tensor = scf.if(%c) {", "scf.yield types do not fit the results")


def test_for_loop_with_mismatched_carried_types() -> None:
    text = """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %r : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %acc: int):
    scf.yield(%acc)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.for(", "initial values, body arguments and results must have fitting types")


def test_for_loop_yielding_the_wrong_type() -> None:
    text = """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %r : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %acc: Tensor):
    scf.yield(%i)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.for(", "scf.yield types do not fit the loop-carried types")


def test_while_loop_with_mismatched_carried_types() -> None:
    text = """\
func @f(%x: Tensor) -> Tensor {
  %r : Tensor = scf.while(%x) {
    ^(%a: Tensor):
    %c : bool = py.constant() {value = True}
    scf.condition(%c, %a)
  } {
    ^(%b: int):
    scf.yield(%b)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.while(", "initial values, body arguments and results must have fitting types")


def test_missing_terminator_in_a_region() -> None:
    text = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.if(", "each region must end in scf.yield")


def test_missing_return() -> None:
    text = """\
func @f(%x: Tensor) -> Tensor {  # f.py:1:1
  %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
}
"""
    assert_marked(text, "func @f(", "function body must end in func.return")


def test_terminator_in_the_middle_of_a_block() -> None:
    text = """\
func @f(%x: Tensor) -> Tensor {
  func.return(%x)
  %y : Tensor = torch.call(%x) {callee = "torch.tanh"}
  func.return(%y)
}
"""
    message = rejection(text)
    line = marked_line(message, "func.return(%x)")
    assert "<-- error: terminator in the middle of a block" in line


def test_non_bool_if_condition() -> None:
    text = """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%n) {
    scf.yield(%x)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.if(%n)", "condition must be bool, got int")


def test_tensor_if_condition_is_not_bool() -> None:
    text = """\
func @f(%m: bool[*], %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%m) {
    scf.yield(%x)
  } {
    scf.yield(%x)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.if(%m)", "condition must be bool, got bool[*]")


def test_non_bool_while_condition() -> None:
    text = """\
func @f(%x: Tensor, %n: int) -> Tensor {
  %r : Tensor = scf.while(%x) {
    ^(%a: Tensor):
    scf.condition(%n, %a)
  } {
    ^(%b: Tensor):
    scf.yield(%b)
  }
  func.return(%r)
}
"""
    assert_marked(text, "scf.while(", "the loop condition must be bool")


def test_every_problem_is_reported() -> None:
    text = """\
func @f(%n: int, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%n) {
    scf.yield(%x)
  } {
    scf.yield(%x)
  }
  func.return(%q)
  %q : Tensor = py.refine(%r)
}
"""
    message = rejection(text)
    assert "<-- error: condition must be bool" in marked_line(message, "scf.if(%n)")
    ret = marked_line(message, "func.return(%q)")
    assert "not defined before this use" in ret and "terminator in the middle of a block" in ret
    assert "function body must end in func.return" in marked_line(message, "func @f(")

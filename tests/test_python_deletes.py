"""Generated functions delete a named tensor after the statement that reads it last.

Held in locals until the function returns, the temporaries of a call are freed together, and
glibc hands that much memory at the top of its heap back to the system: the next call faults
every page in again (examples/conv_bn_relu: 480 page faults a call). Deleting each one after its
last read frees them one at a time, as eager code does."""

from __future__ import annotations

from codegen.python_function import FunctionEmitter
from ir.core.parser import parse_program

CHAIN = """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %a : Tensor = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %b : Tensor = torch.call(%a) {callee = "torch.tanh", aten = "aten::tanh"}
  %p : Tensor = py.binary(%b, %y) {op = "*"}
  %c : Tensor = py.binary(%p, %b) {op = "+"}
  func.return(%c)
}
"""


def emitted(text: str) -> str:
    return "\n".join(FunctionEmitter(parse_program(text).funcs[0], None, set()).emit()) + "\n"


def test_a_temporary_is_deleted_after_its_last_read() -> None:
    """`a` after `tanh` reads it; `b` and `p` after the add; not the arguments, not what is
    returned."""
    assert emitted(CHAIN) == """\
def f(x: Tensor, y: Tensor) -> Tensor:
    _guards.check_tensor(x, "x")
    _guards.check_tensor(y, "y")
    a = torch.exp(x)
    b = torch.tanh(a)
    del a
    p = b * y
    c = p + b
    del b, p
    return c
"""


BRANCH = """\
func @f(%c: bool, %x: Tensor) -> Tensor {
  %a : Tensor = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %b : Tensor = scf.if(%c) {
    %z : Tensor = torch.call(%a) {callee = "torch.relu", aten = "aten::relu"}
    scf.yield(%z)
  } {
    scf.yield(%x)
  }
  %d : Tensor = py.binary(%b, %x) {op = "*"}
  func.return(%d)
}
"""


def test_a_read_in_a_branch_counts_at_the_branch() -> None:
    """`a` is read in one arm only: it is deleted after the whole `if` statement, on both paths,
    not inside the arm that reads it."""
    assert emitted(BRANCH).endswith("""\
    b = x
    if c:
        b = torch.relu(a)
    del a
    d = b * x
    return d
""")


def test_the_examples_delete_what_they_no_longer_read() -> None:
    """In the checked-in examples, a name two values held in turn is deleted after the last read
    of the last one (attention's `scores`)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "examples"
    attention = (root / "attention_compiled.py").read_text()
    assert "    weights = F.softmax(scores, dim=-1)\n    del scores\n" in attention


def test_a_refinement_of_an_inlined_value_is_not_deleted() -> None:
    """A refinement (`Optional[Tensor]` to `Tensor`) prints no code: its text is its operand's,
    here the expression `x.exp()` inlined into its one reader. Deleting it wrote `del x.exp()`,
    a SyntaxError in the generated module (found compiling MultiheadAttention's unbatched
    path with the attention weights)."""
    assert emitted("""\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : Optional[Tensor] = torch.method(%x) {method = "exp", aten = "aten::exp"}
  %w : Tensor = py.refine(%0)
  %s : Tensor = torch.method(%w) {method = "tanh", aten = "aten::tanh"}
  %c : Tensor = py.binary(%s, %y) {op = "*"}
  func.return(%c)
}
""") == """\
def f(x: Tensor, y: Tensor) -> Tensor:
    _guards.check_tensor(x, "x")
    _guards.check_tensor(y, "y")
    s = x.exp().tanh()
    c = s * y
    del s
    return c
"""

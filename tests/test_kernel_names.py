"""A module's kernels named from the source and each written once (codegen/kernel_names.py):
the kernels of a group that autograd records keep one stem with its function object; a kernel
of the text of another (the forward kernel of a group and the no-grad kernel of the same lines)
is written once and every caller calls it, a group of another's kernels and torch ops likewise;
element values are numbered per kernel, constants apart (codegen/elements.value_names), so that
kernels of one computation read the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codegen.kernel_launchers import kernel_text
from codegen.kernel_names import name_kernels
from codegen.names import function_name
from ir.core import ops
from ir.core.graph import Program
from ir.core.parser import parse_program
from ir.core.rewrite import clone_op
from ir.core.verifier import verify
from ir.kernel.ops import AutogradKernelOp, KernelOp
from ir.passes.autograd_kernels import autograd_kernels
from transpiler.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


SOURCE = '''\
import torch
from torch import Tensor

from transpiler import script


@script(example="make_gate")
def gate_and_flag(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    z = torch.sigmoid(x) * y
    return z, z > 0.5


@script(example="make_cell")
def cell(x: Tensor, c: Tensor) -> Tensor:
    i, f = x.chunk(2, dim=1)
    return torch.tanh(torch.sigmoid(f) * c + torch.sigmoid(i))


def make_gate() -> tuple[object, tuple]:
    return gate_and_flag, (torch.randn(6, 8), torch.randn(6, 8))


def make_cell() -> tuple[object, tuple]:
    return cell, (torch.randn(4, 16), torch.randn(4, 8))
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The module torchscribe writes for SOURCE: each function's example specialisation (no
    grad) and its code for autograd, in one module."""
    folder = tmp_path_factory.mktemp("kernel_names")
    (folder / "pyproject.toml").write_text("")
    (folder / "two.py").write_text(SOURCE)
    assert main(["-q", str(folder / "two.py")]) == 0
    return (folder / "two_compiled.py").read_text()


def group(text: str, stem: str) -> list[str]:
    """The group whose forward kernel's name ends in `stem`."""
    [found] = [g for g in groups(text) if g[1].endswith(stem)]
    return found


def groups(text: str) -> list[list[str]]:
    """Each `NAME = _autograd.Pointwise(forward, backward, eager, ..., partial=(p, ...))`: its
    name, forward, backward (and partial backward)."""
    found = []
    for m in re.finditer(r"^(\w+) = _autograd\.Pointwise\((.*?)\)\n(?=\S|\n)", text, re.M | re.S):
        forward, backward = re.findall(r"\w+", m[2])[:2]
        partial = re.search(r"partial=\((\w+),", m[2])
        found.append([m[1], forward, backward] + ([partial[1]] if partial else []))
    return found


def kernels(text: str) -> dict[str, str]:
    """Each C++ kernel of the module's text: name -> its text but for its name."""
    found = {}
    for m in re.finditer(r'^extern "C" void (\w+)_kernel\((.*?)^}\n', text, re.M | re.S):
        found[m[1]] = m[2]
    return found


def python_functions(text: str) -> dict[str, str]:
    """Each top-level function of the module's text: name -> its text but for its name."""
    found = {}
    for m in re.finditer(r"^def (\w+)(\(.*?)\n\n\n", text, re.M | re.S):
        found[m[1]] = m[2]
    return found


# -- naming ---------------------------------------------------------------------------------------
def test_a_groups_kernels_keep_its_stem_when_another_kernel_has_it(module: str) -> None:
    """The no-grad kernel (with the comparison) is `sigmoid`; the group autograd records
    (without it: a bool has no gradient) computes something else under the same source name, so
    it moves, and its backward kernels and its function object move with it."""
    text = module
    name, forward, backward, *partial = group(text, "sigmoid")
    assert name == f"{forward}_autograd" and backward == f"{forward}_backward"
    assert partial in ([], [f"{forward}_backward_weights"])
    assert forward != "sigmoid" and forward.endswith("sigmoid") and "sigmoid" in kernels(text)
    assert set(kernels(text)) >= {forward, backward, *partial}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*_compiled.py")), ids=lambda p: p.stem)
def test_the_examples_groups_keep_one_stem(path: Path) -> None:
    for name, forward, backward, *partial in groups(path.read_text()):
        assert backward == f"{forward}_backward" and partial in ([], [f"{forward}_backward_weights"]), \
            (name, forward, backward, partial)


# -- on the IR: name_kernels ------------------------------------------------------------------------
GATE = """func @f(%x: f32[B, 5]@cpu, %w: f32[5]@cpu) -> f32[B, 5]@cpu {
  %0 : f32[B, 5]@cpu = torch.call(%x) {callee = "torch.sigmoid", aten = "aten::sigmoid"}
  %y : f32[B, 5]@cpu = py.binary(%0, %w) {op = "*"}
  func.return(%y)
}
"""


def gates(*names: str) -> Program:
    """GATE as functions `names`, each compiled for autograd: a group sigmoid_mul apiece."""
    program = parse_program("\n".join(GATE.replace("@f(", f"@{n}(") for n in names))
    program.autograd = True
    autograd_kernels(program)
    return program


def named(program: Program) -> list[AutogradKernelOp]:
    name_kernels(program, {function_name(f.sym_name) for f in program.funcs}, None)
    verify(program)
    return [op for op in program.walk() if isinstance(op, AutogradKernelOp)]


def test_groups_of_one_text_are_one_group_with_one_function_of_torch_ops() -> None:
    program = gates("f", "g")
    assert [f.sym_name for f in program.funcs] == ["f.sigmoid_mul", "f", "g.sigmoid_mul", "g"]
    first, second = named(program)
    for k in (first, second):
        assert (k.kernel_name, k.forward.kernel_name, k.backward.kernel_name, k.eager) == \
            ("sigmoid_mul_autograd", "sigmoid_mul", "sigmoid_mul_backward", "f.sigmoid_mul")
    assert [f.sym_name for f in program.funcs] == ["f.sigmoid_mul", "f", "g"]


def test_a_group_whose_forward_kernel_is_an_earlier_kernel_takes_its_name_as_stem() -> None:
    """A function before the group's holds its forward kernel under another name (`gate`): the
    group calls that kernel, and its backward kernel and function object take its stem."""
    program = gates("f")
    [group] = [op for op in program.walk() if isinstance(op, AutogradKernelOp)]
    h = ops.FuncOp.build("h", [v.type for v in group.operands], ["x", "w"], group.results[0].type)
    kernel = clone_op(group.forward, dict(zip(group.forward.operands, h.body.args)))
    kernel.kernel_name = "gate"
    h.body.append(kernel)
    h.body.append(ops.ReturnOp([kernel.result]))
    program.funcs.insert(0, h)
    [group] = named(program)
    assert (kernel.kernel_name, group.forward.kernel_name, group.backward.kernel_name, group.kernel_name) == \
        ("gate", "gate", "gate_backward", "gate_autograd")


def test_a_group_moves_whole_where_another_functions_kernel_has_its_stem() -> None:
    """g's group is named `sigmoid_mul` in g as f's is in f, but its kernels compute something
    else: f's group keeps the name, g's moves, all its parts with it."""
    program = gates("f", "g")
    g = [op for op in program.walk() if isinstance(op, AutogradKernelOp)][1]
    for kernel in (g.forward, g.backward):  # (a product made a sum: text apart, as another group's)
        product = next(op for op in kernel.body.ops if op.attributes.get("op") == "*")
        product.attributes["op"] = "+"
    first, second = named(program)
    assert (first.forward.kernel_name, first.backward.kernel_name, first.kernel_name) == \
        ("sigmoid_mul", "sigmoid_mul_backward", "sigmoid_mul_autograd")
    stem = second.forward.kernel_name
    assert stem.startswith("g_sigmoid_mul")  # (`g_sigmoid_mul` itself is g's function of torch ops)
    assert (second.backward.kernel_name, second.kernel_name) == (f"{stem}_backward", f"{stem}_autograd")
    assert second.eager == "f.sigmoid_mul"  # (its torch ops are still f's: one function of them)


# -- each kernel once -------------------------------------------------------------------------------
def test_a_groups_forward_kernel_is_the_no_grad_kernel_of_its_lines(module: str) -> None:
    """The no-grad specialisation's kernel and the group's forward kernel compute the same: one
    kernel, which both call (the no-grad function by its name, the group through its function
    object). (examples/lstm_cell.py is the case where the two bodies place their constants
    apart: test_the_examples_hold_each_kernel_and_function_once.)"""
    text = module
    name, forward, backward, *partial = group(text, "sigmoid_tanh")
    found = [k for k in kernels(text) if "tanh" in k]
    assert forward in found and len(found) == 2 + len(partial), sorted(found)
    calls = [line for line in text.splitlines() if re.search(rf"\b{forward}\(", line) and "def " not in line]
    assert len(calls) == 1, calls  # the no-grad function's call (the group's is `{name}(...)`)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*_compiled.py")), ids=lambda p: p.stem)
def test_the_examples_hold_each_kernel_and_function_once(path: Path) -> None:
    """No two kernels, nor two functions (launchers, a group's torch ops), read the same but
    for their names: lstm_cell's forward kernel is its no-grad kernel, module_list's four
    blocks share one function of torch ops."""
    text = path.read_text()
    for table in (kernels(text), python_functions(text)):
        bodies = list(table.values())
        twins = [name for name, body in table.items() if bodies.count(body) > 1]
        assert not twins, twins
    # nor two kernels but for the numbers of their values
    bodies = [re.sub(r"\bv\d+\b", "v", body) for body in kernels(text).values()]
    assert len(set(bodies)) == len(bodies)


# -- values numbered per kernel ---------------------------------------------------------------------
def kernel_with_constants(where: str) -> KernelOp:
    """sigmoid(x) * sigmoid(y) of elements, its constant 1 once at the top ("shared", as fuse
    leaves it) or before each use ("copied", as autograd_kernels clones each op's)."""
    one = "    %{n} : int = py.constant() {{value = 1}}\n"
    body = ("{c0}    %0 : f32[]@cpu = py.unary(%a) {{op = \"-\"}}\n"
            "    %1 : f32[]@cpu = torch.call(%0) {{callee = \"torch.exp\", aten = \"aten::exp\"}}\n"
            "{c1}    %2 : f32[]@cpu = py.binary(%c0, %1) {{op = \"+\"}}\n"
            "    %3 : f32[]@cpu = torch.call(%2) {{callee = \"torch.reciprocal\", aten = \"aten::reciprocal\"}}\n"
            "    %4 : f32[]@cpu = py.unary(%b) {{op = \"-\"}}\n"
            "    %5 : f32[]@cpu = torch.call(%4) {{callee = \"torch.exp\", aten = \"aten::exp\"}}\n"
            "{c2}    %6 : f32[]@cpu = py.binary(%{c}, %5) {{op = \"+\"}}\n"
            "    %7 : f32[]@cpu = torch.call(%6) {{callee = \"torch.reciprocal\", aten = \"aten::reciprocal\"}}\n"
            "    %8 : f32[]@cpu = py.binary(%3, %7) {{op = \"*\"}}\n"
            "    scf.yield(%8)\n")
    shared = where == "shared"
    body = body.format(c0=one.format(n="c0") if shared else "", c1="" if shared else one.format(n="c0"),
                       c2="" if shared else one.format(n="c1"), c="c0" if shared else "c1")
    text = ("func @f(%x: f32[B, 5]@cpu, %y: f32[B, 5]@cpu) -> f32[B, 5]@cpu {\n"
            "  %r : f32[B, 5]@cpu = kernel.pointwise(%x, %y) {name = \"k\", inputs = 2} {\n"
            "    ^(%a: f32[]@cpu, %b: f32[]@cpu):\n" + body.replace("\n    ", "\n      ").replace("    %", "      %", 1)
            + "  }\n  func.return(%r)\n}\n")
    [op] = [o for o in parse_program(text).walk() if isinstance(o, KernelOp)]
    return op


def test_values_are_numbered_per_kernel_without_its_constants() -> None:
    shared, copied = kernel_with_constants("shared"), kernel_with_constants("copied")
    assert len(copied.body.ops) == len(shared.body.ops) + 1
    text = kernel_text(shared, None, ("cpu",))
    assert text == kernel_text(copied, None, ("cpu",))
    assert "v0" in text

"""Horizontal fusion: independent groups that read a common input and have one iteration shape
become one kernel (IR in, IR out), and such kernels against eager."""

from __future__ import annotations


import pytest
import torch

from closeness import assert_close_to_eager
from source_module import imported_source
from test_fuse import compiled, fused

SIBLINGS = """\
func @f(%x: f32[B, 8]@cpu, %y: f32[8]@cpu) -> tuple[f32[B, 8]@cpu, f32[B, 8]@cpu] {
  %0 : f32[B, 8]@cpu = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 8]@cpu = py.binary(%x, %y) {op = "*"}
  func.return(%0, %1)
}
"""


def test_two_ops_reading_one_input_become_one_kernel() -> None:
    assert fused(SIBLINGS) == """\
func @f(%x: f32[B, 8]@cpu, %y: f32[8]@cpu) -> tuple[f32[B, 8]@cpu, f32[B, 8]@cpu] {
  %0 : f32[B, 8]@cpu, %1 : f32[B, 8]@cpu = kernel.pointwise(%x, %y) {name = "exp_mul", inputs = 2} {
    ^(%x_1: f32[]@cpu, %y_1: f32[]@cpu):
    %2 : f32[]@cpu = torch.call(%x_1) {callee = "torch.exp", aten = "aten::exp"}
    %3 : f32[]@cpu = py.binary(%x_1, %y_1) {op = "*"}
    scf.yield(%2, %3)
  }
  func.return(%0, %1)
}
"""


@pytest.mark.parametrize("change", [
    # the first group's value is used before the second group ends
    ("  %1 : f32[B, 8]@cpu = py.binary(%x, %y) {op = \"*\"}",
     "  %u : f32[B, 8]@cpu = torch.call(%0, %x) {callee = \"torch.hypot\", aten = \"aten::hypot\"}\n"
     "  %1 : f32[B, 8]@cpu = py.binary(%x, %y) {op = \"*\"}"),
    # a write between them: the first group's read of %x must not move past it
    ("  %1 : f32[B, 8]@cpu = py.binary(%x, %y) {op = \"*\"}",
     "  %w : f32[B, 8]@cpu = torch.method(%x, %y) {method = \"mul_\", mutates = (0,), alias_of = 0, aten = \"aten::mul_.Tensor\"}\n"
     "  %1 : f32[B, 8]@cpu = py.binary(%x, %y) {op = \"*\"}"),
    # no input in common
    ("%1 : f32[B, 8]@cpu = py.binary(%x, %y)", "%1 : f32[B, 8]@cpu = py.binary(%z, %y)"),
    # a different iteration shape
    ("%1 : f32[B, 8]@cpu = py.binary(%x, %y)", "%1 : f32[B, 8, 8]@cpu = py.binary(%x, %z)"),
])
def test_groups_that_stay_apart(change: tuple[str, str]) -> None:
    text = SIBLINGS.replace(*change)
    if "%z, %y" in text:
        text = text.replace("%y: f32[8]@cpu)", "%y: f32[8]@cpu, %z: f32[B, 8]@cpu)")
    if "%x, %z" in text:
        text = text.replace("%y: f32[8]@cpu)", "%y: f32[8]@cpu, %z: f32[8, 1, 8]@cpu)")
        text = text.replace("f32[B, 8]@cpu] {", "f32[B, 8, 8]@cpu] {")
    out = fused(text)
    assert "kernel" not in out, out


def test_a_row_reduction_takes_a_sibling_of_its_shape() -> None:
    text = """\
func @f(%x: f32[B, 40]@cpu) -> tuple[f32[B, 40]@cpu, f32[B, 40]@cpu] {
  %0 : int = py.constant() {value = 1}
  %1 : bool = py.constant() {value = True}
  %2 : f32[B, 1]@cpu = torch.call(%x, %0, %1) {callee = "torch.amax", kwnames = ("keepdim",), aten = "aten::amax"}
  %3 : f32[B, 40]@cpu = py.binary(%x, %2) {op = "-"}
  %4 : f32[B, 40]@cpu = torch.call(%x) {callee = "torch.sin", aten = "aten::sin"}
  %5 : f32[B, 40]@cpu = py.binary(%4, %0) {op = "+"}
  func.return(%3, %5)
}
"""
    out = fused(text)
    assert out.count("kernel.reduction(%x)") == 1 and "kernel.pointwise" not in out, out


SOURCE = '''
import torch
from torch import Tensor


def siblings(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    a = torch.exp(x) - 1.0
    s = torch.softmax(x, dim=-1)
    b = torch.sin(x) * y
    return a, s, b
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("horizontal_models")
    with imported_source(root, "horizontal_models", SOURCE) as module:
        yield module


def test_siblings_match_eager(fns, tmp_path, monkeypatch) -> None:
    x, y = torch.randn(3, 37), torch.randn(37)
    f = compiled(fns.siblings, (x, y), tmp_path, monkeypatch)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert text.count("_lib.") == 1, "one kernel reads x once for all three results"
    for n in (1, 5, 2000):
        x = torch.randn(n, 37)
        assert_close_to_eager(f(x, y), fns.siblings(x, y), f"batch {n}")
    x = torch.randn(80, 37)[::2]
    assert_close_to_eager(f(x, y), fns.siblings(x, y), "strided rows")

"""Hoisting in a frozen program (ir/passes/hoist.py, IR in, IR out): tensors of parameters and
constants alone become `_prepacked.computed_once` calls of helper functions; what must stay
(a value the caller gets, a function that writes, a view of a parameter, anything of the input);
the runtime's cache (runtime/prepacked.computed_once); and a compiled module against eager
before and after its parameters change."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import runtime
from ir.passes.hoist import hoist_constants
from pass_text import after
from runtime import prepacked
from source_module import imported_source

ATTENTION = """\
func @Attn.forward(%self: Module[Attn], %x: f32[2, 4, 4]@cpu) -> f32[2, 4, 4]@cpu {
  %table : f32[7, 1]@cpu = py.getattr(%self) {attr = "table"}
  %index : i64[16]@cpu = py.getattr(%self) {attr = "index"}
  %gathered : f32[16, 1]@cpu = torch.index(%table, %index) {items = (("value",),)}
  %sizes : tuple[int, int] = py.constant() {value = (4, 4)}
  %bias : f32[4, 4]@cpu = torch.method(%gathered, %sizes) {method = "view", alias_of = 0, aten = "aten::view"}
  %zeros : f32[4, 4]@cpu = torch.method(%x, %sizes) {method = "new_zeros", aten = "aten::new_zeros"}
  %one : int = py.constant() {value = 1}
  %filled : f32[4, 4]@cpu = torch.call(%zeros, %one) {callee = "torch.full_like", aten = "aten::full_like"}
  %mask : f32[4, 4]@cpu = torch.call(%filled, %one) {callee = "torch.add", aten = "aten::add"}
  %var : f32[4]@cpu = py.getattr(%self) {attr = "running_var"}
  %root : f32[4]@cpu = torch.call(%var) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %weight : f32[4, 4]@cpu = py.getattr(%self) {attr = "weight"}
  %wt : f32[4, 4]@cpu = torch.method(%weight) {method = "t", alias_of = 0, aten = "aten::t"}
  %y : f32[2, 4, 4]@cpu = py.binary(%x, %bias) {op = "+"}
  %z : f32[2, 4, 4]@cpu = py.binary(%y, %mask) {op = "*"}
  %s : f32[2, 4, 4]@cpu = py.binary(%z, %root) {op = "/"}
  %w : f32[2, 4, 4]@cpu = torch.call(%s, %wt) {callee = "torch.matmul", aten = "aten::matmul"}
  func.return(%w)
}
"""


def test_tensors_of_parameters_and_constants_are_computed_by_helpers() -> None:
    """swin's relative position bias (a gather of a parameter table by an index buffer) and its
    mask (made of `x.new_zeros`: x gives its dtype and device only). The weight's `.t()` is a
    view, which costs nothing, and `sqrt(running_var)` a few pointwise values that the kernel
    using them computes for nothing: they stay."""
    assert after(ATTENTION, hoist_constants, frozen=True) == """\
func @Attn.forward.bias(%table: f32[7, 1]@cpu, %index: i64[16]@cpu) -> f32[4, 4]@cpu {
  %gathered : f32[16, 1]@cpu = torch.index(%table, %index) {items = (("value",),)}
  %sizes : tuple[int, int] = py.constant() {value = (4, 4)}
  %bias : f32[4, 4]@cpu = torch.method(%gathered, %sizes) {method = "view", alias_of = 0, aten = "aten::view"}
  func.return(%bias)
}

func @Attn.forward.mask(%x: f32[2, 4, 4]@cpu) -> f32[4, 4]@cpu {
  %sizes : tuple[int, int] = py.constant() {value = (4, 4)}
  %zeros : f32[4, 4]@cpu = torch.method(%x, %sizes) {method = "new_zeros", aten = "aten::new_zeros"}
  %one : int = py.constant() {value = 1}
  %filled : f32[4, 4]@cpu = torch.call(%zeros, %one) {callee = "torch.full_like", aten = "aten::full_like"}
  %mask : f32[4, 4]@cpu = torch.call(%filled, %one) {callee = "torch.add", aten = "aten::add"}
  func.return(%mask)
}

func @Attn.forward(%self: Module[Attn], %x: f32[2, 4, 4]@cpu) -> f32[2, 4, 4]@cpu {
  %table : f32[7, 1]@cpu = py.getattr(%self) {attr = "table"}
  %index : i64[16]@cpu = py.getattr(%self) {attr = "index"}
  %bias : f32[4, 4]@cpu = py.computed_once(%table, %index) {callee = "Attn.forward.bias", sources = 2}
  %mask : f32[4, 4]@cpu = py.computed_once(%x) {callee = "Attn.forward.mask", sources = 0}
  %var : f32[4]@cpu = py.getattr(%self) {attr = "running_var"}
  %root : f32[4]@cpu = torch.call(%var) {callee = "torch.sqrt", aten = "aten::sqrt"}
  %weight : f32[4, 4]@cpu = py.getattr(%self) {attr = "weight"}
  %wt : f32[4, 4]@cpu = torch.method(%weight) {method = "t", alias_of = 0, aten = "aten::t"}
  %y : f32[2, 4, 4]@cpu = py.binary(%x, %bias) {op = "+"}
  %z : f32[2, 4, 4]@cpu = py.binary(%y, %mask) {op = "*"}
  %s : f32[2, 4, 4]@cpu = py.binary(%z, %root) {op = "/"}
  %w : f32[2, 4, 4]@cpu = torch.call(%s, %wt) {callee = "torch.matmul", aten = "aten::matmul"}
  func.return(%w)
}
"""
    hoisted = after(ATTENTION, hoist_constants, frozen=True)
    assert after(hoisted, hoist_constants, frozen=True) == hoisted  # (idempotent)


@pytest.mark.parametrize("case", ["not frozen", "returned", "returned view", "writes", "of the input"])
def test_what_stays(case: str) -> None:
    text = ATTENTION
    if case == "returned":  # the caller would hold (and could write) the shared tensor
        text = text.replace("func.return(%w)", "%r : tuple[Tensor, Tensor] = py.tuple(%w, %mask)\n  func.return(%w)")
    elif case == "returned view":
        text = text.replace("-> f32[2, 4, 4]@cpu {", "-> f32[4, 4]@cpu {", 1).replace(
            "func.return(%w)", '%v : f32[4, 4]@cpu = torch.method(%mask) {method = "t", alias_of = 0, aten = "aten::t"}\n'
            "  func.return(%v)")
    elif case == "writes":  # a write could change a source between the cache's check and the use
        text = text.replace("  func.return(%w)", '  %u : f32[7, 1]@cpu = torch.method(%table, %one) {method = "add_", '
                            'mutates = (0,), alias_of = 0, aten = "aten::add_"}\n  func.return(%w)')
    elif case == "of the input":
        text = text.replace('%index : i64[16]@cpu = py.getattr(%self) {attr = "index"}',
                            '%index : i64[16]@cpu = torch.call(%x) {callee = "torch.argmax", aten = "aten::argmax"}')
        text = text.replace("torch.call(%zeros, %one)", "torch.call(%zeros, %x)")
    out = after(text, hoist_constants, frozen=case != "not frozen")
    if case in ("not frozen", "writes", "of the input"):
        assert "computed_once" not in out
    else:
        assert "callee = \"Attn.forward.bias\"" in out and "Attn.forward.mask" not in out  # (the bias still is)


BIASED = """\
import torch
from torch import Tensor, nn


class Biased(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(7, 3))
        self.register_buffer("index", torch.randint(0, 7, (16,)))

    def forward(self, x: Tensor) -> Tensor:
        bias = self.table[self.index].view(4, 4, 3).permute(2, 0, 1).contiguous()
        mask = x.new_zeros((4, 4))
        mask[:2, 1:3] = 1.0
        mask = mask.masked_fill(mask != 0, -100.0)
        return torch.softmax(x + bias + mask, dim=-1)
"""


def test_a_frozen_module_computes_its_constant_tensors_once_and_again_when_they_change(tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "hoisted_bias", BIASED) as mod:
        torch.manual_seed(0)
        model = mod.Biased().eval()
        with torch.no_grad():
            compiled = script(model, example_inputs=(torch.randn(2, 3, 4, 4),), freeze=True)
            text = next((tmp_path / "cache" / "jit").glob("Biased_*.py")).read_text()
            forward = "\n".join(line for line in text[text.index("def Biased_forward("):].splitlines()
                                if not line.strip().startswith(("#", "//")))
            assert forward.count("_prepacked.computed_once(") == 2
            assert "new_zeros" not in forward and "masked_fill" not in forward
            for change in ("none", "in place", "replaced", "none"):
                if change == "in place":
                    model.table.mul_(-2.0)
                elif change == "replaced":
                    model.index = torch.randint(0, 7, (16,))
                for batch in (1, 3):
                    x = torch.randn(batch, 3, 4, 4)
                    with runtime.mode("strict"):
                        got = compiled(x)
                    torch.testing.assert_close(got, model(x), msg=change)
        frozen_file = next((tmp_path / "cache" / "jit").glob("Biased_*.py"))
        script(mod.Biased().eval(), example_inputs=(torch.randn(2, 3, 4, 4),))  # (not frozen)
        plain_file = next(p for p in (tmp_path / "cache" / "jit").glob("Biased_*.py") if p != frozen_file)
        assert "computed_once" not in plain_file.read_text()


def test_computed_once_computes_again_only_when_a_source_changes() -> None:
    calls = []

    def compute(table: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return table * 2 + like.new_zeros(())

    table, x = torch.randn(3), torch.randn(2)
    first = prepacked.computed_once(compute, (table,), (x,))
    assert prepacked.computed_once(compute, (table,), (torch.randn(5),)) is first  # (only x's device and dtype count)
    assert len(calls) == 1
    assert prepacked.computed_once(compute, (table,), (x.double(),)) is not first  # another dtype
    table.add_(1.0)
    torch.testing.assert_close(prepacked.computed_once(compute, (table,), (x,)), table * 2)
    assert prepacked.computed_once(compute, (table.clone(),), (x,)) is not first  # another tensor

    def constant(like: torch.Tensor) -> torch.Tensor:
        calls.append(2)
        return like.new_ones(3)

    ones = prepacked.computed_once(constant, (), (x,))
    assert prepacked.computed_once(constant, (), (x,)) is ones and calls.count(2) == 1


@pytest.mark.parametrize("size, hoisted", [(255, False), (256, True)])
def test_pointwise_math_of_a_parameter_is_hoisted_only_when_large(size: int, hoisted: bool) -> None:
    """A kernel computes a few pointwise values of a parameter for nothing; 2**16 of them cost
    more than the cached call."""
    text = f"""\
func @Scaled.forward(%self: Module[Scaled], %x: f32[2, {size}]@cpu) -> f32[2, 256]@cpu {{
  %w : f32[256, {size}]@cpu = py.getattr(%self) {{attr = "weight"}}
  %root : f32[256, {size}]@cpu = torch.call(%w) {{callee = "torch.sqrt", aten = "aten::sqrt"}}
  %y : f32[2, 256]@cpu = torch.call(%x, %root) {{callee = "torch.nn.functional.linear", aten = "aten::linear"}}
  func.return(%y)
}}
"""
    assert ("py.computed_once(%w)" in after(text, hoist_constants, frozen=True)) == hoisted


def test_parameters_of_a_submodule_in_a_sequential_are_sources() -> None:
    """swin's blocks sit in nn.Sequential stages: `self.features[1][0].attn` reaches the table
    through a module list."""
    text = """\
func @Net.forward(%self: Module[Net], %x: f32[2, 4, 4]@cpu) -> f32[2, 4, 4]@cpu {
  %features : Sequential[Module[Attn]] = py.getattr(%self) {attr = "features"}
  %0 : int = py.constant() {value = 0}
  %block : Module[Attn] = py.getitem(%features, %0)
  %table : f32[7, 1]@cpu = py.getattr(%block) {attr = "table"}
  %index : i64[16]@cpu = py.getattr(%block) {attr = "index"}
  %gathered : f32[16, 1]@cpu = torch.index(%table, %index) {items = (("value",),)}
  %sizes : tuple[int, int] = py.constant() {value = (4, 4)}
  %bias : f32[4, 4]@cpu = torch.method(%gathered, %sizes) {method = "view", alias_of = 0, aten = "aten::view"}
  %y : f32[2, 4, 4]@cpu = py.binary(%x, %bias) {op = "+"}
  func.return(%y)
}
"""
    out = after(text, hoist_constants, frozen=True)
    assert "%bias : f32[4, 4]@cpu = py.computed_once(%table, %index)" in out


def test_a_cached_constant_goes_with_its_function() -> None:
    """A cached tensor of constants alone is kept for as long as the generated function that
    computes it lives (a module compiled again does not keep the old one's)."""
    def constant(like: torch.Tensor) -> torch.Tensor:
        return like.new_ones(3)

    prepacked.computed_once(constant, (), (torch.randn(2),))
    alive = weakref.ref(constant)
    del constant
    gc.collect()
    assert alive() is None

"""Memory planning (ir/passes/plan.py): which GEMMs write into the storage of a dead temporary
(IR in, IR out), and compiled stacks of layers against eager, with intermediate results that
must stay intact."""

from __future__ import annotations

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from ir.passes.dce import dce
from ir.passes.fuse import fuse
from ir.passes.plan import plan_memory
from ir.passes.reuse import reuse_buffers
from pass_text import after
from source_module import imported_source

LINEAR = 'torch.call(%{x}, %{w}) {{callee = "torch.nn.functional.linear", aten = "aten::linear"}}'
TANH = 'torch.call(%{x}) {{callee = "torch.tanh", aten = "aten::tanh"}}'
# two blocks of linear -> tanh -> linear: the second block's first result, 2 MB an image, can
# take the first block's, which is dead once the first block's second linear has read it
TWO_BLOCKS = f"""\
func @f(%x: f32[B, 512, 256]@cpu, %w1: f32[1024, 256]@cpu, %w2: f32[256, 1024]@cpu) -> f32[B, 512, 256]@cpu {{
  %0 : f32[B, 512, 1024]@cpu = {LINEAR.format(x="x", w="w1")}
  %1 : f32[B, 512, 1024]@cpu = {TANH.format(x="0")}
  %2 : f32[B, 512, 256]@cpu = {LINEAR.format(x="1", w="w2")}
  %3 : f32[B, 512, 1024]@cpu = {LINEAR.format(x="2", w="w1")}
  %4 : f32[B, 512, 1024]@cpu = {TANH.format(x="3")}
  %5 : f32[B, 512, 256]@cpu = {LINEAR.format(x="4", w="w2")}
  func.return(%5)
}}
"""


def planned(text: str) -> str:
    return after(text, fuse, dce, reuse_buffers, plan_memory)


def test_a_gemm_writes_into_the_storage_of_a_dead_result() -> None:
    out = planned(TWO_BLOCKS)
    assert """\
  %5 : f32[256, 1024]@cpu = torch.method(%w1) {method = "t", alias_of = 0, aten = "aten::t"}
  %6 : f32[B, 512, 1024]@cpu = torch.call(%4, %5, %0) {callee = "torch.matmul", kwnames = ("out",), mutates = (2,), alias_of = 2, aten = "aten::matmul.out"}""" in out
    assert out.count('"torch.matmul"') == 1  # (the [B, 512, 256] results: 512 KB an image, under MIN_BYTES)


def test_a_packed_linears_result_is_a_new_tensor_to_take() -> None:
    """`_prepacked.linear` (ir/passes/pack.py) returns a new tensor and only reads its operands:
    its dead result is storage a later GEMM can take, as a linear's is."""
    text = TWO_BLOCKS.replace(
        "  %0 : f32[B, 512, 1024]@cpu = " + LINEAR.format(x="x", w="w1"),
        '  %n : None = py.constant() {value = None}\n'
        '  %0 : f32[B, 512, 1024]@cpu = py.call(%x, %w1, %n) {callee = "_prepacked.linear"}')
    out = planned(text)
    assert ', %0) {callee = "torch.matmul", kwnames = ("out",)' in out, out
    opaque = planned(text.replace("_prepacked.linear", "_prepacked.unknown"))
    assert '"torch.matmul"' not in opaque  # (a call it cannot see into: its result may be kept)


@pytest.mark.parametrize("change", [
    # the first block's result is returned too: its storage is the caller's
    ("  func.return(%5)", "  %6 : tuple[Tensor, Tensor] = py.tuple(%5, %1)\n  func.return(%6)"),
    # a view of it is read after the second block's first linear
    ("  func.return(%5)", '  %v : f32[B, 1024, 512]@cpu = torch.method(%1) {method = "mT", alias_of = 0, aten = "aten::mT"}\n'
                          '  %6 : tuple[Tensor, Tensor] = py.tuple(%5, %v)\n  func.return(%6)'),
    # an op whose result is neither a tensor nor immutable: what it holds may be read later
    ("  %3 : f32[B, 512, 1024]@cpu", '  %l : list[float] = torch.method(%1) {method = "tolist", aten = "aten::tolist"}\n'
                                     "  %3 : f32[B, 512, 1024]@cpu"),
])
def test_storage_that_is_still_seen_is_not_taken(change: tuple[str, str]) -> None:
    text = TWO_BLOCKS.replace(*change)
    if "%l : list" in text:
        text = text.replace("  func.return(%5)", "  %6 : tuple[Tensor, list[float]] = py.tuple(%5, %l)\n  func.return(%6)")
        text = text.replace("-> f32[B, 512, 256]@cpu {", "-> tuple[f32[B, 512, 256]@cpu, list[float]] {")
    if "py.tuple(%5, %1)" in text or "py.tuple(%5, %v)" in text:
        text = text.replace("-> f32[B, 512, 256]@cpu {", "-> tuple[f32[B, 512, 256]@cpu, Tensor] {")
    assert '"torch.matmul"' not in planned(text)


def test_a_result_of_another_shape_is_not_taken() -> None:
    """The second block is narrower ([B, 512, 768]): the first block's result does not fit it."""
    text = TWO_BLOCKS.replace("%w1: f32[1024, 256]@cpu", "%w1: f32[1024, 256]@cpu, %w3: f32[768, 256]@cpu, %w4: f32[256, 768]@cpu")
    text = text.replace(f"%3 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='2', w='w1')}", f"%3 : f32[B, 512, 768]@cpu = {LINEAR.format(x='2', w='w3')}")
    text = text.replace("%4 : f32[B, 512, 1024]@cpu", "%4 : f32[B, 512, 768]@cpu").replace(LINEAR.format(x="4", w="w2"), LINEAR.format(x="4", w="w4"))
    assert '"torch.matmul"' not in planned(text)


def test_an_argument_is_never_taken() -> None:
    """x has the type of the second block's result, and dies early, but it is the caller's."""
    text = TWO_BLOCKS.replace("%x: f32[B, 512, 256]@cpu", "%x: f32[B, 512, 1024]@cpu").replace(
        "%w1: f32[1024, 256]@cpu", "%w1: f32[1024, 256]@cpu, %w0: f32[256, 1024]@cpu").replace(
        f"%0 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='x', w='w1')}",
        f"%a : f32[B, 512, 256]@cpu = {LINEAR.format(x='x', w='w0')}\n  %0 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='a', w='w1')}")
    out = planned(text)
    assert out.count('"torch.matmul"') == 1 and ", %x) {callee = \"torch.matmul\"" not in out


# -- compiled stacks against eager --------------------------------------------------------------
SOURCE = """\
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(256, 1024)
        self.down = nn.Linear(1024, 256)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = F.gelu(self.up(x))
        return x + self.down(h), h


class Stack(nn.Module):
    def __init__(self, depth: int, keep: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(depth)])
        self.keep = keep

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        kept = x
        for i, block in enumerate(self.blocks):
            x, h = block(x)
            if self.keep and i == 0:
                kept = h
        return x, kept
"""


@pytest.mark.parametrize("keep", [False, True])
def test_compiled_stacks_match_eager(keep: bool, tmp_path, monkeypatch) -> None:
    """Each block's hidden result can take the storage of the one before; the first block's is
    returned when `keep`, so it must stay as it was."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "stack_" + str(keep).lower(), SOURCE) as mod:
        torch.manual_seed(0)
        net = mod.Stack(4, keep).eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 512, 256),))
            text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
            assert text.count("out=") == (2 if keep else 3)
            for batch in (2, 3):
                x = torch.randn(batch, 512, 256)
                with runtime.mode("strict"):
                    got = compiled(x)
                assert_close_to_eager(got, net(x))

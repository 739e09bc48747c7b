"""Linear layers packed in a frozen program (ir/passes/pack.py, IR in, IR out): which linears
become `_prepacked.linear` and which stay; the runtime's packed linear against `F.linear` and its
cache (runtime/prepacked.linear); and a compiled module against eager, before and after its
parameters change."""

from __future__ import annotations

import gc
import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import runtime
from closeness import assert_close_to_eager
from ir.passes.pack import pack_linears, worth_packing
from ir.core.types import TensorType
from pass_text import after
from runtime import choices, prepacked
from source_module import imported_source

LINEAR = """\
func @Layer.forward(%self: Module[Layer], %x: f32[B, 64, 256]@cpu) -> f32[B, 64, 768]@cpu {
  %w : f32[768, 256]@cpu = py.getattr(%self) {attr = "weight"}
  %b : f32[768]@cpu = py.getattr(%self) {attr = "bias"}
  %y : f32[B, 64, 768]@cpu = torch.call(%x, %w, %b) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%y)
}
"""


def test_a_linear_of_a_parameter_is_packed() -> None:
    assert after(LINEAR, pack_linears, frozen=True) == """\
func @Layer.forward(%self: Module[Layer], %x: f32[B, 64, 256]@cpu) -> f32[B, 64, 768]@cpu {
  %w : f32[768, 256]@cpu = py.getattr(%self) {attr = "weight"}
  %b : f32[768]@cpu = py.getattr(%self) {attr = "bias"}
  %y : f32[B, 64, 768]@cpu = py.call(%x, %w, %b) {callee = "_prepacked.linear"}
  func.return(%y)
}
"""


def test_nothing_is_packed_unless_the_program_is_frozen() -> None:
    assert after(LINEAR, pack_linears) == after(LINEAR)


@pytest.mark.parametrize(("old", "new"), [
    ("%x, %w, %b) {callee", "%x, %w) {callee"),  # no bias
    ("%x, %w, %b) {callee = \"torch.nn.functional.linear\"",  # the bias by name
     "%x, %w, %b) {callee = \"torch.nn.functional.linear\", kwnames = (\"bias\",)"),
    ("  %y :", "  %wt : f32[256, 768]@cpu = torch.method(%w) {method = \"t\", alias_of = 0, aten = \"aten::t\"}\n"
               "  %wtt : f32[768, 256]@cpu = torch.method(%wt) {method = \"t\", alias_of = 0, aten = \"aten::t\"}\n  %y :"),
])
def test_linears_packed_in_other_forms(old: str, new: str) -> None:
    """Without a bias, with the bias by name, and with a view of the parameter as the weight."""
    text = LINEAR.replace(old, new, 1)
    if "%wtt" in text:
        text = text.replace("torch.call(%x, %w, %b)", "torch.call(%x, %wtt, %b)")
    out = after(text, pack_linears, frozen=True)
    assert out.count('{callee = "_prepacked.linear"}') == 1 and "functional.linear" not in out, out


def test_a_weight_computed_once_is_packed() -> None:
    text = LINEAR.replace(
        '  %w : f32[768, 256]@cpu = py.getattr(%self) {attr = "weight"}',
        '  %table : f32[768, 256]@cpu = py.getattr(%self) {attr = "table"}\n'
        '  %w : f32[768, 256]@cpu = py.computed_once(%table) {callee = "Layer.forward.w", sources = 1}')
    text = 'func @Layer.forward.w(%table: f32[768, 256]@cpu) -> f32[768, 256]@cpu {\n  func.return(%table)\n}\n\n' + text
    assert '= py.call(%x, %w, %b) {callee = "_prepacked.linear"}' in after(text, pack_linears, frozen=True)


@pytest.mark.parametrize("case", ["a weight computed on every call", "a weight given by the caller", "float64",
                                  "on the GPU", "a small product", "a weight of unknown sizes"])
def test_what_stays_a_linear(case: str) -> None:
    """A weight made on each call would be packed on each call; oneDNN's packed linear is for
    float32 CPU tensors; a product too small to pay for oneDNN's call stays MKL's."""
    text = {
        "a weight computed on every call": LINEAR.replace(
            '  %b : f32[768]@cpu', '  %w2 : f32[768, 256]@cpu = py.binary(%w, %w) {op = "*"}\n  %b : f32[768]@cpu').replace(
            "torch.call(%x, %w, %b)", "torch.call(%x, %w2, %b)"),
        "a weight given by the caller": LINEAR.replace("%x: f32[B, 64, 256]@cpu)", "%x: f32[B, 64, 256]@cpu, %v: f32[768, 256]@cpu)").replace(
            "torch.call(%x, %w, %b)", "torch.call(%x, %v, %b)"),
        "float64": LINEAR.replace("f32", "f64"),
        "on the GPU": LINEAR.replace("@cpu", "@cuda"),
        "a small product": LINEAR.replace("768", "96").replace("256", "16").replace("[B, 64,", "[B, 1,"),
        "a weight of unknown sizes": LINEAR.replace("%w : f32[768, 256]", "%w : f32[N, 256]"),
    }[case]
    assert "_prepacked" not in after(text, pack_linears, frozen=True)


@pytest.mark.parametrize(("x", "weight", "expected"), [
    ((1, 512), (1000, 512), True),  # a classifier at batch 1: reading the weight dominates (2**18 elements and more)
    ((1, 256), (1000, 256), False),
    (("B", 64, 256), (256, 256), True),  # 64 rows x 2**16: 2**22 multiply-adds
    (("B", 63, 256), (256, 256), False),
    (("B", 3136, 256), (256, 256), True),
    (("B", 3136, 96), (384, 96), False),  # (below 2**16 elements: small 1x1 convs as linear did not gain)
    (("B", 256), (256, 256), False),  # (a symbolic batch counts as one row)
])
def test_worth_packing(x: tuple, weight: tuple, expected: bool) -> None:
    assert worth_packing(TensorType("float32", x, "cpu"), TensorType("float32", weight, "cpu")) is expected


# -- the runtime's packed linear ----------------------------------------------------------------
def test_what_the_packed_linear_leaves_to_linear() -> None:
    """Other dtypes, a bias of another shape, and wrong sizes (with linear's own error)."""
    w = torch.randn(8, 4)
    for x, weight, bias in ((torch.randn(3, 4, dtype=torch.float64), w.double(), None),
                            (torch.randn(3, 4), w, torch.randn(1)),
                            (torch.randn(3, 4), w, torch.randn(3, 8))):
        torch.testing.assert_close(prepacked.linear(x, weight, bias), F.linear(x, weight, bias))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        prepacked.linear(torch.randn(3, 5), w, None)


def test_the_packed_weight_is_cached_against_its_parameter(monkeypatch) -> None:
    """A view of a parameter (a 1x1 conv's weight as a matrix) is packed once and cached against
    the parameter; a write to it, or another view of it, packs again. (oneDNN's way; MKL's packs
    and the ways measured: tests/test_choices.py.)"""
    monkeypatch.setattr(choices, "TUNE", False)
    choices.forget()
    torch.manual_seed(0)
    p = nn.Parameter(torch.randn(1024, 256, 1, 1))
    x = torch.randn(4, 256)
    with torch.no_grad():
        prepacked.linear(x, p.reshape(1024, 256), None)
        entries = prepacked._PACKED.entries[id(p)][1]
        assert len(entries) == 1
        first = next(iter(entries.values()))[2]
        prepacked.linear(x, p.reshape(1024, 256), None)  # (a new view object of the same parameter)
        assert next(iter(entries.values()))[2] is first
        p.mul_(2.0)
        torch.testing.assert_close(prepacked.linear(x, p.reshape(1024, 256), None), x @ p.reshape(1024, 256).t(),
                                   atol=1e-4, rtol=1e-4)
        assert next(iter(entries.values()))[2] is not first
        half = p.reshape(1024, 256)[:512]  # another view: another entry
        torch.testing.assert_close(prepacked.linear(x, half, None), x @ half.t(), atol=1e-4, rtol=1e-4)
        assert len(entries) == 2
    key = id(p)
    del p, half, entries, first
    gc.collect()
    assert key not in prepacked._PACKED.entries


# -- a compiled module against eager -----------------------------------------------------------
FEED_FORWARD = """\
import torch
from torch import nn


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(256, 1024)
        self.down = nn.Linear(1024, 256)
        self.small = nn.Linear(256, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.down(torch.relu(self.up(x))) + x
        return y, self.small(y)
"""


@pytest.mark.parametrize("way", ["onednn", "mkl", "torch", None])
def test_a_frozen_feed_forward_matches_eager_before_and_after_its_parameters_change(way, tmp_path, monkeypatch) -> None:
    """Each way of the packed linear (runtime/choices.py; None: the one measured fastest)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with choices.pinned(way), imported_source(tmp_path, "packed_feed_forward", FEED_FORWARD) as mod:
        torch.manual_seed(0)
        net = mod.FeedForward().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 64, 256),), freeze=True)
            text = next((Path(tmp_path) / "cache" / "jit").glob("*.py")).read_text()
            assert text.count("_prepacked.linear(") == 2 and text.count("F.linear(") == 1, text  # (not the 256->8)
            for change in ("none", "in place", "replaced", "load_state_dict"):
                if change == "in place":
                    net.up.weight.mul_(-0.5)
                elif change == "replaced":
                    net.down.weight = nn.Parameter(torch.randn(256, 1024) / 32)
                elif change == "load_state_dict":
                    net.load_state_dict(mod.FeedForward().state_dict())
                for batch in (1, 3):
                    x = torch.randn(batch, 64, 256)
                    with runtime.mode("strict"):
                        got = compiled(x)
                    assert_close_to_eager(got, net(x), msg=change)


STACK = """\
import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self, sizes: list[int], biases: list[bool]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b, bias in zip(sizes, sizes[1:], biases))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i % 2 == 0:
                x = torch.relu(x)
        return x
"""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from([8, 64, 256, 512, 1024]), min_size=2, max_size=5),
       biases=st.lists(st.booleans(), min_size=4, max_size=4), rows=st.sampled_from([1, 7, 64]))
def test_frozen_linear_stacks_match_eager_and_pack_what_pays(sizes, biases, rows, tmp_path, monkeypatch) -> None:
    """Stacks of linear layers of generated sizes: the layers `worth_packing` picks (for the rows
    the input is known to have; the batch is symbolic) run packed, the others as linear, and the
    values are eager's, before and after a write to the weights."""
    from transpiler import script

    cache = Path(tempfile.mkdtemp(dir=tmp_path))  # (one per example: the test reads its module)
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(cache))
    name = f"linear_stack_{cache.name}"
    with imported_source(tmp_path, name, STACK) as mod:
        torch.manual_seed(0)
        net = mod.Stack(sizes, biases).eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, rows, sizes[0]),), freeze=True)
            text = next((cache / "jit").glob("*.py")).read_text()
            expected = sum(worth_packing(TensorType("float32", ("B", rows, k), "cpu"), TensorType("float32", (n, k), "cpu"))
                           for k, n in zip(sizes, sizes[1:]))
            assert text.count("_prepacked.linear(") == expected, text
            for step in range(2):
                if step:
                    for layer in net.layers:
                        layer.weight.mul_(-0.5)
                for batch in (1, 3):
                    x = torch.randn(batch, rows, sizes[0])
                    with runtime.mode("strict"):
                        got = compiled(x)
                    assert_close_to_eager(got, net(x))

"""A per-channel scale of a linear's input folded into its weight in a frozen program
(ir/passes/scales.py): the pass on IR text, the kernel that computes the gate once per channel
against the weight (codegen/cpp_kernels.py), and compiled gates against eager (hypothesis draws
their sizes)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from closeness import assert_close_to_eager
from ir.passes.scales import fold_input_scales
from pass_text import after
from source_module import imported_source

GATED = """\
func @Net.forward(%self: Module[Net], %x: f32[1, 14, 14, 64]@cpu, %s: SCALE@cpu) -> f32[1, 14, 14, N]@cpu {
  %w : f32[N, 64]@cpu = py.getattr(%self) {attr = "weight"}
  %b : f32[N]@cpu = py.getattr(%self) {attr = "bias"}
  %0 : f32[1, 14, 14, 64]@cpu = py.binary(OPERANDS) {op = "*"}
  %1 : f32[1, 14, 14, N]@cpu = torch.call(%0, %w, %b) {callee = "torch.nn.functional.linear"}
  func.return(RESULT)
}
"""


def gated(n: int = 16, scale: str = "f32[1, 1, 1, 64]", operands: str = "%s, %x", result: str = "%1") -> str:
    return (GATED.replace("SCALE", scale).replace("OPERANDS", operands).replace("RESULT", result)
            .replace("N]", f"{n}]").replace("[N,", f"[{n},"))


def test_a_gate_of_a_linear_input_scales_its_weight() -> None:
    text = gated()
    head = text[:text.index("  %0 :")]
    assert after(text, fold_input_scales, frozen=True) == head + """\
  %0 : f32[1, 1, 16, 64]@cpu = py.binary(%w, %s) {op = "*"}
  %1 : int = py.constant() {value = 16}
  %2 : int = py.constant() {value = 64}
  %gated_weight : f32[16, 64]@cpu = torch.method(%0, %1, %2) {method = "reshape", alias_of = 0, aten = "aten::reshape"}
  %3 : f32[1, 14, 14, 16]@cpu = torch.call(%x, %gated_weight, %b) {callee = "torch.nn.functional.linear", aten = "aten::linear"}
  func.return(%3)
}
"""


def test_the_scale_may_be_either_operand_and_of_lower_rank() -> None:
    for text in (gated(operands="%x, %s"), gated(scale="f32[64]")):
        out = after(text, fold_input_scales, frozen=True)
        assert "torch.call(%x, %gated_weight" in out, out


@pytest.mark.parametrize("case", ["not frozen", "as many rows as outputs", "a scale per row", "a scale per image row",
                                  "the product used twice", "a scalar scale", "a module's scale"])
def test_what_does_not_fold(case: str) -> None:
    text = {
        "not frozen": gated(),
        "as many rows as outputs": gated(n=196),  # (14 x 14 rows: scaling the input costs no more)
        "a scale per row": gated(scale="f32[1, 14, 14, 64]"),
        "a scale per image row": gated(scale="f32[1, 14, 1, 64]"),
        "the product used twice": gated(result="%0"),
        "a scalar scale": gated(scale="f32[1, 1, 1, 1]"),
        "a module's scale": gated().replace('  %b : f32[16]@cpu', '  %g : f32[64]@cpu = py.getattr(%self) {attr = "gamma"}\n  %b : f32[16]@cpu').replace("py.binary(%s, %x)", "py.binary(%g, %x)"),
    }[case]
    if case == "the product used twice":
        text = text.replace("-> f32[1, 14, 14, 16]@cpu", "-> f32[1, 14, 14, 64]@cpu")
    assert after(text, fold_input_scales, frozen=case != "not frozen") == after(text)


SE_SOURCE = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.squeeze = nn.Linear(C, C)
        self.proj = nn.Linear(C, N, bias=BIAS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.squeeze(x.mean(1, keepdim=True)))
        return self.proj(PRODUCT)
"""


def _se_source(c: int, n: int, bias: bool, scale_first: bool) -> str:
    product = "s * x" if scale_first else "x * s"
    return (SE_SOURCE.replace("C, C", f"{c}, {c}").replace("C, N", f"{c}, {n}").replace("BIAS", str(bias))
            .replace("PRODUCT", product))


def test_a_squeeze_and_excitation_gate_runs_against_the_weight(tmp_path, monkeypatch) -> None:
    """At batch 1 the gate scales the projection's 8x32 weight, not the 49x32 input; the C++
    kernel computes the sigmoid once per channel (in a row buffer, before the rows), not once per
    weight element. Values as eager's, also after the weight is written in place."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "se_net", _se_source(32, 8, True, True)) as mod:
        torch.manual_seed(0)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(1, 49, 32),), freeze=True)
            text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
            assert "gated_weight = " in text and "F.linear(x, gated_weight, " in text, text
            kernel = text[text.index('extern "C" void'):]
            kernel = kernel[:kernel.index("\n}\n")]
            once, rows = kernel[:kernel.index("ts_rows_of(")], kernel[kernel.index("ts_rows_of("):]
            assert "std::unique_ptr<float[]> r" in once and "ts_exp" in once and "ts_exp" not in rows, text
            for change in ("none", "in place"):
                if change == "in place":
                    net.proj.weight.mul_(-2.0)
                x = torch.randn(1, 49, 32)
                with runtime.mode("strict"):
                    got = compiled(x)
                assert_close_to_eager(got, net(x), msg=change)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.integers(1, 40), c=st.integers(1, 24), n=st.integers(1, 24), bias=st.booleans(),
       scale_first=st.booleans(), batch=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_gated_linears_match_eager(rows, c, n, bias, scale_first, batch, seed, tmp_path_factory, monkeypatch) -> None:
    """Folded where a batch of one has more rows than outputs, and as eager's either way."""
    from transpiler import script

    root = tmp_path_factory.mktemp("gated")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(root / "cache"))
    with imported_source(root, f"gated_{root.name}", _se_source(c, n, bias, scale_first)) as mod:
        torch.manual_seed(seed)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(batch, rows, c),), freeze=True)
            x = torch.randn(batch, rows, c)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x))
        text = next((root / "cache" / "jit").glob("*.py")).read_text()
        assert ("F.linear(x, gated_weight" in text) == (batch == 1 and rows > n), text

"""Frozen modules (`script(model, example_inputs=..., freeze=True)`): batch norm folded into the
conv before it (ir/passes/freeze.py, IR in, IR out), large conv weights kept in oneDNN's layout
(ir/passes/layout.py), the runtime's cache of what it computes from parameters
(runtime/prepacked.py), and compiled nets against eager, before and after their parameters
change (hypothesis builds the nets)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import runtime
from closeness import assert_close_to_eager
from conv_nets import net_source
from ir.passes.freeze import fold_batch_norms
from ir.core.parser import parse_program
from ir.passes.conv_choices import packable
from ir.passes.layout import channels_last
from ir.kernel.primitives import op_name
from pass_text import after
from runtime import choices, prepacked
from source_module import imported_source

CONV_BN = """\
func @Net.forward(%self: Module[Net], %x: f32[B, 32, 16, 16]@cpu) -> f32[B, 64, 16, 16]@cpu {
  %w : f32[64, 32, 3, 3]@cpu = py.getattr(%self) {attr = "weight"}
  %mean : f32[64]@cpu = py.getattr(%self) {attr = "running_mean"}
  %var : f32[64]@cpu = py.getattr(%self) {attr = "running_var"}
  %gamma : f32[64]@cpu = py.getattr(%self) {attr = "gamma"}
  %beta : f32[64]@cpu = py.getattr(%self) {attr = "beta"}
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %g : int = py.constant() {value = 1}
  %training : bool = py.constant() {value = TRAINING}
  %momentum : float = py.constant() {value = 0.1}
  %eps : float = py.constant() {value = 1e-05}
  %0 : f32[B, 64, 16, 16]@cpu = torch.call(%x, %w, %none, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %1 : f32[B, 64, 16, 16]@cpu = torch.call(%0, %mean, %var, %gamma, %beta, %training, %momentum, %eps) {callee = "torch.nn.functional.batch_norm"}
  func.return(RESULT)
}
"""


def run(text: str, *passes, frozen: bool = True) -> str:
    return after(text, *passes, frozen=frozen)


def conv_bn(training: bool = False, result: str = "%1") -> str:
    return CONV_BN.replace("TRAINING", str(training)).replace("RESULT", result)


def test_a_batch_norm_after_a_conv_folds_into_its_weight_and_bias() -> None:
    text = conv_bn()
    head = text[:text.index("  %0 :")]
    assert run(text, fold_batch_norms) == head + """\
  %0 : None = py.constant() {value = None}
  %1 : float = py.constant() {value = 1e-05}
  %folded : tuple[f32[64, 32, 3, 3]@cpu, f32[64]@cpu] = py.call(%w, %0, %mean, %var, %gamma, %beta, %1) {callee = "_prepacked.fold_batch_norm"}
  %2 : int = py.constant() {value = 0}
  %3 : f32[64, 32, 3, 3]@cpu = py.getitem(%folded, %2)
  %4 : int = py.constant() {value = 1}
  %5 : f32[64]@cpu = py.getitem(%folded, %4)
  %6 : tuple[int, int] = py.constant() {value = (1, 1)}
  %7 : f32[B, 64, 16, 16]@cpu = torch.call(%x, %3, %5, %6, %6, %6, %4) {callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}
  func.return(%7)
}
"""


def test_nothing_folds_unless_the_program_is_frozen() -> None:
    assert run(conv_bn(), fold_batch_norms, frozen=False) == run(conv_bn(), frozen=False)


@pytest.mark.parametrize("case", ["training", "conv result used twice", "another channel count", "a small weight",
                                  "padding same"])
def test_what_does_not_fold(case: str) -> None:
    """A conv the layout pass will not pack keeps its batch norm: the kernel after the conv
    computes it for almost nothing, and oneDNN ran the folded conv, with a bias, slower
    (ir/passes/freeze.py)."""
    if case == "training":
        text = conv_bn(training=True)
    elif case == "conv result used twice":
        text = conv_bn(result="%2").replace(
            "  func.return(%2)", "  %2 : f32[B, 64, 16, 16]@cpu = py.binary(%0, %1) {op = \"+\"}\n  func.return(%2)")
    elif case == "another channel count":
        text = conv_bn().replace("%mean : f32[64]@cpu", "%mean : f32[1]@cpu")
    elif case == "padding same":  # (oneDNN's packed conv takes int padding only)
        text = conv_bn().replace("  %g : int", '  %same : str = py.constant() {value = "same"}\n  %g : int').replace(
            "torch.call(%x, %w, %none, %one, %one, %one, %g)", "torch.call(%x, %w, %none, %one, %same, %one, %g)")
    else:  # 16 x 32 x 3 x 3: fewer than PACK_MIN_ELEMENTS
        text = conv_bn().replace("%w : f32[64, 32, 3, 3]", "%w : f32[16, 32, 3, 3]").replace("f32[64]", "f32[16]").replace(
            "f32[B, 64, 16, 16]", "f32[B, 16, 16, 16]")
    assert "_prepacked" not in run(text, fold_batch_norms)


BIG_CONVS = """\
func @Net.forward(%self: Module[Net], %x: f32[B, 512, 7, 7]@cpu) -> f32[B, 512, 7, 7]@cpu {
  %w : f32[512, 512, 3, 3]@cpu = py.getattr(%self) {attr = "w"}
  %w1 : f32[512, 512, 1, 1]@cpu = py.getattr(%self) {attr = "w1"}
  %b : f32[512]@cpu = py.getattr(%self) {attr = "b"}
  %none : None = py.constant() {value = None}
  %one : tuple[int, int] = py.constant() {value = (1, 1)}
  %zero : tuple[int, int] = py.constant() {value = (0, 0)}
  %g : int = py.constant() {value = 1}
  %z : int = py.constant() {value = 0}
  %0 : f32[B, 512, 7, 7]@cpu = torch.call(%x, %w, %b, %one, %one, %one, %g) {callee = "torch.nn.functional.conv2d"}
  %1 : f32[B, 512, 7, 7]@cpu = torch.call(%0, %z) {callee = "torch.clamp_min", aten = "aten::clamp_min"}
  %2 : f32[B, 512, 7, 7]@cpu = torch.call(%1, %w1, %none, %one, %zero, %one, %g) {callee = "torch.nn.functional.conv2d"}
  func.return(%2)
}
"""


def test_large_conv_weights_of_a_frozen_program_are_packed_and_run_channels_last() -> None:
    """7x7 outputs stay NCHW with plain weights (prefers_channels_last); packed, the weight is
    reordered once, and channels-last input is what oneDNN's packed conv runs fastest."""
    assert "channels_last" not in run(BIG_CONVS, channels_last, frozen=False)
    out = run(BIG_CONVS, channels_last)
    assert out.count('{callee = "_prepacked.conv2d"}') == 2  # (the 1x1 one too: packed beats `linear` there)
    assert out.count('{value = "torch.channels_last"}') == 1  # (the input, once)
    assert "torch.nn.functional.conv2d" not in out and "linear" not in out


def test_convs_of_weights_made_on_each_call_are_neither_packed_nor_folded() -> None:
    """A weight the caller gives, or one computed from an input, is another tensor on every
    call: packed (or folded with its batch norm), it would be reordered (or folded) on every call."""
    given = BIG_CONVS.replace("func @Net.forward(%self: Module[Net], %x: f32[B, 512, 7, 7]@cpu)",
                              "func @Net.forward(%self: Module[Net], %x: f32[B, 512, 7, 7]@cpu, %w: f32[512, 512, 3, 3]@cpu)")
    given = given.replace('  %w : f32[512, 512, 3, 3]@cpu = py.getattr(%self) {attr = "w"}\n', "")
    out = run(given, channels_last)
    assert out.count('{callee = "_prepacked.conv2d"}') == 1 and out.count("torch.nn.functional.conv2d") == 1, out
    scaled = conv_bn().replace("func @Net.forward(%self: Module[Net], %x: f32[B, 32, 16, 16]@cpu)",
                               "func @Net.forward(%self: Module[Net], %x: f32[B, 32, 16, 16]@cpu, %s: f32[64]@cpu)")
    scaled = scaled.replace('%gamma : f32[64]@cpu = py.getattr(%self) {attr = "gamma"}',
                            '%g0 : f32[64]@cpu = py.getattr(%self) {attr = "gamma"}\n'
                            '  %gamma : f32[64]@cpu = py.binary(%g0, %s) {op = "*"}')
    assert "_prepacked" not in run(scaled, fold_batch_norms)
    assert "_prepacked.fold_batch_norm" in run(conv_bn(), fold_batch_norms)


@pytest.mark.parametrize(("weight", "out", "expected", "groups"), [
    ("512, 512, 3, 3", "7, 7", True, 1),
    ("32, 32, 3, 3", "7, 7", False, 1),  # small: as fast plain
    ("512, 256, 1, 1", "7, 7", True, 1),
    ("128, 512, 1, 1", "7, 7", False, 1),  # a 1x1 conv under PACK_MIN_ELEMENTS_1X1: as fast as `linear`
    ("512, 512, 3, 3", "1, 1", False, 1),  # one position (squeeze-and-excitation): far faster plain
    ("512, 512, 3, 3", "H, W", False, 1),  # positions unknown
    ("440, 8, 3, 3", "7, 7", True, 55),  # grouped (regnet's): plain, oneDNN reorders its weight per call
    ("208, 8, 3, 3", "14, 14", False, 26),  # grouped and small
    ("768, 1, 7, 7", "7, 7", False, 768),  # depthwise (convnext's): no faster packed in a whole model
    ("768, 1, 7, 7", "7, 7", True, 1),  # one input channel, not grouped
])
def test_which_convs_are_packable(weight: str, out: str, expected: bool, groups: int) -> None:
    """oneDNN's packed call costs about 30 us whatever its size (ir/passes/conv_choices.py)."""
    c_in = int(weight.split(", ")[1]) * groups
    program = parse_program(f"""\
func @f(%x: f32[B, {c_in}, 9, 9]@cpu, %w: f32[{weight}]@cpu) -> f32[B, {weight.split(", ")[0]}, {out}]@cpu {{
  %none : None = py.constant() {{value = None}}
  %one : tuple[int, int] = py.constant() {{value = (1, 1)}}
  %g : int = py.constant() {{value = {groups}}}
  %0 : f32[B, {weight.split(", ")[0]}, {out}]@cpu = torch.call(%x, %w, %none, %one, %one, %one, %g) {{callee = "torch.nn.functional.conv2d"}}
  func.return(%0)
}}
""")
    conv = next(op for op in program.funcs[0].walk() if op_name(op) == "conv2d")
    assert packable(conv) is expected


# -- the runtime's cache ----------------------------------------------------------------------
def _bn_params(c: int) -> list[torch.Tensor]:
    return [torch.randn(c), torch.rand(c) + 0.5, torch.rand(c) + 0.5, torch.randn(c)]  # mean, var, gamma, beta


def test_folded_weights_compute_what_conv_then_batch_norm_computes() -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(2, 4, 9, 9), torch.randn(6, 4, 3, 3), torch.randn(6)
    mean, var, gamma, beta = _bn_params(6)
    for bias, g, bt in ((b, gamma, beta), (None, gamma, beta), (b, None, None)):
        w2, b2 = prepacked.fold_batch_norm(w, bias, mean, var, g, bt, 1e-3)
        expected = F.batch_norm(F.conv2d(x, w, bias), mean, var, g, bt, False, 0.1, 1e-3)
        torch.testing.assert_close(F.conv2d(x, w2, b2), expected, atol=1e-5, rtol=1e-5)


def test_folded_weights_are_computed_again_when_a_source_changes() -> None:
    torch.manual_seed(0)
    w, b = nn.Parameter(torch.randn(6, 4, 3, 3)), nn.Parameter(torch.randn(6))
    mean, var, gamma, beta = _bn_params(6)

    def fold():
        return prepacked.fold_batch_norm(w, b, mean, var, gamma, beta, 1e-5)

    first = fold()
    assert fold() is first  # (cached)
    with torch.no_grad():
        mean.add_(1.0)  # an in-place write moves the version counter
    second = fold()
    assert second is not first
    torch.testing.assert_close(second[1], (b - mean) * gamma / torch.sqrt(var + 1e-5) + beta)
    w.data = torch.randn(6, 4, 3, 3)  # other storage
    third = fold()
    assert third is not second
    torch.testing.assert_close(third[0], w * (gamma / torch.sqrt(var + 1e-5)).reshape(-1, 1, 1, 1))
    other_mean = mean.clone()  # another object with equal values, version and shape
    assert prepacked.fold_batch_norm(w, b, other_mean, var, gamma, beta, 1e-5) is not third
    assert prepacked.fold_batch_norm(w, b, mean, var, gamma, beta, 1e-3) is not third  # another eps


def test_a_cache_entry_goes_with_its_weight() -> None:
    w = torch.randn(6, 4, 3, 3)
    prepacked.fold_batch_norm(w, None, *_bn_params(6), 1e-5)
    assert id(w) in prepacked._FOLDED.entries
    key = id(w)
    del w
    gc.collect()
    assert key not in prepacked._FOLDED.entries


def test_a_channels_last_weight_is_made_once_and_again_when_the_weight_changes() -> None:
    w = nn.Parameter(torch.randn(6, 4, 3, 3))
    first = prepacked.channels_last(w)
    assert first.is_contiguous(memory_format=torch.channels_last) and torch.equal(first, w)
    assert prepacked.channels_last(w) is first  # (cached)
    with torch.no_grad():
        w.mul_(2.0)
    second = prepacked.channels_last(w)
    assert second is not first and torch.equal(second, w)
    w.data = torch.randn(6, 4, 3, 3)  # other storage
    assert torch.equal(prepacked.channels_last(w), w)
    already = torch.randn(6, 4, 3, 3).contiguous(memory_format=torch.channels_last)
    assert prepacked.channels_last(already).data_ptr() == already.data_ptr()  # (no copy)
    # a view of a parameter, a new tensor on every call: made once all the same, per view
    halves = [prepacked.channels_last(w[:3]) for _ in range(2)]
    assert halves[0] is halves[1] and torch.equal(halves[0], w[:3])
    other = prepacked.channels_last(w[3:])
    assert other is not halves[0] and torch.equal(other, w[3:])
    with torch.no_grad():
        w.add_(1.0)  # (written through the parameter: the view's copy is made again)
    assert torch.equal(prepacked.channels_last(w[:3]), w[:3])


def _frozen(net: nn.Module, example: torch.Tensor, tmp_path: Path) -> tuple[nn.Module, str]:
    """`script(net, example_inputs=(example,), freeze=True)` (into the cache under `tmp_path`) and
    the text of the forward it generated."""
    from transpiler import script

    compiled = script(net, example_inputs=(example,), freeze=True)
    text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
    return compiled, text[text.index(f"def {type(net).__name__}_forward(self"):]


def test_convs_of_channels_last_inputs_read_their_weights_channels_last_made_once(tmp_path, monkeypatch) -> None:
    """torch's conv of a channels-last input copies a weight of another layout on every call; a
    frozen module's weights of more than one input channel per group and more than 1x1 are made
    channels-last once (a depthwise or 1x1 weight is channels-last already). Values as eager's,
    before and after the weights change."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    steps = [("conv", "layer", True), ("bn", "layer", False), ("grouped", "residual", False),
             ("depthwise", "layer", False), ("pointwise", "residual", False), ("conv", "layer", False)]
    with imported_source(tmp_path, "frozen_weights_net", net_source(steps, 8)) as mod:
        net = mod.Net().eval()
        _randomize(net, 0)
        with torch.no_grad():
            compiled, forward = _frozen(net, torch.randn(1, 8, 16, 16), tmp_path)
            assert forward.count("_prepacked.channels_last(") == 3, forward  # (both 3x3 convs, the grouped one)
            for change in ("none", "in place", "replaced"):
                if change == "in place":
                    net.l2.weight.mul_(-0.5)
                elif change == "replaced":
                    net.l5.weight = nn.Parameter(net.l5.weight.flip(0))
                x = torch.randn(1, 8, 16, 16)
                with runtime.mode("strict"):
                    got = compiled(x)
                assert_close_to_eager(got, net(x), msg=change)


@pytest.mark.parametrize(("stride", "padding", "batch"), [((1, 1), (1, 1), 1), ((2, 2), (0, 0), 3), ((1, 2), (2, 1), 2)])
def test_a_packed_conv_computes_what_conv2d_computes(stride, padding, batch) -> None:
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(16, 8, 3, 3))
    for x in (torch.randn(batch, 8, 10, 10), torch.randn(batch, 8, 10, 10).contiguous(memory_format=torch.channels_last)):
        with torch.no_grad():
            for bias in (None, torch.randn(16)):
                got = prepacked.conv2d(x, w, bias, stride, padding, (1, 1), 1)
                torch.testing.assert_close(got, F.conv2d(x, w, bias, stride, padding), atol=1e-4, rtol=1e-4)
            with torch.no_grad():
                w.mul_(-1.0)  # the next call sees the new values
            torch.testing.assert_close(prepacked.conv2d(x, w, None, stride, padding, (1, 1), 1),
                                       F.conv2d(x, w, None, stride, padding), atol=1e-4, rtol=1e-4)


# -- compiled nets against eager --------------------------------------------------------------
FROZEN_LAYERS = ["conv", "pointwise", "depthwise", "bn", "relu"]


def _no_graph(context: str):
    return torch.inference_mode() if context == "inference_mode" else torch.no_grad()


def _randomize(net: nn.Module, seed: int) -> None:
    torch.manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-1, 1)
            elif isinstance(m, nn.Conv2d):
                m.weight.normal_(0, (2 / m.weight[0].numel()) ** 0.5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(FROZEN_LAYERS), st.sampled_from(["layer", "residual", "shuffle", "unit"]),
                                st.booleans()),
                      min_size=2, max_size=5),
       wide=st.booleans(), seed=st.integers(0, 2**16), way=st.sampled_from(["onednn", "torch", "linear", "mkl", None]),
       first=st.sampled_from(["no_grad", "inference_mode"]))
def test_frozen_nets_match_eager_before_and_after_their_parameters_change(steps, wide, seed, way, first, tmp_path,
                                                                          monkeypatch) -> None:
    """256 channels give weights large enough to pack; after the compiled call, new parameters
    (load_state_dict, an in-place write, a replaced tensor) and the next call follows them. The
    packed convs and linears take a way drawn (runtime/choices.py; None: the one measured). The
    first calls run under `first`, the later ones under the other context too: what a call under
    `torch.inference_mode()` makes once, a call under `torch.no_grad()` reads, and back."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    c = 256 if wide else 8
    second = "no_grad" if first == "inference_mode" else "inference_mode"
    with choices.pinned(way), imported_source(tmp_path, f"frozen_net_{tmp_path.name}", net_source(steps, c)) as mod:
        net = mod.Net().eval()
        _randomize(net, seed)
        with _no_graph(first):
            compiled = script(net, example_inputs=(torch.randn(2, c, 7, 7),), freeze=True)
        for change in ("none", "load_state_dict", "in place", "replaced"):
            with _no_graph(first if change in ("none", "replaced") else second):
                if change == "load_state_dict":
                    other = mod.Net().eval()
                    _randomize(other, seed + 1)
                    net.load_state_dict(other.state_dict())
                elif change == "in place":
                    for p in net.parameters():
                        p.mul_(0.5)
                    for b in net.buffers():
                        if b.is_floating_point():
                            b.mul_(0.5)
                elif change == "replaced":
                    for m in net.modules():
                        if isinstance(m, nn.Conv2d):
                            m.weight = nn.Parameter(-m.weight)
                for batch in (2, 3):
                    x = torch.randn(batch, c, 7, 7)
                    with runtime.mode("strict"):
                        got = compiled(x)
                    expected = net(x)
                    scale = expected[0].abs().max().item() + 1  # (the values grow with 256 channels)
                    assert_close_to_eager([g / scale for g in got], [e / scale for e in expected], msg=change)


def test_a_frozen_module_built_under_inference_mode_sees_writes_to_its_parameters(tmp_path, monkeypatch) -> None:
    """Parameters made under `torch.inference_mode()` are inference tensors: no version counter
    tells when they are written, so what is made from them is made on every call, and a write
    inside inference mode (a `load_state_dict` there) is seen."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    steps = [("conv", "layer", True), ("bn", "layer", False), ("relu", "layer", False), ("conv", "residual", False)]
    with imported_source(tmp_path, "inference_built_net", net_source(steps, 256)) as mod, torch.inference_mode():
        net = mod.Net().eval()
        _randomize(net, 0)
        assert net.l0.weight.is_inference()
        compiled = script(net, example_inputs=(torch.randn(1, 256, 7, 7),), freeze=True)
        for step in range(3):
            x = torch.randn(1, 256, 7, 7)
            with runtime.mode("strict"):
                got = compiled(x)
            expected = net(x)
            scale = expected[0].abs().max().item() + 1
            assert_close_to_eager([g / scale for g in got], [e / scale for e in expected], msg=f"step {step}")
            net.l0.weight.mul_(-0.5)
            net.l1.running_mean.add_(0.25)


def test_a_frozen_module_in_training_mode_runs_eagerly(tmp_path, monkeypatch) -> None:
    """Training batch norm updates its statistics: the entry checks on `training` send the call to
    the eager path, which does."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    steps = [("conv", "layer", False), ("bn", "layer", False), ("conv", "residual", True)]
    with imported_source(tmp_path, "frozen_train_net", net_source(steps, 8)) as mod:
        net = mod.Net().eval()
        _randomize(net, 0)
        compiled = script(net, example_inputs=(torch.randn(2, 8, 7, 7),), freeze=True)
        compiled.train()
        before = net.l1.running_mean.clone()
        with torch.no_grad():
            x = torch.randn(2, 8, 7, 7)
            expected = mod.Net()
            expected.load_state_dict(net.state_dict())
            want = expected.train()(x)
            with pytest.warns(runtime.TorchscribeWarning, match="self.l1.training: expected False, got True"):
                got = compiled(x)
        assert_close_to_eager(got, want)
        assert not torch.equal(net.l1.running_mean, before)  # (updated, as eager updates it)


def test_the_generated_module_reads_as_conv_and_folded_batch_norm(tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    steps = [("conv", "layer", False), ("bn", "layer", False), ("relu", "layer", False), ("conv", "residual", True)]
    with imported_source(tmp_path, "frozen_text_net", net_source(steps, 256)) as mod:
        net = mod.Net().eval()
        with torch.no_grad():
            script(net, example_inputs=(torch.randn(1, 256, 7, 7),), freeze=True)
        text = next((Path(tmp_path) / "cache" / "jit").glob("*.py")).read_text()
    assert "from runtime import prepacked as _prepacked\n" in text
    assert "folded = _prepacked.fold_batch_norm(\n" in text
    assert "_prepacked.conv2d(" in text and "F.batch_norm" not in text


@pytest.mark.parametrize("target", ["function", "class"])
def test_freeze_takes_a_module_instance(target: str) -> None:
    from transpiler import script

    def f(x):
        return x + 1

    with pytest.raises(TypeError, match=r"script\(freeze=True\) takes an nn.Module instance"):
        if target == "function":
            script(f, example_inputs=(torch.randn(2),), freeze=True)
        else:
            script(freeze=True)(nn.Module)


EXPAND = """\
import torch
from torch import nn


class Expand(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.up = nn.Conv2d(16, 96, 1, bias=False)
        self.bn = nn.BatchNorm2d(96)
        self.down = nn.Conv2d(96, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        return self.down(torch.relu(self.bn(self.up(h)))) + h
"""


@pytest.mark.parametrize("way", ["gemm_into", "onednn", "torch", "linear", None])
def test_a_large_1x1_conv_runs_each_way_into_a_kept_buffer_as_eager(way, tmp_path, monkeypatch) -> None:
    """At a batch not known to be one, 1x1 convs run as `_prepacked.conv2d` (layout.measured_1x1),
    the 16->96 one at 56x56 (1.2 MB an image) given a kept buffer it may be written into
    (`gemm_into`) and its batch norm not folded (it joins the kernel after); each way against
    eager at batches 2, 3, 2, the first call's result unchanged by the later ones."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with choices.pinned(way), imported_source(tmp_path, "frozen_expand", EXPAND) as mod:
        net = mod.Expand().eval()
        _randomize(net, 0)
        with torch.no_grad():
            compiled, forward = _frozen(net, torch.randn(2, 3, 56, 56), tmp_path)
            assert forward.count("_prepacked.conv2d(") == 2 and "fold_batch_norm" not in forward, forward
            assert "torch.float32).permute(0, 3, 1, 2)" in forward, forward  # (the NHWC rows of a kept buffer)
            first_x = torch.randn(2, 3, 56, 56)
            with runtime.mode("strict"):
                first = compiled(first_x)
            assert_close_to_eager(first, net(first_x))
            for batch in (3, 2):
                x = torch.randn(batch, 3, 56, 56)
                with runtime.mode("strict"):
                    assert_close_to_eager(compiled(x), net(x))
            assert_close_to_eager(first, net(first_x))
        if way is not None:  # (the 96->16 conv's output, 200 KB an image, has no buffer to be written into)
            expected = {way, "onednn"} if way == "gemm_into" else {way}
            assert {w for family, _, w, _ in choices.decisions() if family[0] == "conv2d"} == expected

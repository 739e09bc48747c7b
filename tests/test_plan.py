"""Memory planning (ir/passes/plan.py): which GEMMs write into the storage of a dead temporary
(IR in, IR out), and compiled stacks of layers against eager, with intermediate results that
must stay intact."""

from __future__ import annotations

import re

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


def taken(out: str) -> list[str]:
    """The GEMMs of planned IR that write into a dead temporary's storage (`out=` a value that
    is not a kept buffer, py.buffer), as `%result <- %dead`."""
    kept = set(re.findall(r"^  (%\w+) : .+? = py\.buffer\(", out, re.M))
    gemms = re.findall(r"^  (%\w+) : .+? = torch\.call\(%\w+, %\w+, (%\w+)\) \{callee = \"torch\.matmul\"", out, re.M)
    return [f"{r} <- {d}" for r, d in gemms if d not in kept]


def test_a_gemm_writes_into_the_storage_of_a_dead_result() -> None:
    out = planned(TWO_BLOCKS)
    assert """\
  %12 : f32[256, 1024]@cpu = torch.method(%w1) {method = "t", alias_of = 0, aten = "aten::t"}
  %13 : f32[B, 512, 1024]@cpu = torch.call(%11, %12, %7) {callee = "torch.matmul", kwnames = ("out",), mutates = (2,), alias_of = 2, aten = "aten::matmul.out"}""" in out, out
    assert taken(out) == ["%13 <- %7"]  # (the [B, 512, 256] results: 512 KB an image, under MIN_BYTES)
    # the first block's product had no dead temporary to take: it goes into a kept buffer
    assert '%7 : f32[B, 512, 1024]@cpu = torch.call(%x, %6, %5) {callee = "torch.matmul"' in out
    assert '%5 : f32[B, 512, 1024]@cpu = py.buffer(%buffers, %4) {slot = 0, dtype = "float32"}' in out


def test_a_packed_linears_result_is_a_new_tensor_to_take() -> None:
    """`_prepacked.linear` (ir/passes/pack.py) returns a new tensor and only reads its operands:
    its dead result is storage a later GEMM can take, as a linear's is."""
    text = TWO_BLOCKS.replace(
        "  %0 : f32[B, 512, 1024]@cpu = " + LINEAR.format(x="x", w="w1"),
        '  %n : None = py.constant() {value = None}\n'
        '  %0 : f32[B, 512, 1024]@cpu = py.call(%x, %w1, %n) {callee = "_prepacked.linear"}')
    out = planned(text)
    assert len(taken(out)) == 1 and taken(out)[0].endswith(" <- %0"), out
    opaque = planned(text.replace("_prepacked.linear", "_prepacked.unknown"))
    assert not taken(opaque)  # (a call it cannot see into: its result may be kept)


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
    assert not taken(planned(text))


def test_a_result_of_another_shape_is_not_taken() -> None:
    """The second block is narrower ([B, 512, 768]): the first block's result does not fit it."""
    text = TWO_BLOCKS.replace("%w1: f32[1024, 256]@cpu", "%w1: f32[1024, 256]@cpu, %w3: f32[768, 256]@cpu, %w4: f32[256, 768]@cpu")
    text = text.replace(f"%3 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='2', w='w1')}", f"%3 : f32[B, 512, 768]@cpu = {LINEAR.format(x='2', w='w3')}")
    text = text.replace("%4 : f32[B, 512, 1024]@cpu", "%4 : f32[B, 512, 768]@cpu").replace(LINEAR.format(x="4", w="w2"), LINEAR.format(x="4", w="w4"))
    assert not taken(planned(text))


def test_an_argument_is_never_taken() -> None:
    """x has the type of the second block's result, and dies early, but it is the caller's."""
    text = TWO_BLOCKS.replace("%x: f32[B, 512, 256]@cpu", "%x: f32[B, 512, 1024]@cpu").replace(
        "%w1: f32[1024, 256]@cpu", "%w1: f32[1024, 256]@cpu, %w0: f32[256, 1024]@cpu").replace(
        f"%0 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='x', w='w1')}",
        f"%a : f32[B, 512, 256]@cpu = {LINEAR.format(x='x', w='w0')}\n  %0 : f32[B, 512, 1024]@cpu = {LINEAR.format(x='a', w='w1')}")
    out = planned(text)
    assert len(taken(out)) == 1 and not taken(out)[0].endswith("%x"), out


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
            # each block's up-projection takes the dead one before it; the first has none and
            # writes into a kept buffer instead (when `keep`, the first block's is returned: the
            # second's goes into the kept buffer)
            assert text.count("out=") == (3 if keep else 4) and text.count("out=buffers.get(") == 1, text
            for batch in (2, 3):
                x = torch.randn(batch, 512, 256)
                with runtime.mode("strict"):
                    got = compiled(x)
                assert_close_to_eager(got, net(x))


# -- buffers kept between calls -----------------------------------------------------------------
TANH2 = """\
  %{a} : f32[B, 512, 1024]@cpu = {tanh0}
  %{r} : f32[B, 512, 1024]@cpu = {tanh1}"""


def _tanh2(x: str, a: str, r: str) -> str:
    """tanh(tanh(x)): two ops, so that `fuse` makes a kernel of them (a lone op stays torch's)."""
    return TANH2.format(a=a, r=r, tanh0=TANH.format(x=x), tanh1=TANH.format(x=a))


def _chain(ret: str = "%s", extra: str = "", later: str = "l1") -> str:
    """Two kernels of x (x is the caller's: nothing writes over it), k0 then k1, each output 2 MB
    an image, read by a linear to 512 KB an image; the linears' results summed."""
    return f"""\
func @f(%x: f32[B, 512, 1024]@cpu, %w: f32[256, 1024]@cpu) -> f32[B, 512, 256]@cpu {{
{_tanh2("x", "a0", "k0")}
  %l1 : f32[B, 512, 256]@cpu = {LINEAR.format(x="k0", w="w")}
{_tanh2("x", "a1", "k1")}
  %l2 : f32[B, 512, 256]@cpu = {LINEAR.format(x="k1", w="w")}
  %s : f32[B, 512, 256]@cpu = torch.call(%{later}, %l2) {{callee = "torch.add", aten = "aten::add.Tensor"}}
{extra}  func.return({ret})
}}
"""


def test_a_kernels_large_output_goes_into_a_kept_buffer() -> None:
    out = planned(_chain())
    assert """\
  %buffers : Any = py.take_buffers() {key = "f"}
  %0 : int = py.constant() {value = 0}
  %1 : int = torch.method(%x, %0) {method = "size", aten = "aten::size.int"}
  %2 : int = py.constant() {value = 512}
  %3 : int = py.constant() {value = 1024}
  %4 : tuple[int, int, int] = py.tuple(%1, %2, %3)
  %5 : f32[B, 512, 1024]@cpu = py.buffer(%buffers, %4) {slot = 0, dtype = "float32"}
  %k0 : f32[B, 512, 1024]@cpu = kernel.pointwise(%x, %5) {name = "tanh", inputs = 1, into = (0,)} {""" in out, out
    assert out.count("py.take_buffers") == 1 and out.count("py.buffer(") == 2
    # k1 runs after k0's output died: the same slot
    assert '= py.buffer(%buffers, %10) {slot = 0, dtype = "float32"}\n  %k1 :' in out, out
    assert out.endswith("  py.give_buffers(%buffers)\n  func.return(%s)\n}\n"), out


def test_outputs_alive_at_once_take_slots_of_their_own() -> None:
    """k0's output is read again after k1 ran: k1 needs another slot."""
    text = _chain(later="l3").replace("  %s :", f'  %l3 : f32[B, 512, 256]@cpu = {LINEAR.format(x="k0", w="w")}\n  %s :')
    out = planned(text)
    assert '{slot = 0, dtype = "float32"}\n  %k0 :' in out and '{slot = 1, dtype = "float32"}\n  %k1 :' in out, out


@pytest.mark.parametrize("case", ["returned", "returned in a tuple", "a view returned", "under MIN_BYTES", "python kept"])
def test_outputs_the_caller_can_see_or_small_ones_are_not_kept(case: str) -> None:
    text = _chain()
    if case == "returned":
        text = _chain(ret="%k1").replace("-> f32[B, 512, 256]@cpu {", "-> f32[B, 512, 1024]@cpu {")
    elif case == "returned in a tuple":
        text = _chain(ret="%t", extra="  %t : tuple[Tensor, Tensor] = py.tuple(%s, %k1)\n").replace(
            "-> f32[B, 512, 256]@cpu {", "-> tuple[f32[B, 512, 256]@cpu, Tensor] {")
    elif case == "a view returned":
        text = _chain(ret="%t", extra='  %v : f32[B, 1024, 512]@cpu = torch.method(%k1) {method = "mT", alias_of = 0, aten = "aten::mT"}\n'
                                      "  %t : tuple[Tensor, Tensor] = py.tuple(%s, %v)\n").replace(
            "-> f32[B, 512, 256]@cpu {", "-> tuple[f32[B, 512, 256]@cpu, Tensor] {")
    elif case == "under MIN_BYTES":  # (512 KB an image)
        text = text.replace("[B, 512, ", "[B, 128, ")
    else:
        text = text.replace("  func.return(%s)", '  py.opaque() {kind = "stmt", lines = ("pass",), reads = (), writes = (), reason = "kept"}\n  func.return(%l2)')
    out = planned(text)
    if case in ("under MIN_BYTES", "python kept"):
        assert "py.take_buffers" not in out, out
    else:  # (k0's output stays kept: only k1's is seen)
        assert out.count("py.buffer(") == 1 and "%k0 : f32[B, 512, 1024]@cpu = kernel.pointwise(%x, %" in out, out


def test_an_output_written_over_a_dying_input_is_not_given_a_buffer() -> None:
    """The kernel writes over the first linear's result, which dies into it (`reuse`)."""
    text = f"""\
func @f(%x: f32[B, 512, 256]@cpu, %w1: f32[1024, 256]@cpu, %w2: f32[256, 1024]@cpu) -> f32[B, 512, 256]@cpu {{
  %l1 : f32[B, 512, 1024]@cpu = {LINEAR.format(x="x", w="w1")}
{_tanh2("l1", "a", "k")}
  %l2 : f32[B, 512, 256]@cpu = {LINEAR.format(x="k", w="w2")}
  func.return(%l2)
}}
"""
    out = planned(text)
    assert "reuse = ((0, 0),)" in out and "into" not in out, out  # (the linear's result is kept: a GEMM into a buffer)


def test_a_product_written_as_an_operator_gives_a_new_tensor() -> None:
    """`k0 @ wt` (py.binary) reads k0 and returns a new tensor, as `linear` does: k0 is still
    kept (an op the planner did not know would pin everything it touches)."""
    text = _chain().replace("%w: f32[256, 1024]@cpu", "%w: f32[256, 1024]@cpu, %wt: f32[1024, 256]@cpu").replace(
        "%l1 : f32[B, 512, 256]@cpu = " + LINEAR.format(x="k0", w="w"), '%l1 : f32[B, 512, 256]@cpu = py.binary(%k0, %wt) {op = "@"}')
    assert 'py.binary(%k0, %wt) {op = "@"}' in text
    assert planned(text).count("py.buffer(") == 2


CONV_1X1 = """\
func @f(%x: f32[B, 16, 112, 112]@cpu, %w: f32[96, 16, {k}, {k}]@cpu, %w2: f32[16, 96, 1, 1]@cpu) -> {ret_type} {{
  %n : None = py.constant() {{value = None}}
  %s : tuple[int, int] = py.constant() {{value = (1, 1)}}
  %p : tuple[int, int] = py.constant() {{value = ({pad}, {pad})}}
  %g : int = py.constant() {{value = 1}}
  %y : f32[B, 96, 112, 112]@cpu = py.call(%x, %w, %n, %s, %p, %s, %g) {{callee = "_prepacked.conv2d"}}
  %z : f32[B, 16, 112, 112]@cpu = torch.call(%y, %w2) {{callee = "torch.nn.functional.conv2d", aten = "aten::conv2d"}}
  func.return({ret})
}}
"""


def test_a_large_1x1_conv_is_given_a_kept_buffer_as_nhwc_rows() -> None:
    """runtime/prepacked.conv2d may write it with a GEMM of the input's rows (`out`); the buffer is
    the result's NHWC rows, passed seen as NCHW (channels-last, as the conv's result is)."""
    out = planned(CONV_1X1.format(k=1, pad=0, ret="%z", ret_type="f32[B, 16, 112, 112]@cpu"))
    buffer = re.search(r"^  (%\w+) : f32\[B, 112, 112, 96\]@cpu = py\.buffer\(%buffers, %\w+\) \{slot = 0, dtype = \"float32\"\}\n"
                       r"  %\w+ : .+ = py\.constant\(\) \{value = \(0, 3, 1, 2\)\}\n"
                       r"  (%\w+) : f32\[B, 96, 112, 112\]@cpu = torch\.method\(\1, %\w+\) \{method = \"permute\"", out, re.M)
    assert buffer, out
    assert (f'%y : f32[B, 96, 112, 112]@cpu = py.call(%x, %w, %n, %s, %p, %s, %g, {buffer.group(2)}) '
            '{callee = "_prepacked.conv2d", mutates = (7,), alias_of = 7}') in out, out
    assert out.count("py.buffer(") == 1  # (z is returned)


@pytest.mark.parametrize("case", ["3x3", "padded", "returned", "under MIN_BYTES"])
def test_what_conv_gets_no_kept_buffer(case: str) -> None:
    text = CONV_1X1.format(k=3 if case == "3x3" else 1, pad=1 if case == "padded" else 0,
                           ret="%y" if case == "returned" else "%z",
                           ret_type="f32[B, 96, 112, 112]@cpu" if case == "returned" else "f32[B, 16, 112, 112]@cpu")
    if case == "under MIN_BYTES":
        text = text.replace("112, 112", "28, 28")
    out = planned(text)
    assert "py.buffer(" not in out and 'callee = "_prepacked.conv2d"}' in out, out

"""Loops over module lists as model code writes them: `enumerate(zip(self.ups, self.convs))`,
`for i in range(len(self.blocks)): self.blocks[i](x)`, lists grown by `append` in `__init__`,
and the transposed convolutions of a decoder. Compiled for an instance, each layer's call must be
one the inliner follows (so its batch norm and ReLU fuse); ahead of time, a list whose length the
source does not fix must never be taken as empty."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import runtime
from ir.core.graph import Loc
from ir.kernel.names import called_name
from source_module import case_directory, compiled_case, generated_jit, jit_source
from transpiler import script

BLOCKS = '''
import torch
from torch import nn


class ConvBnRelu(nn.Sequential):
    """A Sequential subclass with its own __init__ (a UNet's double conv)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def _stats(model: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ups = nn.ModuleList([nn.ConvTranspose2d(8, 4, 2, stride=2) for _ in range(2)])
        self.convs = nn.ModuleList([ConvBnRelu(8, 8) for _ in range(2)])
        self.squeeze = nn.Conv2d(4, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (up, conv) in enumerate(zip(self.ups, self.convs)):
            x = conv(self.squeeze(up(x))) + i
        return x


class Indexed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([ConvBnRelu(4, 4) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(len(self.blocks)):
            x = self.blocks[i](x)
        for k in range(2):  # (indexes no module list: stays a loop)
            x = x * (k + 2)
        return x


class Named(nn.Module):
    """Blocks added under numbered names, picked in a loop by a name built from the index."""

    def __init__(self, depth: int = 3) -> None:
        super().__init__()
        self.depth = depth
        for i in range(depth):
            self.add_module(f"block{i}", ConvBnRelu(4, 4))
            setattr(self, f"scale_{i:02d}", nn.Conv2d(4, 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.depth):
            x = getattr(self, f"block{i}")(x) + getattr(self, f"scale_{i:02d}")(x)
        return x


class Pyramid(nn.Module):
    """Features collected in a list, then zipped with a module list of heads."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList([nn.Conv2d(4, 4, 3, stride=2, padding=1) for _ in range(3)])
        self.heads = nn.ModuleList([nn.Conv2d(4, 2, 1) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        features: list[torch.Tensor] = []
        for stage in self.stages:
            x = torch.relu(stage(x))
            features.append(x)
        outs = []
        for head, f in zip(self.heads, features):
            outs.append(torch.sigmoid(head(f)))
        for i, (head, f) in enumerate(zip(self.heads, features[1:])):
            outs.append(head(f) * i)
        return outs


class Branches(nn.Module):
    """Two branches that each read the other's input: a module taking and returning a list."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(4, 4, 3, padding=1) for _ in range(2)])
        self.bns = nn.ModuleList([nn.BatchNorm2d(4) for _ in range(2)])

    def forward(self, x: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            out.append(torch.relu(bn(conv(x[i]))) + x[1 - i])
        return out


class ListChain(nn.Sequential):
    def forward(self, x):  # (unannotated: TorchScript's rule makes it a Tensor; a list is passed)
        for module in self:
            x = module(x)
        return x


class Streams(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage = ListChain(Branches(), Branches())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = self.stage([x, x * 2])
        return ys[0] + ys[1]


class MultiBranch(nn.Module):
    """hrnet's module: an int setting decides an early return; branches updated in a list."""

    def __init__(self, num_branches: int) -> None:
        super().__init__()
        self.num_branches = num_branches
        self.branches = nn.ModuleList([ConvBnRelu(4, 4) for _ in range(num_branches)])

    def forward(self, x: list[torch.Tensor]) -> list[torch.Tensor]:
        if self.num_branches == 1:
            return [self.branches[0](x[0])]
        for i, branch in enumerate(self.branches):
            x[i] = branch(x[i])
        return [x[0] + x[1], x[1] * 2.0]


class Streams2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.one = MultiBranch(1)
        self.two = MultiBranch(2)
        self.down = nn.ModuleList([ConvBnRelu(4, 4) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = self.two([self.one([x])[0], x * 2])
        y = ys[0]
        for i, _ in enumerate(self.down):
            if i > 0:
                y = ys[1] + self.down[i - 1].forward(y)
        return y


class Counted(nn.Module):
    """Int settings that forward changes (`+=`, a tuple assignment): never taken as values."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.a, self.b = 1, 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 1:
            x = x * 3.0
        if self.b == 2:
            x = x + 1.0
        self.a, self.b = self.b, self.a
        return torch.relu(x)


class Transposed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.up(x)))


class Routed(nn.Module):
    """Each layer takes the rows routed to it; a layer with none is skipped by `continue`."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x: torch.Tensor, route: torch.Tensor) -> torch.Tensor:
        out = x * 0
        total = 0
        for i, expert in enumerate(self.experts):
            rows = (route == i).nonzero().squeeze(-1)
            if rows.numel() == 0:
                continue
            total = total + rows.numel()
            out = out.index_add(0, rows, torch.tanh(expert(x[rows])))
        for scale in (2.0, 0.0, 3.0):
            if scale == 0.0:
                continue
            out = out * scale
        return out + total


class SizedUp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return self.up(x, output_size=like.shape[-2:]) + like
'''


def _compiled(tmp_path: Path, monkeypatch, name: str, *inputs: torch.Tensor) -> tuple[object, str]:
    """The model `name` of BLOCKS compiled for `inputs`, checked against eager in strict mode, and
    the text of its generated module."""
    with jit_source(tmp_path, monkeypatch, "blocks_case", BLOCKS) as module:
        model = module._stats(getattr(module, name)())
        compiled = script(model, example_inputs=inputs)
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(*inputs), model(*inputs))
            bigger = tuple(torch.randn(3, *t.shape[1:]) for t in inputs)
            torch.testing.assert_close(compiled(*bigger), model(*bigger))
        return compiled, generated_jit(tmp_path, name)


def test_items_of_enumerated_zipped_module_lists_are_inlined(tmp_path: Path, monkeypatch) -> None:
    _, text = _compiled(tmp_path, monkeypatch, "Decoder", torch.randn(2, 8, 4, 4))
    assert "F.conv_transpose2d(" in text  # the ups, lowered
    assert "_guards.item(convs, 0)(" not in text and "conv(" in text  # the blocks inlined: `conv` kernels
    assert text.count("_lib.conv_kernel(") + text.count("_lib.conv_2_kernel(") >= 2


def test_a_range_loop_indexing_a_module_list_is_unrolled(tmp_path: Path, monkeypatch) -> None:
    _, text = _compiled(tmp_path, monkeypatch, "Indexed", torch.randn(2, 4, 5, 5))
    assert re.search(r"_guards\.item\(\w+, 2\)", text)  # its third layer, read by position
    code = [line for line in text[text.index("def Indexed_forward"):].splitlines() if not line.strip().startswith("#")]
    assert not any("[i](" in line for line in code)  # no layer picked at run time
    assert "def blocks(" in text  # its kernels are named after the list the source calls from
    assert "for k in range(2)" in text  # a loop that indexes no module list stays a loop


def test_a_range_loop_picking_modules_by_built_names_is_unrolled(tmp_path: Path, monkeypatch) -> None:
    """`getattr(self, f"block{i}")` in `for i in range(self.depth)`: the loop unrolls on the
    depth, which an entry check pins, and each block is inlined (it was a diagnostic)."""
    compiled, text = _compiled(tmp_path, monkeypatch, "Named", torch.randn(2, 4, 5, 5))
    assert '"depth": 3' in text
    assert '_guards.attr(self, "block2")' in text and '_guards.attr(self, "scale_02")' in text
    code = [line for line in text[text.index("def Named_forward"):].splitlines() if not line.strip().startswith("#")]
    assert not any("getattr(" in line for line in code)  # no block picked at run time
    # A depth changed after compiling fails that check: the call is eager's, not the unrolled code.
    compiled.depth = 2
    x = torch.randn(2, 4, 5, 5)
    with torch.no_grad(), runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="depth: expected 3, got 2"):
        compiled(x)


def test_zip_of_a_module_list_and_a_list_of_features_unrolls(tmp_path: Path, monkeypatch) -> None:
    """`zip(self.heads, features)`, features a list the code appended to: unrolled over the
    heads, each item read while the list has one (here known, so no test is left)."""
    compiled, text = _compiled(tmp_path, monkeypatch, "Pyramid", torch.randn(2, 4, 16, 16))
    code = [line for line in text[text.index("def Pyramid_forward"):].splitlines() if not line.strip().startswith("#")]
    assert not any("zip(" in line or "len(" in line or line.strip().startswith("for ") for line in code)
    assert "def relu(" in text and "def sigmoid(" in text


ZIPPED = '''
import torch
from torch import Tensor

from transpiler import script


@script
def weighted(feats: list[Tensor], x: Tensor) -> Tensor:
    for scale, f in zip((1.0, 2.0, 3.0), feats):
        x = x + torch.tanh(f) * scale
    for i, (f, k) in enumerate(zip(feats, (3, 4, 5, 6))):
        if i == 0:
            continue
        x = x - f * k
    parts = [torch.sigmoid(f) * s for f, s in zip(feats, (1.5, 2.5))]
    for part in parts:
        x = x * part
    for f, scale in zip(feats, (0.5, 0.25)):
        feats.append(f * scale)  # (the list grows while zipped: Python's iterator sees it)
    return x
'''


def test_zip_of_a_tuple_and_a_list_of_any_length_ahead_of_time(tmp_path: Path) -> None:
    """A list shorter than the tuple ends the loop, as in Python; longer, the tuple does."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "zipped_lists", ZIPPED)
        code = [line for line in text[text.index("def weighted"):].splitlines() if not line.strip().startswith("#")]
        assert any("len(feats)" in line for line in code) and not any("zip(" in line for line in code)
        for n in (0, 1, 2, 3, 5):
            feats = [torch.randn(3, 4) for _ in range(n)]
            x = torch.randn(3, 4)
            with torch.no_grad():
                with runtime.mode("strict"):
                    got_feats = list(feats)
                    got = module.weighted(got_feats, x)
                with runtime.mode("off"):
                    want_feats = list(feats)
                    want = module.weighted(want_feats, x)
            torch.testing.assert_close(got, want)
            assert len(got_feats) == len(want_feats)
            torch.testing.assert_close(got_feats, want_feats)


def test_an_unannotated_parameter_passed_a_list_is_compiled_for_the_list(tmp_path: Path, monkeypatch) -> None:
    """hrnet's `SequentialList.forward(self, x)` called with a list of branches: compiled for the
    list the call passes (it ran as an eager module call, for a Tensor parameter), so the
    branches inline and fuse."""
    _, text = _compiled(tmp_path, monkeypatch, "Streams", torch.randn(2, 4, 6, 6))
    code = [line for line in text[text.index("def Streams_forward"):].splitlines() if not line.strip().startswith("#")]
    assert not any("_guards.attr(self, \"stage\")(" in line for line in code)
    assert "def bn_relu(" in text


def test_int_settings_and_item_arithmetic_are_decided_when_compiling(tmp_path: Path, monkeypatch) -> None:
    """`if self.num_branches == 1:` is decided per instance (instances with other int settings
    are variants of their own), so the list the branches update stays one the lists pass follows
    and every branch fuses; `self.down[i - 1].forward(y)` in an unrolled loop is that layer,
    inlined. A setting changed after compiling fails the entry check that pins it."""
    compiled, text = _compiled(tmp_path, monkeypatch, "Streams2", torch.randn(2, 4, 5, 5))
    code = [line for line in text[text.index("def Streams2_forward"):].splitlines() if not line.strip().startswith("#")]
    assert not any(".append(" in line or "] = " in line or "[i - 1]" in line for line in code)
    assert "def down(" in text and '"num_branches": 1' in text and '"num_branches": 2' in text
    compiled.one.num_branches = 2
    with torch.no_grad(), runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="num_branches"):
        compiled(torch.randn(2, 4, 5, 5))


def test_int_settings_forward_changes_are_read_when_the_call_runs(tmp_path: Path, monkeypatch) -> None:
    """`self.calls += 1` then `if self.calls > 1:`: taken as its value when compiling, the second
    call returned the first call's result (no error, in strict mode)."""
    with jit_source(tmp_path, monkeypatch, "counted_case", BLOCKS) as module:
        model, eager = module.Counted(), module.Counted()
        compiled = script(model, example_inputs=(torch.randn(2, 3),))
        for _ in range(3):
            x = torch.randn(2, 3)
            with torch.no_grad(), runtime.mode("strict"):
                torch.testing.assert_close(compiled(x), eager(x))


def test_transposed_convolutions_lower_and_fuse_with_what_follows(tmp_path: Path, monkeypatch) -> None:
    _, text = _compiled(tmp_path, monkeypatch, "Transposed", torch.randn(2, 4, 5, 5))
    assert "F.conv_transpose2d(" in text and "_guards.attr(self, \"up\")(" not in text
    assert "def bn_relu(" in text


def test_a_transposed_convolution_given_an_output_size_keeps_its_call(tmp_path: Path, monkeypatch) -> None:
    _, text = _compiled(tmp_path, monkeypatch, "SizedUp", torch.randn(2, 4, 4, 4), torch.randn(2, 4, 8, 8))
    assert "output_size=" in text


def test_a_call_of_a_list_item_is_named_after_the_list() -> None:
    lines = {"m.py": ["x = self.blocks[i](x)", "y = layers[0](x, h)"]}
    assert called_name(Loc("m.py", 1, 4, 1, 21), lines) == "blocks"
    assert called_name(Loc("m.py", 2, 4, 2, 19), lines) == "layers"
    assert called_name(Loc("m.py", 1, 4, 0, 0), lines) == "blocks"  # (a location without its end)
    lines = {"m.py": ["y = down.forward(y)"]}
    assert called_name(Loc("m.py", 1, 4, 1, 19), lines) == "down"  # (the module, not its method)
    assert called_name(Loc("m.py", 1, 4, 0, 0), lines) == "down"


GROWN = '''
import torch
from torch import Tensor, nn

from transpiler import script


@script
class Stack(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n):
            self.layers.append(nn.Linear(4, 4))

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x
'''


def _strict_matches_eager(model: torch.nn.Module, *inputs: torch.Tensor) -> None:
    """The checked-in module's result in strict mode (no fallback) is eager's."""
    with torch.no_grad():
        with runtime.mode("strict"):
            got = model(*inputs)
        with runtime.mode("off"):
            want = model(*inputs)
    torch.testing.assert_close(got, want)


def test_a_module_list_grown_in_init_is_not_taken_as_empty(tmp_path: Path) -> None:
    """`nn.ModuleList()` then `append` in a loop: ahead of time its length is not known. It was
    taken as the empty list's: a loop over it compiled to nothing (`return x`), silently."""
    with case_directory(tmp_path):
        grown_stack, text = compiled_case(tmp_path, "grown_stack", GROWN)
        assert "for layer in " in text
        _strict_matches_eager(grown_stack.Stack(3).eval(), torch.randn(2, 4))


@pytest.mark.parametrize("loop, step", [
    ("for i, layer in enumerate(self.layers):", "x = torch.tanh(layer(x)) * (i + 1)"),
    ("for layer, gate in zip(self.layers, self.gates):", "x = torch.tanh(layer(x)) * torch.sigmoid(gate(x))"),
    ("for i, (layer, gate) in enumerate(zip(self.layers, self.gates)):", "x = layer(x) * gate(x) + i"),
])
def test_enumerate_and_zip_of_grown_module_lists_ahead_of_time(tmp_path: Path, loop: str, step: str) -> None:
    """Over lists whose length the source does not fix, the generic code walks them as Python
    does (`for item in enumerate(zip(...))`): the results are eager's for any length."""
    source = GROWN.replace("            self.layers.append(nn.Linear(4, 4))",
                           "            self.layers.append(nn.Linear(4, 4))\n            self.gates.append(nn.Linear(4, 4))")
    source = source.replace("        self.layers = nn.ModuleList()", "        self.layers = nn.ModuleList()\n        self.gates = nn.ModuleList()")
    source = source.replace("        for layer in self.layers:\n            x = torch.tanh(layer(x))", f"        {loop}\n            {step}")
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, f"grown_loop_{abs(hash(loop)) % 1000}", source)
        assert loop.split(" in ")[1].rstrip(":").split("(")[0] in text  # enumerate / zip, as written
        for n in (1, 3):
            _strict_matches_eager(module.Stack(n).eval(), torch.randn(2, 4))


def test_an_unrolled_loop_may_continue(tmp_path: Path, monkeypatch) -> None:
    with jit_source(tmp_path, monkeypatch, "routed_case", BLOCKS) as module:
        model = module.Routed().eval()
        x = torch.randn(6, 4)
        compiled = script(model, example_inputs=(x, torch.tensor([0, 2, 0, 2, 2, 0])))
        for route in ([0, 2, 0, 2, 2, 0], [1, 1, 1, 1, 1, 1], [0, 1, 2, 0, 1, 2]):  # (experts 1, then 0 and 2, skipped)
            with torch.no_grad(), runtime.mode("strict"):
                torch.testing.assert_close(compiled(x, torch.tensor(route)), model(x, torch.tensor(route)))


"""Constructs of model libraries written for TorchScript (issue 48), each in a model of our own:
a private flag annotated `torch.jit.Final` on a subclass of a torch layer, set in `__init__` from
a call; a torch function re-exported by a helper module of the package (defined conditionally,
imported by relative import); an unannotated empty list that code appends tensors to; loops over
children, ModuleDicts and Sequential subclasses; type aliases, Enum and Union annotations,
`torch.jit.annotate`; layers of a Sequential called by name, methods of submodules, `isinstance`
of a submodule; dict displays and a dict attribute used as a cache; eager-only code the compiled
code never reaches; a subclass of a torch layer ahead of time, and the Union settings it reads;
Union parameters of a compiled entry."""

from __future__ import annotations

import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import runtime
from runtime.errors import TorchscribeError
from runtime.stats import reset_fallback_counts
from source_module import imported_source
from transpiler import script
from transpiler.diagnostics import CompileError

def assert_compiled_matches_eager(model: nn.Module, *inputs: torch.Tensor) -> Callable[..., Any]:
    """`model` compiled for `inputs` (script(model, example_inputs=...)) and run on them in strict
    mode, where a call the compiled code refuses raises, under no_grad: its results are eager's.
    Returns the compiled model for a test's further calls."""
    compiled = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(compiled(*inputs), model(*inputs))
    return compiled


FLAGGED_NORM = '''
import torch
import torch.nn.functional as F
from torch import nn


def fast_path_enabled() -> bool:
    return False


class FlaggedNorm(nn.LayerNorm):
    _fast: torch.jit.Final[bool]

    def __init__(self, channels: int) -> None:
        super().__init__(channels, eps=1e-6)
        self._fast = fast_path_enabled()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._fast:
            return x * 0
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = FlaggedNorm(16)
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(x)) + x
'''


def test_a_private_flag_set_from_a_call_is_read_off_the_instance(tmp_path: Path) -> None:
    with imported_source(tmp_path, "flagged_norm", FLAGGED_NORM) as module:
        model = module.Block().eval()
        x = torch.randn(3, 16)
        compiled = assert_compiled_matches_eager(model, x)
        with torch.no_grad(), runtime.mode("strict"):
            # the compiled code took the flag's branch for False: a flipped flag is not that code
            model.norm._fast = True
            with pytest.raises(TorchscribeError, match="_fast"):
                compiled(x)


def test_a_final_annotation_of_torch_jit_types_the_attribute_ahead_of_time(tmp_path: Path) -> None:
    from source_module import case_directory, compiled_case

    source = '''
import torch
from torch import nn

from transpiler import script


def fast_path_enabled() -> bool:
    return False


@script
class Scale(nn.Module):
    _fast: torch.jit.Final[bool]

    def __init__(self) -> None:
        super().__init__()
        self._fast = fast_path_enabled()
        self.weight = nn.Parameter(torch.randn(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._fast:
            return x
        return x * self.weight
'''
    with case_directory(tmp_path) as root:
        module, text = compiled_case(root, "final_flag_aot", source)
        assert "def Scale_forward(self, x: Tensor) -> Tensor:" in text
        model = module.Scale().eval()
        x = torch.randn(2, 16)
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(model(x), x * model.weight)


def test_a_torch_function_re_exported_by_a_package_helper(tmp_path: Path) -> None:
    package = tmp_path / "reexports"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "checks.py").write_text(textwrap.dedent('''
        try:
            from torch import _assert
        except ImportError:
            def _assert(condition: bool, message: str) -> None:
                assert condition, message
    '''))
    (package / "model.py").write_text(textwrap.dedent('''
        import torch
        from torch import nn

        from .checks import _assert


        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                _assert(x.shape[-1] == 8, "expected 8 features")
                return self.fc(x).relu()
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        from reexports import model as module  # type: ignore[import-not-found]

        assert_compiled_matches_eager(module.Net().eval(), torch.randn(5, 8))
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("reexports", "reexports.checks", "reexports.model"):
            sys.modules.pop(name, None)


def test_an_unannotated_empty_list_holds_tensors(tmp_path: Path) -> None:
    from source_module import case_directory, compiled_case

    source = '''
import torch
from torch import Tensor

from transpiler import script


@script
def stack_parts(x: Tensor, first: bool) -> Tensor:
    parts = []
    if first:
        parts.append(x[:1])
    parts.append(x * 2)
    return torch.cat(parts + [x], dim=0)
'''
    with case_directory(tmp_path) as root:
        module, _ = compiled_case(root, "empty_list_parts", source)
        x = torch.randn(3, 4)
        with torch.no_grad(), runtime.mode("strict"):
            for first in (True, False):
                assert torch.equal(module.stack_parts(x, first), module.stack_parts.__wrapped__(x, first))


def test_appending_a_number_to_an_unannotated_empty_list_says_to_annotate_it(tmp_path: Path, capsys) -> None:
    from transpiler.cli import main

    (tmp_path / "counts.py").write_text(textwrap.dedent('''
        from torch import Tensor

        from transpiler import script


        @script
        def count(x: Tensor) -> int:
            seen = []
            seen.append(3)
            return len(seen)
    '''))
    assert main([str(tmp_path / "counts.py")]) != 0
    err = capsys.readouterr().err
    assert "error: appending a int to a list of Tensor" in err
    assert "an unannotated `[]` is a list of tensors, as in TorchScript: annotate it, e.g. `xs: list[int] = []`" in err


STAGES = '''
import torch
from torch import nn
from torch.jit.annotations import List


class Stage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.skipped = None
        self.act = nn.ReLU()
        self.again = self.act  # registered twice: children() yields it once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.children():
            x = block(x) * 2
        return x


class Named(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Tanh()

    def cat_all(self, xs: List[torch.Tensor]) -> torch.Tensor:
        return torch.cat(xs, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: List[torch.Tensor] = []
        for name, block in self.named_children():
            if name != "b":
                x = block(x)
            outs.append(x)
        return self.cat_all(outs)
'''


def test_loops_over_children_and_named_children_unroll(tmp_path: Path) -> None:
    with imported_source(tmp_path, "stages", STAGES) as module:
        for model in (module.Stage().eval(), module.Named().eval()):
            assert_compiled_matches_eager(model, torch.randn(3, 8))


MIXED = '''
import torch
from torch import nn


class Mixed(nn.ModuleDict):
    """Convolutions over channel groups, registered under "0", "1" (a ModuleDict)."""

    def __init__(self) -> None:
        super().__init__()
        for i, k in enumerate((1, 3)):
            self.add_module(str(i), nn.Conv2d(4, 4, k, padding=k // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = torch.split(x, [4, 4], 1)
        out = [conv(parts[i]) for i, conv in enumerate(self.values())]
        return torch.cat(out, 1)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mixed = Mixed()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mixed(x).relu()
'''


def test_submodules_named_by_numbers_in_a_module_dict(tmp_path: Path) -> None:
    """The entry checks reach `mixed.0` as the ModuleDict's entry "0" (an item of a Sequential
    would be the 0th module)."""
    with imported_source(tmp_path, "mixed_convs", MIXED) as module:
        assert_compiled_matches_eager(module.Net().eval(), torch.randn(2, 8, 6, 6))


SPLITS = '''
import torch
from torch import nn


class Split(nn.Module):
    """Res2Net-style: each split goes through its own conv and norm, added to the previous one."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(4, 4, 3, padding=1) for _ in range(3)])
        self.bns = nn.ModuleList([nn.BatchNorm2d(4) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spx = torch.split(x, 4, 1)
        outs = []
        sp = spx[0]
        for i, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            sp = spx[i] if i == 0 else sp + spx[i]
            sp = bn(conv(sp)).relu()
            outs.append(sp)
        return torch.cat(outs, 1)
'''


def test_enumerate_of_zip_of_module_lists_unrolls(tmp_path: Path) -> None:
    with imported_source(tmp_path, "splits", SPLITS) as module:
        assert_compiled_matches_eager(module.Split().eval(), torch.randn(2, 12, 5, 5))


def test_zip_of_a_list_of_unknown_length_is_a_diagnostic(tmp_path: Path, capsys) -> None:
    from transpiler.cli import main

    (tmp_path / "zips.py").write_text(textwrap.dedent('''
        import torch
        from torch import Tensor

        from transpiler import script


        @script
        def pairs(xs: list[Tensor], ys: list[Tensor]) -> Tensor:
            total = xs[0] * 0
            for i, (a, b) in enumerate(zip(xs, ys)):
                total = total + a * b * i
            return total
    '''))
    assert main([str(tmp_path / "zips.py")]) != 0
    assert "zip() of a value whose length is not known when compiling is not supported" in capsys.readouterr().err


FORMATS = '''
from enum import Enum, IntEnum

import torch
from torch import nn


class Format(str, Enum):
    NCHW = "NCHW"
    NHWC = "NHWC"


class Axis(IntEnum):
    CHANNELS = 1


def reorder(x: torch.Tensor, fmt: Format, axis: Axis) -> torch.Tensor:
    """(annotated with the Enum classes: the str and int their members are)"""
    if fmt == Format.NHWC:
        x = x.permute(0, 2, 3, 1)
    return x.sum(axis)


class Embed(nn.Module):
    def __init__(self, fmt: Format) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 8, 2, stride=2)
        self.fmt = fmt

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x)
        y = reorder(x, self.fmt, Axis.CHANNELS)
        if self.fmt != Format.NCHW:
            x = x.permute(0, 2, 3, 1)
        return x.sum(Axis.CHANNELS) + y
'''


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_members_of_str_and_int_enums_are_the_values_they_equal(tmp_path: Path, fmt: str) -> None:
    with imported_source(tmp_path, f"formats_{fmt.lower()}", FORMATS) as module:
        assert_compiled_matches_eager(module.Embed(module.Format(fmt)).eval(), torch.randn(2, 3, 8, 8))


WINDOWS = '''
from typing import Optional, Tuple

import torch
from torch import nn

Grid = Tuple[int, int]
MaybeTensor = Optional[torch.Tensor]


class Windows(nn.Module):
    """Attention inside windows of a grid whose size the caller passes (an alias of a tuple,
    spread into a reshape's sizes)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor, size: Grid, bias: MaybeTensor = None) -> torch.Tensor:
        h, w = size
        q, k, v = self.qkv(x).reshape(x.shape[0], h * w, 3, 8).unbind(2)
        attn = q @ k.transpose(-2, -1)
        if bias is not None:
            attn = attn + bias
        return (attn.softmax(-1) @ v).reshape(x.shape[0], *size, 8)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.windows = Windows()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.windows(x, (2, 3))
'''


def test_a_module_level_type_alias_in_annotations(tmp_path: Path) -> None:
    with imported_source(tmp_path, "grid_alias", WINDOWS) as module:
        assert_compiled_matches_eager(module.Net().eval(), torch.randn(2, 6, 8))


BRANCHES = '''
from typing import List

import torch
from torch import nn


class Branches(nn.Module):
    """Two branches whose class tokens are collected in a list made by torch.jit.annotate."""

    def __init__(self) -> None:
        super().__init__()
        self.projs = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = torch.jit.annotate(List[torch.Tensor], [])
        for i, proj in enumerate(self.projs):
            tokens.append(proj(x[:, i:i + 1]))
        scale = torch.jit.annotate(float, 0.5)
        return torch.cat(tokens, 1) * scale
'''


def test_torch_jit_annotate_types_its_value(tmp_path: Path) -> None:
    with imported_source(tmp_path, "branch_tokens", BRANCHES) as module:
        assert_compiled_matches_eager(module.Branches().eval(), torch.randn(2, 3, 8))


CHAIN = '''
import torch
from torch import nn


class Chain(nn.Sequential):
    """A Sequential with a forward of its own that walks its layers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = layer(x) + x
        return x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.chain = Chain(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.chain(x)
'''


def test_a_loop_over_a_sequential_subclass_in_its_own_forward(tmp_path: Path) -> None:
    with imported_source(tmp_path, "chained", CHAIN) as module:
        for model in (module.Net().eval(), module.Chain(nn.Linear(8, 8), nn.Tanh()).eval()):
            assert_compiled_matches_eager(model, torch.randn(4, 8))


HEAD = '''
from collections import OrderedDict

import torch
from torch import nn


class Classifier(nn.Module):
    """A head built as a Sequential of named layers, whose parts the forward calls by name."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Sequential(OrderedDict([
            ("pool", nn.AdaptiveAvgPool2d(1)),
            ("flatten", nn.Flatten(1)),
            ("norm", nn.LayerNorm(6)),
            ("fc", nn.Linear(6, 3)),
        ]))

    def forward(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.head.flatten(self.head.pool(x))
        x = self.head.norm(x) * self.head.fc.weight.shape[0]
        return x if pre_logits else self.head.fc(x)
'''


def test_layers_of_a_sequential_called_by_name(tmp_path: Path) -> None:
    with imported_source(tmp_path, "named_head", HEAD) as module:
        assert_compiled_matches_eager(module.Classifier().eval(), torch.randn(2, 6, 5, 5))


RELATIVE = '''
from typing import Optional

import torch
from torch import nn


class Bias(nn.Module):
    """A learned bias table the attention asks for through a method, not through forward."""

    def __init__(self, tokens: int) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(2, tokens, tokens))

    def get_bias(self, scale: float = 1.0) -> torch.Tensor:
        return self.table.unsqueeze(0) * scale

    def forward(self, attn: torch.Tensor) -> torch.Tensor:
        return attn + self.get_bias()


class Attention(nn.Module):
    def __init__(self, with_bias: bool) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.rel = Bias(5) if with_bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).reshape(x.shape[0], 5, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
        bias: Optional[torch.Tensor] = None
        if self.rel is not None:
            bias = self.rel.get_bias(0.5)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
'''


@pytest.mark.parametrize("with_bias", [True, False])
def test_a_method_of_a_submodule_other_than_forward(tmp_path: Path, with_bias: bool) -> None:
    with imported_source(tmp_path, f"relative_bias_{with_bias}", RELATIVE) as module:
        model = module.Attention(with_bias).eval()
        x = torch.randn(3, 5, 8)
        compiled = assert_compiled_matches_eager(model, x)
        with torch.no_grad(), runtime.mode("strict"):
            if with_bias:  # the compiled code is for a Bias there: another class is not that code
                model.rel = nn.Identity()
                with pytest.raises(TorchscribeError, match="rel"):
                    compiled(x)


PATCHES = '''
import torch
from torch import nn


class Patches(nn.Module):
    """Pixels of each 4x4 patch as tokens, through torch layers the front end has no entry for
    (nn.Unfold; nn.PixelUnshuffle, kept as a module call): their forwards say they return a Tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.unfold = nn.Unfold(kernel_size=4, stride=4)
        self.unshuffle = nn.PixelUnshuffle(2)
        self.proj = nn.Linear(3, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        tokens = self.unfold(x).transpose(1, 2).reshape(b * (h // 4) * (w // 4), c, 16)
        folded = self.unshuffle(x).flatten(2).transpose(1, 2)
        return self.proj(tokens.transpose(1, 2)).relu().sum(1) + folded.sum()
'''


def test_torch_layers_without_an_entry_are_typed_by_their_forward(tmp_path: Path) -> None:
    with imported_source(tmp_path, "unfold_patches", PATCHES) as module:
        assert_compiled_matches_eager(module.Patches().eval(), torch.randn(2, 3, 8, 12))


CHECKPOINTED = '''
import torch
from torch import nn


class Layer(nn.Module):
    """Eager-only code where compiled code never goes: a helper method the forward calls only when
    a flag is set, and a branch under `not torch.jit.is_scripting()`."""

    def __init__(self, checkpointing: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.checkpointing = checkpointing

    def checkpointed(self, x: torch.Tensor) -> torch.Tensor:
        def closure(t):
            return self.fc(t)

        try:
            return torch.utils.checkpoint.checkpoint(closure, x, use_reentrant=False)
        except RuntimeError:
            return closure(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpointing:
            x = self.checkpointed(x)
        else:
            x = self.fc(x)
        if not torch.jit.is_scripting():
            log = {"mean": lambda t: t.mean()}
            self.seen = log["mean"](x)
        return x.relu()
'''


def test_the_check_reports_only_code_that_is_compiled(tmp_path: Path) -> None:
    """script(instance): what a method nothing compiled calls holds, or a branch decided when
    compiling, is no error; in a method the compiled code does call, it is."""
    with imported_source(tmp_path, "checkpointed_layer", CHECKPOINTED) as module:
        model = module.Layer(checkpointing=False).eval()
        x = torch.randn(2, 8)
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model.fc(x).relu())
        with pytest.raises(CompileError) as raised:
            script(module.Layer(checkpointing=True).eval(), example_inputs=(x,))
        message = str(raised.value)
        assert "nested function definitions are not supported" in message
        assert "try statements are not supported" in message
        assert "lambda" not in message


PARTITIONS = '''
from typing import List

import torch
from torch import nn


def partition(x: torch.Tensor, window: List[int]) -> torch.Tensor:
    b, h, w, c = x.shape
    x = x.view(b, h // window[0], window[0], w // window[1], window[1], c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window[0] * window[1], c)


class Windows(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.window = (2, 3)  # a tuple, for a parameter annotated List[int]
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(partition(x, self.window))
'''


def test_a_tuple_passed_for_a_list_parameter(tmp_path: Path) -> None:
    with imported_source(tmp_path, "window_tuple", PARTITIONS) as module:
        assert_compiled_matches_eager(module.Windows().eval(), torch.randn(2, 4, 6, 4))


TRANSITIONS = '''
import torch
from torch import nn


class Transition(nn.Module):
    """Branches that either change their input (a conv) or pass an earlier one on (nn.Identity);
    one called through its forward method."""

    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleList([
            nn.Identity(), nn.Conv2d(4, 4, 3, padding=1), nn.Identity(), nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ys = [x, x * 2, x * 3, x * 4]
        out = [b(ys[-1]) if not isinstance(b, nn.Identity) else ys[i] for i, b in enumerate(self.branches)]
        return torch.cat(out, 1) + self.branches[3].forward(x).sum()
'''


def test_isinstance_of_a_submodule_is_decided_under_an_entry_check(tmp_path: Path) -> None:
    with imported_source(tmp_path, "transitions", TRANSITIONS) as module:
        model = module.Transition().eval()
        x = torch.randn(2, 4, 5, 5)
        compiled = assert_compiled_matches_eager(model, x)
        with torch.no_grad(), runtime.mode("strict"):
            model.branches[0] = nn.Conv2d(4, 4, 1)  # the Identity the code decided on is gone
            with pytest.raises(TorchscribeError, match="branches"):
                compiled(x)


SCALES = '''
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import nn


def resize(x: torch.Tensor, size: Tuple[int, int]) -> torch.Tensor:
    h, w = x.shape[-2:]
    if h != size[0] or w != size[1]:
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    return x


class MultiScale(nn.Module):
    """Branches that each see the image at a size of their own, from a list of (h, w) tuples."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes = [(8, 8), (6, 4)]
        self.embeds = nn.ModuleList([nn.Conv2d(3, 4, 2, stride=2) for _ in self.sizes])

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        outs = []
        for i, embed in enumerate(self.embeds):
            outs.append(embed(resize(x, self.sizes[i])).flatten(1))
        return outs
'''


def test_a_list_of_tuples_attribute_is_pinned_and_read_as_constants(tmp_path: Path) -> None:
    with imported_source(tmp_path, "multi_scale", SCALES) as module:
        model = module.MultiScale().eval()
        x = torch.randn(2, 3, 8, 8)
        compiled = assert_compiled_matches_eager(model, x)  # (a tuple of results, each compared)
        with torch.no_grad(), runtime.mode("strict"):
            model.sizes[1] = (4, 4)  # the code was compiled for the sizes the list held
            with pytest.raises(TorchscribeError, match="sizes"):
                compiled(x)


FEATURES = '''
from typing import Dict, Tuple

import torch
from torch import nn


class Features(nn.Module):
    """Intermediate features returned by name in a dict: a display, items set under a test of
    which the caller asked for, an item read back."""

    def __init__(self, wanted: Tuple[str, ...]) -> None:
        super().__init__()
        self.stage1 = nn.Linear(8, 8)
        self.stage2 = nn.Linear(8, 8)
        self.wanted = wanted

    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        x1 = self.stage1(x)
        x2 = self.stage2(x1).relu()
        feats = {"x1": x1, "x0": x}
        if "x2" in self.wanted:
            feats["x2"] = x2
        feats["both"] = feats["x1"] + x2 * len(feats)
        return feats
'''


@pytest.mark.parametrize("wanted", [("x1",), ("x1", "x2")])
def test_dict_displays_read_set_and_returned(tmp_path: Path, wanted: tuple) -> None:
    with imported_source(tmp_path, f"features_{len(wanted)}", FEATURES) as module:
        model = module.Features(wanted).eval()
        x = torch.randn(3, 8)
        compiled = assert_compiled_matches_eager(model, x)  # (each item of the dicts compared)
        with torch.no_grad(), runtime.mode("strict"):
            assert list(compiled(x)) == list(model(x))  # (in the order eager's dict has)


MEMO = '''
from typing import Dict

import torch
from torch import nn


class Biased(nn.Module):
    """Attention biases gathered from a table once per device and kept in a dict attribute, as
    eager code caches them outside training."""

    cache: Dict[str, torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(2, 9))
        self.register_buffer("idx", torch.randint(0, 9, (9, 9)), persistent=False)
        self.cache = {}

    def train(self, mode: bool = True) -> "Biased":
        super().train(mode)
        self.cache = {}
        return self

    def biases(self, device: torch.device) -> torch.Tensor:
        if torch.jit.is_tracing() or self.training:
            return self.table[:, self.idx]
        key = str(device)
        if key not in self.cache:
            self.cache[key] = self.table[:, self.idx]
        return self.cache[key]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 0.5 + self.biases(x.device)).softmax(-1)
'''


def test_a_dict_attribute_used_as_a_cache_behaves_as_in_eager(tmp_path: Path) -> None:
    """The compiled code reads and fills the dict as eager does: it fills the cache on its first
    call, and a cached value (stale here, its table changed since) is what both return."""
    with imported_source(tmp_path, "memo_biases", MEMO) as module:
        model = module.Biased().eval()
        x = torch.randn(3, 2, 9, 9)
        compiled = script(model, example_inputs=(x,))
        model.cache.clear()
        with torch.no_grad(), runtime.mode("strict"):
            first = compiled(x)
            assert list(model.cache) == ["cpu"]
            torch.testing.assert_close(model.cache["cpu"], model.table[:, model.idx])
            torch.testing.assert_close(first, model(x))
            model.table.add_(1.0)  # the cache is stale now, in eager and in compiled code alike
            torch.testing.assert_close(compiled(x), model(x))



def _generated_text(cache: Path) -> str:
    [path] = (cache / "jit").glob("*.py")
    return path.read_text()


def test_a_cached_tensor_has_the_type_of_what_the_code_puts_in_the_dict(tmp_path: Path, monkeypatch) -> None:
    """A read of the cache is of the type of the tensors the code puts in it (f32[2, 9, 9] on
    the CPU), so that what follows the read fuses: the entry check pins every value the dict
    holds to that type, and a call that finds another there is refused, naming the entry."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "typed_cache", MEMO) as module:
        model = module.Biased().eval()
        x = torch.randn(3, 2, 9, 9)
        compiled = assert_compiled_matches_eager(model, x)
        text = _generated_text(tmp_path / "cache")
        assert '"cache": _guards.TensorValues(torch.float32, "cpu", (2, 9, 9))' in text
        assert "softmax" in text.split("KERNELS_CPP", 2)[1]  # (the read's softmax runs in a kernel)
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model(x))  # (the cache filled now)
            model.cache["cpu"] = model.cache["cpu"].double()
            with pytest.raises(TorchscribeError, match=r"self\.cache\['cpu'\]\": expected dtype float32"):
                compiled(x)
            model.cache["cpu"] = torch.zeros(2, 9)
            with pytest.raises(TorchscribeError, match=r"self\.cache\['cpu'\]"):
                compiled(x)


MEMORY = '''
from typing import Dict

import torch
from torch import nn


class Smoothed(nn.Module):
    """Mixes each input with the last one, kept by name in a dict: the read comes before the
    write in the code, and the dict starts empty."""

    memory: Dict[str, torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.memory = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if "last" in self.memory:
            out = torch.tanh(x + 0.5 * self.memory["last"])
        else:
            out = torch.tanh(x)
        self.memory["last"] = 0.9 * x
        return out * 2.0
'''


def test_a_dict_read_before_it_is_written_is_typed_by_the_write(tmp_path: Path, monkeypatch) -> None:
    """The read comes first in the code, the write of an f32[B, 5] value after it: the read is an
    f32 tensor of 5 columns whatever the batch (the dict may hold an earlier call's tensor), and
    three calls give eager's results. (A write computed from the read itself would leave the
    read untyped: its type is found from the writes, which then depend on it.)"""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "memory_dict", MEMORY) as module:
        model, twin = module.Smoothed(), module.Smoothed()
        x = torch.randn(4, 5)
        compiled = script(model, example_inputs=(x,))
        assert '_guards.TensorValues(torch.float32, "cpu", (None, 5))' in _generated_text(tmp_path / "cache")
        with torch.no_grad(), runtime.mode("strict"):
            for _ in range(3):
                torch.testing.assert_close(compiled(x), twin(x))
            torch.testing.assert_close(model.memory["last"], twin.memory["last"])


LEAKY = '''
from typing import Dict

import torch
from torch import nn


def overwrite(store: Dict[str, torch.Tensor], x: torch.Tensor) -> None:
    store["x"] = (x > 0).long()


class Leaky(nn.Module):
    """Its dict is passed to a function, which puts an int64 tensor in it."""

    store: Dict[str, torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.store = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.store["x"] = x * 2.0
        overwrite(self.store, x)
        return self.store["x"] + 1
'''


def test_a_dict_the_code_passes_on_is_not_typed(tmp_path: Path, monkeypatch) -> None:
    """A dict that leaves the reads, writes and key tests (here to a function that puts an
    int64 tensor in it) may hold anything after: no entry check on it, and the results are
    eager's."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "leaky_dict", LEAKY) as module:
        model = module.Leaky()
        x = torch.randn(3, 4)
        compiled = assert_compiled_matches_eager(model, x)
        assert "TensorValues" not in _generated_text(tmp_path / "cache")
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), (x > 0).long() + 1)


DENSE = '''
from typing import List, Union

import torch
from torch import nn


class Layer(nn.Module):
    """Takes one tensor or the list of all earlier features (a Union, as TorchScript allows)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 1)

    def forward(self, x: Union[torch.Tensor, List[torch.Tensor]]) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            features = [x]
        else:
            features = x
        return self.conv(torch.cat(features, 1)).relu()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Layer(4)
        self.second = Layer(8)

    def pool(self, x: Union[torch.Tensor, List[torch.Tensor]], scale: Union[int, float] = 2,
             shift: Union[int, float, None] = None):
        if isinstance(x, list):
            x = torch.cat(x, 1)
        if shift is not None:
            x = x + shift
        return x.mean((2, 3)) * scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.first(x)
        z = self.second([x, y])
        return self.pool([x, y, z]) + self.pool(z, 0.5, shift=1).sum(1, keepdim=True)
'''


def test_union_parameters_compile_for_the_member_each_call_passes(tmp_path: Path) -> None:
    with imported_source(tmp_path, "dense_union", DENSE) as module:
        assert_compiled_matches_eager(module.Block().eval(), torch.randn(2, 4, 5, 5))


def test_permissive_mode_compiles_union_parameters_per_member_too(tmp_path: Path, monkeypatch) -> None:
    """Permissive mode reads the Union annotation as strict mode does, rather than as a Python
    value of no type: `isinstance(x, torch.Tensor)` is decided for the member each call passes,
    so nothing is kept as Python and the layers' convolutions and cats are compiled."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "dense_union_permissive", DENSE) as module:
        model, x = module.Block().eval(), torch.randn(2, 4, 5, 5)
        compiled = script(model, example_inputs=(x,), permissive=True)
        text = _generated_text(tmp_path / "cache")
        assert "kept as Python" not in text and "isinstance" not in text.split("def ", 1)[1]
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model(x))


def test_a_subclass_of_a_torch_layer_sees_its_attributes_ahead_of_time(tmp_path: Path) -> None:
    """`torchscribe FILE` on `@script class Norm2d(nn.LayerNorm)`: the forward reads what
    nn.LayerNorm's __init__ sets up (weight, bias, eps, normalized_shape)."""
    from source_module import case_directory, compiled_case

    source = '''
import torch
import torch.nn.functional as F
from torch import nn

from transpiler import script


@script
class Norm2d(nn.LayerNorm):
    """A layer norm over the channels of an NCHW tensor."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__(channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        if self.elementwise_affine:
            x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        else:
            x = F.layer_norm(x, self.normalized_shape, None, None, self.eps)
        return x.permute(0, 3, 1, 2)
'''
    with case_directory(tmp_path) as root:
        module, text = compiled_case(root, "norm2d_aot", source)
        assert "def Norm2d_forward(self, x: Tensor) -> Tensor:" in text
        model = module.Norm2d(6).eval()
        with torch.no_grad():
            model.weight.normal_()
            model.bias.normal_()
        x = torch.randn(2, 6, 4, 5)
        want = F.layer_norm(x.permute(0, 2, 3, 1), (6,), model.weight, model.bias, 1e-6).permute(0, 3, 1, 2)
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(model(x), want)


GATHER = '''
from typing import List, Union

import torch
from torch import nn

from transpiler import script


@script
class Gather(nn.Module):
    """Takes one feature map or a list of them, concatenated (a dense block's layer, as its own
    entry)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(6, 4, 1)

    def forward(self, x: Union[torch.Tensor, List[torch.Tensor]]) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            features = [x, x]
        else:
            features = x
        return self.conv(torch.cat(features, 1)).relu()


@script
def total(x: Union[torch.Tensor, List[torch.Tensor]], scale: float) -> torch.Tensor:
    if isinstance(x, list):
        return torch.stack(x).sum(0) * scale
    return x * scale


@script
def both(x: torch.Tensor) -> torch.Tensor:
    return total(x, 2.0) + total([x, x], 1.0)  # (compiled code calling each member)
'''


def test_union_parameters_of_the_entry_compile_once_per_member_ahead_of_time(tmp_path: Path) -> None:
    """The entry holds one function per member, each checking its member at entry; a call runs
    the one whose check passes, in strict mode (no eager fallback), as eager computes."""
    from source_module import case_directory, compiled_case

    with case_directory(tmp_path) as root:
        module, text = compiled_case(root, "gather_union", GATHER)
        assert '"Gather.forward": _guards.either(Gather_forward_tensor, Gather_forward_list),' in text
        assert '_guards.check_type(x, list, "x")' in text
        model = module.Gather().eval()
        x, y = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
        with torch.no_grad(), runtime.mode("off"):
            want = [model(x), model([x, y]), module.total(x, 2.0), module.total([x, y], 2.0), module.both(x)]
        with torch.no_grad(), runtime.mode("strict"):
            got = [model(x), model([x, y]), module.total(x, 2.0), module.total([x, y], 2.0), module.both(x)]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)


@pytest.mark.parametrize("passed", ["tensor", "list"])
def test_an_example_pins_the_member_of_a_union_parameter_it_passes(tmp_path: Path, passed: str) -> None:
    """script(model, example_inputs=...) compiles the member the example is, under an entry
    check: a call with the other member is refused (strict mode raises, else it runs eagerly)."""
    undecorated = GATHER.replace("@script\n", "")  # (its forward is the model's own, eager, code)
    with imported_source(tmp_path, f"gather_union_{passed}", undecorated) as module:
        model = module.Gather().eval()
        x, y = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
        example, other = (x, [x, y]) if passed == "tensor" else ([x, y], x)
        compiled = assert_compiled_matches_eager(model, example)
        with torch.no_grad(), runtime.mode("strict"):
            with pytest.raises(TorchscribeError, match="argument 'x': expected"):
                compiled(other)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)  # (said once a process)
            torch.testing.assert_close(compiled(other), model(other))


def test_an_example_factory_pins_its_member_before_the_generic_functions(tmp_path: Path) -> None:
    """`@script(example=...)` on an entry with a Union parameter: the example's specialisation
    (its member, with kernels) is tried first, then each member's generic function."""
    from source_module import case_directory, compiled_case

    source = GATHER.replace("@script\nclass Gather", '@script(example="make_example")\nclass Gather') + '''

def make_example():
    return Gather().eval(), (torch.randn(2, 3, 4, 4),)
'''
    with case_directory(tmp_path) as root:
        module, text = compiled_case(root, "gather_example", source)
        assert ("Gather_forward_tensor_example,\n        _guards.either(Gather_forward_tensor, Gather_forward_list),"
                in text), text
        model = module.Gather().eval()
        x, y = torch.randn(2, 3, 4, 4), torch.randn(2, 3, 4, 4)
        with torch.no_grad(), runtime.mode("off"):
            want = [model(x), model([x, y])]
        reset_fallback_counts()
        with torch.no_grad(), runtime.mode("strict"):
            got = [model(x), model([x, y]), model([y, x])]
        torch.testing.assert_close(got[:2], want)
        # the example's specialisation takes the tensor; both lists run a generic function
        assert runtime.generic_counts() == {f"{module.__name__}.Gather.forward": 2}


def test_union_settings_of_a_torch_layer_are_visible_to_a_subclass_ahead_of_time(tmp_path: Path) -> None:
    """nn.Conv2d annotates `padding: str | tuple[int, ...]`: a subclass's forward that reads it
    compiles once per member, each under an entry check of the member the layer holds."""
    from source_module import case_directory, compiled_case

    source = '''
import torch
import torch.nn.functional as F
from torch import nn

from transpiler import script


@script
class PaddedConv(nn.Conv2d):
    """Pads by hand, reflecting, where the padding is a pair of numbers; "same" goes to torch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.padding, str):
            return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        ph, pw = self.padding
        x = F.pad(x, [pw, pw, ph, ph], mode="reflect")
        return F.conv2d(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups) + self.stride[0]
'''
    with case_directory(tmp_path) as root:
        module, text = compiled_case(root, "padded_conv", source)
        assert ('"PaddedConv.forward": _guards.either( PaddedConv_forward_str, PaddedConv_forward_list ),'
                in " ".join(text.split()))  # (black wraps the line)
        assert '_guards.check_type(self.padding, (list, tuple), "self.padding")' in text
        x = torch.randn(2, 3, 9, 9)
        for model in (module.PaddedConv(3, 4, 3, padding=1, stride=2), module.PaddedConv(3, 4, 3, padding="same")):
            with torch.no_grad(), runtime.mode("off"):
                want = model(x)
            with torch.no_grad(), runtime.mode("strict"):
                torch.testing.assert_close(model(x), want)

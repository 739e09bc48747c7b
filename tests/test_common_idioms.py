"""Idioms of everyday model code that strict mode refused: a `@property` of the decorated class,
starred unpacking (`*lead, h, w = x.shape`), a member of an Enum of the file as a value
(`Pool.MEAN`), and `sum()` of a list of tensors. Each compiled ahead of time and, where an
example makes kernels, through `script(model, example_inputs=...)`, against eager in strict mode."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from closeness import strict_and_eager
from source_module import case_directory, compiled_case, imported_source
from transpiler import script
from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError, UserError

SOURCE = '''
from __future__ import annotations

from enum import Enum, IntEnum
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


class Reduce(str, Enum):
    MEAN = "mean"
    PEAK = "peak"


class Level(IntEnum):
    LOW = 1
    HIGH = 3


@script
class Pyramid(nn.Module):
    def __init__(self, reduce: Reduce = Reduce.MEAN) -> None:
        super().__init__()
        self.reduce = reduce
        self.proj = nn.Linear(6, 6)

    @property
    def channels(self) -> int:
        return self.proj.out_features

    def forward(self, x: Tensor) -> Tensor:
        *lead, h, w = x.shape
        levels = []
        for k in range(Level.HIGH):
            levels.append(torch.tanh(self.proj(x)) * (k + Level.LOW))
        y = sum(levels) / (h * w * self.channels)
        if self.reduce == Reduce.MEAN:
            return y.mean(dim=-1) + len(lead)
        return y.amax(dim=-1) - len(lead)


@script
def middle(x: Tensor) -> Tensor:
    first, *rest, last = x.shape
    return x.flatten(1).sum(-1) * first + len(rest) + last


@script
def total(xs: list[Tensor]) -> Tensor:
    return sum(xs) * 2
'''


def test_idioms_compile_ahead_of_time_and_match_eager(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "idioms", SOURCE)
        for reduce in module.Reduce:
            model = module.Pyramid(reduce).eval()
            for shape in ((5, 6), (2, 5, 6), (3, 2, 5, 6)):
                x = torch.randn(*shape)
                strict_and_eager(lambda: model(x))
        for shape in ((4, 3), (4, 3, 2), (2, 3, 4, 5)):
            x = torch.randn(*shape)
            strict_and_eager(lambda: module.middle(x))
        xs = [torch.randn(3), torch.randn(3)]
        strict_and_eager(lambda: module.total(xs))
        for mode in ("strict", "off"):  # Python's own: the int 0 for an empty list
            with runtime.mode(mode):
                assert module.total([]) == 0
    forward = text[text.index("def Pyramid_forward("):]
    assert 'self.reduce == "mean"' in forward  # the member as the str it equals
    assert "sum(levels)" in forward


def test_starred_unpacking_of_too_few_raises_pythons_error(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "idioms_short", SOURCE)
        for mode in ("strict", "off"):
            with runtime.mode(mode), pytest.raises(ValueError, match="not enough values to unpack"):
                module.middle(torch.randn(4))


def test_idioms_under_an_example_get_kernels(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "idioms_jit", SOURCE.replace("@script\nclass", "class")) as mod:
        model = mod.Pyramid().eval()
        x = torch.randn(2, 5, 6)
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model(x))
        (path,) = (tmp_path / "cache" / "jit").glob("Pyramid_*.py")
        text = path.read_text()
        assert "_kernel(" in text  # the linears' tanh epilogues
        assert "/ 180" in text  # h * w * channels: the property and the unpacked sizes known


def _diagnostic(tmp_path: Path, text: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(text)
    try:
        compile_path(path, "model.py")
    except CompileError as e:
        return e.diagnostics[0].message
    except UserError as e:
        return e.diagnostic.message
    raise AssertionError("compiled without a diagnostic")


def test_two_starred_names_and_members_without_a_literal_are_diagnostics(tmp_path: Path) -> None:
    header = "from enum import Enum, auto\nimport torch\nfrom torch import Tensor\nfrom transpiler import script\n\n"
    assert "multiple starred" in _diagnostic(tmp_path, header + "@script\ndef f(x: Tensor) -> Tensor:\n"
                                             "    *a, *b = x.shape\n    return x\n")
    message = _diagnostic(tmp_path, header + "class Mode(str, Enum):\n    A = auto()\n\n\n@script\n"
                          "def f(x: Tensor, m: str) -> Tensor:\n    return x if m == Mode.A else -x\n")
    assert "cannot be used as a value" in message


SPREAD = '''
from __future__ import annotations

import torch
from torch import Tensor

from transpiler import script


@script
def gather(x: Tensor, feats: list[Tensor]) -> Tensor:
    parts = [x, *feats, x * 2]
    parts = [*parts[1:], *(x + 1, x - 1)]
    return torch.cat(parts, dim=0).reshape((*x.shape[:1], -1))
'''


def test_starred_elements_spread_in_list_and_tuple_displays(tmp_path: Path) -> None:
    """`[x, *feats, y]` builds a new list as Python does (the list passed in is not changed);
    `(*shape, -1)` spreads a shape."""
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "spread", SPREAD)
        x = torch.randn(2, 3)
        for n in (0, 1, 3):
            feats = [torch.randn(2, 3) for _ in range(n)]
            got = strict_and_eager(lambda: module.gather(x, feats))
            assert got.shape == (2, 3 * (n + 3))
            assert len(feats) == n


READS = '''
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@script
class Mixer(nn.Module):
    def __init__(self, mode: str = "add_all") -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x: Tensor, extras: dict[str, Tensor]) -> Tensor:
        for name, t in extras.items():
            if name.startswith("add_") and self.mode.endswith("all"):
                x = x + t
        for t in extras.values():
            x = x * 0.5 + t.mean()
        scale = extras.get("scale")
        if scale is not None:
            x = x * scale
        return x * len(list(extras.keys())) + extras.get("bias", torch.zeros(()))
'''


def test_dict_and_str_methods_are_pythons_own(tmp_path: Path) -> None:
    """`d.items()`, `d.values()`, `d.keys()`, `d.get(k[, default])` of a dict argument and
    `s.startswith(p)` run as Python's own methods; the dict passed in is not changed."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "reads", READS)
        x = torch.randn(3)
        cases = [{}, {"add_a": torch.randn(3), "scale": torch.tensor(2.0)},
                 {"bias": torch.randn(3), "other": torch.randn(3), "add_b": torch.randn(3)}]
        for mode in ("add_all", "none"):
            model = module.Mixer(mode)
            for extras in cases:
                kept = dict(extras)
                strict_and_eager(lambda: model(x, extras))
                assert extras.keys() == kept.keys() and all(extras[k] is kept[k] for k in kept)
    assert "list(extras.items())" in text and 'extras.get("scale")' in text and 'name.startswith("add_")' in text


def test_a_str_method_of_a_known_setting_is_decided_when_compiling(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "reads_jit", READS.replace("@script\nclass", "class")) as mod:
        model = mod.Mixer("add_all")
        x, extras = torch.randn(3), {"add_a": torch.randn(3)}
        compiled = script(model, example_inputs=(x, extras))
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x, extras), model(x, extras))
        (path,) = (tmp_path / "cache" / "jit").glob("Mixer_*.py")
        code = [line for line in path.read_text().split("def Mixer_forward")[1].splitlines()
                if not line.strip().startswith("#")]
        assert not any("endswith" in line for line in code)  # the setting's test folded


WRITES = '''
import torch
from torch import Tensor, nn


class Bump(nn.Module):
    def forward(self, x: Tensor, d: dict[str, Tensor]) -> Tensor:
        t = d.get("x")
        if t is not None:
            t.add_(1.0)
            x = x * t
        for k, v in d.items():
            v.mul_(2.0)
        return x + 1
'''


def test_writes_through_a_dicts_values_reach_the_callers_tensors(tmp_path: Path, monkeypatch) -> None:
    """A tensor read with `d.get` or `d.items()` may be the caller's: written in place, the
    caller sees the write, as in eager (functionalization must not take it for a fresh one)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "dict_writes", WRITES) as mod:
        model, x = mod.Bump(), torch.randn(4)

        def made() -> dict[str, torch.Tensor]:
            return {"x": torch.ones(4), "y": torch.full((4,), 3.0)}

        compiled = script(model, example_inputs=(x, made()))
        mine, theirs = made(), made()
        with torch.no_grad():
            with runtime.mode("strict"):
                got = compiled(x, mine)
            want = model(x, theirs)
        torch.testing.assert_close(got, want)
        for key in mine:
            torch.testing.assert_close(mine[key], theirs[key])


TABLE = '''
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


@script
class Gated(nn.Module):
    def __init__(self, act: str = "gelu") -> None:
        super().__init__()
        self.act = act
        self.fc = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y = ACTIVATIONS[self.act](self.fc(x))
        best = torch.stack([y, -y]).max(dim=0).values
        top = best.topk(2, dim=-1).indices
        return best, top, torch.sort(y, dim=-1).values
'''


def test_a_module_level_table_of_functions_is_called_through(tmp_path: Path, monkeypatch) -> None:
    """`ACTS[self.act](x)`: ahead of time the key is compared with each entry's (Python's KeyError
    for none); for an instance whose setting is known, the one function is called. torch's named
    results (`.values`, `.indices`) are read by name."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "table", TABLE)
        x = torch.randn(3, 6)
        for act in ("relu", "gelu", "silu"):
            model = module.Gated(act)
            got = strict_and_eager(lambda: model(x))
            assert len(got) == 3
        for mode in ("strict", "off"):
            with runtime.mode(mode), pytest.raises(KeyError, match="tanh"):
                module.Gated("tanh")(x)
    assert 'if act == "relu":' in text and "raise KeyError(act)" in text
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "table_jit", TABLE.replace("@script\nclass", "class")) as mod:
        model = mod.Gated("silu")
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            for a, b in zip(compiled(x), model(x)):
                torch.testing.assert_close(a, b)
        (path,) = (tmp_path / "cache" / "jit").glob("Gated_*.py")
        assert "KeyError" not in path.read_text()  # the setting known: the one entry called


def test_a_table_changed_anywhere_is_not_called_through(tmp_path: Path) -> None:
    text = TABLE.replace('ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}',
                         'ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}\nACTIVATIONS["tanh"] = torch.tanh')
    assert "cannot be used as a value" in _diagnostic(tmp_path, text)


MODULE_DICT = '''
import torch
from torch import Tensor, nn


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parts = nn.ModuleDict(dict(
            embed=nn.Linear(4, 8),
            blocks=nn.ModuleList([nn.Linear(8, 8) for _ in range(2)]),
            norm=nn.LayerNorm(8),
        ))

    def forward(self, x: Tensor) -> Tensor:
        h = self.parts.embed(x)
        for block in self.parts.blocks:
            h = h + torch.relu(block(h))
        return self.parts.norm(h)
'''


def test_an_entry_of_a_module_dict_is_called_by_attribute(tmp_path: Path, monkeypatch) -> None:
    """`self.transformer.wte(idx)` (nanoGPT's style): an nn.ModuleDict's entry read as an
    attribute and called, compiled for an instance."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "module_dict", MODULE_DICT) as mod:
        torch.manual_seed(0)
        model = mod.Tower().eval()
        x = torch.randn(3, 4)
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model(x))


AOT_MODULE_DICT = '''
from __future__ import annotations

import torch
from torch import Tensor, nn

from transpiler import script


@script
class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.parts = nn.ModuleDict(dict(
            embed=nn.Linear(4, 8),
            blocks=nn.ModuleList([nn.Linear(8, 8) for _ in range(2)]),
        ))
        self.heads = nn.ModuleDict({"norm": nn.LayerNorm(8), "out": nn.Linear(8, 3)})

    def forward(self, x: Tensor) -> Tensor:
        h = self.parts.embed(x)
        for block in self.parts.blocks:
            h = h + torch.relu(block(h))
        return self.heads.out(self.heads.norm(h))
'''


def test_module_dict_entries_called_by_attribute_ahead_of_time(tmp_path: Path) -> None:
    """The entries of an nn.ModuleDict built in __init__ from `dict(k=...)` or a `{"k": ...}`
    display are known ahead of time, so the generic code calls them by attribute (it was not
    written: "calling a method of submodule"), in strict mode at any shape."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "aot_module_dict", AOT_MODULE_DICT)
        assert 'def Tower_forward(' in text and '_guards.attr(heads, "out")' in text
        torch.manual_seed(0)
        model = module.Tower().eval()
        for shape in ((3, 4), (2, 5, 4)):
            x = torch.randn(*shape)
            with torch.no_grad():
                expected = module.Tower.__torchscribe_eager__(model, x)
                with runtime.mode("strict"):
                    torch.testing.assert_close(model(x), expected)


WALRUS = '''
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from transpiler import script


@script
def gate(x: Tensor, mask: Optional[Tensor] = None) -> Tensor:
    if (m := mask) is not None:  # (narrowed as `mask is not None` would be)
        x = x * m
    if (n := x.shape[-1]) > 4:
        x = x[..., :4] * n
    acc = x
    for i in range(3):
        if bool((y := acc * i).sum() > 0):  # (bound in a loop body, read in it)
            acc = acc + y
    return acc + (s := x.sum()) * s
'''


def test_assignment_expressions_bind_where_python_evaluates_them_once(tmp_path: Path) -> None:
    """`(m := mask) is not None`, `(n := x.shape[-1]) > 4`, a tensor named in a loop's test and
    read in its body, and one inside a return: each binds its name as an assignment before
    the statement would (the check pass refuses `:=` where Python evaluates it only sometimes:
    test_diagnostics). Against eager in strict mode, with and without the mask, at two widths."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "walrus", WALRUS)
        assert "    n = x.shape[-1]\n    if n > 4:" in text
        for shape in ((2, 3), (2, 6)):
            x = torch.randn(*shape)
            for mask in (None, torch.rand(*shape)):
                with runtime.mode("strict"):
                    torch.testing.assert_close(module.gate(x, mask), module.gate.__wrapped__(x, mask))


STACKS = '''
from __future__ import annotations

import torch
from torch import Tensor

from transpiler import script


@script
def unwind(x: Tensor, n: int) -> Tensor:
    skips: list[Tensor] = []
    for i in range(n):
        x = x * 2 + i
        skips.append(x)
    skips.insert(0, x - 1)
    last = skips.pop()
    first = skips.pop(0)
    for _ in range(len(skips)):
        last = last + skips.pop()
    return last * first


@script
def bump_popped(xs: list[Tensor]) -> Tensor:
    t = xs.pop()
    t.add_(1.0)
    return t * 2
'''


def test_list_insert_and_pop_are_pythons_own(tmp_path: Path) -> None:
    """`skips.pop()` (a U-Net's decoder), `insert`, `pop(i)`; an empty pop is Python's
    IndexError; a popped tensor written in place is the caller's tensor, as in eager."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "stacks", STACKS)
        x = torch.randn(3)
        for n in (1, 2, 4):
            strict_and_eager(lambda: module.unwind(x, n))
        for mode in ("strict", "off"):
            with runtime.mode(mode), pytest.raises(IndexError):
                module.bump_popped([])
        mine, theirs = [torch.zeros(2), torch.ones(2)], [torch.zeros(2), torch.ones(2)]
        kept_mine, kept_theirs = mine[1], theirs[1]
        with runtime.mode("strict"):
            got = module.bump_popped(mine)
        with runtime.mode("off"):
            want = module.bump_popped(theirs)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(kept_mine, kept_theirs)  # the caller's tensor, written
        assert len(mine) == len(theirs) == 1
    assert "skips.insert(0, " in text and "skips.pop(0)" in text


def test_an_elif_chain_prints_as_one(tmp_path: Path) -> None:
    """A source's `elif`s (and a table's keys) print as `elif`, not as `else:` holding an `if`."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "chain", '''
import torch
from torch import Tensor

from transpiler import script


@script
def pick(x: Tensor, mode: str) -> Tensor:
    if mode == "a":
        y = x + 1
    elif mode == "b":
        y = x * 2
    elif mode == "c":
        y = x - 3
    else:
        y = x
    return y
''')
        x = torch.randn(3)
        for mode in ("a", "b", "c", "d"):
            strict_and_eager(lambda: module.pick(x, mode))
    body = text[text.index("def pick("):]
    assert '    elif mode == "b":\n        y = x * 2\n    elif mode == "c":\n        y = x - 3\n    else:\n        y = x\n' in body


def test_or_of_numbers_prints_as_written(tmp_path: Path) -> None:
    """`if pad_r or pad_b:` of ints (Python's `or`: the first true value, else the last) prints as
    the source writes it, not as `bool(a if bool(a) else b)`."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "pads", '''
import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script


@script
def pad_to(x: Tensor, size: int) -> Tensor:
    pad_r = (size - x.shape[-1] % size) % size
    pad_b = (size - x.shape[-2] % size) % size
    if pad_r or pad_b:
        x = F.pad(x, (0, pad_r, 0, pad_b))
    return x * 2
''')
        for shape in ((2, 7, 7), (2, 6, 9), (2, 8, 8)):
            x = torch.randn(*shape)
            strict_and_eager(lambda: module.pad_to(x, 4))
    assert "    if pad_r or pad_b:\n" in text


def test_a_starred_name_holds_a_list_as_in_python(tmp_path: Path) -> None:
    """`first, *rest = x.shape` binds `rest` to a list (not the torch.Size a slice of the shape
    is): `rest == [3, 4]` holds as in eager."""
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "starred_list", '''
import torch
from torch import Tensor

from transpiler import script


@script
def tail_is(x: Tensor) -> Tensor:
    first, *rest = x.shape
    if rest == [3, 4]:
        return x * first
    return x
''')
        for shape in ((2, 3, 4), (2, 4, 3)):
            x = torch.ones(*shape)
            got = strict_and_eager(lambda: module.tail_is(x))
            assert bool((got == 2).all()) == (shape == (2, 3, 4))

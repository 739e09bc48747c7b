"""Dataclasses of the model's file as values of compiled code (`@dataclass class Output`): made by
their constructor, fields read by name, fields assigned on an object the function made and has
not passed on, returned and passed between compiled functions. The compiled code makes the
object with the class's own constructor, by keyword; what it cannot make as the class makes it
(a base class, `__post_init__`, `field(...)` defaults) and what Python would refuse (a tuple's
operations on it, assigning a frozen field) are diagnostics at the line."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case
from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError, UserError

SOURCE = '''
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@dataclass
class Prediction:
    scores: Tensor
    features: Tensor
    extra: Optional[Tensor] = None
    calls: int = 0


@dataclass(frozen=True, kw_only=True)
class Pair:
    left: Tensor
    right: Tensor


def split_halves(x: Tensor) -> Pair:
    a, b = x.chunk(2, dim=-1)
    return Pair(left=a, right=b)


@script
class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(12, 8)
        self.head = nn.Linear(4, 3)

    def forward(self, x: Tensor, with_extra: bool = False) -> Prediction:
        halves = split_halves(torch.relu(self.body(x)))
        out = Prediction(self.head(halves.left * halves.right), halves.left)
        if with_extra:
            out.extra = halves.right.sum(-1)
        out.calls = 1
        out.scores = out.scores.softmax(-1)
        return out


@script
def rescale(p: Prediction, w: float) -> Tensor:
    return p.scores * w + p.features.mean(-1, keepdim=True)
'''


def _same(got, want) -> None:
    assert type(got) is type(want)
    for f in dataclasses.fields(want):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if isinstance(b, torch.Tensor):
            torch.testing.assert_close(a, b)
        else:
            assert a == b, f.name


def test_a_dataclass_made_read_changed_and_returned_matches_eager(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "records", SOURCE)
        model = module.Classifier().eval()
        x = torch.randn(5, 12)
        for extra in (False, True):
            with torch.no_grad():
                with runtime.mode("strict"):
                    got = model(x, extra)
                with runtime.mode("off"):
                    want = model(x, extra)
            _same(got, want)
            assert isinstance(got, module.Prediction)
            assert (got.extra is None) == (not extra)
        # a dataclass passed in: its fields read by name (it is not a tuple)
        p = module.Prediction(torch.randn(5, 3), torch.randn(5, 4))
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(module.rescale(p, 2.0), p.scores * 2.0 + p.features.mean(-1, keepdim=True))
    # made by keyword (Pair is keyword-only), fields read as attributes, never by index
    assert "Prediction(scores=" in text and ".Pair(left=" not in text.split("def Classifier_forward")[0]
    assert "p.scores * w" in text or "p.scores" in text
    assert "p[0]" not in text and "out[0]" not in text


def test_assigning_a_field_rebuilds_the_record_in_the_generated_code(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        _, text = compiled_case(tmp_path, "records_text", SOURCE)
    forward = text[text.index("def Classifier_forward("):]
    forward = forward[:forward.index("\n\n\n")]
    assert "if with_extra:" in forward
    assert "calls=1" in forward  # the later assignments folded into one constructor call
    assert forward.count("_source.Prediction(") == 3, forward


MODEL = '''
from dataclasses import dataclass, field
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@dataclass
class Out:
    a: Tensor
    b: Optional[Tensor] = None


@dataclass(frozen=True)
class Frozen:
    a: Tensor


@script
class Net(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
{body}
'''


def _diagnostic(tmp_path: Path, body: str, prelude: str = "") -> tuple[str, int]:
    text = MODEL.replace("@script\nclass Net", prelude + "@script\nclass Net").format(
        body="\n".join("        " + line for line in body.strip().splitlines()))
    path = tmp_path / "model.py"
    path.write_text(text)
    try:
        compile_path(path, "model.py")
    except CompileError as e:
        d = e.diagnostics[0]
    except UserError as e:
        d = e.diagnostic
    else:
        raise AssertionError("compiled without a diagnostic")
    assert d.hint
    return d.message, text.splitlines()[d.loc.line - 1].strip()


@pytest.mark.parametrize("body, message, line", [
    ("o = Out(x)\nreturn o[0]", "is a dataclass, not a tuple", "return o[0]"),
    ("o = Out(x, x)\na, b = o\nreturn a", "is a dataclass, not a tuple", "a, b = o"),
    ("o = Out(x)\nreturn x * len(o)", "is a dataclass, not a tuple", "return x * len(o)"),
    ("f = Frozen(x)\nf.a = x + 1\nreturn f.a", "frozen dataclass", "f.a = x + 1"),
    ("o = Out(x)\no.c = x\nreturn o.a", "not a field", "o.c = x"),
    ("o = Out(x)\np = o\no.b = x\nreturn p.a", "`o` is also `p`", "o.b = x"),
    ("o = Out(x)\nkeep = [o]\no.b = x\nreturn keep[0].a", "passed on or stored", "o.b = x"),
    ("o = Out(x)\nfor i in range(2):\n    o.b = x * i\nreturn o.a", "made before the loop", "o.b = x * i"),
])
def test_what_python_would_refuse_or_another_reference_would_see_is_a_diagnostic(
        tmp_path: Path, body: str, message: str, line: str) -> None:
    got, at = _diagnostic(tmp_path, body)
    assert message in got
    assert at == line


@pytest.mark.parametrize("cls, message", [
    ("@dataclass\nclass Post:\n    a: Tensor\n\n    def __post_init__(self) -> None:\n        self.a = self.a * 2\n",
     "defines `__post_init__`"),
    ("@dataclass\nclass Post(Out):\n    c: int = 0\n", "has a base class"),
    ("@dataclass\nclass Post:\n    a: Tensor\n    tags: list[int] = field(default_factory=list)\n", "`field(...)` default"),
    ("@dataclass(init=False)\nclass Post:\n    a: Tensor\n", "is not supported where compiled code constructs it"),
])
def test_dataclasses_made_other_than_by_their_plain_constructor_are_refused(
        tmp_path: Path, cls: str, message: str) -> None:
    got, _ = _diagnostic(tmp_path, "return Post(x).a", prelude=cls + "\n\n")
    assert message in got


IDENTITY = '''
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transpiler import script


@dataclass
class Box:
    a: Tensor
    n: int = 0


@script
def one_twice(x: Tensor) -> tuple[Box, Box]:
    o = Box(x)
    return o, o


@script
def two_alike(x: Tensor) -> tuple[Box, Box]:
    return Box(x), Box(x)


@script
def listed(x: Tensor) -> list[Box]:
    out = [Box(x)]
    out.append(Box(x))
    return out


@script
def written_then_boxed(x: Tensor) -> tuple[Box, Box]:
    x.mul_(2)
    o = Box(x[0])
    return o, o
'''


def test_each_constructor_call_is_one_object_as_in_eager(tmp_path: Path) -> None:
    """A dataclass is mutable: two equal constructions stay two objects (common subexpressions
    never merge them), one object returned twice stays one, also where functionalization remakes
    the returned tuple around a view of a written input."""
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "identity", IDENTITY)
        for mode in ("strict", "off"):
            x = torch.randn(3, 2)
            with runtime.mode(mode):
                a, b = module.one_twice(x)
                assert a is b
                a, b = module.two_alike(x)
                assert a is not b
                a.n = 5
                assert b.n == 0
                first, second = module.listed(x)
                assert first is not second
                before = x.clone()
                a, b = module.written_then_boxed(x)
                assert a is b
                torch.testing.assert_close(x, before * 2)
                assert a.a.data_ptr() == x.data_ptr()  # a view of the caller's tensor, as eager's


BATCH = '''
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@dataclass
class Batch:
    tokens: Tensor
    mask: Optional[Tensor] = None


@script(example="make_example")
class Scorer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, batch: Batch) -> Tensor:
        h = torch.tanh(self.proj(batch.tokens)) * 0.5 + 1.0
        if batch.mask is not None:
            h = h * batch.mask
        return h


def make_example():
    torch.manual_seed(0)
    return Scorer().eval(), (Batch(torch.randn(4, 16), torch.rand(4, 16)),)
'''


def test_a_dataclass_argument_is_specialised_from_the_example(tmp_path: Path) -> None:
    """An entry taking a dataclass gets code for its example: each field checked by name at
    entry (`batch.tokens`), kernels for what it computes; another batch size runs it too."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "batch_record", BATCH)
        model, (batch,) = module.make_example()
        example = text[text.index("def Scorer_forward_example("):]
        assert '_guards.check_tensor(batch.tokens, "batch.tokens", torch.float32, "cpu", ("B", 16))' in example
        assert "_kernel(" in text
        for b in (4, 9):
            given = module.Batch(torch.randn(b, 16), torch.rand(b, 16))
            with torch.no_grad():
                with runtime.mode("strict"):
                    got = model(given)
                with runtime.mode("off"):
                    want = model(given)
            torch.testing.assert_close(got, want)


REFINED = '''
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from transpiler import script


@dataclass
class Out:
    a: Tensor
    b: Optional[Tensor] = None


class Pair(NamedTuple):
    a: Tensor
    b: Optional[Tensor]


@script
def early_exit(x: Tensor, p: Out) -> Tensor:
    if p.b is None:
        return x
    return x * p.b


@script
def named(x: Tensor, p: Pair) -> Tensor:
    y = x + p.a
    if p.b is not None:
        y = y * p.b
    return y
'''


def test_a_field_checked_against_none_is_narrowed_as_a_name_is(tmp_path: Path) -> None:
    """`if batch.mask is not None:` narrows that field of that record, also after an early return,
    for dataclasses and NamedTuples alike."""
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "refined", REFINED)
        x = torch.randn(3)
        for b in (None, torch.randn(3)):
            with runtime.mode("strict"):
                got = (module.early_exit(x, module.Out(x, b)), module.named(x, module.Pair(x, b)))
            with runtime.mode("off"):
                want = (module.early_exit(x, module.Out(x, b)), module.named(x, module.Pair(x, b)))
            torch.testing.assert_close(got, want)


def test_a_narrowed_field_is_forgotten_when_its_name_is_rebound(tmp_path: Path) -> None:
    got, at = _diagnostic(tmp_path, "o = Out(x, x)\nq = Out(x)\nif o.b is not None:\n    o = q\n    return x * o.b\n"
                                    "return x")
    assert "Tensor and None" in got  # q's field, not o's narrowed one
    assert at == "return x * o.b"


CONFIG = '''
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from transpiler import script


@dataclass
class Config:
    width: int = 4
    scale: float = 2.0
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.scale = self.scale * 0.5


@script
class Scaled(nn.Module):
    cfg: Config

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(cfg.width, cfg.width)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(x) * self.cfg.scale
'''


def test_a_dataclass_only_read_may_be_made_in_any_way(tmp_path: Path) -> None:
    """What compiled code cannot construct (`field(...)` defaults, `__post_init__`) is refused only
    where it constructs one: a configuration object made outside and read inside compiles."""
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "config_record", CONFIG)
        model = module.Scaled(module.Config(scale=3.0)).eval()
        x = torch.randn(2, 4)
        with torch.no_grad():
            with runtime.mode("strict"):
                got = model(x)
            with runtime.mode("off"):
                want = model(x)
        torch.testing.assert_close(got, want)
    assert "self.cfg.scale" in text


LOOPS = '''
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from transpiler import script


@dataclass
class State:
    h: Tensor
    steps: int = 0


@script
def run(x: Tensor, k: int) -> State:
    s = State(x)
    for _ in range(k):
        s = State(torch.tanh(s.h * 2), s.steps + 1)
    while s.steps < 5:
        s = State(s.h + 1, s.steps + 1)
    return s
'''


def test_a_dataclass_carried_through_loops_matches_eager(tmp_path: Path) -> None:
    """A record rebound in a `for` and a `while` is a loop-carried value, not a use as a tuple."""
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "loop_records", LOOPS)
        x = torch.randn(3)
        for k in (0, 2, 7):
            with runtime.mode("strict"):
                got = module.run(x, k)
            with runtime.mode("off"):
                want = module.run(x, k)
            _same(got, want)


def test_a_dataclass_is_not_an_instance_of_tuple(tmp_path: Path) -> None:
    """`isinstance(out, tuple)`, decided when compiling, is False for a dataclass (True for a
    NamedTuple), as Python has it."""
    source = IDENTITY + '''

class Pair(NamedTuple):
    a: Tensor
    b: Tensor


@script
def kinds(x: Tensor) -> Tensor:
    y = x
    if isinstance(Box(x), tuple):
        y = y * 100
    if isinstance(Pair(x, x), tuple):
        y = y - 3
    return y
'''
    source = source.replace("from dataclasses import dataclass\n", "from dataclasses import dataclass\nfrom typing import NamedTuple\n")
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "kinds", source)
        x = torch.ones(1)
        for mode in ("strict", "off"):
            with runtime.mode(mode):
                torch.testing.assert_close(module.kinds(x), torch.full((1,), -2.0))

"""`torchscribe explain`: what the compiler made of each compiled function (transpiler/explain.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest
import sympy

from transpiler import cli
from transpiler.explain import explain_path, format_bytes

REPO = Path(__file__).resolve().parents[1]

MODEL = '''\
from typing import Annotated

import torch
from torch import Tensor

from transpiler import script


@script
def attend(q: Annotated[Tensor, "B 8 16"], k: Annotated[Tensor, "B 8 16"]) -> Tensor:
    s = torch.matmul(q, k.transpose(-2, -1))
    p = torch.softmax(s * 0.25, dim=-1)
    return torch.tanh(p) + 1.0


def make_example():
    return attend, (torch.randn(2, 8, 16), torch.randn(2, 8, 16))
'''

# s * 0.25, the softmax and the tanh: three [B, 8, 8] float32 tensors eager writes and reads
# (256·B bytes each, twice); the softmax's own steps stay inside one eager call.
EXPECTED_EXAMPLE = """\
attend (model.py:10)
  guards (3):
    q is a tensor float32 cpu [B, 8, 16]
    k is a tensor float32 cpu [?, 8, 16]
    k.shape[0] == B
  kernels (1):
    softmax_tanh: reduction over [B, 8, 8] (line 13)
      fuses: line 12: mul, amax, sub, clamp_min, exp, lt, where, sum, div; line 13: tanh, add
      input 0: s = matmul (line 11): f32[B, 8, 8]@cpu
      output 0: f32[B, 8, 8]@cpu, written over input 0
      saves: 1536·B bytes: writing and reading mul (line 12), div (line 12), tanh (line 13)
  extern calls: matmul (line 11)
  stayed Python (1):
    line 11: permute: a view (moves no data)
  memory traffic saved against eager: 1536·B bytes per call
"""


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)  # locations are relative to the working directory
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    before = set(sys.modules)
    yield Path("model.py")
    for name in set(sys.modules) - before:
        if name.startswith("_torchscribe_explain_"):
            del sys.modules[name]


def test_pinned_text_for_the_example_inputs(model: Path) -> None:
    assert explain_path(model, example=True) == EXPECTED_EXAMPLE
    assert explain_path(model, example=True) == EXPECTED_EXAMPLE  # deterministic


def test_ahead_of_time_says_why_nothing_fused(model: Path) -> None:
    text = explain_path(model)
    assert text is not None
    assert "kernels: none" in text and "extern calls: matmul (line 11)" in text
    assert "q is a tensor [B, 8, 16]" in text and "k.shape[0] == B" in text
    assert "line 13: tanh: its dtype and device are not known" in text
    assert "line 12: softmax: a composite op not decomposed" in text
    assert "memory traffic saved against eager: 0 bytes per call" in text


CAT_MODEL = '''\
from typing import Annotated

import torch
from torch import Tensor

from transpiler import script


@script
def parts(x: Annotated[Tensor, "B 8 4"], y: Annotated[Tensor, "B 6 4"]) -> Tensor:
    return torch.cat([torch.tanh(x * 2.0), torch.relu(y + 1.0)], 1)


def make_example():
    return parts, (torch.randn(2, 8, 4), torch.randn(2, 6, 4))
'''


def _explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str, source: str) -> str:
    """`explain --example` of `source` written to `file` in tmp_path (the working directory)."""
    monkeypatch.chdir(tmp_path)
    Path(file).write_text(source)
    before = set(sys.modules)
    text = explain_path(Path(file), example=True)
    for name in set(sys.modules) - before:
        if name.startswith("_torchscribe_explain_"):
            del sys.modules[name]
    assert text is not None
    return text


def test_a_kernel_that_writes_into_a_cat_saves_the_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager writes tanh's result, then cat reads it: 2 * 128 bytes per image, besides the mul
    the kernel keeps inside."""
    text = _explained(tmp_path, monkeypatch, "cats.py", CAT_MODEL)
    assert "output 0: f32[B, 8, 4]@cpu, written into its part of a cat's result" in text
    assert "saves: 512·B bytes: writing and reading mul (line 11), tanh (line 11)" in text
    assert "memory traffic saved against eager: 896·B bytes per call" in text


POOL_MODEL = '''\
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script


@script
def pool(x: Annotated[Tensor, "B 9 9 8"]) -> Tensor:
    return F.max_pool2d(torch.relu(x * 2.0).permute(0, 3, 1, 2), 3, 2, 1)


def make_example():
    return pool, (torch.randn(2, 9, 9, 8),)
'''


def test_a_pool_kernel_is_listed_with_its_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _explained(tmp_path, monkeypatch, "pools.py", POOL_MODEL)
    # relu(2 max(x)) is max(relu(2x)): the pool reads x, and the kernel runs on the pooled rows
    assert "  kernels (2):\n" \
           "    max_pool2d: max pool of NHWC rows, 3x3 windows, stride 2x2, padding 1x1 (line 12)\n" \
           "      input 0: x: f32[B, 9, 9, 8]@cpu\n" \
           "      output 0: f32[B, 5, 5, 8]@cpu\n" \
           "      saves: nothing by itself (torch's max_pool2d, without the indices torch computes)\n" \
           "    relu: pointwise over [B, 5, 5, 8] (line 12)\n" \
           "      fuses: line 12: mul, clamp_min\n" \
           "      input 0: the result of kernel max_pool2d (line 12): f32[B, 5, 5, 8]@cpu\n" in text
    assert "extern calls: none" in text  # (not max_pool2d)


ADAPTIVE_MODEL = '''\
from typing import Annotated

import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script


@script
def pool(x: Annotated[Tensor, "B 4 30"], size: int) -> Tensor:
    return F.adaptive_avg_pool1d(x, size)


def make_example():
    return pool, (torch.randn(2, 4, 30), 7)
'''


def test_an_adaptive_pool_kernel_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _explained(tmp_path, monkeypatch, "adaptive.py", ADAPTIVE_MODEL)
    assert "  kernels (1):\n" \
           "    adaptive_avg_pool1d: adaptive average pool over the last dim, the output size read at run time (line 12)\n" \
           "      input 0: x: f32[B, 4, 30]@cpu\n" \
           "      output 0: f32[B, 4, ?]@cpu\n" in text
    assert "extern calls: none" in text


def test_cli_subcommand(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "--example", str(model)]) == 0
    out = capsys.readouterr().out
    assert out == "== model.py\n" + EXPECTED_EXAMPLE
    assert not Path("model_compiled.py").exists()  # explain writes nothing


def test_cli_subcommand_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", str(tmp_path / "absent.py")]) == 2
    bad = tmp_path / "bad.py"
    bad.write_text("from transpiler import script\n\n@script\ndef f(x):\n    return x\n")
    assert cli.main(["explain", str(bad)]) == 2
    assert "error" in capsys.readouterr().err


def test_mlp_example_key_facts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["explain", "--example", str(REPO / "examples" / "mlp.py")]) == 0
    out = capsys.readouterr().out
    assert "MLP.forward (" in out and "mlp.py:17)" in out
    assert "eager when self.fc1 is not an unhooked torch.nn.Linear" in out
    assert "x is a tensor float32 cpu [B, 16, 64]" in out
    assert "self.norm.eps == 1e-05" in out
    # linear's bias add and GELU in one kernel, writing over the matmul's result
    assert "fc1_gelu: pointwise over [B, 16, 256] (line 18)" in out
    assert "output 0: h: f32[B, 16, 256]@cpu, written over input 0" in out
    # fc2's bias add, the residual add and the layer norm in one row reduction
    assert "fc2_norm: reduction over [B, 16, 64] (line 20)" in out
    assert "fuses: line 19: add; line 20: add, sum, div" in out
    assert "extern calls: linear (line 18), linear (line 19)" in out
    assert "stayed Python: none" in out
    # the residual sum x + h: B·16·64 float32 written and read
    assert "memory traffic saved against eager: 8·B KiB per call" in out


def test_format_bytes() -> None:
    B, T = sympy.symbols("B T")
    assert format_bytes(0) == "0 bytes"
    assert format_bytes(4096) == "4 KiB"
    assert format_bytes(1536 * B) == "1536·B bytes"
    assert format_bytes(64 * 1024 * B + 2048) == "(64·B + 2) KiB"
    assert format_bytes(2**21 * B * T) == "2·B·T MiB"

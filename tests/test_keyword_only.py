"""Keyword-only parameters (after `*`) in compiled code: a call must name them, as in Python.

Compiled ahead of time: a module whose forward takes an optional mask by keyword, a submodule
called with keywords by its parent, a function with a keyword-only setting called from compiled
code. Each is checked against eager in strict mode, and a positional call raises eager's
TypeError."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from closeness import strict_and_eager
from source_module import case_directory, compiled_case

SOURCE = '''
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


def scaled(x: Tensor, *, alpha: float = 0.5, shift: float = 1.0) -> Tensor:
    return torch.tanh(x * alpha + shift)


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: Tensor, *, mask: Optional[Tensor] = None, scale: float = 1.0) -> Tensor:
        y = self.proj(x) * scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return torch.sigmoid(y)


@script
class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()

    def forward(self, x: Tensor, *, mask: Optional[Tensor] = None) -> Tensor:
        return x * self.gate(x, scale=2.0, mask=mask) + scaled(x, shift=-1.0)


@script
def blend(x: Tensor, y: Tensor, *, w: float) -> Tensor:
    return scaled(x, alpha=w) + y * (1 - w)
'''


def test_keyword_only_parameters_ahead_of_time(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "keyword_only", SOURCE)
        assert "def blend(x: Tensor, y: Tensor, *, w: float) -> Tensor:" in text
        block = module.Block().eval()
        x, y = torch.randn(4, 8), torch.randn(4, 8)
        mask = torch.rand(4, 8) > 0.5
        strict_and_eager(lambda: block(x))
        strict_and_eager(lambda: block(x, mask=mask))
        strict_and_eager(lambda: module.blend(x, y, w=0.25))
        for mode in ("strict", "off"):
            with runtime.mode(mode), pytest.raises(TypeError, match="positional argument"):
                module.blend(x, y, 0.25)
            with runtime.mode(mode), pytest.raises(TypeError):
                block(x, mask)


def test_a_positional_call_of_a_keyword_only_parameter_in_compiled_code_is_a_diagnostic(tmp_path: Path, capsys) -> None:
    from transpiler.cli import main as cli_main

    bad = SOURCE.replace("scaled(x, alpha=w)", "scaled(x, w)")
    path = tmp_path / "keyword_only_bad.py"
    path.write_text(bad)
    with case_directory(tmp_path):
        assert cli_main(["-q", str(path)]) != 0
    assert not (tmp_path / "keyword_only_bad_compiled.py").exists()
    err = capsys.readouterr().err
    assert "scaled() takes 1 positional argument, 2 given" in err and "pass alpha=... by keyword" in err

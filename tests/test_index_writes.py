"""In-place index and scatter writes (`out.index_add_(0, rows, v)`), functionalized: the
functional op has the shape of the tensor it writes, whatever its other operands, so the module
neither widens it (`.expand_as(out)`, `.expand(out.size(0), 64)`) nor loses its shape."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from source_module import generated_jit, jit_source
from transpiler import script

SOURCE = '''
import torch
from torch import nn


class Accumulate(nn.Module):
    def forward(self, x: torch.Tensor, rows: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        if rows.numel() > 0:
            out.METHOD_(0, rows, src)
        return torch.tanh(out) + x
'''


@pytest.mark.parametrize("method", ["index_add", "index_copy"])
def test_an_index_write_keeps_the_shape_of_what_it_writes(tmp_path: Path, monkeypatch, method: str) -> None:
    with jit_source(tmp_path, monkeypatch, f"accumulate_{method}", SOURCE.replace("METHOD", method)) as module:
        model = module.Accumulate()
        x, rows, src = torch.randn(6, 4), torch.tensor([4, 1]), torch.randn(2, 4)
        compiled = script(model, example_inputs=(x, rows, src))
        for args in ((x, rows, src), (torch.randn(9, 4), torch.tensor([0, 8]), torch.randn(2, 4))):
            with torch.no_grad(), runtime.mode("strict"):
                torch.testing.assert_close(compiled(*args), model(*args))
        text = generated_jit(tmp_path, "Accumulate")
        code = text[text.index("def Accumulate_forward"):]
        assert f".{method}(" in code and "expand" not in code
        assert "return tanh(out, x)" in code  # (its shape known: what follows fuses)


MASKED = '''
import torch
from torch import nn


class Scatter(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        out = x.clone()
        out.masked_scatter_(mask, src)
        return out * 2.0
'''


def test_a_masked_scatter_whose_mask_is_wider_raises_as_eager(tmp_path: Path, monkeypatch) -> None:
    """masked_scatter's mask broadcasts with the tensor: where it is wider, the in-place write
    raises in eager, and so must the compiled code (its result is not taken for the tensor's shape)."""
    with jit_source(tmp_path, monkeypatch, "masked_case", MASKED) as module:
        model = module.Scatter()
        x, src = torch.randn(1, 4), torch.randn(12)
        ok = (x, torch.tensor([[True, False, True, False]]), src)
        wide = (x, torch.rand(3, 4) > 0.5, src)
        compiled = script(model, example_inputs=ok)
        with torch.no_grad(), runtime.mode("strict"):
            torch.testing.assert_close(compiled(*ok), model(*ok))
        with pytest.raises(RuntimeError):
            model(*wide)
        with torch.no_grad(), runtime.mode("strict"), pytest.raises(Exception):
            compiled(*wide)

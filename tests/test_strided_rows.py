"""Row reductions whose row is strided in memory: a LayerNorm2d (timm's: a layer norm of an NCHW
tensor's channels, through permutes) and a softmax over those channels read each row H * W
elements apart. The driver gathers such rows into contiguous ones first (ts_gather, runtime's
kernels.h): eight rows side by side at a time transposed in registers, what is left of a tile
one element at a time. The sizes here put rows in every one of those places, in tiles cut short
by the end of a row of the image, on one thread and on several; each result against eager's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from source_module import imported_source

SOURCE = """
import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ChannelSoftmax(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x.permute(0, 2, 3, 1), dim=-1).permute(0, 3, 1, 2)


class MaskedSoftmax(nn.Module):
    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        return F.softmax(x.masked_fill(~keep, -1e4), dim=-1)


class EveryOther(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x[::2], dim=-1)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("strided_rows")
    with imported_source(root, "strided_rows_models", SOURCE) as module:
        yield module


def _compiled(model, x: torch.Tensor | tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    out = script(model, example_inputs=x if isinstance(x, tuple) else (x,))
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "_row(" in text and "ts_gather<0, " in text, text  # a row kernel, its input gathered
    return out


# (batch, channels, height, width): width 9 is a block of 8 rows and one more; 5, fewer than 8;
# 40, tiles of 16, 16 and 8 rows; 20 and 37 channels, rows not a multiple of 8 elements; the
# last, 130k elements, runs on the threads.
SHAPES = [(2, 64, 7, 9), (1, 20, 5, 5), (3, 32, 4, 40), (2, 37, 3, 17), (4, 48, 30, 30)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_over_channels_of_nchw(models, shape, dtype, tmp_path, monkeypatch) -> None:
    torch.manual_seed(0)
    model = models.LayerNorm2d(shape[1]).to(dtype).eval()
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
    x = torch.randn(*shape, dtype=dtype) * 3 + 1
    f = _compiled(model, x, tmp_path, monkeypatch)
    with runtime.mode("strict"), torch.no_grad():  # (a guard failure raises: no eager fallback)
        assert_close_to_eager(f(x), model(x), "NCHW")
        x.mul_(-2)  # (the same tensor, new values: nothing of the last call is reused)
        assert_close_to_eager(f(x), model(x), "written over")
        wide = torch.randn(shape[0], shape[1], shape[2], shape[3] + 3, dtype=dtype)[..., 1:-2]
        assert_close_to_eager(f(wide), model(wide), "rows of a wider image")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_over_channels_of_nchw(models, shape, dtype, tmp_path, monkeypatch) -> None:
    torch.manual_seed(1)
    model = models.ChannelSoftmax()
    x = (torch.randn(*shape) * 4).to(dtype)
    f = _compiled(model, x, tmp_path, monkeypatch)
    with runtime.mode("strict"):
        assert_close_to_eager(f(x), model(x), "NCHW")
        x[0, :, 0, 0] = float("-inf")  # (a row of -inf: NaN in eager too)
        x[-1, 3, -1, -1] = float("nan")
        x[0, 2, 1, 1] = float("inf")
        assert_close_to_eager(f(x), model(x), "infinities and NaN")


def test_one_strided_row(models, tmp_path, monkeypatch) -> None:
    """A kernel of one row (rank 1) whose input steps by 2."""
    model = models.EveryOther()
    x = torch.randn(2 * 100 + 1)
    f = _compiled(model, x, tmp_path, monkeypatch)
    with runtime.mode("strict"):
        assert_close_to_eager(f(x), model(x), "every other element")


def test_a_bool_mask_along_strided_rows(models, tmp_path, monkeypatch) -> None:
    """A mask read along strided rows is gathered as the floats are: a tile of bool
    (std::vector<bool> has no data(), and such a kernel once failed to build)."""
    model = models.MaskedSoftmax()
    torch.manual_seed(2)
    x, keep = torch.randn(6, 40), torch.rand(40, 6).t() > 0.3
    f = _compiled(model, (x, keep), tmp_path, monkeypatch)
    assert "bool>" in next((tmp_path / "jit").glob("*.py")).read_text()  # (the mask gathered)
    with runtime.mode("strict"):
        assert_close_to_eager(f(x, keep), model(x, keep), "a transposed mask")
        keep = keep.contiguous()
        assert_close_to_eager(f(x, keep), model(x, keep), "a contiguous mask")

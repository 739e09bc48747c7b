"""`torch.finfo(dtype).min` and kin in compiled code: a constant where the dtype is known when
compiling (a literal dtype, or the dtype of a tensor an entry check pins), read at run time
where it is not (generic code), both as eager computes them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case

SOURCE = textwrap.dedent('''
    import torch
    from torch import Tensor

    from transpiler import script


    @script(example="make_example")
    def masked_scores(scores: Tensor, keep: Tensor) -> Tensor:
        low = torch.finfo(scores.dtype).min
        scores = scores.masked_fill(~keep, low)
        return torch.softmax(scores, dim=-1) + torch.finfo(scores.dtype).eps


    @script
    def saturate(counts: Tensor) -> Tensor:
        top = torch.iinfo(torch.int16).max
        return counts.clamp(max=top) + torch.finfo(torch.float16).tiny


    def make_example():
        return torch.randn(2, 5), torch.rand(2, 5) > 0.3
''')


def test_dtype_limits_are_constants_where_the_dtype_is_known_and_read_where_not(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "limits", SOURCE)
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))  # (not the source lines)

    def function(name: str) -> str:
        return code[code.index(f"def {name}("):].split("\n\n\n")[0]

    assert "torch.finfo(scores.dtype).min" in function("masked_scores")  # a float64 call may come
    assert "finfo" not in function("masked_scores_example")  # float32, pinned by its checks
    assert "info" not in function("saturate")  # literal dtypes
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        scores, keep = torch.randn(3, 7, dtype=dtype), torch.rand(3, 7) > 0.5
        keep[:, 0] = True
        with runtime.mode("strict"):
            got = module.masked_scores(scores, keep)
        with runtime.mode("off"):
            want = module.masked_scores(scores, keep)
        torch.testing.assert_close(got, want)
    counts = torch.tensor([1.0, 40000.0, -3.0])
    with runtime.mode("strict"):
        got = module.saturate(counts)
    with runtime.mode("off"):
        torch.testing.assert_close(got, module.saturate(counts))


def test_an_unknown_limit_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from transpiler.cli import main as cli_main

    path = tmp_path / "badlimit.py"
    path.write_text(SOURCE.replace(".eps", ".epsilon"))
    with case_directory(tmp_path):
        assert cli_main(["-q", str(path)]) == 2
    err = capsys.readouterr().err
    assert "error: torch.finfo(...).epsilon is not supported" in err
    assert "compiled code reads bits, eps, max, min, resolution, smallest_normal, tiny" in err


def test_a_limit_of_a_dtype_without_one_raises_as_eager_does(tmp_path: Path) -> None:
    """torch.iinfo of a float dtype is not folded (the compiler does not fail): the call raises."""
    source = SOURCE.replace("top = torch.iinfo(torch.int16).max", "top = torch.iinfo(counts.dtype).max")
    with case_directory(tmp_path):
        module, _ = compiled_case(tmp_path, "limits_bad", source)
    with runtime.mode("off"), pytest.raises(TypeError):
        module.saturate(torch.ones(3))
    with runtime.mode("strict"), pytest.raises(TypeError):
        module.saturate(torch.ones(3))

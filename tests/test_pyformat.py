"""Generated modules are in black's stable style at its default settings (codegen/pyformat.py),
so that `black --check` and a user's own black or ruff-format hook agree with what we write."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, note, settings

black = pytest.importorskip("black")

from codegen.pyformat import format_python  # noqa: E402
from transpiler import script  # noqa: E402
from transpiler.cli import main as cli_main  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import program_gen as pg  # noqa: E402

EXAMPLES = HERE.parent / "examples"


def assert_black_stable(text: str, where: str = "") -> None:
    assert black.format_str(text, mode=black.Mode()) == text, where


def check(source: str) -> None:
    """Ours gives black's output for `source`, and is stable on it. (Generated modules start
    with the future import, from which black infers Python 3.7+: trailing commas after `*a`.)"""
    source = textwrap.dedent(source).lstrip("\n")
    gap = "\n\n" if source.startswith("def ") else "\n"  # black's blank lines after an import
    source = "from __future__ import annotations\n" + gap + source
    want = black.format_str(source, mode=black.Mode())
    assert format_python(source) == want
    assert format_python(want) == want


@pytest.mark.parametrize("source", [
    # a call that fits once its arguments move to their own line
    "def f(x, conv):\n    tmp = F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation, conv.groups)\n",
    # ... and one that does not: one argument a line, with a trailing comma
    "def f(x, conv1):\n    out = F.conv2d(x, conv1.weight, conv1.bias, conv1.stride, conv1.padding, conv1.dilation, conv1.groups)\n",
    # nested calls, the inner one split by commas
    "def f(x, norm, fc):\n    return F.silu(F.linear(F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps), fc.weight, fc.bias))\n",
    # a def: parameters on their own line, then one a line
    "def indexing(x: Tensor, acc: Tensor, threshold: float = 0.5) -> tuple[Tensor, Tensor, Tensor]:\n    pass\n",
    "def k(in0: Tensor, in1: Tensor, in2: Tensor, in3: Tensor, in4: Tensor, in5: Tensor, in6: Tensor) -> Tensor:\n    pass\n",
    "def kernel(out0, in0, in0_s0, in0_s1, in0_s2, in1, in1_s2, n_rows, n1, n2, ROWS: tl.constexpr, COLS: tl.constexpr):\n    pass\n",
    # an assert's test and message are wrapped apart: parentheses around both would make a tuple
    'def f(xs):\n    assert len(xs) > 0, f"{xs} has to be a tuple/list of tensors and some more words here"\n',
    # a string that cannot fit stays long inside its brackets
    'def f():\n    raise _guards.GuardFailure("`self.mean`, `self.var`, `self.count` (written) may share memory with another tensor")\n',
    # a trailing comment stays with the closing bracket; a value's comment moves into parentheses
    "def f(x):\n    mask = torch.ones(x.size(0), x.size(1), dtype=torch.bool, device=x.device)  # bool[?, ?]\n",
    "if t:\n    TS_TILE = 1024  # elements per program of a pointwise kernel (8 per thread of 4 warps)\n",
    "x = 1  # a comment far too long to fit on the line whatever black does with it, really long\n",
    # operators, by priority
    "p = 0.5 + x * (0.16666666666666666 + x * (0.041666666666666664 + x * (0.008333333333333333 + x * 0.001)))\n",
    "y = aaaaaaaaaaaaaaaaaaaaaaa if bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb else cccccccccccccccccccccccccccccccccccccc\n",
    "if aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa is not None and bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb(cccccccccccccccc) < 3:\n    pass\n",
    # tuples: a returned one and a tuple target, attribute chains, subscripts, `**` hugging
    "def f():\n    return aaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbb, ccccccccccccccccccccccccc, dddddddddddd\n",
    "aaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbb = torch.functional.something(cccccccccccccccccc, ddddddddddd)\n",
    "y = torch.slice_scatter(y, last[:, None].expand_as(tmp).to(tmp.dtype, copy=True), 1, None, 4, 1)\n",
    "y = xxxxxxxxxxxxxxxxx[:, None].expand_as(tmppppppppppppppppp).to(tmp.dtype, copy=True).reshape(n, m)\n",
    "y = x ** 2 + x.a ** -1 + f(x) ** 2 + (x + 1) ** 0.5\n",
    "_lib.k(n0, 16, 64, out0.data_ptr(), *out0.stride(), in1.data_ptr(), *in1.stride(), in2.data_ptr(), *in2.stride())\n",
    # a statement written over several lines: joined, or kept exploded by its magic trailing comma
    '_lib = _kernels.Library(KERNELS_CPP, {\n    "a": "iiipi",\n})\n',
    'COMPILED = {\n    "A.forward": A_forward,\n}\n',
    "y = f(\n    a, b\n)\n",
    # strings and comments are left alone, blank lines inside blocks limited to one
    'KERNELS_CPP = r"""\nint f(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j, int k, int l);\n\n\n"""\n',
    "# a comment line that is much longer than eighty-eight characters stays exactly as it is written\nx = 1\n",
    # a table between `# fmt: off` and `# fmt: on` stays as written, the statements after it do not
    '# fmt: off\nT = f(\n    ("a", "b", {"weight": [32, 16, 3, 3], "bias": None, "dilation": (1, 1), "groups": 1,\n'
    '        "padding": (1, 1)}),\n    ("c",),\n)\n# fmt: on\ny = f(\n    a, b\n)\n',
    "if t:\n    import struct\n\n\n    def g():\n        pass\n\n\n    y = 1\n",
])
def test_lines_match_black(source: str) -> None:
    check(source)


def test_examples_are_black_stable() -> None:
    """The committed compiled examples (test_examples checks they are what we generate)."""
    paths = sorted(EXAMPLES.glob("*_compiled.py"))
    assert paths
    for path in paths:
        assert_black_stable(path.read_text(encoding="utf-8"), path.name)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(prog=pg.module_programs())
def test_generated_programs_are_black_stable(tmp_path_factory: pytest.TempPathFactory, prog: pg.Program) -> None:
    directory = tmp_path_factory.mktemp("pyformat")
    path = directory / "prog.py"
    path.write_text(prog.source, encoding="utf-8")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert cli_main([str(path)]) == 0
    text = (directory / "prog_compiled.py").read_text(encoding="utf-8")
    note(text)
    assert_black_stable(text)


def test_jit_module_with_kernels_is_black_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """script(..., example_inputs=...) writes C++ kernels and their launchers, and Triton's where
    the kernels may run through Triton (TORCHSCRIBE_BACKEND=triton here: in its interpreter)."""
    from examples import mlp

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = mlp.make_example()
    with torch.no_grad():
        script(model, example_inputs=inputs)
        if importlib.util.find_spec("triton") is not None and os.environ.get("TRITON_INTERPRET") == "1":
            monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
            script(model, example_inputs=inputs)
    modules = list(tmp_path.rglob("*.py"))
    assert modules
    for path in modules:
        text = path.read_text(encoding="utf-8")
        assert "KERNELS_CPP" in text
        assert_black_stable(text, path.name)
    assert len(modules) == 1 or any("@triton.jit" in path.read_text(encoding="utf-8") for path in modules)

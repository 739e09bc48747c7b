"""Constructs of torchvision's TorchScript-compatible model code: f-strings, raise,
`torch._assert`, `torch.jit.is_scripting()`, `@torch.jit.unused` methods, and generator
expressions over sequences of known length. Each compiles and computes what eager computes,
raising the same exception with the same message where eager raises."""
from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

import runtime
from source_module import case_directory, compiled_case
from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError

HEADER = """\
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script

"""

_ids = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    with case_directory(tmp_path_factory.mktemp("tvconstructs")) as directory:
        yield directory
    runtime.reset()


def build(workdir: Path, body: str):
    return compiled_case(workdir, f"tv_case_{next(_ids)}", HEADER + textwrap.dedent(body))


def outcome(fn, *args):
    """What calling fn gives: ("ok", result) or ("raised", type, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e), str(e))


def same_outcome(fn, *args) -> None:
    with runtime.mode("off"):
        expected = outcome(fn, *args)
    with runtime.mode("strict"):
        got = outcome(fn, *args)
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "raised":
        assert got[1:] == expected[1:]
    else:
        same(got[1], expected[1])


def same(a, b) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(b, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b, (a, b)


# -- f-strings ------------------------------------------------------------------------------------
def test_fstrings_format_like_eager(workdir) -> None:
    m, text = build(workdir, '''
        @script
        def f(x: Tensor, n: int, v: float, name: str) -> str:
            s = f"n={n} v={v:.3f} {name!r:>8} shape={x.shape} {{braces}} 'q' \\"dq\\" tab\\t{x.dim() * 2}"
            return s + f"{n}" "plain" f"{-v}"
        ''')
    assert 'f"' in text
    for args in [(torch.zeros(2, 3), 4, 1.23456, "abc"), (torch.zeros(1), -1, -0.5, "x'y")]:
        same_outcome(m.f, *args)


def test_fstring_with_quotes_inside_values(workdir) -> None:
    m, _ = build(workdir, '''
        @script
        def f(n: int, s: str) -> str:
            t = "neg"
            return f"{s + 'x'}|{n}|" + f"{t if n < 0 else s}"
        ''')
    for args in [(3, "a"), (-3, 'q"')]:
        same_outcome(m.f, *args)


def test_fstring_nested_spec_is_a_diagnostic(workdir) -> None:
    path = workdir / "tv_nested_spec.py"
    path.write_text(HEADER + textwrap.dedent('''
        @script
        def f(n: int, w: int) -> str:
            return f"{n:{w}}"
        '''))
    with pytest.raises(CompileError) as err:
        compile_path(path)
    assert "replacement field inside a format spec" in str(err.value)


# -- raise and torch._assert ----------------------------------------------------------------------
def test_raise_in_branches(workdir) -> None:
    m, text = build(workdir, '''
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if n < 0:
                raise ValueError(f"n must be >= 0, got {n} for {x.shape}")
            elif n == 0:
                raise NotImplementedError
            if n > 10:
                raise Exception("too big")
            y = x * n
            for i in range(n):
                if i == 7:
                    raise RuntimeError(f"seven at {i}")
                y = y + i
            return y
        ''')
    assert "raise ValueError(" in text and "raise NotImplementedError" in text
    for n in (-2, 0, 3, 8, 11):
        same_outcome(m.f, torch.randn(3), n)


def test_raise_on_one_side_keeps_values_of_the_other(workdir) -> None:
    m, _ = build(workdir, '''
        @script
        def f(x: Tensor, mode: int) -> Tuple[Tensor, int]:
            if mode == 0:
                y = x + 1
                k = 1
            elif mode == 1:
                y = x * 2
                k = 2
            else:
                raise ValueError(f"unknown mode {mode}")
            return y, k
        ''')
    for mode in (0, 1, 2):
        same_outcome(m.f, torch.randn(3), mode)


def test_function_that_always_raises(workdir) -> None:
    m, _ = build(workdir, '''
        @script
        def f(x: Tensor) -> Tensor:
            raise RuntimeError("not implemented for " + str(x.dim()))
        ''')
    same_outcome(m.f, torch.randn(2))


def test_torch_assert(workdir) -> None:
    m, text = build(workdir, '''
        @script
        def f(x: Tensor, h: int) -> Tensor:
            n, c, hh, w = x.shape
            torch._assert(hh == h, f"Wrong image height! Expected {h} but got {hh}!")
            torch._assert(x.sum() > -1e9, "tensor condition")
            return x * 2
        ''')
    assert "raise AssertionError(" in text
    x = torch.randn(1, 2, 5, 4)
    same_outcome(m.f, x, 5)
    same_outcome(m.f, x, 6)


# -- torch.jit.is_scripting and @torch.jit.unused -------------------------------------------------
MODULE_SOURCE = '''
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Layer(nn.Module):
    def __init__(self, memory_efficient: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1, bias=False)
        self.memory_efficient = memory_efficient
        self.image_size = 6

    def bn_function(self, inputs: List[Tensor]) -> Tensor:
        return self.conv(torch.cat(inputs, 1))

    @torch.jit.unused
    def any_requires_grad(self, input: List[Tensor]) -> bool:
        return any(t.requires_grad for t in input)

    @torch.jit.unused  # noqa: T484
    def call_checkpoint_bottleneck(self, input: List[Tensor]) -> Tensor:
        def closure(*inputs):
            return self.bn_function(list(inputs))

        return closure(*input) + 1

    @torch.jit.ignore
    def untyped(self, x):
        return {"x": x}["x"] * 3

    def forward(self, input: Tensor) -> Tensor:
        if isinstance(input, Tensor):
            prev = [input[:, :2], input[:, 2:]]
        else:
            prev = input
        torch._assert(input.size(2) == self.image_size,
                      f"Wrong image height! Expected {self.image_size} but got {input.size(2)}!")
        if not torch.jit.is_scripting() and not torch.jit.is_tracing():
            prev = [prev[0], prev[1]]
        if self.memory_efficient and self.any_requires_grad(prev):
            if torch.jit.is_scripting():
                raise Exception("Memory Efficient not supported in JIT")
            out = self.call_checkpoint_bottleneck(prev)
        else:
            out = self.bn_function(prev)
        return self.untyped(F.relu(out))
'''


@pytest.fixture(scope="module")
def layer_module(tmp_path_factory: pytest.TempPathFactory):
    from source_module import imported_source

    root = tmp_path_factory.mktemp("tv_layer")
    with imported_source(root, "tv_layer_models", MODULE_SOURCE) as module:
        yield module


@pytest.mark.parametrize("memory_efficient", [False, True])
def test_unused_methods_and_is_scripting(layer_module, memory_efficient, tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = layer_module.Layer(memory_efficient)
    x = torch.randn(2, 4, 6, 5)
    scripted = script(model, example_inputs=(x,))
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert ".untyped(" in text and "is_scripting" not in text
    with torch.no_grad(), runtime.mode("off"):
        expected = model(x)
    with torch.no_grad(), runtime.mode("strict"):
        got = scripted(x)
    assert torch.allclose(got, expected, atol=1e-6)
    # requires_grad under autograd: the compiled code for autograd, where is_scripting() is False
    # as in eager (the checkpoint path when memory efficient), records the graph
    xg = x.clone().requires_grad_(True)
    with runtime.mode("off"):
        expected = model(xg)
    with runtime.mode("strict"):  # (never eager)
        got = scripted(xg)
    assert got.grad_fn is not None and torch.allclose(got, expected, atol=1e-6)


def test_unused_method_body_is_not_checked(workdir) -> None:
    m, text = build(workdir, '''
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = 2.0

            @torch.jit.unused
            def helper(self, x: Tensor) -> Tensor:
                with torch.no_grad():
                    return x * self.scale

            def forward(self, x: Tensor) -> Tensor:
                if torch.jit.is_tracing():
                    return x
                return self.helper(x) + 1
        ''')
    assert "self.helper(x)" in text
    model = m.M()
    same_outcome(model, torch.randn(3))


# -- generator expressions over sequences of known length ------------------------------------------
def test_generator_expressions_unrolled(workdir) -> None:
    m, _ = build(workdir, '''
        @script
        def f(x: Tensor, y: Tensor, n: int) -> Tuple[bool, bool, Tensor, int, Tuple[Tensor, Tensor], List[int]]:
            tensor_args = (x, y)
            on_cpu = all(t.device.type in ("cpu", "cuda") for t in tensor_args)
            big = any(n > 3 and t.size(0) > n for t in (x, y))
            total = sum(t * i for i, t in ((1, x), (2, y)))
            count = sum([k * n for k in range(4)])
            doubled = tuple(t * 2 for t in tensor_args)
            sizes = list(t.size(0) for t in (x, y))
            return on_cpu, big, total, count, doubled, sizes
        ''')
    for n in (2, 5):
        same_outcome(m.f, torch.randn(6), torch.randn(6), n)

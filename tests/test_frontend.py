"""Hand-picked programs for constructs random programs rarely hit: each is compiled with the CLI
and compared with eager (values, Python types, and mutated inputs)."""
from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from source_module import case_directory, compiled_case

HEADER = """\
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script

SCALE = 0.5

"""

_ids = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    with case_directory(tmp_path_factory.mktemp("frontend")) as directory:
        yield directory
    runtime.reset()


def build(workdir: Path, body: str):
    return compiled_case(workdir, f"frontend_case_{next(_ids)}", HEADER + textwrap.dedent(body))[0]


def same(a, b) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        # (a row-wise function of plain tensors gets kernels, ir/kernel/rows.py: rounding may differ)
        assert_close_to_eager(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b or (a != a and b != b), (a, b)


def check(fn, *args) -> None:
    """Compiled (strict) and eager on clones of the same inputs: results and inputs agree."""
    def clones():
        return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    eager_args, compiled_args = clones(), clones()
    with runtime.mode("off"):
        expected = fn(*eager_args)
    with runtime.mode("strict"):
        got = fn(*compiled_args)
    same(expected, got)
    same(eager_args, compiled_args)


CASES = {
    "short_circuit_and_or": ("""
        @script
        def f(x: Tensor, n: int) -> Tensor:
            # The right side must not run when the left decides (indexing would fail).
            if n < x.size(0) and bool(x[n] > 0):
                x = x + 1
            if n >= x.size(0) or bool(x[n] < 0):
                x = x * 2
            return x
        """, [(torch.randn(4), 2), (torch.randn(4), 9)]),
    "chained_comparison_and_ternary": ("""
        @script
        def f(x: Tensor, a: int, b: int) -> tuple[Tensor, int]:
            k = 1 if 0 <= a < b <= 10 else -1
            y = x * k if a != b else -x
            return y, k + (a if a > b else b)
        """, [(torch.randn(3), 1, 5), (torch.randn(3), 5, 1), (torch.randn(3), 3, 3)]),
    "early_return_in_for": ("""
        @script
        def f(x: Tensor, limit: float) -> tuple[Tensor, int]:
            total = torch.zeros_like(x[0])
            for i in range(x.size(0)):
                total = total + x[i]
                if bool(total.sum() > limit):
                    return total, i
            return total, -1
        """, [(torch.rand(6, 3), 2.0), (torch.rand(6, 3), 100.0)]),
    "nested_loops_break_continue": ("""
        @script
        def f(x: Tensor) -> tuple[Tensor, int]:
            count = 0
            acc = torch.zeros(x.size(1))
            for i in range(x.size(0)):
                if i % 2 == 1:
                    continue
                for j in range(x.size(1)):
                    if bool(x[i, j] < 0):
                        break
                    acc[j] += x[i, j]
                    count += 1
            return acc, count
        """, [(torch.randn(5, 4),)]),
    "while_with_continue": ("""
        @script
        def f(x: Tensor, steps: int) -> Tensor:
            i = 0
            while i < steps:
                i += 1
                if i == 2:
                    continue
                x = torch.tanh(x) + i
            return x
        """, [(torch.randn(3), 5)]),
    "tuple_loop_unrolled": ("""
        @script
        def f(x: Tensor, n: int) -> Tensor:
            for item in (x, n, 2.5):
                x = x + item
            return x
        """, [(torch.randn(3), 4)]),
    "list_loop_and_builtins": ("""
        @script
        def f(xs: list[Tensor], ks: list[int]) -> tuple[Tensor, int, int, float]:
            out = xs[0]
            for t in xs:
                out = out * t
            return out, len(ks), max(ks[0], ks[-1]), float(min(ks[0], 2))
        """, [([torch.randn(2), torch.randn(2), torch.randn(2)], [3, 1, 7])]),
    "isinstance_and_math": ("""
        @script
        def f(x: Tensor, s: float) -> Tensor:
            if isinstance(s, float) and not isinstance(x, int):
                x = x * math.sqrt(s) + math.pi + SCALE
            return x.clamp(min=-math.inf, max=math.floor(s))
        """, [(torch.randn(3), 2.5)]),
    "optional_refinement_early_return": ("""
        @script
        def f(x: Tensor, bias: Optional[Tensor] = None, scale: Optional[float] = None) -> Tensor:
            if bias is None:
                return x
            y = x + bias
            if scale is not None:
                y = y * scale
            return y
        """, [(torch.randn(3),), (torch.randn(3), torch.randn(3)), (torch.randn(3), torch.randn(3), 0.5)]),
    "helper_functions_and_defaults": ("""
        @script
        def helper(x: Tensor, k: int = 2) -> Tensor:
            return x ** k

        @script
        def f(x: Tensor) -> Tensor:
            return helper(x) + helper(x, k=3) + helper(x, 1)
        """, [(torch.randn(4),)]),
    "mutation_through_views": ("""
        @script
        def f(x: Tensor, y: Tensor) -> Tensor:
            v = y[:, 0]
            v.mul_(2)
            x[x < 0] = 0.0
            x[:, 1:3] += 1.0
            y.add_(x)
            return v
        """, [(torch.randn(3, 4), torch.randn(3, 4))]),
    "int_float_semantics": ("""
        @script
        def f(a: int, b: int, c: float) -> tuple[int, float, int, float, bool, int]:
            return a // b, a / b, a % b, c ** 2, a == b or c > 1.0, -a // b
        """, [(7, -2, 1.5), (-7, 3, 0.5)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_function_case(workdir: Path, name: str) -> None:
    body, inputs = CASES[name]
    module = build(workdir, body)
    for args in inputs:
        check(module.f, *args)


def test_module_with_methods_sequential_and_training(workdir: Path) -> None:
    module = build(workdir, """
        @script
        class Net(nn.Module):
            def __init__(self, d: int) -> None:
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
                self.blocks = nn.Sequential(nn.Linear(d, d), nn.Tanh())
                self.drop = nn.Dropout(0.5)
                self.register_buffer("steps", torch.zeros((), dtype=torch.long))
                self.alpha = 0.25

            def mix(self, a: Tensor, b: Tensor) -> Tensor:
                return a * self.alpha + b * (1.0 - self.alpha)

            def forward(self, x: Tensor) -> Tensor:
                h = self.seq(x)
                for layer in self.blocks:
                    h = layer(h)
                if not self.training:
                    self.steps += 1
                return self.mix(self.drop(h), x)
        """)
    torch.manual_seed(0)
    eager_net = module.Net(6).eval()
    compiled_net = module.Net(6).eval()
    compiled_net.load_state_dict(eager_net.state_dict())
    x = torch.randn(2, 6)
    with runtime.mode("off"), torch.no_grad():
        expected = eager_net(x)
    with runtime.mode("strict"), torch.no_grad():
        got = compiled_net(x)
    same(expected, got)
    assert int(compiled_net.steps) == int(eager_net.steps) == 1


def test_sizes_written_out_are_passed_spread(workdir: Path) -> None:
    """`x.permute(0, 2, 3, 1)`, not `x.permute((0, 2, 3, 1))`: torch parses a tuple of sizes
    through a slower path. A tuple held in a name, or of one item, still means the same."""
    mod, text = compiled_case(workdir, f"frontend_case_{next(_ids)}", HEADER + textwrap.dedent("""\
        @script
        def views(x: Tensor, n: int) -> Tensor:
            shape = (-1, n)
            a = x.permute((0, 2, 1)).reshape((n, -1)).view(shape)
            b = x.reshape(n, 6).expand((2, n, 6)).reshape((-1,))
            return a.sum() + b.repeat((2,)).sum() + x.view((n, 3, 2)).sum()
        """))
    for spread in (".permute(0, 2, 1)", ".reshape(n, -1)", ".view(shape)", ".expand(2, n, 6)", ".reshape(-1)",
                   ".repeat(2)"):
        assert spread in text, spread
    check(mod.views, torch.randn(4, 2, 3), 4)

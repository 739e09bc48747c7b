"""Constructs TorchScript accepts that strict mode compiles too (issue 45): `list(xs)`, `assert`,
`with torch.no_grad():`, list comprehensions, `torch.Size(...)`, `next(...)`, `@staticmethod`
helpers and attributes assigned outside `__init__`. Each is compiled ahead of time (the CLI) and,
where it matters, through `script(instance, example_inputs=...)`, and compared with eager in
strict mode (a fallback to eager would raise)."""
from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case, imported_source
from transpiler import script
from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError, UserError

HEADER = """\
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from transpiler import script

"""

_ids = itertools.count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    with case_directory(tmp_path_factory.mktemp("strict_constructs")) as directory:
        yield directory
    runtime.reset()


def build(workdir: Path, body: str):
    module, text = compiled_case(workdir, f"strict_case_{next(_ids)}", HEADER + textwrap.dedent(body))
    return module, text


def same(a, b) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b, (a, b)


def check(fn, *args) -> None:
    """Compiled (strict) and eager on clones of the same inputs: results, raised errors and
    inputs agree."""
    def clones():
        def copy(a):
            return a.clone() if isinstance(a, torch.Tensor) else [copy(t) for t in a] if isinstance(a, list) else a
        return [copy(a) for a in args]

    results = []
    for mode, given in (("off", clones()), ("strict", clones())):
        with runtime.mode(mode):
            try:
                results.append((fn(*given), None, given))
            except AssertionError as e:
                results.append((None, e.args, given))
    (expected, error, eager_args), (got, got_error, compiled_args) = results
    assert error == got_error
    same(expected, got)
    same(eager_args, compiled_args)


def diagnostics_of(tmp_path: Path, body: str) -> list:
    path = tmp_path / "model.py"
    path.write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    try:
        compile_path(path, path.name)
    except CompileError as e:
        return e.diagnostics
    except UserError as e:
        return [e.diagnostic]
    return []


# -- list(xs) -------------------------------------------------------------------------------------
def test_list_of_a_list_is_a_shallow_copy(workdir: Path) -> None:
    module, _ = build(workdir, """
        @script
        def f(xs: List[Tensor], sizes: List[int], pair: Tuple[int, int]) -> Tuple[List[Tensor], List[Tensor], List[int], List[int]]:
            ys = list(xs)
            ys.append(xs[0] * 2)  # the copy grows, the original does not
            ys[0] = ys[0] + 1
            s = list(sizes)
            s[0] = 7
            return xs, ys, s, list(pair) + sizes

        @script
        def g(x: Tensor) -> List[int]:
            s = list(x.shape)  # a list, not the torch.Size a slice of the shape would be
            s.append(1)
            return s
        """)
    check(module.f, [torch.randn(3), torch.randn(3)], [1, 2, 3], (4, 5))
    check(module.g, torch.randn(2, 3))


def test_list_of_a_tuple_of_two_types_is_a_diagnostic(tmp_path: Path) -> None:
    (d,) = diagnostics_of(tmp_path, """
        @script
        def f(x: Tensor, n: int) -> List[int]:
            return list((x, n))
        """)
    assert "list() of a tuple[Tensor, int]: its items have different types" in d.message
    assert d.hint and "keep the tuple" in d.hint


# -- assert -----------------------------------------------------------------------------------------
def test_assert_raises_as_python_does(workdir: Path) -> None:
    module, text = build(workdir, """
        @script
        def f(x: Tensor, y: Optional[Tensor], n: int) -> Tensor:
            assert x.dim() == 2, f"want 2 dims, got {x.dim()}"
            assert n
            assert y is not None  # refines y past it
            assert (x > -100).all(), "a tensor's truth, as bool(t)"
            return x + y * n

        @script
        def g(x: Tensor, n: int) -> Tensor:
            if n > 0:
                return x * n
            assert False, f"n is {n}"  # leaves, as a raise does
        """)
    assert "raise AssertionError(f\"want 2 dims, got" in text
    x = torch.randn(2, 3)
    check(module.f, x, torch.randn(3), 2)
    check(module.f, torch.randn(3), torch.randn(3), 2)  # the message
    check(module.f, x, torch.randn(3), 0)  # no message
    check(module.f, x, None, 1)
    check(module.f, x - 1000, torch.randn(3), 1)
    check(module.g, x, 2)
    check(module.g, x, -1)


def test_an_assert_known_when_compiling_folds(tmp_path: Path, monkeypatch) -> None:
    """Sizes known from the example inputs: the assert on them folds; one on values stays."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "asserting_model", '''
        import torch
        from torch import nn


        class M(nn.Module):
            def forward(self, x):
                assert x.size(1) == 4, "four features"
                assert bool(x.abs().sum() >= 0)
                return x * 2
    ''') as mod:
        model = mod.M()
        x = torch.randn(3, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
                with pytest.raises(AssertionError):
                    compiled(torch.full((3, 4), float("nan")))
    (path,) = (tmp_path / "cache" / "jit").glob("M_*.py")
    text = path.read_text()
    assert "four features" not in text  # folded: the entry check pins size 4
    assert "raise AssertionError" in text


# -- with torch.no_grad() ---------------------------------------------------------------------------
def test_with_no_grad_runs_its_body(workdir: Path) -> None:
    module, text = build(workdir, """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            y = x + 1
            with torch.no_grad():
                z = y * 2
                if n > 2:
                    return z
            with torch.inference_mode():
                z = z + 1
            return z + y

        @script
        class Counter(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = nn.Linear(3, 3)
                self.register_buffer("total", torch.zeros(3))

            def forward(self, x: Tensor) -> Tensor:
                y = self.lin(x)
                with torch.no_grad():
                    self.total.add_(y.sum(0))
                return y
        """)
    # (the generic code keeps a block as Python, which switches grad off as eager does; the one
    # that returns cannot stay Python and keeps its check)
    assert text.count("_guards.check_no_autograd(") == 1
    assert "    with torch.no_grad():\n        self.total.add_(y.sum(0))\n" in text
    for n in (1, 5):
        check(module.f, torch.randn(2, 3), n)
    model = module.Counter()
    x = torch.randn(2, 3)
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(x)
            eager_total = model.total.clone()
        model.total.zero_()
        with runtime.mode("strict"):
            got = model(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(model.total, eager_total, rtol=0, atol=0)


def test_with_no_grad_under_autograd_runs_compiled(workdir: Path) -> None:
    """Where autograd records a graph, the block must switch it off: the generic code keeps it
    as Python, which does, and runs (strict mode: not eagerly)."""
    module, _ = build(workdir, """
        @script
        def f(x: Tensor) -> Tensor:
            with torch.no_grad():
                y = x * 2
            return x + y
        """)
    x = torch.randn(3, requires_grad=True)
    with runtime.mode("strict"):
        got = module.f(x)
    with runtime.mode("off"):
        expected = module.f(x)
    assert got.requires_grad and torch.equal(got, expected)
    got.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(3))  # y holds no graph


def test_no_grad_decorator(workdir: Path, tmp_path: Path) -> None:
    """`@torch.no_grad()` on a compiled method: the generic code (code for autograd) is a function
    decorated so (tests/test_grad_off.py), whatever the dispatcher's wrapper does."""
    module, text = build(workdir, """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = nn.Linear(3, 3)

            @torch.no_grad()
            def forward(self, x: Tensor) -> Tensor:
                return self.lin(x)
        """)
    assert "@torch.no_grad()\ndef M_forward(" in text and "check_no_autograd" not in text
    model = module.M()
    x = torch.randn(2, 3)
    with runtime.mode("strict"):  # (the dispatcher runs it inside the decorator's wrapper)
        got = model(x)
    with runtime.mode("off"):
        eager = model(x)
    assert not got.requires_grad and not eager.requires_grad and torch.equal(got, eager)
    (d,) = diagnostics_of(tmp_path, """
        @script
        @torch.enable_grad()
        def f(x: Tensor) -> Tensor:
            return x
        """)
    assert "decorator `@torch.enable_grad()` on a compiled function is not supported" in d.message


def test_with_no_grad_through_script_instance(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "no_grad_model", '''
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.register_buffer("seen", torch.zeros(4))

            def forward(self, x):
                y = self.lin(x)
                with torch.no_grad():
                    self.seen.copy_(y.mean(0))
                return y.relu()
    ''') as mod:
        model, twin = mod.M(), mod.M()
        twin.load_state_dict(model.state_dict())
        x = torch.randn(3, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                got = compiled(x)
            expected = twin(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(model.seen, twin.seen, rtol=0, atol=0)


# -- list comprehensions ----------------------------------------------------------------------------
def test_list_comprehensions(workdir: Path) -> None:
    module, text = build(workdir, """
        @script
        def f(xs: List[Tensor], n: int) -> List[Tensor]:
            x = xs[0]
            ys = [x * 2 for x in xs if bool(x.sum() > 0)]
            zs = [x + i for i in range(n) for x in xs if i % 2 == 0 if i > 0]
            ws = [x + i for i, x in enumerate((xs[0], xs[1]))]
            vs = list(x - 1 for x in xs)
            return ys + zs + ws + vs + [x]  # x is still xs[0]: a comprehension's names do not leak

        @script
        def g(xs: List[Optional[Tensor]], x: Tensor) -> Tuple[List[Tensor], List[int], List[int]]:
            present = [t for t in xs if t is not None]
            return present, [s // 2 for s in x.shape], [i * i for i in range(3)]

        @script
        def h(rows: List[List[int]], n: int) -> Tuple[List[int], int, float]:
            flat = [v * 2 for row in rows for v in row if v > 0]
            return flat, sum(i for i in range(n) if i % 3 != 0), sum([float(v) for v in flat])
        """)
    assert " in xs:" in text and ".append(" in text
    xs = [torch.randn(3) for _ in range(4)]
    for n in (0, 3, 5):
        check(module.f, xs, n)
    check(module.g, [torch.randn(2), None, torch.randn(2)], torch.randn(4, 6, 2))
    check(module.h, [[1, -2, 3], [], [4]], 7)
    check(module.h, [], 0)


def test_comprehensions_over_module_lists(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "comprehension_model", '''
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList([nn.Linear(4, 2) for _ in range(3)])

            def forward(self, x):
                outs = [head(x) for head in self.heads]
                return torch.cat([outs[i] * i for i in range(len(outs)) if i != 1], 1)
    ''') as mod:
        model = mod.M()
        x = torch.randn(5, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                got = compiled(x)
            expected = model(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_comprehension_diagnostics(tmp_path: Path) -> None:
    (d,) = diagnostics_of(tmp_path, """
        @script
        def f(xs: List[Tensor], n: int) -> List[int]:
            return [v for v in (xs[0], n)]
        """)
    assert "different types" in d.message
    got = diagnostics_of(tmp_path, """
        @script
        def f(xs: List[Tensor]) -> Tensor:
            d = {i: x for i, x in enumerate(xs)}
            s = {x for x in xs}
            return xs[0]
        """)
    assert [d.message for d in got] == ["dict comprehensions are not supported", "set comprehensions are not supported"]
    assert not diagnostics_of(tmp_path, """
        @script
        def f(xs: List[Tensor]) -> Tensor:
            return sum(x * 2 for x in xs)
        """)  # (Python's sum of the tensors: tests/test_common_idioms.py)
    assert all(d.hint for d in got)


# -- torch.Size, next, @staticmethod, attributes outside __init__ ------------------------------------
def test_torch_size_next_and_static_helpers(workdir: Path) -> None:
    module, text = build(workdir, """
        @script
        def f(x: Tensor, n: List[int]) -> Tuple[bool, bool, bool, Tensor]:
            s = torch.Size([2, 3])
            t = torch.Size(n)
            return x.size() == s, x.shape == t, isinstance(t, tuple), x.new_zeros(torch.Size([s[0], 4]))

        @script
        def g(xs: List[Tensor], t: Tuple[int, float]) -> Tensor:
            return next(iter(xs)) * next(iter(t))

        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = nn.Parameter(torch.ones(3) * 2)
                self.build(3)
                self.reset()

            def build(self, d: int) -> None:
                self.lin = nn.Linear(d, d)
                self.register_buffer("shift", torch.arange(3.0))

            def reset(self) -> None:
                self.offset = 0.5

            @staticmethod
            def helper(x: Tensor, k: int = 2) -> Tensor:
                return M.twice(x) + k

            @staticmethod
            def twice(x: Tensor) -> Tensor:
                return x * 2

            def forward(self, x: Tensor) -> Tensor:
                p = next(self.parameters())
                b = next(iter(self.buffers()))
                return self.helper(self.lin(x.to(p.dtype))) * p + M.helper(b, k=3) + self.offset
        """)
    assert "torch.Size(n)" in text and "raise StopIteration" in text
    for x, n in ((torch.randn(2, 3), [2, 3]), (torch.randn(3, 2), [3, 3])):
        check(module.f, x, n)
    check(module.g, [torch.randn(3), torch.randn(3)], (2, 0.5))
    with runtime.mode("off"), pytest.raises(StopIteration):
        module.g([], (2, 0.5))
    with runtime.mode("strict"), pytest.raises(StopIteration):
        module.g([], (2, 0.5))
    model = module.M()
    x = torch.randn(4, 3)
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(x)
        with runtime.mode("strict"):
            got = model(x)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_attributes_assigned_in_methods_init_calls(workdir: Path) -> None:
    module, _ = build(workdir, """
        @script
        class M(nn.Module):
            def __init__(self, d: int) -> None:
                super().__init__()
                self.head = self._make(d)

            def _make(self, d: int) -> nn.Linear:
                self.width = d
                with torch.no_grad():
                    self._reset()
                return nn.Linear(d, d)

            def _reset(self) -> None:
                self.scale = 0.5

            def forward(self, x: Tensor) -> Tensor:
                return self.head(x) * self.scale + self.width
        """)
    model = module.M(3)
    x = torch.randn(2, 3)
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(x)
        with runtime.mode("strict"):
            got = model(x)
        model.scale = 2.0  # set later on the instance: read when the call runs
        with runtime.mode("strict"):
            torch.testing.assert_close(model(x), model.head(x) * 2.0 + 3, rtol=0, atol=0)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_attributes_of_torchs_layers_ahead_of_time(workdir: Path) -> None:
    """`self.fc.weight`, `self.embed.embedding_dim`, `self.norm.eps` of torch's own layers, read
    by generic code (no instance when compiling): typed as their `__init__` assigns them."""
    module, text = build(workdir, """
        import math

        import torch.nn.functional as F

        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(10, 8)
                self.norm = nn.LayerNorm(8)
                self.conv = nn.Conv2d(2, 2, 3, stride=2)

            def forward(self, ids: Tensor, img: Tensor) -> Tensor:
                x = self.embed(ids) * math.sqrt(self.embed.embedding_dim)
                x = F.layer_norm(x, self.norm.normalized_shape, self.norm.weight, self.norm.bias, self.norm.eps)
                logits = x @ self.embed.weight.t()  # (tied weights)
                bias = self.conv.bias
                if bias is not None:
                    logits = logits + bias.sum()
                return logits.sum(-1) + self.conv.stride[0] * self.conv.kernel_size[1] + img.sum()
        """)
    assert ".embedding_dim" in text and ".eps" in text  # (read when the call runs)
    model = module.M().eval()
    ids, img = torch.randint(0, 10, (2, 5)), torch.randn(1, 2, 5, 5)
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(ids, img)
        with runtime.mode("strict"):
            got = model(ids, img)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_next_parameter_and_static_helper_through_script_instance(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "next_model", '''
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x):
                return self.fc(x)


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
                self.init_weights()

            def init_weights(self):
                self.gain = 1.5

            @staticmethod
            def squash(x):
                return torch.tanh(x) * 2

            def forward(self, x):
                w = next(self.parameters())  # block.fc.weight
                x = x.to(dtype=w.dtype, device=w.device)
                return M.squash(self.block(x)) * self.gain + self.squash(w.sum())
    ''') as mod:
        model = mod.M()
        x = torch.randn(3, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                got = compiled(x)
            expected = model(x)
    torch.testing.assert_close(got, expected)  # (tanh in a fused kernel: rounding)


def test_diagnostics_of_unsupported_next_and_size_and_attributes(tmp_path: Path) -> None:
    got = diagnostics_of(tmp_path, """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = nn.Linear(3, 3)

            def configure(self, n: int) -> None:
                self.extra = n

            def forward(self, x: Tensor) -> Tensor:
                p = next(self.parameters())
                return self.lin(x) * p.sum() + self.extra
        """)
    # (both, in one run: the attribute set outside __init__ is an error of its own)
    assert [d.message for d in got] == ["the compiler cannot tell which is the first of `self.parameters()`",
                                        "`M` has no attribute `extra` that the compiler can see"]
    assert "self.fc.weight.device" in got[0].hint
    (d,) = diagnostics_of(tmp_path, """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = nn.Linear(3, 3)

            def configure(self, n: int) -> None:
                self.extra = n

            def forward(self, x: Tensor) -> Tensor:
                return self.lin(x) + self.extra
        """)
    assert "`M` has no attribute `extra`" in d.message
    assert "assigned in `configure` (line 16)" in d.hint and "extra: <type>" in d.hint
    (d,) = diagnostics_of(tmp_path, """
        @script
        def f(x: Tensor) -> Tensor:
            return x.new_zeros(torch.Size(x))
        """)
    assert "torch.Size of a Tensor" in d.message


def test_the_constructs_through_script_instance(tmp_path: Path, monkeypatch) -> None:
    """Specialised to example inputs (sizes known, kernels fused): the same values as eager."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "constructs_model", '''
        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x):
                assert x.dim() == 2, "rows of features"
                outs = [layer(x).relu() for layer in self.layers]
                kept = list(outs)
                kept.append(x)  # outs keeps its three
                first = next(iter(outs))
                if x.size() == torch.Size([x.size(0), 4]):
                    first = first + 1
                parts = [outs[i] * (i + 1) for i in range(len(outs)) if i != 1]
                return torch.cat(parts + [first, kept[-1]], 1), len(outs), len(kept)
    ''') as mod:
        model = mod.M()
        x, y = torch.randn(5, 4), torch.randn(2, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                got = compiled(x), compiled(y)  # another batch size: the same code
            expected = model(x), model(y)
    torch.testing.assert_close(got, expected)
    text = next((tmp_path / "cache" / "jit").glob("M_*.py")).read_text()
    assert "rows of features" not in text  # the rank is pinned at entry: the assert folded


def test_permissive_mode_keeps_the_unsupported_forms_as_python(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "kept_model", '''
        import contextlib

        import torch
        from torch import nn


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, x):
                with contextlib.nullcontext():
                    y = self.lin(x)
                with torch.enable_grad():
                    y = y + 1
                w = next(iter({"a": y}.values()))
                d = {k: y for k in range(2)}
                assert len(d) == 2
                with torch.no_grad():
                    y = y * 2
                return y + w + d[1] + list((y, x))[1]
    ''') as mod:
        model = mod.M()
        x = torch.randn(2, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,), permissive=True)
            with runtime.mode("strict"):
                got = compiled(x)
            expected = model(x)
    torch.testing.assert_close(got, expected)
    text = next((tmp_path / "cache" / "jit").glob("M_*.py")).read_text()
    for why in ("with statements are not supported here", "dict comprehensions are not supported"):
        assert f"kept as Python: {why}" in text
    assert text.count("kept as Python") == 3  # the no_grad block, the assert, list() and next() of .values() compile


# -- an attribute assigned a conditional expression in __init__ -------------------------------------
def test_attribute_assigned_a_conditional_expression_is_optional(workdir: Path) -> None:
    """`self.bias = nn.Parameter(...) if bias else None`: an Optional parameter, which `forward`
    may pass on as one or test with `is None`; both instances run compiled."""
    module, _ = build(workdir, """
        @script
        class Scale(nn.Module):
            def __init__(self, n: int, bias: bool) -> None:
                super().__init__()
                self.weight = nn.Parameter(torch.rand(n) + 0.5)
                self.bias = nn.Parameter(torch.rand(n)) if bias else None
                self.shift = 0.5 if bias else 1.0

            def forward(self, x: Tensor) -> Tensor:
                y = torch.nn.functional.layer_norm(x, self.weight.shape, self.weight, self.bias)
                if self.bias is not None:
                    y = y + self.bias
                return y * self.shift
        """)
    for bias in (True, False):
        check(module.Scale(6, bias).eval(), torch.randn(3, 6))


def test_attribute_assigned_a_math_function_of_its_arguments(workdir: Path) -> None:
    """`self.scale = math.sqrt(d)` is a float, `self.half = math.floor(d / 2)` an int (a size)."""
    module, _ = build(workdir, """
        import math

        @script
        class Scaled(nn.Module):
            def __init__(self, d: int) -> None:
                super().__init__()
                self.scale = math.sqrt(d)
                self.half = math.floor(d / 2)

            def forward(self, x: Tensor) -> Tensor:
                return x[:, : self.half] * self.scale
        """)
    check(module.Scaled(6).eval(), torch.randn(3, 6))


def test_bodies_on_the_line_of_their_header(workdir: Path) -> None:
    """`def forward(self, x): return ...`, `if c: return x`, `for ...: x = ...` on one line: a
    body libcst keeps as a suite of small statements (it crashed with a KeyError)."""
    module, _ = build(workdir, """
        @script
        class OneLine(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lin = nn.Linear(4, 4)

            def forward(self, x: Tensor, n: int) -> Tensor: return self.step(x, n)

            def step(self, x: Tensor, n: int) -> Tensor:
                if n < 0: return x
                for _ in range(n): x = torch.tanh(self.lin(x))
                while n > 5: n -= 1; x = x * 0.5
                return x
        """)
    model = module.OneLine().eval()
    for n in (-1, 2, 7):
        check(model, torch.randn(3, 4), n)


def test_attribute_assigned_math_prod_is_not_taken_for_a_float(workdir: Path) -> None:
    """`math.prod` of ints is an int (and `math.modf` a tuple): its type is not guessed as float;
    the class-level annotation declares it, and it is then a size."""
    module, _ = build(workdir, """
        import math

        @script
        class Flat(nn.Module):
            area: int

            def __init__(self, h: int, w: int) -> None:
                super().__init__()
                self.area = math.prod([h, w])

            def forward(self, x: Tensor) -> Tensor:
                return x.reshape(x.size(0), self.area)
        """)
    check(module.Flat(2, 3).eval(), torch.randn(4, 2, 3))


def test_attribute_assigned_math_prod_unannotated_asks_for_its_type(tmp_path: Path) -> None:
    """Unannotated, `math.prod(...)` is not taken for a float (a reshape by it would then be a
    type error at run time): the diagnostic asks for the attribute's type."""
    found = diagnostics_of(tmp_path, """
        import math

        @script
        class Flat(nn.Module):
            def __init__(self, h: int, w: int) -> None:
                super().__init__()
                self.area = math.prod([h, w])

            def forward(self, x: Tensor) -> Tensor:
                return x.reshape(x.size(0), self.area)
        """)
    assert any("self.area" in d.message and "cannot be determined" in d.message for d in found), found

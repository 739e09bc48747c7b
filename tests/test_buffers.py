"""Buffers a compiled function keeps between calls (runtime/buffers.py, ir/passes/plan.py
`keep_buffers`): the sets and slots themselves, and compiled models whose large temporaries go
into them, called again and again (other batch sizes, two threads at once, results held across
calls) against eager; hypothesis draws the programs."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime
from closeness import assert_close_to_eager
from runtime import buffers
from source_module import imported_source


@pytest.fixture(autouse=True)
def _no_sets_left() -> None:
    buffers.release()
    yield
    buffers.release()


def test_a_set_given_back_is_taken_again_and_one_in_use_is_never_shared() -> None:
    a = buffers.take("f")
    b = buffers.take("f")
    assert a is not b  # (two calls at once)
    buffers.give(a)
    assert buffers.take("g") is not a  # (another function's)
    assert buffers.take("f") is a
    assert buffers.take("f") is not a  # (a is in use again)


def test_a_slot_keeps_its_largest_storage_and_views_its_start() -> None:
    s = buffers.Buffers("f")
    x = s.get(0, (2, 3, 4), torch.float32)
    assert x.shape == (2, 3, 4) and x.dtype == torch.float32 and x.is_contiguous()
    assert s.get(0, (2, 3, 4), torch.float32) is x
    smaller = s.get(0, (1, 3, 4), torch.float32)
    assert smaller.data_ptr() == x.data_ptr() and smaller.shape == (1, 3, 4)
    larger = s.get(0, (4, 3, 4), torch.float32)
    assert larger.shape == (4, 3, 4)
    assert s.get(0, (3, 4), torch.float64).data_ptr() == larger.data_ptr()  # (another dtype in the same bytes)
    assert s.get(1, (3, 4), torch.float32).data_ptr() != larger.data_ptr()
    assert s.get(2, (), torch.int64).shape == () and s.get(3, (0, 5), torch.float32).numel() == 0


def test_a_slot_is_a_plain_cpu_tensor_whatever_the_mode_and_default_device() -> None:
    s = buffers.Buffers("f")
    with torch.inference_mode(), torch.device("meta"):
        x = s.get(0, (2, 3), torch.float32)
    assert x.device.type == "cpu" and not x.is_inference()
    torch.matmul(torch.ones(2, 2), torch.ones(2, 3), out=x)  # (outside inference mode: an inference tensor refuses)


def test_nothing_is_kept_when_switched_off(monkeypatch) -> None:
    monkeypatch.setattr(buffers, "KEEP", False)
    a = buffers.take("f")
    buffers.give(a)
    assert buffers.take("f") is not a


SOURCE = """
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(256, 1024)
        self.down = nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(x * 2.0 + 1.0)
        w = torch.sigmoid(x) * 3.0 - x
        n = F.layer_norm(x, (256,))
        u = self.up(h) + self.up(n)
        y = self.down(F.silu(u) - u * 0.5)
        return y, torch.relu(h - y) * w * n
"""


@contextlib.contextmanager
def _compiled_net(tmp_path, monkeypatch, stem: str) -> Iterator[tuple[torch.nn.Module, Any, str]]:
    """SOURCE's Net (seeded weights), script() of it for [B, 1024, 256] inputs, and the text of
    the module that generated."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, stem, SOURCE) as mod:
        torch.manual_seed(0)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 1024, 256),))
        yield net, compiled, next((tmp_path / "cache" / "jit").glob("*.py")).read_text()


def test_kept_buffers_give_eagers_values_call_after_call(tmp_path, monkeypatch) -> None:
    """The net's temporaries h and the layer norm n (a row-reduction kernel), 1 MB an image
    each, both read again at the end, and the products of the up-projection go into kept
    buffers; calls at batch 2, 3 and 2 again, in strict mode, match eager, and the results of
    the first call are not changed by the later ones."""
    with _compiled_net(tmp_path, monkeypatch, "kept_net") as (net, compiled, text), torch.no_grad():
        # h and n: one kernel's two outputs, slots 0 and 1; up(h) and up(n), 4 MB an image: 2, 3
        assert [text.count(f"buffers.get({n}, ") for n in range(5)] == [1, 1, 1, 1, 0], text
        assert text.count("out=buffers.get(") == 2 and "_buffers.give(buffers)" in text, text
        first_x = torch.randn(2, 1024, 256)
        with runtime.mode("strict"):
            first = compiled(first_x)
        held = [t.clone() for t in first]
        for batch in (3, 2, 2):
            x = torch.randn(batch, 1024, 256)
            with runtime.mode("strict"):
                got = compiled(x)
            assert_close_to_eager(got, net(x), msg=f"batch {batch}")
        assert all(torch.equal(a, b) for a, b in zip(first, held))
        assert_close_to_eager(first, net(first_x))


def test_buffers_made_in_inference_mode_serve_calls_outside_it(tmp_path, monkeypatch) -> None:
    """The first call runs under torch.inference_mode(); the later ones under no_grad write the
    same buffers (a GEMM through `out=`), which an inference tensor would refuse."""
    with _compiled_net(tmp_path, monkeypatch, "kept_inference") as (net, compiled, _):
        for mode in (torch.inference_mode, torch.no_grad, torch.inference_mode, torch.no_grad):
            x = torch.randn(2, 1024, 256)
            with mode(), runtime.mode("strict"):
                got = compiled(x)
            with torch.no_grad():
                assert_close_to_eager(got, net(x), msg=mode.__name__)


def test_two_threads_calling_at_once_get_their_own_buffers(tmp_path, monkeypatch) -> None:
    with _compiled_net(tmp_path, monkeypatch, "kept_threads") as (net, compiled, _):
        inputs = [torch.randn(2, 1024, 256) for _ in range(2)]
        with torch.no_grad():
            expected = [net(x) for x in inputs]
        failures: list[str] = []

        def run(k: int) -> None:
            with torch.no_grad():
                for i in range(12):
                    got = compiled(inputs[k])
                    if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(got, expected[k])):
                        failures.append(f"thread {k}, call {i}")

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures


def _program(steps: list[tuple[str, int, int]], returned: int) -> str:
    """A forward over [B, 256, 1024] activations (1 MB an image): each step a pointwise chain of
    one or two earlier values or a linear of one; it returns the last value and one drawn."""
    lines, layers = [], []
    for i, (kind, a, b) in enumerate(steps):
        v, x, y = f"v{i + 1}", f"v{a}", f"v{b}"
        if kind == "unary":
            lines.append(f"{v} = torch.tanh({x}) * 0.5 + 0.25")
        elif kind == "binary":
            lines.append(f"{v} = torch.sigmoid({x}) * {y} - {x}")
        else:
            layers.append(f"        self.lin{i} = nn.Linear(1024, 1024)")
            lines.append(f"{v} = self.lin{i}({x})")
    body = "\n".join("        " + line for line in lines)
    return (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self) -> None:\n        super().__init__()\n" + ("\n".join(layers) or "        pass") + "\n\n"
        "    def forward(self, v0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:\n"
        f"{body}\n        return v{len(steps)}, v{returned} + 0.0\n")


@st.composite
def _steps(draw: st.DrawFn) -> tuple[list[tuple[str, int, int]], int]:
    n = draw(st.integers(3, 8))  # (operands drawn among all earlier values: some live on, some die)
    steps = [(draw(st.sampled_from(["unary", "binary", "linear", "linear"])), draw(st.integers(0, i)),
              draw(st.integers(0, i))) for i in range(n)]
    return steps, draw(st.integers(0, n))


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=_steps(), seed=st.integers(0, 2**16))
def test_drawn_programs_with_kept_buffers_match_eager(program, seed, tmp_path_factory, monkeypatch) -> None:
    """Values live across other steps (drawn operands), so slots are shared and not shared; each
    program is called at batch 2, 1 and 2 and checked against eager every time, the results of
    the first call again at the end."""
    from transpiler import script

    steps, returned = program
    root = tmp_path_factory.mktemp("kept")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(root / "cache"))
    with imported_source(root, f"kept_{root.name}", _program(steps, returned)) as mod:
        torch.manual_seed(seed)
        net = mod.Net().eval()
        with torch.no_grad():
            compiled = script(net, example_inputs=(torch.randn(2, 256, 1024),))
            calls = [torch.randn(b, 256, 1024) for b in (2, 1, 2)]
            results = []
            for x in calls:
                with runtime.mode("strict"):
                    results.append(compiled(x))
                assert_close_to_eager(results[-1], net(x))
            assert_close_to_eager(results[0], net(calls[0]), msg="the first call's results, after the others")

"""The op report of benchmarks/hf_bench.py: how it attributes the aten ops of a compiled forward
(Python, extern, runtime) and which kept-as-Python markers it says ran. First on a hand-written
module laid out as codegen writes one, where every count is known; then on a small model compiled
by script(..., permissive=True). No timing."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from benchmarks.hf_bench import (
    GENERATED_PREFIX,
    GeneratedFile,
    Marker,
    count_ops,
    new_generated_modules,
    op_report,
)

pytestmark = pytest.mark.corpus


def helper(t: Tensor) -> Tensor:
    """Code in another file than the generated module: Python, charged to the statement calling it."""
    return t * 2 + 1


FAKE = '''\
import torch


def k0_cpp(x):
    out = torch.empty_like(x)
    return out.copy_(x)


def M_forward(x, helper):
    if x.dim() != 2:
        raise ValueError("rank")
    # m.py:3  y = torch.relu(x)
    y = torch.relu(x)
    # m.py:4: kept as Python: dict displays are not supported
    d = {"s": y.sum()}
    # m.py:5: kept as Python: `helper` is not compiled
    z = helper(y)
    # m.py:6  w = helper2(x)
    w = helper(x)
    # m.py:7  return k0(y) + z
    return k0_cpp(y) + z + w + d["s"]


def M_unused(x):
    # m.py:9: kept as Python: with statements are not supported
    with torch.no_grad():
        y = x.exp()
    return y
'''


def eager(x: Tensor, helper: Any) -> Tensor:
    y = torch.relu(x)
    d = {"s": y.sum()}
    return y + helper(y) + helper(x) + d["s"]


def load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"{GENERATED_PREFIX}M_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_sites_of_a_generated_file() -> None:
    gen = GeneratedFile("m_gen.py", FAKE)
    lines = FAKE.splitlines()
    assert gen.site(lines.index("    out = torch.empty_like(x)") + 1).kind == "runtime"  # a launcher
    assert gen.site(lines.index('        raise ValueError("rank")') + 1).kind == "compiled"  # entry checks
    kept = gen.site(lines.index("        y = x.exp()") + 1)  # the body of a kept `with`
    assert kept.kind == "kept" and kept.markers == (Marker("m.py", 9, "with statements are not supported"),)
    compiled = gen.site(lines.index("    w = helper(x)") + 1)
    assert compiled.kind == "compiled" and compiled.source == "m.py:6  w = helper2(x)"
    assert gen.site(lines.index("    return y") + 1).kind == "kept"  # no comment of its own: the same run
    assert [m.line for m in gen.markers] == [4, 5, 9]


def test_attribution_on_a_hand_written_module(tmp_path: Path) -> None:
    path = tmp_path / "M_test.py"
    path.write_text(FAKE, encoding="utf-8")
    module = load(path)
    x = torch.randn(2, 3)
    try:
        report = op_report(count_ops(eager, (x, helper)), module.M_forward, (x, helper), [str(path)])
    finally:
        del sys.modules[f"{GENERATED_PREFIX}M_test"]
    # eager: relu, sum, add, (mul, add), (mul, add), add, add
    assert report.eager == 9
    # Python: sum (kept dict), mul and add in helper from the kept line 5, mul and add in helper from
    # the compiled line 6; extern: relu and the three adds of line 7; runtime: copy_, and empty_like
    assert (report.python, report.extern, report.runtime, report.runtime_alloc) == (5, 4, 1, 1)
    assert report.in_kernels_or_extern == pytest.approx(1 - 5 / 9)
    rows = {(k.marker.line, k.count, k.ops, k.ran) for k in report.kept}
    assert rows == {(4, 1, 1, True), (5, 1, 2, True), (9, 1, 0, False)}
    assert report.calls == [("m.py:6  w = helper2(x)", 2)]


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(self.lin(x))
        stats = {"m": h.mean()}
        return torch.tanh(h) * 2 + stats["m"]


def test_attribution_on_a_compiled_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model = Tiny().eval()
    before = set(sys.modules)
    with torch.no_grad():
        compiled = script(model, example_inputs=(torch.randn(2, 8),), permissive=True)
    generated = new_generated_modules(before)
    assert len(generated) == 1
    args = (torch.randn(3, 8),)
    report = op_report(count_ops(model, args), compiled, args, generated)
    assert report.python >= 1 and report.extern >= 1  # h.mean() kept; the linear's matmul emitted
    assert 0 < report.in_kernels_or_extern < 1
    kept = [k for k in report.kept if "dict" in k.marker.reason]
    assert kept and kept[0].ran and kept[0].ops >= 1
    assert report.calls == []

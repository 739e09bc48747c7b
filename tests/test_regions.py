"""Regions kept eager (issue 48, point 3): `script(model, ..., keep_eager=...)` compiles the model
with the calls of chosen submodules left as eager's calls of the live module, and `regions=True`
chooses them by timing each region compiled and eager (transpiler/regions.py). The timing is
forced here (a stand-in for the timer), never measured: no test depends on this machine's speed."""

from __future__ import annotations

import copy
import json
import logging

import pytest
import torch
from torch import nn

import runtime
import runtime.stats
from transpiler import regions, script


class Counted(nn.Module):
    """A block whose forward writes a buffer, so a test sees which code ran it."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(1)
        return torch.relu(self.bn(self.conv(x))) + x


class Staged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.stages = nn.Sequential(Counted(8), Counted(8), Counted(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(torch.relu(self.stem(x)))
        return self.head(x.mean((2, 3)))


def _model() -> tuple[Staged, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    model = Staged().eval()
    with torch.no_grad():
        for stage in model.stages:
            stage.bn.running_mean.uniform_(-0.5, 0.5)
            stage.bn.running_var.uniform_(0.5, 2.0)
    return model, (torch.randn(2, 3, 8, 8),)


def _text(cache) -> str:
    [path] = [p for p in (cache / "jit").glob("Staged_*.py")]
    return path.read_text()


def _function(text: str) -> str:
    return text[text.index("def Staged_forward"):]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TORCHSCRIBE_REGIONS", raising=False)
    monkeypatch.setattr(regions, "SIGNIFICANT", 0.0)  # (every region timed, whatever its real time here)
    return tmp_path


def test_kept_submodules_are_called_as_eager_calls_them(cache) -> None:
    """`keep_eager=["stages.1", "head"]`: the compiled forward calls the live `stages[1]` and `head`
    (their own forward runs: the buffer it writes moves as eager's does), inlines the other
    stages, and matches eager in strict mode, where a fallback would raise."""
    model, inputs = _model()
    reference = copy.deepcopy(model)
    scripted = script(model, example_inputs=inputs, keep_eager=["stages.1", "head"])
    body = _function(_text(cache))
    assert "_guards.item(stages, 1)(" in body and '_guards.attr(self, "head")(' in body
    assert "_guards.item(stages, 0)(" not in body and "_guards.item(stages, 2)(" not in body
    assert "def Counted_forward" not in _text(cache)  # (the kept forward is the live module's, not printed)
    runtime.stats.reset_fallback_counts()
    with torch.no_grad(), runtime.mode("strict"):
        for _ in range(2):
            torch.testing.assert_close(scripted(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)
    assert runtime.fallback_counts() == {}
    for ours, theirs in zip(model.stages, reference.stages):
        assert float(ours.seen) == float(theirs.seen) == 2.0


def test_the_kept_call_runs_the_live_modules_forward(cache, monkeypatch) -> None:
    """The kept call is nn.Module's call of the module: the forward its class has when it runs
    (counted here by a wrapper put on the class after compiling) runs for the kept stage alone;
    the other stages run compiled code. Like an inlined submodule, the kept one is pinned by an
    entry check to its class without hooks (the shapes after it come from its forward)."""
    model, inputs = _model()
    scripted = script(model, example_inputs=inputs, keep_eager=["stages.1"])
    ran = []
    forward = Counted.forward
    monkeypatch.setattr(Counted, "forward", lambda self, x: (ran.append(self), forward(self, x))[1])
    with torch.no_grad(), runtime.mode("strict"):
        scripted(*inputs)
        assert ran == [model.stages[1]]
        model.stages[1].register_forward_hook(lambda m, a, out: None)
        with pytest.raises(runtime.TorchscribeError, match="'stages.1' is not an unhooked Counted"):
            scripted(*inputs)


class Stage(nn.Module):
    """A stage that halves the size where it has a `down` layer: instances with and without one
    are variants of the class (`Stage`, `Stage@2`) whose results have other shapes."""

    def __init__(self, c: int, down: bool) -> None:
        super().__init__()
        self.down = nn.Conv2d(c, c, 2, stride=2) if down else None
        self.block = Counted(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.down is not None:
            x = self.down(x)
        return self.block(x)


class Pyramid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.Sequential(Stage(8, False), Stage(8, True), Stage(8, False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(x).flatten(1)


def test_what_follows_a_kept_call_has_the_shapes_of_its_variant(cache) -> None:
    """The code after a kept stage is compiled for what that stage's own variant returns (a
    quarter of the positions here), not what another variant of its class returns."""
    torch.manual_seed(0)
    model, x = Pyramid().eval(), torch.randn(2, 8, 8, 8)
    scripted = script(model, example_inputs=(x,), keep_eager=["stages.1"])
    [path] = (cache / "jit").glob("Pyramid_*.py")
    assert "# f32[B, 8, 4, 4]@cpu" in path.read_text()  # (4x4 positions after it, not 8x8)
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(scripted(x), model(x), rtol=1e-5, atol=1e-5)


class Looped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Counted(8) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_an_item_of_a_module_list_loop_is_kept(cache) -> None:
    """A loop over a ModuleList, unrolled, calls the kept item as eager does, the others inlined."""
    torch.manual_seed(0)
    model, x = Looped().eval(), torch.randn(2, 8, 4, 4)
    scripted = script(model, example_inputs=(x,), keep_eager=["blocks.1"])
    [path] = (cache / "jit").glob("Looped_*.py")
    body = path.read_text().split("def Looped_forward")[1]
    assert "_guards.item(blocks, 1)(" in body and "item(blocks, 0)(" not in body and "item(blocks, 2)(" not in body
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(scripted(x), model(x), rtol=1e-5, atol=1e-5)


class Features(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()), Counted(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)


def test_a_kept_container_stays_one_call(cache) -> None:
    """A region that is itself a Sequential (an item of a top-level container) is called once,
    not unrolled into its layers."""
    torch.manual_seed(0)
    model, x = Features().eval(), torch.randn(2, 3, 8, 8)
    scripted = script(model, example_inputs=(x,), keep_eager=["features.0"])
    [path] = (cache / "jit").glob("Features_*.py")
    body = path.read_text().split("def Features_forward")[1]
    assert "_guards.item(features, 0)(x)" in body and "conv2d" not in body.split("item(features, 0)(x)")[0]
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(scripted(x), model(x), rtol=1e-5, atol=1e-5)


def test_keep_eager_names_regions_only(cache) -> None:
    model, inputs = _model()
    with pytest.raises(TypeError, match=r"'stages\.1\.conv' is not a region of this Staged .*stem, stages\.0"):
        script(model, example_inputs=inputs, keep_eager=["stages.1.conv"])
    with pytest.raises(TypeError, match="sequence of submodule paths"):
        script(model, example_inputs=inputs, keep_eager="head")
    with pytest.raises(TypeError, match="for its example inputs"):
        script(model, regions=True)


class _Forced:
    """A stand-in for the timer: seconds per call by region and way, whatever runs; for the
    whole model, the time with the candidates kept over the time compiled whole."""

    def __init__(self, slower: dict[int, float], whole: float = 0.9) -> None:
        self.slower = slower  # id(region module) -> compiled's time over eager's
        self.whole = whole
        self.calls = 0
        self.wholes = 0

    def __call__(self, calls, budget_s, rounds=regions.ROUNDS):
        for call in calls.values():
            call()  # (run as the real timer runs them: strict mode would raise here)
        if "kept" in calls:  # the whole model, with and without the candidates kept
            self.wholes += 1
            return {"compiled": [[1e-2]] * rounds, "kept": [[1e-2 * self.whole]] * rounds}
        self.calls += 1
        region = self.current
        return {"eager": [[1e-3]] * rounds, "compiled": [[1e-3 * self.slower.get(id(region), 0.5)]] * rounds}


def test_regions_measured_slower_are_kept_and_the_decision_is_cached(cache, monkeypatch, caplog) -> None:
    """`regions=True`: the region the (forced) timer finds slower compiled is kept eager, the
    others compiled; the decisions go to the cache, and a second script() of the model reads
    them without timing anything and compiles the same module."""
    model, inputs = _model()
    forced = _Forced({id(model.stages[2]): 1.5})
    real_measure = regions.measure

    def measure(region, compile, budget_s=regions.BUDGET_S):
        forced.current = region.module
        return real_measure(region, compile, budget_s)

    monkeypatch.setattr(regions, "measure", measure)
    monkeypatch.setattr(regions, "time_in_turns", forced)
    with caplog.at_level(logging.INFO, logger="torchscribe.regions"):
        scripted = script(model, example_inputs=inputs, regions=True)
    found = {d.region: d for d in regions.decisions(scripted)}
    assert sorted(found) == ["head", "stages.0", "stages.1", "stages.2", "stem"]
    assert [name for name, d in found.items() if d.kept] == ["stages.2"]
    assert found["stages.2"].eager_ms / found["stages.2"].compiled_ms == pytest.approx(1 / 1.5)
    assert "stages.2: kept eager, compiled alone at 0.67x eager's speed" in caplog.text
    assert "the whole model with stages.2 kept took 0.90x the time of the model compiled whole" in caplog.text
    assert forced.calls == 5 + 1 and forced.wholes == 1  # (one found slower is timed twice, then the whole)
    [stored] = (cache / "regions").glob("*.json")
    assert [d["region"] for d in json.loads(stored.read_text())["decisions"] if d["kept"]] == ["stages.2"]
    body = _function(next(p for p in (cache / "jit").glob("Staged_*.py") if "item(stages, 2)(" in p.read_text()).read_text())
    assert "_guards.item(stages, 1)(" not in body
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(scripted(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)

    monkeypatch.setattr(regions, "time_in_turns", lambda *a, **k: pytest.fail("measured again"))
    again = script(model, example_inputs=inputs, regions=True)
    assert [d.region for d in regions.decisions(again) if d.kept] == ["stages.2"]


def test_regions_are_off_by_default_and_by_environment(cache, monkeypatch) -> None:
    model, inputs = _model()
    monkeypatch.setattr(regions, "time_in_turns", lambda *a, **k: pytest.fail("measured"))
    assert regions.decisions(script(model, example_inputs=inputs)) == []
    monkeypatch.setenv("TORCHSCRIBE_REGIONS", "off")
    assert regions.decisions(script(model, example_inputs=inputs, regions=None)) == []
    monkeypatch.setenv("TORCHSCRIBE_REGIONS", "on")
    with pytest.raises(pytest.fail.Exception, match="measured"):
        script(model, example_inputs=inputs)


def test_a_region_is_kept_only_when_a_second_measure_agrees(cache, monkeypatch) -> None:
    """A region the first measure finds slower (a busy spell of the machine) but the second does
    not stays compiled; one both find slower is kept."""
    model, inputs = _model()
    ratios = {id(model.stages[0]): [1.5, 0.9], id(model.stages[1]): [1.5, 1.4]}  # compiled / eager, per measure
    forced = _Forced({})
    real_measure = regions.measure

    def measure(region, compile, budget_s=regions.BUDGET_S):
        forced.current = region.module
        times = ratios.get(id(region.module), [0.5])
        forced.slower = {id(region.module): times.pop(0) if len(times) > 1 else times[0]}
        return real_measure(region, compile, budget_s)

    monkeypatch.setattr(regions, "measure", measure)
    monkeypatch.setattr(regions, "time_in_turns", forced)
    found = regions.decisions(script(model, example_inputs=inputs, regions=True))
    assert [d.region for d in found if d.kept] == ["stages.1"]


def test_candidates_are_kept_only_where_the_whole_model_runs_faster(cache, monkeypatch) -> None:
    """Regions slower alone are candidates: kept only where the whole model compiled with them
    kept runs faster than compiled whole; not here, where it runs slower (a layout change at the
    region's edges, say). The measure is cached with the decision."""
    model, inputs = _model()
    forced = _Forced({id(model.stages[0]): 1.3, id(model.stages[2]): 1.5}, whole=1.2)
    real_measure = regions.measure

    def measure(region, compile, budget_s=regions.BUDGET_S):
        forced.current = region.module
        return real_measure(region, compile, budget_s)

    monkeypatch.setattr(regions, "measure", measure)
    monkeypatch.setattr(regions, "time_in_turns", forced)
    found = regions.decisions(script(model, example_inputs=inputs, regions=True))
    assert not any(d.kept for d in found) and forced.wholes == 1
    whole = {d.region: d.whole for d in found if d.whole}
    assert sorted(whole) == ["stages.0", "stages.2"]
    assert whole["stages.0"].startswith("the whole model with stages.0, stages.2 kept took 1.20x the time")
    assert whole["stages.0"].endswith(": not kept")
    again = script(model, example_inputs=inputs, regions=True)
    assert forced.wholes == 1  # (the second script() read the decisions)
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(again(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


def _timed(name: str, eager_ms: float, ratios: list[float]) -> regions.Region:
    r = regions.Region(name, nn.Identity(), calls=1, eager_ms=eager_ms, ratios=ratios)
    r.compiled_ms = eager_ms / sorted(ratios)[len(ratios) // 2]
    return r


def test_a_region_is_kept_only_when_slower_beyond_the_noise_and_significant() -> None:
    """Kept: slower in three rounds of four by more than the margin, and at least 1% of the
    regions' eager time. Not kept: slower by the median but faster in a quarter of the rounds;
    slower but negligible; faster; not timed (with why)."""
    found = regions.judge([
        _timed("slow", 10.0, [0.8, 0.85, 0.9, 0.82, 0.88, 0.86, 0.84, 0.83]),
        _timed("noisy", 10.0, [0.8, 0.85, 0.9, 1.1, 1.2, 0.86, 1.15, 0.83]),
        _timed("level", 10.0, [0.98, 0.985, 0.99, 0.975, 0.99, 0.98, 0.985, 0.99]),
        _timed("tiny", 0.05, [0.5] * 8),
        _timed("fast", 100.0, [1.5] * 8),
        regions.Region("odd", nn.Identity(), result="called with other than positional tensors"),
    ])
    assert [(d.region, d.kept) for d in found] == [("slow", True), ("noisy", False), ("level", False),
                                                   ("tiny", False), ("fast", False), ("odd", False)]
    assert found[-1].describe() == "odd: not measured (called with other than positional tensors)"


def test_timing_takes_turns_and_fewer_rounds_for_long_calls() -> None:
    """Each way runs once untimed, then in every round (at least once); a call longer than the
    budget of a round gets fewer rounds, but four (the quartiles need them)."""
    import time

    ran: list[str] = []
    quick = regions.time_in_turns({"a": lambda: ran.append("a"), "b": lambda: ran.append("b")}, 0.004)
    assert [len(quick["a"]), len(quick["b"])] == [regions.ROUNDS] * 2
    assert ran[:2] == ["a", "b"] and len(ran) == 2 + sum(len(r) for r in quick["a"] + quick["b"])
    slow = regions.time_in_turns({"a": lambda: time.sleep(0.02), "b": lambda: None}, 0.02)
    assert len(slow["a"]) == len(slow["b"]) == 4 and all(len(r) >= 1 for r in slow["a"])

"""Ways of making one call measured and chosen (runtime/choices.py), on a clock the test moves;
and each way of the packed linear and conv (runtime/prepacked.py) against torch's call."""

from __future__ import annotations

import contextlib
import gc
import json
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from runtime import choices, prepacked


@pytest.fixture(autouse=True)
def _fresh_choices(monkeypatch, tmp_path):
    """Each test decides anew, in a cache of its own, and leaves no decision behind."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(choices, "TUNE", True)
    with choices.pinned(None):
        yield


@pytest.fixture
def pin():
    """pin(way): the calls of the rest of the test take `way` (choices.pinned)."""
    with contextlib.ExitStack() as stack:
        yield lambda way: stack.enter_context(choices.pinned(way))


class Clock:
    """`time.perf_counter` for choices.py: moves only when a way runs."""

    def __init__(self) -> None:
        self.now = 0.0
        self.runs: list[str] = []

    def perf_counter(self) -> float:
        return self.now

    def way(self, name: str, seconds: float):
        def run() -> str:
            self.runs.append(name)
            self.now += seconds
            return name
        return run


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(choices, "time", types.SimpleNamespace(perf_counter=c.perf_counter))
    return c


def test_the_fastest_way_is_chosen_and_kept(clock) -> None:
    ways = {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3), "c": clock.way("c", 3e-3)}
    assert choices.chosen("fam", 4) is None
    assert choices.measure("fam", 4, ways) in ways
    assert choices.chosen("fam", 4) == "b"
    assert choices.chosen("fam", 5) is None  # (another size is measured on its own)
    [(family, size, way, times)] = choices.decisions()
    assert (family, size, way) == ("fam", 4, "b") and times == pytest.approx({"a": 2e-3, "b": 1e-3, "c": 3e-3})


def test_the_default_stays_unless_another_way_is_faster_by_more_than_the_margin(clock) -> None:
    choices.measure("fam", 1, {"default": clock.way("default", 1e-3), "other": clock.way("other", 0.98e-3)})
    assert choices.chosen("fam", 1) == "default"
    choices.measure("fam", 2, {"default": clock.way("default", 1e-3), "other": clock.way("other", 0.9e-3)})
    assert choices.chosen("fam", 2) == "other"


def test_noise_only_adds_time_so_the_least_of_the_runs_counts(clock) -> None:
    stalls = iter([0, 0, 5e-3] + [0] * 100)  # the fast way stalls once in a timed round

    def stalling() -> str:
        clock.now += 1e-3 + next(stalls)
        return "fast"

    choices.measure("fam", 1, {"slow": clock.way("slow", 2e-3), "fast": stalling})
    assert choices.chosen("fam", 1) == "fast"


def test_cheap_calls_get_more_rounds_within_the_bounds(clock) -> None:
    choices.measure("cheap", 1, {"a": clock.way("a", 1e-5), "b": clock.way("b", 1e-5)})
    assert clock.runs.count("a") == 1 + choices.MAX_ROUNDS
    clock.runs.clear()
    choices.measure("dear", 1, {"a": clock.way("a", 0.1), "b": clock.way("b", 0.1)})
    assert clock.runs.count("a") == 1 + choices.MIN_ROUNDS


def test_with_tuning_off_or_one_way_only_the_default_runs(clock, monkeypatch) -> None:
    monkeypatch.setattr(choices, "TUNE", False)
    assert choices.measure("fam", 1, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)}) == "a"
    assert clock.runs == ["a"] and choices.chosen("fam", 1) == "a"
    monkeypatch.setattr(choices, "TUNE", True)
    assert choices.measure("one", 1, {"b": clock.way("b", 1e-3)}) == "b" and clock.runs == ["a", "b"]


def test_a_pinned_way_is_taken_where_a_call_has_it(clock) -> None:
    choices.measure("before", 1, {"a": clock.way("a", 1e-3)})
    with choices.pinned("b"):
        assert choices.chosen("before", 1) is None  # (decisions made before are dropped)
        assert choices.measure("fam", 1, {"a": clock.way("a", 1e-3), "b": clock.way("b", 2e-3)}) == "b"
        assert choices.measure("other", 1, {"a": clock.way("a", 2e-3), "c": clock.way("c", 1e-3)}) == "a"
        assert clock.runs == ["a", "b", "a"]  # (nothing timed)
        assert (choices.chosen("fam", 1), choices.chosen("other", 1)) == ("b", "a")
    assert choices.decisions() == [] and choices._pinned is None


def test_past_the_sizes_measured_a_family_follows_the_nearest_without_its_per_size_ways(clock) -> None:
    for size in range(1, choices.MAX_SIZES + 1):
        fast = "per_size" if size == 3 else "b"
        times = {"a": 3e-3, "b": 2e-3, "per_size": 1e-3 if fast == "per_size" else 4e-3}
        choices.measure("fam", size * 10, {n: clock.way(n, t) for n, t in times.items()},
                        per_size=frozenset({"per_size"}))
    assert choices.chosen("fam", 30) == "per_size"
    assert choices.chosen("fam", 32) == "b"  # (nearest 30, whose next fastest is b)
    assert choices.chosen("fam", 1000) == "b"
    assert len(choices.decisions()) == choices.MAX_SIZES


# -- decisions kept on disk --------------------------------------------------------------------
def test_a_later_process_takes_the_decisions_of_an_earlier_one_without_measuring(clock) -> None:
    family = ("linear", (768, 3072), True, True, False, 2)
    choices.measure(family, 197, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)}, per_size=frozenset({"b"}))
    choices.measure(("conv2d", 1), 1, {"a": clock.way("a", 1e-3), "b": clock.way("b", 2e-3)})
    assert len(list((choices.cache_dir() / "choices").glob("*.json"))) == 1
    choices.forget()  # (as a new process starts)
    runs = len(clock.runs)
    assert choices.chosen(family, 197) == "b" and choices.chosen(("conv2d", 1), 1) == "a"
    assert choices.chosen(family, 198) is None
    assert len(clock.runs) == runs
    [(_, _, _, times), _] = choices.decisions()
    assert times == pytest.approx({"a": 2e-3, "b": 1e-3})
    assert choices.without_per_size(family, 197) == "a"


@pytest.mark.parametrize("damage", ["not json", "another machine", "another format", "a bad entry"])
def test_a_file_of_decisions_that_is_not_this_machines_is_no_decision(clock, damage) -> None:
    choices.measure("fam", 1, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)})
    [path] = (choices.cache_dir() / "choices").glob("*.json")
    data = json.loads(path.read_text())
    if damage == "another machine":
        data["machine"] += " (other)"
    elif damage == "another format":
        data["format"] += 1
    elif damage == "a bad entry":
        data["decisions"][0]["family"] = "import os"
    path.write_text("{" if damage == "not json" else json.dumps(data))
    choices.forget()
    assert choices.chosen("fam", 1) is None
    choices.measure("fam", 1, {"a": clock.way("a", 1e-3), "b": clock.way("b", 2e-3)})  # (and it is written anew)
    choices.forget()
    assert choices.chosen("fam", 1) == "a"


def test_pinned_or_with_tuning_off_the_file_is_neither_read_nor_written(clock, monkeypatch) -> None:
    choices.measure("fam", 1, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)})
    [path] = (choices.cache_dir() / "choices").glob("*.json")
    written = path.read_text()
    with choices.pinned("a"):
        assert choices.chosen("fam", 1) is None
        choices.measure("other", 1, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)})
    monkeypatch.setattr(choices, "TUNE", False)
    choices.forget()
    assert choices.chosen("fam", 1) is None
    choices.measure("third", 1, {"a": clock.way("a", 2e-3), "b": clock.way("b", 1e-3)})
    assert path.read_text() == written


# -- the ways of the packed linear and conv ------------------------------------------------------
LINEAR_WAYS = ["onednn", "mkl", "torch"]


@pytest.mark.parametrize("way", LINEAR_WAYS + [None])
@pytest.mark.parametrize("x", [
    torch.randn(5, 256), torch.randn(2, 7, 256), torch.randn(2, 256, 7).transpose(1, 2), torch.randn(5, 512)[:, ::2],
    torch.randn(0, 256), torch.randn(256), torch.randn(1, 256).expand(6, 256),
])
def test_each_way_of_the_packed_linear_computes_what_linear_computes(way, x, pin) -> None:
    """None: the way measured."""
    torch.manual_seed(0)
    pin(way)
    w = nn.Parameter(torch.randn(1024, 256) / 16)
    x = x.clone() if x.stride() == (0, 1) else x
    with torch.no_grad():
        for bias in (None, torch.randn(1024)):
            got, expected = prepacked.linear(x, w, bias), F.linear(x, w, bias)
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
            assert got.shape == expected.shape and got.stride() == expected.stride()
        w.mul_(-1.0)  # the next call sees the new values
        torch.testing.assert_close(prepacked.linear(x, w, None), F.linear(x, w, None), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("way", LINEAR_WAYS)
def test_each_way_keeps_nans_and_infinities_where_linear_has_them(way, pin) -> None:
    torch.manual_seed(0)
    pin(way)
    w, b = torch.randn(1024, 256), torch.randn(1024)
    x = torch.randn(5, 256)
    x[1, 3], x[2, 7], x[3] = float("nan"), float("inf"), 0.0
    w_nan = w.clone()
    w_nan[4, 0] = float("nan")
    with torch.no_grad():
        for weight in (w, w_nan):
            got, expected = prepacked.linear(x, weight, b), F.linear(x, weight, b)
            assert torch.equal(got.isnan(), expected.isnan()) and torch.equal(got.isinf(), expected.isinf())
            torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4, equal_nan=True)


def _packs(weight: torch.Tensor) -> list:
    found = prepacked._PACKED.entries.get(id(weight))
    return [] if found is None else sorted(key[0] for key in found[1])


def test_only_the_pack_of_the_way_measured_fastest_is_kept() -> None:
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(1024, 256))
    with torch.no_grad():
        prepacked.linear(torch.randn(64, 256), w, None)
    [(_, rows, way, times)] = choices.decisions()
    assert rows == 64 and set(times) == {"onednn", "mkl", "torch"}
    assert _packs(w) == ([] if way == "torch" else [way])


def test_a_weight_has_mkl_packs_for_so_many_row_counts_made_again_when_it_is_written(pin) -> None:
    torch.manual_seed(0)
    pin("mkl")
    w = nn.Parameter(torch.randn(512, 256))
    with torch.no_grad():
        for rows in (1, 2, 3, 4, 2):
            x = torch.randn(rows, 256)
            torch.testing.assert_close(prepacked.linear(x, w, None), F.linear(x, w), atol=1e-4, rtol=1e-4)
        assert _packs(w) == ["mkl"] * prepacked.MKL_PACKS_KEPT + ["onednn"]  # (rows 3 and 4: the default)
        w.mul_(-2.0)
        x = torch.randn(2, 256)
        torch.testing.assert_close(prepacked.linear(x, w, None), F.linear(x, w), atol=1e-4, rtol=1e-4)
    key = id(w)
    del w
    gc.collect()
    assert key not in prepacked._PACKED.entries



@pytest.mark.parametrize("way", LINEAR_WAYS)
def test_a_linear_of_a_kind_seen_before_takes_the_call_kept_while_nothing_it_depends_on_changed(
        way, pin, monkeypatch) -> None:
    """prepacked._FAST: the second call of a kind skips the decision and the pack's lookup, and
    computes with the bias it is given; a written weight, no bias, another input's sizes or
    layout, or decisions dropped (pinned) go the long way again. Values as F.linear's throughout; the entry goes with the weight."""
    torch.manual_seed(0)
    pin(way)
    w, b = nn.Parameter(torch.randn(512, 256) / 16), torch.randn(512)
    long_way = []
    real = prepacked._linear
    monkeypatch.setattr(prepacked, "_linear", lambda *a: long_way.append(1) or real(*a))

    def check(x, bias, long):
        before = len(long_way)
        torch.testing.assert_close(prepacked.linear(x, w, bias), F.linear(x, w, bias), atol=1e-4, rtol=1e-4)
        assert len(long_way) - before == long, (x.shape, long)

    x = torch.randn(8, 256)
    with torch.no_grad():
        check(x, b, 1)  # (measured: nothing kept)
        check(x, b, 1)  # (decided: its call kept)
        check(torch.randn(8, 256), b, 0)  # (same kind: the call kept)
        w.mul_(-1.0)
        check(x, b, 1)  # (the weight was written)
        check(x, b, 0)
        check(x, b.clone() * 2, 0)  # (another bias of the same kind: the call kept, given that bias)
        check(x, None, 1)  # (no bias: another kind, measured, then kept)
        check(x, None, 1)
        check(x, None, 0)
        check(torch.randn(9, 256), b, 1)  # (other sizes: measured, then kept)
        check(torch.randn(9, 256), b, 1)
        check(torch.randn(9, 256), b, 0)
        check(torch.randn(256, 8).t(), b, 1)  # (another layout)
        with choices.pinned("torch" if way != "torch" else "onednn"):
            check(x, b, 1)  # (decisions dropped)
        check(x, b, 1)
    keys = [k for k in prepacked._FAST if k[0] == id(w)]
    assert keys
    del w
    gc.collect()
    assert not any(k in prepacked._FAST for k in keys)


@pytest.mark.parametrize("way", ["onednn", "torch", "linear", "gemm_into"])
def test_a_conv_of_a_kind_seen_before_takes_the_call_kept_while_nothing_it_depends_on_changed(
        way, pin, monkeypatch) -> None:
    """prepacked._CONV_FAST, as _FAST for linears: a written weight, no bias, another input's sizes
    or layout, an `out` given or not, or decisions dropped (pinned) go the long way again; another
    bias of the same kind takes the call kept. Values and layout as F.conv2d's throughout; the
    entry goes with the weight."""
    torch.manual_seed(0)
    pin(way)
    w, b = nn.Parameter(torch.randn(32, 16, 1, 1) / 4), torch.randn(32)
    long_way = []
    real = prepacked._conv2d
    monkeypatch.setattr(prepacked, "_conv2d", lambda *a: long_way.append(1) or real(*a))
    args = ((1, 1), (0, 0), (1, 1), 1)

    def nhwc(*sizes):
        return torch.randn(*sizes).contiguous(memory_format=torch.channels_last)

    def check(x, bias, long, into=False):
        before = len(long_way)
        out = torch.empty(x.shape[0], 32, *x.shape[2:]).contiguous(memory_format=torch.channels_last) if into else None
        got, expected = prepacked.conv2d(x, w, bias, *args, out=out), F.conv2d(x, w, bias, *args)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        assert got.stride() == expected.stride() or not x.is_contiguous(memory_format=torch.channels_last)
        assert len(long_way) - before == long, (x.shape, long)

    into = way == "gemm_into"  # (a way of calls given `out` only)
    x = nhwc(2, 16, 7, 7)
    with torch.no_grad():
        check(x, b, 1, into)  # (measured: nothing kept)
        check(x, b, 1, into)  # (decided: its call kept)
        check(nhwc(2, 16, 7, 7), b, 0, into)  # (same kind: the call kept)
        w.mul_(-1.0)
        check(x, b, 1, into)  # (the weight was written)
        check(x, b, 0, into)
        check(x, b.clone() * 2, 0, into)  # (another bias of the same kind, given to the call)
        check(x, None, 1, into)  # (no bias: another kind, measured, then kept)
        check(x, None, 1, into)
        check(x, None, 0, into)
        check(x, b, 1, not into)  # (`out` given or not: another kind)
        check(x, b, 1, not into)
        check(x, b, 0, not into)
        check(nhwc(3, 16, 5, 5), b, 1, into)  # (other sizes)
        check(nhwc(3, 16, 5, 5), b, 1, into)
        check(nhwc(3, 16, 5, 5), b, 0, into)
        check(torch.randn(2, 16, 7, 7), b, 1, into)  # (another layout: oneDNN's way, then kept)
        check(torch.randn(2, 16, 7, 7), b, 1, into)
        check(torch.randn(2, 16, 7, 7), b, 0, into)
        with choices.pinned("torch" if way != "torch" else "onednn"):
            check(x, b, 1, into)  # (decisions dropped)
        check(x, b, 1, into)
    keys = [k for k in prepacked._CONV_FAST if k[0] == id(w)]
    assert keys
    del w
    gc.collect()
    assert not any(k in prepacked._CONV_FAST for k in keys)


CONV_WAYS = ["onednn", "torch", "linear"]


@pytest.mark.parametrize("way", CONV_WAYS + [None])
@pytest.mark.parametrize(("kernel", "stride", "padding", "groups"),
                         [(1, 1, 0, 1), (3, 1, 1, 1), (1, 2, 0, 1), (3, 2, 1, 2)])
def test_each_way_of_the_packed_conv_computes_what_conv2d_computes(way, kernel, stride, padding, groups,
                                                                   pin) -> None:
    """`linear` is a way of 1x1 convs of stride 1 only; elsewhere the pin falls back to the default."""
    torch.manual_seed(0)
    pin(way)
    w = nn.Parameter(torch.randn(32, 16 // groups, kernel, kernel) / 8)
    for batch in (1, 3):
        row_major = torch.randn(batch, 16, 9, 9)
        for x in (row_major, row_major.contiguous(memory_format=torch.channels_last)):
            with torch.no_grad():
                for bias in (None, torch.randn(32)):
                    args = ((stride, stride), (padding, padding), (1, 1), groups)
                    got, expected = prepacked.conv2d(x, w, bias, *args), F.conv2d(x, w, bias, *args)
                    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
                    nhwc = x.is_contiguous(memory_format=torch.channels_last)
                    assert got.shape == expected.shape and (got.stride() == expected.stride() or not nhwc)
    taken = {way for family, _, way, _ in choices.decisions() if family[0] == "conv2d"}
    if way is not None:  # (a row-major input always takes oneDNN's way)
        assert taken == {way if way != "linear" or (kernel, stride) == (1, 1) else "onednn", "onednn"}

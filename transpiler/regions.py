"""Regions of a model that its compiled code does not run faster than eager, found by measuring
and kept eager (issue 48, point 3: no slower than eager, by construction).

A region is one of the model's top-level submodules, or an item of a top-level container
(`stages.2`, `blocks.7`): the parts a model author reads as its structure, and the calls the
entry's own code makes. `script(model, example_inputs=..., regions=True)` (or
TORCHSCRIBE_REGIONS=on) decides, before compiling the model:

1. two eager calls of the model on the example inputs: the first untimed (it makes what later
   calls reuse), the second records what each region is called with (its first call in it)
   and how long that took; a region under `SIGNIFICANT` of all regions' time is not timed;
2. each other region called with positional tensors alone is compiled on its own, as `script()`
   compiles a module, for those inputs, and timed beside its eager self in turns: `ROUNDS`
   rounds (fewer, four at least, for calls longer than a round's share of the budget), each
   running both for `BUDGET_S / ROUNDS` seconds (one call at least), in strict run mode
   (compiled code that would run eagerly is no measure); each round gives the ratio of the
   least times (noise only adds time), eager's over compiled's;
3. a region is a candidate when compiled is slower beyond this machine's noise: the upper
   quartile of the rounds' ratios is under `MARGIN` (slower in three rounds of four by more than
   the margin), and it takes at least `SIGNIFICANT` of the regions' eager time; and a second
   measure of it, in turns again, says so too (a busy spell of the machine may favour one way
   for a whole measure);
4. a region compiled alone is not what the whole model's compilation makes of it (nothing
   fuses across its edges, and the memory layout at them is eager's: keeping convnext_atto's
   stem norm eager, 0.61x alone, made the whole model 0.67x as fast), so the candidates are
   checked on the whole model: it is compiled with them kept and timed in turns
   beside the model compiled whole (`WHOLE_BUDGET_S` each), and they are kept only where that
   runs faster beyond the noise (the upper quartile of the rounds' ratios of its time to the
   whole compiled model's under `MARGIN`); else none is;
5. the model is compiled with the regions kept (`keep_eager`, ir/passes/inline.py): its code
   calls them as eager does, the rest compiled as before.

A region that does not compile alone, or is called otherwise, stays compiled.

Decisions are tuning decisions, as runtime/choices.py's are: they live in the cache directory
(`<cache>/regions/<key>.json`; the key is the model's `script()` key with the CPU model and the
thread count), never in a module's text, so a later `script()` of the same model on the same
machine reads them and measures nothing, and compiles what the decisions say. Delete the file to
measure again. The logger `torchscribe.regions` says at INFO which regions were measured slower,
whether they were kept, and the ratios that decided it; `decisions(scripted)` returns them.

Measuring costs each region's compilation (about the model's own, again), its timing
(`BUDGET_S` a region and way) and, where there are candidates, the model's compilation with
them kept, once per model, machine and thread count: it is off by default (docs/models.md).
benchmarks/regions.py profiles a whole corpus this way."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn

import runtime
from runtime import native
from runtime.files import write_atomic
from runtime.loader import cache_dir

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
ROUNDS = 8
BUDGET_S = 0.25  # of timed calls per region and way (eager, compiled), over the rounds
WHOLE_BUDGET_S = 1.0  # of timed calls of the whole model, with and without candidates kept
MARGIN = 0.97  # kept eager where compiled is slower than this fraction of eager's speed ...
SIGNIFICANT = 0.01  # ... and the region takes at least this share of the regions' eager time
FILE_FORMAT = 2
log = logging.getLogger("torchscribe.regions")


@dataclass(eq=False)  # compared by identity: `in` on a list of regions
class Region:
    name: str
    module: nn.Module
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    result: str = ""  # empty while timed, else why it was not
    eager_ms: float = float("nan")
    compiled_ms: float = float("nan")
    ratios: list[float] = field(default_factory=list)  # eager / compiled, per round

    def slower(self, total_ms: float, margin: float = 1.0) -> bool:
        """Compiled slower than eager beyond the noise (the upper quartile of the rounds' ratios
        under `margin`) in a region that matters (at least SIGNIFICANT of `total_ms`)."""
        found = quartiles(self.ratios)
        return (not self.result and self.compiled_ms > self.eager_ms and found is not None and found[1] < margin
                and self.eager_ms >= SIGNIFICANT * total_ms)


@dataclass(frozen=True)
class Decision:
    """What was measured of one region, and whether it is kept eager."""

    region: str
    kept: bool
    eager_ms: float = float("nan")
    compiled_ms: float = float("nan")
    low: float = float("nan")  # quartiles of the rounds' ratios, eager / compiled
    high: float = float("nan")
    note: str = ""  # why it was not timed
    whole: str = ""  # a candidate's: what the whole model measured with the candidates kept

    def describe(self) -> str:
        if self.note:
            return f"{self.region}: not measured ({self.note})"
        verdict = "kept eager" if self.kept else "compiled"
        return (f"{self.region}: {verdict}, compiled alone at {self.eager_ms / self.compiled_ms:.2f}x eager's speed "
                f"({self.compiled_ms:.3f} ms against {self.eager_ms:.3f} ms; middle half of rounds "
                f"{self.low:.2f}-{self.high:.2f}x)" + (f"; {self.whole}" if self.whole else ""))


def quartiles(ratios: list[float]) -> tuple[float, float] | None:
    """The lower and upper quartiles of the rounds' ratios (None for fewer than four)."""
    if len(ratios) < 4:
        return None
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return q1, q3


def enabled(option: bool | None) -> bool:
    """`script(..., regions=...)` where given, else TORCHSCRIBE_REGIONS (`on`; anything else off)."""
    return option if option is not None else os.environ.get("TORCHSCRIBE_REGIONS", "off") == "on"


def regions_of(model: nn.Module) -> list[Region]:
    """The top-level submodules, with a container's items in its place."""
    found = []
    for name, child in model.named_children():
        if isinstance(child, CONTAINERS) and len(child) > 0:
            found += [Region(f"{name}.{item}", sub) for item, sub in child.named_children()]
        else:
            found.append(Region(name, child))
    return found


def is_region(model: nn.Module, path: str) -> bool:
    """Whether `path` names a region of `model` (`regions_of`)."""
    return any(r.name == path for r in regions_of(model))


def record_inputs(model: nn.Module, inputs: Sequence[Any], regions: list[Region],
                  kwargs: dict[str, Any] | None = None) -> None:
    """An eager call of the model, untimed (first calls make what later ones reuse), then one
    more: each region keeps the inputs of its first call in it, and that call's time in
    `eager_ms` (a first estimate)."""
    def hook(region: Region) -> Callable[..., None]:
        def pre(module: nn.Module, args: tuple, kw: dict) -> None:
            region.calls += 1
            if region.calls == 1:
                region.args, region.kwargs = args, dict(kw)
                region.eager_ms = time.perf_counter()  # (until its forward hook: its first call's time)
        return pre

    def post(region: Region) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, result: Any) -> None:
            if region.calls == 1:
                region.eager_ms = (time.perf_counter() - region.eager_ms) * 1e3
        return hook

    with torch.no_grad():
        model(*inputs, **(kwargs or {}))
    handles = [r.module.register_forward_pre_hook(hook(r), with_kwargs=True) for r in regions]
    handles += [r.module.register_forward_hook(post(r)) for r in regions]
    try:
        with torch.no_grad():
            model(*inputs, **(kwargs or {}))
    finally:
        for handle in handles:
            handle.remove()


def time_in_turns(calls: dict[str, Callable[[], Any]], budget_s: float, rounds: int = ROUNDS) -> dict[str, list[list[float]]]:
    """Seconds of each call, by round: a warm-up call each, then `rounds` rounds in which each
    runs for `budget_s / rounds` (once at least), so that a busy spell of the machine slows
    every way, not one. Calls so long that one a round would overrun the budget get fewer
    rounds, four at least (the quartiles need them)."""
    longest = 0.0
    for call in calls.values():
        start = time.perf_counter()
        call()
        longest = max(longest, time.perf_counter() - start)
    rounds = max(4, min(rounds, int(budget_s / max(longest, 1e-9))))
    found: dict[str, list[list[float]]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times: list[float] = []
            until = time.perf_counter() + budget_s / rounds
            while not times or time.perf_counter() < until:
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            found[name].append(times)
    return found


def measure(region: Region, compile: Callable[[nn.Module, tuple], Callable[..., Any]],
            budget_s: float = BUDGET_S) -> None:
    """Compile `region` alone for its recorded inputs and time it beside eager (`Region` fields)."""
    if region.calls == 0:
        region.result = "not called"
        return
    if region.kwargs or not all(isinstance(a, torch.Tensor) for a in region.args):
        region.result = "called with other than positional tensors"
        return
    try:
        with torch.no_grad():
            compiled = compile(region.module, region.args)
            with runtime.mode("strict"):
                got = time_in_turns({"eager": lambda: region.module(*region.args),
                                     "compiled": lambda: compiled(*region.args)}, budget_s)
    except Exception as exc:  # noqa: BLE001 - a region that does not compile or run alone stays compiled
        region.result = f"not compiled alone: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
        return
    region.eager_ms = statistics.median(min(r) for r in got["eager"]) * 1e3
    region.compiled_ms = statistics.median(min(r) for r in got["compiled"]) * 1e3
    region.ratios = [min(e) / min(c) for e, c in zip(got["eager"], got["compiled"])]


def judge(regions: list[Region], margin: float = MARGIN) -> list[Decision]:
    """A decision per region measured or not: kept eager where `Region.slower` by `margin`."""
    timed = [r for r in regions if not r.result]
    total = sum(r.eager_ms for r in timed)
    out = []
    for r in regions:
        if r.result:
            out.append(Decision(r.name, False, note=r.result))
            continue
        low, high = quartiles(r.ratios) or (float("nan"), float("nan"))
        out.append(Decision(r.name, r.slower(total, margin), r.eager_ms, r.compiled_ms, low, high))
    return out


def confirm(candidates: list[str], whole: Callable[[tuple[str, ...]], Callable[..., Any]],
            example_inputs: Sequence[Any], budget_s: float = WHOLE_BUDGET_S) -> tuple[bool, str]:
    """Whether the whole model with `candidates` kept (`whole(paths)` compiles it) runs faster
    than compiled whole, timed in turns; and what was measured, in words."""
    with torch.no_grad():
        base, kept = whole(()), whole(tuple(sorted(candidates)))
        with runtime.mode("strict"):
            got = time_in_turns({"compiled": lambda: base(*example_inputs), "kept": lambda: kept(*example_inputs)},
                                budget_s)
    ratios = [min(k) / min(c) for c, k in zip(got["compiled"], got["kept"])]  # kept's time over compiled's
    low, high = quartiles(ratios) or (float("nan"), float("nan"))
    faster = high < MARGIN
    return faster, (f"the whole model with {', '.join(sorted(candidates))} kept took "
                    f"{statistics.median(ratios):.2f}x the time of the model compiled whole (middle half of "
                    f"rounds {low:.2f}-{high:.2f}x): {'kept' if faster else 'not kept'}")


def decide(model: nn.Module, example_inputs: Sequence[Any], key: str | None,
           compile: Callable[[nn.Module, tuple], Callable[..., Any]],
           whole: Callable[[tuple[str, ...]], Callable[..., Any]]) -> list[Decision]:
    """The decisions for `model` (`key`: its script() key, None where it has none): read from the
    cache, or measured now and written there. `compile(region, inputs)` compiles a region alone,
    `whole(paths)` the model with the regions at `paths` kept."""
    path = _store(key)
    found = _read(path) if path is not None else None
    if found is None:
        regions = regions_of(model)
        record_inputs(model, example_inputs, regions)
        total = sum(r.eager_ms for r in regions if r.calls)
        for region in regions:
            if region.calls and region.eager_ms < SIGNIFICANT * total:
                region.result = f"negligible: {region.eager_ms:.3f} ms of {total:.3f} ms in an eager call"
                continue
            measure(region, compile)
        slower = {d.region for d in judge(regions) if d.kept}
        for region in regions:  # a region is kept only where a second measure says so too
            if region.name in slower:
                measure(region, compile)
        found = [d if d.region in slower else replace(d, kept=False) for d in judge(regions)]
        candidates = [d.region for d in found if d.kept]
        if candidates:
            faster, measured = confirm(candidates, whole, example_inputs)
            found = [replace(d, kept=faster, whole=measured) if d.kept else d for d in found]
        if path is not None:
            _write(path, type(model).__name__, found)
    named = [d for d in found if d.kept or d.whole]
    if named:
        log.info("script(%s): regions measured slower compiled:\n  %s", type(model).__name__,
                 "\n  ".join(d.describe() for d in named))
    else:
        log.info("script(%s): every region measured compiles as fast as eager or faster", type(model).__name__)
    return found


def decisions(scripted: nn.Module) -> list[Decision]:
    """The decisions `script(..., regions=True)` took for the module it returned (empty: none)."""
    return list(getattr(scripted, "__torchscribe_regions__", ()))


def _store(key: str | None) -> Path | None:
    if key is None:
        return None
    where = f"{key}\n{native.machine()}\n{torch.__version__}\nthreads {torch.get_num_threads()}"
    return cache_dir() / "regions" / f"{hashlib.sha256(where.encode()).hexdigest()[:32]}.json"


def _read(path: Path) -> list[Decision] | None:
    """The decisions in `path`; None for a missing, unreadable or foreign file (measured again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FILE_FORMAT:
            return None
        return [Decision(str(d["region"]), bool(d["kept"]), float(d["eager_ms"]), float(d["compiled_ms"]),
                         float(d["low"]), float(d["high"]), str(d["note"]), str(d["whole"])) for d in data["decisions"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write(path: Path, model: str, found: list[Decision]) -> None:
    text = json.dumps({"format": FILE_FORMAT, "model": model, "decisions": [asdict(d) for d in found]}, indent=1)
    try:
        write_atomic(path, text + "\n")
    except OSError:  # a cache that cannot be written keeps nothing: measured again next time
        return


__all__ = ["Decision", "Region", "confirm", "decide", "decisions", "enabled", "is_region", "judge", "measure",
           "record_inputs", "regions_of", "time_in_turns"]

"""Which of several ways to make one call is fastest on this machine, measured on its first calls.

A frozen module's large linear and conv layers (runtime/prepacked.py) can run through more than
one library: torch's own call, oneDNN with the weight reordered once into its layout, MKL with
the weight packed once for one number of rows. Which is fastest depends on the CPU and on the
sizes, by more than the margins the compiled code wins by. On an Intel Xeon (Sapphire Rapids, two
threads) MKL's packed GEMM took 0.66x torch's time for vit_b_16's 768->3072 at 197 rows and
oneDNN's 0.84x, but for convnext_tiny's 96->384 at 3136 rows oneDNN took 0.74x and MKL 1.23x;
on the AMD EPYC machines of earlier runs oneDNN's packed linear beat torch's (ir/passes/pack.py).
Guessing from the vendor would be wrong for some sizes on every machine.

So each kind of call (a family: the op, the sizes and layout of its operands that decide the
cost, the thread count; and one size, the number of rows of a linear) runs every way once
untimed, then in turns, timed; the one with the least time is used from then on. The first way
listed is the default: another replaces it only when it is faster by more than the noise allowed
(`MARGIN`). Every way computes the same product; results differ by rounding (another order of
sums), so which one was chosen can change the last bits of a result from one machine to the
next, as a different thread count does.

Decisions are kept in the cache directory (`<cache>/choices/<machine>.json`, one file per CPU model
and torch build), so that a later process on the same machine takes them without measuring: a
first call measures only kinds of call no process measured before. Delete the file to measure
again. TORCHSCRIBE_TUNE=0 (read at import) measures nothing and reads no file: every call takes
its default way. `decisions()` lists what this process holds; `forget()` drops it; `with
pinned(way):` makes the calls in the block take that way where they can.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Hashable

from runtime import native
from runtime.files import write_atomic
from runtime.loader import cache_dir

TUNE = os.environ.get("TORCHSCRIBE_TUNE", "1") != "0"
# Timed rounds (every way once each) after an untimed one (oneDNN builds its primitive on a first
# call): as many as take about BUDGET_S, within these bounds.
MIN_ROUNDS, MAX_ROUNDS, BUDGET_S = 3, 30, 0.05
MARGIN = 0.97  # another way must take less than this fraction of the default's time
MAX_SIZES = 8  # sizes measured per family; the others follow the nearest one measured


class _Decision:
    __slots__ = ("way", "times", "per_size")

    def __init__(self, way: str, times: dict[str, float], per_size: frozenset[str]) -> None:
        self.way, self.times, self.per_size = way, times, per_size

    def without_per_size(self) -> str:
        """The way to take for another size: this one, unless it holds something made for this
        size alone (MKL's packed weight), then the fastest of the others measured."""
        if self.way not in self.per_size:
            return self.way
        others = [w for w in self.times if w not in self.per_size]
        return min(others, key=lambda w: self.times[w]) if others else self.way


# family (a kind of call: the op, what of its operands decides the cost but one size) -> {that
# size (the number of rows of a linear, say): the decision}
_decided: dict[Hashable, dict[int, _Decision]] = {}
_pinned: str | None = None
_read_from: Path | None = None  # the file whose decisions _decided holds (read once per file)
FILE_FORMAT = 1


def chosen(family: Hashable, size: int) -> str | None:
    """The way for a call of `family` at `size`, or None when it is to be measured (`measure`).
    Once a family has MAX_SIZES sizes measured (a sequence length that changes on every call),
    another size takes the way of the nearest one measured, but never a way holding something
    made for that size alone (which would be made again on every call of a new size)."""
    sizes = _decided.get(family)
    if sizes is None:
        if TUNE and _pinned is None and _read_from != _store():
            _read()
            return chosen(family, size)
        return None
    found = sizes.get(size)
    if found is not None:
        return found.way
    if len(sizes) < MAX_SIZES:
        return None
    return sizes[min(sizes, key=lambda s: (abs(s - size), s))].without_per_size()


def measure(family: Hashable, size: int, ways: Mapping[str, Callable[[], Any]],
            per_size: frozenset[str] = frozenset()) -> Any:
    """Runs every way (the first is the default) and times them in turns, records the fastest
    for `family` at `size`, and returns the last result (every way computes the same). With
    tuning off, or one way, only the default runs, and is recorded. `per_size`: the ways that
    make something for this size alone (MKL's packed weight, made for one number of rows): how
    many of those one operand may hold is the caller's to bound (`without_per_size`)."""
    names = list(ways)
    if not TUNE or len(names) == 1 or _pinned is not None:
        way = _pinned if _pinned in ways else names[0]
        _decided.setdefault(family, {})[size] = _Decision(way, {}, per_size)
        return ways[way]()
    first: dict[str, float] = {}
    result = None
    for name in names:  # the untimed round
        start = time.perf_counter()
        result = ways[name]()
        first[name] = time.perf_counter() - start
    # Noise only adds time, so the least of several runs is the estimate; a cheap call gets more
    # rounds (one stall of the machine is as long as many of its runs).
    rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, math.ceil(BUDGET_S / max(sum(first.values()), 1e-9))))
    best = dict.fromkeys(names, float("inf"))
    for _ in range(rounds):
        for name in names:
            start = time.perf_counter()
            result = ways[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    default = names[0]
    fastest = min(names, key=lambda n: best[n])
    way = fastest if best[fastest] < MARGIN * best[default] else default
    _decided.setdefault(family, {})[size] = _Decision(way, best, per_size)
    _write(family, size)
    return result


def without_per_size(family: Hashable, size: int) -> str:
    """The way for a call of `family` at `size` (decided) that makes nothing for its size alone:
    for an operand that holds as many such things as it may already."""
    sizes = _decided[family]
    found = sizes.get(size)
    if found is None:
        found = sizes[min(sizes, key=lambda s: (abs(s - size), s))]
    return found.without_per_size()


def decisions() -> list[tuple[Hashable, int, str, dict[str, float]]]:
    """(family, size, the way chosen, {way: least seconds measured}) for each size measured."""
    return [(family, size, d.way, dict(d.times)) for family, sizes in _decided.items() for size, d in sizes.items()]


def forget() -> None:
    """Drops every decision this process holds, and reads the file again on the next call: what
    it does not hold is measured again."""
    global _read_from, _epoch
    _decided.clear()
    _read_from = None
    _epoch += 1


_epoch = 0


def epoch() -> int:
    """A number that changes whenever decisions are dropped (`forget`, `pinned`): what a caller
    kept of a decision holds while it stays the same."""
    return _epoch


# -- the decisions kept on disk ------------------------------------------------------------------
_MACHINE: list[str] = []  # (found on first use: torch is imported by then)


def _store() -> Path:
    if not _MACHINE:  # the CPU, and the libraries torch was built with
        import torch

        _MACHINE.append(f"{native.machine()}\ntorch {torch.__version__} {torch.version.git_version}")
    digest = hashlib.sha256(_MACHINE[0].encode()).hexdigest()[:16]
    return cache_dir() / "choices" / f"{digest}.json"


def _read() -> None:
    """Takes the decisions of the file into this process (those it holds already stay). A missing,
    unreadable or foreign file is no decision."""
    global _read_from
    path = _store()
    _read_from = path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["decisions"] if data.get("format") == FILE_FORMAT and data.get("machine") == _MACHINE[0] else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    for entry in entries:
        try:
            family = ast.literal_eval(entry["family"])
            decision = _Decision(str(entry["way"]), {str(k): float(v) for k, v in entry["times"].items()},
                                 frozenset(entry["per_size"]))
            _decided.setdefault(family, {}).setdefault(int(entry["size"]), decision)
        except (ValueError, KeyError, TypeError, SyntaxError, AttributeError):
            continue  # (an entry this runtime cannot read is no decision)


def _write(family: Hashable, size: int) -> None:
    """Adds one decision to the file, written whole to a temporary file and renamed over it: a
    reader sees the old file or the new one. Two processes writing at once may lose one's
    decision, which is then measured again. A cache that cannot be written keeps nothing."""
    path = _store()
    d = _decided[family][size]
    entry = {"family": repr(family), "size": size, "way": d.way, "times": d.times, "per_size": sorted(d.per_size)}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FILE_FORMAT or data.get("machine") != _MACHINE[0]:
            raise ValueError("another file")
        kept = [e for e in data["decisions"] if (e["family"], e["size"]) != (entry["family"], size)]
    except (OSError, ValueError, KeyError, TypeError):
        kept = []
    text = json.dumps({"format": FILE_FORMAT, "machine": _MACHINE[0], "decisions": kept + [entry]}, indent=1)
    try:
        write_atomic(path, text + "\n")
    except OSError:
        return


@contextlib.contextmanager
def pinned(way: str | None) -> Iterator[None]:
    """Within the block, every call takes `way` where it is one of its ways and its default
    elsewhere, without timing (None: measured as usual); decisions made before and in the block
    are dropped on entry and exit. For tests, and for comparing one way with another on a model."""
    global _pinned
    before = _pinned
    forget()
    _pinned = way
    try:
        yield
    finally:
        _pinned = before
        forget()

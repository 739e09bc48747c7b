"""The real-model benchmark (issue 7): eager, frozen torch.jit.script, torch.compile and
torchscribe on torchvision's classification models and nn.TransformerEncoderLayer, batch 1 and 8,
on the CPU, in one process; each compiled result checked against eager first.

    python -m benchmarks.zoo [--only resnet18,vit_b_16] [--batches 1,8] [--budget 2]
                             [--first-call] [--write-results]

Runs in the corpus virtualenv (`make corpus-bench`). `--write-results` puts the table into
benchmarks/RESULTS.md between the zoo markers (the rest of the file is left as it is).
`--first-call` also times the first call in a fresh process (warm caches) for torchscribe and
torch.compile, as benchmarks/first_call.py does for the examples (minutes per model)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import torch

from benchmarks.bench import (
    BUILDERS,
    ROUNDS,
    Built,
    RESULTS,
    ZOO_END,
    ZOO_START,
    Timed,
    geomean,
    machine_lines,
    short_error,
    time_in_turns,
)
from benchmarks.zoo_models import MODELS, ZooModel, mismatch

BACKENDS = ("eager", "jit", "compile", "torchscribe", "frozen")
OTHERS = ("jit", "compile")  # what the per-model target compares frozen torchscribe with
LABELS = {"eager": "eager", "jit": "TorchScript (frozen)", "compile": "torch.compile", "torchscribe": "torchscribe",
          "frozen": "torchscribe (frozen)"}


def build_frozen(model: Any, inputs: tuple) -> Built:
    """script(model, example_inputs=..., freeze=True): the contract torch.jit.freeze asks for
    (docs/models.md, "Freezing")."""
    from transpiler import script

    compiled = script(model, example_inputs=inputs, freeze=True)
    return Built(compiled, compiled)


ZOO_BUILDERS = {**BUILDERS, "frozen": build_frozen}


def run_case(model: ZooModel, batch: int, budget_s: float) -> dict[str, Any]:
    """{backend: seconds or an error text} for one model at one batch size."""
    eager = model.build()
    inputs = model.inputs(batch)
    with torch.no_grad():
        expected = eager(*inputs)
    timed: dict[str, Timed] = {}
    row: dict[str, Any] = {}
    for backend in BACKENDS:
        try:
            with torch.no_grad():
                built = ZOO_BUILDERS[backend](eager, inputs)
                got = built.fn(*inputs)
            problem = mismatch(model, expected, got)
        except Exception as exc:  # one backend failing is a result, not the end of the run
            problem = short_error(exc)
        if problem:
            row[backend] = problem
            continue
        timed[backend] = Timed(built.fn, inputs)
    time_in_turns(timed, budget_s)
    for backend, entry in timed.items():
        row[backend] = sorted(entry.times)[len(entry.times) // 2]
    row["rounds"] = paired_ratios({b: e.rounds for b, e in timed.items()})
    return row


def paired_ratios(rounds: dict[str, list[list[float]]]) -> list[float]:
    """For each round of `time_in_turns`, the faster of frozen TorchScript's and torch.compile's
    median in that round over frozen torchscribe's: each ratio compares calls made within a second
    of each other, so a busy spell of the host that spans rounds moves it less than the medians
    over the whole run. Empty when frozen torchscribe or both others were not timed."""
    others = [rounds[b] for b in OTHERS if b in rounds]
    if "frozen" not in rounds or not others:
        return []
    return [min(statistics.median(o[i]) for o in others) / statistics.median(mine)
            for i, mine in enumerate(rounds["frozen"])]


def quartiles(ratios: list[float]) -> tuple[float, float] | None:
    """The lower and upper quartiles of the rounds' ratios (None for fewer than four)."""
    if len(ratios) < 4:
        return None
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return q1, q3


def spread(ratios: list[float]) -> str:
    """The middle half of the rounds' ratios, as ` (lower quartile-upper quartile)`."""
    found = quartiles(ratios)
    return "" if found is None else f" ({found[0]:.2f}-{found[1]:.2f})"


def best_other(row: dict[str, Any]) -> float | None:
    """The faster of the others' medians over frozen torchscribe's, or None where either side
    has no time."""
    others = [row[b] for b in OTHERS if isinstance(row.get(b), float)]
    return min(others) / row["frozen"] if others and isinstance(row.get("frozen"), float) else None


def ratio(row: dict[str, Any], backend: str) -> float | None:
    if not isinstance(row.get(backend), float) or not isinstance(row.get("eager"), float):
        return None
    return row["eager"] / row[backend]


def render(rows: dict[tuple[str, int], dict[str, Any]], header: list[tuple[str, str]]) -> str:
    out = ["## Real models (benchmarks/zoo.py)", ""]
    out += [f"- {label}: {value}" for label, value in header]
    out += ["", "Median latency in ms; in brackets the speed-up over eager. Target per model: torchscribe at least",
            "the faster of frozen TorchScript and torch.compile, never slower than eager; geomean >= 1.3x eager.",
            "torchscribe (frozen) is `script(model, example_inputs=..., freeze=True)`, the contract of",
            "`torch.jit.freeze` (docs/models.md); the last column compares it with the faster other: the",
            f"ratio of the medians, and in brackets the middle half of the ratios within each of the {ROUNDS}",
            "rounds (every backend takes a turn in a round; a cell whose lower bound is under 1.00 is level",
            "within this host's noise rather than ahead).", "",
            "| model | batch | " + " | ".join(LABELS[b] for b in BACKENDS) + " | vs best other |",
            "| --- | --- | " + " | ".join("---" for _ in BACKENDS) + " | --- |"]
    notes: list[str] = []
    for (name, batch), row in rows.items():
        cells = []
        for backend in BACKENDS:
            value = row.get(backend)
            if isinstance(value, float):
                r = ratio(row, backend)
                cells.append(f"{value * 1e3:.2f}" + ("" if backend == "eager" else f" ({r:.2f}x)"))
            else:
                cells.append(f"failed [{len(notes) + 1}]")
                notes.append(f"[{len(notes) + 1}] {name} B={batch} {backend}: {value}")
        best = best_other(row)
        against = "-" if best is None else f"{best:.2f}x{spread(row.get('rounds', []))}"
        out.append(f"| {name} | {batch} | " + " | ".join(cells) + f" | {against} |")
    out += ["", verdict(rows)]
    for batch in sorted({b for _, b in rows}):
        parts = []
        for backend in BACKENDS[1:]:
            ratios = [ratio(row, backend) for (_, b), row in rows.items() if b == batch]
            known = [r for r in ratios if r is not None]
            parts.append(f"{LABELS[backend]} {geomean(known):.2f}x ({len(known)} models)" if known
                         else f"{LABELS[backend]} -")
        out.append(f"Geomean speed-up over eager at B={batch}: " + ", ".join(parts) + ".")
    out += [""] + notes
    return "\n".join(out).rstrip() + "\n"


def verdict(rows: dict[tuple[str, int], dict[str, Any]]) -> str:
    """How many cells meet the per-model target against the faster other, by the ratio of the
    medians, and by the lower quartile of the rounds' ratios."""
    compared = [(best, row.get("rounds", [])) for row in rows.values() if (best := best_other(row)) is not None]
    level = sum(best >= 1.0 for best, _ in compared)
    held = sum((found := quartiles(rounds)) is not None and found[0] >= 1.0 for _, rounds in compared)
    return (f"Against the faster other: {level} of {len(compared)} cells at or above 1.00x by the medians; "
            f"{held} of {len(compared)} with the lower quartile of the rounds at or above 1.00x.")


def write_results(text: str) -> None:
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    block = f"{ZOO_START}\n{text}{ZOO_END}\n"
    if ZOO_START in old and ZOO_END in old:
        new = old[:old.index(ZOO_START)] + block + old[old.index(ZOO_END) + len(ZOO_END) + 1:]
    else:
        new = old.rstrip() + "\n\n" + block
    RESULTS.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per backend and case")
    parser.add_argument("--first-call", action="store_true")
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    args.argv = argv
    only = {n for n in args.only.split(",") if n}
    load_start = os.getloadavg()[0]
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for model in MODELS:
        if only and model.name not in only:
            continue
        for batch in (int(b) for b in args.batches.split(",")):
            started = time.perf_counter()
            rows[(model.name, batch)] = run_case(model, batch, args.budget)
            print(f"{model.name} B={batch}: " + ", ".join(
                f"{b} {v * 1e3:.2f} ms" if isinstance(v, float) else f"{b} failed ({v})"
                for b, v in rows[(model.name, batch)].items() if b in BACKENDS) + f"  [{time.perf_counter() - started:.0f} s]",
                flush=True)
    header = machine_lines(args, args.budget, (load_start, os.getloadavg()[0]))
    header = [(k, v.replace("benchmarks.bench", "benchmarks.zoo")) for k, v in header]
    text = render(rows, header)
    if args.first_call:
        text += "\n" + first_calls([m for m in MODELS if not only or m.name in only])
    print("\n" + text)
    if args.write_results:
        write_results(text)
        print(f"wrote {RESULTS.name}")
    return 0


def first_calls(models: list[ZooModel]) -> str:
    from benchmarks.first_call import first_call_seconds

    lines = ["First call in a fresh process, batch 1, seconds from process start (warm caches; the frozen",
             "module's first call also packs its weights and measures which library runs each packed layer):", "",
             "| model | eager | torchscribe (warm) | torchscribe frozen (warm) | torch.compile (warm) |",
             "| --- | --- | --- | --- | --- |"]
    for model in models:
        got = first_call_seconds(f"benchmarks.zoo_models:make:{model.name}:1",
                                 backends=("eager", "torchscribe", "frozen", "compile"))
        cells = [f"{v:.2f}" if v is not None else "failed"
                 for v in (got.eager, got.torchscribe_warm, got.frozen_warm, got.compile_warm)]
        lines.append(f"| {model.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

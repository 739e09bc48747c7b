"""The real-model benchmark (issues 7 and 48): eager, frozen torch.jit.script, torch.compile and
torchscribe on a corpus of real models, batch 1 and 8, on the CPU, in one process; each compiled
result checked against eager first (torchscribe's in strict mode: a result that ran eagerly is an
error, not a match). Two corpora: torchvision's classification models and
nn.TransformerEncoderLayer (`--corpus torchvision`, benchmarks/zoo_models.py), and timm's
(`--corpus timm`, benchmarks/timm_models.py), a library the compiler was not tuned on.

    python -m benchmarks.zoo [--corpus timm] [--only resnet18,vit_b_16] [--batches 1,8] [--budget 2]
                             [--backends eager,frozen,checked-in] [--first-call] [--write-results]
                             [--merge] [--section checked-in]
    python -m benchmarks.zoo --train [--only resnet18,encoder_layer] [--batches 8] [--budget 2]
                             [--write-results]

torchscribe runs four ways: `script(model, example_inputs=...)` (cached), the same with
`permissive=True` (`permissive`: what the compiler cannot compile runs as Python), the same with
`freeze=True` (`frozen`), and `checked-in`: the module the `torchscribe` command writes for a file
declaring the model with `@script_model(freeze=True)`, run through the factory's `load(model)`,
as a project that checks in the code for a model it did not write runs it (issue 47).

Runs in the corpus virtualenv (`make corpus-bench`). `--write-results` puts the table into
benchmarks/RESULTS.md between the zoo markers (the rest of the file is left as it is).
`--first-call` also times the first call in a fresh process (warm caches) for torchscribe and
torch.compile, as benchmarks/first_call.py does for the examples (minutes per model).

`--train` times a training step instead (benchmarks/train_step.py: forward, backward, SGD step)
of TRAIN_MODELS at batch 8, eager against torch.compile and `script(model, example_inputs=...)`
(not frozen: freezing is an inference contract), into its own block of RESULTS.md."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import torch

import runtime
from benchmarks.bench import (
    BUILDERS,
    ROOT,
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
from benchmarks import timm_models, zoo_models
from benchmarks.bench import TIMM_END, TIMM_START, TRAIN_END, TRAIN_START
from benchmarks.zoo_models import ZooModel, mismatch

# --corpus: (the module listing its models, RESULTS.md's markers for its block, its title, its
# targets)
CORPORA = {
    "torchvision": (zoo_models, ZOO_START, ZOO_END, "Real models (benchmarks/zoo.py)",
                    "Target per model: torchscribe at least the faster of frozen TorchScript and torch.compile, "
                    "never slower than eager; geomean >= 1.3x eager."),
    "timm": (timm_models, TIMM_START, TIMM_END, "timm models (benchmarks/zoo.py --corpus timm)",
             "Targets (issue 48): every model at least eager's speed, compiled strictly and permissively; "
             "geomean at least the faster of frozen TorchScript and torch.compile."),
}
BACKENDS = ("eager", "jit", "compile", "torchscribe", "permissive", "frozen", "checked-in")
OTHERS = ("jit", "compile")  # what the per-model target compares frozen torchscribe with
LABELS = {"eager": "eager", "jit": "TorchScript (frozen)", "compile": "torch.compile", "torchscribe": "torchscribe",
          "permissive": "torchscribe (permissive)", "frozen": "torchscribe (frozen)",
          "checked-in": "torchscribe (checked-in)"}
OURS = ("torchscribe", "permissive", "frozen", "checked-in")  # checked against eager in strict mode
# The comparison columns: (backend, what it is compared with, the row's key of its rounds' ratios).
COMPARED = (("frozen", OTHERS, "rounds"), ("checked-in", ("frozen",), "rounds checked-in"))


def build_frozen(model: Any, inputs: tuple) -> Built:
    """script(model, example_inputs=..., freeze=True): the contract torch.jit.freeze asks for
    (docs/models.md, "Freezing")."""
    from transpiler import script

    compiled = script(model, example_inputs=inputs, freeze=True)
    return Built(compiled, compiled)


def build_permissive(model: Any, inputs: tuple) -> Built:
    """script(model, example_inputs=..., permissive=True): what cannot be compiled stays Python."""
    from transpiler import script

    compiled = script(model, example_inputs=inputs, permissive=True)
    return Built(compiled, compiled)


ZOO_BUILDERS = {**BUILDERS, "frozen": build_frozen, "permissive": build_permissive}

# The file a project would write to check in the model's code; `torchscribe` runs the factory
# in a child process, which imports benchmarks from the repository root (PYTHONPATH).
FACTORY_FILE = '''\
from {corpus} import BY_NAME
from transpiler import script_model


@script_model(freeze=True)
def {name}():
    zoo = BY_NAME[{name!r}]
    return zoo.build(), zoo.inputs({batch})
'''


def factory_text(zoo: ZooModel, batch: int) -> str:
    # (the corpus by identity: both have a `resnet18`, torchvision's and timm's)
    corpus = timm_models if timm_models.BY_NAME.get(zoo.name) is zoo else zoo_models
    return FACTORY_FILE.format(corpus=corpus.__name__, name=zoo.name, batch=batch)


def build_checked_in(zoo: ZooModel, batch: int, directory: Path, model: Any, inputs: tuple) -> Built:
    """The `checked-in` backend: `torchscribe FILE.py` on a file declaring the model at this batch
    with `@script_model(freeze=True)` (written into `directory`, which is on sys.path), then the
    factory's `load(model)`. Compiled for the batch it is timed at, as `frozen` is."""
    stem = f"{zoo.name}_b{batch}"
    path = directory / f"{stem}.py"
    path.write_text(factory_text(zoo, batch), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "transpiler.cli", "-q", str(path)], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"torchscribe {path.name} exited with {done.returncode}: "
                           + (done.stdout + done.stderr).strip())
    factory = getattr(importlib.import_module(stem), zoo.name)
    return Built(factory.load(model), model)


def run_case(model: ZooModel, batch: int, budget_s: float, directory: Path,
             backends: tuple[str, ...] = BACKENDS) -> dict[str, Any]:
    """{backend: seconds or an error text} for one model at one batch size."""
    eager = model.build()
    inputs = model.inputs(batch)
    with torch.no_grad():
        expected = eager(*inputs)
    timed: dict[str, Timed] = {}
    row: dict[str, Any] = {}
    build: dict[str, Callable[[Any, tuple], Built]] = {
        **ZOO_BUILDERS, "checked-in": functools.partial(build_checked_in, model, batch, directory)}
    for backend in backends:
        try:
            with torch.no_grad():
                built = build[backend](eager, inputs)
                with runtime.mode("strict") if backend in OURS else contextlib.nullcontext():
                    got = built.fn(*inputs)
            problem = mismatch(model, expected, got)
        except Exception as exc:  # one backend failing is a result, not the end of the run
            problem = short_error(exc)
        if problem:
            row[backend] = problem
            continue
        # (ours timed in strict mode too: a call that fell back to eager would raise, not count)
        strict = (lambda: runtime.mode("strict")) if backend in OURS else contextlib.nullcontext
        timed[backend] = Timed(built.fn, inputs, context=strict)
    time_in_turns(timed, budget_s)
    for backend, entry in timed.items():
        row[backend] = sorted(entry.times)[len(entry.times) // 2]
    rounds = {b: e.rounds for b, e in timed.items()}
    for mine, others, key in COMPARED:
        row[key] = paired_ratios(rounds, mine, others)
    return row


def paired_ratios(rounds: dict[str, list[list[float]]], mine: str = "frozen",
                  others: tuple[str, ...] = OTHERS) -> list[float]:
    """For each round of `time_in_turns`, the faster of the `others`' medians in that round (by
    default frozen TorchScript's and torch.compile's) over `mine`'s (frozen torchscribe's): each
    ratio compares calls made within a second of each other, so a busy spell of the host that
    spans rounds moves it less than the medians over the whole run. Empty when `mine` or all
    others were not timed."""
    timed = [rounds[b] for b in others if b in rounds]
    if mine not in rounds or not timed:
        return []
    return [min(statistics.median(o[i]) for o in timed) / statistics.median(own)
            for i, own in enumerate(rounds[mine])]


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


def best_other(row: dict[str, Any], mine: str = "frozen", others: tuple[str, ...] = OTHERS) -> float | None:
    """The faster of the `others`' medians over `mine`'s (frozen torchscribe's), or None where
    either side has no time."""
    times = [row[b] for b in others if isinstance(row.get(b), float)]
    return min(times) / row[mine] if times and isinstance(row.get(mine), float) else None


def against(row: dict[str, Any], mine: str, others: tuple[str, ...], rounds: str) -> str:
    """A comparison cell: the ratio of the medians, and the middle half of the rounds' ratios."""
    best = best_other(row, mine, others)
    return "-" if best is None else f"{best:.2f}x{spread(row.get(rounds, []))}"


def ratio(row: dict[str, Any], backend: str) -> float | None:
    if not isinstance(row.get(backend), float) or not isinstance(row.get("eager"), float):
        return None
    return row["eager"] / row[backend]


def render(rows: dict[tuple[str, int], dict[str, Any]], header: list[tuple[str, str]],
           backends: tuple[str, ...] = BACKENDS, corpus: str = "torchvision") -> str:
    _, _, _, title, targets = CORPORA[corpus]
    out = [f"## {title}", ""]
    out += [f"- {label}: {value}" for label, value in header]
    out += ["", f"Median latency in ms; in brackets the speed-up over eager. {targets}",
            "torchscribe (frozen) is `script(model, example_inputs=..., freeze=True)`, the contract of",
            "`torch.jit.freeze` (docs/models.md); `vs best other` compares it with the faster other: the",
            f"ratio of the medians, and in brackets the middle half of the ratios within each of the {ROUNDS}",
            "rounds (every backend takes a turn in a round; a cell whose lower bound is under 1.00 is level",
            "within this host's noise rather than ahead). torchscribe (checked-in) is the module `torchscribe`",
            "writes for `@script_model(freeze=True)`, run by the factory's `load(model)`; `checked-in vs frozen`",
            "compares the two the same way (target: at least 1.00x).", "",
            "| model | batch | " + " | ".join(LABELS[b] for b in backends) + " | vs best other | checked-in vs frozen |",
            "| --- | --- | " + " | ".join("---" for _ in backends) + " | --- | --- |"]
    notes: list[str] = []
    for (name, batch), row in rows.items():
        cells = []
        for backend in backends:
            value = row.get(backend)
            if isinstance(value, float):
                r = ratio(row, backend)
                cells.append(f"{value * 1e3:.2f}" + ("" if backend == "eager" else f" ({r:.2f}x)"))
            elif value is None:  # (not run for this row: a merged row from a run without it)
                cells.append("-")
            else:
                cells.append(f"failed [{len(notes) + 1}]")
                notes.append(f"[{len(notes) + 1}] {name} B={batch} {backend}: {value}")
        cells += [against(row, mine, others, key) for mine, others, key in COMPARED]
        out.append(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    out += ["", *(verdict(rows, mine, others, key) for mine, others, key in COMPARED
                  if any(best_other(row, mine, others) is not None for row in rows.values()))]
    for batch in sorted({b for _, b in rows}):
        parts = []
        for backend in backends[1:]:
            ratios = [ratio(row, backend) for (_, b), row in rows.items() if b == batch]
            known = [r for r in ratios if r is not None]
            parts.append(f"{LABELS[backend]} {geomean(known):.2f}x ({len(known)} models)" if known
                         else f"{LABELS[backend]} -")
        out.append(f"Geomean speed-up over eager at B={batch}: " + ", ".join(parts) + ".")
    out += [""] + notes
    return "\n".join(out).rstrip() + "\n"


def verdict(rows: dict[tuple[str, int], dict[str, Any]], mine: str = "frozen", others: tuple[str, ...] = OTHERS,
            rounds_key: str = "rounds") -> str:
    """How many cells meet the target of `mine` against the faster of `others`, by the ratio of
    the medians, and by the lower quartile of the rounds' ratios."""
    compared = [(best, row.get(rounds_key, [])) for row in rows.values()
                if (best := best_other(row, mine, others)) is not None]
    level = sum(best >= 1.0 for best, _ in compared)
    held = sum((found := quartiles(rounds)) is not None and found[0] >= 1.0 for _, rounds in compared)
    what = "Against the faster other" if others == OTHERS else f"{LABELS[mine]} against {' and '.join(others)}"
    return (f"{what}: {level} of {len(compared)} cells at or above 1.00x by the medians; "
            f"{held} of {len(compared)} with the lower quartile of the rounds at or above 1.00x.")


TRAIN_MODELS = ("resnet18", "mobilenet_v2", "vit_b_16", "encoder_layer")
TRAIN_VS_EAGER = 1.2  # the geometric mean of torchscribe's training steps (issue 50)


def train_case(zoo: ZooModel, batch: int, budget_s: float) -> Any:
    """A train_step.Result: the model's training step per backend at this batch."""
    from benchmarks import train_step

    loss = train_step.CrossEntropy() if zoo.classifier else train_step.MeanSquares()
    return train_step.measure(zoo.build(), zoo.inputs(batch), loss, budget_s)


def render_train(results: dict[tuple[str, int], Any], header: list[tuple[str, str]]) -> str:
    from benchmarks.train_step import BACKENDS, LR, MOMENTUM, NOISE_FACTOR

    out = ["## Training step (benchmarks/zoo.py --train)", ""]
    out += [f"- {label}: {value}" for label, value in header]
    legend = (
        f"Median ms of one training step: train() mode, the batch, cross-entropy against fixed labels (classifiers) "
        f"or a mean squared error against a fixed target, backward, torch.optim.SGD(lr={LR:g}, momentum={MOMENTUM:g}) "
        f"step, zero_grad(set_to_none=True); in brackets the speed-up over eager. torchscribe is "
        f"`script(model, example_inputs=...)` (its code for calls autograd records: eager's torch ops with torch's "
        f"own backward, convs on channels-last inputs, pointwise chains fused with backward kernels); torch.compile the model compiled in its default mode (fallback_random=True: dropout draws "
        f"eager's masks). Each backend trains its own copy; one step of each is checked against eager's (what every "
        f"parameter and buffer moved by, within {NOISE_FACTOR:g} times the rounding error of eager's float32 step "
        f"against its float64 step, or of its step on channels-last tensors) before timing: torchscribe's step that differs is not timed, another backend's "
        f"is timed with a note. `ts vs`: the ratio of the medians, in brackets the middle half of the ratios within "
        f"each of the {ROUNDS} rounds. first s: building and the checked step. Targets: never slower than eager; "
        f"geomean >= {TRAIN_VS_EAGER:g}x eager.")
    out += ["", *textwrap.wrap(legend, 100, break_on_hyphens=False), "",
            "| model | batch | eager | torch.compile | torchscribe | ts vs eager | ts vs torch.compile "
            "| compile first s | ts first s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes: list[str] = []
    rows = {}
    for (name, batch), result in results.items():
        row: dict[str, Any] = {**result.seconds, **result.problems}
        rows[(name, batch)] = row
        cells = []
        for backend in BACKENDS:
            value = row.get(backend)
            if isinstance(value, float):
                r = ratio(row, backend)
                cells.append(f"{value * 1e3:.1f}" + ("" if backend == "eager" else f" ({r:.2f}x)"))
                if backend in result.differs:
                    cells[-1] += f" [{len(notes) + 1}]"
                    notes.append(f"[{len(notes) + 1}] {name} B={batch} {result.differs[backend]}")
            elif value is None:  # (eager failed: nothing was built after it)
                cells.append("-")
            else:
                cells.append(f"not timed [{len(notes) + 1}]")
                notes.append(f"[{len(notes) + 1}] {name} B={batch} {backend}: {value}")
        cells += [_vs(row, result, "eager"), _vs(row, result, "compile")]
        cells += [f"{result.first_s[b]:.1f}" if b in result.first_s else "-" for b in ("compile", "torchscribe")]
        out.append(f"| {name} | {batch} | " + " | ".join(cells) + " |")
    out.append("")
    for batch in sorted({b for _, b in rows}):
        at = [row for (_, b), row in rows.items() if b == batch]
        parts = []
        for backend in BACKENDS[1:]:
            known = [r for r in (ratio(row, backend) for row in at) if r is not None]
            parts.append(f"{LABELS[backend]} {geomean(known):.2f}x ({len(known)} models)" if known
                         else f"{LABELS[backend]} -")
        ts = [r for r in (ratio(row, "torchscribe") for row in at) if r is not None]
        mean = geomean(ts) if ts else float("nan")
        slower, untimed = sum(r < 1.0 for r in ts), len(at) - len(ts)
        out.append(f"Geomean speed-up over eager at B={batch}: " + ", ".join(parts) + ". Targets: "
                   f"{'met' if ts and not slower and not untimed else 'MISS'} never slower than eager ({slower} of "
                   f"{len(at)} slower, {untimed} not timed), "
                   f"{'met' if mean >= TRAIN_VS_EAGER else 'MISS'} geomean >= {TRAIN_VS_EAGER:g}x eager.")
    out += [""] + notes
    return "\n".join(out).rstrip() + "\n"


def _vs(row: dict[str, Any], result: Any, other: str) -> str:
    """torchscribe against `other`: the ratio of the medians, and in brackets the middle half of
    the ratios within each round."""
    if not isinstance(row.get("torchscribe"), float) or not isinstance(row.get(other), float):
        return "-"
    return f"{row[other] / row['torchscribe']:.2f}x{spread(paired_ratios(result.rounds, 'torchscribe', (other,)))}"


# `--section checked-in`: the checked-in modules against frozen script() (issue 47) in a block of
# their own, beside the corpus's full table, which a run of three backends would replace.
SECTIONS = {"checked-in": ("<!-- zoo checked-in: benchmarks/zoo.py --section checked-in writes from here -->",
                           "<!-- zoo checked-in: end -->", "through checked-in modules")}


def write_results(text: str, start: str = ZOO_START, end: str = ZOO_END) -> None:
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    block = f"{start}\n{text}{end}\n"
    if start in old and end in old:
        new = old[:old.index(start)] + block + old[old.index(end) + len(end) + 1:]
    else:
        new = old.rstrip() + "\n\n" + block
    RESULTS.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="torchvision")
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--batches", default=None, help="comma-separated (default 1,8; with --train, 8)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per backend and case")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help=f"comma-separated, of {', '.join(BACKENDS)} (eager is always timed)")
    parser.add_argument("--first-call", action="store_true")
    parser.add_argument("--train", action="store_true",
                        help=f"time a training step of {', '.join(TRAIN_MODELS)} (or --only's) instead")
    parser.add_argument("--write-results", action="store_true")
    parser.add_argument("--section", choices=sorted(SECTIONS),
                        help="write into a block of its own (checked-in: with --backends eager,frozen,checked-in)")
    parser.add_argument("--merge", action="store_true",
                        help="keep earlier runs' rows (benchmarks/zoo_rows_<corpus>.json) for cases not run now")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.train:
        return train_main(args, parser)
    args.batches = args.batches or "1,8"
    corpus, start, end, _, _ = CORPORA[args.corpus]
    models: list[ZooModel] = corpus.MODELS
    only = {n for n in args.only.split(",") if n}
    asked = {b for b in args.backends.split(",") if b}
    if asked - set(BACKENDS):
        parser.error(f"--backends: unknown {', '.join(sorted(asked - set(BACKENDS)))}")
    backends = tuple(b for b in BACKENDS if b == "eager" or b in asked)
    load_start = os.getloadavg()[0]
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="zoo-checked-in-") as directory:
        sys.path.insert(0, directory)  # the factory files `checked-in` writes and imports
        for model in models:
            if only and model.name not in only:
                continue
            for batch in (int(b) for b in args.batches.split(",")):
                started = time.perf_counter()
                rows[(model.name, batch)] = run_case(model, batch, args.budget, Path(directory), backends)
                print(f"{model.name} B={batch}: " + ", ".join(
                    f"{b} {v * 1e3:.2f} ms" if isinstance(v, float) else f"{b} failed ({v})"
                    for b, v in rows[(model.name, batch)].items() if b in BACKENDS)
                    + f"  [{time.perf_counter() - started:.0f} s]", flush=True)
        sys.path.remove(directory)
    header = machine_lines(args, args.budget, (load_start, os.getloadavg()[0]))
    header = [(k, v.replace("benchmarks.bench", "benchmarks.zoo")) for k, v in header]
    if args.merge:
        rows, header, backends = merge_rows(args.corpus, models, rows, header, backends)
    text = render(rows, header, backends, args.corpus)
    if args.first_call:
        text += "\n" + first_calls([m for m in models if not only or m.name in only], corpus.__name__)
    print("\n" + text)
    if args.section:
        start, end, what = SECTIONS[args.section]
        title = text.split("\n", 1)[0]
        text = text.replace(title, f"{title} {what}", 1)
    if args.write_results:
        write_results(text, start, end)
        print(f"wrote {RESULTS.name}")
    return 0


def rows_file(corpus: str) -> Path:
    return ROOT / "benchmarks" / f"zoo_rows_{corpus}.json"


def merge_rows(corpus: str, models: list[ZooModel], rows: dict[tuple[str, int], dict[str, Any]],
               header: list[tuple[str, str]], backends: tuple[str, ...]
               ) -> tuple[dict[tuple[str, int], dict[str, Any]], list[tuple[str, str]], tuple[str, ...]]:
    """This run's rows over the stored ones (each row keeps the header of the run that measured
    it), stored back; the rows in the corpus's order, a header naming every run they come from,
    and the backends any of them timed."""
    path = rows_file(corpus)
    stored: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for (name, batch), row in rows.items():
        stored[f"{name} {batch}"] = {**row, "header": header}
    path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    order = {m.name: i for i, m in enumerate(models)}
    keys = sorted(((k.rsplit(" ", 1)[0], int(k.rsplit(" ", 1)[1])) for k in stored),
                  key=lambda key: (order.get(key[0], len(order)), key[0], key[1]))
    merged = {key: stored[f"{key[0]} {key[1]}"] for key in keys}
    runs: dict[str, list[str]] = {}
    # (rows measured on other hosts: each run names its machine; a row's ratios are its own run's)
    machines = {dict(map(tuple, row["header"])).get("machine") for row in merged.values()}
    for (name, batch), row in merged.items():
        labels = dict(map(tuple, row["header"]))
        where = f" on {labels.get('machine')}, {labels.get('OS')}" if len(machines) > 1 else ""
        runs.setdefault(f"{labels['date']}{where} (load {labels['load']})", []).append(f"{name} B={batch}")
    timed = tuple(b for b in BACKENDS if b in backends or any(b in row for row in merged.values()))
    if len(runs) > 1:
        # (each run's command named its models, which the run lines list; the timing the rows share)
        dropped = ("date", "load", "command") + (("machine", "OS") if len(machines) > 1 else ())
        timings = {dict(map(tuple, row["header"])).get("timing") for row in merged.values()}
        header = [(k, timings.pop() if k == "timing" and len(timings) == 1 else v) for k, v in header if k not in dropped]
        header += [(f"run {i + 1}", f"{run}: {len(runs[run])} cases ({', '.join(runs[run])})")
                   for i, run in enumerate(sorted(runs))]
    return merged, header, timed


def train_main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """`--train`: training steps of the torchvision corpus's TRAIN_MODELS (or those --only names)."""
    if args.corpus != "torchvision" or args.first_call:
        parser.error("--train times torchvision's corpus, without --first-call")
    names = [n for n in args.only.split(",") if n] or list(TRAIN_MODELS)
    unknown = [n for n in names if n not in zoo_models.BY_NAME]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)}")
    load_start = os.getloadavg()[0]
    results = {}
    for name in names:
        for batch in (int(b) for b in (args.batches or "8").split(",")):
            started = time.perf_counter()
            result = results[(name, batch)] = train_case(zoo_models.BY_NAME[name], batch, args.budget)
            print(f"{name} B={batch} training step: " + ", ".join(
                [f"{b} {v * 1e3:.1f} ms" for b, v in result.seconds.items()]
                + [f"{b} not timed ({why})" for b, why in result.problems.items()]
                + [f"{why}" for why in result.differs.values()])
                + f"  [{time.perf_counter() - started:.0f} s]", flush=True)
    header = machine_lines(args, args.budget, (load_start, os.getloadavg()[0]))
    header = [(k, v.replace("benchmarks.bench", "benchmarks.zoo").replace("torch.no_grad()", "grad enabled"))
              for k, v in header]
    text = render_train(results, header)
    print("\n" + text)
    if args.write_results:
        write_results(text, TRAIN_START, TRAIN_END)
        print(f"wrote {RESULTS.name}")
    return 0


def first_calls(models: list[ZooModel], corpus: str = zoo_models.__name__) -> str:
    from benchmarks.first_call import first_call_seconds

    lines = ["First call in a fresh process, batch 1, seconds from process start (warm caches; the frozen",
             "module's first call also packs its weights and measures which library runs each packed layer):", "",
             "| model | eager | torchscribe (warm) | torchscribe frozen (warm) | torch.compile (warm) |",
             "| --- | --- | --- | --- | --- |"]
    for model in models:
        got = first_call_seconds(f"{corpus}:make:{model.name}:1",
                                 backends=("eager", "torchscribe", "frozen", "compile"))
        cells = [f"{v:.2f}" if v is not None else "failed"
                 for v in (got.eager, got.torchscribe_warm, got.frozen_warm, got.compile_warm)]
        lines.append(f"| {model.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

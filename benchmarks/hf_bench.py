"""The Hugging Face transformers benchmark and op report (issue 8 point 3).

    .venv-corpus/bin/python -m benchmarks.hf_bench [--models gpt2,llama] [--batches 1,8]
                                                   [--budget 1] [--threads N] [--no-first-call]
                                                   [--write-results]

For each model of benchmarks/hf_models.py, in one process: eager, `torch.compile(model)` (default
backend) and torchscribe (`script(model, example_inputs=<batch 2>, permissive=True)`, called at every
batch: the batch is symbolic), each result checked against eager before timing, then timed in turns
(benchmarks/bench.py's `time_in_turns`: warm-up, then median and best of the timed calls). Also the
cost of compiling: script() on an empty cache, each backend's first call, and torchscribe's first
call in a fresh process (empty and warm cache; torch.compile's is not measured there: minutes).

Then the op report: which of the aten ops a forward dispatches still come from Python. A
TorchDispatchMode counts the ops of one eager forward (E), then of one compiled forward, each
attributed by the innermost Python frame outside torch's own files at dispatch time:

- in the generated module, on a statement kept as Python (its `# file:N: kept as Python: why`
  marker), or in any other file (transformers' code the kept or compiled code calls): Python (P);
- in the generated module, on a compiled statement: extern (X), a torch call the compiler emitted;
- in torchscribe's own packages, or in the generated module's kernel launchers: runtime (R).

Ops that generated kernels run dispatch nothing: roughly the E - P - X - R that disappear. The
report gives `1 - P/E` and, per model, the kept markers (ops each dispatched, whether it ran) and the
compiled statements whose calls ran uncompiled Python. `--write-results` writes it all to
benchmarks/HF_RESULTS.md."""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import runtime
from benchmarks.bench import (
    Cell,
    Notes,
    Table,
    Timed,
    fmt_ms,
    fmt_s,
    fmt_x,
    load_average,
    machine_lines,
    speedup,
    time_in_turns,
    warm_up_compilers,
)
from benchmarks.hf_models import BY_NAME, MODELS, HFModel, compare_outputs

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "HF_RESULTS.md"
COMPILE_BATCH = 2  # script()'s example inputs, as tests/corpus/test_hf.py (a batch of 1 looks like a broadcast)
OP_BATCH = COMPILE_BATCH  # the batch the op report counts at
GENERATED_PREFIX = "torchscribe_jit."  # script()'s modules are imported under this name (transpiler/jit.py)
TORCH_DIR = os.path.dirname(torch.__file__) + os.sep  # as frames name its files (not resolved)
OUR_DIRS = tuple(str(ROOT / p) + os.sep for p in ("runtime", "transpiler", "ir", "codegen"))
KEPT_LIST_MAX = 15  # per model in HF_RESULTS.md; the rest is counted
BACKENDS = ("eager", "compile", "torchscribe")
OP_DEFINITION = ("in kernels or extern = 1 - P/E: aten ops eager runs minus those dispatched from code kept as "
                 "Python, over aten ops eager runs")

# ----------------------------------------------------------------------------- the generated module

MARKER = re.compile(r"^\s*# (?P<file>[^\s:]+):(?P<line>\d+): kept as Python: (?P<reason>.*\S)\s*$")
SOURCE = re.compile(r"^\s*# (?P<loc>[^\s:]+\.py:\d+)(?:  (?P<text>.*\S))?\s*$")  # a compiled statement's origin


@dataclass(frozen=True, order=True)
class Marker:
    file: str
    line: int
    reason: str


@dataclass(frozen=True)
class Site:
    """A run of statements of a generated file that share one origin: kept as Python (the markers
    above its first statement), compiled (`source`: the last source comment above it), or runtime
    (kernel launchers and other code outside compiled functions)."""

    kind: str  # "kept", "compiled" or "runtime"
    path: str
    line: int  # its first statement, in the generated file
    markers: tuple[Marker, ...] = ()
    source: str = ""


OUTSIDE = Site("outside", "", 0, source="outside generated code")


class GeneratedFile:
    """The statements of one generated module, each mapped to its Site. Codegen writes a comment
    with the source line above each statement, and a kept-as-Python marker above each kept one; the
    statements that follow without a comment of their own belong to the same run (a kept block's
    preamble and body, the rest of a compiled source line's statements)."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        # Every marker, in file order (a marker repeats where its code was inlined more than once).
        self.markers = [Marker(m["file"], int(m["line"]), m["reason"]) for m in map(MARKER.match, self.lines) if m]
        self.site_of_line: dict[int, Site] = {}
        for node in ast.parse(text).body:
            # A function with source comments is compiled code; one without (a kernel launcher) is runtime.
            if isinstance(node, ast.FunctionDef) and self._has_origins(node):
                self._visit(node.body, Site("compiled", path, node.lineno, source=f"{node.name} (entry checks)"))

    def site(self, line: int) -> Site:
        return self.site_of_line.get(line, Site("runtime", self.path, 0))

    def _has_origins(self, node: ast.FunctionDef) -> bool:
        return any(SOURCE.match(t) or MARKER.match(t) for t in self.lines[node.lineno - 1:node.end_lineno])

    def _comments_above(self, line: int) -> list[str]:
        out: list[str] = []
        i = line - 2
        while i >= 0 and self.lines[i].lstrip().startswith("#"):
            out.insert(0, self.lines[i])
            i -= 1
        return out

    def _visit(self, body: list[ast.stmt], current: Site) -> None:
        for stmt in body:
            above = self._comments_above(stmt.lineno)
            markers = tuple(Marker(m["file"], int(m["line"]), m["reason"]) for m in map(MARKER.match, above) if m)
            sources = [m for m in map(SOURCE.match, above) if m]
            if markers:
                current = Site("kept", self.path, stmt.lineno, markers=markers)
            elif sources:
                last = sources[-1]
                current = Site("compiled", self.path, stmt.lineno,
                               source=f"{last['loc']}  {last['text'] or ''}".rstrip())
            assert stmt.end_lineno is not None
            for n in range(stmt.lineno, stmt.end_lineno + 1):  # nested statements overwrite below
                self.site_of_line[n] = current
            for name in ("body", "orelse", "finalbody"):
                child = getattr(stmt, name, None)
                if isinstance(child, list) and child and isinstance(child[0], ast.stmt):
                    self._visit(child, current)
            for handler in getattr(stmt, "handlers", []):
                self._visit(handler.body, current)


def _is_generated(frame: types.FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).startswith(GENERATED_PREFIX)


# ----------------------------------------------------------------------------- counting and attribution


class OpCounter(TorchDispatchMode):
    """Counts the aten ops dispatched under it; with `attribute`, also sorts each by where it came
    from (the docstring of this module)."""

    def __init__(self, attribute: bool = False) -> None:
        super().__init__()
        self.attribute = attribute
        self.total = 0
        self.kinds: Counter[str] = Counter()  # python, extern, runtime, runtime_alloc
        self.python_sites: Counter[Site] = Counter()  # where each Python op's call left generated code
        self.files: dict[str, GeneratedFile] = {}

    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        self.total += 1
        if self.attribute:
            self._attribute(sys._getframe(1), str(func))
        return func(*args, **(kwargs or {}))

    def generated(self, frame: types.FrameType) -> GeneratedFile:
        path = frame.f_code.co_filename
        if path not in self.files:
            self.files[path] = GeneratedFile(path, Path(path).read_text(encoding="utf-8"))
        return self.files[path]

    def _attribute(self, frame: types.FrameType | None, op: str) -> None:
        while frame is not None and frame.f_code.co_filename.startswith(TORCH_DIR):
            frame = frame.f_back
        if frame is not None and _is_generated(frame):
            site = self.generated(frame).site(frame.f_lineno)
            if site.kind == "kept":
                self.kinds["python"] += 1
                self.python_sites[site] += 1
            elif site.kind == "compiled":
                self.kinds["extern"] += 1
            else:
                self._runtime(op)
        elif frame is not None and frame.f_code.co_filename.startswith(OUR_DIRS):
            self._runtime(op)
        else:  # another file (transformers, the standard library): the caller in generated code says why
            self.kinds["python"] += 1
            caller = frame.f_back if frame is not None else None
            while caller is not None and not _is_generated(caller):
                caller = caller.f_back
            self.python_sites[self.generated(caller).site(caller.f_lineno) if caller else OUTSIDE] += 1

    def _runtime(self, op: str) -> None:
        # Allocations of kernel outputs replace eager's allocations inside the ops they fuse.
        self.kinds["runtime_alloc" if op.startswith("aten.empty") else "runtime"] += 1


@contextmanager
def lines_run(executed: set[tuple[str, int]]) -> Iterator[None]:
    """Records (file, line) of every line of generated code that runs."""

    def local(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            executed.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
        return local if _is_generated(frame) else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)


@dataclass
class KeptRow:
    marker: Marker
    count: int  # places in the generated file(s)
    ops: int  # aten ops its statements dispatched, directly or through what they called
    ran: bool  # a line of its statements ran


@dataclass
class OpReport:
    eager: int
    python: int
    extern: int
    runtime: int
    runtime_alloc: int
    kept: list[KeptRow]
    calls: list[tuple[str, int]]  # (compiled statement whose call ran Python, ops), most ops first

    @property
    def compiled_total(self) -> int:
        return self.python + self.extern + self.runtime + self.runtime_alloc

    @property
    def in_kernels_or_extern(self) -> float:
        return min(1.0, max(0.0, 1.0 - self.python / self.eager)) if self.eager else math.nan


def count_ops(fn: Callable[..., Any], args: tuple) -> int:
    """The aten ops of one call, after a first one (which may initialise lazily)."""
    with torch.no_grad():
        fn(*args)
        with OpCounter() as counter:
            fn(*args)
    return counter.total


def op_report(eager_ops: int, compiled: Callable[..., Any], args: tuple, generated: list[str]) -> OpReport:
    """Attributes the ops of one compiled forward, after a first call (which may initialise lazily),
    in strict mode: a fallback to eager would pass for compiled code. `eager_ops`: count_ops of eager."""
    with torch.no_grad(), runtime.mode("strict"):
        compiled(*args)
    executed: set[tuple[str, int]] = set()
    with torch.no_grad(), runtime.mode("strict"), lines_run(executed), OpCounter(attribute=True) as counter:
        compiled(*args)
    for path in generated:  # the model's modules, also where nothing ran
        counter.files.setdefault(path, GeneratedFile(path, Path(path).read_text(encoding="utf-8")))
    return OpReport(eager_ops, counter.kinds["python"], counter.kinds["extern"], counter.kinds["runtime"],
                    counter.kinds["runtime_alloc"], kept_rows(counter, executed), call_rows(counter))


def kept_rows(counter: OpCounter, executed: set[tuple[str, int]]) -> list[KeptRow]:
    """One row per (source file, line, reason), in source order. A statement with several markers
    counts its ops under each."""
    count: Counter[Marker] = Counter()
    ops: Counter[Marker] = Counter()
    ran: set[Marker] = set()
    for gen in counter.files.values():
        count.update(gen.markers)
        for line, site in gen.site_of_line.items():
            if site.kind == "kept" and (gen.path, line) in executed:
                ran.update(site.markers)
    for site, n in counter.python_sites.items():
        for marker in set(site.markers):
            ops[marker] += n
    return [KeptRow(m, count[m], ops[m], m in ran or ops[m] > 0) for m in sorted(count)]


def call_rows(counter: OpCounter) -> list[tuple[str, int]]:
    per: Counter[str] = Counter()
    for site, n in counter.python_sites.items():
        if site.kind != "kept":
            per[site.source] += n
    return sorted(per.items(), key=lambda item: (-item[1], item[0]))


def new_generated_modules(before: set[str]) -> list[str]:
    """Files of the generated modules imported since `before` (a snapshot of sys.modules' names)."""
    return sorted(str(getattr(sys.modules[name], "__file__", "")) for name in set(sys.modules) - before
                  if name.startswith(GENERATED_PREFIX))


# ----------------------------------------------------------------------------- timing


@dataclass
class ModelResult:
    entry: HFModel
    script_s: float = math.nan  # script() on an empty cache
    script_error: str | None = None
    cells: dict[int, dict[str, Cell]] = field(default_factory=dict)  # batch -> backend -> cell
    ops: OpReport | None = None
    eager_ops: int | None = None
    op_error: str | None = None
    first_call: dict[str, float | str] = field(default_factory=dict)  # run kind -> seconds, or why not


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def mismatch_text(exc: BaseException) -> str:
    """The first line of compare_outputs' complaint, with the greatest difference when it says."""
    worst = next((line.strip() for line in str(exc).splitlines() if line.strip().startswith("Greatest absolute")), "")
    return first_line(exc) + (f" ({worst})" if worst else "")


def fmt_first(seconds: float) -> str:
    """A first call: seconds to three significant digits (a compile takes seconds, a call microseconds)."""
    return "-" if not math.isfinite(seconds) else f"{seconds:.3g}"


def run_model(entry: HFModel, batches: list[int], budget_s: float) -> ModelResult:
    result = ModelResult(entry)
    model = entry.build()
    from transpiler import script

    compiled = None
    before = set(sys.modules)
    try:
        with torch.no_grad():
            start = time.perf_counter()
            compiled = script(model, example_inputs=entry.inputs(COMPILE_BATCH), permissive=True)
            result.script_s = time.perf_counter() - start
    except Exception as exc:  # a model that does not compile is a row that says so
        result.script_error = first_line(exc)
    generated = new_generated_modules(before)
    torch._dynamo.reset()  # a fresh torch.compile per model, not a recompile of the previous one
    backends: dict[str, Callable[..., Any]] = {"eager": model, "compile": torch.compile(model)}
    if compiled is not None:
        backends["torchscribe"] = compiled
    for batch in batches:
        args = entry.inputs(batch)
        with torch.no_grad():
            expected = model(*args)
        cells = result.cells[batch] = {name: Cell() for name in BACKENDS}
        if compiled is None:
            cells["torchscribe"].error = f"does not compile: {result.script_error}"
        timed: dict[str, Timed] = {}
        for name, fn in backends.items():
            cell = cells[name]
            try:
                with torch.no_grad(), runtime.mode("strict"):  # strict: a fallback to eager is an error
                    start = time.perf_counter()
                    got = fn(*args)
                    cell.first_s = time.perf_counter() - start
            except Exception as exc:
                cell.error = first_line(exc)
                continue
            try:
                compare_outputs(expected, got, rtol=entry.rtol, atol=entry.atol)
            except AssertionError as exc:  # reported in the table, and timed all the same
                cell.mismatch = mismatch_text(exc)
            timed[name] = Timed(fn, args)
        fallbacks = sum(runtime.fallback_counts().values())
        time_in_turns(timed, budget_s)
        for name, entry_timed in timed.items():
            cells[name].seconds = statistics.median(entry_timed.times)
            cells[name].fastest_s = min(entry_timed.times)
        if sum(runtime.fallback_counts().values()) > fallbacks:  # only torchscribe's dispatcher counts
            cells["torchscribe"].error = "fell back to eager while timed (an entry check failed)"
    args = entry.inputs(OP_BATCH)
    try:
        result.eager_ops = count_ops(model, args)
        if compiled is not None:
            result.ops = op_report(result.eager_ops, compiled, args, generated)
    except Exception as exc:
        result.op_error = first_line(exc)
    return result


# ----------------------------------------------------------------------------- first call in a fresh process

# The child imports only what a user would: torch, the model's builder, and for torchscribe script().
CHILD = f"""
import json, sys, time
started = float(sys.argv[3])
import torch, runtime
from benchmarks.hf_models import BY_NAME
entry = BY_NAME[sys.argv[1]]
model = entry.build()
with torch.no_grad():
    if sys.argv[2] == "eager":
        model(*entry.inputs(1))
    else:
        from transpiler import script
        compiled = script(model, example_inputs=entry.inputs({COMPILE_BATCH}), permissive=True)
        with runtime.mode("strict"):
            compiled(*entry.inputs(1))
print(json.dumps(time.time() - started))
"""
CHILD_TIMEOUT_S = 600


def fresh_process_s(name: str, backend: str, env: dict[str, str]) -> float | str:
    """Seconds from the start of a new Python process to the first result at batch 1, or why not."""
    started = time.time()
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, name, backend, repr(started)], cwd=ROOT, env=env,
                              check=False, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"no result within {CHILD_TIMEOUT_S} s"
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        return lines[-1].strip() if lines else f"exit status {proc.returncode}"
    return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def first_calls(name: str, warm_cache: str) -> dict[str, float | str]:
    """Eager, then torchscribe with a new cache directory (compiles, builds kernels) and with the
    one this run filled (imports the cached module)."""
    env = dict(os.environ)
    out = {"eager": fresh_process_s(name, "eager", env)}
    empty = tempfile.mkdtemp(prefix="hf-bench-empty-")
    try:
        out["ts_empty"] = fresh_process_s(name, "torchscribe", {**env, "TORCHSCRIBE_CACHE_DIR": empty})
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    keys = Path(warm_cache) / "jit" / "keys"  # one file per cache key (transpiler/jit_cache.py)
    before = set(keys.glob("*"))
    warm = fresh_process_s(name, "torchscribe", {**env, "TORCHSCRIBE_CACHE_DIR": warm_cache})
    if isinstance(warm, float) and set(keys.glob("*")) - before:  # it compiled: not what "warm" means
        warm = (f"{warm:.2f} s, but it missed the cache and compiled: its key differed in the new process "
                "(the key covers the compiler's files and the model's settings objects' __dict__, where GPT-2's "
                "generation_config holds a per-process hash)")
    out["ts_warm"] = warm
    return out


# ----------------------------------------------------------------------------- report


def latency(cell: Cell, notes: Notes) -> str:
    if cell.error:
        return "failed" + notes.ref(cell.error)
    text = f"{fmt_ms(cell.seconds)} / {fmt_ms(cell.fastest_s)}"
    return text + (" MISMATCH" + notes.ref(cell.mismatch) if cell.mismatch else "")


def ratio(cells: dict[str, Cell], backend: str) -> str:
    cell = cells[backend]
    return "-" if cell.error else fmt_x(speedup(cells["eager"].seconds, cell.seconds))


def timing_table(results: list[ModelResult], notes: Notes) -> Table:
    rows = []
    for r in results:
        for batch, cells in r.cells.items():
            rows.append([r.entry.name, str(batch), latency(cells["eager"], notes),
                         latency(cells["compile"], notes), ratio(cells, "compile"),
                         latency(cells["torchscribe"], notes), ratio(cells, "torchscribe"),
                         fmt_first(cells["compile"].first_s), fmt_first(cells["torchscribe"].first_s)])
    headers = ["model", "batch", "eager ms", "torch.compile ms", "compile x", "torchscribe ms", "ts x",
               "compile 1st call s", "ts 1st call s"]
    legend = ("Latency: median / best of the timed calls, in ms; x: speed-up over eager (eager median / its "
              "median). torch.compile: default backend, compiled at its first call (at the second batch it "
              f"recompiles with a dynamic batch). torchscribe: compiled once at batch {COMPILE_BATCH} and called at "
              "every batch; 1st call: the first call after script(). MISMATCH: differs from eager beyond the "
              "model's tolerance (compare_outputs), timed all the same.")
    return Table("Latency", headers, rows, "lr" + "r" * (len(headers) - 2), legend)


def cost_table(results: list[ModelResult], notes: Notes, with_first_call: bool) -> Table:
    rows = []
    for r in results:
        script_cell = "failed" + notes.ref(r.script_error) if r.script_error else fmt_s(r.script_s)
        row = [r.entry.name, script_cell]
        if with_first_call:
            for kind in ("eager", "ts_empty", "ts_warm"):
                value = r.first_call.get(kind, "not run: the model does not compile")
                row.append(fmt_s(value) if isinstance(value, float) else "n/a" + notes.ref(str(value)))
        rows.append(row)
    headers = ["model", "script() s"]
    legend = ("script(): compiling on an empty cache (front end, passes, codegen, kernel builds), in this "
              "process after a warm-up compile of another model (imports not counted).")
    if with_first_call:
        headers += ["fresh eager s", "fresh ts empty s", "fresh ts warm s"]
        legend += (" fresh: seconds from the start of a new Python process to the first result at batch 1 "
                   "(start-up, imports, build, compile, the call); ts empty: a new TORCHSCRIBE_CACHE_DIR, ts "
                   "warm: the one this run filled. torch.compile's fresh first call is not measured (minutes).")
    return Table("Cost of compiling", headers, rows, "l" + "r" * (len(headers) - 1), legend)


def op_table(results: list[ModelResult], notes: Notes) -> Table:
    rows = []
    for r in results:
        if r.ops is None:
            why = r.op_error or f"does not compile: {r.script_error}"
            eager = str(r.eager_ops) if r.eager_ops is not None else "-"
            rows.append([r.entry.name, eager, "-", "-", "-", "-", "n/a" + notes.ref(why)])
            continue
        o = r.ops
        rows.append([r.entry.name, str(o.eager), str(o.compiled_total), str(o.python), str(o.extern),
                     f"{o.runtime} + {o.runtime_alloc}", f"{o.in_kernels_or_extern:.0%}"])
    headers = ["model", "E eager", "compiled", "P python", "X extern", "R runtime + alloc", "in kernels or extern"]
    legend = (f"aten ops dispatched by one forward at batch {OP_BATCH}, after a first call. {OP_DEFINITION}. "
              "compiled: every op the compiled forward dispatches (P + X + R; what kernels fuse dispatches "
              "nothing). Each op is attributed to the innermost frame outside torch's files: a kept-as-Python "
              "statement of the generated module or any other file (transformers) is P; a compiled statement is "
              "X (a torch call the compiler emitted); torchscribe's own packages and the generated kernel "
              "launchers are R, its allocations (aten.empty*) counted apart.")
    return Table("Ops: what runs in kernels or extern calls, what stays Python", headers, rows,
                 "l" + "r" * (len(headers) - 1), legend)


def kept_tables(result: ModelResult, limit: int | None) -> list[Table]:
    """What stayed Python in one model and why: its kept markers (all, or the `limit` that dispatched
    most ops, in source order, and a count of the rest), then the compiled calls that ran Python."""
    o = result.ops
    if o is None:
        return []
    kept = o.kept
    rest = 0
    if limit is not None and len(kept) > limit:
        top = sorted(kept, key=lambda k: (-k.ops, -k.ran, k.marker))[:limit]
        rest = len(kept) - limit
        kept = sorted(top, key=lambda k: k.marker)
    rows = [[f"{k.marker.file}:{k.marker.line}", k.marker.reason, str(k.count), str(k.ops), "yes" if k.ran else "no"]
            for k in kept]
    legend = ("Markers of the generated module, one row per (source line, reason); places: how often it occurs "
              "there (inlined code repeats); ops: aten ops its statements dispatched, themselves or through what "
              "they called (P); ran: one of its lines ran.")
    if rest:
        legend += f" {rest} more marker(s) not shown (the {limit} with most ops are)."
    tables = [Table(f"{result.entry.name}: kept as Python", ["source", "reason", "places", "ops", "ran"], rows,
                    "llrrl", legend)]
    if o.calls:
        tables.append(Table(f"{result.entry.name}: compiled statements whose call ran Python",
                            ["compiled statement (source line)", "ops"], [[s, str(n)] for s, n in o.calls], "lr",
                            "A call the compiler left to Python although the statement is compiled (a module or "
                            "function whose code was not inlined): the ops its callee dispatched (P)."))
    return tables


def render(header: list[tuple[str, str]], results: list[ModelResult], with_first_call: bool,
           markdown: bool) -> str:
    notes = Notes()
    tables = [timing_table(results, notes), cost_table(results, notes, with_first_call), op_table(results, notes)]
    for r in results:
        tables += kept_tables(r, KEPT_LIST_MAX if markdown else None)
    if markdown:
        parts = ["# Hugging Face transformers: benchmark and op report", "",
                 "Generated by `.venv-corpus/bin/python -m benchmarks.hf_bench --write-results`; do not edit.", ""]
        parts += [f"- **{label}**: {value}" for label, value in header]
        parts += [f"\n{t.markdown()}" for t in tables]
        if notes.texts:
            parts += ["", "### Notes", ""] + [f"{i}. {text}" for i, text in enumerate(notes.texts, 1)]
        return "\n".join(parts) + "\n"
    parts = ["Hugging Face transformers: benchmark and op report"] + [f"  {k}: {v}" for k, v in header]
    parts += [f"\n{t.text()}" for t in tables]
    if notes.texts:
        parts += ["", "Notes:"] + [f"  [{i}] {text}" for i, text in enumerate(notes.texts, 1)]
    return "\n".join(parts)


def header_lines(args: argparse.Namespace, budget_s: float, loads: tuple[float, float]) -> list[tuple[str, str]]:
    import transformers

    lines = []
    for label, value in machine_lines(args, budget_s, loads):
        value = value.replace("python -m benchmarks.bench", ".venv-corpus/bin/python -m benchmarks.hf_bench")
        if label == "versions":
            value += f", transformers {transformers.__version__}"
        lines.append((label, value))
    return lines + [("models", "benchmarks/hf_models.py: small configurations, random weights, float32, eval mode")]


# ----------------------------------------------------------------------------- driver


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all of hf_models.MODELS)")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per backend and batch")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads (default: torch's choice; 1 is steadier on a shared machine)")
    parser.add_argument("--no-first-call", action="store_true", help="leave out the fresh-process first calls")
    parser.add_argument("--write-results", action="store_true", help=f"also write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    names = [n for n in args.models.split(",") if n] or [m.name for m in MODELS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"no such model: {', '.join(unknown)} (known: {', '.join(BY_NAME)})")
    batches = [int(b) for b in args.batches.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)

    load_start = load_average()
    # Private caches: script() and torch.compile's first calls are those of an empty cache.
    scratch = tempfile.mkdtemp(prefix="hf-bench-")
    os.environ["TORCHSCRIBE_CACHE_DIR"] = os.path.join(scratch, "torchscribe")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    results = []
    try:
        print("warming up the compilers", file=sys.stderr, flush=True)
        warm_up_compilers()
        for name in names:
            started = time.perf_counter()
            result = run_model(BY_NAME[name], batches, args.budget)
            if not args.no_first_call and result.script_error is None:
                result.first_call = first_calls(name, os.environ["TORCHSCRIBE_CACHE_DIR"])
            results.append(result)
            print(f"{name}: done in {time.perf_counter() - started:.0f} s"
                  + (f" (does not compile: {result.script_error})" if result.script_error else ""),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    header = header_lines(args, args.budget, (load_start, load_average()))
    print(render(header, results, not args.no_first_call, markdown=False))
    if args.write_results:
        RESULTS.write_text(render(header, results, not args.no_first_call, markdown=True), encoding="utf-8")
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

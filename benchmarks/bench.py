"""`make bench`: eager, torch.jit.script, torch.compile and torchscribe on every example and on
micro-benchmarks, compared in one process; first calls in fresh processes.

For every example (at batch 1 and 8) and micro-benchmark (benchmarks/micro.py, at each of its
sizes) it prints the median latency of each backend, the speed-ups over eager, torchscribe
against torch.compile, the time to transpile and to compile, and whether the project's targets
are met; for the micro-benchmarks also the memory bandwidth an ideal fused kernel would reach at
that latency, against a copy measured in the same run. Then geometric means per batch; a
training step (forward, backward, SGD step: benchmarks/train_step.py) of every example with
parameters at batch 8, against eager and torch.compile; and the first call in a fresh process
(benchmarks/first_call.py) with an empty and a warm cache.

Run from the repository root: `python -m benchmarks.bench [--quick] [--only NAME ...]
[--training | --no-training] [--write-results]`; `--training` runs the training steps alone;
`--write-results` also writes the report to benchmarks/RESULTS.md.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import functools
import importlib
import inspect
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import runtime  # noqa: E402
from benchmarks import micro  # noqa: E402
from benchmarks.compare import compare, factories, flatten, module_state, observe, restorer, snapshot, tensors_in  # noqa: E402
from benchmarks.demo import example_stems  # noqa: E402
from benchmarks.first_call import FirstCall, first_call_seconds  # noqa: E402

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
BACKENDS = ("eager", "jit", "compile", "torchscribe")
BATCHES = (1, 8)
FIRST_CALL_MICRO_SIZE = "b8"

# Timing: per cell (one backend on one case), a time budget; the median of at least MIN_RUNS.
BUDGET_S = {"quick": 0.5, "full": 1.0}
WARMUP_FRACTION = 0.2  # of the budget, spent on calls that are not timed
MIN_WARMUP_CALLS = 3  # the profiling executor of torch.jit optimises after its first calls
MIN_RUNS = 5
MAX_RUNS = 10_000  # per round
# The backends of a case are timed in turns: the host's speed changes within seconds (one
# compiled model timed as three entries of a row gave equal medians, but the host ran 30% slower
# between two repetitions of the row), so short turns spread a slow spell over every backend.
ROUNDS = 10
NOISY = 2.0  # a median this many times the fastest run is flagged: other work stalled calls

# Targets (from the issue): each is met when the measured value reaches the threshold.
POINTWISE_VS_EAGER = 3.0
FUSED_VS_COMPILE = 1.0
EXAMPLES_VS_EAGER = 1.2
EXAMPLES_VS_COMPILE = 1.0
TRAIN_VS_EAGER = 1.0  # every example's training step: never slower than eager
TRAIN_VS_COMPILE = 1.0  # the examples' geometric mean
TRAIN_BATCH = 8
WARM_FIRST_CALL_S = 0.5  # over eager's first call (python start-up and imports cost more than this)

BUSY_LOAD = 0.5  # a load average before the run from which the report warns of other work


# ----------------------------------------------------------------------------- pure helpers


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of the finite positive values; NaN when there are none."""
    logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
    return math.exp(statistics.fmean(logs)) if logs else math.nan


def speedup(baseline_s: float, other_s: float) -> float:
    """How many times faster `other` is than `baseline` (NaN when either is missing)."""
    if not (baseline_s > 0 and other_s > 0):  # False for NaN too
        return math.nan
    return baseline_s / other_s


def bandwidth_gbs(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e9 if seconds > 0 else math.nan


def fmt_ms(seconds: float) -> str:
    """Milliseconds to three significant digits (whole milliseconds from 100 on)."""
    if not math.isfinite(seconds):
        return "-"
    ms = seconds * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def fmt_s(seconds: float | None) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{seconds:.2f}"


def fmt_x(ratio: float) -> str:
    return "-" if not math.isfinite(ratio) else f"{ratio:.2f}x"


def fmt_gbs(gbs: float) -> str:
    return "-" if not math.isfinite(gbs) else f"{gbs:.1f}"


def target_status(label: str, value: float, threshold: float, higher_is_better: bool = True) -> str:
    """`met <label>` / `MISS <label>` / `n/a <label>` (no measurement)."""
    if not math.isfinite(value):
        return f"n/a {label}"
    met = value >= threshold if higher_is_better else value < threshold
    return f"{'met' if met else 'MISS'} {label}"


class Notes:
    """Numbered footnotes, one number per distinct text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


@dataclass
class Table:
    """Rows of strings under headers; `align` has one letter per column: l(eft) or r(ight)."""

    title: str
    headers: Sequence[str]
    rows: list[Sequence[str]]
    align: str
    legend: str = ""

    def text(self) -> str:
        widths = [max(len(r[i]) for r in [self.headers, *self.rows]) for i in range(len(self.headers))]

        def line(cells: Sequence[str]) -> str:
            parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, self.align)]
            return " | ".join(parts).rstrip()

        out = [self.title, line(self.headers), "-+-".join("-" * w for w in widths)]
        out += [line(r) for r in self.rows]
        return "\n".join(out + ([self.legend] if self.legend else []))

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        rule = "| " + " | ".join(":--" if a == "l" else "--:" for a in self.align) + " |"
        out = [f"### {self.title}", "", line(self.headers), rule, *(line(r) for r in self.rows)]
        return "\n".join(out + (["", self.legend] if self.legend else []))


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One model at one size: how to make fresh (model, inputs)."""

    name: str
    size: str  # "B=1", "B=8", "example" (the example's own inputs) or a micro.SIZES label
    group: str  # "example" or "micro"
    make: Callable[[], tuple[Any, tuple]]
    note: str | None = None  # a footnote on the size


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`obj` with every tensor in its nested tuples and lists replaced by `fn(tensor)`."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (tuple, list)):
        return type(obj)(map_tensors(item, fn) for item in obj)
    return obj


def batch_problem(inputs: tuple) -> str | None:
    """Why the leading size of the inputs is not a batch size we may change, or None.

    It is taken as the batch when every tensor input has one and they agree (an LSTM's
    (time, batch, features) input next to its (batch, hidden) state does not)."""
    leading = [t.shape[0] if t.dim() else None for t in tensors_in(inputs)]
    if not leading:
        return "no tensor input"
    if None in leading:
        return "a 0-d tensor input has no batch dimension"
    if len(set(leading)) > 1:
        sizes = ", ".join(str(s) for s in dict.fromkeys(leading))
        return f"its tensor inputs disagree on the leading size ({sizes}), so it is not the batch"
    return None


def with_batch(inputs: tuple, batch: int) -> tuple:
    """The inputs at another batch size: rows taken cyclically, so the data keep their kind."""
    def resize(t: torch.Tensor) -> torch.Tensor:
        return t[torch.arange(batch) % t.shape[0]].contiguous()

    return map_tensors(inputs, resize)


def _rebatched(factory: Callable[[], tuple[Any, tuple]], batch: int) -> Callable[[], tuple[Any, tuple]]:
    def make() -> tuple[Any, tuple]:
        model, inputs = factory()
        return model, with_batch(inputs, batch)

    return make


def example_cases() -> tuple[list[Case], dict[str, str]]:
    """Every example variant at each of BATCHES, and the first-call factory reference of each."""
    cases, refs = [], {}
    for stem in example_stems():
        module = importlib.import_module(f"examples.{stem}")
        for variant, factory in factories(module):
            name = f"{stem}[{variant}]" if variant else stem
            refs[name] = f"examples.{stem}:{factory.__name__}"
            problem = batch_problem(factory()[1])
            if problem:
                note = f"run at the example's own inputs only, left out of the geometric means: {problem}"
                cases.append(Case(name, "example", "example", factory, note))
                continue
            cases += [Case(name, f"B={b}", "example", _rebatched(factory, b)) for b in BATCHES]
    return cases, refs


def micro_cases() -> tuple[list[Case], dict[str, str]]:
    cases = [Case(name, size, "micro", factory) for name, size, factory in micro.factories()]
    refs = {name: f"benchmarks.micro:make:{name}:{FIRST_CALL_MICRO_SIZE}" for name in micro.BENCHMARKS}
    return cases, refs


def selected(name: str, only: Sequence[str]) -> bool:
    """`--only mlp` selects mlp; `--only conv_bn_relu` every variant of it too."""
    return not only or name in only or name.split("[")[0] in only


# ----------------------------------------------------------------------------- backends


@functools.cache
def _plain_class(cls: type) -> type:
    """A subclass whose forward is the eager one the @script decorator kept: torch.jit.script
    compiles a method in its function's module, and the dispatcher's module lacks the names
    the model uses."""
    eager = cls.__dict__["__torchscribe_eager__"]
    return type(cls.__name__, (cls,), {"forward": eager, "__module__": cls.__module__, "__qualname__": cls.__qualname__})


def undecorated(obj: Any) -> Any:
    """A copy of a model with no torchscribe dispatcher anywhere in it (the function itself,
    for a decorated function): what a user without torchscribe would run."""
    if not isinstance(obj, nn.Module):
        return inspect.unwrap(obj)
    clone = copy.deepcopy(obj)
    for module in clone.modules():
        if "__torchscribe_eager__" in type(module).__dict__:
            module.__class__ = _plain_class(type(module))
    return clone


@dataclass
class Built:
    """A backend ready to call: the callable, the module that owns the state it updates (for
    comparing and restoring it), and a remark for the footnotes."""

    fn: Callable[..., Any]
    owner: Any
    remark: str | None = None


def build_eager(model: Any, inputs: tuple) -> Built:
    plain = undecorated(model)
    return Built(plain, plain)


def build_jit(model: Any, inputs: tuple) -> Built:
    plain = undecorated(model)
    scripted = torch.jit.script(plain)
    if not isinstance(plain, nn.Module):
        return Built(scripted, None)
    if plain.training:
        return Built(scripted, scripted, "torch.jit.freeze not applied: the module is in training mode")
    try:
        return Built(torch.jit.freeze(scripted), plain)
    except Exception as exc:  # freezing is best effort
        return Built(scripted, scripted, f"torch.jit.freeze failed, timed unfrozen: {short_error(exc)}")


def build_compile(model: Any, inputs: tuple) -> Built:
    torch._dynamo.reset()  # a fresh compile for every case, not a recompile of the previous one
    plain = undecorated(model)
    return Built(torch.compile(plain), plain)


def checked_in(model: Any) -> bool:
    """Whether `model` is decorated (a class or function with `@script`): it runs its
    checked-in `<stem>_compiled.py`, as a user's code does."""
    target = type(model) if isinstance(model, nn.Module) else model
    return bool(getattr(target, "__torchscribe__", False) and (isinstance(target, type) and "__torchscribe__" in vars(target)
                                                               or not isinstance(target, type)))


def build_torchscribe(model: Any, inputs: tuple) -> Built:
    from transpiler import script

    if checked_in(model):  # the examples: their committed modules, in strict mode (calling_mode)
        return Built(model, model if isinstance(model, nn.Module) else None, None)

    # "transpile s" is the cost of compiling: not a hit in script()'s own cache, which the same
    # example at another batch size would find (the batch is symbolic). The fresh-process first
    # calls (benchmarks/first_call.py) measure the cache, empty and warm.
    old = os.environ.get("TORCHSCRIBE_JIT_CACHE")
    os.environ["TORCHSCRIBE_JIT_CACHE"] = "off"
    try:
        compiled = script(model, example_inputs=inputs)
    finally:
        if old is None:
            os.environ.pop("TORCHSCRIBE_JIT_CACHE", None)
        else:
            os.environ["TORCHSCRIBE_JIT_CACHE"] = old
    return Built(compiled, compiled if isinstance(compiled, nn.Module) else None)


BUILDERS: dict[str, Callable[[Any, tuple], Built]] = {
    "eager": build_eager,
    "jit": build_jit,
    "compile": build_compile,
    "torchscribe": build_torchscribe,
}


def calling_mode(backend: str) -> contextlib.AbstractContextManager:
    """Eager runs with the dispatcher off, should a decorated class still be reached; torchscribe
    in strict mode, so that a stale committed module or a fallback is an error, not eager's time."""
    return runtime.mode("off") if backend == "eager" else runtime.mode("strict") if backend == "torchscribe" \
        else contextlib.nullcontext()


# ----------------------------------------------------------------------------- measuring


def log(message: str) -> None:
    """Progress, on stderr so that stdout is the report."""
    print(message, file=sys.stderr, flush=True)


def short_error(exc: BaseException) -> str:
    """The first line of an exception's message, for a footnote."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    if not first.startswith(type(exc).__name__):
        first = f"{type(exc).__name__}: {first}"
    return first if len(first) <= 160 else first[:157] + "..."


def tolerance(tensor: torch.Tensor) -> tuple[float, float]:
    """(atol, rtol) of ir/primitives.TOLERANCE for the dtype; exact for other dtypes. (Imported
    here: the IR package imports sympy, which a fresh-process first call should not pay for.)"""
    from ir.kernel.primitives import TOLERANCE

    return TOLERANCE.get(str(tensor.dtype).removeprefix("torch."), (0.0, 0.0))


def mismatches(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """What differs between two observations (benchmarks.compare.observe), each tensor within
    the tolerance of its dtype."""
    problems = [f"{p}: missing" for p in expected if p not in actual]
    problems += [f"{p}: unexpected" for p in actual if p not in expected]
    for path, value in expected.items():
        if path in actual:
            atol, rtol = tolerance(value) if isinstance(value, torch.Tensor) else (0.0, 0.0)
            problems += compare({path: value}, {path: actual[path]}, atol=atol, rtol=rtol).mismatches
    return problems


@dataclass
class Timed:
    """One thing to time: `fn(*args)` inside `context`, with `restore` run untimed before each call."""

    fn: Callable[..., Any]
    args: tuple
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    restore: Callable[[], None] | None = None
    times: list[float] = field(default_factory=list)
    rounds: list[list[float]] = field(default_factory=list)  # `times`, by round of `time_in_turns`

    def once(self) -> float:
        if self.restore is not None:
            self.restore()
        start = time.perf_counter()
        self.fn(*self.args)
        return time.perf_counter() - start

    def run_for(self, seconds: float, at_least: int) -> list[float]:
        """Timed calls for about `seconds`, and at least `at_least` of them."""
        times: list[float] = []
        until = time.perf_counter() + seconds
        with self.context():
            while len(times) < at_least or (time.perf_counter() < until and len(times) < MAX_RUNS):
                times.append(self.once())
        return times


def time_in_turns(timed: dict[str, Timed], budget_s: float) -> None:
    """Fill each entry's `times`, `budget_s` each. The entries take turns (ROUNDS of them), so that
    on a machine shared with other work a busy spell slows every backend, not just one."""
    with torch.no_grad():
        for entry in timed.values():  # warm-up, untimed
            entry.run_for(budget_s * WARMUP_FRACTION, MIN_WARMUP_CALLS)
        for _ in range(ROUNDS):
            for entry in timed.values():
                got = entry.run_for(budget_s / ROUNDS, math.ceil(MIN_RUNS / ROUNDS))
                entry.rounds.append(got)
                entry.times += got


@dataclass
class Cell:
    """One backend on one case."""

    seconds: float = math.nan  # median latency
    fastest_s: float = math.nan  # the fastest timed call
    build_s: float = math.nan  # script() / torch.jit.script (+ freeze) / torch.compile
    first_s: float = math.nan  # the first call after building (torch.compile compiles then)
    error: str | None = None  # did not build or run: no time
    mismatch: str | None = None  # ran, but the results differ from eager's
    remark: str | None = None
    ideal_bytes: int = 0  # inputs, parameters and outputs, each once

    @property
    def compile_s(self) -> float:
        """The whole cost before the second call."""
        return self.build_s + self.first_s


@dataclass
class Row:
    case: Case
    cells: dict[str, Cell] = field(default_factory=dict)
    copy_s: float = math.nan  # micro: torch.empty_like(x).copy_(x) on its input (median)
    copy_fastest_s: float = math.nan
    copy_bytes: int = 0  # read and written by that copy

    def seconds(self, backend: str) -> float:
        cell = self.cells.get(backend)
        return cell.seconds if cell and not cell.error else math.nan

    def ts_ok(self) -> bool:
        cell = self.cells.get("torchscribe")
        return bool(cell) and not cell.error and not cell.mismatch


@dataclass
class Reference:
    """Eager's observed results on one case, and whether the call updates inputs or state."""

    observed: dict[str, Any]
    updates: bool


def prepare(backend: str, case: Case, reference: Reference | None) -> tuple[Cell, Reference | None, Timed | None]:
    """Build one backend on a fresh copy of the case, call it once and check it against eager's
    reference (for eager, whose reference is None, its results become the reference); what to
    time, unless it failed or torchscribe's result is wrong (a wrong result is not timed)."""
    cell = Cell()
    model, inputs = case.make()
    try:
        with torch.no_grad(), calling_mode(backend):
            start = time.perf_counter()
            built = BUILDERS[backend](model, inputs)
            cell.build_s = time.perf_counter() - start
            cell.remark = built.remark
            restore = restorer(inputs, built.owner)
            before = snapshot(observe(built.owner, inputs, None))
            start = time.perf_counter()
            output = built.fn(*inputs)
            cell.first_s = time.perf_counter() - start
        observed = snapshot(observe(built.owner, inputs, output))
        cell.ideal_bytes = ideal_bytes(built.owner, inputs, output)
    except Exception as exc:  # report it and go on with the other backends
        cell.error = short_error(exc)
        return cell, reference, None
    if reference is None:
        after = observe(built.owner, inputs, None)
        reference = Reference(observed, updates=not compare(before, after, atol=0.0, rtol=0.0).ok)
    elif problems := mismatches(reference.observed, observed):
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        cell.mismatch = f"{backend} differs from eager: {problems[0]}{more}"
        if backend == "torchscribe":
            return cell, reference, None
    timed = Timed(built.fn, inputs, functools.partial(calling_mode, backend), restore if reference.updates else None)
    return cell, reference, timed


def ideal_bytes(model: Any, inputs: tuple, output: Any) -> int:
    """Bytes a fused kernel moves at best: every input, parameter and buffer read once and the
    output written once."""
    tensors = list(tensors_in(inputs)) + list(module_state(model).values())
    tensors += [v for v in flatten(output, "").values() if isinstance(v, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def copy_of(x: torch.Tensor) -> torch.Tensor:
    """`torch.empty_like(x).copy_(x)`: the bandwidth any kernel on x can hope for."""
    return torch.empty_like(x).copy_(x)


def run_case(case: Case, budget_s: float) -> Row:
    """Every backend on one case, checked against eager, then timed in turns."""
    row = Row(case)
    reference = None
    timed: dict[str, Timed] = {}
    for backend in BACKENDS:
        log(f"{case.name} {case.size}: {backend}")
        cell, reference, ready = prepare(backend, case, reference)
        row.cells[backend] = cell
        if reference is None:  # eager failed: nothing to compare the others with
            return row
        if ready is not None:
            timed[backend] = ready
    if case.group == "micro" and "eager" in timed:
        x = next(iter(tensors_in(timed["eager"].args)))
        timed["copy"] = Timed(copy_of, (x,))
        row.copy_bytes = 2 * x.numel() * x.element_size()
    log(f"{case.name} {case.size}: timing {', '.join(timed)}")
    fallbacks = sum(runtime.fallback_counts().values())
    generic = sum(runtime.generic_counts().values())
    time_in_turns(timed, budget_s)
    for name, entry in timed.items():
        if name == "copy":
            row.copy_s, row.copy_fastest_s = statistics.median(entry.times), min(entry.times)
        else:
            row.cells[name].seconds, row.cells[name].fastest_s = statistics.median(entry.times), min(entry.times)
    if sum(runtime.fallback_counts().values()) > fallbacks:  # only torchscribe's dispatcher counts
        row.cells["torchscribe"].error = "the compiled code fell back to eager (an entry check failed)"
    elif sum(runtime.generic_counts().values()) > generic and row.cells["torchscribe"].remark is None:
        row.cells["torchscribe"].remark = "ran the committed module's generic code (no specialisation accepts the call)"
    return row


@dataclass
class TrainRow:
    """A training step of one example (benchmarks/train_step.py): per backend, its median
    seconds or why it was not timed; `skipped` says why the example has no step to time."""

    case: Case
    result: Any = None  # train_step.Result
    skipped: str | None = None

    def seconds(self, backend: str) -> float:
        return self.result.seconds.get(backend, math.nan) if self.result is not None else math.nan


def training_cases(examples: list[Case]) -> list[Case]:
    """The examples at the training batch (those whose batch is not changed: at their own inputs)."""
    return [c for c in examples if c.size in (f"B={TRAIN_BATCH}", "example")]


def run_training(case: Case, budget_s: float) -> TrainRow:
    """One example's training step, per backend (benchmarks/train_step.py)."""
    from benchmarks import train_step  # (it imports this module's helpers)

    log(f"{case.name} {case.size}: training step")
    model, inputs = case.make()
    skipped = train_step.trainable_problem(model)
    if skipped:
        return TrainRow(case, skipped=skipped)
    return TrainRow(case, train_step.measure(model, inputs, train_step.MeanSquares(), budget_s))


# ----------------------------------------------------------------------------- report


# benchmarks/zoo.py (the real models, another virtualenv) owns the end of RESULTS.md: one block
# per corpus, torchvision's zoo (`--corpus torchvision`) and timm's (`--corpus timm`), and one for
# training steps (`--train`).
ZOO_START, ZOO_END = "<!-- zoo: benchmarks/zoo.py writes from here -->", "<!-- zoo: end -->"
TIMM_START, TIMM_END = "<!-- timm: benchmarks/zoo.py --corpus timm writes from here -->", "<!-- timm: end -->"
TRAIN_START, TRAIN_END = "<!-- zoo-train: benchmarks/zoo.py --train writes from here -->", "<!-- zoo-train: end -->"


def kept_zoo_block() -> str:
    """The corpus blocks at the end of RESULTS.md, which this benchmark leaves as they are."""
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    starts = [old.index(marker) for marker in (ZOO_START, TIMM_START, TRAIN_START) if marker in old]
    return "\n" + old[min(starts):].strip() + "\n" if starts else ""


def machine_lines(args: argparse.Namespace, budget_s: float, loads: tuple[float, float]) -> list[tuple[str, str]]:
    """(label, value) pairs describing where and how the numbers were taken."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        ("date", datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
        ("machine", f"{cpu}; {os.cpu_count()} logical CPUs ({usable} usable); torch threads {torch.get_num_threads()}"),
        ("OS", f"{os_name()} ({platform.system()} {platform.release()}, {platform.machine()})"),
        ("versions", f"Python {platform.python_version()}, torch {torch.__version__}, triton {triton_version}, "
                     f"torchscribe {runtime.__version__}"),
        ("load", load_line(*loads)),
        ("command", "python -m benchmarks.bench " + " ".join(args.argv)),
        ("timing", f"median per cell after warm-up, {budget_s:g} s budget per cell, at least {ROUNDS * math.ceil(MIN_RUNS / ROUNDS)} runs, "
                   f"the backends of a row timed in {ROUNDS} turns; torch.no_grad(); float32 on CPU"),
    ]


def load_average() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


def load_line(at_start: float, at_end: float) -> str:
    """The load around the run, and a warning when other work was running before it started."""
    line = f"1-minute load average {at_start:.2f} before the run, {at_end:.2f} after it"
    if at_start >= BUSY_LOAD:
        line += (" -- other work was running: parallel torch ops then wait for descheduled threads, so "
                 "latencies are noisy and some inflated by milliseconds; compare runs taken on an idle machine")
    return line


def os_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return platform.platform()


def size_cell(case: Case, notes: Notes) -> str:
    return case.size + (notes.ref(case.note) if case.note else "")


def time_cell(cell: Cell | None, notes: Notes) -> str:
    """A latency with a footnote for anything odd: an error, a mismatch, a remark."""
    if cell is None:
        return "-"
    if cell.error:
        return "n/a" + notes.ref(cell.error)
    text = "FAIL" if cell.mismatch and math.isnan(cell.seconds) else fmt_ms(cell.seconds)
    noisy = cell.seconds > NOISY * cell.fastest_s
    for remark in (cell.mismatch, cell.remark, NOISY_NOTE if noisy else None):
        if remark:
            text += notes.ref(remark)
    return text


def ratios(row: Row) -> dict[str, float]:
    """Speed-ups over eager per backend, and torchscribe against torch.compile."""
    eager = row.seconds("eager")
    ts = row.seconds("torchscribe") if row.ts_ok() else math.nan
    out = {b: speedup(eager, row.seconds(b)) for b in ("jit", "compile")}
    out["torchscribe"] = speedup(eager, ts)
    out["ts_vs_compile"] = speedup(row.seconds("compile"), ts)
    return out


def row_targets(row: Row) -> str:
    r = ratios(row)
    if "torchscribe" in row.cells and not row.ts_ok():
        return "FAIL (torchscribe)"
    if row.case.group == "example":
        checks = [target_status(f">={EXAMPLES_VS_EAGER:g}x eager", r["torchscribe"], EXAMPLES_VS_EAGER),
                  target_status(f">={EXAMPLES_VS_COMPILE:g}x compile", r["ts_vs_compile"], EXAMPLES_VS_COMPILE)]
    elif row.case.name == "pointwise_chain":
        checks = [target_status(f">={POINTWISE_VS_EAGER:g}x eager", r["torchscribe"], POINTWISE_VS_EAGER),
                  target_status(f">={FUSED_VS_COMPILE:g}x compile", r["ts_vs_compile"], FUSED_VS_COMPILE)]
    else:
        checks = [target_status(f">={FUSED_VS_COMPILE:g}x compile", r["ts_vs_compile"], FUSED_VS_COMPILE)]
    return ", ".join(checks)


NOISY_NOTE = (f"noisy: the median is over {NOISY:g}x the fastest call (other work on the machine stalled "
              f"calls), so this latency and its ratios overstate the cost")
LATENCY_HEADERS = ["eager ms", "jit ms", "compile ms", "ts ms", "jit x", "compile x", "ts x", "ts/compile"]


def latency_cells(row: Row, notes: Notes) -> list[str]:
    r = ratios(row)
    times = [time_cell(row.cells.get(b), notes) for b in BACKENDS]
    return times + [fmt_x(r["jit"]), fmt_x(r["compile"]), fmt_x(r["torchscribe"]), fmt_x(r["ts_vs_compile"])]


def build_cells(row: Row) -> list[str]:
    ts, comp = row.cells.get("torchscribe"), row.cells.get("compile")
    transpile = ts.build_s if ts and not ts.error else math.nan
    compile_s = comp.compile_s if comp and not comp.error else math.nan
    return [fmt_s(transpile), fmt_s(compile_s)]


LATENCY_LEGEND = (
    "ms: median latency; `x`: speed-up over eager (eager ms / backend ms); ts/compile: torch.compile ms / "
    "torchscribe ms (above 1: torchscribe is faster); transpile s: script(...) with an empty cache; "
    "compile s: torch.compile's first call (the compile)."
)


def examples_table(rows: list[Row], notes: Notes) -> Table:
    body = [[r.case.name, size_cell(r.case, notes), *latency_cells(r, notes), *build_cells(r), row_targets(r)]
            for r in rows]
    headers = ["example", "batch", *LATENCY_HEADERS, "transpile s", "compile s", "targets (per model)"]
    legend = LATENCY_LEGEND + (f" Targets are for the geometric means (below); per model they show which "
                               f"models hold them back.")
    return Table("Examples", headers, body, "ll" + "r" * (len(headers) - 3) + "l", legend)


def micro_table(rows: list[Row], notes: Notes) -> Table:
    body = []
    for r in rows:
        moved = r.cells["eager"].ideal_bytes if "eager" in r.cells else 0
        gbs = {b: bandwidth_gbs(moved, r.seconds(b)) for b in ("eager", "compile")}
        gbs["torchscribe"] = bandwidth_gbs(moved, r.seconds("torchscribe") if r.ts_ok() else math.nan)
        copy_gbs = bandwidth_gbs(r.copy_bytes, r.copy_s)
        share = gbs["torchscribe"] / copy_gbs if copy_gbs > 0 else math.nan
        body.append([r.case.name, size_cell(r.case, notes), *latency_cells(r, notes),
                     fmt_gbs(gbs["eager"]), fmt_gbs(gbs["compile"]), fmt_gbs(gbs["torchscribe"]),
                     fmt_gbs(copy_gbs) + (notes.ref(NOISY_NOTE) if r.copy_s > NOISY * r.copy_fastest_s else ""),
                     "-" if not math.isfinite(share) else f"{share:.0%}", *build_cells(r), row_targets(r)])
    headers = ["micro", "size", *LATENCY_HEADERS, "eager GB/s", "compile GB/s", "ts GB/s", "copy GB/s",
               "ts/copy", "transpile s", "compile s", "targets"]
    sizes = ", ".join(f"{label} = batch {b}" for label, b in micro.SIZES.items())
    others = "".join(f", {name} {tuple(micro.SHAPES[name](0))}".replace("(0,", "(batch,") for name in micro.SHAPES)
    legend = (LATENCY_LEGEND + f" Input (batch, {micro.SEQ}, {micro.WIDTH}){others} float32; {sizes}. GB/s: bytes an "
              f"ideal fused kernel moves (inputs and parameters read once, output written once) / median latency; "
              f"copy: torch.empty_like(x).copy_(x) on the same input in the same run.")
    return Table("Micro-benchmarks", headers, body, "ll" + "r" * (len(headers) - 3) + "l", legend)


def geomean_table(rows: list[Row]) -> Table:
    body = []
    for batch in BATCHES:
        size = f"B={batch}"
        at = [r for r in rows if r.case.size == size and r.cells]
        rs = [ratios(r) for r in at]
        means = {k: geomean(x[k] for x in rs) for k in ("jit", "compile", "torchscribe", "ts_vs_compile")}
        counted = sum(1 for x in rs if math.isfinite(x["torchscribe"]))
        body.append([size, f"{counted} of {len(at)}", fmt_x(means["jit"]), fmt_x(means["compile"]),
                     fmt_x(means["torchscribe"]), fmt_x(means["ts_vs_compile"]),
                     ", ".join([target_status(f">={EXAMPLES_VS_EAGER:g}x eager", means["torchscribe"], EXAMPLES_VS_EAGER),
                                target_status(f">={EXAMPLES_VS_COMPILE:g}x compile", means["ts_vs_compile"],
                                              EXAMPLES_VS_COMPILE)])])
    headers = ["batch", "models (ts ok)", "jit x", "compile x", "ts x", "ts/compile", "targets"]
    legend = ("Geometric means over the examples run at that batch; each backend over the models where it ran "
              "(and, for torchscribe, matched eager).")
    return Table("Examples: geometric means", headers, body, "ll" + "r" * (len(headers) - 3) + "l", legend)


TRAIN_BACKENDS = ("eager", "compile", "torchscribe")


def train_ratios(row: TrainRow) -> dict[str, float]:
    eager, comp, ts = (row.seconds(b) for b in TRAIN_BACKENDS)
    return {"compile": speedup(eager, comp), "torchscribe": speedup(eager, ts), "ts_vs_compile": speedup(comp, ts)}


def train_time_cell(row: TrainRow, backend: str, notes: Notes) -> str:
    result = row.result
    if result is None:
        return "-"
    if backend in result.problems:
        return "n/a" + notes.ref(result.problems[backend])
    seconds = result.seconds.get(backend, math.nan)
    noisy = seconds > NOISY * result.fastest_s.get(backend, math.nan)
    differs = notes.ref(result.differs[backend]) if backend in result.differs else ""
    return fmt_ms(seconds) + differs + (notes.ref(NOISY_NOTE) if noisy else "")


def training_table(rows: list[TrainRow], notes: Notes) -> Table:
    from benchmarks.train_step import LR, MOMENTUM, NOISE_FACTOR

    body = []
    for r in rows:
        if r.skipped:
            body.append([r.case.name, size_cell(r.case, notes), "not trained" + notes.ref(r.skipped)]
                        + ["-"] * 8)
            continue
        x = train_ratios(r)
        first = [fmt_s(r.result.first_s.get(b, math.nan)) for b in ("compile", "torchscribe")]
        target = target_status(f">={TRAIN_VS_EAGER:g}x eager", x["torchscribe"], TRAIN_VS_EAGER)
        body.append([r.case.name, size_cell(r.case, notes), *(train_time_cell(r, b, notes) for b in TRAIN_BACKENDS),
                     fmt_x(x["compile"]), fmt_x(x["torchscribe"]), fmt_x(x["ts_vs_compile"]), *first, target])
    headers = ["example", "batch", "eager ms", "compile ms", "ts ms", "compile x", "ts x", "ts/compile",
               "compile first s", "ts first s", "target"]
    legend = (f"One training step (benchmarks/train_step.py): train() mode, the batch, a mean squared error against "
              f"a fixed target, backward, torch.optim.SGD(lr={LR:g}, momentum={MOMENTUM:g}) step, "
              f"zero_grad(set_to_none=True); grad enabled. Each backend trains its own copy of the model; one step "
              f"of each is checked against eager's (what every parameter and buffer moved by, within "
              f"{NOISE_FACTOR:g} times the rounding error of eager's float32 step against its float64 step, or of "
              f"its step on channels-last tensors) before "
              f"timing: torchscribe's step that differs is not timed, another backend's is timed with a note. "
              f"torchscribe: the committed module (the code for calls autograd records: an entry's code for "
              f"autograd compiled from its example where it has one and its checks accept the call, its pointwise "
              f"groups of 32k elements and more fused with backward kernels; else its generic code, torch's own "
              f"backward); torch.compile: the model compiled (default mode, fallback_random=True so "
              f"that dropout draws eager's masks). ms: median step; x: speed-up over eager; ts/compile: compile ms "
              f"/ ts ms; first s: building and the checked step (torch.compile compiles the forward and backward "
              f"then).")
    return Table(f"Training step (batch {TRAIN_BATCH})", headers, body, "ll" + "r" * (len(headers) - 3) + "l", legend)


def training_geomean_table(rows: list[TrainRow]) -> Table:
    at = [r for r in rows if r.result is not None and r.case.size == f"B={TRAIN_BATCH}"]
    xs = [train_ratios(r) for r in at]
    means = {k: geomean(x[k] for x in xs) for k in ("compile", "torchscribe", "ts_vs_compile")}
    counted = [x for x in xs if math.isfinite(x["torchscribe"])]
    slower, untimed = sum(1 for x in counted if x["torchscribe"] < TRAIN_VS_EAGER), len(at) - len(counted)
    never_slower = (f"{'met' if counted and not slower and not untimed else 'MISS' if counted else 'n/a'} every "
                    f"model >={TRAIN_VS_EAGER:g}x eager ({slower} slower, {untimed} not timed)")
    body = [[f"B={TRAIN_BATCH}", f"{len(counted)} of {len(at)}", fmt_x(means["compile"]), fmt_x(means["torchscribe"]),
             fmt_x(means["ts_vs_compile"]),
             ", ".join([never_slower, target_status(f">={TRAIN_VS_COMPILE:g}x compile", means["ts_vs_compile"],
                                                    TRAIN_VS_COMPILE)])]]
    headers = ["batch", "models (ts ok)", "compile x", "ts x", "ts/compile", "targets"]
    legend = ("Geometric means over the examples trained at that batch (an example at its own inputs is left out, "
              "as above); each backend over the models where it ran and matched eager.")
    return Table("Training step: geometric means", headers, body, "ll" + "r" * (len(headers) - 3) + "l", legend)


def first_call_table(results: dict[str, FirstCall], notes: Notes) -> Table:
    body = []
    for name, fc in results.items():
        problems = fc.problems

        def cell(key: str) -> str:
            value = getattr(fc, key)
            return fmt_s(value) if key not in problems else "n/a" + notes.ref(problems[key])

        warm = fc.torchscribe_warm if not {"torchscribe_warm", "eager"} & set(problems) else None
        over = math.nan if warm is None or fc.eager is None else warm - fc.eager
        body.append([name, cell("eager"), cell("torchscribe_empty"), cell("torchscribe_warm"),
                     "n/a" if over != over else f"{over:+.2f}", cell("compile_empty"), cell("compile_warm"),
                     target_status(f"warm ts <{WARM_FIRST_CALL_S:g} s over eager", over,
                                   WARM_FIRST_CALL_S, higher_is_better=False)])
    headers = ["model", "eager s", "ts empty s", "ts warm s", "ts warm - eager s", "compile empty s",
               "compile warm s", "target"]
    legend = ("Seconds from process start to the first result in a fresh process (python start-up, imports, "
              "building, the call), the example's own inputs (micro-benchmarks at "
              f"{FIRST_CALL_MICRO_SIZE}); empty: a new cache directory (TORCHSCRIBE_CACHE_DIR / "
              "TORCHINDUCTOR_CACHE_DIR), warm: the same directory again. The target is on what torchscribe adds "
              "to eager's first call (ts warm - eager).")
    return Table("First call in a fresh process", headers, body, "l" + "r" * (len(headers) - 2) + "l", legend)


def render(header: list[tuple[str, str]], tables: list[Table], notes: Notes, markdown: bool) -> str:
    if markdown:
        parts = ["# Benchmark results", "",
                 "Generated by `python -m benchmarks.bench --write-results` (`make bench`); do not edit.", ""]
        parts += [f"- **{label}**: {value}" for label, value in header]
        for table in tables:
            parts += ["", table.markdown()]
        if notes.texts:
            parts += ["", "### Notes", ""] + [f"{i}. {text}" for i, text in enumerate(notes.texts, 1)]
        return "\n".join(parts) + "\n"
    parts = ["torchscribe benchmarks"] + [f"  {label}: {value}" for label, value in header]
    for table in tables:
        parts += ["", table.text()]
    if notes.texts:
        parts += ["", "Notes:"] + [f"  [{i}] {text}" for i, text in enumerate(notes.texts, 1)]
    return "\n".join(parts)


# ----------------------------------------------------------------------------- driver


def warm_up_compilers() -> None:
    """Import and exercise the compilers once, so the first case is not charged for it (the
    one-time cost is in the fresh-process first calls). On sizes no case uses, so that no case
    finds its code in a cache. A failure shows in the cases."""
    model, inputs = micro.PointwiseChain(), (torch.randn(2, 3, 5),)
    for build in (build_torchscribe, build_compile):
        try:
            with torch.no_grad():
                build(model, inputs).fn(*inputs)
        except Exception as exc:
            log(f"warm-up of {build.__name__} failed: {short_error(exc)}")
    torch._dynamo.reset()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"a {BUDGET_S['quick']:g} s timing budget per cell "
                        f"instead of {BUDGET_S['full']:g} s")
    parser.add_argument("--only", nargs="+", default=[], metavar="NAME", help="only these examples / micro-benchmarks")
    parser.add_argument("--no-first-call", action="store_true", help="leave out the fresh-process first calls")
    parser.add_argument("--training", action="store_true",
                        help=f"only the training-step table (the examples at batch {TRAIN_BATCH})")
    parser.add_argument("--no-training", action="store_true", help="leave out the training-step table")
    parser.add_argument("--write-results", action="store_true", help=f"also write {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    budget_s = BUDGET_S["quick" if args.quick else "full"]

    examples, example_refs = example_cases()
    micros, micro_refs = micro_cases()
    known = {c.name for c in examples + micros} | {c.name.split("[")[0] for c in examples}
    unknown = [n for n in args.only if n not in known]
    if unknown:
        parser.error(f"no such benchmark: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    examples = [c for c in examples if selected(c.name, args.only)]
    micros = [c for c in micros if selected(c.name, args.only)]
    first_call_refs = {} if args.no_first_call or args.training else {
        name: ref for name, ref in {**example_refs, **micro_refs}.items() if selected(name, args.only)}
    training = [] if args.no_training else training_cases(examples)
    if args.training:
        examples, micros = [], []

    load_at_start = load_average()
    # Private caches: transpile and compile times are those of an empty cache.
    scratch = tempfile.mkdtemp(prefix="torchscribe-bench-")
    os.environ["TORCHSCRIBE_CACHE_DIR"] = os.path.join(scratch, "torchscribe")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    try:
        tables, notes = run(examples, micros, first_call_refs, budget_s, training)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    header = machine_lines(args, budget_s, (load_at_start, load_average()))
    if training:
        grad = "grad enabled" if args.training else "torch.no_grad() (training steps: grad enabled)"
        header = [(k, v.replace("torch.no_grad()", grad)) for k, v in header]
    print(render(header, tables, notes, markdown=False))
    if args.write_results:
        RESULTS.write_text(render(header, tables, notes, markdown=True) + kept_zoo_block(), encoding="utf-8")
        print(f"\nwrote {RESULTS.relative_to(ROOT)}")
    return 0


def run(examples: list[Case], micros: list[Case], first_call_refs: dict[str, str], budget_s: float,
        training: Sequence[Case] = ()) -> tuple[list[Table], Notes]:
    """Measure the cases, the training steps, then the first calls; the tables and their
    footnotes."""
    log("warming up the compilers")
    warm_up_compilers()
    example_rows = [run_case(c, budget_s) for c in examples]
    micro_rows = [run_case(c, budget_s) for c in micros]
    training_rows = [run_training(c, budget_s) for c in training]
    first_calls = {}
    for name, ref in first_call_refs.items():
        log(f"{name}: first calls in fresh processes")
        first_calls[name] = first_call_seconds(ref)

    notes = Notes()
    tables = []
    if example_rows:
        tables += [examples_table(example_rows, notes), geomean_table(example_rows)]
    if micro_rows:
        tables.append(micro_table(micro_rows, notes))
    if training_rows:
        tables += [training_table(training_rows, notes), training_geomean_table(training_rows)]
    if first_calls:
        tables.append(first_call_table(first_calls, notes))
    return tables, notes


if __name__ == "__main__":
    sys.exit(main())

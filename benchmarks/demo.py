"""`make demo`: compile examples/, then check every example against eager and time it beside
eager and torch.compile.

Steps: run the transpiler over examples/ (a module that is fresh is left as it is); for every
example (each `make_example*` factory of each examples/<stem>.py), run one fresh copy eagerly
under runtime.mode("off") and another through its committed `<stem>_compiled.py` under
runtime.mode("strict") (a missing or stale compiled module is an error, not a silent eager run);
compare outputs, the final contents of the inputs and the module's state_dict; time eager, the
committed module and torch.compile of an undecorated copy in the same run; print a table that
also says which code of the committed module ran (its specialisation's kernels, or its generic
code). Exits 1 if any example does not match.

Run from anywhere: `python benchmarks/demo.py [--no-transpile] [--no-torch-compile] [--mode on] [NAME ...]`.
"""
from __future__ import annotations

import argparse
import importlib
import math
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from benchmarks.compare import (  # noqa: E402
    compare,
    factories,
    observe,
    restorer,
    snapshot,
)

EXAMPLES_DIR = ROOT / "examples"
TRANSPILE = "import sys; from transpiler.cli import main; sys.exit(main(['examples']))"


@dataclass
class Result:
    name: str
    ok: bool = False
    max_abs_error: float = math.nan
    eager_ms: float = math.nan
    compiled_ms: float = math.nan
    torch_compile_ms: float = math.nan
    ran: str = "-"  # which code of the committed module ran: "kernels" or "generic"
    problems: list[str] = field(default_factory=list)
    raised: bool = False  # the run raised (or the example did not import): no comparison was made

    @property
    def status(self) -> str:
        return "ERROR" if self.raised else "yes" if self.ok else "NO"


def example_stems() -> list[str]:
    stems = []
    for path in sorted(EXAMPLES_DIR.glob("*.py")):
        if path.stem == "__init__" or path.stem.endswith("_compiled"):
            continue
        stems.append(path.stem)
    return stems


def transpile() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", TRANSPILE], cwd=ROOT, capture_output=True, text=True
    )
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        sys.exit(f"demo: the transpiler failed on examples/ (exit status {proc.returncode})")


def call(model: Callable[..., Any], inputs: tuple, mode: str) -> Any:
    import runtime

    with runtime.mode(mode), torch.no_grad():
        return model(*inputs)


def _compiled_entry(model: Any) -> Any:
    """The COMPILED entry of a decorated class or function, from its checked-in module."""
    target = type(model) if isinstance(model, torch.nn.Module) else model
    compiled = importlib.import_module(f"{target.__module__}_compiled")
    key = f"{target.__qualname__}.forward" if isinstance(model, torch.nn.Module) else target.__name__
    return compiled.COMPILED.get(key)


def time_calls(model: Callable[..., Any], inputs: tuple, mode: str, budget_s: float) -> float:
    """Median milliseconds of one call; inputs and module state are restored before each call."""
    restore = restorer(inputs, model)
    for _ in range(3):  # warm-up
        restore()
        call(model, inputs, mode)
    times: list[float] = []
    while len(times) < 5 or (sum(times) < budget_s and len(times) < 10_000):
        restore()
        start = time.perf_counter()
        call(model, inputs, mode)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def run_case(name: str, factory: Callable[[], tuple[object, tuple]], mode: str, budget_s: float,
             with_torch_compile: bool = True) -> Result:
    import runtime

    result = Result(name)
    eager_model, eager_inputs = factory()
    compiled_model, compiled_inputs = factory()
    stage = "eager run"
    try:
        eager_out = call(eager_model, eager_inputs, "off")
        expected = snapshot(observe(eager_model, eager_inputs, eager_out))
        stage = f"compiled run (mode {mode!r})"
        generic = sum(runtime.generic_counts().values())
        compiled_out = call(compiled_model, compiled_inputs, mode)
        specialised = isinstance(_compiled_entry(compiled_model), tuple)
        result.ran = "generic" if not specialised or sum(runtime.generic_counts().values()) > generic else "kernels"
        actual = snapshot(observe(compiled_model, compiled_inputs, compiled_out))
        comparison = compare(expected, actual)
        result.ok = comparison.ok
        result.max_abs_error = comparison.max_abs_error
        result.problems = comparison.mismatches
        stage = "timing"
        result.eager_ms = time_calls(eager_model, eager_inputs, "off", budget_s)
        result.compiled_ms = time_calls(compiled_model, compiled_inputs, mode, budget_s)
        if with_torch_compile:
            from benchmarks.bench import undecorated

            stage = "torch.compile"
            torch._dynamo.reset()
            plain_model, plain_inputs = factory()
            result.torch_compile_ms = time_calls(torch.compile(undecorated(plain_model)), plain_inputs, "off", budget_s)
    except Exception as exc:  # report and go on with the other examples
        result.ok = False
        result.raised = True
        lines = traceback.format_exception_only(type(exc), exc)
        result.problems = [f"{stage} raised: " + "".join(lines).strip()]
    return result


def _fmt_ms(ms: float) -> str:
    return "-" if math.isnan(ms) else f"{ms:.3f}"


def _fmt_err(err: float) -> str:
    return "-" if math.isnan(err) else f"{err:.2e}"


def _fmt_x(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def print_table(results: list[Result]) -> None:
    header = ("example", "matches eager", "max abs error", "ran", "eager ms", "compiled ms", "torch.compile ms",
              "vs eager", "vs torch.compile")
    rows = [
        (r.name, r.status, _fmt_err(r.max_abs_error), r.ran, _fmt_ms(r.eager_ms), _fmt_ms(r.compiled_ms),
         _fmt_ms(r.torch_compile_ms), _fmt_x(r.eager_ms / r.compiled_ms), _fmt_x(r.torch_compile_ms / r.compiled_ms))
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    align_left = (True, True, False, True, False, False, False, False, False)

    def line(cells: tuple[str, ...]) -> str:
        parts = [c.ljust(w) if left else c.rjust(w) for c, w, left in zip(cells, widths, align_left)]
        return " | ".join(parts).rstrip()

    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these examples (file stems)")
    parser.add_argument("--no-transpile", action="store_true", help="use the compiled modules as they are")
    parser.add_argument(
        "--mode",
        default="strict",
        choices=("strict", "on", "off"),
        help="runtime mode of the compiled run (default strict; 'off' checks the harness: eager vs eager)",
    )
    parser.add_argument("--budget-ms", type=float, default=100.0, help="timing budget per example and side")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave out torch.compile (it compiles each "
                                                                         "example for seconds)")
    args = parser.parse_args(argv)

    if not args.no_transpile:
        transpile()

    stems = example_stems()
    unknown = sorted(set(args.names) - set(stems))
    if unknown:
        parser.error(f"no such example: {', '.join(unknown)}")
    results = []
    for stem in stems:
        if args.names and stem not in args.names:
            continue
        try:
            module = importlib.import_module(f"examples.{stem}")
        except Exception as exc:
            problem = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            results.append(Result(stem, problems=[f"import raised: {problem}"], raised=True))
            continue
        for variant, factory in factories(module):
            name = f"{stem}[{variant}]" if variant else stem
            results.append(run_case(name, factory, args.mode, args.budget_ms / 1e3, not args.no_torch_compile))

    print_table(results)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\n{r.name}:")
        for problem in r.problems[:10]:
            print(f"  {problem}")
        if len(r.problems) > 10:
            print(f"  ... and {len(r.problems) - 10} more")
    timed = [r for r in results if r.ok and r.eager_ms > 0 and r.compiled_ms > 0]
    speedup = ""
    if timed:
        geomean = math.exp(statistics.fmean(math.log(r.eager_ms / r.compiled_ms) for r in timed))
        speedup = f"; geometric-mean speedup over eager {geomean:.2f}x"
        against = [r for r in timed if r.torch_compile_ms > 0]
        if against:
            vs = math.exp(statistics.fmean(math.log(r.torch_compile_ms / r.compiled_ms) for r in against))
            speedup += f", over torch.compile {vs:.2f}x"
    print()
    if failed:
        print(f"FAIL: {len(failed)} of {len(results)} examples do not match eager{speedup}")
        return 1
    print(f"OK: all {len(results)} examples match eager (mode {args.mode!r}){speedup}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""First call in a fresh process: what a user waits for between starting Python and a result.

The parent (`first_call_seconds`) starts `python -m benchmarks.first_call BACKEND REF --started T`
with T its wall clock just before the start; the child imports torch and the model, builds the
backend, makes one call and prints the seconds since T as JSON. Start-up, imports, compiling and
the call are all in it, as they are for a user.

The cache a backend keeps on disk (torchscribe: TORCHSCRIBE_CACHE_DIR; torch.compile:
TORCHINDUCTOR_CACHE_DIR) is a fresh directory for the "empty" run and the same directory again
for the "warm" run. REF names a factory returning (model, inputs):
`examples.mlp:make_example` or `benchmarks.micro:make:softmax:b8` (extra parts are arguments).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
CACHE_ENV = {"torchscribe": "TORCHSCRIBE_CACHE_DIR", "frozen": "TORCHSCRIBE_CACHE_DIR",
             "compile": "TORCHINDUCTOR_CACHE_DIR"}
CHILD_TIMEOUT_S = 900  # a cold torch.compile of the largest example is well under this


@dataclass
class FirstCall:
    """Seconds from process start to the first result, per run kind; None with a reason when it failed."""

    eager: float | None = None
    torchscribe_empty: float | None = None
    torchscribe_warm: float | None = None
    frozen_empty: float | None = None  # script(..., freeze=True): its first call also packs weights
    frozen_warm: float | None = None  # and measures which library runs them (runtime/choices.py)
    compile_empty: float | None = None
    compile_warm: float | None = None
    problems: dict[str, str] = field(default_factory=dict)  # run kind -> why it has no time


def resolve(ref: str) -> Callable[[], tuple[Any, tuple]]:
    """The factory named by REF (`module:function[:arg...]`)."""
    module_name, function_name, *args = ref.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    return lambda: function(*args)


# ----------------------------------------------------------------------------- child


def _first_result(backend: str, ref: str) -> dict[str, Any]:
    """Build `backend` for the model of REF and call it once; what the parent reports."""
    import torch

    import runtime

    model, inputs = resolve(ref)()
    with torch.no_grad():
        if backend == "eager":
            with runtime.mode("off"):
                model(*inputs)
        elif backend == "torchscribe":
            from transpiler import script

            script(model, example_inputs=inputs)(*inputs)
        elif backend == "frozen":
            from transpiler import script

            script(model, example_inputs=inputs, freeze=True)(*inputs)
        elif backend == "compile":
            from benchmarks.bench import undecorated

            torch.compile(undecorated(model))(*inputs)
        else:
            raise ValueError(f"unknown backend {backend!r}")
    return {"fallbacks": sum(runtime.fallback_counts().values())}


def child_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one first call (run by benchmarks.bench)")
    parser.add_argument("backend", choices=("eager", "torchscribe", "frozen", "compile"))
    parser.add_argument("ref")
    parser.add_argument("--started", type=float, required=True, help="the parent's time.time() at launch")
    args = parser.parse_args(argv)
    report = _first_result(args.backend, args.ref)
    report["seconds"] = time.time() - args.started
    print(json.dumps(report))
    return 0


# ----------------------------------------------------------------------------- parent


def run_child(backend: str, ref: str, env: dict[str, str]) -> tuple[float | None, str | None]:
    """(seconds, None), or (None, why) when the child failed."""
    started = time.time()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.first_call", backend, ref, "--started", repr(started)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None, f"no result within {CHILD_TIMEOUT_S} s"
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return None, lines[-1] if lines else f"exit status {proc.returncode}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    if report.get("fallbacks"):
        return None, "the compiled code fell back to eager (an entry check failed)"
    return float(report["seconds"]), None


def first_call_seconds(ref: str, backends: tuple[str, ...] = ("eager", "torchscribe", "compile")) -> FirstCall:
    """Fresh-process first calls of the model of REF: eager, and each compiler with an empty
    then a warm cache (a private directory, removed afterwards)."""
    result = FirstCall()
    base_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV.values()}
    for backend in backends:
        if backend == "eager":
            result.eager, problem = run_child("eager", ref, base_env)
            if problem:
                result.problems["eager"] = problem
            continue
        cache = tempfile.mkdtemp(prefix=f"bench-{backend}-")
        env = {**base_env, CACHE_ENV[backend]: cache}
        try:
            for state in ("empty", "warm"):
                seconds, problem = run_child(backend, ref, env)
                setattr(result, f"{backend}_{state}", seconds)
                if problem:
                    result.problems[f"{backend}_{state}"] = problem
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return result


if __name__ == "__main__":
    sys.exit(child_main())

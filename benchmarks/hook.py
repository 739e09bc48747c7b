"""What the pre-commit hook costs on the examples (issue 47, point 6): the command the hook runs,
`torchscribe --exit-nonzero-on-write FILES`, on a copy of examples/ in a temporary directory, in
a fresh process each time, as `git commit` starts it:

- up to date: every module matches its source (the common commit: no model changed);
- one edit: one line of one model changed (`out += identity` written `out = out + identity` in
  residual_block.py), so that one module is regenerated, its kernels compiled (warm cache for
  the others);
- everything, cold: `--force` with an empty kernel cache, what a compiler upgrade costs once.

    python -m benchmarks.hook [--repeat 3]

Prints the median wall time of each, with the machine's load."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EDITED = ("residual_block.py", "        out += identity\n", "        out = out + identity\n")


def run_hook(directory: Path, cache: Path, *extra: str) -> tuple[float, int]:
    files = sorted(str(p) for p in directory.glob("*.py") if not p.name.endswith("_compiled.py"))
    env = {**os.environ, "TORCHSCRIBE_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "transpiler.cli", "-q", "--exit-nonzero-on-write", *extra, *files],
                          env=env, cwd=directory.parent, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"torchscribe exited with {done.returncode}: {(done.stdout + done.stderr).strip()}")
    return elapsed, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    times: dict[str, list[float]] = {"up to date": [], "one edit": [], "everything, cold": []}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hook-") as tmp:
        examples = Path(tmp) / "examples"
        shutil.copytree(ROOT / "examples", examples, ignore=shutil.ignore_patterns("__pycache__"))
        cache = Path(tmp) / "cache"
        for _ in range(args.repeat):
            shutil.rmtree(cache, ignore_errors=True)
            elapsed, code = run_hook(examples, cache, "--force")
            times["everything, cold"].append(elapsed)
            elapsed, code = run_hook(examples, cache)
            assert code == 0, "a module was rewritten right after a full regeneration"
            times["up to date"].append(elapsed)
            name, old, new = EDITED
            source = examples / name
            text = source.read_text(encoding="utf-8")
            source.write_text(text.replace(old, new), encoding="utf-8")
            elapsed, code = run_hook(examples, cache)
            assert code == 1, "the edited model's module was not rewritten"
            times["one edit"].append(elapsed)
            source.write_text(text, encoding="utf-8")
            run_hook(examples, cache)  # back to the committed text
    count = sum(1 for p in (ROOT / "examples").glob("*.py") if p.name not in ("__init__.py",)
                and not p.name.endswith("_compiled.py"))
    print(f"torchscribe --exit-nonzero-on-write on the {count} example files, median of {args.repeat} "
          f"(1-minute load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; {os.cpu_count()} CPUs):")
    for what, got in times.items():
        print(f"  {what:18} {statistics.median(got):6.2f} s  (runs: {', '.join(f'{t:.2f}' for t in got)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

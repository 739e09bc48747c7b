"""Kernels from annotations alone: three @script functions whose parameters carry jaxtyping-style
shapes and nothing else (no example, no instance), compiled ahead of time by `torchscribe` into
a checked-in-style module, against eager and torch.compile in one process; and the same three
with plain `Tensor` annotations (no rank: kernels over (rows, last) views, ir/kernel/rows.py).

    python -m benchmarks.annotated [--size 2048] [--threads 1,2]

The module is written into a temporary directory and compiled with the command line, as a user
would; its default specialisation (float32 on the CPU) runs under strict mode and
torch.no_grad(), so a call that did not take the kernels would raise. The backends of a row are
timed in turns, median and best of the turns' times.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

import runtime

SOURCE = '''\
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script

if TYPE_CHECKING:
    from jaxtyping import Float


@script
def pointwise(x: Float[Tensor, "N D"], y: Float[Tensor, "N D"]) -> Tensor:
    a = torch.sigmoid(x) * torch.tanh(y)
    b = torch.exp(-a.abs())
    c = torch.where(x > 0, b, F.silu(y))
    return torch.clamp(c, -0.5, 0.5)


@script
def softmax_last(x: Float[Tensor, "N D"]) -> Tensor:
    return torch.softmax(x, dim=-1)


@script
def norm_gelu(x: Float[Tensor, "N D"], w: Float[Tensor, "D"], b: Float[Tensor, "D"]) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b, 1e-5))
'''


# The same functions, their parameters annotated `Tensor` alone.
PLAIN = re.sub(r'Float\[Tensor, "[^"]*"\]', "Tensor", SOURCE)


def _time(fn: Callable[[], Any], turns: int) -> list[float]:
    out = []
    for _ in range(turns):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.annotated", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="N and D of the (N, D) float32 inputs")
    parser.add_argument("--threads", default="1,2", help="torch thread counts, comma-separated")
    parser.add_argument("--turns", type=int, default=15, help="timed turns per backend")
    args = parser.parse_args(argv)
    from transpiler.cli import main as torchscribe

    with tempfile.TemporaryDirectory(prefix="ts-annotated-") as tmp:
        models = {}
        for label, text in (("shaped", SOURCE), ("Tensor", PLAIN)):
            name = f"annotated_model_{label.lower()}"
            (Path(tmp) / f"{name}.py").write_text(text)
            if torchscribe(["-q", str(Path(tmp) / f"{name}.py")]) != 0:
                return 1
            models[label] = name
        sys.path.insert(0, tmp)
        g = torch.Generator().manual_seed(0)
        n = args.size
        x, y = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
        w, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
        cases = {"pointwise": (x, y), "softmax_last": (x,), "norm_gelu": (x, w, b)}
        print(f"({n}, {n}) float32, torch {torch.__version__}, median / best ms of {args.turns} turns")
        print("| function | annotations | threads | eager | torchscribe | x | torch.compile | x |")
        print("| :-- | :-- | --: | --: | --: | --: | --: | --: |")
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            for label, module_name in models.items():
                model = importlib.import_module(module_name)
                for name, inputs in cases.items():
                    _row(getattr(model, name), name, label, threads, inputs, args.turns)
        assert runtime.generic_counts() == {}, runtime.generic_counts()
        sys.path.remove(tmp)
    return 0


def _row(fn: Callable[..., Any], name: str, label: str, threads: int, inputs: tuple, turns: int) -> None:
    eager = fn.__wrapped__
    compiled = torch.compile(eager)

    def ours() -> Any:
        with runtime.mode("strict"):
            return fn(*inputs)

    backends = {"eager": lambda: eager(*inputs), "torchscribe": ours, "compile": lambda: compiled(*inputs)}
    with torch.no_grad():
        for run in backends.values():  # warm-up: kernels built, torch.compile compiled
            run()
            run()
        times: dict[str, list[float]] = {k: [] for k in backends}
        for _ in range(turns):
            for key, run in backends.items():
                times[key] += _time(run, 1)
    cell = {k: (statistics.median(v) * 1e3, min(v) * 1e3) for k, v in times.items()}
    e, t, c = cell["eager"], cell["torchscribe"], cell["compile"]
    print(f"| {name} | {label} | {threads} | {e[0]:.2f} / {e[1]:.2f} | {t[0]:.2f} / {t[1]:.2f} | {e[0] / t[0]:.2f}x "
          f"| {c[0]:.2f} / {c[1]:.2f} | {e[0] / c[0]:.2f}x |")


if __name__ == "__main__":
    sys.exit(main())

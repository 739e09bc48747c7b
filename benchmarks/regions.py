"""Where a compiled model loses to eager (issue 48, point 3): a profile of a real model by region.

A region is one of the model's top-level submodules, or an item of a top-level container
(`stages.2`, `blocks.7`): the parts a model author reads as its structure. One eager call of the
whole model records the inputs each region receives; each region is then compiled on its own
with those inputs (`script(region, example_inputs=...)`, in the chosen mode), checked against
eager in strict run mode, and timed beside eager in turns. A region is named as slower when its
compiled median is above eager's, the better quartile of the per-round ratios is below 1.00x too
(slower beyond this host's noise), and it takes at least 1% of the regions' eager time (an
`Identity` that costs a microsecond more compiled is not where a model loses).

    python -m benchmarks.regions [--corpus timm] [--only deit_tiny_patch16_224] [--batch 8]
                                 [--mode strict|permissive|frozen] [--budget 0.5]

A region compiled on its own is not byte for byte what the whole-model compilation makes of it
(the layout at its boundary is eager's, and nothing is inlined across it), so the profile says
which parts to look at, and the whole-model figures in benchmarks/RESULTS.md say how much it
matters. Runs in the corpus virtualenv, like benchmarks/zoo.py."""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

import runtime
from benchmarks.bench import Timed, short_error, time_in_turns
from benchmarks.zoo import CORPORA, quartiles
from benchmarks.zoo_models import ZooModel, mismatch

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)
SIGNIFICANT = 0.01  # of the regions' eager time, from which a slower region is named
MODES = {"strict": {}, "permissive": {"permissive": True}, "frozen": {"freeze": True}}


@dataclass(eq=False)  # compared by identity: `in` on a list of regions
class Region:
    name: str
    module: nn.Module
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    result: str = ""  # what happened: empty while timed, else why it was not
    eager_ms: float = float("nan")
    compiled_ms: float = float("nan")
    ratios: list[float] = field(default_factory=list)  # eager / compiled, per round

    def slower(self, total_ms: float) -> bool:
        found = quartiles(self.ratios)
        return (self.compiled_ms > self.eager_ms and found is not None and found[1] < 1.0
                and self.eager_ms >= SIGNIFICANT * total_ms)


def regions_of(model: nn.Module) -> list[Region]:
    """The top-level submodules, with a container's items in its place."""
    found = []
    for name, child in model.named_children():
        if isinstance(child, CONTAINERS) and len(child) > 0:
            found += [Region(f"{name}.{item}", sub) for item, sub in child.named_children()]
        else:
            found.append(Region(name, child))
    return found


def record_inputs(model: nn.Module, inputs: tuple, regions: list[Region]) -> None:
    """One eager call of the model; each region keeps the inputs of its first call."""
    def hook(region: Region):
        def pre(module: nn.Module, args: tuple, kwargs: dict) -> None:
            region.calls += 1
            if region.calls == 1:
                region.args, region.kwargs = args, dict(kwargs)
        return pre

    handles = [r.module.register_forward_pre_hook(hook(r), with_kwargs=True) for r in regions]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()


def profile_region(region: Region, zoo: ZooModel, mode: str, budget_s: float) -> None:
    from transpiler import script

    if region.calls == 0:
        region.result = "not called"
        return
    if region.kwargs or not all(isinstance(a, torch.Tensor) for a in region.args):
        region.result = "called with other than positional tensors"
        return
    try:
        with torch.no_grad():
            compiled = script(region.module, example_inputs=region.args, **MODES[mode])
            expected = region.module(*region.args)
            with runtime.mode("strict"):
                got = compiled(*region.args)
    except Exception as exc:  # a region that does not compile on its own is a result
        region.result = f"not compiled: {short_error(exc)}"
        return
    if isinstance(expected, torch.Tensor):
        problem = mismatch(zoo, expected, got)
        if problem:
            region.result = f"differs from eager: {problem}"
            return
    timed = {"eager": Timed(region.module, region.args), "compiled": Timed(compiled, region.args)}
    with runtime.mode("strict"):
        time_in_turns(timed, budget_s)
    region.eager_ms = statistics.median(timed["eager"].times) * 1e3
    region.compiled_ms = statistics.median(timed["compiled"].times) * 1e3
    region.ratios = [statistics.median(e) / statistics.median(c)
                     for e, c in zip(timed["eager"].rounds, timed["compiled"].rounds)]


def slower_regions(regions: list[Region]) -> list[Region]:
    timed = [r for r in regions if not r.result]
    total = sum(r.eager_ms for r in timed)
    return [r for r in timed if r.slower(total)]


def report(zoo: ZooModel, batch: int, mode: str, regions: list[Region]) -> str:
    slower = slower_regions(regions)
    lines = [f"### {zoo.name}, batch {batch}, {mode}", "",
             "| region | class | eager ms | compiled ms | speed-up (middle half of rounds) | |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in regions:
        if r.result:
            lines.append(f"| {r.name} | {type(r.module).__name__} | - | - | - | {r.result} |")
            continue
        found = quartiles(r.ratios)
        spread = f" ({found[0]:.2f}-{found[1]:.2f})" if found else ""
        lines.append(f"| {r.name} | {type(r.module).__name__} | {r.eager_ms:.3f} | {r.compiled_ms:.3f} | "
                     f"{r.eager_ms / r.compiled_ms:.2f}x{spread} | {'SLOWER' if r in slower else ''} |")
    names = ", ".join(r.name for r in slower)
    lines += ["", f"Slower than eager: {names or 'none'}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="timm")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--mode", choices=sorted(MODES), default="strict")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per backend and region")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    only = {n for n in args.only.split(",") if n}
    corpus = CORPORA[args.corpus][0]
    flagged: dict[str, list[str]] = {}
    for zoo in corpus.MODELS:
        if only and zoo.name not in only:
            continue
        model = zoo.build()
        regions = regions_of(model)
        record_inputs(model, zoo.inputs(args.batch), regions)
        for region in regions:
            profile_region(region, zoo, args.mode, args.budget)
        print(report(zoo, args.batch, args.mode, regions), flush=True)
        flagged[zoo.name] = [r.name for r in slower_regions(regions)]
    print("Regions slower than eager, by model:")
    for name, slower in flagged.items():
        print(f"- {name}: {', '.join(slower) if slower else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

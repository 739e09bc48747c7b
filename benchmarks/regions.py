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
matters. Runs in the corpus virtualenv, like benchmarks/zoo.py.

The product does the same per model: `script(model, example_inputs=..., regions=True)` measures
its regions this way (transpiler/regions.py, whose regions and recorded inputs this profile
shares) and keeps eager's calls for those slower compiled by a margin."""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

import runtime
from benchmarks.bench import Timed, short_error, time_in_turns
from benchmarks.zoo import CORPORA, quartiles
from benchmarks.zoo_models import ZooModel, mismatch
from transpiler.regions import Region, record_inputs, regions_of

MODES = {"strict": {}, "permissive": {"permissive": True}, "frozen": {"freeze": True}}


def profile_region(region: Region, zoo: ZooModel, mode: str, budget_s: float) -> None:
    from transpiler import script

    if region.calls == 0:
        region.result = "not called"
        return
    region.eager_ms = float("nan")  # (record_inputs left its first call's time there)
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

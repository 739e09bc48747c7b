"""The pass pipeline: one table of named passes, shared by the CLI and the tests."""

from __future__ import annotations

from typing import Callable

from ir.core.graph import Program
from ir.core.verifier import verify
from ir.passes.autograd_kernels import autograd_kernels
from ir.passes.canonicalize import canonicalize
from ir.passes.concat import write_into_cats
from ir.passes.dce import dce
from ir.passes.decompose import decompose
from ir.passes.freeze import fold_batch_norms
from ir.passes.functionalize import functionalize
from ir.passes.fuse import fuse
from ir.passes.hoist import hoist_constants
from ir.passes.inline import inline
from ir.passes.layers import lower_layers
from ir.passes.layout import channels_last
from ir.passes.layout_autograd import autograd_channels_last
from ir.passes.lists import snapshot_lists
from ir.passes.pack import pack_linears
from ir.passes.plan import plan_memory
from ir.passes.pool import pool_kernels
from ir.passes.reinplace import reinplace
from ir.passes.reuse import reuse_buffers
from ir.passes.scales import fold_input_scales
from ir.passes.specialize import specialize

Pass = Callable[[Program], None]

PIPELINE: list[tuple[str, Pass]] = [
    ("inline", inline),  # compiled callees and submodules whose class is known
    ("lower_layers", lower_layers),  # standard layers to torch ops
    ("lists", snapshot_lists),  # a list grown by appends in straight-line code: one value per read
    ("specialize", specialize),  # shapes and dtypes; entry checks for what they assume
    ("canonicalize", canonicalize),  # folding (sizes too), CSE, constant branches, dead code
    ("freeze", fold_batch_norms),  # a frozen program: batch norms folded into the convs before them
    ("functionalize", functionalize),  # in-place writes to functional ops plus final write-backs
    ("decompose", decompose),  # composite ops to the primitives of ir/kernel/primitives.py
    ("cleanup", canonicalize),  # what decomposition left: constants, common subexpressions
    ("hoist", hoist_constants),  # a frozen program: tensors of parameters and constants alone, once
    ("layout", channels_last),  # convolutions and the pointwise ops between them in NHWC order
    ("scales", fold_input_scales),  # a frozen program: a per-channel scale of a linear's input into its weight
    ("fuse", fuse),  # chains of pointwise primitives into C++ kernels
    ("concat", write_into_cats),  # kernels write the parts of a cat into its result
    ("pool", pool_kernels),  # max pooling of channels-last tensors, adaptive average pooling: our kernels
    ("autograd_layout", autograd_channels_last),  # code autograd records: convs on channels-last inputs
    ("autograd_kernels", autograd_kernels),  # code autograd records: pointwise groups, kernels with backward kernels
    ("dce", dce),
    ("reinplace", reinplace),  # functional writes into new tensors nothing else reads back in place
    ("reuse", reuse_buffers),  # kernels write over inputs that die into them
    ("pack", pack_linears),  # a frozen program: linear layers with their weight in oneDNN's layout
    ("plan", plan_memory),  # large GEMM results into dead temporaries; kernel outputs into kept buffers
]
PASS_NAMES = [name for name, _ in PIPELINE]
# PIPELINE as defined here: script()'s cache (transpiler/jit_cache.py) tells a pipeline patched in
# memory (tests swap passes) from this one, which the compiler's source files determine.
STANDARD_PIPELINE = tuple(PIPELINE)

# Code autograd records (a call with grad enabled and a tensor that requires grad, and generic
# code, which serves such calls) runs eager's own torch ops in eager's order: kernels record no
# graph, decompositions would give other gradients' roundings, and a functionalized write would
# hide the errors autograd raises for an in-place write (a leaf that requires grad, a tensor
# saved for backward). So its pipeline stops after canonicalize: no functionalize, no kernels but
# its own: chains of pointwise ops become kernels that autograd records as one function, with a
# generated backward kernel (ir/passes/autograd_kernels.py, which does nothing elsewhere).
AUTOGRAD_PASSES = ("inline", "lower_layers", "lists", "specialize", "canonicalize", "autograd_layout", "autograd_kernels",
                   "dce")


def autograd_skips() -> frozenset[str]:
    """The passes of PIPELINE (as it is now: tests may patch it) that code autograd records skips."""
    return frozenset(name for name, _ in PIPELINE if name not in AUTOGRAD_PASSES)


def run_pipeline(
    program: Program,
    after_pass: Callable[[str, Program], None] | None = None,
    check: bool = False,
    passes: list[tuple[str, Pass]] | None = None,
    skip: frozenset[str] = frozenset(),
) -> Program:
    """Run every pass in order (PIPELINE unless `passes` is given) but those named in `skip`;
    `after_pass(name, program)` sees the IR after each one (a skipped one too: the IR as it
    stands there, so `--dump-ir=after:plan` shows every program), and `check` runs the verifier
    between passes."""
    if check:
        verify(program)
    for name, fn in PIPELINE if passes is None else passes:
        if name in skip:
            if after_pass is not None:
                after_pass(name, program)
            continue
        fn(program)
        if check:
            verify(program)
        if after_pass is not None:
            after_pass(name, program)
    return program

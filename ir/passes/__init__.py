"""The pass pipeline: one table of named passes, shared by the CLI and the tests."""

from __future__ import annotations

from typing import Callable

from ir.core import Program
from ir.passes.dce import dce
from ir.verifier import verify

Pass = Callable[[Program], None]

PIPELINE: list[tuple[str, Pass]] = [
    ("dce", dce),
]


def run_pipeline(
    program: Program,
    after_pass: Callable[[str, Program], None] | None = None,
    check: bool = False,
    passes: list[tuple[str, Pass]] | None = None,
) -> Program:
    """Run every pass in order (PIPELINE unless `passes` is given); `after_pass(name, program)`
    sees the IR after each one, and `check` runs the verifier between passes."""
    if check:
        verify(program)
    for name, fn in PIPELINE if passes is None else passes:
        fn(program)
        if check:
            verify(program)
        if after_pass is not None:
            after_pass(name, program)
    return program

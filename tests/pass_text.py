"""Running passes on IR text, for the passes' own text tests."""

from __future__ import annotations

from typing import Callable

from ir.core.graph import Program
from ir.core.parser import parse_program
from ir.core.printer import print_program
from ir.core.verifier import verify


def after(text: str, *passes: Callable[[Program], None], frozen: bool = False) -> str:
    """`text` parsed, run through `passes` and verified; the printed result, which must read
    back as itself. `frozen`: the program's Program.frozen (script(..., freeze=True))."""
    program = parse_program(text)
    program.frozen = frozen
    for run in passes:
        run(program)
    verify(program)
    out = print_program(program, with_locs=False)
    assert print_program(parse_program(out), with_locs=False) == out
    return out

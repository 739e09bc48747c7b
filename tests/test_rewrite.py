"""IR surgery: a cloned function prints exactly like the original and shares nothing with it."""
from __future__ import annotations

from pathlib import Path

import pytest

from ir.core.graph import Program
from ir.core.printer import print_program
from ir.core.rewrite import clone_op
from ir.core.verifier import verify
from transpiler.pipeline import lower_file
from transpiler.source import SourceFile

EXAMPLES = sorted(p for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.py")
                  if p.stem != "__init__" and not p.stem.endswith("_compiled"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_clone_prints_the_same(path: Path) -> None:
    program, _ = lower_file(SourceFile.read(path, path.name))
    copies = Program(program.source_file, [clone_op(f, {}) for f in program.funcs])
    verify(copies)
    assert print_program(copies) == print_program(program)
    originals = {id(op) for op in program.walk()}
    original_blocks = {id(b) for op in program.walk() for r in op.regions for b in r.blocks}
    assert not any(id(op) in originals for op in copies.walk())
    for op in copies.walk():
        for value in op.operands:
            owner = value.owner  # an op for results, a block for block arguments
            assert id(owner) not in originals and id(owner) not in original_blocks

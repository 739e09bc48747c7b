"""The one IR verifier: structural checks, each op's attributes against its class's declaration
(ir/core/attrs.py), plus each op's own `verify_`.

Run between passes in tests (and on `--verify`). On failure, the error carries the printed IR
with the offending op marked.
"""

from __future__ import annotations

from ir.core.attrs import attr_problems
from ir.core.graph import TERMINATOR, Block, Operation, Program, Value
from ir.core.ops import FuncOp
from ir.core.printer import Printer
from ir.core.types import ERROR, ListType, OptionalType, TupleType, Type


class VerifyError(Exception):
    pass


def verify(program: Program) -> None:
    problems: list[tuple[Operation, str]] = []
    for func in program.funcs:
        if not isinstance(func, FuncOp):
            problems.append((func, "top-level op must be func.func"))
            continue
        _verify_block(func.body, set(), problems)
        problems += [(func, msg) for msg in attr_problems(func) or func.verify_()]
    if problems:
        raise VerifyError(_render(program, problems))


def _verify_block(block: Block, visible: set[Value], problems: list[tuple[Operation, str]]) -> None:
    scope = set(visible) | set(block.args)
    for arg in block.args:
        _check_uses(arg, problems)
    for i, op in enumerate(block.ops):
        if op.parent is not block:
            problems.append((op, "op's parent link does not point at its block"))
        for index, operand in enumerate(op.operands):
            if operand not in scope:
                problems.append((op, f"operand #{index} is not defined before this use"))
        if op.has_trait(TERMINATOR) and i != len(block.ops) - 1:
            problems.append((op, "terminator in the middle of a block"))
        for region in op.regions:
            if len(region.blocks) != 1:
                problems.append((op, "structured regions hold exactly one block"))
            for inner in region.blocks:
                _verify_block(inner, scope, problems)
        wrong = attr_problems(op)
        # (an op's own checks read its attributes as declared: only once they are)
        problems += [(op, msg) for msg in wrong or op.verify_()]
        for result in op.results:
            _check_uses(result, problems)
            scope.add(result)
            if _is_error(result.type):
                problems.append((op, "a result of the error type: lowering failed, and its errors were not reported"))


def _is_error(t: Type) -> bool:
    return t == ERROR or isinstance(t, (TupleType, ListType, OptionalType)) and "<error>" in str(t)


def _check_uses(value: Value, problems: list[tuple[Operation, str]]) -> None:
    for use in value.uses:
        if use.index >= len(use.op.operands) or use.op.operands[use.index] is not value:
            problems.append((use.op, "use-list entry does not match the operand"))


def _render(program: Program, problems: list[tuple[Operation, str]]) -> str:
    marks: dict[Operation, str] = {}
    for op, msg in problems:
        marks[op] = f"{marks[op]}; {msg}" if op in marks else msg
    text = Printer(marks=marks).print_program(program)
    summary = "\n".join(f"error: {msg} ({op.name} at {op.loc})" for op, msg in problems)
    return f"IR verification failed:\n{summary}\n\n{text}"

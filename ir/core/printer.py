"""Textual form of the IR: one line per op, names from the source, locations as comments.

    func @MyCell.forward(%self: Module[MyCell], %x: Tensor, %h: Tensor) -> tuple[Tensor, Tensor] {
      %linear : Module[torch.nn.Linear] = py.getattr(%self) {name = "linear"}  # rnn_cell.py:13:28
      %0 : Tensor = module.call(%linear, %x)  # rnn_cell.py:13:28
      ...
      func.return(%1)  # rnn_cell.py:14:9
    }

ir/core/parser.py reads the same text back.
"""

from __future__ import annotations

import math
from typing import Any

from ir.core.graph import Block, Operation, Program, Value
from ir.core.ops import FuncOp
from ir.core.types import Type

INDENT = "  "


class Namer:
    """Gives each value a unique printable name within one function: source names first
    (`x`, `x_1`), numbers for temporaries."""

    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    def __call__(self, value: Value) -> str:
        name = self.names.get(value)
        if name is None:
            name = self._fresh(value.name)
            self.names[value] = name
        return "%" + name

    def _fresh(self, hint: str | None) -> str:
        if hint is None:
            while str(self.counter) in self.taken:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        else:
            name, n = hint, 0
            while name in self.taken:
                n += 1
                name = f"{hint}_{n}"
        self.taken.add(name)
        return name


def format_attr(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, tuple):
        inner = ", ".join(format_attr(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, Type):
        return f"<{value}>"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{format_attr(k)}: {format_attr(v)}" for k, v in value.items()) + "}"
    return repr(value)


def ordered_attrs(op: Operation) -> list[tuple[str, Any]]:
    """The op's attributes in the order its class declares them; undeclared ones (which the
    verifier reports) after those, as they stand."""
    held = op.attributes
    declared = [(k, held[k]) for k in type(op).attrs if k in held]
    return declared + [(k, v) for k, v in held.items() if k not in type(op).attrs]


class Printer:
    def __init__(self, with_locs: bool = True, marks: dict[Operation, str] | None = None) -> None:
        self.with_locs = with_locs
        self.marks = marks or {}  # op -> message shown after its line (the verifier's errors)
        self.lines: list[str] = []
        self.namer = Namer()

    def print_program(self, program: Program) -> str:
        for i, func in enumerate(program.funcs):
            if i:
                self.lines.append("")
            self.print_func(func)  # type: ignore[arg-type]
        return "\n".join(self.lines) + "\n"

    def print_func(self, func: FuncOp) -> None:
        self.namer = Namer()
        defaults = func.defaults
        params = []
        for arg in func.args:
            text = f"{self.namer(arg)}: {arg.type}"
            if arg.name in defaults:
                text += " = " + format_attr(defaults[arg.name])
            params.append(text)
        head = f"func @{func.sym_name}({', '.join(params)}) -> {func.result_type} {{"
        self.lines.append(head + self._loc(func))
        self.print_block_ops(func.body, 1)
        self.lines.append("}")

    def print_block_ops(self, block: Block, depth: int) -> None:
        for op in block.ops:
            self.print_op(op, depth)

    def print_op(self, op: Operation, depth: int) -> None:
        pad = INDENT * depth
        results = ", ".join(f"{self.namer(r)} : {r.type}" for r in op.results)
        text = pad + (results + " = " if results else "")
        text += f"{op.name}({', '.join(self.namer(v) for v in op.operands)})"
        if op.attributes:
            text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in ordered_attrs(op)) + "}"
        if not op.regions:
            self.lines.append(text + self._loc(op))
            return
        self.lines.append(text + " {" + self._loc(op))
        for i, region in enumerate(op.regions):
            block = region.block
            if block.args:
                args = ", ".join(f"{self.namer(a)}: {a.type}" for a in block.args)
                self.lines.append(pad + INDENT + f"^({args}):")
            self.print_block_ops(block, depth + 1)
            self.lines.append(pad + ("} {" if i + 1 < len(op.regions) else "}"))

    def _loc(self, op: Operation) -> str:
        text = f"  # {op.loc}" if self.with_locs and op.loc is not None else ""
        if op in self.marks:
            text += f"  <-- error: {self.marks[op]}"
        return text


def print_program(program: Program, with_locs: bool = True) -> str:
    return Printer(with_locs).print_program(program)


def print_op(op: Operation, with_locs: bool = True) -> str:
    printer = Printer(with_locs)
    if isinstance(op, FuncOp):
        printer.print_func(op)
    else:
        printer.print_op(op, 0)
    return "\n".join(printer.lines) + "\n"

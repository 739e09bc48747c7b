"""Insertion point for building IR: append ops to the current block, enter nested regions."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ir.core.graph import Block, Loc, Operation, Value
from ir.core.ops import ConstantOp
from ir.core.types import BOOL, FLOAT, INT, NONE, STR, TupleType, Type


class Builder:
    def __init__(self, block: Block) -> None:
        self.block = block
        self.loc: Loc | None = None  # location given to ops built without an explicit one

    def insert(self, op: Operation) -> Operation:
        if op.loc is None:
            op.loc = self.loc
        self.block.append(op)
        return op

    def create(
        self,
        op_class: type[Operation],
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        name: str | None = None,
        **attributes: Any,
    ) -> Operation:
        names = [name] if name is not None and len(result_types) == 1 else None
        return self.insert(op_class(operands, result_types, attributes, result_names=names))

    def constant(self, value: Any, type: Type | None = None) -> Value:
        return self.create(ConstantOp, (), [type or literal_type(value)], value=value).result

    @contextmanager
    def at_end_of(self, block: Block) -> Iterator[None]:
        saved = self.block
        self.block = block
        try:
            yield
        finally:
            self.block = saved

    @contextmanager
    def located(self, loc: Loc | None) -> Iterator[None]:
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved


def literal_type(value: Any) -> Type:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STR
    if isinstance(value, tuple):
        return TupleType(tuple(literal_type(v) for v in value))
    raise TypeError(f"no IR type for literal {value!r}")

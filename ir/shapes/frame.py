"""What the shape analysis' per-op rules (ir/shapes/rules_python.py) see of the analysis that runs
them: the frame of the function being analysed, and the interpreter's interface. The interpreter
(ir/passes/shapes.py) is the implementation; `Facts` (ir/passes/emitter.py), which the passes that
build ops type them with, answers the part that the rules of Python values use, with no frame.
"""

from __future__ import annotations

from typing import AbstractSet, Any, Protocol, Sequence

from ir.core import ops
from ir.core.graph import Block, Operation, Value
from ir.core.types import ANY, Type
from ir.shapes.values import AV

Path = tuple  # tuple[str | int, ...]: attribute names and indices from a function's argument
DictKey = tuple  # (id of a live module, attribute name): one dict a module holds


class Frame:
    def __init__(self, func: ops.FuncOp, parent: Frame | None, arg_origins: dict[str, Path | None]):
        self.func = func
        self.parent = parent
        self.env: dict[Value, AV] = {}
        self.facts: dict[Path, AV] = {}  # attribute facts, paths from this function's arguments
        self.arg_origins = arg_origins  # argument name -> where the caller got it (for facts)
        # reads of dicts of tensors a live module holds: value -> (the dict's key, its path)
        self.dicts: dict[Value, tuple[DictKey, Path | None]] = {}
        # Python code kept in the function (permissive mode) may have run on the way here: a
        # module attribute read now is not the value the entry checked (shape_rules_python)
        self.python = parent.python if parent is not None else False


class Interpreter(Protocol):
    funcs: dict[str, ops.FuncOp]  # the program's functions, by name
    appends: dict[Value, list[Value]]  # list -> the values appended to it anywhere
    escaped: AbstractSet[Value]  # lists that something may change or keep
    changed_list_attrs: set[Any]  # attribute names of lists that some read may change or keep
    read_after_python: set[Operation]  # module attribute reads that Python code may have set

    def read(self, frame: Frame, value: Value) -> AV: ...

    def read_raw(self, frame: Frame, value: Value) -> AV: ...

    def record(self, frame: Frame, value: Value, av: AV) -> None: ...

    def run_block(self, frame: Frame, block: Block) -> list[AV]: ...

    def list_elem(self, frame: Frame, value: Value, av: AV) -> AV: ...

    def operand(self, frame: Frame, value: Value) -> AV: ...

    def attr(self, frame: Frame, mod: AV, name: str, declared: Type = ANY, lists: bool = False) -> AV: ...

    def value_av(self, frame: Frame, value: Any, declared: Type, path: Path | None, lists: bool = False) -> AV: ...

    def call_module(self, frame: Frame, mod: AV, args: list[AV], kw: dict[str, AV], declared: Type,
                    arg_origins: list[Path | None]) -> AV: ...

    def run_function(self, func: ops.FuncOp, args: Sequence[AV], parent: Frame | None = None,
                     origins: Sequence[Path | None] | None = None) -> AV: ...

    def track_dict(self, frame: Frame, value: Value, module: Any, name: str, path: Path | None) -> None: ...

    def dict_read(self, frame: Frame, value: Value) -> AV | None: ...

    def dict_write(self, frame: Frame, value: Value, written: AV) -> None: ...

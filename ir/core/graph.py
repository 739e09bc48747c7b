"""The IR's objects: values, operations, blocks and regions, linked by use-lists.

Types (ir/core/types.py) compare by value; everything here is an identity object, so replacing all
uses of a value is a walk over its use-list, not over the program.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence

from ir.core.attrs import Attr, declared_attrs
from ir.core.types import Type


@dataclass(frozen=True)
class Loc:
    """A source span: 1-based lines, 0-based columns (as libcst reports them)."""

    file: str
    line: int
    col: int
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


class Value:
    """An SSA value: an operation's result or a block's argument."""

    def __init__(self, type: Type, name: str | None = None) -> None:
        self.type = type
        self.name = name  # a hint from the source ("new_h"); printers make it unique
        self.uses: list[Use] = []

    @property
    def owner(self) -> Operation | Block:
        raise NotImplementedError

    def replace_all_uses_with(self, new: Value) -> None:
        # The source's name survives a rewrite (`batch, steps = x.size(0), x.size(1)` keeps
        # `batch` and `steps` for the sizes it unpacks), unless the new value has one of its own.
        if self.name is not None and new.name is None and self.uses:
            new.name = self.name
        for use in list(self.uses):
            use.op.set_operand(use.index, new)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} %{self.name or '?'} : {self.type}>"


class OpResult(Value):
    def __init__(self, type: Type, op: Operation, index: int, name: str | None = None) -> None:
        super().__init__(type, name)
        self.op = op
        self.index = index

    @property
    def owner(self) -> Operation:
        return self.op


class BlockArg(Value):
    def __init__(self, type: Type, block: Block, index: int, name: str | None = None) -> None:
        super().__init__(type, name)
        self.block = block
        self.index = index

    @property
    def owner(self) -> Block:
        return self.block


@dataclass(eq=False)
class Use:
    op: Operation
    index: int


class Operation:
    """Base class of every op. Subclasses declare `name`, `traits` and their attributes (`Attr`
    fields, ir/core/attrs.py) and register themselves."""

    name: ClassVar[str] = ""
    traits: ClassVar[frozenset[Trait]] = frozenset()
    registry: ClassVar[dict[str, type[Operation]]] = {}
    attrs: ClassVar[dict[str, Attr]] = {}  # key -> declaration, inherited ones first

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.attrs = declared_attrs(cls)
        if cls.name:
            assert cls.name not in Operation.registry, f"duplicate op {cls.name}"
            Operation.registry[cls.name] = cls

    def __init__(
        self,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        attributes: dict[str, Any] | None = None,
        regions: Sequence[Region] = (),
        loc: Loc | None = None,
        result_names: Sequence[str | None] | None = None,
    ) -> None:
        self.operands: list[Value] = []
        for value in operands:
            self._add_operand(value)
        names = list(result_names) if result_names is not None else [None] * len(result_types)
        self.results = [OpResult(t, self, i, n) for i, (t, n) in enumerate(zip(result_types, names))]
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.regions: list[Region] = []
        for region in regions:
            self.add_region(region)
        self.loc = loc
        self.parent: Block | None = None

    # -- operands ---------------------------------------------------------------------------
    def _add_operand(self, value: Value) -> None:
        assert isinstance(value, Value), f"operand of {self.name} is {value!r}"
        value.uses.append(Use(self, len(self.operands)))
        self.operands.append(value)

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        old.uses = [u for u in old.uses if not (u.op is self and u.index == index)]
        value.uses.append(Use(self, index))
        self.operands[index] = value

    def drop_operands(self) -> None:
        for i, value in enumerate(self.operands):
            value.uses = [u for u in value.uses if not (u.op is self and u.index == i)]
        self.operands = []

    # -- structure --------------------------------------------------------------------------
    def add_region(self, region: Region) -> Region:
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def result(self) -> OpResult:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def has_trait(self, trait: Trait | type[Trait]) -> bool:
        if isinstance(trait, type):
            return any(isinstance(t, trait) for t in self.traits)
        return trait in self.traits

    def get_trait(self, trait_type: type[Trait]) -> Trait | None:
        for t in self.traits:
            if isinstance(t, trait_type):
                return t
        return None

    def walk(self) -> Iterator[Operation]:
        """This op and every op nested in its regions, in program order (pre-order)."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in list(block.ops):
                    yield from op.walk()

    def parent_op(self) -> Operation | None:
        if self.parent is None or self.parent.parent is None:
            return None
        return self.parent.parent.parent

    def erase(self) -> None:
        """Remove this op from its block; its results must be unused."""
        for r in self.results:
            assert not r.uses, f"erasing {self.name} whose result is still used"
        for region in self.regions:
            for block in region.blocks:
                for op in reversed(list(block.ops)):
                    op.erase()
        self.drop_operands()
        if self.parent is not None:
            self.parent.ops.remove(self)
            self.parent = None

    def verify_(self) -> list[str]:
        """Op-specific checks; return messages for what is wrong."""
        return []

    def __repr__(self) -> str:
        return f"<{self.name} at {self.loc}>"


class Block:
    def __init__(self, arg_types: Sequence[Type] = (), arg_names: Sequence[str | None] | None = None):
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        self.args = [BlockArg(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def add_arg(self, type: Type, name: str | None = None) -> BlockArg:
        arg = BlockArg(type, self, len(self.args), name)
        self.args.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        assert op.parent is None
        op.parent = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        assert op.parent is None
        op.parent = self
        self.ops.insert(self.ops.index(anchor), op)
        return op

    @property
    def terminator(self) -> Operation | None:
        if self.ops and self.ops[-1].has_trait(TERMINATOR):
            return self.ops[-1]
        return None


class Region:
    """A list of blocks; structured control flow uses exactly one block per region."""

    def __init__(self, blocks: Sequence[Block] = ()) -> None:
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        assert len(self.blocks) == 1
        return self.blocks[0]


# -- traits ----------------------------------------------------------------------------------
class Trait:
    """A property of an op kind that passes ask for instead of keeping lists of op names."""

    def __repr__(self) -> str:
        return type(self).__name__


class _Pure(Trait):
    """No side effects, no dependence on mutable state other than its operands' contents."""


class _Terminator(Trait):
    """Ends a block."""


class _Opaque(Trait):
    """Calls code the compiler does not see into (may have any side effect)."""


@dataclass(frozen=True, repr=False)
class Mutates(Trait):
    """Writes into the tensor passed as operand `index`."""

    index: int = 0


@dataclass(frozen=True, repr=False)
class AliasOf(Trait):
    """Result 0 shares storage with operand `index` (a view, or an in-place op's return)."""

    index: int = 0


PURE = _Pure()
TERMINATOR = _Terminator()
OPAQUE = _Opaque()


class Program:
    """What one source file compiles to: its functions in source order."""

    def __init__(self, source_file: str, funcs: Sequence[Operation] = ()) -> None:
        self.source_file = source_file  # as written in locations and headers, e.g. "cell.py"
        self.funcs: list[Operation] = list(funcs)
        # sym_name -> what the entry function is called with when compiling for a live instance
        # (see ir/passes/shapes.propagate_shapes `inputs`); empty ahead of time
        self.entry_inputs: dict[str, list] = {}
        # Other source files whose @script code the program holds (code inlined from another
        # file adds its file here); the compiled module's header records their hashes (SOURCES)
        self.dependencies: list[Path] = []
        # display name -> lines of each file the functions were lowered from (comments name them)
        self.source_lines: dict[str, list[str]] = {}
        # Permissive mode: (location, reason) of each statement or expression kept as Python
        self.breaks: list = []
        # script(model, ..., freeze=True): parameters and buffers may be read as constants, so
        # passes may compute weights from them once (runtime/prepacked.py)
        self.frozen = False
        # Functions whose calls stay calls (not inlined): the forwards of @script classes in
        # ahead-of-time generic code, each with compiled code of its own (one edit, one function)
        self.separate: frozenset[str] = frozenset()
        # COMPILED key -> the functions an entry with Union parameters compiled to, one per
        # combination of members, tried in order (each checks its members at entry)
        self.alternatives: dict[str, tuple[str, ...]] = {}
        # The devices whose tensors the compiled module's kernels may run on, sorted ("cpu",
        # "cuda"): codegen writes Triton kernels only where "cuda" is among them (or a kernel's
        # tensors are on CUDA), so a module for CPU tensors holds C++ alone.
        # script(instance, example_inputs=...) adds "cuda" for CUDA inputs or parameters, and
        # for TORCHSCRIBE_BACKEND=triton (transpiler/jit_cache.program_devices)
        self.devices: tuple[str, ...] = ("cpu",)
        # Ahead-of-time generic code: nothing known of the inputs, so nothing fuses and a
        # standard layer stays the call of its module (ir/passes/layers.py)
        self.generic = False
        # Code for calls autograd records (ir/passes.AUTOGRAD_PASSES): its pointwise groups
        # become kernels with generated backwards (ir/passes/autograd_kernels.py)
        self.autograd = False
        # script(model, ..., keep_eager=...): paths of submodules below the entry's module
        # ("stages.2") whose calls stay calls of the live module, as eager makes them
        # (ir/passes/inline.py): regions the compiled code does not run faster
        self.kept_eager: frozenset[str] = frozenset()

    def walk(self) -> Iterator[Operation]:
        for f in self.funcs:
            yield from f.walk()

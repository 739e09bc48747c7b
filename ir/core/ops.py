"""The op kinds of the IR, each a small declared class registered by name.

Ops named `py.*` are Python-level values and operators, `torch.*` tensor operations named the way
the source names them (a later pass decomposes them into aten primitives), `module.*` and
`func.*` calls and functions, and `scf.*` structured control flow.
"""

from __future__ import annotations

from typing import Any, Sequence

from ir.core.graph import (  # noqa: F401  (ops.OpResult: front end and tests build results through this module)
    OPAQUE,
    PURE,
    TERMINATOR,
    AliasOf,
    Block,
    Loc,
    Mutates,
    Operation,
    OpResult,
    Region,
    Trait,
    Value,
)
from ir.core.attrs import INTS, LITERAL, PINNED, STRS, Attr, Dict, OneOf, Opt, Tup, Union
from ir.core.types import BOOL, Type, fits


# -- functions -------------------------------------------------------------------------------
class FuncOp(Operation):
    """A compiled function or method, `sym_name` its qualified name ("MyCell.forward")."""

    name = "func.func"
    sym_name = Attr(str)
    result_type = Attr(Type)
    defaults = Attr(Dict(str, LITERAL))  # argument name -> literal default
    star = Attr(Opt(str), None)  # *args, which compiled callers leave empty
    kwstar = Attr(Opt(str), None)  # **kwargs, likewise
    positional = Attr(Opt(int), None)  # how many arguments may be passed by position (None: all)
    arg_classes = Attr(Tup(Tup(str)), ())  # (argument, class) as annotated
    kwstar_expected = Attr(Tup(Tup(LITERAL)), ())
    kwstar_passed = Attr(bool, False)
    rows = Attr(STRS, ())  # the parameters compiled for (rows, last) views (ir/kernel/rows.py)
    # decorated @torch.no_grad() or @torch.inference_mode(), in code for autograd (printed so)
    grad_off = Attr(Opt(OneOf(("no_grad", "inference_mode"))), None)

    @classmethod
    def build(
        cls,
        sym_name: str,
        arg_types: Sequence[Type],
        arg_names: Sequence[str],
        result_type: Type,
        defaults: dict[str, Any] | None = None,
        loc: Loc | None = None,
        **extra: Any,
    ) -> FuncOp:
        """`extra`: more of the declared attributes (`star`, `kwstar`, `positional`, ...)."""
        body = Region([Block(arg_types, arg_names)])
        return cls(
            attributes={"sym_name": sym_name, "result_type": result_type, "defaults": defaults or {}, **extra},
            regions=[body],
            loc=loc,
        )

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def args(self) -> list:
        return self.body.args

    def verify_(self) -> list[str]:
        term = self.body.terminator
        if not isinstance(term, ReturnOp):
            return ["function body must end in func.return"]
        return []


class ReturnOp(Operation):
    name = "func.return"
    traits = frozenset({TERMINATOR})


class FuncCallOp(Operation):
    """Call of another compiled function."""

    name = "func.call"
    traits = frozenset({OPAQUE})
    callee = Attr(str)  # its sym_name
    guard_self = Attr(bool, False)  # calls a submodule's method (ir/passes/inline.py)


class ComputedOnceOp(Operation):
    """`_prepacked.computed_once(<callee>, sources, like)`: the result of the function `callee`
    of the tensors `sources` (parameters and buffers), computed on the first call and again only
    when a source changes (a frozen program: ir/passes/hoist.py). The operands after the sources
    are tensors of whose device and dtype the result is made (`x.new_zeros(...)`), and nothing
    else about them is read."""

    name = "py.computed_once"
    traits = frozenset({PURE})
    callee = Attr(str)  # a sym_name
    sources = Attr(int)  # how many operands are sources


# -- Python values ---------------------------------------------------------------------------
class ConstantOp(Operation):
    """A literal: int, float, bool, str, None, or a dtype/device spelled as a string."""

    name = "py.constant"
    traits = frozenset({PURE})
    value = Attr(LITERAL)


class BinaryOp(Operation):
    """`lhs <op> rhs` for the Python operators + - * / // % ** @ & | ^ << >>."""

    name = "py.binary"
    traits = frozenset({PURE})
    op = Attr(str)


class UnaryOp(Operation):
    """`<op> x` for - + ~ not."""

    name = "py.unary"
    traits = frozenset({PURE})
    op = Attr(str)


class CompareOp(Operation):
    """`lhs <op> rhs` for == != < <= > >= is, is not, in, not in."""

    name = "py.compare"
    traits = frozenset({PURE})
    op = Attr(str)


class InplaceOp(Operation):
    """`target <op>= value` on a tensor: writes into operand 0 and returns it."""

    name = "py.inplace"
    traits = frozenset({Mutates(0), AliasOf(0)})
    op = Attr(str)
    reinplaced = Attr(bool, False)
    unfunctionalized = Attr(str, "")


class _CallTraits:
    """Effects of a torch call depend on what it calls; the front end records them as
    attributes (`mutates`, `random`, `alias_of`, declared by each class) and the traits follow
    from those."""

    mutates: tuple[int, ...]
    alias_of: int | None
    random: bool

    @property
    def traits(self) -> frozenset[Trait]:  # type: ignore[override]
        found: set[Trait] = {Mutates(i) for i in self.mutates}
        if self.alias_of is not None:
            found.add(AliasOf(self.alias_of))
        if not self.mutates and not self.random:
            found.add(PURE)
        return frozenset(found)


class BuiltinCallOp(_CallTraits, Operation):
    """A call of a Python builtin or `math` function ("len", "math.sqrt"), or of a runtime helper
    (ir/core/helpers.py: "_prepacked.conv2d"): pure, unless `mutates` lists an operand it writes
    (a result written into a buffer, ir/passes/plan.py)."""

    name = "py.call"
    callee = Attr(str)
    mutates = Attr(INTS, ())
    alias_of = Attr(Opt(int), None)
    random = Attr(bool, False)


class GetAttrOp(Operation):
    """`obj.<attr>`: a module's parameter, buffer, submodule or constant, or a tensor property."""

    name = "py.getattr"
    traits = frozenset({PURE})
    attr = Attr(str)
    after = Attr(int, 0)  # reads after Python code that may have set it: not merged (permissive)


class SetAttrOp(Operation):
    """`obj.<attr> = value` for a module's Python attribute."""

    name = "py.setattr"
    traits = frozenset({OPAQUE})
    attr = Attr(str)


class TupleOp(Operation):
    """`(a, b)`; with `named`, an instance of that NamedTuple class of a model's file
    (`Output(logits, tokens)`; `module`: its import name, "" for the file the compiled module is
    generated from), its items the operands in field order."""

    name = "py.tuple"
    traits = frozenset({PURE})
    named = Attr(str, "")
    module = Attr(str, "")


class ListOp(Operation):
    name = "py.list"
    traits = frozenset({PURE})


class DictOp(Operation):
    """`{"x1": x1, "x2": x2}`: a new dict of literal string keys (`keys`), one value per operand
    (also passed on as `**d`, permissive mode)."""

    name = "py.dict"
    traits = frozenset({PURE})
    keys = Attr(STRS)


class SpreadOp(Operation):
    """`(*shape, -1, d)`: a sequence of ints built from parts, those flagged in `starred` spread
    (a list of ints whose length is not known when lowering, as `x.shape[:-1]` of a tensor of
    unknown rank). The result is typed list[int] as `x.shape` then is; it is a tuple at run time."""

    name = "py.spread"
    traits = frozenset({PURE})
    starred = Attr(Tup(bool))


class ListAppendOp(Operation):
    name = "py.list_append"
    traits = frozenset({Mutates(0)})


class ListExtendOp(Operation):
    """`xs.extend(ys)`, and `xs += ys` on a list: the one list object grows (an alias sees it)."""

    name = "py.list_extend"
    traits = frozenset({Mutates(0)})


class ListSetItemOp(Operation):
    """`xs[i] = v` on a list (operands: list, index, value)."""

    name = "py.list_setitem"
    traits = frozenset({Mutates(0)})


class ListInsertOp(Operation):
    """`xs.insert(i, v)` (operands: list, index, value): the items from i on move one place up."""

    name = "py.list_insert"
    traits = frozenset({Mutates(0)})


class ListPopOp(Operation):
    """`xs.pop()` / `xs.pop(i)` (operands: list[, index]): the item, taken out of the list."""

    name = "py.list_pop"
    traits = frozenset({Mutates(0)})


class DictSetItemOp(Operation):
    """`d[k] = v` on a dict (operands: dict, key, value)."""

    name = "py.dict_setitem"
    traits = frozenset({Mutates(0)})


class SliceOp(Operation):
    """`xs[start:stop:step]` of a list: a new list (operands: list, start, stop, step; None
    constants where the slice leaves a bound out). `xs.copy()` is `xs[:]`."""

    name = "py.slice"
    traits = frozenset({PURE})


class FormatOp(Operation):
    """An f-string: `parts` holds, in order, ("text", literal) pieces and
    ("value", conversion, spec) pieces, one per operand: conversion is None, "r", "s" or "a";
    spec the format spec text ("" for none). The result is the str Python builds."""

    name = "py.format"
    traits = frozenset({PURE})
    parts = Attr(Tup(Tup(Opt(str))))


class RaiseOp(Operation):
    """`raise <exc>(*operands)` of a builtin exception class ("ValueError"). Control never goes on
    past it: the rest of its block is unreachable."""

    name = "py.raise"
    traits = frozenset({OPAQUE})
    exc = Attr(str)
    called = Attr(bool, True)  # `raise E(...)`, not `raise E`
    kwnames = Attr(STRS, ())


class MethodCallOp(Operation):
    """`obj.<method>(*args)`, a method the compiler leaves to Python (`@torch.jit.unused` or
    `@torch.jit.ignore`): operand 0 is the object, the rest the positional arguments, then the
    keyword arguments named by `kwnames`."""

    name = "py.method_call"
    traits = frozenset({OPAQUE})
    method = Attr(str)
    kwnames = Attr(STRS, ())


class OpaqueOp(Operation):
    """Python code kept as written (permissive mode): a statement (`kind` "stmt") whose results
    are the locals it binds (`writes`), or an expression ("expr") whose result is its value.
    Operands are the locals it reads (`reads`). `lines` is the text; `occurrences` say where the
    names in it stand, (line, column, end, name, "read"/"write"/"global"), so that the emitter can
    put in the variables that hold them; module-level names are read from the model's module
    (`module`, its import name; "" for the file the compiled module was generated from).
    `reason`: why it was not compiled."""

    name = "py.opaque"
    kind = Attr(OneOf(("stmt", "expr")))
    lines = Attr(STRS)
    raw_lines = Attr(Tup(int), ())
    reads = Attr(STRS)
    writes = Attr(STRS)
    occurrences = Attr(Tup(Tup(Union((int, str)))), ())
    bare = Attr(STRS, ())
    module = Attr(str, "")
    reason = Attr(str)
    fresh = Attr(bool, False)  # it only makes a new object (the `{}` of empty **kwargs)
    atom = Attr(bool, False)  # an expression that binds as tightly as a name

    @property
    def traits(self) -> frozenset[Trait]:  # type: ignore[override]
        # (a fresh object is removable when unused)
        return frozenset({PURE}) if self.fresh else frozenset({OPAQUE})

    def verify_(self) -> list[str]:
        a = self.attributes
        problems = []
        if len(self.operands) != len(a.get("reads", ())):
            problems.append("one operand per name read")
        expected = 1 if a.get("kind") == "expr" else len(a.get("writes", ()))
        if len(self.results) != expected:
            problems.append(f"{expected} results expected")
        return problems


class GetItemOp(Operation):
    """`container[index]` on a tuple, list or module list."""

    name = "py.getitem"
    traits = frozenset({PURE})


# -- tensor operations -----------------------------------------------------------------------
class TorchCallOp(_CallTraits, Operation):
    """A call of a torch function ("torch.tanh", "torch.nn.functional.gelu"). Operands are the
    positional arguments, then the keyword arguments `kwnames` names."""

    name = "torch.call"
    callee = Attr(str)
    kwnames = Attr(STRS, ())  # the keyword arguments' names, after the positional operands
    mutates = Attr(INTS, ())  # the operands it writes into
    alias_of = Attr(Opt(int), None)  # the operand its result shares storage with
    random = Attr(bool, False)
    aten = Attr(str, "")  # the aten overload it is (ir/torchapi/schemas.py)
    writeback = Attr(bool, False)  # a write-back functionalize adds
    unfunctionalized = Attr(str, "")  # why functionalize left the write as it is


class TensorMethodOp(_CallTraits, Operation):
    """A tensor method call `self.<method>(...)`; operand 0 is the tensor."""

    name = "torch.method"
    method = Attr(str)  # operand 0 is the tensor
    kwnames = Attr(STRS, ())
    mutates = Attr(INTS, ())
    alias_of = Attr(Opt(int), None)
    random = Attr(bool, False)
    aten = Attr(str, "")
    writeback = Attr(bool, False)
    unfunctionalized = Attr(str, "")


class IndexOp(Operation):
    """`base[items]` on a tensor. `items` describes each index item, in order:
    ":" slice parts as ("slice", has_start, has_stop, has_step), ("none",), ("ellipsis",),
    ("value",) for an int / tensor / bool-mask index; the operands after `base` are the slice
    parts and values that are present, in that order."""

    name = "torch.index"
    traits = frozenset({PURE, AliasOf(0)})
    items = Attr(Tup(Tup(Union((str, bool)))))


class IndexPutOp(Operation):
    """`base[items] = value`: items as in IndexOp; the last operand is the value."""

    name = "torch.index_put"
    traits = frozenset({Mutates(0)})
    items = Attr(Tup(Tup(Union((str, bool)))))
    reinplaced = Attr(bool, False)
    unfunctionalized = Attr(str, "")


class ModuleCallOp(Operation):
    """Call of a submodule `module(*args)`; operand 0 is the module."""

    name = "module.call"
    traits = frozenset({OPAQUE})
    kwnames = Attr(STRS, ())
    callee = Attr(Opt(str), None)  # the compiled forward (or __call__) it calls, a sym_name
    call = Attr(Opt(str), None)  # the module class's own `__call__` the call is made from
    opaque = Attr(bool, False)  # a class's own `__call__` left to Python
    kept = Attr(Opt(str), None)  # why the layers pass leaves it a call


# -- structured control flow -----------------------------------------------------------------
class YieldOp(Operation):
    name = "scf.yield"
    traits = frozenset({TERMINATOR})


class ConditionOp(Operation):
    """Ends a while loop's condition region: operand 0 decides, the rest are carried on."""

    name = "scf.condition"
    traits = frozenset({TERMINATOR})


class IfOp(Operation):
    """`if cond` with a then and an else region, each ending in scf.yield of the results."""

    name = "scf.if"

    @property
    def cond(self) -> Value:
        return self.operands[0]

    @property
    def then_block(self) -> Block:
        return self.regions[0].block

    @property
    def else_block(self) -> Block:
        return self.regions[1].block

    def verify_(self) -> list[str]:
        errors = []
        if self.cond.type != BOOL:
            errors.append(f"condition must be bool, got {self.cond.type}")
        for block in (self.then_block, self.else_block):
            term = block.terminator
            if not isinstance(term, YieldOp):
                errors.append("each region must end in scf.yield")
            elif not _all_subtypes(term.operands, [r.type for r in self.results]):
                errors.append("scf.yield types do not fit the results")
        return errors


class ForRangeOp(Operation):
    """`for iv in range(start, stop, step)` with loop-carried values: operands are start, stop,
    step and the initial carried values; the body's arguments are iv and the carried values;
    the body yields the next carried values; results are the final ones."""

    name = "scf.for"

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def inits(self) -> list[Value]:
        return self.operands[3:]

    def verify_(self) -> list[str]:
        return _verify_loop(self, self.inits, 1)


class ForEachOp(Operation):
    """`for elem in iterable` over a list or module list, with loop-carried values: operands
    are the iterable and the initial carried values; body arguments elem and carried values."""

    name = "scf.for_each"

    @property
    def body(self) -> Block:
        return self.regions[0].block

    @property
    def inits(self) -> list[Value]:
        return self.operands[1:]

    def verify_(self) -> list[str]:
        return _verify_loop(self, self.inits, 1)


class WhileOp(Operation):
    """`while`: operands are the initial carried values; region 0 (before) takes the carried
    values and ends in scf.condition(cond, carried...); region 1 (after) takes those and yields
    the next carried values; results are the carried values when cond is false."""

    name = "scf.while"

    @property
    def before(self) -> Block:
        return self.regions[0].block

    @property
    def after(self) -> Block:
        return self.regions[1].block

    def verify_(self) -> list[str]:
        errors = []
        term = self.before.terminator
        if not isinstance(term, ConditionOp):
            errors.append("the condition region must end in scf.condition")
        elif not _all_subtypes(term.operands[1:], [r.type for r in self.results]):
            errors.append("scf.condition carries values whose types differ from the results")
        elif term.operands[0].type != BOOL:
            errors.append("the loop condition must be bool")
        errors += _verify_loop(self, self.operands, 0, block=self.after)
        return errors


def _verify_loop(op: Operation, inits: Sequence[Value], n_extra: int, block: Block | None = None) -> list[str]:
    body = block or op.regions[0].block
    errors = []
    carried = [a.type for a in body.args[n_extra:]]
    if not _all_subtypes(inits, carried) or [r.type for r in op.results] != carried:
        errors.append("initial values, body arguments and results must have fitting types")
    term = body.terminator
    if isinstance(term, ConditionOp) and op.name != "scf.while":
        # A loop with an early exit: scf.condition(keep_going, carried...).
        if term.operands[0].type != BOOL or not _all_subtypes(term.operands[1:], carried):
            errors.append("scf.condition must carry a bool and the loop-carried values")
    elif not isinstance(term, YieldOp):
        errors.append("the loop body must end in scf.yield")
    elif not _all_subtypes(term.operands, carried):
        errors.append("scf.yield types do not fit the loop-carried types")
    return errors


def _all_subtypes(values: Sequence[Value], types: Sequence[Type]) -> bool:
    # A placeholder on a path that never reads it (py.uninitialized) fits any type: the
    # specialised types of the merge need not reach it.
    return len(values) == len(types) and all(
        isinstance(v.owner, UninitializedOp) or fits(v.type, t) for v, t in zip(values, types))


def is_pure(op: Operation) -> bool:
    return op.has_trait(PURE) and not op.regions


class UninitializedOp(Operation):
    """A placeholder of some type on a path where the value is never read (the other side of
    an early exit)."""

    name = "py.uninitialized"
    traits = frozenset({PURE})


class RefineOp(Operation):
    """The same object as operand 0 with a narrower type (`x` after `x is not None`)."""

    name = "py.refine"
    traits = frozenset({PURE, AliasOf(0)})


class UnpackOp(Operation):
    """`a, b, c = container`: one result per element; fails like Python on a length mismatch."""

    name = "py.unpack"
    traits = frozenset({PURE})


class UnpackObjectOp(UnpackOp):
    """`a, b = obj` of a Python object (permissive mode): iterating it runs its own code and may
    fail like Python, so it stays where it is, used or not."""

    name = "py.unpack_object"
    traits = frozenset({OPAQUE})


class AssumeClassOp(Operation):
    """A decision made when compiling rests on module operand 0 being exactly of class
    `qualname` (`isinstance(t, nn.Identity)` decided from the instance): the inline pass makes
    it the module's entry guard (ir/passes/inline.py)."""

    name = "py.assume_class"
    traits = frozenset({OPAQUE})
    qualname = Attr(str)


class GuardOp(Operation):
    """An entry check: when operand 0 (a bool) is false, the compiled code does not apply and
    the call runs eagerly instead (`reason` says why). Guards stand at the start of a function,
    before any effect."""

    name = "py.guard"
    traits = frozenset({OPAQUE})
    reason = Attr(str)


class EntryCheck(Operation):
    """A check of one fact the compiled code relies on, at function entry, before any effect.
    Operand 0 is the function argument the fact is about; `path` leads from it to the value. When
    the check fails, the runtime helper it calls raises GuardFailure and the call runs eagerly."""

    traits = frozenset({OPAQUE})
    path = Attr(Tup(Union((str, int))))  # attribute names and constant indices: ("fc1", "weight"), (0,)


class CheckTensorOp(EntryCheck):
    """The value is a tensor with `dtype` ("float32"), device type `device` ("cpu") and `shape`
    (one entry per dimension: an int size, a size symbol's name for a size >= 1 that the code
    keeps symbolic, None for anything), each None when not relied on; `optional`: None passes."""

    name = "py.check_tensor"
    dtype = Attr(Opt(str), None)
    device = Attr(Opt(str), None)
    shape = Attr(Opt(Tup(Opt(Union((int, str))))), None)
    optional = Attr(bool, False)


class CheckSizeOp(EntryCheck):
    """The value's size in dimension `dim` equals `expected`, a sympy expression (as text) over
    size symbols; `symbols` says where each is read: (name, operand index, path, dim)."""

    name = "py.check_size"
    dim = Attr(int)
    expected = Attr(str)
    symbols = Attr(Tup(Tup(LITERAL)))
    optional = Attr(bool, False)


class CheckLookupOp(Operation):
    """`ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, default)`, a call
    that the compiler made when compiling and whose result, a function, it compiled in place of
    the calls of it: the call again, and a check that it returns that function. Operands: the
    arguments' values, until specialize has pinned them and moved the check to the entry. The
    result is the function."""

    name = "py.check_lookup"
    traits = frozenset({OPAQUE})
    module = Attr(str)  # the file's module
    callee = Attr(str)  # the called expression's text there
    args = Attr(Tup(Tup(LITERAL)))  # each ("const", value) or ("global", name)
    returns = Attr(Tup(str))  # (module, qualname) of the function


class CheckNoAutogradOp(Operation):
    """Code under `with torch.no_grad():` runs compiled only where autograd records nothing: grad
    mode off, or no tensor argument and no parameter of `self` that requires grad (else the call
    runs eagerly, where the block switches grad off). Specialize moves it to the entry."""

    name = "py.check_no_autograd"
    traits = frozenset({OPAQUE})


class CheckGlobalOp(Operation):
    """A module-level name of a model file that compiled code took as a constant (`module`,
    `symbol`) still holds `expected`; specialize moves it to the entry."""

    name = "py.check_global"
    traits = frozenset({OPAQUE})
    module = Attr(str)
    symbol = Attr(str)
    expected = Attr(PINNED)


class CheckValueOp(EntryCheck):
    """The Python value (a module attribute the code was specialised to) equals `expected`."""

    name = "py.check_value"
    expected = Attr(PINNED)  # (TensorValues for a dict of tensors a module fills)

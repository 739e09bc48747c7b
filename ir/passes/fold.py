"""Constant folding: what the canonicalizer knows about Python values, and its rules for them.

The facts: constants, exact evaluation of Python operators and builtins on them, the elements of
tuples the compiler sees, tensor sizes that the types fix, and which values are certainly an
`int` or a `bool` at run time (types say "int" also where a bool or a float can arrive).
Evaluation follows Python exactly because it *is* Python, with guards around it: anything that
raises, gives a huge int (beyond 2**63), a NaN (its sign bit would be lost in the text), a
value of another type than the op declares, or a result that another machine's C library could
round differently (exp, log, sin, float ** float, ...) is not folded. The facts answer UNKNOWN
(or False) when they cannot say.

The rules (`rule(op, rewriter) -> bool`, run by ir/passes/canonicalize.py) fold Python ops on
constants, tuples of constants, items, unpacking and len() of tuples the compiler sees, tensor
sizes, `x is None` decided by types, and the exact identities of ints and bools; and drop casts
and expands of a tensor to the dtype or shape it has.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import Any, Callable, Sequence

import torch

from ir.core import ops
from ir.core.graph import TERMINATOR, AliasOf, Block, Operation, Value
from ir.core.ops import is_pure
from ir.core.pymethods import str_method_value
from ir.core.rewrite import Rewriter
from ir.core.types import (
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    ListType,
    ModuleListType,
    ModuleType,
    TensorType,
    TupleType,
    Type,
    is_subtype,
)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()  # "not a constant" / "do not fold" (None is a constant)

INT_LIMIT = 2**63  # folded ints stay within what a machine word holds
STR_LIMIT = 4096  # folded strings stay short


# -- constants ------------------------------------------------------------------------------------
def constant_value(value: Value) -> Any:
    """The Python value of a py.constant result; UNKNOWN for anything else."""
    owner = value.owner
    if isinstance(owner, ops.ConstantOp):
        return owner.value
    return UNKNOWN


def literal_type(value: Any) -> Type | None:
    """The IR type of a Python literal, by its exact Python type (True is a bool, not an int)."""
    kind = type(value)
    if kind is bool:
        return BOOL
    if kind is int:
        return INT
    if kind is float:
        return FLOAT
    if kind is str:
        return STR
    if value is None:
        return NONE
    if kind is tuple:
        elems = [literal_type(v) for v in value]
        return None if any(e is None for e in elems) else TupleType(tuple(e for e in elems if e is not None))
    return None


def fits(value: Any, declared: Type) -> bool:
    """Whether `value` may become a py.constant of type `declared`: same type exactly, and
    printable without loss (no huge ints, no NaNs, no long strings)."""
    return value is not UNKNOWN and literal_type(value) == declared and _printable(value)


def _printable(value: Any) -> bool:
    if type(value) is int:
        return -INT_LIMIT <= value <= INT_LIMIT
    if type(value) is float:
        return not math.isnan(value)
    if type(value) is str:
        return len(value) <= STR_LIMIT
    if type(value) is tuple:
        return all(_printable(v) for v in value)
    return True


def same_constant(a: Any, b: Any) -> bool:
    """Equal values of the same type, with -0.0 and 0.0 told apart (constants, not numbers)."""
    return constant_key(a) == constant_key(b)


def constant_key(value: Any) -> Any:
    """A hashable key equal exactly for interchangeable constants."""
    if type(value) is tuple:
        return ("tuple", tuple(constant_key(v) for v in value))
    if type(value) is float:
        return ("float", value.hex())  # tells -0.0 from 0.0
    return (type(value).__name__, repr(value))


def _is_number(value: Any) -> bool:
    return type(value) in (int, float, bool)


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and (type(value) is not float or math.isfinite(value))


# -- Python operators -----------------------------------------------------------------------------
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "&": operator.and_, "|": operator.or_,
    "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_UNARY: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos, "~": operator.invert, "not": operator.not_}


def _attempt(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except (ArithmeticError, ValueError, TypeError):  # what Python raises stays a run-time raise
        return UNKNOWN


def eval_binary(op: str, a: Any, b: Any) -> Any:
    """`a op b` as Python computes it, for numbers (and str + str); UNKNOWN when not folded."""
    if type(a) is str and type(b) is str and op == "+":
        return a + b
    if not (_is_number(a) and _is_number(b)):
        return UNKNOWN
    if op == "**":
        return _power(a, b)
    if op == "<<" and type(b) in (int, bool) and b > 64:
        return UNKNOWN  # a huge int
    fn = _BINARY.get(op)
    return UNKNOWN if fn is None else _attempt(fn, a, b)


def _power(a: Any, b: Any) -> Any:
    """`a ** b`: exact integer powers; otherwise only results that are exactly representable
    (C's pow() may round differently elsewhere, but not an exact result)."""
    if type(a) in (int, bool) and type(b) in (int, bool) and b >= 0:
        if abs(a) > 1 and abs(a).bit_length() * b > 64:
            return UNKNOWN
        return a**b
    if not (_is_finite_number(a) and _is_finite_number(b)):
        return UNKNOWN
    if float(b) != int(b) or abs(b) > 64 or abs(a) > 2**64:
        return UNKNOWN  # a root or a huge power
    result = _attempt(operator.pow, a, b)
    if type(result) is not float or not math.isfinite(result):
        return UNKNOWN
    exact = _attempt(operator.pow, Fraction(a), int(b))
    if exact is UNKNOWN or Fraction(result) != exact:
        return UNKNOWN
    return result


def eval_unary(op: str, a: Any) -> Any:
    """`op a` for - + ~ on numbers and `not` on any constant."""
    if op == "not":
        return not a
    if not _is_number(a):
        return UNKNOWN
    fn = _UNARY.get(op)
    return UNKNOWN if fn is None else _attempt(fn, a)


def eval_compare(op: str, a: Any, b: Any) -> Any:
    """`a op b` for comparisons of constants; `is` only against None (the identity of other
    constants is the interpreter's business), `in` only without NaNs (identity decides)."""
    if op in ("is", "is not"):
        if a is not None and b is not None:
            return UNKNOWN
        return (a is b) == (op == "is")
    if op in ("in", "not in"):
        if type(b) is not tuple or _has_nan(a) or _has_nan(b):
            return UNKNOWN
        return (a in b) == (op == "in")
    fn = _COMPARE.get(op)
    if fn is None:
        return UNKNOWN
    if op in ("==", "!="):
        # Between numbers, strings, None and tuples of them Python never raises; NaN inside a
        # tuple compares by identity first, which constants do not pin down.
        comparable = all(_scalar(x) or (type(x) is tuple and all(_scalar(y) for y in x)) for x in (a, b))
        comparable = comparable and not (type(a) is tuple and _has_nan(a)) and not (type(b) is tuple and _has_nan(b))
    else:
        comparable = (_is_number(a) and _is_number(b)) or (type(a) is str and type(b) is str)
    return _attempt(fn, a, b) if comparable else UNKNOWN


def _scalar(value: Any) -> bool:
    return _is_number(value) or type(value) is str or value is None


def _has_nan(value: Any) -> bool:
    if type(value) is float:
        return math.isnan(value)
    if type(value) is tuple:
        return any(_has_nan(v) for v in value)
    return False


# Functions whose result every platform computes alike: IEEE-exact operations only. exp, log,
# sin, ... come from the C library, which may round differently on another machine.
_MATH: dict[str, Callable[..., Any]] = {
    name: getattr(math, name)
    for name in ("sqrt", "floor", "ceil", "trunc", "fabs", "copysign", "fmod", "isnan", "isinf",
                 "isfinite", "gcd", "isqrt")
}


def eval_builtin(callee: str, args: list[Any]) -> Any:
    """A call of a builtin or math function on constants; UNKNOWN when not folded."""
    if callee.startswith("math."):
        fn = _MATH.get(callee[len("math."):])
        if fn is None or not all(_is_number(a) for a in args):
            return UNKNOWN
        if any(type(a) is int and abs(a) > INT_LIMIT for a in args):
            return UNKNOWN
        return _attempt(fn, *args)
    if callee == "len":
        return len(args[0]) if len(args) == 1 and type(args[0]) in (str, tuple) else UNKNOWN
    if callee in ("int", "float", "bool"):
        if len(args) != 1 or not (_is_number(args[0]) or type(args[0]) is str or callee == "bool"):
            return UNKNOWN
        if callee == "int" and type(args[0]) is str and len(args[0]) > 40:
            return UNKNOWN
        return _attempt({"int": int, "float": float, "bool": bool}[callee], args[0])
    if callee == "abs":
        return _attempt(abs, args[0]) if len(args) == 1 and _is_number(args[0]) else UNKNOWN
    if callee == "round":
        if not 1 <= len(args) <= 2 or not _is_number(args[0]):
            return UNKNOWN
        if len(args) == 2 and (type(args[1]) not in (int, bool) or abs(args[1]) > 400):
            return UNKNOWN  # round(n, -10**9) would compute 10**(10**9)
        return _attempt(round, *args)
    if callee == "sum":
        if len(args) != 1 or type(args[0]) is not tuple or not all(_is_number(x) for x in args[0]):
            return UNKNOWN
        return _attempt(sum, args[0])
    if callee.startswith("str."):
        folded, value = str_method_value(callee, args)
        return value if folded else UNKNOWN
    if callee in ("min", "max"):
        items = args[0] if len(args) == 1 and type(args[0]) is tuple else args
        if not items or not (all(_is_number(x) for x in items) or all(type(x) is str for x in items)):
            return UNKNOWN
        return _attempt(min if callee == "min" else max, *items) if len(items) > 1 else items[0]
    return UNKNOWN


# -- tuples and tensor sizes ----------------------------------------------------------------------
class Known:
    """An element of a container known at compile time: a value, or a constant."""

    def __init__(self, value: Value | None = None, constant: Any = UNKNOWN) -> None:
        self.value = value
        self.constant = constant


def known_elements(container: Value) -> list[Known | None] | None:
    """The elements of a tuple the compiler can see (a py.tuple display, a constant tuple, or
    the sizes of a tensor whose rank is known; a symbolic or unknown size is None there), or of a
    list display nothing changes or keeps (`private`); None when it cannot see them."""
    owner = container.owner
    if isinstance(owner, ops.TupleOp) or (isinstance(owner, ops.ListOp) and private(container)):
        return [Known(value=v) for v in owner.operands]
    value = constant_value(container)
    if type(value) is tuple:
        return [Known(constant=v) for v in value]
    shape = shape_of_sizes(owner) if isinstance(owner, Operation) else None
    if shape is not None:
        return [Known(constant=d) if type(d) is int else None for d in shape]
    return None


def is_sizes(op: Operation) -> bool:
    """Whether `op` is `x.shape` or `x.size()` of a tensor (a torch.Size: a tuple of ints)."""
    if not op.operands or not isinstance(op.operands[0].type, TensorType):
        return False
    if isinstance(op, ops.GetAttrOp):
        return op.attributes.get("attr") == "shape"
    return isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") == "size" and len(op.operands) == 1


def shape_of_sizes(op: Operation) -> tuple | None:
    """For `x.shape` / `x.size()` of a tensor of known rank: the tensor's shape."""
    if not is_sizes(op):
        return None
    t = op.operands[0].type
    return t.shape if isinstance(t, TensorType) else None


def tensor_fact(op: Operation) -> Any:
    """`x.size(k)`, `x.dim()`, `x.ndimension()`, `x.ndim`, `x.numel()`, `x.nelement()` when the
    tensor's type fixes them (every dimension involved an int, not a symbol); else UNKNOWN."""
    if not op.operands or not isinstance(op.operands[0].type, TensorType):
        return UNKNOWN
    shape = op.operands[0].type.shape
    if shape is None:
        return UNKNOWN
    if isinstance(op, ops.GetAttrOp):
        return len(shape) if op.attributes.get("attr") == "ndim" else UNKNOWN
    if not isinstance(op, ops.TensorMethodOp):
        return UNKNOWN
    method = op.attributes.get("method")
    if method in ("dim", "ndimension") and len(op.operands) == 1:
        return len(shape)
    if method in ("numel", "nelement") and len(op.operands) == 1:
        return math.prod(shape) if all(type(d) is int for d in shape) else UNKNOWN
    if method == "size" and len(op.operands) == 2:
        k = constant_value(op.operands[1])
        if type(k) is not int or not -len(shape) <= k < len(shape):
            return UNKNOWN  # out of range: torch raises at run time
        d = shape[k]
        return d if type(d) is int else UNKNOWN
    return UNKNOWN


# -- what a value certainly is at run time ---------------------------------------------------------
# A value typed int may hold a bool (an argument, `min(flag, 3)`) or a float (`2 ** n` with
# n < 0); rewrites that return an operand in place of a fresh int (`x + 0` -> x) need the
# operand to be an int for sure. These follow the producing ops, a bounded distance.
_INT_RESULT_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "element_size", "get_device"}
_DEPTH = 24


def exact_int(value: Value) -> bool:
    """Whether `value` is certainly a Python int (not a bool, float or other number) when run."""
    return _Exact().int_(value, 0)


def exact_bool(value: Value) -> bool:
    """Whether `value` is certainly a Python bool when run."""
    return _Exact().bool_(value, 0)


class _Exact:
    """One question about exact types, with the answers for the values it passes (a DAG of
    sums must not be walked once per path)."""

    def __init__(self) -> None:
        self.memo: dict[tuple[Value, str], bool] = {}

    def int_(self, value: Value, depth: int) -> bool:
        key = (value, "int")
        if key not in self.memo:
            self.memo[key] = depth <= _DEPTH and value.type == INT and self._int(value, depth + 1)
        return self.memo[key]

    def bool_(self, value: Value, depth: int) -> bool:
        key = (value, "bool")
        if key not in self.memo:
            self.memo[key] = depth <= _DEPTH and value.type == BOOL and self._bool(value, depth + 1)
        return self.memo[key]

    def int_or_bool(self, value: Value, depth: int) -> bool:
        return self.int_(value, depth) or self.bool_(value, depth)

    def _int(self, value: Value, depth: int) -> bool:
        owner = value.owner
        if isinstance(owner, ops.ConstantOp):
            return type(owner.value) is int
        if isinstance(owner, ops.BinaryOp):
            op = owner.attributes.get("op")
            a, b = owner.operands
            both = self.int_or_bool(a, depth) and self.int_or_bool(b, depth)
            if op in ("+", "-", "*", "//", "%", "<<", ">>"):
                return both  # on ints and bools these give an int
            if op in ("&", "|", "^"):
                return both and (self.int_(a, depth) or self.int_(b, depth))  # bool & bool is a bool
            return False  # int ** int is a float for a negative exponent
        if isinstance(owner, ops.UnaryOp):
            return owner.attributes.get("op") in ("-", "+", "~") and self.int_or_bool(owner.operands[0], depth)
        if isinstance(owner, ops.BuiltinCallOp):
            callee = owner.attributes.get("callee")
            if callee in ("len", "int"):
                return True  # they return an int or raise
            return callee == "abs" and self.int_(owner.operands[0], depth)
        if isinstance(owner, ops.TensorMethodOp):
            return owner.attributes.get("method") in _INT_RESULT_METHODS and isinstance(owner.operands[0].type, TensorType)
        if isinstance(owner, ops.GetAttrOp):
            return owner.attributes.get("attr") == "ndim" and isinstance(owner.operands[0].type, TensorType)
        if isinstance(owner, (ops.UnpackOp, ops.GetItemOp)):
            container = owner.operands[0].owner
            return isinstance(container, Operation) and is_sizes(container)
        if isinstance(owner, ops.IfOp):
            return all(self.int_(_yielded(b, value.index), depth) for b in (owner.then_block, owner.else_block))
        return False  # arguments, attributes, items of lists: whatever the caller passed

    def _bool(self, value: Value, depth: int) -> bool:
        owner = value.owner
        if isinstance(owner, ops.ConstantOp):
            return type(owner.value) is bool
        if isinstance(owner, ops.UnaryOp):
            return owner.attributes.get("op") == "not"
        if isinstance(owner, ops.BuiltinCallOp):
            return owner.attributes.get("callee") in ("bool", "math.isnan", "math.isinf", "math.isfinite")
        if isinstance(owner, ops.CompareOp):
            if owner.attributes.get("op") in ("is", "is not", "in", "not in"):
                return True
            # int, bool and str comparisons give a bool; other objects may give anything.
            return all(self.int_or_bool(v, depth) or type(constant_value(v)) is str for v in owner.operands)
        if isinstance(owner, ops.IfOp):
            return all(self.bool_(_yielded(b, value.index), depth) for b in (owner.then_block, owner.else_block))
        return False


def _yielded(block: Block, index: int) -> Value:
    term = block.terminator
    assert term is not None
    return term.operands[index]


def private(value: Value) -> bool:
    """Whether every reader of `value` only computes from it: none keeps, returns, mutates,
    views or passes it on, or compares its identity."""
    for use in value.uses:
        user = use.op
        if not is_pure(user) or user.has_trait(AliasOf) or isinstance(user, (ops.TupleOp, ops.ListOp)):
            return False
        if isinstance(user, ops.CompareOp) and user.attributes["op"] in ("is", "is not"):
            return False
    return True


# -- folding rules --------------------------------------------------------------------------------
def _fold_to(op: Operation, value: Any, rw: Rewriter) -> bool:
    if len(op.results) != 1 or not fits(value, op.result.type):
        return False
    rw.replace_op(op, [rw.constant(op, value, op.result.type)])
    return True


def _constant_operands(op: Operation) -> list[Any] | None:
    values = [constant_value(v) for v in op.operands]
    return None if any(v is UNKNOWN for v in values) else values


def fold_binary(op: Operation, rw: Rewriter) -> bool:
    """A Python operator on constants is its value."""
    args = _constant_operands(op) if isinstance(op, ops.BinaryOp) else None
    return args is not None and _fold_to(op, eval_binary(op.attributes["op"], *args), rw)


def fold_unary(op: Operation, rw: Rewriter) -> bool:
    """A unary operator on a constant is its value."""
    args = _constant_operands(op) if isinstance(op, ops.UnaryOp) else None
    return args is not None and _fold_to(op, eval_unary(op.attributes["op"], *args), rw)


def fold_compare(op: Operation, rw: Rewriter) -> bool:
    """A comparison of constants is its value; `x in [a, b]` too when nothing else sees the
    list (so nothing can have changed it)."""
    args = _constant_operands(op) if isinstance(op, ops.CompareOp) else None
    if isinstance(op, ops.CompareOp) and op.attributes["op"] in ("in", "not in"):
        elems, listed = op.operands[1], op.operands[1].owner
        if isinstance(listed, ops.ListOp) and len(elems.uses) == 1 and constant_value(op.operands[0]) is not UNKNOWN:
            items = _constant_operands(listed)
            args = None if items is None else [constant_value(op.operands[0]), tuple(items)]
    return args is not None and _fold_to(op, eval_compare(op.attributes["op"], *args), rw)


def fold_builtin(op: Operation, rw: Rewriter) -> bool:
    """A builtin or exact math function of constants is its value; a list display of constants
    that nothing changes or keeps is passed as a tuple (`sum(shift_size)`)."""
    if not isinstance(op, ops.BuiltinCallOp):
        return False
    args = [_constant_list(v) if isinstance(v.owner, ops.ListOp) else constant_value(v) for v in op.operands]
    if any(a is UNKNOWN for a in args):
        return False
    return _fold_to(op, eval_builtin(op.attributes["callee"], args), rw)


def _constant_list(value: Value) -> Any:
    items = [constant_value(v) for v in value.owner.operands]  # type: ignore[union-attr]
    if not private(value) or any(i is UNKNOWN for i in items):
        return UNKNOWN
    return tuple(items)


def fold_constant_tuple(op: Operation, rw: Rewriter) -> bool:
    """A tuple display of constants is a constant tuple (not a NamedTuple's: its class is made)."""
    args = _constant_operands(op) if isinstance(op, ops.TupleOp) and not op.attributes.get("named") else None
    return args is not None and _fold_to(op, tuple(args), rw)


def fold_is_none_by_type(op: Operation, rw: Rewriter) -> bool:
    """`x is None` is decided when x is None by its type, or surely a tensor; `x is x` too."""
    if not isinstance(op, ops.CompareOp) or op.attributes["op"] not in ("is", "is not"):
        return False
    a, b = op.operands
    if a is b:  # one value (`key is query` once the call is inlined)
        return _fold_to(op, op.attributes["op"] == "is", rw)
    if b.type != NONE:
        a, b = b, a
    if b.type != NONE:
        return False
    if a.type == NONE:
        is_none = True
    elif _surely_tensor(a):
        is_none = False
    else:
        return False
    return _fold_to(op, is_none == (op.attributes["op"] == "is"), rw)


def fold_is_none_of_display(op: Operation, rw: Rewriter) -> bool:
    """`xs is None` of None, or of a list, tuple or dict display, is decided (an inlined call of
    DLA's tree, `if children is None: children = []`, passed None or its caller's list)."""
    if not isinstance(op, ops.CompareOp) or op.attributes["op"] not in ("is", "is not"):
        return False
    a, b = op.operands
    if b.type != NONE:
        a, b = b, a
    if b.type != NONE or not (a.type == NONE or isinstance(a.owner, (ops.ListOp, ops.TupleOp, ops.DictOp))):
        return False
    return _fold_to(op, (a.type == NONE) == (op.attributes["op"] == "is"), rw)


def forward_refined_display(op: Operation, rw: Rewriter) -> bool:
    """A display refined from Optional (`children` after `is None` in an inlined call) is the
    display itself, so the folds of displays see it."""
    if not isinstance(op, ops.RefineOp) or not isinstance(op.operands[0].owner, (ops.ListOp, ops.TupleOp, ops.DictOp)):
        return False
    rw.replace_op(op, [op.operands[0]])
    return True


def inline_constant_if(op: Operation, rw: Rewriter) -> bool:
    """An if on a constant runs one side: its ops move before the if, its yields replace the results."""
    if not isinstance(op, ops.IfOp):
        return False
    cond = constant_value(op.cond)
    if type(cond) is not bool:
        return False
    values = rw.inline_before(op.then_block if cond else op.else_block, op, [])
    rw.replace_op(op, values)
    return True


def _surely_tensor(value: Value) -> bool:
    """A tensor-typed argument (checked on entry), the result of a tensor operation, or a
    module's tensor that an entry check pins as one (`self.bn.num_batches_tracked`)."""
    if not isinstance(value.type, TensorType):
        return False
    owner = value.owner
    if isinstance(owner, Block):
        region = owner.parent
        return region is not None and isinstance(region.parent, ops.FuncOp)
    if isinstance(owner, ops.GetAttrOp):
        return _checked_tensor(value)
    return isinstance(owner, (ops.TorchCallOp, ops.TensorMethodOp, ops.IndexOp, ops.BinaryOp, ops.UnaryOp,
                              ops.CompareOp, ops.InplaceOp))


def _checked_tensor(value: Value) -> bool:
    """Whether `value` is read by attributes (and items of module lists) from a function argument along a path that a
    `py.check_tensor` at entry pins as a tensor (not optional), in a function that assigns no
    attribute and keeps no Python code (which could change what the path holds after entry)."""
    path: list[str | int] = []
    while True:
        owner = value.owner
        if isinstance(owner, ops.GetAttrOp):
            path.insert(0, owner.attributes["attr"])
        elif isinstance(owner, ops.GetItemOp) and isinstance(owner.operands[0].type, (ModuleType, ModuleListType)) \
                and type(index := constant_value(owner.operands[1])) is int:
            path.insert(0, index)  # (an item of an nn.Sequential or nn.ModuleList: `features[0][1]`)
        else:
            break
        value = owner.operands[0]
    block = value.owner
    func = block.parent.parent if isinstance(block, Block) and block.parent is not None else None
    if not isinstance(func, ops.FuncOp) or block is not func.regions[0].block:
        return False
    if any(isinstance(op, (ops.SetAttrOp, ops.OpaqueOp)) for op in func.walk()):
        return False
    return any(isinstance(op, ops.CheckTensorOp) and op.operands[0] is value and tuple(op.attributes["path"]) == tuple(path)
               and not op.attributes.get("optional") for op in block.ops)


def forward_tuple_item(op: Operation, rw: Rewriter) -> bool:
    """An item of a tuple the compiler sees (display, constant, known sizes) is that element."""
    if not isinstance(op, ops.GetItemOp):
        return False
    index = constant_value(op.operands[1])
    elems = known_elements(op.operands[0])
    if type(index) not in (int, bool) or elems is None or not -len(elems) <= index < len(elems):
        return False
    return _forward(op, [elems[index]], rw)


def forward_tuple_unpack(op: Operation, rw: Rewriter) -> bool:
    """Unpacking a tuple the compiler sees gives its elements."""
    if not isinstance(op, ops.UnpackOp):
        return False
    elems = known_elements(op.operands[0])
    if elems is None or len(elems) != len(op.results):
        return False  # a length mismatch raises at run time
    return _forward(op, elems, rw)


def _forward(op: Operation, elems: list[Known | None], rw: Rewriter) -> bool:
    changed = False
    for result, known in zip(op.results, elems):
        if known is None or not result.uses:
            continue
        if known.value is not None:
            if not is_subtype(known.value.type, result.type):
                continue
            new = known.value
        elif fits(known.constant, result.type):
            new = rw.constant(op, known.constant, result.type)
        else:
            continue
        rw.replace_value(result, new)
        changed = True
    return changed


def fold_len(op: Operation, rw: Rewriter) -> bool:
    """len() of a tuple the compiler sees, or of a list display nothing can grow, is a constant;
    so is its truth (`if to_cat:`, bool() of a tuple or list only: a tensor's is its value)."""
    if not isinstance(op, ops.BuiltinCallOp) or op.attributes["callee"] not in ("len", "bool") or len(op.operands) != 1:
        return False
    container = op.operands[0]
    if op.attributes["callee"] == "bool" and not isinstance(container.type, (ListType, TupleType)):
        return False
    elems = known_elements(container)
    if elems is None:
        return False
    return _fold_to(op, len(elems) if op.attributes["callee"] == "len" else bool(elems), rw)


def slice_known_list(op: Operation, rw: Rewriter) -> bool:
    """A slice with constant bounds of a list display that nothing changes or keeps is a new
    display of those elements (`shift_size.copy()`, which lowers to `shift_size[:]`)."""
    if not isinstance(op, ops.SliceOp) or not isinstance(op.operands[0].owner, ops.ListOp):
        return False
    bounds = [constant_value(v) for v in op.operands[1:]]
    if not private(op.operands[0]) or not all(b is None or type(b) is int for b in bounds) or bounds[2] == 0:
        return False  # (a zero step raises)
    items = op.operands[0].owner.operands[slice(*bounds)]
    display = rw.insert_before(op, ops.ListOp(items, [op.result.type], {}, [], op.loc, [op.result.name]))
    rw.replace_op(op, [display.result])
    return True


def concat_known_lists(op: Operation, rw: Rewriter) -> bool:
    """`a + b` of list displays that nothing changes or keeps is one display of their elements
    (DLA's `self.root([x2, x1] + children)`): torch.cat of it then has a shape."""
    if not isinstance(op, ops.BinaryOp) or op.attributes["op"] != "+" or not isinstance(op.result.type, ListType):
        return False
    lists = op.operands
    if not all(isinstance(v.owner, ops.ListOp) and private(v) for v in lists):
        return False
    items = [item for v in lists for item in v.owner.operands]  # type: ignore[union-attr]
    display = rw.insert_before(op, ops.ListOp(items, [op.result.type], {}, [], op.loc, [op.result.name]))
    rw.replace_op(op, [display.result])
    return True


def fold_tensor_size(op: Operation, rw: Rewriter) -> bool:
    """x.size(k), x.dim(), x.ndim, x.numel() are constants where the tensor's type fixes them."""
    if not isinstance(op, (ops.TensorMethodOp, ops.GetAttrOp)):
        return False
    return _fold_to(op, tensor_fact(op), rw)


def fold_dtype_info(op: Operation, rw: Rewriter) -> bool:
    """`torch.finfo(d).min` (any attribute of torch.finfo / torch.iinfo) is a constant where `d` is
    known: a dtype constant, or `x.dtype` of a tensor whose type has its dtype."""
    if not isinstance(op, ops.GetAttrOp):
        return False
    call = op.operands[0].owner
    if not isinstance(call, ops.BuiltinCallOp) or call.attributes["callee"] not in ("torch.finfo", "torch.iinfo"):
        return False
    dtype = call.operands[0]
    name = constant_value(dtype)
    if isinstance(dtype.owner, ops.GetAttrOp) and dtype.owner.attributes.get("attr") == "dtype" \
            and isinstance(dtype.owner.operands[0].type, TensorType):
        name = dtype.owner.operands[0].type.dtype
    known = getattr(torch, name.removeprefix("torch."), None) if isinstance(name, str) else None
    if not isinstance(known, torch.dtype):
        return False
    try:
        info = torch.finfo(known) if call.attributes["callee"] == "torch.finfo" else torch.iinfo(known)
    except TypeError:  # (finfo of an integer dtype, iinfo of a float one: the call raises as eager's does)
        return False
    return _fold_to(op, getattr(info, op.attributes["attr"]), rw)


# -- exact algebra on ints and bools --------------------------------------------------------------
# op -> (neutral constant, where it may stand)
_NEUTRAL = {"+": (0, "either"), "-": (0, "right"), "*": (1, "either"), "//": (1, "right"), "**": (1, "right"),
            "|": (0, "either"), "^": (0, "either"), "<<": (0, "right"), ">>": (0, "right")}


def simplify_int_identity(op: Operation, rw: Rewriter) -> bool:
    """x + 0, x - 0, x * 1, x // 1, x ** 1, x | 0, ... are x when x is surely an int."""
    if not isinstance(op, ops.BinaryOp) or op.result.type != INT:
        return False
    neutral, where = _NEUTRAL.get(op.attributes["op"], (None, ""))
    a, b = op.operands
    for x, c, side in ((a, b, "right"), (b, a, "left")):
        value = constant_value(c)
        if where in ("either", side) and type(value) is int and value == neutral and exact_int(x):
            rw.replace_op(op, [x])
            return True
    return False


def simplify_int_times_zero(op: Operation, rw: Rewriter) -> bool:
    """x * 0 and 0 * x are 0 when x is surely an int."""
    if not isinstance(op, ops.BinaryOp) or op.attributes["op"] != "*" or op.result.type != INT:
        return False
    a, b = op.operands
    for x, c in ((a, b), (b, a)):
        value = constant_value(c)
        if type(value) is int and value == 0 and exact_int(x):
            rw.replace_op(op, [c])
            return True
    return False


def simplify_double_not(op: Operation, rw: Rewriter) -> bool:
    """not not b is b when b is surely a bool."""
    if not isinstance(op, ops.UnaryOp) or op.attributes["op"] != "not":
        return False
    inner = op.operands[0].owner
    if not isinstance(inner, ops.UnaryOp) or inner.attributes["op"] != "not" or not exact_bool(inner.operands[0]):
        return False
    rw.replace_op(op, [inner.operands[0]])
    return True


def simplify_redundant_conversion(op: Operation, rw: Rewriter) -> bool:
    """bool(b) of a surely-bool b is b; int(n) of a surely-int n is n."""
    if not isinstance(op, ops.BuiltinCallOp) or len(op.operands) != 1:
        return False
    x = op.operands[0]
    callee = op.attributes["callee"]
    if (callee == "bool" and exact_bool(x)) or (callee == "int" and exact_int(x)):
        rw.replace_op(op, [x])
        return True
    return False


def simplify_same_dtype_cast(op: Operation, rw: Rewriter) -> bool:
    """`x.to(dtype)` is x itself when x already has that dtype (eager returns x, not a copy):
    `hidden.to(input_dtype)` with `input_dtype = hidden.dtype` read before a float32 detour, and
    `x.to(x.dtype)` whatever x's dtype is."""
    if not (isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") == "to" and len(op.operands) == 2
            and not op.attributes.get("kwnames") and isinstance(op.operands[0].type, TensorType)):
        return False
    x, dtype = op.operands
    source = dtype.owner
    read = isinstance(source, ops.GetAttrOp) and source.attributes.get("attr") == "dtype" \
        and isinstance(source.operands[0].type, TensorType)
    if not (read and source.operands[0] is x):
        have = x.type.dtype  # type: ignore[union-attr]
        want = f"torch.{source.operands[0].type.dtype}" if read else constant_value(dtype)  # type: ignore[union-attr]
        if have is None or want != f"torch.{have}":
            return False
    rw.replace_op(op, [x])
    return True


def simplify_same_shape_expand(op: Operation, rw: Rewriter) -> bool:
    """`x.expand_as(t)` is x where t's shape is x's (t itself, or equal shapes the types fix:
    functionalization's `(x + y).expand_as(x)` once shapes are known), and so is
    `x.expand(sizes)` of the sizes x has (`out.index_add(...).expand(out.size(0), 64)`). Eager makes a new view of
    all of x, which only its identity, or a change of metadata in place (`x.t_()`), could tell
    from x: so only in a function that changes no tensor, calls nothing it does not see into
    (functionalized code but for its write-backs) and compares no tensors with `is`."""
    if not (isinstance(op, ops.TensorMethodOp) and op.attributes.get("method") in ("expand_as", "expand")
            and len(op.operands) >= 2 and not op.attributes.get("kwnames")):
        return False
    x = op.operands[0]
    if op.attributes["method"] == "expand":  # `x.expand(y.size(0), 64)` of sizes x has
        if not _own_sizes(x.type, op.operands[1:]):
            return False
    elif x is not op.operands[1] and not _same_known_shape(x.type, op.operands[1].type):
        return False
    func = op
    while func.parent_op() is not None:
        func = func.parent_op()  # type: ignore[assignment]
    if not all(_changes_nothing(inner) for inner in func.walk()):
        return False
    rw.replace_op(op, [x])
    return True


def _own_sizes(t: Type, sizes: Sequence[Value]) -> bool:
    """Whether `sizes`, an expand's, are the shape `t` has: per dim -1, the size as a constant,
    or `y.size(d)` of a tensor whose type gives that dim the same size."""
    if not isinstance(t, TensorType) or t.shape is None or len(sizes) != len(t.shape):
        return False
    for size, dim in zip(sizes, t.shape):
        owner = size.owner
        if isinstance(owner, ops.ConstantOp) and type(owner.value) is int:
            if owner.value != -1 and owner.value != dim:
                return False
        elif isinstance(owner, ops.TensorMethodOp) and owner.attributes.get("method") == "size" \
                and len(owner.operands) == 2 and isinstance(owner.operands[1].owner, ops.ConstantOp):
            of, d = owner.operands[0].type, owner.operands[1].owner.value
            if not (isinstance(of, TensorType) and of.shape is not None and type(d) is int
                    and -len(of.shape) <= d < len(of.shape) and dim is not None and of.shape[d] == dim):
                return False
        else:
            return False
    return True


def _same_known_shape(a: Type, b: Type) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.shape is not None
            and a.shape == b.shape and None not in a.shape)


def _changes_nothing(op: Operation) -> bool:
    """The op writes no tensor, calls nothing unseen and tells no tensors apart by identity:
    pure (but `is` on tensors), control flow, a terminator, an entry check, or a write-back of
    a new value into the caller's tensor."""
    if isinstance(op, ops.CompareOp) and op.attributes["op"] in ("is", "is not"):
        return not any(isinstance(v.type, TensorType) for v in op.operands)
    return (is_pure(op) or bool(op.regions) or op.has_trait(TERMINATOR) or isinstance(op, (ops.GuardOp, ops.EntryCheck))
            or bool(op.attributes.get("writeback")))


"""Python's operators (+ - * / // % ** @ & | ^ << >>, comparisons, unary - + ~ not) on tensors and
Python scalars: result types, the aten overload reached, errors for what Python or torch reject.
Tensor results get their dtype from torch itself (ir/torchapi/dtypes.py)."""

from __future__ import annotations

import operator
from typing import Callable

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    NONE,
    STR,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    unify,
)
from ir.torchapi import dtypes as dt
from ir.torchapi.callinfo import CallInfo, SignatureError, tensor_devices
from ir.torchapi.schemas import schemas

_OPERATORS: dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
    ">>": operator.rshift, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_INPLACE_OPERATORS: dict[str, Callable] = {
    "+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
    "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow, "@": operator.imatmul,
    "&": operator.iand, "|": operator.ior, "^": operator.ixor, "<<": operator.ilshift,
    ">>": operator.irshift,
}
# The aten overload each operator reaches: (tensor op tensor, tensor op number, number op tensor).
_OP_ATEN: dict[str, tuple[str | None, str | None, str | None]] = {
    "+": ("add.Tensor", "add.Tensor", "add.Tensor"),
    "-": ("sub.Tensor", "sub.Tensor", "rsub.Scalar"),
    "*": ("mul.Tensor", "mul.Tensor", "mul.Tensor"),
    "/": ("div.Tensor", "div.Tensor", None),
    "//": ("floor_divide", "floor_divide", "floor_divide"),
    "%": ("remainder.Tensor", "remainder.Scalar", "remainder.Scalar_Tensor"),
    "**": ("pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar"),
    "@": ("matmul", None, None),
    "&": ("bitwise_and.Tensor", "bitwise_and.Scalar", "bitwise_and.Scalar"),
    "|": ("bitwise_or.Tensor", "bitwise_or.Scalar", "bitwise_or.Scalar"),
    "^": ("bitwise_xor.Tensor", "bitwise_xor.Scalar", "bitwise_xor.Scalar"),
    "<<": ("__lshift__.Tensor", "__lshift__.Scalar", "bitwise_left_shift.Scalar_Tensor"),
    ">>": ("__rshift__.Tensor", "__rshift__.Scalar", "bitwise_right_shift.Scalar_Tensor"),
    "==": ("eq.Tensor", "eq.Scalar", "eq.Scalar"),
    "!=": ("ne.Tensor", "ne.Scalar", "ne.Scalar"),
    "<": ("lt.Tensor", "lt.Scalar", "gt.Scalar"),
    "<=": ("le.Tensor", "le.Scalar", "ge.Scalar"),
    ">": ("gt.Tensor", "gt.Scalar", "lt.Scalar"),
    ">=": ("ge.Tensor", "ge.Scalar", "le.Scalar"),
}
_NUMERIC = (INT, FLOAT, BOOL, dt.COMPLEX)


def resolve_binary(op: str, a: Type, b: Type, inplace: bool = False) -> CallInfo:
    """`a op b` (or `a op= b` when inplace) for the Python operators and comparisons."""
    if op in ("is", "is not", "in", "not in"):
        return CallInfo(BOOL, None, (), False, None)
    if op not in _OPERATORS:
        raise SignatureError(f"unknown operator `{op}`")
    if isinstance(a, OptionalType) or isinstance(b, OptionalType):
        if op in ("==", "!="):
            return CallInfo(BOOL if not (_tensorish(a) or _tensorish(b)) else ANY, None, (), False, None)
        raise SignatureError(
            f"unsupported operand types for {op}: {a} and {b} (a value may be None)",
            "check `x is not None` first; the compiler narrows the type inside the `if`",
        )
    if isinstance(a, TensorType) or isinstance(b, TensorType):
        return _tensor_binary(op, a, b, inplace)
    result = _scalar_binary(op, a, b, inplace)
    if result is None:
        raise SignatureError(f"unsupported operand types for {op}: {a} and {b}")
    mutates = (0,) if inplace and isinstance(a, ListType) and op in ("+", "*") else ()
    return CallInfo(result, None, mutates, False, 0 if mutates else None)


def _tensorish(t: Type) -> bool:
    return isinstance(t, TensorType) or (isinstance(t, OptionalType) and isinstance(t.elem, TensorType))


def _scalar_binary(op: str, a: Type, b: Type, inplace: bool) -> Type | None:
    if op in ("==", "!="):
        return BOOL
    if ANY in (a, b):
        return ANY
    if isinstance(a, TupleType) and isinstance(b, TupleType) and op == "+":
        return TupleType(a.elems + b.elems)
    if isinstance(a, ListType) and isinstance(b, ListType) and op == "+":
        return unify(a, b)
    if op == "+" and ListType(INT) in (a, b) and all(isinstance(t, TupleType) and all(e in (INT, BOOL) for e in t.elems)
                                                   for t in (a, b) if t != ListType(INT)):
        return ListType(INT)  # sizes (`x.size()[:-1] + (n,)`): the lowering checks the list is a tuple when run
    if isinstance(a, (TupleType, ListType)) and b in (INT, BOOL) and op == "*":
        return a if isinstance(a, ListType) else ANY  # a tuple of unknown length
    if isinstance(a, (TupleType, ListType)) and isinstance(b, type(a)) and op in ("<", "<=", ">", ">="):
        return BOOL
    return dt.python_binary(op, a, b)


def _tensor_binary(op: str, a: Type, b: Type, inplace: bool) -> CallInfo:
    tensor_left = isinstance(a, TensorType)
    other = b if tensor_left else a
    if op in ("==", "!=") and (other == NONE or other in (STR, DTYPE, DEVICE)):
        return CallInfo(BOOL, None, (), False, None)
    if inplace and not tensor_left:
        # number += tensor rebinds the name to a new tensor: same as number + tensor.
        inplace = False
    if other == ANY:
        return CallInfo(TensorType(), None, (0,) if inplace else (), False, 0 if inplace else None)
    if not (isinstance(other, TensorType) or other in _NUMERIC):
        raise SignatureError(
            f"unsupported operand types for {op}: {a} and {b}",
            "tensors combine with tensors and Python numbers only",
        )
    if op == "@" and not isinstance(other, TensorType):
        raise SignatureError(f"unsupported operand types for @: {a} and {b}", "use * to scale a tensor")
    fn = _INPLACE_OPERATORS[op] if inplace else _OPERATORS[op]
    status, desc, error, cpu_rejected = dt.infer_status(
        dt.keyed(lambda x, k: fn(x[0], x[1]), ("op", op, inplace)), [a, b], {}, {})
    both_known = all(
        not isinstance(t, TensorType) or (t.dtype is not None and t.shape is not None) for t in (a, b)
    )
    if both_known and _rejected(status, cpu_rejected, [a, b]):
        raise SignatureError(f"unsupported operand types for {op}: {a} and {b}: {error}")
    dtype = desc if status == "ok" and isinstance(desc, str) else None
    if inplace and isinstance(a, TensorType) and a.dtype is not None and status != "failed":
        dtype = a.dtype
    device = tensor_devices([a, b])
    which = 0 if isinstance(a, TensorType) and isinstance(b, TensorType) else (1 if tensor_left else 2)
    aten_name = _OP_ATEN[op][which]
    if inplace and aten_name is not None:
        base, _, overload = aten_name.partition(".")
        base = {"__lshift__": "__ilshift__", "__rshift__": "__irshift__"}.get(base, base + "_")
        aten_name = base + ("." + overload if overload else "")
        if not schemas(aten_name.partition(".")[0]):
            aten_name = None
    aten = None if aten_name is None else "aten::" + aten_name
    return CallInfo(
        TensorType(dtype, None, device), aten, (0,) if inplace else (), False, 0 if inplace else None
    )


def _rejected(status: str, cpu_rejected: bool, operands: list[Type]) -> bool:
    """Torch rejects the operation: every placeholder failed, or, for tensors known to live on
    the CPU, every CPU kernel refused (meta kernels skip some dtype checks)."""
    if status == "failed":
        return True
    return cpu_rejected and tensor_devices(operands) == "cpu"


def binary_result_type(op: str, a: Type, b: Type) -> Type:
    return resolve_binary(op, a, b).result


_UNARY_ATEN = {"-": "aten::neg", "+": "aten::positive", "~": "aten::bitwise_not"}
_UNARY_FN = {"-": operator.neg, "+": operator.pos, "~": operator.invert}


def resolve_unary(op: str, t: Type) -> CallInfo:
    if op == "not":
        return CallInfo(BOOL, None, (), False, None)
    if op not in _UNARY_FN:
        raise SignatureError(f"unknown unary operator `{op}`")
    if isinstance(t, OptionalType):
        raise SignatureError(f"bad operand type for unary {op}: {t} (the value may be None)",
                             "check `x is not None` first")
    if isinstance(t, TensorType):
        fn = _UNARY_FN[op]
        status, desc, error, cpu_rejected = dt.infer_status(dt.keyed(lambda x, k: fn(x[0]), ("unary", op)), [t], {}, {})
        if t.dtype is not None and _rejected(status, cpu_rejected, [t]):
            raise SignatureError(f"bad operand type for unary {op}: {t}: {error}")
        dtype = desc if status == "ok" and isinstance(desc, str) else None
        return CallInfo(TensorType(dtype, None, t.device), _UNARY_ATEN[op], (), False, None)
    result = dt.python_unary(op, t)
    if result is None:
        raise SignatureError(f"bad operand type for unary {op}: {t}")
    return CallInfo(result, None, (), False, None)


def unary_result_type(op: str, t: Type) -> Type:
    return resolve_unary(op, t).result

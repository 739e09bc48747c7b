"""Calls torch's Python bindings implement by hand rather than through one schema (x.to,
x.float(), x.size(), x.type(), x.new_tensor), torch.tensor / torch.as_tensor, functions we refuse
with a hint (torch.finfo), and the math module."""

from __future__ import annotations

import math
from typing import Callable

import torch

from ir.core.types import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    ListType,
    TensorType,
    TupleType,
    Type,
)
from ir.torchapi import dtypes as dt
from ir.torchapi.callinfo import CallInfo, Consts, SignatureError, arg_desc, shape_type
from ir.torchapi.schemas import Bound, Param, Return, Sig, bind


# -- methods implemented by hand in torch's Python bindings --------------------------------------
def _p(name: str, kind: str, optional: bool = False, default: object = None, has_default: bool = False,
       kwarg_only: bool = False, alias: str = "") -> Param:
    return Param(name, name, kind, optional, None, kwarg_only, has_default or optional, default, False,
                 frozenset(alias), frozenset(alias))


_SELF = _p("self", "Tensor", alias="a")
_NB = _p("non_blocking", "bool", default=False, has_default=True)
_COPY = _p("copy", "bool", default=False, has_default=True)
_MF = _p("memory_format", "memory_format", optional=True, kwarg_only=True)
_RET = (Return("Tensor", False, frozenset("a")),)
# python_variable_methods.cpp: THPVariable_to.
_TO_SIGS = (
    Sig("aten::to.dtype_layout",
        (_SELF, _p("device", "device", optional=True), _p("dtype", "dtype", optional=True), _NB, _COPY, _MF),
        _RET, frozenset()),
    Sig("aten::to.dtype", (_SELF, _p("dtype", "dtype"), _NB, _COPY, _MF), _RET, frozenset()),
    Sig("aten::to.other", (_SELF, _p("tensor", "Tensor"), _NB, _COPY, _MF), _RET, frozenset()),
)
_CAST_METHODS = {
    "float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16", "long": "int64",
    "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}
REJECTED_METHODS = {
    "tolist": "convert outside the compiled code, or keep the value a tensor",
    "numpy": "convert outside the compiled code, or keep the value a tensor",
    "__array__": "convert outside the compiled code",
    "apply_": "use tensor operations instead", "map_": "use tensor operations instead",
    "map2_": "use tensor operations instead", "storage": "not supported", "untyped_storage": "not supported",
    "backward": "call backward outside the compiled forward",
    "register_hook": "register hooks outside the compiled code",
    "new": "use x.new_empty / x.new_zeros", "share_memory_": "not supported",
}


def _bind_fixed(display: str, sigs: tuple[Sig, ...], self_type: Type, args: list[Type], kwargs: dict[str, Type],
                numbers_as_tensors: bool = False) -> Bound:
    reasons = []
    for s in sigs:
        got = bind(s, True, args, kwargs, numbers_as_tensors, self_type)
        if isinstance(got, Bound):
            return got
        reasons.append(got)
    raise SignatureError(
        f"{display}{arg_desc(args, kwargs)}: {max(reasons, key=lambda r: getattr(r, 'score', 0))}",
        "accepted: " + " | ".join(s.render(display, True) for s in sigs),
    )


def _const_at(b: Bound, pname: str, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> object:
    """Constant passed for parameter `pname` of a method call (None if absent, ... if unknown)."""
    for pi, p in enumerate(b.sig.params):
        if p.name != pname:
            continue
        where = b.slots.get(pi)
        if where is None:
            return p.default
        assert isinstance(where, int)
        j = where - 1
        key: int | str = j if j < len(args) else list(kwargs)[j - len(args)]
        return consts.get(key, ...)
    return None


def _type_at(b: Bound, pname: str, self_type: Type, args: list[Type], kwargs: dict[str, Type]) -> Type | None:
    for pi, p in enumerate(b.sig.params):
        if p.name == pname and isinstance(b.slots.get(pi), int):
            where = b.slots[pi]
            assert isinstance(where, int)
            return ([self_type] + list(args) + list(kwargs.values()))[where]
    return None


def _method_to(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
    # "to" is one of the ops where torch lets a Python number stand for a tensor: x.to(0.5)
    # converts x to float64 (the dtype of a wrapped Python float), as to(tensor) would.
    b = _bind_fixed("Tensor.to", _TO_SIGS, self_type, args, kwargs, numbers_as_tensors=True)
    copy = _const_at(b, "copy", args, kwargs, consts)
    alias = None if copy is True else 0
    if b.sig.aten == "aten::to.other":
        other = _type_at(b, "tensor", self_type, args, kwargs)
        if isinstance(other, TensorType):
            return CallInfo(TensorType(other.dtype, None, other.device), b.sig.aten, (), False, alias)
        wrapped = {INT: "int64", FLOAT: "float64", BOOL: "bool", dt.COMPLEX: "complex128"}.get(other)
        return CallInfo(TensorType(wrapped, None, None), b.sig.aten, (), False, alias)
    dtype: str | None = self_type.dtype
    if any(p.name == "dtype" and pi in b.slots for pi, p in enumerate(b.sig.params)):
        value = _const_at(b, "dtype", args, kwargs, consts)
        dtype = self_type.dtype if value is None else dt.as_dtype_name(value)
    device = self_type.device
    if any(p.name == "device" and pi in b.slots for pi, p in enumerate(b.sig.params)):
        value = _const_at(b, "device", args, kwargs, consts)
        device = self_type.device if value is None else dt.as_device_name(value)
    return CallInfo(TensorType(dtype, None, device), b.sig.aten, (), False, alias)


def _method_cast(name: str) -> Callable:
    sigs = (Sig("aten::to.dtype", (_SELF, _MF), _RET, frozenset()),)

    def handler(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        _bind_fixed(f"Tensor.{name}", sigs, self_type, args, kwargs)
        return CallInfo(TensorType(_CAST_METHODS[name], None, self_type.device), "aten::to.dtype", (), False, 0)

    return handler


def _method_device(name: str) -> Callable:
    params: tuple[Param, ...] = (_SELF, _MF)
    if name == "cuda":
        params = (_SELF, _p("device", "device", optional=True), _NB, _MF)

    def handler(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        b = _bind_fixed(f"Tensor.{name}", (Sig("aten::_to_copy", params, _RET, frozenset()),), self_type, args, kwargs)
        device: str | None = "cpu"
        if name == "cuda":
            value = _const_at(b, "device", args, kwargs, consts)
            if isinstance(value, int) and not isinstance(value, bool):
                value = f"cuda:{value}"  # x.cuda(1)
            device = "cuda" if value is None else dt.as_device_name(value)
        return CallInfo(TensorType(self_type.dtype, None, device), None, (), False, 0)

    return handler


def _method_size(name: str) -> Callable:
    def handler(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo | None:
        if args == [NONE] and not kwargs or not args and kwargs == {"dim": NONE}:
            args, kwargs = [], {}  # x.size(None): the Python binding's `int? dim=None`
        if args or kwargs:
            return None  # size(dim): the schema
        return CallInfo(shape_type(self_type) if name == "size" else ListType(INT) if self_type.shape is None
                        else TupleType((INT,) * len(self_type.shape)), None, (), False, None)

    return handler


def _method_simple(result: Type, aten: str | None = None) -> Callable:
    def handler(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        if args or kwargs:
            raise SignatureError(f"this method takes no arguments, got {arg_desc(args, kwargs)}")
        return CallInfo(result, aten, (), False, None)

    return handler


def _method_rejected(name: str) -> Callable:
    def handler(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        raise SignatureError(f"`Tensor.{name}` is not supported in compiled code", REJECTED_METHODS[name])

    return handler


def _method_type(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
    if not args and not kwargs:
        return CallInfo(STR, None, (), False, None)
    sigs = (Sig("aten::to.dtype", (_SELF, _p("dtype", "dtype"), _NB), _RET, frozenset()),)
    b = _bind_fixed("Tensor.type", sigs, self_type, args, kwargs)
    value = _const_at(b, "dtype", args, kwargs, consts)
    return CallInfo(TensorType(dt.as_dtype_name(value), None, self_type.device), "aten::to.dtype", (), False, 0)


def _method_new_tensor(self_type: TensorType, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
    sigs = (Sig("aten::new_tensor", (_SELF, _p("data", "any"), _p("dtype", "dtype", optional=True, kwarg_only=True),
                                     _p("device", "device", optional=True, kwarg_only=True),
                                     _p("requires_grad", "bool", default=False, has_default=True, kwarg_only=True)),
                _RET, frozenset()),)
    b = _bind_fixed("Tensor.new_tensor", sigs, self_type, args, kwargs)
    dtype_v = _const_at(b, "dtype", args, kwargs, consts)
    device_v = _const_at(b, "device", args, kwargs, consts)
    dtype = self_type.dtype if dtype_v is None else dt.as_dtype_name(dtype_v) if dtype_v is not ... else None
    device = self_type.device if device_v is None else dt.as_device_name(device_v) if device_v is not ... else None
    return CallInfo(TensorType(dtype, None, device), None, (), False, None)


SPECIAL_METHODS: dict[str, Callable[..., CallInfo | None]] = {
    "to": _method_to,
    "type": _method_type,
    "new_tensor": _method_new_tensor,
    "size": _method_size("size"),
    "stride": _method_size("stride"),
    "ndimension": _method_simple(INT, "aten::dim"),
    "nelement": _method_simple(INT, "aten::numel"),
    "element_size": _method_simple(INT),
    "get_device": _method_simple(INT, "aten::get_device"),
    "data_ptr": _method_simple(INT),
    "cpu": _method_device("cpu"),
    "cuda": _method_device("cuda"),
    **{name: _method_cast(name) for name in _CAST_METHODS},
    **{name: _method_rejected(name) for name in REJECTED_METHODS},
}


# -- special functions --------------------------------------------------------------------------
def _data_dtype(t: Type) -> tuple[str | None, bool]:
    """dtype torch.tensor infers from data of type t, and whether it is known."""
    if t == BOOL:
        return "bool", True
    if t == INT:
        return "int64", True
    if t == FLOAT:
        return dt.DEFAULT_FLOAT, True
    if t == dt.COMPLEX:
        return {"float32": "complex64", "float64": "complex128"}.get(dt.DEFAULT_FLOAT), True
    if isinstance(t, TensorType):
        return t.dtype, t.dtype is not None
    elems: list[Type] = []
    if isinstance(t, TupleType):
        elems = list(t.elems)
    elif isinstance(t, ListType):
        elems = [t.elem]
    else:
        return None, False
    found = [_data_dtype(e) for e in elems]
    if not found:
        return dt.DEFAULT_FLOAT, True  # torch.tensor([]) is float
    if not all(ok for _, ok in found) or any(isinstance(e, TensorType) for e in elems):
        return None, False
    return dt.promote_dtypes(*[d for d, _ in found if d is not None]), True


def _factory_tensor(name: str) -> Callable:
    params = (_p("data", "any"), _p("dtype", "dtype", optional=True, kwarg_only=True),
              _p("device", "device", optional=True, kwarg_only=True))
    if name == "tensor":
        params += (_p("requires_grad", "bool", default=False, has_default=True, kwarg_only=True),
                   _p("pin_memory", "bool", default=False, has_default=True, kwarg_only=True))
    sig = Sig(f"torch.{name}", params, (Return("Tensor", False, frozenset()),), frozenset())

    def handler(args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        # as_tensor's dtype/device may be positional.
        s = sig if name == "tensor" else Sig(sig.aten, tuple(
            Param(p.name, p.schema_name, p.kind, p.optional, p.size, False, p.has_default, p.default,
                  False, p.alias, p.alias_after) for p in params), sig.returns, sig.tags)
        b = bind(s, False, args, kwargs, False)
        if not isinstance(b, Bound):
            raise SignatureError(f"torch.{name}{arg_desc(args, kwargs)}: {b}",
                                 "accepted: " + s.render(f"torch.{name}", False))
        ops = list(args) + list(kwargs.values())

        def value(pname: str) -> object:
            pi = [p.name for p in s.params].index(pname)
            where = b.slots.get(pi)
            if where is None:
                return None
            assert isinstance(where, int)
            key: int | str = where if where < len(args) else list(kwargs)[where - len(args)]
            return consts.get(key, ...)

        data = ops[b.slots[0]] if isinstance(b.slots.get(0), int) else ANY  # type: ignore[index]
        dtype_v, device_v = value("dtype"), value("device")
        if dtype_v is None:
            dtype, _ = _data_dtype(data)
        else:
            dtype = None if dtype_v is ... else dt.as_dtype_name(dtype_v)
        if device_v is None:
            device = data.device if isinstance(data, TensorType) else None
        else:
            device = None if device_v is ... else dt.as_device_name(device_v)
        alias = 0 if name == "as_tensor" and isinstance(data, TensorType) else None
        return CallInfo(TensorType(dtype, None, device), None, (), False, alias)

    return handler


def _rejected(hint: str) -> Callable:
    def handler(args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
        raise SignatureError("this function is not supported in compiled code", hint)

    return handler


def _is_tensor_fn(args: list[Type], kwargs: dict[str, Type], consts: Consts) -> CallInfo:
    if len(args) + len(kwargs) != 1:
        raise SignatureError("torch.is_tensor takes one argument")
    return CallInfo(BOOL, None, (), False, None)


REJECTED = {"torch.finfo", "torch.iinfo", "torch.manual_seed", "torch.seed", "torch.set_default_dtype"}
SPECIAL_FUNCTIONS: dict[str, Callable[[list[Type], dict[str, Type], Consts], CallInfo]] = {
    "torch.tensor": _factory_tensor("tensor"),
    "torch.as_tensor": _factory_tensor("as_tensor"),
    "torch.is_tensor": _is_tensor_fn,
    "torch.finfo": _rejected("torch.finfo is not supported in compiled code: use a literal "
                             "(e.g. float('-inf'), 65504.0) or compute it outside and store it as an attribute"),
    "torch.iinfo": _rejected("torch.iinfo is not supported in compiled code: use a literal, "
                             "or compute it outside and store it as an attribute"),
    "torch.manual_seed": _rejected("seed the generator outside the compiled code"),
    "torch.seed": _rejected("seed the generator outside the compiled code"),
    "torch.set_default_dtype": _rejected("set the default dtype outside the compiled code"),
}


# -- math ---------------------------------------------------------------------------------------
# name -> (min args, max args (None: any), result type)
MATH_FUNCTIONS: dict[str, tuple[int, int | None, Type]] = {
    **{f"math.{n}": (1, 1, FLOAT) for n in (
        "sqrt exp exp2 expm1 log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh "
        "atanh erf erfc gamma lgamma fabs degrees radians cbrt").split()},
    "math.log": (1, 2, FLOAT), "math.atan2": (2, 2, FLOAT), "math.pow": (2, 2, FLOAT),
    "math.copysign": (2, 2, FLOAT), "math.fmod": (2, 2, FLOAT), "math.remainder": (2, 2, FLOAT),
    "math.hypot": (0, None, FLOAT), "math.ldexp": (2, 2, FLOAT),
    **{f"math.{n}": (1, 1, INT) for n in ("floor", "ceil", "trunc", "isqrt", "factorial")},
    "math.comb": (2, 2, INT), "math.perm": (1, 2, INT), "math.gcd": (0, None, INT), "math.lcm": (0, None, INT),
    **{f"math.{n}": (1, 1, BOOL) for n in ("isnan", "isinf", "isfinite")},
    "math.isclose": (2, 2, BOOL),
}
_MATH_KWARGS = {"math.isclose": {"rel_tol", "abs_tol"}}


def resolve_math(qualname: str, args: list[Type], kwargs: dict[str, Type]) -> CallInfo:
    spec = MATH_FUNCTIONS.get(qualname)
    if spec is None:
        if hasattr(math, qualname[len("math."):]) and not callable(getattr(math, qualname[len("math."):])):
            raise SignatureError(f"`{qualname}` is a constant, not a function")
        raise SignatureError(f"`{qualname}` is not a math function the compiler knows",
                             "supported: " + ", ".join(sorted(n[5:] for n in MATH_FUNCTIONS)))
    lo, hi, result = spec
    bad_kw = set(kwargs) - _MATH_KWARGS.get(qualname, set())
    if bad_kw:
        raise SignatureError(f"{qualname}() got an unexpected keyword argument '{sorted(bad_kw)[0]}'")
    if len(args) < lo or (hi is not None and len(args) > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        raise SignatureError(f"{qualname}() takes {want} arguments ({len(args)} given)")
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, TensorType):
            raise SignatureError(f"{qualname}() takes Python numbers, not a tensor",
                                 f"use torch.{qualname[5:]} on tensors" if hasattr(torch, qualname[5:]) else
                                 "use the torch function for tensors")
        if a not in (INT, FLOAT, BOOL, ANY):
            raise SignatureError(f"{qualname}() takes numbers, not {a}")
    return CallInfo(result, None, (), False, None)

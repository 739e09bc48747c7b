"""Calls that are not one aten schema: torch's Python-level wrappers (most of torch.nn.functional,
torch.functional, a few Tensor methods), methods the Python bindings implement by hand (x.to,
x.float(), x.size()), torch.tensor, and the math module.

Python-level wrappers are bound against `inspect.signature` of the real function (so argument
counts and keyword names are exactly torch's), their argument kinds are checked loosely against
their annotations (Tensor parameters must get tensors), their result comes from the return
annotation unless a table says otherwise, and the dtype oracle runs the real function.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ir import dtype_rules as dt
from ir.torch_schemas import Bound, Param, Return, Sig, bind
from ir.torch_signatures import (
    CallInfo,
    SignatureError,
    arg_desc,
    call_function,
    shape_type,
    tensor_devices,
    tensor_operands,
    type_from_desc,
)
from ir.types import (
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
)

Consts = dict


# -- Python-level wrappers ----------------------------------------------------------------------
@dataclass(frozen=True)
class PySpec:
    fn: Callable
    # aten overload: a name, or a function of the bound call (see _Call) returning one or None.
    aten: str | Callable[["_Call"], str | None] | None = None
    inplace_aten: str | None = None  # aten overload when inplace=True
    # Result: None (from the return annotation), a kind ("Tensor", "Tensor[]"), or a function of
    # the bound call returning a tuple of kinds / a kind.
    result: str | Callable[["_Call"], Any] | None = None
    random: bool | str = False  # True, or the parameter ("training") whose constant False makes it not random
    mutates: Callable[["_Call"], list[int]] | None = None
    alias: str | None = None  # parameter whose operand the result may alias
    signature_of: Callable | None = None  # a function with the real signature (boolean_dispatch)
    may_alias_inputs: bool = False  # may return an input itself or a view of it (dropout in eval)


@dataclass
class _Call:
    """A call bound to a Python signature."""

    params: dict[str, int | tuple[int, ...]]  # parameter name -> operand index (tuple for *args)
    operand_types: list[Type]
    consts: dict[int, object]  # operand index -> constant value
    defaults: dict[str, object] = field(default_factory=dict)

    def value(self, name: str) -> object:
        """Constant value of a parameter, its default when not passed, ... when not constant."""
        where = self.params.get(name)
        if where is None:
            return self.defaults.get(name)
        if isinstance(where, tuple):
            return ...
        return self.consts.get(where, ...)

    def type(self, name: str) -> Type | None:
        where = self.params.get(name)
        if where is None or isinstance(where, tuple):
            return None
        return self.operand_types[where]

    def operand(self, name: str) -> int | None:
        where = self.params.get(name)
        return where if isinstance(where, int) else None


def _dropout_spec(fn: Callable, aten: str | None, inplace_aten: str | None) -> PySpec:
    return PySpec(fn, aten=aten, inplace_aten=inplace_aten, random="training")


def _running_stats(c: _Call, flag: str) -> list[int]:
    if c.value(flag) is False:
        return []
    out = []
    for name in ("running_mean", "running_var"):
        i = c.operand(name)
        if i is not None and c.operand_types[i] not in (NONE,):
            out.append(i)
    return out


def _embedding_mutates(c: _Call) -> list[int]:
    i = c.operand("weight")
    return [i] if i is not None and c.value("max_norm") is not None else []


def _bool_dispatch(fn: Callable) -> dict | None:
    from torch._jit_internal import boolean_dispatched

    return boolean_dispatched.get(fn)


def _pool_result(fn: Callable) -> Callable[[_Call], Any]:
    info = _bool_dispatch(fn)
    assert info is not None

    def result(c: _Call) -> Any:
        v = c.value(info["arg_name"])
        if v is ...:
            raise SignatureError(f"{info['arg_name']}= must be a constant True or False")
        return ("Tensor", "Tensor") if v else "Tensor"

    return result


def _pool_aten(name: str, fn: Callable) -> Callable[[_Call], str | None]:
    info = _bool_dispatch(fn)
    assert info is not None
    return lambda c: f"aten::{name}_with_indices" if c.value(info["arg_name"]) is True else f"aten::{name}"


def _unique_result(*flags: str) -> Callable[[_Call], Any]:
    def result(c: _Call) -> Any:
        n = 1
        for f in flags:
            v = c.value(f)
            if v is ...:
                raise SignatureError(f"{f}= must be a constant True or False")
            n += bool(v)
        return "Tensor" if n == 1 else ("Tensor",) * n

    return result


def _varargs_tensors(c: _Call) -> Any:
    where = next(iter(c.params.values()), ())
    if isinstance(where, tuple):
        if len(where) == 1 and not isinstance(c.operand_types[where[0]], TensorType):
            return "Tensor[]"  # meshgrid([a, b]): one list of unknown length
        return ("Tensor",) * len(where)
    return "Tensor[]"


def _atleast(c: _Call) -> Any:
    where = c.params.get("tensors", ())
    if isinstance(where, tuple) and len(where) == 1 and isinstance(c.operand_types[where[0]], TensorType):
        return "Tensor"
    return _varargs_tensors(c)


def _split_aten(c: _Call) -> str | None:
    t = c.type("split_size_or_sections") or c.type("split_size")
    if t == INT:
        return "aten::split.Tensor"
    if isinstance(t, (ListType, TupleType)):
        return "aten::split_with_sizes"
    return None


_F_ATEN = {
    "relu": ("relu", "relu_"), "relu6": ("relu6", None), "elu": ("elu", "elu_"), "selu": ("selu", "selu_"),
    "celu": ("celu", "celu_"), "leaky_relu": ("leaky_relu", "leaky_relu_"),
    "hardtanh": ("hardtanh", "hardtanh_"), "silu": ("silu", "silu_"), "mish": ("mish", "mish_"),
    "hardswish": ("hardswish", "hardswish_"), "hardsigmoid": ("hardsigmoid", "hardsigmoid_"),
    "threshold": ("threshold", "threshold_"), "glu": ("glu", None), "tanh": ("tanh", None),
    "sigmoid": ("sigmoid", None), "softmax": ("softmax.int", None), "log_softmax": ("log_softmax.int", None),
    "layer_norm": ("layer_norm", None), "group_norm": ("group_norm", None), "rms_norm": ("rms_norm", None),
    "batch_norm": ("batch_norm", None), "instance_norm": ("instance_norm", None),
    "embedding": ("embedding", None), "pad": ("pad", None),
    "adaptive_avg_pool2d": ("adaptive_avg_pool2d", None), "adaptive_avg_pool3d": ("adaptive_avg_pool3d", None),
    "dropout": ("dropout", "dropout_"), "alpha_dropout": ("alpha_dropout", "alpha_dropout_"),
    "feature_alpha_dropout": ("feature_alpha_dropout", "feature_alpha_dropout_"),
    "dropout1d": ("feature_dropout", "feature_dropout_"), "dropout2d": ("feature_dropout", "feature_dropout_"),
    "dropout3d": ("feature_dropout", "feature_dropout_"), "rrelu": ("rrelu", "rrelu_"),
    "pixel_shuffle": ("pixel_shuffle", None), "unfold": ("im2col", None), "fold": ("col2im", None),
    "grid_sample": ("grid_sampler", None), "affine_grid": ("affine_grid_generator", None),
}
_F_RANDOM = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu"}
# Not functions a model calls on tensors.
_F_EXCLUDED = {"Optional", "boolean_dispatch", "handle_torch_function", "has_torch_function",
               "has_torch_function_unary", "has_torch_function_variadic", "assert_int_or_pair"}


@functools.lru_cache(maxsize=None)
def _f_spec(name: str) -> PySpec | None:
    fn = getattr(F, name, None)
    if fn is None or name in _F_EXCLUDED or not inspect.isfunction(fn):
        return None
    aten, inplace_aten = _F_ATEN.get(name, (None, None))
    aten = aten and "aten::" + aten
    inplace_aten = inplace_aten and "aten::" + inplace_aten
    if _bool_dispatch(fn) is not None:
        info = _bool_dispatch(fn)
        base = info["if_false"].__name__.lstrip("_")
        return PySpec(fn, aten=_pool_aten(base, fn), result=_pool_result(fn), signature_of=info["if_false"])
    if name in _F_RANDOM:
        # Not training, the dropouts return their input itself.
        return PySpec(fn, aten=aten, inplace_aten=inplace_aten, random="training",
                      may_alias_inputs=name != "rrelu")
    if name in ("gumbel_softmax",) or name.startswith("fractional_max_pool"):
        return PySpec(fn, aten=aten, random=True)
    if name == "multi_head_attention_forward":
        return PySpec(fn, random="training")
    if name == "batch_norm":
        return PySpec(fn, aten=aten, mutates=lambda c: _running_stats(c, "training"))
    if name == "instance_norm":
        return PySpec(fn, aten=aten, mutates=lambda c: _running_stats(c, "use_input_stats"))
    if name in ("embedding", "embedding_bag"):
        return PySpec(fn, aten=aten, mutates=_embedding_mutates)
    return PySpec(fn, aten=aten, inplace_aten=inplace_aten)


_TORCH_PY: dict[str, PySpec] = {
    "split": PySpec(torch.split, aten=_split_aten, result="Tensor[]", alias="tensor"),
    "einsum": PySpec(torch.einsum, aten="aten::einsum", result="Tensor", may_alias_inputs=True),
    "norm": PySpec(torch.norm, result="Tensor"),
    "meshgrid": PySpec(torch.meshgrid, aten="aten::meshgrid", result=_varargs_tensors, may_alias_inputs=True),
    "broadcast_tensors": PySpec(torch.broadcast_tensors, aten="aten::broadcast_tensors", result=_varargs_tensors,
                                may_alias_inputs=True),
    "atleast_1d": PySpec(torch.atleast_1d, result=_atleast, may_alias_inputs=True),
    "atleast_2d": PySpec(torch.atleast_2d, result=_atleast, may_alias_inputs=True),
    "atleast_3d": PySpec(torch.atleast_3d, result=_atleast, may_alias_inputs=True),
    "tensordot": PySpec(torch.tensordot, result="Tensor"),
    "cdist": PySpec(torch.cdist, result="Tensor"),
    "block_diag": PySpec(torch.block_diag, aten="aten::block_diag", result="Tensor"),
    "cartesian_prod": PySpec(torch.cartesian_prod, aten="aten::cartesian_prod", result="Tensor",
                             may_alias_inputs=True),
    "chain_matmul": PySpec(torch.chain_matmul, aten="aten::chain_matmul", result="Tensor"),
    "unique": PySpec(torch.unique, result=_unique_result("return_inverse", "return_counts")),
    "unique_consecutive": PySpec(torch.unique_consecutive, result=_unique_result("return_inverse", "return_counts")),
    "stft": PySpec(torch.stft, result="Tensor"),
    "istft": PySpec(torch.istft, result="Tensor"),
}
_METHOD_PY: dict[str, PySpec] = {
    "norm": PySpec(torch.Tensor.norm, result="Tensor"),
    "unique": PySpec(torch.Tensor.unique, result=_unique_result("return_inverse", "return_counts")),
    "unique_consecutive": PySpec(torch.Tensor.unique_consecutive, result=_unique_result("return_inverse", "return_counts")),
    "stft": PySpec(torch.Tensor.stft, result="Tensor"),
    "istft": PySpec(torch.Tensor.istft, result="Tensor"),
}


def python_spec(qualname: str, fn: Callable) -> PySpec | None:
    if qualname.startswith("torch.nn.functional."):
        return _f_spec(qualname[len("torch.nn.functional."):])
    if qualname.startswith("torch.") and qualname.count(".") == 1:
        return _TORCH_PY.get(qualname[len("torch."):])
    return None


def python_method_spec(name: str) -> PySpec | None:
    return _METHOD_PY.get(name)


@functools.lru_cache(maxsize=None)
def _signature(fn: Callable) -> tuple[inspect.Signature, dict[str, Any]]:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - annotations are advisory
        hints = {}
    return sig, hints


def _is_tensor_annotation(ann: Any) -> tuple[bool, bool]:
    """(annotation is Tensor or Optional[Tensor], it allows None)."""
    if ann is torch.Tensor:
        return True, False
    args = typing.get_args(ann)
    if typing.get_origin(ann) in (typing.Union, types.UnionType) and torch.Tensor in args:
        return len([a for a in args if a is not type(None)]) == 1, type(None) in args
    return False, False


def _kinds_from_annotation(ann: Any) -> Any:
    if ann is torch.Tensor:
        return "Tensor"
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return "Tensor[]" if args[0] is torch.Tensor else "any"
        return tuple(_kinds_from_annotation(a) for a in args)
    if origin is list and args and args[0] is torch.Tensor:
        return "Tensor[]"
    return {int: "int", float: "float", bool: "bool", str: "str"}.get(ann, "any")


def resolve_python(
    spec: PySpec,
    display: str,
    self_type: Type | None,
    args: list[Type],
    kwargs: dict[str, Type],
    consts: Consts,
) -> CallInfo:
    method = self_type is not None
    sig, hints = _signature(spec.signature_of or spec.fn)
    operands = ([self_type] if method else []) + list(args) + list(kwargs.values())
    offset = 1 if method else 0
    pos = list(range(offset, offset + len(args)))
    kw = {k: offset + len(args) + n for n, k in enumerate(kwargs)}
    shown = f"{display}{_show_signature(sig, method)}"
    try:
        ba = sig.bind(*([0] if method else []), *pos, **kw)
    except TypeError as e:
        raise SignatureError(f"{display}{arg_desc(args, kwargs)}: {e}", f"accepted: {shown}") from None
    params: dict[str, int | tuple[int, ...]] = {}
    for name, v in ba.arguments.items():
        p = sig.parameters[name]
        if p.kind == p.VAR_KEYWORD:
            for k, i in v.items():
                params[k] = i
        elif p.kind == p.VAR_POSITIONAL:
            params[name] = tuple(v)
        else:
            params[name] = v
    # Loose kind checks from annotations: tensors where tensors are expected, and nowhere else
    # except number parameters (zero-dim tensors convert).
    for name, where in params.items():
        ann = hints.get(name)
        if ann is None or isinstance(where, tuple):
            continue
        t = operands[where]
        is_tensor, allows_none = _is_tensor_annotation(ann)
        if is_tensor:
            ok = isinstance(t, TensorType) or t == ANY or (allows_none and (t == NONE or (
                isinstance(t, OptionalType) and isinstance(t.elem, TensorType))))
            if not ok:
                raise SignatureError(f"{display}: argument '{name}' must be a Tensor, not {t}", f"accepted: {shown}")
        elif ann is str and t not in (STR, ANY):
            raise SignatureError(f"{display}: argument '{name}' must be str, not {t}", f"accepted: {shown}")
        elif ann in (int, float, bool) and t in (STR, NONE):
            raise SignatureError(f"{display}: argument '{name}' must be {ann.__name__}, not {t}", f"accepted: {shown}")
    const_ops: dict[int, object] = {}
    for k, v in consts.items():
        if isinstance(k, int):
            const_ops[offset + k] = v
        elif k in kw:
            const_ops[kw[k]] = v
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
    call = _Call(params, operands, const_ops, defaults)
    # Mutation, aliasing, randomness.
    mutates: list[int] = []
    alias_of: int | None = None
    aten = spec.aten(call) if callable(spec.aten) else spec.aten
    first = next(iter(sig.parameters))
    if "inplace" in sig.parameters:
        v = call.value("inplace")
        if v is ...:
            raise SignatureError(f"{display}: inplace= must be a constant True or False",
                                 "write two calls under an if, or pass a literal")
        if v:
            i = call.operand(first)
            if i is not None:
                mutates.append(i)
                alias_of = i
            aten = spec.inplace_aten
    if spec.mutates is not None:
        mutates.extend(spec.mutates(call))
    if spec.alias is not None:
        alias_of = call.operand(spec.alias)
    aliases: tuple[int, ...] = ()
    if spec.may_alias_inputs:
        aliases = tensor_operands(operands)
        if alias_of is None and len(aliases) == 1:
            alias_of = aliases[0]
    if spec.random is True:
        random = True
    elif isinstance(spec.random, str):
        random = call.value(spec.random) is not False
    else:
        random = False
    # Result type.
    kinds = spec.result(call) if callable(spec.result) else spec.result
    if kinds is None:
        kinds = _kinds_from_annotation(hints.get("return", torch.Tensor)) if "return" in hints else "Tensor"
    device = tensor_devices(operands)
    desc = None
    if _wants_dtype(kinds):
        fn = spec.fn
        invoke = call_function(fn)
        full_consts: dict[int | str, object] = {}
        for i, v in const_ops.items():
            if i < offset + len(args):
                full_consts[i] = v
            else:
                full_consts[list(kwargs)[i - offset - len(args)]] = v
        desc = dt.infer(invoke, operands[: offset + len(args)], kwargs, full_consts, random=random)
    result = _build(kinds, desc, device)
    return CallInfo(result, aten, tuple(mutates), random, alias_of, aliases)


def _show_signature(sig: inspect.Signature, method: bool) -> str:
    params = list(sig.parameters.values())
    if method and params:
        params = params[1:]
    text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    return text.replace("torch.Tensor", "Tensor")


def _wants_dtype(kinds: Any) -> bool:
    if isinstance(kinds, tuple):
        return any(_wants_dtype(k) for k in kinds)
    return kinds in ("Tensor", "Tensor[]")


def _build(kinds: Any, desc: Any, device: str | None) -> Type:
    if isinstance(kinds, tuple):
        descs = desc if isinstance(desc, tuple) and len(desc) == len(kinds) else (None,) * len(kinds)
        return TupleType(tuple(_build(k, d, device) for k, d in zip(kinds, descs)))
    if kinds == "Tensor[]" and isinstance(desc, str):
        desc = None
    return type_from_desc(kinds, desc, device)


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
    Sig("aten::to.dtype_layout", (_SELF, _p("device", "device", optional=True), _p("dtype", "dtype", optional=True), _NB, _COPY, _MF), _RET, frozenset()),
    Sig("aten::to.dtype", (_SELF, _p("dtype", "dtype"), _NB, _COPY, _MF), _RET, frozenset()),
    Sig("aten::to.other", (_SELF, _p("tensor", "Tensor"), _NB, _COPY, _MF), _RET, frozenset()),
)
_CAST_METHODS = {
    "float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16", "long": "int64",
    "int": "int32", "short": "int16", "char": "int8", "byte": "uint8", "bool": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}
_REJECTED_METHODS = {
    "tolist": "convert outside the compiled code, or keep the value a tensor",
    "numpy": "convert outside the compiled code, or keep the value a tensor",
    "__array__": "convert outside the compiled code",
    "apply_": "use tensor operations instead", "map_": "use tensor operations instead",
    "map2_": "use tensor operations instead", "storage": "not supported", "untyped_storage": "not supported",
    "backward": "call backward outside the compiled forward", "register_hook": "register hooks outside the compiled code",
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
        wrapped = {INT: "int64", FLOAT: "float64", BOOL: "bool", dt.COMPLEX: "complex128"}.get(other)  # type: ignore[arg-type]
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
            device = "cuda" if value is None else dt.as_device_name(value if not isinstance(value, int) or isinstance(value, bool) else f"cuda:{value}")
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
        raise SignatureError(f"`Tensor.{name}` is not supported in compiled code", _REJECTED_METHODS[name])

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
    **{name: _method_rejected(name) for name in _REJECTED_METHODS},
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


__all__ = ["SPECIAL_FUNCTIONS", "SPECIAL_METHODS", "MATH_FUNCTIONS", "REJECTED", "resolve_math",
           "resolve_python", "python_spec", "python_method_spec"]

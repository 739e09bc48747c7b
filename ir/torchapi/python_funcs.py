"""torch's Python-level wrappers: most of torch.nn.functional, torch.functional (torch.split,
torch.einsum, torch.norm...) and a few Tensor methods written in Python (x.norm, x.unique).

They are bound against `inspect.signature` of the real function (so argument counts and keyword
names are exactly torch's), their argument kinds are checked loosely against their annotations
(Tensor parameters must get tensors), their result comes from the return annotation unless the
table below says otherwise, and the dtype oracle runs the real function. The table also says what
the annotations cannot: in-place variants (inplace=True), randomness (dropout while training),
running statistics written by batch_norm, the aten overload when there is exactly one.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ir.core.types import (
    ANY,
    INT,
    NONE,
    STR,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.torchapi import dtypes as dt
from ir.torchapi.callinfo import (
    CallInfo,
    Consts,
    SignatureError,
    arg_desc,
    call_function,
    tensor_devices,
    tensor_operands,
    type_from_desc,
)
from ir.torchapi.schemas import schemas


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


def _pool_aten(fn: Callable) -> Callable[[_Call], str | None]:
    """max_pool2d -> aten::max_pool2d, or aten::max_pool2d_with_indices with return_indices=True;
    None where no aten op returns exactly that (aten::adaptive_max_pool2d always returns two)."""
    info = _bool_dispatch(fn)
    assert info is not None
    base = info["if_false"].__name__.lstrip("_")

    def aten(c: _Call) -> str | None:
        indices = c.value(info["arg_name"]) is True
        name = f"{base}_with_indices" if indices else base
        sigs = schemas(name)
        if sigs and all(len(s.returns) == (2 if indices else 1) for s in sigs):
            return "aten::" + name
        return None

    return aten


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
        return PySpec(fn, aten=_pool_aten(fn), result=_pool_result(fn), signature_of=info["if_false"])
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
    "unique_consecutive": PySpec(torch.Tensor.unique_consecutive,
                                 result=_unique_result("return_inverse", "return_counts")),
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

"""What the front end needs to know about a call into torch: does it bind, what does it return,
what does it write, does it draw random numbers, which aten overload is it.

Torch's own operator schemas are the vocabulary (ir/torchapi/schemas.py reads and binds them the way
torch's Python argument parser does); torch's Python-level wrappers (most of torch.nn.functional,
torch.functional, a few Tensor methods) are bound against their Python signatures
(ir/torchapi/python_funcs.py); result dtypes come from torch itself (ir/torchapi/dtypes.py).

Public API (used by transpiler/):

    resolve_function(qualname, args, kwargs, const_values=None) -> CallInfo
    resolve_method(name, self_type, args, kwargs, const_values=None) -> CallInfo
    resolve_attribute(name, self_type) -> Type            (resolve_attribute_info: CallInfo)
    binary_result_type(op, a, b) -> Type                  (resolve_binary: CallInfo)
    unary_result_type(op, t) -> Type                      (resolve_unary: CallInfo)
    is_known_function(qualname) -> bool
    SignatureError (str: one-line message; .hint: one-line suggestion)

Operand numbering for CallInfo.mutates / alias_of: functions: positional args 0..n-1, then
kwargs in the order given; methods: 0 is self, positional args 1..n, then kwargs. For binary
operators: 0 left, 1 right. `alias_of` means "may alias" (reshape, contiguous and to may return
their input itself).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    INT,
    NONE,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    unify,
)
from ir.torchapi import dtypes as dt
from ir.torchapi.callinfo import (
    CallInfo,
    Consts,
    SignatureError,
    arg_desc,
    call_function,
    call_method,
    has_tensor,
    shape_type,
    tensor_devices,
    tensor_operands,
    type_from_desc,
)
from ir.torchapi.operators import (
    binary_result_type,
    resolve_binary,
    resolve_unary,
    unary_result_type,
)
from ir.torchapi.schemas import NUMBERS_AS_TENSORS, Bound, bind, operand_key, schemas

# Ops whose schema declares a fresh result but which return their input itself (or a view of it)
# in some cases: dropout when not training, type_as to the same type, einsum("ij->ji"),
# atleast_2d of a 2-d tensor... Found by running them (tests/test_torch_signatures.py).
UNANNOTATED_ALIASES = frozenset({
    "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "type_as",
    "atleast_1d", "atleast_2d", "atleast_3d", "einsum", "sum_to_size", "meshgrid",
    "broadcast_tensors", "cartesian_prod", "to_dense",
})


# -- schema-bound calls -------------------------------------------------------------------------
def resolve_schema_call(
    name: str,
    display: str,
    method: bool,
    self_type: Type | None,
    args: list[Type],
    kwargs: dict[str, Type],
    consts: Consts,
    invoke: Callable[[list[Any], dict[str, Any]], Any],
    numpy_names: bool = True,
) -> CallInfo:
    """Bind a call of aten::<name> (function form, or method when `method`) and describe it."""
    sigs = schemas(name)
    candidates: list[Bound] = []
    reasons: list[str] = []
    for sig in sigs:
        got = bind(sig, method, args, kwargs, name in NUMBERS_AS_TENSORS, self_type, numpy_names)
        if isinstance(got, Bound):
            candidates.append(got)
        else:
            reasons.append(got)
    if not candidates:
        shown = [s.render(display, method) for s in sigs
                 if not method or any(p.schema_name == "self" for p in s.params)]
        why = max(reasons, key=lambda r: getattr(r, "score", 0)) if reasons else "no overload matches"
        raise SignatureError(
            f"{display}{arg_desc(args, kwargs)}: {why}",
            "accepted: " + " | ".join(shown) if shown else None,
        )
    best = min(c.cost for c in candidates)
    chosen = [c for c in candidates if c.cost == best]
    infos = [_describe_bound(c, method, self_type, args, kwargs, consts, invoke) for c in chosen]
    dynamic = _mentions_any(list(args) + list(kwargs.values()))
    if not dynamic and all(_same_effect(i, infos[0]) for i in infos[1:]):
        # One call, several spellings (std.dim / std.correction, all / all.dims, conv1d /
        # conv1d.padding with the padding left out): the first registered, as torch's parser.
        return infos[0]
    # A dynamic (Any) argument fits several overloads (x.view(n): sizes or a dtype?): join them.
    result: Type | None = infos[0].result
    for other in infos[1:]:
        result = unify(result, other.result) if result is not None else None
    if result is None:
        result = ANY
    return CallInfo(
        result,
        infos[0].aten if all(i.aten == infos[0].aten for i in infos) else None,
        tuple(sorted({m for i in infos for m in i.mutates})),
        any(i.random for i in infos),
        infos[0].alias_of if all(i.alias_of == infos[0].alias_of for i in infos) else None,
        tuple(sorted({a for i in infos for a in i.aliases})),
        infos[0].result_fields if all(i.result_fields == infos[0].result_fields for i in infos) else (),
    )


def _mentions_any(types: list[Type]) -> bool:
    for t in types:
        if t == ANY:
            return True
        if isinstance(t, TupleType) and _mentions_any(list(t.elems)):
            return True
        if isinstance(t, (ListType, OptionalType)) and _mentions_any([t.elem]):
            return True
    return False


def _same_effect(a: CallInfo, b: CallInfo) -> bool:
    def effect(i: CallInfo) -> tuple:
        return (i.result, i.mutates, i.random, i.alias_of, i.aliases)

    return effect(a) == effect(b)


def _param_value(b: Bound, pi: int, method: bool, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> object:
    """The constant value bound to parameter pi (its default when not passed); ... if unknown."""
    p = b.sig.params[pi]
    where = b.slots.get(pi)
    if where is None:
        return p.default
    if isinstance(where, tuple):
        return ...
    key = operand_key(where, method, args, kwargs)
    if key is None:
        return ...
    return consts.get(key, ...)


def _describe_bound(
    b: Bound,
    method: bool,
    self_type: Type | None,
    args: list[Type],
    kwargs: dict[str, Type],
    consts: Consts,
    invoke: Callable[[list[Any], dict[str, Any]], Any],
) -> CallInfo:
    sig = b.sig
    operands = ([self_type] if method else []) + list(args) + list(kwargs.values())
    # Mutation and aliasing from the schema's alias annotations.
    mutates = []
    for pi, p in enumerate(sig.params):
        where = b.slots.get(pi)
        if p.write and isinstance(where, int):
            mutates.append(where)
    alias_of = None
    for r in sig.returns:
        if not r.alias:
            continue
        for pi, p in enumerate(sig.params):
            where = b.slots.get(pi)
            if isinstance(where, int) and (p.alias & r.alias):
                alias_of = where
                break
        break
    aliases: tuple[int, ...] = ()
    if sig.aten.removeprefix("aten::").partition(".")[0] in UNANNOTATED_ALIASES:
        aliases = tensor_operands(operands)
        if alias_of is None and len(aliases) == 1:
            alias_of = aliases[0]
    random = _is_random(b, method, args, kwargs, consts)
    # Result device.
    device = None
    dev_idx = next((i for i, p in enumerate(sig.params) if p.kind == "device"), None)
    if dev_idx is not None and dev_idx in b.slots:
        value = _param_value(b, dev_idx, method, args, kwargs, consts)
        device = dt.as_device_name(value) if value is not ... else None
        if value is None and has_tensor(operands):
            device = tensor_devices(operands)
    elif has_tensor(operands):
        device = tensor_devices(operands)
    # Result dtypes: run the call on placeholders.
    desc = None
    if any(r.kind in ("Tensor", "Tensor[]", "Scalar") for r in sig.returns):
        desc = _infer(invoke, method, self_type, args, kwargs, consts, random, b.int_hints)
    if not sig.returns:
        result: Type = NONE
    elif len(sig.returns) == 1:
        r = sig.returns[0]
        result = type_from_desc(r.kind, desc, device, r.optional)
    else:
        descs = desc if isinstance(desc, tuple) and len(desc) == len(sig.returns) else (None,) * len(sig.returns)
        result = TupleType(tuple(type_from_desc(r.kind, d, device, r.optional) for r, d in zip(sig.returns, descs)))
    fields: tuple[str, ...] = ()
    if len(sig.returns) > 1 and all(r.name for r in sig.returns):
        fields = tuple(r.name for r in sig.returns)
    return CallInfo(result, sig.aten, tuple(mutates), random, alias_of, aliases, fields)


def _is_random(b: Bound, method: bool, args: list[Type], kwargs: dict[str, Type], consts: Consts) -> bool:
    if "nondeterministic_seeded" not in b.sig.tags:
        return False
    for pi, p in enumerate(b.sig.params):
        value = _param_value(b, pi, method, args, kwargs, consts)
        if p.name in ("train", "training") and value is False:
            return False
        if p.name == "dropout_p" and value is not ... and value == 0:
            return False
    return True


def _infer(invoke, method, self_type, args, kwargs, consts, random, int_hints) -> Any:
    if method:
        full_args = [self_type] + list(args)
        shifted = {(k + 1 if isinstance(k, int) else k): v for k, v in consts.items()}
        hints = {(k + 1 if isinstance(k, int) else k): v for k, v in int_hints.items()}
        return dt.infer(invoke, full_args, kwargs, shifted, random=random, int_hints=hints)
    return dt.infer(invoke, list(args), kwargs, consts, random=random, int_hints=int_hints)


# -- entry points -------------------------------------------------------------------------------
def _check_out(kwargs: dict[str, Type], display: str) -> None:
    if "out" in kwargs:
        raise SignatureError(
            f"{display}: out= arguments are not supported in compiled code",
            "assign the result instead (y = f(x)), or use the in-place method (x.add_(y))",
        )


def resolve_function(
    qualname: str,
    args: list[Type],
    kwargs: dict[str, Type],
    const_values: Consts | None = None,
) -> CallInfo:
    from ir.torchapi import python_funcs as pf
    from ir.torchapi import special as sp

    consts = const_values or {}
    display = qualname
    _check_out(kwargs, display)
    if qualname.startswith("math."):
        return sp.resolve_math(qualname, args, kwargs)
    if qualname.startswith("torch.Tensor.") and qualname.count(".") == 2:
        # torch.Tensor.add(x, y) is x.add(y); operand numbering is the same either way.
        if not args:
            raise SignatureError(f"{qualname}() needs the tensor as its first argument")
        shifted = {(k - 1 if isinstance(k, int) else k): v for k, v in consts.items() if k != 0}
        return resolve_method(qualname.rsplit(".", 1)[1], args[0], list(args[1:]), kwargs, shifted)
    special = sp.SPECIAL_FUNCTIONS.get(qualname)
    if special is not None:
        return special(args, kwargs, consts)
    fn = _lookup(qualname)
    if fn is None:
        raise _unknown(qualname)
    spec = pf.python_spec(qualname, fn)
    if spec is not None:
        return pf.resolve_python(spec, qualname, None, args, kwargs, consts)
    name = _aten_name(fn)
    if name is None or not schemas(name):
        raise _unknown(qualname)
    return resolve_schema_call(name, qualname, False, None, args, kwargs, consts, call_function(fn))


def resolve_method(
    name: str,
    self_type: Type,
    args: list[Type],
    kwargs: dict[str, Type],
    const_values: Consts | None = None,
) -> CallInfo:
    from ir.torchapi import python_funcs as pf
    from ir.torchapi import special as sp

    consts = const_values or {}
    display = f"Tensor.{name}"
    if self_type == ANY:
        return CallInfo(ANY, None, (), False, None)
    if isinstance(self_type, OptionalType):
        raise SignatureError(f"{display}: the tensor may be None", "check `x is not None` first")
    if not isinstance(self_type, TensorType):
        raise SignatureError(f"method `{name}` of a value of type {self_type} is not supported")
    _check_out(kwargs, display)
    special = sp.SPECIAL_METHODS.get(name)
    if special is not None:
        got = special(self_type, args, kwargs, consts)
        if got is not None:
            return got
    attr = getattr(torch.Tensor, name, None) if not name.startswith("__") else None
    if attr is None or not callable(attr):
        raise SignatureError(
            f"tensors have no method `{name}`" if attr is None else f"`{display}` is not a method",
            "see https://pytorch.org/docs/stable/tensors.html for the Tensor methods",
        )
    spec = pf.python_method_spec(name)
    if spec is not None:
        return pf.resolve_python(spec, display, self_type, args, kwargs, consts)
    sigs = [s for s in schemas(name) if any(p.schema_name == "self" and p.kind == "Tensor" for p in s.params)]
    if not sigs:
        raise SignatureError(f"`{display}` is not supported in compiled code")
    written_in_python = inspect.isfunction(attr)  # Tensor.split: no axis= alias
    return resolve_schema_call(name, display, True, self_type, args, kwargs, consts, call_method(name),
                               numpy_names=not written_in_python)


def is_known_function(qualname: str) -> bool:
    """Whether resolve_function knows `qualname` at all (torch.*, torch.nn.functional.*, math.*)."""
    from ir.torchapi import python_funcs as pf
    from ir.torchapi import special as sp

    if qualname.startswith("math."):
        return qualname in sp.MATH_FUNCTIONS
    if qualname.startswith("torch.Tensor.") and qualname.count(".") == 2:
        name = qualname.rsplit(".", 1)[1]
        if name in sp.SPECIAL_METHODS:
            return name not in sp.REJECTED_METHODS
        return callable(getattr(torch.Tensor, name, None)) and (
            pf.python_method_spec(name) is not None
            or any(any(p.schema_name == "self" for p in s.params) for s in schemas(name))
        )
    if qualname in sp.SPECIAL_FUNCTIONS:
        return qualname not in sp.REJECTED
    fn = _lookup(qualname)
    if fn is None:
        return False
    if pf.python_spec(qualname, fn) is not None:
        return True
    name = _aten_name(fn)
    return name is not None and bool(schemas(name))


_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.special.", "torch.fft.", "torch.")


@functools.lru_cache(maxsize=None)
def _lookup(qualname: str) -> Callable | None:
    """The Python callable a canonical name refers to, for the namespaces we accept."""
    for ns in _NAMESPACES:
        if qualname.startswith(ns):
            rest = qualname[len(ns):]
            if not rest or "." in rest or rest.startswith("_"):
                return None
            module = {"torch.nn.functional.": torch.nn.functional, "torch.linalg.": torch.linalg,
                      "torch.special.": torch.special, "torch.fft.": torch.fft, "torch.": torch}[ns]
            fn = getattr(module, rest, None)
            if fn is None or isinstance(fn, type) or not callable(fn):
                return None
            return fn
    return None


def _aten_name(fn: Callable) -> str | None:
    """aten::<name> of a torch builtin (torch.tanh -> tanh, F.logsigmoid -> log_sigmoid)."""
    if type(fn).__name__ == "builtin_function_or_method":
        return fn.__name__
    return None


def _unknown(qualname: str) -> SignatureError:
    ns = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
    return SignatureError(
        f"`{qualname}` is not a function the compiler knows",
        f"use a function of {ns} that operates on tensors (see the PyTorch docs), "
        "or compute the value outside the compiled code",
    )


# -- attributes ---------------------------------------------------------------------------------
_BOOL_ATTRS = {"requires_grad", "is_cuda", "is_cpu", "is_leaf", "is_sparse", "is_quantized", "is_meta",
               "is_mps", "is_mkldnn", "is_nested", "is_xpu", "retains_grad"}
_INT_ATTRS = {"ndim", "itemsize", "nbytes", "output_nr", "_version"}
_VIEW_ATTRS = {"T", "mT", "H", "mH", "data", "real", "imag"}


def resolve_attribute_info(name: str, self_type: Type) -> CallInfo:
    if self_type == ANY:
        return CallInfo(ANY, None, (), False, None)
    if not isinstance(self_type, TensorType):
        raise SignatureError(f"attribute `{name}` of a value of type {self_type} is not supported")
    if name == "shape":
        return CallInfo(shape_type(self_type), None, (), False, None)
    if name == "dtype":
        return CallInfo(DTYPE, None, (), False, None)
    if name == "device":
        return CallInfo(DEVICE, None, (), False, None)
    if name in _BOOL_ATTRS:
        return CallInfo(BOOL, None, (), False, None)
    if name in _INT_ATTRS:
        return CallInfo(INT, None, (), False, None)
    if name == "grad":
        return CallInfo(OptionalType(TensorType(self_type.dtype, None, self_type.device)), None, (), False, None)
    if name in _VIEW_ATTRS:
        dtype = self_type.dtype
        if name in ("real", "imag") and dtype is not None:
            dtype = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype if name == "real" else None)
        aten = {"T": "aten::numpy_T", "mT": "aten::mT", "H": "aten::matrix_H", "mH": "aten::mH",
                "real": "aten::real", "imag": "aten::imag"}.get(name)
        return CallInfo(TensorType(dtype, None, self_type.device), aten, (), False, 0)
    if name in ("layout", "names", "grad_fn"):
        return CallInfo(ANY, None, (), False, None)
    attr = getattr(torch.Tensor, name, None)
    if attr is not None and callable(attr):
        raise SignatureError(f"`Tensor.{name}` is a method", f"call it: x.{name}(...)")
    raise SignatureError(f"tensors have no attribute `{name}`")


def resolve_attribute(name: str, self_type: Type) -> Type:
    return resolve_attribute_info(name, self_type).result



__all__ = [
    "CallInfo", "SignatureError", "resolve_function", "resolve_method", "resolve_attribute",
    "resolve_attribute_info", "binary_result_type", "resolve_binary", "unary_result_type",
    "resolve_unary", "is_known_function",
]

"""What the front end needs to know about a call into torch: does it bind, what does it return,
what does it write, does it draw random numbers, which aten overload is it.

Torch's own operator schemas are the vocabulary (ir/torch_schemas.py reads and binds them the way
torch's Python argument parser does); torch's Python-level wrappers (most of torch.nn.functional,
torch.functional, a few Tensor methods) are bound against their Python signatures
(ir/torch_python_funcs.py); result dtypes come from torch itself (ir/dtype_rules.py).

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
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ir import dtype_rules as dt
from ir.torch_schemas import NUMBERS_AS_TENSORS, Bound, Param, Sig, bind, operand_key, schemas
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
    ScalarType,
    TensorType,
    TupleType,
    Type,
    unify,
)


@dataclass(frozen=True)
class CallInfo:
    result: Type  # IR type of the result (TupleType for multiple returns, NONE for none)
    aten: str | None  # "aten::name.overload" when the call binds to one aten overload
    mutates: tuple[int, ...]  # operands written in place
    random: bool  # consumes the global RNG: never reorder, CSE or drop
    alias_of: int | None  # operand the result may alias (views, in-place ops)
    # Every operand the result (or an element of a list/tuple result) may share storage with;
    # includes alias_of. More than one for e.g. torch.broadcast_tensors(a, b), einsum.
    aliases: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.alias_of is not None and self.alias_of not in self.aliases:
            object.__setattr__(self, "aliases", tuple(sorted({*self.aliases, self.alias_of})))


class SignatureError(Exception):
    """A call the compiler does not accept. str(): a one-line message; .hint: what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


Consts = dict  # dict[int | str, object]


# -- helpers shared with torch_python_funcs -------------------------------------------------------
def tensor_devices(types: list[Type]) -> str | None:
    """The device all tensor operands share, when every one of them is known and equal."""
    found: set[str | None] = set()

    def walk(t: Type) -> None:
        if isinstance(t, TensorType):
            found.add(t.device)
        elif isinstance(t, OptionalType):
            walk(t.elem)
        elif isinstance(t, (TupleType, ListType)):
            for e in (t.elems if isinstance(t, TupleType) else (t.elem,)):
                walk(e)
        elif t == ANY:
            found.add(None)

    for t in types:
        walk(t)
    if len(found) == 1:
        return next(iter(found))
    return None


def _has_tensor(types: list[Type]) -> bool:
    def walk(t: Type) -> bool:
        if isinstance(t, TensorType):
            return True
        if isinstance(t, OptionalType):
            return walk(t.elem)
        if isinstance(t, TupleType):
            return any(walk(e) for e in t.elems)
        if isinstance(t, ListType):
            return walk(t.elem)
        return False

    return any(walk(t) for t in types)


def type_from_desc(kind: str, desc: Any, device: str | None, optional: bool = False) -> Type:
    """IR type of a result of schema kind `kind`, with dtypes from the oracle's `desc`."""
    if kind == "Tensor":
        t: Type = TensorType(desc if isinstance(desc, str) else None, None, device)
    elif kind == "Tensor[]":
        elem = None
        if isinstance(desc, tuple) and desc and all(d == desc[0] for d in desc) and isinstance(desc[0], str):
            elem = desc[0]
        t = ListType(TensorType(elem, None, device))
    elif kind == "Scalar":
        t = {int: INT, float: FLOAT, bool: BOOL, complex: dt.COMPLEX}.get(desc, ANY)  # type: ignore[arg-type]
    else:
        t = {"int": INT, "float": FLOAT, "bool": BOOL, "complex": dt.COMPLEX, "str": STR,
             "dtype": DTYPE, "device": DEVICE, "int[]": ListType(INT), "float[]": ListType(FLOAT),
             "bool[]": ListType(BOOL)}.get(kind, ANY)
    return OptionalType(t) if optional and t != ANY else t


def shape_type(self_type: Type) -> Type:
    """x.shape / x.size(): a tuple of ints when the rank is known (torch.Size is a tuple)."""
    if isinstance(self_type, TensorType) and self_type.shape is not None:
        return TupleType((INT,) * len(self_type.shape))
    return ListType(INT)


def arg_desc(args: list[Type], kwargs: dict[str, Type], self_type: Type | None = None) -> str:
    parts = [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def const_of(consts: Consts, key: int | str | None, default: object = None) -> object:
    if key is None:
        return default
    return consts.get(key, default)


# Ops whose schema declares a fresh result but which return their input itself (or a view of it)
# in some cases: dropout when not training, type_as to the same type, einsum("ij->ji"),
# atleast_2d of a 2-d tensor... Found by running them (tests/test_torch_signatures.py).
UNANNOTATED_ALIASES = frozenset({
    "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "type_as",
    "atleast_1d", "atleast_2d", "atleast_3d", "einsum", "sum_to_size", "meshgrid",
    "broadcast_tensors", "cartesian_prod", "to_dense",
})


def tensor_operands(types: list[Type | None]) -> tuple[int, ...]:
    return tuple(i for i, t in enumerate(types) if t is not None and _has_tensor([t]))


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
) -> CallInfo:
    """Bind a call of aten::<name> (function form, or method when `method`) and describe it."""
    sigs = schemas(name)
    candidates: list[Bound] = []
    reasons: list[str] = []
    for sig in sigs:
        got = bind(sig, method, args, kwargs, name in NUMBERS_AS_TENSORS, self_type)
        if isinstance(got, Bound):
            candidates.append(got)
        else:
            reasons.append(got)
    if not candidates:
        shown = [s.render(display, method) for s in sigs if not method or any(p.schema_name == "self" for p in s.params)]
        why = max(reasons, key=lambda r: getattr(r, "score", 0)) if reasons else "no overload matches"
        raise SignatureError(
            f"{display}{arg_desc(args, kwargs)}: {why}",
            "accepted: " + " | ".join(shown) if shown else None,
        )
    best = min(c.cost for c in candidates)
    chosen = [c for c in candidates if c.cost == best]
    infos = [_describe_bound(c, method, self_type, args, kwargs, consts, invoke) for c in chosen]
    if len(infos) == 1:
        return infos[0]
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
    )


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
        if value is None and _has_tensor(operands):
            device = tensor_devices(operands)
    elif _has_tensor(operands):
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
    return CallInfo(result, sig.aten, tuple(mutates), random, alias_of, aliases)


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


def call_function(fn: Callable) -> Callable[[list[Any], dict[str, Any]], Any]:
    return dt.keyed(lambda a, k: fn(*a, **k), ("fn", fn))


def call_method(name: str) -> Callable[[list[Any], dict[str, Any]], Any]:
    return dt.keyed(lambda a, k: getattr(a[0], name)(*a[1:], **k), ("method", name))


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
    from ir import torch_python_funcs as pf

    consts = const_values or {}
    display = qualname
    _check_out(kwargs, display)
    if qualname.startswith("math."):
        return pf.resolve_math(qualname, args, kwargs)
    special = pf.SPECIAL_FUNCTIONS.get(qualname)
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
    from ir import torch_python_funcs as pf

    consts = const_values or {}
    display = f"Tensor.{name}"
    if self_type == ANY:
        return CallInfo(ANY, None, (), False, None)
    if isinstance(self_type, OptionalType):
        raise SignatureError(f"{display}: the tensor may be None", "check `x is not None` first")
    if not isinstance(self_type, TensorType):
        raise SignatureError(f"method `{name}` of a value of type {self_type} is not supported")
    _check_out(kwargs, display)
    special = pf.SPECIAL_METHODS.get(name)
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
    return resolve_schema_call(name, display, True, self_type, args, kwargs, consts, call_method(name))


def is_known_function(qualname: str) -> bool:
    """Whether resolve_function knows `qualname` at all (torch.*, torch.nn.functional.*, math.*)."""
    from ir import torch_python_funcs as pf

    if qualname.startswith("math."):
        return qualname in pf.MATH_FUNCTIONS
    if qualname in pf.SPECIAL_FUNCTIONS:
        return qualname not in pf.REJECTED
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


# -- Python operators ---------------------------------------------------------------------------
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


__all__ = [
    "CallInfo", "SignatureError", "resolve_function", "resolve_method", "resolve_attribute",
    "resolve_attribute_info", "binary_result_type", "resolve_binary", "unary_result_type",
    "resolve_unary", "is_known_function",
]

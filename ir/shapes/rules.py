"""Shape and dtype facts of torch calls: binding a call to its parameter names and the dispatch
over the rule tables, for the shape analysis (ir/passes/shapes.py). The abstract values and the
size algebra (sympy) they compute with are in ir/shapes/values.py.

A rule is a function from a bound call (`Call`) to the abstract value of its result (`AV`), or
None when it cannot say more than the front end's type. Each rule file (ir/shapes/rules_ops.py,
ir/shapes/rules_nn.py, ir/shapes/rules_views.py) registers its rules by op name in a table of its
own (ir/shapes/rule_table.py); `RULES` here merges them, and is the one place that names the rule
files. Ops without a rule fall back on traits: in-place ops return their target, ops torch tags
`pointwise` broadcast their tensor arguments, and any op whose inputs are all concrete runs on
"meta" tensors (torch's own meta functions: exact shapes and dtypes, no data). What is not known
stays unknown: a dimension that cannot be decided is None, never a guess.

Dimensions are ints, sympy expressions over positive integer symbols (`ir.core.types.sym`), or None.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import sympy
import torch

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    NONE,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    tuple_like,
    unify_all,
)
from ir.shapes import rules_nn, rules_ops, rules_views
from ir.shapes.rule_table import Call, RuleTable, TorchCall
from ir.shapes.values import (
    AV,
    BOTTOM_TYPE,
    UNKNOWN,
    broadcast_shapes,
    const_av,
    is_concrete,
    list_av,
    tensor_av,
    tuple_av,
)
from ir.torchapi import dtypes as dt

# -- binding a call to parameter names ----------------------------------------------------------
_NUMPY = {"axis": "dim", "keepdims": "keepdim", "x": "self", "a": "self", "x1": "self", "x2": "other"}
_SELF_NAMES = {"input", "tensor", "self"}


@dataclass(frozen=True)
class Param:
    name: str  # canonical: the tensor a function works on is "self"
    kwarg_only: bool = False
    int_list: bool = False  # an int list that takes varargs: x.view(B, T, C)
    default: Any = UNKNOWN  # UNKNOWN: required
    var_positional: bool = False
    kind: str = "any"  # the schema's kind ("Tensor", "int", "int[]"...) or "any"


@functools.lru_cache(maxsize=None)
def _schema_params(aten: str) -> tuple[Param, ...] | None:
    from ir.torchapi.schemas import schemas

    base = aten.removeprefix("aten::").split(".")[0]
    for sig in schemas(base):
        if sig.aten == aten:
            return tuple(
                Param(
                    "self" if p.schema_name in ("self", "input") else p.schema_name,
                    p.kwarg_only,
                    p.kind == "int[]" and not p.size,
                    p.default if p.has_default else UNKNOWN,
                    False,
                    p.kind,
                )
                for p in sig.params
            )
    return None


@functools.lru_cache(maxsize=None)
def _python_params(fn: Callable) -> tuple[Param, ...] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        name = "self" if (i == 0 and p.name in _SELF_NAMES) else p.name
        out.append(Param(
            name,
            p.kind is inspect.Parameter.KEYWORD_ONLY,
            False,
            UNKNOWN if p.default is inspect.Parameter.empty else p.default,
            p.kind is inspect.Parameter.VAR_POSITIONAL,
        ))
    return tuple(out)


def python_callable(kind: str, name: str) -> Callable | None:
    """The torch function (kind "function", name a qualname) or Tensor method (kind "method")."""
    if kind == "method":
        attr = getattr(torch.Tensor, name, None)
        return attr if callable(attr) else None
    from ir.torchapi.signatures import _lookup

    return _lookup(name)


def _param_lists(kind: str, name: str, aten: str | None) -> list[tuple[Param, ...]]:
    """Candidate parameter lists: the Python signature for functions written in Python, else the
    aten overload's schema (every overload when the front end did not pick one)."""
    from ir.torchapi import python_funcs as pf
    from ir.torchapi.schemas import schemas

    fn = python_callable(kind, name)
    if fn is not None:
        spec = pf.python_method_spec(name) if kind == "method" else pf.python_spec(name, fn)
        target = (spec.signature_of or spec.fn) if spec is not None else fn
        if inspect.isfunction(target):
            params = _python_params(target)
            if params is not None and not (len(params) == 1 and params[0].var_positional):
                return [params]
    if aten is not None:
        params = _schema_params(aten)
        return [params] if params is not None else []
    base = (fn.__name__ if fn is not None and kind == "function" else name.rsplit(".", 1)[-1])
    out = []
    for sig in schemas(base):
        params = _schema_params(sig.aten)
        if params is not None:
            out.append(params)
    return out


def bind_params(params: Sequence[Param], method: bool, pos: Sequence[AV], kw: dict[str, AV]) -> dict[str, AV] | None:
    args: dict[str, AV] = {}
    plist = list(params)
    if method:
        if not plist or plist[0].name != "self":
            idx = next((i for i, p in enumerate(plist) if p.name == "self"), None)
            if idx is None:
                return None
            plist.insert(0, plist.pop(idx))
    positional = [p for p in plist if not p.kwarg_only]
    pos = list(pos)
    if method:
        args["self"] = pos[0]
        positional = positional[1:]
        pos = pos[1:]
    var = next((i for i, p in enumerate(positional) if p.var_positional), None)
    if var is not None:
        for p, a in zip(positional[:var], pos[:var]):
            args[p.name] = a
        args[positional[var].name] = tuple_av(pos[var:])
    elif (len(positional) == 1 and positional[0].int_list and pos and pos[0].type in (INT, ANY)):
        args[positional[0].name] = tuple_av(pos)
    elif (len(positional) >= 1 and positional[0].int_list and len(pos) > len(positional)
          and all(a.type == INT for a in pos)):
        args[positional[0].name] = tuple_av(pos)
    else:
        if len(pos) > len(positional):
            return None
        for p, a in zip(positional, pos):
            args[p.name] = a
    names = {p.name for p in plist}
    for k, v in kw.items():
        key = k if k in names else _NUMPY.get(k, "self" if k in _SELF_NAMES else k)
        if key not in names or key in args:
            return None
        args[key] = v
    kinds = {p.name: p.kind for p in plist}
    for name, av in args.items():
        if not _fits(kinds.get(name, "any"), av.type):
            return None
    for p in plist:
        if p.name not in args:
            if p.default is UNKNOWN:
                if p.var_positional:
                    continue
                return None
            args[p.name] = const_av(p.default)
    return args


def _fits(kind: str, t: Type) -> bool:
    """A loose kind check, to tell overloads apart when the front end did not pick one."""
    if kind == "any" or t == ANY:
        return True
    if isinstance(t, OptionalType):
        t = t.elem
    tensor = isinstance(t, TensorType)
    if kind == "Tensor":
        return tensor or t in (INT, FLOAT, BOOL, NONE)
    if kind in ("int", "float", "bool", "Scalar"):
        return not tensor or t.rank in (None, 0)  # type: ignore[union-attr]
    if kind.endswith("[]"):
        return not tensor or kind == "int[]"
    return True


def bind_call(kind: str, name: str, aten: str | None, pos: Sequence[AV], kw: dict[str, AV]) -> dict[str, AV] | None:
    for params in _param_lists(kind, name, aten):
        args = bind_params(params, kind == "method", pos, kw)
        if args is not None:
            return args
    return None


@functools.lru_cache(maxsize=None)
def is_pointwise(aten: str | None) -> bool:
    if aten is None:
        return False
    base, _, overload = aten.removeprefix("aten::").partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return torch.Tag.pointwise in op.tags


# -- dispatch -----------------------------------------------------------------------------------
# The rule files' tables, merged here: the one place that names them all. A rule file registers
# into its own table and imports nothing of the dispatch.
RULES = RuleTable.merged(rules_ops.RULES, rules_nn.RULES, rules_views.RULES)


def infer_call(c: TorchCall) -> AV:
    """The result of a torch call: the rule's facts, completed with the front end's type and
    torch's dtype rules, or the meta kernels' answer when every input is concrete."""
    operands = c.pos + list(c.kw.values())
    found: AV | None = None
    if c.alias_of is not None and c.alias_of in c.mutates and c.alias_of < len(operands):
        target = operands[c.alias_of]
        if target.tensor is not None:
            found = AV(target.type)  # an in-place op returns its target, shape and dtype unchanged
    if found is None:
        args = bind_call(c.kind, c.name, c.aten, c.pos, c.kw)
        bound = args is not None
        if args is None:
            args = {"self": c.pos[0]} if c.kind == "method" and c.pos else {}
        call = Call(c.op_name, c.aten, args, c.declared, bound and is_pointwise(c.aten), c.ctx, c.pos, c.kw)
        rules = RULES.rules
        fn = rules.get(call.name) or (rules.get(c.name.rsplit(".", 1)[-1]) if c.kind == "function" else None)
        try:
            found = fn(call) if fn is not None and (bound or fn in RULES.unbound_ok) else None
            if found is None and call.pointwise:
                found = pointwise(call)
        except (TypeError, ValueError, ZeroDivisionError, AttributeError, IndexError):
            found = None
        if found is not None and call.name in SAME_DTYPE:
            found = _with_input_dtype(found, operands)
    if not _complete(found):
        meta = run_meta(c)
        if meta is not None:
            found = meta if found is None else meet(meta, found)
    return complete_types(found, c)


# Ops whose result has the dtype of their tensor inputs when those all have one dtype (views,
# windows, convolutions, matmuls: torch refuses mixed dtypes or keeps the input's).
SAME_DTYPE = frozenset((
    "view reshape _unsafe_view _reshape_alias view_copy flatten unflatten permute transpose swapaxes "
    "swapdims t numpy_T adjoint mT mH movedim moveaxis unsqueeze squeeze expand broadcast_to "
    "expand_as repeat tile narrow select slice split split_with_sizes unsafe_split chunk unsafe_chunk "
    "unbind contiguous clone detach flip roll tril triu matmul mm bmm mv linear conv1d conv2d conv3d "
    "conv_transpose1d conv_transpose2d conv_transpose3d max_pool1d max_pool2d max_pool3d avg_pool1d "
    "avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d pad "
    "constant_pad_nd interpolate pixel_shuffle pixel_unshuffle glu dropout layer_norm group_norm "
    "batch_norm instance_norm relu gelu silu tanh sigmoid"
).split())


def _with_input_dtype(found: AV, operands: list[AV]) -> AV:
    dtypes = {o.tensor.dtype for o in operands if o.tensor is not None}
    dtypes |= {i.tensor.dtype for o in operands if o.items for i in o.items if i.tensor is not None}
    if len(dtypes) != 1 or None in dtypes:
        return found
    dtype = dtypes.pop()

    def fill(av: AV) -> AV:
        t = av.tensor
        if t is not None and t.dtype is None:
            return AV(TensorType(dtype, t.shape, t.device), av.value, av.items, av.origin)
        if av.items is not None:
            items = tuple(fill(i) for i in av.items)
            return AV(tuple_like(av.type, tuple(i.type for i in items)) if isinstance(av.type, TupleType)
                      else ListType(unify_all([i.type for i in items]) or TensorType()), av.value, items)
        if isinstance(av.type, ListType) and isinstance(av.type.elem, TensorType):
            return AV(ListType(fill(AV(av.type.elem)).type))
        return av

    return fill(found)


def _complete(av: AV | None) -> bool:
    if av is None:
        return False
    return _type_complete(av.type) and (av.items is None or all(_complete(i) for i in av.items))


def _type_complete(t: Type) -> bool:
    if isinstance(t, TensorType):
        return t.dtype is not None and t.shape is not None and None not in t.shape
    if isinstance(t, TupleType):
        return all(_type_complete(e) for e in t.elems)
    if isinstance(t, ListType):
        return _type_complete(t.elem)
    return True


def pointwise(call: Call) -> AV | None:
    """Ops torch tags pointwise: the tensor arguments broadcast; dtype from torch's promotion."""
    shapes = [av.shape for av in call.args.values() if av.tensor is not None]
    if not shapes:
        return None
    return tensor_av(None, broadcast_shapes(*shapes))


def meet(a: AV, b: AV) -> AV:
    """Facts of `a` completed with those of `b` (both describe the same value)."""
    return AV(refine_type(b.type, a.type), a.value if a.known else b.value,
              a.items if a.items is not None else b.items, a.origin or b.origin)


def refine_type(old: Type, new: Type) -> Type:
    """`old` with the facts `new` adds (new wins where both know something)."""
    if isinstance(old, TensorType) and isinstance(new, TensorType):
        shape = new.shape
        if shape is None:
            shape = old.shape
        elif old.shape is not None and len(old.shape) == len(shape):
            shape = tuple(n if n is not None else o for n, o in zip(shape, old.shape))
        return TensorType(new.dtype or old.dtype, shape, new.device or old.device)
    if isinstance(old, OptionalType):
        if isinstance(new, OptionalType):
            return OptionalType(refine_type(old.elem, new.elem))
        if new in (NONE, ANY) or new is BOTTOM_TYPE:
            return old
        return OptionalType(refine_type(old.elem, new))
    if isinstance(old, TupleType) and isinstance(new, TupleType) and len(old.elems) == len(new.elems):
        return tuple_like(old, tuple(refine_type(o, n) for o, n in zip(old.elems, new.elems)))
    if isinstance(old, ListType) and isinstance(new, ListType):
        return ListType(refine_type(old.elem, new.elem))
    if isinstance(old, ListType) and isinstance(new, TupleType):
        return ListType(refine_type(old.elem, unify_all(new.elems) or old.elem))
    if old == ANY and new is not BOTTOM_TYPE:
        return new
    if isinstance(old, TensorType) and new == ANY:
        return old
    return old


# -- completing dtypes and devices ----------------------------------------------------------------
def complete_types(found: AV | None, c: TorchCall) -> AV:
    """The front end's type refined with the found facts; dtypes and devices still missing are
    asked of torch's dtype rules again (ir/torchapi/signatures.py) with the refined argument types."""
    declared = c.declared
    if found is None:
        found = AV(declared)
    else:
        found = AV(refine_type(declared, found.type), found.value, found.items, found.origin)
    # Sizes never change a result dtype (only being zero-dim does), so symbolic sizes may be given
    # to torch's rules as any size; a size that divides well lets shape checks pass.
    for fill in (None, GENERIC_SIZE):
        if not _needs_dtype(found.type):
            break
        oracle = _resolve_again(c, fill)
        if oracle is not None:
            found = AV(_fill_dtypes(found.type, oracle), found.value,
                       _fill_items(found.items, oracle), found.origin)
    return found


GENERIC_SIZE = 24


def _needs_dtype(t: Type) -> bool:
    if isinstance(t, TensorType):
        return t.dtype is None or t.device is None
    if isinstance(t, (TupleType,)):
        return any(_needs_dtype(e) for e in t.elems)
    if isinstance(t, ListType):
        return _needs_dtype(t.elem)
    if isinstance(t, OptionalType):
        return _needs_dtype(t.elem)
    return False


def _inputs_know_more(c: TorchCall) -> bool:
    def walk(t: Type) -> bool:
        if isinstance(t, TensorType):
            return t.dtype is not None or t.device is not None
        if isinstance(t, (OptionalType, ListType)):
            return walk(t.elem)
        if isinstance(t, TupleType):
            return any(walk(e) for e in t.elems)
        return False

    return any(walk(av.type) for av in c.pos + list(c.kw.values()))


def _fill_dtypes(t: Type, oracle: Type) -> Type:
    if isinstance(t, TensorType):
        o = oracle if isinstance(oracle, TensorType) else None
        if isinstance(oracle, ListType) and isinstance(oracle.elem, TensorType):
            o = oracle.elem
        if o is None:
            return t
        return TensorType(t.dtype or o.dtype, t.shape, t.device or o.device)
    if isinstance(t, TupleType) and isinstance(oracle, TupleType) and len(t.elems) == len(oracle.elems):
        return tuple_like(t, tuple(_fill_dtypes(a, b) for a, b in zip(t.elems, oracle.elems)))
    if isinstance(t, ListType) and isinstance(oracle, ListType):
        return ListType(_fill_dtypes(t.elem, oracle.elem))
    if isinstance(t, OptionalType) and isinstance(oracle, OptionalType):
        return OptionalType(_fill_dtypes(t.elem, oracle.elem))
    return t


def _fill_items(items: tuple[AV, ...] | None, oracle: Type) -> tuple[AV, ...] | None:
    if items is None:
        return None
    if isinstance(oracle, ListType):
        return tuple(AV(_fill_dtypes(i.type, oracle.elem), i.value, i.items, i.origin) for i in items)
    if isinstance(oracle, TupleType) and len(oracle.elems) == len(items):
        return tuple(AV(_fill_dtypes(i.type, o), i.value, i.items, i.origin) for i, o in zip(items, oracle.elems))
    return items


def scalar_const(av: AV) -> Any:
    """A constant as the dtype rules take it (dtype names as torch dtypes...); UNKNOWN if none."""
    if not av.known:
        if av.items is not None:
            vals = [scalar_const(i) for i in av.items]
            if any(v is UNKNOWN for v in vals):
                return UNKNOWN
            return tuple(vals)
        return UNKNOWN
    v = av.value
    if isinstance(v, torch.nn.Module):
        return UNKNOWN
    if av.type == DTYPE and isinstance(v, str):
        return dt.as_torch_dtype(v) or UNKNOWN
    if isinstance(v, sympy.Expr):
        return UNKNOWN
    return v


def _resolve_again(c: TorchCall, fill: int | None = None) -> Type | None:
    from ir.torchapi.callinfo import SignatureError
    from ir.torchapi.signatures import resolve_function, resolve_method

    consts: dict[int | str, object] = {}
    pos = c.pos[1:] if c.kind == "method" else c.pos
    for i, av in enumerate(pos):
        v = scalar_const(av)
        if v is not UNKNOWN:
            consts[i] = v
    for k, av in c.kw.items():
        v = scalar_const(av)
        if v is not UNKNOWN:
            consts[k] = v
    args = [_arg_type(av, fill) for av in pos]
    kwargs = {k: _arg_type(av, fill) for k, av in c.kw.items()}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if c.kind == "method":
                info = resolve_method(c.name, _plain(c.pos[0].type, fill), args, kwargs, consts)
            else:
                info = resolve_function(c.name, args, kwargs, consts)
    except (SignatureError, Exception):  # noqa: BLE001 - no better answer than the front end's
        return None
    return info.result


def _arg_type(av: AV, fill: int | None = None) -> Type:
    if av.known and av.value is None:
        return NONE
    return _plain(av.type, fill)


def _plain(t: Type, fill: int | None = None) -> Type:
    """Types as the front end passes them to the dtype rules: symbolic sizes become unknown, or
    `fill` (the rules use concrete sizes only; few distinct keys keep their caches small)."""
    if isinstance(t, TensorType):
        if t.shape is None:
            return t
        return TensorType(t.dtype, tuple(d if type(d) is int else (fill if d is not None else None)
                                         for d in t.shape), t.device)
    if isinstance(t, TupleType):
        return TupleType(tuple(_plain(e, fill) for e in t.elems))
    if isinstance(t, ListType):
        return ListType(_plain(t.elem, fill))
    if isinstance(t, OptionalType):
        return OptionalType(_plain(t.elem, fill))
    return t


# -- meta execution -----------------------------------------------------------------------------
# Ops whose result size depends on tensor contents: meta kernels must not be asked (some answer
# with an assumption instead of failing).
DATA_DEPENDENT = frozenset({
    "nonzero", "nonzero_static", "masked_select", "unique", "unique_consecutive", "unique_dim",
    "_unique2", "repeat_interleave", "bincount", "histc", "item", "tolist", "argwhere",
    "nanmedian", "equal", "allclose", "is_nonzero", "_local_scalar_dense",
})


class _NotConcrete(Exception):
    pass


def _materialize(av: AV) -> Any:
    t = av.type
    if isinstance(t, TensorType):
        if t.dtype is None or not is_concrete(t.shape):
            raise _NotConcrete
        return torch.empty(t.shape, dtype=getattr(torch, t.dtype), device="meta")
    if av.items is not None:
        vals = [_materialize(i) for i in av.items]
        return vals if isinstance(t, ListType) else tuple(vals)
    if t == DEVICE:
        return "meta"
    if not av.known or isinstance(av.value, torch.nn.Module):
        raise _NotConcrete
    v = av.value
    if isinstance(v, sympy.Expr):
        raise _NotConcrete
    if t == DTYPE:
        dtype = dt.as_torch_dtype(v)
        if dtype is None:
            raise _NotConcrete
        return dtype
    return v


def _describe(result: Any, device: str | None) -> AV | None:
    if isinstance(result, torch.Tensor):
        return tensor_av(dt.dtype_name(result.dtype), tuple(int(d) for d in result.shape), device)
    if isinstance(result, (tuple, list)):
        items = [_describe(r, device) for r in result]
        if any(i is None for i in items):
            return None
        return list_av(items) if isinstance(result, list) else tuple_av(items)  # type: ignore[arg-type]
    if isinstance(result, bool):
        return AV(BOOL, result)
    if isinstance(result, int):
        return AV(INT, result)
    return None


def run_meta(c: TorchCall) -> AV | None:
    """Run the call on meta tensors when every input is concrete: torch's own shapes and dtypes."""
    if c.op_name in DATA_DEPENDENT or c.name.rsplit(".", 1)[-1] in DATA_DEPENDENT:
        return None
    fn = python_callable(c.kind, c.name)
    if fn is None:
        return None
    try:
        pos = [_materialize(a) for a in c.pos]
        kw = {k: _materialize(a) for k, a in c.kw.items()}
    except _NotConcrete:
        return None
    if "device" in kw:
        kw["device"] = "meta"  # never allocate on a real device
    elif c.kind == "function" and not _has_tensor(pos) and not _has_tensor(list(kw.values())):
        if not _takes_device(c):
            return None  # it would run for real
        kw["device"] = "meta"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if c.kind == "method":
                result = getattr(pos[0], c.name)(*pos[1:], **kw)
            else:
                result = fn(*pos, **kw)
    except Exception:  # noqa: BLE001 - torch rejected it: nothing is known
        return None
    devices = {a.tensor.device for a in c.pos + list(c.kw.values()) if a.tensor is not None}
    device = next(iter(devices)) if len(devices) == 1 else None
    if isinstance(c.declared, TensorType) and c.declared.device is not None:
        device = c.declared.device
    return _describe(result, device)


def _has_tensor(values: list[Any]) -> bool:
    return any(isinstance(v, torch.Tensor) or (isinstance(v, (list, tuple)) and _has_tensor(list(v)))
               for v in values)


def _takes_device(c: TorchCall) -> bool:
    params = _param_lists(c.kind, c.name, c.aten)
    return any(any(p.name == "device" for p in ps) for ps in params)

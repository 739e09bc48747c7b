"""What torch's functions and tensor methods take and return, as the kind an annotation names
(Tensor, int, float, bool), for the annotations transpiler/infer_annotations.py suggests: from
aten's operator schemas for builtins (every overload with such a parameter must agree), from the
Python annotations of functions torch writes in Python. None where torch does not say.
"""

from __future__ import annotations

import inspect
import types as pytypes
import typing
from functools import lru_cache

import torch

from ir.core.types import BOOL, FLOAT, INT, TENSOR, Type


@lru_cache(maxsize=None)
def _torch_object(qualname: str) -> object:
    obj: object = torch
    for part in qualname.split(".")[1:]:
        if part.startswith("_"):
            return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _py_type(ann: object) -> Type | None:
    """The kind a Python annotation of torch's own code names (`Optional[int]` -> int)."""
    if ann is torch.Tensor or ann == "Tensor":
        return TENSOR
    simple = {int: INT, float: FLOAT, bool: BOOL, "int": INT, "float": FLOAT, "bool": BOOL}
    if isinstance(ann, (type, str)) and ann in simple:
        return simple[ann]  # type: ignore[index]
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, pytypes.UnionType):
        kinds = {_py_type(a) for a in args if a is not type(None)}
    elif origin in (list, tuple):
        kinds = {_py_type(a) for a in args if a is not Ellipsis}
        kinds.discard(TENSOR)  # a list of tensors: not one tensor
    else:
        return None
    return kinds.pop() if len(kinds) == 1 and None not in kinds else None


def _schema_kind(kind: str) -> Type | str | None:
    """IR type of a schema argument kind; "number" for one that takes a tensor or a number."""
    return {"Tensor": TENSOR, "int": INT, "int[]": INT, "float": FLOAT, "float[]": FLOAT, "bool": BOOL,
            "Scalar": "number"}.get(kind)


@lru_cache(maxsize=None)
def _schema_param(name: str, method: bool, position: int | None, keyword: str | None) -> Type | None:
    """What aten::<name> takes at a positional index (counted without `self` for a method) or a
    keyword, when every overload that has such a parameter agrees."""
    from ir.torchapi.schemas import NUMBERS_AS_TENSORS, schemas

    found: set[Type | str] = set()
    for sig in schemas(name):
        params = [p for p in sig.params if not (method and p.schema_name == "self")]
        if method and len(params) == len(sig.params):
            continue  # no `self`: not a method
        if keyword is not None:
            want = "self" if keyword == "input" else keyword
            matches = [p for p in params if p.name == want]
            if not matches:
                continue
            p = matches[0]
        else:
            positional = [p for p in params if not p.kwarg_only]
            if position is not None and position < len(positional):
                p = positional[position]
            elif len(positional) == 1 and positional[0].kind == "int[]":
                p = positional[0]  # sizes as varargs: x.view(b, n), torch.zeros(b, n)
            else:
                continue
        kind = _schema_kind(p.kind)
        if kind == TENSOR and name in NUMBERS_AS_TENSORS and p.schema_name != "self":
            kind = "number"  # torch.add(x, 2): a number is accepted there too
        if kind is not None:
            found.add(kind)
    return found.pop() if len(found) == 1 and "number" not in found else None  # type: ignore[return-value]


def _python_param(fn: object, method: bool, position: int | None, keyword: str | None) -> Type | None:
    try:
        params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if method:
        params = params[1:]
    if keyword is not None:
        chosen = [p for p in params if p.name == keyword]
    else:
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        chosen = positional[position:position + 1] if position is not None else []
    if not chosen or chosen[0].annotation is inspect.Parameter.empty:
        return None
    return _py_type(chosen[0].annotation)


def _builtin(fn: object) -> str | None:
    return fn.__name__ if type(fn).__name__ == "builtin_function_or_method" else None  # type: ignore[attr-defined]


def torch_function_param(qualname: str, position: int | None, keyword: str | None) -> Type | None:
    """What `torch.<...>` (qualified name) takes at that argument, when torch says so."""
    fn = _torch_object(qualname)
    if fn is None or isinstance(fn, type) or not callable(fn):
        return None
    name = _builtin(fn)
    if name is not None:
        return _schema_param(name, False, position, keyword)
    return _python_param(fn, False, position, keyword)


def tensor_method_param(method: str, position: int | None, keyword: str | None) -> Type | None:
    fn = getattr(torch.Tensor, method, None)
    if fn is None:
        return None
    if inspect.isfunction(fn):  # written in Python (x.norm, x.split)
        return _python_param(fn, True, position, keyword)
    return _schema_param(method, True, position, keyword)


@lru_cache(maxsize=None)
def torch_function_result(qualname: str) -> Type | None:
    fn = _torch_object(qualname)
    if fn is None or isinstance(fn, type) or not callable(fn):
        return None
    name = _builtin(fn)
    if name is None:
        try:
            return _py_type(inspect.signature(fn).return_annotation)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    from ir.torchapi.schemas import schemas

    found = {tuple(r.kind for r in sig.returns) for sig in schemas(name)}
    return TENSOR if found == {("Tensor",)} else None

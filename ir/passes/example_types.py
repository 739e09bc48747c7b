"""Argument types from example inputs, for shape propagation (ir/passes/shapes.py): the
examples' dtypes, devices and sizes, with sizes an annotation names symbolically kept symbolic
and, optionally, the batch size made one symbol.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import sympy
import torch

from ir.core import ops
from ir.core.types import DataclassType, ListType, ModuleType, OptionalType, TensorType, TupleType, Type, sym, tuple_like
from ir.shapes.values import tensor_type_of


def example_input_types(func: ops.FuncOp, example_inputs: Sequence[Any], symbolic_batch: bool = True,
                        batch_symbol: str = "B") -> list[Type]:
    """Argument types from example inputs (the `self` of a method left out): dtype, device and
    the example's sizes, except that sizes the annotation names with a symbol stay symbolic and,
    with `symbolic_batch`, the leading size of every tensor input that has the first tensor's
    leading size (when it is not 0 or 1) becomes one symbol, so one compiled module serves every
    batch size. Python numbers and None are not specialised: their declared type is kept."""
    args = list(func.args)
    if args and isinstance(args[0].type, ModuleType):
        args = args[1:]
    defaults = func.attributes.get("defaults", {})
    if len(example_inputs) > len(args) or any(a.name not in defaults for a in args[len(example_inputs):]):
        raise ValueError(f"{func.sym_name} takes {len(args)} arguments, {len(example_inputs)} examples were given")
    used = _annotation_symbols(func)
    first = next((t for t in _tensors(example_inputs) if t.dim() >= 1), None)
    batch = int(first.shape[0]) if first is not None and symbolic_batch and first.shape[0] > 1 else None
    name = batch_symbol
    n = 0
    while name in used and not _leading_symbol(func, name):
        n += 1
        name = f"{batch_symbol}{n}"
    return [_example_type(arg.type, value, batch, sym(name)) for arg, value in zip(args, example_inputs)] + [
        arg.type for arg in args[len(example_inputs):]]


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            out.extend(_tensors(v))
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            out.extend(_tensors([getattr(v, f.name) for f in dataclasses.fields(v)]))
    return out


def _annotation_symbols(func: ops.FuncOp) -> set[str]:
    names: set[str] = set()

    def walk(t: Type) -> None:
        if isinstance(t, TensorType) and t.shape is not None:
            for d in t.shape:
                if isinstance(d, sympy.Expr):
                    names.update(s.name for s in d.free_symbols)  # type: ignore[attr-defined]
        elif isinstance(t, (OptionalType, ListType)):
            walk(t.elem)
        elif isinstance(t, TupleType):
            for e in t.elems:
                walk(e)

    for a in func.args:
        walk(a.type)
    return names


def _leading_symbol(func: ops.FuncOp, name: str) -> bool:
    """Whether every annotation that names `name` uses it for a leading size."""
    for a in func.args:
        t = a.type.elem if isinstance(a.type, OptionalType) else a.type
        if isinstance(t, TensorType) and t.shape:
            for i, d in enumerate(t.shape):
                if d == sym(name) and i != 0:
                    return False
    return True


def _example_type(declared: Type, value: Any, batch: int | None, batch_sym: sympy.Symbol) -> Type:
    if isinstance(value, torch.Tensor):
        t = tensor_type_of(value)
        ann = declared.elem if isinstance(declared, OptionalType) else declared
        dims = list(t.shape)  # type: ignore[arg-type]
        ann_shape = ann.shape if isinstance(ann, TensorType) and ann.shape is not None \
            and len(ann.shape) == len(dims) else None
        for i in range(len(dims)):
            if ann_shape is not None and isinstance(ann_shape[i], sympy.Expr):
                dims[i] = ann_shape[i]
            elif i == 0 and batch is not None and dims[0] == batch:
                dims[0] = batch_sym
        out: Type = TensorType(t.dtype, tuple(dims), t.device)
        return OptionalType(out) if isinstance(declared, OptionalType) else out
    if isinstance(declared, DataclassType) and dataclasses.is_dataclass(value) and type(value).__name__ == declared.name:
        items = [getattr(value, f) for f in declared.fields]  # (its fields by name: not a tuple)
        return tuple_like(declared, tuple(_example_type(d, v, batch, batch_sym) for d, v in zip(declared.elems, items)))
    if isinstance(value, (tuple, list)) and isinstance(declared, TupleType) and len(declared.elems) == len(value):
        return TupleType(tuple(_example_type(d, v, batch, batch_sym) for d, v in zip(declared.elems, value)))
    return declared

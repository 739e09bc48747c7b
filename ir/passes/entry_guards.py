"""The entry checks a function's refined types rely on (ir/passes/shapes.py found them):
`shape_guards(func, facts)` lists, as `ShapeGuard`s, each tensor argument's dtype, device, rank
and sizes (a size symbol is defined where it first occurs; later occurrences must equal it) and
what was read from live modules; each guard renders as a Python condition or as a call of a
runtime/guards.py helper. `symbol_bindings` says where each size symbol is read at entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import sympy

from ir.core import ops
from ir.core.types import NONE, DataclassType, DictType, OptionalType, TensorType, TensorValues, TupleType, Type
from ir.shapes.frame import Path
from ir.shapes.values import UNKNOWN, literal_of

if TYPE_CHECKING:
    from ir.passes.shapes import ShapeFacts


@dataclass(frozen=True)
class ShapeGuard:
    """One fact the refined types assume at a function's entry.

    kind:
      "dtype"      the tensor at `path` has dtype `expected` ("float32")
      "device"     its device type is `expected` ("cpu", "cuda")
      "rank"       it has `expected` dimensions
      "size"       its size in dimension `dim` is the int `expected`
      "symbol"     its size in dimension `dim` defines the size symbol `expected` (a name); the
                   size must be >= 1 (symbols are positive)
      "same_size"  its size in dimension `dim` equals the size at `expected` = (path, dim)
      "size_expr"  its size in dimension `dim` equals the sympy expression `expected` over symbols
                   defined by "symbol" guards
      "value"      the Python value at `path` (a module attribute) equals `expected`
      "tensor_values"  the dict at `path` (a module attribute) holds only tensors of the
                   TensorType `expected` (its sizes None where any size is allowed)
    path: where the value is, from the function's arguments: ("x",), ("state", 0),
      ("self", "qkv", "weight"), ("self", "layers", 0, "weight").
    optional: the path goes through an Optional: check only when the value is not None.
    """

    kind: str
    path: Path
    expected: Any
    dim: int | None = None
    optional: bool = False

    def python(self, symbols: dict[str, tuple[Path, int]] | None = None) -> str:
        """A Python expression that is true when the guard holds."""
        where = render_path(self.path)
        if self.kind == "dtype":
            return f"{where}.dtype == torch.{self.expected}"
        if self.kind == "device":
            return f"{where}.device.type == {self.expected!r}"
        if self.kind == "rank":
            return f"{where}.dim() == {self.expected}"
        if self.kind == "size":
            return f"{where}.size({self.dim}) == {self.expected}"
        if self.kind == "symbol":
            return f"{where}.size({self.dim}) >= 1"
        if self.kind == "same_size":
            other, d = self.expected
            return f"{where}.size({self.dim}) == {render_path(other)}.size({d})"
        if self.kind == "size_expr":
            expr = self.expected
            text = str(expr)
            for s in sorted(expr.free_symbols, key=lambda s: -len(s.name)):
                p, d = (symbols or {}).get(s.name, ((s.name,), None))
                text = text.replace(s.name, f"{render_path(p)}.size({d})" if d is not None else s.name)
            return f"{where}.size({self.dim}) == {text}"
        if self.kind == "value":
            return f"{where} is None" if self.expected is None else f"{where} == {self.expected!r}"
        if self.kind == "tensor_values":
            return f"{where} == {tensor_values(self.expected)!r}"
        raise ValueError(self.kind)

    def statement(self, symbols: dict[str, tuple[Path, int]] | None = None, module: str = "_guards") -> str:
        """The check as a call of a runtime/guards.py helper (raises GuardFailure when it fails).
        A guard with `optional` set belongs inside `if <path> is not None:`."""
        where = render_path(self.path)
        name = f'"{where}"'
        if self.kind == "dtype":
            return f"{module}.check_dtype({where}, torch.{self.expected}, {name})"
        if self.kind == "device":
            return f'{module}.check_device_type({where}, "{self.expected}", {name})'
        if self.kind == "rank":
            return f"{module}.check_dim({where}, {self.expected}, {name})"
        if self.kind == "size":
            return f"{module}.check_size({where}, {self.dim}, {self.expected}, {name})"
        if self.kind == "symbol":
            return f"{module}.check_min_size({where}, {self.dim}, 1, {name})"
        if self.kind == "same_size":
            other, d = self.expected
            return (f'{module}.check_same_size({where}, {self.dim}, {render_path(other)}, {d}, {name}, '
                    f'"{render_path(other)}")')
        if self.kind == "size_expr":
            expected = self.python(symbols).split(" == ", 1)[1]
            return f"{module}.check_size({where}, {self.dim}, {expected}, {name})"
        if self.kind == "value":
            return f"{module}.check_value({where}, {self.expected!r}, {name})"
        if self.kind == "tensor_values":
            return f"{module}.check_value({where}, {module}.{tensor_values(self.expected)!r}, {name})"
        raise ValueError(self.kind)

    def __str__(self) -> str:
        text = self.python()
        if self.kind == "symbol":
            text += f"  # {self.expected} := {render_path(self.path)}.size({self.dim})"
        return text + ("  (when not None)" if self.optional else "")


def tensor_values(t: TensorType) -> TensorValues:
    """What a "tensor_values" guard expects of a dict's values."""
    assert t.dtype is not None and t.device is not None
    return TensorValues(t.dtype, t.device.split(":")[0], t.shape)


def render_path(path: Path) -> str:
    out = str(path[0])
    for p in path[1:]:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def shape_guards(func: ops.FuncOp, facts: ShapeFacts | None = None) -> list[ShapeGuard]:
    """The entry checks the refined types of `func` rely on: its tensor arguments' dtype, device,
    rank and sizes (a size symbol is defined where it first occurs and later occurrences must be
    equal), and, given the facts of propagate_shapes, what was read from live modules."""
    guards: list[ShapeGuard] = []
    bound: dict[sympy.Symbol, tuple[Path, int]] = {}
    pending: list[tuple[Path, int, sympy.Expr, bool]] = []

    def tensor(t: TensorType, path: Path, optional: bool) -> None:
        if t.dtype is not None:
            guards.append(ShapeGuard("dtype", path, t.dtype, None, optional))
        if t.device is not None:
            guards.append(ShapeGuard("device", path, t.device.split(":")[0], None, optional))
        if t.shape is None:
            return
        guards.append(ShapeGuard("rank", path, len(t.shape), None, optional))
        for i, d in enumerate(t.shape):
            if d is None:
                continue
            if type(d) is int:
                guards.append(ShapeGuard("size", path, d, i, optional))
            elif isinstance(d, sympy.Symbol):
                if d in bound:
                    guards.append(ShapeGuard("same_size", path, bound[d], i, optional))
                elif not optional:
                    bound[d] = (path, i)
                    guards.append(ShapeGuard("symbol", path, d.name, i, optional))
                else:
                    pending.append((path, i, d, optional))
            else:
                pending.append((path, i, d, optional))

    def walk(t: Type, path: Path, optional: bool) -> None:
        if isinstance(t, TensorType):
            tensor(t, path, optional)
        elif isinstance(t, OptionalType):
            walk(t.elem, path, True)
        elif isinstance(t, DataclassType):  # its fields, by name
            for f, e in zip(t.fields, t.elems):
                walk(e, path + (f,), optional)
        elif isinstance(t, TupleType):
            for i, e in enumerate(t.elems):
                walk(e, path + (i,), optional)

    for arg in func.args:
        walk(arg.type, (arg.name or "arg",), False)
        if arg.type == NONE:  # compiled for an argument left out (permissive mode): its default
            guards.append(ShapeGuard("value", (arg.name or "arg",), None))
    for path, av in sorted(((facts.attrs.get(func.sym_name, {}) if facts else {}).items()), key=lambda kv: str(kv[0])):
        if av.tensor is not None:
            tensor(av.tensor, path, False)
        elif isinstance(av.type, DictType) and isinstance(av.type.value, TensorType):
            guards.append(ShapeGuard("tensor_values", path, av.type.value))
        elif literal_of(av) is not UNKNOWN:
            guards.append(ShapeGuard("value", path, literal_of(av)))
    for path, i, expr, optional in pending:
        if isinstance(expr, sympy.Symbol) and expr not in bound:
            continue  # defined only where the value may be None: nothing to compare with
        if all(s in bound for s in expr.free_symbols):
            guards.append(ShapeGuard("size_expr", path, expr, i, optional))
    return guards


def symbol_bindings(guards: Sequence[ShapeGuard]) -> dict[str, tuple[Path, int]]:
    """Where each size symbol is read at entry: name -> (path, dim)."""
    return {g.expected: (g.path, g.dim) for g in guards if g.kind == "symbol"}  # type: ignore[misc]

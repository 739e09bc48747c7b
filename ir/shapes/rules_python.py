"""The shape analysis' rules for the IR's own ops: Python values (constants, tuples, lists,
attributes, operators on ints and tensors, builtins), calls (torch, submodules, compiled
functions) and structured control flow (branches joined, loops iterated to a fixpoint, loops over
a live module list unrolled). Each rule takes the interpreter (ir/passes/shapes.py), the current
frame and the op, and returns the abstract values of the op's results.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import sympy
import torch

from ir.core import ops
from ir.core.graph import OPAQUE, Block, Operation
from ir.core.pymethods import str_method_value
from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    NONE,
    DictType,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
)
from ir.shapes.frame import Frame, Interpreter
from ir.shapes.rule_table import TorchCall
from ir.shapes.rules import _plain, infer_call, refine_type
from ir.shapes.rules_index import index_result
from ir.shapes.rules_ops import matmul_shape
from ir.shapes.values import (
    AV,
    BOTTOM,
    UNKNOWN,
    broadcast_shapes,
    const_av,
    int_av,
    is_bottom,
    join,
    join_all,
    list_av,
    size_of,
    tuple_av,
)
from ir.torchapi import dtypes as dt
from runtime.guards import is_plain_object

MAX_ITERATIONS = 8  # loop iterations before the carried values are widened to their declared types
MAX_UNROLL = 64  # elements of a live module list analysed one by one


# -- per-op rules ---------------------------------------------------------------------------------
OpRule = Callable[[Interpreter, Frame, Operation], list[AV]]
OP_RULES: dict[str, OpRule] = {}


def op_rule(*names: str) -> Callable[[OpRule], OpRule]:
    def register(fn: OpRule) -> OpRule:
        for n in names:
            OP_RULES[n] = fn
        return fn

    return register


def _declared(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    return [AV(r.type) for r in op.results]


def _with_declared(op: Operation, av: AV, index: int = 0) -> AV:
    declared = op.results[index].type
    return AV(refine_type(declared, av.type), av.value, av.items, av.origin)


@op_rule("py.constant")
def _constant(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    value = op.attributes.get("value")
    t = op.results[0].type
    if t == DTYPE:
        name = dt.as_dtype_name(value)
        return [AV(DTYPE, name if name is not None else UNKNOWN)]
    if t == DEVICE:
        return [AV(DEVICE, dt.as_device_name(value) or UNKNOWN)]
    c = const_av(value)
    return [AV(refine_type(t, c.type) if t != ANY else c.type, c.value, c.items)]


@op_rule("py.uninitialized")
def _uninitialized(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    return [BOTTOM for _ in op.results]


@op_rule("py.refine")
def _refine(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    av = interp.read(frame, op.operands[0])
    t = av.type.elem if isinstance(av.type, OptionalType) else av.type
    if t == NONE:
        return [AV(op.results[0].type)]
    return [AV(refine_type(op.results[0].type, t), av.value, av.items, av.origin)]


@op_rule("py.inplace")
def _inplace(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    target = interp.read(frame, op.operands[0])
    if target.tensor is not None:
        return [_with_declared(op, AV(target.type))]
    return _declared(interp, frame, op)


@op_rule("py.tuple")
def _tuple(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    return [_with_declared(op, tuple_av([interp.read(frame, v) for v in op.operands]))]


@op_rule("py.list")
def _list(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    items = [interp.read(frame, v) for v in op.operands]
    result = op.results[0]
    if result in interp.appends or result in interp.escaped:
        elem = join_all(items) if items else BOTTOM
        return [AV(op.results[0].type if is_bottom(elem) else refine_type(result.type, ListType(elem.type)))]
    return [_with_declared(op, list_av(items))]


@op_rule("py.spread")
def _spread(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    """`(*shape, -1, d)`: its items once the spread parts' items are known."""
    items: list[AV] = []
    for v, starred in zip(op.operands, op.attributes["starred"]):
        part = interp.read(frame, v)
        if not starred:
            items.append(part)
        elif part.items is None or v in interp.appends or v in interp.escaped:
            return [AV(op.results[0].type)]
        else:
            items.extend(part.items)
    return [_with_declared(op, list_av(items))]


@op_rule("py.getitem")
def _getitem(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    container = interp.read(frame, op.operands[0])
    index = interp.read(frame, op.operands[1])
    declared = op.results[0].type
    if container.items is not None and op.operands[0] not in interp.appends and \
            op.operands[0] not in interp.escaped and index.known and type(size_of(index)) is int:
        i = size_of(index)
        if -len(container.items) <= i < len(container.items):  # type: ignore[operator]
            return [_with_declared(op, container.items[i])]  # type: ignore[index]
    if isinstance(container.type, ListType):
        return [_with_declared(op, interp.list_elem(frame, op.operands[0], container))]
    if isinstance(container.type, DictType):
        value = interp.dict_read(frame, op.operands[0])
        return [_with_declared(op, value) if value is not None else AV(declared)]
    if container.items:
        return [_with_declared(op, join_all(container.items))]
    t = container.type
    if isinstance(t, TupleType) and index.known and type(size_of(index)) is int \
            and -len(t.elems) <= size_of(index) < len(t.elems):  # type: ignore[operator]
        return [_with_declared(op, AV(t.elems[size_of(index)]))]  # an argument's item: its type's
    return [AV(declared)]


@op_rule("py.dict_setitem")
def _dict_setitem(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    interp.dict_write(frame, op.operands[0], interp.read(frame, op.operands[2]))
    return []


@op_rule("py.slice")
def _slice(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    """`xs[a:b:c]` of a list whose items are known, with known bounds: those items."""
    container = interp.read(frame, op.operands[0])
    bounds = [interp.read(frame, v) for v in op.operands[1:]]
    mutable = op.operands[0] in interp.appends or op.operands[0] in interp.escaped
    if container.items is None or mutable or not all(b.known for b in bounds):
        return [AV(op.results[0].type)]
    values = [None if b.value is None else size_of(b) for b in bounds]
    if any(v is not None and type(v) is not int for v in values) or values[2] == 0:
        return [AV(op.results[0].type)]
    return [_with_declared(op, list_av(list(container.items[slice(*values)])))]


@op_rule("py.unpack")
def _unpack(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    container = interp.read(frame, op.operands[0])
    n = len(op.results)
    mutable = op.operands[0] in interp.appends or op.operands[0] in interp.escaped
    if container.items is not None and len(container.items) == n and not mutable:
        return [_with_declared(op, item, i) for i, item in enumerate(container.items)]
    if isinstance(container.type, ListType):
        elem = interp.list_elem(frame, op.operands[0], container)
        return [_with_declared(op, elem, i) for i in range(n)]
    if isinstance(container.type, TupleType) and len(container.type.elems) == n:
        return [_with_declared(op, AV(t), i) for i, t in enumerate(container.type.elems)]
    return _declared(interp, frame, op)


@op_rule("py.getattr")
def _getattr(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    obj = interp.read(frame, op.operands[0])
    name = op.attributes.get("attr") or op.attributes.get("name")
    declared = op.results[0].type
    if isinstance(obj.value, torch.nn.Module):
        read_only = (op.results[0] not in interp.appends and op.results[0] not in interp.escaped
                     and name not in interp.changed_list_attrs)
        av = interp.attr(frame, obj, name, declared, lists=read_only)
        if isinstance(declared, DictType):
            path = obj.origin + (name,) if obj.origin is not None else None
            interp.track_dict(frame, op.results[0], obj.value, name, path)
        if frame.python and av.tensor is None and not isinstance(av.value, torch.nn.Module):
            interp.read_after_python.add(op)
            return [AV(declared)]  # read after Python code that may have set it: not the entry's value
        if isinstance(declared, OptionalType) and av.origin is not None and isinstance(av.type, TensorType):
            # a tensor of the live module (`Linear.bias`): its entry check says it is not None
            return [AV(refine_type(declared.elem, av.type), av.value, av.items, av.origin)]
        return [_with_declared(op, av)]
    if obj.origin is not None and obj.value is not UNKNOWN and is_plain_object(obj.value):
        try:  # (a config: the front end read the same value; transpiler/lower_names.py)
            value = getattr(obj.value, name)
        except Exception:  # noqa: BLE001 - the object's own attribute code refuses
            return [AV(declared)]
        return [_with_declared(op, interp.value_av(frame, value, declared, obj.origin + (name,)))]
    t = obj.tensor
    if t is None:
        return [AV(declared)]
    return [_with_declared(op, tensor_attr(t, name, declared))]


def tensor_attr(t: TensorType, name: str, declared: Type) -> AV:
    shape = t.shape
    if name == "shape":
        return AV(declared) if shape is None else tuple_av([int_av(d) for d in shape])
    if name == "dtype":
        return AV(DTYPE, t.dtype if t.dtype is not None else UNKNOWN)
    if name == "device":
        return AV(DEVICE, t.device if t.device is not None and ":" not in t.device and t.device != "cuda" else UNKNOWN)
    if name == "ndim":
        return int_av(None if shape is None else len(shape))
    if name == "is_cuda" and t.device is not None:
        return AV(BOOL, t.device.startswith("cuda"))
    if name in ("T", "H"):
        return AV(TensorType(t.dtype, None if shape is None else tuple(reversed(shape)), t.device))
    if name in ("mT", "mH"):
        if shape is None or len(shape) < 2:
            return AV(TensorType(t.dtype, None, t.device))
        return AV(TensorType(t.dtype, shape[:-2] + (shape[-1], shape[-2]), t.device))
    if name == "data":
        return AV(t)
    if name in ("real", "imag"):  # (of a complex tensor: its real dtype; `real` of a real one: itself)
        parts = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
        dtype = parts.get(t.dtype) if t.dtype in parts else t.dtype if name == "real" else None
        return AV(TensorType(dtype, shape, t.device))
    return AV(declared)


@op_rule("py.binary", "py.compare")
def _binary(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    a = interp.read(frame, op.operands[0])
    b = interp.read(frame, op.operands[1])
    sym_op = op.attributes.get("op")
    declared = op.results[0].type
    if sym_op in ("is", "is not"):
        same = True if op.operands[0] is op.operands[1] else _is(a, b)
        if same is None:
            return [AV(declared)]
        return [AV(BOOL, same if sym_op == "is" else not same)]
    if a.tensor is not None or b.tensor is not None:
        if not all(x.tensor is not None or x.type in (INT, FLOAT, BOOL) for x in (a, b)):
            return [AV(declared)]
        if sym_op == "@":
            shape = matmul_shape(a.shape, b.shape)
        else:
            shape = broadcast_shapes(*[x.shape for x in (a, b) if x.tensor is not None])
        found = AV(refine_type(declared, TensorType(None, shape, None)))
        t = found.tensor
        if t is not None and (t.dtype is None or t.device is None):
            from ir.torchapi.operators import binary_result_type

            try:
                oracle = binary_result_type(sym_op, _plain(a.type), _plain(b.type))
            except Exception:  # noqa: BLE001 - torch's rules refuse: keep what is known
                oracle = None
            if isinstance(oracle, TensorType):
                found = AV(TensorType(t.dtype or oracle.dtype, t.shape, t.device or oracle.device))
        return [found]
    parts = [x.items if x.items is not None or not (x.known and isinstance(x.value, tuple))
             else [const_av(v) for v in x.value] for x in (a, b)]
    if sym_op == "+" and None not in parts and isinstance(declared, ListType) \
            and not any(v in interp.appends or v in interp.escaped for v in op.operands):
        return [_with_declared(op, list_av([*parts[0], *parts[1]]))]  # sizes put together: `x.size()[:-1] + (n,)`
    value = _scalar_binary(sym_op, a, b)
    return [AV(declared, value)]


def _is(a: AV, b: AV) -> bool | None:
    """`a is b` where one side is None: decided when the other side's None-ness is known."""
    for x, y in ((a, b), (b, a)):
        if y.type == NONE or (y.known and y.value is None):
            if x.known:
                return x.value is None
            if x.type == NONE:
                return True
            if isinstance(x.type, OptionalType) or x.type == ANY:
                return None
            if x.type is not None and not is_bottom(x):
                return False
    return None


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
}
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}


def _scalar_binary(op: str, a: AV, b: AV) -> Any:
    if not (a.known and b.known):
        return UNKNOWN
    x, y = a.value, b.value
    if isinstance(x, torch.nn.Module) or isinstance(y, torch.nn.Module):
        return UNKNOWN
    symbolic = isinstance(x, sympy.Expr) or isinstance(y, sympy.Expr)
    try:
        if op in _COMPARE:
            if symbolic:
                if not all(isinstance(v, (int, sympy.Expr)) and not isinstance(v, bool) for v in (x, y)):
                    return UNKNOWN
                rel = _COMPARE[op](sympy.sympify(x), sympy.sympify(y))
                if op in ("==", "!="):
                    eq = sympy.simplify(sympy.sympify(x) - y) == 0
                    if eq:
                        return op == "=="
                    diff = sympy.sympify(x) - y
                    if diff.is_zero is False:
                        return op == "!="
                    return UNKNOWN
                if rel in (sympy.true, sympy.false):
                    return bool(rel)
                return UNKNOWN
            return bool(_COMPARE[op](x, y))
        if a.type == INT and b.type in (INT, BOOL) or a.type == BOOL and b.type == INT:
            if op in _ARITH:
                r = _ARITH[op](x, y)
            elif op == "//":
                r = sympy.floor(sympy.sympify(x) / y) if symbolic else x // y
            elif op == "%":
                r = sympy.Mod(x, y) if symbolic else x % y
            elif op == "**" and not symbolic and y >= 0:
                r = x ** y
            elif op == "/" and not symbolic:
                return x / y
            elif not symbolic and op in ("&", "|", "^", "<<", ">>"):
                r = {"&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift,
                     ">>": operator.rshift}[op](x, y)
            else:
                return UNKNOWN
            if isinstance(r, sympy.Expr):
                r = sympy.expand(r) if not r.has(sympy.floor, sympy.Mod) else r
                return int(r) if r.is_Integer else r
            return r
        if symbolic:
            return UNKNOWN
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            fn = {**_ARITH, "/": operator.truediv, "//": operator.floordiv, "%": operator.mod,
                  "**": operator.pow}.get(op)
            return UNKNOWN if fn is None else fn(x, y)
        if isinstance(x, bool) and isinstance(y, bool) and op in ("&", "|", "^"):
            return {"&": x and y, "|": x or y, "^": x != y}[op]
    except (ZeroDivisionError, OverflowError, TypeError, ValueError):
        return UNKNOWN
    return UNKNOWN


@op_rule("py.unary")
def _unary(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    a = interp.read(frame, op.operands[0])
    sym_op = op.attributes.get("op")
    declared = op.results[0].type
    if a.tensor is not None:
        t = a.tensor
        dtype = declared.dtype if isinstance(declared, TensorType) else None
        if dtype is None and t.dtype is not None:
            from ir.torchapi.operators import unary_result_type

            try:
                r = unary_result_type(sym_op, _plain(t))
                dtype = r.dtype if isinstance(r, TensorType) else None
            except Exception:  # noqa: BLE001
                dtype = None
        return [AV(refine_type(declared, TensorType(dtype, t.shape, t.device)))]
    if not a.known or isinstance(a.value, torch.nn.Module):
        return [AV(declared)]
    v = a.value
    if sym_op == "not":
        return [AV(BOOL, not v) if isinstance(v, bool) else AV(declared)]
    if sym_op == "-" and isinstance(v, (int, float, sympy.Expr)):
        r = -v
        return [AV(declared, int(r) if isinstance(r, sympy.Expr) and r.is_Integer else r)]
    if sym_op == "+":
        return [AV(declared, v)]
    if sym_op == "~" and type(v) is int:
        return [AV(declared, ~v)]
    return [AV(declared)]


@op_rule("py.call")
def _builtin(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    callee = op.attributes.get("callee")
    args = [interp.read(frame, v) for v in op.operands]
    declared = op.results[0].type if op.results else NONE
    if not op.results:
        return []
    if callee == "len" and len(args) == 1:
        a = args[0]
        if a.items is not None and op.operands[0] not in interp.appends and op.operands[0] not in interp.escaped:
            return [AV(INT, len(a.items))]
        if a.shape:
            return [int_av(a.shape[0])]
        return [AV(declared)]
    if callee == "bool" and len(args) == 1 and isinstance(op.operands[0].type, (ListType, TupleType)):
        a = args[0]  # (`if to_cat:` of a list display: its length decides, as len() does)
        if a.items is not None and op.operands[0] not in interp.appends and op.operands[0] not in interp.escaped:
            return [AV(BOOL, bool(a.items))]
        return [AV(declared)]
    if callee == "sum" and len(args) == 1 and isinstance(declared, TensorType):
        a = args[0]  # (a list of tensors: 0 + x0 + x1 ..., of one type where the items are alike)
        if a.items and op.operands[0] not in interp.appends and op.operands[0] not in interp.escaped \
                and all(isinstance(i.type, TensorType) and i.type == a.items[0].type for i in a.items) \
                and a.items[0].type.dtype not in (None, "bool"):  # type: ignore[attr-defined]
            return [AV(a.items[0].type)]
        return [AV(declared)]
    if callee in ("min", "max") and len(args) >= 2 and all(a.known and a.type in (INT, BOOL) for a in args):
        vals = [a.value for a in args]
        if all(type(v) is int for v in vals):
            return [AV(INT, (min if callee == "min" else max)(vals))]
        r = (sympy.Min if callee == "min" else sympy.Max)(*vals)
        return [AV(INT, int(r) if r.is_Integer else r)]
    if not all(a.known for a in args) or any(isinstance(a.value, (sympy.Expr, torch.nn.Module)) for a in args):
        return [AV(declared)]
    vals = [a.value for a in args]
    try:
        if callee in ("int", "float", "bool", "abs") and len(vals) == 1 and isinstance(vals[0], (int, float, bool)):
            return [AV(declared, {"int": int, "float": float, "bool": bool, "abs": abs}[callee](vals[0]))]
        if callee in ("min", "max") and vals and all(isinstance(v, (int, float)) for v in vals):
            return [AV(declared, (min if callee == "min" else max)(vals))]
        if isinstance(callee, str) and callee.startswith("str."):
            folded, value = str_method_value(callee, vals)
            return [AV(declared, value) if folded else AV(declared)]
        if isinstance(callee, str) and callee.startswith("math.") and all(isinstance(v, (int, float)) for v in vals):
            fn = getattr(math, callee[5:], None)
            if callable(fn):
                return [AV(declared, fn(*vals))]
    except (ValueError, OverflowError, TypeError, ZeroDivisionError):
        pass
    return [AV(declared)]


@op_rule("torch.call", "torch.method")
def _torch(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    if not op.results:
        return []
    operands = [interp.operand(frame, v) for v in op.operands]
    kwnames = list(op.attributes.get("kwnames", ()))
    n_pos = len(operands) - len(kwnames)
    pos, kw = operands[:n_pos], dict(zip(kwnames, operands[n_pos:]))
    if op.name == "torch.method":
        kind, name = "method", op.attributes["method"]
    else:
        kind, name = "function", op.attributes["callee"]
    call = TorchCall(kind, name, pos, kw, op.attributes.get("aten"), op.results[0].type,
                     tuple(op.attributes.get("mutates", ())), op.attributes.get("alias_of"))
    return [infer_call(call)]


@op_rule("torch.index")
def _index(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    base = interp.read(frame, op.operands[0])
    parts = [interp.read(frame, v) for v in op.operands[1:]]
    found = index_result(base, op.attributes.get("items", ()), parts)
    return [_with_declared(op, found)]


@op_rule("module.call")
def _module_call(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    if not op.results:
        return []
    operands = [interp.operand(frame, v) for v in op.operands]
    kwnames = list(op.attributes.get("kwnames", ()))
    n_pos = len(operands) - len(kwnames)
    args, kw = operands[1:n_pos], dict(zip(kwnames, operands[n_pos:]))
    origins = [a.origin for a in args]
    return [_with_declared(op, interp.call_module(frame, operands[0], args, kw, op.results[0].type, origins))]


@op_rule("func.call")
def _func_call(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    callee = interp.funcs.get(op.attributes.get("callee"))
    if callee is None or len(op.operands) != len(callee.args):
        return _declared(interp, frame, op)
    args = [interp.operand(frame, v) for v in op.operands]
    origins = [a.origin for a in args]
    result = interp.run_function(callee, args, frame, origins)
    return [_with_declared(op, result)] if op.results else []


# -- control flow ---------------------------------------------------------------------------------
@op_rule("scf.if")
def _if(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    assert isinstance(op, ops.IfOp)
    cond = interp.read(frame, op.cond)
    if cond.known and isinstance(cond.value, bool):
        outs = interp.run_block(frame, op.then_block if cond.value else op.else_block)
    else:
        before = frame.python
        a = interp.run_block(frame, op.then_block)
        after_then, frame.python = frame.python, before
        b = interp.run_block(frame, op.else_block)
        frame.python = frame.python or after_then
        outs = [join(x, y) for x, y in zip(a, b)]
    return [_fit(op, o, i) for i, o in enumerate(outs)]


def _fit(op: Operation, av: AV, index: int) -> AV:
    if is_bottom(av):
        return av
    return _with_declared(op, av, index)


def runs_python(op: Operation) -> bool:
    """Code kept as Python (permissive mode): it may set any module's attributes."""
    return isinstance(op, ops.OpaqueOp) and op.has_trait(OPAQUE)


def loop_runs_python(op: Operation) -> bool:
    """A loop whose body keeps Python: its next iteration starts after it."""
    return any(runs_python(inner) for region in op.regions for block in region.blocks for o in block.ops
               for inner in o.walk())


def _run_loop(interp: Interpreter, frame: Frame, body: Block, extra: list[AV], inits: list[AV],
              n_extra: int) -> list[AV]:
    """Iterate a loop body to a fixpoint; the join of the initial and every yielded carried value."""
    carried = list(inits)
    for _ in range(MAX_ITERATIONS):
        outs = _run_body(interp, frame, body, extra, carried, n_extra)
        new = [join(c, o) for c, o in zip(carried, outs)]
        if new == carried:
            return carried
        carried = new
    carried = [AV(a.type) for a in body.args[n_extra:]]
    _run_body(interp, frame, body, extra, carried, n_extra)
    return carried


def _run_body(interp: Interpreter, frame: Frame, body: Block, extra: list[AV], carried: list[AV],
              n_extra: int) -> list[AV]:
    for arg, av in zip(body.args, extra + carried):
        interp.record(frame, arg, av)
    outs = interp.run_block(frame, body)
    if isinstance(body.terminator, ops.ConditionOp):
        outs = outs[1:]
    return outs


@op_rule("scf.for")
def _for(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    assert isinstance(op, ops.ForRangeOp)
    frame.python = frame.python or loop_runs_python(op)
    inits = [interp.read_raw(frame, v) for v in op.inits]
    out = _run_loop(interp, frame, op.body, [AV(INT)], inits, 1)
    return [_fit(op, o, i) for i, o in enumerate(out)]


@op_rule("scf.for_each")
def _for_each(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    assert isinstance(op, ops.ForEachOp)
    frame.python = frame.python or loop_runs_python(op)
    iterable = interp.read(frame, op.operands[0])
    inits = [interp.read_raw(frame, v) for v in op.inits]
    mutable = op.operands[0] in interp.appends or op.operands[0] in interp.escaped
    early_exit = isinstance(op.body.terminator, ops.ConditionOp)
    if iterable.items is not None and not mutable and len(iterable.items) <= MAX_UNROLL:
        carried = list(inits)
        seen = list(inits) if not iterable.items or early_exit else [BOTTOM] * len(inits)
        for item in iterable.items:
            carried = _run_body(interp, frame, op.body, [item], carried, 1)
            if early_exit:
                seen = [join(s, c) for s, c in zip(seen, carried)]
        out = seen if early_exit or not iterable.items else carried
        return [_fit(op, o, i) for i, o in enumerate(out)]
    if isinstance(iterable.type, ListType):
        elem = interp.list_elem(frame, op.operands[0], iterable)
    elif iterable.items:
        elem = join_all(iterable.items)
    else:
        elem = AV(op.body.args[0].type)
    out = _run_loop(interp, frame, op.body, [elem], inits, 1)
    return [_fit(op, o, i) for i, o in enumerate(out)]


@op_rule("scf.while")
def _while(interp: Interpreter, frame: Frame, op: Operation) -> list[AV]:
    assert isinstance(op, ops.WhileOp)
    frame.python = frame.python or loop_runs_python(op)
    carried = [interp.read_raw(frame, v) for v in op.operands]
    results = [BOTTOM] * len(op.results)
    for iteration in range(MAX_ITERATIONS + 1):
        if iteration == MAX_ITERATIONS:
            carried = [AV(a.type) for a in op.before.args]
        for arg, av in zip(op.before.args, carried):
            interp.record(frame, arg, av)
        outs = interp.run_block(frame, op.before)
        cond, passed = outs[0], outs[1:]
        results = [join(r, p) for r, p in zip(results, passed)]
        if cond.known and cond.value is False:
            break
        for arg, av in zip(op.after.args, passed):
            interp.record(frame, arg, av)
        ys = interp.run_block(frame, op.after)
        new = [join(c, y) for c, y in zip(carried, ys)]
        if new == carried or iteration == MAX_ITERATIONS:
            # One more pass of the condition with the final carried values is already included.
            break
        carried = new
    return [_fit(op, o, i) for i, o in enumerate(results)]

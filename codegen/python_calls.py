"""Calls in the emitted function: torch functions (`F.conv2d(...)`, trailing defaults left out),
tensor methods, submodules, other compiled functions, runtime helpers (`_guards.`, `_prepacked.`,
...), kernel launchers, tensors computed once and the buffers a function keeps between calls."""

from __future__ import annotations

import types

import torch

from codegen.launcher_text import kernel_args
from codegen.names import function_name
from codegen.python_emitter import PythonEmitter, Rules
from codegen.python_text import PREC, Expr, string_literal
from ir.core import ops
from ir.core.graph import Operation, Value
from ir.core.helpers import COMPUTED_ONCE, GIVE_BUFFERS, TAKE_BUFFERS, helper
from ir.core.types import INT
from ir.kernel import ops as kernel_ops
from ir.torchapi.schemas import Param, schemas

FUNCTION_ALIASES = (("torch.nn.functional.", "F."),)
# Tensor methods whose one argument of sizes may be passed spread: `x.view(2, 3)` is `x.view((2, 3))`.
SIZE_VARARG_METHODS = frozenset({"permute", "reshape", "view", "expand", "repeat"})

RULES = Rules()


@RULES.expression(ops.TorchCallOp)
def torch_call(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    callee = a["callee"]
    for long, short in FUNCTION_ALIASES:
        if callee.startswith(long):
            callee = short + callee[len(long):]
            em.needs.add("F")
    values = op.operands if a.get("kwnames") else op.operands[:len(op.operands) - default_tail(a["callee"], op.operands)]
    return Expr(f"{callee}({em.args_text(values, a.get('kwnames', ()))})", PREC["atom"])


@RULES.expression(ops.TensorMethodOp)
def tensor_method(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    obj = em.expr(op.operands[0], PREC["atom"]).text
    spread = spread_sizes(em, op)
    args = spread if spread is not None else em.args_text(op.operands[1:], a.get("kwnames", ()))
    return Expr(f"{obj}.{a['method']}({args})", PREC["atom"])


@RULES.expression(ops.ModuleCallOp)
def module_call(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    obj = em.expr(op.operands[0], PREC["atom"]).text
    return Expr(f"{obj}({em.args_text(op.operands[1:], a.get('kwnames', ()))})", PREC["atom"])


@RULES.expression(ops.MethodCallOp)
def method_call(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    obj = em.expr(op.operands[0], PREC["atom"]).text
    return Expr(f"{obj}.{a['method']}({em.args_text(op.operands[1:], a.get('kwnames', ()))})", PREC["atom"])


@RULES.expression(ops.FuncCallOp)
def func_call(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    return Expr(f"{function_name(a['callee'])}({em.args_text(op.operands, ())})", PREC["atom"])


@RULES.expression(ops.BuiltinCallOp)
def builtin_call(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    if a["callee"].startswith("math."):
        em.needs.add("math")
    called = helper(a["callee"])
    if called is not None:
        em.needs.add(called.home.alias)
    if a["callee"].startswith(("dict.", "str.")):  # a dict's or str's own method: `d.get(k)`, `s.startswith(p)`
        obj = em.expr(op.operands[0], PREC["atom"]).text
        method = a["callee"].partition(".")[2]
        called = f"{obj}.{method}({em.args_text(op.operands[1:], ())})"
        if a["callee"] in ("dict.items", "dict.keys", "dict.values"):  # a list, as the IR types it
            return Expr(f"list({called})", PREC["atom"])
        return Expr(called, PREC["atom"])
    return Expr(f"{a['callee']}({em.args_text(op.operands, ())})", PREC["atom"])


@RULES.expression(kernel_ops.Kernel)  # the module's launcher of the kernel (codegen/launcher_text.py kernel_args)
def kernel_launch(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    return Expr(f"{a['name']}({em.args_text(list(kernel_args(op).values), ())})", PREC["atom"])


@RULES.statement(kernel_ops.Kernel)
def kernel_statement(em: PythonEmitter, op: Operation) -> None:
    """A kernel with several outputs assigns them together (`_` for one nothing reads)."""
    if len(op.results) > 1 and any(r.uses for r in op.results):
        targets = [em.name_of(r) if r.uses else "_" for r in op.results]
        em.w.line(f"{', '.join(targets)} = {em.op_expr(op).text}")
    else:
        em.assignment(op)


@RULES.expression(ops.ComputedOnceOp)  # (ir/passes/hoist.py)
def computed_once(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    em.needs.add(COMPUTED_ONCE.home.alias)
    n = a["sources"]
    parts = [function_name(a["callee"]), em.tuple_display(op.operands[:n])]
    if op.operands[n:]:
        parts.append(em.tuple_display(op.operands[n:]))
    return Expr(f"{COMPUTED_ONCE}({', '.join(parts)})", PREC["atom"])


@RULES.expression(kernel_ops.TakeBuffersOp)  # (ir/passes/plan.py: buffers kept between calls)
def take_buffers(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    em.needs.add(TAKE_BUFFERS.home.alias)
    return Expr(f"{TAKE_BUFFERS}({string_literal(a['key'])})", PREC["atom"])


@RULES.expression(kernel_ops.BufferOp)
def buffer(em: PythonEmitter, op: Operation) -> Expr:
    a = op.attributes
    buffers, sizes = (em.expr(v, PREC["atom"]).text for v in op.operands)
    return Expr(f"{buffers}.get({a['slot']}, {sizes}, torch.{a['dtype']})", PREC["atom"])


@RULES.expression(kernel_ops.GiveBuffersOp)
def give_buffers(em: PythonEmitter, op: Operation) -> Expr:
    return Expr(f"{GIVE_BUFFERS}({em.expr(op.operands[0]).text})", PREC["atom"])


def spread_sizes(em: PythonEmitter, op: Operation) -> str | None:
    """`x.permute(0, 2, 3, 1)` for `x.permute((0, 2, 3, 1))`: the methods that take their sizes
    as one sequence or spread parse a tuple through a slower path (about 1.5 against 1.0 us a
    `permute`, 1.3 against 0.8 a `reshape`; many a call in channels-last models). Only a tuple
    written out (a literal or a display of one item or more) is spread."""
    if op.attributes["method"] not in SIZE_VARARG_METHODS or len(op.operands) != 2 or op.attributes.get("kwnames"):
        return None
    owner = op.operands[1].owner
    if isinstance(owner, ops.ConstantOp) and isinstance(owner.value, tuple) and owner.value \
            and all(type(v) is int for v in owner.value):
        return ", ".join(em.literal(v).text for v in owner.value)
    if isinstance(owner, ops.TupleOp) and owner.operands and owner in em.folded and not owner.named \
            and all(v.type == INT for v in owner.operands):
        return ", ".join(em.expr(v, PREC["if"]).text for v in owner.operands)
    return None


def default_tail(callee: str, values: list[Value]) -> int:
    """How many of the last arguments of a call of `callee` (positional, `values`) go without
    saying: constants that every overload of its operator has as the default there
    (`F.conv2d(x, w, None, (2, 2), (1, 1))`, not `..., (1, 1), 1)`), where the function is
    torch's own binding of `aten::<name>`, which fills in the defaults of its schema."""
    module, _, name = callee.rpartition(".")
    fn = getattr(torch.nn.functional if module == "torch.nn.functional" else torch if module == "torch" else None, name, None)
    if fn is None or fn is not getattr(torch, name, None) or not isinstance(fn, types.BuiltinFunctionType):
        return 0
    overloads = schemas(name)
    dropped = 0
    for i in range(len(values) - 1, -1, -1):
        owner = values[i].owner
        if not overloads or not isinstance(owner, ops.ConstantOp) \
                or not all(_is_default(sig.params[i], owner.attributes["value"]) if i < len(sig.params) else False
                           for sig in overloads):
            break
        dropped += 1
    return dropped


def _is_default(param: Param, value: object) -> bool:
    """Whether `value` is what `param` (positional, with a default) takes when it is left out: an
    `int[N]` default is a lone int standing for N of them."""
    if param.kwarg_only or not param.has_default:
        return False
    default = param.default
    if type(default) is int and param.size and isinstance(value, tuple):
        return len(value) == param.size and all(type(v) is int and v == default for v in value)
    if isinstance(default, list) and isinstance(value, tuple):
        return list(value) == default and all(type(v) is type(d) for v, d in zip(value, default))
    return type(value) is type(default) and value == default

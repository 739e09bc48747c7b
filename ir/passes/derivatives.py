"""Derivatives of pointwise ops, one rule per op, for the backward kernels of
ir/passes/autograd_kernels.py.

A rule reads the op's arguments by parameter name (`self`, `other`, `condition`, `min`, ...:
each the element value inside the kernel, or a Python constant), the element of its result and
the gradient of that result, and builds through an `Emitter` the gradient's contribution to
each tensor argument it differentiates. The formulas are those of torch's derivatives.yaml and
its CPU backward kernels, in their order of operations, so that a fused backward gives eager's
gradients up to rounding; where eager reads an op's result (sigmoid, tanh, exp, relu), the rule
reads the result the backward kernel recomputed. `check` says whether an op's constant
arguments are ones the rule covers (`alpha=1`, a number exponent, clamp's bounds numbers):
an op it refuses stays a torch call outside the group.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from ir.core.graph import Value
from ir.passes.emitter import Emitter

Args = dict[str, Any]  # parameter name -> element value, or a Python constant
Grads = dict[str, Value]  # parameter name -> its gradient's contribution


@dataclass(frozen=True)
class Derivative:
    grad: Callable[[Emitter, Args, Value, Value], Grads]
    check: Callable[[Args], bool] = lambda args: True


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _tensor_or_number(*names: str) -> Callable[[Args], bool]:
    return lambda args: all(isinstance(args.get(n), Value) or _number(args.get(n)) for n in names)


def _unit_alpha(args: Args) -> bool:
    return args.get("alpha", 1) == 1 and _tensor_or_number("self", "other")(args)


def _where_zero(e: Emitter, keep: Value, g: Value) -> Value:
    """g where `keep`, else 0 (of g's dtype)."""
    return e.call("torch.where", keep, g, 0)


def _add(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": g, "other": g}


def _sub(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": g, "other": e.unary("-", g)}


def _mul(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", g, a["other"]), "other": e.binary("*", g, a["self"])}


def _div(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (derivatives.yaml: grad / other, and -grad * ((self / other) / other))
    x, y = a["self"], a["other"]
    return {"self": e.binary("/", g, y),
            "other": e.binary("*", e.unary("-", g), e.binary("/", e.binary("/", x, y), y))}


def _neg(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.unary("-", g)}


def _exp(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", g, r)}


def _expm1(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", g, e.binary("+", r, 1))}


def _log(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("/", g, a["self"])}


def _log1p(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("/", g, e.binary("+", a["self"], 1))}


def _tanh(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (tanh_backward: grad * (1 - y * y))
    return {"self": e.binary("*", g, e.binary("-", 1, e.binary("*", r, r)))}


def _sigmoid(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (sigmoid_backward: grad * (1 - y) * y)
    return {"self": e.binary("*", e.binary("*", g, e.binary("-", 1, r)), r)}


def _sigmoid_of(e: Emitter, x: Value) -> Value:
    return e.call("torch.reciprocal", e.binary("+", 1, e.call("torch.exp", e.unary("-", x))))


def _silu(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (silu_backward: grad * s * (1 + x * (1 - s)), s = sigmoid(x))
    x = a["self"]
    s = _sigmoid_of(e, x)
    return {"self": e.binary("*", e.binary("*", g, s), e.binary("+", 1, e.binary("*", x, e.binary("-", 1, s))))}


def _relu(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (threshold_backward(grad, result, 0): 0 where the result is <= 0, NaN's gradient kept)
    return {"self": e.call("torch.where", e.binary("<=", r, 0), 0, g)}


def _hardtanh(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (hardtanh_backward: 0 where x <= min_val or x >= max_val, both bounds excluded; NaN's kept)
    x, low, high = a["self"], a.get("min_val", -1.0), a.get("max_val", 1.0)
    return {"self": e.call("torch.where", e.binary("<=", x, low), 0, e.call("torch.where", e.binary(">=", x, high), 0, g))}


def _relu6(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return _hardtanh(e, {"self": a["self"], "min_val": 0.0, "max_val": 6.0}, r, g)


def _clamp(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (clamp_backward: grad where min <= x <= max, both bounds included; 0 at NaN)
    x = a["self"]
    if a.get("max") is not None:
        g = _where_zero(e, e.binary("<=", x, a["max"]), g)
    if a.get("min") is not None:
        g = _where_zero(e, e.binary(">=", x, a["min"]), g)
    return {"self": g}


def _clamp_min(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": _where_zero(e, e.binary(">=", a["self"], a["min"]), g)}


def _clamp_max(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": _where_zero(e, e.binary("<=", a["self"], a["max"]), g)}


def _clamp_bounds(args: Args) -> bool:
    bounds = [args.get("min"), args.get("max")]
    return isinstance(args.get("self"), Value) and all(b is None or _number(b) for b in bounds) \
        and any(b is not None for b in bounds)


def _where(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    c = a["condition"]
    return {"self": _where_zero(e, c, g), "other": e.call("torch.where", c, 0, g)}


def _abs(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (grad * sgn(x): sgn is 0 at 0 and at NaN, and g * 0 keeps an infinite g's NaN)
    x = a["self"]
    zero = e.binary("*", g, 0)
    return {"self": e.call("torch.where", e.binary(">", x, 0), g,
                           e.call("torch.where", e.binary("<", x, 0), e.unary("-", g), zero))}


def _pow(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (pow_backward: grad * (exponent * x ** (exponent - 1)); exponent 0 is refused by check)
    c = a["exponent"]
    return {"self": e.binary("*", g, e.binary("*", c, e.call("torch.pow", a["self"], c - 1)))}


def _pow_number(args: Args) -> bool:
    return isinstance(args.get("self"), Value) and _number(args.get("exponent")) and args["exponent"] != 0


def _sqrt(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("/", g, e.binary("*", 2, r))}


def _rsqrt(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (-0.5 * grad * result ** 3)
    return {"self": e.binary("*", e.binary("*", -0.5, g), e.binary("*", e.binary("*", r, r), r))}


def _reciprocal(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", e.unary("-", g), e.binary("*", r, r))}


def _sin(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", g, e.call("torch.cos", a["self"]))}


def _cos(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    return {"self": e.binary("*", g, e.unary("-", e.call("torch.sin", a["self"])))}


def _erf(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    x = a["self"]
    return {"self": e.binary("*", e.binary("*", 2.0 / math.sqrt(math.pi),
                                           e.call("torch.exp", e.unary("-", e.binary("*", x, x)))), g)}


def _gelu(e: Emitter, a: Args, r: Value, g: Value) -> Grads:
    # (gelu_backward, the CPU kernel's formulas for either approximation)
    x = a["self"]
    if a.get("approximate", "none") == "none":
        alpha = 2.0 / math.sqrt(math.pi) * math.sqrt(0.5) * 0.5
        cdf = e.binary("*", 0.5, e.binary("+", 1, e.call("torch.erf", e.binary("*", x, math.sqrt(0.5)))))
        pdf = e.binary("*", alpha, e.call("torch.exp", e.binary("*", e.binary("*", x, x), -0.5)))
        return {"self": e.binary("*", g, e.binary("+", cdf, e.binary("*", x, pdf)))}
    beta, kappa = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, 0.044715
    square = e.binary("*", x, x)
    inner = e.binary("*", beta, e.binary("+", x, e.binary("*", kappa, e.binary("*", square, x))))
    t = e.call("torch.tanh", inner)
    left = e.binary("*", 0.5, x)
    left_derivative = e.binary("*", 0.5, e.binary("+", 1, t))
    inner_derivative = e.binary("*", beta, e.binary("+", 1, e.binary("*", 3 * kappa, square)))
    right_derivative = e.binary("*", e.binary("*", left, e.binary("-", 1, e.binary("*", t, t))), inner_derivative)
    return {"self": e.binary("*", g, e.binary("+", left_derivative, right_derivative))}


def _approximation(args: Args) -> bool:
    return isinstance(args.get("self"), Value) and args.get("approximate", "none") in ("none", "tanh")


def _one_tensor(args: Args) -> bool:
    return isinstance(args.get("self"), Value)


DERIVATIVES: dict[str, Derivative] = {
    "add": Derivative(_add, _unit_alpha),
    "sub": Derivative(_sub, _unit_alpha),
    "mul": Derivative(_mul, _tensor_or_number("self", "other")),
    "div": Derivative(_div, lambda a: a.get("rounding_mode") is None and _tensor_or_number("self", "other")(a)),
    "neg": Derivative(_neg, _one_tensor),
    "exp": Derivative(_exp, _one_tensor),
    "expm1": Derivative(_expm1, _one_tensor),
    "log": Derivative(_log, _one_tensor),
    "log1p": Derivative(_log1p, _one_tensor),
    "tanh": Derivative(_tanh, _one_tensor),
    "sigmoid": Derivative(_sigmoid, _one_tensor),
    "silu": Derivative(_silu, lambda a: _one_tensor(a) and a.get("inplace") in (None, False)),
    "relu": Derivative(_relu, lambda a: _one_tensor(a) and a.get("inplace") in (None, False)),
    "clamp": Derivative(_clamp, _clamp_bounds),
    "hardtanh": Derivative(_hardtanh, lambda a: _one_tensor(a) and a.get("inplace") in (None, False)
                           and _number(a.get("min_val", -1.0)) and _number(a.get("max_val", 1.0))
                           and a.get("min_val", -1.0) <= a.get("max_val", 1.0)),
    "relu6": Derivative(_relu6, lambda a: _one_tensor(a) and a.get("inplace") in (None, False)),
    "clamp_min": Derivative(_clamp_min, lambda a: _one_tensor(a) and _number(a.get("min"))),
    "clamp_max": Derivative(_clamp_max, lambda a: _one_tensor(a) and _number(a.get("max"))),
    "where": Derivative(_where, lambda a: isinstance(a.get("condition"), Value)
                        and _tensor_or_number("self", "other")(a)),
    "abs": Derivative(_abs, _one_tensor),
    "pow": Derivative(_pow, _pow_number),
    "sqrt": Derivative(_sqrt, _one_tensor),
    "rsqrt": Derivative(_rsqrt, _one_tensor),
    "reciprocal": Derivative(_reciprocal, _one_tensor),
    "sin": Derivative(_sin, _one_tensor),
    "cos": Derivative(_cos, _one_tensor),
    "erf": Derivative(_erf, _one_tensor),
    "gelu": Derivative(_gelu, _approximation),
}

# The arguments each rule differentiates (the others: a condition, bounds, an exponent).
DIFFERENTIABLE = ("self", "other")

__all__ = ["DERIVATIVES", "DIFFERENTIABLE", "Derivative"]

"""The element operations of fused kernels, one table for both backends: per op of
ir/kernel/vocabulary.py's FUSIBLE, what it is (its operands and how each is converted, what
rounding its result needs) and how the C++ (codegen/cpp_elements.py) and Triton
(codegen/triton_kernels.py) emitters spell it. An emitter converts the operands as the entry
says, fills in the spelling and rounds the result; neither holds a list of op names.

A spelling is a format over the converted operands (`{0} + {1}`; `{one}` is 1 of the computation
type, `float(1)` or `1.0`; `{t}` the C++ computation type), or a function of the `Parts` where a
format is not enough. An op that takes another form for some operands (`x ** 2` is `x * x`,
`c / x` for a number `c` is reciprocal(x) * c) names that form (`FORMS`), which is spelled in
its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Union

import torch

from ir.core import ops
from ir.core.graph import Operation, Value
from ir.core.types import BOOL, FLOAT, INT, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import op_name


@dataclass(frozen=True)
class Parts:
    """What a backend fills a spelling with: the operands converted as the entry says (`args`),
    1 of the computation type (`one`), the C++ computation type (`t`), whether the result is a
    float (`floating`), a value rounded to the result's dtype (`rounded`, for 16-bit floats)
    and operand i as a typed value (`typed`: Triton makes a constant a 0-d tensor of the dtype)."""

    args: list[str]
    one: str
    t: str
    floating: bool
    rounded: Callable[[str], str]
    typed: Callable[[int], str]

    def fill(self, spelling: "Spelling") -> str:
        return spelling.format(*self.args, one=self.one, t=self.t) if isinstance(spelling, str) else spelling(self)


Spelling = Union[str, Callable[[Parts], str]]
# How an operand is converted: to the dtype the op computes in ("value"), left as it is ("as is":
# a truth value the spelling tests), or cast to the result's dtype, rounded there ("cast").
Operand = Literal["value", "as is", "cast"]


@dataclass(frozen=True)
class Element:
    """One element operation. `operands`: how each is converted. `computes_in`: the dtype the
    operands are converted to, the result's or torch.result_type of the operands ("promoted":
    comparisons). `rounding` of a 16-bit float result: "rounded" after the op, as eager rounds
    each op's result; "exact": the result is exact in its operand's dtype (neg, floor; a cast
    rounds itself); "selects": the result is one of its operands (maximum, where), exact where
    they are 16-bit values already (C++, which rounds a number operand first; Triton holds a
    number in float32 and rounds). `floats_only`: on an integer result the op is its operand
    (floor of an int). `in_float`: the positions of operands torch's CPU kernels read in float in
    16-bit math when they are a one-element tensor, `numbers_in_float` when they are a number
    (`c * x` is `x * c`: either side of mul). `transcendental`, `divides`: what the C++
    emitter weighs to decide on four elements at a time and rows of their own. `form`: the
    name of another form (`FORMS`) the op takes for some operands, or None."""

    operands: tuple[Operand, ...]
    cpp: Spelling
    triton: Spelling
    computes_in: Literal["result", "promoted"] = "result"
    rounding: Literal["rounded", "exact", "selects"] = "rounded"
    floats_only: bool = False
    in_float: tuple[int, ...] = ()
    numbers_in_float: tuple[int, ...] = ()
    transcendental: bool = False
    divides: bool = False
    form: Callable[[Operation], str | None] | None = None

    @property
    def arity(self) -> int:
        return len(self.operands)

    def rounds(self, operands_16bit: bool) -> bool:
        """Whether a 16-bit float result is rounded after the op, on a backend whose operands of
        16-bit math are 16-bit values (`operands_16bit`: C++, which rounds a number first) or not
        (Triton, which holds a number in float32)."""
        return self.rounding == "rounded" or (self.rounding == "selects" and not operands_16bit)

    def reads_in_float(self, i: int, number: bool) -> bool:
        """Whether operand i, one element (a `number`, else a one-element tensor), is read in float."""
        return i in (self.numbers_in_float if number else self.in_float)


def _pow_form(op: Operation) -> str | None:
    """x ** c with a constant exponent as torch's kernels special-case it."""
    exponent = op.operands[1].owner
    c = exponent.attributes.get("value") if isinstance(exponent, ops.ConstantOp) else None
    return _POW_FORMS.get(c) if isinstance(c, (int, float)) else None


_POW_FORMS = {2: "square", 0.5: "sqrt", 1: "pow_one", -1: "reciprocal"}


def _erf_form(op: Operation) -> str | None:
    """erf whose every use is `1 + erf(x)` (GELU, the normal CDF): the sum keeps erf's error
    relative to 1 only, so a cheaper erf accurate to that serves (vecmath.h's ts_erf_fast)."""
    uses = op.results[0].uses
    return "erf_in_one_plus" if uses and all(_adds_one(u.op) for u in uses) else None


def _adds_one(op: Operation) -> bool:
    if op_name(op) != "add" or len(op.operands) != 2:
        return False
    return any(isinstance(v.owner, ops.ConstantOp) and v.owner.attributes.get("value") == 1 for v in op.operands)


def _div_form(op: Operation) -> str | None:
    # `c / x` is x.__rtruediv__(c), which is reciprocal(x) * c in eager: two ops, two roundings
    return None if isinstance(op.operands[0].type, TensorType) else "rdiv"


def _rdiv(p: Parts) -> str:
    """`c / x` as eager computes it: reciprocal(x), rounded, times c."""
    return f"{p.rounded(p.fill('{one} / {1}'))} * {p.args[0]}"


def _math(cpp: str, triton: str, **facts: bool) -> Element:
    """A function of one float (`exp`): on an integer result, the operand itself."""
    return Element(("value",), cpp, triton, floats_only=True, **facts)  # type: ignore[arg-type]


def _infix(sign: str, **facts: object) -> Element:
    return Element(("value", "value"), f"{{0}} {sign} {{1}}", f"{{0}} {sign} {{1}}", **facts)  # type: ignore[arg-type]


def _compare(sign: str) -> Element:
    return Element(("value", "value"), f"{{0}} {sign} {{1}}", f"{{0}} {sign} {{1}}", computes_in="promoted")


def _maximum() -> Element:
    return Element(("value", "value"), "ts_max({0}, {1})", "ts_maximum({0}, {1})", rounding="selects")


def _minimum() -> Element:
    return Element(("value", "value"), "ts_min({0}, {1})", "ts_minimum({0}, {1})", rounding="selects")


# Transcendentals in C++ are codegen/cpp_math.py's (vectorisable, within 2 ulp of the correctly
# rounded result; docs/cpp_math.md); what the hardware does exactly stays std::. Triton's
# helpers (ts_tanh, ...) stand for what libdevice has and the interpreter lacks.
ELEMENTS: dict[str, Element] = {
    "add": _infix("+"),
    "sub": _infix("-"),
    "mul": _infix("*", in_float=(1,), numbers_in_float=(0, 1)),
    "div": _infix("/", in_float=(1,), numbers_in_float=(1,), divides=True, form=_div_form),
    "neg": Element(("value",), "-{0}", "-{0}", rounding="exact"),
    "abs": Element(("value",), "std::abs({0})", "tl.abs({0})", rounding="exact"),
    "exp": _math("torchscribe::ts_exp({0})", "tl.exp({0})", transcendental=True),
    "expm1": _math("torchscribe::ts_expm1({0})", "ts_expm1({0})", transcendental=True),
    "log": _math("torchscribe::ts_log({0})", "tl.log({0})", transcendental=True),
    "log1p": _math("torchscribe::ts_log1p({0})", "ts_log1p({0})", transcendental=True),
    "tanh": _math("torchscribe::ts_tanh({0})", "ts_tanh({0})", transcendental=True),
    "erf": Element(("value",), "torchscribe::ts_erf({0})", "tl.math.erf({0})", floats_only=True, transcendental=True,
                   form=_erf_form),
    "sin": _math("torchscribe::ts_sin({0})", "tl.sin({0})", transcendental=True),
    "cos": _math("torchscribe::ts_cos({0})", "tl.cos({0})", transcendental=True),
    "sqrt": _math("std::sqrt({0})", "ts_sqrt({0})", divides=True),
    "rsqrt": _math("{one} / std::sqrt({0})", "1.0 / ts_sqrt({0})", divides=True),
    "reciprocal": _math("{one} / {0}", "1.0 / {0}", divides=True),
    "floor": Element(("value",), "std::floor({0})", "tl.floor({0})", rounding="exact", floats_only=True),
    "ceil": Element(("value",), "std::ceil({0})", "tl.ceil({0})", rounding="exact", floats_only=True),
    "trunc": Element(("value",), "std::trunc({0})", "ts_trunc({0})", rounding="exact", floats_only=True),
    # NaN-propagating (std::max and tl.maximum are not): kernels.h's ts_max, triton_helpers'
    "maximum": _maximum(),
    "clamp_min": _maximum(),
    "minimum": _minimum(),
    "clamp_max": _minimum(),
    "where": Element(("as is", "value", "value"),
                     lambda p: p.fill("sel({0}, {1}, {2})" if p.floating else "({0} ? {1} : {2})"),
                     "tl.where({0}, {1}, {2})", rounding="selects"),
    "eq": _compare("=="),
    "ne": _compare("!="),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
    "logical_not": Element(("as is",), "!({0} != 0)", "{0} == 0"),
    "to": Element(("cast",), "{0}", "{0}", rounding="exact"),
    "pow": Element(("value", "value"), "static_cast<{t}>(std::pow({0}, {1}))",
                   lambda p: f"ts_pow({p.typed(0)}, {p.typed(1)})", transcendental=True, form=_pow_form),
}

# The other forms an op takes (`Element.form`), spelled in its place.
FORMS: dict[str, Element] = {
    "square": Element(("value", "value"), "{0} * {0}", "{0} * {0}"),
    "pow_one": Element(("value", "value"), "{0}", "{0}"),
    "sqrt": ELEMENTS["sqrt"],
    "reciprocal": ELEMENTS["reciprocal"],
    "rdiv": Element(("value", "value"), _rdiv, _rdiv, in_float=(1,), numbers_in_float=(0, 1)),
    "erf_in_one_plus": _math("torchscribe::ts_erf_fast({0})", "tl.math.erf({0})", transcendental=True),
}


def entry(name: str) -> Element:
    """The table's entry for the op `name`: the one place an op without one is an error."""
    found = ELEMENTS.get(name)
    if found is None:
        raise NotImplementedError(f"no element op {name!r} in codegen/elements.py (ir/kernel/vocabulary.py's FUSIBLE "
                                  "lists what the kernel emitters implement)")
    return found


def element_of(op: Operation) -> Element:
    """The entry that spells `op`: its op's, or the form it takes for its operands."""
    found = entry(op_name(op))
    form = found.form(op) if found.form is not None else None
    return found if form is None else FORMS[form]


def is_transcendental(op: Operation) -> bool:
    """Whether `op` computes a transcendental function (an op outside the table, a constant or a
    reduction, does not)."""
    found = ELEMENTS.get(op_name(op))
    return found is not None and found.transcendental


def divides(op: Operation) -> bool:
    """Whether `op` divides or takes a square root (an op outside the table does not)."""
    found = ELEMENTS.get(op_name(op))
    return found is not None and found.divides


def compute_dtype(op: Operation) -> str:
    """torch.result_type of the operands (the dtype an op computes in), from meta tensors. In a
    kernel's body, where every element is typed 0-dim, a value is 0-dim in eager when the kernel
    inputs it comes from are (a 0-dim tensor does not promote a dimensioned one of its kind)."""
    kernel = op.parent.parent.parent if op.parent is not None and op.parent.parent is not None else None
    zero_dim = _zero_dim_values(kernel) if isinstance(kernel, kernel_ops.KernelOp) else None
    probes: list[object] = []
    for v in op.operands:
        if isinstance(v.type, TensorType):
            zero = not v.type.shape if zero_dim is None else v in zero_dim
            probes.append(torch.empty(() if zero else (1,), dtype=getattr(torch, v.type.dtype), device="meta"))
        elif v.type == FLOAT:
            probes.append(1.5)
        elif v.type == INT:
            probes.append(2)
        elif v.type == BOOL:
            probes.append(True)
    if len(probes) == 1:
        return str(probes[0].dtype).removeprefix("torch.")  # type: ignore[union-attr]
    result = torch.result_type(probes[0], probes[1])  # type: ignore[arg-type]
    for p in probes[2:]:
        result = torch.promote_types(result, torch.result_type(torch.empty((), dtype=result, device="meta"), p))  # type: ignore[arg-type]
    return str(result).removeprefix("torch.")


def _zero_dim_values(kernel: kernel_ops.KernelOp) -> set[Value]:
    """The values of `kernel`'s body that are 0-dim tensors in eager: from 0-dim inputs only."""
    zero = {a for a, v in zip(kernel.body.args, kernel.operands) if isinstance(v.type, TensorType) and v.type.shape == ()}
    for o in kernel.body.ops:
        tensors = [u for u in o.operands if isinstance(u.type, TensorType)]
        if tensors and all(u in zero for u in tensors):
            zero.update(o.results)
    return zero


def value_names(kernel: kernel_ops.KernelOp) -> dict[Value, str]:
    """The names both backends give a kernel's element values: `a<k>` for tensor input k,
    `s<k>` for scalar input k, and `v0`, `v1`, ... for the results of the body's ops in order,
    counted from the kernel's own first op and skipping constants (printed as literals): two
    kernels of the same computation print the same text, wherever their constants were placed
    (one shared by the whole group, or a copy per op that reads it), and so are written once
    (codegen/kernel_names.py)."""
    n_in = kernel.inputs
    names = {a: f"a{k}" if k < n_in else f"s{k - n_in}" for k, a in enumerate(kernel.body.args)}
    computed = [inner.result for inner in kernel.body.ops if inner.results and not isinstance(inner, ops.ConstantOp)]
    return names | {v: f"v{n}" for n, v in enumerate(computed)}


__all__ = ["Element", "Parts", "ELEMENTS", "FORMS", "entry", "element_of", "compute_dtype", "value_names"]

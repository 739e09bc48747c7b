"""What the decomposition rule families share (decompose_reductions.py, decompose_norms.py,
decompose_activations.py, decompose_views.py): the rule's type, the decorator each family
registers its rules into its own table with, and the helpers more than one family computes with.
"""

from __future__ import annotations

from typing import Callable

from ir.core.graph import Value
from ir.passes.emitter import (
    COMPUTE_DTYPE,
    Call,
    Emitter,
    Unsupported,
    _dim_arg,
    _dtype,
    _float_dtype,
)

Rule = Callable[[Emitter, Call], Value]


def registrar(table: dict[str, Rule]) -> Callable[..., Callable[[Rule], Rule]]:
    """The decorator a family's rules are entered in its `table` with: `@rule("softmax",
    "special_softmax")`, by the op's aten name or the name of torch's Python-level function."""

    def rule(*names: str) -> Callable[[Rule], Rule]:
        def register(fn: Rule) -> Rule:
            for n in names:
                assert n not in table, f"two rules for {n}"
                table[n] = fn
            return fn

        return register

    return rule


def _upcast(e: Emitter, x: Value) -> tuple[Value, str]:
    """x in its computation dtype, and the dtype the result goes back to."""
    d = _float_dtype(x)
    return e.cast(x, COMPUTE_DTYPE[d]), d


def _same_dtypes(*values: Value | None) -> str:
    dtypes = {_dtype(v) for v in values if v is not None}
    if len(dtypes) != 1 or None in dtypes:
        raise Unsupported("operand dtypes differ or are unknown")
    return dtypes.pop()  # type: ignore[return-value]


def _mean(e: Emitter, x: Value, xc: Value, dims: tuple[int, ...], keepdim: bool) -> Value:
    """sum / count over dims, in xc's dtype (x gives the sizes)."""
    return e.binary("/", e.call("torch.sum", xc, _dim_arg(dims), keepdim=keepdim), e.count(x, dims))


def _centered(e: Emitter, x: Value, xc: Value, dims: tuple[int, ...]) -> tuple[Value, Value]:
    """The mean (dims kept) and x - mean: the two passes of a variance."""
    mean = _mean(e, x, xc, dims, True)
    return mean, e.binary("-", xc, mean)

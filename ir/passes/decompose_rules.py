"""The decomposition rules of ir/passes/decompose.py: one small function per composite op, named
as in docs/primitives.md, in a module per family of ops (decompose_reductions.py,
decompose_norms.py, decompose_activations.py, decompose_views.py); `RULES` below merges their
tables. Each rule builds through the Emitter (ir/passes/emitter.py) and returns the value that
replaces the op, or raises Unsupported.

Formulas follow torch's decompositions (torch/_decomp, torch/_refs) and, where those differ in
the order of operations, the eager CPU kernel (whose results the compiled code is compared with).
`_upcast` is torch's computation dtype: float16 and bfloat16 compute in float32, and the result is
rounded to the input's dtype once, at the end.
"""

from __future__ import annotations

from ir.passes import decompose_activations, decompose_norms, decompose_reductions, decompose_views
from ir.passes.decompose_common import Rule


def _merged(*tables: dict[str, Rule]) -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for table in tables:
        for name, fn in table.items():
            assert name not in out, f"two rules for {name}"
            out[name] = fn
    return out


RULES: dict[str, Rule] = _merged(  # by the op's aten name, or the name of torch's Python-level function
    decompose_reductions.RULES, decompose_norms.RULES, decompose_activations.RULES, decompose_views.RULES)

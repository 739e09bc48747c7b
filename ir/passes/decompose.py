"""Decomposition: composite tensor ops become the primitives of ir/kernel/primitives.py.

`softmax(x, -1)` on an `f16[B, T, C]` becomes

    xc = x.to(torch.float32); m = torch.amax(xc, 2, keepdim=True); e = torch.exp(xc - m)
    result = (e / torch.sum(e, 2, keepdim=True)).to(torch.float16)

so that later stages see pointwise ops, reductions and views they can fuse, and externs
(matmul, convolution) they call. docs/primitives.md lists every rule and what it lowers to.

Approach. One rule per composite (ir/passes/decompose_rules.py `RULES`, by the op's aten name
or, for torch's Python-level functions, by the function's name). A rule reads the call's
arguments by parameter name, bound the way shape propagation binds them (ir/shape_rules.bind_call:
positional, keyword and default arguments alike), and builds the primitives in a scratch block
through an `Emitter` (ir/passes/emitter.py, which other passes build ops with too). Each new op
is typed the way lowering and shape propagation would type it: the front end's signature
resolver gives its declared type and effects, and the shape analysis' own per-op rule
(ir/shape_rules_python.OP_RULES) refines it from its operands' facts, so symbolic shapes carry
through. The formulas are torch's own decompositions (torch/_decomp/decompositions.py,
torch/_refs) and, where those differ, the eager CPU kernels: low-precision inputs (float16,
bfloat16) compute in float32 and round once at the end (torch's "computation dtype"), the
reductions and the NaN, inf and empty-dim behaviour are the eager op's.

A rule decomposes only when every fact it needs is known: the rank (dims are normalized at compile
time, so negative dims need it), a floating dtype where the op computes in floating point, the
sizes of dims the result depends on (a size that is symbolic is read at run time with
`x.size(d)`), constant flags (`training=False`, `approximate`, `keepdim`). Otherwise it raises
`Unsupported` and the op stays as it is; it is never guessed. As a last check, the decomposed
value's type must carry every fact the op's own type carried (dtype, shape, device); a rule whose
result would differ leaves the op as well. Ops with effects (`mutates`, `random`) are never
touched, but those whose rule makes the op's writes itself, in place where the op stood
(`WRITING_RULES`: batch_norm in training writes its running statistics). A rule never returns an operand where eager returns a new tensor, except where eager
returns its input itself (dropout in eval, flatten of one dim).
"""

from __future__ import annotations

import sympy

from ir.core import ops
from ir.core.graph import AliasOf, Operation, Program, Value
from ir.core.ops import is_pure
from ir.core.types import TensorType, is_subtype
from ir.kernel.primitives import classify, op_name
from ir.passes.decompose_rules import RULES
from ir.passes.emitter import Emitter, Facts, Unsupported, bind
from ir.torchapi.callinfo import SignatureError

DEBUG = False  # let a rule's unexpected error propagate (tests); else the op stays as it is


# -- the pass -------------------------------------------------------------------------------------
def decompose(program: Program) -> None:
    """Rewrite every composite op that has a rule and whose facts are known into primitives."""
    for func in program.funcs:
        facts = Facts()
        for op in list(func.walk()):
            if op.parent is not None and _candidate(op):
                decompose_op(op, facts)


# Rules that make the writes of their op themselves (Emitter.write), where the op stood.
WRITING_RULES = frozenset({"batch_norm"})


def _candidate(op: Operation) -> bool:
    if isinstance(op, ops.GetAttrOp):
        return op.attributes.get("attr") in ("T", "mT") and isinstance(op.result.type, TensorType)
    if not isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) or len(op.results) != 1:
        return False
    if op.attributes.get("random") or op.attributes.get("mutates") and op_name(op) not in WRITING_RULES:
        return False
    return op_name(op) in RULES


def decompose_op(op: Operation, facts: Facts | None = None) -> bool:
    """Decompose one op in place; False (and the IR unchanged) when its rule does not apply."""
    facts = facts or Facts()
    emitter = Emitter(op, facts)
    try:
        call = bind(op, facts)
        result = RULES[call.name](emitter, call)
        _check_result(op, result)
        _check_fusible(result, emitter)
    except (Unsupported, SignatureError):
        emitter.discard()
        return False
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        if DEBUG:
            raise
        emitter.discard()  # a rule's bug must not stop compilation: the op stays
        return False
    emitter.commit()
    old = op.result
    if result.name is None and isinstance(result.owner, Operation) and result.owner.parent is op.parent:
        result.name = old.name  # the source's name for the value, on the op that now makes it
    old.replace_all_uses_with(result)
    op.erase()
    return True


def _check_result(op: Operation, result: Value) -> None:
    """The decomposed value must be what the op's type says, and alias nothing eager would not."""
    if not is_subtype(result.type, op.result.type):
        raise Unsupported(f"decomposed to {result.type}, the op gives {op.result.type}")
    if result in op.operands and op.attributes.get("alias_of") is None and not _seen_only_by(result, op):
        raise Unsupported("eager returns a new tensor")


def _check_fusible(result: Value, emitter: Emitter) -> None:
    """Primitives that compute (pointwise ops, reductions) are there to fuse. Where their
    result is no tensor a kernel can take (a size that is not known: an einsum without a shape
    rule made a ViT's layer norms so, `nonzero` a mixture of experts' rows), they would stay
    torch calls, several where eager makes one (a layer norm and GELU: ten; a linear: a matmul
    and an add): the op stays as it is."""
    if not isinstance(result.type, TensorType) or _sizes_known(result.type):
        return
    if any(getattr(classify(o), "kind", None) in ("pointwise", "reduction") for o in emitter.block.ops):
        raise Unsupported("its primitives could not fuse: their sizes are not known")


def _sizes_known(t: TensorType) -> bool:
    """Whether every size of `t` is an int or a size expression, as a kernel's sizes must be."""
    return t.shape is not None and all(type(d) is int or isinstance(d, sympy.Expr) for d in t.shape)


def _seen_only_by(x: Value, op: Operation) -> bool:
    """Whether `x` is a new tensor (of a pure op that makes one) that only `op` reads: a copy of
    it that `op` would return is then the same to everyone as `x` itself."""
    owner = x.owner
    return (len(x.uses) == 1 and x.uses[0].op is op and isinstance(owner, (ops.TorchCallOp, ops.TensorMethodOp,
                                                                          ops.BinaryOp, ops.UnaryOp))
            and is_pure(owner) and not owner.has_trait(AliasOf))

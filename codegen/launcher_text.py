"""What the C++ and the Triton code of a kernel both say: what its launchers take and what a
call passes them (`kernel_args`), the iteration sizes as Python expressions, and the comments
quoting the source line each run of statements computes (`with_source`)."""

from __future__ import annotations

from dataclasses import dataclass

from ir.core import ops
from ir.core.graph import PURE, Loc, Operation, Value
from ir.core.types import ModuleType, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.primitives import op_name
from ir.kernel.vocabulary import kernel_shape


def size_texts(k: kernel_ops.KernelOp, shape: tuple) -> list[str] | None:
    """The sizes of `shape` as Python: literals, symbolic ones (`B`, `64*B`) read from an input
    that has that size there; None when no input has it."""
    n_in = k.inputs
    rank = len(shape)
    parts = []
    for i, d in enumerate(shape):
        if type(d) is int:
            parts.append(str(d))
            continue
        found = None
        for j, v in enumerate(k.operands[:n_in]):
            t = v.type
            assert isinstance(t, TensorType) and t.shape is not None
            at = i - (rank - len(t.shape))
            if at >= 0 and t.shape[at] == d:
                found = f"in{j}.shape[{at}]"
                break
        if found is None:
            return None
        parts.append(found)
    return parts


@dataclass(frozen=True)
class KernelArgs:
    """What a kernel's launcher takes for its tensor inputs (`params`: `in<k>`, or `m<g>` for a
    module; the scalars and destinations follow as they are) and the value a call passes for
    each (`values`: then the other operands); `modules`: for each `m<g>`, the inputs it stands
    for and the attribute each is (`in0, in1 = _guards.attrs(m0, "weight bias")` in the
    launcher); `padded`: input -> how many trailing dims of size 1 its type has that the tensor
    passed lacks."""

    params: tuple[str, ...]
    values: tuple[Value, ...]
    modules: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]
    padded: dict[int, int]
    absorbed: frozenset[Operation]  # the views and reads the launcher does in the call's place


def kernel_args(k: kernel_ops.Kernel) -> KernelArgs:
    """The arguments of kernel `k`'s launcher, the same for its C++ and its Triton one and for
    the compiled function that calls it. An input that is a view of a tensor with trailing dims
    of size 1 added (`running_var.reshape(32, 1, 1)`, batch norm's per-channel operands), dims
    the kernel broadcasts along, is that tensor: a kernel reads only the strides of the dims an
    input moves along, which are the tensor's own. Two inputs or more that are tensors of one
    module (a batch norm's weight, bias and statistics) are that module, whose launcher reads
    them (`out = bn1_relu(bn1, out)`). Only views and reads that print inside the call anyway
    (`_absorbed`)."""
    n_in = k.inputs if isinstance(k, kernel_ops.KernelOp) else len(k.operands)
    passed = list(k.operands)
    padded: dict[int, int] = {}
    reads: dict[int, tuple[Value, str]] = {}
    views: dict[int, Operation] = {}
    shape = kernel_shape(k) if isinstance(k, kernel_ops.KernelOp) else None
    for i in range(n_in if isinstance(k, kernel_ops.KernelOp) else 0):
        v = k.operands[i]
        base = _unit_padded(v, k, shape)
        if base is not None:
            padded[i] = len(v.type.shape) - len(base.type.shape)  # type: ignore[union-attr,arg-type]
            views[i] = v.owner  # type: ignore[assignment]
            passed[i] = v = base
        owner = v.owner
        if isinstance(owner, ops.GetAttrOp) and isinstance(owner.operands[0].type, ModuleType) and _absorbed(owner, k):
            reads[i] = (owner.operands[0], owner.attributes["attr"])
    groups: dict[Value, list[int]] = {}
    for i, (module, _) in reads.items():
        groups.setdefault(module, []).append(i)
    grouped = {members[0]: members for members in groups.values() if len(members) > 1}
    inside = {i for members in grouped.values() for i in members}
    params: list[str] = []
    values: list[Value] = []
    modules = []
    for i, v in enumerate(passed[:n_in]):
        if i in grouped:
            params.append(f"m{len(modules)}")
            values.append(reads[i][0])
            modules.append((tuple(grouped[i]), tuple(reads[j][1] for j in grouped[i])))
        elif i not in inside:
            params.append(f"in{i}")
            values.append(v)
    absorbed = set(views.values()) | {passed[i].owner for i in inside}
    return KernelArgs(tuple(params), tuple(values + passed[n_in:]), tuple(modules), padded,
                      frozenset(op for op in absorbed if isinstance(op, Operation)))


def module_reads(passed: KernelArgs) -> list[str]:
    """A launcher's reads of the inputs its module arguments stand for, one call each:
    `in0, in1, in2, in3 = _guards.attrs(m0, "running_var weight running_mean bias")`."""
    return [f"{', '.join(f'in{i}' for i in inputs)} = _guards.attrs(m{g}, {chr(34)}{' '.join(names)}{chr(34)})"
            for g, (inputs, names) in enumerate(passed.modules)]


def _unit_padded(v: Value, k: kernel_ops.KernelOp, shape: tuple | None) -> Value | None:
    """The tensor `v` views with trailing dims of size 1 added (`x.reshape(32, 1, 1)` of an `x`
    of 32 elements), where the kernel broadcasts along those dims and no size is read off `v`."""
    owner = v.owner
    if shape is None or not (isinstance(owner, ops.TensorMethodOp) and owner.attributes["method"] in ("reshape", "view")):
        return None
    base = owner.operands[0]
    t, b = v.type, base.type
    if not (isinstance(t, TensorType) and isinstance(b, TensorType) and t.shape is not None and b.shape is not None):
        return None
    m = len(t.shape) - len(b.shape)
    if m < 1 or len(t.shape) > len(shape) or tuple(t.shape[:len(b.shape)]) != tuple(b.shape) \
            or any(d != 1 for d in t.shape[len(b.shape):]) or any(n == 1 for n in shape[len(shape) - m:]):
        return None
    if size_texts(k, shape) is None or not _absorbed(owner, k):
        return None  # (a launcher that reads the broadcast of its inputs' shapes reads v's)
    return base


def _absorbed(op: Operation, k: Operation) -> bool:
    """Whether `op`'s one result is used by `k` alone (or by an op that is, and so on), unnamed,
    in `k`'s block with nothing but pure ops between: the compiled function prints it inside
    the call, where the launcher may as well compute it."""
    user = op
    while user is not k:
        result = user.results[0] if len(user.results) == 1 else None
        if result is None or len(result.uses) != 1 or result.name is not None or not user.has_trait(PURE):
            return False
        user = result.uses[0].op
    block = k.parent
    if op.parent is not block or block is None:
        return False
    between = block.ops[block.ops.index(op) + 1: block.ops.index(k)]
    return all(isinstance(other, ops.ConstantOp)
               or other.has_trait(PURE) and (not other.regions or isinstance(other, kernel_ops.KernelOp)) for other in between)


def source_text(loc: Loc | None, source_lines: dict[str, list[str]] | None) -> str | None:
    """The source line at `loc`, stripped; None where it is not known. Generated code quotes
    the source rather than naming line numbers, which every line inserted above would change."""
    if loc is None or source_lines is None:
        return None
    lines = source_lines.get(loc.file)
    if lines is None or not 1 <= loc.line <= len(lines):
        return None
    return lines[loc.line - 1].strip() or None


def source_comment(loc: Loc | None, source_lines: dict[str, list[str]] | None, marker: str) -> str | None:
    """A comment quoting the source line at `loc` (`// out = self.bn1(out)`, `marker` "//" or
    "#"); None where the line is not known."""
    quote = source_text(loc, source_lines)
    if quote is None:
        return None
    # (a line ending in a backslash would continue a C++ comment; three quotes would end the raw
    # string that holds the C++)
    return f"{marker} {quote.rstrip(chr(92)).rstrip()}".replace('"' * 3, "'" * 3)


def with_source(items: list[tuple[Operation | None, str]], source_lines: dict[str, list[str]] | None,
                marker: str, last: tuple[str, int] | None = None) -> list[str]:
    """The statements of `items` (each with the op it computes, or None: a load, a store), each
    run of them from one source line preceded by a comment quoting that line (`source_comment`);
    only where the line changes, not per statement (`last`: the line of the statements just
    before these, a kernel's row part before its loop)."""
    out: list[str] = []
    for op, text in items:
        loc = op.loc if op is not None else None
        if loc is not None and (loc.file, loc.line) != last:
            comment = source_comment(loc, source_lines, marker)
            if comment is not None:
                out.append(comment)
                last = (loc.file, loc.line)
        out.append(text)
    return out


def last_line(items: list[tuple[Operation | None, str]]) -> tuple[str, int] | None:
    """The source line `with_source` quotes last for `items`."""
    located = [op.loc for op, _ in items if op is not None and op.loc is not None]
    return (located[-1].file, located[-1].line) if located else None


__all__ = ["KernelArgs", "last_line", "kernel_args", "module_reads", "size_texts", "source_comment", "source_text", "with_source"]

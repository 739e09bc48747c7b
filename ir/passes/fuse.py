"""Fusion of pointwise ops and row reductions into kernels.

After decomposition, chains of pointwise primitives (`x * 0.5 * (1 + erf(x * c))`) are separate
torch calls, each reading and writing a whole tensor. This pass groups them into
`kernel.pointwise` ops: one loop over the iteration shape computing every op of the group per
element, reading each input once and writing only the values used outside the group.

Reductions over the last dim with keepdim (`sum`, `amax`, `amin`: what softmax, log_softmax,
layer norm, mean and var decompose into) join groups too; a group holding one becomes a
`kernel.reduction`, which runs a row at a time: the row's reductions, then the pointwise ops
that use them, without writing the intermediates (softmax: one kernel instead of four calls).

An op joins a group when it is a pointwise primitive the kernel emitters implement (`FUSIBLE`),
its tensors have a known dtype (`DTYPES`), a known rank and dims that are ints or size expressions
(`B`, `64*B`: a launcher reads each from an input that has it),
and they are all on one device, the CPU or CUDA (`DEVICES`: C++ kernels run on the one, Triton
kernels on the other). Groups grow along data dependences; a group stops growing once one of its
values is used by an op outside it (the kernel stands where its last op stood, so such a use would
come before the value exists) and at any op that may write (a write-back, an op functionalization
left alone): a read must not move past a write. Every output must have the full iteration shape
(the broadcast of every value of the group); a group whose outputs do not is not formed. Groups of
one op are left as they are (a kernel of one op saves no memory traffic) unless the op can write
its result over a temporary that dies into it (`dead_temporary`: a matmul's result, say, whose
only use is the bias add): then the kernel saves the allocation (ir/passes/reuse.py); or unless
it reads a view and only GEMMs read its result, which the kernel writes row-major, saving the
GEMM's copy of it (`_view_into_gemms`).

Around the groups: a reshape of a one-input pointwise chain (or a permute that moves no memory)
moves to the chain's input, and so do the reshapes of a DAG of same-shape pointwise ops nothing
else uses, the DAG computed again after them, so that batch norm's per-channel values and a
squeeze-and-excitation gate join the kernel that uses them (`_sink_reshape`,
`_sink_reshapes_of_a_dag`). An op joins its producers' open groups even when another producer's
group is finished, but not a row reduction's group whose rows its shape does not keep. A group
whose first ops make values of a smaller shape used outside it gives those ops a group of their
own, which the rest reads. A lone bias add after `linear(x, w)` that joined nothing goes back
into it, `linear(x, w, b)` (`_linear_bias`).

Constants become constants of the kernel body; other non-tensor operands (Python numbers) become
scalar inputs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ir.core import ops
from ir.core.graph import AliasOf, Block, Operation, Program, Region, Value
from ir.core.rewrite import clone_op
from ir.core.types import TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.names import KernelNamer
from ir.kernel.primitives import op_name
from ir.kernel.vocabulary import (
    NOT_CONSTANT,
    constant_of,
    fusible,
    iteration_shape,
    pointwise_fusible,
    row_reduction,
)
from ir.passes.canonicalize import writes_in
from ir.passes.conv_choices import PACKED_CONV
from ir.passes.layout import ROW_MAJOR


@dataclass(eq=False)  # identity: groups are merged and looked up by object
class _Group:
    ops: list[Operation] = field(default_factory=list)
    values: set[Value] = field(default_factory=set)
    closed_at: int | None = None  # the position of the first op outside that uses or may write

    @property
    def closed(self) -> bool:
        return self.closed_at is not None

    def close(self, at: int) -> None:
        if self.closed_at is None:
            self.closed_at = at

    def add(self, op: Operation) -> None:
        self.ops.append(op)
        self.values.update(op.results)


def fuse(program: Program) -> None:
    for func in program.funcs:
        for op in list(func.walk()):
            if op.parent is not None:
                _sink_reshape(op)
        for op in list(func.walk()):
            if op.parent is not None:
                _sink_reshapes_of_a_dag(op)
        # (names from the source: ir/kernel/names.py; unique in the function)
        namer = KernelNamer(program.source_lines)
        _fuse_block(func.regions[0].block, namer, func)


# Not `view`: a view of `a` may raise where the view of the fresh `f(a)` does not (strides).
RESHAPES = frozenset({"reshape", "unsqueeze", "squeeze", "flatten"})


def _moves_no_memory(op: Operation) -> bool:
    """A permute that keeps the order of the dims not of size 1 (`[B, C, 1, 1]` to channels-last
    `[B, 1, 1, C]`): a row-major tensor stays row-major under it, as under a reshape."""
    if op_name(op) != "permute" or len(op.operands) != 2 or not isinstance(op.operands[0].type, TensorType):
        return False
    shape, dims = op.operands[0].type.shape, constant_of(op.operands[1])
    if shape is None or not isinstance(dims, (tuple, list)) or sorted(dims) != list(range(len(shape))):
        return False
    kept = [d for d in range(len(shape)) if shape[d] != 1]
    return [d for d in dims if shape[d] != 1] == kept


def _sink_reshape(op: Operation) -> None:
    """`reshape(f(a))` -> `f(reshape(a))` for a pointwise `f` of one tensor (other operands
    numbers) used only by the reshape, repeated down the chain: the pointwise ops then meet
    their consumers in the reshaped space and fuse with them (batch norm's
    `(1 / sqrt(var + eps)).reshape(C, 1, 1)` joins the kernel that normalises; a squeeze-and-
    excitation gate's `sigmoid(s).permute(0, 2, 3, 1)` the channels-last multiply). Elementwise
    ops commute with reshapes, and `f(a)` was a fresh tensor, so no alias changes; `f` moves
    only where nothing between it and the reshape may write (`a` could be written)."""
    while (op_name(op) in RESHAPES or _moves_no_memory(op)) and len(op.results) == 1 \
            and isinstance(op.result.type, TensorType):
        source = op.operands[0].owner
        if not (isinstance(source, Operation) and pointwise_fusible(source) and len(op.operands[0].uses) == 1
                and source.parent is op.parent) or _writes_between(source, op):
            return
        tensors = [v for v in source.operands if isinstance(v.type, TensorType)]
        if op_name(source) == "to" or len(tensors) != 1 or tensors[0].type.shape != source.result.type.shape:  # type: ignore[union-attr]
            return
        a = tensors[0]
        # the reshape now reads `a` (of a's dtype), and `f` computes in the reshaped space
        reshape = clone_op(op, {op.operands[0]: a})
        reshape.result.type = dataclasses.replace(op.result.type, dtype=a.type.dtype)  # type: ignore[union-attr]
        reshape.result.name = None
        op.parent.insert_before(op, reshape)  # type: ignore[union-attr]
        moved = clone_op(source, {a: reshape.result})
        moved.result.type = op.result.type
        moved.result.name = op.result.name
        op.parent.insert_before(op, moved)  # type: ignore[union-attr]
        op.result.replace_all_uses_with(moved.result)
        op.erase()
        source.erase()
        op = reshape


def _writes_between(first: Operation, last: Operation) -> bool:
    """Whether an op of their block after `first` and before `last` may write (a loop or branch:
    an op in it): a read moved from `first` to `last` would then see the write."""
    between = first.parent.ops  # type: ignore[union-attr]
    between = between[between.index(first) + 1:between.index(last)]
    return any(writes_in(o) for o in between)


def _reshape_key(op: Operation) -> tuple | None:
    """What a reshape does (its name, constant arguments and result type), when it is one whose
    operands other than the tensor are constants; None otherwise."""
    if op_name(op) not in RESHAPES or len(op.results) != 1 or not isinstance(op.result.type, TensorType):
        return None
    args = [constant_of(v) for v in op.operands[1:]]
    if any(a is NOT_CONSTANT for a in args) or op.attributes.get("kwnames"):
        return None
    return op_name(op), repr(args), op.result.type.shape


def _sink_reshapes_of_a_dag(op: Operation) -> None:
    """`_sink_reshape` for pointwise ops of several tensors whose values are used more than
    once: batch norm's per-channel `alpha = 1 / sqrt(var + eps) * w` and `beta = b - mean *
    alpha`, each reshaped to (C, 1, 1). When every value of such a DAG of same-shape pointwise ops
    (no broadcasting) is used only by the DAG and by reshapes that do the same as `op`, the DAG is
    computed again from its reshaped inputs, in the reshaped space, where those reshapes stood:
    then it fuses with the ops that use it. (Elementwise ops commute with a reshape; every value
    of the DAG was a fresh tensor, so no alias changes.)"""
    key = _reshape_key(op)
    top = op.operands[0].owner if key is not None else None
    if not (isinstance(top, Operation) and top.parent is op.parent):
        return
    shape = op.operands[0].type.shape  # type: ignore[union-attr]
    block = op.parent

    def member(n: object) -> bool:
        return (isinstance(n, Operation) and n.parent is block and pointwise_fusible(n) and op_name(n) != "to"
                and all(v.type.shape == shape for v in n.operands if isinstance(v.type, TensorType)))

    dag: set[Operation] = set()
    work = [top]
    while work:  # (what `op`'s input is computed from)
        n = work.pop()
        if n in dag or not member(n):
            continue
        dag.add(n)
        work += [v.owner for v in n.operands]
    while True:  # (only what every use of stays inside, or is one of these reshapes)
        leaving = {n for n in dag for use in n.result.uses
                   if use.op not in dag and not (_reshape_key(use.op) == key and use.index == 0)}
        if not leaving:
            break
        dag -= leaving
    if top not in dag or len(dag) < 2:
        return  # (one op of one tensor: `_sink_reshape`'s case)
    reshapes = [use.op for n in dag for use in n.result.uses if use.op not in dag]
    order = {o: i for i, o in enumerate(block.ops)}
    first = min(reshapes, key=order.__getitem__)
    if _writes_between(min(dag, key=order.__getitem__), max([*dag, first], key=order.__getitem__)):
        return  # (a read must not move past a write, down to `first` or up to it)
    mapping: dict[Value, Value] = {}
    for n in sorted(dag, key=order.__getitem__):
        for v in n.operands:
            if isinstance(v.type, TensorType) and v not in mapping and v.owner not in dag:
                # `first` does what `op` does, and its other operands (the shape's constants) are
                # defined before it, where the copies go; `op`'s may be defined after `first`
                reshape = clone_op(first, {first.operands[0]: v})
                reshape.result.type = dataclasses.replace(op.result.type, dtype=v.type.dtype)  # type: ignore[union-attr]
                reshape.result.name = None
                block.insert_before(first, reshape)
                mapping[v] = reshape.result
        moved = clone_op(n, mapping)
        moved.result.type = dataclasses.replace(op.result.type, dtype=n.result.type.dtype)  # type: ignore[union-attr]
        block.insert_before(first, moved)
    for r in reshapes:
        r.result.replace_all_uses_with(mapping[r.operands[0]])
        r.erase()
    for n in sorted(dag, key=order.__getitem__, reverse=True):
        n.erase()


def _fuse_block(block: Block, namer: KernelNamer, func: Operation) -> None:
    groups: list[_Group] = []
    owner: dict[Value, _Group] = {}
    position = {op: i for i, op in enumerate(block.ops)}
    for i, op in enumerate(list(block.ops)):
        for region in op.regions:
            for inner in region.blocks:
                _fuse_block(inner, namer, func)
        if writes_in(op):
            for g in groups:
                g.close(i)
        if fusible(op):
            # (a closed group is final: its values are inputs here, and the op joins the others)
            joined = [g for g in dict.fromkeys(owner[v] for v in op.operands if v in owner) if not g.closed]
            if joined and not _rows_still_fit(joined, op):
                for g in joined:  # (the op reads their values from outside: a group of its own)
                    g.close(i)
                joined = []
            if joined:
                target = joined[0]
                for g in joined[1:]:
                    target.ops.extend(g.ops)
                    target.values |= g.values
                    for v in g.values:
                        owner[v] = target
                    groups.remove(g)
                target.ops.sort(key=block.ops.index)
            else:
                target = _Group()
                groups.append(target)
            target.add(op)
            for r in op.results:
                owner[r] = target
            continue
        for v in (v for inner in op.walk() for v in inner.operands):  # (inside its regions too)
            if v in owner:
                owner[v].close(i)
    groups = _merge_siblings(groups, position)
    groups = [part for g in groups for part in _split_narrow(g)]
    for g in groups:
        if len(g.ops) >= 2:
            _build_kernel(block, g, namer)
        elif _linear_bias(g.ops[0]):
            _into_linear(g.ops[0])
        elif any(dead_temporary(v, g.ops[0]) and same_buffer_type(v, g.ops[0].result) for v in g.ops[0].operands):
            _build_kernel(block, g, namer)
        elif _view_into_gemms(g.ops[0]):
            _build_kernel(block, g, namer)


def _split_narrow(g: _Group) -> list[_Group]:
    """A group whose first ops compute values of a smaller shape that are used outside it (a
    per-channel mean the rest subtracts from every element, and that is also returned) would
    have outputs of neither the iteration shape nor the rows' shape, and make no kernel: those
    ops (each of them of such a shape, reading only the group's inputs and each other) become a
    group of their own, before the rest, which reads their values as inputs."""
    inputs, shape = _inputs_and_shape(g)
    if shape is None:
        return [g]
    allowed = {shape}
    if any(not pointwise_fusible(op) for op in g.ops):
        allowed.add(shape[:-1] + (1,))
    narrow: list[Operation] = []
    for op in g.ops:
        if (tuple(op.result.type.shape) not in allowed  # type: ignore[union-attr]
                and all(v.owner in narrow for v in op.operands if v in g.values)):
            narrow.append(op)
    leaving = [op for op in narrow if any(u.op not in g.ops for u in op.result.uses)]
    if not leaving or len(narrow) == len(g.ops):
        return [g]
    rest = [op for op in g.ops if op not in narrow]
    return [_Group(narrow, {r for op in narrow for r in op.results}, g.closed_at),
            _Group(rest, {r for op in rest for r in op.results}, g.closed_at)]


def _rows_still_fit(joined: list[_Group], op: Operation) -> bool:
    """Whether `op` can join the groups of its operands when one of them holds a row reduction:
    the merged group must still have one iteration shape whose rows the reductions reduce. (A
    product of a row's sum with a wider tensor, `linear(x) * h.sum(-1, keepdim=True)`, does not:
    joined, the whole group was dropped and nothing of it fused.)"""
    trial = _Group([o for g in joined for o in g.ops] + [op], set().union(*(g.values for g in joined), op.results))
    reductions = [o for o in trial.ops if not pointwise_fusible(o)]
    if not reductions:
        return True
    return _rows_fit(reductions, _inputs_and_shape(trial)[1])


def _rows_fit(reductions: list[Operation], shape: tuple | None) -> bool:
    """Whether `shape` is an iteration shape whose rows (its last dim, longer than 1) each row
    reduction reduces: its input has that shape and its result the rows' shape."""
    return shape is not None and shape[-1] != 1 and all(
        tuple(o.operands[0].type.shape) == shape and tuple(o.result.type.shape) == shape[:-1] + (1,)  # type: ignore[union-attr]
        for o in reductions)


def _view_into_gemms(op: Operation) -> bool:
    """A lone op on a view of its result's shape (whose strides may be any), whose result only
    GEMMs read: eager's result keeps the view's strides and the GEMM copies it to row-major
    (swin's `q * scale` of a slice of the permuted qkv, before `q @ k.transpose(-2, -1)`); a
    kernel writes it row-major, which the GEMM reads as it is."""
    if len(op.results) != 1 or not op.result.uses or not all(
            op_name(u.op) in ROW_MAJOR and "out" not in u.op.attributes.get("kwnames", ()) for u in op.result.uses):
        return False
    shape = op.result.type.shape  # type: ignore[union-attr]
    return any(isinstance(v.owner, Operation) and v.owner.get_trait(AliasOf) is not None
               and isinstance(v.type, TensorType) and v.type.shape == shape for v in op.operands)


def _linear_bias(op: Operation) -> bool:
    """`linear(x, w) + b` for a bias `b` of the output features: the split decomposition made,
    so that the add could join an epilogue."""
    if op_name(op) != "add" or len(op.operands) != 2:
        return False
    out, bias = op.operands
    linear = out.owner
    return (isinstance(linear, Operation) and op_name(linear) == "linear" and len(linear.operands) == 2
            and linear.parent is op.parent and len(out.uses) == 1 and isinstance(bias.type, TensorType)
            and isinstance(out.type, TensorType) and bias.type.dtype == out.type.dtype == op.result.type.dtype  # type: ignore[union-attr]
            and bias.type.shape is not None and out.type.shape is not None and len(out.type.shape) >= 1
            and tuple(bias.type.shape) == (out.type.shape[-1],) and out.type.shape == op.result.type.shape)  # type: ignore[union-attr]


def _into_linear(add: Operation) -> None:
    """A bias add that joined nothing goes back into the GEMM: `linear(x, w, b)` is one call
    (addmm adds the bias in the GEMM), where a kernel of its own would be a call and a pass more."""
    linear = add.operands[0].owner
    merged = ops.TorchCallOp(list(linear.operands) + [add.operands[1]], [add.result.type],  # type: ignore[union-attr]
                             dict(linear.attributes), loc=add.loc)  # type: ignore[union-attr]
    add.parent.insert_before(add, merged)  # type: ignore[union-attr]
    merged.result.name = add.result.name
    add.result.replace_all_uses_with(merged.result)
    add.erase()
    linear.erase()  # type: ignore[union-attr]


def _merge_siblings(groups: list[_Group], position: dict[Operation, int]) -> list[_Group]:
    """Horizontal fusion: groups that read a tensor input in common and have one iteration shape
    become one kernel, which reads that input once (`exp(x)` and `x * 2`: one pass over x, two
    outputs). The merged kernel stands where the later group ends, so the earlier one must still
    be open there: nothing before that point uses its values or may write (which also rules out
    any path of data from the earlier group into the later)."""
    groups = sorted(groups, key=lambda g: position[g.ops[-1]])
    facts = {g: _inputs_and_shape(g) for g in groups}
    merged = True
    while merged:
        merged = False
        for a in groups:
            later = (b for b in groups if position[b.ops[-1]] > position[a.ops[-1]])
            b = next((b for b in later if (a.closed_at is None or position[b.ops[-1]] < a.closed_at)
                      and facts[a][1] is not None and facts[a][1] == facts[b][1]
                      and set(facts[a][0]) & set(facts[b][0])), None)
            if b is None:
                continue
            b.ops = sorted(a.ops + b.ops, key=position.__getitem__)
            b.values |= a.values
            b.closed_at = min((t for t in (a.closed_at, b.closed_at) if t is not None), default=None)
            facts[b] = _inputs_and_shape(b)
            groups.remove(a)
            merged = True
            break
    return groups


def _inputs_and_shape(g: _Group) -> tuple[list[Value], tuple | None]:
    """A group's tensor inputs (values from outside it) and its iteration shape (None when the
    shapes do not broadcast)."""
    reductions = {op: row_reduction(op) for op in g.ops if not pointwise_fusible(op)}
    inputs = list(dict.fromkeys(v for op in g.ops for v in _element_operands(op, reductions)
                                if v not in g.values and isinstance(v.type, TensorType)))
    return inputs, iteration_shape(inputs + [r for op in g.ops for r in op.results])


def _build_kernel(block: Block, g: _Group, namer: KernelNamer) -> None:
    inside = g.values
    reductions = {op: row_reduction(op) for op in g.ops if not pointwise_fusible(op)}
    tensor_inputs: list[Value] = []
    scalar_inputs: list[Value] = []
    for op in g.ops:
        operands = _element_operands(op, reductions)
        for v in operands:
            if v in inside or isinstance(v.owner, ops.ConstantOp):
                continue
            target = tensor_inputs if isinstance(v.type, TensorType) else scalar_inputs
            if v not in target:
                target.append(v)
    outputs = [r for op in g.ops for r in op.results if any(u.op not in g.ops for u in r.uses)]
    shape = iteration_shape(tensor_inputs + [r for op in g.ops for r in op.results])
    if shape is None or not outputs:
        return
    allowed = {shape}
    if reductions:
        if not _rows_fit(list(reductions), shape):
            return
        allowed.add(shape[:-1] + (1,))
    if any(tuple(r.type.shape) not in allowed for r in outputs):  # type: ignore[union-attr]
        return
    last = g.ops[-1]
    device = outputs[0].type.device  # type: ignore[union-attr]
    element_types = [TensorType(v.type.dtype, (), device) for v in tensor_inputs] + [v.type for v in scalar_inputs]
    body = Block(element_types, [v.name for v in tensor_inputs + scalar_inputs])
    mapping: dict[Value, Value] = dict(zip(tensor_inputs + scalar_inputs, body.args))
    for op in g.ops:
        for v in op.operands[:1] if op in reductions else op.operands:
            if isinstance(v.owner, ops.ConstantOp) and v not in mapping:
                const = clone_op(v.owner, {})
                body.append(const)
                mapping[v] = const.result
        if op in reductions:
            inner = kernel_ops.ReduceOp([mapping[op.operands[0]]], [op.result.type], {"kind": reductions[op]}, loc=op.loc)
        else:
            inner = clone_op(op, mapping)
        for old, new in zip(op.results, inner.results):
            new.type = TensorType(old.type.dtype, (), device)  # type: ignore[union-attr]
            mapping[old] = new
        body.append(inner)
    body.append(ops.YieldOp([mapping[r] for r in outputs], [], {}, loc=last.loc))
    name = namer.take(g.ops, [op_name(op) for op in g.ops])
    kind = kernel_ops.ReductionKernelOp if reductions else kernel_ops.PointwiseKernelOp
    kernel = kind(tensor_inputs + scalar_inputs, [r.type for r in outputs],
                  {"name": name, "inputs": len(tensor_inputs)}, regions=[Region([body])], loc=last.loc)
    replace_group(block, last, kernel, outputs, g.ops)


def replace_group(block: Block, last: Operation, kernel: Operation, outputs: list[Value],
                  group: list[Operation]) -> None:
    """`kernel` in place of the ops of `group` (before `last`, the group's last op): its results
    take the names and the uses of `outputs`, and the group's ops go."""
    block.insert_before(last, kernel)
    for old, new in zip(outputs, kernel.results):
        new.name = old.name
        old.replace_all_uses_with(new)
    for op in reversed(group):
        op.erase()


# Extern ops whose result is always a tensor of its own, never a view of an operand or a tensor
# returned before (unlike `contiguous`, `to`, `reshape`, or dropout in eval, which may return
# their input).
FRESH_RESULTS = frozenset({
    "matmul", "mm", "bmm", "addmm", "baddbmm", "addmv", "linear", "bilinear", "conv1d", "conv2d",
    "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "convolution", "cat",
    "stack", "embedding", "layer_norm", "group_norm", "batch_norm", "instance_norm", "softmax",
    "log_softmax", "avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d",
    "max_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "scaled_dot_product_attention", "cumsum", "interpolate", "upsample_nearest2d",
    "upsample_bilinear2d", "pad", "constant_pad_nd",
})


def fresh_row_major(v: Value) -> bool:
    """Whether `v` is a new row-major tensor: a generated kernel's own output (not one written
    into a view it was given, `into`), or the result of a GEMM (layout.ROW_MAJOR) or `new_empty`."""
    owner = v.owner
    if isinstance(owner, kernel_ops.KernelOp):
        return owner.results.index(v) not in owner.attributes.get("into", ())  # type: ignore[arg-type]
    if isinstance(owner, kernel_ops.Kernel):
        return True
    return isinstance(owner, Operation) and op_name(owner) in ROW_MAJOR | {"new_empty"}


def dead_temporary(v: Value, user: Operation) -> bool:
    """Whether `v` is a tensor no one but `user` can see, so that `user` may write over it:
    the result of a kernel or of an extern op in FRESH_RESULTS, in the same block (not one a
    loop body reads on every iteration), whose only use is `user`."""
    owner = v.owner
    if not (isinstance(owner, Operation) and owner.parent is user.parent and len(v.uses) == 1
            and isinstance(v.type, TensorType)):
        return False
    if isinstance(owner, kernel_ops.Kernel):
        return True
    if isinstance(owner, ops.BuiltinCallOp):
        return owner.attributes["callee"] == PACKED_CONV  # (a conv's new output)
    if op_name(owner) == "permute" and len(owner.results) == 1:  # (a layout: see ir/passes/layout.py)
        return dead_temporary(owner.operands[0], owner)
    # (`out=` or a write makes the result a tensor the caller or another value holds)
    aliased = (owner.attributes.get("alias_of") is not None or owner.attributes.get("mutates")
               or "out" in owner.attributes.get("kwnames", ()))
    return len(owner.results) == 1 and op_name(owner) in FRESH_RESULTS and not aliased


def same_buffer_type(v: Value, r: Value) -> bool:
    """Whether a tensor of `r`'s type fits in the buffer of `v`: same dtype and shape."""
    a, b = v.type, r.type
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.dtype == b.dtype
            and a.shape is not None and tuple(a.shape) == tuple(b.shape or ()) and b.shape is not None)


def _element_operands(op: Operation, reductions: dict[Operation, str | None]) -> list[Value]:
    """The operands that may be kernel inputs: a reduction's input (its dim and keepdim are the
    kernel's structure), a conversion's input (its dtype operands are constants)."""
    if op in reductions or op_name(op) == "to":
        return op.operands[:1]
    return list(op.operands)


__all__ = ["fuse", "replace_group", "dead_temporary", "fresh_row_major", "same_buffer_type", "FRESH_RESULTS"]

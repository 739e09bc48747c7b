"""Fused pointwise kernels with generated backward kernels, in code autograd records.

Code for calls autograd records (ir/passes.AUTOGRAD_PASSES) calls eager's torch ops one by one,
so that autograd records what it records for eager. This pass, its last, turns chains of
pointwise ops there into `kernel.autograd` ops, each computed by two C++ kernels that autograd
records as one function (runtime/autograd_kernels.py):

- the forward kernel, the group's ops decomposed as ir/passes/decompose.py decomposes them for
  kernels (sigmoid as 1 / (1 + exp(-x))), which computes the outputs and saves only the
  group's inputs for backward (pointwise intermediates are computed again in the backward,
  rather than written and read: eager's sigmoid saves its output, a tensor of the input's size);
- the backward kernel, which computes those intermediates again from the inputs and, walking
  the group's ops backwards with the rules of ir/passes/derivatives.py, the gradient of every
  floating input from the outputs' gradients, at the iteration shape (a broadcast input's
  gradient is summed to its shape when the function returns it).

Which ops: those with a derivative rule, pure, one result, on CPU tensors of float32 or float64
whose shapes are known, every tensor operand of the result's dtype (but `where`'s bool
condition); Python numbers become constants of the kernels or scalar arguments. Groups grow
along data dependences as ir/passes/fuse.py grows them (a group stops where a value of it is
used by an op outside it, at any op that may write and at dropout or another random op); a
group of one op stays a torch call.

Autograd's errors stay eager's: eager raises in backward where a tensor it saved was written in
place after it saved it, and which tensors it saves differs (sigmoid saves its output, `x + y`
nothing, the fused function its inputs). So a group is formed only where no tensor it would
save, nor any output it gives (which eager may have saved), can be written by the function:
none of its inputs and outputs is, or shares storage with (through views, in-place ops'
results), a tensor that an op of the function writes; an argument, a module's tensor and any
tensor whose origin the analysis does not follow (an item of a list, a loop-carried value)
count as one and the same where the function writes such a tensor; and a function with a write
whose target is not known (a call of code the compiler does not see into) forms no group.
Nor do tensors that may be channels-last (ir/passes/layout_autograd.py): the kernels read and
write row-major tensors, so they would copy them and hand the next conv a row-major one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ir.core import ops
from ir.core.graph import PURE, AliasOf, Block, BlockArg, Mutates, Operation, Program, Region, Value
from ir.core.rewrite import clone_op
from ir.core.types import BOOL, FLOAT, INT, DictType, ListType, ModuleListType, ModuleType, TensorType, TupleType
from ir.kernel import ops as kernel_ops
from ir.kernel.names import KernelNamer
from ir.kernel.primitives import op_name
from ir.kernel.vocabulary import FUSIBLE, iteration_shape, known_tensor, pointwise_fusible
from ir.passes.canonicalize import may_write, writes_in
from ir.passes.decompose_rules import RULES as DECOMPOSITIONS
from ir.passes.derivatives import DERIVATIVES, DIFFERENTIABLE, Args
from ir.passes.emitter import Emitter, Facts, Unsupported, bind
from ir.passes import functionalize_writes as writes
from ir.passes.functionalize_writes import out_of_place
from ir.passes.fuse import replace_group
from ir.passes.layout_autograd import may_be_channels_last
from ir.shapes.values import UNKNOWN

DTYPES = ("float32", "float64")  # what gradcheck (float64) and training (float32) run in
SCALARS = (INT, FLOAT)
OUTSIDE = "outside"  # the root of the tensors the caller may hold (arguments; module tensors: _module_path)


def autograd_kernels(program: Program) -> None:
    if not program.autograd:
        return
    for func in list(program.funcs):
        if not isinstance(func, ops.FuncOp):
            continue
        _out_of_place_activations(func)
        written = _written(func)
        if written is None:
            continue
        namer = KernelNamer(program.source_lines)
        strided = may_be_channels_last(func)
        for op in [func, *func.walk()]:
            if not isinstance(op, (kernel_ops.KernelOp, kernel_ops.AutogradKernelOp)):
                for block in [b for r in op.regions for b in r.blocks]:
                    _fuse_block(program, func, block, written, strided, namer)


# -- which tensors the function writes --------------------------------------------------------
def _root(v: Value) -> object | None:
    """What `v` shares storage with, as far as this pass follows: the value that made the tensor
    (an op's fresh result), OUTSIDE for a tensor the caller may hold, None where not known."""
    while True:
        owner = v.owner
        if not isinstance(owner, Operation):  # a block argument: the function's, or a loop's
            region = owner.parent
            return OUTSIDE if region is not None and isinstance(region.parent, ops.FuncOp) else None
        alias = owner.get_trait(AliasOf)
        if alias is not None:
            v = owner.operands[alias.index]  # type: ignore[attr-defined]
        elif isinstance(owner, ops.RefineOp):
            v = owner.operands[0]
        elif isinstance(owner, ops.GetAttrOp) and not isinstance(owner.operands[0].type, TensorType):
            return _module_path(owner)  # a module's tensor
        elif isinstance(owner, ops.GetAttrOp):
            v = owner.operands[0]  # (x.T, x.mT, x.data: views of x; x.grad counted as x)
        elif owner.has_trait(PURE) and not owner.regions and not isinstance(owner, (ops.GetItemOp, ops.UnpackOp)) \
                or isinstance(owner, kernel_ops.AutogradKernelOp):
            return v  # a new tensor (a group built before: its kernels' outputs are)
        elif isinstance(owner, (ops.TorchCallOp, ops.TensorMethodOp)) and "out" not in owner.attributes.get("kwnames", ()):
            return v  # a new tensor of an op that writes others (batch norm's running statistics)
        else:
            return None


def _module_path(read: ops.GetAttrOp) -> object:
    """A module tensor's root: its attribute path from an argument of the function
    (`("bn2", "running_mean")`), or OUTSIDE where the module is not reached by attributes alone.
    Two paths are taken to be two tensors, and an argument not to share storage with a module's
    tensor that the function writes (batch norm writes its running statistics, which a caller
    would not pass in)."""
    path: list[object] = []
    v: Value = read.result
    while True:
        owner = v.owner
        if isinstance(owner, ops.GetAttrOp):
            path.insert(0, owner.attributes["attr"])
        elif isinstance(owner, ops.GetItemOp) and isinstance(owner.operands[0].type, (ModuleType, ModuleListType)) \
                and isinstance(owner.operands[1].owner, ops.ConstantOp):  # (an nn.Sequential's item)
            path.insert(0, owner.operands[1].owner.attributes["value"])
        else:
            break
        v = owner.operands[0]
    owner = v.owner
    if isinstance(owner, Block) and owner.parent is not None and isinstance(owner.parent.parent, ops.FuncOp):
        return (v.index, *path)  # type: ignore[attr-defined]
    return OUTSIDE


def _written(func: ops.FuncOp, skip: frozenset[Operation] = frozenset()) -> set[object] | None:
    """The roots of the tensors the function may write (but by the ops `skip`); None when it may
    write one it does not know (a call it does not see into, a write through an item of a list)."""
    written: set[object] = set()
    for op in func.walk():
        if op in skip or not may_write(op):
            continue
        targets = [op.operands[t.index] for t in op.traits if isinstance(t, Mutates)]  # type: ignore[attr-defined]
        if not targets:
            return None
        for v in targets:
            if isinstance(v.type, (ListType, DictType)):
                continue  # (a list's append: an item read back and written is a write of its own)
            root = _root(v)
            if root is None:
                return None
            written.add(root)
    return written


def _safe(v: Value, written: set[object]) -> bool:
    """Whether the tensor `v` is certainly not written by the function."""
    if not written:
        return True
    root = _root(v)
    # (a module's tensor may be an argument's storage: written where an argument may be)
    return root is not None and root not in written and not (isinstance(root, tuple) and OUTSIDE in written)


def _out_of_place_activations(func: ops.FuncOp) -> None:
    """An in-place op on a train-mode batch norm's result that nothing else reads, and the
    in-place ops after it on what it returns (`F.relu(bn(x), inplace=True)`, torchvision's
    ReLU6(inplace=True) after each batch norm, a ResNet block's `out += identity` then ReLU),
    becomes its out-of-place form, so that the batch norm's group can take it (no group spans a
    write): the same values, and the same gradients (eager's in-place op saves its result where
    the other saves its input; their backward formulas agree on both). Not where the function
    writes the tensor again afterwards: then which tensor eager saved decides whether its
    backward raises. (Only there: elsewhere it would form groups of a size a call seldom runs
    kernels for, in code a checked-in module then holds: an eval() example's residual add.)"""
    found = []
    results: set[Value] = set()  # (a chain, `out += identity; out = F.relu(out, inplace=True)`)
    for op in func.walk():
        call = isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)) and op.attributes.get("mutates") == (0,) \
            and op.attributes.get("alias_of") == 0 and not op.attributes.get("random") and not op.regions
        if not (call or isinstance(op, ops.InplaceOp)):  # (`out += identity`: a ResNet block's)
            continue
        target = op.operands[0]
        if isinstance(target.type, TensorType) and len(target.uses) == 1 and isinstance(target.owner, Operation) \
                and target.owner.parent is op.parent and (_trains_batch_norm(target.owner) or target in results):
            found.append(op)
            results.add(op.result)
    if not found:
        return
    others = _written(func, frozenset(found))
    if others is None:
        return
    roots = {op: _root(op.operands[0]) for op in found}
    for op in found:
        if roots[op] in others:
            continue
        block = op.parent
        before = set(block.ops)  # type: ignore[union-attr]
        try:
            new: Value | None = out_of_place(op, writes.Emitter(op))
        except writes.Unsupported:
            new = None
        if new is None or new.type != op.result.type \
                or not isinstance(new.owner, (ops.TorchCallOp, ops.TensorMethodOp, ops.BinaryOp)) \
                or op_name(new.owner) not in DERIVATIVES:  # (only what a group can take)
            for made in reversed([o for o in block.ops if o not in before]):  # type: ignore[union-attr]
                made.erase()
            continue
        new.name = op.result.name
        op.result.replace_all_uses_with(new)
        op.erase()


def _trains_batch_norm(op: Operation) -> bool:
    """`F.batch_norm(..., training=True, ...)` as the front end and ir/passes/layers.py write it."""
    if not isinstance(op, ops.TorchCallOp) or op_name(op) != "batch_norm":
        return False
    try:
        return bind(op, Facts()).const("training") is True
    except (Unsupported, TypeError, ValueError, KeyError):
        return False


# -- which ops ----------------------------------------------------------------------------------
def _arguments(op: Operation, facts: Facts) -> Args | None:
    """The op's arguments by parameter name: its operands (Values) or their constants."""
    args: Args = {}
    if isinstance(op, ops.BinaryOp):
        # (`x ** 2` is pow's `exponent`, as torch.pow binds it)
        args = {"self": op.operands[0], "exponent" if op_name(op) == "pow" else "other": op.operands[1]}
    elif isinstance(op, ops.UnaryOp):
        if op.attributes.get("op") != "-":
            return None
        args = {"self": op.operands[0]}
    elif isinstance(op, (ops.TorchCallOp, ops.TensorMethodOp)):
        try:
            call = bind(op, facts)
        except (Unsupported, TypeError, ValueError, KeyError):
            return None
        for name in call.args:
            value = call.const(name)
            args[name] = call.operands.get(name) if value is UNKNOWN else value
            if args[name] is None and value is UNKNOWN:
                return None
    else:
        return None
    for name, v in list(args.items()):  # (a constant operand: its value)
        if isinstance(v, Value) and isinstance(v.owner, ops.ConstantOp):
            args[name] = v.owner.attributes["value"]
    return args


def _candidate(op: Operation, facts: Facts) -> Args | None:
    """The op's arguments when it is an op this pass fuses, else None."""
    if op.regions or len(op.results) != 1 or not op.has_trait(PURE) or op_name(op) not in DERIVATIVES:
        return None
    if op.attributes.get("random") or op.attributes.get("mutates") or "out" in op.attributes.get("kwnames", ()):
        return None
    t = op.result.type
    if not (known_tensor(t) and t.dtype in DTYPES and t.device == "cpu"):  # type: ignore[union-attr]
        return None
    for v in op.operands:
        if isinstance(v.type, TensorType):
            if not known_tensor(v.type) or v.type.device != "cpu":
                return None
            if v.type.dtype != t.dtype and not (op_name(op) == "where" and v is op.operands[0]  # type: ignore[union-attr]
                                                and v.type.dtype == "bool"):
                return None
        elif v.type not in SCALARS + (BOOL,) and not isinstance(v.owner, ops.ConstantOp):
            return None
    args = _arguments(op, facts)
    if args is None or not DERIVATIVES[op_name(op)].check(args):
        return None
    if any(isinstance(v, Value) and not isinstance(v.type, TensorType) and v.type not in SCALARS
           for v in args.values()):
        return None
    return args


# -- groups -------------------------------------------------------------------------------------
@dataclass(eq=False)
class _Group:
    ops: list[Operation] = field(default_factory=list)
    args: dict[Operation, Args] = field(default_factory=dict)
    closed: bool = False
    head: Operation | None = None  # a batch norm in train mode, whose result the ops read
    head_call: Any = None  # its arguments, bound (emitter.Call)

    @property
    def last(self) -> Operation:
        return self.ops[-1] if self.ops else self.head  # type: ignore[return-value]


def _fuse_block(program: Program, func: ops.FuncOp, block: Block, written: set[object], strided: set[Value],
                namer: KernelNamer) -> None:
    facts = Facts()
    groups: list[_Group] = []
    owner: dict[Value, _Group] = {}
    for op in list(block.ops):
        if writes_in(op) or any(inner.attributes.get("random") for inner in op.walk()):
            # (no group spans a random op either: kept simple, though no kernel draws numbers)
            for g in groups:
                g.closed = True
        head = _batch_norm_head(op, facts, program)
        if head is not None:
            g = _Group(head=op, head_call=head)
            groups.append(g)
            owner[op.result] = g
            continue
        joined = [g for g in dict.fromkeys(owner[v] for v in op.operands if v in owner) if not g.closed]
        norm = [g for g in joined if g.head is not None]
        # (a batch norm's group takes channels-last values: its kernels read either layout)
        args = _candidate(op, facts) if norm or not any(v in strided for v in op.operands) else None
        if args is not None and norm and (len(joined) > 1 or not _fits_norm(op, norm[0])):
            args = None
        if args is not None:
            target = joined[0] if joined else _Group()
            if not joined:
                groups.append(target)
            for g in joined[1:]:
                target.ops += g.ops
                target.args.update(g.args)
                for o in g.ops:
                    owner[o.result] = target
                groups.remove(g)
            target.ops.sort(key=block.ops.index)
            target.ops.append(op)
            target.args[op] = args
            owner[op.result] = target
            continue
        for v in (v for inner in op.walk() for v in inner.operands):
            if v in owner:
                owner[v].closed = True
    for g in groups:
        if g.head is not None:
            _build_norm(program, func, block, g, written, namer)
        elif len(g.ops) >= 2:
            _build(program, func, block, g, written, namer)


def _operands(group: list[Operation], values: set[Value]) -> tuple[list[Value], list[Value]]:
    """The tensors and the scalars the ops of a group read from outside it (not `values`, its
    own; constants stay the kernels' literals), each once, in order of first use."""
    tensors: list[Value] = []
    scalars: list[Value] = []
    for op in group:
        for v in op.operands:
            if v in values or isinstance(v.owner, ops.ConstantOp):
                continue
            target = tensors if isinstance(v.type, TensorType) else scalars
            if v not in target:
                target.append(v)
    return tensors, scalars


def _build(program: Program, func: ops.FuncOp, block: Block, g: _Group, written: set[object],
           namer: KernelNamer) -> None:
    members = set(g.ops)
    tensors, scalars = _operands(g.ops, {op.result for op in g.ops})
    outputs = [op.result for op in g.ops if any(u.op not in members for u in op.result.uses)]
    shape = iteration_shape(tensors + [op.result for op in g.ops])
    if not outputs or shape is None or any(tuple(o.type.shape) != shape for o in outputs):  # type: ignore[union-attr]
        return
    if not all(_safe(v, written) for v in tensors + outputs):
        return
    device = "cpu"
    grads = tuple(i for i, v in enumerate(tensors) if v.type.dtype in DTYPES)  # type: ignore[union-attr]
    # A second backward without the gradients of the function's own arguments (a batch of data
    # needs none where the weights it meets do): one output fewer to write on such a call.
    partial = tuple(i for i in grads if not (isinstance(tensors[i], BlockArg) and tensors[i].block is func.body))
    try:
        forward = _forward_body(g, tensors, scalars, outputs, device)
        backwards = [_backward_body(g, tensors, scalars, outputs, wanted, device)
                     for wanted in ([grads, partial] if partial and partial != grads else [grads])]
    except Unsupported:
        return
    name = namer.take(g.ops, [op_name(op) for op in g.ops])
    last = g.ops[-1]
    n_in, n_out = len(tensors), len(outputs)
    region = Block([v.type for v in tensors + scalars] + [o.type for o in outputs],
                   [v.name for v in tensors + scalars] + [f"grad_{o.name}" if o.name else None for o in outputs])
    inputs, numbers, output_grads = (region.args[:n_in], region.args[n_in:n_in + len(scalars)],
                                     region.args[n_in + len(scalars):])
    region.append(kernel_ops.PointwiseKernelOp(inputs + numbers, [o.type for o in outputs], {"name": name, "inputs": n_in},
                                        regions=[Region([forward])], loc=last.loc))
    for body, wanted, suffix in zip(backwards, (grads, partial), ("_backward", "_backward_weights")):
        full = [TensorType(tensors[i].type.dtype, shape, device) for i in wanted]  # type: ignore[union-attr]
        region.append(kernel_ops.PointwiseKernelOp(inputs + output_grads + numbers, full,
                                            {"name": name + suffix, "inputs": n_in + n_out},
                                            regions=[Region([body])], loc=last.loc))
    region.append(ops.YieldOp([], [], {}, loc=last.loc))
    eager = _eager_function(program, func, g, tensors, scalars, outputs, name)
    attributes = {"name": f"{name}_autograd", "inputs": n_in, "grads": grads, "eager": eager.sym_name,
                  "depends": _depends(g, tensors, outputs, grads)}
    if len(backwards) > 1:
        attributes["partial"] = partial
    kernel = kernel_ops.AutogradKernelOp(tensors + scalars, [o.type for o in outputs], attributes,
                                  regions=[Region([region])], loc=last.loc)
    replace_group(block, last, kernel, outputs, g.ops)


# -- groups headed by a batch norm in train mode -------------------------------------------------
NORM_TENSORS = ("weight", "bias", "running_mean", "running_var")  # (after x, in the group's operands)


def _batch_norm_head(op: Operation, facts: Facts, program: Program) -> Any:
    """The bound arguments of `F.batch_norm(x, running_mean, running_var, weight, bias, True,
    momentum, eps)` on a CPU float tensor of 2 dims or more (the weight, bias and running
    statistics tensors of its dtype, momentum and eps numbers), which heads a group whose
    kernels compute its statistics and normalise (runtime/include's ts_batch_norm_train); else
    None. Not in a module compiled for CUDA too: those kernels are C++ alone."""
    if not isinstance(op, ops.TorchCallOp) or op_name(op) != "batch_norm" or len(op.results) != 1 or op.regions \
            or "cuda" in program.devices:
        return None
    try:
        call = bind(op, facts)
    except (Unsupported, TypeError, ValueError, KeyError):
        return None
    if call.const("training") is not True:
        return None
    x = call.operands.get("self")  # (bound as aten names it)
    if x is None or not known_tensor(x.type) or x.type.dtype not in DTYPES or x.type.device != "cpu" \
            or len(x.type.shape) < 2 or op.result.type != x.type:  # type: ignore[union-attr]
        return None
    for name in NORM_TENSORS:
        v = call.operands.get(name)
        if v is None or not isinstance(v.type, TensorType) or v.type.dtype != x.type.dtype \
                or v.type.device != "cpu" or v.type.shape is None or len(v.type.shape) != 1:  # type: ignore[union-attr]
            return None
    for name in ("momentum", "eps"):
        v = call.operands.get(name)
        if v is None or not (v.type in SCALARS or isinstance(v.owner, ops.ConstantOp)
                             and isinstance(v.owner.attributes["value"], (int, float))
                             and not isinstance(v.owner.attributes["value"], bool)):
            return None
    return call


def _fits_norm(op: Operation, g: _Group) -> bool:
    """Whether a batch norm's group can take `op`: each tensor it reads is a value of the group
    or a tensor of the batch norm's input's shape (its kernels index every tensor as the input)."""
    values = {g.head.result} | {o.result for o in g.ops}  # type: ignore[union-attr]
    shape = tuple(g.head_call.operands["self"].type.shape)
    return all(v in values or not isinstance(v.type, TensorType) or tuple(v.type.shape) == shape  # type: ignore[union-attr]
               for v in op.operands)


def _build_norm(program: Program, func: ops.FuncOp, block: Block, g: _Group, written: set[object],
                namer: KernelNamer) -> None:
    """The group of a batch norm in train mode and the pointwise ops on its result (none, where
    its result goes straight to a conv): one function that autograd records, whose kernels
    (kernel.batch_norm_chain) run the ops on each element the batch norm normalises, and in
    backward differentiate them on the way to the batch norm's own gradients. Eager's batch norm
    saves its input and weight, as this one does; the other tensors the ops read, the group's
    outputs and the bias (saved here, not by eager) must not be written by the function (as for
    any group)."""
    head, call = g.head, g.head_call
    assert head is not None
    x = call.operands["self"]
    norm = [call.operands[name] for name in NORM_TENSORS]
    members = set(g.ops) | {head}
    others, scalars = _operands(g.ops, {head.result} | {op.result for op in g.ops})
    outputs = [v for v in [head.result, *(op.result for op in g.ops)] if any(u.op not in members for u in v.uses)]
    shape = tuple(x.type.shape)  # type: ignore[union-attr]
    if not outputs or any(tuple(v.type.shape) != shape or v.type.dtype != x.type.dtype  # type: ignore[union-attr]
                          for v in outputs + others):
        return
    # (the backward recomputes the normalised values from the bias, which eager's batch norm
    # does not save: the function must not write it)
    if not all(_safe(v, written) for v in [*others, *outputs, call.operands["bias"]]):
        return
    last = g.last
    # (the running statistics are written where the group's last op was: nothing between may
    # read a tensor the caller holds)
    for op in block.ops[block.ops.index(head) + 1:block.ops.index(last)]:
        if op not in members and any(isinstance(v.type, TensorType) and _root(v) in (OUTSIDE, None)
                                     or isinstance(_root(v), tuple) for inner in op.walk() for v in inner.operands):
            return
    settings = [call.operands["momentum"], call.operands["eps"]]
    # (in the kernels' blocks the batch norm's result stands for x: its normalised element)
    tensors = [head.result, *norm, *others]
    n_norm = 1 + len(norm)
    chain_grads = (0, *(n_norm + i for i, v in enumerate(others) if v.type.dtype in DTYPES))  # type: ignore[union-attr]
    try:
        forward = _forward_body(g, tensors, scalars, outputs, "cpu")
        backward = _backward_body(g, tensors, scalars, outputs, chain_grads, "cpu")
    except Unsupported:
        return
    name = namer.take([head, *g.ops], [op_name(op) for op in [head, *g.ops]])
    n_in, n_out = len(tensors), len(outputs)
    operands = [x, *norm, *others]
    region = Block([v.type for v in operands + scalars + settings] + [o.type for o in outputs],
                   [v.name for v in operands + scalars + settings] + [f"grad_{o.name}" if o.name else None for o in outputs])
    inputs = region.args[:n_in]
    numbers = region.args[n_in:n_in + len(scalars)]
    output_grads = region.args[n_in + len(scalars) + len(settings):]
    region.append(kernel_ops.BatchNormChainOp(inputs + numbers, [o.type for o in outputs], {"name": name, "inputs": n_in},
                                              regions=[Region([forward])], loc=last.loc))
    grad_types = [tensors[i].type for i in chain_grads]
    region.append(kernel_ops.BatchNormChainOp(inputs + output_grads + numbers, grad_types,
                                              {"name": name + "_backward", "inputs": n_in + n_out, "backward": True},
                                              regions=[Region([backward])], loc=last.loc))
    region.append(ops.YieldOp([], [], {}, loc=last.loc))
    group = _Group(ops=[head, *g.ops], args=g.args)
    eager = _eager_function(program, func, group, operands, scalars + settings, outputs, name)
    grads = (0, 1, 2, *chain_grads[1:])
    depends = tuple(tuple(sorted(set(d) | ({1, 2} if 0 in d else set())))
                    for d in _depends(g, tensors, outputs, (0, *chain_grads[1:])))
    attributes = {"name": f"{name}_autograd", "inputs": n_in, "grads": grads, "eager": eager.sym_name,
                  "depends": depends, "batch_norm": True}
    kernel = kernel_ops.AutogradKernelOp(operands + scalars + settings, [o.type for o in outputs], attributes,
                                         regions=[Region([region])], loc=last.loc)
    replace_group(block, last, kernel, outputs, [head, *g.ops])


def _depends(g: _Group, tensors: list[Value], outputs: list[Value], grads: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """For each output, the inputs in `grads` it is computed from."""
    reach: dict[Value, set[int]] = {v: {i} for i, v in enumerate(tensors) if i in grads}
    for op in g.ops:
        reach[op.result] = set().union(*(reach.get(v, set()) for v in op.operands))
    return tuple(tuple(sorted(reach[o])) for o in outputs)


# -- the kernels' bodies ------------------------------------------------------------------------
def _constants_of(op: Operation, body: Block, mapping: dict[Value, Value]) -> None:
    """Copies into `body` of the constants `op` reads that it has none of yet (a group's
    constants stay outside it; each body it is cloned into needs its own)."""
    for v in op.operands:
        if isinstance(v.owner, ops.ConstantOp) and v not in mapping:
            const = clone_op(v.owner, {})
            body.append(const)
            mapping[v] = const.result


def _elements(body: Block, g: _Group, mapping: dict[Value, Value], device: str, facts: Facts) -> None:
    """The group's ops on elements, decomposed into the primitives the kernel emitters
    implement; `mapping` takes each group value to its element."""
    for op in g.ops:
        _constants_of(op, body, mapping)
        clone = clone_op(op, mapping)
        clone.result.type = TensorType(op.result.type.dtype, (), device)  # type: ignore[union-attr]
        body.append(clone)
        result = clone.result
        if op_name(op) not in FUSIBLE:
            e = Emitter(clone, facts)
            call = bind(clone, facts)
            rule = DECOMPOSITIONS.get(call.name)
            if rule is None:
                raise Unsupported(f"no decomposition of {call.name}")
            result = rule(e, call)
            e.commit()
            clone.erase()
        mapping[op.result] = result


def _element_types(values: list[Value], device: str) -> list:
    return [TensorType(v.type.dtype, (), device) if isinstance(v.type, TensorType) else v.type for v in values]  # type: ignore[union-attr]


def _forward_body(g: _Group, tensors: list[Value], scalars: list[Value], outputs: list[Value], device: str) -> Block:
    body = Block(_element_types(tensors + scalars, device), [v.name for v in tensors + scalars])
    mapping = dict(zip(tensors + scalars, body.args))
    _elements(body, g, mapping, device, Facts())
    body.append(ops.YieldOp([mapping[o] for o in outputs], [], {}, loc=g.last.loc))
    _checked(body)
    return body


def _backward_body(g: _Group, tensors: list[Value], scalars: list[Value], outputs: list[Value],
                   grads: tuple[int, ...], device: str) -> Block:
    """The inputs and the outputs' gradients in, each differentiated input's gradient out: the
    forward computed again, then each op's rule, last op first, each contribution added to the
    gradient of the value it is for."""
    types = _element_types(tensors, device) + _element_types(outputs, device) + _element_types(scalars, device)
    body = Block(types, [v.name for v in tensors] + [f"grad_{o.name}" if o.name else None for o in outputs]
                 + [v.name for v in scalars])
    n_in, n_out = len(tensors), len(outputs)
    mapping = dict(zip(tensors, body.args[:n_in])) | dict(zip(scalars, body.args[n_in + n_out:]))
    facts = Facts()
    _elements(body, g, mapping, device, facts)
    adjoint: dict[Value, Value] = dict(zip(outputs, body.args[n_in:n_in + n_out]))
    for op in reversed(g.ops):
        grad = adjoint.get(op.result)
        if grad is None:
            continue
        args = {name: mapping.get(v, v) if isinstance(v, Value) else v for name, v in g.args[op].items()}
        e = Emitter(op, facts)
        contributions = DERIVATIVES[op_name(op)].grad(e, args, mapping[op.result], grad)
        for name in DIFFERENTIABLE:
            original = g.args[op].get(name)
            if name in contributions and isinstance(original, Value) and isinstance(original.type, TensorType) \
                    and original.type.dtype in DTYPES:  # type: ignore[union-attr]
                part = contributions[name]
                adjoint[original] = part if original not in adjoint else e.binary("+", adjoint[original], part)
        for new in list(e.block.ops):
            e.block.ops.remove(new)
            new.parent = None
            body.append(new)
    missing = [i for i in grads if tensors[i] not in adjoint]
    if missing:
        raise Unsupported("an input without a gradient")
    body.append(ops.YieldOp([adjoint[tensors[i]] for i in grads], [], {}, loc=g.last.loc))
    _dead_code(body)
    _checked(body)
    return body


def _dead_code(body: Block) -> None:
    """Drop what the yield does not read (the forward's outputs, where only their gradient
    formula needed other values)."""
    for op in reversed(list(body.ops)):
        if op is not body.terminator and all(not r.uses for r in op.results):
            op.erase()


def _checked(body: Block) -> None:
    """Every op of a kernel body must be one the emitters implement, of 0-d tensors."""
    for op in body.ops:
        if isinstance(op, (ops.ConstantOp, ops.YieldOp)):
            continue
        for r in op.results:
            if isinstance(r.type, TensorType) and r.type.shape != ():
                raise Unsupported("not an element")
        if not pointwise_fusible(op):
            raise Unsupported(f"{op_name(op)} is not a kernel primitive")


# -- the group's torch ops, for a backward autograd records --------------------------------------
def _eager_function(program: Program, func: ops.FuncOp, g: _Group, tensors: list[Value], scalars: list[Value],
                    outputs: list[Value], name: str) -> ops.FuncOp:
    """`<func>.<kernel>`: the group's ops as eager runs them, of the inputs and the scalars; the
    function a backward with create_graph=True differentiates (runtime/autograd_kernels.py)."""
    taken = {f.sym_name for f in program.funcs if isinstance(f, ops.FuncOp)}
    sym, n = f"{func.sym_name}.{name}", 1
    while sym in taken:
        n += 1
        sym = f"{func.sym_name}.{name}_{n}"
    result = outputs[0].type if len(outputs) == 1 else TupleType(tuple(o.type for o in outputs))
    helper = ops.FuncOp.build(sym, [v.type for v in tensors + scalars], [v.name or f"in{i}" for i, v in
                                                                          enumerate(tensors + scalars)],
                              result, loc=func.loc)  # (its comments quote the function's lines)
    body = helper.body
    mapping = dict(zip(tensors + scalars, body.args))
    for op in g.ops:
        _constants_of(op, body, mapping)
        body.append(clone_op(op, mapping))
    returned = [mapping[o] for o in outputs]
    if len(returned) > 1:
        pack = ops.TupleOp(returned, [result])
        pack.loc = g.ops[-1].loc
        body.append(pack)
        returned = [pack.result]
    body.append(ops.ReturnOp(returned, loc=g.ops[-1].loc))
    program.funcs.insert(program.funcs.index(func), helper)
    return helper


__all__ = ["autograd_kernels"]

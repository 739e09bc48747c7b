"""Standard layers become the torch calls their forward makes, so later passes see tensor ops
instead of opaque module calls.

`module.call(%m, %x)` on a `Module[torch.nn.X]` in the table below becomes what
`torch.nn.X.forward` computes (torch/nn/modules/*.py), reading the layer's configuration from the
module at run time: `Linear` -> `F.linear(x, m.weight, m.bias)`, and so on. Each lowering adds an
entry guard (`runtime.guards.plain_module`) that the module is exactly that torch class without
hooks, plus the conditions under which its forward is that call:

- BatchNorm and Dropout: `scf.if m.training` keeps the module call in training (nn.Dropout's
  training side is `F.dropout(x, m.p, True)`, in place where `m.inplace`, which draws from torch's
  generator as its forward does; Dropout1d/2d stay module calls) and lowers the eval side: BatchNorm with running statistics (a guard
  condition) to F.batch_norm, the momentum unused and passed as 0.0; Dropout to its input itself
  (`p` outside [0, 1] raises in eager, so the guard checks it too). BatchNorm's training side is
  what its forward does when it tracks running statistics with a momentum and a count
  (`m.track_running_stats & (m.momentum is not None) & (m.num_batches_tracked is not None)`):
  `num_batches_tracked.add_(1)`, then `F.batch_norm(x, running_mean, running_var, weight, bias,
  True, momentum, eps)`, which updates the statistics (and decomposes into kernels where the
  input's facts are known); otherwise (a cumulative average, no tracking) the module call. Only
  in a specialisation (`Program.entry_inputs`): the generic code keeps the module call, one
  line. Specialised to an instance, the branches fold away under checks of `training` and of
  those settings. A layer of the instance that holds no running statistics
  (track_running_stats=False) normalises by the batch's in eval too: `F.batch_norm(x, None,
  None, weight, bias, True, 0.0, eps)`, under the condition "no_running_stats".
- Conv: padding_mode "zeros" (other modes pad first); string padding goes to F.conv* as is.
- Embedding: no max_norm (which renormalises the weight in place); pooling: no return_indices.
- An activation with `inplace` reads it at run time: `F.relu(x, inplace=True) if m.inplace else
  F.relu(x)`, as an scf.if, so the in-place write is explicit in the IR exactly when eager makes it.

The guard reads the module at entry, so it must be reachable from a module argument by attribute
reads (ir/passes/inline.py `module_path`); a layer reached through a loop over a ModuleList keeps
its call. Layers not in the table keep their call (of the layers the front end knows: Bilinear,
Unflatten, AlphaDropout, InstanceNorm1d/2d, MultiheadAttention; and nn.Sequential), as do calls
with other arguments than one tensor.

Nothing is lowered in ahead-of-time generic code (`Program.generic`: no instance, no input
types), where nothing would fuse: `self.conv1(x)` stays the layer's call, eager's own code in one
line, with no entry check to pin what a lowering would assume. A module call is opaque to
functionalization, so an in-place layer there writes what eager writes.

Where the module itself looks at the input's rank (BatchNorm's _check_input_dim; Dropout1d/2d,
which in eval return a view of an unbatched input and warn about odd ranks) and the IR knows the
rank, any other rank keeps the call. When the rank is not known the lowering assumes the batched
rank: an input eager rejects with a ValueError (BatchNorm) or a RuntimeError (Dropout1d) is not
rejected, Dropout2d does not warn, and an unbatched Dropout1d input comes back as itself rather
than as a view of itself. Values are the same wherever eager returns any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import torch

from ir.core import ops
from ir.core.builder import Builder
from ir.core.graph import Block, Operation, Program, Region, Value
from ir.core.rewrite import clone_op
from ir.core.types import ANY, BOOL, NONE, TENSOR, ModuleType, OptionalType, TensorType, Type, unify
from ir.passes.inline import (
    ModulePath,
    add_module_guard,
    assigned_attributes,
    module_path,
    name_shared_modules,
)
from ir.torchapi.callinfo import SignatureError, effect_attributes
from ir.torchapi.signatures import resolve_function, resolve_method

F = "torch.nn.functional."
OPTIONAL_TENSOR = OptionalType(TENSOR)


@dataclass(frozen=True)
class Const:
    """A constant argument (what the guard's conditions make of an attribute)."""

    value: object


# An argument: a module attribute read at run time (its IR type from ATTR_TYPES, else Any), a
# (name, type) pair, or a constant.
Arg = Union[str, tuple[str, Type], Const]
ATTR_TYPES: dict[str, Type] = {
    "weight": OPTIONAL_TENSOR,  # LayerNorm, GroupNorm, BatchNorm without affine: None
    "bias": OPTIONAL_TENSOR,
    "running_mean": TENSOR,  # the "running_stats" condition
    "running_var": TENSOR,
    "inplace": BOOL,
}
WEIGHT = ("weight", TENSOR)


@dataclass(frozen=True)
class Call:
    """`callee(x, *args, **kwargs)`; with `inplace`, the module's `inplace` picks between the
    call with `inplace=True` and the call without."""

    callee: str
    args: tuple[Arg, ...] = ()
    kwargs: tuple[tuple[str, Arg], ...] = ()
    inplace: bool = False
    method: bool = False  # x.callee(*args) rather than a function


@dataclass(frozen=True)
class Layer:
    lowering: Call | None  # None: the layer returns its input
    conditions: tuple[str, ...] = ()  # runtime/guards.py _LAYER_CONDITIONS
    ranks: tuple[int, ...] | None = None  # input ranks the lowering is exact for (see above)
    training: Call | None = None  # with "eval": the training side where the module allows it (BatchNorm)
    # Compiled for an instance whose layer holds no running statistics (a BatchNorm with
    # track_running_stats=False normalises by the batch's in eval too): the eval side, with the
    # "no_running_stats" condition in place of "running_stats".
    batch_stats: Call | None = None


def _conv(n: int) -> Layer:
    return Layer(Call(F + f"conv{n}d", (WEIGHT, "bias", "stride", "padding", "dilation", "groups")), ("zeros_padding",))


def _conv_transpose(n: int) -> Layer:
    # (ConvTranspose's forward without `output_size`: its `output_padding` setting as it is)
    return Layer(Call(F + f"conv_transpose{n}d", (WEIGHT, "bias", "stride", "padding", "output_padding", "groups",
                                                   "dilation")), ("zeros_padding",))


def _batch_norm(rank: tuple[int, ...]) -> Layer:
    args = ("running_mean", "running_var", "weight", "bias", Const(False), Const(0.0), "eps")
    training = ("running_mean", "running_var", "weight", "bias", Const(True), "momentum", "eps")
    batch = (Const(None), Const(None), "weight", "bias", Const(True), Const(0.0), "eps")
    return Layer(Call(F + "batch_norm", args), ("eval", "running_stats"), rank, Call(F + "batch_norm", training),
                 Call(F + "batch_norm", batch))


def _max_pool(n: int) -> Layer:
    return Layer(Call(F + f"max_pool{n}d", ("kernel_size", "stride", "padding", "dilation"), (("ceil_mode", "ceil_mode"),)),
                 ("no_indices",))


LAYERS: dict[str, Layer] = {
    "torch.nn.Linear": Layer(Call(F + "linear", (WEIGHT, "bias"))),
    "torch.nn.Conv1d": _conv(1),
    "torch.nn.Conv2d": _conv(2),
    "torch.nn.Conv3d": _conv(3),
    "torch.nn.ConvTranspose1d": _conv_transpose(1),
    "torch.nn.ConvTranspose2d": _conv_transpose(2),
    "torch.nn.ConvTranspose3d": _conv_transpose(3),
    "torch.nn.BatchNorm1d": _batch_norm((2, 3)),
    "torch.nn.BatchNorm2d": _batch_norm((4,)),
    "torch.nn.BatchNorm3d": _batch_norm((5,)),
    "torch.nn.LayerNorm": Layer(Call(F + "layer_norm", ("normalized_shape", "weight", "bias", "eps"))),
    "torch.nn.GroupNorm": Layer(Call(F + "group_norm", ("num_groups", "weight", "bias", "eps"))),
    "torch.nn.RMSNorm": Layer(Call(F + "rms_norm", ("normalized_shape", "weight", "eps"))),
    # (in training, what its forward calls: F.dropout draws from torch's generator as the layer does)
    "torch.nn.Dropout": Layer(None, ("eval", "valid_p"), training=Call(F + "dropout", ("p", Const(True)), inplace=True)),
    "torch.nn.Dropout1d": Layer(None, ("eval", "valid_p"), (3,)),  # 2-d: eager returns a view
    "torch.nn.Dropout2d": Layer(None, ("eval", "valid_p"), (4,)),  # other ranks: eager warns
    "torch.nn.Identity": Layer(None),
    "torch.nn.Flatten": Layer(Call("flatten", ("start_dim", "end_dim"), method=True)),
    "torch.nn.Embedding": Layer(
        Call(F + "embedding", (WEIGHT, "padding_idx", Const(None), "norm_type", "scale_grad_by_freq", "sparse")),
        ("no_max_norm",),
    ),
    "torch.nn.MaxPool1d": _max_pool(1),
    "torch.nn.MaxPool2d": _max_pool(2),
    "torch.nn.AvgPool1d": Layer(Call(F + "avg_pool1d", ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"))),
    "torch.nn.AvgPool2d": Layer(Call(F + "avg_pool2d", (
        "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"))),
    "torch.nn.Unfold": Layer(Call(F + "unfold", ("kernel_size", "dilation", "padding", "stride"))),
    "torch.nn.AdaptiveAvgPool1d": Layer(Call(F + "adaptive_avg_pool1d", ("output_size",))),
    "torch.nn.AdaptiveAvgPool2d": Layer(Call(F + "adaptive_avg_pool2d", ("output_size",))),
    "torch.nn.AdaptiveMaxPool2d": Layer(Call(F + "adaptive_max_pool2d", ("output_size", Const(False))), ("no_indices",)),
    "torch.nn.Upsample": Layer(Call(F + "interpolate", ("size", "scale_factor", "mode", "align_corners"),
                                    kwargs=(("recompute_scale_factor", "recompute_scale_factor"),))),
    "torch.nn.PixelShuffle": Layer(Call(F + "pixel_shuffle", ("upscale_factor",))),
    "torch.nn.ZeroPad2d": Layer(Call(F + "pad", ("padding", Const("constant"), "value"))),
    "torch.nn.ConstantPad2d": Layer(Call(F + "pad", ("padding", Const("constant"), "value"))),
    # Activations, as each forward calls its function.
    "torch.nn.ReLU": Layer(Call(F + "relu", inplace=True)),
    "torch.nn.ReLU6": Layer(Call(F + "hardtanh", ("min_val", "max_val"), inplace=True)),  # Hardtanh.forward
    "torch.nn.Hardtanh": Layer(Call(F + "hardtanh", ("min_val", "max_val"), inplace=True)),
    "torch.nn.LeakyReLU": Layer(Call(F + "leaky_relu", ("negative_slope",), inplace=True)),
    "torch.nn.ELU": Layer(Call(F + "elu", ("alpha",), inplace=True)),
    "torch.nn.CELU": Layer(Call(F + "celu", ("alpha",), inplace=True)),
    "torch.nn.SELU": Layer(Call(F + "selu", inplace=True)),
    "torch.nn.SiLU": Layer(Call(F + "silu", inplace=True)),
    "torch.nn.Mish": Layer(Call(F + "mish", inplace=True)),
    "torch.nn.Hardswish": Layer(Call(F + "hardswish", inplace=True)),
    "torch.nn.Hardsigmoid": Layer(Call(F + "hardsigmoid", inplace=True)),
    "torch.nn.Threshold": Layer(Call(F + "threshold", ("threshold", "value"), inplace=True)),
    "torch.nn.GELU": Layer(Call(F + "gelu", kwargs=(("approximate", "approximate"),))),
    "torch.nn.Sigmoid": Layer(Call("torch.sigmoid")),
    "torch.nn.Tanh": Layer(Call("torch.tanh")),
    "torch.nn.Softplus": Layer(Call(F + "softplus", ("beta", "threshold"))),
    "torch.nn.Softsign": Layer(Call(F + "softsign")),
    "torch.nn.Tanhshrink": Layer(Call(F + "tanhshrink")),
    "torch.nn.GLU": Layer(Call(F + "glu", ("dim",))),
    "torch.nn.PReLU": Layer(Call(F + "prelu", (WEIGHT,))),
    "torch.nn.Softmax": Layer(Call(F + "softmax", ("dim",))),
    "torch.nn.LogSoftmax": Layer(Call(F + "log_softmax", ("dim",))),
    "torch.nn.Softmin": Layer(Call(F + "softmin", ("dim",))),
}


def lower_layers(program: Program) -> None:
    if program.generic:
        return
    assigned = assigned_attributes(program)
    specialised = bool(program.entry_inputs)
    for func in program.funcs:
        assert isinstance(func, ops.FuncOp)
        sites = [op for op in func.walk() if isinstance(op, ops.ModuleCallOp)]
        lowered = [_lower(program, func, call, assigned, specialised) for call in sites]
        if any(lowered):
            name_shared_modules(func)


def _lower(program: Program, func: ops.FuncOp, call: ops.ModuleCallOp, assigned: set[str],
           specialised: bool = False) -> bool:
    module = call.operands[0]
    if not isinstance(module.type, ModuleType) or module.type.qualname not in LAYERS:
        return False
    layer = LAYERS[module.type.qualname]
    if call.attributes.get("kept") or call.attributes.get("kwnames") or len(call.operands) != 2 or len(call.results) != 1:
        return False
    x = call.operands[1]
    if not isinstance(x.type, TensorType):
        return False
    if layer.ranks is not None and x.type.rank is not None and x.type.rank not in layer.ranks:
        return False
    path = module_path(module, func, assigned)
    if path is None:
        return False
    site = _Site(call, module, x)
    site.read_module_here()
    conditions = layer.conditions
    try:
        if "eval" in conditions:  # training is a run-time branch, not a reason to run eagerly
            conditions = tuple(c for c in conditions if c != "eval")
            lowering = layer.lowering
            if layer.batch_stats is not None and _without_running_stats(program, func, path):
                lowering = layer.batch_stats
                conditions = tuple("no_running_stats" if c == "running_stats" else c for c in conditions)
            result = site.build_eval_only(lowering, layer.training if specialised else None)
        else:
            result = x if layer.lowering is None else site.build(layer.lowering, site.scratch)
    except SignatureError:
        site.discard()
        return False
    site.commit()
    old = call.result
    if result is not x and result.name is None:
        result.name = old.name
    old.replace_all_uses_with(result)
    call.erase()
    if site.module is not module and not module.uses and isinstance(module.owner, Operation):
        module.owner.erase()  # the read the lowering repeated next to the call
    add_module_guard(func, path, module.type.qualname, conditions, call.loc)
    return True


def _without_running_stats(program: Program, func: ops.FuncOp, path: ModulePath) -> bool:
    """Whether the layer at `path`, in the instance `func` is compiled for, holds no running
    statistics (a BatchNorm with track_running_stats=False); False where there is no instance."""
    given = program.entry_inputs.get(func.sym_name) or []
    index = func.args.index(path.root) if path.root in func.args else len(given)
    module = given[index] if index < len(given) else None
    for part in path.parts:
        name = part.rstrip("?")
        children = getattr(module, "_modules", None)
        module = children.get(name) if isinstance(children, dict) else None
    buffers = getattr(module, "_buffers", None)
    return isinstance(module, torch.nn.Module) and isinstance(buffers, dict) \
        and buffers.get("running_mean", 0) is None and buffers.get("running_var", 0) is None


@dataclass
class _Site:
    """Builds a lowering in a scratch block, then moves it in front of the call."""

    call: ops.ModuleCallOp
    module: Value
    x: Value
    scratch: Block = field(default_factory=Block)
    blocks: list[Block] = field(default_factory=list)  # region blocks built so far

    def read_module_here(self) -> None:
        """Read the module (its last attribute or index step) again next to the call, so each
        lowering reads its layer where it runs (`fc = self.fc` just before `F.linear(x, fc.weight,
        fc.bias)`); the earlier read goes once the call is replaced."""
        owner = self.module.owner
        if isinstance(owner, (ops.GetAttrOp, ops.GetItemOp)):
            fresh = clone_op(owner, {})
            fresh.loc = self.call.loc
            self.scratch.append(fresh)
            self.module = fresh.result

    def builder(self, block: Block) -> Builder:
        b = Builder(block)
        b.loc = self.call.loc
        return b

    def build_eval_only(self, spec: Call | None, training: Call | None = None) -> Value:
        """`module.training` picks: in training the module call itself (what eager runs), or
        `training` (a Dropout's F.dropout, which draws as the layer does; for a BatchNorm
        `build_training`); the lowering (or the input itself when `spec` is None) in eval mode."""
        b = self.builder(self.scratch)
        cond = self.read(b, "training", BOOL)
        train, evaluate = Block(), Block()
        self.blocks += [train, evaluate]
        trained = self.kept_call(train) if training is None else self.build_training(training, train) \
            if training.callee == F + "batch_norm" else self.build(training, train)
        self.builder(train).create(ops.YieldOp, [trained])
        result = self.x if spec is None else self.build(spec, evaluate)
        self.builder(evaluate).create(ops.YieldOp, [result])
        return self.branch(b, cond, (train, evaluate), (trained, result))

    def kept_call(self, block: Block) -> Value:
        call = clone_op(self.call, {self.call.operands[0]: self.module})
        call.attributes["kept"] = "training"  # not to be lowered again
        block.append(call)
        return call.result

    def branch(self, b: Builder, cond: Value, blocks: tuple[Block, Block], results: tuple[Value, Value]) -> Value:
        if_op = b.create(ops.IfOp, [cond], [unify(results[0].type, results[1].type) or TENSOR])
        for block in blocks:
            if_op.add_region(Region([block]))
        return if_op.result

    def build_training(self, spec: Call, block: Block) -> Value:
        """BatchNorm's forward in training where it tracks running statistics with a momentum
        and a count: `num_batches_tracked.add_(1)`, then `spec` (F.batch_norm with training=True
        and the momentum, which updates the statistics); else the module call."""
        b = self.builder(block)
        none = b.constant(None)
        momentum = self.read(b, "momentum")
        count = self.read(b, "num_batches_tracked", OPTIONAL_TENSOR)
        cond = self.read(b, "track_running_stats", BOOL)
        for value in (momentum, count):
            known = b.create(ops.CompareOp, [value, none], [BOOL], op="is not").result
            cond = b.create(ops.BinaryOp, [cond, known], [BOOL], op="&").result
        tracked, kept = Block(), Block()
        self.blocks += [tracked, kept]
        inner = self.builder(tracked)
        count = inner.create(ops.RefineOp, [count], [TENSOR]).result
        _torch_op(inner, ops.TensorMethodOp, "add_", [count, inner.constant(1)], [], method=True)
        result = self.emit(inner, spec, False)
        inner.create(ops.YieldOp, [result])
        call = self.kept_call(kept)
        self.builder(kept).create(ops.YieldOp, [call])
        return self.branch(b, cond, (tracked, kept), (result, call))

    def build(self, spec: Call, block: Block) -> Value:
        b = self.builder(block)
        if not spec.inplace:
            return self.emit(b, spec, False)
        cond = self.read(b, "inplace")
        blocks = [Block(), Block()]
        self.blocks += blocks
        results = []
        for block, inplace in zip(blocks, (True, False)):
            inner = self.builder(block)
            results.append(self.emit(inner, spec, inplace))
            inner.create(ops.YieldOp, [results[-1]])
        t = unify(results[0].type, results[1].type) or TENSOR
        if_op = b.create(ops.IfOp, [cond], [t])
        for block in blocks:
            if_op.add_region(Region([block]))
        return if_op.result

    def emit(self, b: Builder, spec: Call, inplace: bool) -> Value:
        args = [self.arg(b, a) for a in spec.args]
        kwargs = [(k, self.arg(b, a)) for k, a in spec.kwargs]
        if inplace:
            kwargs.append(("inplace", b.constant(True)))
        if spec.method:
            return _torch_op(b, ops.TensorMethodOp, spec.callee, [self.x, *args], kwargs, method=True)
        return _torch_op(b, ops.TorchCallOp, spec.callee, [self.x, *args], kwargs)

    def arg(self, b: Builder, arg: Arg) -> Value:
        if isinstance(arg, Const):
            return b.constant(arg.value)
        if isinstance(arg, tuple):
            return self.read(b, arg[0], arg[1])
        return self.read(b, arg)

    def read(self, b: Builder, name: str, t: Type | None = None) -> Value:
        return b.create(ops.GetAttrOp, [self.module], [t or ATTR_TYPES.get(name, ANY)], attr=name).result

    def commit(self) -> None:
        block = self.call.parent
        assert block is not None
        for op in list(self.scratch.ops):
            self.scratch.ops.remove(op)
            op.parent = None
            block.insert_before(self.call, op)

    def discard(self) -> None:
        """Drop what was built (a signature did not bind), unlinking it from the values it used."""
        for block in [self.scratch, *self.blocks]:
            for op in reversed(list(block.ops)):
                for r in op.results:
                    r.uses.clear()
                if op.parent is block:
                    op.erase()


def _torch_op(b: Builder, cls: type[Operation], callee: str, operands: list[Value],
              kwargs: list[tuple[str, Value]], method: bool = False) -> Value:
    """A torch.call / torch.method with the effects torch's signature gives it (as the front end
    builds them: transpiler/lower_calls.py torch_op)."""
    positional = operands[1:] if method else operands
    consts: dict[int | str, object] = {
        i: v.owner.value for i, v in enumerate(positional) if isinstance(v.owner, ops.ConstantOp)
    }
    consts.update({k: v.owner.value for k, v in kwargs if isinstance(v.owner, ops.ConstantOp)})
    kw_types = {k: v.type for k, v in kwargs}
    if method:
        info = resolve_method(callee, operands[0].type, [v.type for v in positional], kw_types, consts)
    else:
        info = resolve_function(callee, [v.type for v in positional], kw_types, consts)
    attrs: dict[str, object] = {"method" if method else "callee": callee}
    if kwargs:
        attrs["kwnames"] = tuple(k for k, _ in kwargs)
    attrs.update(effect_attributes(info))
    if info.result == NONE:
        raise SignatureError(f"{callee} returns nothing")
    op = cls([*operands, *(v for _, v in kwargs)], [info.result], attrs, loc=b.loc)
    b.insert(op)
    return op.result


"""A hypothesis strategy that writes nn.Module programs as Python source, the kind of model code
that `script(instance, example_inputs=(x,))` compiles into fused kernels: an `__init__` building
layers (Linear, Conv2d with BatchNorm2d, LayerNorm, GroupNorm, Dropout, parameters, ModuleList
and Sequential of layers or of a nested `Block` class) and a `forward` that loops over them, adds
residuals functionally (`x = x + f(x)`, pre- and post-norm MLPs, gated units) and in place
(`x = x.clone()`, then `x += h`; activations in place; a `skip` that aliases x), applies
activations, norms, softmaxes and mean/var reductions after pointwise chains (row-reduction
kernels with row buffers), linear or conv layers with bias and activation epilogues, views
(chunks, slices, transposes, a flipped batch) and cats, and may return a second output.

Every program is valid eager PyTorch by construction: the generator tracks the shape of `x`
(image-shaped `(B, C, H, W)` until it is pooled or flattened, then `(B, [T,] D)`) and whether
`x` is a tensor the forward owns (in-place updates only after a clone or a fresh result, never
on the caller's input). Programs meant to run in training mode use no dropout with p > 0 (they
must be deterministic); batch norm then uses the batch's statistics and updates its running
ones, which the test compares too.

``module_programs()`` gives a ``ModuleProgram``: its source (classes ``Block`` and ``Model``),
the example input's shape, and its dtype, mode and seed. Choices are drawn so that hypothesis
shrinks toward fewer, simpler statements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import hypothesis.strategies as st
import torch

HEADER = """\
import torch
import torch.nn.functional as F
from torch import Tensor, nn
"""

# Activations as functions of one tensor (`{}`) and as modules for nn.Sequential.
ACTS = ["F.gelu({})", "torch.relu({})", "F.silu({})", "torch.tanh({})", "torch.sigmoid({})",
        "F.relu({})", "{}.sigmoid()", "F.gelu({}, approximate='tanh')", "F.leaky_relu({}, 0.1)"]
ACT_MODULES = ["nn.GELU()", "nn.ReLU()", "nn.SiLU()", "nn.Tanh()", "nn.Sigmoid()", "nn.ReLU(inplace=True)",
               "nn.Hardswish()"]
# Activations in place, of a tensor this forward owns.
ACTS_INPLACE = ["x.relu_()", "F.relu_(x)", "x.sigmoid_()", "x.tanh_()", "F.silu(x, inplace=True)", "x.mul_(0.5)"]


@dataclass
class ModuleProgram:
    source: str
    input_shape: tuple[int, ...]  # the example's; dim 0 is the batch
    other_batch: int  # a second batch size the compiled module is called with
    dtype: torch.dtype
    train: bool
    freeze: bool  # script(..., freeze=True): parameters as constants (eval programs only)
    seed: int
    features: set[str] = field(default_factory=set)

    def make_input(self, batch: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed + batch)
        return torch.randn((batch,) + self.input_shape[1:], generator=g, dtype=torch.float64).to(self.dtype)

    def make_model(self, namespace: Any) -> torch.nn.Module:
        """`Model()` with its parameters drawn from the seed and batch norms' running statistics
        and affine parameters randomized (fresh ones are the identity), in the program's mode."""
        torch.manual_seed(self.seed)
        model = namespace.Model().to(self.dtype)
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.running_mean.uniform_(-1, 1)
                    m.running_var.uniform_(0.5, 2)
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-1, 1)
                elif isinstance(m, torch.nn.LayerNorm) and m.weight is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-1, 1)
        return model.train(self.train)


def atom(e: str) -> bool:
    """Whether `e` has no operator outside brackets (a name, an attribute, a call, a subscript)."""
    depth = 0
    for ch in e:
        depth += ch in "([" and 1 or -(ch in ")]")
        if depth == 0 and ch in " +-*/@":
            return False
    return True


class Writer:
    """The `__init__` and `forward` lines of one class. `draw` is hypothesis's."""

    def __init__(self, draw: Callable[[Any], Any], train: bool, features: set[str], blocks: bool) -> None:
        self.draw = draw
        self.blocks = blocks  # loops may be over Block (the Model's; a Block's loops are over Linears)
        self.block_dim: int | None = None  # the width Block was drawn for
        self.train = train
        self.features = features
        self.init: list[str] = []
        self.fwd: list[str] = []
        self.n = 0
        self.owned = False  # x is a tensor this forward made (in-place updates are its own)
        self.fused = False  # a statement drawn that surely makes a kernel (pointwise ops, reductions)
        self.rank = 2  # of x
        self.skip: tuple | None = None  # the shape of `skip`, once bound (x, kept for a residual)

    def pick(self, seq: list[Any]) -> Any:
        return seq[self.draw(st.integers(0, len(seq) - 1))]

    def chance(self) -> bool:
        return self.draw(st.booleans())

    def layer(self, prefix: str, ctor: str) -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        self.init.append(f"self.{name} = {ctor}")
        return f"self.{name}"

    def emit(self, line: str, indent: int = 0, owned: bool = True) -> None:
        self.fwd.append("    " * indent + line)
        self.owned = owned

    def act(self, e: str) -> str:
        form = self.pick(ACTS)
        if form.startswith("{}.") and not atom(e):
            e = f"({e})"  # (a method's receiver: `(x * 0.5).sigmoid()`)
        return form.format(e)

    def own(self, indent: int = 0) -> None:
        """x = x.clone() unless x is already this forward's own tensor."""
        if not self.owned:
            self.emit("x = x.clone()", indent)

    def views(self, D: int, width_may_change: bool) -> int:
        """Strided and offset views into kernels, and kernels writing into a cat: a cat of x and
        act(x), a gate of two chunks, a slice, a transposed pointwise chain."""
        forms = ["transpose"] if self.rank == 3 else ["half"]
        if width_may_change:
            forms += ["cat"] + (["slice"] if D > 2 else []) + (["chunk"] if D % 2 == 0 else [])
        form = self.pick(forms)
        self.features.add(f"view_{form}")
        self.fused = True
        if form == "cat":
            self.emit(f"x = torch.cat([x, {self.act('x')} * 0.5 + 1.0], dim=-1)")  # (a chain: a kernel)
            return 2 * D
        if form == "chunk":
            self.emit("a, b = x.chunk(2, dim=-1)")
            self.emit(f"x = a * {self.act('b')}")
            return D // 2
        if form == "slice":
            self.emit(f"x = {self.act('x[..., 1:]')} + x[..., :-1]")
            return D - 1
        if form == "transpose":
            self.emit(f"x = ({self.act('x.transpose(1, 2)')} * 2.0 - x.transpose(1, 2)).transpose(1, 2)")
            return D
        self.emit(f"x = {self.act('x * 0.5')} + x.flip(0)")  # (the batch reversed: a negative stride)
        return D

    def skip_connection(self, shape: tuple) -> tuple:
        """`skip = x`, or `x = x + skip` where skip was bound to a tensor of x's shape (x may have
        been updated in place since: skip sees that, as in eager)."""
        if self.skip == shape:
            self.emit("x = x + skip")
            self.features.add("skip_add")
        else:
            self.emit("skip = x", owned=self.owned)
            self.skip = shape
        return shape

    def act_inplace(self) -> None:
        self.own()
        self.emit(self.pick(ACTS_INPLACE))

    def dropout(self) -> str:
        p = 0.0 if self.train else self.pick([0.0, 0.1, 0.5])
        return self.layer("drop", f"nn.Dropout({p})")

    # -- (B, [T,] D) --------------------------------------------------------------------------
    def row(self, D: int, width_may_change: bool) -> int:
        """One statement on x of shape (..., D); returns the new last dim."""
        kind = self.draw(st.sampled_from(
            ["mlp", "linear_act", "inplace", "norm", "softmax", "standardize", "pointwise",
             "rms", "center", "dropout", "loop", "mlp_seq", "glu", "attention", "affine", "skip",
             "act_inplace", "column", "views"]))
        self.features.add(f"row_{kind}")
        self.fused |= kind in ("mlp", "inplace", "softmax", "standardize", "rms", "center", "pointwise",
                               "glu", "attention", "affine", "column")
        if kind == "skip":
            return self.skip_connection((D,))[0]
        if kind == "views":
            return self.views(D, width_may_change)
        if kind == "act_inplace":
            self.act_inplace()
            return D
        if kind == "column":  # a reduction over a dim that is not the last
            dim = self.pick([0, 1]) if self.rank == 3 else 0  # (0: across the batch)
            red = self.pick(["mean", "sum", "amax"])
            self.emit(f"x = {self.act('x')} - x.{red}({dim}, keepdim=True)")
            return D
        if kind == "linear_act":
            D2 = self.draw(st.integers(2, 9)) if width_may_change else D
            fc = self.layer("fc", f"nn.Linear({D}, {D2}, bias={self.chance()})")
            self.emit(f"x = {self.act(f'{fc}(x)')}")
            return D2
        if kind == "mlp":  # pre-norm x + f(fc2(act(fc1(norm(x))))), or post-norm norm(x + f(fc2(act(fc1(x)))))
            H = self.draw(st.integers(2, 12))
            fc1 = self.layer("fc", f"nn.Linear({D}, {H})")
            fc2 = self.layer("fc", f"nn.Linear({H}, {D})")
            norm = self.layer("norm", f"nn.LayerNorm({D})")
            pre = self.chance()
            # f: an activation or not; under the post-norm's norm (or the next statement's), a
            # transcendental one is kept in a row buffer across the norm's passes (issue 45)
            outer = self.pick([*ACTS, "{}"])  # (gelu first: the simplest programs have the form)
            inner = outer.format(f"{fc2}({self.act(f'{fc1}({norm}(x))' if pre else f'{fc1}(x)')})")
            if self.chance():
                inner = f"{self.dropout()}({inner})"
            self.emit(f"x = x + {inner}" if pre else f"x = {norm}(x + {inner})")
            return D
        if kind == "mlp_seq":  # x + mlp(norm(x)), the MLP a Sequential of modules
            H = self.draw(st.integers(2, 12))
            norm = self.layer("norm", f"nn.LayerNorm({D})")
            parts = [f"nn.Linear({D}, {H})", self.pick(ACT_MODULES), f"nn.Linear({H}, {D})"]
            if self.chance():
                parts.append(f"nn.Dropout({0.0 if self.train else 0.1})")
            mlp = self.layer("mlp", f"nn.Sequential({', '.join(parts)})")
            self.emit(f"x = x + {mlp}({norm}(x))")
            return D
        if kind == "glu":  # a gated unit: act(a(x)) * b(x), projected back
            H = self.draw(st.integers(2, 12))
            a, b = self.layer("fc", f"nn.Linear({D}, {H}, bias=False)"), self.layer("fc", f"nn.Linear({D}, {H}, bias=False)")
            out = self.layer("fc", f"nn.Linear({H}, {D})")
            self.emit(f"x = x + {out}({self.act(f'{a}(x)')} * {b}(x))")
            return D
        if kind == "attention":  # softmax over the rows of x x^T (the batch, for 2-d x), times x
            self.emit(f"a = torch.softmax(x @ x.transpose(-2, -1) * {self.pick([0.5, 0.25])}, dim=-1)")
            self.emit(f"x = {self.pick(['x + a @ x', 'a @ x'])}")
            return D
        if kind == "affine":  # parameters broadcast along the rows
            scale = self.layer("scale", f"nn.Parameter(torch.linspace(0.5, 1.5, {D}))")
            shift = self.layer("shift", f"nn.Parameter(torch.linspace(-1.0, 1.0, {D}))")
            self.emit(f"x = {self.act(f'x * {scale} + {shift}')}")
            return D
        if kind == "inplace":  # x = x.clone(); h = act(fc(x)); x += h  (the block)
            fc = self.layer("fc", f"nn.Linear({D}, {D})")
            self.own()
            self.emit(f"h = {self.act(f'{fc}(x)')}")
            self.emit(self.pick(["x += h", "x.add_(h)", "x += h * 0.5", "x -= h"]))
            return D
        if kind == "norm":
            if self.chance():
                norm = self.layer("norm", f"nn.LayerNorm({D}, elementwise_affine={self.chance()})")
                self.emit(f"x = {norm}(x)")
            else:
                self.emit(f"x = F.layer_norm(x, ({D},))")
            return D
        if kind == "softmax":
            fn = self.pick(["torch.softmax", "F.log_softmax", "F.softmax"])
            self.emit(f"x = {fn}({self.act('x')} * {self.pick([1.0, 0.5, 2.0])}, dim=-1)")
            return D
        if kind == "standardize":  # mean and var (two row reductions) after a pointwise chain
            self.emit(f"y = {self.act('x')} + x")
            self.emit(f"m = y.mean(-1, keepdim=True)")
            self.emit(f"v = y.var(-1, keepdim=True, unbiased={D > 1 and self.chance()})")
            self.emit("x = (y - m) / torch.sqrt(v + 1e-5)")
            return D
        if kind == "rms":
            self.emit("x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)")
            return D
        if kind == "center":
            red = self.pick(["amax", "sum", "mean", "amin"])
            self.emit(f"x = {self.act('x')} - x.{red}(-1, keepdim=True) * 0.5")
            return D
        if kind == "pointwise":
            self.emit(f"x = {self.act('x')} * {self.pick([0.5, 2.0, -1.0])} + {self.pick(['x', '1.0', 'x * x'])}")
            return D
        if kind == "dropout":
            self.emit(f"x = {self.dropout()}(x)", owned=self.owned)  # (eval: x itself)
            return D
        return self.row_loop(D)

    def row_loop(self, D: int) -> int:
        """A loop over a ModuleList or Sequential: of Linear layers (the issue's form), or of
        Block, a nested class (drawn by module_programs once the Model is written)."""
        n = self.draw(st.integers(1, 3))
        container = self.pick(["nn.ModuleList", "nn.Sequential"])
        form = self.pick(["linears", "blocks"]) if self.blocks and self.block_dim in (None, D) else "linears"
        self.features |= {f"loop_{form}", f"loop_{container}"}
        if form == "linears":
            self.fused = True
            layers = self.layer("layers", f"{container}(*[nn.Linear({D}, {D}) for _ in range({n})])"
                                if container == "nn.Sequential" else f"{container}([nn.Linear({D}, {D}) for _ in range({n})])")
            update = self.pick(["inplace", "functional", "gated"])
            if update == "inplace":
                self.own()
            self.emit(f"for layer in {layers}:", owned=self.owned)
            self.emit(f"h = {self.act('layer(x)')}", 1, owned=self.owned)
            if update == "inplace":
                self.emit(self.pick(["x += h", "x.add_(h)"]), 1)
            elif update == "functional":
                self.emit("x = x + h", 1)
            else:
                self.emit("x = h * torch.sigmoid(x)", 1)
            return D
        blocks = self.layer("blocks", f"{container}(*[Block() for _ in range({n})])"
                            if container == "nn.Sequential" else f"{container}([Block() for _ in range({n})])")
        self.block_dim = D
        call = self.pick(["loop", "residual", "whole"]) if container == "nn.Sequential" else self.pick(["loop", "residual"])
        # (a Block may return its argument: x is then not this forward's own)
        if call == "whole":
            self.emit(f"x = {blocks}(x)", owned=False)
        elif call == "loop":
            self.emit(f"for block in {blocks}:", owned=False)
            self.emit("x = block(x)", 1, owned=False)
        else:
            self.emit(f"for block in {blocks}:")
            self.emit("x = x + block(x)", 1)
        return D

    # -- (B, C, H, W) -------------------------------------------------------------------------
    def image(self, C: int, H: int, W: int) -> tuple[int, int, int]:
        """One statement on x of shape (B, C, H, W); returns the new (C, H, W)."""
        kind = self.draw(st.sampled_from(["conv_bn_act", "conv_act", "residual", "inplace", "seq",
                                          "channel_softmax", "channel_center", "group_norm", "instance_norm",
                                          "skip", "act_inplace"]))
        self.features.add(f"image_{kind}")
        # (not "inplace": in training mode batch norm stays torch's, and `x += h` an in-place add)
        self.fused |= kind in ("residual", "channel_softmax", "channel_center", "instance_norm")
        if kind == "skip":
            return self.skip_connection((C, H, W))
        if kind == "act_inplace":
            self.act_inplace()
            return C, H, W
        if kind == "group_norm":
            groups = self.pick([g for g in (1, 2, 3) if C % g == 0])
            norm = self.layer("gn", f"nn.GroupNorm({groups}, {C})")
            self.emit(f"x = {self.act(f'{norm}(x)')}")
            return C, H, W
        if kind == "instance_norm":  # mean and var over (H, W) after a pointwise chain
            self.emit(f"y = {self.act('x')} * 2.0")
            self.emit("m = y.mean((2, 3), keepdim=True)")
            self.emit(f"v = y.var((2, 3), keepdim=True, unbiased=False)")
            self.emit("x = (y - m) * torch.rsqrt(v + 1e-5)")
            return C, H, W
        if kind in ("conv_bn_act", "conv_act"):
            C2 = self.draw(st.integers(1, 6))
            k = self.pick([1, 3])
            stride = self.pick([1, 2]) if min(H, W) >= 3 else 1
            pad = k // 2
            bias = kind == "conv_act" or self.chance()
            conv = self.layer("conv", f"nn.Conv2d({C}, {C2}, {k}, stride={stride}, padding={pad}, bias={bias})")
            y = f"{conv}(x)"
            if kind == "conv_bn_act":
                y = f"{self.layer('bn', f'nn.BatchNorm2d({C2})')}({y})"
            self.emit(f"x = {self.act(y)}")
            return C2, (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
        if kind in ("residual", "inplace"):
            conv = self.layer("conv", f"nn.Conv2d({C}, {C}, 3, padding=1, bias={self.chance()})")
            bn = self.layer("bn", f"nn.BatchNorm2d({C})")
            branch = f"{bn}({conv}({self.act('x')}))"
            if kind == "residual":
                self.emit(f"x = {self.act(f'x + {branch}')}")
            else:
                self.own()
                self.emit(f"h = {branch}")
                self.emit(self.pick(["x += h", "x.add_(h)"]))
            return C, H, W
        if kind == "seq":
            C2 = self.draw(st.integers(1, 6))
            seq = self.layer("seq", f"nn.Sequential(nn.Conv2d({C}, {C2}, 3, padding=1, bias=False), "
                                    f"nn.BatchNorm2d({C2}), {self.pick(ACT_MODULES)})")
            self.emit(f"x = {seq}(x)")
            return C2, H, W
        if kind == "channel_softmax":
            self.emit(f"x = torch.softmax({self.act('x')}, dim=1)")
            return C, H, W
        self.emit(f"x = {self.act('x')} - x.mean(1, keepdim=True)")
        return C, H, W

    def to_rows(self, C: int, H: int, W: int) -> int:
        """From (B, C, H, W) to (B, D)."""
        how = self.pick(["mean", "pool", "flatten"])
        self.features.add(f"image_to_rows_{how}")
        if how == "mean":
            self.emit("x = x.mean((2, 3))")
            return C
        if how == "pool":
            self.emit("x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)")
            return C
        self.emit("x = x.flatten(1)", owned=self.owned)
        return C * H * W


def class_source(name: str, init: list[str], fwd: list[str], ret: str = "x", ret_type: str = "Tensor") -> str:
    return "\n".join([
        f"class {name}(nn.Module):",
        "    def __init__(self) -> None:",
        "        super().__init__()",
        *(f"        {line}" for line in init),
        "",
        f"    def forward(self, x: Tensor) -> {ret_type}:",
        *(f"        {line}" for line in fwd),
        f"        return {ret}",
    ]) + "\n"


@st.composite
def module_programs(draw: Callable[[Any], Any], max_statements: int = 4) -> ModuleProgram:
    features: set[str] = set()
    train = draw(st.booleans())
    image = draw(st.booleans())
    w = Writer(draw, train, features, blocks=True)
    B = draw(st.integers(2, 4))
    if image:
        C, H, W = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
        shape: tuple[int, ...] = (B, C, H, W)
        for _ in range(draw(st.integers(1, max_statements))):
            C, H, W = w.image(C, H, W)
        D = w.to_rows(C, H, W) if draw(st.booleans()) else None
        w.skip = None  # (the shapes are of rows now)
    else:
        D = draw(st.integers(2, 9)) if draw(st.integers(0, 4)) else draw(st.sampled_from([33, 67, 130]))
        shape = (B, D) if draw(st.booleans()) else (B, draw(st.integers(1, 3)), D)
        w.rank = len(shape)
    if D is not None:
        for k in range(draw(st.integers(0 if image else 1, max_statements))):
            D = w.row(D, width_may_change=True)
    block = ""
    if w.block_dim is not None:  # a Block of the loops: its own statements, width kept
        bw = Writer(draw, train, features, blocks=False)  # (x is the caller's: not owned)
        bw.rank = w.rank
        for _ in range(draw(st.integers(1, 3))):
            bw.row(w.block_dim, width_may_change=False)
        block = "\n\n" + class_source("Block", bw.init, bw.fwd)
        features.add("nested_block")
        w.fused |= bw.fused
    if not w.fused:  # (the test asserts that kernels were made)
        w.emit(f"x = {w.act('x')} * 0.5 + x")
    # A second output: a row reduction of the result, or `skip` (perhaps the input itself)
    second = draw(st.sampled_from([None, "x.sum(-1)", "x.amax(-1)"] + (["skip"] if w.skip is not None else [])))
    if second is not None:
        features.add(f"second_output_{second}")
    model = (class_source("Model", w.init, w.fwd) if second is None else
             class_source("Model", w.init, w.fwd, f"x, {second}", "tuple[Tensor, Tensor]"))
    source = HEADER + block + "\n\n" + model
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    other = draw(st.sampled_from([B + 1, B + 3, 2 * B]))
    freeze = not train and draw(st.booleans())
    return ModuleProgram(source=source, input_shape=shape, other_batch=other, dtype=dtype, train=train, freeze=freeze,
                         seed=draw(st.integers(0, 2**16)), features=features)

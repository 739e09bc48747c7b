"""Decomposition into primitives (ir/passes/decompose.py, ir/kernel/primitives.py, docs/primitives.md).

- Numeric: every rule, compiled from source through lowering, shape propagation (symbolic batch),
  the pass and codegen, against eager torch on random inputs in float32, float64, float16 and
  bfloat16 (with NaN and +-inf mixed in where the op is defined there), negative dims, keepdim,
  corrections; within the tolerances docs/primitives.md states (TOLERANCE below).
- IR text: for each rule, IR in and IR out (types included), and the cases that stay as they are
  (unknown rank, unknown dtype, training=True, a dim that may be empty, ...).
- The doc's table lists exactly the rules the pass has; after the pass every tensor op of the
  test programs is a primitive or left as is with a reason.
- The decompositions agree with torch's own (torch._decomp / torch._refs) where torch has one.

`python tests/test_decompose.py` prints the measured maximum errors per rule and dtype (the table
in docs/primitives.md).
"""

from __future__ import annotations

import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core import ops  # noqa: E402
from ir.core.parser import parse_program  # noqa: E402
from ir.passes.canonicalize import canonicalize  # noqa: E402
import ir.passes.decompose as decompose_pass  # noqa: E402
from ir.passes.decompose import RULES, decompose  # noqa: E402
from ir.passes.example_types import example_input_types  # noqa: E402
from ir.passes.shapes import propagate_shapes  # noqa: E402
from ir.kernel.primitives import (  # noqa: E402
    KINDS,
    LEFT_AS_IS,
    PRIMITIVES,
    LeftAsIs,
    Primitive,
    classify,
    is_tensor_op,
    op_name,
)
from ir.core.verifier import verify  # noqa: E402

DOC = ROOT / "docs" / "primitives.md"
HEADER = "import math\n\nimport torch\nimport torch.nn.functional as F\nfrom torch import Tensor\nfrom transpiler import script\n\n"
WORK = Path(__file__).resolve().parent / "__pycache__" / "decompose_cases"

from ir.kernel.primitives import TOLERANCE as TOLERANCE_BY_NAME  # noqa: E402

TOLERANCE = {getattr(torch, name): tol for name, tol in TOLERANCE_BY_NAME.items()}

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# -- compiling a function through the pass ------------------------------------------------------
@dataclass
class Compiled:
    fn: Callable
    eager: Callable
    program: Any
    text: str


_counter = iter(range(1_000_000))


decompose_pass.DEBUG = True  # a rule that raises is a bug, not "left as is"


def compile_case(body: str, inputs: list[Any], passes: bool = True) -> Compiled:
    """`body` (a function f) lowered, canonicalized, shape-propagated from `inputs` (the batch
    size symbolic), decomposed, canonicalized again and emitted; and the same source run eagerly."""
    from codegen.module import Header, emit_module
    from transpiler.pipeline import lower_file, torch_version
    from transpiler.source import SourceFile

    WORK.mkdir(parents=True, exist_ok=True)
    name = f"case_{next(_counter)}.py"
    source = textwrap.dedent(body)
    path = WORK / name
    path.write_text(HEADER + "@script\n" + source)
    src = SourceFile.read(path, name)
    program, entries = lower_file(src)
    canonicalize(program)
    func = program.funcs[0]
    propagate_shapes(program, {func.sym_name: example_input_types(func, inputs)})
    if passes:
        decompose(program)
        verify(program)
        canonicalize(program)
    verify(program)
    text = emit_module(program, Header(name, "0", "test", "0", torch_version()), entries, src.lines)
    namespace: dict[str, Any] = {}
    exec(compile(text, name, "exec"), namespace)
    eager_ns: dict[str, Any] = {"torch": torch, "F": F, "Tensor": torch.Tensor, "math": math}
    exec(compile(source, name, "exec"), eager_ns)
    return Compiled(namespace["COMPILED"]["f"], eager_ns["f"], program, text)


# -- comparing with eager -------------------------------------------------------------------------
def flat(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat(v)]
    return [value]


def max_error(got: Any, want: Any) -> float:
    """The largest |got - want| / (atol + rtol * |want|) ratio (<= 1 is within tolerance); NaN
    must match NaN and infinities must be equal."""
    worst = 0.0
    for g, w in zip(flat(got), flat(want), strict=True):
        if not isinstance(w, torch.Tensor):
            assert type(g) is type(w) and g == w
            continue
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if not g.is_floating_point():
            assert torch.equal(g, w)
            continue
        g64, w64 = g.double(), w.double()
        assert torch.equal(torch.isnan(g64), torch.isnan(w64)), f"NaN differ:\n{g}\n{w}"
        finite = torch.isfinite(w64)
        assert torch.equal(g64[~finite & ~torch.isnan(w64)], w64[~finite & ~torch.isnan(w64)]), "inf differ"
        assert torch.isfinite(g64[finite]).all(), "finite eager, infinite compiled"
        atol, rtol = TOLERANCE[w.dtype]
        if finite.any():
            ratio = (g64[finite] - w64[finite]).abs() / (atol + rtol * w64[finite].abs())
            worst = max(worst, float(ratio.max()))
    return worst


def abs_error(got: Any, want: Any) -> float:
    """max |got - want| over the finite elements (for the table in the doc)."""
    out = 0.0
    for g, w in zip(flat(got), flat(want)):
        if isinstance(g, torch.Tensor) and g.is_floating_point():
            finite = torch.isfinite(w) & torch.isfinite(g)
            if finite.any():
                out = max(out, float((g.double() - w.double())[finite].abs().max()))
    return out


# -- the cases ------------------------------------------------------------------------------------
Maker = Callable[[torch.dtype, torch.Generator], list]


def randn(*shape: int, scale: float = 3.0) -> Callable[[torch.dtype, torch.Generator], torch.Tensor]:
    def make(dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)

    return make


def positive(*shape: int) -> Callable[[torch.dtype, torch.Generator], torch.Tensor]:
    def make(dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
        return (torch.rand(*shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)

    return make


def mask(*shape: int) -> Callable[[torch.dtype, torch.Generator], torch.Tensor]:
    return lambda dtype, g: torch.rand(*shape, generator=g) > 0.5


def ints(*shape: int) -> Callable[[torch.dtype, torch.Generator], torch.Tensor]:
    return lambda dtype, g: torch.randint(-10, 10, shape, generator=g)


@dataclass
class Case:
    rules: tuple[str, ...]  # the rules this case exercises (all must fire)
    body: str
    inputs: tuple[Callable[[torch.dtype, torch.Generator], Any], ...]
    dtypes: tuple[torch.dtype, ...] = FLOATS
    specials: bool = True  # put NaN and +-inf into the first input
    inf: bool = True  # ... +inf too (see the gelu cases)
    id: str = ""
    kept: tuple[str, ...] = field(default=())  # composites the case leaves on purpose

    def make(self, dtype: torch.dtype, seed: int, batch: int | None = None) -> list:
        g = torch.Generator().manual_seed(seed)
        values = [m(dtype, g) for m in self.inputs]
        if batch is not None:  # another size of the symbolic leading dim
            values = [v.repeat(batch, *([1] * (v.dim() - 1)))[:batch] if isinstance(v, torch.Tensor)
                      and v.dim() and v.shape[0] == values[0].shape[0] else v for v in values]
        if self.specials and seed % 2 and values[0].is_floating_point() and values[0].numel() >= 4:
            flat_view = values[0].view(-1)
            flat_view[0], flat_view[1], flat_view[2] = math.nan, math.inf if self.inf else 5.0, -math.inf
            flat_view[3] = 80.0 if dtype in (torch.float32, torch.float64, torch.bfloat16) else 11.0
        return values


def fn(signature: str, expr: str) -> str:
    return f"def f({signature}) -> Tensor:\n    return {expr}\n"


X = "x: Tensor"
CASES: list[Case] = [
    # softmax family
    Case(("softmax",), fn(X, "F.softmax(x, dim=-1)"), (randn(4, 5, 6),), id="softmax_last"),
    Case(("softmax",), fn(X, "x.softmax(1)"), (randn(4, 5, 6),), id="softmax_method"),
    Case(("softmax",), fn(X, "torch.softmax(x, -3, dtype=torch.float64)"), (randn(4, 5, 6),), id="softmax_dtype"),
    Case(("special_softmax",), fn(X, "torch.special.softmax(x, 0)"), (randn(3, 5),), id="special_softmax"),
    Case(("softmin",), fn(X, "F.softmin(x, 1)"), (randn(4, 7),)),
    Case(("log_softmax",), fn(X, "F.log_softmax(x, -1)"), (randn(4, 5, 6),)),
    Case(("special_log_softmax",), fn(X, "torch.special.log_softmax(x, 0)"), (randn(4, 5),)),
    # normalization
    Case(("layer_norm",), fn("x: Tensor, w: Tensor, b: Tensor", "F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)"),
         (randn(4, 6, 8), randn(8, scale=1.0), randn(8, scale=1.0)), id="layer_norm_affine"),
    Case(("layer_norm",), fn(X, "F.layer_norm(x, (x.shape[-2], x.shape[-1]), eps=1e-3)"), (randn(4, 6, 8),),
         id="layer_norm_2d"),
    Case(("rms_norm",), fn("x: Tensor, w: Tensor", "F.rms_norm(x, (8,), w)"), (randn(4, 6, 8), randn(8)),
         id="rms_norm_eps_none"),
    Case(("rms_norm",), fn(X, "F.rms_norm(x, (x.size(-1),), eps=1e-6)"), (randn(4, 8),), id="rms_norm"),
    Case(("group_norm",), fn("x: Tensor, w: Tensor, b: Tensor", "F.group_norm(x, 2, w, b)"),
         (randn(3, 4, 5, 6), randn(4), randn(4))),
    Case(("group_norm",), fn(X, "F.group_norm(x, 3, eps=1e-3)"), (randn(3, 6, 5),), id="group_norm_plain"),
    Case(("group_norm",), fn("x: Tensor, w: Tensor, b: Tensor", "F.group_norm(x, 1, w, b)"),
         (randn(3, 4, 5, 6), randn(4), randn(4)), id="group_norm_one_group"),
    Case(("group_norm",), fn(X, "F.group_norm(x, 1)"), (randn(2, 6, 7),), id="group_norm_one_group_plain"),
    Case(("instance_norm",), fn("x: Tensor, w: Tensor, b: Tensor", "F.instance_norm(x, weight=w, bias=b)"),
         (randn(3, 4, 5, 6), randn(4), randn(4))),
    Case(("batch_norm",),
         fn("x: Tensor, m: Tensor, v: Tensor, w: Tensor, b: Tensor", "F.batch_norm(x, m, v, w, b, False, 0.1, 1e-5)"),
         (randn(3, 4, 5, 6), randn(4), positive(4), randn(4), randn(4))),
    Case(("batch_norm",), fn("x: Tensor, m: Tensor, v: Tensor", "F.batch_norm(x, m, v, training=False)"),
         (randn(5, 4), randn(4), positive(4)), id="batch_norm_2d"),
    # training: the batch's statistics, and the running ones updated in place (returned to compare)
    Case(("batch_norm",), "def f(x: Tensor, m: Tensor, v: Tensor, w: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:\n"
         "    y = F.batch_norm(x, m, v, w, b, True, 0.1, 1e-5)\n    return y, m, v\n",
         (randn(3, 4, 5, 6), randn(4), positive(4), randn(4), randn(4)), dtypes=(torch.float32, torch.float64),
         id="batch_norm_training"),
    Case(("batch_norm",), "def f(x: Tensor, m: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:\n"
         "    y = F.batch_norm(x, m, v, training=True, momentum=0.3)\n    return y, m, v\n",
         (randn(5, 4, 3), randn(4), positive(4)), dtypes=(torch.float32, torch.float64), id="batch_norm_training_1d"),
    # activations
    # Eager float32 and bfloat16 gelu give NaN at +inf (the CPU kernel's vectorized erf); the
    # decomposition gives inf, as float64 eager does (test_gelu_at_infinity).
    Case(("gelu",), fn(X, "F.gelu(x)"), (randn(4, 9),), id="gelu", inf=False),
    Case(("gelu",), fn(X, "F.gelu(x, approximate='tanh')"), (randn(4, 9),), id="gelu_tanh"),
    Case(("silu",), fn(X, "F.silu(x)"), (randn(4, 9, scale=10.0),)),
    Case(("sigmoid",), fn(X, "torch.sigmoid(x)"), (randn(4, 9, scale=10.0),)),
    Case(("special_expit",), fn(X, "torch.special.expit(x)"), (randn(4, 9),)),
    Case(("mish",), fn(X, "F.mish(x)"), (randn(4, 9, scale=10.0),)),
    Case(("hardswish",), fn(X, "F.hardswish(x)"), (randn(4, 9),)),
    Case(("hardsigmoid",), fn(X, "F.hardsigmoid(x)"), (randn(4, 9),)),
    Case(("elu",), fn(X, "F.elu(x, 0.5)"), (randn(4, 9),)),
    Case(("selu",), fn(X, "F.selu(x)"), (randn(4, 9),)),
    Case(("celu",), fn(X, "F.celu(x, 2.0)"), (randn(4, 9),)),
    Case(("leaky_relu",), fn(X, "F.leaky_relu(x, 0.2)"), (randn(4, 9),)),
    Case(("prelu",), fn("x: Tensor, w: Tensor", "F.prelu(x, w)"), (randn(2, 3, 4, 5), randn(3)), id="prelu_channels"),
    Case(("prelu",), fn("x: Tensor, w: Tensor", "F.prelu(x, w)"), (randn(4, 9), randn(9)), id="prelu_2d"),
    Case(("prelu",), fn("x: Tensor, w: Tensor", "torch.prelu(x, w)"), (randn(2, 3, 5), randn(1)), id="prelu_one_slope"),
    Case(("softplus",), fn(X, "F.softplus(x)"), (randn(4, 9, scale=10.0),), id="softplus"),
    Case(("softplus",), fn(X, "F.softplus(x, beta=2.0, threshold=5.0)"), (randn(4, 9),), id="softplus_beta"),
    Case(("log_sigmoid",), fn(X, "F.logsigmoid(x)"), (randn(4, 9, scale=10.0),)),
    Case(("tanhshrink",), fn(X, "F.tanhshrink(x)"), (randn(4, 9),)),
    Case(("softsign",), fn(X, "F.softsign(x)"), (randn(4, 9),)),
    Case(("glu",), fn(X, "F.glu(x)"), (randn(4, 8),), id="glu"),
    Case(("glu",), fn(X, "F.glu(x, -2)"), (randn(3, 4, 5),), id="glu_middle_dim"),
    Case(("relu",), fn(X, "F.relu(x) + x.relu()"), (randn(4, 9),)),
    Case(("relu",), fn(X, "torch.relu(x)"), (ints(4, 9),), dtypes=(torch.int64,), id="relu_int"),
    Case(("relu6",), fn(X, "F.relu6(x * 3)"), (randn(4, 9),)),
    Case(("hardtanh",), fn(X, "F.hardtanh(x, -2.0, 2.5)"), (randn(4, 9),)),
    Case(("threshold",), fn(X, "F.threshold(x, 0.5, -3.0)"), (randn(4, 9),)),
    Case(("clamp",), fn(X, "torch.clamp(x, -1.0, 2.0)"), (randn(4, 9),), id="clamp"),
    Case(("clamp",), fn(X, "x.clamp(min=0.5)"), (randn(4, 9),), id="clamp_min_only"),
    Case(("clamp",), fn(X, "x.clamp(max=3)"), (ints(4, 9),), dtypes=(torch.int64,), id="clamp_int"),
    Case(("clamp",), fn("x: Tensor, lo: Tensor, hi: Tensor", "torch.clamp(x, lo, hi)"),
         (randn(4, 9), randn(4, 9), randn(9)), id="clamp_tensors"),
    Case(("clip",), fn(X, "torch.clip(x, 2.0, -1.0)"), (randn(4, 9),)),
    # pointwise composites
    Case(("addcmul",), fn("x: Tensor, a: Tensor, b: Tensor", "torch.addcmul(x, a, b, value=0.5)"),
         (randn(4, 5), randn(4, 5), randn(5))),
    Case(("addcdiv",), fn("x: Tensor, a: Tensor, b: Tensor", "torch.addcdiv(x, a, b, value=-2)"),
         (randn(4, 5), randn(4, 5), positive(5))),
    Case(("lerp",), fn("x: Tensor, y: Tensor", "torch.lerp(x, y, 0.3) + torch.lerp(x, y, 0.8)"),
         (randn(4, 5), randn(4, 5)), id="lerp_scalar"),
    Case(("lerp",), fn("x: Tensor, y: Tensor, w: Tensor", "torch.lerp(x, y, w)"),
         (randn(4, 5), randn(4, 5), randn(4, 5, scale=1.0)), id="lerp_tensor"),
    Case(("square",), fn(X, "torch.square(x) + x.square()"), (randn(4, 5),)),
    Case(("square",), fn(X, "torch.square(x)"), (ints(4, 5),), dtypes=(torch.int64,), id="square_int"),
    Case(("masked_fill",), fn("x: Tensor, m: Tensor", "x.masked_fill(m, -1.5)"), (randn(4, 5), mask(4, 5))),
    Case(("type_as",), fn("x: Tensor, y: Tensor", "x.type_as(y)"), (ints(4, 5), randn(3)),
         specials=False),
    # reductions
    Case(("mean",), fn(X, "x.mean(-1)"), (randn(4, 5, 6),), id="mean_last"),
    Case(("mean",), fn(X, "torch.mean(x, (0, -1), keepdim=True)"), (randn(4, 5, 6),), id="mean_keepdim"),
    Case(("mean",), fn(X, "x.mean()"), (randn(4, 5),), id="mean_all"),
    Case(("mean",), fn(X, "x.mean(1)"), (randn(4, 0),), id="mean_empty_dim"),  # NaN, as eager
    Case(("var",), fn(X, "x.var(1)"), (randn(4, 0),), id="var_empty_dim"),
    Case(("softmax",), fn(X, "F.softmax(x, 1)"), (randn(0, 5),), id="softmax_no_rows"),
    Case(("var",), fn(X, "x.var(2)"), (randn(4, 5, 6),), id="var"),
    Case(("var",), fn(X, "torch.var(x, (0, 2), correction=0, keepdim=True)"), (randn(4, 5, 6),), id="var_correction"),
    Case(("var",), fn(X, "x.var(1, unbiased=False)"), (randn(4, 5),), id="var_unbiased_false"),
    Case(("var",), fn(X, "torch.var(x)"), (randn(4, 5),), id="var_all"),
    Case(("var",), fn(X, "x.var(1, correction=6)"), (randn(4, 5),), id="var_correction_past_count"),
    Case(("std",), fn(X, "x.std(-1, keepdim=True)"), (randn(4, 5, 6),)),
    Case(("var_mean",), fn(X, "torch.var_mean(x, 2)[0] + torch.var_mean(x, 2)[1]"), (randn(4, 5, 6),)),
    Case(("std_mean",), fn(X, "torch.std_mean(x, (1, 2), keepdim=True)[1]"), (randn(4, 5, 6),)),
    Case(("logsumexp",), fn(X, "torch.logsumexp(x, dim=1)"), (randn(4, 5, 6, scale=30.0),), id="logsumexp"),
    Case(("logsumexp",), fn(X, "x.logsumexp((0, 2), keepdim=True)"), (randn(4, 5, 6),), id="logsumexp_keepdim"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, 2, dim=-1)"), (randn(4, 5),), id="norm2"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, 1, dim=(0, 1), keepdim=True)"),
         (randn(4, 5),), id="norm1"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, float('inf'), dim=0)"), (randn(4, 5),),
         id="norm_inf"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, -math.inf, dim=1)"), (randn(4, 5),),
         id="norm_minus_inf"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, 0, dim=1)"), (randn(4, 5),), id="norm0"),
    Case(("linalg_vector_norm",), fn(X, "torch.linalg.vector_norm(x, 3.0, dim=1)"), (randn(4, 5),), id="norm3"),
    Case(("norm",), fn(X, "torch.norm(x, dim=1)"), (randn(4, 5),), id="norm_fro"),
    Case(("norm",), fn(X, "torch.norm(x, p=1, dim=1, keepdim=True)"), (randn(4, 5),), id="norm_p1"),
    Case(("normalize",), fn(X, "F.normalize(x, dim=-1)"), (randn(4, 5),)),
    Case(("max", "min"), fn(X, "x.max() + torch.min(x)"), (randn(4, 5),)),
    # views
    Case(("transpose", "swapaxes", "swapdims"),
         fn(X, "x.transpose(0, -1) + torch.swapaxes(x, 0, 2) + x.swapdims(-3, -1)"), (randn(3, 4, 3),)),
    Case(("t",), fn(X, "x.t()"), (randn(4, 5),)),
    Case(("T", "mT"), fn(X, "x.T + x.mT"), (randn(4, 4),)),
    Case(("movedim",), fn(X, "torch.movedim(x, (0, 1), (2, 0))"), (randn(3, 4, 5),)),
    Case(("moveaxis",), fn(X, "x.moveaxis(-1, 0)"), (randn(3, 4, 5),)),
    Case(("flatten",), fn(X, "x.flatten(1)"), (randn(3, 4, 5),), id="flatten"),
    Case(("flatten",), fn(X, "torch.flatten(x)"), (randn(3, 4, 5),), id="flatten_all"),
    Case(("flatten",), fn(X, "torch.flatten(x, 0, 1)"), (randn(3, 4, 5),), id="flatten_batch"),
    Case(("unflatten",), fn(X, "x.unflatten(1, (2, -1))"), (randn(3, 4, 5),)),
    Case(("expand_as",), fn("y: Tensor, x: Tensor", "x.expand_as(y)"), (randn(4, 5), randn(1, 5)), specials=False),
    Case(("view_as", "reshape_as"), fn("x: Tensor, y: Tensor", "x.view_as(y) + x.reshape_as(y)"),
         (randn(4, 6), randn(4, 2, 3))),
    # extern
    Case(("linear",), fn("x: Tensor, w: Tensor, b: Tensor", "F.linear(x, w, b)"),
         (randn(4, 3, 8), randn(5, 8), randn(5)), id="linear"),
    Case(("linear",), fn("x: Tensor, w: Tensor", "F.linear(x, w)"), (randn(4, 8), randn(5, 8)), id="linear_no_bias"),
    Case(("conv2d",), fn("x: Tensor, w: Tensor, b: Tensor", "F.conv2d(x, w, b)"),
         (randn(4, 8, 1, 1), randn(5, 8, 1, 1), randn(5)), id="conv2d_of_pixels"),
    Case(("conv2d",), fn("x: Tensor, w: Tensor", "F.conv2d(x, w, None, 2, 0, 3)"),
         (randn(4, 8, 1, 1), randn(5, 8, 1, 1)), id="conv2d_of_pixels_strided"),
    # identities
    Case(("dropout",), fn(X, "F.dropout(x, 0.2, training=False) + torch.dropout(x, 0.5, False)"), (randn(4, 5),)),
    Case(("pad", "constant_pad_nd"),
         fn(X, "F.pad(x * 2.0, (0, 0, 0, 0)) + torch.constant_pad_nd(x.exp(), (0, 0))"), (randn(4, 5),)),
    Case(("alpha_dropout", "feature_dropout", "feature_alpha_dropout"),
         fn(X, "F.alpha_dropout(x, 0.2, False) + torch.feature_dropout(x, 0.3, False)"
               " + torch.feature_alpha_dropout(x, 1.0, False)"), (randn(4, 5, 2),)),
]
for case in CASES:
    case.id = case.id or case.rules[0]


def _params(cases: list[Case]) -> list:
    return [pytest.param(c, d, id=f"{c.id}-{str(d).removeprefix('torch.')}") for c in cases for d in c.dtypes]


def run_case(case: Case, dtype: torch.dtype, seeds: range = range(4)) -> tuple[Compiled, float, float]:
    """Compile for `dtype` and compare with eager over several inputs (one with another batch
    size); the worst tolerance ratio and the largest absolute error."""
    compiled = compile_case(case.body, case.make(dtype, 0))
    worst = err = 0.0
    for seed in seeds:
        for batch in (None, 7):
            inputs = case.make(dtype, seed, batch)
            want = compiled.eager(*[v.clone() for v in inputs])
            got = compiled.fn(*[v.clone() for v in inputs])
            worst = max(worst, max_error(got, want))
            err = max(err, abs_error(got, want))
    return compiled, worst, err


@pytest.mark.filterwarnings(r"ignore:var\(\)")  # eager warns of a correction past the count
@pytest.mark.parametrize("case, dtype", _params(CASES))
def test_decomposition_matches_eager(case: Case, dtype: torch.dtype) -> None:
    compiled, worst, _ = run_case(case, dtype)
    # (linear leaves a linear without bias: an extern primitive)
    left = {op_name(op) for op in compiled.program.walk()
            if is_tensor_op(op) and not (op_name(op) == "linear" and len(op.operands) == 2)}
    for name in case.rules:
        assert name not in left, f"{name} was not decomposed:\n{compiled.text}"
    assert worst <= 1.0, f"{worst:.3g} x the tolerance:\n{compiled.text}"


def test_every_rule_has_a_numeric_case() -> None:
    covered = {r for c in CASES for r in c.rules}
    assert covered == set(RULES), sorted(set(RULES) ^ covered)


def test_gelu_at_infinity() -> None:
    """gelu(+inf) is inf (float64 eager agrees); float32 eager on the CPU says NaN."""
    compiled = compile_case(fn(X, "F.gelu(x)"), [torch.zeros(3)])
    x = torch.tensor([math.inf, -math.inf, math.nan])
    assert compiled.fn(x).tolist()[0] == math.inf
    assert F.gelu(x.double()).tolist()[0] == math.inf
    assert all(math.isnan(v) for v in compiled.fn(x).tolist()[1:])



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_softmax_writes_no_subnormal_probabilities(dtype: torch.dtype) -> None:
    """exp(x - max) below e^-87 (float64: e^-708) counts as 0 (docs/primitives.md, "Subnormals"):
    eager's probabilities there are subnormal, ours 0; the others as eager's, with NaN and -inf."""
    compiled = compile_case(fn(X, "torch.softmax(x, -1)"), [torch.zeros(4, 6, dtype=dtype)])
    gap = 100.0 if dtype == torch.float32 else 720.0
    # (a fixed draw: with some, an element of row 0 lies far enough below the row's maximum that
    # eager's exp underflows to 0 rather than to a subnormal, which the first assert requires)
    x = torch.randn(4, 6, dtype=dtype, generator=torch.Generator().manual_seed(0))
    x[0, 3:] -= gap  # (swin_t's mask: -100 for other windows' pixels)
    x[1, 2] = -math.inf
    x[2, 1] = math.nan
    x[3, 0] = x[3, 1:].max() - (87.5 if dtype == torch.float32 else 708.5)  # (just past the bound)
    want, got = torch.softmax(x, -1), compiled.fn(x)
    tiny = torch.finfo(dtype).tiny
    assert ((want > 0) & (want < tiny))[0, 3:].all(), want  # (eager's are subnormal)
    assert not ((got > 0) & (got < tiny)).any(), got
    assert (got[0, 3:] == 0).all() and got[3, 0] == 0 and got[1, 2] == 0
    assert got[2].isnan().all() and want[2].isnan().all()
    assert torch.allclose(got[[0, 1, 3]], want[[0, 1, 3]], rtol=1e-6, atol=2 * tiny)

# -- after the pass: primitives, or left as is ------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_after_the_pass_every_tensor_op_is_a_primitive(case: Case) -> None:
    dtype = case.dtypes[0]
    compiled = compile_case(case.body, case.make(dtype, 0))
    for op in compiled.program.walk():
        if is_tensor_op(op):
            found = classify(op)
            assert isinstance(found, (Primitive, LeftAsIs)), f"{op_name(op)} is neither:\n{compiled.text}"


def test_classification() -> None:
    program = parse_program("""\
func @f(%x: f32[B, 8], %i: i64[3], %n: int) -> f32[B, 8] {
  %0 : f32[B, 8] = py.binary(%x, %x) {op = "+"}
  %1 : bool[B, 8] = py.compare(%0, %x) {op = "<"}
  %2 : f32[B, 8] = py.unary(%x) {op = "-"}
  %3 : f32[3, 8] = torch.index(%x, %i) {items = (("value",),)}
  %4 : f32[8] = torch.index(%x, %n) {items = (("value",),)}
  %5 : f64[B, 8] = torch.method(%x) {method = "double", aten = "aten::to.dtype"}
  %6 : f32[B, 8] = torch.method(%x) {method = "cpu", alias_of = 0, aten = "aten::cpu"}
  %7 : f32[B, 8] = torch.call(%x, %x) {callee = "torch.max", aten = "aten::max.other"}
  %8 : f32[B, 8] = torch.method(%x, %x) {method = "add_", mutates = (0,), alias_of = 0, aten = "aten::add_.Tensor"}
  %9 : f32[B, 8] = torch.call(%x) {callee = "torch.rand_like", random = True, aten = "aten::rand_like"}
  %10 : f32[B, 8] = torch.call(%x) {callee = "torch.nn.functional.gelu", aten = "aten::gelu"}
  %11 : int = torch.method(%x, %n) {method = "size", aten = "aten::size.int"}
  func.return(%x)
}
""")
    found = {}
    for op in program.walk():
        if is_tensor_op(op):
            c = classify(op)
            found[op.results[0].name or str(len(found))] = (c.kind if isinstance(c, Primitive) else c.name if c else None)
    assert list(found.values()) == [
        "pointwise", "pointwise", "pointwise", "extern", "view", "pointwise", None, "pointwise", "in-place",
        "random", None, "other",
    ]
    assert classify(next(op for op in program.walk() if op_name(op) == "gelu")) is None  # a composite


def test_primitive_table_is_well_formed() -> None:
    for name, p in PRIMITIVES.items():
        assert p.name == name and p.kind in KINDS and p.semantics
        assert (p.arity is not None) == (p.kind == "pointwise")
    assert not set(PRIMITIVES) & set(LEFT_AS_IS)


# -- the doc and the code -------------------------------------------------------------------------
def doc_table(heading: str) -> list[list[str]]:
    """The rows of the first table after `heading` in docs/primitives.md, cells unescaped."""
    text = DOC.read_text()
    start = text.index(heading)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip().replace("\\_", "_").replace("\\|", "|").strip("`")
                     for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if set(cells[0]) != {"-"}:
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # the header row


def test_doc_lists_every_primitive() -> None:
    documented = {}
    for kind, name, _ in doc_table("## Primitives"):
        arity = re.fullmatch(r"pointwise \((\d)\)", kind)
        documented[name] = ("pointwise", int(arity.group(1))) if arity else (kind, None)
    assert documented == {n: (p.kind, p.arity) for n, p in PRIMITIVES.items()}


def test_doc_lists_every_decomposition() -> None:
    documented = [row[0] for row in doc_table("## Decompositions")]
    assert len(documented) == len(set(documented))
    assert set(documented) == set(RULES), sorted(set(documented) ^ set(RULES))


def test_doc_lists_what_is_left_as_is() -> None:
    documented = [row[0] for row in doc_table("## Left as is")]
    assert sorted(documented) == sorted(LEFT_AS_IS)


def test_doc_states_the_tolerances_the_tests_use() -> None:
    rows = {row[0]: row[1] for row in doc_table("## Tolerance")}
    assert rows["float64"] == "atol = rtol = 1e-12" and TOLERANCE[torch.float64] == (1e-12, 1e-12)
    assert rows["float32"] == "atol = rtol = 1e-5" and TOLERANCE[torch.float32] == (1e-5, 1e-5)
    assert rows["float16"].startswith("atol = rtol = 8 * 2**-10") and TOLERANCE[torch.float16] == (8 * 2.0**-10,) * 2
    assert rows["bfloat16"].startswith("atol = rtol = 8 * 2**-7") and TOLERANCE[torch.bfloat16] == (8 * 2.0**-7,) * 2


def test_doc_has_a_measured_error_for_every_rule() -> None:
    measured = {r.strip() for row in doc_table("## Measured errors") for r in row[0].split(",")}
    assert measured == set(RULES)


# -- torch's own decompositions ---------------------------------------------------------------------
def _torch_ref(path: str) -> Callable:
    """A function of torch._refs / torch._decomp (private: skip when this torch lacks it)."""
    obj: Any = torch
    try:
        if path.startswith("decomp:"):
            from torch._decomp import decomposition_table

            packet, _, overload = path[len("decomp:"):].partition(".")
            return decomposition_table[getattr(getattr(torch.ops.aten, packet), overload)]
        for part in path.split(".")[1:]:
            obj = getattr(obj, part)
    except (AttributeError, KeyError, ImportError):
        pytest.skip(f"{path} is not in this torch")
    return obj


REFERENCES: dict[str, Callable[..., Any]] = {
    "softmax_last": lambda x: _torch_ref("torch._refs.softmax")(x, -1),
    "log_softmax": lambda x: _torch_ref("torch._refs.log_softmax")(x, -1),
    "softmin": lambda x: _torch_ref("torch._refs.nn.functional.softmin")(x, 1),
    "layer_norm_affine": lambda x, w, b: _torch_ref("torch._refs.nn.functional.layer_norm")(x, (8,), w, b, 1e-5),
    "group_norm": lambda x, w, b: _torch_ref("torch._refs.nn.functional.group_norm")(x, 2, w, b),
    "batch_norm": lambda x, m, v, w, b: _torch_ref("decomp:native_batch_norm.default")(
        x, w, b, m, v, False, 0.1, 1e-5)[0],
    "rms_norm_eps_none": lambda x, w: _torch_ref("decomp:_fused_rms_norm.default")(x, [8], w, None)[0],
    "gelu": lambda x: _torch_ref("torch._refs.nn.functional.gelu")(x),
    "gelu_tanh": lambda x: _torch_ref("torch._refs.nn.functional.gelu")(x, approximate="tanh"),
    "silu": lambda x: _torch_ref("decomp:silu.default")(x),
    "hardswish": lambda x: _torch_ref("decomp:hardswish.default")(x),
    "hardsigmoid": lambda x: _torch_ref("torch._refs.nn.functional.hardsigmoid")(x),
    "mish": lambda x: _torch_ref("torch._refs.nn.functional.mish")(x),
    "elu": lambda x: _torch_ref("torch._refs.nn.functional.elu")(x, 0.5),
    "selu": lambda x: _torch_ref("torch._refs.nn.functional.selu")(x),
    "celu": lambda x: _torch_ref("torch._refs.nn.functional.celu")(x, 2.0),
    "leaky_relu": lambda x: _torch_ref("torch._refs.nn.functional.leaky_relu")(x, 0.2),
    "prelu_channels": lambda x, w: _torch_ref("torch._refs.nn.functional.prelu")(x, w),
    "softplus_beta": lambda x: _torch_ref("torch._refs.nn.functional.softplus")(x, 2.0, 5.0),
    "glu": lambda x: _torch_ref("torch._refs.nn.functional.glu")(x),
    "tanhshrink": lambda x: _torch_ref("torch._refs.nn.functional.tanhshrink")(x),
    "hardtanh": lambda x: _torch_ref("torch._refs.nn.functional.hardtanh")(x, -2.0, 2.5),
    "threshold": lambda x: _torch_ref("torch._refs.nn.functional.threshold")(x, 0.5, -3.0),
    "addcmul": lambda x, a, b: _torch_ref("torch._refs.addcmul")(x, a, b, value=0.5),
    "lerp_tensor": lambda x, y, w: _torch_ref("torch._refs.lerp")(x, y, w),
    "mean_keepdim": lambda x: _torch_ref("torch._refs.mean")(x, (0, -1), True),
    "var_correction": lambda x: _torch_ref("torch._refs.var")(x, (0, 2), correction=0, keepdim=True),
    "std": lambda x: _torch_ref("torch._refs.std")(x, -1, keepdim=True),
    "logsumexp": lambda x: _torch_ref("torch._refs.logsumexp")(x, 1),
    "norm2": lambda x: _torch_ref("torch._refs.linalg.vector_norm")(x, 2, -1),
    "norm_inf": lambda x: _torch_ref("torch._refs.linalg.vector_norm")(x, math.inf, 0),
    "normalize": lambda x: x / _torch_ref("torch._refs.linalg.vector_norm")(x, 2, -1, True).clamp_min(1e-12),
}


@pytest.mark.parametrize("case_id", list(REFERENCES))
def test_agrees_with_torchs_own_decomposition(case_id: str) -> None:
    """In float64, NaN and infinities included: the same values as torch._refs / torch._decomp."""
    case = next(c for c in CASES if c.id == case_id)
    compiled = compile_case(case.body, case.make(torch.float64, 0))
    for seed in range(3):
        inputs = case.make(torch.float64, seed)
        want = REFERENCES[case_id](*[v.clone() for v in inputs])
        assert max_error(compiled.fn(*inputs), want) <= 1.0


# -- the example models ---------------------------------------------------------------------------
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py")
                  if p.stem != "__init__" and not p.stem.endswith("_compiled"))


@pytest.mark.parametrize("stem", EXAMPLES)
def test_examples_through_the_pass_match_eager(stem: str) -> None:
    """Each example: layers lowered, shapes from the live model, decomposed, compiled; eager and
    compiled agree within the float32 tolerance (a guard that fails means an eager run)."""
    import importlib

    import runtime
    from benchmarks.compare import factories
    from codegen.module import Header, emit_module
    from ir.passes.dce import dce
    from ir.passes.inline import inline
    from ir.passes.layers import lower_layers
    from runtime.guards import GuardFailure
    from transpiler.pipeline import lower_file, torch_version
    from transpiler.source import SourceFile

    module = importlib.import_module(f"examples.{stem}")
    for _, factory in factories(module):
        src = SourceFile.read(ROOT / "examples" / f"{stem}.py", f"{stem}.py")
        program, entries = lower_file(src)
        inline(program)
        lower_layers(program)
        canonicalize(program)
        model, inputs = factory()
        key = f"{type(model).__name__}.forward" if isinstance(model, torch.nn.Module) else model.__name__
        func = next(f for f in program.funcs if f.sym_name == entries[key])
        live = [model] if isinstance(model, torch.nn.Module) else []
        propagate_shapes(program, {func.sym_name: live + example_input_types(func, inputs)})
        decompose(program)
        verify(program)
        canonicalize(program)
        dce(program)
        text = emit_module(program, Header(f"{stem}.py", "0", "test", "0", torch_version()), entries, src.lines)
        namespace: dict[str, Any] = {}
        exec(compile(text, f"{stem}_decomposed", "exec"), namespace)
        eager_model, eager_inputs = factory()
        with torch.no_grad(), runtime.mode("off"):
            want = eager_model(*eager_inputs)
        try:
            with torch.no_grad():
                got = namespace["COMPILED"][key](*live, *inputs)
        except GuardFailure:
            continue  # the compiled code does not apply: the dispatcher runs eagerly
        assert max_error(got, want) <= 1.0


# -- the measured errors (docs/primitives.md) -----------------------------------------------------
def measure(seeds: range = range(20)) -> dict[str, dict[torch.dtype, tuple[float, float]]]:
    """Per rule (the cases that exercise it together) and dtype: the largest absolute error
    against eager and the largest fraction of the tolerance used."""
    table: dict[str, dict[torch.dtype, tuple[float, float]]] = {}
    for case in CASES:
        row = table.setdefault(", ".join(case.rules), {})
        for dtype in case.dtypes:
            _, worst, err = run_case(case, dtype, seeds)
            old = row.get(dtype, (0.0, 0.0))
            row[dtype] = (max(old[0], err), max(old[1], worst))
    return table


if __name__ == "__main__":
    print("| rule | " + " | ".join(str(d).removeprefix("torch.") for d in FLOATS) + " |")
    print("| --- |" + " --- |" * len(FLOATS))
    for rules, row in measure().items():
        cells = [f"{row[d][0]:.1e} ({row[d][1]:.2f})" if d in row else "exact (int)" for d in FLOATS]
        print(f"| {rules} | " + " | ".join(cells) + " |")


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "permuted"])
def test_a_pad_by_nothing_keeps_eagers_strides(layout: str) -> None:
    """The pad's input is the tensor itself only because eager's copy (`clone`, which keeps the
    strides of a dense tensor) could not be told from it: same values, same strides."""
    def make(dtype: torch.dtype, seed: int, batch: int | None = None) -> list[torch.Tensor]:
        x = torch.randn(batch or 2, 3, 4, 5, generator=torch.Generator().manual_seed(seed), dtype=dtype)
        if layout == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        elif layout == "permuted":
            x = x.permute(0, 2, 3, 1)
        return [x]

    compiled = compile_case(fn(X, "F.pad(x * 2.0, (0, 0, 0, 0))"), make(torch.float32, 0))
    assert "pad" not in {op_name(op) for op in compiled.program.walk() if is_tensor_op(op)}
    for batch in (None, 7):
        x = make(torch.float32, 1, batch)[0]
        got, want = compiled.fn(x.clone()), compiled.eager(x.clone())
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert got.stride() == want.stride()


def test_a_group_norm_of_one_group_keeps_a_channels_last_input_in_place() -> None:
    """One group: the statistics run over x as it lies in memory (channels last here), with no
    reshape of it to (N, 1, C * H * W), which would copy it; the values are eager's."""
    def make(dtype: torch.dtype, seed: int, batch: int | None = None) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(batch or 2, 8, 5, 6, generator=g, dtype=dtype).contiguous(memory_format=torch.channels_last)
        return [x, torch.randn(8, generator=g, dtype=dtype), torch.randn(8, generator=g, dtype=dtype)]

    compiled = compile_case(fn("x: Tensor, w: Tensor, b: Tensor", "F.group_norm(x, 1, w, b, 1e-5)"),
                            make(torch.float32, 0))
    reshaped = [op.results[0].type.shape for op in compiled.program.walk() if is_tensor_op(op) and op_name(op) == "reshape"]
    assert reshaped and all(shape == (8, 1, 1) for shape in reshaped)  # (only the weight and the bias)
    for batch in (None, 3):
        inputs = make(torch.float32, 1, batch)
        torch.testing.assert_close(compiled.fn(*inputs), compiled.eager(*inputs), rtol=1e-5, atol=1e-5)


def test_means_and_variances_that_keep_the_last_dim_stay_torchs_op() -> None:
    """Only reductions of rows fuse: a mean or a variance over other dims would be torch's sums
    (and, for a variance, a kernel writing every squared difference) where eager makes one call,
    so it stays that call; over the last dim it decomposes, and its sums join kernels."""
    kept = compile_case(fn(X, "x.mean(0) + x.var(0, unbiased=False) + torch.std(x, 0) + torch.var_mean(x, 0)[0]"),
                        [torch.randn(4, 5)])
    left = {op_name(op) for op in kept.program.walk() if is_tensor_op(op)}
    assert {"mean", "std", "var", "var_mean"} <= left and "sum" not in left, kept.text
    gone = compile_case(fn(X, "x.mean(1) + x.var(1, unbiased=False) + torch.std(x, (0, 1))"), [torch.randn(4, 5)])
    assert not {"mean", "var", "std"} & {op_name(op) for op in gone.program.walk() if is_tensor_op(op)}, gone.text
    for x in (torch.randn(4, 5), torch.randn(7, 5)):
        assert torch.equal(kept.fn(x), kept.eager(x))

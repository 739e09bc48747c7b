"""Kernels for tensors of no declared rank (ir/kernel/rows.py, runtime.guards.over_rows): a function of
plain `Tensor` parameters that computes row by row (element-wise ops, softmax and reductions
over dimension -1, norms over the last dimension) gets a float32 CPU specialisation compiled for
the (rows, last) view of its tensors, which serves every rank; anything that needs the rank
keeps the generic code, and `explain` says which op needs it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import hypothesis.strategies as st
import pytest
import torch
from hypothesis import HealthCheck, given, settings

import runtime
from closeness import assert_close_to_eager
from ir.kernel.rows import NotRowWise, RowPlan, row_plan
from transpiler.pipeline import build_program
from transpiler.source import SourceFile

HEADER = "import torch\nimport torch.nn.functional as F\nfrom torch import Tensor\n\nfrom transpiler import script\n\n\n"


def _plan(tmp_path: Path, body: str) -> RowPlan:
    path = tmp_path / "rows_model.py"
    path.write_text(HEADER + textwrap.dedent(body))
    program, entries = build_program(SourceFile.read(path))
    func = next(f for f in program.funcs if f.sym_name == entries["f"])
    return row_plan(func)


@pytest.mark.parametrize("body, rows, vectors", [
    ("def f(x: Tensor, y: Tensor) -> Tensor:\n    return torch.where(x > 0, torch.sigmoid(y), -x) * 2\n", ("x", "y"), ()),
    ("def f(x: Tensor) -> Tensor:\n    return x.softmax(-1) + F.log_softmax(x, dim=-1)\n", ("x",), ()),
    ("def f(x: Tensor, w: Tensor, b: Tensor) -> Tensor:\n"
     "    return F.layer_norm(x, [x.size(-1)], weight=w, bias=b) * w\n", ("x",), ("w", "b")),
    ("def f(x: Tensor) -> Tensor:\n    return F.layer_norm(x, (x.shape[-1],), None, None, 1e-6)\n", ("x",), ()),
    ("def f(x: Tensor, eps: float = 1e-6) -> Tensor:\n"
     "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n", ("x",), ()),
    ("def f(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:\n"
     "    m = x.amax(dim=-1, keepdim=True)\n    return (x - m) / x.shape[-1] ** 0.5, m + y.sum(-1, keepdim=True)\n",
     ("x", "y"), ()),
])
def test_row_wise_functions_and_their_parameters(tmp_path: Path, body: str, rows: tuple, vectors: tuple) -> None:
    assert _plan(tmp_path, "@script\n" + body) == RowPlan(rows, vectors)


@pytest.mark.parametrize("body, reason", [
    ("return torch.softmax(x, dim=0)", "torch.softmax over a dimension other than -1 needs the rank"),
    ("return torch.softmax(x, dim=1)", "torch.softmax over a dimension other than -1 needs the rank"),
    ("return x * x.shape[0]", "indexing needs the rank"),
    ("return x @ x", "`@` of tensors is not element-wise"),
    ("return x.reshape(-1)", "reshape writes, views or draws random numbers"),
    ("return x.sum(-1)", "sum without keepdim=True drops a dimension"),
    ("return x.sum()", "sum over a dimension other than -1 needs the rank"),
    ("return x", "it returns its parameter x"),
    ("return x.add_(1)", "copy_ writes, views or draws random numbers"),  # (functionalized)
    ("return x.t() + 1", "t writes, views or draws random numbers"),
    ("return torch.cumsum(x, -1)", "torch.cumsum is not element-wise"),
    ("return F.layer_norm(x, x.shape[-2:])", "py.slice is not row-wise"),
    ("return x.mean(-1, keepdim=True).float()", "float writes, views"),  # (may return x itself)
])
def test_what_needs_the_rank_is_named(tmp_path: Path, body: str, reason: str) -> None:
    with pytest.raises(NotRowWise, match=reason.replace("(", r"\(").replace(")", r"\)")):
        _plan(tmp_path, f"@script\ndef f(x: Tensor) -> Tensor:\n    {body}\n")


def test_control_flow_needs_the_rank(tmp_path: Path) -> None:
    with pytest.raises(NotRowWise, match="line 10: scf.if is not row-wise"):
        _plan(tmp_path, "@script\ndef f(x: Tensor, flag: bool) -> Tensor:\n"
                        "    if flag:\n        x = x * 2\n    return x + 1\n")


MODEL = HEADER + '''\
@script
def gate(x: Tensor, y: Tensor, scale: float = 0.5) -> Tensor:
    return torch.clamp(torch.sigmoid(x) * torch.tanh(y) * scale, -0.3, 0.3)


@script
def softmax_last(x: Tensor) -> Tensor:
    return torch.softmax(x, dim=-1)


@script
def norm_gelu(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b, 1e-5))


@script
def centred(x: Tensor) -> tuple[Tensor, Tensor]:
    m = x.mean(-1, keepdim=True)
    return x - m, m


@script
def first_dim(x: Tensor) -> Tensor:
    return torch.softmax(x, dim=0)
'''


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from transpiler import cli

    root = tmp_path_factory.mktemp("rows")
    (root / "rows_model.py").write_text(MODEL)
    assert cli.main(["-q", str(root / "rows_model.py")]) == 0
    sys.path.insert(0, str(root))
    sys.modules.pop("rows_model", None)
    import rows_model  # type: ignore[import-not-found]

    yield rows_model, (root / "rows_model_compiled.py").read_text()
    sys.path.remove(str(root))
    sys.modules.pop("rows_model", None)
    sys.modules.pop("rows_model_compiled", None)


def _inputs(name: str, shape: tuple[int, ...], g: torch.Generator, vector_y: bool = False) -> tuple:
    x = torch.randn(shape, generator=g) * 3
    if name == "gate":  # (y a vector of the last size: broadcast, a stride-0 view)
        return x, torch.randn(shape[-1:] if vector_y else shape, generator=g)
    if name == "norm_gelu":
        return x, torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)
    return (x,)


def test_the_module_says_what_runs_on_rows(model) -> None:
    _, text = model
    assert '@_guards.over_rows("x", "y")\ndef gate_float32_cpu(x: Tensor, y: Tensor, scale: float = 0.5)' in text
    assert '_guards.check_tensor(x, "x", torch.float32, "cpu", ("rows", "last"))' in text
    assert '"norm_gelu": (norm_gelu_float32_cpu, norm_gelu),' in text
    assert '"first_dim": first_dim,' in text  # (a softmax over dimension 0 needs the rank)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple),
       name=st.sampled_from(["gate", "softmax_last", "norm_gelu", "centred"]), seed=st.integers(0, 2**16),
       vector_y=st.booleans())
def test_every_rank_takes_the_kernels_and_matches_eager(model, shape: tuple[int, ...], name: str, seed: int,
                                                        vector_y: bool) -> None:
    module, _ = model
    runtime.reset()
    args = _inputs(name, shape, torch.Generator().manual_seed(seed), vector_y)
    fn = getattr(module, name)
    before = [a.clone() for a in args]
    with torch.no_grad(), runtime.mode("strict"):
        got = fn(*args)
    # (the kernels see views of the caller's tensors: they write only fresh outputs)
    assert all(torch.equal(a, b) for a, b in zip(args, before))
    assert not any(g.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
                   for g in (got if isinstance(got, tuple) else (got,)) for a in args)
    expected = fn.__wrapped__(*args)
    for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)):
        assert g.shape == e.shape
        assert_close_to_eager(g, e, f"{name}{shape}")
    assert runtime.generic_counts() == {}


@pytest.mark.parametrize("x, y", [
    (torch.randn(96, 100), torch.randn(96, 100)),  # rows folded 32 at a time: 3 rows of 3200
    (torch.randn(3, 64, 2048), torch.randn(3, 64, 2048)),  # 96 rows of 4096
    (torch.randn(4099, 3), torch.randn(4099, 3)),  # all of them: one row
    (torch.randn(7, 1000), torch.randn(7, 1000)),  # none
    (torch.randn(96, 100), torch.randn(96, 128)[:, :100]),  # y's rows apart: none
    (torch.randn(100, 96).t(), torch.randn(96, 100)),  # x's row strided
    (torch.randn(96, 100), torch.randn(100)),  # y broadcast
])
def test_rows_folded_into_longer_ones_match_eager(model, x: torch.Tensor, y: torch.Tensor) -> None:
    """A pointwise kernel folds rows into one where its tensors walk them as one, whole or in
    part (ts_fold), and runs the rows left on the threads."""
    module, _ = model
    runtime.reset()
    with torch.no_grad(), runtime.mode("strict"):
        assert_close_to_eager(module.gate(x, y), module.gate.__wrapped__(x, y), f"{tuple(x.shape)}")
    assert runtime.generic_counts() == {}


@pytest.mark.parametrize("case", ["shapes that do not broadcast", "leading sizes that do not merge", "0-dimensional",
                                  "float64", "vector of another size"])
def test_other_calls_run_the_generic_code_exactly(model, case: str) -> None:
    module, _ = model
    runtime.reset()
    x = torch.randn(4, 6)
    name, args = {
        "shapes that do not broadcast": ("gate", (x, torch.randn(4))),
        "leading sizes that do not merge": ("softmax_last", (torch.randn(3, 4, 5).transpose(0, 1),)),
        "0-dimensional": ("softmax_last", (torch.tensor(2.0),)),
        "float64": ("softmax_last", (x.double(),)),
        "vector of another size": ("norm_gelu", (x, torch.randn(6), torch.randn(5))),
    }[case]
    fn = getattr(module, name)
    if case in ("vector of another size", "shapes that do not broadcast"):  # eager raises, so does generic code
        with torch.no_grad(), pytest.raises(RuntimeError):
            fn(*args)
        return
    with torch.no_grad(), runtime.mode("strict"):
        assert torch.equal(fn(*args), fn.__wrapped__(*args))
    assert runtime.generic_counts() == {f"rows_model.{name}": 1}


def test_explain_names_the_op_that_needs_the_rank(model) -> None:
    from transpiler.explain import explain_path

    module, _ = model
    text = explain_path(Path(module.__file__))
    assert text is not None
    assert ("no kernels without a rank: line 31: torch.softmax over a dimension other than -1 needs the rank\n"
            "  for fused kernels, annotate x with a shape") in text
    assert "softmax_last:float32_cpu" in text


# -- random row-wise programs ----------------------------------------------------------------
_UNARY = ["torch.sigmoid({})", "torch.tanh({})", "torch.relu({})", "({}).abs()", "-({})", "F.silu({})",
          "torch.exp(-({}).abs())"]
_BINARY = ["({}) + ({})", "({}) - ({})", "({}) * ({})"]
_TENSORS = ["torch.maximum({}, {})", "torch.where(({}) > 0, {}, 0.5)"]
_ROWS = ["torch.softmax({}, dim=-1)", "({0}) - ({0}).amax(-1, keepdim=True)",
         "F.layer_norm({}, (x.shape[-1],), w, b, 1e-5)", "({0}) / (({0}).abs().sum(-1, keepdim=True) + 1)"]


@st.composite
def _row_expressions(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["x", "y", "x", "y", "w"]))
    kind = draw(st.sampled_from(["unary", "binary", "tensors", "rows"]))
    inner = _row_expressions(depth - 1)
    if kind == "unary":
        return draw(st.sampled_from(_UNARY)).format(draw(inner))
    if kind == "binary":
        return draw(st.sampled_from(_BINARY)).format(draw(inner), draw(st.one_of(inner, st.just("0.25"))))
    if kind == "tensors":
        return draw(st.sampled_from(_TENSORS)).format(draw(inner), draw(inner))
    return draw(st.sampled_from(_ROWS)).format(draw(inner))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_row_expressions(), min_size=3, max_size=3),
       shape=st.lists(st.integers(1, 7), min_size=1, max_size=3).map(tuple))
def test_random_row_wise_programs_match_eager(tmp_path_factory: pytest.TempPathFactory, bodies: list[str],
                                              shape: tuple[int, ...]) -> None:
    from transpiler import cli

    root = tmp_path_factory.mktemp("rows_programs")
    functions = "".join(f"@script\ndef f{i}(x: Tensor, y: Tensor, w: Tensor, b: Tensor) -> Tensor:\n"
                        f"    return ({body}) + x * 0\n\n\n" for i, body in enumerate(bodies))
    name = f"rows_programs_{abs(hash((tuple(bodies), shape)))}"
    (root / f"{name}.py").write_text(HEADER + functions)
    assert cli.main(["-q", str(root / f"{name}.py")]) == 0
    sys.path.insert(0, str(root))
    try:
        module = __import__(name)
        g = torch.Generator().manual_seed(len(shape))
        x, y = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
        w, b = torch.randn(shape[-1], generator=g), torch.randn(shape[-1], generator=g)
        runtime.reset()
        for i in range(len(bodies)):
            fn = getattr(module, f"f{i}")
            with torch.no_grad(), runtime.mode("strict"):
                got = fn(x, y, w, b)
            assert_close_to_eager(got, fn.__wrapped__(x, y, w, b), bodies[i])
            # (a specialisation is kept only where kernels form; it serves these inputs)
            assert runtime.generic_counts().get(f"{name}.f{i}", 0) == 0
    finally:
        sys.path.remove(str(root))
        for key in (name, f"{name}_compiled"):
            sys.modules.pop(key, None)

"""Kernels from annotations alone (transpiler/annotated.py, transpiler/settings.py): a decorated
function whose tensor parameters have annotated ranks gets a specialisation per device and dtype
of its settings (float32 on the CPU by default; `@script(devices=..., dtypes=...)`;
`[tool.torchscribe]` in pyproject.toml) in the checked-in module, tried before the generic code."""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from runtime.errors import TorchscribeError
from runtime.loader import compiled_path_for, read_header
from transpiler import cli
from transpiler.batch import up_to_date
from transpiler.explain import explain_path

# The three shapes of work the issue names: a pointwise chain, a softmax over the last dim, a
# layer norm with GELU. `Float[...]` (jaxtyping's, imported for type checkers only) and
# `Annotated[...]` name no dtype; `Float32[...]` does.
MODEL = '''\
from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import torch
import torch.nn.functional as F
from torch import Tensor

from transpiler import script

if TYPE_CHECKING:
    from jaxtyping import Float, Float32


@script
def pointwise(x: Float[Tensor, "N D"], y: Float[Tensor, "N D"]) -> Tensor:
    a = torch.sigmoid(x) * torch.tanh(y)
    b = torch.exp(-a.abs())
    c = torch.where(x > 0, b, F.silu(y))
    return torch.clamp(c, -0.5, 0.5)


@script
def softmax_last(x: Annotated[Tensor, "N D"]) -> Tensor:
    return torch.softmax(x, dim=-1)


@script
def norm_gelu(x: Float32[Tensor, "N D"], w: Float32[Tensor, "D"], b: Float32[Tensor, "D"]) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b, 1e-5))
'''

_names = itertools.count()


class Project:
    """A model file (a module name of its own) in a directory with a pyproject.toml."""

    def __init__(self, root: Path, source: str, pyproject: str = "") -> None:
        self.root = root
        self.name = f"ts_special_{next(_names)}"
        self.model = root / f"{self.name}.py"
        self.model.write_text(source)
        self.pyproject = root / "pyproject.toml"
        self.pyproject.write_text("[project]\nname = \"models\"\n" + textwrap.dedent(pyproject))
        self.compiled = compiled_path_for(self.model)

    def compile(self, *options: str) -> int:
        return cli.main(["-q", *options, str(self.model)])

    def text(self) -> str:
        return self.compiled.read_text()

    def module(self):  # type: ignore[no-untyped-def]
        __import__(self.name)
        return sys.modules[self.name]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.delenv("TORCHSCRIBE", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    made: list[Project] = []

    def make(source: str = MODEL, pyproject: str = "") -> Project:
        made.append(Project(tmp_path, source, pyproject))
        return made[-1]

    runtime.reset()
    yield make
    runtime.reset()
    for p in made:
        for name in (p.name, f"{p.name}_compiled"):
            sys.modules.pop(name, None)


def _inputs(n: int = 37, d: int = 70, dtype: torch.dtype = torch.float32) -> dict[str, tuple]:
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(n, d, generator=g, dtype=dtype) * 3 for _ in range(2))
    w, b = (torch.randn(d, generator=g, dtype=dtype) for _ in range(2))
    return {"pointwise": (x, y), "softmax_last": (x,), "norm_gelu": (x, w, b)}


def test_annotated_functions_get_kernels_that_match_eager(project) -> None:
    p = project()
    assert p.compile() == 0
    text = p.text()
    for name in ("pointwise", "softmax_last", "norm_gelu"):
        assert f'"{name}": ({name}_float32_cpu, {name}),' in text
    assert text.count('extern "C" void') == 3 and "SETTINGS" not in text
    assert 'check_tensor(x, "x", torch.float32, "cpu", ("N", "D"))' in text
    model = p.module()
    for n, d in ((37, 70), (1, 1), (4, 2048)):
        for name, args in _inputs(n, d).items():
            fn = getattr(model, name)
            with torch.no_grad(), runtime.mode("strict"):
                assert_close_to_eager(fn(*args), fn.__wrapped__(*args), f"{name} at {n}x{d}")
    assert runtime.generic_counts() == {}


def test_other_dtypes_run_the_generic_code_exactly(project) -> None:
    p = project()
    assert p.compile() == 0
    model = p.module()
    for name, args in _inputs(dtype=torch.float64).items():
        if name == "norm_gelu":
            continue  # (annotated Float32: its generic code pins float32 too)
        fn = getattr(model, name)
        with torch.no_grad(), runtime.mode("strict"):
            assert torch.equal(fn(*args), fn.__wrapped__(*args)), name
    assert runtime.generic_counts() == {f"{p.name}.pointwise": 1, f"{p.name}.softmax_last": 1}
    # with autograd recording, kernels (which record nothing) are not used either
    x = _inputs()["softmax_last"][0].requires_grad_()
    with runtime.mode("strict"):
        out = model.softmax_last(x)
    assert out.requires_grad and runtime.generic_counts()[f"{p.name}.softmax_last"] == 2


def test_a_call_of_another_rank_runs_eagerly(project) -> None:
    """The annotation's rank is what the generic code assumes too: a call of another rank
    fails its checks as well and runs eagerly (strict mode raises)."""
    p = project()
    assert p.compile() == 0
    model = p.module()
    x = torch.randn(2, 3, 5)
    with torch.no_grad(), runtime.mode("strict"), pytest.raises(TorchscribeError, match="expected 2 dimensions"):
        model.softmax_last(x)
    with torch.no_grad(), pytest.warns(runtime.TorchscribeWarning, match="expected 2 dimensions"):
        assert torch.equal(model.softmax_last(x), torch.softmax(x, dim=-1))
    assert runtime.fallback_counts() == {f"{p.name}.softmax_last": 1}


def test_an_annotated_dtype_is_kept_and_named(project) -> None:
    p = project(MODEL.replace("from jaxtyping import Float, Float32", "from jaxtyping import BFloat16, Float, Float32")
                .replace('def softmax_last(x: Annotated[Tensor, "N D"])', 'def softmax_last(x: BFloat16[Tensor, "N D"])'))
    assert p.compile() == 0
    text = p.text()
    assert '"softmax_last": (softmax_last_bfloat16_cpu, softmax_last),' in text
    assert 'check_tensor(x, "x", torch.bfloat16, "cpu", ("N", "D"))' in text
    x = torch.randn(5, 33, dtype=torch.bfloat16)
    with torch.no_grad(), runtime.mode("strict"):
        assert_close_to_eager(p.module().softmax_last(x), torch.softmax(x, dim=-1))
    assert runtime.generic_counts() == {}


def test_what_has_no_kernels_gets_no_specialisation(project) -> None:
    p = project('''\
from typing import Annotated

import torch
from torch import Tensor

from transpiler import script


@script
def product(a: Annotated[Tensor, "N K"], b: Annotated[Tensor, "K M"]) -> Tensor:
    return a @ b


@script
def plain(x: Tensor, y: Tensor) -> Tensor:
    return torch.softmax(torch.tanh(x) * y, dim=0)
''')
    assert p.compile() == 0
    text = p.text()
    assert '"product": product,' in text and '"plain": plain,' in text and "_kernels" not in text
    explained = explain_path(p.model)
    assert explained is not None
    assert ('plain (' + p.model.name + ':15)\n  no kernels without a rank: line 16: torch.softmax over a dimension '
            'other than -1 needs the rank\n  for fused kernels, annotate x, y with a shape, one name or size per '
            'dimension: e.g. x: Float32[Tensor, "N D"] (jaxtyping) or Annotated[Tensor, "N D"]') in explained
    assert "for fused kernels" not in explained.split("plain (")[0]  # (product has ranks: no kernel to gain)


def test_a_module_forward_gets_kernels_over_its_annotated_inputs(project) -> None:
    """Ahead of time the instance is not known: what reads only the annotated inputs (and Python
    numbers) fuses; what reads parameters (`self.proj`) stays a torch call."""
    p = project('''\
from typing import Annotated

import torch
from torch import Tensor, nn

from transpiler import script


@script
class Gate(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d)
        self.scale = 0.5

    def forward(self, x: Annotated[Tensor, "B T C"], h: Annotated[Tensor, "B T C"]) -> Tensor:
        g = torch.sigmoid(x) * self.scale
        return self.proj(torch.tanh(g * h) + h)
''')
    assert p.compile() == 0
    assert '"Gate.forward": (Gate_forward_float32_cpu, Gate_forward),' in p.text()
    model = p.module().Gate(6)
    x, h = torch.randn(2, 3, 6), torch.randn(2, 3, 6)
    with torch.no_grad(), runtime.mode("strict"):
        assert_close_to_eager(model(x, h), model.proj(torch.tanh(torch.sigmoid(x) * 0.5 * h) + h))
    assert runtime.generic_counts() == {}


def test_decorator_devices_and_dtypes(project) -> None:
    p = project(MODEL.replace("@script\ndef softmax_last",
                              '@script(devices=["cpu", "cuda"], dtypes=("float32", "bfloat16"))\ndef softmax_last'))
    assert p.compile() == 0
    text = p.text()
    order = ["softmax_last_float32_cpu", "softmax_last_bfloat16_cpu", "softmax_last_float32_cuda",
             "softmax_last_bfloat16_cuda", "softmax_last"]
    assert '"softmax_last": (\n' + "".join(f"        {f},\n" for f in order) + "    )," in text
    assert 'check_tensor(x, "x", torch.bfloat16, "cuda", ("N", "D"))' in text
    assert text.count('"cuda"\n)') + text.count('"cuda")') == 2  # (a launcher for each CUDA kernel)
    assert '"pointwise": (pointwise_float32_cpu, pointwise),' in text  # (the others keep the default)
    model = p.module()
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(9, 40, dtype=dtype)
        with torch.no_grad(), runtime.mode("strict"):
            assert_close_to_eager(model.softmax_last(x), torch.softmax(x, dim=-1), str(dtype))
    assert runtime.generic_counts() == {}


@pytest.mark.parametrize("option,message", [
    ('devices=("tpu",)', "@script(devices=...) names 'tpu', which is not one of cpu, cuda"),
    ('dtypes="float32"', "@script(dtypes=...) takes a tuple or list of names, not 'float32'"),
    ('dtypes=("float32", "float32")', "@script(dtypes=...) names 'float32' twice"),
])
def test_a_bad_option_is_a_diagnostic_at_the_decorator(project, capsys, option: str, message: str) -> None:
    p = project(MODEL.replace("@script\ndef softmax_last", f"@script({option})\ndef softmax_last"))
    assert p.compile() == 2
    err = capsys.readouterr().err
    line = MODEL.splitlines().index("def softmax_last(x: Annotated[Tensor, \"N D\"]) -> Tensor:")
    assert f"{p.model.name}:{line}:9: error: {message}" in err
    assert f"{line} | @script({option})\n" in err and "^" * len(option) in err and "= help: name one or more of" in err
    assert not p.compiled.exists()


def test_no_devices_is_the_generic_code_alone(project) -> None:
    """`devices = []` (or `dtypes`) asks for no default specialisations: the generic code, which
    runs eager's own ops, exactly. A project-wide setting is recorded in SETTINGS."""
    p = project(MODEL.replace("@script\ndef softmax_last", "@script(devices=())\ndef softmax_last"),
                pyproject="[tool.torchscribe]\ndtypes = []\n")
    assert p.compile() == 0
    text = p.text()
    assert '"softmax_last": softmax_last,' in text and '"pointwise": pointwise,' in text and "_kernels" not in text
    assert 'SETTINGS = {\n    "devices": ["cpu"],\n    "dtypes": [],\n}' in text
    x = torch.randn(5, 7)
    with torch.no_grad(), runtime.mode("strict"):
        assert torch.equal(p.module().softmax_last(x), torch.softmax(x, dim=-1))


def test_the_runtime_decorator_checks_the_options_too() -> None:
    from transpiler import script

    def f(x: torch.Tensor) -> torch.Tensor:
        return x

    with pytest.raises(TypeError, match=r"script\(devices=\.\.\.\) names 'tpu'"):
        script(devices=("tpu",))(f)
    with pytest.raises(TypeError, match=r"script\(dtypes=\.\.\.\) takes a tuple or list of names"):
        script(dtypes="float32")(f)
    with pytest.raises(TypeError, match="decorator options for ahead-of-time compilation"):
        script(f, example_inputs=(torch.ones(2),), devices=("cpu",))
    assert script(devices=["cuda"], dtypes=("bfloat16",))(f).__torchscribe_options__ == {
        "permissive": False, "devices": ("cuda",), "dtypes": ("bfloat16",)}


# -- [tool.torchscribe] in pyproject.toml -------------------------------------------------------------
def test_project_settings_and_their_staleness(project, capsys) -> None:
    p = project(pyproject='''
        [tool.torchscribe]
        dtypes = ["bfloat16", "float32"]
    ''')
    assert p.compile() == 0
    text = p.text()
    assert 'SETTINGS = {\n    "devices": ["cpu"],\n    "dtypes": ["bfloat16", "float32"],\n}' in text
    assert '"softmax_last": (softmax_last_bfloat16_cpu, softmax_last_float32_cpu, softmax_last),' in text
    # Float32 annotated: one specialisation, whatever the dtypes
    assert '"norm_gelu": (norm_gelu_float32_cpu, norm_gelu),' in text
    assert read_header(p.compiled)["SETTINGS"] == {"devices": ["cpu"], "dtypes": ["bfloat16", "float32"]}
    assert up_to_date(p.model) and p.compile("--check") == 0
    capsys.readouterr()

    p.pyproject.write_text(p.pyproject.read_text().replace('["bfloat16", "float32"]', '["float32"]'))
    assert not up_to_date(p.model)
    assert p.compile("--check") == 1
    out = capsys.readouterr().out
    assert ': stale (compiled for [tool.torchscribe] dtypes = ["bfloat16", "float32"], now ["float32"] from ' \
           'pyproject.toml) (run `torchscribe' in out
    assert p.compile() == 0  # (incremental: the changed settings make it compile again)
    assert "SETTINGS" not in p.text() and '"softmax_last": (softmax_last_float32_cpu, softmax_last),' in p.text()
    assert up_to_date(p.model) and p.compile("--check") == 0


def test_the_decorator_overrides_the_project(project) -> None:
    p = project(MODEL.replace("@script\ndef softmax_last", '@script(dtypes=("float64",))\ndef softmax_last'),
                pyproject='[tool.torchscribe]\ndtypes = ["bfloat16"]\n')
    assert p.compile() == 0
    text = p.text()
    assert '"softmax_last": (softmax_last_float64_cpu, softmax_last),' in text
    assert '"pointwise": (pointwise_bfloat16_cpu, pointwise),' in text


def test_the_nearest_pyproject_with_the_table_decides(tmp_path: Path, project) -> None:
    """As ruff and mypy find theirs: a pyproject.toml without [tool.torchscribe] is passed over."""
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    p = project(pyproject='[tool.torchscribe]\ndevices = ["cuda"]\n')
    model = inner / p.model.name
    p.model.rename(model)
    assert cli.main(["-q", str(model)]) == 0
    text = compiled_path_for(model).read_text()
    assert '"softmax_last": (softmax_last_float32_cuda, softmax_last),' in text


@pytest.mark.parametrize("table,line,message", [
    ('devices = ["cpu", "gpu"]\n', 4, "[tool.torchscribe] devices names 'gpu', which is not one of cpu, cuda"),
    ("dtypes = 'float32'\n", 4, "[tool.torchscribe] dtypes takes a tuple or list of names, not 'float32'"),
    ('dtype = ["float32"]\n', 4, "[tool.torchscribe] has no setting `dtype`"),
    ('devices = ["cpu"\n', 4, "pyproject.toml does not parse"),
])
def test_a_bad_project_setting_is_a_diagnostic_in_pyproject(project, capsys, table: str, line: int,
                                                            message: str) -> None:
    p = project(pyproject="[tool.torchscribe]\n" + table)
    assert p.compile() == 2
    err = capsys.readouterr().err
    assert f"pyproject.toml:{line}:1: error: {message}" in err and "= help:" in err, err
    assert not p.compiled.exists()

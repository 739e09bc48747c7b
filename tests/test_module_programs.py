"""Generated nn.Module programs compiled with `script(instance, example_inputs=(x,))` into fused
kernels, run through both backends (C++; Triton, in its interpreter where there is no GPU) and
compared with eager.

tests/module_program_gen.py writes the programs: loops over ModuleList and Sequential (of Linear
layers or of a nested Block), residual adds functional and in place, activations, layer norms,
softmaxes and mean/var reductions after pointwise chains, conv + batch norm and linear layers with
activation epilogues, dropout. Each is compiled under TORCHSCRIBE=strict (a construct that falls
back is an error), must have kernels in its generated module (so the test cannot pass by running
torch's ops alone), and is called in strict mode at the example's batch size and another one;
results, the input after the call and the model's state (batch norm's running statistics in
training mode) must match eager within the tolerance of fused code (tests/closeness.py), or, for
a float32 result where eager float32 is itself far from the exact one (an ill-conditioned norm),
be as close to eager's float64 result as eager float32 is (`as_close_as_eager`). A kernel that
does not build fails the C++ run with a BuildError. Frozen compilation (`freeze=True`) is drawn
for half of the eval programs.

On failure hypothesis prints the program and its generated module (`note`). Run many more
examples with `pytest -m slow tests/test_module_programs.py`.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, event, example, given, note, settings

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import module_program_gen as mpg  # noqa: E402
from closeness import assert_close_to_eager  # noqa: E402
from ir.kernel.primitives import TOLERANCE  # noqa: E402
from source_module import imported_source  # noqa: E402

import runtime  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
BACKENDS = ["cpp", "triton"]

_counter = itertools.count()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated sources and script()'s cache, shared by the examples (kernels that recur
    are built once: the C++ builds are cached by their text)."""
    return tmp_path_factory.mktemp("module_programs")


def as_close_as_eager(got: Any, expected: Any, reference: Any, where: str) -> None:
    """Compiled float32 as close to the float64 result (`reference`, eager in float64) as eager
    float32 is, where the two float32 results differ by more than TOLERANCE: a norm of nearly
    constant rows (an instance norm of 1x2 images, rows squared and normalised again) scales
    the rounding of its mean by up to 1/sqrt(eps), and then eager's own result is that far off.
    A wrong result is much farther from the exact one than eager's rounding."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), where
        for k, (g, e, r) in enumerate(zip(got, expected, reference)):
            as_close_as_eager(g, e, r, f"{where}[{k}]")
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype, where
    atol, _ = TOLERANCE["float32"]
    finite = reference.isfinite()
    assert torch.equal(finite, got.isfinite()), f"{where}: inf or NaN where the float64 result has none"
    compiled_error = max((got.double() - reference).abs()[finite].tolist(), default=0.0)
    eager_error = max((expected.double() - reference).abs()[finite].tolist(), default=0.0)
    assert compiled_error <= 4 * eager_error + atol, (
        f"{where}: compiled is {compiled_error:.3g} from the float64 result, eager float32 {eager_error:.3g}")


def check_program(workspace: Path, backend: str, prog: mpg.ModuleProgram) -> None:
    from transpiler import script

    if backend == "triton":
        pytest.importorskip("triton")
        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("a GPU: test_triton_dispatch runs Triton on CUDA tensors")
    for feature in sorted(prog.features | ({"frozen"} if prog.freeze else set())):
        event(feature)
    note(f"--- generated program ({'train' if prog.train else 'eval'}{', frozen' if prog.freeze else ''}, {prog.dtype}, "
         f"input {prog.input_shape}, then batch {prog.other_batch}) ---\n{prog.source}")
    jit = workspace / "cache" / "jit"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHSCRIBE", "strict")
        mp.setenv("TORCHSCRIBE_CACHE_DIR", str(workspace / "cache"))
        if backend == "triton":
            mp.setenv("TORCHSCRIBE_BACKEND", "triton")
        with imported_source(workspace, f"modprog_{backend}_{next(_counter)}", prog.source) as mod:
            eager = prog.make_model(mod)
            model = copy.deepcopy(eager)
            exact = copy.deepcopy(eager).double()  # (the float64 reference of float32 programs)
            example = prog.make_input(prog.input_shape[0])
            before = set(jit.glob("*.py")) if jit.exists() else set()
            compiled = script(model, example_inputs=(example,), freeze=prog.freeze)
            (path,) = set(jit.glob("*.py")) - before
            text = path.read_text()
            note(f"--- generated module ---\n{text}")
            kernels = re.findall(r"_lib\.(\w+)_kernel\(", text)
            assert kernels, "no kernels: nothing of the program was fused"
            generated = sys.modules[f"torchscribe_jit.{path.stem}"]
            for name in kernels:  # (each runs through the backend under test; C++ alone: bound to it)
                launcher = getattr(generated, f"{name}_{backend}", None) or getattr(generated, name)
                assert getattr(generated, name) is launcher and (launcher.__name__ == name) == ("triton" not in text), name
            for batch in (prog.input_shape[0], prog.other_batch):
                x = prog.make_input(batch)
                with torch.no_grad():
                    expected = eager(x.clone())
                    with runtime.mode("strict"):
                        got = compiled(x)
                try:
                    assert_close_to_eager(got, expected, f"batch {batch}")
                except AssertionError:
                    if prog.dtype != torch.float32:
                        raise
                    with torch.no_grad():
                        reference = exact(x.double())
                    as_close_as_eager(got, expected, reference, f"batch {batch}")
                torch.testing.assert_close(x, prog.make_input(batch), rtol=0, atol=0,
                                           msg=f"batch {batch}: the compiled forward changed its input")
            state_e, state_c = eager.state_dict(), model.state_dict()
            assert list(state_c) == list(state_e)
            for key in state_e:
                assert_close_to_eager(state_c[key], state_e[key], f"state_dict[{key!r}]")


# The two programs of issue 45, always run first: the C++ of both declared a row buffer twice
# (`norm(x + gelu(h))`: erf kept by the mean's pass was stored again by the variance's).
ISSUE_45_INPLACE = mpg.HEADER + """

class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(16, 16) for _ in range(3)])
        self.norm = nn.LayerNorm(16)

    def forward(self, x: Tensor) -> Tensor:
        x = x.clone()
        for layer in self.layers:
            h = F.gelu(layer(x))
            x += h
        return self.norm(x)
"""
ISSUE_45_PRE_NORM = mpg.HEADER + """

class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x: Tensor) -> Tensor:
        return x + F.gelu(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])
        self.norm = nn.LayerNorm(16)

    def forward(self, x: Tensor) -> Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
"""


def issue_45(source: str) -> mpg.ModuleProgram:
    return mpg.ModuleProgram(source=source, input_shape=(4, 5, 16), other_batch=7, dtype=torch.float32,
                             train=False, freeze=False, seed=45, features={"issue_45"})


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=16, **SETTINGS)
@given(prog=mpg.module_programs())
@example(prog=issue_45(ISSUE_45_INPLACE))
@example(prog=issue_45(ISSUE_45_PRE_NORM))
def test_generated_module_programs(workspace: Path, backend: str, prog: mpg.ModuleProgram) -> None:
    check_program(workspace, backend, prog)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=300, **SETTINGS)
@given(prog=mpg.module_programs(max_statements=6))
def test_generated_module_programs_slow(workspace: Path, backend: str, prog: mpg.ModuleProgram) -> None:
    check_program(workspace, backend, prog)


CONSTANT_ROWS = mpg.HEADER + """

class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(3, elementwise_affine=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(torch.relu(x) - x.amax(-1, keepdim=True) * 0.5)
"""


def test_layer_norm_of_constant_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the slow run of test_generated_module_programs (a log_softmax, then relu(x) -
    x.amax(-1) / 2, under a layer norm): rows of all-negative x are constant there. The fused
    mean, `sum / n`, could be an ulp off their value, which 1/sqrt(eps) scaled to ~2e-5 where
    eager's result is 0; it is corrected by the mean of what is left (decompose's layer_norm)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "constant_rows", CONSTANT_ROWS) as mod:
        model = mod.Model().eval()
        x = -torch.rand(4096, 3, generator=torch.Generator().manual_seed(0)) * 3 - 0.1
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad(), runtime.mode("strict"):
            assert_close_to_eager(compiled(x), model(x))

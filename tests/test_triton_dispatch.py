"""Compiled modules with Triton kernels, through the whole pipeline: which launcher each kernel
runs (C++ for CPU tensors, Triton for CUDA tensors, or the backend TORCHSCRIBE_BACKEND names),
the Triton path against eager (pointwise, reductions in one block and looped, kernels that
write over a dying temporary, kernels in a loop of a module, and the generated programs of
tests/program_gen.py), a module on CUDA tensors (no C++ in it), a module imported where Triton
is not installed, and the errors a setting that cannot work gives.

Without a GPU (CI), TORCHSCRIBE_BACKEND=triton runs the Triton launchers on CPU tensors in
Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before Triton is imported);
with one, the functions are compiled for CUDA tensors, whose kernels take the Triton path
anyway."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest
import torch
from hypothesis import given, settings

import runtime
from closeness import assert_close_to_eager
from source_module import imported_source
from runtime.errors import TorchscribeError

from triton_setup import DEVICE, INTERPRETED  # noqa: E402  (sets TRITON_INTERPRET first)
REPO = Path(__file__).resolve().parent.parent
# (the interpreter computes with numpy, which warns of the infinities and NaNs the tests ask for)
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

import program_gen as pg  # noqa: E402
import test_fuse  # noqa: E402  (its SOURCE: the pointwise functions)
import test_programs  # noqa: E402
from test_programs import SETTINGS, jit_cache, program_dir  # noqa: E402,F401 (fixtures)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, device=DEVICE)


@contextlib.contextmanager
def triton_backend() -> Iterator[None]:
    """Kernels take the Triton path: forced on CPU tensors, CUDA's own otherwise."""
    old = os.environ.get("TORCHSCRIBE_BACKEND")
    if DEVICE == "cpu":
        os.environ["TORCHSCRIBE_BACKEND"] = "triton"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TORCHSCRIBE_BACKEND", None)
        else:
            os.environ["TORCHSCRIBE_BACKEND"] = old


# test_fuse's functions (chain, compare, ints), and more for the kernel kinds Triton has
SOURCE = test_fuse.SOURCE + '''
from torch import nn
import torch.nn.functional as F


def softmax(x: Tensor) -> Tensor:
    return torch.softmax(x * 2.0, dim=-1)


def layer_norm_gelu(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return F.gelu(F.layer_norm(x, (x.shape[-1],), w, b))


def epilogue(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    return torch.tanh(x @ w + b) * 2.0


def attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    s = q @ k.transpose(-2, -1)
    p = torch.softmax(s * 0.125, dim=-1)
    return p @ v, p


def kept(x: Tensor, w: Tensor) -> Tensor:
    h = torch.tanh(x * 2.0 + 1.0)
    p = torch.softmax(x * 0.5, dim=-1)
    return h @ w + p @ w


class Loop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: Tensor, n: int) -> Tensor:
        for i in range(n):
            x = x + torch.tanh(self.fc(x)) * 0.5
        return torch.softmax(x, dim=-1) * x.sigmoid()
'''


@pytest.fixture(scope="module")
def fns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("dispatch_models")
    with imported_source(root, "dispatch_models", SOURCE) as module:
        yield module


def compile_now(obj: Any, example: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ModuleType]:
    """script(obj, example_inputs=example), and the compiled module it loaded (which chose its
    launchers when it was imported: now)."""
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    out = script(obj, example_inputs=example)
    stem = getattr(obj, "__name__", type(obj).__name__)
    [path] = (tmp_path / "jit").glob(f"{stem}_*.py")
    module = sys.modules[f"torchscribe_jit.{path.stem}"]
    assert "_kernel(" in path.read_text(), "nothing was fused"
    return out, module


def launchers(module: ModuleType) -> dict[str, str]:
    """Each kernel's name and the launcher it is bound to (a module for CPU tensors alone binds
    the name to its C++ launcher, of that name)."""
    lib = getattr(module, "_lib", None)
    kernels = {n.removesuffix("_kernel") for n in vars(lib) if n.endswith("_kernel")} if lib is not None else set()
    kernels |= {k.removesuffix("_triton") for k in vars(module) if k.endswith("_triton")}
    return {k: getattr(module, k).__name__ for k in sorted(kernels)}


def through_triton(fn: Any, example: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """fn compiled for `example`'s device, every kernel bound to its Triton launcher; calls run
    in strict mode, so a failed entry check is an error, not eager code (and without autograd,
    which would send a module whose parameters require grad to eager code)."""
    with triton_backend():
        compiled, module = compile_now(fn, example, tmp_path, monkeypatch)
    bound = launchers(module)
    assert bound and all(v == f"{k}_triton" for k, v in bound.items()), bound

    def call(*args: Any) -> Any:
        with runtime.mode("strict"), torch.no_grad():
            return compiled(*args)

    return call


# -- the Triton path against eager ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pointwise_chain(fns, dtype, tmp_path, monkeypatch) -> None:
    f = through_triton(fns.chain, (randn(5, 37, dtype=dtype), randn(37, dtype=dtype)), tmp_path, monkeypatch)
    y = randn(37, dtype=dtype)
    for n in (1, 64):
        x = randn(n, 37, dtype=dtype)
        assert_close_to_eager(f(x, y), fns.chain(x, y), f"batch {n}")
    x = randn(37, 300, dtype=dtype).t()[1:]  # strided, with a storage offset
    assert_close_to_eager(f(x, y), fns.chain(x, y), "transposed")
    special = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0, -0.0] * 7 + [1.0, -1.0]],
                           dtype=dtype, device=DEVICE)
    assert_close_to_eager(f(special, y), fns.chain(special, y), "NaN and inf")


def test_two_outputs_casts_and_integers(fns, tmp_path, monkeypatch) -> None:
    f = through_triton(fns.compare, (randn(4, 9), randn(4, 9)), tmp_path / "compare", monkeypatch)
    x, y = randn(7, 9), randn(7, 9)
    assert_close_to_eager(f(x, y), fns.compare(x, y))
    ints = [torch.randint(-50, 50, shape, dtype=torch.int32, device=DEVICE) for shape in ((6, 11), (11,))]
    g = through_triton(fns.ints, tuple(ints), tmp_path / "ints", monkeypatch)
    x = torch.randint(-50, 50, (3, 11), dtype=torch.int32, device=DEVICE)
    assert torch.equal(g(x, ints[1]), fns.ints(x, ints[1]))


@pytest.mark.parametrize("width", [40, 5000])  # the row in one block; looped over (> TS_ROW_BLOCK_MAX)
def test_reductions(fns, width, tmp_path, monkeypatch) -> None:
    f = through_triton(fns.softmax, (randn(3, width),), tmp_path / "softmax", monkeypatch)
    x = randn(4, width)
    assert_close_to_eager(f(x), fns.softmax(x))
    w, b = randn(width), randn(width)
    g = through_triton(fns.layer_norm_gelu, (randn(3, width), w, b), tmp_path / "norm", monkeypatch)
    assert_close_to_eager(g(x, w, b), fns.layer_norm_gelu(x, w, b))


def test_kernels_that_write_over_a_dying_temporary(fns, tmp_path, monkeypatch) -> None:
    """The C++ launchers of these kernels write over the matmul's result (`reuse`); the Triton
    ones write fresh outputs: the same values."""
    x, w, b = randn(4, 24), randn(24, 40), randn(40)
    f = through_triton(fns.epilogue, (x, w, b), tmp_path / "epilogue", monkeypatch)
    assert "in0.contiguous()" in next((tmp_path / "epilogue" / "jit").glob("*.py")).read_text()
    x = randn(7, 24)
    assert_close_to_eager(f(x, w, b), fns.epilogue(x, w, b))
    q, k, v = randn(2, 5, 16), randn(2, 7, 16), randn(2, 7, 16)
    g = through_triton(fns.attention, (q, k, v), tmp_path / "attention", monkeypatch)
    q, k, v = randn(3, 5, 16), randn(3, 7, 16), randn(3, 7, 16)
    assert_close_to_eager(g(q, k, v), fns.attention(q, k, v))


def test_a_kernel_writing_into_a_kept_buffer(fns, tmp_path, monkeypatch) -> None:
    """On the CPU, h and p (1 MB an image each, dead after their products; p of a row-reduction
    kernel) go into buffers the function keeps between calls (ir/passes/plan.py): the Triton
    launchers write into them as into new outputs."""
    x, w = randn(2, 512, 512), randn(512, 8)
    f = through_triton(fns.kept, (x, w), tmp_path, monkeypatch)
    assert next(tmp_path.glob("jit/*.py")).read_text().count("buffers.get(") == (2 if DEVICE == "cpu" else 0)
    for batch in (2, 1, 2):
        x = randn(batch, 512, 512)
        assert_close_to_eager(f(x, w), fns.kept(x, w))


def test_a_module_calling_kernels_in_a_loop(fns, tmp_path, monkeypatch) -> None:
    torch.manual_seed(0)
    model = fns.Loop().to(DEVICE)
    f = through_triton(model, (randn(3, 16), 2), tmp_path, monkeypatch)
    for n in (0, 1, 3):
        x = randn(5, 16)
        assert_close_to_eager(f(x, n), model(x, n), f"{n} iterations")


# -- the generated programs through Triton ------------------------------------------------------
needs_interpreter = pytest.mark.skipif(not INTERPRETED, reason="the generated programs make CPU tensors")
FEW = settings(max_examples=8, **SETTINGS)  # (the interpreter is slow)


@needs_interpreter
@FEW
@given(prog=pg.programs(decorate=False, mutate_inputs=True))
def test_generated_functions(program_dir, jit_cache, prog) -> None:
    with triton_backend():
        test_programs.test_generated_functions_jit.hypothesis.inner_test(program_dir, jit_cache, prog)


@needs_interpreter
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@FEW
@given(prog=pg.module_programs())
def test_generated_modules(program_dir, jit_cache, prog) -> None:
    with triton_backend():
        test_programs.test_generated_modules_jit.hypothesis.inner_test(program_dir, jit_cache, prog)


# -- which launcher --------------------------------------------------------------------------------
def test_cpu_kernels_run_cpp_unless_triton_is_asked_for(fns, tmp_path, monkeypatch) -> None:
    example = (torch.randn(4, 40),)
    monkeypatch.delenv("TORCHSCRIBE_BACKEND", raising=False)
    _, module = compile_now(fns.softmax, example, tmp_path, monkeypatch)
    # (`softmax`, the calls it fuses, is the compiled function's name in the module: `softmax_2`)
    assert launchers(module) == {"softmax_2": "softmax_2"}
    assert "triton" not in vars(module)  # (compiled for CPU tensors: no Triton code, no import)
    for backend, launcher in (("triton", "softmax_2_triton"), ("cpp", "softmax_2")):
        if backend == "triton" and not INTERPRETED:
            continue
        monkeypatch.setenv("TORCHSCRIBE_BACKEND", backend)
        # (triton: compiled again, with Triton code: the key holds TORCHSCRIBE_BACKEND)
        _, module = compile_now(fns.softmax, example, tmp_path / backend, monkeypatch)
        assert launchers(module) == {"softmax_2": launcher}


CUDA_CHAIN = """\
func @f(%x: f32[B, 8]@cuda, %y: f32[8]@cuda) -> f32[B, 8]@cuda {
  %0 : f32[B, 8]@cuda = torch.call(%x) {callee = "torch.exp", aten = "aten::exp"}
  %1 : f32[B, 8]@cuda = py.binary(%0, %y) {op = "*"}
  %2 : float = py.constant() {value = 0.5}
  %3 : f32[B, 8]@cuda = py.binary(%1, %2) {op = "+"}
  func.return(%3)
}
"""


def test_kernels_form_on_cuda_tensors_of_one_device() -> None:
    from test_fuse import fused

    out = fused(CUDA_CHAIN)
    assert 'kernel.pointwise(%x, %y) {name = "exp_mul_add", inputs = 2}' in out
    assert "^(%x_1: f32[]@cuda, %y_1: f32[]@cuda)" in out
    # a 0-d CPU tensor in CUDA math (eager takes it): not in a kernel, which reads one device
    mixed = CUDA_CHAIN.replace("%y: f32[8]@cuda", "%y: f32[]@cpu")
    assert "kernel." not in fused(mixed)


def cuda_module(tmp_path: Path, stem: str = "cuda_chain_compiled") -> Path:
    """A compiled module of a function on CUDA tensors (its text from the IR: no entry checks),
    written as a file one imports by name, as a checked-in module is."""
    from codegen.module import Header, emit_module
    from ir.core.parser import parse_program
    from ir.passes.dce import dce
    from ir.passes.fuse import fuse

    program = parse_program(CUDA_CHAIN)
    fuse(program)
    dce(program)
    text = emit_module(program, Header("cuda_chain.py", "sha256:0", "torchscribe cuda_chain.py", "0.1.0", "2.13"),
                       {"f": "f"}, None)
    path = tmp_path / f"{stem}.py"
    path.write_text(text)
    return path


def import_file(path: Path) -> ModuleType:
    sys.path.insert(0, str(path.parent))
    try:
        importlib.invalidate_caches()
        return importlib.import_module(path.stem)
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop(path.stem, None)


def test_a_module_on_cuda_tensors_has_no_cpp(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("TORCHSCRIBE_BACKEND", raising=False)
    path = cuda_module(tmp_path)
    text = path.read_text()
    assert "KERNELS_CPP" not in text and "_lib" not in text and "def exp_mul_add_cpp" not in text
    module = import_file(path)
    assert launchers(module) == {"exp_mul_add": "exp_mul_add_triton"}
    x, y = randn(5, 8), randn(8)
    assert_close_to_eager(module.f(x, y), torch.exp(x) * y + 0.5)  # (no entry checks: CPU tensors too)
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", "cpp")
    module = import_file(path)
    with pytest.raises(TorchscribeError, match="TORCHSCRIBE_BACKEND=cpp, but kernel exp_mul_add runs on cuda tensors"):
        module.f(x, y)


# -- without Triton, and settings that cannot work ----------------------------------------------
NO_TRITON = """
import sys
sys.modules["triton"] = None  # `import triton` raises ImportError
import torch
sys.path.insert(0, {models!r})
import dispatch_models as m
from transpiler import script

f = script(m.chain, example_inputs=(torch.randn(4, 37), torch.randn(37)))
x, y = torch.randn(3, 37), torch.randn(37)
torch.testing.assert_close(f(x, y), m.chain(x, y))
print("ok", [k for k in sys.modules if k.startswith("triton")])
"""


def run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("TORCHSCRIBE_BACKEND", "TRITON_INTERPRET")}
    environ.update(TORCHSCRIBE_CACHE_DIR=str(tmp_path), PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), env=environ)


def test_without_triton_the_cpp_kernels_run(fns, tmp_path) -> None:
    code = NO_TRITON.format(models=str(Path(fns.__file__).parent))
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok ['triton']"  # (only the None this test put there)
    # asking for Triton there says what to install
    done = run_python(code, tmp_path, TORCHSCRIBE_BACKEND="triton")
    assert done.returncode != 0
    assert ("TorchscribeError: TORCHSCRIBE_BACKEND=triton, but Triton is not installed: install it "
            "(`pip install triton`") in done.stderr


def test_a_module_on_cuda_tensors_imports_without_triton(tmp_path) -> None:
    """It imports (its entry checks send CPU tensors to eager code); a call of its kernel says
    what is missing."""
    path = cuda_module(tmp_path)
    code = textwrap.dedent(f"""
        import sys
        sys.modules["triton"] = None
        sys.path.insert(0, {str(tmp_path)!r})
        import torch
        import {path.stem} as m
        try:
            m.exp_mul_add(torch.randn(2, 8), torch.randn(8))
        except Exception as error:
            print(type(error).__name__ + ": " + str(error))
    """)
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TorchscribeError: kernel exp_mul_add runs on cuda tensors through Triton, "
                                  "which is not installed: install it (`pip install triton`)"), done.stdout


def test_bad_settings_are_errors(fns, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", "cuda")
    with pytest.raises(TorchscribeError, match="TORCHSCRIBE_BACKEND='cuda' is not a valid setting; use 'cpp'"):
        compile_now(fns.chain, (torch.randn(4, 37), torch.randn(37)), tmp_path, monkeypatch)
    # Triton on CPU tensors is its interpreter only
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(TorchscribeError, match="runs the kernels of CPU tensors only in Triton's interpreter: set "
                                               "TRITON_INTERPRET=1"):
        compile_now(fns.chain, (torch.randn(4, 37), torch.randn(37)), tmp_path, monkeypatch)


def test_profiled_launchers_name_their_kernels_in_a_profile(fns, tmp_path, monkeypatch) -> None:
    """TORCHSCRIBE_PROFILE=1: each launcher runs inside a torch.profiler range named after its
    kernel, and still computes what it did."""
    from runtime import kernels

    monkeypatch.setattr(kernels, "PROFILE", True)
    monkeypatch.setenv("TORCHSCRIBE_PROFILE", "1")  # (part of the cache key: a module of its own)
    x, y = torch.randn(5, 37), torch.randn(37)
    compiled, module = compile_now(fns.chain, (x, y), tmp_path, monkeypatch)
    names = sorted(launchers(module))
    assert names
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof, torch.no_grad():
        got = compiled(x, y)
    seen = {e.key for e in prof.key_averages()}
    assert {f"torchscribe:{n}" for n in names} <= seen, seen
    assert_close_to_eager(got, fns.chain(x, y))


def test_a_module_compiled_for_cpu_tensors_holds_no_triton(fns, tmp_path, monkeypatch) -> None:
    """Without CUDA tensors or TORCHSCRIBE_BACKEND=triton, script() writes C++ alone. Its entry
    checks pin the device, so other tensors run eagerly; with TORCHSCRIBE_BACKEND=triton (set
    after it was compiled) its kernels refuse with GuardFailure, so the call runs eagerly too."""
    import re

    from runtime.guards import GuardFailure
    from runtime.loader import load_module_from_path

    monkeypatch.delenv("TORCHSCRIBE_BACKEND", raising=False)
    x, y = torch.randn(4, 37), torch.randn(37)
    _, module = compile_now(fns.chain, (x, y), tmp_path, monkeypatch)
    path = Path(module.__file__)
    text = path.read_text()
    assert "KERNELS_CPP" in text and "triton" not in text.replace("TORCHSCRIBE_BACKEND", "")
    with pytest.raises(GuardFailure, match="expected a cpu tensor, got meta"):
        module.COMPILED["chain"](x.to("meta"), y.to("meta"))
    monkeypatch.setenv("TORCHSCRIBE_BACKEND", "triton")
    again = load_module_from_path(path, "chain_without_triton")  # (its launchers are bound now)
    names = re.findall(r"_lib\.(\w+)_kernel\(", text)
    assert names
    for name in names:
        with pytest.raises(GuardFailure, match=f"kernel {name} has no Triton version"):
            getattr(again, name)(x, y)
    with pytest.raises(GuardFailure, match="has no Triton version"):
        again.COMPILED["chain"](x, y)

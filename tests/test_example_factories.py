"""`@script(example="make_example")`: the checked-in module holds a specialisation compiled for
what the named factory returns (kernels, entry checks), tried before the generic code; a factory
that fails is a diagnostic at the line that failed; the module is stale when any file it holds
code of changes, or an installed library it holds code of changes version."""

from __future__ import annotations

import copy

import importlib
import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from runtime import dispatch, loader
from transpiler import cli
from transpiler.pipeline import dependency_hashes, installed_distribution

_names = itertools.count()

BLOCK = '''\
import torch
from torch import Tensor, nn
from transpiler import script
{imports}

@script({options})
class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x: Tensor) -> Tensor:
        return torch.nn.functional.gelu(self.norm(self.fc(x)))


def make_example():
{factory}
'''

GOOD_FACTORY = '''\
    torch.manual_seed(0)
    return Block().eval(), (torch.randn(4, 16),)'''


def write_model(root: Path, options: str = 'example="make_example"', factory: str = GOOD_FACTORY,
                imports: str = "") -> Path:
    """A model file in a package of its own under `root`, importable as `<pkg>.model`."""
    package = root / f"ts_example_pkg_{next(_names)}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    path = package / "model.py"
    path.write_text(BLOCK.format(options=options, factory=factory, imports=imports))
    return path


def load(path: Path):
    sys.path.insert(0, str(path.parent.parent))
    try:
        return importlib.import_module(f"{path.parent.name}.model")
    finally:
        sys.path.remove(str(path.parent.parent))


def compile_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main([str(path)])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_example_specialisation_runs_its_kernels_and_others_run_the_generic_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    assert '"Block.forward": (Block_forward_example, Block_forward)' in text
    assert "KERNELS_CPP" in text  # the layer norm and GELU fuse: the module carries the kernel
    module = load(path)
    dispatch.reset()
    model, (x,) = module.make_example()
    qualname = f"{module.__name__}.Block.forward"
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(x)
        with runtime.mode("strict"):
            torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
            assert runtime.generic_counts() == {}
            # another trailing size is not what the kernels were compiled for: the generic code
            wide = torch.randn(4, 3, 16)
            with runtime.mode("off"):
                wide_expected = model(wide)
            assert torch.equal(model(wide), wide_expected)
    assert runtime.generic_counts() == {qualname: 1}
    # grad enabled with parameters that require grad: kernels record no graph, the generic code does
    with runtime.mode("strict"):
        y = model(x)
    assert y.requires_grad and runtime.generic_counts() == {qualname: 2}
    dispatch.reset()


def test_a_frozen_example_computes_its_weights_at_run_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """freeze=True: weights computed from parameters are made on the first call and again when a
    parameter changes, never baked into the file."""
    conv = '''\
import torch
from torch import Tensor, nn
from transpiler import script


@script(example="make_example", freeze=True)
class ConvBN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(64)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.bn(self.conv(x)))


def make_example():
    torch.manual_seed(0)
    model = ConvBN().eval()
    model.bn.running_var.uniform_(0.5, 1.5)
    return model, (torch.randn(2, 32, 16, 16),)
'''
    path = write_model(tmp_path)
    path.write_text(conv)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    assert "_prepacked.fold_batch_norm" in text
    module = load(path)
    dispatch.reset()
    model, (x,) = module.make_example()
    with torch.no_grad():
        for step in range(2):
            with runtime.mode("off"):
                expected = model(x)
            with runtime.mode("strict"):
                torch.testing.assert_close(model(x), expected, atol=1e-4, rtol=1e-4)
            model.bn.weight.mul_(1.5)  # (the folded weight is computed again)
    assert runtime.generic_counts() == {}
    dispatch.reset()


def test_a_function_example_may_return_the_inputs_or_the_function_and_its_inputs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = '''\
import torch
from torch import Tensor
from transpiler import script


@script(example="inputs_only")
def mix(x: Tensor, y: Tensor) -> Tensor:
    return torch.sigmoid(x) * torch.tanh(y) + 1.0


@script(example="function_and_inputs")
def scale(x: Tensor) -> Tensor:
    return torch.exp(x) * 0.5


def inputs_only():
    return torch.randn(8, 32), torch.randn(8, 32)


def function_and_inputs():
    return scale, (torch.randn(8, 32),)
'''
    path = write_model(tmp_path)
    path.write_text(source)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    # (each with its code for autograd, where its pointwise chain is a kernel with a backward kernel)
    assert '"mix": (mix_inputs_only, _autograd.ForAutograd(mix_autograd), mix)' in text
    assert '"scale": (scale_function_and_inputs, _autograd.ForAutograd(scale_autograd), scale)' in text
    module = load(path)
    dispatch.reset()
    x, y = module.inputs_only()
    with runtime.mode("strict"):
        torch.testing.assert_close(module.mix(x, y), torch.sigmoid(x) * torch.tanh(y) + 1.0)
        torch.testing.assert_close(module.scale(x), torch.exp(x) * 0.5)
    assert runtime.generic_counts() == {}
    dispatch.reset()


@pytest.mark.parametrize("factory,options,line,message", [
    ("    raise ValueError('no weights here')", 'example="make_example"', 18,
     "the example factory `make_example` raised ValueError: no weights here"),
    (GOOD_FACTORY, 'example="make_sample"', 6, "the example factory `make_sample` is not a module-level function"),
    ("    return Block()", 'example="make_example"', 17, "must return (instance, inputs)"),
])
def test_a_factory_that_fails_is_a_diagnostic_at_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          factory: str, options: str, line: int, message: str) -> None:
    path = write_model(tmp_path, options=options, factory=factory)
    code, output = compile_cli(path, capsys)
    assert code == 2, output
    assert f"model.py:{line}:" in output and message in output, output
    assert "Traceback" not in output
    assert not loader.compiled_path_for(path).exists()  # nothing written


def test_a_file_whose_import_fails_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path, imports="import a_module_that_is_not_installed")
    code, output = compile_cli(path, capsys)
    assert code == 2 and "model.py:4:" in output and "ModuleNotFoundError" in output, output
    assert not loader.compiled_path_for(path).exists()


def test_another_file_of_the_project_is_a_source_and_its_edit_makes_the_module_stale(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path)
    (path.parent / "layers.py").write_text(textwrap.dedent('''\
        import torch
        from torch import Tensor, nn


        class Scale(nn.Module):
            def forward(self, x: Tensor) -> Tensor:
                return x * 3.0
    '''))
    path.write_text(path.read_text().replace("{imports}", "").replace(
        "from transpiler import script\n", "from transpiler import script\nfrom .layers import Scale\n").replace(
        
        "        self.norm = nn.LayerNorm(32)\n", "        self.norm = nn.LayerNorm(32)\n        self.scale = Scale()\n").replace(
        "gelu(self.norm(self.fc(x)))", "gelu(self.scale(self.norm(self.fc(x))))"))
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    # (ahead of time, without the instance, `self.scale` has no type: the example alone compiles it)
    assert "note: `Block` has no generic code" in output
    header = loader.read_header(loader.compiled_path_for(path))
    assert list(header["SOURCES"]) == ["layers.py"]
    assert cli.main(["--check", str(path)]) == 0
    (path.parent / "layers.py").write_text((path.parent / "layers.py").read_text().replace("3.0", "4.0"))
    capsys.readouterr()
    assert cli.main(["--check", str(path)]) == 1
    assert "layers.py, whose @script code it holds, changed" in "".join(capsys.readouterr())


def test_a_library_the_module_holds_code_of_is_recorded_by_version(tmp_path: Path) -> None:
    """A file of an installed distribution is recorded as (name, version), never by its path,
    which differs between machines; another installed version makes the module stale."""
    torch_file = Path(torch.nn.modules.linear.__file__)
    assert installed_distribution(torch_file) == ("torch", importlib.metadata.version("torch"))
    sources, libraries = dependency_hashes(tmp_path / "model.py", [torch_file])
    assert sources == () and libraries == (("torch", importlib.metadata.version("torch")),)
    assert loader.dependency_problem({"LIBRARIES": dict(libraries)}, tmp_path) is None
    problem = loader.dependency_problem({"LIBRARIES": {"torch": "0.0.1"}}, tmp_path)
    assert problem is not None and "torch 0.0.1" in problem


def test_without_generic_code_the_code_for_autograd_stands_in(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """An entry compiled from its example alone (its generic compile failed) gets code for
    autograd compiled from the example, tried last (`(specialised, autograd)`): a call autograd
    records runs it, in strict mode too, with eager's gradients, never the specialisation's
    kernels (its own: the scale and the GELU, one group with a backward kernel, whose torch ops'
    function is renamed with the code's label); a call every compilation refuses runs eagerly
    (strict mode: an error)."""
    path = write_model(tmp_path)
    (path.parent / "layers.py").write_text("from torch import Tensor, nn\n\n\nclass Scale(nn.Module):\n"
                                           "    def forward(self, x: Tensor) -> Tensor:\n        return x * 3.0\n")
    path.write_text(path.read_text().replace("from transpiler import script\n",
                                             "from transpiler import script\nfrom .layers import Scale\n")
                    .replace("        self.norm = nn.LayerNorm(32)\n",
                             "        self.norm = nn.LayerNorm(32)\n        self.scale = Scale()\n")
                    .replace("gelu(self.norm(self.fc(x)))", "gelu(self.scale(self.norm(self.fc(x))))"))
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    assert '"Block.forward": (Block_forward_example, Block_forward_autograd)' in text
    assert "def Block_forward_autograd(" in text
    assert "Block_forward_gelu_autograd, grads=(0,)" in text and "def Block_forward_gelu_autograd(" in text
    module = load(path)
    dispatch.reset()
    model, (x,) = module.make_example()
    twin = copy.deepcopy(model)
    with runtime.mode("strict"):
        with torch.no_grad():
            model(x)
        y = model(x)
    assert y.requires_grad and runtime.fallback_counts() == {}
    y.sum().backward()
    with runtime.mode("off"):
        twin(x).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    model.double()
    with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="float"):
        model(x.double())
    with runtime.mode("on"), pytest.warns(runtime.TorchscribeWarning, match="running eagerly"):
        model(x.double())
    dispatch.reset()


SERVING = '''\
import torch
from torch import nn
from transpiler import script_model
from .{other} import Classifier


@script_model
def encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True, dropout=0.0).eval()
    return layer, (torch.randn(2, 10, 64),)


@script_model(freeze=True)
def classifier():
    torch.manual_seed(0)
    return Classifier().eval(), (torch.randn(4, 32),)
'''

CLASSIFIER = '''\
import torch
from torch import Tensor, nn


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64))
        self.head = nn.Linear(64, 10)

    def forward(self, x: Tensor) -> Tensor:
        return torch.softmax(self.head(self.body(x)), dim=-1)
'''

LOAD_AND_RUN = '''\
import copy, sys, warnings, torch
sys.path.insert(0, {root!r})
import runtime
from {package} import model as serving
for factory in (serving.encoder, serving.classifier):
    model, inputs = factory()
    fast = factory.load(model)
    with torch.no_grad():
        expected = model(*inputs)
        with runtime.mode("strict"):
            got = fast(*inputs)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
assert runtime.generic_counts() == {{}} and runtime.fallback_counts() == {{}}
for factory in (serving.encoder, serving.classifier):  # training: the code for autograd, never eager
    model, inputs = factory()
    twin = copy.deepcopy(model)
    with runtime.mode("strict"):
        factory.load(model)(*inputs).pow(2).sum().backward()
    twin(*inputs).pow(2).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5)
assert runtime.fallback_counts() == {{}}
assert not any(m.startswith(("transpiler.compile", "transpiler.pipeline", "libcst", "ir.")) for m in sys.modules), "the compiler was imported"
other = torch.nn.Linear(64, 64)
with runtime.mode("strict"):
    try:
        serving.encoder.load(other)(torch.randn(2, 10, 64))
    except runtime.TorchscribeError as e:
        assert "the compiled code is for torch.nn.modules.transformer.TransformerEncoderLayer" in str(e), e
    else:
        raise AssertionError("another class ran the encoder's code")
print("ok")
'''


def test_models_you_did_not_write_load_from_the_checked_in_module(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`script_model` factories: torch's own TransformerEncoderLayer and a class of another file
    (not decorated) are compiled into the serving file's module; `factory.load(model)` runs it
    without importing the compiler, only for the class it was compiled for; an edit of the
    other file makes the module stale."""
    path = write_model(tmp_path)
    (path.parent / "classifier.py").write_text(CLASSIFIER)
    path.write_text(SERVING.format(other="classifier"))
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    assert '"encoder": "torch.nn.modules.transformer.TransformerEncoderLayer"' in text
    assert ('"classifier": (\n        Classifier_forward_classifier,\n        Classifier_forward_classifier_autograd,\n'
            '    ),') in text
    assert list(loader.read_header(loader.compiled_path_for(path))["SOURCES"]) == ["classifier.py"]
    script = LOAD_AND_RUN.format(root=str(tmp_path), package=path.parent.name)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
    (path.parent / "classifier.py").write_text(CLASSIFIER.replace("dim=-1", "dim=1"))
    assert cli.main(["--check", str(path)]) == 1
    assert "classifier.py, whose @script code it holds, changed" in "".join(capsys.readouterr())


def test_a_model_factory_of_a_torch_container_is_a_diagnostic(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_model(tmp_path)
    path.write_text("import torch\nfrom torch import nn\nfrom transpiler import script_model\n\n\n@script_model\n"
                    "def stack():\n    return nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(2, 4),)\n")
    code, output = compile_cli(path, capsys)
    assert code == 2 and "model.py:7:5: error: the model factory `stack` returned a Sequential" in output, output


def test_several_examples_are_tried_in_the_order_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`example=("make_example", "make_example_train")`: an eval and a train specialisation (batch
    norm's running statistics updated as eager updates them), both before the generic code."""
    source = '''\
import torch
from torch import Tensor, nn
from transpiler import script


@script(example=("make_example", "make_example_train"))
class Norm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(16)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.bn(x) * 2.0)


def make_example():
    torch.manual_seed(0)
    return Norm().eval(), (torch.randn(8, 16),)


def make_example_train():
    torch.manual_seed(0)
    return Norm().train(), (torch.randn(8, 16),)
'''
    path = write_model(tmp_path)
    path.write_text(source)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    text = loader.compiled_path_for(path).read_text()
    # (the code for autograd compiled from the first example after them, then from the train()
    # example, whose batch norm and ReLU are one group: the calls autograd records)
    assert "(Norm_forward_example,Norm_forward_example_train,_autograd.ForAutograd(Norm_forward_autograd)," \
           "_autograd.ForAutograd(Norm_forward_example_train_autograd),Norm_forward)" \
           in re.sub(r"\s+|,(?=\s*\))", "", text)
    assert "_autograd.BatchNorm(" in text
    # in training, what BatchNorm's forward does, not a call of the module: the count, then
    # F.batch_norm with the batch's statistics (which updates the running ones)
    train = text.split("def Norm_forward_example_train(", 1)[1].split("\ndef ", 1)[0]
    code = "\n".join(line for line in train.splitlines() if not line.strip().startswith("#"))
    assert '"num_batches_tracked").add_(1)' in code and "F.batch_norm(" in code and " bn(" not in code, train
    module = load(path)
    dispatch.reset()
    for factory in (module.make_example, module.make_example_train):
        model, (x,) = factory()
        reference, _ = factory()
        with torch.no_grad():
            with runtime.mode("off"):
                expected = reference(x)
            with runtime.mode("strict"):
                torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
        for name, buffer in reference.named_buffers():
            torch.testing.assert_close(dict(model.named_buffers())[name], buffer, atol=1e-6, rtol=1e-6)
    assert runtime.generic_counts() == {}
    dispatch.reset()


def test_a_specialisation_without_kernels_is_left_out_with_a_note(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An example whose code has nothing to fuse (a library call alone) would only add entry
    checks to the generic code: the module holds the generic code alone, and a note says so."""
    path = write_model(tmp_path)
    path.write_text("import torch\nfrom torch import Tensor\nfrom transpiler import script\n\n\n"
                    "@script(example=\"make_example\")\ndef pool(x: Tensor) -> Tensor:\n"
                    "    return torch.nn.functional.max_pool1d(x, 2)\n\n\n"
                    "def make_example():\n    return (torch.randn(2, 3, 16),)\n")
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    assert "note: the `example` specialisation of pool has no kernel" in output
    assert '"pool": pool,' in loader.compiled_path_for(path).read_text()


def test_generic_code_calls_another_script_class_through_its_module(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ahead-of-time generic code holds no copy of another @script class's forward: it calls the
    submodule, so the submodule's hooks run as in eager, and an edit of the inner class changes
    only the inner class's generic function."""
    source = '''\
import torch
from torch import Tensor, nn
from transpiler import script


@script
class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.fc(x)) * 2.0


@script
class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()

    def forward(self, x: Tensor) -> Tensor:
        return self.inner(x) + x
'''
    path = write_model(tmp_path)
    path.write_text(source)
    assert compile_cli(path, capsys)[0] == 0
    before = loader.compiled_path_for(path).read_text()
    outer = before[before.index("def Outer_forward"):]
    assert "relu" not in outer and '_guards.attr(self, "inner")(x)' in outer
    module = load(path)
    dispatch.reset()
    model, x = module.Outer(), torch.randn(3, 8)
    seen = []
    model.inner.register_forward_hook(lambda m, args, out: seen.append(out.shape))
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(x)
        with runtime.mode("strict"):
            assert torch.equal(model(x), expected)
    assert seen == [torch.Size([3, 8])] * 2  # the hook ran in eager and in compiled code
    path.write_text(source.replace("* 2.0", "* 3.0"))
    assert compile_cli(path, capsys)[0] == 0
    after = loader.compiled_path_for(path).read_text()
    assert after[after.index("def Outer_forward"):] == outer
    dispatch.reset()


def test_code_for_autograd_runs_where_its_example_checks_accept_the_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An eval() example with batch norm and dropout: its code for autograd (a pointwise group
    with a backward kernel) runs the calls autograd records in eval() mode, and the generic code
    those in train() mode, which its checks (`training`) refuse; both give eager's gradients and
    batch norm statistics, in strict mode."""
    from runtime.autograd_kernels import fused_from

    source = '''\
import torch
from torch import Tensor, nn
from transpiler import script


@script(example="make_example")
class Norm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.25)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(torch.relu(self.bn(x) * 2.0 + 1.0))


def make_example():
    torch.manual_seed(0)
    return Norm().eval(), (torch.randn(8, 16),)
'''
    path = write_model(tmp_path)
    path.write_text(source)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    module = load(path)
    key = f"{module.__name__}.Norm.forward"
    for train, runs_generic in ((False, 0), (True, 1)):
        dispatch.reset()
        model, (x,) = module.make_example()
        model.train(train)
        eager = copy.deepcopy(model)
        results = []
        for m, mode in ((eager, "off"), (model, "strict")):
            leaf = x.clone().requires_grad_()
            torch.manual_seed(1)
            with runtime.mode(mode), fused_from(0):
                out = m(leaf)
            (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
            results.append((out, leaf.grad, m.bn.weight.grad, m.bn.running_mean.clone()))
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got.detach(), want.detach(), rtol=1e-5, atol=1e-6)
        assert runtime.generic_counts().get(key, 0) == runs_generic, train
        assert ("_FusedBackward" in type(results[1][0].grad_fn).__name__) == (not train)


LOGGED = '''\
import torch
from torch import Tensor, nn

SEEN = []


def log_use(obj) -> None:
    SEEN.append(obj)


class Logged(nn.Module):
    """Logs its use where TorchScript would not (torchvision's `_log_api_usage_once(fn)`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x: Tensor) -> Tensor:
        if not torch.jit.is_scripting():
            log_use(torch.tanh)
        return torch.tanh(self.lin(x)) * 2.0
'''

LOGGED_SERVING = '''\
import torch
from transpiler import script_model
from .logged import Logged


@script_model
def logged():
    torch.manual_seed(0)
    return Logged().eval(), (torch.randn(4, 16),)
'''


def test_eager_only_work_that_does_not_compile_is_skipped_in_code_for_autograd(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Code for autograd does eager's eager-only work, which the scripted code skips; where that
    work does not compile (a function passed as a value), the code for autograd skips it too, as
    TorchScript does, and a note says so: calls autograd records run compiled code, with eager's
    values and gradients, without the logging call."""
    path = write_model(tmp_path)
    (path.parent / "logged.py").write_text(LOGGED)
    path.write_text(LOGGED_SERVING)
    code, output = compile_cli(path, capsys)
    assert code == 0, output
    assert "note: `logged`'s code for calls autograd records skips the eager-only work" in output, output
    assert "logged.py:" in output
    module = load(path)
    model, inputs = module.logged()
    fast = module.logged.load(model)
    with torch.no_grad():
        expected = model(*inputs)
        with runtime.mode("strict"):
            torch.testing.assert_close(fast(*inputs), expected)
    logged = sys.modules[type(model).__module__].SEEN
    before = len(logged)
    with runtime.mode("strict"):
        out = fast(*inputs)  # (grad on, a parameter requires grad: its code for autograd)
    assert len(logged) == before
    torch.testing.assert_close(out, expected)
    out.sum().backward()  # (into the model's parameters, which the compiled code reads)
    compiled_grad = model.lin.weight.grad.clone()
    model.zero_grad()
    model(*inputs).sum().backward()
    torch.testing.assert_close(compiled_grad, model.lin.weight.grad)
    dispatch.reset()

"""`script(instance_or_function, example_inputs=...)`: compile now, share the instance's state."""
from __future__ import annotations

import re

import torch
from torch import nn

import runtime
from examples import attention, conv_bn_relu, lstm_cell, while_loop
from closeness import assert_close_to_eager
from transpiler import script


def test_instance_shares_parameters_and_matches_eager(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = attention.make_example()
    scripted = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("off"):
        expected = model(*inputs)
    with torch.no_grad():
        got = scripted(*inputs)
    assert_close_to_eager(got, expected)
    # Same parameter objects, same state_dict keys; an update is seen by both.
    assert scripted.state_dict().keys() == model.state_dict().keys()
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), scripted.named_parameters()):
        assert n1 == n2 and p1 is p2
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
        with runtime.mode("off"):
            expected = model(*inputs)
        assert_close_to_eager(scripted(*inputs), expected)
    assert list(tmp_path.rglob("*.py")), "the generated module goes to the cache directory"


def test_instance_buffers_update_like_eager(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    factory = conv_bn_relu.make_example_train
    model, inputs = factory()
    model.train()
    eager_model, _ = factory()
    eager_model.train()
    scripted = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("off"):
        expected = eager_model(*inputs)
    with torch.no_grad():
        got = scripted(*inputs)
    assert_close_to_eager(got, expected)
    # The running statistics come from the batch statistics the fused kernels sum (another order
    # than eager's): equal to rounding, like the outputs; the batch count exactly.
    for (k, a), (_, b) in zip(eager_model.state_dict().items(), model.state_dict().items()):
        if a.is_floating_point():
            assert_close_to_eager(b, a)
        else:
            assert torch.equal(a, b), k
    assert int(model.bn.num_batches_tracked) == 1


def test_function_and_loops(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    fn, inputs = while_loop.make_example()
    compiled = script(fn, example_inputs=inputs)
    with runtime.mode("off"):
        expected = fn(*inputs)
    assert_close_to_eager(compiled(*inputs), expected)

    model, inputs = lstm_cell.make_example()
    scripted = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("off"):
        expected = model(*inputs)
    with torch.no_grad():
        assert_close_to_eager(scripted(*inputs), expected)


def test_undecorated_module(tmp_path, monkeypatch) -> None:
    """Third-party code: a class nobody decorated compiles from its source."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model = Plain().eval()
    x = torch.randn(3, 4)
    scripted = script(model, example_inputs=(x,))
    assert_close_to_eager(scripted(x), model(x))


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.scale = 0.5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc(x)) * self.scale


def test_reset_keeps_what_script_compiled(tmp_path, monkeypatch) -> None:
    """runtime.reset() forgets looked-up compiled modules; a script(instance) result has nothing
    to look up and keeps its code (it used to look up the decorator's module and fail)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = attention.make_example()
    scripted = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("off"):
        expected = model(*inputs)
    runtime.reset()
    with torch.no_grad(), runtime.mode("strict"):  # (strict: running eagerly would raise)
        assert_close_to_eager(scripted(*inputs), expected)


RESIDUAL = """
import os, sys
import torch
from examples import residual_block
from transpiler import script

model, inputs = residual_block.make_example()
with torch.no_grad():
    script(model, example_inputs=inputs)
[path] = [p for p in os.listdir(os.path.join(os.environ["TORCHSCRIBE_CACHE_DIR"], "jit")) if p.endswith(".py")]
sys.stdout.write(open(os.path.join(os.environ["TORCHSCRIBE_CACHE_DIR"], "jit", path)).read())
"""


def test_kernels_are_named_from_the_source_and_the_text_is_deterministic(tmp_path) -> None:
    """examples/residual_block.py's kernels are named for the modules whose ops they fuse (the
    second block's `bn1_relu` is the first's, written once); the module holds only its own kernels (the support code
    is runtime/include's header; no Triton code for CPU tensors); the same text under two hash
    seeds (nothing iterates a set on the way to it)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    texts = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, TORCHSCRIBE_CACHE_DIR=str(tmp_path / seed),
                   PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        env.pop("TORCHSCRIBE_BACKEND", None)
        done = subprocess.run([sys.executable, "-c", RESIDUAL], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        texts.append(done.stdout)
    assert texts[0] == texts[1]
    text = texts[0]
    assert re.findall(r"_lib\.(\w+)_kernel\(", text) == ["bn1_relu", "bn2_downsample_relu", "bn2_relu"]
    assert 'KERNELS_CPP = r"""\n#include <torchscribe/kernels.h>\n' in text and "ts_rows(const" not in text
    assert "triton" not in text.replace("TORCHSCRIBE_BACKEND", "") and "_lib = _kernels.Library(KERNELS_CPP)\n" in text
    assert "    // out = self.bn1(out)\n" in text and "      // out = self.relu(out)\n" in text
    cpp = text[text.index('KERNELS_CPP = r"""'):text.index('"""\n_lib')]
    assert max(len(line) for line in cpp.splitlines() if not line.lstrip().startswith("//")) <= 100


def test_identical_kernels_are_written_once(tmp_path, monkeypatch) -> None:
    """Blocks of one class at one size fuse into kernels of the same text: the module writes one,
    and every block calls it."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    from examples import module_list

    model, inputs = module_list.make_example()
    scripted = script(model, example_inputs=inputs)
    with torch.no_grad(), runtime.mode("off"):
        expected = model(*inputs)
    with torch.no_grad():
        assert_close_to_eager(scripted(*inputs), expected)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    launchers = re.findall(r"_lib\.(\w+)_kernel\(", text)
    assert len(launchers) == len(set(launchers)) == 3, launchers  # a first norm, each block's, the last block's
    calls = [line for line in text.splitlines() if "fc_silu_norm(" in line]
    assert len(calls) >= 2, calls


def test_a_batch_norm_without_running_statistics_normalises_by_the_batch_in_kernels(tmp_path, monkeypatch) -> None:
    """BatchNorm(track_running_stats=False) holds no running statistics, so in eval too its
    forward uses the batch's: the specialisation checks that both are None (the layer condition
    "no_running_stats", where it refused every call before) and computes the batch's statistics, in kernels for BatchNorm2d (for
    BatchNorm1d over (N, C) by F.batch_norm, which raises for a batch of one as eager does), in
    strict mode, as eager does."""
    torch.manual_seed(0)
    cases = [(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8, track_running_stats=False), nn.ReLU()),
              torch.randn(4, 3, 10, 10)),
             (nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5, affine=False, track_running_stats=False)),
              torch.randn(7, 6))]
    for n, (model, x) in enumerate(cases):
        monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / str(n)))
        model.eval()
        scripted = script(model, example_inputs=(x,))
        [path] = (tmp_path / str(n)).rglob("*.py")
        text = path.read_text()
        assert '"no_running_stats"' in text and '"running_stats"' not in text
        assert ("batch_norm(" in text.split("def ", 1)[1]) == (n == 1)
        with torch.no_grad(), runtime.mode("strict"):
            for batch in (x, torch.randn(3, *x.shape[1:])):
                torch.testing.assert_close(scripted(batch), model(batch), rtol=1e-5, atol=1e-5)

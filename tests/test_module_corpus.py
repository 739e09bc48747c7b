"""`script(instance, example_inputs=...)` on small modules written the way GitHub model code is
(tests/module_corpus/): permissive mode compiles every one and matches eager; strict mode
compiles at least as many as TorchScript scripts. Run under TORCHSCRIBE=strict, so that a
fallback to eager is an error, not a silent success.

Each case is checked for its results, the buffers it updates and the inputs it writes, on a call
under torch.no_grad() and another under torch.inference_mode(), against a second instance made
from the same seed and run eagerly. The rates (compiled and matching eager / cases) are printed
by test_rates; TorchScript's, for comparison, only with `make test-slow` (marked slow)."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import pytest
import torch

import runtime
from closeness import assert_close_to_eager
from module_corpus import CASES
from transpiler import script

# (the audio cases use torch.nn.utils.weight_norm, which registers a forward pre-hook, on purpose)
pytestmark = pytest.mark.filterwarnings("ignore:.*weight_norm.*:FutureWarning")

NAMES = [name for name, _ in CASES]
FACTORIES = dict(CASES)

# The cases of the features these tests were written for (each failed, or gave another result
# than eager, before): they run in `make test`; the whole corpus with `make test-slow`.
FEATURES = {
    "vision.Sequential", "vision.ConvBNAct", "misc.SequentialWithExtras",  # a root nn.Sequential (subclass)
    "attention.GeluFeedForward", "misc.ResidualFeedForward",  # forward from a base class, methods along the MRO
    "misc.StarImported", "vision.EqualConv2d",  # module globals: a star import, a numpy float attribute
    "misc.ScaledLinear", "misc.CachedProjection", "misc.ClassCounter",  # super() and __class__ in kept Python
    "vision.HSwish", "misc.Mish", "misc.Concat",  # a staticmethod forward, forward(*args)
    "audio.TemporalBlock", "audio.ResBlock1", "misc.Hooked",  # weight_norm, spectral_norm: hooked submodules
    "misc.MaybeTuple", "attention.EncoderLayer",  # a tensor or a tuple returned
}
PARAMS = [pytest.param(name, marks=() if name in FEATURES else pytest.mark.slow) for name in NAMES]

# Cases strict mode compiles (the rest use what only permissive mode keeps as Python: dicts,
# `super()` in forward, numpy, `*args`, a tensor-or-tuple result, logging; or a staticmethod
# forward).
STRICT_COMPILES = {
    "vision.Sequential", "vision.ConvBNAct", "vision.BasicBlock", "vision.BasicBlockTrain", "vision.SqueezeExcite",
    "vision.UNetUp", "vision.CBAM", "vision.GhostModule", "vision.PixelNorm", "vision.EqualConv2d",
    "vision.RunningStats",
    "audio.TemporalBlock", "audio.TemporalConvNet", "audio.ResBlock1", "audio.WaveNetStack",
    "audio.SubsampledEncoder", "audio.Windowed", "audio.Snake", "audio.PreNet", "audio.Chomp1d",
    "attention.PositionalEncoding", "attention.ScaledDotProductAttention", "attention.MultiHeadAttention",
    "attention.GeluFeedForward", "attention.PlainFeedForward", "attention.SelfAttention1d",
    "misc.ResidualFeedForward", "misc.InplaceNormalize", "misc.ChannelList", "misc.Hooked",
    "misc.SequentialWithExtras",
}

RESULTS: dict[str, dict[str, str | None]] = {"permissive": {}, "strict": {}, "torchscript": {}}


@pytest.fixture
def jit_env(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "module_corpus_cache"))
    monkeypatch.setenv("TORCHSCRIBE", "strict")


def _made(factory: Callable[[], tuple[Any, tuple]]) -> tuple[Any, tuple]:
    torch.manual_seed(0)
    return factory()


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def check_case(name: str, how: str, factory: Callable[[], tuple[Any, tuple]] | None = None) -> str | None:
    """Compile case `name` (`how`: "permissive", "strict" or "torchscript") and compare two calls
    with eager's; None when it matches, else what went wrong."""
    model, inputs = _made(factory or FACTORIES[name])
    reference, ref_inputs = _made(factory or FACTORIES[name])
    try:
        if how == "torchscript":
            compiled = torch.jit.script(model)
        else:
            compiled = script(model, example_inputs=inputs, permissive=how == "permissive")
    except Exception as error:  # noqa: BLE001 - a case that does not compile is a result here
        return f"compile: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    for grad_mode in (torch.no_grad, torch.inference_mode):
        args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
        expected_args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in ref_inputs)
        with grad_mode():
            with runtime.mode("off"):
                expected = reference(*expected_args)
            try:
                got = compiled(*args)
            except Exception as error:  # noqa: BLE001
                return f"run ({grad_mode.__name__}): {type(error).__name__}: {str(error)[:300]}"
        try:
            assert_close_to_eager(got, expected, f"{name}: result")
            assert_close_to_eager(args, expected_args, f"{name}: inputs after the call")
            ours, theirs = _state(model), _state(reference)
            assert ours.keys() == theirs.keys()
            for key in theirs:
                assert_close_to_eager(ours[key], theirs[key], f"{name}: {key} after the call")
        except AssertionError as error:
            return f"differs ({grad_mode.__name__}): {str(error)[:300]}"
    return None


@pytest.mark.parametrize("name", PARAMS)
def test_permissive(name: str, jit_env) -> None:
    problem = RESULTS["permissive"][name] = check_case(name, "permissive")
    assert problem is None, problem


@pytest.mark.parametrize("name", PARAMS)
def test_strict(name: str, jit_env) -> None:
    problem = RESULTS["strict"][name] = check_case(name, "strict")
    if name in STRICT_COMPILES:
        assert problem is None, problem
    elif problem is not None:  # (the others fail cleanly: a compile error, never a wrong result)
        assert problem.startswith("compile: CompileError"), problem


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_torchscript(name: str) -> None:
    """What TorchScript scripts of the corpus: recorded for test_rates, never a failure."""
    with contextlib.suppress(Exception), runtime.mode("off"):
        RESULTS["torchscript"][name] = check_case(name, "torchscript")
    RESULTS["torchscript"].setdefault(name, "error")


def test_rates(capsys) -> None:
    """The share of the corpus each way compiles and matches eager (of the cases run)."""
    lines = []
    rates = {}
    for how, found in RESULTS.items():
        if found:
            rates[how] = sum(p is None for p in found.values()) / len(found)
            lines.append(f"{how}: {sum(p is None for p in found.values())}/{len(found)} ({rates[how]:.0%})")
    with capsys.disabled():
        print("\nmodule corpus, compiled and matching eager: " + "; ".join(lines))
    if len(RESULTS["permissive"]) == len(NAMES):
        assert rates["permissive"] >= 0.97
    if len(RESULTS["strict"]) == len(NAMES) and len(RESULTS["torchscript"]) == len(NAMES):
        assert rates["strict"] >= rates["torchscript"]


# -- the features, one call each beyond the examples ------------------------------------------------
def _compare(compiled, model, *args) -> None:
    with torch.no_grad():
        with runtime.mode("off"):
            expected = model(*args)
        assert_close_to_eager(compiled(*args), expected)


def test_root_sequential_runs_its_hooks_once_and_checks_its_length(jit_env, monkeypatch) -> None:
    model, (x,) = _made(FACTORIES["vision.Sequential"])
    calls = []
    model.register_forward_hook(lambda module, args, out: calls.append(out.shape))
    compiled = script(model, example_inputs=(x,))
    _compare(compiled, model, x)
    calls.clear()
    with torch.no_grad():
        compiled(x)
    assert len(calls) == 1
    monkeypatch.setenv("TORCHSCRIBE", "on")
    model.append(torch.nn.ReLU())  # (the compiled module shares the layers): eager, by the entry check
    before = sum(runtime.fallback_counts().values())
    _compare(compiled, model, x)
    assert sum(runtime.fallback_counts().values()) == before + 1


def test_hooked_submodule_runs_its_hook_in_compiled_code(jit_env) -> None:
    model, (x,) = _made(FACTORIES["misc.Hooked"])
    seen = []
    model.fc.register_forward_pre_hook(lambda module, args: seen.append(1))
    compiled = script(model, example_inputs=(x,), permissive=True)
    _compare(compiled, model, x)
    seen.clear()
    with torch.no_grad():
        compiled(x)
    assert len(seen) == 1


def test_star_args_entry_takes_as_many_as_compiled_for(jit_env, monkeypatch) -> None:
    model, (a, b) = _made(FACTORIES["misc.Concat"])
    compiled = script(model, example_inputs=(a, b), permissive=True)
    _compare(compiled, model, a, b)
    monkeypatch.setenv("TORCHSCRIBE", "on")
    before = sum(runtime.fallback_counts().values())
    _compare(compiled, model, a, b, b)  # three: eager
    assert sum(runtime.fallback_counts().values()) == before + 1


def test_tensor_or_tuple_result_follows_the_path_taken(jit_env) -> None:
    model, (x,) = _made(FACTORIES["misc.MaybeTuple"])
    compiled = script(model, example_inputs=(x,), permissive=True)
    _compare(compiled, model, x)
    with torch.no_grad():
        assert isinstance(compiled(x), tuple)
        one = x[:1]
        with runtime.mode("off"):
            expected = model(one)
        got = compiled(one)  # (TORCHSCRIBE=strict: compiled code, the batch size a symbol)
    assert isinstance(got, torch.Tensor)
    assert_close_to_eager(got, expected)


def test_subclass_method_overrides_the_one_its_base_forward_calls(jit_env) -> None:
    """The base's forward calls `self.activation`: the subclass's gelu, not the base's relu."""
    model, (x,) = _made(FACTORIES["attention.GeluFeedForward"])
    compiled = script(model, example_inputs=(x,))
    _compare(compiled, model, x)
    with torch.no_grad():
        relu = model.norm(x + model.w_2(torch.relu(model.w_1(x))))
        assert not torch.allclose(compiled(x), relu)


def test_module_list_unrolled_by_zip_checks_its_length(jit_env, monkeypatch) -> None:
    """The loop over zip(self.convs1, self.convs2) is unrolled for two layers each: a layer
    appended to both since sends the call to eager code (it was silently skipped)."""
    model, (x,) = _made(FACTORIES["audio.ResBlock1"])
    compiled = script(model, example_inputs=(x,))
    _compare(compiled, model, x)
    monkeypatch.setenv("TORCHSCRIBE", "on")
    for convs in (model.convs1, model.convs2):
        convs.append(torch.nn.Conv1d(4, 4, 3, padding=1))
    before = sum(runtime.fallback_counts().values())
    _compare(compiled, model, x)
    assert sum(runtime.fallback_counts().values()) == before + 1


# torch's own layers at the root compile as they do as submodules (transpiler/roots.py), not from
# torch's source: an in-place activation writes its input, a batch norm in training its buffers.
TORCH_ROOTS = {
    "Conv2d": lambda: (torch.nn.Conv2d(3, 4, 3, padding=1).eval(), (torch.randn(2, 3, 6, 6),)),
    "LayerNorm": lambda: (torch.nn.LayerNorm(8).eval(), (torch.randn(2, 5, 8),)),
    "ReLU(inplace)": lambda: (torch.nn.ReLU(inplace=True), (torch.randn(2, 8),)),
    "BatchNorm1d(train)": lambda: (torch.nn.BatchNorm1d(8).train(), (torch.randn(4, 8),)),
    "LSTM": lambda: (torch.nn.LSTM(8, 4, batch_first=True).eval(), (torch.randn(2, 3, 8),)),
}


@pytest.mark.parametrize("permissive", [True, False])
@pytest.mark.parametrize("layer", list(TORCH_ROOTS))
def test_root_torch_layer(layer: str, permissive: bool, jit_env) -> None:
    problem = check_case(layer, "permissive" if permissive else "strict", TORCH_ROOTS[layer])
    assert problem is None, problem

"""The cache of `script(instance, example_inputs=...)`: a model compiled the same way before is
loaded, not compiled again (no libcst parse); any change in what the generated module depends on
compiles anew."""
from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import runtime
import transpiler.pipeline
import transpiler.jit as jit
from closeness import assert_close_to_eager
from examples import mlp
from transpiler import jit_cache, script

ROOT = Path(__file__).resolve().parent.parent


class MyLinear(nn.Linear):
    """Another class than torch's own: compiled code calls it as an opaque module."""


@pytest.fixture
def compiles(tmp_path, monkeypatch) -> list[str]:
    """A private cache directory; the list grows by one entry per program built (build_program:
    what script() of an instance and of a function both call)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []
    real = transpiler.pipeline.build_program

    def counting(source, *args, **kwargs):
        calls.append(source.display)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(transpiler.pipeline, "build_program", counting)
    return calls


def run_both(model: nn.Module, inputs: tuple) -> None:
    """script() the model and check the compiled code ran (no fallback) and matches eager."""
    scripted = script(model, example_inputs=inputs)
    fallbacks = sum(runtime.fallback_counts().values())
    with torch.no_grad():
        got = scripted(*inputs)
        with runtime.mode("off"):
            expected = model(*inputs)
    assert sum(runtime.fallback_counts().values()) == fallbacks
    assert_close_to_eager(got, expected)


def key(model: nn.Module, inputs, path: str | None = None, text: str | None = None) -> str | None:
    path = path or mlp.__file__
    text = Path(path).read_text(encoding="utf-8") if text is None else text
    return jit_cache.module_key(model, path, text, jit._module_name_of(path), inputs, {"permissive": False})


def test_second_script_loads_the_cached_module_without_parsing(compiles, monkeypatch) -> None:
    model, inputs = mlp.make_example()
    run_both(model, inputs)
    assert len(compiles) == 1
    # A fresh model object, the same everything: no compile, no libcst parse.
    import transpiler.source

    def refuse(*args, **kwargs):
        raise AssertionError("the compiler ran on a cache hit")

    monkeypatch.setattr(transpiler.source.SourceFile, "__init__", refuse)
    monkeypatch.setattr(transpiler.pipeline, "compile_source", refuse)
    model2, inputs2 = mlp.make_example()
    run_both(model2, inputs2)
    # Another batch size is the same compiled module (the batch is a symbol), also a hit.
    run_both(model2, (torch.randn(3, 16, 64),))


def test_cache_hit_in_a_fresh_process_imports_no_compiler(compiles) -> None:
    model, inputs = mlp.make_example()
    run_both(model, inputs)
    assert len(compiles) == 1
    code = (
        "import sys, torch, runtime\n"
        "from examples import mlp\n"
        "from transpiler import script\n"
        "model, inputs = mlp.make_example()\n"
        "scripted = script(model, example_inputs=inputs)\n"
        "with torch.no_grad():\n"
        "    got = scripted(*inputs)\n"
        "    with runtime.mode('off'):\n"
        "        torch.testing.assert_close(got, model(*inputs))\n"
        "assert not runtime.fallback_counts(), runtime.fallback_counts()\n"
        "bad = [k for k in sys.modules if k.split('.')[0] in ('libcst', 'codegen', 'ir')"
        " or k in ('transpiler.compile', 'transpiler.pipeline', 'transpiler.source', 'transpiler.classinfo')]\n"
        "assert not bad, bad\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr


def test_changed_folded_attribute_or_submodule_class_compiles_anew(compiles) -> None:
    model, inputs = mlp.make_example()
    run_both(model, inputs)
    assert len(compiles) == 1
    model.norm.eps = 1e-2  # folded into the generated code (an entry check pins it)
    run_both(model, inputs)
    assert len(compiles) == 2
    model.train()
    run_both(model, inputs)
    assert len(compiles) == 3
    model.eval()
    other = MyLinear(256, 64)
    other.load_state_dict(model.fc2.state_dict())
    model.fc2 = other
    run_both(model, inputs)
    assert len(compiles) == 4
    run_both(model, inputs)  # and that one is cached too
    assert len(compiles) == 4


def test_source_edit_compiles_anew(compiles, tmp_path) -> None:
    path = tmp_path / "edited_mlp.py"
    text = Path(mlp.__file__).read_text(encoding="utf-8")
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("edited_mlp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["edited_mlp"] = module
    try:
        spec.loader.exec_module(module)
        model, inputs = module.make_example()
        run_both(model, inputs)
        run_both(model, inputs)
        assert len(compiles) == 1
        path.write_text(text + "\n# an edit\n", encoding="utf-8")
        run_both(model, inputs)
        assert len(compiles) == 2
    finally:
        sys.modules.pop("edited_mlp", None)


def test_corrupt_entries_are_ignored_and_rewritten(compiles, tmp_path) -> None:
    model, inputs = mlp.make_example()
    run_both(model, inputs)
    jit_dir = tmp_path / "cache" / "jit"
    (module_file,) = jit_dir.glob("MLP_*.py")
    good = module_file.read_bytes()
    module_file.write_bytes(good[: len(good) // 2])  # a truncated module
    run_both(model, inputs)
    assert len(compiles) == 2
    assert module_file.read_bytes() == good
    (key_file,) = (jit_dir / "keys").iterdir()
    key_file.write_text("../../elsewhere.py\n")  # a garbled key entry
    run_both(model, inputs)
    assert len(compiles) == 3
    run_both(model, inputs)
    assert len(compiles) == 3


def test_key_covers_what_specialisation_reads() -> None:
    model, (x,) = mlp.make_example()
    base = key(model, (x,))
    assert base is not None and base == key(mlp.make_example()[0], (x.clone(),))
    assert key(model, (torch.randn(2, 16, 64),)) == base  # the batch is a symbol
    different = [
        key(model, (x.double(),)),  # dtype
        key(model, (torch.randn(8, 8, 64),)),  # a size other than the batch
        key(model, (torch.randn(1, 16, 64),)),  # batch 1 is not made a symbol
        key(model, (x.transpose(0, 1).contiguous().transpose(0, 1),)),  # contiguity
        key(model, (x.requires_grad_(),)),
        key(model, None),
        key(model, (x,), text=Path(mlp.__file__).read_text() + "\n"),  # the source
    ]
    x.requires_grad_(False)
    model.norm.eps = 1e-3
    different.append(key(model, (x,)))
    model.norm.eps = mlp.make_example()[0].norm.eps
    model.train()
    different.append(key(model, (x,)))
    model.eval()
    model.fc1.extra = 3
    different.append(key(model, (x,)))
    del model.fc1.extra
    fc2 = model.fc2
    model.fc2 = MyLinear(256, 64)
    different.append(key(model, (x,)))
    model.fc2 = fc2
    model.fc2.weight.data = model.fc2.weight.data.double()
    different.append(key(model, (x,)))
    assert None not in different
    assert len(set(different)) == len(different) and base not in different


def test_key_of_uncacheable_attribute_is_none_and_still_compiles(compiles) -> None:
    model, inputs = mlp.make_example()
    model.helper = object()
    assert key(model, inputs) is None
    run_both(model, inputs)
    run_both(model, inputs)
    assert len(compiles) == 2


def test_a_partial_attribute_is_described_by_its_function_and_arguments(compiles) -> None:
    """vit_b_16 keeps `partial(nn.LayerNorm, eps=1e-6)` as an attribute: a key describes it,
    so the model is compiled once; another function or argument gives another key."""
    model, inputs = mlp.make_example()
    keys = []
    for helper in (functools.partial(nn.LayerNorm, eps=1e-6), functools.partial(nn.LayerNorm, eps=1e-5),
                   functools.partial(nn.GroupNorm, eps=1e-6), functools.partial(nn.LayerNorm, 4, eps=1e-6)):
        model.helper = helper
        keys.append(key(model, inputs))
    assert None not in keys and len(set(keys)) == len(keys)
    model.helper = functools.partial(nn.LayerNorm, eps=1e-6)
    assert key(model, inputs) == keys[0]
    model.helper = functools.partial(nn.LayerNorm, eps=object())
    assert key(model, inputs) is None
    model.helper = functools.partial(nn.LayerNorm, eps=1e-6)
    run_both(model, inputs)
    run_both(model, inputs)
    assert len(compiles) == 1


def test_key_depends_on_the_environment(monkeypatch) -> None:
    model, inputs = mlp.make_example()
    base = key(model, inputs)
    monkeypatch.setenv("TORCHSCRIBE_SOMETHING", "1")
    assert key(model, inputs) != base
    monkeypatch.delenv("TORCHSCRIBE_SOMETHING")
    monkeypatch.setenv("TORCHSCRIBE_JIT_CACHE", "off")
    assert key(model, inputs) is None
    monkeypatch.delenv("TORCHSCRIBE_JIT_CACHE")
    import ir.passes

    monkeypatch.setattr(ir.passes, "PIPELINE", [p for p in ir.passes.PIPELINE if p[0] != "fuse"])
    assert key(model, inputs) != base  # a pipeline patched in memory
    monkeypatch.setattr(ir.passes, "PIPELINE", list(ir.passes.STANDARD_PIPELINE))
    assert key(model, inputs) == base
    monkeypatch.setattr(jit_cache, "compiler_fingerprint", lambda: "another compiler")
    assert key(model, inputs) != base

"""What Hugging Face attention code needs to compile through, under script(instance, permissive=True),
each written here in a small model of its own shape: the attention dispatch
(`ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, default)`, a call made when
compiling and checked at entry), `hasattr`/`getattr` of a module, shapes spread into tuples and
calls (`(*input_shape, -1, self.head_dim)`), `**` of a dict display, module-level flags bound
once, decorators that return the function itself, and `**kwargs` after a branch that raises."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import runtime
from runtime import script
from source_module import generated_jit, jit_source

SOURCE = '''
    import os

    import torch
    from torch import nn

    # Bound once, by a call: compiled code takes its value (False) as a constant.
    _FAST_PATH = os.environ.get("TORCHSCRIBE_TEST_NEVER_SET") is not None


    def identity(fn):
        return fn


    class Registry(dict):
        def get_interface(self, name, default):
            return self.get(name, default)


    def slow_attention(module, q, k, v, scaling=None, **kwargs):
        w = torch.softmax(q @ k.transpose(-1, -2) * scaling, dim=-1)
        return w @ v, w


    def fast_attention(module, q, k, v, scaling=None, **kwargs):
        extra = {}
        if hasattr(module, "groups") and module.groups > 1:
            extra = {"enable_gqa": True}
        causal = getattr(module, "is_causal", True)
        if _FAST_PATH:
            q = q.contiguous()
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scaling, is_causal=causal, **extra)
        return out, None


    def other_attention(module, q, k, v, scaling=None, **kwargs):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scaling), None


    REGISTRY = Registry({"fast": fast_attention})


    @identity
    def scale_heads(x, s):
        return x * s


    class Attention(nn.Module):
        def __init__(self, impl="fast"):
            super().__init__()
            self.impl = impl
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)
            self.v = nn.Linear(16, 16)
            self.out = nn.Linear(16, 16)
            self.head_dim = 4
            self.is_causal = False
            self.scaling = 0.5

        def forward(self, x, **kwargs):
            if len(kwargs) > 3:
                if not self.is_causal:  # (a side that raises: the other side's names go on as they were)
                    raise ValueError(f"{self} takes few options")
            input_shape = x.shape[:-1]
            hidden_shape = (*input_shape, -1, self.head_dim)
            q = self.q(x).view(hidden_shape).transpose(1, 2)
            k = self.k(x).view(hidden_shape).transpose(1, 2)
            v = self.v(x).view(hidden_shape).transpose(1, 2)
            attention = REGISTRY.get_interface(self.impl, slow_attention)
            out, _ = attention(self, q, k, v, scaling=self.scaling, **kwargs)
            out = out.transpose(1, 2).reshape(*input_shape, -1)
            return scale_heads(self.out(out), 2.0).relu()


    class Changed(nn.Module):
        def forward(self, x):
            options = {"dim": -1}
            options["dim"] = 0
            return torch.softmax(x, **options) + 1


    class Spread(nn.Module):
        def forward(self, x):
            shape = (*x.shape[:-1], 1)
            y = x + 1 if isinstance(shape, tuple) else x - 1
            return y * 2 if isinstance(x.shape[1:], list) else y * 3


    class Private(nn.Module):
        def __init__(self):
            super().__init__()
            self._cache = None

        @property
        def ready(self):
            return self._cache is not None

        def forward(self, x):
            if hasattr(self, "_cache") and hasattr(self, "ready"):
                return x + 1
            return x - 1


    class Flagged(nn.Module):
        def forward(self, x):
            if _FAST_PATH:
                x = x * 2
            n = 3
            return x + n.bit_length()


    class Flags(nn.Module):
        def forward(self, x, flag: bool):
            if flag is True:
                return x + 1
            return x - 1
'''


@pytest.fixture
def models(tmp_path: Path, monkeypatch):
    with jit_source(tmp_path, monkeypatch, "hf_attention_models", SOURCE) as mod:
        yield mod


def _eager_now(compiled, model, *args) -> None:
    with runtime.mode("on"), warnings.catch_warnings():
        warnings.simplefilter("ignore", runtime.TorchscribeWarning)
        torch.testing.assert_close(compiled(*args), model(*args))


def test_attention_dispatch_is_compiled_through(models, tmp_path: Path) -> None:
    torch.manual_seed(0)
    m = models.Attention().eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))
            torch.testing.assert_close(compiled(x[:1]), m(x[:1]))
        code = generated_jit(tmp_path, "Attention")
        body = code[code.index("def Attention_forward("):]
        kept = [line.strip() for line in body.splitlines() if "kept as Python" in line]
        assert kept == ["# kept as Python: **kwargs, empty when compiled code runs"]
        assert body.count("_guards.check_lookup(") == 1
        assert "_hf_attention_models.REGISTRY.get_interface(\n" in body or "REGISTRY.get_interface(" in body
        assert "F.scaled_dot_product_attention(" in body and "enable_gqa" not in body
        assert "hasattr" not in body and "getattr" not in body
        # the flag is a constant (its branch is gone), checked once at entry
        code_lines = [line for line in body.splitlines() if not line.lstrip().startswith(("#", "//"))]
        assert [line.strip() for line in code_lines if "_FAST_PATH" in line] == \
            ['_hf_attention_models._FAST_PATH, False, "hf_attention_models._FAST_PATH"']
        assert ".contiguous()" not in body
        assert "(*input_shape, -1, 4)" in body and ".reshape((*input_shape, -1))" in body
        assert "out_relu(" in body  # the shapes are known: scale and relu fuse

        assert '"impl": "fast"' in code  # (the entry table's values)
        assert "    _guards.check_entry(self, Attention_forward_checks)\n" in body
        # The setting the lookup was made with changes: compiled again, for the other function.
        m.impl = "slow"
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))
        m.impl = "fast"
        # The registry changes: the lookup returns another function, eager runs.
        models.REGISTRY["fast"] = models.other_attention
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="other_attention"):
            compiled(x)
        _eager_now(compiled, m, x)
        models.REGISTRY["fast"] = models.fast_attention
        # A module-level flag taken as a constant changes (another process, a patch): eager runs.
        models._FAST_PATH = True
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="_FAST_PATH"):
            compiled(x)
        _eager_now(compiled, m, x)


def test_a_dict_that_changed_is_not_spread_by_the_compiler(models, tmp_path: Path) -> None:
    m = models.Changed().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))
    code = generated_jit(tmp_path, "Changed")
    # (Python changed it: what it holds after is Python's, and so is the call)
    assert "kept as Python: `**` arguments are not supported" in code


def test_is_true_of_a_bool_is_equality(models, tmp_path: Path) -> None:
    m = models.Flags().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x, True))
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x, True), m(x, True))
            torch.testing.assert_close(compiled(x, False), m(x, False))
            torch.testing.assert_close(compiled(x, 1), m(x, 1))  # `1 is True` is False, as in eager


def test_spread_sizes_are_a_tuple_when_they_run(models) -> None:
    """`(*x.shape[:-1], 1)` and `x.shape[1:]` of a tensor of unknown rank are tuples in Python,
    whatever type the compiler gives them."""
    m = models.Spread().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))


def test_hasattr_of_a_private_attribute_or_property_is_not_decided_when_compiling(models, tmp_path: Path) -> None:
    m = models.Private().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))
            m._cache = torch.zeros(1)  # the property's value changes: Python decides at each call
            torch.testing.assert_close(compiled(x), m(x))
    code = generated_jit(tmp_path, "Private")
    assert "kept as Python: hasattr() of `_cache` is not decided when compiling" in code


def test_a_flag_read_first_and_a_literal_in_kept_python(models, tmp_path: Path) -> None:
    """The flag's check opens the body (it moves to the entry from there); kept Python code that
    reads a name bound to an int gets `(3).bit_length()`, which parses."""
    m = models.Flagged().eval()
    x = torch.randn(3, 4)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))
    assert "(3).bit_length()" in generated_jit(tmp_path, "Flagged")

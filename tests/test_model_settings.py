"""What real model code (Hugging Face transformers above all) needs beyond module attributes, under
script(instance, example_inputs=...): settings objects the modules hold (`self.config.num_layers`)
read when compiling and checked at entry; slices of module lists; decorated forwards, whose
wrappers run around the compiled body; parameters the example inputs leave out; and torch's
legacy tensor annotations."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import pytest
import re

import torch

import runtime
from runtime import script
from source_module import generated_jit, jit_source

SOURCE = '''
    import functools

    import torch
    from torch import nn


    class Config:
        def __init__(self, layers=3, scale=0.5, act="gelu", bias=True):
            self.num_layers = layers
            self.scale = scale
            self.act = act
            self.bias = bias
            self.sub = Sub()

        @property
        def doubled(self):
            return 2 * self.scale


    class Sub:
        def __init__(self):
            self.eps = 1e-5


    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.fc = nn.Linear(8, 8, bias=config.bias)

        def forward(self, x):
            h = self.fc(x)
            if self.config.act == "gelu":
                h = torch.nn.functional.gelu(h)
            else:
                h = torch.relu(h)
            return h * self.config.doubled + self.config.sub.eps


    class Net(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.blocks = nn.ModuleList([Block(config) for _ in range(4)])

        def forward(self, x: torch.FloatTensor, mask=None):
            for b in self.blocks[: self.config.num_layers]:
                x = x + b(x) * self.config.scale
            if mask is not None:
                x = x * mask
            return x


    def count_calls(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            CALLS.append(kwargs.get("tag"))
            kwargs.pop("tag", None)
            return fn(self, *args, **kwargs) * 2
        return wrapper


    CALLS = []


    def use_defaults(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            kwargs.setdefault("scale", 2.0)  # a named parameter: the body's **kwargs stay empty
            return fn(self, *args, **kwargs)
        return wrapper


    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, bias: torch.Tensor, **kwargs) -> torch.Tensor:
            h = self.q(x) + bias
            if kwargs.get("double", False):
                h = h * 2
            if "shift" in kwargs:
                h = h + kwargs["shift"]
            return combine(h, **kwargs)


    def combine(h: torch.Tensor, **kwargs) -> torch.Tensor:
        return h.relu() * kwargs.get("gain", 1.0)


    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attention()

        @use_defaults
        def forward(self, x, scale=None, **kwargs):
            bias = make_bias(x)  # a Python object to the compiler: kept code makes it
            return self.attn(x, bias, double=True, gain=scale, **kwargs) + 1


    class CheckpointingLayer(nn.Module):
        gradient_checkpointing = False

        def __call__(self, *args, **kwargs):
            if self.gradient_checkpointing and self.training:
                kwargs["scale"] = 0.0
            return super().__call__(*args, **kwargs)


    class Layer(CheckpointingLayer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, scale=1.0):
            return self.fc(x).relu() * scale


    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer(), Layer()])

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x, scale=0.5)
            return x


    class Enumerated(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = x + layer(x) * (i + 1)
            a, b = pair(x)  # annotated as a Tensor, returns a tuple: Python does not mind
            c, d = python_pair(a)  # a Python object, unpacked as Python unpacks it
            return a + b + c * d


    def pair(x) -> torch.Tensor:
        return x, x * 2


    def python_pair(x):
        try:
            return x.sin(), x.cos()
        except RuntimeError:
            return None


    def affine(t: torch.Tensor, k: float) -> torch.Tensor:
        return (t * k + 1) * (k // 2)


    class IntoFloat(nn.Module):
        def forward(self, t):
            return affine(t, 7) + affine(t, 2.5)


    def annotated(x: torch.Tensor) -> torch.Tensor:
        y: Config = x * 2  # a local's annotation: Python neither evaluates nor checks it
        return y + 1


    def make_bias(x):
        try:
            return x.mean(-1, keepdim=True)
        except RuntimeError:
            return None


    class Decorated(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        @count_calls
        def forward(self, x, **kwargs):
            return self.fc(x).sigmoid() + len(kwargs)


    class Permute(nn.Module):  # (torchvision's: the dims in a list)
        def __init__(self, dims):
            super().__init__()
            self.dims = dims

        def forward(self, x):
            return torch.permute(x, self.dims)


    class ToLast(nn.Module):
        def __init__(self):
            super().__init__()
            self.to_last = Permute([0, 2, 1])
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            return torch.relu(self.norm(self.to_last(x)))


    def by_keyword(fn):  # (as HF's decorators call forward: the body gets every argument by name)
        @functools.wraps(fn)
        def wrapper(self, ids=None, embeds=None, mask=None):
            return fn(self, ids=ids, embeds=embeds, mask=mask)
        return wrapper


    class Embedded(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 8)
            self.weight = nn.Parameter(torch.rand(8))

        @by_keyword
        def forward(self, ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None,
                    mask: torch.Tensor | None = None):
            if (ids is None) ^ (embeds is not None):
                raise ValueError("pass one of ids and embeds")
            if embeds is None:
                embeds = self.embed(ids)
            dtype = embeds.dtype
            h = embeds.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            if mask is not None:
                h = h * mask
            return self.weight * h.to(dtype)
    '''


# HF's shapes around decorated forwards: a wrapper that adds a keyword, a decorated submodule.
DECORATED = '''
    import functools

    import torch
    from torch import nn


    def with_flags(fn):  # (as HF's merge_with_config_defaults: a setting for the body's **kwargs)
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            kwargs.setdefault("use_cache", False)
            return fn(self, *args, **kwargs)
        return wrapper


    class CheckpointingLayer(nn.Module):
        gradient_checkpointing = False

        def __call__(self, *args, **kwargs):
            if self.gradient_checkpointing and self.training:
                kwargs["use_cache"] = True  # (Python that changes the dict, on a side not taken)
            return super().__call__(*args, **kwargs)


    class Layer(CheckpointingLayer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, use_cache=True, **kwargs):
            kwargs.pop("output_attentions", None)  # (a key it does not hold: nothing changes)
            return torch.relu(self.fc(x) * 2.0) if not use_cache else self.fc(x)


    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([Layer(), Layer()])

        @with_flags
        def forward(self, x, **kwargs):
            for layer in self.layers:
                x = layer(x, **kwargs)
            return x


    class Head(nn.Module):  # (GPT-2's shape: the model it heads is decorated)
        def __init__(self):
            super().__init__()
            self.body = Stack()
            self.out = nn.Linear(8, 4)

        def forward(self, x):
            return self.out(self.body(x)).sigmoid()


    class Conv1D(nn.Module):  # (GPT-2's)
        def __init__(self, nx, nf):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(torch.randn(nx, nf))
            self.bias = nn.Parameter(torch.randn(nf))

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)


    class CrossOrSelf(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = Conv1D(8, 8)

        def forward(self, x, other: torch.Tensor | None = None):
            is_cross = other is not None
            if other is not None:
                scale = other.mean()
            h = self.proj(x)
            if x.dim() == 9 and is_cross:  # (`scale` is read only where `other` was given)
                h = h * scale
            return torch.relu(h)


    class UsesCross(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = CrossOrSelf()

        def forward(self, x):
            return self.inner(x) + 1.0
    '''


@pytest.fixture
def decorated(tmp_path: Path, monkeypatch):
    with jit_source(tmp_path, monkeypatch, "decorated_models", DECORATED) as mod:
        yield mod


@pytest.fixture
def models(tmp_path: Path, monkeypatch):
    with jit_source(tmp_path, monkeypatch, "settings_models", SOURCE) as mod:
        yield mod


def _code(tmp_path: Path, stem: str) -> str:
    """The generated module without its comments and kernel descriptions (which quote the source)."""
    return "\n".join(line for line in generated_jit(tmp_path, stem).splitlines()
                     if not line.lstrip().startswith(("#", "//", '"""')))


def _kernel_calls(code: str) -> int:
    """How many times the compiled functions call a kernel (a kernel that two layers share is
    written once and called twice)."""
    names = re.findall(r"_lib\.(\w+)_kernel\(", code)
    body = code[code.index("\ndef ", code.rindex("_lib.")):]
    return sum(len(re.findall(rf"\b{name}\(", body)) for name in names)


def _compiled_and_checked(model: torch.nn.Module, x: torch.Tensor, permissive: bool = True):
    """script(model) for `x`, checked against eager with the compiled code running (strict)."""
    compiled = script(model, example_inputs=(x,), permissive=permissive)
    with runtime.mode("strict"):
        torch.testing.assert_close(compiled(x), model(x))
    return compiled


@pytest.mark.parametrize("permissive", [False, True])
def test_settings_object_is_read_when_compiling_and_checked_at_entry(models, tmp_path: Path, permissive: bool) -> None:
    torch.manual_seed(0)
    config = models.Config(layers=3)
    net = models.Net(config).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(net, x, permissive)  # no entry check fails
        text = generated_jit(tmp_path, "Net")
        # three of the four blocks, the gelu branch only, the values folded in
        assert text.count("gelu") >= 1 and "relu" not in text
        assert '("", {"config.num_layers": 3,' in text  # (the three blocks, alike, are one row)
        assert '(("blocks.0", "blocks.1", "blocks.2"), "Block", {"config.act": "gelu",' in text
        assert '"config.sub.eps": 1e-05}' in text and "blocks.3" not in text
        # a setting changed after compiling: an entry check fails and the call runs eagerly
        config.num_layers = 2
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="self.config.num_layers"):
            compiled(x)
        with runtime.mode("on"), warnings.catch_warnings():  # (warned once per process)
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            torch.testing.assert_close(compiled(x), net(x))


def test_settings_are_part_of_the_cache_key(models) -> None:
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        for act in ("gelu", "relu"):
            net = models.Net(models.Config(act=act)).eval()
            compiled = script(net, example_inputs=(x,))
            with runtime.mode("strict"):  # compiled for this config, not loaded for the other
                torch.testing.assert_close(compiled(x), net(x))


def test_left_out_parameter_is_compiled_for_its_default(models, tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = models.Net(models.Config()).eval()
    x, mask = torch.randn(2, 5, 8), torch.rand(2, 5, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(net, x)
        assert "check_value(mask, None" in generated_jit(tmp_path, "Net")
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="mask"):
            compiled(x, mask)
        with runtime.mode("on"), warnings.catch_warnings():  # a mask: eager
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            torch.testing.assert_close(compiled(x, mask), net(x, mask))


def test_decorated_forward_keeps_its_wrapper(models) -> None:
    torch.manual_seed(0)
    m = models.Decorated().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled = script(m, example_inputs=(x,), permissive=True)
        models.CALLS.clear()
        with runtime.mode("strict"):
            got = compiled(x, tag="a")
            # the wrapper ran around the compiled body, and what it passes on reaches the body
            torch.testing.assert_close(got, m(x, tag="b"))
            # an extra keyword reaches the body's **kwargs, which it was compiled without
            with pytest.raises(runtime.TorchscribeError, match="kwargs"):
                compiled(x, tag="c", extra=1)
        with runtime.mode("on"), warnings.catch_warnings():
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            # the body falls back inside the wrapper, which runs once
            torch.testing.assert_close(compiled(x, tag="d", extra=1), m(x, extra=1))
        assert models.CALLS == ["a", "b", "c", "d", None]


def test_decorated_forward_is_compiled_for_what_its_wrapper_passes(models, tmp_path: Path) -> None:
    """The wrapper passes `embeds=None, mask=None` and a tensor for `ids` (annotated `Tensor |
    None`) with the example inputs: the body is compiled for exactly that, checked at entry, so
    the branches fold and the RMS norm after the embedding is one kernel."""
    torch.manual_seed(0)
    m = models.Embedded().eval()
    ids = torch.randint(0, 10, (2, 5))
    with torch.no_grad():
        compiled = script(m, example_inputs=(ids,), permissive=True)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(ids), m(ids))
        code = _code(tmp_path, "Embedded")
        assert 'check_value(embeds, None, "embeds")' in code and 'check_value(mask, None, "mask")' in code
        assert code.count("_lib.") == 1  # (x.to(x.dtype) is x: no cast is left)
        assert ".to(" not in code[code.index("def Embedded_forward("):]
        embeds = torch.randn(2, 5, 8)
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="ids"):
            compiled(None, embeds)
        with runtime.mode("on"), warnings.catch_warnings():  # what the wrapper passes now: eager
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            torch.testing.assert_close(compiled(None, embeds), m(None, embeds))
            mask = torch.rand(2, 5, 8)
            torch.testing.assert_close(compiled(ids, mask=mask), m(ids, mask=mask))


def test_a_list_attribute_the_code_only_reads_is_a_setting(models, tmp_path: Path) -> None:
    """`torch.permute(x, self.dims)` with `dims` a list: compiled for its contents (the layer norm
    after it knows its shape and fuses), checked at entry, in place changes included."""
    torch.manual_seed(0)
    m = models.ToLast().eval()
    x = torch.randn(2, 8, 5)
    with torch.no_grad():
        compiled = _compiled_and_checked(m, x, permissive=False)
        code = _code(tmp_path, "ToLast")
        assert '("to_last", "Permute", {"dims": _guards.ListValue([0, 2, 1])})' in code and _kernel_calls(code) >= 1
        m.to_last.dims[:] = [2, 0, 1]
        with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="self.to_last.dims"):
            compiled(x)
        with runtime.mode("on"), warnings.catch_warnings():
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            torch.testing.assert_close(compiled(x), m(x))


def test_rewrap_replaces_the_wrapped_function_only() -> None:
    from runtime.dispatch import rewrap

    def outer(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return ("outer", fn(*args))
        return wrapper

    def inner(fn):
        @functools.wraps(fn)
        def wrapper(*args):
            return ("inner", fn(*args))
        return wrapper

    @outer
    @inner
    def source(x):
        return ("source", x)

    wrapped = rewrap(source, lambda x: ("compiled", x))
    assert wrapped(1) == ("outer", ("inner", ("compiled", 1)))
    assert source(1) == ("outer", ("inner", ("source", 1)))  # the original is untouched

    def opaque(fn):  # keeps what it wraps out of its closure: cannot be copied
        wrapper = functools.wraps(fn)(lambda *a: OPAQUE_TABLE[0](*a))
        return wrapper

    OPAQUE_TABLE = [source]
    with pytest.raises(ValueError, match="cannot be applied"):
        rewrap(opaque(source), lambda x: x)


def test_legacy_tensor_annotations_read_as_tensor() -> None:
    from ir.core.types import TENSOR, OptionalType
    from transpiler.annotations import annotation_type
    from transpiler.source import SourceFile

    source = SourceFile(Path("t.py"), "import torch\n\ndef f(a: torch.LongTensor, b: torch.FloatTensor | None):\n    pass\n")
    a, b = source.functions["f"].params.params
    assert annotation_type(source, a.annotation.annotation, {}) == TENSOR  # type: ignore[union-attr]
    assert annotation_type(source, b.annotation.annotation, {}) == OptionalType(TENSOR)  # type: ignore[union-attr]


def test_call_variants_inline_python_objects_and_keywords(models, tmp_path: Path) -> None:
    """A call that passes a Python object where the callee declares a Tensor, and keywords into
    its **kwargs, is compiled for those arguments (a variant) and inlined: its kernels fuse with
    the caller's. The decorator's wrappers were seen to pass no extra keywords, so the entry is
    compiled for an empty **kwargs."""
    torch.manual_seed(0)
    m = models.Outer().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(m, x)
        code = _code(tmp_path, "Outer")
        assert "self.attn(" not in code and "combine(" not in code  # inlined
        assert "if kwargs:" in code  # an entry compiled for none; a call that passes some runs eagerly
        with runtime.mode("on"), warnings.catch_warnings():
            warnings.simplefilter("ignore", runtime.TorchscribeWarning)
            torch.testing.assert_close(compiled(x, shift=3.0), m(x, shift=3.0))


def test_unreadable_local_annotation_is_a_plain_assignment(models, tmp_path: Path) -> None:
    x = torch.randn(4)
    compiled = script(models.annotated, example_inputs=(x,), permissive=True)
    with runtime.mode("strict"):
        torch.testing.assert_close(compiled(x), x * 2 + 1)
    assert "kept as Python" not in generated_jit(tmp_path, "annotated")


@pytest.mark.parametrize("permissive", [False, True])
def test_modules_with_their_own_call(models, tmp_path: Path, permissive: bool) -> None:
    """A layer whose class has its own __call__ (HF's GradientCheckpointingLayer): permissive mode
    compiles that __call__ and inlines it (its `super().__call__` is the forward, with an entry
    check that the class's __call__ is still the one compiled); strict mode calls the layer as
    Python."""
    torch.manual_seed(0)
    m = models.Stack().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(m, x, permissive)
        code = _code(tmp_path, "Stack")
        if permissive:
            assert "F.linear" in code and "!settings_models:CheckpointingLayer.__call__" in code
            # the class's `gradient_checkpointing = False` is a setting, pinned at entry, so
            # `gradient_checkpointing and training` is decided when compiling (`training` unread)
            assert '"gradient_checkpointing": False' in code and "layers[0].training" not in code
            m.layers[0].gradient_checkpointing = True  # not what was compiled: an entry check fails
            with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="gradient_checkpointing"):
                compiled(x)
            with runtime.mode("on"), warnings.catch_warnings():
                warnings.simplefilter("ignore", runtime.TorchscribeWarning)
                torch.testing.assert_close(compiled(x), m(x))
        else:  # each layer is called as Python
            body = code[code.index("def Stack_forward"):]
            assert "F.linear" not in body and "CheckpointingLayer" not in body


def test_enumerate_wrong_result_annotation_and_unpacked_objects(models, tmp_path: Path) -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        _compiled_and_checked(models.Enumerated().eval(), torch.randn(3, 8))
    kept = [line for line in generated_jit(tmp_path, "Enumerated").splitlines() if "kept as Python" in line]
    assert len(kept) == 1 and "try statements" in kept[0], kept  # only the helper's call
    code = _code(tmp_path, "Enumerated")
    assert "enumerate" not in code and "pair(" not in code.replace("python_pair(", "")


@pytest.mark.parametrize("permissive", [False, True])
def test_int_passed_where_float_is_declared_stays_int(models, permissive: bool) -> None:
    """Python does not convert 7 to 7.0 for `k: float`: `t * k` of an int tensor stays int64, and
    `k // 2` is 3. The callee is compiled for an int there (a variant), in strict mode too."""
    t = torch.arange(6)
    compiled = script(models.IntoFloat(), example_inputs=(t,), permissive=permissive)
    with runtime.mode("strict"):
        got = compiled(t)
    expected = models.IntoFloat()(t)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)


def test_decorated_forward_is_compiled_for_the_literal_keywords_its_wrapper_passes(decorated, tmp_path: Path) -> None:
    """The wrapper adds `use_cache=False` to the body's `**kwargs` (HF's merge_with_config_defaults):
    the body is compiled for exactly that keyword, checked at entry by value and type, so
    `layer(x, **kwargs)` is inlined, its branch folded, and each layer is one kernel."""
    torch.manual_seed(0)
    m = decorated.Stack().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(m, x)
        code = _code(tmp_path, "Stack")
        assert '_guards.check_keywords(kwargs, {"use_cache": False}, "**kwargs")' in code
        assert _kernel_calls(code) == 2 and "layer(" not in code
        for passed in ({"use_cache": True}, {"use_cache": 0}):  # another value, another type
            with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="kwargs"):
                compiled(x, **passed)
            with runtime.mode("on"), warnings.catch_warnings():  # the body runs eagerly inside the wrapper
                warnings.simplefilter("ignore", runtime.TorchscribeWarning)
                torch.testing.assert_close(compiled(x, **passed), m(x, **passed))


def test_decorated_submodule_is_compiled_on_its_own(decorated, tmp_path: Path) -> None:
    """`self.body(x)` runs a decorated forward, which compiled code would not apply: the call
    stays Python, and the submodule is compiled on its own for what the call passed with the
    example inputs, its wrapper around it, in the module script() returns (the instance keeps
    its own submodule; parameters are shared)."""
    torch.manual_seed(0)
    m = decorated.Head().eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        compiled = _compiled_and_checked(m, x)
        assert "self.body(" in _code(tmp_path, "Head")
        assert _kernel_calls(_code(tmp_path, "Stack")) == 2
        assert compiled.body is not m.body and "forward" in vars(compiled.body) and "forward" not in vars(m.body)
        assert compiled.body.layers[1].fc.weight is m.body.layers[1].fc.weight
        assert compiled.out is m.out and m._modules["body"] is m.body
        m.body.layers[0].fc.weight.add_(1.0)  # shared: the compiled module sees it
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), m(x))


def test_a_callee_is_compiled_for_the_none_its_call_leaves(decorated, tmp_path: Path) -> None:
    """`CrossOrSelf.forward` does not lower for its annotations (`scale` is bound only where
    `other` is given), but the call leaves `other` to its None default: compiled for that call,
    `is_cross` is False when lowering, the branch that reads `scale` goes, and the callee is
    inlined. Its Conv1D puts sizes together (`x.size()[:-1] + (n,)`), which shape propagation
    follows, so the view after the matmul keeps its shape."""
    torch.manual_seed(0)
    m = decorated.UsesCross().eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        _compiled_and_checked(m, x)
    text = generated_jit(tmp_path, "UsesCross")
    body = text[text.index("def UsesCross_forward("):]
    assert "kept as Python" not in body and "scale" not in body and "inner(" not in _code(tmp_path, "UsesCross")
    assert "size_out = x.size()[:-1] + (8,)" in text and "h = x.view(size_out)" in text  # (the caller's name)
    assert "return relu(h)" in text

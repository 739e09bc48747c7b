"""Annotation friction (issue 8): a parameter defaulting to None is Optional[T] without an
annotation, T read from how the body uses it (transpiler/infer_annotations.py); in strict mode a
missing annotation is still an error, whose help is the annotation, or the whole signature, to
write. The suggestions are checked by pasting them into the source and compiling it."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import runtime
from source_module import case_directory, compiled_case, imported_source
from transpiler import script
from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError, Diagnostic, UserError
from transpiler.infer_annotations import annotation_text, suggest_parameter
from transpiler.source import SourceFile

HEADER = """\
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script

"""


def parsed(body: str, header: str = HEADER) -> SourceFile:
    return SourceFile(Path("model.py"), header + textwrap.dedent(body), "model.py")


def suggestion(body: str, name: str, header: str = HEADER) -> tuple[str, str]:
    """(the annotation suggested for parameter `name` of the file's first function, the reason)."""
    source = parsed(body, header)
    func = next(iter(source.functions.values()))
    found = suggest_parameter(source, func, name)
    return annotation_text(source, found.type), found.reason


# -- inference ----------------------------------------------------------------------------------
INFERENCE = {
    "tensor_method_call": ("""
        def f(x, mask):
            return x * mask.float()
        """, "mask", "Tensor", "calls the tensor method `.float()`"),
    "torch_function_argument": ("""
        def f(x):
            return torch.relu(x)
        """, "x", "Tensor", "passes it to `torch.relu`"),
    "functional_argument_by_keyword": ("""
        def f(x):
            return F.softmax(input=x, dim=-1)
        """, "x", "Tensor", "passes it to `F.softmax`"),
    "tensor_method_argument": ("""
        def f(x: Tensor, m):
            return x.masked_fill(m, 0.0)
        """, "m", "Tensor", "passes it to `x.masked_fill`"),
    "combined_with_a_tensor": ("""
        def f(x: Tensor, bias):
            return x + bias
        """, "bias", "Tensor", "combines it with a tensor"),
    "compared_with_a_tensor": ("""
        def f(x: Tensor, limit):
            return torch.where(x > limit, x, -x)
        """, "limit", "Tensor", "compares it with a tensor"),
    "indexed_as_a_tensor": ("""
        def f(x):
            return x[:, 0]
        """, "x", "Tensor", "indexes it as a tensor"),
    "assigned_a_tensor": ("""
        def f(x: Tensor, h):
            h = torch.zeros_like(x)
            return h
        """, "h", "Tensor", "assigns it a tensor"),
    "range_argument": ("""
        def f(x: Tensor, n):
            for _ in range(n):
                x = x * 2
            return x
        """, "n", "int", "passes it to `range`"),
    "view_sizes": ("""
        def f(x: Tensor, heads):
            b, t, c = x.shape
            return x.view(b, t, heads, c // heads)
        """, "heads", "int", "passes it to `x.view`, which takes an int"),
    "arithmetic_with_a_size": ("""
        def f(x: Tensor, k):
            return x.size(0) * k
        """, "k", "int", "combines it with a size"),
    "float_parameter_of_a_functional": ("""
        def f(x: Tensor, p):
            return F.dropout(x, p, True)
        """, "p", "float", "passes it to `F.dropout`, which takes a float"),
    "bool_keyword_of_a_tensor_method": ("""
        def f(x: Tensor, keep):
            return x.sum(-1, keepdim=keep)
        """, "keep", "bool", "which takes a bool"),
    "condition_only": ("""
        def f(x: Tensor, flag):
            if flag:
                x = x + 1
            return x
        """, "flag", "bool", "uses it as a condition"),
    "a_tensor_use_outranks_a_condition": ("""
        def f(x: Tensor, y):
            if y:
                return x
            return x * y.sum()
        """, "y", "Tensor", "calls the tensor method `.sum()`"),
    "annotated_callee": ("""
        def f(x: Tensor, n):
            return helper(x, n)

        def helper(x: Tensor, n: int) -> Tensor:
            return x * n
        """, "n", "int", "passes it to `helper`, which takes an int"),
    "nothing_decides": ("""
        def f(x, y):
            return x * y
        """, "x", "Tensor", "nothing in the body decides"),
    "literal_default": ("""
        def f(x: Tensor, eps=1e-5):
            return x + eps
        """, "eps", "float", "its default is 1e-05"),
    "none_default_method_call": ("""
        def f(x: Tensor, mask=None):
            if mask is not None:
                x = x * mask.float()
            return x
        """, "mask", "Optional[Tensor]", "its default is None and line 12 calls the tensor method"),
    "none_default_torch_argument": ("""
        def f(x: Tensor, bias=None):
            if bias is not None:
                x = torch.add(bias, x)
            return x
        """, "bias", "Optional[Tensor]", "passes it to `torch.add`"),
    "none_default_range": ("""
        def f(x: Tensor, steps=None):
            if steps is not None:
                for _ in range(steps):
                    x = x * 2
            return x
        """, "steps", "Optional[int]", "passes it to `range`"),
    "none_default_condition": ("""
        def f(x: Tensor, flag=None):
            if flag is not None and flag:
                x = -x
            return x
        """, "flag", "Optional[bool]", "uses it as a condition"),
    "none_default_filled_in": ("""
        def f(x: Tensor, h=None):
            if h is None:
                h = torch.zeros_like(x)
            return x + h
        """, "h", "Optional[Tensor]", "assigns it a tensor"),
    "none_default_nothing_decides": ("""
        def f(x: Tensor, extra=None):
            return x
        """, "extra", "Optional[Tensor]", "nothing in the body decides"),
}


@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_inference(name: str) -> None:
    body, param, want, reason = INFERENCE[name]
    got, why = suggestion(body, param)
    assert got == want
    assert reason in why, why


def test_the_suggestion_is_spelled_with_the_files_imports() -> None:
    body = """
        def f(x, mask=None):
            return x * mask
        """
    header = "import torch as th\n"
    assert suggestion(body, "mask", header)[0] == "th.Tensor | None"
    header = "import typing\nimport torch\n"
    assert suggestion(body, "mask", header)[0] == "typing.Optional[torch.Tensor]"


@pytest.mark.parametrize("body,want", [
    ("""
        def f(x: Tensor):
            return torch.relu(x)
        """, "Tensor"),
    ("""
        def f(x: Tensor):
            y = torch.tanh(x)
            return y, x * 2
        """, "tuple[Tensor, Tensor]"),
    ("""
        def f(x: Tensor, n: int):
            if n > 2:
                return None
            return x.sum(-1)
        """, "Optional[Tensor]"),
    ("""
        def f(x: Tensor):
            return x.size(0) + 1
        """, "int"),
])
def test_a_missing_return_type_is_inferred_from_the_returns(tmp_path: Path, body: str, want: str) -> None:
    # (as TorchScript infers it: the generated function is annotated with what its returns join to)
    path = tmp_path / "model.py"
    path.write_text(HEADER + "\n@script" + textwrap.dedent(body), encoding="utf-8")
    compiled = compile_path(path, "model.py")
    assert compiled is not None
    assert re.search(rf"^def f\(.*\) -> {re.escape(want)}:$", compiled.text, re.M), compiled.text


# -- strict mode: the diagnostics -----------------------------------------------------------------
def diagnostics(tmp_path: Path, text: str) -> tuple[list[Diagnostic], str]:
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    try:
        compile_path(path, "model.py")
    except CompileError as e:
        return e.diagnostics, e.render()
    except UserError as e:
        return [e.diagnostic], e.diagnostic.render(text.splitlines())
    return [], ""


FORWARD = HEADER + """\
@script
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x, n, mask=None):
        y = torch.tanh(self.fc(x))
        for _ in range(n):
            y = y * 2
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return y
"""


def test_several_missing_annotations_are_one_error_with_the_whole_signature(tmp_path: Path) -> None:
    found, text = diagnostics(tmp_path, FORWARD)
    assert len(found) == 1
    line = FORWARD.splitlines().index("    def forward(self, x, n, mask=None):") + 1
    col = FORWARD.splitlines()[line - 1].index("x") + 1
    assert text == "\n".join([
        f"model.py:{line}:{col}: error: parameters `x` and `n` of `forward` have no type annotations",
        "   |",
        f"{line} |     def forward(self, x, n, mask=None):",
        "   |                       ^",
        "   = help: annotate them: "
        "def forward(self, x: Tensor, n: int, mask: Optional[Tensor] = None):",
    ])


def paste(text: str, hint: str) -> str:
    """`text` with the `def` line the help suggests in place of the one it replaces."""
    signature = hint.split("annotate them: ", 1)[1]
    name = re.match(r"def (\w+)\(", signature).group(1)  # type: ignore[union-attr]
    lines = text.splitlines(keepends=True)
    [i] = [i for i, line in enumerate(lines) if line.lstrip().startswith(f"def {name}(")]
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + signature + "\n"
    return "".join(lines)


PLAIN_HEADER = "import torch\nfrom torch import nn\n\nfrom transpiler import script\n"


@pytest.mark.parametrize("header", [HEADER, PLAIN_HEADER])
def test_the_suggested_signature_compiles(tmp_path: Path, header: str) -> None:
    text = FORWARD.replace(HEADER, header)
    [error], _ = diagnostics(tmp_path, text)
    assert error.hint is not None
    fixed = paste(text, error.hint)
    assert fixed != text
    if "Optional" not in header:
        assert "x: torch.Tensor" in fixed and "mask: torch.Tensor | None = None" in fixed
    assert diagnostics(tmp_path, fixed) == ([], "")


def test_one_missing_parameter_gets_its_annotation_and_why(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent("""
        @script
        def f(x: Tensor, heads) -> Tensor:
            b, t, c = x.shape
            return x.view(b, t, heads, c // heads)
        """)
    [error], rendered = diagnostics(tmp_path, text)
    assert error.message == "parameter `heads` has no type annotation"
    assert (error.loc.line, error.loc.col, error.loc.end_col) == (11, 17, 22)
    assert error.hint == ("annotate it: `heads: int` (line 13 passes it to `x.view`, which takes an int "
                          "there)")
    assert "   |                  ^^^^^\n" in rendered
    fixed = text.replace("heads) ->", "heads: int) ->")
    assert diagnostics(tmp_path, fixed) == ([], "")


def test_an_undecided_parameter_gets_the_tensor_default_as_an_example(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent("""
        @script
        def f(x, n: int) -> Tensor:
            return torch.zeros(n)
        """)
    [error], _ = diagnostics(tmp_path, text)
    assert error.hint is not None and error.hint.startswith("annotate it, e.g. `x: Tensor` if it is a tensor")


def test_a_submodule_without_a_return_annotation_is_called_for_its_inferred_result(tmp_path: Path) -> None:
    # The generic code calls the layer as a module (its forward is not compiled there) and
    # unpacks the pair its returns give; the module list's items are of one class.
    text = HEADER + textwrap.dedent("""
        class Gated(nn.Module):
            def __init__(self, width: int) -> None:
                super().__init__()
                self.proj = nn.Linear(width, 2 * width)

            def forward(self, x: Tensor):
                a, b = self.proj(x).chunk(2, dim=-1)
                return x + torch.tanh(a), torch.sigmoid(b)

        @script
        class Stack(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.ModuleList([Gated(8) for _ in range(3)])

            def forward(self, x: Tensor) -> Tensor:
                total = torch.zeros_like(x)
                for layer in self.layers:
                    x, s = layer(x)
                    total = total + s
                return x * total
        """)
    path = tmp_path / "stacked.py"
    path.write_text(text, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        from transpiler.cli import main as cli_main

        assert cli_main(["-q", str(path)]) == 0
        module = importlib.import_module("stacked")
        model, x = module.Stack(), torch.randn(2, 8)
        with torch.no_grad():
            with runtime.mode("strict"):
                got = model(x)
            with runtime.mode("off"):
                want = model(x)
        torch.testing.assert_close(got, want)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("stacked", None)
        sys.modules.pop("stacked_compiled", None)


def test_returns_of_different_types_need_an_annotation(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent("""
        @script
        def f(x: Tensor, n: int):
            if n > 0:
                return x
            return n
        """)
    [error], _ = diagnostics(tmp_path, text)
    assert error.message == "`f` returns values of different types: Tensor, int"
    assert error.hint == "annotate its return type"


def test_parameters_missing_and_no_return_type(tmp_path: Path) -> None:
    text = HEADER + textwrap.dedent("""
        @script
        def f(x, flag):
            if flag:
                return x.size(0)
            return x
        """)
    [error], _ = diagnostics(tmp_path, text)
    assert error.message == "parameters `x` and `flag` of `f` have no type annotations"
    assert error.hint == "annotate them: def f(x: Tensor, flag: bool):"


# -- compiled and run -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory):
    with case_directory(tmp_path_factory.mktemp("friction")) as directory:
        yield directory
    runtime.reset()


def test_a_script_file_types_none_and_literal_defaults_itself(workdir: Path) -> None:
    module, text = compiled_case(workdir, "friction_defaults", HEADER + textwrap.dedent("""
        @script
        def f(x: Tensor, mask=None, scale=2.0, steps=None) -> Tensor:
            y = x * scale
            if mask is not None:
                y = y.masked_fill(mask, 0.0)
            if steps is not None:
                for _ in range(steps):
                    y = y + 1
            return y
        """))
    assert "mask:Optional[Tensor]=None,scale:float=2.0,steps:Optional[int]=None" in "".join(text.split())
    x = torch.randn(3, 4)
    mask = torch.rand(3, 4) > 0.5
    for args in [(x,), (x, mask), (x, None, 0.5, 3), (x, mask, 1.0, 2)]:
        with runtime.mode("off"):
            expected = module.f(*args)
        with runtime.mode("strict"):
            got = module.f(*args)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


RECURSIVE = """
    import torch
    from torch import nn


    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x, mask=None, scale=1.0):
            y = torch.relu(self.fc(x)) * scale
            if mask is not None:
                y = y * mask.float()
            return y.sum(-1)
"""


@pytest.mark.parametrize("with_mask", [False, True])
def test_recursive_script_with_an_unannotated_none_default(tmp_path, monkeypatch, with_mask: bool) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    mask = torch.rand(2, 5, 8) > 0.5
    with imported_source(tmp_path, "friction_masked", RECURSIVE) as source:
        model = source.Masked().eval()
        with torch.no_grad():
            compiled = script(model, example_inputs=(x, mask) if with_mask else (x,))
            for args in [(x,), (x, mask), (x, None, 0.5), (torch.randn(3, 5, 8), mask[:1].expand(3, 5, 8))]:
                with runtime.mode("strict"):
                    got = compiled(*args)
                torch.testing.assert_close(got, model(*args), rtol=1e-5, atol=1e-5)
    [generated] = (tmp_path / "cache" / "jit").glob("*.py")
    assert "mask:Optional[Tensor]=None,scale:float=1.0" in "".join(generated.read_text().split())
    sys.modules.pop("friction_masked", None)

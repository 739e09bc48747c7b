"""Specialisation: shapes and dtypes from annotations and example inputs, the entry checks that
guard them (IR in, IR out; the Python they print), one compiled module serving every batch
size, and inputs that break a check taking the eager path (or raising under strict mode)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

import runtime
from codegen.python_function import FunctionEmitter
from examples import attention, conv_bn_relu, lstm_cell, mlp, optional_args, residual_block, rnn_cell, while_loop
from ir.core.parser import parse_program
from ir.passes.specialize import specialize
from runtime.errors import TorchscribeError
from closeness import assert_close_to_eager
from pass_text import after
from transpiler import script


def specialized(text: str) -> str:
    return after(text, specialize)


def test_annotated_shapes_become_one_check_per_tensor() -> None:
    out = specialized("""\
func @f(%x: Tensor[B, T, 4], %h: Optional[Tensor[B, 8]], %s: tuple[Tensor[B, T], int]) -> Tensor {
  func.return(%x)
}
""")
    assert out == """\
func @f(%x: Tensor[B, T, 4], %h: Optional[Tensor[B, 8]], %s: tuple[Tensor[B, T], int]) -> Tensor[B, T, 4] {
  py.check_tensor(%x) {path = (), dtype = None, device = None, shape = ("B", "T", 4), optional = False}
  py.check_tensor(%h) {path = (), dtype = None, device = None, shape = (None, 8), optional = True}
  py.check_tensor(%s) {path = (0,), dtype = None, device = None, shape = (None, None), optional = False}
  py.check_size(%h, %x) {path = (), dim = 0, expected = "B", symbols = (("B", 1, (), 0),), optional = True}
  py.check_size(%s, %x) {path = (0,), dim = 0, expected = "B", symbols = (("B", 1, (), 0),), optional = False}
  py.check_size(%s, %x) {path = (0,), dim = 1, expected = "T", symbols = (("T", 1, (), 1),), optional = False}
  func.return(%x)
}
"""


def test_checks_print_as_runtime_calls() -> None:
    program = parse_program("""\
func @f(%x: Tensor[B, T, 4], %h: Optional[Tensor[B, 8]]) -> Tensor {
  func.return(%x)
}
""")
    specialize(program)
    lines = [line.strip() for line in FunctionEmitter(program.funcs[0], None, set()).emit()]
    assert lines[1:5] == [
        '_guards.check_tensor(x, "x", shape=("B", "T", 4))',
        '_guards.check_tensor(h, "h", shape=(None, 8), optional=True)',
        "if h is not None:",
        '_guards.check_size(h, 0, x.size(0), "h")',
    ]


def test_a_function_without_facts_gets_no_checks() -> None:
    text = """\
func @f(%x: Tensor, %n: int) -> Tensor {
  func.return(%x)
}
"""
    assert specialized(text) == text


# -- one compiled module, every batch size --------------------------------------------------------
def rebatch(values: Any, batch: int, n: int, gen: torch.Generator) -> Any:
    """The inputs with every leading size equal to `batch` changed to `n` (fresh values)."""
    if isinstance(values, torch.Tensor):
        if values.dim() == 0 or values.shape[0] != batch:
            return values
        shape = (n, *values.shape[1:])
        if values.dtype.is_floating_point:
            return torch.randn(shape, generator=gen, dtype=values.dtype)
        if values.dtype == torch.bool:
            return torch.rand(shape, generator=gen) < 0.7
        return torch.randint(0, 3, shape, generator=gen, dtype=values.dtype)
    if isinstance(values, (tuple, list)):
        return type(values)(rebatch(v, batch, n, gen) for v in values)
    return values


def first_batch(values: Any) -> int:
    for v in values:
        if isinstance(v, torch.Tensor) and v.dim() >= 1:
            return int(v.shape[0])
        if isinstance(v, (tuple, list)):
            return first_batch(v)
    raise AssertionError("no tensor input")


CASES = {
    "mlp": mlp.make_example, "attention": attention.make_example, "conv_bn_relu": conv_bn_relu.make_example,
    "residual_block": residual_block.make_example, "rnn_cell": rnn_cell.make_example,
    "lstm_cell": lstm_cell.make_example, "optional_args": optional_args.make_example,
    "newton_sqrt": while_loop.make_example,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_module_serves_batch_1_3_and_64(name: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = CASES[name]()
    if name == "optional_args":
        inputs = inputs[:2]  # the mask's leading size is the batch too
    compiled = script(model, example_inputs=inputs)
    batch = first_batch(inputs)
    gen = torch.Generator().manual_seed(0)
    for n in (1, 3, 64):
        args = rebatch(inputs, batch, n, gen)
        if name == "newton_sqrt":
            args = (args[0].abs() + 0.5, *args[1:])
        with torch.no_grad(), runtime.mode("off"):
            expected = model(*args)
        with torch.no_grad(), runtime.mode("strict"):  # strict: a failed check would raise
            got = compiled(*args)
        assert_close_to_eager(got, expected, f"batch {n}")
    generated = next((tmp_path / "jit").glob("*.py")).read_text()
    assert '"B"' in generated, "the batch size stays symbolic"


# -- inputs that break a check -------------------------------------------------------------------
@pytest.fixture
def sqrt_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    runtime.reset()
    fn, inputs = while_loop.make_example()
    return fn, script(fn, example_inputs=inputs), inputs[0]


@pytest.mark.parametrize("kind", ["dtype", "rank", "size"])
def test_a_failed_check_runs_eagerly(sqrt_compiled, kind: str) -> None:
    fn, compiled, x = sqrt_compiled
    bad = {"dtype": x.double(), "rank": x[0], "size": x[:, :-1]}[kind]
    with runtime.mode("off"):
        expected = fn(bad)
    before = sum(runtime.fallback_counts().values())
    torch.testing.assert_close(compiled(bad), expected, rtol=0, atol=0)
    assert sum(runtime.fallback_counts().values()) == before + 1
    torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)  # the compiled code still serves
    assert sum(runtime.fallback_counts().values()) == before + 1


@pytest.mark.parametrize("kind, message", [
    ("dtype", "expected dtype float32, got float64"),
    ("rank", "expected 2 dimensions, got 1"),
    ("size", "expected size 256 in dimension 1, got 255"),
    ("device", "expected a cpu tensor, got meta"),
])
def test_a_failed_check_raises_in_strict_mode(sqrt_compiled, kind: str, message: str) -> None:
    _, compiled, x = sqrt_compiled
    bad = {"dtype": x.double(), "rank": x[0], "size": x[:, :-1], "device": x.to("meta")}[kind]
    with runtime.mode("strict"), pytest.raises(TorchscribeError, match=message):
        compiled(bad)


def test_a_changed_module_attribute_runs_eagerly(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = attention.make_example()
    compiled = script(model, example_inputs=inputs)
    assert "B, 32, 4, 16" in next((tmp_path / "jit").glob("*.py")).read_text(), "head sizes were folded"
    model.train()  # the dropout now draws: the compiled code was specialised to eval
    with torch.no_grad(), runtime.mode("strict"), pytest.raises(TorchscribeError, match="self.dropout.training"):
        compiled(*inputs)


def test_annotations_guard_the_ahead_of_time_path(tmp_path) -> None:
    source = tmp_path / "annotated_model.py"
    source.write_text(textwrap.dedent("""\
        from typing import Annotated
        import torch
        from torch import Tensor
        from transpiler import script

        @script
        def scale(x: Annotated[Tensor, "B 4"], w: Annotated[Tensor, "4"]) -> Tensor:
            return x * w * x.shape[1]
    """))
    from transpiler.cli import main

    assert main(["-q", str(source)]) == 0
    text = (tmp_path / "annotated_model_compiled.py").read_text()
    assert '_guards.check_tensor(x, "x", shape=("B", 4))' in text
    assert "* 4" in text, "the annotated size was folded"
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("annotated_model")
        runtime.reset()
        x, w = torch.randn(3, 4), torch.randn(4)
        with runtime.mode("strict"):
            torch.testing.assert_close(module.scale(x, w), x * w * 4, rtol=0, atol=0)
            with pytest.raises(TorchscribeError, match="expected size 4 in dimension 1, got 5"):
                module.scale(torch.randn(3, 5), torch.randn(5))
        x5 = torch.randn(3, 5)
        torch.testing.assert_close(module.scale(x5, torch.ones(5)), x5 * 5, rtol=0, atol=0)  # eagerly
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("annotated_model", None)
        sys.modules.pop("annotated_model_compiled", None)


def test_the_pipeline_specializes_every_example(tmp_path: Path) -> None:
    """The committed examples went through the pass (ahead of time: annotations only)."""
    root = Path(__file__).resolve().parent.parent / "examples"
    assert any("_guards.check_tensor(" in p.read_text() for p in root.glob("*_compiled.py"))


def test_an_instance_inlines_its_submodules_of_the_same_file(tmp_path, monkeypatch) -> None:
    """script(instance) compiles the submodules' classes of the model's file too, so their
    bodies are inlined and their configuration (strides, eps, None biases) is folded."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    model, inputs = residual_block.make_example()
    compiled = script(model, example_inputs=inputs)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    forward = "\n".join(line for line in text[text.index("def ResNetStage_forward"):].splitlines()
                        if not line.strip().startswith(("#", "//")))
    assert "self.block1(" not in forward and "block1(x)" not in forward
    compact = " ".join(forward.split()).replace("( ", "(").replace(" )", ")")  # before line wrapping
    # (the stride and padding folded in; the dilation and groups, their defaults, left out)
    assert "F.conv2d(x, _guards.at(block1, \"conv1.weight\"), None, (2, 2), (1, 1))" in compact
    with torch.no_grad(), runtime.mode("strict"):
        assert_close_to_eager(compiled(*inputs), model(*inputs))


WINDOWS = """\
from typing import List
import torch
from torch import Tensor, nn


def shifted(x: Tensor, window_size: List[int], shift_size: List[int]) -> Tensor:
    _, H, W, _ = x.shape
    shift_size = shift_size.copy()
    if window_size[0] >= H:
        shift_size[0] = 0
    if window_size[1] >= W:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = torch.roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    x = x * 2.0
    if sum(shift_size) > 0:
        x = x + float(shift_size[1])
    return x.reshape(-1, window_size[0] * window_size[1], x.shape[-1])


class Windows(nn.Module):
    def __init__(self, window_size: List[int], shift_size: List[int]) -> None:
        super().__init__()
        self.window_size = window_size
        self.shift_size = shift_size

    def forward(self, x: Tensor) -> Tensor:
        return shifted(x, self.window_size, self.shift_size)


class Changing(Windows):
    def forward(self, x: Tensor) -> Tensor:
        self.shift_size[1] = 0
        return shifted(x, self.window_size, self.shift_size)
"""


@pytest.mark.parametrize("size, folded", [(14, "torch.roll(x, shifts=(-3, -1), dims=(1, 2))"), (7, None)])
def test_pinned_list_attributes_fold_through_copies_and_stores(tmp_path, monkeypatch, size: int,
                                                                folded: str | None) -> None:
    """swin's window and shift sizes: lists of a module, checked on entry, that the code copies
    and sets to 0 where the window covers the feature map. Every branch on them folds; the
    roll is left only where the shift is not 0."""
    from source_module import imported_source

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "pinned_windows", WINDOWS) as module:
        model = module.Windows([7, 7], [3, 1])
        x = torch.randn(2, size, size, 4)
        compiled = script(model, example_inputs=(x,))
        text = next((tmp_path / "cache" / "jit").glob("Windows_*.py")).read_text()
        code = [line for line in text[text.index("def Windows_forward("):].splitlines()
                if not line.strip().startswith(("#", "_guards.check_value"))]
        assert not any(word in line for line in code for word in ("if ", "sum(", "shift_size", "window_size["))
        assert ("torch.roll" in "\n".join(code)) == (folded is not None)
        if folded:
            assert folded in "\n".join(code)
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
        model.shift_size[1] = 2  # the entry check sees it: eager from now on
        with runtime.mode("strict"), pytest.raises(TorchscribeError, match="self.shift_size"):
            compiled(x)


def test_a_list_attribute_the_code_changes_is_not_folded(tmp_path, monkeypatch) -> None:
    """The entry check pins the list as it was on entry; a read after the code stores into it
    must see the store."""
    from source_module import imported_source

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "changing_windows", WINDOWS) as module:
        model, reference = module.Changing([7, 7], [3, 1]), module.Changing([7, 7], [3, 1])
        x = torch.randn(2, 14, 14, 4)
        compiled = script(model, example_inputs=(x,))
        text = next((tmp_path / "cache" / "jit").glob("Changing_*.py")).read_text()
        assert "sum(shift_size)" in text
        with runtime.mode("strict"):
            torch.testing.assert_close(compiled(x), reference(x), rtol=0, atol=0)
        assert model.shift_size == reference.shift_size == [3, 0]

"""Strict mode reports every error of a file in one run (transpiler/recover.py).

Lowering goes on past an error: a failed expression stands for a value of type ERROR, a failed
statement is left out and binds its names to such values, and what reads one reports nothing
more. Cases use the `# error: COL: TEXT` markers of test_diagnostics.py: the file must report
exactly the marked diagnostics, in source order.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import program_gen as pg
from test_diagnostics import diagnostics_of, expected, model_text, run_cli
from transpiler.pipeline import lower_file
from transpiler.diagnostics import CompileError
from transpiler.source import SourceFile

CASES = {
    # Independent errors of every kind, in one function and across functions: all reported.
    "independent_errors": """
        @script
        def helper(x: Tensor, n: Frobnicate) -> Tensor:  # error: 26: unsupported type annotation `Frobnicate`
            return x.frob() * 2  # error: 12: tensors have no method `frob`

        @script
        def first(x: Tensor) -> Tensor:
            y = torch.relu(x, 3, 4)  # error: 9: takes 1 positional arguments but 3 were given
            w = x.no_such_method()  # error: 9: tensors have no method `no_such_method`
            m = torch.matmul(x, "a")  # error: 9: argument 'other' must be Tensor, not str
            v = x + "a"  # error: 9: unsupported operand types for +
            for row in x:  # error: 16: iterating over a tensor is not supported
                u = torch.sigmoid(x, x)  # error: 13: takes 1 positional arguments
            return x

        @script
        def second(x: Tensor) -> Tensor:
            a = x.shapez  # error: 11: tensors have no attribute `shapez`
            b = helper(x, 2)
            return b
        """,
    # What reads an ERROR value reports nothing: only `bad` here.
    "no_cascade_through_names": """
        @script
        def f(x: Tensor) -> Tensor:
            y = bad(x)  # error: 9: `bad` is not defined here
            z = y + 1
            t = z.sum(dim=0).frob()
            if t > 0:
                z = torch.relu(z)
            for r in t:
                z = z * r
            return z
        """,
    # ...nor through expressions: `relu` of a failed call, a method of what it gives.
    "no_cascade_through_expressions": """
        @script
        def f(x: Tensor) -> Tensor:
            y = torch.relu(x.frob()) + torch.tanh(x, 1)  # error: 20: no method `frob` # error: 32: takes 1 positional
            return y.view(-1)
        """,
    # A statement that fails binds its names to ERROR values: their uses report nothing.
    "failed_statement_binds_error_values": """
        @script
        def f(x: Tensor) -> Tensor:
            a, b = x  # error: 5: unpacking a tensor is not supported
            c: Frob = x  # error: 8: unsupported type annotation `Frob`
            return a + b + c.frob()
        """,
    # A signature that does not type: its errors once, its body still checked, its callers silent.
    "signature_errors": """
        @script
        def helper(x: Tensor, n: Frob) -> Tensor:  # error: 26: unsupported type annotation `Frob`
            return x.frob() * n  # error: 12: tensors have no method `frob`

        @script
        def unannotated(x, k):  # error: 17: parameters `x` and `k` of `unannotated`
            return x.frob3()

        @script
        def caller(x: Tensor) -> Tensor:
            a = helper(x, 2)
            b = unannotated(a, 3)
            return helper(a, 1) + b.anything() + x.frob4()  # error: 42: no method `frob4`
        """,
    # A parameter without an annotation: its body is checked as if it had the one suggested,
    # where the body decides it; else it is ERROR.
    "missing_annotation_body_checked": """
        @script
        def f(x, n: int) -> Tensor:  # error: 7: parameter `x` has no type annotation
            y = torch.relu(x)
            return y.frob() + n  # error: 12: no method `frob`

        @script
        def g(x, k) -> Tensor:  # error: 7: parameters `x` and `k` of `g`
            return x.frob() + k
        """,
    # A condition that is not a bool: reported, and both sides still checked.
    "bad_conditions": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if x:  # error: 8: a tensor cannot be used as a condition
                y = x.frob()  # error: 13: no method `frob`
            else:
                y = x
            while x.sum():  # error: 11: a tensor cannot be used as a condition
                x = x.frob2()  # error: 13: no method `frob2`
            return y + x.frob3()
        """,
    # A loop whose carried types widen is lowered again: its body's errors come once.
    "loop_lowered_twice": """
        from typing import Annotated

        @script
        def f(x: Annotated[Tensor, "B C"], n: int) -> Tensor:
            h = x
            for i in range(n):
                y = torch.relu(h, 1)  # error: 13: torch.relu(Tensor, int): takes 1 positional
                h = h.sum(0)
            return h
        """,
    # A `return` that fails does not make the function fall off its end.
    "failed_return": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if n > 0:
                return x.frob()  # error: 16: no method `frob`
            return x + "s"  # error: 12: unsupported operand types for +
        """,
    # Unsupported syntax (the check pass) and type errors of the same function, in one run.
    "check_and_lowering_errors_together": """
        @script
        def f(x: Tensor) -> Tensor:
            ys = {x * i for i in range(3)}  # error: 10: set comprehensions are not supported
            z = ys[0].frob()
            w = x.frob2()  # error: 9: no method `frob2`
            return w
        """,
    # A class's forward and the methods it calls: each one's errors.
    "methods": """
        @script
        class Cell(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def forward(self, x: Tensor, h: Tensor) -> Tensor:
                g = self.gate(x, h)
                q = self.fc(self.nothing(x))  # error: 26: `Cell` has no attribute `nothing`
                return g * torch.tanh(h, 1)  # error: 20: takes 1 positional arguments

            def gate(self, x: Tensor, h: Tensor) -> Tensor:
                return torch.sigmoid(x + h.frob())  # error: 34: no method `frob`
        """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_error_in_one_run(tmp_path: Path, name: str) -> None:
    text = model_text(CASES[name])
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    want = expected(text)
    got = diagnostics_of(path)
    listing = "\n\n".join(d.render(text.splitlines()) for d in got)
    assert [(d.loc.line, d.loc.col + 1) for d in got] == [(line, col) for line, col, _ in want], listing
    for d, (_, _, message) in zip(got, want):
        assert message in d.message, listing


def test_rendering_lists_every_error_and_counts_them(tmp_path: Path) -> None:
    text = model_text(CASES["independent_errors"])
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CompileError) as caught:
        lower_file(SourceFile.read(path, "model.py"))
    rendered = str(caught.value)
    lines = text.splitlines()
    for d in caught.value.diagnostics:
        assert f"model.py:{d.loc.line}:{d.loc.col + 1}: error: {d.message}" in rendered
        assert f"{d.loc.line} | {lines[d.loc.line - 1]}" in rendered  # the line, and under it the caret
        assert f" | {' ' * d.loc.col}^" in rendered
    assert rendered.endswith(f"\n\n{len(caught.value.diagnostics)} errors")


def test_cli_reports_every_error_and_writes_nothing(tmp_path: Path) -> None:
    text = model_text(CASES["independent_errors"])
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    done = run_cli(str(path))
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 9, done.stderr
    lines = [int(re.search(r":(\d+):\d+: error: ", e).group(1)) for e in errors]  # type: ignore[union-attr]
    assert lines == sorted(lines)
    assert "9 errors" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.py"]


MODULE = """\
import torch
from torch import nn


def helper(x, n: int):
    return x.frob() * n


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        a = h.no_such()
        b = helper(h, 2) + helper(h, 3)
        return torch.relu(h, 1, 2) + b
"""


def test_script_instance_raises_one_error_with_every_diagnostic(tmp_path: Path, monkeypatch) -> None:
    import torch

    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE", "strict")
    monkeypatch.setenv("TORCHSCRIBE_JIT_CACHE", "off")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "recovery_block.py"
    path.write_text(MODULE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("recovery_block", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "recovery_block", module)
    spec.loader.exec_module(module)
    with pytest.raises(CompileError) as caught:
        script(module.Block(), example_inputs=(torch.randn(2, 4),))
    got = [(d.loc.line, d.message) for d in caught.value.diagnostics]
    assert [line for line, _ in got] == [6, 16, 18], str(caught.value)  # helper's once, for both calls
    assert "no method `frob`" in got[0][1] and "no method `no_such`" in got[1][1] and "relu" in got[2][1]
    message = str(caught.value)
    assert all(d.message in message for d in caught.value.diagnostics) and "3 errors" in message


# -- generated programs with k independent errors put in -------------------------------------------
# Each binds a fresh name nothing reads, so none can cause another; `{x}` is a tensor parameter.
BROKEN_STATEMENTS = [
    ("_e{i} = {x}.no_such_method_{i}()", "no method"),
    ("_e{i} = {x} + 'text'", "unsupported operand types"),
    ("_e{i} = torch.relu({x}, {x}, {x})", "positional arguments"),
    ("_e{i} = undefined_name_{i}", "is not defined here"),
    ("_e{i}: Frob{i} = {x}", "unsupported type annotation"),
    ("_e{i} = {x}.no_attribute_{i}", "no attribute"),
]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(prog=pg.programs(), data=st.data())
def test_generated_programs_report_each_inserted_error(tmp_path_factory, prog: pg.Program, data) -> None:
    lines = prog.source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def f("))
    # Top-level statements of f's body (not an `else:`/`elif` of a top-level `if`).
    spots = [i for i in range(start + 1, len(lines))
             if lines[i].startswith("    ") and not lines[i].startswith("     ")
             and not lines[i].lstrip().startswith(("else", "elif"))]
    # An `if` on a condition of literals (`if 0 <= 2 < 3:`) is decided when compiling, and only
    # the side Python takes is lowered (lower_branches.if_stmt): what follows it may be on the
    # other side, where no error is reported. Errors go before such an `if` only.
    decided = [i for i in spots if re.fullmatch(r"if [-+*/%<>=!()0-9. ]+:", lines[i].strip())]
    spots = [i for i in spots if not decided or i <= decided[0]]
    chosen = data.draw(st.lists(st.sampled_from(spots), min_size=1, max_size=4), label="spots")
    kinds = data.draw(st.lists(st.sampled_from(BROKEN_STATEMENTS), min_size=len(chosen), max_size=len(chosen)),
                      label="kinds")
    x = prog.tensor_params[0][0]
    inserted: dict[int, list[tuple[str, str]]] = {}
    for n, (spot, (template, message)) in enumerate(zip(chosen, kinds)):
        inserted.setdefault(spot, []).append(("    " + template.format(i=n, x=x), message))
    out: list[str] = []
    want: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        for text, message in inserted.get(i, []):
            out.append(text)
            want.append((len(out), message))
        out.append(line)
    path = tmp_path_factory.mktemp("gen") / "model.py"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    with pytest.raises(CompileError) as caught:
        lower_file(SourceFile.read(path, "model.py"))
    got = caught.value.diagnostics
    assert [d.loc.line for d in got] == [line for line, _ in want], str(caught.value)
    for d, (_, message) in zip(got, want):
        assert message in d.message, str(caught.value)


def test_a_callee_that_fails_reports_its_errors_whatever_it_is_passed(tmp_path: Path, monkeypatch) -> None:
    """script(instance): a helper lowered for its call reports its own errors, even where that
    call passes a value an earlier error made."""
    import torch

    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE", "strict")
    monkeypatch.setenv("TORCHSCRIBE_JIT_CACHE", "off")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "recovery_callee.py"
    path.write_text(MODULE.replace("b = helper(h, 2) + helper(h, 3)", "b = helper(a, 2)"),
                    encoding="utf-8")
    spec = importlib.util.spec_from_file_location("recovery_callee", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "recovery_callee", module)
    spec.loader.exec_module(module)
    with pytest.raises(CompileError) as caught:
        script(module.Block(), example_inputs=(torch.randn(2, 4),))
    assert [d.loc.line for d in caught.value.diagnostics] == [6, 16, 18], str(caught.value)


def test_permissive_mode_keeps_what_fails_as_python(tmp_path: Path) -> None:
    """Recovery is strict mode's: in permissive mode each failing expression stays Python, as before."""
    text = model_text("""
        @script(permissive=True)
        def f(x: Tensor) -> Tensor:
            w = x.no_such_method()
            v = x + "a"
            return x + w
        """)
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    program, _ = lower_file(SourceFile.read(path, "model.py"))
    assert [b.reason for b in program.breaks] == ["tensors have no method `no_such_method`",
                                                  "unsupported operand types for +: Tensor and str"]
    assert "<error>" not in str([v.type for f in program.funcs for op in f.walk() for v in op.results])


def test_the_verifier_refuses_an_error_value(tmp_path: Path) -> None:
    """Passes never see what a failed lowering made: the verifier says so if one gets through."""
    from ir.core import ops
    from ir.core.types import ERROR, TupleType, TENSOR
    from ir.core.verifier import VerifyError, verify

    text = model_text("""
        @script
        def f(x: Tensor) -> Tensor:
            return x
        """)
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    for t in (ERROR, TupleType((TENSOR, ERROR))):
        program, _ = lower_file(SourceFile.read(path, "model.py"))
        verify(program)
        body = program.funcs[0].body
        body.ops.insert(0, ops.UninitializedOp([], [t]))
        body.ops[0].parent = body
        with pytest.raises(VerifyError, match="error type"):
            verify(program)

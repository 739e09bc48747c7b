"""User-facing compile errors: what is reported, where, and how the CLI shows it.

Each case is a model file whose offending lines carry `# error: COL: TEXT` markers: COL is the
1-based column where the caret starts and TEXT a substring of the message. Compiling the file
must report exactly the marked diagnostics, no more and no fewer.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transpiler.compile import compile_path
from transpiler.diagnostics import CompileError, Diagnostic, UserError

ROOT = Path(__file__).resolve().parent.parent

HEADER = """\
import math
from typing import Optional, Union

import torch
from torch import Tensor, nn

from transpiler import script
"""

MARKER = re.compile(r"#\s*error:\s*(\d+):\s*([^#]*)")

# -- the check pass: unsupported syntax, all of it reported at once -------------------------------
CHECK_CASES = {
    "set_comprehension": """
        @script
        def f(x: Tensor) -> Tensor:
            ys = {x * i for i in range(3)}  # error: 10: set comprehensions are not supported
            return x
        """,
    "dict_and_set_comprehensions": """
        @script
        def f(x: Tensor) -> Tensor:
            a = {i: x for i in range(3)}  # error: 9: dict comprehensions are not supported
            b = {i for i in range(3)}  # error: 9: set comprehensions are not supported
            return x
        """,
    "generator_expression": """
        @script
        def f(x: Tensor) -> int:
            return max(i for i in range(3))  # error: 16: generator expressions are not supported
        """,
    "lambda": """
        @script
        def f(x: Tensor) -> Tensor:
            g = lambda t: t + 1  # error: 9: lambda expressions are not supported
            return x
        """,
    "dict_and_set_displays": """
        @script
        def f(x: Tensor) -> Tensor:
            d = {"a": x, 1: x}  # error: 9: dict displays are only supported with distinct literal string keys
            s = {1, 2}  # error: 9: set displays are not supported
            return x
        """,
    "bare_raise_and_raise_from": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if n > 2:
                raise  # error: 9: a bare `raise` is not supported
            raise ValueError("bad") from None  # error: 29: `raise ... from ...` is not supported
        """,
    "starred_call_arguments": """
        @script
        def f(x: Tensor, shape: list[int]) -> Tensor:
            y = x.view(*shape)
            z = torch.add(*shape)  # error: 19: `*` arguments are not supported
            return torch.cat(**shape)  # error: 22: `**` arguments are not supported
        """,
    "starred_parameters": """
        @script
        def f(x: Tensor, *rest: Tensor, **options: int) -> Tensor:  # error: 18: `*rest` parameters # error: 33: `**options` parameters
            return x
        """,
    "positional_only_parameters": """
        @script
        def f(x: Tensor, /, y: Tensor, *, z: Tensor) -> Tensor:  # error: 18: positional-only parameters
            return x
        """,
    "try_statement": """
        @script
        def f(x: Tensor) -> Tensor:
            try:  # error: 5: try statements are not supported
                y = x + 1
            except RuntimeError:
                y = x
            return y
        """,
    "with_statement_body_is_still_checked": """
        @script
        def f(x: Tensor) -> Tensor:
            with open("log.txt"):  # error: 5: with statements are not supported here
                y = {x for _ in range(2)}  # error: 13: set comprehensions
            return x
        """,
    "with_that_does_not_turn_grad_off": """
        @script
        def f(x: Tensor) -> Tensor:
            with torch.enable_grad():  # error: 5: with statements are not supported here
                x = x + 1
            with torch.no_grad() as g:  # error: 5: with statements are not supported here
                x = x + 1
            with torch.inference_mode(False):  # error: 5: with statements are not supported here
                x = x + 1
            with torch.no_grad(), torch.set_grad_enabled(False):
                x = x + 1
            return x
        """,
    "raise_and_assert": """
        @script
        def f(x: Tensor) -> Tensor:
            assert x.dim() == 2
            if x.dim() != 2:
                raise  # error: 9: a bare `raise` is not supported
            return x
        """,
    "global_nonlocal_del_import": """
        @script
        def f(x: Tensor) -> Tensor:
            global COUNT  # error: 5: global statements are not supported
            import os  # error: 5: imports inside compiled functions are not supported
            from math import pi  # error: 5: imports inside compiled functions are not supported
            y = x + 1
            del y  # error: 5: del statements are not supported
            return x
        """,
    "nested_definitions": """
        @script
        def f(x: Tensor) -> Tensor:
            def inner(t: Tensor) -> Tensor:  # error: 9: nested function definitions are not supported
                return t
            class Box:  # error: 11: nested class definitions are not supported
                pass
            return x
        """,
    "async_await_yield": """
        @script
        async def f(x: Tensor) -> Tensor:  # error: 1: async functions cannot be compiled
            y = await x  # error: 9: await is not supported
            return y

        @script
        def g(x: Tensor) -> Tensor:
            yield x  # error: 5: yield is not supported
        """,
    "walrus_evaluated_sometimes": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if n > 0 and (m := n + 1) > 2:  # error: 19: an assignment expression (:=) in `and`/`or`, a conditional expression, a while condition or a comprehension is not supported
                return x
            y = x if n > 1 else (z := -x)  # error: 26: an assignment expression (:=) in `and`/`or`
            while (k := n - 1) > 0:  # error: 12: an assignment expression (:=) in `and`/`or`
                n -= 1
            return -y
        """,
    "for_else_and_while_else": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            for i in range(n):
                x = x + 1
            else:  # error: 5: `else` on a for loop is not supported
                x = x - 1
            while n > 0:
                n -= 1
            else:  # error: 5: `else` on a while loop is not supported
                x = x * 2
            return x
        """,
    "decorators_on_methods": """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.k = 2

            def forward(self, x: Tensor) -> Tensor:
                return self.scale(x) * self.factor()

            @staticmethod
            def scale(x: Tensor) -> Tensor:
                return x

            @classmethod  # error: 5: decorator `@classmethod` on a compiled method
            def factor(cls) -> float:
                return 2.0
        """,
    "decorator_on_a_function": """
        @script
        @torch.enable_grad()  # error: 1: decorator `@torch.enable_grad()` on a compiled function
        def f(x: Tensor) -> Tensor:
            return x
        """,
    "non_literal_default": """
        @script
        def f(x: Tensor, k: float = math.sqrt(2.0)) -> Tensor:  # error: 29: default values must be literals
            return x * k
        """,
    "byte_and_complex_literals": """
        @script
        def f(x: Tensor) -> Tensor:
            s = b"raw"  # error: 9: byte strings are not supported
            z = 1j  # error: 9: complex literals are not supported
            return x
        """,
    "reached_helper_method_is_checked": """
        @script
        class M(nn.Module):
            def forward(self, x: Tensor) -> Tensor:
                return self.helper(x)

            def helper(self, x: Tensor) -> Tensor:
                ys = {x for _ in range(2)}  # error: 14: set comprehensions
                return x
        """,
    # A function whose body the check rejected is still lowered: its other errors come in the same
    # run, and what lowering says of the construct the check reported is left out.
    "check_errors_and_lowering_errors_of_the_same_function": """
        @script
        def f(x: Tensor, flag: bool) -> Tensor:
            g = lambda t: t  # error: 9: lambda expressions
            z = g(x)
            if flag:
                y = x
            return y + z  # error: 12: `y` is not bound on every path
        """,
}

# -- lowering: semantic errors ------------------------------------------------------------------
LOWERING_CASES = {
    "missing_parameter_annotation": """
        @script
        def f(x, y: Tensor) -> Tensor:  # error: 7: parameter `x` has no type annotation
            return y
        """,
    "returns_of_different_types": """
        @script
        def f(x: Tensor, n: int):  # error: 5: `f` returns values of different types: Tensor, int
            if n > 0:
                return x
            return n
        """,
    "unsupported_annotation": """
        @script
        def f(x: Tensor, d: set[int]) -> Tensor:  # error: 21: unsupported type annotation `set[int]`
            return x
        """,
    "union_other_than_optional": """
        @script
        def f(x: Tensor) -> Union[Tensor, int]:  # error: 21: unions other than Optional are not supported
            return x
        """,
    "unknown_torch_function": """
        @script
        def f(x: Tensor) -> Tensor:
            return torch.not_a_function(x)  # error: 12: `torch.not_a_function` is not a function the compiler knows
        """,
    "wrong_keyword_argument": """
        @script
        def f(x: Tensor) -> Tensor:
            return torch.sum(x, dimension=0)  # error: 25: unexpected keyword argument 'dimension'
        """,
    "module_level_function_with_a_wrapper": """
        import functools

        @functools.lru_cache
        def helper(x: Tensor) -> Tensor:
            return x

        @script
        def f(x: Tensor) -> Tensor:
            return helper(x)  # error: 12: `helper` is not compiled
        """,
    "helper_function_error_at_its_line": """
        def helper(x: Tensor) -> Tensor:
            return x.frobnicate()  # error: 12: tensors have no method `frobnicate`

        @script
        def f(x: Tensor) -> Tensor:
            return helper(x)
        """,
    "unknown_self_attribute": """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = nn.Linear(4, 4)

            def forward(self, x: Tensor) -> Tensor:
                return self.linaer(x)  # error: 21: `M` has no attribute `linaer`
        """,
    "instance_not_named_self": """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = 2.0

            def forward(m, x: Tensor) -> Tensor:  # error: 17: compiled methods name their instance `self`
                return x
        """,
    "attribute_type_not_inferable": """
        def make_scale() -> float:
            return 2.0

        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.scale = make_scale()

            def forward(self, x: Tensor) -> Tensor:
                return x * self.scale  # error: 25: the type of `self.scale` cannot be determined from __init__
        """,
    "tensor_as_condition": """
        @script
        def f(x: Tensor) -> Tensor:
            if x:  # error: 8: a tensor cannot be used as a condition
                return x
            return -x
        """,
    "bound_in_one_branch_only": """
        @script
        def f(x: Tensor, flag: bool) -> Tensor:
            if flag:
                y = x + 1
            return y  # error: 12: `y` is not bound on every path to here: it is assigned on only one side of the if
        """,
    "assigned_only_in_loop": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            for i in range(n):
                y = x * i
            return y  # error: 12: it is assigned only inside the loop
        """,
    "loop_carried_type_change": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            acc = 0
            for i in range(n):
                acc = acc + x  # error: 9: `acc` is an int before the loop and becomes a Tensor in its body
            return acc
        """,
    "tuple_index_out_of_range": """
        @script
        def f(x: Tensor) -> Tensor:
            pair = (x, x)
            return pair[2]  # error: 17: tuple index 2 out of range
        """,
    "unpacking_count_mismatch": """
        @script
        def f(x: Tensor) -> Tensor:
            a, b, c = (x, x)  # error: 5: cannot unpack a tuple of 2 values into 3 names
            return a
        """,
    "break_outside_loop": """
        @script
        def f(x: Tensor) -> Tensor:
            break  # error: 5: break outside a loop
            return x
        """,
    "range_of_a_float": """
        @script
        def f(x: Tensor) -> Tensor:
            for i in range(2.5):  # error: 20: range() takes ints, not a float
                x = x + 1
            return x
        """,
    "is_against_a_value": """
        @script
        def f(x: Tensor, n: int) -> Tensor:
            if n is 3:  # error: 8: `is` is only supported against None
                return x
            return -x
        """,
    "iterating_over_a_tensor": """
        @script
        def f(x: Tensor) -> Tensor:
            for row in x:  # error: 16: iterating over a tensor is not supported
                x = x + row
            return x
        """,
    "str_plus_tensor": """
        @script
        def f(x: Tensor) -> Tensor:
            return "a" + x  # error: 12: unsupported operand types for +: str and Tensor
        """,
    "return_type_mismatch": """
        @script
        def f(x: Tensor) -> int:
            return x + 1  # error: 12: returns a Tensor, but `f` is declared to return int
        """,
    "missing_return_on_a_path": """
        @script
        def f(x: Tensor, n: int) -> Tensor:  # error: 5: `f` can reach its end without returning a Tensor
            if n > 0:
                return x
        """,
    "non_literal_module_global": """
        SCALE = torch.tensor(2.0)

        @script
        def f(x: Tensor) -> Tensor:
            return x * SCALE  # error: 16: `SCALE` cannot be used as a value in compiled code
        """,
    "unsupported_builtin": """
        @script
        def f(x: Tensor) -> Tensor:
            print(x)  # error: 5: the builtin `print` is not supported
            return x
        """,
    "forward_missing": """
        @script
        class M(nn.Module):  # error: 7: `M` has no forward method to compile
            def __init__(self) -> None:
                super().__init__()
        """,
    "syntax_error": """
        @script
        def f(x: Tensor) -> Tensor:
            y = (x +  # error: 9: syntax error: '(' was never closed
            return y
        """,
    "several_errors_in_one_file": """
        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

            def forward(self, x: Tensor) -> Tensor:
                ys = {i: layer(x) for i, layer in enumerate(self.layers)}  # error: 14: dict comprehensions
                with open("log.txt"):  # error: 9: with statements
                    x = x + 1
                return x

        @script
        def g(x: Tensor) -> Tensor:
            if x:  # error: 8: a tensor cannot be used as a condition
                return x
            return -x

        @script
        def h(x, n: int) -> Tensor:  # error: 7: parameter `x` has no type annotation
            return torch.zeros(n)

        @script
        def k(x: Tensor) -> Tensor:
            return f"{x}"  # error: 12: returns a str
        """,
}


def model_text(body: str) -> str:
    return HEADER + "\n" + textwrap.dedent(body).lstrip("\n")


def expected(text: str) -> list[tuple[int, int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for col, message in MARKER.findall(line):
            found.append((number, int(col), message.strip()))
    return sorted(found)


def diagnostics_of(path: Path) -> list[Diagnostic]:
    try:
        compile_path(path, path.name)
    except CompileError as e:
        return e.diagnostics
    except UserError as e:
        return [e.diagnostic]
    return []


def check_markers(tmp_path: Path, body: str) -> list[Diagnostic]:
    text = model_text(body)
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    want = expected(text)
    got = diagnostics_of(path)
    listing = "\n\n".join(d.render(text.splitlines()) for d in got)
    assert [(d.loc.line, d.loc.col + 1) for d in got] == [(line, col) for line, col, _ in want], listing
    for d, (_, _, message) in zip(got, want):
        assert message in d.message, listing
        assert d.hint, f"no hint for: {d.message}"
        assert d.loc.file == "model.py"
    return got


@pytest.mark.parametrize("name", sorted(CHECK_CASES))
def test_check_pass(tmp_path: Path, name: str) -> None:
    check_markers(tmp_path, CHECK_CASES[name])


@pytest.mark.parametrize("name", sorted(LOWERING_CASES))
def test_lowering_errors(tmp_path: Path, name: str) -> None:
    check_markers(tmp_path, LOWERING_CASES[name])


def test_markers_are_parsed() -> None:
    text = "x = 1  # error: 5: one # error: 9: two\ny = 2\n"
    assert expected(text) == [(1, 5, "one"), (1, 9, "two")]


def test_diagnostics_are_sorted_and_underline_the_construct(tmp_path: Path) -> None:
    got = check_markers(tmp_path, LOWERING_CASES["several_errors_in_one_file"])
    assert got == sorted(got, key=lambda d: (d.loc.line, d.loc.col))
    comprehension = got[0]
    assert (comprehension.loc.end_col - comprehension.loc.col) == len("{i: layer(x) for i, layer in enumerate(self.layers)}")


@pytest.mark.parametrize("name,header", [
    ("try_statement", "try"),
    ("with_statement_body_is_still_checked", 'with open("log.txt")'),
    ("for_else_and_while_else", "else"),
    ("positional_only_parameters", "/"),
])
def test_compound_statements_underline_their_header(tmp_path: Path, name: str, header: str) -> None:
    first = check_markers(tmp_path, CHECK_CASES[name])[0]
    assert first.loc.end_line == first.loc.line
    assert first.loc.end_col - first.loc.col == len(header)


def test_code_that_is_not_compiled_is_not_checked(tmp_path: Path) -> None:
    """__init__, methods forward never reaches and undecorated functions may use anything."""
    text = model_text("""
        def make_layers(n: int) -> list:
            return [nn.Linear(4, 4) for _ in range(n)]

        @script
        class M(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
                self.names = {name: i for i, name in enumerate(["a", "b"])}

            def forward(self, x: Tensor) -> Tensor:
                for layer in self.layers:
                    x = layer(x)
                return x

            @torch.no_grad()
            def reset(self) -> None:
                with torch.no_grad():
                    for p in self.parameters():
                        p.zero_()

            def extra_repr(self) -> str:
                return f"layers={len(self.layers)}"
        """)
    path = tmp_path / "model.py"
    path.write_text(text, encoding="utf-8")
    assert compile_path(path, path.name) is not None


def test_rendering(tmp_path: Path) -> None:
    got = check_markers(tmp_path, CHECK_CASES["set_comprehension"])
    text = model_text(CHECK_CASES["set_comprehension"])
    rendered = got[0].render(text.splitlines())
    assert rendered.splitlines() == [
        "model.py:11:10: error: set comprehensions are not supported",
        "   |",
        "11 |     ys = {x * i for i in range(3)}  # error: 10: set comprehensions are not supported",
        "   |          ^^^^^^^^^^^^^^^^^^^^^^^^^",
        "   = help: compiled code has no sets; use a list comprehension (`[f(x) for x in xs]`)",
    ]


# -- the command line ---------------------------------------------------------------------------
GOOD = """
    @script
    def double(x: Tensor) -> Tensor:
        return x * 2
    """


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "transpiler.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )


def shown(path: Path) -> str:
    """How the CLI, run from the repository root, names a file in its diagnostics."""
    return os.path.relpath(path, ROOT)


def test_cli_reports_errors_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    text = model_text(LOWERING_CASES["several_errors_in_one_file"])
    path.write_text(text, encoding="utf-8")
    result = run_cli(str(path))
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert "Traceback" not in err
    want = expected(text)
    for line, col, message in want:
        assert f"{shown(path)}:{line}:{col}: error: {message}" in err
    line, col, _ = want[0]
    source_line = text.splitlines()[line - 1]
    comprehension = "{i: layer(x) for i, layer in enumerate(self.layers)}"
    assert f"{line} | {source_line}" in err
    assert f"{' ' * len(str(line))} | {' ' * (col - 1)}{'^' * len(comprehension)}\n" in err
    assert "   = help: compiled code has no dicts" in err
    assert err.count(": error: ") == len(want) == 5
    assert "nothing was written" in err
    assert not (tmp_path / "bad_compiled.py").exists()


def test_cli_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(model_text(LOWERING_CASES["syntax_error"]), encoding="utf-8")
    result = run_cli(str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{shown(path)}:11:9: error: syntax error: '(' was never closed" in result.stderr
    assert "= help:" in result.stderr
    assert not (tmp_path / "broken_compiled.py").exists()


def test_cli_writes_nothing_when_one_file_fails(tmp_path: Path) -> None:
    for name in ("a_good.py", "c_good.py"):
        (tmp_path / name).write_text(model_text(GOOD), encoding="utf-8")
    (tmp_path / "b_bad.py").write_text(model_text(CHECK_CASES["lambda"]), encoding="utf-8")
    result = run_cli(str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert f"{shown(tmp_path / 'b_bad.py')}:11:9: error: lambda expressions are not supported" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_good.py", "b_bad.py", "c_good.py"]
    # Without the bad file the good ones compile.
    (tmp_path / "b_bad.py").unlink()
    assert run_cli(str(tmp_path)).returncode == 0
    assert (tmp_path / "a_good_compiled.py").exists() and (tmp_path / "c_good_compiled.py").exists()


def test_internal_error_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from transpiler import cli
    from transpiler.lower_stmt import FunctionLowerer

    def broken(self: FunctionLowerer) -> None:
        raise RuntimeError("lowering exploded")

    monkeypatch.delenv("TORCHSCRIBE_DEBUG", raising=False)
    monkeypatch.setattr(FunctionLowerer, "lower", broken)
    path = tmp_path / "good.py"
    path.write_text(model_text(GOOD), encoding="utf-8")
    assert cli.main([str(path)]) == 3
    err = capsys.readouterr().err
    assert "internal error" in err and "lowering exploded" in err
    assert "Traceback" not in err
    assert not (tmp_path / "good_compiled.py").exists()

    monkeypatch.setenv("TORCHSCRIBE_DEBUG", "1")
    assert cli.main([str(path)]) == 3
    assert "Traceback" in capsys.readouterr().err

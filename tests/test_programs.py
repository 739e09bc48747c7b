"""Differential tests on generated programs: compiled and eager must agree exactly.

tests/program_gen.py writes random, well-typed programs of the compiled subset (tensor
expressions, views, reductions, int/float arithmetic, if/elif/else, for/while loops with break,
continue and early return, tuples, lists, in-place updates of fresh tensors, of the inputs and
of module buffers). Each program is written into a fresh module in a temporary directory,
compiled with the CLI (`torchscribe PATH`), imported, and called in `runtime.mode("strict")`
(compiled code, or an error) and in `runtime.mode("off")` (eager) on equal inputs. The outputs
(structure, Python types, dtypes, shapes, bitwise values with NaNs in the same places), the
final contents of every input tensor, which outputs alias which inputs, and for modules the
final state_dict must be the same. The same program compiled twice must give the same bytes.

On failure hypothesis prints the shrunk program's source and its compiled module (`note`).
Run many more examples with `pytest -m slow tests/test_programs.py`.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import io
import itertools
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import program_gen as pg
from ir.kernel.primitives import TOLERANCE  # noqa: E402

import runtime  # noqa: E402
from transpiler.cli import main as cli_main  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
DEFAULT = settings(max_examples=60, **SETTINGS)
SLOW = settings(max_examples=1500, **SETTINGS)

_counter = itertools.count()


# -- plumbing ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def program_dir(tmp_path_factory: pytest.TempPathFactory):
    """A directory on sys.path that the generated modules are written into. Its project asks
    for no default specialisations: these tests hold the generic code to eager's exact values
    (a row-wise program of plain tensors would get kernels, ir/kernel/rows.py, tested in test_rows.py)."""
    directory = tmp_path_factory.mktemp("generated_programs")
    (directory / "pyproject.toml").write_text("[tool.torchscribe]\ndevices = []\n")
    sys.path.insert(0, str(directory))
    yield directory
    sys.path.remove(str(directory))
    runtime.reset()


@pytest.fixture(scope="module")
def jit_cache(tmp_path_factory: pytest.TempPathFactory):
    """script(fn, example_inputs=...) writes its modules here, not into ~/.cache."""
    directory = tmp_path_factory.mktemp("jit_cache")
    old = os.environ.get("TORCHSCRIBE_CACHE_DIR")
    os.environ["TORCHSCRIBE_CACHE_DIR"] = str(directory)
    yield directory
    if old is None:
        os.environ.pop("TORCHSCRIBE_CACHE_DIR", None)
    else:
        os.environ["TORCHSCRIBE_CACHE_DIR"] = old


def show(text: str) -> None:
    """Shown with a failure: through hypothesis for generated programs, printed otherwise."""
    if currently_in_test_context():
        note(text)
    else:
        print(text)


@contextlib.contextmanager
def generated_module(directory: Path, source: str, compile_it: bool = True):
    """Write `source` as a fresh module, compile it with the CLI, import it; forget it after."""
    stem = f"prog_{os.getpid()}_{next(_counter)}"
    path = directory / f"{stem}.py"
    path.write_text(source, encoding="utf-8")
    show(f"--- generated program ({path.name}) ---\n{source}")
    try:
        if compile_it:
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli_main([str(path)])
            assert code == 0, f"torchscribe exited with {code} on a valid program:\n{err.getvalue()}"
            compiled = path.with_name(f"{stem}_compiled.py")
            show(f"--- compiled module ---\n{compiled.read_text(encoding='utf-8')}")
        importlib.invalidate_caches()
        module = importlib.import_module(stem)
        yield path, module
    finally:
        for name in (stem, f"{stem}_compiled"):
            sys.modules.pop(name, None)


# -- comparison --------------------------------------------------------------------------------
def assert_same(eager: Any, compiled: Any, where: str, bitwise: bool = True) -> None:
    """Same structure, same Python types, same tensors bit for bit (NaNs in the same places);
    with `bitwise` off, floats within the tolerance of decomposed and fused code
    (ir/primitives.TOLERANCE: specialised code computes softmax, linear, ... from primitives)."""
    assert type(compiled) is type(eager), f"{where}: compiled gives a {type(compiled).__name__}, eager a {type(eager).__name__}"
    if isinstance(eager, torch.Tensor):
        assert compiled.dtype == eager.dtype, f"{where}: dtype {compiled.dtype} != {eager.dtype}"
        assert compiled.shape == eager.shape, f"{where}: shape {tuple(compiled.shape)} != {tuple(eager.shape)}"
        assert compiled.device == eager.device
        a, b = compiled.detach(), eager.detach()
        if a.is_floating_point():
            atol, rtol = (None, None) if bitwise else TOLERANCE.get(str(a.dtype).removeprefix("torch."), (None, None))
            torch.testing.assert_close(a, b, equal_nan=True, atol=atol, rtol=rtol, msg=lambda m: f"{where}: {m}")
            nan_a, nan_b = a.isnan(), b.isnan()
            assert torch.equal(nan_a, nan_b), f"{where}: NaN at different positions"
            a, b = a.masked_fill(nan_a, 0), b.masked_fill(nan_b, 0)
            if not bitwise:
                return
        else:
            torch.testing.assert_close(a, b, msg=lambda m: f"{where}: {m}")
        assert torch.equal(a, b), f"{where}: close but not bitwise equal (max diff {(a.double() - b.double()).abs().max()})"
        return
    if isinstance(eager, (tuple, list)):
        assert len(compiled) == len(eager), f"{where}: {len(compiled)} items != {len(eager)}"
        for k, (c, e) in enumerate(zip(compiled, eager)):
            assert_same(e, c, f"{where}[{k}]", bitwise)
        return
    if isinstance(eager, float) and eager != eager:
        assert compiled != compiled, f"{where}: {compiled} != nan"
        return
    assert compiled == eager, f"{where}: {compiled!r} != {eager!r}"


def alias_pattern(outputs: Any, inputs: list[Any]) -> list[tuple[int, ...]]:
    """For each output tensor (flattened), the inputs it is, and those whose memory it shares:
    the caller can observe both, so compiled code must reproduce them."""
    flat = outputs if isinstance(outputs, (tuple, list)) else [outputs]
    pattern = []
    for o in flat:
        if not isinstance(o, torch.Tensor):
            continue
        same = tuple(k for k, i in enumerate(inputs) if o is i)
        shares = tuple(k for k, i in enumerate(inputs) if isinstance(i, torch.Tensor)
                       and o.untyped_storage().data_ptr() == i.untyped_storage().data_ptr())
        pattern.append((same, shares))
    return pattern


def run(fn: Any, call: tuple[list[Any], dict[str, Any]], mode: str, calls: int,
        grad: bool = False) -> tuple[list[Any], BaseException | None]:
    args, kwargs = call
    outs = []
    with runtime.mode(mode), (contextlib.nullcontext() if grad else torch.no_grad()):
        try:
            for _ in range(calls):
                outs.append(fn(*args, **kwargs))
        except Exception as error:  # noqa: BLE001 - compared below
            return outs, error
    return outs, None


def check_function(fn: Any, prog: pg.Program, compiled_fn: Any | None = None, bitwise: bool = True) -> None:
    """Call compiled (strict) and eager (off) on equal arguments; compare everything visible."""
    call_e, call_c = prog.make_call(), prog.make_call()
    outs_e, err_e = run(fn, call_e, "off", prog.calls)
    outs_c, err_c = run(compiled_fn or fn, call_c, "strict", prog.calls)
    if err_e is not None:
        # The generator only writes valid programs; an eager error is a generator bug.
        raise AssertionError(f"the generated program fails eagerly: {err_e!r}") from err_e
    if err_c is not None:
        raise AssertionError(f"compiled code raised {err_c!r}, eager did not") from err_c
    inputs_e = call_e[0] + list(call_e[1].values())
    inputs_c = call_c[0] + list(call_c[1].values())
    for k, (e, c) in enumerate(zip(outs_e, outs_c)):
        assert_same(e, c, f"call {k} result", bitwise)
        assert alias_pattern(c, inputs_c) == alias_pattern(e, inputs_e), f"call {k}: outputs alias inputs differently"
    assert_same(inputs_e, inputs_c, "arguments after the call", bitwise)


# -- the differential tests --------------------------------------------------------------------
def record_features(prog: pg.Program) -> None:
    if not currently_in_test_context():
        return
    for feature in sorted(prog.features):
        event(feature)  # pytest --hypothesis-show-statistics shows how often each is covered


def differential(program_dir: Path, prog: pg.Program) -> None:
    record_features(prog)
    with generated_module(program_dir, prog.source) as (path, module):
        check_function(module.f, prog)
        # Same source, same bytes: compiling again in this process gives the file's text.
        from transpiler.compile import compile_path

        again = compile_path(path)
        assert again is not None
        assert again.text == path.with_name(f"{path.stem}_compiled.py").read_text(encoding="utf-8")


@DEFAULT
@given(prog=pg.programs())
def test_generated_functions(program_dir: Path, prog: pg.Program) -> None:
    differential(program_dir, prog)


@settings(max_examples=30, **SETTINGS)
@given(prog=pg.programs(mutate_inputs=True))
def test_generated_functions_mutating_inputs(program_dir: Path, prog: pg.Program) -> None:
    differential(program_dir, prog)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=20, **SETTINGS)
@given(prog=pg.module_programs())
def test_generated_modules(program_dir: Path, prog: pg.Program) -> None:
    grad = prog.seed % 2 == 0
    record_features(prog)
    with generated_module(program_dir, prog.source) as (_, module):
        eager_model = prog.make_module(module)
        compiled_model = copy.deepcopy(eager_model)
        call_e, call_c = prog.make_call(), prog.make_call()
        outs_e, err_e = run(eager_model, call_e, "off", prog.calls, grad)
        outs_c, err_c = run(compiled_model, call_c, "strict", prog.calls, grad)
        if err_e is not None:
            raise AssertionError(f"the generated module fails eagerly: {err_e!r}") from err_e
        if err_c is not None:
            raise AssertionError(f"compiled forward raised {err_c!r}, eager did not") from err_c
        for k, (e, c) in enumerate(zip(outs_e, outs_c)):
            assert_same(e, c, f"call {k} result")
        assert_same(call_e, call_c, "arguments after the call")
        assert compiled_model.calls == eager_model.calls, "the Python attribute self.calls differs"
        state_e, state_c = eager_model.state_dict(), compiled_model.state_dict()
        assert list(state_c) == list(state_e)
        for key in state_e:
            assert_same(state_e[key], state_c[key], f"state_dict[{key!r}]")


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=12, **SETTINGS)
@given(prog=pg.module_programs())
def test_generated_modules_jit(program_dir: Path, jit_cache: Path, prog: pg.Program) -> None:
    """script(instance, example_inputs=...): specialised to the instance (its attributes, the
    inputs' dtypes and sizes, a symbolic batch), still eager's values and effects, call after
    call (the module's Python attributes and buffers change between calls)."""
    from transpiler import script

    record_features(prog)
    with generated_module(program_dir, prog.source, compile_it=False) as (_, module):
        eager_model = prog.make_module(module)
        compiled_model = copy.deepcopy(eager_model)
        call_e, call_c = prog.make_call(), prog.make_call()
        scripted = script(compiled_model, example_inputs=tuple(prog.make_call()[0]))
        outs_e, err_e = run(eager_model, call_e, "off", prog.calls)
        outs_c, err_c = run(scripted, call_c, "strict", prog.calls)
        if err_e is not None:
            raise AssertionError(f"the generated module fails eagerly: {err_e!r}") from err_e
        if err_c is not None:
            raise AssertionError(f"compiled forward raised {err_c!r}, eager did not") from err_c
        for k, (e, c) in enumerate(zip(outs_e, outs_c)):
            assert_same(e, c, f"call {k} result", bitwise=False)
        assert_same(call_e, call_c, "arguments after the call", bitwise=False)
        state_e, state_c = eager_model.state_dict(), compiled_model.state_dict()
        for key in state_e:
            assert_same(state_e[key], state_c[key], f"state_dict[{key!r}]", bitwise=False)


@settings(max_examples=15, **SETTINGS)
@given(prog=pg.programs(decorate=False, mutate_inputs=True))
def test_generated_functions_jit(program_dir: Path, jit_cache: Path, prog: pg.Program) -> None:
    """script(fn, example_inputs=...) compiles now; the result agrees with eager too."""
    from transpiler import script

    record_features(prog)
    with generated_module(program_dir, prog.source, compile_it=False) as (_, module):
        compiled = script(module.f, example_inputs=tuple(prog.make_args()))
        check_function(module.f, prog, compiled_fn=compiled, bitwise=False)


@settings(max_examples=1, **SETTINGS)
@given(progs=st.lists(pg.programs(), min_size=8, max_size=8))
def test_compiled_bytes_do_not_depend_on_the_process(tmp_path_factory: pytest.TempPathFactory, progs: list[pg.Program]) -> None:
    """The CLI in another process (another hash seed, another working directory) writes the
    same bytes as this one."""
    # Hypothesis tries its simplest example first (eight copies of the smallest program).
    assume(sum(len(p.source.splitlines()) for p in progs) >= 8 * 25)
    here = tmp_path_factory.mktemp("bytes_here")
    there = tmp_path_factory.mktemp("bytes_there")
    for k, prog in enumerate(progs):
        for d in (here, there):
            (d / f"prog_{k}.py").write_text(prog.source, encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli_main([str(here)]) == 0
    env = dict(os.environ, PYTHONHASHSEED="12345")
    done = subprocess.run([sys.executable, "-m", "transpiler.cli", "-q", str(there)], cwd=str(there),
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for k in range(len(progs)):
        a = (here / f"prog_{k}_compiled.py").read_bytes()
        b = (there / f"prog_{k}_compiled.py").read_bytes()
        assert a == b, f"prog_{k}: compiled output differs between processes"


# -- regressions: compiler bugs these tests found, as the smallest programs that showed them ----
def hand_written(body: str, params: str = "x: Tensor, n: int = 3", ret: str = "tuple[Tensor, int]",
                 args: tuple = (2,), before: str = "", decorate: bool = True, calls: int = 1,
                 kw_tensors: tuple = ()) -> pg.Program:
    source = (pg.HEADER + "\n\n" + textwrap.dedent(before) + ("\n\n" if before else "") + ("@script\n" if decorate else "")
              + f"def f({params}) -> {ret}:\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n")
    return pg.Program(source=source, name="f", kind="function", tensor_params=[("x", (3, 4))],
                      scalar_args=[(f"arg{k}", v) for k, v in enumerate(args)], dtype=torch.float32, seed=7,
                      calls=calls, quantized=False, mutates_inputs=False,
                      kw_tensor_params=[(name, (3, 4)) for name in kw_tensors])


REGRESSIONS = {
    # Shape propagation refined a list display to list[Tensor[]]; the if and the loop it flows
    # through kept list[Tensor], which a list does not fit (lists are invariant): the verifier
    # rejected the IR after specialisation.
    "refined_list_through_a_loop_exit": hand_written("""
        for i in range(2):
            xs = [x.sum(), x.sum() + n]
            if 4 % 2 == 1:
                if float(x.sum()) <= 0.5:
                    continue
                return x, 1
        return x, n
    """),
    # An early return made the statements after the `if` its else side, printed as a conditional
    # expression: a named value in it (z) was never computed (NameError).
    "early_return_then_named_value": hand_written("""
        a = x * 2
        if n < 1:
            return a, n
        z = a.sum(dim=1, keepdim=True)
        return z + a, -n
    """, args=(2,)),
    # `return (x,)` was printed `return x`: the caller got a tensor, not a 1-tuple.
    "one_tuple_return": hand_written("""
        t = x + n
        return (t,)
    """, ret="tuple[Tensor]"),
    # `n or 7` / `n and 5` were lowered as bools: x * (n or 7) computed x * True.
    "or_and_give_an_operand": hand_written("""
        k = n or 7
        m = n and 5
        return x * k, m + (n or -1)
    """, args=(-3,)),
    "or_and_give_an_operand_zero": hand_written("""
        k = n or 7
        m = n and 5
        return x * k, m + (n or -1)
    """, args=(0,)),
    # `x += 2` on one side of an if, the old x still read after it (through t1): the merged x got
    # a new variable that the in-place side never assigned (UnboundLocalError).
    "inplace_on_one_side_of_an_if": hand_written("""
        t1 = x
        if n > 2:
            t2 = x
        else:
            x += 2
        return torch.zeros_like(x) + t1, n
    """, args=(1,)),
    # min/max/round/abs rejected t.item() (type Any) although Python takes it.
    "item_in_builtins": hand_written("""
        a = min(x.sum().item(), 0.5 + n)
        b = max((x > 0).sum().item(), n)
        c = round(x.mean().item(), 2) + abs(x.amax().item())
        return x * a + c, b + round((x < 0).sum().item())
    """),
    # t.item() (type Any) was rejected as the value of a `-> ... float` return and as the
    # argument of an int parameter of a compiled helper.
    "item_returned_and_passed": hand_written("""
        return helper(x, (x > 0).sum().item(), x.mean().item()), x.sum().item(), (x > n).sum().item()
    """, ret="tuple[Tensor, float, int]", before="""
        @script
        def helper(a: Tensor, k: int = 1, f: float = 0.5) -> Tensor:
            return a * k + f
    """),
    # `if bias is None: ...` without else, bias's old value still read after it (through b0): the
    # merged bias got a new variable that the implicit else side never assigned.
    "refined_optional_renamed": hand_written("""
        b0 = bias
        if bias is None:
            x = x * 2
        if bias is None:
            return x, n
        if b0 is None:
            return x, -n
        return x - bias, 0
    """, params="x: Tensor, n: int = 3, bias: Optional[Tensor] = None", kw_tensors=("bias",)),
    # A list display was typed by its first element (a float64 tensor), so appending a tensor of
    # another (or an unknown) dtype or shape was rejected.
    "list_holds_any_tensor": hand_written("""
        xs = [x.double()]
        xs.append(x * 2)
        xs.append(x[0:1])
        return torch.cat(xs, dim=0).sum(0), len(xs)
    """),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(program_dir: Path, name: str) -> None:
    differential(program_dir, REGRESSIONS[name])


def test_regression_jit_calls_a_decorated_helper(program_dir: Path, jit_cache: Path) -> None:
    """script(f, example_inputs=...) on an undecorated f that calls an @script helper of its
    file: the helper was reported as "not compiled"."""
    from transpiler import script

    prog = hand_written("""
        return helper(x, n) * 2, n
    """, before="""
        @script
        def helper(a: Tensor, k: int = 1) -> Tensor:
            return a + k
    """, decorate=False)
    with generated_module(program_dir, prog.source, compile_it=False) as (_, module):
        compiled = script(module.f, example_inputs=tuple(prog.make_args()))
        check_function(module.f, prog, compiled_fn=compiled, bitwise=False)


# -- many more examples ------------------------------------------------------------------------
@pytest.mark.slow
@SLOW
@given(prog=pg.programs())
def test_generated_functions_slow(program_dir: Path, prog: pg.Program) -> None:
    differential(program_dir, prog)


@pytest.mark.slow
@settings(max_examples=600, **SETTINGS)
@given(prog=pg.programs(mutate_inputs=True, max_statements=12))
def test_generated_functions_mutating_inputs_slow(program_dir: Path, prog: pg.Program) -> None:
    differential(program_dir, prog)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=300, **SETTINGS)
@given(prog=pg.module_programs(max_statements=10))
def test_generated_modules_slow(program_dir: Path, prog: pg.Program) -> None:
    test_generated_modules.hypothesis.inner_test(program_dir, prog)  # type: ignore[attr-defined]

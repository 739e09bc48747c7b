"""Entry checks on the compiled call's path (runtime/guards.py) and how generated code prints them.

The tests of what the checks decide run twice (the `checks` fixture): with the Python functions,
and with their C++ fast paths (runtime/guards_native.cpp), which must decide the same and leave
every failure to the Python function, so that it says the same.

The checks have a fast path (one comparison for a fixed shape, submodules and parameters read past
nn.Module.__getattr__, each read once); whatever the fast path does not accept goes to the full
check, which raises GuardFailure with the message it always had. These tests hold the fast path to
the full check: the same inputs pass, the same fail, with the same messages, and nothing the
checks learn once (which names a class leaves to its instances, which class a qualified name
is) hides a change made afterwards.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn.utils import parametrize

import runtime
from codegen import python_checks
from codegen.python_function import FunctionEmitter
from examples import mlp
from ir.core.parser import parse_program
from runtime import guards
from runtime.errors import TorchscribeError
from runtime.guards import GuardFailure
from transpiler import script


@pytest.fixture(params=["python", "native"])
def checks(request):
    """runtime.guards' checks bound to the Python functions, then to their C++ fast paths."""
    if not guards.use_native_checks(request.param == "native"):
        if request.param == "native":
            pytest.skip(f"the C++ checks are not built here (no C++ compiler or no Python headers), "
                        f"or {guards.NATIVE_VAR} turns them off")
    try:
        yield request.param
    finally:
        guards.use_native_checks(True)


def outcome(check, *args) -> str:
    try:
        check(*args)
    except GuardFailure as failure:
        return failure.reason
    return "passes"


# -- check_tensor ----------------------------------------------------------------------------------
X = torch.zeros(2, 3, 4)
TENSOR_CASES = [
    # (value, dtype, device_type, shape, optional): what the check says
    ((X, torch.float32, "cpu", (2, 3, 4), False), "passes"),
    ((X, torch.float32, "cpu", ("B", 3, 4), False), "passes"),
    ((X, torch.float32, "cpu", ("B", "T", None), False), "passes"),
    ((X, None, None, None, False), "passes"),
    ((nn.Parameter(X), torch.float32, "cpu", ("B", 3, 4), False), "passes"),
    ((torch.zeros(0, 3), torch.float32, "cpu", (None, 3), False), "passes"),  # None: any size, 0 too
    ((torch.zeros(0, 3), torch.float32, "cpu", (0, 3), False), "passes"),
    ((torch.zeros(()), torch.float32, "cpu", (), False), "passes"),
    ((X[:, :, ::2], torch.float32, "cpu", ("B", 3, 2), False), "passes"),  # (not contiguous: not asked)
    ((None, torch.float32, "cpu", (2,), True), "passes"),
    ((None, torch.float32, "cpu", (2,), False), "argument 'x': expected Tensor, got None"),
    ((3, None, None, None, False), "argument 'x': expected Tensor, got int"),
    ((X, torch.float64, "cpu", (2, 3, 4), False), "argument 'x': expected dtype float64, got float32"),
    ((X.to("meta"), torch.float32, "cpu", (2, 3, 4), False), "argument 'x': expected a cpu tensor, got meta"),
    ((X, torch.float32, "meta", (2, 3, 4), False), "argument 'x': expected a meta tensor, got cpu"),
    ((X, torch.float32, "cpu", ("B", 3), False), "argument 'x': expected 2 dimensions, got 3"),
    ((X, torch.float32, "cpu", ("B", 3, 5), False), "argument 'x': expected size 5 in dimension 2, got 4"),
    ((X, torch.float32, "cpu", (2, 3, 4, 1), False), "argument 'x': expected 4 dimensions, got 3"),
    ((torch.zeros(0, 3), torch.float32, "cpu", ("B", 3), False),
     "argument 'x': expected size B >= 1 in dimension 0, got 0"),
    ((torch.zeros(2, 0), torch.float32, "cpu", ("B", "T"), False),
     "argument 'x': expected size T >= 1 in dimension 1, got 0"),
]


@pytest.mark.parametrize("args,expected", TENSOR_CASES)
def test_check_tensor_passes_and_fails_as_the_full_check(args, expected, checks) -> None:
    value, dtype, device, shape, optional = args
    assert outcome(guards.check_tensor, value, "x", dtype, device, shape, optional) == expected
    assert outcome(guards._check_tensor, value, "x", dtype, device, shape, optional) == expected


SIZES = st.integers(0, 3)
SPEC_SIZES = st.one_of(SIZES, st.sampled_from(["B", "T", None]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(SIZES, max_size=4), spec=st.one_of(st.none(), st.lists(SPEC_SIZES, max_size=4)),
       dtype=st.sampled_from([None, torch.float32, torch.float64, torch.int64]),
       value_dtype=st.sampled_from([torch.float32, torch.float64, torch.int64]),
       device=st.sampled_from([None, "cpu", "meta"]), value_device=st.sampled_from(["cpu", "meta"]),
       kind=st.sampled_from(["tensor", "parameter", "view", "None", "int"]), optional=st.booleans())
def test_check_tensor_fast_path_implies_the_full_check(shape, spec, dtype, value_dtype, device, value_device,
                                                        kind, optional, checks) -> None:
    """The fast path never passes what the full check (the check as it was) rejects, and every
    failure says what the full check says."""
    value: object = torch.zeros(shape, dtype=value_dtype, device=value_device)
    if kind == "parameter":
        value = nn.Parameter(value, requires_grad=False)
    elif kind == "view" and shape:
        value = value.transpose(0, -1)  # type: ignore[union-attr]
    elif kind == "None":
        value = None
    elif kind == "int":
        value = 1
    spec_shape = tuple(spec) if spec is not None else None
    args = (value, "x", dtype, device, spec_shape, optional)
    assert outcome(guards.check_tensor, *args) == outcome(guards._check_tensor, *args)


# -- attr: `obj.name` past nn.Module.__getattr__ ---------------------------------------------------
class WithProperty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self._modules["fc"] = nn.Linear(2, 2)  # (shadowed by the property below)
        self.register_buffer("b", torch.ones(1))

    @property
    def fc(self) -> str:  # type: ignore[override]
        return "the property"


class WithGetattr(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def __getattr__(self, name: str):
        if name == "virtual":
            return "from __getattr__"
        return super().__getattr__(name)


def tricky_objects() -> list[tuple[object, str]]:
    plain = nn.Linear(2, 3)
    shadowed = nn.Linear(2, 3)
    object.__setattr__(shadowed, "weight", "an instance attribute")  # before the parameter
    both = nn.Module()
    both.register_buffer("x", torch.zeros(1))
    both._modules["x"] = nn.ReLU()  # a buffer comes before a submodule
    bare = nn.Module.__new__(nn.Module)  # no nn.Module.__init__
    holder = nn.Module()
    holder.fc = None  # a submodule set to None
    cases = [(plain, n) for n in ("weight", "bias", "in_features", "training", "missing", "forward", "_version")]
    cases += [(shadowed, "weight"), (shadowed, "bias"), (both, "x"), (bare, "weight"), (holder, "fc")]
    cases += [(WithProperty(), n) for n in ("fc", "b", "missing")]
    cases += [(WithGetattr(), n) for n in ("virtual", "fc", "missing")]
    cases += [((1, 2), "count"), (object(), "missing")]
    return cases


@pytest.mark.parametrize("obj,name", tricky_objects())
def test_attr_reads_what_python_reads(obj, name, checks) -> None:
    for _ in range(2):  # (the second time with what attr learnt about the class)
        try:
            expected = getattr(obj, name)
        except AttributeError as error:
            with pytest.raises(AttributeError, match=re.escape(str(error))):
                guards.attr(obj, name)
        else:
            got = guards.attr(obj, name)
            assert got is expected or (callable(got) and got == expected)


def test_attr_sees_changes_made_after_a_read(checks) -> None:
    m = nn.Linear(2, 2)
    w = m.weight
    assert guards.attr(m, "weight") is w
    m.weight = nn.Parameter(torch.zeros(2, 2))
    assert guards.attr(m, "weight") is m.weight
    m.bias = None
    assert guards.attr(m, "bias") is None
    del m.bias
    with pytest.raises(AttributeError):
        guards.attr(m, "bias")
    object.__setattr__(m, "weight", "shadow")
    assert guards.attr(m, "weight") == "shadow"
    holder = nn.Sequential(nn.Linear(2, 2))
    assert guards.at(holder, "0.weight") is holder[0].weight
    holder[0] = nn.ReLU()
    with pytest.raises(AttributeError):
        guards.at(holder, "0.weight")


# -- check_module ----------------------------------------------------------------------------------
class Inner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.conv = nn.Conv1d(3, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Inner()
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.ReLU()])
        self.head = nn.Sequential(nn.ReLU())
        self.norm = nn.BatchNorm1d(3).eval()
        self.extra = None


def test_check_module_returns_the_submodule_it_checked(checks) -> None:
    outer = Outer()
    assert guards.check_module(outer, "inner", "Inner") is outer.inner
    assert guards.check_module(outer, "inner.fc", "torch.nn.Linear") is outer.inner.fc
    assert guards.check_module(outer, "layers.0", "torch.nn.Linear") is outer.layers[0]
    assert guards.check_module(outer, "inner.conv", "torch.nn.Conv1d", "zeros_padding") is outer.inner.conv
    assert guards.check_module(outer, "extra?.fc", "torch.nn.Linear") is None  # never called: passes
    assert guards.plain_module(outer, "extra?.fc", "torch.nn.Linear")


def _subclass(module: nn.Module) -> None:
    class Linear(nn.Linear):
        pass

    module.inner.fc = Linear(3, 3)


MODULE_CHANGES = {
    # what is done to an Outer after a check passed: the message the check then gives
    "forward hook": (lambda m: m.inner.fc.register_forward_hook(lambda *a: None),
                     "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "forward pre-hook": (lambda m: m.inner.fc.register_forward_pre_hook(lambda *a: None),
                         "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "backward hook": (lambda m: m.inner.fc.register_full_backward_hook(lambda *a: None),
                      "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "backward pre-hook": (lambda m: m.inner.fc.register_full_backward_pre_hook(lambda *a: None),
                          "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "hook on the parent": (lambda m: m.inner.register_forward_hook(lambda *a: None),
                           "submodule 'inner' is not an unhooked Inner"),
    "global hook": (lambda m: nn.modules.module.register_module_forward_hook(lambda *a: None),
                    "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "forward of the instance": (lambda m: setattr(m.inner.fc, "forward", lambda x: x),
                                "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "submodule replaced": (lambda m: setattr(m.inner, "fc", nn.Identity()),
                           "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "subclass swapped in": (_subclass, "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "parametrized": (lambda m: parametrize.register_parametrization(m.inner.fc, "weight", nn.Identity()),
                     "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "set to None": (lambda m: setattr(m.inner, "fc", None),
                    "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "deleted": (lambda m: delattr(m.inner, "fc"), "submodule 'inner.fc' is not an unhooked torch.nn.Linear"),
    "condition": (lambda m: setattr(m.inner.conv, "padding_mode", "reflect"),
                  "submodule 'inner.conv' is not an unhooked torch.nn.Conv1d with zeros_padding"),
    "list element": (lambda m: m.layers.insert(0, nn.ReLU()),
                     "submodule 'layers.0' is not an unhooked torch.nn.Linear"),
    "layer appended": (lambda m: m.head.append(nn.ReLU()),
                       "submodule 'head' is not an unhooked torch.nn.Sequential of 1 layers"),
    "running stats dropped": (lambda m: setattr(m.norm, "running_var", None),
                              "submodule 'norm' is not an unhooked torch.nn.BatchNorm1d with running_stats, eval"),
    "training": (lambda m: m.norm.train(),
                 "submodule 'norm' is not an unhooked torch.nn.BatchNorm1d with running_stats, eval"),
}
CHECKS = [("inner", "Inner"), ("inner.fc", "torch.nn.Linear"), ("inner.conv", "torch.nn.Conv1d", "zeros_padding"),
          ("layers.0", "torch.nn.Linear"), ("head", "torch.nn.Sequential", "len=1"),
          ("norm", "torch.nn.BatchNorm1d", "running_stats", "eval")]


@pytest.mark.parametrize("change", sorted(MODULE_CHANGES))
def test_check_module_sees_every_change_made_after_it_passed(change, checks) -> None:
    do, message = MODULE_CHANGES[change]
    outer = Outer()
    for _ in range(2):  # (what the checks learn, they learn on the first call)
        for path, *qualname in CHECKS:
            guards.check_module(outer, path, *qualname)
    handles = [h for h in [do(outer)] if hasattr(h, "remove")]
    try:
        failures = [outcome(guards.check_module, outer, path, *qualname) for path, *qualname in CHECKS]
        assert message in failures
        if change != "global hook":  # (which fails every check)
            assert all(f in ("passes", message) for f in failures)
        path, *qualname = CHECKS[[f == message for f in failures].index(True)]
        assert not guards.plain_module(outer, path, *qualname)
    finally:
        for h in handles:
            h.remove()


# -- check_entry: a function's checks below self as one table ------------------------------------
# (the checks of ENTRY's rows, in the order the table runs them)
ENTRY_TENSORS = [("inner.fc.weight", torch.float32, "cpu", (3, 3)), ("inner.fc.bias?", torch.float32, "cpu", (3,)),
                 ("layers.0.weight", torch.float32, None, ("n", 3)), ("norm.running_mean", None, "cpu", None)]
ENTRY_VALUES = [("extra", None), ("inner.conv.padding", (0,)), ("inner.conv.bias.shape", (3,)), ("norm.eps", 1e-05)]
ENTRY = guards.entry_checks(
    ("", {"extra": None}),
    ("inner", "Inner"),
    ("inner.fc", "torch.nn.Linear", {"weight": [3, 3], "bias?": [3]}),
    ("inner.conv", "torch.nn.Conv1d", "zeros_padding", {"padding": (0,), "bias.shape": (3,)}),
    ("layers.0", "torch.nn.Linear", {"weight": guards.TensorCheck(torch.float32, None, ("n", 3))}),
    ("head", "torch.nn.Sequential", "len=1"),
    ("norm", "torch.nn.BatchNorm1d", "running_stats", "eval",
     {"running_mean": guards.TensorCheck(None, "cpu", None), "eps": 1e-05}),
    tensors=(torch.float32, "cpu"), returns=("inner", "norm"))


def test_entry_checks_rows_hold_the_checks_of_each_submodule() -> None:
    """A row's module check, and its attributes as tensor checks (a list: a shape, of the
    table's `tensors`) and value checks (`ListValue` for a list), made as the three kinds of
    checks in the order of the rows."""
    assert [row[:3] for row in ENTRY[0]] == [(path, qualname, tuple(conditions)) for path, qualname, *conditions in CHECKS]
    assert [(name, *rest) for name, _, _, *rest in ENTRY[1]] == [
        ("self." + path.replace("?", "").replace(".0.", "[0]."), *rest) for path, *rest in ENTRY_TENSORS]
    assert [row[0] for row in ENTRY[2]] == ["self." + path for path, _ in ENTRY_VALUES]
    table = guards.entry_checks(("", {"sizes": guards.ListValue([2, 3]), "ids": (1, 2)}))
    assert [row[-1] for row in table[2]] == [[2, 3], (1, 2)] and table[1] == ()


def _one_by_one(outer: Outer) -> str:
    """What the checks of ENTRY say made one by one, as lines print them."""
    for path, *qualname in CHECKS:
        guards.check_module(outer, path, *qualname)
    for path, dtype, device, shape in ENTRY_TENSORS:
        value = guards.at(outer, path)
        guards.check_tensor(value, "self." + path.replace("?", "").replace(".0.", "[0]."), dtype, device, shape,
                            optional=path.endswith("?"))
    for path, expected in ENTRY_VALUES:
        guards.check_value(guards.at(outer, path), expected, "self." + path)
    return "passes"


ENTRY_CHANGES = {
    **{name: do for name, (do, _) in MODULE_CHANGES.items()},
    "weight dtype": lambda m: m.inner.fc.double(),
    "bias dropped": lambda m: setattr(m.inner.fc, "bias", None),  # (optional: passes)
    "bias a list": lambda m: (delattr(m.inner.fc, "bias"), setattr(m.inner.fc, "bias", [1.0])),
    "list weight resized": lambda m: setattr(m.layers[0], "weight", nn.Parameter(torch.zeros(0, 3))),
    "eps": lambda m: setattr(m.norm, "eps", 0.1),
    "padding": lambda m: setattr(m.inner.conv, "padding", 0),
    "extra set": lambda m: setattr(m, "extra", nn.ReLU()),
    "running mean dropped": lambda m: setattr(m.norm, "running_mean", None),
}


@pytest.mark.parametrize("change", sorted(ENTRY_CHANGES))
def test_check_entry_says_what_the_checks_one_by_one_say(change, checks) -> None:
    """The first failing check of the table, with its message, as the same checks made one by
    one in the table's order (modules, tensors, values); and the submodules it returns."""
    outer = Outer()
    for _ in range(2):  # (what the checks learn, they learn on the first call)
        assert guards.check_entry(outer, ENTRY) == (outer.inner, outer.norm)
    handles = [h for h in [ENTRY_CHANGES[change](outer)] if hasattr(h, "remove")]
    try:
        expected = outcome(_one_by_one, outer)
        got = outcome(guards.check_entry, outer, ENTRY)
        assert got == expected
        assert change != "weight dtype" or got == "argument 'self.inner.fc.weight': expected dtype float32, got float64"
    finally:
        for h in handles:
            h.remove()


def test_check_entry_reads_each_path_on_from_the_module_rows_before_it() -> None:
    """`entry_checks` makes its rows once: each read on from the longest module path that leads
    to it (a part that may be None stops the read: the check passes), names as messages spell
    them, a Python attribute's last read with getattr, and what `returns` names."""
    table = guards.entry_checks(
        ("", {"layers.0.bias?": guards.TensorCheck(None, None, None), "inner.conv.padding": (0,)}),
        ("inner", "Inner"), ("inner.fc", "torch.nn.Linear", {"weight": [3, 3], "bias": None}),
        ("extra?", "Inner"), ("extra?.fc", "X"), tensors=(torch.float32, "cpu"), returns=("inner.fc", "extra?"),
        root="net")
    modules, tensors, values, returns = table
    assert [(base, steps) for *_, base, steps in modules] == [
        (-1, (("inner", False),)), (0, (("fc", False),)), (-1, (("extra", True),)), (2, (("fc", False),))]
    assert tensors == (("net.layers[0].bias", -1, (("layers", False), (0, False), ("bias", True)), None, None, None),
                       ("net.inner.fc.weight", 1, (("weight", False),), torch.float32, "cpu", (3, 3)))
    assert values == (("net.inner.conv.padding", 0, (("conv", False),), "padding", (0,)),
                      ("net.inner.fc.bias", 1, (("bias", False),), None, None))
    assert returns == (1, 2)
    outer = Outer()
    outer.inner.fc.bias = None
    assert guards.check_entry(outer, table) == (outer.inner.fc, None)
    assert guards.check_entry(outer, guards.entry_checks(("inner", "Inner"), ("norm", "torch.nn.BatchNorm1d"))) is None


def test_cpp_check_entry_passes_alone_and_leaves_each_failure_to_python() -> None:
    """A passing table (more module rows than the C++ keeps on its stack, too) never calls the
    Python check_entry; a failing one does, once, and it names the failure; but a value that
    differs after every check before it passed fails in C++ (`value_refused`), with the message
    check_value writes, written only when it is read."""
    if not guards.use_native_checks(True):
        pytest.skip("the C++ checks are not built here")
    deep = nn.Sequential(*[nn.Sequential(nn.ReLU()) for _ in range(40)])
    many = guards.entry_checks(*[(f"{i}", "torch.nn.Sequential", "len=1") for i in range(40)],
                               *[(f"{i}.0", "torch.nn.ReLU") for i in range(40)], returns=("39.0",))
    python_calls = []

    def counted(*args):
        python_calls.append(args[1])
        return guards.python_checks["check_entry"](*args)

    guards._native.setup(guards.native_setup(check_entry=counted))
    try:
        outer = Outer()
        for _ in range(2):  # (the first round learns the classes and names in Python)
            python_calls.clear()
            assert guards.check_entry(outer, ENTRY) == (outer.inner, outer.norm)
            assert guards.check_entry(deep, many) is deep[39][0]
        assert python_calls == []
        outer.norm.eps = 0.5
        with pytest.raises(GuardFailure, match=r"^self.norm.eps: expected 1e-05, got 0.5$"):
            guards.check_entry(outer, ENTRY)
        assert python_calls == []
        shown = []

        class Shown:
            def __ne__(self, other: object) -> bool:
                return True

            def __repr__(self) -> str:
                shown.append(1)
                return "Shown()"

        outer.norm.eps = Shown()
        with pytest.raises(GuardFailure) as refused:
            guards.check_entry(outer, ENTRY)
        assert shown == [] and python_calls == []
        assert refused.value.reason == "self.norm.eps: expected 1e-05, got Shown()" and shown == [1]
        assert str(refused.value) == refused.value.reason and shown == [1]
        outer.norm.eps = 1e-05
        handle = outer.inner.register_forward_hook(lambda *args: None)
        with pytest.raises(GuardFailure, match="not an unhooked"):
            guards.check_entry(outer, ENTRY)
        handle.remove()
        assert python_calls == [ENTRY]
    finally:
        guards._native.setup(guards.native_setup())


# -- the C++ fast paths decide what the Python functions decide -------------------------------------
def test_the_cpp_checks_are_bound_where_extensions_build() -> None:
    from runtime import native

    if native.python_flags() is None:
        pytest.skip("no C++ compiler with Python's headers here")
    if not guards.native_checks_allowed():
        pytest.skip(f"{guards.NATIVE_VAR} turns them off")
    assert guards.use_native_checks(True)
    assert all(type(getattr(guards, name)).__name__ == "builtin_function_or_method" for name in guards.python_checks)


def test_cpp_check_module_passes_alone_for_classes_sharing_a_qualname() -> None:
    """Two Sequential subclasses both match "torch.nn.Sequential" (torchvision's
    Conv2dNormActivation and RegNet's AnyStage): checking them in turn stays on the C++ path,
    where keeping only the last class that matched sent every other one to Python."""
    if not guards.use_native_checks(True):
        pytest.skip("the C++ checks are not built here")

    class Stage(nn.Sequential):
        pass

    class Block(nn.Sequential):
        pass

    model = nn.Sequential(Stage(nn.ReLU()), Block(nn.ReLU(), nn.ReLU()))
    python_calls = []

    def counted(*args):
        python_calls.append(args[1])
        return guards.python_checks["check_module"](*args)

    guards._native.setup(guards.native_setup(check_module=counted))
    try:
        for _ in range(2):  # (the first round learns the classes in Python)
            python_calls.clear()
            assert guards.check_module(model, "0", "torch.nn.Sequential", "len=1") is model[0]
            assert guards.check_module(model, "1", "torch.nn.Sequential", "len=2") is model[1]
        assert python_calls == []
        model[1].append(nn.ReLU())  # (and a failure still goes to Python, which names it)
        with pytest.raises(GuardFailure, match="of 2 layers"):
            guards.check_module(model, "1", "torch.nn.Sequential", "len=2")
        assert python_calls == ["1"]
    finally:
        guards._native.setup(guards.native_setup())


def test_cpp_check_module_runs_the_conditions_it_knows_and_calls_any_other() -> None:
    """The C++ check_module runs the tests that guards._NATIVE_CONDITIONS names ("len=N", "eval",
    "running_stats", "zeros_padding": a Python call each cost more than the rest of the check)
    itself, keyed by the test function, so a test replaced in _LAYER_CONDITIONS is called."""
    if not guards.use_native_checks(True):
        pytest.skip("the C++ checks are not built here")
    outer = Outer()
    python_calls, tested = [], []

    def counted(*args):
        python_calls.append(args[1])
        return guards.python_checks["check_module"](*args)

    def not_training(m):
        tested.append(m)
        return not m.training

    guards._native.setup(guards.native_setup(check_module=counted))
    original = guards._LAYER_CONDITIONS["eval"]
    try:
        for _ in range(2):  # (the first round learns the classes and the "len=N" tests in Python)
            python_calls.clear()
            for path, *qualname in CHECKS:
                guards.check_module(outer, path, *qualname)
        assert python_calls == []
        guards._LAYER_CONDITIONS["eval"] = not_training
        guards._NATIVE_CONDITIONS[not_training] = ("eval", 0)
        assert guards.check_module(outer, "norm", "torch.nn.BatchNorm1d", "eval") is outer.norm
        assert tested == []  # run in C++
        del guards._NATIVE_CONDITIONS[not_training]
        assert guards.check_module(outer, "norm", "torch.nn.BatchNorm1d", "eval") is outer.norm
        assert tested == [outer.norm] and python_calls == []  # called from C++
        guards._LAYER_CONDITIONS["eval"] = lambda m: False
        with pytest.raises(GuardFailure, match="with running_stats, eval"):
            guards.check_module(outer, "norm", "torch.nn.BatchNorm1d", "running_stats", "eval")
        assert python_calls == ["norm"]
    finally:
        guards._LAYER_CONDITIONS["eval"] = original
        guards._NATIVE_CONDITIONS.pop(not_training, None)
        guards._native.setup(guards.native_setup())


def _both(name: str, *args, **kwargs):
    """(what the Python check does, what the bound one does): a result or (exception type, text)."""
    outcomes = []
    for check in (guards.python_checks[name], getattr(guards, name)):
        try:
            outcomes.append(("returns", check(*args, **kwargs)))
        except Exception as error:  # noqa: BLE001
            outcomes.append(("raises", type(error), str(error)))
    return outcomes


def _same(outcomes) -> None:
    python, bound = outcomes
    assert python[0] == bound[0] and (python[1] is bound[1] if python[0] == "returns" else python[1:] == bound[1:])


VALUES = [0, 1, 1.0, 2, -0.0, float("nan"), True, False, None, "zeros", (1, 1), (1, 2), [1, 1], torch.tensor(1.0),
          torch.ones(2), nn.ReLU()]


@pytest.mark.parametrize("expected", VALUES, ids=repr)
def test_check_value_decides_as_in_python(expected) -> None:
    guards.use_native_checks(True)
    for value in VALUES:
        _same(_both("check_value", value, expected, "self.x"))


class OwnGetitem(nn.Sequential):
    IDENTITY = nn.Identity()

    def __getitem__(self, index):
        return self.IDENTITY


class OwnDict(nn.Sequential):
    """Serves another `__dict__` (the C++ reads take the generic one only for classes that keep
    object's __getattribute__)."""

    def __getattribute__(self, name: str):
        if name == "__dict__":
            return {"_modules": {"0": "from __getattribute__"}}
        return super().__getattribute__(name)


def containers() -> list[object]:
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Sequential(nn.Tanh()))
    lst = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    holes = nn.ModuleList([nn.ReLU(), nn.ReLU()])
    holes._modules["1"] = None  # (a ModuleList slot set to None)
    bare = nn.Sequential.__new__(nn.Sequential)  # no nn.Module.__init__: no _modules
    own_dict = OwnDict()
    own_dict._modules["0"] = nn.ReLU()
    named = nn.ModuleDict({"1": nn.ReLU(), "0": nn.Tanh(), "b": nn.Identity()})  # (keys in another order)
    named._modules["3"] = None
    numbered = nn.Module()  # a submodule named "0" of a module without __getitem__
    numbered.add_module("0", nn.ReLU())
    return [seq, lst, holes, OwnGetitem(nn.ReLU()), own_dict, bare, named, numbered, [nn.ReLU()], (1, 2), {0: "a"}]


@pytest.mark.parametrize("container", containers(), ids=lambda c: type(c).__name__)
def test_item_reads_what_python_reads(container) -> None:
    guards.use_native_checks(True)
    for index in (-4, -1, 0, 1, 2, 3, True, 1.0, "0"):
        for _ in range(2):
            _same(_both("item", container, index))


PATHS = ["inner", "inner.fc", "inner.conv", "layers.0", "layers.1", "layers.2", "layers.-1", "extra?.fc", "extra.fc",
         "inner.missing", "inner.fc.weight", "", "layers", "layers.0.weight", "head", "norm"]
QUALNAMES = ["Inner", "torch.nn.Linear", "torch.nn.Conv1d", "torch.nn.ReLU", "torch.nn.ModuleList", "Outer",
             "Inner@2", "torch.nn.Sequential", "torch.nn.BatchNorm1d"]
CONDITIONS = ["zeros_padding", "eval", "len=1", "len=2", "len=3", "running_stats", "no_max_norm", "len=x"]


@settings(max_examples=200, deadline=None)
@given(path=st.sampled_from(PATHS), qualname=st.sampled_from(QUALNAMES),
       conditions=st.lists(st.sampled_from(CONDITIONS), max_size=2), change=st.sampled_from([None, *MODULE_CHANGES]))
def test_check_module_decides_as_in_python(path, qualname, conditions, change) -> None:
    guards.use_native_checks(True)
    outer = Outer()
    handles = []
    if change is not None:
        handles = [h for h in [MODULE_CHANGES[change][0](outer)] if hasattr(h, "remove")]
    try:
        for _ in range(2):  # (the second time with what the first taught the tables)
            _same(_both("check_module", outer, path, qualname, *conditions))
    finally:
        for h in handles:
            h.remove()


# -- the printed form ------------------------------------------------------------------------------
CHECKED = """\
func @Net.forward(%self: Module[Net], %x: Tensor) -> Tensor {
  %0 : str = py.constant() {value = "fc"}
  %1 : str = py.constant() {value = "torch.nn.Linear"}
  %2 : bool = py.call(%self, %0, %1) {callee = "_guards.plain_module"}
  py.guard(%2) {reason = "self.fc is not an unhooked torch.nn.Linear"}
  %3 : str = py.constant() {value = "head"}
  %4 : bool = py.call(%self, %3, %1) {callee = "_guards.plain_module"}
  py.guard(%4) {reason = "self.head is not an unhooked torch.nn.Linear"}
  %5 : str = py.constant() {value = "extra?.fc"}
  %6 : bool = py.call(%self, %5, %1) {callee = "_guards.plain_module"}
  py.guard(%6) {reason = "self.extra.fc is not an unhooked torch.nn.Linear"}
  py.check_tensor(%x) {path = (), dtype = "float32", device = "cpu", shape = ("B", 4), optional = False}
  py.check_tensor(%self) {path = ("fc", "bias"), dtype = "float32", device = "cpu", shape = (4,), optional = False}
  py.check_tensor(%self) {path = ("fc", "weight"), dtype = "float32", device = "cpu", shape = (4, 4), optional = False}
  py.check_tensor(%self) {path = ("layers", 0, "fc", "weight"), dtype = "float32", device = "cpu", shape = (4, 4), optional = False}
  py.check_tensor(%self) {path = ("layers", 0, "fc", "bias"), dtype = "float32", device = "cpu", shape = (4,), optional = False}
  py.check_tensor(%self) {path = ("layers", 1, "norm", "weight"), dtype = "float32", device = "cpu", shape = (4,), optional = False}
  py.check_tensor(%self) {path = ("mask",), dtype = "bool", device = "cpu", shape = (4, 4), optional = False}
  py.check_value(%self) {path = ("layers", 1, "norm", "eps"), expected = 1e-05}
  py.check_value(%self) {path = ("fc", "in_features"), expected = 4}
  py.check_value(%self) {path = ("head", "bias"), expected = None}
  py.check_value(%self) {path = ("block", "inner", "scale"), expected = 0.5}
  py.check_value(%self) {path = ("scale",), expected = 0.5}
  py.check_size(%self, %x) {path = ("fc", "weight"), dim = 1, expected = "C", symbols = (("C", 1, (), 1),), optional = False}
  func.return(%x)
}
"""
PRINTED_LINES = """\
def Net_forward(self, x: Tensor) -> Tensor:
    self_fc = _guards.check_module(self, "fc", "torch.nn.Linear")
    self_head = _guards.check_module(self, "head", "torch.nn.Linear")
    _guards.check_module(self, "extra?.fc", "torch.nn.Linear")
    _guards.check_tensor(x, "x", torch.float32, "cpu", ("B", 4))
    _guards.check_tensor(_guards.attr(self_fc, "bias"), "self.fc.bias", torch.float32, "cpu", (4,))
    _guards.check_tensor(_guards.attr(self_fc, "weight"), "self.fc.weight", torch.float32, "cpu", (4, 4))
    self_layers = _guards.attr(self, "layers")
    self_layers_0_fc = _guards.attr(self_layers[0], "fc")
    _guards.check_tensor(_guards.attr(self_layers_0_fc, "weight"), "self.layers[0].fc.weight", torch.float32, "cpu", (4, 4))
    _guards.check_tensor(_guards.attr(self_layers_0_fc, "bias"), "self.layers[0].fc.bias", torch.float32, "cpu", (4,))
    self_layers_1_norm = _guards.attr(self_layers[1], "norm")
    _guards.check_tensor(_guards.attr(self_layers_1_norm, "weight"), "self.layers[1].norm.weight", torch.float32, "cpu", (4,))
    _guards.check_tensor(_guards.attr(self, "mask"), "self.mask", torch.bool, "cpu", (4, 4))
    _guards.check_value(self_layers_1_norm.eps, 1e-05, "self.layers[1].norm.eps")
    _guards.check_value(self_fc.in_features, 4, "self.fc.in_features")
    _guards.check_value(_guards.attr(self_head, "bias"), None, "self.head.bias")
    _guards.check_value(_guards.at(self, "block.inner").scale, 0.5, "self.block.inner.scale")
    _guards.check_value(self.scale, 0.5, "self.scale")
    _guards.check_size(_guards.attr(self_fc, "weight"), 1, x.size(1), "self.fc.weight")
    return x
"""
PRINTED_TABLE = """\
# fmt: off
Net_forward_checks = _guards.entry_checks(
    ("", {"layers.0.fc.weight": [4, 4], "layers.0.fc.bias": [4], "layers.1.norm.weight": [4],
        "mask": _guards.TensorCheck(torch.bool, "cpu", (4, 4)), "layers.1.norm.eps": 1e-05,
        "block.inner.scale": 0.5, "scale": 0.5}),
    ("fc", "torch.nn.Linear", {"bias": [4], "weight": [4, 4], "in_features": 4}),
    ("head", "torch.nn.Linear", {"bias": None}),
    ("extra?.fc", "torch.nn.Linear"),
    tensors=(torch.float32, "cpu"),
    returns=("fc",),
)
# fmt: on


def Net_forward(self, x: Tensor) -> Tensor:
    self_fc = _guards.check_entry(self, Net_forward_checks)
    _guards.check_tensor(x, "x", torch.float32, "cpu", ("B", 4))
    _guards.check_size(_guards.attr(self_fc, "weight"), 1, x.size(1), "self.fc.weight")
    return x
"""


@pytest.fixture(params=["table", "lines"])
def form(request, monkeypatch):
    """Entry checks printed as one table (ENTRY_TABLE_MIN checks below `self` or more), or as
    one line each (the table's threshold out of reach)."""
    if request.param == "lines":
        monkeypatch.setattr(python_checks, "ENTRY_TABLE_MIN", 10**9)
    return request.param


def _printed(form: str) -> str:
    return PRINTED_TABLE if form == "table" else PRINTED_LINES


def test_entry_checks_read_each_submodule_once(form) -> None:
    """Checks below `self` go into a module-level table that `check_entry` runs (the submodule
    a check outside it reads through comes back from it: `self_fc`). As lines: a module check
    that later checks read through binds the submodule it returns; an object two reads or more
    go through is read into a local before the first; parameters and submodules are read with
    `_guards.attr`, a Python attribute (`eps`) as Python reads it."""
    emitter = FunctionEmitter(parse_program(CHECKED).funcs[0], None, set())
    lines = emitter.emit()
    tables = emitter.module_lines + ["", ""] if emitter.module_lines else []
    assert "\n".join(tables + lines) + "\n" == _printed(form)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)


class Deep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Module()
        self.inner.scale = 0.5


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.head = nn.Linear(4, 4, bias=False)
        self.extra = None
        self.layers = nn.ModuleList([Block(), Block()])
        self.register_buffer("mask", torch.ones(4, 4, dtype=torch.bool))
        self.block = Deep()
        self.scale = 0.5


def _printed_function(form: str):
    namespace = {"_guards": guards, "torch": torch, "Tensor": torch.Tensor}
    exec(_printed(form), namespace)  # noqa: S102
    return namespace["Net_forward"]


NET_CHANGES = {
    "x dtype": (lambda n, x: (n, x.double()), "argument 'x': expected dtype float32, got float64"),
    "x rank": (lambda n, x: (n, x[0]), "argument 'x': expected 2 dimensions, got 1"),
    "x size": (lambda n, x: (n, torch.zeros(2, 5)), "argument 'x': expected size 4 in dimension 1, got 5"),
    "x batch 0": (lambda n, x: (n, x[:0]), "argument 'x': expected size B >= 1 in dimension 0, got 0"),
    "x device": (lambda n, x: (n, x.to("meta")), "argument 'x': expected a cpu tensor, got meta"),
    "parameter dtype": (lambda n, x: (n.layers[0].fc.double(), (n, x))[1],
                        "argument 'self.layers[0].fc.weight': expected dtype float32, got float64"),
    "parameter shape": (lambda n, x: (setattr(n.fc, "bias", nn.Parameter(torch.zeros(5))), (n, x))[1],
                        "argument 'self.fc.bias': expected size 4 in dimension 0, got 5"),
    "buffer": (lambda n, x: (setattr(n, "mask", n.mask.float()), (n, x))[1],
               "argument 'self.mask': expected dtype bool, got float32"),
    "attribute": (lambda n, x: (setattr(n.layers[1].norm, "eps", 1e-3), (n, x))[1],
                  "self.layers[1].norm.eps: expected 1e-05, got 0.001"),
    "deep attribute": (lambda n, x: (setattr(n.block.inner, "scale", 2.0), (n, x))[1],
                       "self.block.inner.scale: expected 0.5, got 2.0"),
    "None parameter": (lambda n, x: (setattr(n.head, "bias", nn.Parameter(torch.zeros(4))), (n, x))[1],
                       f"self.head.bias: expected None, got {nn.Parameter(torch.zeros(4))!r}"),
    "module hooked": (lambda n, x: (n.fc.register_forward_pre_hook(lambda *a: None), (n, x))[1],
                      "submodule 'fc' is not an unhooked torch.nn.Linear"),
    "optional module set": (lambda n, x: (setattr(n, "extra", Block()), (n, x))[1], "passes"),
    "optional module hooked": (lambda n, x: (setattr(n, "extra", Block()), n.extra.fc.register_forward_hook(
        lambda *a: None), (n, x))[2], "submodule 'extra.fc' is not an unhooked torch.nn.Linear"),
    "optional module without it": (lambda n, x: (setattr(n, "extra", nn.Sequential()), (n, x))[1],
                                   "submodule 'extra.fc' is not an unhooked torch.nn.Linear"),
}


@pytest.mark.parametrize("change", sorted(NET_CHANGES))
def test_printed_checks_fail_as_before(change, checks, form) -> None:
    forward = _printed_function(form)
    net, x = Net(), torch.randn(3, 4)
    for _ in range(2):
        assert forward(net, x) is x
    do, message = NET_CHANGES[change]
    net, x = do(net, x)
    assert outcome(forward, net, x) == message


# -- a compiled model, end to end ------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.mktemp("guards_cache")))
        yield


MLP_CHANGES = {
    # what is done to the model or its input after a call ran the compiled code: the reason given
    "x dtype": (lambda m, x: x.double(), "argument 'x': expected dtype float32, got float64"),
    "x device": (lambda m, x: x.to("meta"), "argument 'x': expected a cpu tensor, got meta"),
    "x rank": (lambda m, x: x[0], "argument 'x': expected 3 dimensions, got 2"),
    "x size": (lambda m, x: x[:, :3], "argument 'x': expected size 16 in dimension 1, got 3"),
    "x batch 0": (lambda m, x: x[:0], "argument 'x': expected size B >= 1 in dimension 0, got 0"),
    "parameter dtype": (lambda m, x: (setattr(m.fc2.bias, "data", m.fc2.bias.data.double()), x)[1],
                        "argument 'self.fc2.bias': expected dtype float32, got float64"),
    "parameter replaced": (lambda m, x: (setattr(m.fc1, "weight", nn.Parameter(torch.zeros(256, 65))), x)[1],
                           "argument 'self.fc1.weight': expected size 64 in dimension 1, got 65"),
    "attribute": (lambda m, x: (setattr(m.norm, "eps", 1e-3), x)[1], "self.norm.eps: expected 1e-05, got 0.001"),
    "hook": (lambda m, x: (m.fc1.register_forward_hook(lambda *a: None), x)[1],
             "submodule 'fc1' is not an unhooked torch.nn.Linear"),
    "forward": (lambda m, x: (setattr(m.norm, "forward", lambda h: h), x)[1],
                "submodule 'norm' is not an unhooked torch.nn.LayerNorm"),
    "submodule": (lambda m, x: (setattr(m, "fc2", nn.Sequential(m.fc2)), x)[1],
                  "submodule 'fc2' is not an unhooked torch.nn.Linear"),
}


def _run(model, x):
    try:
        with torch.no_grad():
            return model(x)
    except Exception as error:  # noqa: BLE001  (what eager raises, the fallback raises too)
        return type(error)


@pytest.mark.parametrize("change", sorted(MLP_CHANGES))
def test_a_compiled_model_falls_back_or_raises_as_before(cache_dir, change, checks) -> None:
    runtime.reset()  # (before script(): reset() sends what script() returned to the @script lookup)
    model, (x,) = mlp.make_example()
    compiled = script(model, example_inputs=(x,))
    with runtime.mode("strict"), torch.no_grad():
        for _ in range(2):  # the compiled code runs: its checks pass (and learn what they learn)
            compiled(x[:1])
    do, reason = MLP_CHANGES[change]
    x = do(compiled, x)
    with runtime.mode("strict"), torch.no_grad(), pytest.raises(TorchscribeError, match=re.escape(f"({reason})")):
        compiled(x)
    with runtime.mode("off"), torch.no_grad():
        expected = _run(compiled, x)
    with runtime.mode("on"), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", runtime.TorchscribeWarning)
        got = _run(compiled, x)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)  # (eager ran: the same numbers)
    else:
        assert got is expected
    assert sum(runtime.fallback_counts().values()) == 1


def test_the_compiled_model_checks_what_hangs_below_self_with_one_table(cache_dir) -> None:
    model, (x,) = mlp.make_example()
    source = []
    import transpiler.jit as jit

    load = jit._load
    try:
        jit._load = lambda text, *args: (source.append(text), load(text, *args))[1]
        with pytest.MonkeyPatch.context() as patch:  # (a cache of its own: this one generates)
            patch.setenv("TORCHSCRIBE_CACHE_DIR", str(Path(os.environ["TORCHSCRIBE_CACHE_DIR"]) / "fresh"))
            script(model, example_inputs=(x,))
    finally:
        jit._load = load
    [text] = source
    for line in [  # one table of what hangs below self, made by one call
        '_guards.check_entry(self, MLP_forward_checks)',
        '_guards.check_tensor(x, "x", torch.float32, "cpu", ("B", 16, 64))',
        '("fc1", "torch.nn.Linear", {"bias": [256], "weight": [256, 64]})',
        '("norm", "torch.nn.LayerNorm", {"bias": [64], "weight": [64], "eps": 1e-05, ',
        'tensors=(torch.float32, "cpu")',
    ]:  # the statements as written before the formatter splits long ones over lines
        joined = re.sub(r"\n\s*", "", re.sub(r",\n\s*(?=\S)", ", ", text)).replace(", )", ")")
        assert line in joined

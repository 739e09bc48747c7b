"""Op attributes are declared on the op classes (ir/core/attrs.py): read through typed fields,
checked by the verifier, printed in declaration order and read back by the declared type. The
runtime helpers the IR calls are named once (ir/core/helpers.py)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core import helpers, ops  # noqa: E402
from ir.core.attrs import INTS, Attr, Opt, Tup  # noqa: E402
from ir.core.builder import Builder  # noqa: E402
from ir.core.graph import Operation, Program  # noqa: E402
from ir.core.parser import ParseError, parse_program  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.types import NONE  # noqa: E402
from ir.core.verifier import VerifyError, verify  # noqa: E402
from ir.kernel import ops as kernel_ops  # noqa: E402


class _ScaleOp(Operation):
    """This test's own op: a required float, a tuple of ints with a default, an optional string."""

    name = "test.scale"
    factor = Attr(float)
    dims = Attr(INTS, ())
    label = Attr(Opt(str), None)


class _TaggedScaleOp(_ScaleOp):
    name = "test.tagged_scale"
    tag = Attr(str, key="name")  # (stored under a key other than the field's)


def _program(*attributes: dict) -> Program:
    func = ops.FuncOp.build("f", [], [], NONE)
    b = Builder(func.body)
    for attrs in attributes:
        b.insert(_ScaleOp([], [], attrs))
    b.create(ops.ReturnOp, [b.constant(None)])
    return Program("f.py", [func])


def test_a_subclass_holds_its_bases_attributes_first_in_declaration_order() -> None:
    assert list(_TaggedScaleOp.attrs) == ["factor", "dims", "label", "name"]
    assert list(kernel_ops.PointwiseKernelOp.attrs) == ["name", "inputs", "into", "reuse"]
    assert "path" in ops.CheckTensorOp.attrs and "path" in ops.CheckSizeOp.attrs  # (from EntryCheck)


def test_fields_read_the_attribute_or_its_default_and_write_it() -> None:
    op = _TaggedScaleOp([], [], {"factor": 2.0, "name": "t"})
    assert (op.factor, op.dims, op.label, op.tag) == (2.0, (), None, "t")
    op.dims = (1, 2)
    assert op.attributes == {"factor": 2.0, "name": "t", "dims": (1, 2)}
    with pytest.raises(KeyError):
        _ScaleOp([], [], {}).factor  # noqa: B018  (a required attribute has no default)


@pytest.mark.parametrize("attrs, error", [
    ({"factor": 1.0, "scale": 2}, "test.scale declares no attribute `scale`"),
    ({"factor": "big"}, "test.scale's attribute `factor` is 'big', not float"),
    ({"factor": 1.0, "dims": (1, "2")}, "test.scale's attribute `dims` is (1, '2'), not tuple[int, ...]"),
    ({"factor": 1.0, "dims": (True,)}, "test.scale's attribute `dims` is (True,), not tuple[int, ...]"),
    ({"dims": (1,)}, "test.scale lacks its attribute `factor`"),
])
def test_the_verifier_checks_attributes_against_the_declaration(attrs: dict, error: str) -> None:
    with pytest.raises(VerifyError) as info:
        verify(_program(attrs))
    assert f"error: {error} (test.scale at None)" in str(info.value)
    assert "<-- error: " + error in str(info.value)


def test_the_verifier_reports_an_undeclared_attribute_of_a_real_op() -> None:
    program = _program()
    program.funcs[0].body.ops[0].attributes["value"] = None
    program.funcs[0].body.ops[0].attributes["kind"] = "x"
    with pytest.raises(VerifyError, match="py.constant declares no attribute `kind`"):
        verify(program)


def test_attributes_print_in_declaration_order_whatever_order_they_were_set_in() -> None:
    text = print_program(_program({"label": "a", "dims": (1,), "factor": 0.5}), with_locs=False)
    assert 'test.scale() {factor = 0.5, dims = (1,), label = "a"}' in text


def test_the_parser_converts_by_the_declared_type() -> None:
    text = "func @f() -> None {\n  test.scale() {factor = 2, dims = [1, 2]}\n  %0 : None = py.constant() {value = None}\n  func.return(%0)\n}\n"
    op = parse_program(text).funcs[0].body.ops[0]
    assert type(op.factor) is float and op.factor == 2.0 and op.dims == (1, 2)
    assert "{factor = 2.0, dims = (1, 2)}" in print_program(parse_program(text))


@pytest.mark.parametrize("attrs, error, col", [
    ("{factor = 1.0, size = 3}", "2:31: test.scale has no attribute 'size'", 31),
    ('{factor = "x"}', "2:26: attribute 'factor' of test.scale is float", 26),
])
def test_the_parser_rejects_what_the_declaration_does_not_allow(attrs: str, error: str, col: int) -> None:
    text = f"func @f() -> None {{\n  test.scale() {attrs}\n  %0 : None = py.constant() {{value = None}}\n  func.return(%0)\n}}\n"
    with pytest.raises(ParseError) as info:
        parse_program(text)
    assert str(info.value).startswith(error)
    assert info.value.col == col


def test_every_op_kind_declares_what_its_fields_read() -> None:
    """Each registered op's declared attributes are fields of its class, typed (an op that
    declares none holds none)."""
    for name, cls in Operation.registry.items():
        for key, spec in cls.attrs.items():
            assert spec.key == key
            assert str(spec.type), (name, key)
    assert ops.FuncOp.attrs["defaults"].required and not ops.FuncOp.attrs["star"].required
    assert kernel_ops.AutogradKernelOp.attrs["partial"].type == Opt(Tup(int))


def test_each_runtime_helper_the_ir_names_exists_in_its_runtime_module() -> None:
    for helper in helpers.HELPERS.values():
        module = importlib.import_module(f"runtime.{helper.home.module}")
        assert callable(getattr(module, helper.attr)), helper.name
        assert helper.home in helpers.MODULES
    assert helpers.helper("_prepacked.conv2d") is helpers.PACKED_CONV and helpers.helper("len") is None
    assert helpers.home_of("_guards.plain_module") is helpers.GUARDS and helpers.home_of("math.sqrt") is None
    assert helpers.PREPACKED.import_line == "from runtime import prepacked as _prepacked"

"""The table of element operations both kernel emitters print from (codegen/elements.py): it
covers exactly what the fuse pass may put in a kernel, every entry is spelled for both backends
with no more operands than it has, and an op outside it is one clear error."""

from __future__ import annotations

import string

import pytest

from codegen import elements
from codegen.elements import ELEMENTS, FORMS, Parts, entry
from ir.kernel.vocabulary import FUSIBLE


def test_the_table_is_the_fusible_vocabulary() -> None:
    assert set(ELEMENTS) == set(FUSIBLE)


def test_every_form_is_named_by_an_op() -> None:
    assert set(elements._POW_FORMS.values()) | {"rdiv", "erf_in_one_plus"} == set(FORMS)


def _placeholders(text: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


@pytest.mark.parametrize("name", sorted(ELEMENTS) + [f"form {f}" for f in sorted(FORMS)])
def test_every_entry_is_spelled_for_both_backends(name: str) -> None:
    e = FORMS[name.removeprefix("form ")] if name.startswith("form ") else ELEMENTS[name]
    assert 1 <= e.arity <= 3 and set(e.operands) <= {"value", "as is", "cast"}
    assert all(i < e.arity for i in e.in_float + e.numbers_in_float)
    args = [f"x{i}" for i in range(e.arity)]
    parts = Parts(args, "one", "T", True, lambda x: f"r({x})", lambda i: f"typed({args[i]})")
    for spelling in (e.cpp, e.triton):
        if isinstance(spelling, str):
            allowed = {str(i) for i in range(e.arity)} | {"one", "t"}
            assert _placeholders(spelling) <= allowed, spelling
        text = parts.fill(spelling)
        assert "x0" in text, text  # (every op reads its first operand)
        assert "{" not in text and "}" not in text, text


def test_an_op_outside_the_table_is_one_clear_error() -> None:
    with pytest.raises(NotImplementedError, match=r"no element op 'bitwise_xor' in codegen/elements.py"):
        entry("bitwise_xor")


def test_which_results_each_backend_rounds() -> None:
    """A 16-bit result is rounded after the op unless it is exact; a select (maximum, where) is
    exact in C++, whose operands are 16-bit values, not in Triton, which holds numbers in float32."""
    add, neg, maximum = ELEMENTS["add"], ELEMENTS["neg"], ELEMENTS["maximum"]
    assert add.rounds(operands_16bit=True) and add.rounds(operands_16bit=False)
    assert not neg.rounds(operands_16bit=True) and not neg.rounds(operands_16bit=False)
    assert not maximum.rounds(operands_16bit=True) and maximum.rounds(operands_16bit=False)

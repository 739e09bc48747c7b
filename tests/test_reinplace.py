"""Re-inplacing (ir/passes/reinplace.py): which functional writes go back in place (IR in, IR
out), and compiled functions against eager, bit for bit, where aliasing could tell the two
apart."""

from __future__ import annotations

import pytest
import torch

from pass_text import after
from ir.passes.reinplace import reinplace

# y = x.clone(); y[y < 0] = 0.0; y[:, :4] = last[:, None]; y[0] += 1.0 as functionalization and
# shape propagation leave it (examples/indexing.py's specialisation)
WRITES = """\
func @f(%x: f32[B, 32]@cpu, %last: f32[B]@cpu) -> f32[B, 32]@cpu {
  %0 : tuple[()] = py.constant() {value = ()}
  %1 : None = py.constant() {value = None}
  %2 : int = py.constant() {value = 1}
  %3 : int = py.constant() {value = 0}
  %4 : int = py.constant() {value = 4}
  %5 : float = py.constant() {value = 0.0}
  %6 : float = py.constant() {value = 1.0}
  %y : f32[B, 32]@cpu = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %7 : bool[B, 32]@cpu = py.compare(%y, %3) {op = "<"}
  %8 : tuple[bool[B, 32]@cpu] = py.tuple(%7)
  %9 : f32[]@cpu = torch.method(%y, %0, %5) {method = "new_full", aten = "aten::new_full"}
  %y_1 : f32[B, 32]@cpu = torch.method(%y, %8, %9) {method = "index_put", aten = "aten::index_put"}
  %10 : f32[B, 1]@cpu = torch.index(%last) {items = (("slice", False, False, False), ("none",))}
  %11 : f32[*]@cpu = torch.index(%y_1, %4) {items = (("slice", False, False, False), ("slice", False, True, False))}
  %12 : f32[*]@cpu = torch.method(%10, %11) {method = "expand_as", alias_of = 0, aten = "aten::expand_as"}
  %13 : f32[*]@cpu = torch.method(%12) {method = "clone", aten = "aten::clone"}
  %y_2 : f32[B, 32]@cpu = torch.call(%y_1, %13, %2, %1, %4, %2) {callee = "torch.slice_scatter", aten = "aten::slice_scatter"}
  %14 : f32[32]@cpu = torch.index(%y_2, %3) {items = (("value",),)}
  %15 : f32[32]@cpu = py.binary(%14, %6) {op = "+"}
  %y_3 : f32[B, 32]@cpu = torch.call(%y_2, %15, %3, %3) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  func.return(%y_3)
}
"""


def test_writes_into_a_new_tensor_go_back_in_place() -> None:
    assert after(WRITES, reinplace) == """\
func @f(%x: f32[B, 32]@cpu, %last: f32[B]@cpu) -> f32[B, 32]@cpu {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 4}
  %2 : float = py.constant() {value = 0.0}
  %3 : float = py.constant() {value = 1.0}
  %y : f32[B, 32]@cpu = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %4 : bool[B, 32]@cpu = py.compare(%y, %0) {op = "<"}
  torch.index_put(%y, %4, %2) {items = (("value",),), reinplaced = True}
  %5 : f32[B, 1]@cpu = torch.index(%last) {items = (("slice", False, False, False), ("none",))}
  torch.index_put(%y, %1, %5) {items = (("slice", False, False, False), ("slice", False, True, False)), reinplaced = True}
  %6 : f32[32]@cpu = torch.index(%y, %0) {items = (("value",),)}
  %7 : f32[32]@cpu = py.inplace(%6, %3) {op = "+", reinplaced = True}
  torch.index_put(%y, %0, %7) {items = (("value",),), reinplaced = True}
  func.return(%y)
}
"""


def test_the_result_is_the_base_for_every_later_use() -> None:
    # (the write is the base's last use; its result is read twice after it)
    text = WRITES.replace("  func.return(%y_3)", """\
  %16 : f32[B, 32]@cpu = torch.call(%y_3) {callee = "torch.tanh", aten = "aten::tanh"}
  %17 : tuple[f32[B, 32]@cpu, f32[B, 32]@cpu] = py.tuple(%y_3, %16)
  func.return(%17)""").replace("-> f32[B, 32]@cpu {", "-> tuple[f32[B, 32]@cpu, f32[B, 32]@cpu] {")
    out = after(text, reinplace)
    assert "scatter" not in out and "index_put\"" not in out
    assert "torch.call(%y) {callee = \"torch.tanh\"" in out and "py.tuple(%y, %" in out


# Each change makes the first write (`index_put` of %y) one that must stay functional.
@pytest.mark.parametrize("change", [
    # the base is an argument: the caller sees it
    ("%y : f32[B, 32]@cpu = torch.method(%x) {method = \"clone\", aten = \"aten::clone\"}",
     "%y : f32[B, 32]@cpu = torch.method(%x) {method = \"contiguous\", alias_of = 0, aten = \"aten::contiguous\"}"),
    # the old contents are read after the write
    ("  func.return(%y_3)", """\
  %16 : f32[B, 32]@cpu = py.binary(%y_3, %y) {op = "+"}
  func.return(%16)"""),
    # a module call sees the base: it may keep it
    ("  %y_1 : f32[B, 32]@cpu", """\
  %16 : Module[torch.nn.Identity] = py.getattr(%x) {attr = "m"}
  %17 : f32[B, 32]@cpu = module.call(%16, %y)
  %y_1 : f32[B, 32]@cpu"""),
    # a list holds the base
    ("  %y_1 : f32[B, 32]@cpu", """\
  %16 : list[f32[B, 32]@cpu] = py.list()
  py.list_append(%16, %y)
  %y_1 : f32[B, 32]@cpu"""),
])
def test_what_keeps_a_write_functional(change: tuple[str, str]) -> None:
    text = WRITES.replace(*change)
    assert text != WRITES
    assert "method = \"index_put\"" in after(text, reinplace)


def test_a_view_read_later_keeps_the_write_functional() -> None:
    text = WRITES.replace("  %10 : f32[B, 1]@cpu", """\
  %16 : f32[32]@cpu = torch.index(%y, %3) {items = (("value",),)}
  %10 : f32[B, 1]@cpu""").replace("  func.return(%y_3)", """\
  %17 : tuple[f32[B, 32]@cpu, f32[32]@cpu] = py.tuple(%y_3, %16)
  func.return(%17)""").replace("-> f32[B, 32]@cpu {", "-> tuple[f32[B, 32]@cpu, f32[32]@cpu] {")
    out = after(text, reinplace)
    assert "method = \"index_put\"" in out  # (%16 is read by the return, after the write)


def test_a_value_that_shares_the_base_keeps_its_copy() -> None:
    # y[:, :4] = y[:, 4:8]: the copy functionalization made of the source stays
    text = WRITES.replace(
        "%12 : f32[*]@cpu = torch.method(%10, %11)",
        "%12 : f32[*]@cpu = torch.method(%20, %11)").replace("  %11 : f32[*]@cpu", """\
  %19 : int = py.constant() {value = 8}
  %20 : f32[B, 4]@cpu = torch.index(%y_1, %4, %19) {items = (("slice", False, False, False), ("slice", True, True, False))}
  %11 : f32[*]@cpu""")
    out = after(text, reinplace)
    assert out.count("method = \"clone\"") == 2  # (x's, and the copy of the source)
    assert out.count("torch.index_put") == 3


def test_an_operator_of_another_dtype_is_not_an_augmented_assignment() -> None:
    # an int tensor plus a float: `y[0] += 1.0` would raise where `y[0] = y[0] + 1.0` casts
    text = WRITES.replace("%15 : f32[32]@cpu = py.binary(%14, %6)", "%15 : f64[32]@cpu = py.binary(%14, %6)")
    out = after(text, reinplace)
    assert "py.inplace" not in out and out.count("torch.index_put") == 3


def test_a_write_between_the_operator_and_its_write_keeps_the_read_where_it_was() -> None:
    # `t = y[0] + 1.0; z.mul_(2); y[0] = t`: memory may change between the read and the write
    text = WRITES.replace("  %y_3 : f32[B, 32]@cpu", """\
  %16 : f32[B]@cpu = torch.method(%last, %4) {method = "mul_", mutates = (0,), alias_of = 0, aten = "aten::mul_.Tensor"}
  %y_3 : f32[B, 32]@cpu""")
    out = after(text, reinplace)
    assert "py.inplace" not in out and "py.binary(%" in out and out.count("torch.index_put") == 3


def test_a_write_through_two_views_is_one_assignment() -> None:
    # y[0, 0] = 7.0: a write into y[0], carried back into y
    assert after("""\
func @f(%x: f32[4, 8]@cpu) -> f32[4, 8]@cpu {
  %0 : int = py.constant() {value = 0}
  %1 : float = py.constant() {value = 7.0}
  %y : f32[4, 8]@cpu = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %2 : f32[8]@cpu = torch.index(%y, %0) {items = (("value",),)}
  %3 : f32[]@cpu = torch.index(%y, %0, %0) {items = (("value",), ("value",))}
  %4 : f32[]@cpu = torch.call(%3, %1) {callee = "torch.full_like", aten = "aten::full_like"}
  %5 : f32[8]@cpu = torch.call(%2, %4, %0, %0) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  %y_1 : f32[4, 8]@cpu = torch.call(%y, %5, %0, %0) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
  func.return(%y_1)
}
""", reinplace) == """\
func @f(%x: f32[4, 8]@cpu) -> f32[4, 8]@cpu {
  %0 : int = py.constant() {value = 0}
  %1 : float = py.constant() {value = 7.0}
  %y : f32[4, 8]@cpu = torch.method(%x) {method = "clone", aten = "aten::clone"}
  torch.index_put(%y, %0, %0, %1) {items = (("value",), ("value",)), reinplaced = True}
  func.return(%y)
}
"""


def test_a_write_in_a_branch_of_a_tensor_made_outside_it_stays() -> None:
    text = """\
func @f(%x: f32[4, 8]@cpu, %c: bool) -> f32[4, 8]@cpu {
  %0 : int = py.constant() {value = 0}
  %y : f32[4, 8]@cpu = torch.method(%x) {method = "clone", aten = "aten::clone"}
  %1 : f32[4, 8]@cpu = scf.if(%c) {
    %2 : f32[8]@cpu = torch.index(%x, %0) {items = (("value",),)}
    %3 : f32[4, 8]@cpu = torch.call(%y, %2, %0, %0) {callee = "torch.select_scatter", aten = "aten::select_scatter"}
    scf.yield(%3)
  } {
    scf.yield(%y)
  }
  func.return(%1)
}
"""
    assert "select_scatter" in after(text, reinplace)


# -- compiled against eager -------------------------------------------------------------------------
def clone_writes(x: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[y < 0] = 0.0
    y[:, :4] = last[:, None]
    y[0] += 1.0
    y[:, ::2] = y[:, 1::2]  # a source that shares y: copied first
    return y


def view_read_after(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2.0
    row = y[1]
    y[1] = 0.0  # eager: `row` sees the write
    z = x + 1.0
    z[:, 0] = row.sum()  # z's write after row's read
    return row + 1.0, z


def written_twice(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x.clone()
    t = y[0] + 1.0
    y[1] = y[0]
    y[0] = t
    u = y.clone()
    u[-1] *= 3.0
    return y, u


def read_before_a_write(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    t = y[0] + 1.0  # reads y[0, 0] before the write below: not `y[0] += 1.0` at the end
    y[0, 0] = 7.0
    y[0] = t
    return y


@pytest.mark.parametrize("fn", [clone_writes, view_read_after, written_twice, read_before_a_write])
def test_compiled_matches_eager_bitwise(fn, tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    inputs = (torch.randn(6, 12), torch.randn(6)) if fn is clone_writes else (torch.randn(6, 12),)
    compiled = script(fn, example_inputs=inputs)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    assert "scatter" not in text.split("def ", 1)[1] or fn is view_read_after
    for batch in (6, 3, 9):
        args = tuple(torch.randn(batch, *t.shape[1:]) for t in inputs)
        with torch.no_grad():
            got, want = compiled(*args), fn(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert torch.equal(g, w)

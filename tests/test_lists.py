"""The lists pass, IR in and IR out: a list grown by appends and constant-index stores in
straight-line code becomes one `py.list` per read, holding what the list held there; a list that
can be seen as one object (returned, yielded, changed in a loop or a branch, read lazily, set at
an unknown index) stays as it is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import pytest
import torch
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import runtime  # noqa: E402
from ir.passes.lists import snapshot_lists  # noqa: E402
from transpiler import script  # noqa: E402
from tests.pass_text import after  # noqa: E402


def check(before: str, expected: str) -> None:
    assert after(before, snapshot_lists) == expected
    assert after(expected, snapshot_lists) == expected  # nothing left to do: idempotent


def unchanged(text: str) -> None:
    assert after(text, snapshot_lists) == text


def test_each_read_sees_the_elements_appended_before_it() -> None:
    check(
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 1}
  %xs : list[Tensor] = py.list(%x)
  %a : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  py.list_append(%xs, %a)
  %b : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  %n : int = py.call(%xs) {callee = "len"}
  py.list_append(%xs, %y)
  %c : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  %1 : Tensor = torch.call(%c, %n) {callee = "torch.mul", aten = "aten::mul"}
  %2 : Tensor = torch.call(%1, %b) {callee = "torch.add", aten = "aten::add"}
  func.return(%2)
}
""",
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 1}
  %xs : list[Tensor] = py.list(%x)
  %a : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  %xs_1 : list[Tensor] = py.list(%x, %a)
  %b : Tensor = torch.call(%xs_1, %0) {callee = "torch.cat", aten = "aten::cat"}
  %xs_2 : list[Tensor] = py.list(%x, %a)
  %n : int = py.call(%xs_2) {callee = "len"}
  %xs_3 : list[Tensor] = py.list(%x, %a, %y)
  %c : Tensor = torch.call(%xs_3, %0) {callee = "torch.cat", aten = "aten::cat"}
  %1 : Tensor = torch.call(%c, %n) {callee = "torch.mul", aten = "aten::mul"}
  %2 : Tensor = torch.call(%1, %b) {callee = "torch.add", aten = "aten::add"}
  func.return(%2)
}
""",
    )


def test_a_list_only_appended_to_goes() -> None:
    check(
        """\
func @f(%x: Tensor) -> Tensor {
  %xs : list[Tensor] = py.list()
  py.list_append(%xs, %x)
  func.return(%x)
}
""",
        """\
func @f(%x: Tensor) -> Tensor {
  func.return(%x)
}
""",
    )


def test_an_iteration_and_an_index_read_the_list_of_their_point() -> None:
    check(
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %xs : list[Tensor] = py.list(%x)
  py.list_append(%xs, %y)
  %0 : int = py.constant() {value = -1}
  %last : Tensor = py.getitem(%xs, %0)
  %s : Tensor = scf.for_each(%xs, %last) {
    ^(%e: Tensor, %acc: Tensor):
    %1 : Tensor = torch.call(%acc, %e) {callee = "torch.add", aten = "aten::add"}
    scf.yield(%1)
  }
  func.return(%s)
}
""",
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : int = py.constant() {value = -1}
  %xs : list[Tensor] = py.list(%x, %y)
  %last : Tensor = py.getitem(%xs, %0)
  %xs_1 : list[Tensor] = py.list(%x, %y)
  %s : Tensor = scf.for_each(%xs_1, %last) {
    ^(%e: Tensor, %acc: Tensor):
    %1 : Tensor = torch.call(%acc, %e) {callee = "torch.add", aten = "aten::add"}
    scf.yield(%1)
  }
  func.return(%s)
}
""",
    )


def test_a_returned_list_stays() -> None:
    unchanged(
        """\
func @f(%x: Tensor) -> list[Tensor] {
  %xs : list[Tensor] = py.list(%x)
  py.list_append(%xs, %x)
  %0 : int = py.call(%xs) {callee = "len"}
  func.return(%xs)
}
""")


def test_a_list_grown_in_a_loop_or_a_branch_stays() -> None:
    unchanged(
        """\
func @f(%x: Tensor, %n: int, %c: bool) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %xs : list[Tensor] = py.list(%x)
  scf.for(%0, %n, %1) {
    ^(%i: int):
    py.list_append(%xs, %x)
    scf.yield()
  }
  %ys : list[Tensor] = py.list(%x)
  py.list_append(%ys, %x)
  scf.if(%c) {
    py.list_append(%ys, %x)
    scf.yield()
  } {
    scf.yield()
  }
  %2 : Tensor = torch.call(%xs, %1) {callee = "torch.cat", aten = "aten::cat"}
  %3 : Tensor = torch.call(%ys, %1) {callee = "torch.cat", aten = "aten::cat"}
  %4 : Tensor = torch.call(%2, %3) {callee = "torch.add", aten = "aten::add"}
  func.return(%4)
}
""")


def test_stores_at_constant_indices_are_followed_into_branches() -> None:
    """swin's `shift_size = shift_size.copy()` with `shift_size[0] = 0`: each store is an SSA
    step, and a read inside a branch sees what the list held when the branch ran."""
    check(
        """\
func @f(%x: Tensor, %c: bool) -> int {
  %0 : int = py.constant() {value = 0}
  %three : int = py.constant() {value = 3}
  %m : int = py.constant() {value = -1}
  %xs : list[int] = py.list(%three, %three)
  %a : int = py.call(%xs) {callee = "sum"}
  py.list_setitem(%xs, %m, %0)
  %b : int = scf.if(%c) {
    %p : int = py.getitem(%xs, %0)
    %q : int = py.getitem(%xs, %m)
    %1 : int = py.binary(%p, %q) {op = "+"}
    scf.yield(%1)
  } {
    scf.yield(%0)
  }
  %2 : int = py.binary(%a, %b) {op = "+"}
  func.return(%2)
}
""",
        """\
func @f(%x: Tensor, %c: bool) -> int {
  %0 : int = py.constant() {value = 0}
  %three : int = py.constant() {value = 3}
  %m : int = py.constant() {value = -1}
  %xs : list[int] = py.list(%three, %three)
  %a : int = py.call(%xs) {callee = "sum"}
  %xs_1 : list[int] = py.list(%three, %0)
  %b : int = scf.if(%c) {
    %p : int = py.getitem(%xs_1, %0)
    %q : int = py.getitem(%xs_1, %m)
    %1 : int = py.binary(%p, %q) {op = "+"}
    scf.yield(%1)
  } {
    scf.yield(%0)
  }
  %2 : int = py.binary(%a, %b) {op = "+"}
  func.return(%2)
}
""",
    )


def test_a_list_set_in_a_branch_or_out_of_range_stays() -> None:
    unchanged(
        """\
func @f(%c: bool) -> int {
  %0 : int = py.constant() {value = 0}
  %two : int = py.constant() {value = 2}
  %xs : list[int] = py.list(%two, %two)
  scf.if(%c) {
    py.list_setitem(%xs, %0, %0)
    scf.yield()
  } {
    scf.yield()
  }
  %ys : list[int] = py.list(%two, %two)
  py.list_setitem(%ys, %two, %0)
  %a : int = py.call(%xs) {callee = "sum"}
  %b : int = py.call(%ys) {callee = "sum"}
  %1 : int = py.binary(%a, %b) {op = "+"}
  func.return(%1)
}
""")


def test_lists_read_lazily_set_by_index_or_stored_stay() -> None:
    unchanged(
        """\
func @f(%x: Tensor, %i: int) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %xs : list[Tensor] = py.list(%x)
  %it : list[tuple[int, Tensor]] = py.call(%xs) {callee = "enumerate"}
  py.list_append(%xs, %x)
  %ys : list[Tensor] = py.list(%x)
  py.list_append(%ys, %x)
  py.list_setitem(%ys, %i, %x)
  %zs : list[Tensor] = py.list(%x)
  py.list_append(%zs, %x)
  %nested : list[list[Tensor]] = py.list(%zs)
  %1 : Tensor = torch.call(%ys, %0) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%1)
}
""")


class Dense(nn.Module):
    """densenet's pattern: a list that each layer reads whole and appends to."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Conv2d(4 + 2 * i, 2, 3, padding=1) for i in range(3)])
        self.norm = nn.BatchNorm2d(10)

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for layer in self.layers:
            features.append(torch.relu(layer(torch.cat(features, 1))))
        return torch.relu(self.norm(torch.cat(features, 1)))


def test_an_unrolled_dense_block_matches_eager_with_every_size_known(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = Dense().eval()
    x = torch.randn(2, 4, 6, 6)
    compiled = script(model, example_inputs=(x,))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    text = next((tmp_path / "jit").glob("*.py")).read_text()
    # The last torch.cat's channel count is known, so its batch norm and relu become one kernel.
    assert "F.batch_norm" not in text
    assert '"running_mean": [10]' in text and "norm_relu(_guards.attr(self, \"norm\"), torch.cat(" in text


def test_truth_and_concatenation_read_the_list_of_their_point() -> None:
    """`if prefix:` and `prefix + [x]` read what the list holds there and keep nothing that sees
    a later append (a concatenation is a new list): the list goes SSA through them, and the
    concatenation of two displays is one."""
    check(
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 1}
  %xs : list[Tensor] = py.list()
  py.list_append(%xs, %y)
  %t : bool = py.call(%xs) {callee = "bool"}
  %1 : list[Tensor] = py.list(%x)
  %2 : list[Tensor] = py.binary(%xs, %1) {op = "+"}
  %3 : Tensor = torch.call(%2, %0) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%3)
}
""",
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 1}
  %xs : list[Tensor] = py.list(%y)
  %t : bool = py.call(%xs) {callee = "bool"}
  %1 : list[Tensor] = py.list(%x)
  %xs_1 : list[Tensor] = py.list(%y)
  %2 : list[Tensor] = py.list(%y, %x)
  %3 : Tensor = torch.call(%2, %0) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%3)
}
""",
    )


class Prefixed(nn.Module):
    """A token put before the sequence through a list that may stay empty (the vision
    transformers' class token): appended, tested for truth, concatenated with a display."""

    def __init__(self, with_token: bool) -> None:
        super().__init__()
        self.token = nn.Parameter(torch.randn(1, 1, 8)) if with_token else None

    def forward(self, x: Tensor) -> Tensor:
        parts = []
        if self.token is not None:
            parts.append(self.token.expand(x.shape[0], -1, -1))
        if parts:
            x = torch.cat(parts + [x], dim=1)
        return torch.relu(x * 2.0) + 1.0


def test_a_prefix_list_keeps_the_sizes_after_it_known(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHSCRIBE", "strict")
    for with_token, length in ((True, 6), (False, 5)):
        torch.manual_seed(0)
        model = Prefixed(with_token).eval()
        x = torch.randn(3, 5, 8)
        compiled = script(model, example_inputs=(x,))
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
            x7 = torch.randn(7, 5, 8)  # another batch size: the same code
            torch.testing.assert_close(compiled(x7), model(x7), rtol=0, atol=0)
    texts = [p.read_text() for p in sorted((tmp_path / "jit").glob("*.py"))]
    # The branch is decided when compiling; what follows it has known sizes and fuses.
    assert all("if bool(" not in t and "return relu(x)" in t for t in texts), texts
    assert sum("torch.cat(" in t and "f32[B, 6, 8]" in t for t in texts) == 1, texts


def _extended_through_an_alias(x: Tensor) -> Tensor:
    xs = [x]
    ys = xs
    xs += [x * 2.0]  # (list.__iadd__ extends the one list object: ys sees it)
    return torch.cat(ys + [x], dim=0)


def test_an_augmented_list_assignment_extends_the_list_an_alias_sees(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHSCRIBE", "strict")
    x = torch.randn(2, 3)
    compiled = script(_extended_through_an_alias, example_inputs=(x,))
    torch.testing.assert_close(compiled(x), _extended_through_an_alias(x), rtol=0, atol=0)


def _extended_by_a_list(x: Tensor) -> Tensor:
    xs = [x]
    ys = xs
    more = [x + 1.0, x * 3.0]
    xs += more  # a list value, not a display: extends in place as well
    xs.extend([x - 1.0])
    ys.extend(more)
    return torch.cat(ys + xs, dim=0)


def _extended_by_a_tuple(x: Tensor) -> Tensor:
    xs = [x]
    ys = xs
    xs += (x * 2.0, x - 1.0)  # (list.__iadd__ takes any iterable; `xs + (...)` would raise)
    xs.extend((x.abs(),))
    return torch.cat(ys, dim=0)


def _grown_in_straight_line(x: Tensor) -> Tensor:
    parts = [x]
    parts += [x.sigmoid(), x * 2.0]  # nothing else sees the list: it stays SSA
    return torch.cat(parts, dim=1)


@pytest.mark.parametrize("fn", [_extended_through_an_alias, _extended_by_a_list, _extended_by_a_tuple,
                                _grown_in_straight_line])
def test_extending_a_list_matches_eager(fn, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCHSCRIBE", "strict")
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    compiled = script(fn, example_inputs=(x,))
    # (exact but for a kernel's sigmoid, within float32's rounding of eager's)
    torch.testing.assert_close(compiled(x), fn(x))


def test_appends_of_an_augmented_assignment_leave_known_sizes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    x = torch.randn(2, 3)
    script(_grown_in_straight_line, example_inputs=(x,))(x)
    (text,) = [p.read_text() for p in (tmp_path / "jit").glob("*.py")]
    assert ".append(" not in text and "parts = [x, " in text, text  # one list display, made once


def test_a_list_passed_down_to_an_inlined_call_is_followed_through_its_none_test() -> None:
    """DLA's tree, inlined: `if children is None: children = []` of the caller's display (or of
    None) is decided, the refined list is the display, and `[x2, x1] + children` one display
    (dead constants and displays are canonicalize's to remove)."""
    check(
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %none : None = py.constant() {value = None}
  %children : list[Tensor] = py.list()
  py.list_append(%children, %y)
  %0 : bool = py.compare(%children, %none) {op = "is"}
  %kids : list[Tensor] = scf.if(%0) {
    %1 : list[Tensor] = py.list()
    scf.yield(%1)
  } {
    %2 : list[Tensor] = py.refine(%children)
    scf.yield(%2)
  }
  %3 : bool = py.compare(%none, %none) {op = "is not"}
  %4 : list[Tensor] = py.list(%x, %x)
  %5 : list[Tensor] = py.binary(%4, %kids) {op = "+"}
  %6 : int = py.constant() {value = 1}
  %7 : Tensor = torch.call(%5, %6) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%7)
}
""",
        """\
func @f(%x: Tensor, %y: Tensor) -> Tensor {
  %none : None = py.constant() {value = None}
  %0 : bool = py.constant() {value = False}
  %1 : bool = py.constant() {value = False}
  %2 : list[Tensor] = py.list(%x, %x)
  %children : list[Tensor] = py.list(%y)
  %3 : list[Tensor] = py.list(%x, %x, %y)
  %4 : int = py.constant() {value = 1}
  %5 : Tensor = torch.call(%3, %4) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%5)
}
""",
    )


def test_a_concatenation_of_a_list_something_keeps_stays() -> None:
    unchanged("""\
func @f(%x: Tensor) -> list[Tensor] {
  %xs : list[Tensor] = py.list(%x)
  %ys : list[Tensor] = py.list(%x)
  %zs : list[Tensor] = py.binary(%xs, %ys) {op = "+"}
  %t : tuple[list[Tensor], list[Tensor]] = py.tuple(%xs, %zs)
  func.return(%zs)
}
""")


class _Basic(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Tensor, shortcut: Optional[Tensor] = None) -> Tensor:
        if shortcut is None:
            shortcut = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += shortcut
        return self.relu(out)


class _Root(nn.Module):
    def __init__(self, cin: int, c: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, c, 1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, xs: List[Tensor]) -> Tensor:
        x = self.bn(self.conv(torch.cat(xs, 1)))
        x += xs[0]
        return torch.relu(x)


class _Tree(nn.Module):
    """DLA's aggregation tree: a list of earlier outputs passed down to the inner trees."""

    def __init__(self, levels: int, c: int, level_root: bool, root_dim: int = 0) -> None:
        super().__init__()
        root_dim = (root_dim or 2 * c) + (c if level_root else 0)
        self.downsample = nn.MaxPool2d(2, 2) if level_root else nn.Identity()
        self.level_root = level_root
        if levels == 1:
            self.tree1, self.tree2 = _Basic(c), _Basic(c)
            self.root: Optional[nn.Module] = _Root(root_dim, c)
        else:
            self.tree1 = _Tree(levels - 1, c, False)
            self.tree2 = _Tree(levels - 1, c, False, root_dim + c)
            self.root = None

    def forward(self, x: Tensor, children: Optional[List[Tensor]] = None) -> Tensor:
        if children is None:
            children = []
        bottom = self.downsample(x)
        if self.level_root:
            children.append(bottom)
        x1 = self.tree1(bottom)
        if self.root is not None:
            return self.root([self.tree2(x1), x1] + children)
        children.append(x1)
        return self.tree2(x1, children)


def test_a_tree_passing_its_outputs_down_in_a_list_is_functional_and_sized(tmp_path, monkeypatch) -> None:
    """Through the list, every `out += shortcut` becomes functional and every `torch.cat` has
    its sizes: the residual adds fuse with the batch norms, and the convs run channels-last.
    Before, `torch.cat` of `[x2, x1] + children` was untyped from the first tree on and each
    `+=` stayed in place, so nothing after it fused (timm's dla34 ran at eager's speed)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), _Tree(2, 8, True), _Tree(1, 8, True)).eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    compiled = script(model, example_inputs=(x,))
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(compiled(x), model(x))
    (text,) = [p.read_text() for p in (tmp_path / "jit").glob("*.py")]
    code = [line for line in text.splitlines() if not line.strip().startswith(("#", "//"))]
    assert not any(" += " in line for line in code if "for (" not in line)
    # (the roots' conv of the cat, batch norm, add and ReLU: one kernel after the conv, which
    # needs the cat's sizes)
    assert "torch.channels_last" in text and "def bn_relu(" in text and text.count("torch.cat([") == 3


def test_pops_and_inserts_at_known_places_are_followed() -> None:
    """A U-Net's skips: appended, then popped from the end and inserted at the front in
    straight-line code. Each pop is the item the list held there; the list then holds the rest."""
    check(
        """\
func @f(%x: Tensor, %y: Tensor, %z: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %xs : list[Tensor] = py.list(%x)
  py.list_append(%xs, %y)
  %a : Tensor = py.list_pop(%xs)
  py.list_insert(%xs, %0, %z)
  %b : Tensor = py.list_pop(%xs, %0)
  %c : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  %1 : Tensor = torch.call(%a, %b) {callee = "torch.add", aten = "aten::add"}
  %2 : Tensor = torch.call(%1, %c) {callee = "torch.add", aten = "aten::add"}
  func.return(%2)
}
""",
        """\
func @f(%x: Tensor, %y: Tensor, %z: Tensor) -> Tensor {
  %0 : int = py.constant() {value = 0}
  %xs : list[Tensor] = py.list(%x)
  %c : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  %1 : Tensor = torch.call(%y, %z) {callee = "torch.add", aten = "aten::add"}
  %2 : Tensor = torch.call(%1, %c) {callee = "torch.add", aten = "aten::add"}
  func.return(%2)
}
""",
    )


def test_a_pop_of_an_empty_list_or_at_an_unknown_place_stays() -> None:
    unchanged(
        """\
func @f(%x: Tensor, %i: int) -> Tensor {
  %xs : list[Tensor] = py.list(%x)
  %a : Tensor = py.list_pop(%xs)
  %b : Tensor = py.list_pop(%xs)
  func.return(%b)
}
""")
    unchanged(
        """\
func @f(%x: Tensor, %i: int) -> Tensor {
  %xs : list[Tensor] = py.list(%x, %x)
  %a : Tensor = py.list_pop(%xs, %i)
  %0 : int = py.constant() {value = 0}
  %c : Tensor = torch.call(%xs, %0) {callee = "torch.cat", aten = "aten::cat"}
  func.return(%c)
}
""")

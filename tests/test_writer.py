"""codegen/writer.py: the indented writer both Python and C++ text go through."""

from __future__ import annotations

from codegen.writer import Writer


def test_braced_blocks_nest_and_close() -> None:
    w = Writer("  ")
    with w.block("void f(int n,", "    int m) {"):
        w.line("int c = 0;")
        with w.block("auto g = [&](int i) {", close="};"):
            w.extend(["c += i;", "c *= 2;"])
        w.line()
        w.line(f"// at column {len(w.prefix)}")
    assert w.text() == (
        "void f(int n,\n    int m) {\n  int c = 0;\n  auto g = [&](int i) {\n    c += i;\n    c *= 2;\n  };\n"
        "\n  // at column 2\n}\n")


def test_python_indents_and_blank_lines_do_not_pile_up() -> None:
    w = Writer()
    w.line("def f():")
    with w.indent():
        w.line("return 1")
    w.blank(2)
    w.blank(2)
    w.line("x = f()")
    assert w.text() == "def f():\n    return 1\n\n\nx = f()\n"

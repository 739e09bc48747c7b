"""The package order of docs/architecture.md, on the real import graph (function-level imports
included): transpiler -> codegen -> ir, each importing only packages to its right, and runtime,
which generated modules import, importing none of them."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")

ORDER = ("transpiler", "codegen", "ir")  # each may import those after it
PACKAGES = (*ORDER, "runtime")


def allowed(importer: str, imported: str) -> bool:
    if importer == imported or imported == "runtime":
        return True
    if importer == "runtime":
        return False
    return ORDER.index(imported) > ORDER.index(importer)


def test_every_import_points_down_the_pipeline() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    upward = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if not allowed(module.split(".")[0], imported.split(".")[0]):
                lines = [d["line_number"] for d in graph.get_import_details(importer=module, imported=imported)]
                upward.append(f"{module} imports {imported} (line {', '.join(map(str, lines))})")
    assert not upward, "imports against the package order:\n" + "\n".join(upward)


def test_the_order_check_sees_an_upward_import() -> None:
    assert not allowed("runtime", "transpiler") and not allowed("ir", "codegen") and not allowed("codegen", "transpiler")
    assert allowed("transpiler", "ir") and allowed("ir", "runtime") and allowed("codegen", "codegen")

"""The package order of docs/architecture.md, on the real import graph (function-level imports
included): transpiler -> codegen -> ir, each importing only packages to its right, and runtime,
which generated modules import, importing none of them; and no import cycle between files."""

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


# ir/'s subpackages, each importing only those after it: the passes, the kernel IR, the shape and
# dtype rules, what the compiler knows of torch's API, the IR core.
IR_ORDER = ("passes", "kernel", "shapes", "torchapi", "core")


def test_ir_subpackages_import_down_their_order() -> None:
    graph = grimp.build_graph("ir", include_external_packages=False)
    upward = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            here, there = module.split(".")[1:2], imported.split(".")[1:2]
            if here and there and here != there and IR_ORDER.index(there[0]) < IR_ORDER.index(here[0]):
                upward.append(f"{module} imports {imported}")
    assert not upward, "imports against ir/'s order:\n" + "\n".join(upward)
    assert {m.split(".")[1] for m in graph.modules if m != "ir"} == set(IR_ORDER), "a subpackage of ir/ not in IR_ORDER"


def test_the_order_check_sees_an_upward_import() -> None:
    assert not allowed("runtime", "transpiler") and not allowed("ir", "codegen") and not allowed("codegen", "transpiler")
    assert allowed("transpiler", "ir") and allowed("ir", "runtime") and allowed("codegen", "codegen")


def cycles(imports: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's, with an explicit
    stack: the graph has hundreds of modules), in the order they complete."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            for imported in pending:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append((imported, iter(sorted(imports.get(imported, ())))))
                    break
                if imported in on_stack:
                    low[module] = min(low[module], index[imported])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def imports_of(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {module: set(graph.find_modules_directly_imported_by(module)) for module in graph.modules}


def test_no_import_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    found = [sorted(c) for c in cycles(imports_of(graph))]
    assert not found, "files that import each other, one cycle a line:\n" + "\n".join(map(", ".join, found))


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.d", imported="pkg.a")  # (d imports into the cycle, is not in it)
    assert cycles(imports_of(graph)) == []
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert cycles(imports_of(graph)) == [{"pkg.a", "pkg.b", "pkg.c"}]
    # two cycles joined by one import both ways are one
    assert cycles({"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c", "b"}, "e": {"e"}}) == [{"a", "b", "c", "d"}]
    assert sorted(map(sorted, cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}))) == [["a", "b"], ["c", "d"]]

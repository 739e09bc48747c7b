"""docs/architecture.md against the code it maps: its pass table lists the passes of
ir.passes.PIPELINE, in order, each with the module that defines it and whether code autograd
records runs it; and every file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from ir.passes import AUTOGRAD_PASSES, PIPELINE

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def table_after(heading: str, text: str) -> list[list[str]]:
    """The body rows of the first table under `## heading`, cells stripped, backticks removed."""
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(rows) > 2, f"no table under '## {heading}'"
    return [[cell.strip().strip("`") for cell in row.strip().strip("|").split("|")] for row in rows[2:]]


def pass_rows(text: str) -> list[tuple[str, str, bool]]:
    return [(name, module, autograd == "autograd") for name, module, autograd, _ in table_after("Passes", text)]


def expected_rows() -> list[tuple[str, str, bool]]:
    return [(name, fn.__module__.replace(".", "/") + ".py", name in AUTOGRAD_PASSES) for name, fn in PIPELINE]


def test_the_pass_table_is_the_pipeline() -> None:
    assert pass_rows(DOC.read_text()) == expected_rows()


def test_a_pass_without_a_row_fails() -> None:
    text = DOC.read_text()
    name = PIPELINE[-1][0]
    row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
    assert pass_rows(text.replace(row + "\n", "")) != expected_rows()
    swapped = [PIPELINE[1], PIPELINE[0], *PIPELINE[2:]]
    assert pass_rows(text) != [(n, f.__module__.replace(".", "/") + ".py", n in AUTOGRAD_PASSES) for n, f in swapped]


# A file name as the doc writes one: a path with a directory (from the repository root, a glob
# allowed), or a bare `<name>.md`, which is a page of docs/.
NAMED = re.compile(r"(?<![\w./*-])((?:[\w*-]+/)+[\w*-]*\.(?:py|md|h|cpp)|[\w-]+\.md)\b")
LINK = re.compile(r"\]\(([^)#]+)")


def named_files(text: str) -> list[str]:
    return sorted(set(NAMED.findall(text)))


def missing(text: str) -> list[str]:
    gone = [name for name in named_files(text)
            if not list((ROOT if "/" in name else ROOT / "docs").glob(name))]
    gone += [target for target in LINK.findall(text) if not (DOC.parent / target).exists()]
    return sorted(set(gone))


def test_every_named_file_exists() -> None:
    text = DOC.read_text()
    assert len(named_files(text)) > 40  # the pattern still finds the doc's module paths
    assert missing(text) == []


def test_a_missing_file_is_found() -> None:
    assert missing("see `ir/passes/nothing.py`, [x](nowhere.md) and gone.md") == [
        "gone.md", "ir/passes/nothing.py", "nowhere.md"]


def test_the_page_stays_one_page() -> None:
    lines = DOC.read_text().splitlines()
    assert len(lines) <= 130
    assert [line for line in lines if len(line) > 110 and not line.startswith("|")] == []

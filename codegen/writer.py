"""An indented text writer: lines, nested blocks, nothing else. Python text indents with
`indent()`; C++ text (a Writer of two-space levels) opens a braced block with `block()`."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator


class Writer:
    def __init__(self, indent: str = "    ") -> None:
        self.unit = indent
        self.depth = 0
        self.lines: list[str] = []

    @property
    def prefix(self) -> str:
        """The indentation of a line written now."""
        return self.unit * self.depth

    def line(self, text: str = "") -> None:
        self.lines.append(self.prefix + text if text else "")

    def extend(self, texts: Iterable[str]) -> None:
        """Lines, each at the current depth."""
        for text in texts:
            self.line(text)

    @contextmanager
    def indent(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    @contextmanager
    def block(self, *head: str, close: str = "}") -> Iterator[None]:
        """The lines of `head` (a statement opening a brace, on one line or several), what is
        written inside one level deeper, then `close`."""
        self.extend(head)
        with self.indent():
            yield
        self.line(close)

    def blank(self, count: int = 1) -> None:
        """Ensure `count` blank lines end the text so far (never more)."""
        trailing = 0
        while trailing < len(self.lines) and self.lines[-1 - trailing] == "":
            trailing += 1
        self.lines.extend([""] * max(0, count - trailing))

    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"

"""An indented text writer: lines, nested blocks, nothing else."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


class Writer:
    def __init__(self, indent: str = "    ") -> None:
        self.unit = indent
        self.depth = 0
        self.lines: list[str] = []

    def line(self, text: str = "") -> None:
        self.lines.append(self.unit * self.depth + text if text else "")

    @contextmanager
    def indent(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def blank(self, count: int = 1) -> None:
        """Ensure `count` blank lines end the text so far (never more)."""
        trailing = 0
        while trailing < len(self.lines) and self.lines[-1 - trailing] == "":
            trailing += 1
        self.lines.extend([""] * max(0, count - trailing))

    def text(self) -> str:
        return "\n".join(self.lines).rstrip("\n") + "\n"

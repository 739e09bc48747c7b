"""One diagnostic type and one renderer for every user-facing compile error.

    examples/bad.py:12:13: error: lambda expressions are not supported
       |
    12 |         g = lambda t: t + 1
       |             ^^^^^^^^^^^^^^^
       = help: define a module-level function decorated with @script
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.core.graph import Loc


@dataclass(frozen=True)
class Diagnostic:
    message: str
    loc: Loc
    hint: str | None = None
    severity: str = "error"

    def render(self, source_lines: list[str] | None) -> str:
        out = [f"{self.loc.file}:{self.loc.line}:{self.loc.col + 1}: {self.severity}: {self.message}"]
        if source_lines is not None and 1 <= self.loc.line <= len(source_lines):
            text = source_lines[self.loc.line - 1].rstrip("\n").expandtabs(1)
            gutter = " " * len(str(self.loc.line))
            # Underline the span on its first line; a multi-line span is underlined to line end.
            end = self.loc.end_col if self.loc.end_line == self.loc.line else len(text)
            width = max(1, end - self.loc.col)
            out.append(f"{gutter} |")
            out.append(f"{self.loc.line} | {text}")
            out.append(f"{gutter} | {' ' * self.loc.col}{'^' * width}")
            if self.hint:
                out.append(f"{gutter} = help: {self.hint}")
        elif self.hint:
            out.append(f"  = help: {self.hint}")
        return "\n".join(out)


class CompileError(Exception):
    """Raised with every diagnostic of a compilation that failed."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, list[str]] | None = None):
        self.diagnostics = diagnostics
        self.sources = sources or {}
        super().__init__(self.render())

    def render(self) -> str:
        text = "\n\n".join(d.render(self.sources.get(d.loc.file)) for d in self.diagnostics)
        if len(self.diagnostics) > 1:  # (the count ends the list, where the reader finishes)
            text += f"\n\n{len(self.diagnostics)} errors"
        return text


class UserError(Exception):
    """An error at a location, raised inside lowering and collected into a Diagnostic.
    `diagnostics` holds every error found: a function's lowering goes on past an error and
    raises them all at its end (UserError.of), the first being `diagnostic`."""

    def __init__(self, message: str, loc: Loc, hint: str | None = None) -> None:
        super().__init__(message)
        self.diagnostic = Diagnostic(message, loc, hint)
        self.diagnostics = [self.diagnostic]

    @staticmethod
    def of(diagnostics: list[Diagnostic]) -> UserError:
        """One error carrying all of `diagnostics` (deduplicated, in source order)."""
        found = sorted(dict.fromkeys(diagnostics), key=position)
        error = UserError(found[0].message, found[0].loc, found[0].hint)
        error.diagnostic, error.diagnostics = found[0], found
        return error


def position(d: Diagnostic) -> tuple:
    return (d.loc.file, d.loc.line, d.loc.col, d.loc.end_line, d.loc.end_col)

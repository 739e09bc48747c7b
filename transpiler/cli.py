"""`torchscribe PATH...`: write `<stem>_compiled.py` next to every model file with @script code.

Exit status: 0 done; 1 `--check` found missing or stale modules; 2 a user error (diagnostics
printed, nothing written); 3 an internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ir.core import Program

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", ".tox", ".eggs"}


def find_sources(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Python files under `paths` (recursively), in sorted order, and the paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for name in sorted(files):
                    if name.endswith(".py") and not name.endswith("_compiled.py"):
                        found.append(Path(root) / name)
        else:
            missing.append(p)
    unique = list(dict.fromkeys(found))
    return unique, missing


def mentions_script(path: Path) -> bool:
    """A cheap filter before parsing: files that never say `script` cannot have targets."""
    try:
        return "script" in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def comparable(text: str) -> str:
    """The text without the torch-version line, so --check passes on another torch minor."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("TORCH_VERSION = "))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from ir.passes import PASS_NAMES

    DUMP_POINTS = ["lower", *PASS_NAMES]
    parser = argparse.ArgumentParser(
        prog="torchscribe",
        description="Compile @script models into <stem>_compiled.py modules next to their source.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="model files or directories (searched recursively)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any compiled module is missing or stale")
    parser.add_argument("--dump-ir", metavar="after:PASS",
                        help="write nothing; print the IR of each file after the pass PASS (one of: "
                             f"{', '.join(DUMP_POINTS)}; 'all' prints it after each), by default after the last")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    # A bare --dump-ir means after the last pass (and must not take the next PATH as its value).
    argv = sys.argv[1:] if argv is None else argv
    argv = [f"--dump-ir=after:{PASS_NAMES[-1]}" if a == "--dump-ir" else a for a in argv]
    args = parser.parse_args(argv)
    if args.dump_ir is not None and args.dump_ir != "all" and args.dump_ir.removeprefix("after:") not in DUMP_POINTS:
        parser.error(f"--dump-ir={args.dump_ir}: expected after:PASS with PASS one of {', '.join(DUMP_POINTS)}, "
                     "or all")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except Exception:  # a compiler bug, not the user's mistake
        if os.environ.get("TORCHSCRIBE_DEBUG"):
            traceback.print_exc()
        else:
            print(
                f"torchscribe: internal error: {sys.exc_info()[1]!r}\n"
                "This is a bug in torchscribe. Rerun with TORCHSCRIBE_DEBUG=1 for the traceback and report it.",
                file=sys.stderr,
            )
        return 3


def run(args: argparse.Namespace) -> int:
    from ir.printer import print_program
    from runtime.loader import compiled_path_for, is_generated_file
    from transpiler.compile import compile_path
    from transpiler.diagnostics import CompileError, UserError

    sources, missing = find_sources(args.paths)
    for m in missing:
        print(f"torchscribe: error: no such file or directory: {m}", file=sys.stderr)
    if missing:
        return 2
    outputs: list[tuple[Path, str]] = []
    failed = False
    for path in sources:
        if not mentions_script(path):
            continue
        dumps: list[str] = []

        def dump(name: str, program: "Program") -> None:
            if args.dump_ir in ("all", f"after:{name}"):
                dumps.append(f"// after {name}\n" + print_program(program))

        try:
            compiled = compile_path(path, after_pass=dump if args.dump_ir else None)
        except CompileError as e:
            print(e.render(), file=sys.stderr)
            print(file=sys.stderr)
            failed = True
            continue
        except UserError as e:
            source_lines = _lines(path)
            print(e.diagnostic.render(source_lines), file=sys.stderr)
            failed = True
            continue
        if compiled is None:
            continue
        if args.dump_ir:
            print("".join(dumps), end="")
            continue
        outputs.append((path, compiled.text))
    if failed:
        print("torchscribe: errors found; nothing was written.", file=sys.stderr)
        return 2
    if args.dump_ir:
        return 0
    if args.check:
        return check(outputs)
    problems = []
    for path, text in outputs:
        out = compiled_path_for(path)
        if out.exists() and not is_generated_file(out):
            problems.append(f"torchscribe: error: {out} exists and was not written by torchscribe; "
                            "rename or delete it, then run again")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        print("torchscribe: nothing was written.", file=sys.stderr)
        return 2
    written = 0
    for path, text in outputs:
        out = compiled_path_for(path)
        if out.exists() and out.read_text(encoding="utf-8") == text:
            continue
        write_atomic(out, text)
        written += 1
        if not args.quiet:
            print(f"wrote {out}")
    if not args.quiet:
        print(f"torchscribe: {len(outputs)} compiled module(s), {written} written, {len(outputs) - written} up to date")
    return 0


def check(outputs: list[tuple[Path, str]]) -> int:
    from runtime.loader import compiled_path_for

    bad = 0
    for path, text in outputs:
        out = compiled_path_for(path)
        if not out.exists():
            print(f"{out}: missing (run `torchscribe {path}`)")
            bad += 1
        elif comparable(out.read_text(encoding="utf-8")) != comparable(text):
            print(f"{out}: stale (run `torchscribe {path}`)")
            bad += 1
    if bad:
        print(f"torchscribe --check: {bad} of {len(outputs)} compiled module(s) missing or stale")
        return 1
    print(f"torchscribe --check: {len(outputs)} compiled module(s) up to date")
    return 0


def _lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None


if __name__ == "__main__":
    sys.exit(main())

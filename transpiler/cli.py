"""`torchscribe PATH...`: write `<stem>_compiled.py` next to every model file with @script code.

Only files whose compiled module is missing or stale (source, inlined sources, torchscribe
version) are compiled, in parallel processes (`-j N`); `--force` compiles all of them.

Exit status: 0 done; 1 `--check` found missing or stale modules, or `--exit-nonzero-on-write`
and a module was written; 2 a user error (diagnostics printed, nothing written); 3 an internal
error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "build", "dist", ".tox", ".eggs"}


def find_sources(paths: list[str]) -> tuple[list[Path], list[str]]:
    """Python files under `paths` (recursively), in sorted order, and the paths that do not exist."""
    from runtime.loader import is_generated_file

    found: list[Path] = []
    missing: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_file():
            # A compiled module given by name (a shell glob, a pre-commit hook that sees it staged)
            # is output, not a model: its model is checked instead, so that an edited module is
            # regenerated (one whose model is gone is an orphan: `find_orphans`).
            if not (path.name.endswith("_compiled.py") and is_generated_file(path)):
                found.append(path)
            elif (model := model_path_for(path)).is_file():
                found.append(model)
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


def model_path_for(compiled: Path) -> Path:
    """The model file a generated module names as its source (SOURCE_FILE, beside it)."""
    from runtime.loader import read_header

    named = (read_header(compiled) or {}).get("SOURCE_FILE")
    if isinstance(named, str) and named and "/" not in named and "\\" not in named:
        return compiled.with_name(named)
    return compiled.with_name(compiled.name.removesuffix("_compiled.py") + ".py")


def find_orphans(paths: list[str]) -> list[Path]:
    """Generated modules whose model file is gone (renamed or deleted): under the directories
    given, and beside the files given (`git mv misc.py utils.py` stages utils.py, in the
    directory where misc_compiled.py stays behind)."""
    from runtime.loader import is_generated_file

    places: list[tuple[Path, bool]] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            places.append((path, True))
        elif path.is_file():
            places.append((path.parent, False))
    orphans: list[Path] = []
    for place, recursive in dict.fromkeys(places):
        walk = os.walk(place) if recursive else [(str(place), [], sorted(os.listdir(place)))]
        for root, dirs, files in walk:
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                compiled = Path(root) / name
                if name.endswith("_compiled.py") and is_generated_file(compiled) \
                        and not model_path_for(compiled).exists():
                    orphans.append(compiled)
    return list(dict.fromkeys(orphans))


def mentions_script(path: Path) -> bool:
    """A cheap filter before parsing: files that never say `script` cannot have targets."""
    try:
        return "script" in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def comparable(text: str) -> str:
    """The text without the torch-version line (and the body hash, which covers it), so --check
    passes on another torch minor."""
    return "\n".join(line for line in text.splitlines() if not line.startswith(("TORCH_VERSION = ", "BODY_HASH = ")))


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of processes, got {text!r}")
    return n


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from ir.passes import PASS_NAMES

    DUMP_POINTS = ["lower", *PASS_NAMES]
    parser = argparse.ArgumentParser(
        prog="torchscribe",
        description="Compile @script models into <stem>_compiled.py modules next to their source.",
        epilog="torchscribe explain [--example] PATH...: print what each compiled function's kernels fuse, its "
               "extern calls and entry checks, and what stayed Python and why (torchscribe explain --help).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="model files or directories (searched recursively)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any compiled module is missing or stale")
    parser.add_argument("--dump-ir", metavar="after:PASS",
                        help="write nothing; print the IR of each file after the pass PASS (one of: "
                             f"{', '.join(DUMP_POINTS)}; 'all' prints it after each), by default after the last")
    parser.add_argument("--permissive", action="store_true",
                        help="keep what the compiler does not support as Python in the compiled module (each "
                             "place is reported) instead of failing; @script(permissive=True) does it per file")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only errors")
    parser.add_argument("--force", action="store_true",
                        help="compile every file, also those whose compiled module is up to date "
                             "(by default a module generated by this version from the current source is kept)")
    parser.add_argument("--jobs", "-j", type=_positive, default=None, metavar="N",
                        help="compile in N processes (default: as many as pay for their start, by the size of the "
                             "sources; on 2 CPUs one, this process, below about 140 KB)")
    parser.add_argument("--remove-orphans", action="store_true",
                        help="delete generated modules whose model file is gone (renamed or deleted); without it "
                             "they are reported, and --check and the pre-commit hook fail on them")
    parser.add_argument("--exit-nonzero-on-write", action="store_true",
                        help="exit 1 when a compiled module was written (for pre-commit: the commit "
                             "fails until the regenerated modules are staged)")
    # A bare --dump-ir means after the last pass (and must not take the next PATH as its value).
    argv = sys.argv[1:] if argv is None else argv
    argv = [f"--dump-ir=after:{PASS_NAMES[-1]}" if a == "--dump-ir" else a for a in argv]
    args = parser.parse_args(argv)
    if args.dump_ir is not None and args.dump_ir != "all" and args.dump_ir.removeprefix("after:") not in DUMP_POINTS:
        parser.error(f"--dump-ir={args.dump_ir}: expected after:PASS with PASS one of {', '.join(DUMP_POINTS)}, "
                     "or all")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["explain"]:  # `torchscribe explain PATH...` (transpiler/explain.py)
        from transpiler import explain

        return explain.main(argv[1:])
    args = parse_args(argv)
    # SIGTERM (an interrupted commit hook, a CI timeout) stops the run as Ctrl-C does, so that the
    # workers are ended and no temporary file is left.
    previous = signal.signal(signal.SIGTERM, _terminated) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        return run(args)
    except KeyboardInterrupt:  # Ctrl-C: each file is written whole or not at all, so stop quietly
        print("torchscribe: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print("torchscribe: terminated", file=sys.stderr)
        return 143
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
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class _Terminated(BaseException):
    """SIGTERM, raised where the main thread is so that cleanups run."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated()


def run(args: argparse.Namespace) -> int:
    from runtime.files import write_atomic
    from runtime.loader import compiled_path_for, is_generated_file
    from transpiler.batch import compile_all, plural, progress_stream, up_to_date

    start = time.perf_counter()
    sources, missing = find_sources(args.paths)
    for m in missing:
        print(f"torchscribe: error: no such file or directory: {m}", file=sys.stderr)
    if missing:
        return 2
    candidates = [path for path in sources if mentions_script(path)]
    # Incremental: a module whose header says it was generated by this version from the current
    # source is not compiled again (--check and --dump-ir always compile; --force regenerates).
    incremental = not (args.check or args.dump_ir or args.force)
    fresh = {path for path in candidates if incremental and up_to_date(path, args.permissive)}
    todo = [path for path in candidates if path not in fresh]
    if args.jobs is None:
        from transpiler.batch import default_jobs

        args.jobs = default_jobs(todo)
    results = compile_all(todo, args.jobs, args.dump_ir,
                          progress_stream(len(todo), args.quiet or bool(args.dump_ir)), args.permissive)
    # Reported in the order of the files, whichever process finished first.
    for result in results:
        if result.message:
            print(result.message, file=sys.stderr)
        if result.kept and not args.quiet:
            print("\n".join(result.kept), file=sys.stderr)
        if args.dump_ir and result.status == "compiled":
            print(result.dumps, end="")
    failed = [r for r in results if r.status in ("error", "internal")]
    compiled = [r for r in results if r.status == "compiled"]
    if not args.quiet:
        untargeted = [r.path for r in results if r.status == "no_targets"]
        untargeted += [path for path in sources if path not in candidates]
        for note in untargeted_notes(args.paths, untargeted, sources):
            print(note, file=sys.stderr)
    status = 3 if any(r.status == "internal" for r in failed) else 2

    def summary(written: int, unchanged: int, unwritten: int = 0) -> None:
        if args.quiet or args.dump_ir:
            return
        files = len(fresh) + len(compiled) + len(failed)
        stats = (f"{len(compiled)} compiled: {plural(sum(r.objects for r in compiled), 'object')}, "
                 f"{plural(sum(r.kernels for r in compiled), 'kernel')}, "
                 f"{plural(sum(r.fallbacks for r in compiled), 'eager fallback')}"
                 + (f", {sum(len(r.kept) for r in compiled)} kept as Python" if args.permissive else "") + ")")
        not_written = f"{unwritten} not written, " if unwritten else ""
        print(f"torchscribe: {plural(files, 'file')}: {written} written, {not_written}{len(fresh) + unchanged} up to date, "
              f"{len(failed)} failed ({stats}; {time.perf_counter() - start:.1f} s")

    if failed:
        print("torchscribe: errors found; nothing was written.", file=sys.stderr)
        summary(0, 0, len(compiled))  # (the files that compiled were not written either)
        return status
    if args.dump_ir:
        return 0
    outputs = [(r.path, r.text or "") for r in compiled]
    orphans = find_orphans(args.paths)
    if args.check:
        return max(check(outputs), report_orphans(orphans, remove=False))
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
    written = unwritable = 0
    for path, text in outputs:
        out = compiled_path_for(path)
        try:
            if out.exists() and out.read_text(encoding="utf-8") == text:
                continue
            write_atomic(out, text)  # never a half-written module: a temporary file, then a rename
        except OSError as e:  # a read-only checkout, a full disk: the user's to fix, not a bug
            print(f"torchscribe: error: cannot write {out}: {e.strerror or e}; make its directory writable "
                  "(or run where it is), then run again", file=sys.stderr)
            unwritable += 1
            continue
        written += 1
        if not args.quiet:
            print(f"wrote {out}")
    summary(written, len(outputs) - written - unwritable, unwritable)
    orphaned = report_orphans(orphans, remove=args.remove_orphans)
    if unwritable:
        return 2
    # For pre-commit: a hook that changed files (or found an orphan) fails the commit until they are staged.
    return 1 if (written or orphaned) and args.exit_nonzero_on_write else 0


def report_orphans(orphans: list[Path], remove: bool) -> int:
    """Each generated module whose model is gone: removed (`remove`) or reported. 1 when one is
    left, else 0."""
    left = 0
    for compiled in orphans:
        model = model_path_for(compiled)
        if remove:
            try:
                compiled.unlink()
            except OSError as e:
                print(f"torchscribe: error: cannot remove {compiled}: {e.strerror or e}", file=sys.stderr)
                left = 1
                continue
            print(f"removed {compiled} (its model {model.name} is gone)")
            continue
        print(f"torchscribe: {compiled}: its model {model.name} is gone (renamed or deleted); remove the module "
              f"(`torchscribe --remove-orphans {compiled.parent}`, or `git rm {compiled}`)", file=sys.stderr)
        left = 1
    return left


def untargeted_notes(paths: list[str], untargeted: list[Path], sources: list[Path]) -> list[str]:
    """A note for each file named on the command line that has nothing to compile, saying why,
    and for each directory named whose files have none: nothing is skipped silently."""
    from transpiler.batch import plural
    from transpiler.diagnostics import UserError
    from transpiler.source import SourceFile

    notes = []
    skipped = set(untargeted)
    for p in paths:
        path = Path(p)
        if path.is_file() and path in skipped:
            try:
                why = SourceFile.read(path).why_no_targets() if mentions_script(path) else \
                    "no class or function is decorated with `@script`"
            except (OSError, UnicodeDecodeError, UserError):
                why = "it could not be read as Python"
            notes.append(f"torchscribe: note: {p}: nothing to compile: {why}")
        elif path.is_dir():
            inside = [s for s in sources if path == s.parent or path in s.parents]
            if not inside:
                notes.append(f"torchscribe: note: {p}: nothing to compile: it holds no Python file")
            elif all(s in skipped for s in inside):
                notes.append(f"torchscribe: note: {p}: nothing to compile: no class or function in its "
                             f"{plural(len(inside), 'Python file')} is decorated with `@script` (from transpiler)")
    return notes


def check(outputs: list[tuple[Path, str]]) -> int:
    from runtime.loader import EDITED, body_problem, compiled_path_for, dependency_problem, read_header
    from transpiler.settings import settings_problem

    bad = 0
    for path, text in outputs:
        out = compiled_path_for(path)
        if not out.exists():
            print(f"{out}: missing (run `torchscribe {path}`)")
            bad += 1
            continue
        existing = out.read_text(encoding="utf-8")
        if comparable(existing) != comparable(text) or body_problem(existing) is not None:
            # Say why: edited by hand, or the other file it inlines from that changed.
            reason = dependency_problem(read_header(out) or {}, out.parent) \
                or settings_problem(read_header(out) or {}, path)
            if comparable(existing) == comparable(text) or body_problem(existing) == EDITED:
                reason = body_problem(existing)
            stale = reason.removeprefix("is ") if reason else "stale"
            print(f"{out}: {stale} (run `torchscribe {path}`)")
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

"""Build and load generated C++ kernels.

A compiled module holds its kernels' C++ source as text. `load(source)` returns the shared
library built from it, through a cache keyed by the content: the source, the compiler's identity
(its path and version line), the flags and the CPU model (`-march=native` code runs only where it
was built). A cache entry is a directory `cpp/<key>` holding `kernels.cpp`, `kernels.so` and
`digest`, the SHA-256 of the library written last: an entry without a matching digest (a build
killed half way, a truncated file) is rebuilt, never loaded. Builds run in a private temporary
directory and are moved into place with one rename, under a file lock per key, so processes
building the same kernels at once do the work once and never see each other's partial files.

The kernels use a plain C ABI (pointers, sizes and strides): no torch headers, so a build takes
a fraction of a second and loading a cached one milliseconds. What every kernel source shares
(the vectorisable math, the row driver, 16-bit conversions) is the checked-in header
`<torchscribe/kernels.h>` under INCLUDE_DIR: every build has that directory on its include path,
and every cache key holds the hash of the headers there (`headers_hash`), so an edited header
rebuilds. `load(source)` returns the library
for ctypes; `load_extension(source, name)` builds the same way a CPython extension module (the
kernels plus the bindings of runtime/pyext.py) and imports it. Its cache key adds this
interpreter's ABI (cache tag, extension suffix) and its flags add Python's include directories,
which `python_flags()` finds usable once per compiler and Python (a cached probe); a machine
without Python's headers keeps the ctypes path (runtime/kernels.py chooses).
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from runtime.errors import TorchscribeError
from runtime.files import make_temporary_dir, writable, write_atomic
from runtime.loader import cache_dir

INCLUDE_DIR = Path(__file__).resolve().parent / "include"  # runtime/include: <torchscribe/*.h>
CACHE_FORMAT = "1"  # bump when the entry layout or the build recipe changes
BASE_FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fno-math-errno", "-ffp-contract=off", "-fwrapv",
              "-std=c++17", "-shared", "-fPIC")
GCC_FLAGS = ("-fschedule-insns", "-fsched-pressure")  # (gcc's own: not clang's)
# -mprefer-vector-width=512: where the CPU has AVX-512, loops use all of it (gcc's tuning for Intel
# cores picks 256 bits; a softmax over 768 on a Xeon then took 1.38x as long), as torch's own
# kernels do; without AVX-512 the flag changes nothing.
# GCC_FLAGS: gcc schedules instructions before register allocation (off by default on x86),
# interleaving the elements that ts_elements' loop (kernels.h) computes at a time, whose chains
# of math it otherwise ran one after the other (and the out-of-order core did not overlap); the
# pressure-aware variant keeps it from spilling registers for that.
# -ffp-contract=off: no fused multiply-adds across ops, so `a * b + c` rounds twice, like eager;
# -fwrapv: signed integer overflow wraps around, as torch's integer ops do (C++ leaves it undefined)
COMPILERS = ("c++", "g++", "clang++")


class CompilerNotFound(TorchscribeError):
    """No C++ compiler, and no cached build of the kernels a compiled module needs."""


class BuildError(TorchscribeError):
    """The compiler rejected generated code: a bug in torchscribe, reported with its output."""


@dataclass(frozen=True)
class Toolchain:
    cxx: str  # path of the compiler
    version: str  # its --version line
    flags: tuple[str, ...]

    @property
    def identity(self) -> str:
        return f"{self.cxx}\n{self.version}\n{' '.join(self.flags)}"


@functools.lru_cache(maxsize=None)
def toolchain() -> Toolchain | None:
    """The C++ compiler ($CXX, else the first of c++, g++, clang++ on PATH) with its version and
    flags (OpenMP when it supports it); None when there is none. What the probe found is kept
    in the cache directory per compiler binary (path, size, mtime), so a warm start runs no
    subprocess."""
    cxx = _find_compiler()
    if cxx is None:
        return None
    st = os.stat(cxx)
    probe_key = hashlib.sha256(f"{CACHE_FORMAT}\n{cxx}\n{st.st_size}\n{st.st_mtime_ns}".encode()).hexdigest()[:32]
    record = cache_dir() / "cpp" / "toolchains" / probe_key
    try:
        version, openmp = record.read_text(encoding="utf-8").splitlines()[:2]
    except (OSError, ValueError):
        version, openmp = _probe(cxx)
        try:
            write_atomic(record, f"{version}\n{openmp}\n")
        except OSError:  # (an unwritable cache: probed again by the next process)
            pass
    flags = BASE_FLAGS + (GCC_FLAGS if "clang" not in version else ())
    flags += ("-fopenmp",) if openmp == "openmp" else ()
    return Toolchain(cxx, version, flags)


def _find_compiler() -> str | None:
    wanted = os.environ.get("CXX")
    if wanted:
        return shutil.which(wanted)
    for name in COMPILERS:
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def _probe(cxx: str) -> tuple[str, str]:
    try:
        done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as error:
        raise CompilerNotFound(f"the C++ compiler {cxx!r} cannot be run ({error}); set CXX to a working "
                               "compiler (g++ or clang++)") from None
    lines = (done.stdout or done.stderr).splitlines()
    version = lines[0].strip() if lines else "unknown"
    probe = "#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n"
    with tempfile.TemporaryDirectory(prefix="torchscribe-omp-") as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(probe)
        done = subprocess.run([cxx, "-fopenmp", str(src), "-o", str(Path(tmp) / "probe")], capture_output=True,
                              timeout=120)
    return version, "openmp" if done.returncode == 0 else "no-openmp"


@functools.lru_cache(maxsize=None)
def machine() -> str:
    """What -march=native code depends on: the architecture and the CPU model."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "Model", "cpu model")):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.machine()}\n{model}"


def _hash(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=None)
def python_flags() -> tuple[str, ...] | None:
    """The flags that build a CPython extension module for this interpreter (its include
    directories, and what the platform needs), when its headers are installed and the C++
    compiler accepts them; None otherwise, or without a compiler. The probe's answer is kept in
    the cache directory per compiler, interpreter and Python.h, so a warm start runs nothing."""
    chain = toolchain()
    if chain is None:
        return None
    include = _python_include()
    flags = tuple(f for d in include for f in ("-I", d)) + ("-fvisibility=hidden",)
    # hidden: only PyInit_<name> is exported, so kernels of the same name in two libraries of
    # one process, or in a library loaded RTLD_GLOBAL, never stand in for each other
    if sys.platform == "darwin":
        flags += ("-undefined", "dynamic_lookup")  # Python's symbols come from the interpreter
    try:
        st = os.stat(Path(include[0]) / "Python.h")
    except (OSError, IndexError):
        return None
    probe_key = _hash(CACHE_FORMAT, chain.identity, _python_abi(), *flags, f"{st.st_size} {st.st_mtime_ns}")
    record = cache_dir() / "cpp" / "toolchains" / f"python-{probe_key}"
    try:
        found = record.read_text(encoding="utf-8").strip()
    except OSError:
        found = _probe_python(chain, flags)
        write_atomic(record, found + "\n")
    return flags if found == "python" else None


def _probe_python(chain: Toolchain, flags: tuple[str, ...]) -> str:
    probe = "#include <Python.h>\nstatic PyModuleDef probe = {PyModuleDef_HEAD_INIT, \"probe\", nullptr, -1};\n"
    with tempfile.TemporaryDirectory(prefix="torchscribe-python-") as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text(probe)
        done = subprocess.run([chain.cxx, "-std=c++17", "-fsyntax-only", *flags, str(src)], capture_output=True,
                              timeout=120)
    return "python" if done.returncode == 0 else "no-python"


def _python_include() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(paths[k] for k in ("include", "platinclude") if paths.get(k)))


def _python_abi() -> str:
    """What an extension module built here depends on: the interpreter's ABI."""
    return f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')} {sys.abiflags}"


@functools.lru_cache(maxsize=None)
def headers_hash() -> str:
    """The hash of the headers under INCLUDE_DIR (names and texts), which every build may include."""
    h = hashlib.sha256()
    for path in sorted(INCLUDE_DIR.rglob("*.h")):
        h.update(path.relative_to(INCLUDE_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:32]


def include_flags() -> tuple[str, ...]:
    """The flags that put the headers of INCLUDE_DIR on a build's include path."""
    return ("-I", str(INCLUDE_DIR))


_loaded: dict[str, object] = {}  # by source key: what load or load_extension returned


def load(source: str) -> ctypes.CDLL:
    """The shared library built from `source` (C++). Built now when the cache has no valid entry
    for this source, compiler and flags; without a compiler, the entry last built from this
    source on this machine is used (CompilerNotFound when there is none)."""
    source_key = _hash(CACHE_FORMAT, machine(), headers_hash(), source)
    lib = _loaded.get(source_key)
    if lib is None:
        lib = ctypes.CDLL(str(_entry(source, source_key, ()) / "kernels.so"))
        _loaded[source_key] = lib
    return lib  # type: ignore[return-value]


def load_extension(source: str, name: str) -> ModuleType:
    """The CPython extension module `name` built from `source`, which defines `PyInit_<name>`
    (runtime/pyext.py writes it); cached as `load` does, with the interpreter's ABI in the key.
    Not entered in sys.modules. `name` should be derived from the source: a process can load
    any number of these, but not two different ones of one name."""
    source_key = _hash(CACHE_FORMAT, machine(), _python_abi(), headers_hash(), source)
    module = _loaded.get(source_key)
    if module is None:
        if toolchain() is None:
            flags: tuple[str, ...] = ()  # only a cached build can be loaded: no flags needed
        else:
            flags = python_flags()  # type: ignore[assignment]
            if flags is None:
                raise BuildError(f"cannot build a Python extension module: the headers of this Python "
                                 f"(Python.h in {' or '.join(_python_include())}) are missing or do not compile")
        path = _entry(source, source_key, flags) / "kernels.so"
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        _loaded[source_key] = module
    return module  # type: ignore[return-value]


_MODULE_DEF = """
static PyModuleDef module_def = {{PyModuleDef_HEAD_INIT, "{name}", "{doc}", -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&module_def); }}
"""


def runtime_extension(path: str, prefix: str) -> ModuleType | None:
    """The extension module built from one of the runtime's own C++ files (`path`, which defines
    a `methods` table), named `prefix` and a hash of its text; None where this machine cannot
    build or load it (no compiler and no cached build, a compiler without Python's headers), so
    that the caller keeps its Python path."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if toolchain() is not None and python_flags() is None:
            return None  # a compiler without Python's headers
        name = prefix + hashlib.sha256(text.encode()).hexdigest()[:16]
        doc = "runtime/" + os.path.basename(path)
        return load_extension(text + _MODULE_DEF.format(name=name, doc=doc), name)
    except (TorchscribeError, OSError):
        return None


def _entry(source: str, source_key: str, extra_flags: tuple[str, ...]) -> Path:
    """The valid cache entry built from `source` (see the module docstring), built now if need be."""
    root = cache_dir() / "cpp"
    latest = root / "by-source" / source_key  # names the entry last built from this source
    chain = toolchain()
    if chain is None:
        try:
            entry = root / latest.read_text(encoding="utf-8").strip()
        except OSError:
            entry = None
        if entry is None or not _valid(entry):
            raise CompilerNotFound(_no_compiler_message()) from None
        return entry
    entry = root / _hash(source_key, chain.identity, *extra_flags)
    if not _valid(entry):
        # (a read-only cache still serves what it holds; what is built goes where this process can write)
        root = writable(root)
        entry = root / entry.name
        if not _valid(entry):
            with _locked(root / f"{entry.name}.lock"):
                if not _valid(entry):  # another process may have built it while we waited
                    _build(source, chain, extra_flags, entry)
            write_atomic(root / "by-source" / source_key, entry.name + "\n")
    return entry


def _no_compiler_message() -> str:
    wanted = os.environ.get("CXX")
    looked = f"CXX={wanted!r} is not an executable on PATH" if wanted else \
        "looked for c++, g++ and clang++ on PATH"
    return (f"no C++ compiler found ({looked}), and the kernels of this compiled module are not in the cache "
            f"({cache_dir() / 'cpp'}). Install a C++ compiler (for example `apt install g++` or "
            "`xcode-select --install`) or set CXX to one, or run the model eagerly with TORCHSCRIBE=off.")


def _valid(entry: Path) -> bool:
    try:
        digest = (entry / "digest").read_text().strip()
        data = (entry / "kernels.so").read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == digest


class _locked:
    """An exclusive lock on a file (held by the process until released or the process ends)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _build(source: str, chain: Toolchain, extra_flags: tuple[str, ...], entry: Path) -> None:
    tmp = make_temporary_dir(entry.parent, f".{entry.name}.")
    try:
        src = tmp / "kernels.cpp"
        src.write_text(source, encoding="utf-8")
        out = tmp / "kernels.so"
        command = [chain.cxx, *chain.flags, *include_flags(), *extra_flags, str(src), "-o", str(out)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            kept = entry.parent / f"{entry.name}.failed.cpp"
            shutil.copyfile(src, kept)
            errors = "\n".join(done.stderr.splitlines()[:30])
            raise BuildError(f"the C++ compiler rejected generated kernels (a torchscribe bug; please report "
                             f"it with {kept}):\n$ {' '.join(command)}\n{errors}")
        (tmp / "digest").write_text(hashlib.sha256(out.read_bytes()).hexdigest() + "\n")
        if entry.exists():  # an invalid entry: replace it whole
            shutil.rmtree(entry, ignore_errors=True)
        os.replace(tmp, entry)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["BuildError", "CompilerNotFound", "INCLUDE_DIR", "Toolchain", "headers_hash", "include_flags", "load",
           "load_extension", "python_flags", "toolchain"]

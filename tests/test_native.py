"""Building and loading C++ kernels: once per content, safe under concurrent builds, never a
partial entry, usable without a compiler once built, clear errors otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime import native

ROOT = Path(__file__).resolve().parent.parent


def source(n: int) -> str:
    return f'extern "C" int add_{n}(int a, int b) {{ return a + b + {n}; }}\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    native._loaded.clear()
    native.toolchain.cache_clear()
    yield tmp_path
    native._loaded.clear()
    native.toolchain.cache_clear()


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "cpp").iterdir() if p.is_dir() and p.name not in ("by-source", "toolchains"))


def in_fresh_process(code: str, cache: Path, **env: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, TORCHSCRIBE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=300)


def test_builds_once_and_loads(cache: Path) -> None:
    lib = native.load(source(1))
    assert lib.add_1(2, 3) == 6
    assert native.load(source(1)) is lib
    [entry] = entries(cache)
    assert sorted(p.name for p in entry.iterdir()) == ["digest", "kernels.cpp", "kernels.so"]
    native.load(source(2))
    assert len(entries(cache)) == 2


def test_a_fresh_process_loads_the_cached_build(cache: Path) -> None:
    native.load(source(3))
    [entry] = entries(cache)
    built = (entry / "kernels.so").stat().st_mtime_ns
    done = in_fresh_process(f"""
        import time
        t = time.perf_counter()
        from runtime import native
        lib = native.load({source(3)!r})
        print(lib.add_3(1, 1), time.perf_counter() - t)
    """, cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "5"
    assert (entry / "kernels.so").stat().st_mtime_ns == built, "rebuilt instead of loaded"


def test_no_compiler_needed_once_built(cache: Path) -> None:
    native.load(source(4))
    done = in_fresh_process(f"""
        from runtime import native
        print(native.load({source(4)!r}).add_4(1, 1))
    """, cache, CXX="no-such-compiler-anywhere")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "6"


def test_no_compiler_and_no_cache_says_what_is_missing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-anywhere")
    native.toolchain.cache_clear()
    with pytest.raises(native.CompilerNotFound) as error:
        native.load(source(5))
    text = str(error.value)
    assert "no C++ compiler found" in text and "no-such-compiler-anywhere" in text
    assert str(cache / "cpp") in text and "TORCHSCRIBE=off" in text


def test_a_corrupt_entry_is_rebuilt(cache: Path) -> None:
    # Built in another process: truncating a library this process has mapped would crash it.
    done = in_fresh_process(f"""
        from runtime import native
        native.load({source(6)!r})
    """, cache)
    assert done.returncode == 0, done.stderr
    [entry] = entries(cache)
    so = entry / "kernels.so"
    so.write_bytes(so.read_bytes()[:100])  # a truncated library
    done = in_fresh_process(f"""
        from runtime import native
        print(native.load({source(6)!r}).add_6(1, 1))
    """, cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "8"
    assert native._valid(entry)


def test_concurrent_builds_share_one_entry(cache: Path) -> None:
    code = f"""
        from runtime import native
        print(native.load({source(7)!r}).add_7(1, 1))
    """
    environment = dict(os.environ, TORCHSCRIBE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=environment, cwd=ROOT) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert [o.strip() for o, _ in outs] == ["9"] * 4
    assert len(entries(cache)) == 1
    assert not [p for p in (cache / "cpp").iterdir() if p.name.startswith(".")], "temporary files left"


def test_a_compiler_error_is_reported_as_a_bug(cache: Path) -> None:
    with pytest.raises(native.BuildError, match="rejected generated kernels"):
        native.load('extern "C" int broken( { return 0; }\n')
    assert not entries(cache)

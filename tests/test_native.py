"""Building and loading C++ kernels: once per content, safe under concurrent builds, never a
partial entry, usable without a compiler once built, clear errors otherwise."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch

from runtime import kernels, native
from runtime.kernel_signatures import Arg, kernel_signatures

ROOT = Path(__file__).resolve().parent.parent


def source(n: int) -> str:
    return f'extern "C" int add_{n}(int a, int b) {{ return a + b + {n}; }}\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    native._loaded.clear()
    native.toolchain.cache_clear()
    native.python_flags.cache_clear()
    yield tmp_path
    native._loaded.clear()
    native.toolchain.cache_clear()
    native.python_flags.cache_clear()


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "cpp").iterdir() if p.is_dir() and p.name not in ("by-source", "toolchains"))


def in_fresh_process(code: str, cache: Path, **env: str) -> subprocess.CompletedProcess:
    # (the C++ entry checks off: importing runtime would build them into the cache these tests count)
    environment = dict(os.environ, TORCHSCRIBE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT),
                       TORCHSCRIBE_NATIVE_GUARDS="off", **env)
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
    environment = dict(os.environ, TORCHSCRIBE_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT),
                       TORCHSCRIBE_NATIVE_GUARDS="off")
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=environment, cwd=ROOT) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert [o.strip() for o, _ in outs] == ["9"] * 4
    assert len(entries(cache)) == 1
    assert not [p for p in (cache / "cpp").iterdir() if p.name.startswith(".")], "temporary files left"


def test_kernels_include_the_runtime_headers_and_an_edited_header_rebuilds(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel source includes <torchscribe/kernels.h> (runtime/include); the headers' hash is
    part of every cache key, so a changed header builds again rather than loading what was built
    against the old one."""
    code = '#include <torchscribe/kernels.h>\nextern "C" double biggest(double a, double b) { return ts_max(a, b); }\n'
    assert native.load(code).biggest is not None
    copy = tmp_path / "include"
    (copy / "torchscribe").mkdir(parents=True)
    for header in (native.INCLUDE_DIR / "torchscribe").glob("*.h"):
        (copy / "torchscribe" / header.name).write_text(header.read_text())
    kernels_h = copy / "torchscribe" / "kernels.h"
    kernels_h.write_text(kernels_h.read_text().replace("#endif  // TORCHSCRIBE_KERNELS_H",
                                                       "static inline double ts_edited() { return 1; }\n#endif"))
    monkeypatch.setattr(native, "INCLUDE_DIR", copy)
    native.headers_hash.cache_clear()
    try:
        edited = code.replace("ts_max(a, b)", "ts_max(a, b) + ts_edited() - 1")
        assert native.load(edited).biggest is not None  # (builds only against the edited header)
        native.load(code)
        assert len(entries(cache)) == 3  # the first source again: built anew, its key changed
    finally:
        native.headers_hash.cache_clear()


def test_a_compiler_error_is_reported_as_a_bug(cache: Path) -> None:
    with pytest.raises(native.BuildError, match="rejected generated kernels"):
        native.load('extern "C" int broken( { return 0; }\n')
    assert not entries(cache)


# -- runtime/kernels.Library: the fastcall extension module, and the ctypes fallback ------------

KERNELS = """#include <cstdint>
extern "C" void k0_axpb(int64_t n, double* __restrict out, const double* __restrict x, int64_t x_s0, double a,
                        int64_t b) {
  for (int64_t i = 0; i < n; i++) out[i] = a * x[i * x_s0] + b;
}
extern "C" void k1_sum(int64_t n, int64_t* __restrict out, const int64_t* __restrict x) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; i++) s += x[i];
  out[0] = s;
}
"""
I, D, P = Arg("i"), Arg("d"), Arg("p")
SIGNATURES = {"k0_axpb": (I, P, Arg("p", (0,)), D, I), "k1_sum": (I, P, P)}


def test_the_signatures_are_read_off_the_declarations() -> None:
    assert kernel_signatures(KERNELS) == SIGNATURES
    wrapped = """// extern "C" void commented(int64_t n) is not a kernel
static void helper(int x) {}
extern "C" void k(
    int64_t n0, float* __restrict out0,  /* the output */
    const uint16_t* __restrict in0, int64_t in0_s0, double s0) {}
"""
    # the leading n0, n1, ... are the sizes; out0, ... the outputs
    assert kernel_signatures(wrapped) == {"k": (Arg("i", role="size"), Arg("p", role="out"), Arg("p", (0,)), D)}
    spelt = 'extern "C" void k(int64_t n0, int64_t n1, ts_out<float> out0, ts_in<uint16_t> in0, int64_t in0_s1) {}'
    size = Arg("i", role="size")
    assert kernel_signatures(spelt) == {"k": (size, size, Arg("p", role="out"), Arg("p", (1,)))}
    # strides are a pointer's when they follow it and name it, of the tensor's own dims
    strides = 'extern "C" void k(int64_t n, float* x, int64_t x_s0, int64_t x_s2, int64_t y_s0, float* y, int64_t x_s1) {}'
    assert kernel_signatures(strides) == {"k": (I, Arg("p", (0, 2)), I, P, I)}
    with pytest.raises(ValueError, match="parameter `int x` is not a pointer, an int64_t or a double"):
        kernel_signatures('extern "C" void bad(int64_t n, int x) {}')


def needs_python_headers() -> None:
    if native.python_flags() is None:
        pytest.skip("Python's headers are not installed: only the ctypes binding can be built")


def run_kernels(lib: kernels.Library) -> None:
    x = torch.arange(6, dtype=torch.float64)
    out = torch.empty(3, dtype=torch.float64)
    lib.k0_axpb(3, out, x[::2], 0.5, -1)  # x[::2] * 0.5 - 1: the tensor's stride, 2, is passed
    assert out.tolist() == [-1.0, 0.0, 1.0]
    lib.k0_axpb(3, out.data_ptr(), x, 3, 7)  # an address for a pointer without strides; an int for the double
    assert out.tolist() == [7.0, 10.0, 13.0]
    ints = (ctypes.c_int64 * 4)(1, 2, 3, 1 << 40)
    total = torch.zeros(1, dtype=torch.int64)
    lib.k1_sum(4, total, ctypes.addressof(ints))
    assert total.item() == 6 + (1 << 40)


def test_fastcall_binding_calls_kernels(cache: Path) -> None:
    needs_python_headers()
    lib = kernels.Library(KERNELS)
    assert lib.binding == "fastcall"
    assert type(lib.k0_axpb).__name__ == "builtin_function_or_method"
    run_kernels(lib)
    assert kernels.Library(KERNELS).k0_axpb is lib.k0_axpb, "built or loaded twice"
    [entry] = entries(cache)
    assert native._valid(entry)
    assert "PyInit_ts_kernels_" in (entry / "kernels.cpp").read_text()


def test_fastcall_checks_its_arguments(cache: Path) -> None:
    needs_python_headers()
    lib = kernels.Library(KERNELS)
    check_arguments(lib)


def check_arguments(lib: kernels.Library) -> None:
    x = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) takes 5 arguments \(4 given\)"):
        lib.k0_axpb(3, x, x, 0.5)
    with pytest.raises(TypeError, match=r"kernel k1_sum\(\) takes 3 arguments \(4 given\)"):
        lib.k1_sum(1, x, x, 0)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) argument 0: .*float"):
        lib.k0_axpb(3.0, x, x, 0.5, 0)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) argument 3"):
        lib.k0_axpb(3, x, x, "0.5", 0)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) argument 1: expected a tensor or an address, got str"):
        lib.k0_axpb(3, "x", x, 0.5, 0)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) argument 2: expected a tensor, got int"):
        lib.k0_axpb(3, x, x.data_ptr(), 0.5, 0)  # (a pointer with strides takes its tensor)
    with pytest.raises(IndexError, match=r"kernel k0_axpb\(\) argument 2: a tensor of 0 dimensions; the kernel "
                                          r"reads the stride of dimension 0"):
        lib.k0_axpb(3, x, x[0], 0.5, 0)
    with pytest.raises(OverflowError, match=r"kernel k0_axpb\(\) argument 4"):
        lib.k0_axpb(3, x, x, 0.5, 1 << 64)
    with pytest.raises(TypeError, match="keyword"):
        lib.k1_sum(1, x, x=x)
    lib.k0_axpb(0, x, x, 0.5, 0)  # still callable after the errors


SIZED = """#include <torchscribe/kernels.h>
extern "C" void k2_add(int64_t n0, int64_t n1, ts_out<float> out0, ts_out<float> out1, ts_in<float> in0, int64_t in0_s0,
                       int64_t in0_s1) {
  for (int64_t i = 0; i < n0; i++)
    for (int64_t j = 0; j < n1; j++) out0[i * n1 + j] = out1[i * n1 + j] = in0[i * in0_s0 + j * in0_s1] + 1;
}
"""


@pytest.mark.parametrize("fastcall", [True, False], ids=["fastcall", "ctypes"])
def test_sizes_as_one_tuple_and_the_outputs_returned(cache: Path, fastcall: bool) -> None:
    if fastcall:
        needs_python_headers()
    lib = kernels.Library(SIZED, fastcall=fastcall)
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a, b = torch.empty(2, 3), torch.empty(2, 3)
    returned = lib.k2_add(x.shape, a, b, x.t().contiguous().t())  # (a shape is a tuple: the kernel's n0, n1)
    assert returned[0] is a and returned[1] is b and a.tolist() == b.tolist() == (x + 1).tolist()
    assert lib.k2_add(2, 3, a, b, x)[0] is a  # (each size an argument, as before)
    with pytest.raises(TypeError, match=r"k2_add\(\) .*"):
        lib.k2_add((2, 3, 1), a, b, x)
    with pytest.raises(TypeError, match=r"k2_add\(\) .*"):
        lib.k2_add((2, 3), a, b)


def test_ctypes_fallback(cache: Path) -> None:
    lib = kernels.Library(KERNELS, fastcall=False)
    assert lib.binding == "ctypes"
    run_kernels(lib)
    x = torch.zeros(3, dtype=torch.float64)  # the tensors' refusals are the extension module's
    with pytest.raises(TypeError, match=r"k0_axpb\(\) missing 1 required positional argument"):
        lib.k0_axpb(3, x, x, 0.5)
    with pytest.raises(TypeError, match=r"kernel k0_axpb\(\) argument 2: expected a tensor, got int"):
        lib.k0_axpb(3, x, x.data_ptr(), 0.5, 0)
    with pytest.raises(IndexError, match=r"kernel k0_axpb\(\) argument 2: a tensor of 0 dimensions"):
        lib.k0_axpb(3, x, x[0], 0.5, 0)
    native._loaded.clear()
    with pytest.MonkeyPatch.context() as m:  # a machine without Python's headers: ctypes by default
        m.setattr(native, "python_flags", lambda: None)
        lib = kernels.Library(KERNELS)
    assert lib.binding == "ctypes"
    run_kernels(lib)
    assert len(entries(cache)) == 1  # the same build both times, no extension module


@pytest.mark.parametrize("fastcall", [True, False])
def test_two_libraries_in_one_process(cache: Path, fastcall: bool) -> None:
    if fastcall:
        needs_python_headers()
    other = KERNELS.replace("a * x[i * x_s0] + b", "a * x[i * x_s0] - b")  # same kernel names
    first = kernels.Library(KERNELS, fastcall=fastcall)
    second = kernels.Library(other, fastcall=fastcall)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    out = torch.empty(2, dtype=torch.float64)
    for lib, expected in [(first, [11.0, 12.0]), (second, [-9.0, -8.0]), (first, [11.0, 12.0])]:
        assert lib.binding == ("fastcall" if fastcall else "ctypes")
        lib.k0_axpb(2, out, x, 1.0, 10)
        assert out.tolist() == expected
    assert len(entries(cache)) == 2


def test_extension_cache_key_has_the_python_abi(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    needs_python_headers()
    assert sysconfig.get_config_var("EXT_SUFFIX") in native._python_abi()
    assert sys.implementation.cache_tag in native._python_abi()
    kernels.Library(KERNELS)
    [built] = entries(cache)
    native._loaded.clear()
    monkeypatch.setattr(native, "_python_abi", lambda: "cpython-399 .cpython-399-x86_64-linux-gnu.so")
    run_kernels(kernels.Library(KERNELS))  # another interpreter: its own build
    assert len(entries(cache)) == 2
    assert len(list((cache / "cpp" / "by-source").iterdir())) == 2


def test_no_compiler_needed_once_the_extension_is_built(cache: Path) -> None:
    needs_python_headers()
    kernels.Library(KERNELS)
    code = f"""
        import ctypes
        from runtime import kernels
        lib = kernels.Library({KERNELS!r})
        ints = (ctypes.c_int64 * 2)(20, 22)
        total = (ctypes.c_int64 * 1)()
        lib.k1_sum(2, ctypes.addressof(total), ctypes.addressof(ints))
        print(lib.binding, total[0])
    """
    done = in_fresh_process(code, cache, CXX="no-such-compiler-anywhere")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fastcall", "42"]
    # only a ctypes build in the cache (built where the headers were missing): that one is used
    other = KERNELS + "// another library\n"
    kernels.Library(other, fastcall=False)
    done = in_fresh_process(code.replace(repr(KERNELS), repr(other)), cache, CXX="no-such-compiler-anywhere")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ctypes", "42"]


def test_the_python_headers_probe(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    include = cache / "include"
    include.mkdir()
    monkeypatch.setattr(native, "_python_include", lambda: [str(include)])
    assert native.python_flags() is None  # no Python.h
    (include / "Python.h").write_text("#error not a usable Python.h\n")
    native.python_flags.cache_clear()
    assert native.python_flags() is None  # one that does not compile
    [record] = (cache / "cpp" / "toolchains").glob("python-*")
    assert record.read_text() == "no-python\n"
    native.python_flags.cache_clear()
    lib = kernels.Library(KERNELS)
    assert lib.binding == "ctypes"
    run_kernels(lib)
    with pytest.raises(native.BuildError, match="Python.h"):
        kernels.Library(KERNELS, fastcall=True)


def test_a_corrupt_extension_entry_is_rebuilt(cache: Path) -> None:
    needs_python_headers()
    code = f"""
        import ctypes
        from runtime import kernels
        lib = kernels.Library({KERNELS!r})
        ints = (ctypes.c_int64 * 2)(20, 22)
        total = (ctypes.c_int64 * 1)()
        lib.k1_sum(2, ctypes.addressof(total), ctypes.addressof(ints))
        print(lib.binding, total[0])
    """
    done = in_fresh_process(code, cache)  # not here: truncating a library this process maps would crash it
    assert done.returncode == 0, done.stderr
    [entry] = entries(cache)
    so = entry / "kernels.so"
    so.write_bytes(so.read_bytes()[:100])
    done = in_fresh_process(code, cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fastcall", "42"]
    assert native._valid(entry)

"""The compiled module's side of its kernels: build (or load from the cache) the library of its
C++ kernels from the source text the module holds, and expose each kernel as a function of
tensors, Python ints and floats (a tensor for a data pointer and the strides the kernel declares
after it, a tuple for its leading sizes) that returns its outputs; import Triton and choose each
kernel's launcher.

Two bindings, the same to the caller. "fastcall": the kernels built into a tiny CPython
extension module with one METH_FASTCALL function each (runtime/pyext.py writes the bindings),
which reads each tensor's data_ptr() and stride() itself: about 1.0 us a call with four tensors
and five numbers, against 1.3 us for a Python launcher passing them read (`x.data_ptr(),
*x.stride()`) to the same function. "ctypes": the plain library, each kernel a ctypes function
with its argument types declared, behind a Python function written for it that reads the
tensors, about 2.7 us a call (benchmarks/kernel_call.py, 2 CPUs); used where Python's headers are
not installed (runtime/native.py probes once), and, without a compiler, where only a ctypes
build of these kernels is in the cache.

Which launcher a kernel runs is chosen once, when the module is imported (`launcher`): the C++
one for a kernel on CPU tensors, the Triton one for a kernel on CUDA tensors (the entry checks
pin every tensor's device, so a call never has to look), unless TORCHSCRIBE_BACKEND says "cpp"
or "triton" for every kernel. Triton is imported only where a kernel runs on it
(`import_triton`), so a module on CPU tensors imports and runs where Triton is not installed. A
module that holds no Triton code names its C++ launchers after its kernels and chooses nothing:
under TORCHSCRIBE_BACKEND=triton its Library builds nothing and each kernel refuses its calls.

TORCHSCRIBE_PROFILE=1 (read at import) makes each kernel a torch.profiler range named
`torchscribe:<kernel>` (a C++ kernel's call into the library, a Triton kernel's launcher), so
that a profile shows each generated kernel's time beside torch's ops (otherwise a C++ kernel's
time is the calling Python frame's). A range costs about 7 us a launch
even with no profiler running, so it is off by default and profiled timings overstate small kernels."""

from __future__ import annotations

import ctypes
import functools
import os
from operator import itemgetter
from types import ModuleType
from typing import Any, Callable

from runtime import native, pyext
from runtime.errors import TorchscribeError
from runtime.kernel_signatures import Arg, kernel_signatures

_ARG_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int64, "d": ctypes.c_double}


class Library:
    """`Library(source)`: one attribute per `extern "C"` function of `source` (the kernels),
    called with one argument per parameter (`kernel_signatures`) but that a tensor stands for a
    data pointer and the strides declared after it: `_lib.k(n0, 32, out0, in0)` for `k(int64_t
    n0, int64_t n1, float* out0, const float* in0, int64_t in0_s0)` passes `in0.data_ptr()` and
    `in0.stride(0)`. Built when the module is imported, so a missing compiler is reported before
    any call runs.

    `fastcall`: None (the default) uses the extension module where it can be built or is cached,
    else ctypes; True requires the extension module; False uses ctypes. `binding` says which:
    "none" where TORCHSCRIBE_BACKEND=triton: nothing is built, and each kernel raises
    GuardFailure when called, so that the call runs eagerly (a module whose kernels run on CPU
    tensors alone binds their names to its C++ launchers, which call these). With
    TORCHSCRIBE_PROFILE=1 each kernel is a torch.profiler range, `torchscribe:<name>`."""

    binding: str

    def __init__(self, source: str, *, fastcall: bool | None = None) -> None:
        signatures = kernel_signatures(source)
        if forced_backend() == "triton":
            self.binding = "none"
            for name in signatures:
                setattr(self, name, _refuses(f"kernel {name.removesuffix('_kernel')} has no Triton version: its module "
                                             f"was compiled for CPU tensors only (without {BACKEND_VAR}=triton), and "
                                             f"{BACKEND_VAR}=triton"))
            return
        self._build(source, signatures, fastcall)
        if PROFILE:
            for name in signatures:
                setattr(self, name, _profiled(name.removesuffix("_kernel"), getattr(self, name)))

    def _build(self, source: str, signatures: dict[str, tuple[Arg, ...]], fastcall: bool | None) -> None:
        if fastcall is None:  # without a compiler, an extension module can still be in the cache
            fastcall = native.python_flags() is not None or native.toolchain() is None
            required = False
        else:
            required = fastcall
        module = _extension_module(source, signatures, required) if fastcall else None
        if module is not None:
            self.binding = "fastcall"
            for name in signatures:
                setattr(self, name, getattr(module, name))
            return
        lib = native.load(source)
        self.binding = "ctypes"
        for name, args in signatures.items():
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [_ARG_TYPES[k] for a in args for k in a.kind + "i" * len(a.strides)]
            setattr(self, name, _ctypes_call(name, fn, args))


def _ctypes_call(name: str, fn: Callable[..., None], args: tuple[Arg, ...]) -> Callable[..., None]:
    """`fn` (a ctypes function) called as the extension module's function is: a tensor for each
    data pointer, and for the strides declared after it. A function written for the kernel
    (`k(a0, a1, a2)`: `fn(a0, _address(a1), a2.data_ptr(), a2.stride(1))`, where a loop over
    the arguments took four times as long); a tensor argument it cannot read
    is named as the extension module names it (a wrong count as Python does)."""
    names = [f"a{i}" for i in range(len(args))]
    scope: dict[str, Any] = {"fn": fn, "_address": _address, "_refuse": _refuse, "args": args}
    passed = []
    for i, a in enumerate(args):
        if a.kind != "p":
            passed.append(names[i])
        elif not a.strides:
            passed.append(f"_address({names[i]})")
        elif len(a.strides) == 1:
            passed += [f"{names[i]}.data_ptr()", f"{names[i]}.stride({a.strides[0]})"]
        else:
            scope[f"_strides{i}"] = itemgetter(*a.strides)
            passed += [f"{names[i]}.data_ptr()", f"*_strides{i}({names[i]}.stride())"]
    given = ", ".join(names)
    outs = [names[i] for i, a in enumerate(args) if a.role == "out"]
    returned = outs[0] if len(outs) == 1 else f"({', '.join(outs)},)" if outs else "None"
    head = f"def {name}({given}):\n"
    sizes = sum(a.role == "size" for a in args)
    if sizes:  # (a tuple of the sizes first, or each size an argument: unpacked, not spread)
        lead, rest = names[:sizes], names[sizes:]

        def unpack(target: list[str], total: int) -> str:
            return (f"        if len(rest) != {len(target)}:\n"
                    f"            _wrong_count({name!r}, {total}, len(rest) + 1)\n"
                    + (f"        {', '.join(target)}, = rest\n" if target else ""))
        head = (f"def {name}(s, *rest):\n"
                f"    if type(s) is not int:  # (x.shape)\n"
                f"        if len(s) != {sizes}:\n"
                f"            raise TypeError(f'{name}() takes a tuple of {sizes} sizes, not {{len(s)}}')\n"
                f"        {', '.join(lead)}, = s\n" + unpack(rest, len(rest) + 1)
                + f"    else:\n        {names[0]} = s\n" + unpack(names[1:], len(names)))
        scope["_wrong_count"] = _wrong_count
    text = (f"{head}    try:\n        fn({', '.join(passed)})\n"
            f"    except (AttributeError, IndexError):\n        _refuse({name!r}, args, ({given},))\n        raise\n"
            f"    return {returned}\n")
    exec(compile(text, f"<kernel {name}>", "exec"), scope)
    return scope[name]


def _wrong_count(name: str, expected: int, given: int) -> None:
    raise TypeError(f"{name}() takes {expected} positional arguments but {given} were given")


def _address(value: Any) -> Any:
    """A data pointer's argument: a tensor's data_ptr(), or an address (an int, or None)."""
    return value if value is None or type(value) is int else value.data_ptr()


def _refuse(name: str, args: tuple[Arg, ...], given: tuple) -> None:
    """Raises what the extension module raises for the first tensor argument it cannot read."""
    for i, (a, value) in enumerate(zip(args, given)):
        if a.kind != "p" or (not a.strides and (value is None or type(value) is int)):
            continue
        if not (hasattr(value, "data_ptr") and (not a.strides or hasattr(value, "stride"))):
            raise TypeError(f"kernel {name}() argument {i}: expected a tensor"
                            f"{'' if a.strides else ' or an address'}, got {type(value).__name__}") from None
        if a.strides and max(a.strides) >= len(value.stride()):
            raise IndexError(f"kernel {name}() argument {i}: a tensor of {value.dim()} dimensions; the kernel "
                             f"reads the stride of dimension {max(a.strides)}") from None


def _extension_module(source: str, signatures: dict[str, tuple[Arg, ...]], required: bool) -> ModuleType | None:
    name, text = pyext.extension_source(source, signatures)
    try:
        return native.load_extension(text, name)
    except native.CompilerNotFound:
        if required:
            raise
        return None  # no compiler and no extension build cached: a ctypes build may be


BACKEND_VAR = "TORCHSCRIBE_BACKEND"
PROFILE = os.environ.get("TORCHSCRIBE_PROFILE", "0") == "1"
BACKENDS = ("cpp", "triton")


def forced_backend() -> str | None:
    """What TORCHSCRIBE_BACKEND says: None (unset: each kernel runs on its device's backend),
    "cpp" or "triton" (every kernel)."""
    raw = os.environ.get(BACKEND_VAR, "")
    if raw == "":
        return None
    if raw in BACKENDS:
        return raw
    raise TorchscribeError(
        f"{BACKEND_VAR}={raw!r} is not a valid setting; use 'cpp' (every kernel as C++, on CPU "
        f"tensors), 'triton' (every kernel through Triton: CUDA tensors, or CPU tensors in Triton's "
        f"interpreter with TRITON_INTERPRET=1) or leave it unset (C++ for CPU tensors, Triton for "
        f"CUDA tensors)."
    )


def import_triton(devices: set[str]) -> ModuleType | None:
    """Triton, for a module whose kernels run on `devices`: None where no kernel runs through
    it (on the CPU unless TORCHSCRIBE_BACKEND=triton; TORCHSCRIBE_BACKEND=cpp) or where it is not
    installed and was not asked for (a kernel on CUDA tensors then says so when called)."""
    forced = forced_backend()
    if forced == "cpp" or (forced is None and "cuda" not in devices):
        return None
    try:
        import triton
    except ImportError:
        if forced == "triton":
            raise TorchscribeError(
                f"{BACKEND_VAR}=triton, but Triton is not installed: install it (`pip install triton`, "
                f"Linux only), or unset {BACKEND_VAR} to run the kernels of CPU tensors as C++."
            ) from None
        return None
    return triton


def launcher(namespace: dict[str, Any], name: str, device: str) -> Callable[..., Any]:
    """The launcher kernel `name` of a compiled module (`namespace`: its globals) runs through,
    for its tensors' `device`: `<name>_cpp` on the CPU, `<name>_triton` on CUDA, or the one
    TORCHSCRIBE_BACKEND names. Where that one cannot run here, a launcher that raises saying why
    (the module still imports; a call that needs it is an error), or, where the module holds no
    Triton code at all (compiled for CPU tensors only), one that raises GuardFailure: the call
    runs eagerly, as for any input the module was not compiled for."""
    backend = forced_backend() or ("cpp" if device == "cpu" else "triton")
    chosen = namespace.get(f"{name}_{backend}")
    if backend == "cpp" and chosen is None:  # (C++ is emitted for CPU kernels only)
        return _fails(f"{BACKEND_VAR}=cpp, but kernel {name} runs on {device} tensors, which C++ "
                      f"kernels cannot read; unset {BACKEND_VAR} to run it through Triton.")
    if chosen is None and "triton" not in namespace:
        return _refuses(f"kernel {name} has no Triton version: its module was compiled for CPU tensors only "
                        f"(without {BACKEND_VAR}=triton), and {BACKEND_VAR}=triton")
    if chosen is None:
        return _fails(f"kernel {name} runs on {device} tensors through Triton, which is not installed: "
                      f"install it (`pip install triton`).")
    if device == "cpu" and backend == "triton" and not _interpreted(namespace["triton"]):
        raise TorchscribeError(
            f"{BACKEND_VAR}=triton runs the kernels of CPU tensors only in Triton's interpreter: set "
            f"TRITON_INTERPRET=1 before Triton is imported, or unset {BACKEND_VAR} to run them as C++."
        )
    # (a C++ kernel is a profiler range of its own: Library)
    return _profiled(name, chosen) if PROFILE and backend == "triton" else chosen


def _profiled(name: str, launch: Callable[..., Any]) -> Callable[..., Any]:
    """`launch` inside a torch.profiler range named after the kernel (TORCHSCRIBE_PROFILE=1)."""
    import torch

    record = torch.profiler.record_function
    label = f"torchscribe:{name}"

    @functools.wraps(launch)
    def run(*args: Any, **kwargs: Any) -> Any:
        with record(label):
            return launch(*args, **kwargs)

    return run


def _interpreted(triton: ModuleType) -> bool:
    knobs = getattr(triton, "knobs", None)  # (Triton 3.4 and later)
    return bool(knobs.runtime.interpret) if knobs is not None else os.environ.get("TRITON_INTERPRET") == "1"


def _fails(message: str) -> Callable[..., Any]:
    def launch(*args: Any) -> Any:
        raise TorchscribeError(message)

    return launch


def _refuses(reason: str) -> Callable[..., Any]:
    def launch(*args: Any) -> Any:
        from runtime.guards import GuardFailure

        raise GuardFailure(reason)

    return launch

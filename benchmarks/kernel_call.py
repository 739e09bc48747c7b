"""What calling a C++ kernel costs, without the kernel: a no-op with 14 parameters (the sizes,
data pointers and strides of a rank-2 kernel with a few inputs, and scalars), called with 9
arguments (a tensor for each data pointer and the strides after it) through each binding of
runtime/kernels.Library, and the cold build of each.

    .venv/bin/python -m benchmarks.kernel_call [--calls N]

Builds into a fresh temporary cache directory, so the build times are cold ones.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import timeit

SOURCE = """#include <cstdint>
extern "C" void k0_noop(int64_t n0, int64_t n1, float* __restrict out0, const float* __restrict in0,
                        int64_t in0_s0, int64_t in0_s1, const float* __restrict in1, int64_t in1_s0,
                        int64_t in1_s1, const float* __restrict in2, int64_t in2_s0, int64_t s0, int64_t s1,
                        double s2) {}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="torchscribe-bench-")
    os.environ["TORCHSCRIBE_CACHE_DIR"] = cache
    try:
        run(args.calls, args.repeat)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def run(calls: int, repeat: int) -> None:
    from runtime import kernels, native
    from runtime.kernel_signatures import kernel_signatures

    native.toolchain()  # probed now, not counted in a build
    native.python_flags()
    import torch

    out0, in0, in1 = torch.empty(64, 128), torch.empty(64, 128), torch.empty(128, 64).t()
    call_args = (64, 128, out0, in0, in1, torch.empty(128), 3, 4, 0.5)
    assert len(call_args) == len(kernel_signatures(SOURCE)["k0_noop"]) == 9
    for fastcall in (False, True):
        t = time.perf_counter()
        lib = kernels.Library(SOURCE, fastcall=fastcall)
        build = time.perf_counter() - t
        fn = lib.k0_noop
        best = min(timeit.repeat(lambda: fn(*call_args), number=calls, repeat=repeat))
        via = min(timeit.repeat(lambda: lib.k0_noop(*call_args), number=calls, repeat=repeat))
        empty = min(timeit.repeat(lambda: None, number=calls, repeat=repeat))
        print(f"{lib.binding:9} cold build {build * 1e3:6.0f} ms   call {(best - empty) / calls * 1e6:.3f} us"
              f"   lib.k0_noop(...) {(via - empty) / calls * 1e6:.3f} us   (lambda overhead"
              f" {empty / calls * 1e6:.3f} us subtracted)")


if __name__ == "__main__":
    main()

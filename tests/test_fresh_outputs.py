"""A kernel asks Linux for huge pages under a large new output (ts_fresh, runtime's kernels.h):
the output of a softmax over 50 MB then faults in a 2 MB page at a time, not 4 KB, where the
machine's transparent huge pages allow it ("madvise" or "always")."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import torch

from closeness import assert_close_to_eager
from test_fuse_reductions import SOURCE
from source_module import imported_source

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.skipif(not THP.exists() or "[never]" in THP.read_text(), reason="no transparent huge pages")
def test_a_large_output_faults_in_few_pages(tmp_path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "fresh_models", SOURCE) as fns:
        x = torch.randn(128, 128, 768)  # 50 MB: each output a new mmap of malloc's
        f = script(fns.softmax, example_inputs=(x,))
        assert_close_to_eager(f(x), fns.softmax(x))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(3):
            f(x)
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3
    assert faults < 2000, faults  # (12289 in 4 KB pages)

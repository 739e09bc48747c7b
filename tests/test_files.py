"""Files the tool writes take the mode a plain write would (the umask applied), written whole:
compiled modules, the jit cache, built kernels, the decisions file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from runtime.files import make_temporary_dir, umask, write_atomic
from source_module import imported_source
from transpiler.cli import main


@pytest.fixture(params=[0o022, 0o002, 0o077])
def mask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_umask_is_read_without_changing_it(mask: int) -> None:
    assert umask() == mask
    assert umask() == mask


def test_a_written_file_and_a_made_directory_take_the_umask(tmp_path: Path, mask: int) -> None:
    write_atomic(tmp_path / "a" / "f.txt", "text\n")
    assert (tmp_path / "a" / "f.txt").read_text() == "text\n"
    assert mode(tmp_path / "a" / "f.txt") == 0o666 & ~mask
    write_atomic(tmp_path / "a" / "f.txt", b"again")  # over an existing file
    assert mode(tmp_path / "a" / "f.txt") == 0o666 & ~mask
    assert mode(make_temporary_dir(tmp_path, ".d.")) == 0o777 & ~mask
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["f.txt"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("old")
    with pytest.raises(TypeError):
        write_atomic(path, 12)  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


MODEL = '''\
import torch
from torch import Tensor
from transpiler import script


@script
def f(x: Tensor) -> Tensor:
    return torch.relu(x) * 2
'''


def test_a_compiled_module_is_readable_as_its_model_is(tmp_path: Path, mask: int) -> None:
    model = tmp_path / "m.py"
    model.write_text(MODEL)
    assert main(["-q", str(model)]) == 0
    assert mode(tmp_path / "m_compiled.py") == 0o666 & ~mask == mode(model)


SOURCE = '''
import torch
from torch import Tensor


def chain(x: Tensor) -> Tensor:
    return torch.tanh(x * 2 + {k})
'''


def test_cache_files_and_kernel_builds_take_the_umask(tmp_path: Path, monkeypatch, mask: int) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, f"umask_{mask:o}", SOURCE.format(k=mask)) as module:  # (a kernel of its own)
        f = script(module.chain, example_inputs=(torch.randn(4, 8),))
        torch.testing.assert_close(f(torch.randn(4, 8)).shape, torch.Size([4, 8]))
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and not p.name.endswith(".lock")]
    dirs = [p for p in (tmp_path / "cache").rglob("*") if p.is_dir()]
    assert any(p.name == "kernels.so" for p in files), files  # (a kernel was built)
    for p in files:
        assert mode(p) & 0o044 == 0o644 & ~mask & 0o044, (p, oct(mode(p)))  # readable as a plain write is
    for p in dirs:
        assert mode(p) & 0o055 == 0o755 & ~mask & 0o055, (p, oct(mode(p)))


def test_an_unwritable_cache_compiles_in_a_private_directory_with_one_warning(tmp_path: Path, monkeypatch) -> None:
    """A cache directory that cannot be made or written (here under a regular file, which even
    root cannot write into): `script()` compiles, builds its kernels in this process's own
    temporary directory, and says so once."""
    import runtime.files
    from runtime.errors import TorchscribeWarning
    from transpiler import script

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(runtime.files, "_writable", {})
    with imported_source(tmp_path, "unwritable_cache", SOURCE.format(k=7)) as module:
        with pytest.warns(TorchscribeWarning, match="cannot be written") as warned:
            f = script(module.chain, example_inputs=(torch.randn(4, 8),))
            g = script(module.chain, example_inputs=(torch.randn(4, 8),))
        x = torch.randn(3, 8)
        torch.testing.assert_close(f(x), module.chain(x))
        torch.testing.assert_close(g(x), module.chain(x))
    assert len({str(w.message).split(" cannot")[0] for w in warned}) == len(warned)  # once per directory
    assert list(runtime.files.private_dir().glob("cpp/*/kernels.so"))  # its kernel was built there
    assert list(runtime.files.private_dir().glob("jit/chain_*.py"))


def test_jit_cache_off_writes_no_module_into_the_cache(tmp_path: Path, monkeypatch) -> None:
    from transpiler import script

    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHSCRIBE_JIT_CACHE", "off")
    with imported_source(tmp_path, "jit_cache_off", SOURCE.format(k=8)) as module:
        f = script(module.chain, example_inputs=(torch.randn(4, 8),))
        x = torch.randn(3, 8)
        torch.testing.assert_close(f(x), module.chain(x))
    assert not (tmp_path / "cache" / "jit").exists()

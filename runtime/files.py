"""Files the tool writes (compiled modules, the caches): whole or not at all, with the mode a
plain `open(path, "w")` would give them.

`tempfile.mkstemp` makes a file of mode 0600 and `mkdtemp` a directory of mode 0700, and a rename
keeps the mode: a compiled module written that way could not be read by another user of the
checkout (a container, a service account), nor a shared cache's kernels. So the temporary file or
directory takes the process's umask applied to 0666 or 0777 before it is renamed into place.

A cache directory that cannot be written (read-only, another user's) is replaced, for the writes
of this process, by a temporary directory of its own (`writable`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import warnings
from pathlib import Path


def umask() -> int:
    """The process's umask (Linux shows it in /proc; elsewhere it is read by setting it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: str | bytes) -> None:
    """`path` holds `data` (text as UTF-8 with "\\n" line ends), or is as it was: a temporary file
    beside it, renamed over it. Its parent directories are made as needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def make_temporary_dir(parent: Path, prefix: str) -> Path:
    """A new directory under `parent`, to fill and then rename into place, with a plain mkdir's mode."""
    made = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(made, 0o777 & ~umask())
    return made


_writable: dict[Path, Path] = {}  # a cache directory -> where this process writes in its place
_private: list[Path] = []  # this process's temporary directory, made on first need


def private_dir() -> Path:
    """A directory of this process's own, removed when it exits: where what must not (or cannot)
    go into the cache is written instead (`TORCHSCRIBE_JIT_CACHE=off`, an unwritable cache)."""
    if not _private:
        made = Path(tempfile.mkdtemp(prefix="torchscribe-"))
        atexit.register(shutil.rmtree, made, True)
        _private.append(made)
    return _private[0]


def writable(directory: Path) -> Path:
    """`directory` when this process can write into it (made if need be), else a directory under
    `private_dir()` in its place, with one warning: a read-only or unwritable cache costs the
    builds of this process, not the run."""
    found = _writable.get(directory)
    if found is not None:
        return found
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe.", dir=directory)
        os.close(fd)
        os.unlink(probe)
        found = directory
    except OSError as e:
        found = private_dir() / directory.name
        found.mkdir(parents=True, exist_ok=True)
        from runtime.errors import TorchscribeWarning  # (warned once per cache directory)

        warnings.warn(TorchscribeWarning(
            f"the torchscribe cache {directory} cannot be written ({e.strerror or e}): this process compiles "
            f"into a temporary directory, and what it builds is not kept; set TORCHSCRIBE_CACHE_DIR to a "
            f"writable directory to keep it"), stacklevel=2)
    _writable[directory] = found
    return found


__all__ = ["make_temporary_dir", "private_dir", "umask", "writable", "write_atomic"]

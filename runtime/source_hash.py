"""The one definition of a model source's hash.

The compiler records ``source_hash(text)`` in each compiled module's header and the runtime
compares it with ``file_source_hash(model_file)``; both must call these functions so that
line-ending or BOM differences (a Windows checkout) never make a module look stale.
"""

from __future__ import annotations

import hashlib
import io
import os
import tokenize

PREFIX = "sha256:"


def source_hash(text: str) -> str:
    """``"sha256:" + hexdigest`` of ``text`` with CRLF/CR turned into LF and a leading BOM dropped."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_source_text(path: str | os.PathLike[str]) -> str:
    """Decode a Python source file as the interpreter would (PEP 263 cookie, UTF-8 BOM)."""
    with open(path, "rb") as f:
        data = f.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def file_source_hash(path: str | os.PathLike[str]) -> str:
    """``source_hash`` of the text of the file at ``path``."""
    return source_hash(read_source_text(path))

"""What the Triton test modules share: Triton's interpreter on CPU tensors where there is no GPU
(set before Triton is first imported), the device the tests' tensors go to, and a skip of the
importing module when Triton is missing or was imported without the interpreter on a machine
without a GPU."""

from __future__ import annotations

import os
import sys

import pytest
import torch

if "triton" not in sys.modules and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
if not INTERPRETED and not torch.cuda.is_available():
    pytest.skip("Triton was imported before TRITON_INTERPRET=1 was set, and there is no GPU", allow_module_level=True)
DEVICE = "cpu" if INTERPRETED else "cuda"

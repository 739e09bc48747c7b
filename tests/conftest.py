"""Every compilation in the test suite runs the IR verifier between passes. Without a GPU,
Triton runs in its interpreter, which must be chosen before anything imports Triton (torch's
own modules may import it): so here, first."""

import os
import shutil

os.environ.setdefault("TORCHSCRIBE_VERIFY", "1")
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The real-model corpus needs torchvision and minutes per model: `make corpus` runs it, in its own
# virtualenv, with TORCHSCRIBE_CORPUS=1.
collect_ignore = [] if os.environ.get("TORCHSCRIBE_CORPUS") == "1" else ["corpus"]

"""Every compilation in the test suite runs the IR verifier between passes."""

import os

os.environ.setdefault("TORCHSCRIBE_VERIFY", "1")


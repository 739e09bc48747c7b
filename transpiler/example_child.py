"""The child process of `batch.run_in_child`: compiles the files it is given here, where their
example factories may run (transpiler/examples.py), and pickles the results back.

    python -m transpiler.example_child RESULTS.pickle DUMP_IR permissive|"" FILE...
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from transpiler.batch import compile_one


def main(argv: list[str]) -> int:
    result_path, dump_ir, permissive, *paths = argv
    import torch

    torch.set_num_threads(1)  # (compiling; the examples' own work is small)
    results = [compile_one(Path(p), dump_ir or None, permissive == "permissive", examples="here") for p in paths]
    with open(result_path, "wb") as f:
        pickle.dump(results, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

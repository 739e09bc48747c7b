"""Python names in generated code: unique within a function, never shadowing what the module uses."""

from __future__ import annotations

import keyword

# Names the generated module binds at top level; locals must not shadow them.
MODULE_NAMES = {"torch", "F", "math", "Tensor", "Optional", "_guards", "_prepacked", "_stacking", "_buffers", "COMPILED"}


def function_name(sym_name: str) -> str:
    """`MyCell.forward` -> `MyCell_forward`; `Block@2.forward` (a variant) -> `Block_v2_forward`;
    `Block.forward#1` (compiled for an overload declaration) -> `Block_forward_o1`;
    `Block.forward:example` (a specialisation, transpiler/specialisations.py) -> `Block_forward_example`."""
    return sym_name.replace(".", "_").replace("@", "_v").replace("#", "_o").replace(":", "_")


def model_module_name(module: str) -> str:
    """The global through which kept Python code reads its file's module-level names:
    `_source` for the file the module is generated from, `_modeling_gpt2` for
    `transformers.models.gpt2.modeling_gpt2`."""
    return "_source" if not module else "_" + module.rpartition(".")[2]


class Namespace:
    def __init__(self, reserved: set[str]) -> None:
        self.taken = set(reserved) | MODULE_NAMES

    def take(self, hint: str) -> str:
        base = hint if hint.isidentifier() and not keyword.iskeyword(hint) else "tmp"
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

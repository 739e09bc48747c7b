"""Text of Python for the emitter: operator precedence (`PREC`, `Expr`), literals, annotations
and type comments, reads past nn.Module.__getattr__ (`attribute_path`), and whether a source
comment restates the statement under it (`restates`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ir.core.graph import PURE, Operation
from ir.core.types import (
    DataclassType,
    DictType,
    ListType,
    OptionalType,
    ScalarType,
    TensorType,
    TensorValues,
    TupleType,
    Type,
)
from ir.kernel import ops as kernel_ops

# Python operator precedence, loosest first; atoms and calls bind tightest.
PREC = {
    "if": 1, "or": 2, "and": 3, "not": 4, "cmp": 5, "|": 6, "^": 7, "&": 8, "<<": 9, ">>": 9,
    "+": 10, "-": 10, "*": 11, "@": 11, "/": 11, "//": 11, "%": 11, "unary": 12, "**": 13, "atom": 16,
}


@dataclass
class Expr:
    text: str
    prec: int


def annotation(t: Type) -> str | None:
    if isinstance(t, TensorType):
        return "Tensor"
    if isinstance(t, ScalarType):
        return {"Any": None, "dtype": "torch.dtype", "device": "torch.device"}.get(t.name, t.name)
    if isinstance(t, OptionalType):
        inner = annotation(t.elem)
        return None if inner is None else f"Optional[{inner}]"
    if isinstance(t, DataclassType):
        return None  # (not a tuple; the class's name is not one the module defines)
    if isinstance(t, TupleType):
        parts = [annotation(e) for e in t.elems]
        if any(p is None for p in parts):
            return None
        return "tuple[" + (", ".join(parts) if parts else "()") + "]"  # type: ignore[arg-type]
    if isinstance(t, ListType):
        inner = annotation(t.elem)
        return None if inner is None else f"list[{inner}]"
    if isinstance(t, DictType):
        key, value = annotation(t.key), annotation(t.value)
        return None if key is None or value is None else f"dict[{key}, {value}]"
    return None


def attribute_safe(text: str) -> str:
    """An atom's text that `.name` may follow: `0.clone()` does not parse, `(0).clone()` does."""
    return f"({text})" if text[:1].isdigit() else text


def python_literal(value: object) -> str:
    """A Python literal for an attribute value (str, int, float, bool, None, tuples and lists of them)."""
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, tuple):
        inner = ", ".join(python_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, float):  # (numpy's float64 is a float whose repr names numpy)
        return repr(float(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return repr(int(value))
    if isinstance(value, TensorValues):
        shape = python_literal(value.shape)
        return f"_guards.TensorValues(torch.{value.dtype}, {string_literal(value.device)}, {shape})"
    return repr(value)


def string_literal(text: str) -> str:
    """A double-quoted Python string literal, as formatters write them."""
    r = repr(text)
    if r.startswith("'") and '"' not in text:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


def type_comment(t: Type) -> str:
    """`# f32[B, 4]` for tensors whose dtype or shape is known; nothing otherwise."""
    if isinstance(t, TensorType) and t.shape is not None:
        return f"  # {t}"
    return ""


def attribute_path(base: str, steps: tuple) -> str:
    """`base` followed by `steps` as entry checks read it: indices as indexing, an attribute past
    nn.Module.__getattr__ (`_guards.attr(self_layers[0], "fc")`), a path with more attributes
    than one with `_guards.at(base, "block1.downsample.0")`."""
    if sum(isinstance(step, str) for step in steps) > 1:
        return f"_guards.at({base}, {string_literal('.'.join(str(step) for step in steps))})"
    for step in steps:
        base = f"{base}[{step}]" if isinstance(step, int) else f"_guards.attr({base}, {string_literal(step)})"
    return base


def restates(lines: list[str], at: int, source: str) -> bool:
    """Whether the comment at `at` quotes a source line that the one statement after it reads as
    (`out = _guards.attr(self, "conv1")(x)` under `# out = self.conv1(x)`: the same code, its
    reads past nn.Module.__getattr__ spelt as plain reads, a type comment after it), no other
    statement at its depth following before the next comment: such a comment says nothing."""
    if at + 1 >= len(lines):
        return False
    depth = len(lines[at]) - len(lines[at].lstrip())
    statement = lines[at + 1]
    if len(statement) - len(statement.lstrip()) != depth:
        return False
    for after in lines[at + 2:]:
        indent = len(after) - len(after.lstrip())
        if after.strip() and indent <= depth:
            if indent == depth and not after.lstrip().startswith(("#", "del ")):
                return False
            break
    code, previous = _TYPE_COMMENT.sub("", statement.strip()), None
    while code != previous:
        previous = code
        code = _ATTR_READ.sub(r"\1.\2", _ITEM_READ.sub(r"\1[\2]", code))
        code = _PATH_READ.sub(lambda m: m[1] + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in m[2].split(".")), code)
    return code == source.strip()


_TYPE_COMMENT = re.compile(r"  # [^\"']*$")
_ATTR_READ = re.compile(r'_guards\.attr\(([\w.\[\]]+), "(\w+)"\)')
_ITEM_READ = re.compile(r"_guards\.item\(([\w.\[\]]+), (-?\d+)\)")
_PATH_READ = re.compile(r'_guards\.at\(([\w.\[\]]+), "([\w.]+)"\)')


def is_effect_free(op: Operation) -> bool:
    # (a kernel's region is C++, not control flow)
    return op.has_trait(PURE) and (not op.regions or isinstance(op, kernel_ops.Kernel))

"""Type annotations (CST) to IR types, resolved through the file's imports."""

from __future__ import annotations

import enum
import sys

import libcst as cst

from ir.core.types import (
    ANY,
    BOOL,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    DataclassType,
    DictType,
    Dim,
    ListType,
    ModuleType,
    NamedTupleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    UnionType,
)
from transpiler.diagnostics import UserError
from transpiler.source import SourceFile, literal_value

SIMPLE = {
    "torch.Tensor": TENSOR,
    "builtins.int": INT,
    "builtins.float": FLOAT,
    "builtins.bool": BOOL,
    "builtins.str": STR,
    "torch.device": DEVICE,
    "torch.dtype": DTYPE,
    "typing.Any": ANY,
    # torch's legacy tensor types, common in annotations (`input_ids: torch.LongTensor`): Python
    # does not enforce annotations and callers pass any tensor, so they mean a Tensor of any dtype
    **{f"torch.{kind}Tensor": TENSOR for kind in ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short",
                                                  "Char", "Byte", "Bool")},
}
# (torch.jit.annotations re-exports typing's, for code written for TorchScript)
OPTIONAL = {"typing.Optional", "torch.jit.annotations.Optional"}
UNION = {"typing.Union", "torch.jit.annotations.Union"}
TUPLE = {"typing.Tuple", "builtins.tuple", "torch.jit.annotations.Tuple"}
LIST = {"typing.List", "builtins.list", "torch.jit.annotations.List"}
DICT = {"typing.Dict", "builtins.dict", "torch.jit.annotations.Dict"}
FINAL = {"typing.Final", "typing_extensions.Final", "torch.jit.Final"}
ANNOTATED = {"typing.Annotated", "typing_extensions.Annotated"}
# jaxtyping-style `Float[Tensor, "B T C"]`, recognised by name without importing jaxtyping.
JAXTYPING_DTYPES = {
    "Float": None, "Int": None, "Integer": None, "Bool": "bool", "Shaped": None, "Num": None,
    "Float32": "float32", "Float64": "float64", "Float16": "float16", "BFloat16": "bfloat16",
    "Int64": "int64", "Int32": "int32", "Int8": "int8", "UInt8": "uint8",
}

# The jaxtyping kinds above that name no one dtype but a family: a specialisation for a set of
# dtypes (transpiler/annotated.py) takes torch's default one of the integer family.
INTEGER_KINDS = {"Int", "Integer"}

SUPPORTED_HINT = (
    "annotate with Tensor, int, float, bool, str, None, Optional[...], tuple[...], list[...], dict[str, ...]"
)


def annotation_type(source: SourceFile, node: cst.BaseExpression, module_classes: dict[str, str]) -> Type:
    """The IR type an annotation names. `module_classes` maps qualified names of nn.Module
    classes the file knows (its own classes and torch.nn layers) to their IR qualname."""
    if isinstance(node, cst.Name) and node.value == "None":
        return NONE
    if isinstance(node, cst.SimpleString):
        inner = cst.parse_expression(node.evaluated_value)
        return annotation_type(source, inner, module_classes)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        left = annotation_type(source, node.left, module_classes)
        right = annotation_type(source, node.right, module_classes)
        return _union(source, node, [left, right])
    if isinstance(node, cst.Subscript):
        base = source.global_name(node.value)
        args = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        if len(args) != len(node.slice):
            raise UserError("slices are not valid in a type annotation", source.loc(node), SUPPORTED_HINT)
        if base in OPTIONAL and len(args) == 1:
            return OptionalType(annotation_type(source, args[0], module_classes))
        if base in UNION:
            return _union(source, node, [annotation_type(source, a, module_classes) for a in args])
        if base in FINAL and len(args) == 1:
            return annotation_type(source, args[0], module_classes)
        if base in TUPLE:
            if len(args) == 1 and isinstance(args[0], cst.Tuple) and not args[0].elements:
                return TupleType(())
            if any(isinstance(a, cst.Ellipsis) for a in args):
                raise UserError(
                    "variable-length tuple annotations are not supported",
                    source.loc(node),
                    "give each element's type, e.g. tuple[Tensor, Tensor], or use list[Tensor]",
                )
            return TupleType(tuple(annotation_type(source, a, module_classes) for a in args))
        if base in LIST and len(args) == 1:
            return ListType(annotation_type(source, args[0], module_classes))
        if base in DICT and len(args) == 2:
            key = annotation_type(source, args[0], module_classes)
            if key not in (STR, INT):
                raise UserError(f"dicts with {key} keys are not supported", source.loc(args[0]),
                                "compiled dicts have str or int keys")
            return DictType(key, annotation_type(source, args[1], module_classes))
        if base in ANNOTATED and args:
            inner = annotation_type(source, args[0], module_classes)
            shape = _shape_from(args[1:])
            if isinstance(inner, TensorType) and shape is not None:
                return TensorType(inner.dtype, shape, inner.device)
            return inner
        last = (base or "").rsplit(".", 1)[-1]
        if base and base.startswith("jaxtyping.") and last in JAXTYPING_DTYPES and len(args) == 2:
            shape = _shape_from(args[1:])
            return TensorType(JAXTYPING_DTYPES[last], shape)
        raise UserError(
            f"unsupported type annotation `{source.code(node)}`", source.loc(node), SUPPORTED_HINT
        )
    name = source.global_name(node)
    if name in SIMPLE:
        return SIMPLE[name]
    named = named_tuple_type(source, name, module_classes) if name is not None else None
    if named is not None:
        return named
    member = enum_member_type(source, node) if name is not None else None
    if member is not None:  # (compiled code holds a member as the str or int it equals)
        return member
    if name in module_classes:
        return ModuleType(module_classes[name])
    alias = source.alias(name) if name is not None else None
    if alias is not None and alias is not node:
        return annotation_type(source, alias, module_classes)
    raise UserError(f"unsupported type annotation `{source.code(node)}`", source.loc(node), SUPPORTED_HINT)


def named_tuple_type(source: SourceFile, name: str, module_classes: dict[str, str]) -> NamedTupleType | None:
    """The type of a `class Output(NamedTuple)` or a `@dataclass class Output` of the file (`name`
    its qualified name: its own name), its fields' annotations the items' types; None for any
    other name. A dataclass's fields are what an instance holds (not its ClassVars or InitVars);
    whether compiled code may also construct one is `dataclass_construction_error`'s question."""
    node = source.classes.get(name)
    if node is None:
        return None
    dataclass = _dataclass_decorator(source, node)
    if dataclass is None and not any(source.global_name(b.value) == "typing.NamedTuple" for b in node.bases):
        return None
    if dataclass is not None:
        hook = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__getattribute__"), None)
        if hook is not None:  # (its fields would not be plain reads)
            raise UserError(f"dataclass `{name}` defines `__getattribute__`, which compiled code does not run",
                            source.loc(hook.name), "read the values outside the compiled code and pass them in")
    fields, types = [], []
    for small in _class_statements(node):
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            kind = source.global_name(_subscripted(small.annotation.annotation))
            if dataclass is not None and kind in ("typing.ClassVar", "dataclasses.InitVar"):
                continue  # a class attribute, or an argument of the constructor alone: not a field
            fields.append(small.target.value)
            types.append(annotation_type(source, small.annotation.annotation, module_classes))
    if dataclass is None:
        return NamedTupleType(tuple(types), name, tuple(fields))
    return DataclassType(tuple(types), name, tuple(fields), frozen=dataclass)


def _class_statements(node: cst.ClassDef) -> list[cst.BaseSmallStatement]:
    return [small for stmt in node.body.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body]


def _subscripted(annotation: cst.BaseExpression) -> cst.BaseExpression:
    return annotation.value if isinstance(annotation, cst.Subscript) else annotation


# Dataclass options that change only comparison, printing or hashing (or add keywords-only
# construction, which the compiled code's keyword arguments satisfy): a class made with any
# other is refused, not guessed at.
DATACLASS_OPTIONS = frozenset({"frozen", "eq", "repr", "order", "unsafe_hash", "kw_only", "slots", "match_args",
                               "weakref_slot"})
# Methods that change how an instance is made: the compiled code makes the object with the
# constructor the decorator writes.
DATACLASS_METHODS = ("__init__", "__post_init__", "__new__", "__setattr__")


def _dataclass_decorator(source: SourceFile, node: cst.ClassDef) -> bool | None:
    """Whether `node` is decorated `@dataclass` (also `@dataclasses.dataclass(...)`): its
    `frozen` option (a literal True), or None for a class that is not a dataclass."""
    for decorator in node.decorators:
        d = decorator.decorator
        call = d if isinstance(d, cst.Call) else None
        if source.global_name(call.func if call is not None else d) != "dataclasses.dataclass":
            continue
        frozen = [literal_value(a.value) for a in (call.args if call is not None else ())
                  if a.keyword is not None and a.keyword.value == "frozen"]
        return frozen == [True]
    return None


def dataclass_construction_error(source: SourceFile, name: str) -> UserError | None:
    """Why compiled code cannot make dataclass `name` of the file as the class makes it (bases
    with inherited fields, a constructor or hook of its own, `field(...)` defaults, init-only
    fields, options such as `init=False`), or None."""
    node = source.classes[name]
    if node.bases:
        return UserError(f"dataclass `{name}` has a base class, which compiled code does not construct",
                         source.loc(node.bases[0]), "declare every field in the one class")
    for decorator in node.decorators:
        call = decorator.decorator
        if isinstance(call, cst.Call) and source.global_name(call.func) == "dataclasses.dataclass":
            for arg in call.args:
                key = arg.keyword.value if arg.keyword is not None else None
                if key not in DATACLASS_OPTIONS or key == "frozen" and not isinstance(literal_value(arg.value), bool):
                    return UserError(f"`{source.code(arg)}` of dataclass `{name}` is not supported where compiled "
                                     "code constructs it", source.loc(arg),
                                     "the supported options: " + ", ".join(sorted(DATACLASS_OPTIONS))
                                     + " (frozen as a literal True or False)")
    for stmt in node.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value in DATACLASS_METHODS:
            return UserError(f"dataclass `{name}` defines `{stmt.name.value}`, which compiled code does not run",
                             source.loc(stmt.name), "compute the values before constructing the dataclass")
    for small in _class_statements(node):
        if not isinstance(small, cst.AnnAssign):
            continue
        if source.global_name(_subscripted(small.annotation.annotation)) == "dataclasses.InitVar":
            return UserError(f"the init-only field `{source.code(small.target)}` of dataclass `{name}` is not "
                             "supported where compiled code constructs it", source.loc(small),
                             "compute it before constructing the dataclass")
        if isinstance(small.value, cst.Call) and source.global_name(small.value.func) == "dataclasses.field":
            return UserError(f"a `field(...)` default of dataclass `{name}` is not supported where compiled code "
                             "constructs it", source.loc(small.value),
                             "give the field a plain default (`aux: Optional[Tensor] = None`) or pass its value "
                             "to the constructor")
    return None


def named_tuple_defaults(source: SourceFile, name: str) -> dict[str, cst.BaseExpression]:
    """The defaults the fields of NamedTuple or dataclass `name` of the file declare (`aux: float = 0.0`)."""
    found = {}
    for small in _class_statements(source.classes[name]):
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
            found[small.target.value] = small.value
    return found


ENUM_BASES = {"enum.Enum": None, "enum.IntEnum": INT, "enum.StrEnum": STR}


def enum_member_type(source: SourceFile, node: cst.BaseExpression) -> Type | None:
    """STR or INT where annotation `node` names an Enum class whose members are the str or int
    they equal (`class Format(str, Enum)`, an IntEnum): a class of the file, read off its bases,
    or one the file imports, read off the running program (script(instance, ...)); else None."""
    if isinstance(node, cst.Name) and node.value in source.classes and source.global_name(node) == node.value:
        bases = {source.global_name(b.value) for b in source.classes[node.value].bases}
        kind = next((ENUM_BASES[b] for b in sorted(bases - {None}) if b in ENUM_BASES), False)  # type: ignore[type-var]
        if kind is False:
            return None
        return kind or (STR if "builtins.str" in bases else INT if "builtins.int" in bases else None)
    module = sys.modules.get(source.module_name) if source.module_name is not None else None
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.insert(0, node.attr.value)
        node = node.value
    if module is None or not isinstance(node, cst.Name):
        return None
    obj: object = module
    for part in [node.value, *parts]:
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, enum.Enum)):
        return None
    return STR if issubclass(obj, str) else INT if issubclass(obj, int) else None


def file_enum_value(source: SourceFile, node: cst.BaseExpression) -> str | int | None:
    """The value of member `Cls.NAME` of a str or int Enum class of the file whose body assigns
    NAME a literal (`MEAN = "mean"`), which the member equals; None for anything else."""
    if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
            and node.value.value in source.classes and enum_member_type(source, node.value) is not None):
        return None
    for stmt in source.classes[node.value.value].body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name) \
                    and small.targets[0].target.value == node.attr.value:
                value = literal_value(small.value)
                kind = enum_member_type(source, node.value)
                return value if type(value) is (str if kind == STR else int) else None  # type: ignore[return-value]
    return None


def union_type(source: SourceFile, node: cst.BaseExpression, module_classes: dict[str, str]) -> UnionType | None:
    """`Union[A, B, ...]` (or `A | B | ...`) of two or more types besides None, as a UnionType of
    its members (None among them where it is one); None for any other annotation."""
    if isinstance(node, cst.Subscript) and source.global_name(node.value) in UNION:
        parts = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
    elif isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        parts = []
        while isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
            parts.insert(0, node.right)
            node = node.left
        parts.insert(0, node)
    else:
        return None
    members = tuple(dict.fromkeys(annotation_type(source, p, module_classes) for p in parts))
    return UnionType(members) if len([m for m in members if m != NONE]) >= 2 else None


def _union(source: SourceFile, node: cst.CSTNode, members: list[Type]) -> Type:
    others = [m for m in members if m != NONE]
    if len(others) == 1 and len(members) == 2:
        return OptionalType(others[0])
    raise UserError(
        f"unions other than Optional are not supported: `{source.code(node)}`",
        source.loc(node),
        "use Optional[T] (T | None), or split the function by type",
    )


def _shape_from(extra: list[cst.BaseExpression]) -> tuple[Dim, ...] | None:
    """Dimensions from a shape string such as "B T C" or "B, 4"; None if it names none."""
    for node in extra:
        text = literal_value(node)
        if isinstance(text, str):
            return parse_shape_string(text)
    return None


def parse_shape_string(text: str) -> tuple[Dim, ...] | None:
    dims: list[Dim] = []
    for word in text.replace(",", " ").split():
        if word in ("...", "*") or word.startswith("*"):
            return None  # a variadic part: the rank is not fixed
        if word.isdigit():
            dims.append(int(word))
        elif word == "_" or word.startswith("#"):
            dims.append(None)
        elif word.isidentifier():
            dims.append(word)
        else:
            return None
    return tuple(dims)


def integer_family(source: SourceFile, node: cst.BaseExpression | None) -> bool:
    """Whether a tensor annotation names the integer family with no one dtype (`Int[Tensor, "N"]`)."""
    if not isinstance(node, cst.Subscript):
        return False
    base = source.global_name(node.value) or ""
    return base.startswith("jaxtyping.") and base.rsplit(".", 1)[-1] in INTEGER_KINDS

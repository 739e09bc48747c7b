"""What the compiler knows about an nn.Module class: its attributes and methods.

Two sources: the class's own source (class-level annotations and the assignments in `__init__`),
for the ahead-of-time path; and a live instance, for `script(instance, ...)`.
"""

from __future__ import annotations

import enum
import functools
import inspect
import types
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import libcst as cst
import torch
from torch import nn

from ir.core.builder import literal_type
from ir.core.graph import Loc
from ir.core.types import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    DictType,
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TupleType,
    Type,
    UnionType,
    unify,
)
from runtime.guards import is_plain_object
from transpiler.annotations import annotation_type
from transpiler.diagnostics import UserError
from transpiler.source import SourceFile, is_literal, literal_value

# Standard torch.nn layers whose call is understood: Tensor in, this type out.
STD_LAYERS: dict[str, Type] = {
    f"torch.nn.{name}": TENSOR
    for name in (
        "Linear Bilinear Identity Flatten Unflatten Dropout Dropout1d Dropout2d AlphaDropout "
        "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d "
        "BatchNorm1d BatchNorm2d BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d RMSNorm "
        "Embedding MaxPool1d MaxPool2d AvgPool1d AvgPool2d AdaptiveAvgPool1d AdaptiveAvgPool2d "
        "AdaptiveMaxPool2d Upsample PixelShuffle ZeroPad2d ConstantPad2d "
        "ReLU ReLU6 GELU SiLU Mish Sigmoid Tanh Hardswish Hardsigmoid Hardtanh LeakyReLU ELU SELU "
        "CELU PReLU Softplus Softsign Tanhshrink Softmax LogSoftmax Softmin GLU Threshold"
    ).split()
}
STD_LAYERS["torch.nn.MultiheadAttention"] = TupleType((TENSOR, OptionalType(TENSOR)))
CONTAINERS = {"torch.nn.ModuleList": "ModuleList", "torch.nn.Sequential": "Sequential"}
PARAMETER = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
TENSOR_FACTORIES = {
    f"torch.{n}"
    for n in "tensor zeros ones full empty arange linspace eye rand randn zeros_like ones_like tril triu".split()
}


@dataclass
class AttrInfo:
    kind: str  # "parameter", "buffer", "module", "constant", "tensor", "object", "unknown"
    type: Type
    loc: Loc | None = None
    value: Any = None  # a constant's value when known, an object's identity (instances only)
    has_value: bool = False


@dataclass
class ClassInfo:
    name: str  # the qualname used in IR types: "MyCell" for the file's own classes
    node: cst.ClassDef | None
    source: SourceFile | None
    attrs: dict[str, AttrInfo] = field(default_factory=dict)
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)
    # TorchScript's `@torch.jit._overload_method` declarations, by method name, in order: each
    # call compiles the method's body with the parameter types of the declaration it matches
    overloads: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    instance: nn.Module | None = None
    # The class's own `__call__` (HF's GradientCheckpointingLayer): calling a module runs it, not
    # nn.Module's. Its file, its definition and "module:qualname" of the function, which an entry
    # check compares with the module's (runtime/guards.py check_module, condition "call:...").
    call_override: tuple[SourceFile, cst.FunctionDef, str] | None = None
    # The file of each method a base class in another file defines (`source` for the others)
    method_sources: dict[str, SourceFile] = field(default_factory=dict)
    # Each class along the MRO that has source, with the methods it defines itself and its file,
    # in MRO order: what `super().name(...)` in a method of one of them finds (base_method)
    lineage: list[tuple[str, dict[str, cst.FunctionDef], SourceFile]] = field(default_factory=list)
    # `self.body = nn.ModuleDict(dict(tok=nn.Embedding(...), ...))` in `__init__` (ahead of time):
    # what its entries are, as a class of its own named "<class>.<attribute>" (FileContext.class_named)
    module_dicts: dict[str, "ClassInfo"] = field(default_factory=dict)

    def method_source(self, name: str) -> SourceFile | None:
        return self.method_sources.get(name, self.source)

    def base_method(self, caller: cst.FunctionDef, name: str) -> tuple[str, cst.FunctionDef, SourceFile] | None:
        """What `super().name` in method `caller` finds: the class after the one defining `caller`
        in the MRO that defines `name` (its name, the method and its file); None where no class
        with source does (torch's, or nothing)."""
        at = next((i for i, (_, own, _) in enumerate(self.lineage) if any(m is caller for m in own.values())), None)
        if at is None:
            return None
        for cls_name, own, source in self.lineage[at + 1:]:
            if name in own:
                return cls_name, own[name], source
        return None


def torch_layer_result(qualname: str) -> Type | None:
    """TENSOR where `qualname` names one of torch's layers (`torch.nn.Unfold`) whose forward is
    annotated to return a Tensor; None otherwise."""
    cls = getattr(nn, qualname[len("torch.nn."):], None) if qualname.startswith("torch.nn.") else None
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)) or cls.forward is nn.Module.forward:
        return None
    try:
        returns = inspect.signature(cls.forward).return_annotation
    except (TypeError, ValueError):
        return None
    return TENSOR if returns in (torch.Tensor, "Tensor", "torch.Tensor") else None


def std_name(cls: type) -> str:
    """"torch.nn.Linear" for torch's own layers, else the class name, as the file's own classes
    are named in IR types."""
    if getattr(nn, cls.__name__, None) is cls:
        return f"torch.nn.{cls.__name__}"
    return cls.__qualname__


def module_class_names(source: SourceFile) -> dict[str, str]:
    """Qualified names of the nn.Module classes an annotation or call may name."""
    known = {name: name for name in source.classes}
    known.update({n: n for n in STD_LAYERS})
    known.update({n: n for n in CONTAINERS})
    known["torch.nn.Module"] = "torch.nn.Module"
    return known


def class_from_source(source: SourceFile, node: cst.ClassDef) -> ClassInfo:
    """The class as its source shows it, with what base classes of the same file give it (their
    methods where it does not define them; the attributes their `__init__` assigns)."""
    info = ClassInfo(node.name.value, node, source)
    classes = module_class_names(source)
    for stmt in node.body.body:
        if isinstance(stmt, cst.FunctionDef):
            if not is_accessor(stmt):
                info.methods[stmt.name.value] = stmt
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    t = annotation_type(source, small.annotation.annotation, classes)
                    kind = "module" if _is_module_type(t) else "tensor" if t == TENSOR else "constant"
                    info.attrs[small.target.value] = AttrInfo(kind, t, source.loc(small))
                elif isinstance(small, cst.Assign) and len(small.targets) == 1 \
                        and isinstance(small.targets[0].target, cst.Name) and is_literal(literal_value(small.value)):
                    # `eps = 1e-6` in the class body: a constant of its literal's type, read from
                    # the instance (which may set its own)
                    value = literal_value(small.value)
                    info.attrs[small.targets[0].target.value] = AttrInfo("constant", literal_type(value), source.loc(small))
    info.lineage.append((info.name, dict(info.methods), source))
    info.attrs.setdefault("training", AttrInfo("constant", BOOL))  # every nn.Module has it
    init = info.methods.get("__init__")
    if init is not None:
        _scan_init(source, init, info, classes)
        for name in _called_from(init, info):  # `self.reset_parameters()`: what it assigns too
            _scan_init(source, info.methods[name], info, classes)
    for base in node.bases:  # `class LayerNorm2d(nn.LayerNorm)`: what torch's layer sets up
        layer = _torch_layer(source.global_name(base.value))
        for name, attr in (torch_layer_attributes(layer) if layer is not None else {}).items():
            info.attrs.setdefault(name, attr)
        own = source.classes.get(base.value.value) if isinstance(base.value, cst.Name) else None
        if own is not None and own is not node:  # a base class of this file (depth first, as the MRO goes for one base)
            inherited = class_from_source(source, own)
            for name, attr in inherited.attrs.items():
                info.attrs.setdefault(name, attr)
            for name, method in inherited.methods.items():
                info.methods.setdefault(name, method)
            info.lineage += [entry for entry in inherited.lineage if entry[0] not in {n for n, _, _ in info.lineage}]
    return info


def is_accessor(node: cst.FunctionDef) -> bool:
    """Decorated `@name.setter` or `@name.deleter`: not the property's getter, which has its name."""
    return any(isinstance(d.decorator, cst.Attribute) and d.decorator.attr.value in ("setter", "deleter")
               for d in node.decorators)


def _torch_layer(qualname: str | None) -> type | None:
    """The class of one of torch's layers that `qualname` names ("torch.nn.LayerNorm"), or None."""
    cls = getattr(nn, qualname[len("torch.nn."):], None) if qualname and qualname.startswith("torch.nn.") else None
    return cls if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Module else None


@functools.lru_cache(maxsize=None)
def torch_layer_attributes(cls: type) -> dict[str, AttrInfo]:
    """The attributes an instance of torch's layer `cls` has, for a subclass compiled ahead of
    time: what the `__init__` of each class in its MRO below nn.Module assigns (read from torch's
    own source, as a class of the user's is), and the settings those classes annotate
    (`normalized_shape: tuple[int, ...]`, a list of ints to compiled code) where that says more."""
    found: dict[str, AttrInfo] = {}
    for klass in reversed(cls.__mro__[:cls.__mro__.index(nn.Module)]):
        try:
            path = inspect.getsourcefile(klass)
            source = SourceFile.read(Path(path)) if path is not None else None
        except (OSError, TypeError, UserError):
            source = None
        node = source.classes.get(klass.__name__) if source is not None else None
        init = next((s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"),
                    None) if node is not None else None
        if init is not None:
            info = ClassInfo(klass.__name__, node, source)
            _scan_init(source, init, info, module_class_names(source))  # type: ignore[arg-type]
            found.update(info.attrs)
        for name, hint in vars(klass).get("__annotations__", {}).items():
            t = _runtime_annotation_type(hint)
            if t is not None and (name not in found or found[name].kind == "unknown"):
                found[name] = AttrInfo("tensor" if t == TENSOR else "constant", t)
    return {k: a for k, a in found.items() if not k.startswith("_") and a.kind != "unknown"}


def _runtime_annotation_type(hint: object) -> Type | None:
    """The IR type of a class annotation torch's layers write (`eps: float`, `kernel_size:
    tuple[int, ...]`), or None."""
    simple = {int: INT, float: FLOAT, bool: BOOL, str: STR, torch.Tensor: TENSOR}
    if hint in simple:
        return simple[hint]  # type: ignore[index]
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) not in args:
        # `padding: str | tuple[int, ...]` (nn.Conv2d's): an entry that reads it is compiled
        # once per member (FileContext.entry_variants)
        members = [_runtime_annotation_type(a) for a in args]
        return UnionType(tuple(dict.fromkeys(members))) if None not in members else None  # type: ignore[arg-type]
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in (int, float):
        return ListType(simple[args[0]])
    if typing.get_origin(hint) is typing.Literal and all(type(a) is str for a in args):
        return STR
    return None


def _called_from(init: cst.FunctionDef, info: ClassInfo) -> list[str]:
    """The methods `__init__` calls as `self.<method>(...)`, and those they call, in order."""
    found: list[str] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if _is_self_attr(node.func):
                name = node.func.attr.value  # type: ignore[attr-defined]
                if name in info.methods and name != "__init__" and name not in found:
                    found.append(name)
                    info.methods[name].body.visit(self)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False  # (a nested function's calls run only if it is called)

    init.body.visit(Calls())
    return found


def _is_overload(node: cst.FunctionDef) -> bool:
    """Decorated `@torch.jit._overload_method` (or `_overload`): a declaration, not the body."""
    for deco in node.decorators:
        d = deco.decorator
        name = d.attr.value if isinstance(d, cst.Attribute) else d.value if isinstance(d, cst.Name) else ""
        if name in ("_overload_method", "_overload"):
            return True
    return False


def _is_module_type(t: Type) -> bool:
    inner = t.elem if isinstance(t, OptionalType) else t
    return isinstance(inner, (ModuleType, ModuleListType))


def _scan_init(source: SourceFile, init: cst.FunctionDef, info: ClassInfo, classes: dict[str, str]) -> None:
    param_types: dict[str, Type] = {}
    for p in init.params.params:
        if p.annotation is not None:
            try:
                param_types[p.name.value] = annotation_type(source, p.annotation.annotation, classes)
            except UserError:
                pass
    declared = set(info.attrs)  # class-level annotations win over inference

    def record(name: str, kind: str, t: Type, node: cst.CSTNode) -> None:
        if name in declared:
            return
        old = info.attrs.get(name)
        if old is not None and old.type != t:
            merged = unify(old.type, t)
            if merged is None or old.kind not in (kind, "constant") and t != NONE:
                info.attrs[name] = AttrInfo("unknown", ANY, source.loc(node))
                return
            kind = old.kind if t == NONE else kind
            t = merged
        info.attrs[name] = AttrInfo(kind, t, source.loc(node))

    grown: dict[str, list[Type]] = {}  # containers __init__ adds layers to: what it adds
    for node in _walk_statements(init.body):
        if isinstance(node, cst.AugAssign) and _is_self_attr(node.target):
            grown.setdefault(node.target.attr.value, []).append(ModuleType("torch.nn.Module"))  # type: ignore[union-attr]
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call) and isinstance(node.value.func, cst.Attribute) \
                and _is_self_attr(node.value.func.value) and node.value.func.attr.value in GROWING:
            call = node.value
            added = call.args[-1].value if call.args and node.value.func.attr.value != "extend" else None
            t = _infer_value(source, added, param_types, classes, info)[1] if added is not None else ANY
            name = call.func.value.attr.value  # type: ignore[attr-defined]
            grown.setdefault(name, []).append(t if _is_module_type(t) else ModuleType("torch.nn.Module"))
        elif isinstance(node, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if _is_self_attr(target):
                    entries = _module_dict_entries(source, node.value)
                    if entries is not None:
                        name = target.attr.value  # type: ignore[union-attr]
                        held = ClassInfo(f"{info.name}.{name}", None, source)
                        for key, value in entries.items():
                            kind, t = _infer_value(source, value, param_types, classes, info)
                            held.attrs[key] = AttrInfo(kind if _is_module_type(t) else "unknown",
                                                       t if _is_module_type(t) else ANY, source.loc(value))
                        info.module_dicts[name] = held
                        record(name, "module", ModuleType(held.name), target)
                        continue
                    kind, t = _infer_value(source, node.value, param_types, classes, info)
                    record(target.attr.value, kind, t, target)  # type: ignore[union-attr]
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            call = node.value
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and isinstance(func.value, cst.Name)
                and func.value.value == "self"
                and func.attr.value in ("register_buffer", "register_parameter")
                and call.args
            ):
                name = literal_value(call.args[0].value)
                if isinstance(name, str):
                    is_none = len(call.args) > 1 and literal_value(call.args[1].value) is None
                    kind = "buffer" if func.attr.value == "register_buffer" else "parameter"
                    record(name, kind, NONE if is_none else TENSOR, call)
    for name, added in grown.items():
        # `self.blocks = nn.ModuleList()` then `self.blocks.append(Block(c))` in a loop: as many
        # layers as the loop makes, so its length is not known from the source
        found = info.attrs.get(name)
        if found is not None and name not in declared and isinstance(found.type, ModuleListType):
            elems = tuple(dict.fromkeys((*found.type.elems, *added)))
            info.attrs[name] = replace(found, type=ModuleListType(found.type.kind, elems, False))


# What math's functions return where it is not a float (math.sqrt, math.log, ...: a float).
_MATH_RESULTS: dict[str, Type] = {
    **{name: INT for name in ("floor", "ceil", "trunc", "gcd", "lcm", "factorial", "comb", "perm", "isqrt")},
    **{name: BOOL for name in ("isnan", "isinf", "isfinite", "isclose")},
}

# math's functions whose result is no float or depends on the arguments (prod of ints is an
# int; modf and frexp return tuples).
_MATH_UNKNOWN = frozenset({"prod", "modf", "frexp"})

# Methods of nn.ModuleList and nn.Sequential that add layers.
GROWING = frozenset({"append", "extend", "insert", "add_module", "register_module"})


def _module_dict_entries(source: SourceFile, value: cst.BaseExpression | None) -> dict[str, cst.BaseExpression] | None:
    """The entries of `nn.ModuleDict(dict(k=v, ...))` or `nn.ModuleDict({"k": v, ...})` by key;
    None for anything else (another call, keys that are not string literals, `**` spreads)."""
    if not (isinstance(value, cst.Call) and source.global_name(value.func) == "torch.nn.ModuleDict"
            and len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star):
        return None
    arg = value.args[0].value
    entries: dict[str, cst.BaseExpression] = {}
    if isinstance(arg, cst.Call) and source.global_name(arg.func) == "builtins.dict":
        for a in arg.args:
            if a.keyword is None or a.star:
                return None
            entries[a.keyword.value] = a.value
        return entries
    if isinstance(arg, cst.Dict):
        for element in arg.elements:
            key = literal_value(element.key) if isinstance(element, cst.DictElement) else None
            if not isinstance(key, str):
                return None
            entries[key] = element.value
        return entries
    return None


def _walk_statements(block: cst.BaseSuite) -> list[cst.CSTNode]:
    """Small statements of a body, descending into if/for/while/with bodies."""
    out: list[cst.CSTNode] = []
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]  # type: ignore[list-item]
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(stmt.body)
        elif isinstance(stmt, cst.SimpleStatementSuite):
            out.extend(stmt.body)
        elif isinstance(stmt, (cst.If, cst.For, cst.While, cst.With)):
            out.extend(_walk_statements(stmt.body))
            orelse = getattr(stmt, "orelse", None)
            while orelse is not None:
                out.extend(_walk_statements(orelse.body))
                orelse = getattr(orelse, "orelse", None)
    return out


def _is_self_attr(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _infer_value(
    source: SourceFile,
    value: cst.BaseExpression | None,
    params: dict[str, Type],
    classes: dict[str, str],
    info: ClassInfo,
) -> tuple[str, Type]:
    if value is None:
        return "unknown", ANY
    literal = literal_value(value)
    if is_literal(literal):
        t = _literal_type(literal)
        return ("constant", t) if t is not None else ("unknown", ANY)
    if isinstance(value, cst.Name) and value.value in params:
        t = params[value.value]
        return ("module" if _is_module_type(t) else "tensor" if t == TENSOR else "constant"), t
    method = value.func.attr.value if isinstance(value, cst.Call) and _is_self_attr(value.func) else None  # type: ignore[attr-defined]
    if method in info.methods:
        returns = info.methods[method].returns
        if returns is not None:  # `self.head = self._make_head(d)`: what it is declared to return
            try:
                t = annotation_type(source, returns.annotation, classes)
            except UserError:
                return "unknown", ANY
            return ("module" if _is_module_type(t) else "tensor" if t == TENSOR else "constant"), t
    if isinstance(value, cst.Call):
        callee = source.global_name(value.func)
        if callee in PARAMETER:
            return "parameter", TENSOR
        if callee in TENSOR_FACTORIES:
            return "tensor", TENSOR
        if callee in CONTAINERS:
            return "module", _container_type(source, value, CONTAINERS[callee], classes)
        if callee in classes:
            return "module", ModuleType(classes[callee])
        if callee is not None and callee.startswith("torch.nn."):
            return "module", ModuleType(callee)  # another torch.nn layer: an opaque call
        if callee is not None and callee.startswith("math.") and callee.count(".") == 1:
            name = callee.removeprefix("math.")
            if name in _MATH_UNKNOWN:
                return "unknown", ANY
            return "constant", _MATH_RESULTS.get(name, FLOAT)  # `self.scale = math.sqrt(d)`
    if isinstance(value, cst.BinaryOperation):
        left = _infer_value(source, value.left, params, classes, info)[1]
        right = _infer_value(source, value.right, params, classes, info)[1]
        if left in (INT, BOOL) and right in (INT, BOOL):
            return "constant", FLOAT if isinstance(value.operator, cst.Divide) else INT
        if {left, right} <= {INT, FLOAT, BOOL}:
            return "constant", FLOAT
    if _is_self_attr(value):
        known = info.attrs.get(value.attr.value)  # type: ignore[attr-defined]
        if known is not None:
            return known.kind, known.type
    if isinstance(value, cst.IfExp):  # `nn.Parameter(torch.zeros(n)) if bias else None`
        (kind, t), (other_kind, other) = (_infer_value(source, arm, params, classes, info)
                                          for arm in (value.body, value.orelse))
        if t == NONE:
            kind, t, other_kind, other = other_kind, other, kind, t
        joined = unify(t, other)
        if "unknown" not in (kind, other_kind) and joined is not None and (kind == other_kind or other == NONE):
            return kind, joined
    return "unknown", ANY


def _container_type(source: SourceFile, call: cst.Call, kind: str, classes: dict[str, str]) -> Type:
    """Element types of nn.ModuleList([...]) / nn.Sequential(a, b, ...) from the call's arguments."""
    items: list[cst.BaseExpression] = []
    length_known = True
    if kind == "ModuleList":
        if not call.args:
            return ModuleListType(kind, (), True)
        arg = call.args[0].value
        if isinstance(arg, (cst.List, cst.Tuple)):
            items = [e.value for e in arg.elements]
        elif isinstance(arg, (cst.ListComp, cst.GeneratorExp)):
            items, length_known = [arg.elt], False
        else:
            return ModuleListType(kind, (ModuleType("torch.nn.Module"),), False)
    else:
        for a in call.args:
            if a.star:
                return ModuleListType(kind, (ModuleType("torch.nn.Module"),), False)
            items.append(a.value)
    elems: list[Type] = []
    for item in items:
        if isinstance(item, cst.Call):
            callee = source.global_name(item.func)
            if callee in CONTAINERS:
                elems.append(_container_type(source, item, CONTAINERS[callee], classes))
                continue
            if callee in classes or (callee or "").startswith("torch.nn."):
                elems.append(ModuleType(classes.get(callee, callee)))  # type: ignore[arg-type]
                continue
        elems.append(ModuleType("torch.nn.Module"))
    if not length_known:
        return ModuleListType(kind, tuple(elems), False)
    return ModuleListType(kind, tuple(elems), True)


def plain_enum_value(value: object) -> str | int | None:
    """The str or int a member of a `class Format(str, Enum)` (or an IntEnum) is, which it
    equals and hashes as; None for anything else."""
    if isinstance(value, enum.Enum) and isinstance(value, (str, int)) and not isinstance(value, bool):
        return value._value_ if type(value._value_) in (str, int) else None
    return None


def _literal_type(value: object) -> Type | None:
    try:
        return literal_type(value)
    except TypeError:
        return None


# -- from a live instance ---------------------------------------------------------------------
def python_value_type(value: object, name_of: Callable[[nn.Module], str] | None = None) -> Type | None:
    if isinstance(value, torch.Tensor):
        return TENSOR
    if is_container(value) and not has_hooks(value):
        kind = "ModuleList" if isinstance(value, nn.ModuleList) else "Sequential"
        return ModuleListType(kind, tuple(python_value_type(m, name_of) or ANY for m in value), True)  # type: ignore[attr-defined]
    if isinstance(value, nn.Module) and has_hooks(value):
        return ANY  # (a Python object: its call runs nn.Module.__call__, the hooks with the forward)
    if isinstance(value, nn.Module):
        return ModuleType((name_of or module_qualname)(value))
    torch_function = torch_function_name(value)
    if torch_function is not None:
        return FunctionType(torch_function)
    if type(value) is dict and all(type(k) is str for k in value):
        # (levit's cache of attention biases by device; `{}` holds tensors, as in TorchScript)
        if all(isinstance(v, torch.Tensor) for v in value.values()):
            return DictType(STR, TENSOR)
        elem = _literal_type(next(iter(value.values())))
        if elem is not None and all(_literal_type(v) == elem for v in value.values()):
            return DictType(STR, elem)
        return None
    if isinstance(value, list) and value and all(type(v) in (int, float, bool) or type(v) is tuple and all(
            type(e) in (int, float, bool) for e in v) for v in value):
        elem = _literal_type(value[0])  # (numbers, or tuples of them: crossvit's image sizes)
        if elem is not None and all(_literal_type(v) == elem for v in value):
            return ListType(elem)  # read when called: a list may change
    return _literal_type(value)


def torch_function_name(value: object) -> str | None:
    """"torch.nn.functional.relu" for a torch function stored on a module (`self.activation =
    F.relu`): calls of it compile as that function, as TorchScript reads such attributes once."""
    if not callable(value) or isinstance(value, (type, nn.Module)):
        return None
    module, name = getattr(value, "__module__", None), getattr(value, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str) or not (module == "torch" or module.startswith("torch.")):
        return None
    for public in ("torch.nn.functional", "torch"):  # the names the front end resolves
        owner = torch.nn.functional if public == "torch.nn.functional" else torch
        if getattr(owner, name, None) is value:
            return f"{public}.{name}"
    return None


def has_hooks(module: nn.Module) -> bool:
    """Whether calling `module` runs hooks of its own (`weight_norm`'s forward pre-hook): compiled
    code calls it as Python then, rather than its forward's code (which an entry check would
    find hooked on every call)."""
    return bool(module._forward_pre_hooks or module._forward_hooks or module._backward_hooks
                or module._backward_pre_hooks)


def is_container(value: object) -> bool:
    """An nn.ModuleList, or an nn.Sequential (subclasses too) that runs Sequential's forward."""
    if isinstance(value, nn.ModuleList):
        return "forward" not in type(value).__dict__
    return isinstance(value, nn.Sequential) and type(value).forward is nn.Sequential.forward


def module_qualname(module: nn.Module) -> str:
    return std_name(type(module))


# What nn.Module.__init__ keeps in an instance's __dict__ (_parameters, _forward_hooks, ...).
_MODULE_INTERNALS = frozenset(vars(nn.Module()))


def class_from_instance(module: nn.Module, source: SourceFile | None, node: cst.ClassDef | None,
                        name_of: Callable[[nn.Module], str] | None = None) -> ClassInfo:
    """What the compiler sees of `module`'s class from this instance; `name_of` names the classes
    of its submodules (module_qualname by default)."""
    info = ClassInfo(module_qualname(module), node, source, instance=module)
    if node is not None:
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef):
                if _is_overload(stmt):
                    info.overloads.setdefault(stmt.name.value, []).append(stmt)
                elif not is_accessor(stmt):
                    info.methods[stmt.name.value] = stmt
    for name, p in module._parameters.items():
        info.attrs[name] = AttrInfo("parameter", NONE if p is None else TENSOR)
    for name, b in module._buffers.items():
        info.attrs[name] = AttrInfo("buffer", NONE if b is None else TENSOR)
    for name, m in module._modules.items():
        info.attrs[name] = AttrInfo("module", NONE if m is None else python_value_type(m, name_of) or ANY)
    for name, value in vars(module).items():
        # (a private attribute is the class's own, `self._fast_norm`, unless nn.Module keeps it)
        if name in _MODULE_INTERNALS or name in info.attrs or name == "training":
            continue
        if plain_enum_value(value) is not None:  # (compiled code holds the str or int it equals)
            value = plain_enum_value(value)
        t = python_value_type(value, name_of)
        if isinstance(t, DictType) and node is not None:
            t = _declared_dict(source, node, name) or t  # (`cache: Dict[str, Tensor]` in the class)
        if t is not None:
            kind = "tensor" if t == TENSOR else "constant"
            info.attrs[name] = AttrInfo(kind, t, value=value, has_value=kind == "constant" and not isinstance(t, (ListType, DictType, FunctionType)))
        elif is_plain_object(value):
            info.attrs[name] = AttrInfo("object", ANY, value=value)
    for cls in type(module).__mro__:  # literal class attributes (`gradient_checkpointing = False`)
        if cls in (nn.Module, object) or cls.__module__.startswith("torch."):
            continue
        for name, value in vars(cls).items():
            if name.startswith("_") or name in info.attrs or name in vars(module) or name in info.methods \
                    or _literal_type(value) is None:  # (an instance attribute shadows it)
                continue
            info.attrs[name] = AttrInfo("constant", _literal_type(value), value=value, has_value=True)  # type: ignore[arg-type]
    info.attrs["training"] = AttrInfo("constant", BOOL, value=module.training, has_value=True)
    return info


def _declared_dict(source: SourceFile | None, node: cst.ClassDef, name: str) -> DictType | None:
    """The dict type a class-level annotation of attribute `name` declares, or None."""
    for stmt in node.body.body:
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.target.value == name \
                    and source is not None:
                try:
                    t = annotation_type(source, small.annotation.annotation, module_class_names(source))
                except UserError:
                    return None
                return t if isinstance(t, DictType) else None
    return None


def same_value(x: AttrInfo, y: AttrInfo | None) -> bool:
    """Both instances hold this attribute as one known constant."""
    return x.has_value and y is not None and y.has_value and type(x.value) is type(y.value) and x.value == y.value


def merge_attribute_types(a: ClassInfo, b: ClassInfo) -> ClassInfo:
    """One ClassInfo for two instances of a class: each attribute's type joined (Any where they do
    not mix, left out where one lacks it), values dropped where they differ."""
    merged = ClassInfo(a.name, a.node, a.source, methods=a.methods, instance=a.instance, call_override=a.call_override)
    for name, x in a.attrs.items():
        y = b.attrs.get(name)
        if y is None:
            continue
        t = x.type if x.type == y.type else (unify(x.type, y.type) or ANY)
        if x.kind == "object" or y.kind == "object":  # one object shared (a model's config), or unknown
            shared = x.kind == y.kind and x.value is y.value
            merged.attrs[name] = AttrInfo("object" if shared else "unknown", ANY, x.loc, x.value if shared else None)
            continue
        same = same_value(x, y)
        merged.attrs[name] = AttrInfo(x.kind if x.kind == y.kind else "unknown", t, x.loc,
                                      x.value if same else None, same)
    return merged

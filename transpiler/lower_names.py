"""Lowering of names and attributes: locals, module-level names and constants (`math.pi`,
`torch.float32`), `self.<attr>`, the attributes of submodules and of objects read from a live
instance (`self.config.n_layers`), `hasattr`."""

from __future__ import annotations

import difflib
import inspect
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import libcst as cst
from torch import nn

from ir.core import ops
from ir.core.builder import literal_type
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    DEVICE,
    DTYPE,
    FLOAT,
    INT,
    STR,
    ModuleListType,
    ModuleType,
    NamedTupleType,
    OptionalType,
    TensorType,
    Type,
    UnionType,
)
from ir.torchapi.signatures import SignatureError, resolve_attribute
from runtime.guards import is_plain_object
from transpiler.annotations import file_enum_value
from transpiler.context import is_property
from transpiler.env import Unbound
from transpiler.source import literal_value

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo


MATH_CONSTANTS = {"math.pi": math.pi, "math.e": math.e, "math.inf": math.inf, "math.tau": math.tau, "math.nan": math.nan}
TORCH_DTYPES = {
    f"torch.{n}"
    for n in (
        "float32 float float64 double float16 half bfloat16 int64 long int32 int int16 short "
        "int8 uint8 bool complex64 complex128"
    ).split()
}

_ABSENT = object()


class NameLowering:
    """Mixin of ExpressionLowering: names, attributes, and values read from a live instance."""

    def name(self, node: cst.Name) -> Value:
        found = self.env.get(node.value)
        if isinstance(found, Value):
            return found
        if isinstance(found, Unbound):
            raise self.error(node, f"`{node.value}` is not bound on every path to here: {found.reason}",
                             f"assign `{node.value}` on every path before this use")
        if node.value in ("True", "False", "None"):
            return self.b.constant({"True": True, "False": False, "None": None}[node.value])
        qual = self.source.global_name(node)
        if qual is not None:
            return self.global_value(node, qual)
        raise self.error(node, f"`{node.value}` is not defined here", None)

    def global_value(self, node: cst.CSTNode, qual: str) -> Value:
        if qual in self.source.constants:
            value = self.source.constants[qual]
            try:
                return self.b.constant(value, literal_type(value))
            except TypeError:
                pass
        if "." not in qual:
            value = self.source.bound_once(qual)
            if value is None or type(value) in (bool, int, float, str):
                # (checked at entry: the imported module may hold another value in another process)
                self.op(ops.CheckGlobalOp, [], [], module=self.source.module_name or "", symbol=qual, expected=value)
                return self.b.constant(value, literal_type(value))
        if qual in MATH_CONSTANTS:
            return self.b.constant(MATH_CONSTANTS[qual], FLOAT)
        if qual in TORCH_DTYPES:
            return self.b.constant(qual, DTYPE)
        if qual in ("builtins.True", "builtins.False"):
            return self.b.constant(qual == "builtins.True")
        member = file_enum_value(self.source, node)  # type: ignore[arg-type]
        if member is not None:  # (`Pool.MEAN` of a `class Pool(str, Enum)` of the file: the str it equals)
            return self.b.constant(member, literal_type(member))
        if self.ctx.functions is not None:
            member = self.ctx.functions.enum_value(self.source, node)
            if member is not None:  # (`Format.NCHW` of a str Enum: the str it equals)
                return self.b.constant(member, literal_type(member))
        code = self.source.code(node)
        shown = f"`{code}`" if qual in (code, f"builtins.{code}") else f"`{code}` ({qual})"
        raise self.error(
            node,
            f"{shown} cannot be used as a value in compiled code",
            "module-level constants must be literals (NAME = 1.0); pass other values as arguments "
            "or keep them on the module (self.NAME, set in __init__)",
        )

    def attribute(self, node: cst.Attribute) -> Value:
        if isinstance(node.value, cst.Call) and self.source.global_name(node.value.func) in DTYPE_INFO:
            return self.dtype_info(node)
        qual = self.source.global_name(node)
        base_name = node.value.value if isinstance(node.value, cst.Name) else None
        if qual is not None and base_name is not None and self.env.get(base_name) is None:
            return self.global_value(node, qual)
        if isinstance(node.value, cst.Name) and node.value.value == "self" and self.self_value is not None:
            return self.self_attribute(node)
        obj = self.expr(node.value)
        attr = node.attr.value
        if isinstance(node.value, cst.Name) and isinstance(obj.type, NamedTupleType):
            key = f"{node.value.value}.{attr}"  # as an `if ... is not None` refined it, for that record
            refined = self.env.get(key)
            if isinstance(refined, Value) and self.field_bases.get(key) is obj:
                return refined
        fields = self.result_fields.get(obj, ())
        if attr in fields:  # `x.max(dim=1).values`: torch's named result, an item
            i = fields.index(attr)
            return self.op(ops.GetItemOp, [obj, self.b.constant(i)], [obj.type.elems[i]]).result  # type: ignore[attr-defined]
        if isinstance(obj.type, NamedTupleType) and attr in obj.type.fields:  # `out.logits`: an item
            i = obj.type.fields.index(attr)
            read = self.op(ops.GetItemOp, [obj, self.b.constant(i)], [obj.type.elems[i]])
            self.field_reads.add(read)
            return read.result
        if obj in self.live and is_plain_object(self.live[obj]):
            return self.object_attribute(node, obj)
        if isinstance(obj.type, TensorType) or obj.type == ANY:
            try:
                t = resolve_attribute(attr, obj.type)
            except SignatureError as e:
                raise self.error(node.attr, str(e), getattr(e, "hint", None)) from None
            return self.op(ops.GetAttrOp, [obj], [t], attr=attr).result
        if isinstance(obj.type, ModuleType) and self.ctx.class_named(obj.type.qualname) is not None:
            return self.module_attribute(node, obj, self.ctx.class_named(obj.type.qualname))
        if isinstance(obj.type, ModuleType):
            found = self.torch_layer_attribute(obj.type.qualname, attr)
            if found is not None:  # `self.fc.weight`, `self.embed.embedding_dim` of torch's layers
                return self.op(ops.GetAttrOp, [obj], [found], attr=attr).result
        layer = self.named_layer(obj, attr)
        if layer is not None:
            return layer
        if obj.type == DEVICE and attr in ("type", "index"):
            return self.op(ops.GetAttrOp, [obj], [STR if attr == "type" else OptionalType(INT)], attr=attr).result
        raise self.error(node, f"attribute `{attr}` of a value of type {obj.type} is not supported")

    def dtype_info(self, node: cst.Attribute) -> Value:
        """`torch.finfo(dtype).min` (and `max`, `eps`, `tiny`, ...; `torch.iinfo(dtype).max`): read
        at run time, a constant once the dtype is known (canonicalize's fold_dtype_info: a literal,
        or the dtype of a tensor whose type has it, as an entry check pins it)."""
        call = node.value
        assert isinstance(call, cst.Call)
        func = self.source.global_name(call.func)
        attr = node.attr.value
        if attr not in DTYPE_INFO[func]:  # type: ignore[index]
            raise self.error(node.attr, f"{func}(...).{attr} is not supported",
                             f"compiled code reads {', '.join(sorted(DTYPE_INFO[func]))}")  # type: ignore[index]
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            raise self.error(call, f"{func}() takes one dtype here", "pass the dtype (`x.dtype`)")
        dtype = self.expr(call.args[0].value)
        if dtype.type not in (DTYPE, ANY):
            raise self.error(call.args[0], f"{func}() of {dtype.type}", "pass a dtype (`x.dtype`)")
        obj = self.op(ops.BuiltinCallOp, [dtype], [ANY], callee=func).result
        return self.op(ops.GetAttrOp, [obj], [DTYPE_INFO[func][attr]], attr=attr).result  # type: ignore[index]

    def self_attribute(self, node: cst.Attribute | cst.Call, attr: str | None = None) -> Value:
        """`self.attr` (`node`, or the getattr() call that reads `attr`): as refined here, or read."""
        key = f"self.{attr if attr is not None else node.attr.value}"  # type: ignore[union-attr]
        refined = self.env.get(key)
        if isinstance(refined, Value):
            return refined
        assert self.self_value is not None and self.class_info is not None
        return self.module_attribute(node, self.self_value, self.class_info, attr)

    def module_attribute(self, node: cst.Attribute | cst.Call, obj: Value, info: ClassInfo, attr: str | None = None) -> Value:
        """`obj.attr` of a module; `node` is the attribute, or the getattr() call that reads it."""
        attr = attr if attr is not None else node.attr.value  # type: ignore[union-attr]
        at = node.attr if isinstance(node, cst.Attribute) else node
        if attr in info.methods:
            if is_property(info.method_source(attr) or self.source, info.methods[attr]):
                return self.read_property(node, obj, info, attr)
            raise self.error(node, f"method `{attr}` can only be called here", "call it: self.method(...)")
        found = info.attrs.get(attr)
        if found is None:
            close = difflib.get_close_matches(attr, [*info.attrs, *info.methods], n=1)
            elsewhere = assigned_in_method(info, attr)
            raise self.error(
                at,
                f"`{info.name}` has no attribute `{attr}` that the compiler can see",
                f"it is assigned in `__init__` (line {elsewhere[1]}) from a value whose type the compiler cannot "
                f"tell: declare it at class level, `{attr}: <type>` (e.g. `{attr}: bool`)"
                if elsewhere and elsewhere[0] == "__init__"
                else f"it is assigned in `{elsewhere[0]}` (line {elsewhere[1]}), which `__init__` does not call: "
                f"declare it at class level, `{attr}: <type>` (e.g. `{attr}: float`)" if elsewhere
                else f"did you mean `{close[0]}`?" if close
                else "assign it in __init__ or declare it at class level (e.g. `scale: float`)",
            )
        if found.kind == "unknown":
            raise self.error(
                at,
                f"the type of `self.{attr}` cannot be determined from __init__",
                f"declare it at class level, e.g. `{attr}: int` or `{attr}: Tensor`",
            )
        if isinstance(found.type, UnionType):
            # (an entry reading it is compiled per member, FileContext.entry_variants: the member here)
            member = dict(self.sig.attr_types).get(attr) if obj is self.self_value else None
            if member is None:
                raise self.error(at, f"`{info.name}.{attr}` is a {found.type}, whose member is decided only "
                                     "where the compiled entry's forward reads it",
                                 "read it in forward and pass it on as an argument of the member's type")
            found = replace(found, type=member)
        if found.kind == "object":
            result = self.op(ops.GetAttrOp, [obj], [ANY], attr=attr).result
            self.live[result] = found.value
            return result
        # After Python code that may have set it (permissive mode), a read is its own: not merged
        # with earlier ones, and not assumed to hold what the entry checked (ir/shape_rules_python).
        after = {"after": self.epoch} if self.epoch else {}
        result = self.op(ops.GetAttrOp, [obj], [found.type], attr=attr, **after).result
        if not after and found.has_value and (type(found.value) is bool or type(found.value) in (int, str)
                                              and not assigned_after_init(info, attr)):
            # a setting of every instance of this class variant (`self.training`, hrnet's
            # `self.num_branches`): a branch on it lowers one side; the read stays, and an entry
            # check pins it. (Not one a method sets: the value would not stay what it was.)
            self.live[result] = found.value
        return result

    def live_module(self, value: Value) -> nn.Module | None:
        """The submodule of the instance compiled for (script(instance, ...)) that module value
        `value` reads, through attribute reads from `self`; None where not known."""
        if value is self.self_value:
            return self.class_info.instance if self.class_info is not None else None
        op = value.owner
        if not isinstance(op, ops.GetAttrOp) or not isinstance(value.type, (ModuleType, ModuleListType)):
            return None
        parent = self.live_module(op.operands[0])
        child = parent._modules.get(op.attributes["attr"]) if parent is not None else None
        return child if isinstance(child, nn.Module) else None

    def named_layer(self, obj: Value, name: str) -> Value | None:
        """`obj.name` of a Sequential or ModuleList `obj` that holds a layer under that name (a
        Sequential built from an OrderedDict): the layer, its type the container's element type
        there; None otherwise. The name is what the instance compiled for holds; an entry check
        of the layer's call finds it on every call."""
        live = self.live_module(obj) if isinstance(obj.type, ModuleListType) and obj.type.length_known else None
        if live is None or name not in live._modules:
            return None
        index = list(live._modules).index(name)
        if index >= len(obj.type.elems):  # type: ignore[union-attr]
            return None
        return self.op(ops.GetAttrOp, [obj], [obj.type.elems[index]], attr=name).result  # type: ignore[union-attr]

    def module_hasattr(self, node: cst.Call, name: str) -> Value:
        """`hasattr(module, "name")`, `getattr(module, "name"[, default])` with a literal name, as
        TorchScript has them: decided when compiling, from the attributes every instance of the
        module's class variant has (transpiler/jit.py makes instances with other attribute names
        variants of their own) and its class's."""
        args = node.args
        n = 2 if name == "hasattr" else len(args)
        attr: Any = self._UNKNOWN
        if n in (2, 3) and len(args) == n and not any(a.keyword is not None or a.star for a in args):
            if isinstance(args[1].value, cst.SimpleString):
                attr = literal_value(args[1].value)
            else:  # a name known when compiling: f"block{i}" in an unrolled loop
                attr = self.known_text(self.expr(args[1].value))
        if not isinstance(attr, str):
            raise self.error(node, f"{name}() is supported with a module and an attribute name known when compiling",
                             f"write {name}(self, \"name\"{', default' if name == 'getattr' else ''}), or build the "
                             "name from constants and the index of a loop over range(<constant>)")
        obj = self.expr(args[0].value)
        info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        if info is None or info.instance is None or not isinstance(attr, str):
            raise self.error(node, f"{name}() of a value of type {obj.type} is not supported",
                             "only a module's attributes are known when compiling")
        on_class = inspect.getattr_static(type(info.instance), attr, _ABSENT)
        if isinstance(on_class, property) or (on_class is _ABSENT and (
                attr.startswith("_") or attr not in info.attrs and info.node is None)):
            # (a property runs code; other instances of torch's layers, or private attributes,
            # are not told apart by variants)
            raise self.error(node, f"{name}() of `{attr}` is not decided when compiling",
                             "only a module's own public attributes and its class's are")
        present = attr in info.attrs or attr in info.methods or on_class is not _ABSENT or attr in vars(info.instance)
        if name == "hasattr":
            return self.b.constant(present)
        if present:
            return self.self_attribute(node, attr) if obj is self.self_value else self.module_attribute(node, obj, info, attr)
        if n == 3:
            return self.expr(args[2].value)
        raise self.error(node, f"`{info.name}` has no attribute `{attr}`", None)

    @staticmethod
    def torch_layer_attribute(qualname: str, attr: str) -> Type | None:
        """The type of attribute `attr` of torch's layer `qualname` ("torch.nn.Linear"): what its
        `__init__` assigns, as a subclass has it (transpiler/classinfo.py), where every instance
        has that one type; None otherwise (another class, a setting that is a str or a tuple)."""
        from transpiler.classinfo import _torch_layer, torch_layer_attributes

        cls = _torch_layer(qualname)
        found = torch_layer_attributes(cls).get(attr) if cls is not None else None
        if found is None or isinstance(found.type, UnionType) or found.kind not in ("constant", "parameter", "buffer",
                                                                                      "tensor"):
            return None
        return found.type

    def object_attribute(self, node: cst.Attribute, obj: Value) -> Value:
        """`self.config.num_layers`: read from the live object now. A literal is what the code is
        specialised to (its read stays, and an entry check pins it); an object is read further;
        anything else is a Python object read at run time. Objects such as configs are assumed
        not to change during a call (docs/permissive.md)."""
        attr = node.attr.value
        try:
            value = getattr(self.live[obj], attr)
        except Exception:  # noqa: BLE001 - whatever the object's own attribute code raises
            raise self.error(node.attr, f"`{attr}` cannot be read from the {type(self.live[obj]).__name__} "
                             "when compiling") from None
        if is_plain_object(value):
            t: Type = ANY
        else:
            try:
                t = literal_type(value)
            except TypeError:
                return self.op(ops.GetAttrOp, [obj], [ANY], attr=attr).result
        result = self.op(ops.GetAttrOp, [obj], [t], attr=attr).result
        self.live[result] = value
        return result

    _UNKNOWN = object()

    def known(self, value: Value) -> Any:
        """The Python value `value` has when compiling (a constant, a literal read from the
        instance, or an item of a tuple display of such: the index of a loop unrolled over
        `enumerate`), else `_UNKNOWN`."""
        owner = value.owner
        if isinstance(owner, ops.ConstantOp):
            return owner.value
        if isinstance(owner, (ops.GetItemOp, ops.UnpackOp)) and isinstance(owner.operands[0].owner, ops.TupleOp):
            items = owner.operands[0].owner.operands
            index = self.known(owner.operands[1]) if isinstance(owner, ops.GetItemOp) else owner.results.index(value)
            if type(index) is int and -len(items) <= index < len(items):
                return self.known(items[index])
        found = self.live.get(value, self._UNKNOWN)
        return self._UNKNOWN if is_plain_object(found) else found

    def known_text(self, value: Value) -> Any:
        """The str `value` has when compiling: a constant, or an f-string of known values (the
        text Python would build), else `_UNKNOWN`."""
        owner = value.owner
        if not isinstance(owner, ops.FormatOp):
            return self.known(value)
        pieces, operands = [], iter(owner.operands)
        for part in owner.parts:
            if part[0] == "text":
                pieces.append(part[1])
                continue
            known = self.known(next(operands))
            if known is self._UNKNOWN or not isinstance(known, (int, str, bool)):
                return self._UNKNOWN
            conversion, spec = part[1], part[2]
            shown = {"r": repr, "s": str, "a": ascii}[conversion](known) if conversion else known
            pieces.append(format(shown, spec))
        return "".join(pieces)


# What compiled code reads of torch.finfo(dtype) and torch.iinfo(dtype), and its type.
DTYPE_INFO = {
    "torch.finfo": {"min": FLOAT, "max": FLOAT, "eps": FLOAT, "tiny": FLOAT, "smallest_normal": FLOAT,
                    "resolution": FLOAT, "bits": INT},
    "torch.iinfo": {"min": INT, "max": INT, "bits": INT},
}


def assigned_in_method(info: ClassInfo, attr: str) -> tuple[str, int] | None:
    """The method (and line) that assigns `self.<attr>`, for a class read from source."""
    if info.source is None:
        return None
    for name, method in info.methods.items():
        for node in _self_assignments(method):
            if node.attr.value == attr:
                return name, info.source.loc(node).line
    return None


def assigned_after_init(info: ClassInfo, attr: str) -> bool:
    """Whether a method of the class other than `__init__` assigns `self.<attr>` (for a class
    read from source; torch's layers set their settings in `__init__` only)."""
    return info.source is not None and any(
        node.attr.value == attr for name, method in info.methods.items() if name != "__init__"
        for node in _self_assignments(method))


def _self_assignments(method: cst.FunctionDef) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class Finder(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self.target(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:  # (`self.calls += 1`)
            self.target(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self.target(node.target)

        def target(self, t: cst.BaseExpression) -> None:
            if isinstance(t, (cst.Tuple, cst.List)):  # (`self.a, self.b = ...`)
                for element in t.elements:
                    self.target(element.value)
            elif isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                found.append(t)

    method.body.visit(Finder())
    return found


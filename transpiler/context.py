"""Per-file compilation state: classes, signatures of compiled functions, and the worklist of
functions still to lower."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from ir.types import ANY, NONE, ModuleType, Type
from transpiler.annotations import annotation_type
from transpiler.classinfo import STD_LAYERS, ClassInfo, class_from_source, module_class_names
from transpiler.diagnostics import UserError
from transpiler.env import Signature
from transpiler.source import SourceFile, is_literal, literal_value


@dataclass
class Pending:
    sig: Signature
    node: cst.FunctionDef
    class_info: ClassInfo | None


@dataclass
class FileContext:
    source: SourceFile
    script_names: set[str]  # module-level functions and classes decorated with @script
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    signatures: dict[str, Signature] = field(default_factory=dict)
    worklist: list[Pending] = field(default_factory=list)

    def class_named(self, qualname: str) -> ClassInfo | None:
        if qualname in self.classes:
            return self.classes[qualname]
        node = self.source.classes.get(qualname)
        if node is None:
            return None
        info = class_from_source(self.source, node)
        self.classes[qualname] = info
        return info

    # -- signatures --------------------------------------------------------------------------------
    def function_signature(self, qual: str) -> Signature | None:
        """Signature of a module-level @script function of this file (and queue it)."""
        if qual not in self.source.functions or qual not in self.script_names:
            return None
        return self._request(qual, self.source.functions[qual], None)

    def method_signature(self, info: ClassInfo, method: str, at: cst.CSTNode | None = None) -> Signature:
        node = info.methods.get(method)
        if node is None:
            raise UserError(f"`{info.name}` has no method `{method}`", self.source.loc(at) if at else None)  # type: ignore[arg-type]
        return self._request(f"{info.name}.{method}", node, info)

    def _request(self, sym_name: str, node: cst.FunctionDef, info: ClassInfo | None) -> Signature:
        if sym_name not in self.signatures:
            sig = self.signature_of(node, sym_name, info)
            self.signatures[sym_name] = sig
            self.worklist.append(Pending(sig, node, info))
        return self.signatures[sym_name]

    def signature_of(self, node: cst.FunctionDef, sym_name: str, info: ClassInfo | None) -> Signature:
        classes = module_class_names(self.source)
        params = node.params
        for bad, what in ((params.star_arg, "*args"), (params.star_kwarg, "**kwargs")):
            if isinstance(bad, cst.Param):
                raise UserError(f"{what} parameters are not supported", self.source.loc(bad),
                                "declare each parameter with its type")
        if params.posonly_params or params.kwonly_params:
            first = (list(params.posonly_params) + list(params.kwonly_params))[0]
            raise UserError("positional-only and keyword-only parameters are not supported",
                            self.source.loc(first), "use ordinary parameters")
        names: list[str] = []
        types: list[Type] = []
        defaults: dict[str, object] = {}
        for i, p in enumerate(params.params):
            name = p.name.value
            names.append(name)
            if i == 0 and info is not None:
                types.append(ModuleType(info.name))
                continue
            if p.annotation is None:
                raise UserError(
                    f"parameter `{name}` has no type annotation",
                    self.source.loc(p.name),
                    f"annotate it, e.g. `{name}: Tensor` (or int, float, bool, Optional[Tensor], ...)",
                )
            t = annotation_type(self.source, p.annotation.annotation, classes)
            if p.default is not None:
                value = literal_value(p.default)
                if not is_literal(value):
                    raise UserError("default values must be literals", self.source.loc(p.default),
                                    "use None as the default and compute the value in the body")
                defaults[name] = value
                if value is None and t != NONE and not _is_optional(t):
                    # `x: Tensor = None` means Optional[Tensor], as TorchScript reads it.
                    from ir.types import OptionalType

                    t = OptionalType(t)
            types.append(t)
        if info is not None and not names:
            raise UserError("a method needs a `self` parameter", self.source.loc(node.name), None)
        if node.returns is None:
            result: Type = NONE if not _returns_value(node) else None  # type: ignore[assignment]
            if result is None:
                raise UserError(
                    f"`{sym_name}` has no return type annotation",
                    self.source.loc(node.name),
                    "annotate the return type, e.g. `-> Tensor` or `-> tuple[Tensor, Tensor]`",
                )
        else:
            result = annotation_type(self.source, node.returns.annotation, classes)
        return Signature(sym_name, tuple(names), tuple(types), defaults, result, self.source.loc(node))

    def module_result_type(self, qualname: str, at: cst.CSTNode) -> Type:
        """What calling a submodule of this class returns."""
        if qualname in STD_LAYERS:
            return STD_LAYERS[qualname]
        info = self.class_named(qualname)
        if info is not None and "forward" in info.methods:
            forward = info.methods["forward"]
            if forward.returns is None:
                raise UserError(f"`{qualname}.forward` has no return type annotation",
                                self.source.loc(forward.name), "annotate its return type")
            return annotation_type(self.source, forward.returns.annotation, module_class_names(self.source))
        return ANY


def _is_optional(t: Type) -> bool:
    from ir.types import OptionalType

    return isinstance(t, OptionalType)


def _returns_value(node: cst.FunctionDef) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Return(self, ret: cst.Return) -> None:
            nonlocal found
            if ret.value is not None:
                found = True

        def visit_FunctionDef(self, inner: cst.FunctionDef) -> bool:
            return inner is node

    node.visit(Finder())
    return found

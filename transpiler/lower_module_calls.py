"""Lowering of calls of code the compiler compiles too: methods of `self` and of submodules, other
`@script` functions (`func.call`, the variant for the argument types a call passes), submodules
(`module.call`, or the standard layer's own call under a `plain_module` guard), `super()` calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from ir.core import ops
from ir.core.builder import literal_type
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    NONE,
    TENSOR,
    ModuleListType,
    ModuleType,
    Type,
    UnionType,
    is_subtype,
)
from transpiler.check import left_to_python
from transpiler.context import is_static
from transpiler.diagnostics import UserError
from transpiler.env import Signature
from transpiler.lower_calls import tuple_for_list

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo


class ModuleCallLowering:
    """Mixin of ExpressionLowering: calls of compiled functions, methods and submodules."""

    def submodule_method(self, node: cst.Call, module: Value, method: str) -> Value | None:
        """`self.rel_pos.get_bias()`: a method other than forward of a submodule whose class is
        compiled, called as a method of `self` is (its code inlined under an entry check that the
        submodule is of that class: ir/passes/inline.py); None where the class has no such
        method, or it is static."""
        info = self.ctx.class_named(module.type.qualname) if isinstance(module.type, ModuleType) else None
        if info is None or method not in info.methods or method in ("forward", "__init__"):
            return None
        source = info.method_source(method) or self.source
        if left_to_python(source, info.methods[method]):
            return self.call_python_method(node, info.methods[method], module, info)
        if is_static(source, info.methods[method]):
            return None
        signature = self.ctx.method_signature(info, method, node)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        return self.call_compiled(node, signature, module, args, kwnames, kwargs, guard_self=True)

    def call_python_method(self, node: cst.Call, method: cst.FunctionDef, obj: Value | None = None,
                           info: ClassInfo | None = None) -> Value:
        """`self.m(...)` (or `obj.m(...)` of module `obj` of class `info`) of a method left to
        Python (`@torch.jit.unused`): a plain call, its result typed by the method's return
        annotation (Any without one, or one the compiler does not know)."""
        from transpiler.annotations import annotation_type
        from transpiler.classinfo import module_class_names

        info = info if info is not None else self.class_info
        obj = obj if obj is not None else self.self_value
        assert obj is not None
        args, kwnames, kwargs, _ = self.call_arguments(node)
        result: Type = ANY
        source = (info.method_source(method.name.value) if info is not None else None) or self.source
        if method.returns is not None:
            try:
                result = annotation_type(source, method.returns.annotation, module_class_names(source))
            except UserError:
                result = ANY
        attrs: dict[str, Any] = {"method": method.name.value}
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        op = self.op(ops.MethodCallOp, [obj, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)

    def call_method_of_self(self, node: cst.Call, method: str) -> Value:
        assert self.class_info is not None and self.self_value is not None
        signature = self.ctx.method_signature(self.class_info, method, node)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        static = is_static(self.class_info.method_source(method) or self.source, self.class_info.methods[method])
        return self.call_compiled(node, signature, None if static else self.self_value, args, kwnames, kwargs)

    def call_base_method(self, node: cst.Call, method: str) -> Value:
        """`super().method(...)` in a method of `self`'s class: the base class's method, compiled."""
        assert self.class_info is not None and self.self_value is not None
        signature, static = self.ctx.base_method_signature(self.class_info, self.node, method, node.func)  # type: ignore[arg-type]
        args, kwnames, kwargs, _ = self.call_arguments(node)
        return self.call_compiled(node, signature, None if static else self.self_value, args, kwnames, kwargs)

    def read_property(self, node: cst.Attribute | cst.Call, obj: Value, info: ClassInfo, name: str) -> Value:
        """`obj.name` of a `@property` of module `obj`'s class: its getter, compiled and called."""
        signature = self.ctx.method_signature(info, name, node)
        return self.call_compiled(node, signature, obj, [], [], [], guard_self=obj is not self.self_value)  # type: ignore[arg-type]

    def variant_for_call(self, info: ClassInfo, args: list[Value], kwnames: list[str],
                         kwargs: list[Value]) -> Signature | None:
        """Recursive mode: the forward of `info` compiled for this call of the module, where the
        call's arguments do not fit its annotations (`call_variant` says which) or it passes
        keywords to `**kwargs`; None where the plain forward fits (or there is none, or the
        variant does not compile: then the call runs the module as Python)."""
        if not self.ctx.recursive or "forward" not in info.methods:
            return None
        try:
            sig = self.ctx.method_signature(info, "forward")
        except UserError:  # it does not compile for its annotations: it may for this call's arguments
            sig = self.ctx.failed_signature(f"{info.name}.forward")
            if sig is None:
                return None
        try:
            return self.call_variant(sig, 1, args, kwnames, kwargs)
        except UserError:
            return None

    def call_variant(self, sig: Signature, skip: int, args: list[Value], kwnames: list[str],
                     kwargs: list[Value]) -> Signature | None:
        """The variant of `sig` (its first `skip` parameters bound already) for a call with these
        arguments (FileContext.call_variant), or None where `sig` itself fits them."""
        params = list(sig.params[skip:])
        types = dict(zip(sig.params, sig.types))
        takes = (len(sig.params) if sig.positional is None else sig.positional) - skip
        given = dict(zip(params[:takes], args))
        positional = [a.type for a in args[takes:]]
        if positional and sig.star is None:
            return None
        extras: list[tuple[str, Type]] = []
        for k, v in zip(kwnames, kwargs):
            if k in params:
                given[k] = v
            elif sig.kwstar is not None:
                extras.append((k, v.type))
        # An int passed where a float is declared stays an int in Python (`t * k` of an int tensor
        # stays integral): the variant takes it as an int; a tuple passed where a list is declared
        # (maxvit's `window_partition(x, self.partition_size)`) stays a tuple: the variant takes
        # the tuple, and compiles where the body only reads it. Permissive mode also takes what the
        # annotations do not allow (Python does not check them) and keywords into **kwargs.
        widened = {p: v.type for p, v in given.items() if not is_subtype(v.type, types[p])}  # type: ignore[arg-type]
        for p in params:  # a Union parameter takes the member passed (its default's type, left out)
            if isinstance(types[p], UnionType) and p not in widened:
                if p in given:
                    widened[p] = given[p].type
                elif p in sig.defaults:
                    widened[p] = literal_type(sig.defaults[p])
        if self.ctx.permissive:
            # ... and None where the call passes None or leaves a None default (HF's `past_key_values`,
            # `encoder_hidden_states`): `x is None` is then decided when lowering, as Python
            # would find it, so a name bound only on the side not taken is not read
            for p in params:
                passes_none = given[p].type == NONE if p in given else p in sig.defaults and sig.defaults[p] is None
                if passes_none and types[p] != NONE and p not in sig.kwstar_items + sig.star_items:
                    widened[p] = NONE
        if not self.ctx.permissive and (extras or positional or any(
                not (types[p] == FLOAT and t in (INT, BOOL)) and not tuple_for_list(t, types[p])
                and not (isinstance(types[p], UnionType) and is_subtype(t, types[p])) and p not in sig.untyped
                for p, t in widened.items())):
            return None
        if not widened and not extras and not positional:
            return None
        return self.ctx.call_variant(sig, widened, extras, positional)

    def call_compiled(self, node: cst.Call, sig: Signature, self_value: Value | None,
                      args: list[Value], kwnames: list[str], kwargs: list[Value], guard_self: bool = False) -> Value:
        """A call of a compiled function: bind arguments to parameters, fill in defaults.
        `guard_self`: `self_value` is a submodule, whose class an entry check confirms."""
        # (ahead of time too, a call of an entry with Union parameters: the variant for its members)
        if (self.ctx.recursive or any(isinstance(t, UnionType) for t in sig.types)) and not sig.kwstar_items:
            variant = self.call_variant(sig, int(self_value is not None), args, kwnames, kwargs)
            if variant is not None:
                sig = variant
        params = list(sig.params)
        types = list(sig.types)
        if self_value is not None:
            params, types = params[1:], types[1:]
        bound: dict[str, Value] = {}
        if len(args) > len(params):
            raise self.error(node, f"{sig.sym_name}() takes {len(params)} arguments, {len(args)} given")
        if sig.positional is not None and len(args) > sig.positional - (self_value is not None):
            takes = sig.positional - (self_value is not None)
            named = params[takes:len(args)]
            raise self.error(node, f"{sig.sym_name}() takes {takes} positional argument{'s' * (takes != 1)}, "
                             f"{len(args)} given", "pass " + ", ".join(f"{n}=..." for n in named) + " by keyword")
        for p, a in zip(params, args):
            bound[p] = a
        for k, v in zip(kwnames, kwargs):
            if k not in params:
                raise self.error(node, f"{sig.sym_name}() has no parameter `{k}`")
            if k in bound:
                raise self.error(node, f"{sig.sym_name}() got two values for `{k}`")
            bound[k] = v
        operands: list[Value] = [] if self_value is None else [self_value]
        for p, t in zip(params, types):
            if p not in bound:
                if p not in sig.defaults:
                    raise self.error(node, f"{sig.sym_name}() is missing the argument `{p}`")
                bound[p] = self.b.constant(sig.defaults[p])
            if not is_subtype(bound[p].type, t) and not (t == FLOAT and bound[p].type in (INT, BOOL)) \
                    and bound[p].type != ANY:  # type: ignore[arg-type]
                raise self.error(node, f"argument `{p}` of {sig.sym_name}() is {t}, got {bound[p].type}")
            operands.append(bound[p])
        result_types = [] if sig.result == NONE else [sig.result]
        attrs = {"guard_self": True} if guard_self else {}
        op = self.op(ops.FuncCallOp, operands, result_types, callee=sig.sym_name, **attrs)  # type: ignore[list-item]
        return op.result if op.results else self.b.constant(None)

    def module_call(self, node: cst.Call, module: Value) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node)
        t = module.type
        info = self.ctx.class_named(t.qualname) if isinstance(t, ModuleType) else None
        if info is not None and info.call_override is not None:
            return self.overridden_call(module, info, args, kwnames, kwargs)
        return self.plain_module_call(node, module, args, kwnames, kwargs)

    def overridden_call(self, module: Value, info: ClassInfo, args: list[Value], kwnames: list[str],
                        kwargs: list[Value]) -> Value:
        """A call of a module whose class has its own `__call__` (HF's GradientCheckpointingLayer),
        which runs instead of nn.Module's. Permissive recursive mode compiles that `__call__` for
        the call (inlining checks at entry that the module's `__call__` is still it); otherwise
        the call is a plain Python call, never inlined."""
        assert info.call_override is not None
        attrs: dict[str, Any] = {"kwnames": tuple(kwnames)} if kwnames else {}
        result: Type = ANY
        if self.ctx.permissive and self.ctx.recursive:
            try:
                sig = self.ctx.override_signature(info)
                sig = self.call_variant(sig, 1, args, kwnames, kwargs) or sig
                result = sig.result  # type: ignore[assignment]
                attrs.update(callee=sig.sym_name, call=info.call_override[2])
            except UserError:
                pass
        if "callee" not in attrs:
            attrs["opaque"] = True
        op = self.op(ops.ModuleCallOp, [module, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)

    def super_call(self, node: cst.Call) -> Value:
        """`super().__call__(*args, **kwargs)` in a class's own `__call__`: nn.Module's call of
        this module (its forward, with hooks), which inlining checks at entry as for any call."""
        assert self.self_value is not None and self.class_info is not None and self.class_info.call_override
        args, kwnames, kwargs, _ = self.call_arguments(node)
        return self.plain_module_call(node, self.self_value, args, kwnames, kwargs, self.class_info.call_override[2])

    def plain_module_call(self, node: cst.Call, module: Value, args: list[Value], kwnames: list[str],
                          kwargs: list[Value], call: str | None = None) -> Value:
        """A call that runs nn.Module.__call__: the module's forward. `call`: the module's own
        `__call__` that this call is made from (its entry check names it)."""
        t = module.type
        result: Type
        if isinstance(t, ModuleListType):
            if t.kind != "Sequential":
                raise self.error(node.func, "an nn.ModuleList cannot be called", "iterate over it")
            result = TENSOR
        attrs: dict[str, Any] = {"kwnames": tuple(kwnames)} if kwnames else {}
        info = self.ctx.class_named(t.qualname) if isinstance(t, ModuleType) else None
        overload = self.ctx.overload_signature(info, "forward", [a.type for a in args]) \
            if info is not None and info.overloads.get("forward") and not kwnames else None
        variant = self.variant_for_call(info, args, kwnames, kwargs) if overload is None and info is not None else None
        if overload is not None:
            result = overload.result  # type: ignore[assignment]
            attrs["callee"] = overload.sym_name  # (ir/passes/inline.py inlines this one)
        elif variant is not None:
            result = variant.result  # type: ignore[assignment]
            attrs["callee"] = variant.sym_name
        elif isinstance(t, ModuleType):
            result = self.ctx.module_result_type(t.qualname, node)
        elif not isinstance(t, ModuleListType):
            result = ANY
        if call is not None:
            attrs["call"] = call
        op = self.op(ops.ModuleCallOp, [module, *args, *kwargs], [] if result == NONE else [result], **attrs)
        return op.result if op.results else self.b.constant(None)

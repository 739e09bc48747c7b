"""Per-file compilation state: classes, signatures of compiled functions, and the worklist of
functions still to lower."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

import libcst as cst

from ir.core.builder import literal_type
from ir.core.graph import Loc
from ir.core.types import (
    ANY,
    BOOL,
    ERROR,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    ListType,
    ModuleType,
    TensorType,
    TupleType,
    Type,
    UnionType,
    unify_all,
)
from transpiler.annotations import annotation_type, union_type
from transpiler.check import PYTHON_DECORATORS
from transpiler.classinfo import (
    STD_LAYERS,
    ClassInfo,
    class_from_source,
    module_class_names,
    torch_layer_result,
)
from transpiler.diagnostics import Diagnostic, UserError
from transpiler.env import Signature
from transpiler.infer_annotations import (
    missing_parameters_error,
    suggest_parameter,
)
from transpiler.source import SCRIPT_NAMES, SourceFile, is_literal, literal_value


@dataclass
class Pending:
    sig: Signature
    node: cst.FunctionDef
    class_info: ClassInfo | None
    source: SourceFile  # the file the function is written in


@dataclass(frozen=True)
class Break:
    """A statement or expression kept as Python in permissive mode."""

    loc: Loc
    reason: str


class FunctionFinder(Protocol):
    """What the running program holds, for script(instance, ...) (transpiler/jit.py)."""

    def function(self, source: SourceFile, expr: cst.BaseExpression) -> tuple[SourceFile, cst.FunctionDef, str] | None:
        """The function `expr` names in `source`'s module, or None when it is not a Python
        function with source code to compile."""

    def unchanged(self, source: SourceFile, node: cst.FunctionDef) -> bool:
        """Whether the module-level function `node` defines is, at run time, that function itself:
        its decorators returned it unchanged (HF's `@use_kernel_forward_from_hub` without the
        kernels package), so compiled code need not apply them."""

    def torch_name(self, source: SourceFile, expr: cst.BaseExpression) -> str | None:
        """The torch function `expr` names in `source`'s module at run time ("torch._assert" for
        `from .trace_utils import _assert`, where that module re-exports it), or None."""

    def enum_value(self, source: SourceFile, expr: cst.BaseExpression) -> str | int | None:
        """The value of the str or int Enum member `expr` names at run time (`Format.NCHW` of a
        `class Format(str, Enum)`: "NCHW", which it equals), or None."""

    def class_object(self, source: SourceFile, expr: cst.BaseExpression) -> type | None:
        """The class `expr` names in `source`'s module at run time (`nn.Identity`, `Block`), or
        None when it names no class."""

    def lookup(self, source: SourceFile, func: cst.BaseExpression, args: list[object]) -> Lookup | None:
        """`func(*args)` called now (`ALL_ATTENTION_FUNCTIONS.get_interface("sdpa", default)`):
        the function it returns, or None when it returns anything else or raises. `args` are
        constants and GlobalRef (a module-level name of `source`)."""


@dataclass(frozen=True)
class GlobalRef:
    """A module-level name of a model file, passed to a lookup."""

    name: str


@dataclass(frozen=True)
class Lookup:
    found: tuple[SourceFile, cst.FunctionDef, str]
    module: str  # where the returned function is defined (its `__module__`) ...
    qualname: str  # ... and its name there

# The type of an unannotated result while it is being inferred (script(instance, ...) only).
INFERRING = ANY


@dataclass
class FileContext:
    source: SourceFile
    script_names: set[str]  # module-level functions and classes decorated with @script
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    signatures: dict[str, Signature] = field(default_factory=dict)
    worklist: list[Pending] = field(default_factory=list)
    # script(instance, ...): what TorchScript's recursive scripting does. Module-level functions
    # the code calls are compiled without @script (`functions` finds them, in any file), an
    # unannotated parameter is a Tensor and an unannotated result is inferred from the body.
    recursive: bool = False
    functions: FunctionFinder | None = None
    # Code for calls autograd records (pipeline.build_program's `autograd`): a `with
    # torch.no_grad():` block keeps its entry check in recursive mode too, where script()'s
    # no-grad code leaves it to the caller's check of every call.
    autograd: bool = False
    # Code for autograd does eager's eager-only work under `not torch.jit.is_scripting()` (it is
    # False there); with `skip_eager_only` (a target's option: that work did not compile) it is
    # True, as under TorchScript and in script()'s other code.
    skip_eager_only: bool = False
    # Permissive mode: what the compiler does not understand stays Python (transpiler/opaque.py);
    # `breaks` lists each such place and why, for the report.
    permissive: bool = False
    breaks: list[Break] = field(default_factory=list)
    # script(..., example_inputs=...) in permissive mode: the entry function's name and how many
    # arguments the examples give; an unannotated parameter they leave out is its default's type.
    entry_examples: tuple[str, int] | None = None
    # The example inputs themselves (the entry's arguments after `self`): which member of a Union
    # parameter they pass (entry_variants)
    entry_example_values: tuple | None = None
    # The functions compiled for the caller (a class's forward, a function): in permissive mode
    # their decorators are applied to the compiled function; another decorated function's
    # calls stay Python (compiled code would not apply its decorators).
    entry_names: set[str] = field(default_factory=set)
    entry_kwargs_empty: set[str] = field(default_factory=set)  # decorated entries whose wrappers pass none
    # parameter -> "none"/"tensor" their wrappers pass, or "keyword": the examples give it by name
    entry_passed: dict[str, dict[str, str]] = field(default_factory=dict)
    # Entries compiled from examples beside generic code: a parameter the examples leave to its
    # None default is compiled for None (`_left_out`)
    left_out_none: set[str] = field(default_factory=set)
    entry_kwargs_passed: dict[str, dict[str, object]] = field(default_factory=dict)  # the literal keywords they pass
    # Where lowering went: each statement it lowered (a compound one's header alone). In recursive
    # mode a branch decided when compiling is not lowered, and what the check pass says of
    # code there is dropped (pipeline.lowered_only).
    lowered: list[Loc] = field(default_factory=list)
    # How a function is lowered (transpiler.lower_stmt.FunctionLowerer, which reads this context:
    # compile passes it in, so that this module does not import the lowering back).
    lowerer: Callable[..., Any] | None = None
    _origins: dict[str, Pending] = field(default_factory=dict)  # sym_name -> what it was compiled from
    _variants: dict[tuple, Signature] = field(default_factory=dict)
    _inferring: set[str] = field(default_factory=set)
    _results: dict[str, Type] = field(default_factory=dict)  # inferred_result's
    _failed: dict[str, Pending] = field(default_factory=dict)  # sym_name -> a function that did not lower
    _errors: dict[str, UserError] = field(default_factory=dict)  # strict: sym_name -> why it did not lower

    def sources(self) -> dict[str, list[str]]:
        """display name -> lines of every file compiled from (for diagnostics and comments)."""
        found = {self.source.display: self.source.lines}
        for info in self.classes.values():
            if info.source is not None:
                found.setdefault(info.source.display, info.source.lines)
        for pending in self.worklist:
            found.setdefault(pending.source.display, pending.source.lines)
        return found

    def source_paths(self) -> list[Path]:
        """The path of every file compiled from, this one first."""
        found = {self.source.path: None}
        for info in self.classes.values():
            if info.source is not None:
                found.setdefault(info.source.path, None)
        for pending in self.worklist:
            found.setdefault(pending.source.path, None)
        return [Path(p) for p in found]

    def class_named(self, qualname: str) -> ClassInfo | None:
        if qualname in self.classes:
            return self.classes[qualname]
        node = self.source.classes.get(qualname)
        if node is None:
            owner, _, attr = qualname.rpartition(".")  # (an nn.ModuleDict of a class's __init__)
            held = self.class_named(owner).module_dicts.get(attr) if owner and self.class_named(owner) else None
            if held is not None:
                self.classes[qualname] = held
            return held
        info = class_from_source(self.source, node)
        self.classes[qualname] = info
        return info

    # -- signatures --------------------------------------------------------------------------------
    def function_signature(self, qual: str, source: SourceFile | None = None,
                           func: cst.BaseExpression | None = None) -> Signature | None:
        """Signature of a module-level function of this file that is @script or, in strict mode,
        has no decorator compiled code would have to apply (a helper, compiled where it is called,
        as TorchScript compiles the functions scripted code calls), and queue it; with
        `recursive`, of any function `func` (written in `source`) names that has source code."""
        source = source or self.source
        if source is self.source and qual in self.source.functions and (
                qual in self.script_names
                or not self.permissive and not applied_decorators(source, self.source.functions[qual])):
            return self._request(qual, self.source.functions[qual], None, source)
        if not self.recursive or self.functions is None or func is None:
            return None
        found = self.functions.function(source, func)
        if found is None:
            return None
        where, node, sym_name = found
        return self._request(sym_name, node, None, where)

    def looked_up_signature(self, lookup: Lookup) -> Signature:
        """Signature of the function a lookup returned (FunctionFinder.lookup), queued to compile."""
        where, node, sym_name = lookup.found
        return self._request(sym_name, node, None, where)

    def method_signature(self, info: ClassInfo, method: str, at: cst.CSTNode | None = None) -> Signature:
        node = info.methods.get(method)
        if node is None:
            raise UserError(f"`{info.name}` has no method `{method}`", self.source.loc(at) if at else None)  # type: ignore[arg-type]
        source = info.method_source(method) or self.source
        if is_static(source, node) and method != "forward":  # a function that lives in the class: no `self`
            return self._request(f"{info.name}.{method}", node, None, source)
        # (a static forward is called as `module(x)`: permissive mode compiles it taking the module)
        return self._request(f"{info.name}.{method}", node, info, source)

    def base_method_signature(self, info: ClassInfo, caller: cst.FunctionDef, method: str,
                              at: cst.CSTNode) -> tuple[Signature, bool]:
        """`super().method(...)` in `caller`, a method of (a class along the MRO of) `info`: the
        method the next class defining it has, compiled for `info`'s instances as
        `<info>.<that class>.<method>`; and whether it is static (called without `self`)."""
        found = info.base_method(caller, method)
        if found is None:
            raise UserError(f"`super().{method}` is not a method of a base class whose source the compiler reads",
                            self.source.loc(at), "call the method of a class of yours, or keep the call out of "
                            "compiled code")
        cls_name, node, source = found
        static = is_static(source, node)
        return self._request(f"{info.name}.{cls_name}.{method}", node, None if static else info, source), static

    def static_signature(self, qual: str) -> Signature | None:
        """`Cls.helper` of a `@staticmethod` of a class of this file, or None."""
        owner, _, method = qual.rpartition(".")
        info = self.class_named(owner) if owner in self.source.classes else None
        node = info.methods.get(method) if info is not None else None
        if node is None or not is_static(info.method_source(method) or self.source, node):  # type: ignore[union-attr]
            return None
        return self.method_signature(info, method)  # type: ignore[arg-type]

    def entry_signature(self, info: ClassInfo) -> Signature:
        """The entry's forward. In permissive mode, one whose `*args` takes the example inputs
        beyond its named parameters is compiled for that many (as a compiled call passing them
        is: `call_variant`); the generated function checks that `*args` holds no more."""
        node = info.methods["forward"]
        sym_name = f"{info.name}.forward"
        source = info.method_source("forward") or self.source
        if self.permissive and self.entry_examples is not None and self.entry_examples[0] == sym_name \
                and isinstance(node.params.star_arg, cst.Param) and sym_name not in self.signatures:
            sig = self.signature_of(node, sym_name, info, source)
            at = len(sig.params) if sig.positional is None else sig.positional
            extra = self.entry_examples[1] - (at - 1)
            if extra > 0:
                stars = tuple(f"{sig.star}_{i}" for i in range(extra))
                variant = replace(sig, params=sig.params[:at] + stars + sig.params[at:],
                                  types=sig.types[:at] + (TENSOR,) * extra + sig.types[at:], result=None,
                                  positional=at + extra, star_items=stars)
                return self._request(sym_name, node, info, source, variant)
        return self.method_signature(info, "forward")

    def entry_variants(self, sig: Signature) -> tuple[Signature, ...]:
        """The functions compiled for entry `sig`: itself, or, where parameters are annotated
        with Unions (`x: Union[Tensor, List[Tensor]]`), or the entry reads attributes of `self`
        that are (nn.Conv2d's `padding: str | tuple[int, ...]`), one variant per combination of
        their members, each checking at entry that its arguments and attributes are of its
        members (tried in order, as specialisations are); with example inputs (and an instance),
        only the variant of the members they are (a call of another member is refused, as by
        any entry check)."""
        origin = self._origins.get(sig.sym_name)
        info = origin.class_info if origin is not None else None
        unions: list[tuple[str, UnionType, object]] = []  # (parameter or `self.attr`, union, value)
        given = self.entry_example_values
        offset = 1 if info is not None else 0  # (the examples follow `self`)
        for i, t in enumerate(sig.types):
            if isinstance(t, UnionType):
                passed = given[i - offset] if given is not None and i - offset < len(given) else _NOTHING
                unions.append((sig.params[i], t, passed))
        for attr, union in _union_attributes(info, origin.node) if origin is not None else ():
            live = info.instance if info is not None else None
            unions.append((f"self.{attr}", union, _NOTHING if live is None else getattr(live, attr, _NOTHING)))
        if not unions:
            return (sig,)
        assert origin is not None
        choices = []
        for name, union, value in unions:
            attribute = name.startswith("self.")
            chosen = [m for m in union.members if value is not _NOTHING and _is_member(value, m, attribute)][:1]
            choices.append(chosen or list(union.members))
        variants: list[Signature] = []
        for combination in itertools.product(*choices):
            members = dict(zip((name for name, _, _ in unions), combination))
            types = tuple(members.get(p, t) for p, t in zip(sig.params, sig.types))
            classes = tuple((name, _class_name(m, name.startswith("self."))) for name, m in members.items())
            # named by the members it takes (`Gather.forward:list`, `Gather_forward_list` in the module)
            words = (_class_name(m, False).replace("type(None)", "none").lower() for m in combination)
            sym = f"{sig.sym_name}:{'_'.join(words)}"
            if any(v.sym_name == sym for v in variants):  # (List[int] and List[Tensor], say)
                sym += f"_{len(variants) + 1}"
            attrs = tuple((n[len("self."):], m) for n, m in members.items() if n.startswith("self."))
            variant = replace(sig, sym_name=sym, types=types, arg_classes=classes, attr_types=attrs)
            variants.append(self._request(sym, origin.node, origin.class_info, origin.source, variant))
        return tuple(variants)

    def overload_signature(self, info: ClassInfo, method: str, arg_types: list[Type]) -> Signature | None:
        """The method compiled for the first of its `_overload_method` declarations whose
        parameter types the arguments fit (`Block.forward#1`), or None when none does."""
        from ir.core.types import fits

        source = info.method_source(method) or self.source
        for i, stub in enumerate(info.overloads.get(method, [])):
            declared = self.signature_of(stub, f"{info.name}.{method}#{i}", info, source)
            types = list(declared.types[1:])
            if len(arg_types) <= len(types) and all(fits(a, t) for a, t in zip(arg_types, types)):
                return self._request(declared.sym_name, info.methods[method], info, source, declared)
        return None

    def _request(self, sym_name: str, node: cst.FunctionDef, info: ClassInfo | None, source: SourceFile,
                 declared: Signature | None = None) -> Signature:
        if sym_name in self._inferring:
            raise UserError(f"`{sym_name}` calls itself, so its result type cannot be inferred",
                            source.loc(node.name), "annotate its return type")
        if sym_name in self._errors:
            raise self._errors[sym_name]  # (each call of a function that failed: its errors once)
        if sym_name not in self.signatures:
            if self.permissive and sym_name.partition("#")[0] not in self.entry_names:
                applied = applied_decorators(source, node)
                if applied and not (info is None and self.functions is not None and self.functions.unchanged(source, node)):
                    raise UserError(f"`{sym_name}` is decorated with `@{source.code(applied[0].decorator)}`, "
                                    "which compiled code would not apply", source.loc(applied[0]),
                                    "its calls run it as Python")
            sig = declared or self.signature_of(node, sym_name, info, source)
            if any(isinstance(t, UnionType) for t in sig.types) or not sig.arg_classes \
                    and sym_name in self.entry_names and _union_attributes(info, node):
                # (densenet's `x: Union[Tensor, List[Tensor]]`: each call compiles a variant for
                # the member it passes, lower_module_calls.call_variant; an entry, one per member,
                # entry_variants; this signature is not lowered)
                self.signatures[sym_name] = sig
                self._origins[sym_name] = Pending(sig, node, info, source)
                return sig
            try:
                if sig.result is None:
                    sig = self._infer_result(sig, node, info, source)
                elif self.permissive and self.recursive:
                    # A function that cannot be compiled leaves its call as Python: find out now,
                    # at the call, by lowering it once (the lowering that is kept comes later).
                    self._probe(sig, node, info, source)
            except UserError as e:
                if self.permissive and self.recursive and declared is None:  # (variants may still compile)
                    self._failed[sym_name] = Pending(sig, node, info, source)
                if not self.permissive:
                    self._errors[sym_name] = e
                raise
            self.signatures[sym_name] = sig
            self.worklist.append(Pending(sig, node, info, source))
            self._origins[sym_name] = self.worklist[-1]
        return self.signatures[sym_name]

    def override_signature(self, info: ClassInfo) -> Signature:
        """The class's own `__call__` (ClassInfo.call_override), compiled as a method of it."""
        assert info.call_override is not None
        source, node, _ = info.call_override
        return self._request(f"{info.name}.__call__", node, info, source)

    def failed_signature(self, sym_name: str) -> Signature | None:
        """The declared signature of a function that did not lower for it (permissive recursive
        mode), from which a call can still ask for a variant (`call_variant`)."""
        failed = self._failed.get(sym_name)
        return failed.sig if failed is not None else None

    def call_variant(self, sig: Signature, types: dict[str, Type], extras: list[tuple[str, Type]],
                     positional: list[Type] = ()) -> Signature:  # type: ignore[assignment]
        """Permissive recursive mode: `sig`'s function compiled for one call, whose arguments'
        types are `types` where they are not the annotations' (Python does not check those: a
        Python object where a Tensor is declared) and whose keywords `extras` go to `**kwargs`
        (as keyword-only parameters). Inlining can then bind the call exactly. The result is
        inferred. Raises UserError when the variant does not compile."""
        origin = self._origins.get(sig.sym_name) or self._failed[sig.sym_name]
        key = (sig.sym_name, tuple(sorted(types.items())), tuple(extras), tuple(positional))
        found = self._variants.get(key)
        if found is None:
            at = len(sig.params) if sig.positional is None else sig.positional
            stars = tuple(f"{sig.star}_{i}" for i in range(len(positional)))  # `*args` of this call
            declared = tuple(types.get(p, t) for p, t in zip(sig.params, sig.types))
            found = replace(
                sig, sym_name=f"{sig.sym_name}#c{len(self._variants) + 1}",
                params=sig.params[:at] + stars + sig.params[at:] + tuple(n for n, _ in extras),
                types=declared[:at] + tuple(positional) + declared[at:] + tuple(t for _, t in extras),
                result=None, positional=at + len(stars),
                kwstar_items=tuple(n for n, _ in extras), star_items=stars)
            self._variants[key] = found  # (a call in its own body finds it)
            try:
                found = self._request(found.sym_name, origin.node, origin.class_info, origin.source, found)
            except UserError:
                del self._variants[key]
                raise
            self._variants[key] = found
        return found

    def _probe(self, sig: Signature, node: cst.FunctionDef, info: ClassInfo | None, source: SourceFile):
        """Lower the function once, for what it tells (its returns' types, whether it lowers)."""
        assert self.lowerer is not None, "FileContext.lowerer is set by transpiler.compile"
        self._inferring.add(sig.sym_name)
        breaks = len(self.breaks)
        try:
            probe = self.lowerer(self, node, sig, info, source)
            probe.lower()
        finally:
            self._inferring.discard(sig.sym_name)
            del self.breaks[breaks:]  # the kept lowering reports them
        return probe

    def _infer_result(self, sig: Signature, node: cst.FunctionDef, info: ClassInfo | None,
                      source: SourceFile) -> Signature:
        """Lower the function once with an open result type and join what its returns return
        (TorchScript infers unannotated results too); the lowering that is kept comes later."""
        probe = self._probe(replace(sig, result=INFERRING), node, info, source)
        result = unify_all(probe.returned_types) if probe.returned_types else NONE
        if result is None and self.permissive:
            # A tensor on one path and a tuple on another: a Python object, as Python returns it
            # (permissive mode; TorchScript needs one type).
            probe = self._probe(replace(sig, result=ANY), node, info, source)
            result = ANY
        if result is None:
            raise UserError(f"`{sig.sym_name}` returns values of different types: "
                            + ", ".join(str(t) for t in probe.returned_types),
                            source.loc(node.name), "annotate its return type")
        return replace(sig, result=result)

    def inferred_result(self, info: ClassInfo, method: str) -> Type:
        """The result type of a method of `info` without a return annotation, inferred from its
        body as `_request` infers it, where the method itself is not compiled (a submodule's
        forward that the code calls as a module); its errors are raised."""
        sym_name = f"{info.name}.{method}"
        if sym_name not in self._results:
            node = info.methods[method]
            source = info.method_source(method) or self.source
            sig = self.signature_of(node, sym_name, info, source)
            if sig.errors:
                raise UserError.of(list(sig.errors))
            self._results[sym_name] = sig.result if sig.result is not None \
                else self._infer_result(sig, node, info, source).result
        return self._results[sym_name]

    def _permissive_signature(self, node: cst.FunctionDef, sym_name: str, info: ClassInfo | None,
                              source: SourceFile) -> Signature:
        """Permissive mode takes any parameter list: `*args` and `**kwargs` (compiled callers pass
        them nothing; the entry checks its caller did not either), keyword-only parameters, and
        annotations it cannot read or that are missing (a plain Python value, Any; a tensor in
        recursive mode, as TorchScript has it)."""
        from ir.core.types import OptionalType

        classes = module_class_names(source)
        params = node.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        names: list[str] = []
        types: list[Type] = []
        defaults: dict[str, object] = {}
        static = info is not None and is_static(source, node)
        if static:  # called as `module(x)` or `self.f(x)`: compiled taking the module all the same
            names.append("self" if all(p.name.value != "self" for p in every) else "self_")
            types.append(ModuleType(info.name))  # type: ignore[union-attr]
        for i, p in enumerate(every):
            name = p.name.value
            names.append(name)
            if i == 0 and info is not None and not static:
                types.append(ModuleType(info.name))
                continue
            t: Type = TENSOR if self.recursive else ANY
            if p.annotation is not None:
                try:
                    t = annotation_type(source, p.annotation.annotation, classes)
                except UserError:
                    # A Union of a callee is compiled per member passed, as in strict mode
                    # (densenet's `x: Union[Tensor, List[Tensor]]`, whose `isinstance(x, Tensor)`
                    # decides then); the entry's stays a Python value (HF's `logits_to_keep: int
                    # | Tensor`, under decorators each variant would have to apply), as does an
                    # annotation not read otherwise.
                    try:
                        union = union_type(source, p.annotation.annotation, classes) \
                            if self.recursive and sym_name not in self.entry_names else None
                    except UserError:
                        union = None
                    t = union or ANY
            if p.default is not None:
                value = defaults[name] = _literal_default(p, source)
                if value is None and isinstance(t, UnionType):
                    t = UnionType(tuple(dict.fromkeys((*t.members, NONE))))
                elif p.annotation is None and value is not None:
                    t = literal_type(value)
                elif value is None and (t == ANY or p.annotation is None) and self.entry_examples is not None \
                        and self.entry_examples[0] == sym_name and i > self.entry_examples[1] - (info is None) \
                        and not applied_decorators(source, node):  # (a decorator may pass it: HF's use_cache)
                    t = NONE  # a Python value left out of the examples: compiled for None, checked at entry
                elif value is None and self.entry_passed.get(sym_name, {}).get(name) == "none":
                    t = NONE  # what the entry's decorators pass it with the examples (jit._what_decorators_pass)
                elif p.annotation is None:
                    found = suggest_parameter(source, node, name)
                    t = found.type if found.decided else ANY
                elif value is None and t not in (NONE, ANY) and not _is_optional(t):
                    t = OptionalType(t)
            if self.entry_passed.get(sym_name, {}).get(name) == "tensor" and isinstance(t, OptionalType) \
                    and isinstance(t.elem, TensorType):
                t = t.elem  # (likewise a tensor: compiled for one, checked at entry)
            types.append(t)
        if info is not None and not names:
            raise UserError("a method needs a `self` parameter", source.loc(node.name), None)
        result: Type | None = NONE if not _returns_value(node) else None
        if self.recursive:
            pass  # inferred from the returns, as Python does not check the annotation (HF's can be wrong)
        elif node.returns is not None:
            try:
                result = annotation_type(source, node.returns.annotation, classes)
            except UserError:
                result = ANY
        elif result is None:
            result = ANY
        star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
        kwstar = params.star_kwarg.name.value if isinstance(params.star_kwarg, cst.Param) else None
        positional = len(params.posonly_params) + len(params.params) if params.kwonly_params else None
        return Signature(sym_name, tuple(names), tuple(types), defaults, result, source.loc(node),  # type: ignore[arg-type]
                         star, kwstar, positional)

    def signature_of(self, node: cst.FunctionDef, sym_name: str, info: ClassInfo | None,
                     source: SourceFile | None = None) -> Signature:
        """The signature from the annotations; result None: to be inferred (`recursive` only)."""
        source = source or self.source
        classes = module_class_names(source)
        params = node.params
        if self.permissive:
            return self._permissive_signature(node, sym_name, info, source)
        for bad, what in ((params.star_arg, "*args"), (params.star_kwarg, "**kwargs")):
            if isinstance(bad, cst.Param):
                raise UserError(f"{what} parameters are not supported", source.loc(bad),
                                "declare each parameter with its type")
        if params.posonly_params:
            raise UserError("positional-only parameters are not supported", source.loc(params.posonly_params[0]),
                            "use ordinary parameters")
        # Keyword-only parameters (after `*`) are parameters a call must name: `positional` says
        # where they start, for the callers' binding and the generated `def`.
        ordinary = [*params.params, *params.kwonly_params]
        positional = len(params.params) if params.kwonly_params else None
        # Unannotated parameters the signature cannot type: without a default (strict mode) or
        # with a default that is not a literal. One error names them all, with what to write.
        # What the annotations do not type is reported with the signature (`errors`), which is
        # still lowered (transpiler/recover.py): ERROR, where callers report nothing more.
        errors: list[Diagnostic] = []
        untyped = [p for i, p in enumerate(ordinary)
                   if p.annotation is None and not (i == 0 and info is not None)
                   and (not self.recursive if p.default is None else not is_literal(literal_value(p.default)))]
        if untyped:
            errors += missing_parameters_error(source, node, untyped, info is not None).diagnostics
        names: list[str] = []
        types: list[Type] = []
        defaults: dict[str, object] = {}
        untyped_names: list[str] = []
        for i, p in enumerate(ordinary):
            name = p.name.value
            names.append(name)
            if i == 0 and info is not None:
                if name != "self":  # (the compiler reads `self.<attr>` by that name)
                    errors += UserError(f"compiled methods name their instance `self`; `{sym_name}` names it `{name}`",
                                        source.loc(p.name), f"rename `{name}` to `self`").diagnostics
                types.append(ModuleType(info.name))
                continue
            if any(p is u for u in untyped):
                # Its body is checked as the annotation its error suggests would have it, where
                # the body decides one (what the user is told to write); else ERROR.
                found = suggest_parameter(source, node, name) if p.default is None else None
                types.append(found.type if found is not None and found.decided else ERROR)
                continue
            if p.annotation is None and p.default is None:
                types.append(TENSOR)  # TorchScript's rule for unannotated parameters (recursive only)
                untyped_names.append(name)
                continue
            if p.annotation is None:
                # A literal default gives the type; None gives Optional[T], T read from the body.
                defaults[name] = literal_value(p.default)
                types.append(literal_type(defaults[name]) if defaults[name] is not None
                             else NONE if self._left_out(sym_name, i, info, name)
                             else suggest_parameter(source, node, name).type)
                continue
            try:
                t = annotation_type(source, p.annotation.annotation, classes)
            except UserError as e:
                try:
                    # (in an entry or, recursively, any function: compiled per member, `_request`)
                    union = union_type(source, p.annotation.annotation, classes) \
                        if self.recursive or sym_name in self.entry_names else None
                except UserError:
                    union = None
                if union is None:
                    errors += e.diagnostics
                t = union or ERROR
            if p.default is not None:
                try:
                    value = defaults[name] = _literal_default(p, source)
                except UserError as e:
                    errors += e.diagnostics
                    value = defaults[name] = None  # (a call may still leave it out)
                    t = ERROR
                if value is None and isinstance(t, UnionType):
                    t = UnionType(tuple(dict.fromkeys((*t.members, NONE))))
                elif value is None and t not in (NONE, ERROR) and not _is_optional(t):
                    # `x: Tensor = None` means Optional[Tensor], as TorchScript reads it.
                    from ir.core.types import OptionalType

                    t = OptionalType(t)
                if value is None and t != ERROR and self._left_out(sym_name, i, info, name):
                    t = NONE
            types.append(t)
        if info is not None and not names:
            raise UserError("a method needs a `self` parameter", source.loc(node.name), None)
        if node.returns is None:
            # Inferred from what its returns return, as TorchScript infers it (`_request`); a
            # function whose parameters could not be typed has nothing to infer it from.
            result: Type = NONE if not _returns_value(node) else ERROR if untyped else None  # type: ignore[assignment]
        else:
            try:
                result = annotation_type(source, node.returns.annotation, classes)
            except UserError as e:
                errors += e.diagnostics
                result = ERROR
        return Signature(sym_name, tuple(names), tuple(types), defaults, result, source.loc(node), positional=positional,
                         errors=tuple(errors), untyped=tuple(untyped_names))

    def _left_out(self, sym_name: str, i: int, info: ClassInfo | None, name: str) -> bool:
        """Whether parameter `i` (`name`) of entry `sym_name`, compiled from examples beside
        generic code, is one the examples leave to its None default: compiled for None, which an
        entry check then requires (the generic code takes other calls)."""
        return sym_name in self.left_out_none and self.entry_examples is not None and self.entry_examples[0] == sym_name \
            and i > self.entry_examples[1] - (info is None) and name not in self.entry_passed.get(sym_name, {})

    def module_result_type(self, qualname: str, at: cst.CSTNode) -> Type:
        """What calling a submodule of this class returns."""
        if qualname in STD_LAYERS:
            return STD_LAYERS[qualname]
        declared = torch_layer_result(qualname)
        if declared is not None:  # another of torch's layers (nn.Unfold): what its forward says
            return declared
        info = self.class_named(qualname)
        if info is not None and "forward" in info.methods:
            forward = info.methods["forward"]
            if self.recursive:
                return self.method_signature(info, "forward").result or ANY
            if forward.returns is None:  # (its module is called, not compiled here: not requested)
                return self.inferred_result(info, "forward")
            return annotation_type(self.source, forward.returns.annotation, module_class_names(self.source))
        return ANY


def _is_optional(t: Type) -> bool:
    from ir.core.types import OptionalType

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


def _literal_default(p: cst.Param, source: SourceFile) -> object:
    value = literal_value(p.default)
    if not is_literal(value):
        raise UserError("default values must be literals", source.loc(p.default),  # type: ignore[arg-type]
                        "use None as the default and compute the value in the body")
    return value


# Decorators that change nothing compiled code relies on: compiled code runs only where no
# autograd is needed (runtime.guards.check_no_autograd; ahead of time, a py.check_no_autograd the
# lowering puts at the entry of a function decorated so), so `torch.no_grad()` is moot there.
NEUTRAL_DECORATORS = {"builtins.staticmethod", "builtins.property", "torch.no_grad", "torch.jit.export", "torch.jit.script", "torch.jit._overload_method",
                      "torch.jit._overload", "typing.overload"}


def is_static(source: SourceFile, node: cst.FunctionDef) -> bool:
    """Whether a method is decorated `@staticmethod`."""
    return any((source.global_name(d.decorator) or source.code(d.decorator)) in ("staticmethod", "builtins.staticmethod")
               for d in node.decorators)


def is_property(source: SourceFile, node: cst.FunctionDef) -> bool:
    """Decorated `@property`: read as `self.name`, which calls it."""
    return any((source.global_name(d.decorator) or source.code(d.decorator)) in ("property", "builtins.property")
               for d in node.decorators)


def applied_decorators(source: SourceFile, node: cst.FunctionDef) -> list[cst.Decorator]:
    """The decorators of `node` whose wrapper compiled code must apply (all but @script, those
    of TorchScript's `jit` that mean nothing at run time, and NEUTRAL_DECORATORS)."""
    out = []
    for deco in node.decorators:
        expr = deco.decorator.func if isinstance(deco.decorator, cst.Call) else deco.decorator
        name = source.global_name(expr) or source.code(expr)
        if name not in NEUTRAL_DECORATORS | SCRIPT_NAMES | PYTHON_DECORATORS:
            out.append(deco)
    return out


_NOTHING = object()  # (no example for the parameter)


def _union_attributes(info: ClassInfo | None, node: cst.FunctionDef) -> list[tuple[str, UnionType]]:
    """The attributes of `self` typed as Unions (nn.Conv2d's `padding`) that a method's body
    reads, in order."""
    found: dict[str, UnionType] = {}

    class Reads(cst.CSTVisitor):
        def visit_Attribute(self, attr: cst.Attribute) -> None:
            if isinstance(attr.value, cst.Name) and attr.value.value == "self":
                known = info.attrs.get(attr.attr.value) if info is not None else None
                if known is not None and isinstance(known.type, UnionType):
                    found[attr.attr.value] = known.type

    if info is not None:
        node.body.visit(Reads())
    return list(found.items())


def _is_member(value: object, member: Type, attribute: bool) -> bool:
    """Whether a Python value is of Union member `member` (at the outer level, as the entry
    check that pins it tests: runtime.guards.check_type)."""
    import torch

    if isinstance(member, TensorType):
        return isinstance(value, torch.Tensor)
    return isinstance(value, _PYTHON_CLASSES[_class_name(member, attribute)])  # type: ignore[arg-type]


def _class_name(member: Type, attribute: bool) -> str:
    """The Python class (or classes) an argument of Union member `member` is: what its entry check
    tests, as Python text. A `tuple[int, ...]` that torch's layers annotate is a list of ints to
    compiled code (classinfo._runtime_annotation_type): an attribute of a list type may be either."""
    if isinstance(member, TensorType):
        return "Tensor"
    if isinstance(member, ListType) and attribute:
        return "(list, tuple)"
    if isinstance(member, (ListType, TupleType)):
        return "list" if isinstance(member, ListType) else "tuple"
    return {BOOL: "bool", INT: "int", FLOAT: "float", STR: "str", NONE: "type(None)"}.get(member, "object")


_PYTHON_CLASSES = {"list": list, "tuple": tuple, "(list, tuple)": (list, tuple), "bool": bool, "int": int,
                   "float": float, "str": str, "type(None)": type(None), "object": object}

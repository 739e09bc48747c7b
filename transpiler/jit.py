"""`script(instance, example_inputs=...)`: compile now, for code that is not decorated or to
specialise to one instance. The generated module goes to the cache directory and is imported
from there; the returned module shares the instance's parameters, buffers and submodules.

A model compiled the same way before (same source, compiler, instance structure and attribute
values, example input types...: see transpiler/jit_cache.py) is not compiled again: its module is
loaded from the cache. The compiler (libcst, the IR, the passes, codegen) is imported only when
something has to be compiled."""

from __future__ import annotations

import copy
import functools
import inspect
import os
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from torch import nn

from runtime.dispatch import compiled_dispatcher, inside_wrappers, rewrap
from runtime.call_inputs import records_autograd
from runtime.guards import GuardFailure
from runtime.loader import load_module_from_path
from transpiler import jit_cache
from transpiler import regions as transpiler_regions

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo


def compile_object(obj: Any, example_inputs: Sequence[Any] | None = None, permissive: bool = False,
                   freeze: bool = False, keep_eager: Sequence[str] = (), regions: bool | None = None,
                   **_: Any) -> Any:
    options: dict[str, Any] = {"permissive": permissive}
    if isinstance(obj, nn.Module):
        if freeze:  # (not a key of unfrozen modules: their cache entries stay valid)
            options["freeze"] = True
        kept = set(_kept_paths(obj, keep_eager))
        found: list = []
        if example_inputs is not None and transpiler_regions.enabled(regions):
            def whole(paths: tuple[str, ...]) -> nn.Module:  # (what the user keeps, in both ways)
                more = tuple(sorted(kept | set(paths)))
                return _compile_module(obj, example_inputs, {**options, **({"keep_eager": more} if more else {})})

            found = transpiler_regions.decide(obj, example_inputs, _key(obj, example_inputs, options),
                                              lambda module, args: _compile_module(module, args, dict(options)), whole)
            kept |= {d.region for d in found if d.kept}
        if kept:  # (not a key where nothing is kept: those cache entries stay valid)
            options["keep_eager"] = tuple(sorted(kept))
        scripted = _compile_module(obj, example_inputs, options)
        if found:
            scripted.__torchscribe_regions__ = tuple(found)
        return scripted
    if inspect.isfunction(obj):
        source_fn = inspect.unwrap(obj)
        # Permissive mode compiles a decorated function's body and keeps its decorators.
        return _compile_function(source_fn, example_inputs, options, obj if permissive else source_fn)
    raise TypeError(f"script() compiles nn.Module instances and functions, not {type(obj).__name__}")


def _kept_paths(root: nn.Module, paths: Sequence[str]) -> tuple[str, ...]:
    """`keep_eager` checked: each path a region of `root` (transpiler/regions.py), whose calls
    the entry's own code makes."""
    for path in paths:
        if not transpiler_regions.is_region(root, path):
            names = ", ".join(r.name for r in transpiler_regions.regions_of(root)) or "none"
            raise TypeError(f"script(keep_eager=...): {path!r} is not a region of this {type(root).__name__} "
                            f"(a top-level submodule, or an item of a top-level container: {names})")
    return tuple(paths)


def reference_classes() -> dict[type, str]:
    """torch's layers whose forward is not in the compiled subset, compiled from
    transpiler/torch_layers.py instead (same class names, what eager's general path computes)."""
    import transpiler.torch_layers  # noqa: F401  (its functions are found through sys.modules)

    return {nn.MultiheadAttention: "MultiheadAttention", nn.TransformerEncoderLayer: "TransformerEncoderLayer"}


def _source_path(obj: Any) -> str:
    if isinstance(obj, type) and obj in reference_classes():
        return str(Path(__file__).with_name("torch_layers.py"))
    path = inspect.getsourcefile(obj)
    if path is None:
        raise TypeError(f"the source of {obj!r} is not available, so it cannot be compiled")
    return path


def _read_source(path: str) -> Any:
    from transpiler.source import SourceFile  # imports libcst: only when compiling

    return SourceFile.read(Path(path), os.path.relpath(path))


def _compile_module(instance: nn.Module, example_inputs: Sequence[Any] | None, options: dict[str, Any],
                    example_kwargs: dict[str, Any] | None = None) -> nn.Module:
    if _called_through_holder(instance, example_inputs, example_kwargs):
        return _compile_through_holder(instance, example_inputs, options)
    cls = type(instance)
    module = _module_code(instance, example_inputs, options, example_kwargs)
    scripted = copy.copy(instance)  # a shallow copy: the same parameter, buffer and module dicts
    source_forward = cls.__dict__.get("__torchscribe_eager__", cls.forward)  # never the AOT dispatcher
    eager = source_forward.__get__(scripted)
    qualname = f"{cls.__module__}:{cls.__name__}.forward"
    # A decorated forward (permissive mode): its wrappers around the compiled body
    forward = inside_wrappers(source_forward, module.COMPILED[f"{cls.__name__}.forward"], qualname)
    bound: Callable[..., Any] = types.MethodType(forward, scripted)  # (a staticmethod's too: context.py)

    def compile_for_autograd(inputs: Sequence[Any] | None, skip_eager_only: bool) -> Callable[..., Any]:
        now = copy.copy(scripted)  # as it is now (train() sets `training` on scripted alone) ...
        del now.forward  # ... without the dispatcher
        code = _module_code(now, inputs, _autograd_options(options, skip_eager_only), example_kwargs)
        return types.MethodType(inside_wrappers(source_forward, code.COMPILED[f"{cls.__name__}.forward"], qualname),
                                scripted)

    autograd = AutogradCode(compile_for_autograd, example_inputs)

    def compiled_forward(*args: Any, **kwargs: Any) -> Any:
        if records_autograd(scripted, args, kwargs):
            return autograd(args, kwargs)
        return bound(*args, **kwargs)

    scripted.forward = compiled_dispatcher(eager, compiled_forward, qualname)
    if options["permissive"] and example_inputs is not None:
        for where, child, (args, kwargs) in _decorated_submodules(instance, example_inputs, example_kwargs or {}):
            _replace_submodule(scripted, where, _compile_module(
                child, args, {"permissive": True, **({"freeze": True} if options.get("freeze") else {})}, kwargs))
    return scripted


def _module_code(instance: nn.Module, example_inputs: Sequence[Any] | None, options: dict[str, Any],
                 example_kwargs: dict[str, Any] | None = None) -> types.ModuleType:
    """The generated module of `instance`'s class, from the cache or compiled now."""
    cls = type(instance)
    path = _source_path(cls)
    text = Path(path).read_text(encoding="utf-8")
    module_name = _module_name_of(path)
    if example_kwargs:  # (a decorated submodule's call: plain keywords, `_decorated_submodules`)
        options = {**options, "example_kwargs": tuple(sorted(
            (k, repr(v) if v is None or type(v) in (bool, int, float, str) else type(v).__qualname__)
            for k, v in example_kwargs.items()))}
    key = jit_cache.module_key(instance, path, text, module_name, example_inputs, options)
    module = _cached(key, cls.__name__)
    if module is None:
        from transpiler.source import SourceFile

        source = SourceFile(Path(path), text, os.path.relpath(path))
        node = source.classes.get(cls.__name__)
        if node is None or cls.__qualname__ != cls.__name__:
            raise TypeError(f"{cls.__qualname__} is not defined at module level of {path}; it cannot be compiled")
        source.module_name = module_name
        compiled = compile_instance(instance, source, node, example_inputs, "script(instance, example_inputs=...)",
                                    options["permissive"], example_kwargs or {}, options.get("freeze", False),
                                    options.get("autograd", False), frozenset(options.get("keep_eager", ())),
                                    skip_eager_only=options.get("skip_eager_only", False))
        module = _load(compiled.text, cls.__name__, key, compiled.files)
    return module


def _key(instance: nn.Module, example_inputs: Sequence[Any] | None, options: dict[str, Any]) -> str | None:
    """The cache key of `instance`'s module compiled with `options` (None: not cacheable)."""
    path = _source_path(type(instance))
    text = Path(path).read_text(encoding="utf-8")
    return jit_cache.module_key(instance, path, text, _module_name_of(path), example_inputs, options)


def _called_through_holder(instance: nn.Module, example_inputs: Sequence[Any] | None,
                           example_kwargs: dict[str, Any] | None) -> bool:
    """A root the compiler knows as a submodule, not from its source: an nn.Sequential (or a
    subclass that keeps its forward: classinfo.is_container, without importing the compiler), or
    one of torch's own layers, called with one input."""
    cls = type(instance)
    if example_kwargs or example_inputs is not None and len(example_inputs) != 1:
        return False
    if isinstance(instance, nn.Sequential):
        return cls.forward is nn.Sequential.forward
    return cls.__module__.startswith("torch.") and cls not in reference_classes() \
        and not isinstance(instance, (nn.ModuleList, nn.ModuleDict))


def _compile_through_holder(instance: nn.Module, example_inputs: Sequence[Any] | None,
                            options: dict[str, Any]) -> nn.Module:
    """`instance` compiled as the compiler sees it when it is a submodule: the forward of a module
    that calls it (transpiler/roots.py), never torch's own source."""
    from transpiler.roots import RootCall

    scripted = copy.copy(instance)  # a shallow copy: the same parameter, buffer and module dicts
    root = copy.copy(instance)  # ... without the hooks, which calling `scripted` runs
    for hooks in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"):
        object.__setattr__(root, hooks, type(getattr(instance, hooks))())
    holder = RootCall(root)
    if options.get("keep_eager"):  # (paths below the root: below the holder's `root`)
        options = {**options, "keep_eager": tuple(f"root.{p}" for p in options["keep_eager"])}
    body = _module_code(holder, example_inputs, options).COMPILED["RootCall.forward"]
    cls = type(instance)

    def compile_for_autograd(inputs: Sequence[Any] | None, skip_eager_only: bool) -> Callable[..., Any]:
        code = _module_code(holder, inputs, _autograd_options(options, skip_eager_only))
        return functools.partial(code.COMPILED["RootCall.forward"], holder)

    autograd = AutogradCode(compile_for_autograd, example_inputs)

    def compiled_forward(*args: Any, **kwargs: Any) -> Any:
        if records_autograd(scripted, args, kwargs):
            return autograd(args, kwargs)
        return body(holder, *args, **kwargs)

    scripted.forward = compiled_dispatcher(cls.forward.__get__(scripted), compiled_forward,
                                           f"{cls.__module__}:{cls.__name__}.forward")
    return scripted


def _decorated_submodules(root: nn.Module, example_inputs: Sequence[Any], example_kwargs: dict[str, Any]) \
        -> list[tuple[str, nn.Module, tuple[tuple, dict[str, Any]]]]:
    """Submodules whose forward is decorated (GPT-2's `@merge_with_config_defaults`), the
    outermost of each branch, with what `root` calls each with on the example inputs. Compiled
    code calls them as Python (it would not apply their decorators); each is compiled on its own,
    as `script()` compiles the root, for the arguments recorded here: the root's forward is run
    once, eagerly. One called with a tensor keyword, or not called, is left as it is (its entry
    would need the keyword's type)."""
    found = []
    for name, module in root.named_modules():
        if module is root or any(name.startswith(f + ".") for f, _ in found):
            continue
        forward = type(module).__dict__.get("__torchscribe_eager__", type(module).forward)
        if hasattr(forward, "__wrapped__") and "forward" not in vars(module):
            found.append((name, module))
    if not found:
        return []
    seen: dict[str, tuple[tuple, dict[str, Any]]] = {}

    def recorder(name: str) -> Callable[..., None]:
        def hook(_: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
            seen.setdefault(name, (args, dict(kwargs)))
        return hook

    handles = [m.register_forward_pre_hook(recorder(n), with_kwargs=True) for n, m in found]
    try:
        with torch.no_grad():
            root(*example_inputs, **example_kwargs)
    except Exception:  # noqa: BLE001 - the model refuses its example inputs: nothing recorded
        return []
    finally:
        for h in handles:
            h.remove()
    return [(n, m, seen[n]) for n, m in found if n in seen
            and not any(isinstance(v, torch.Tensor) for v in seen[n][1].values())]


def _replace_submodule(root: nn.Module, where: str, new: nn.Module) -> None:
    """Put `new` at `where` in `root` (a script() result), copying the module dicts on the way:
    the instance the caller compiled keeps its own submodules."""
    *path, last = where.split(".")
    module = root
    for part in [*path, None]:
        modules = dict(module._modules)
        object.__setattr__(module, "_modules", modules)
        if part is None:
            modules[last] = new
            return
        child = copy.copy(modules[part])
        modules[part] = child
        module = child


def compile_instance(instance: nn.Module, source: Any, node: Any, example_inputs: Sequence[Any] | None,
                     regenerate: str, permissive: bool = False, example_kwargs: dict[str, Any] = {},  # noqa: B006
                     frozen: bool = False, autograd: bool = False, kept_eager: frozenset[str] = frozenset(),
                     skip_eager_only: bool = False) -> Any:
    """Compile the class of `instance` (`node` in `source`) for this instance, recursively: the
    classes of its submodules and the functions the code calls, from whichever file defines
    them (TorchScript's recursive scripting), so that inlining sees them. `skip_eager_only`:
    see `instance_program`."""
    from codegen.module import emit_module
    from transpiler.pipeline import CompiledFile, module_header

    program, entries, files = instance_program(instance, source, node, example_inputs, permissive, example_kwargs,
                                               frozen, autograd, kept_eager, skip_eager_only=skip_eager_only)
    header = module_header(source, regenerate, Path(source.path).name, program, permissive)
    return CompiledFile(program, entries, emit_module(program, header, entries, program.source_lines), files)


def instance_program(instance: nn.Module, source: Any, node: Any, example_inputs: Sequence[Any] | None,
                     permissive: bool = False, example_kwargs: dict[str, Any] = {},  # noqa: B006
                     frozen: bool = False, autograd: bool = False, kept_eager: frozenset[str] = frozenset(),
                     beside_generic: bool = False, skip_eager_only: bool = False
                     ) -> tuple[Any, dict[str, str], tuple[str, ...]]:
    """(program after the passes, COMPILED entries, the other files compiled from) of
    `compile_instance`; `autograd`: for calls autograd records, `kept_eager`: submodules called as
    eager calls them (pipeline.build_program); `beside_generic`: a specialisation of a checked-in
    module, whose generic code takes the calls it refuses, so a parameter the examples leave to
    its None default is compiled for None; `skip_eager_only`: code for autograd that skips the
    eager-only work under `not torch.jit.is_scripting()` as TorchScript does (context.py)."""
    from transpiler.pipeline import build_program
    from transpiler.source import Target

    sources = _Sources(source)
    infos: dict = {}
    _collect_infos(instance, sources, infos)
    cls = type(instance)
    options: dict[str, object] = {}
    if permissive and example_inputs is not None:
        options.update(_what_decorators_pass(instance, example_inputs, example_kwargs))
    if example_kwargs:  # (parameters the examples give by keyword: not left to their defaults)
        options["example_keywords"] = tuple(sorted(example_kwargs))
    if beside_generic:
        options["left_out_none"] = True
    if skip_eager_only:
        options["skip_eager_only"] = True
    program, entries = build_program(source, [Target(cls.__name__, node, options)], infos, instance=instance,
                                     example_inputs=example_inputs, functions=sources, permissive=permissive,
                                     frozen=frozen, devices=jit_cache.program_devices(instance, example_inputs),
                                     autograd=autograd, kept_eager=kept_eager)
    own = str(Path(source.path).resolve())
    return program, entries, tuple(f for f in sources.files if f != own)


def _call_override(cls: type, sources: _Sources) -> tuple[Any, Any, str] | None:
    """The `__call__` that calling an instance of `cls` runs instead of nn.Module's: its file,
    definition and "module:qualname", or None without source."""
    owner = next(c for c in cls.__mro__ if "__call__" in c.__dict__)
    function = owner.__dict__["__call__"]
    source = sources.of(owner) if inspect.isfunction(function) else None
    klass = source.classes.get(owner.__name__) if source is not None else None
    node = next((s for s in klass.body.body if getattr(s, "name", None) is not None and s.name.value == "__call__"),
                None) if klass is not None else None
    if node is None:
        return None
    return source, node, f"{function.__module__}:{function.__qualname__}"


class _Seen(BaseException):  # (not an Exception: a wrapper's `except Exception` must not take it)
    pass


def _what_decorators_pass(instance: nn.Module, example_inputs: Sequence[Any],
                          example_kwargs: dict[str, Any] = {}) -> dict[str, object]:  # noqa: B006
    """What the wrappers of a decorated forward (HF's add `use_cache` from the config) pass the
    body when called with the example inputs: their code is run once, up to where they call the
    body (a stand-in that stops there). Options for compiling the body:
    - `kwargs_empty`: no keywords beyond its named parameters, so it is compiled for an empty
      `**kwargs`;
    - `kwargs_passed`: the keywords beyond them, when each is a literal (HF's `use_cache=False`
      from the config), so `**kwargs` is compiled for exactly those items;
    - `passed_none`: the parameters it receives as None, compiled for None;
    - `passed_tensor`: those it receives a tensor for, compiled for a tensor where the annotation
      says it may be None.
    The body's entry checks confirm both on each call (the body runs as Python inside the
    wrappers when they fail)."""
    forward = type(instance).forward
    if not hasattr(forward, "__wrapped__"):
        return {}
    body = inspect.unwrap(forward)

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        raise _Seen(args, kwargs)

    try:
        rewrap(forward, stand_in)(instance, *example_inputs, **example_kwargs)
    except _Seen as seen:
        args, kwargs = seen.args
    except Exception:  # noqa: BLE001 - the decorators refuse these inputs, or cannot be copied: not known
        return {}
    else:
        return {}
    named = inspect.signature(body).parameters
    options: dict[str, object] = {}
    extra = {k: v for k, v in kwargs.items() if k not in named or named[k].kind is inspect.Parameter.VAR_KEYWORD}
    if not extra:
        options["kwargs_empty"] = True
    elif any(p.kind is inspect.Parameter.VAR_KEYWORD for p in named.values()) \
            and all(type(v) in (bool, int, float, str, type(None)) for v in extra.values()):
        options["kwargs_passed"] = tuple(sorted(extra.items()))
    try:
        bound = inspect.signature(body).bind(*args, **kwargs)
    except TypeError:
        return options
    bound.apply_defaults()
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for option, passed in (("passed_none", lambda v: v is None), ("passed_tensor", lambda v: type(v) is torch.Tensor)):
        names = tuple(sorted(n for n, v in bound.arguments.items() if passed(v) and named[n].kind in plain))
        if names:
            options[option] = names
    return options


class _Sources:
    """The parsed files of the classes and functions a recursive compilation reaches, each read
    once, and the function a call names (TorchScript compiles what compiled code calls)."""

    def __init__(self, entry: Any) -> None:
        self.files: dict[str, Any] = {str(Path(entry.path).resolve()): entry}
        self.functions: dict[str, Any] = {}  # symbol name -> the function object it stands for

    def of(self, obj: Any) -> Any | None:
        """The SourceFile that defines class or function `obj`, or None (no source, or torch's own)."""
        module = getattr(obj, "__module__", None) or ""
        if isinstance(obj, type) and obj in reference_classes():
            path: str | None = _source_path(obj)
        elif module == "torch" or module.startswith("torch."):
            return None
        else:
            try:
                path = inspect.getsourcefile(obj)
            except (TypeError, OSError):
                return None
        if path is None or not os.path.exists(path):
            return None
        key = str(Path(path).resolve())
        if key not in self.files:
            self.files[key] = _read_source(path)
            self.files[key].module_name = _module_name_of(path)
        return self.files[key]

    def function(self, source: Any, expr: Any) -> tuple[Any, Any, str] | None:
        """The module-level Python function that `expr` (a name or dotted name in `source`)
        refers to at run time, with its file and node."""
        obj = _live_object(sys.modules.get(_module_name_of(str(source.path)) or ""), expr)
        return self._compilable(obj)

    def _compilable(self, obj: Any) -> tuple[Any, Any, str] | None:
        """A module-level Python function's file, node and symbol name, or None."""
        if isinstance(obj, torch.jit.ScriptFunction):  # `@torch.jit.script def f`: its Python function
            obj = getattr(obj, "_torchdynamo_inline", obj)
        if not inspect.isfunction(obj) or obj.__qualname__ != obj.__name__:
            return None
        where = self.of(obj)
        if where is None or obj.__name__ not in where.functions:
            return None
        sym_name = obj.__name__
        while self.functions.setdefault(sym_name, obj) is not obj:  # same name, another function
            sym_name += "_"
        return where, where.functions[obj.__name__], sym_name

    def torch_name(self, source: Any, expr: Any) -> str | None:
        """(transpiler.context.FunctionFinder.torch_name)"""
        from transpiler.classinfo import torch_function_name

        return torch_function_name(_live_object(sys.modules.get(_module_name_of(str(source.path)) or ""), expr))

    def enum_value(self, source: Any, expr: Any) -> str | int | None:
        """(transpiler.context.FunctionFinder.enum_value)"""
        from transpiler.classinfo import plain_enum_value

        return plain_enum_value(_live_object(sys.modules.get(_module_name_of(str(source.path)) or ""), expr))

    def class_object(self, source: Any, expr: Any) -> type | None:
        """(transpiler.context.FunctionFinder.class_object)"""
        obj = _live_object(sys.modules.get(_module_name_of(str(source.path)) or ""), expr)
        return obj if isinstance(obj, type) else None

    def unchanged(self, source: Any, node: Any) -> bool:
        """(transpiler.context.FunctionFinder.unchanged)"""
        module = sys.modules.get(_module_name_of(str(source.path)) or "")
        obj = getattr(module, node.name.value, None) if module is not None else None
        if not inspect.isfunction(obj) or hasattr(obj, "__wrapped__"):
            return False
        code = obj.__code__
        first = min(source.positions[d].start.line for d in node.decorators) if node.decorators else source.positions[node].start.line
        return code.co_name == node.name.value and Path(code.co_filename).resolve() == Path(source.path).resolve() \
            and code.co_firstlineno in (first, source.positions[node.name].start.line)

    def lookup(self, source: Any, func: Any, args: list[Any]) -> Any:
        """`func(*args)` called now (see transpiler.context.FunctionFinder.lookup)."""
        from transpiler.context import GlobalRef, Lookup

        module = sys.modules.get(_module_name_of(str(source.path)) or "")
        callee = _live_object(module, func)
        if module is None or not callable(callee):
            return None
        try:
            values = [getattr(module, a.name) if isinstance(a, GlobalRef) else a for a in args]
            result = callee(*values)
        except Exception:  # noqa: BLE001 - it refuses these arguments: the call stays Python
            return None
        found = self._compilable(result)
        return None if found is None else Lookup(found, result.__module__, result.__qualname__)


def _live_object(module: Any, expr: Any) -> Any:
    """What a name or dotted name (libcst) of `module`'s top level holds now, or None."""
    import libcst as cst

    parts: list[str] = []
    while isinstance(expr, cst.Attribute):
        parts.append(expr.attr.value)
        expr = expr.value
    if module is None or not isinstance(expr, cst.Name):
        return None
    obj: Any = module
    for name in [expr.value, *reversed(parts)]:
        obj = inspect.getattr_static(obj, name, None) if isinstance(obj, type) else getattr(obj, name, None)
    return obj


def _collect_infos(root: nn.Module, sources: _Sources, infos: dict) -> None:
    """ClassInfo of every class in the module tree whose source is available (torch's own
    layers and containers are known to the compiler without). Instances of one class whose
    attributes have different types (a Sequential of two layers here, of three there; None here,
    a module there) are compiled as variants of the class, as TorchScript makes one type per
    module structure: `Block`, `Block@2`, ... (runtime.guards checks the class name before '@').
    The root's structure is always the class's own name (`Block`), which script() compiles."""
    from transpiler.classinfo import class_from_instance, is_container, merge_attribute_types, module_qualname

    names: dict[int, str] = {}
    variants: dict[tuple, str] = {}

    def name_of(m: nn.Module) -> str:
        return names.get(id(m)) or module_qualname(m)

    def visit(module: nn.Module) -> None:
        if id(module) in names:
            return
        for child in module.children():
            visit(child)
        cls = type(module)
        if is_container(module):
            return
        defining = next((c for c in cls.__mro__ if "forward" in c.__dict__), cls)
        source = sources.of(defining) if defining is not nn.Module else sources.of(cls)
        node = source.classes.get(defining.__name__) if source is not None else None
        if node is None and (cls.__module__ + ".").startswith("torch."):
            # torch's own layers: no code to compile, but their attributes may be read
            # (`self.qkv.weight`); one ClassInfo for all instances, the types joined.
            info = class_from_instance(module, None, None, name_of)
            infos[info.name] = merge_attribute_types(infos[info.name], info) if info.name in infos else info
            return
        if node is None or defining.__qualname__ != defining.__name__:
            return
        info = class_from_instance(module, source, node, name_of)
        _inherited_methods(info, cls, sources)
        if module is not root and cls.__call__ is not nn.Module.__call__:
            info.call_override = _call_override(cls, sources)
            if info.call_override is None:
                return  # its own __call__, without source: the compiler does not know this class
        shape = tuple((k, a.kind, a.type) for k, a in sorted(info.attrs.items()))
        # (and the names of its other attributes: hasattr() is decided per variant)
        others = tuple(sorted(k for k in vars(module) if not k.startswith("_") and k not in info.attrs))
        # The lowering takes a bool flag (`use_res_connect`, `training`), an int or str setting
        # (`num_branches`) and a settings object (`config`) from the variant's ClassInfo:
        # instances that differ in them are variants too.
        fixed = tuple((k, a.value if a.kind == "constant" else id(a.value)) for k, a in sorted(info.attrs.items())
                      if a.kind == "object" or (a.has_value and type(a.value) in (bool, int, str)))
        key = (cls, shape, others, fixed)
        if key in variants and module is not root:
            _keep_shared_values(infos[variants[key]], info)
            names[id(module)] = variants[key]
            return
        same = [k for k in variants if k[0].__name__ == cls.__name__]
        if any(k[0] is not cls for k in same):
            raise TypeError(f"two classes named {cls.__name__} in the model ({cls.__module__} and "
                            f"another module); they cannot be compiled together yet")
        # The root is compiled, and its entry looked up, as `Cls.forward`: its structure has the
        # class's own name, also where instances of its class inside it (a tree of trees,
        # visited before it) have others; those are numbered from @2.
        number = 1 if module is root else len(same) + 1 + (cls.__name__ == type(root).__name__)
        info.name = cls.__name__ if number == 1 else f"{cls.__name__}@{number}"
        infos[info.name] = info
        variants.setdefault(key, info.name)
        names[id(module)] = info.name

    visit(root)


def _inherited_methods(info: ClassInfo, cls: type, sources: _Sources) -> None:
    """The methods `cls` has along its MRO, each as Python finds it: the first class that
    defines the name wins (a base's forward calls a method its subclass defines; a subclass
    takes forward from a base in another file). A name a class without source defines first
    (torch's) is not compiled."""
    import libcst as cst
    from transpiler.classinfo import _is_overload, is_accessor

    methods: dict[str, Any] = {}
    where: dict[str, Any] = {}
    info.lineage.clear()
    for klass in cls.__mro__:
        if klass is object:
            break
        source = sources.of(klass) if klass.__qualname__ == klass.__name__ else None
        node = source.classes.get(klass.__name__) if source is not None else None
        if node is None:
            for name, value in vars(klass).items():
                methods.setdefault(name, None)
            continue
        own = {stmt.name.value: stmt for stmt in node.body.body
               if isinstance(stmt, cst.FunctionDef) and not _is_overload(stmt) and not is_accessor(stmt)}
        info.lineage.append((klass.__name__, own, source))
        for name, stmt in own.items():
            if name not in methods:
                methods[name] = stmt
                where[name] = source
    for name, stmt in methods.items():
        if stmt is None:
            info.methods.pop(name, None)
            continue
        info.methods[name] = stmt
        if where[name] is not info.source:
            info.method_sources[name] = where[name]


def _keep_shared_values(variant: ClassInfo, other: ClassInfo) -> None:
    """Forget the constants of `variant` that instance `other` of it holds otherwise (`self.k`
    of 2 here, 3 there): a value the ClassInfo keeps must be every instance's."""
    from transpiler.classinfo import same_value

    for name, a in variant.attrs.items():
        if a.has_value and not same_value(a, other.attrs.get(name)):
            variant.attrs[name] = replace(a, value=None, has_value=False)


def _module_name_of(path: str) -> str | None:
    """The first module in sys.modules whose file is `path` (symbolic links resolved). Only
    files of the same name are resolved (a thousand modules after importing torch: resolving
    every one took 10-40 ms); a module file that is a symbolic link of another name is missed."""
    target = Path(path).resolve()
    names = {os.path.basename(path), target.name}
    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if isinstance(file, str) and os.path.basename(file) in names and Path(file).resolve() == target:
            return name
    return None


def _compile_function(fn: Callable[..., Any], example_inputs: Sequence[Any] | None,
                      options: dict[str, Any], decorated: Callable[..., Any]) -> Callable[..., Any]:
    path = _source_path(fn)
    text = Path(path).read_text(encoding="utf-8")
    qualname = f"{fn.__module__}:{fn.__name__}"

    def function_code(inputs: Sequence[Any] | None, options: dict[str, Any]) -> Callable[..., Any]:
        key = jit_cache.function_key(fn, path, text, inputs, options)
        module = _cached(key, fn.__name__)
        if module is None:
            from transpiler.pipeline import compile_source
            from transpiler.source import SourceFile, Target

            source = SourceFile(Path(path), text, os.path.relpath(path))
            source.module_name = fn.__module__
            node = source.functions.get(fn.__name__)
            if node is None or fn.__qualname__ != fn.__name__:
                raise TypeError(f"{fn.__qualname__} is not defined at module level of {path}; it cannot be compiled")
            target_options = {"skip_eager_only": True} if options.get("skip_eager_only") else {}
            compiled = compile_source(source, "script(function, example_inputs=...)", Path(path).name,
                                      [Target(fn.__name__, node, target_options)], example_inputs=inputs,
                                      permissive=options["permissive"],
                                      devices=jit_cache.program_devices(None, inputs),
                                      autograd=options.get("autograd", False))
            module = _load(compiled.text, fn.__name__, key)
        return inside_wrappers(decorated, module.COMPILED[fn.__name__], qualname)

    compiled = function_code(example_inputs, options)
    autograd = AutogradCode(lambda inputs, skip: function_code(
        inputs, {**options, "autograd": True, **({"skip_eager_only": True} if skip else {})}), example_inputs)

    def compiled_fn(*args: Any, **kwargs: Any) -> Any:
        if records_autograd(None, args, kwargs):
            return autograd(args, kwargs)
        return compiled(*args, **kwargs)

    return compiled_dispatcher(decorated, compiled_fn, qualname)


def _autograd_options(options: dict[str, Any], skip_eager_only: bool) -> dict[str, Any]:
    """The options of script()'s code for calls autograd records (the cache key's too)."""
    return {"permissive": options["permissive"], "autograd": True,
            **({"skip_eager_only": True} if skip_eager_only else {})}


class AutogradCode:
    """The code of a `script()` result for calls that autograd records (grad enabled, and an
    input or parameter that requires grad): its program again without kernels, eager's torch
    ops in eager's order (pipeline.build_program's `autograd`), which autograd records as it
    records eager's. Compiled at the first such call, for the example inputs of `script()`; a
    call its entry checks refuse (the module switched to train(), inputs of another rank) is
    compiled for again, for the module as it is now and the call's inputs, up to LIMIT
    variants; past that, or where compiling fails, GuardFailure (the call runs eagerly). Code for
    autograd does eager's eager-only work under `not torch.jit.is_scripting()` (densenet's and
    timm's checkpointing); where that work does not compile (torchvision's API-usage logging,
    `_log_api_usage_once(stochastic_depth)`), it is compiled again skipping it, as TorchScript
    and script()'s other code do."""

    LIMIT = 4

    def __init__(self, compile: Callable[[Sequence[Any] | None, bool], Callable[..., Any]],
                 example_inputs: Sequence[Any] | None) -> None:
        self._compile = compile
        self._example_inputs = example_inputs
        self._variants: list[Callable[..., Any]] = []
        self._failed: str | None = None

    def __call__(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        refused: GuardFailure | None = None
        for variant in self._variants:
            try:
                return variant(*args, **kwargs)
            except GuardFailure as failure:
                refused = failure.with_traceback(None)
        if self._failed is not None:
            raise GuardFailure(self._failed)
        if len(self._variants) >= self.LIMIT:
            assert refused is not None
            raise refused
        # The first variant for script()'s examples; later ones for the call that needs them.
        inputs = self._example_inputs if not self._variants or kwargs or self._example_inputs is None \
            else [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        from transpiler.diagnostics import CompileError

        try:
            with torch.no_grad():  # (compiling may run the model's code: nothing to record)
                try:
                    variant = self._compile(inputs, False)
                except CompileError:  # (eager-only work that does not compile: TorchScript's code)
                    variant = self._compile(inputs, True)
        except Exception as error:  # noqa: BLE001 - what no-grad code compiled from must compile here
            if not isinstance(error, (CompileError, TypeError)):
                raise
            self._failed = f"its code for autograd did not compile ({str(error).splitlines()[0]})"
            raise GuardFailure(self._failed) from None
        self._variants.append(variant)
        return variant(*args, **kwargs)


def _cached(key: str | None, stem: str) -> types.ModuleType | None:
    """The module of the cache entry `key`, or None (no key, no entry, a corrupt entry)."""
    if key is None:
        return None
    path = jit_cache.lookup(key, stem)
    if path is None:
        return None
    return load_module_from_path(path, f"torchscribe_jit.{path.stem}")


def _load(text: str, stem: str, key: str | None = None, dependencies: Sequence[str] = ()) -> types.ModuleType:
    path = jit_cache.store_module(text, stem)
    module = load_module_from_path(path, f"torchscribe_jit.{path.stem}")
    if key is not None:
        jit_cache.store_key(key, path, dependencies)
    return module


def __getattr__(name: str) -> Any:
    if name == "UserError":  # imports the IR: only when asked for
        from transpiler.diagnostics import UserError

        return UserError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["compile_object", "UserError"]

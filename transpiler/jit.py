"""`script(instance, example_inputs=...)`: compile now, for code that is not decorated or to
specialise to one instance. The generated module goes to the cache directory and is imported
from there; the returned module shares the instance's parameters, buffers and submodules.

A model compiled the same way before (same source, compiler, instance structure and attribute
values, example input types...: see transpiler/jit_cache.py) is not compiled again: its module is
loaded from the cache. The compiler (libcst, the IR, the passes, codegen) is imported only when
something has to be compiled."""

from __future__ import annotations

import copy
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable, Sequence

from torch import nn

from runtime.dispatch import compiled_dispatcher
from runtime.loader import load_module_from_path
from transpiler import jit_cache


def compile_object(obj: Any, example_inputs: Sequence[Any] | None = None, permissive: bool = False, **_: Any) -> Any:
    options = {"permissive": permissive}
    if isinstance(obj, nn.Module):
        return _compile_module(obj, example_inputs, options)
    if inspect.isfunction(obj):
        return _compile_function(inspect.unwrap(obj), example_inputs, options)
    raise TypeError(f"script() compiles nn.Module instances and functions, not {type(obj).__name__}")


def _source_path(obj: Any) -> str:
    path = inspect.getsourcefile(obj)
    if path is None:
        raise TypeError(f"the source of {obj!r} is not available, so it cannot be compiled")
    return path


def _read_source(path: str) -> Any:
    from transpiler.source import SourceFile  # imports libcst: only when compiling

    return SourceFile.read(Path(path), os.path.relpath(path))


def _compile_module(instance: nn.Module, example_inputs: Sequence[Any] | None, options: dict[str, Any]) -> nn.Module:
    cls = type(instance)
    path = _source_path(cls)
    text = Path(path).read_text(encoding="utf-8")
    module_name = _module_name_of(path)
    key = jit_cache.module_key(instance, path, text, module_name, example_inputs, options)
    module = _cached(key, cls.__name__)
    if module is None:
        from transpiler.compile import compile_source
        from transpiler.source import SourceFile, Target

        source = SourceFile(Path(path), text, os.path.relpath(path))
        node = source.classes.get(cls.__name__)
        if node is None or cls.__qualname__ != cls.__name__:
            raise TypeError(f"{cls.__qualname__} is not defined at module level of {path}; it cannot be compiled")
        infos: dict = {}
        _collect_infos(instance, source, module_name, infos)
        # The submodules' classes of the same file are compiled too, so that inlining sees them.
        targets = [Target(cls.__name__, node)] + [Target(name, source.classes[name]) for name in infos
                                                  if name != cls.__name__ and "forward" in infos[name].methods]
        compiled = compile_source(source, "script(instance, example_inputs=...)", Path(path).name, targets, infos,
                                  instance=instance, example_inputs=example_inputs)
        module = _load(compiled.text, cls.__name__, key)
    forward = module.COMPILED[f"{cls.__name__}.forward"]
    scripted = copy.copy(instance)  # a shallow copy: the same parameter, buffer and module dicts
    eager = cls.__dict__.get("__torchscribe_eager__", cls.forward).__get__(scripted)  # never the AOT dispatcher
    compiled_forward: Callable[..., Any] = types.MethodType(forward, scripted)
    scripted.forward = compiled_dispatcher(eager, compiled_forward, f"{cls.__module__}:{cls.__name__}.forward")
    return scripted


def _collect_infos(module: nn.Module, source: Any, module_name: str | None, infos: dict) -> None:
    """ClassInfo from the live instance for the class and every submodule class of the same file."""
    from transpiler.classinfo import class_from_instance

    cls = type(module)
    if cls.__name__ in source.classes and cls.__name__ not in infos and cls.__module__ == module_name:
        infos[cls.__name__] = class_from_instance(module, source, source.classes[cls.__name__])
    for child in module.children():
        _collect_infos(child, source, module_name, infos)


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
                      options: dict[str, Any]) -> Callable[..., Any]:
    path = _source_path(fn)
    text = Path(path).read_text(encoding="utf-8")
    key = jit_cache.function_key(fn, path, text, example_inputs, options)
    module = _cached(key, fn.__name__)
    if module is None:
        from transpiler.compile import compile_source
        from transpiler.source import SourceFile, Target

        source = SourceFile(Path(path), text, os.path.relpath(path))
        node = source.functions.get(fn.__name__)
        if node is None or fn.__qualname__ != fn.__name__:
            raise TypeError(f"{fn.__qualname__} is not defined at module level of {path}; it cannot be compiled")
        compiled = compile_source(source, "script(function, example_inputs=...)", Path(path).name,
                                  [Target(fn.__name__, node)], example_inputs=example_inputs)
        module = _load(compiled.text, fn.__name__, key)
    return compiled_dispatcher(fn, module.COMPILED[fn.__name__], f"{fn.__module__}:{fn.__name__}")


def _cached(key: str | None, stem: str) -> types.ModuleType | None:
    """The module of the cache entry `key`, or None (no key, no entry, a corrupt entry)."""
    if key is None:
        return None
    path = jit_cache.lookup(key, stem)
    if path is None:
        return None
    return load_module_from_path(path, f"torchscribe_jit.{path.stem}")


def _load(text: str, stem: str, key: str | None = None) -> types.ModuleType:
    path = jit_cache.store_module(text, stem)
    module = load_module_from_path(path, f"torchscribe_jit.{path.stem}")
    if key is not None:
        jit_cache.store_key(key, path)
    return module


def __getattr__(name: str) -> Any:
    if name == "UserError":  # imports the IR: only when asked for
        from transpiler.diagnostics import UserError

        return UserError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["compile_object", "UserError"]

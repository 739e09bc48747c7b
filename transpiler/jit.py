"""`script(instance, example_inputs=...)`: compile now, for code that is not decorated or to
specialise to one instance. The generated module goes to the cache directory and is imported
from there; the returned module shares the instance's parameters, buffers and submodules."""

from __future__ import annotations

import copy
import hashlib
import inspect
import os
import types
from pathlib import Path
from typing import Any, Callable, Sequence

from torch import nn

from runtime.dispatch import compiled_dispatcher
from runtime.loader import cache_dir, load_module_from_path
from transpiler.classinfo import class_from_instance
from transpiler.compile import compile_source
from transpiler.diagnostics import UserError
from transpiler.source import SourceFile, Target


def compile_object(obj: Any, example_inputs: Sequence[Any] | None = None, permissive: bool = False, **_: Any) -> Any:
    if isinstance(obj, nn.Module):
        return _compile_module(obj, example_inputs)
    if inspect.isfunction(obj):
        return _compile_function(inspect.unwrap(obj), example_inputs)
    raise TypeError(f"script() compiles nn.Module instances and functions, not {type(obj).__name__}")


def _source_of(obj: Any) -> tuple[SourceFile, str]:
    path = inspect.getsourcefile(obj)
    if path is None:
        raise TypeError(f"the source of {obj!r} is not available, so it cannot be compiled")
    return SourceFile.read(Path(path), os.path.relpath(path)), path


def _compile_module(instance: nn.Module, example_inputs: Sequence[Any] | None) -> nn.Module:
    cls = type(instance)
    source, path = _source_of(cls)
    node = source.classes.get(cls.__name__)
    if node is None or cls.__qualname__ != cls.__name__:
        raise TypeError(f"{cls.__qualname__} is not defined at module level of {path}; it cannot be compiled")
    infos = {}
    _collect_infos(instance, source, infos)
    # The submodules' classes of the same file are compiled too, so that inlining sees them.
    targets = [Target(cls.__name__, node)] + [Target(name, source.classes[name]) for name in infos
                                              if name != cls.__name__ and "forward" in infos[name].methods]
    compiled = compile_source(source, "script(instance, example_inputs=...)", Path(path).name, targets, infos,
                              instance=instance, example_inputs=example_inputs)
    module = _load(compiled.text, cls.__name__)
    forward = module.COMPILED[f"{cls.__name__}.forward"]
    scripted = copy.copy(instance)  # a shallow copy: the same parameter, buffer and module dicts
    eager = cls.__dict__.get("__torchscribe_eager__", cls.forward).__get__(scripted)  # never the AOT dispatcher
    compiled_forward: Callable[..., Any] = types.MethodType(forward, scripted)
    scripted.forward = compiled_dispatcher(eager, compiled_forward, f"{cls.__module__}:{cls.__name__}.forward")
    return scripted


def _collect_infos(module: nn.Module, source: SourceFile, infos: dict) -> None:
    """ClassInfo from the live instance for the class and every submodule class of the same file."""
    cls = type(module)
    if cls.__name__ in source.classes and cls.__name__ not in infos and cls.__module__ == _module_name_of(source):
        infos[cls.__name__] = class_from_instance(module, source, source.classes[cls.__name__])
    for child in module.children():
        _collect_infos(child, source, infos)


def _module_name_of(source: SourceFile) -> str | None:
    import sys

    for name, mod in list(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if file and Path(file).resolve() == source.path.resolve():
            return name
    return None


def _compile_function(fn: Callable[..., Any], example_inputs: Sequence[Any] | None) -> Callable[..., Any]:
    source, path = _source_of(fn)
    node = source.functions.get(fn.__name__)
    if node is None or fn.__qualname__ != fn.__name__:
        raise TypeError(f"{fn.__qualname__} is not defined at module level of {path}; it cannot be compiled")
    compiled = compile_source(source, "script(function, example_inputs=...)", Path(path).name,
                              [Target(fn.__name__, node)], example_inputs=example_inputs)
    module = _load(compiled.text, fn.__name__)
    return compiled_dispatcher(fn, module.COMPILED[fn.__name__], f"{fn.__module__}:{fn.__name__}")


def _load(text: str, stem: str) -> types.ModuleType:
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    directory = cache_dir() / "jit"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}_{digest}.py"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return load_module_from_path(path, f"torchscribe_jit.{stem}_{digest}")


__all__ = ["compile_object", "UserError"]

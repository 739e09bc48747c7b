"""``@script`` and the per-call dispatch between compiled and eager code.

Decorating is cheap (no file access): it swaps ``forward`` (or the function) for a small
dispatcher. On its first call in mode on/strict, the dispatcher finds ``<stem>_compiled.py``
next to the model file, imports it once per process, checks its header against the model
source's hash and caches the compiled function; later calls pay a few attribute reads, the
mode check and one extra Python call. Anything short of fresh compiled code runs the original
eager code with a single warning (mode on) or raises TorchscribeError (strict).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
import torch.fx._symbolic_trace as _fx_trace
from torch import nn

from runtime import loader, modes, stats
from runtime.errors import TorchscribeError, TorchscribeWarning
from runtime.autograd_kernels import ForAutograd
from runtime.call_inputs import parameters_require_grad, requires_grad_in
from runtime.guards import GuardFailure
from runtime.modes import current_mode
from runtime.source_hash import file_source_hash

TORCH_VERSION = ".".join(torch.__version__.split("+")[0].split(".")[:2])

# Under torch.compile/export, torch.jit.trace/script or fx symbolic tracing the tracer must see
# the user's eager code, never our kernels (so decorated models still compose with them).
_is_compiling = torch.compiler.is_compiling
_is_jit_tracing = torch._C._is_tracing  # (torch.jit.is_tracing without its is_scripting test, False here)
_grad_enabled = torch._C.is_grad_enabled
_is_fx_tracing: Callable[[], bool] = getattr(
    _fx_trace, "is_fx_symbolic_tracing", lambda: bool(getattr(_fx_trace, "_is_fx_tracing_flag", False))
)
# Where fx keeps its flag in a module global, the dispatcher reads it there: is_fx_symbolic_tracing
# is that flag and not is_compiling(), which the dispatcher has tested before (each Python call
# on its path costs 0.3-0.5 us inside a model's call).
_FX_FLAG = hasattr(_fx_trace, "_is_fx_tracing_flag")
_override_mode, _MODE_OF, _environ_get, _ENV_KEY, _UNSET = (modes.override, modes.MODE_OF, modes.environ_get,
                                                             modes.KEY, modes.UNSET)

Problem = tuple[str, str]  # (what is wrong, what to do), joined differently per mode


@dataclass
class _FileState:
    """What one model file's compiled module offers: its COMPILED table, or why not."""

    display: str
    compiled_name: str
    hint: str
    table: Mapping[str, Callable[..., Any]] | None = None
    models: Mapping[str, str] = dataclasses.field(default_factory=dict)  # factory -> "module.Class"
    problem: Problem | None = None
    note: str | None = None  # warn once, still run (generated with another torch)


class _Target:
    """One decorated class's forward or function: where to look, and what was found."""

    __slots__ = ("module_name", "key", "qualname", "compiled", "problem", "resolved", "__weakref__")

    def __init__(self, module_name: str, key: str) -> None:
        self.module_name = module_name
        self.key = key  # the COMPILED key: "<Class>.forward" or "<function>"
        self.qualname = f"{module_name}.{key}"  # for stats and guard warnings
        self.compiled: Callable[..., Any] | None = None
        self.problem: Problem | None = None
        self.resolved = False


# Process-wide caches; one re-entrant lock because importing a compiled module may trigger
# another decorated model's first call on the same thread.
_lock = threading.RLock()
_files: dict[str, _FileState] = {}
_targets: weakref.WeakSet[_Target] = weakref.WeakSet()
_loaded_modules: list[str] = []
_warned: set[str] = set()


# ----------------------------------------------------------------------------- the decorator

_NO_OBJECT: Any = object()

# What `@script(devices=..., dtypes=...)` and `[tool.torchscribe]` may name: the devices kernels
# are generated for (C++ on the CPU, Triton on CUDA) and the floating dtypes they take.
SPECIALISE_DEVICES = ("cpu", "cuda")
SPECIALISE_DTYPES = ("float32", "float64", "bfloat16", "float16")


def target_names_problem(option: str, value: Any) -> str | None:
    """Why `value` is not a valid `devices`/`dtypes` option (a phrase), or None: a tuple or list
    of distinct names from SPECIALISE_DEVICES / SPECIALISE_DTYPES (an empty one asks for no
    default specialisations: the generic code alone, exactly eager's ops)."""
    valid = SPECIALISE_DEVICES if option == "devices" else SPECIALISE_DTYPES
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        return f"takes a tuple or list of names, not {value!r}"
    for name in value:
        if name not in valid:
            return f"names {name!r}, which is not one of {', '.join(valid)}"
    if len(set(value)) != len(value):
        return f"names {next(n for n in value if value.count(n) > 1)!r} twice"
    return None


def script(
    obj: Any = _NO_OBJECT,
    /,
    *,
    example_inputs: Sequence[Any] | None = None,
    permissive: bool = False,
    freeze: bool = False,
    example: str | tuple[str, ...] | None = None,
    devices: Sequence[str] | None = None,
    dtypes: Sequence[str] | None = None,
    keep_eager: Sequence[str] = (),
    regions: bool | None = None,
) -> Any:
    """Mark an ``nn.Module`` subclass or a module-level function for ahead-of-time compilation.

    - ``@script`` / ``@script(permissive=True)`` on a class: returns the class, its ``forward``
      replaced by a dispatcher to the compiled code in ``<stem>_compiled.py``.
    - on a function: returns a dispatching wrapper (``__wrapped__`` is the original).
    - ``script(module_instance, example_inputs=...)``, or a function with ``example_inputs``:
      compiles now (JIT) through ``transpiler.jit.compile_object`` and returns its result.
    - ``freeze=True`` (an instance only): its parameters and buffers are taken as constants, as
      ``torch.jit.freeze`` takes them, so weights computed from them (batch norms folded into
      convolutions, convolution weights in oneDNN's layout) are computed once and again only
      when a parameter is written in place or replaced; a write through ``.data`` is not seen
      (``runtime/prepacked.py``).
    - ``keep_eager=("stages.2", "head")`` (an instance only): the compiled code calls the
      submodules at those paths as eager does (their own forward), the rest compiled.
    - ``regions=True`` (an instance with ``example_inputs``): each top-level region of the model
      is timed compiled and eager on the example inputs, and those measured slower compiled are
      kept eager; the decisions are kept in the cache (``transpiler/regions.py``). ``None``: as
      ``TORCHSCRIBE_REGIONS`` says (``on``/``off``).
    - ``@script(example="make_example")``: ``torchscribe`` also compiles the class (function)
      for what the module-level function ``make_example`` of the same file returns,
      ``(instance, inputs)`` (the inputs, for a function), as ``script(instance,
      example_inputs=inputs)`` compiles it now, kernels included, into the checked-in module; with
      ``freeze=True`` too, as ``script(..., freeze=True)`` does. A call those kernels do not
      accept runs the module's generic code. A tuple of names makes one specialisation of each,
      tried in that order (``example=("make_example", "make_example_train")``).
    - ``@script(devices=("cpu", "cuda"), dtypes=("float32", "bfloat16"))``: the devices and
      dtypes ``torchscribe`` generates kernels for, from the annotated ranks of the tensor
      parameters (``Float[Tensor, "B T C"]``): one specialisation per device and dtype. Without
      them, ``[tool.torchscribe]`` in pyproject.toml decides, else float32 on the CPU.

    Options are stored as ``__torchscribe_options__`` for the compiler to read.
    """
    if not isinstance(permissive, bool):
        raise TypeError(f"script(permissive=...) takes True or False, not {permissive!r}")
    if not isinstance(freeze, bool):
        raise TypeError(f"script(freeze=...) takes True or False, not {freeze!r}")
    names = (example,) if isinstance(example, str) else example
    if example is not None and (not isinstance(names, tuple) or not names
                                or not all(isinstance(n, str) and n.isidentifier() for n in names)):
        raise TypeError(f"script(example=...) takes the name of a module-level function (or a tuple of names), "
                        f"not {example!r}")
    for option, names in (("devices", devices), ("dtypes", dtypes)):
        if names is not None and (problem := target_names_problem(option, names)) is not None:
            raise TypeError(f"script({option}=...) {problem}")
    options: dict[str, Any] = {"permissive": permissive}
    if devices is not None:
        options["devices"] = tuple(devices)
    if dtypes is not None:
        options["dtypes"] = tuple(dtypes)
    if example is not None:
        options["example"] = example
        if freeze:
            options["freeze"] = True
    if freeze and example is None and not isinstance(obj, nn.Module):
        raise TypeError(
            "script(freeze=True) takes an nn.Module instance (its parameters and buffers are what "
            "it freezes): compile the instance now with script(instance, example_inputs=..., freeze=True), "
            "or name an example factory: @script(example=\"make_example\", freeze=True)."
        )
    if isinstance(keep_eager, str) or not all(isinstance(p, str) and p for p in keep_eager):
        raise TypeError(f"script(keep_eager=...) takes a sequence of submodule paths (\"stages.2\"), not {keep_eager!r}")
    if regions not in (None, True, False):
        raise TypeError(f"script(regions=...) takes True, False or None, not {regions!r}")
    if (keep_eager or regions) and not isinstance(obj, nn.Module) or regions and example_inputs is None:
        raise TypeError("script(keep_eager=..., regions=...) take an nn.Module instance compiled now "
                        "(regions=True: for its example inputs): script(instance, example_inputs=..., ...)")
    if obj is _NO_OBJECT:
        return lambda target: script(target, example_inputs=example_inputs, permissive=permissive, freeze=freeze,
                                     example=example, devices=devices, dtypes=dtypes)
    if example is not None and (isinstance(obj, nn.Module) or example_inputs is not None):
        raise TypeError("script(example=...) is a decorator option for ahead-of-time compilation; to compile "
                        "now, pass the instance and example_inputs=...")
    compiles_now = isinstance(obj, nn.Module) or inspect.isfunction(obj) and example_inputs is not None
    if (devices is not None or dtypes is not None) and compiles_now:
        raise TypeError("script(devices=..., dtypes=...) are decorator options for ahead-of-time compilation; "
                        "compiling now specialises to the example inputs' devices and dtypes")

    if isinstance(obj, nn.Module):
        return _compile_now(obj, example_inputs, {**options, "freeze": freeze, "keep_eager": tuple(keep_eager),
                                                  "regions": regions})
    if inspect.isfunction(obj) and example_inputs is not None:
        return _compile_now(obj, example_inputs, options)
    if isinstance(obj, type):
        if not issubclass(obj, nn.Module):
            raise TypeError(
                f"script() takes an nn.Module subclass, an nn.Module instance or a function; "
                f"class {obj.__qualname__} is not an nn.Module subclass."
            )
        if obj.__module__.split(".")[0] == "torch":
            raise TypeError(
                f"script() changes the class it decorates, so it does not take torch's own "
                f"{obj.__qualname__}; compile an instance now with script(instance, example_inputs=...)."
            )
        if example_inputs is not None:
            options["example_inputs"] = example_inputs  # a shape source for the AOT compiler
        return _script_class(obj, options)
    if inspect.isfunction(obj):
        if obj.__name__ == "<lambda>":
            raise TypeError(
                "script() cannot compile a lambda ahead of time: define it with `def` at module "
                "level, or pass example_inputs=... to compile it now."
            )
        return _script_function(obj, options)
    if inspect.ismethod(obj):
        raise TypeError(
            f"script() takes a function, not the bound method {obj.__qualname__}; decorate the "
            f"class instead, or compile the instance now with script(instance, example_inputs=...)."
        )
    raise TypeError(
        f"script() takes an nn.Module subclass, an nn.Module instance or a function, "
        f"not {type(obj).__name__} ({obj!r:.60})."
    )


def script_model(fn: Any = _NO_OBJECT, /, *, freeze: bool = False, permissive: bool = False) -> Any:
    """Declare a model you did not write (torchvision's resnet50) for the checked-in module:
    decorate a module-level factory that returns ``(instance, inputs)``::

        @script_model(freeze=True)
        def resnet50():
            return torchvision.models.resnet50().eval(), (torch.randn(8, 3, 224, 224),)

    ``torchscribe FILE`` runs the factory and writes the model's compiled code, for what it
    returned, into ``<stem>_compiled.py`` under the factory's name. At run time
    ``resnet50.load(model)`` returns a shallow copy of ``model`` (sharing its parameters) whose
    forward runs that code: without importing the compiler or reading a cache; eagerly (warned;
    strict mode: an error) when the module is stale (the file, or the library's version,
    changed) or its entry checks refuse a call. Calling the factory still calls the function."""
    if not isinstance(freeze, bool) or not isinstance(permissive, bool):
        raise TypeError("script_model(freeze=..., permissive=...) take True or False")
    if fn is _NO_OBJECT:
        return lambda f: script_model(f, freeze=freeze, permissive=permissive)
    if not inspect.isfunction(fn) or fn.__qualname__ != fn.__name__:
        raise TypeError("script_model decorates a module-level function that returns (instance, inputs)")
    return ModelFactory(fn, {"freeze": freeze, "permissive": permissive})


class ModelFactory:
    """A factory decorated with `script_model`: callable as the function, and `load(model)`."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        functools.update_wrapper(self, fn)
        self.__torchscribe__ = True
        self.__torchscribe_options__ = options
        self._target = _Target(fn.__module__, fn.__name__)
        _targets.add(self._target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)  # type: ignore[attr-defined]

    def load(self, model: nn.Module) -> nn.Module:
        if not isinstance(model, nn.Module):
            raise TypeError(f"{self._target.key}.load() takes the nn.Module instance to run, not {type(model).__name__}")
        scripted = copy.copy(model)  # a shallow copy: the same parameter, buffer and module dicts
        cls = type(model)
        dispatch = _dispatcher(cls.__dict__.get("__torchscribe_eager__", cls.forward), self._target)
        scripted.forward = functools.partial(dispatch, scripted)
        return scripted


def _compile_now(obj: Any, example_inputs: Sequence[Any] | None, options: dict[str, Any]) -> Any:
    if inspect.isfunction(obj) and obj.__name__ == "<lambda>":
        try:
            inspect.getsource(obj)
        except (OSError, TypeError):
            raise TypeError("script() cannot compile this lambda: its source code is not available.") from None
    if _compiler is None:
        raise RuntimeError("script(obj, example_inputs=...) needs the compiler: import it from the "
                           "`transpiler` package (`from transpiler import script`)")
    return _compiler(obj, example_inputs=example_inputs, **options)


# What compiles an object now: the `transpiler` package registers it when imported, so that the
# runtime never imports the compiler (package order: transpiler -> codegen -> ir, runtime alone).
_compiler: Callable[..., Any] | None = None


def register_compiler(compile_object: Callable[..., Any]) -> None:
    global _compiler
    _compiler = compile_object


def _script_class(cls: type[nn.Module], options: dict[str, Any]) -> type[nn.Module]:
    if cls.__dict__.get("__torchscribe__"):  # decorated twice: keep one dispatcher
        cls.__torchscribe_options__ = options  # type: ignore[attr-defined]
        return cls
    eager = _own_or_inherited_forward(cls)
    if not inspect.isfunction(eager):
        raise TypeError(
            f"script(): class {cls.__qualname__} has no forward of its own or of a base class "
            f"outside torch; define forward(self, ...)."
        )
    target = _Target(cls.__module__, f"{cls.__qualname__}.forward")
    # A subclass (or a class swapped in by parametrize) may override what the compiled code
    # inlined: only instances of exactly this class run it.
    forward = functools.wraps(eager)(_dispatcher(eager, target, only=cls))
    cls.forward = forward  # type: ignore[method-assign]
    cls.__torchscribe__ = True  # type: ignore[attr-defined]
    cls.__torchscribe_eager__ = eager  # type: ignore[attr-defined]
    cls.__torchscribe_options__ = options  # type: ignore[attr-defined]
    return cls


def _own_or_inherited_forward(cls: type) -> Any:
    """The forward `cls` runs: its own, or the nearest base class's (that class's eager forward
    where it is scripted itself); None where that is torch's (nn.Module's, a torch layer's)."""
    for klass in cls.__mro__:
        if "forward" in klass.__dict__:
            if klass.__module__.split(".")[0] == "torch":
                return None
            return klass.__dict__.get("__torchscribe_eager__") if klass.__dict__.get("__torchscribe__") \
                else klass.__dict__["forward"]
    return None


def _script_function(fn: Callable[..., Any], options: dict[str, Any]) -> Callable[..., Any]:
    if getattr(fn, "__torchscribe__", False):
        fn.__torchscribe_options__ = options  # type: ignore[attr-defined]
        return fn
    wrapper = functools.wraps(fn)(_dispatcher(fn, _Target(fn.__module__, fn.__qualname__)))
    wrapper.__torchscribe__ = True  # type: ignore[attr-defined]
    wrapper.__torchscribe_options__ = options  # type: ignore[attr-defined]
    return wrapper


# ----------------------------------------------------------------------------- per call


def _dispatcher(eager: Callable[..., Any], target: _Target, resettable: bool = True,
                only: type | None = None) -> Callable[..., Any]:
    """The function that runs in place of `eager`: its compiled code, or `eager` itself. With
    `only`, a method of that class, whose compiled code only its own instances run (`eager` runs
    for a subclass's, uncounted)."""
    if resettable:
        _targets.add(target)

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if (only is not None and type(args[0]) is not only) or _is_compiling() or _is_jit_tracing() \
                or (_fx_trace._is_fx_tracing_flag if _FX_FLAG else _is_fx_tracing()):
            return eager(*args, **kwargs)
        # (current_mode(), read without calling it: see runtime/modes.py)
        mode = _override_mode() or _MODE_OF.get(_environ_get(_ENV_KEY, _UNSET)) or current_mode()
        if mode == "off":
            return eager(*args, **kwargs)
        compiled = target.compiled
        if compiled is None:
            compiled = _resolve(target, mode)
            if compiled is None:
                return eager(*args, **kwargs)
            if hasattr(eager, "__wrapped__"):  # decorated (permissive mode): the same wrappers
                try:
                    compiled = target.compiled = inside_wrappers(eager, compiled, target.qualname)
                except ValueError as e:  # a wrapper that cannot be copied: the decorated function runs
                    if mode == "strict":
                        raise TorchscribeError(f"{target.qualname}: {e}, and strict mode does not allow "
                                               "running eagerly") from None
                    _warn_once(f"{target.qualname}: {e}; running eagerly")
                    return eager(*args, **kwargs)
        try:
            return compiled(*args, **kwargs)
        except GuardFailure as failure:
            _guard_failed(target, failure, mode)
        # Outside the except block so an eager error is not chained to the guard failure.
        return eager(*args, **kwargs)

    return dispatch


def rewrap(decorated: Callable[..., Any], compiled: Callable[..., Any]) -> Callable[..., Any]:
    """`compiled` inside the decorators that wrap `decorated` (permissive mode compiles the body
    of `@can_return_tuple def forward`, not the wrappers): each `functools.wraps` wrapper of the
    chain `decorated`, `decorated.__wrapped__`, ... is copied with the function it wraps replaced
    in its closure, so the wrappers' own code runs around the compiled body as it runs around
    the source's. A wrapper that does not hold what it wraps in its closure cannot be copied so:
    ValueError."""
    chain = []
    f = decorated
    while isinstance(getattr(f, "__wrapped__", None), Callable):  # type: ignore[arg-type]
        chain.append(f)
        f = f.__wrapped__  # type: ignore[attr-defined]
    inner = compiled
    for wrapper in reversed(chain):
        cells = getattr(wrapper, "__closure__", None) or ()
        holding = [i for i, c in enumerate(cells) if c.cell_contents is wrapper.__wrapped__]
        if not isinstance(wrapper, types.FunctionType) or len(holding) != 1:
            raise ValueError(f"the decorator wrapper {getattr(wrapper, '__qualname__', wrapper)!r} cannot be "
                             "applied to compiled code")
        closure = tuple(types.CellType(inner) if i == holding[0] else c for i, c in enumerate(cells))
        copy = types.FunctionType(wrapper.__code__, wrapper.__globals__, wrapper.__name__, wrapper.__defaults__, closure)
        copy.__kwdefaults__ = wrapper.__kwdefaults__
        copy.__dict__.update(wrapper.__dict__)
        copy.__qualname__ = wrapper.__qualname__
        copy.__wrapped__ = inner  # type: ignore[attr-defined]
        inner = copy
    return inner


def inside_wrappers(decorated: Callable[..., Any], compiled: Callable[..., Any], qualname: str) -> Callable[..., Any]:
    """`compiled` (the body of `decorated`, compiled) inside `decorated`'s wrappers (`rewrap`),
    behind a dispatcher of its own: when an entry check of the body fails, the source's body
    runs there, inside the wrappers, so that they run once. `compiled` itself when undecorated."""
    if not hasattr(decorated, "__wrapped__"):
        return compiled
    return rewrap(decorated, compiled_dispatcher(inspect.unwrap(decorated), compiled, qualname))


def compiled_dispatcher(eager: Callable[..., Any], compiled: Callable[..., Any], qualname: str) -> Callable[..., Any]:
    """A dispatcher around code compiled just now (`script(instance, ...)`): the same modes,
    guard fallback and reporting as for decorated code, with nothing to look up."""
    module_name, _, key = qualname.rpartition(":")
    target = _Target(module_name or "jit", key or qualname)
    target.compiled = compiled
    target.resolved = True
    return _dispatcher(eager, target, resettable=False)  # (reset() has nothing to look up again for it)


def _resolve(target: _Target, mode: str) -> Callable[..., Any] | None:
    """The compiled function for ``target``, or None after warning (on) / raising (strict)."""
    note = None
    if not target.resolved:
        with _lock:
            if not target.resolved:
                target.compiled, target.problem, note = _lookup(target)
                target.resolved = True
    if note is not None:
        _warn_once(note)  # after the lock, and after caching, so -W error cannot corrupt state
    if target.compiled is not None:
        return target.compiled
    assert target.problem is not None
    what, hint = target.problem
    if mode == "strict":
        raise TorchscribeError(f"{what}, and strict mode does not allow running eagerly. {hint}")
    _warn_once(f"{what}; running eagerly. {hint}")
    return None


def _guard_failed(target: _Target, failure: GuardFailure, mode: str) -> None:
    if mode == "strict":
        raise TorchscribeError(
            f"{target.qualname}: the compiled code does not accept these arguments "
            f"({failure.reason}), and strict mode does not allow running eagerly. Call it with "
            f"inputs like those it was compiled for, or unset TORCHSCRIBE=strict."
        ) from None
    if stats.count_fallback(target.qualname) == 1:
        _warn_once(
            f"{target.qualname}: the compiled code does not accept these arguments "
            f"({failure.reason}); running eagerly. Later fallbacks are counted in "
            f"runtime.fallback_counts(), not reported."
        )


# ----------------------------------------------------------------------------- resolution


def _lookup(target: _Target) -> tuple[Callable[..., Any] | None, Problem | None, str | None]:
    """(compiled function, None, torch-version note) or (None, problem, None). Under _lock."""
    if "<locals>" in target.key:
        return None, (
            f"{target.qualname} is defined inside a function, so it has no ahead-of-time "
            f"compiled code",
            "Define it at module level, or compile an instance now with script(obj, example_inputs=...).",
        ), None
    module = sys.modules.get(target.module_name)
    path = getattr(module, "__file__", None)
    if module is None or not path:
        return None, (
            f"{target.qualname} comes from a module without a source file, so it has no "
            f"compiled module",
            "Define it in a .py file and run torchscribe on it.",
        ), None
    source = os.path.abspath(path)
    state = _files.get(source)
    if state is None:
        state = _files[source] = _load_file(source, module)
    if state.table is None:
        return None, state.problem, None
    compiled = state.table.get(target.key)
    if compiled is None:
        return None, (
            f"{state.display}: compiled module {state.compiled_name} has no entry for {target.key!r}",
            state.hint,
        ), None
    model = state.models.get(target.key)  # (a script_model factory's entry: the class it was compiled for)
    if isinstance(compiled, tuple):
        compiled = specialised(compiled, target.qualname, method=target.key.endswith(".forward") or model is not None)
    if model is not None:
        compiled = _only_for_class(compiled, model)
    return compiled, None, state.note


def _only_for_class(compiled: Callable[..., Any], qualname: str) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        if f"{cls.__module__}.{cls.__qualname__}" != qualname:
            raise GuardFailure(f"the model is a {cls.__qualname__}, and the compiled code is for {qualname}")
        return compiled(self, *args, **kwargs)

    return call


def specialised(choices: tuple[Callable[..., Any] | None, ...], qualname: str, method: bool) -> Callable[..., Any]:
    """One function of a COMPILED entry `(specialised..., generic)` (shared/DESIGN.md §4b): the
    first specialisation whose entry checks accept the call runs, else the generic code (counted:
    `runtime.generic_counts()`), whose own failed checks send the call to eager code, as does a
    generic of None (an entry compiled from its example alone). Kernels record no autograd
    graph: a call that autograd records runs the entry's code for autograd compiled from its
    example (`ForAutograd`: eager's ops, its pointwise groups kernels with backward kernels,
    ir/passes.AUTOGRAD_PASSES) where its entry checks accept the call, else the generic code,
    eager's torch ops in eager's order, which autograd records as it records eager's."""
    *special, generic = choices
    recording = tuple(fn.fn for fn in special if isinstance(fn, ForAutograd))
    special = [fn for fn in special if not isinstance(fn, ForAutograd)]

    def call(*args: Any, **kwargs: Any) -> Any:
        # (records_autograd inline: grad mode first, its cheapest test; then the parameters, which
        # answer at the first one in training)
        if _grad_enabled() and (method and args and parameters_require_grad(args[0]) or requires_grad_in(args)
                                or kwargs and requires_grad_in(kwargs.values())):
            refused = None
            for fn in recording:
                try:
                    return fn(*args, **kwargs)
                except GuardFailure as failure:
                    refused = failure.with_traceback(None)
            if generic is None:
                raise refused or GuardFailure("grad is enabled and an input or parameter requires grad; the "
                                              "specialisations' kernels record no autograd graph")
        else:
            refused = None
            for fn in special:
                try:
                    return fn(*args, **kwargs)
                except GuardFailure as failure:
                    # (the reason the last one gave; without its traceback, which holds this
                    # frame: a cycle that left garbage on every refused call, 1.6 us a call)
                    refused = failure.with_traceback(None)
            if generic is None:
                raise refused  # type: ignore[misc]
        stats.count_generic(qualname)
        return generic(*args, **kwargs)

    return call


def _load_file(source: str, model_module: ModuleType) -> _FileState:
    """Import and check the compiled module of one model file (once per process)."""
    display = _display_path(source)
    compiled_path = loader.compiled_path_for(source)
    state = _FileState(display, compiled_path.name, f"Regenerate it with `torchscribe {display}`.")

    def failed(what: str) -> _FileState:
        state.problem = (f"{display}: compiled module {compiled_path.name} {what}", state.hint)
        return state

    if not compiled_path.is_file():
        state.hint = f"Generate it with `torchscribe {display}`."
        return failed("is missing")
    try:
        digest = file_source_hash(source)
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        return failed(f"cannot be checked because the model source cannot be read ({error})")
    # What runs is what was reviewed: a module whose text is not what torchscribe wrote (a hand
    # edit, a bad merge) does not run. One read and one hash per file, once per process.
    try:
        text = compiled_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return failed(f"cannot be read ({error})")
    header = loader.parse_header(text)
    stale = loader.freshness_problem(header, digest, compiled_path.parent) if header is not None else None
    edited = loader.body_problem(text)
    if stale is None and edited is not None:
        return failed(edited)
    try:
        module = _import_compiled(compiled_path, _compiled_module_name(model_module, compiled_path))
    except Exception as error:
        # A stale module often fails to import; say "stale", the actionable reason, if it is.
        header = loader.read_header(compiled_path)
        reason = loader.freshness_problem(header, digest, compiled_path.parent) if header is not None else None
        return failed(reason or f"failed to import ({type(error).__name__}: {error})")
    reason = loader.freshness_problem(vars(module), digest, compiled_path.parent)
    if reason is not None:
        return failed(reason)
    table = getattr(module, "COMPILED", None)
    if not isinstance(table, Mapping):
        return failed("has no COMPILED table")
    state.table = table
    state.models = getattr(module, "MODELS", {})
    built_with = getattr(module, "TORCH_VERSION", None)
    if built_with != TORCH_VERSION:
        state.note = (
            f"{display}: compiled module {compiled_path.name} was generated with torch "
            f"{built_with} but this is torch {TORCH_VERSION}; running it anyway. {state.hint}"
        )
    return state


def _compiled_module_name(model_module: ModuleType, compiled_path: Path) -> str:
    """``pkg.cell_compiled`` for ``pkg.cell``: a sibling, so relative imports in it work."""
    name = model_module.__name__
    package = name if hasattr(model_module, "__path__") else name.rpartition(".")[0]
    if name == "__main__":
        package = ""
    return f"{package}.{compiled_path.stem}" if package else compiled_path.stem


def _import_compiled(path: Path, name: str) -> ModuleType:
    existing = sys.modules.get(name)
    existing_file = getattr(existing, "__file__", None)
    if existing is not None and existing_file and os.path.abspath(existing_file) == os.path.abspath(path):
        return existing  # the user (or a test) imported it already
    module = loader.load_module_from_path(path, name)
    _loaded_modules.append(name)
    return module


def _display_path(source: str) -> str:
    try:
        return str(Path(source).relative_to(Path.cwd()))
    except ValueError:
        return source


# ----------------------------------------------------------------------------- warnings, reset

# Frames to skip so a warning points at the user's call, not at the runtime or nn.Module.
_SKIP_PREFIXES = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.dirname(torch.__file__) + os.sep)


def _warn_once(message: str) -> None:
    if message in _warned:
        return
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(TorchscribeWarning(message), stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    frame = sys._getframe(2)  # the caller of _warn_once
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_SKIP_PREFIXES):
        frame = frame.f_back
        level += 1
    return level


def reset() -> None:
    """Forget loaded compiled modules, warnings given and fallback counts; the next call of
    every decorated object looks for its compiled module again (tests; notebooks after
    regenerating)."""
    with _lock:
        for target in list(_targets):
            target.compiled, target.problem, target.resolved = None, None, False
        _files.clear()
        _warned.clear()
        for name in _loaded_modules:
            sys.modules.pop(name, None)
        _loaded_modules.clear()
    stats.reset_fallback_counts()

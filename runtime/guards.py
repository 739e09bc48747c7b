"""Entry checks that generated code runs before any side effect.

A compiled function raises ``GuardFailure(reason)`` when an input violates what the generated
code assumes; the dispatcher then runs the original eager code (or raises in strict mode).
The helpers are deliberately tiny: they sit on every compiled call's path.

So each check has a fast path and leaves the rest to the full check, which passes or raises with
its message (`check_tensor` passes on the exact type, dtype, device and one comparison of a fixed
shape). Submodules, parameters and buffers are read past nn.Module.__getattr__ (`attr`, `attrs`,
`at`; which names a class leaves to its instances is learnt once per class). A function with many
checks below a module argument makes them in one call, `check_entry`, over a table that
`entry_checks` builds once when its module is imported: one row per submodule (submodules checked
alike share a row), its class and conditions, and the tensors and settings read there. Nothing
about a module's state is cached: hooks, an instance `forward`, the class and the submodule
itself are looked at on every call.

Where this machine builds CPython extensions, runtime/guards_native.cpp replaces the hottest of
these with C++ that takes the passing path of each, the same reads in the same order, and calls
the Python function for anything else. The Python functions stay the definition and write every
message; TORCHSCRIBE_NATIVE_GUARDS=off keeps them alone (tests/test_guards.py compares the two).
"""

from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass
from itertools import islice as _islice
from operator import itemgetter
from typing import Any, Callable

import torch
from torch import nn as _nn
from torch.nn.modules import module as _module_globals

from runtime.call_inputs import (  # (generated modules call _guards.no_overlap)
    no_overlap,
    records_autograd,
)
from runtime.entry_table import (  # noqa: F401  (generated modules call _guards.entry_checks, ListValue, TensorCheck)
    ListValue,
    TensorCheck,
    _path,
    _paths,
    entry_checks,
)
from runtime.model_module import model_module  # (generated modules call _guards.model_module)


class GuardFailure(Exception):
    """An input does not satisfy an assumption of the compiled code; ``reason`` says which. It
    may be given as a function that writes it, called when the reason is first read: a call
    that one specialisation refuses and the next accepts never reads it (`value_refused`)."""

    def __init__(self, reason: str | Callable[[], str]) -> None:
        super().__init__(reason)
        self._reason = reason

    @property
    def reason(self) -> str:
        if not isinstance(self._reason, str):
            self._reason = self._reason()
            self.args = (self._reason,)
        return self._reason

    def __str__(self) -> str:
        return self.reason


def either(*alternatives: Callable[..., Any]) -> Callable[..., Any]:
    """The generic code of an entry with Union parameters, one function per member: the first
    whose entry checks accept a call runs it; the last one's refusal is the call's."""
    *first, last = alternatives

    def call(*args: Any, **kwargs: Any) -> Any:
        for fn in first:
            try:
                return fn(*args, **kwargs)
            except GuardFailure:
                pass
        return last(*args, **kwargs)

    return call


def type_name(value: Any) -> str:
    """Short, user-facing type name: ``Tensor``, ``int``, ``None``."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return "Tensor"
    return type(value).__name__


def _names(types: type | tuple[type, ...]) -> str:
    if isinstance(types, type):
        types = (types,)
    return " or ".join("Tensor" if t is torch.Tensor else "None" if t is type(None) else t.__name__ for t in types)


def check_tensor(value: Any, name: str, dtype: torch.dtype | None = None, device_type: str | None = None,
                 shape: tuple[int | str | None, ...] | None = None, optional: bool = False) -> None:
    """`value` is a tensor (or None, when `optional`) with the dtype, device type and sizes the
    compiled code was specialised to. `shape` has one entry per dimension: an int size, the name
    of a size symbol (the code keeps that size symbolic and assumes it is at least 1), or None.

    The test that passes is the fast one below; anything it does not accept goes to the full check
    (`_check_tensor`), which passes what the fast test was too strict for or raises naming what is
    wrong, so the fast test only has to imply the full one."""
    cls = type(value)
    if ((cls is _Tensor or cls is _Parameter) and (dtype is None or value.dtype is dtype)
            and (device_type is None or (value.is_cpu if device_type == "cpu" else value.device.type == device_type))):
        if shape is None:
            return
        sizes = value.shape
        if sizes == shape:  # a fixed shape: one comparison
            return
        if type(shape) is tuple:  # the rank, the fixed sizes, and no size 0 (so every symbol's is >= 1)
            plan = _shape_plans.get(shape) or _shape_plan(shape)
            if len(sizes) == plan[0] and (plan[1] is None or plan[1](sizes) == plan[2]) and 0 not in sizes:
                return
    _check_tensor(value, name, dtype, device_type, shape, optional)


_Tensor = torch.Tensor
_Parameter = _nn.Parameter
_shape_plans: dict[tuple, tuple[int, Callable[[Any], Any] | None, Any]] = {}


def _shape_plan(shape: tuple[int | str | None, ...]) -> tuple[int, Callable[[Any], Any] | None, Any]:
    """(rank, a getter of the fixed sizes, what it returns for `shape`), once per shape."""
    fixed = [i for i, size in enumerate(shape) if size is not None and not isinstance(size, str)]
    getter = itemgetter(*fixed) if fixed else None
    plan = _shape_plans[shape] = (len(shape), getter, getter(shape) if getter else None)
    return plan


def _check_tensor(value: Any, name: str, dtype: torch.dtype | None, device_type: str | None,
                  shape: tuple[int | str | None, ...] | None, optional: bool) -> None:
    """`check_tensor` in full, dimension by dimension: raises GuardFailure saying what fails."""
    if not isinstance(value, torch.Tensor):
        if optional and value is None:
            return
        raise GuardFailure(f"argument {name!r}: expected Tensor, got {type_name(value)}")
    if dtype is not None and value.dtype != dtype:
        raise GuardFailure(f"argument {name!r}: expected dtype {_dtype(dtype)}, got {_dtype(value.dtype)}")
    if device_type is not None and not (value.is_cpu if device_type == "cpu" else value.device.type == device_type):
        raise GuardFailure(f"argument {name!r}: expected a {device_type} tensor, got {value.device.type}")
    if shape is None or value.shape == shape:
        return
    _check_shape(value, name, shape)


def _check_shape(value: torch.Tensor, name: str, shape: tuple[int | str | None, ...]) -> None:
    if value.dim() != len(shape):
        raise GuardFailure(f"argument {name!r}: expected {len(shape)} dimensions, got {value.dim()}")
    for dim, (size, expected) in enumerate(zip(value.shape, shape)):
        if expected is None or size == expected:
            continue
        if isinstance(expected, str):
            if size >= 1:
                continue
            expected = f"{expected} >= 1"
        raise GuardFailure(f"argument {name!r}: expected size {expected} in dimension {dim}, got {size}")


def over_rows(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorates code compiled for (rows, last) views (ir/kernel/rows.py): the parameters `names` are
    tensors that broadcast to one shape of rank >= 1; the function runs on each one's
    `.expand(shape).view(-1, last)` (so the leading sizes must merge: a contiguous tensor, a
    vector of the last size, a transposed matrix do; the kernels take the strides) and each
    tensor it returns is viewed back to the leading sizes, with its own last size. Any other
    call is refused (GuardFailure) before the code runs."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        code = fn.__code__
        positions = [code.co_varnames[:code.co_argcount + code.co_kwonlyargcount].index(name) for name in names]

        def call(*args: Any, **kwargs: Any) -> Any:
            args_list = list(args)
            values = []
            for name, i in zip(names, positions):
                value = args_list[i] if i < len(args_list) else kwargs.get(name)
                cls = type(value)
                if cls is not _Tensor and cls is not _Parameter:
                    raise GuardFailure(f"{name}: expected a Tensor, got {type_name(value)}")
                values.append(value)
            shape = values[0].shape
            for value in values[1:]:
                if value.shape != shape:
                    try:
                        shape = torch.broadcast_shapes(shape, value.shape)
                    except RuntimeError:
                        raise GuardFailure(f"shapes {', '.join(str(tuple(v.shape)) for v in values)} do not broadcast") from None
            if not shape:
                raise GuardFailure(f"{names[0]}: 0-dimensional tensors have no rows")
            for name, i, value in zip(names, positions, values):
                try:
                    view = (value if value.shape == shape else value.expand(shape)).view(-1, shape[-1])
                except RuntimeError:
                    raise GuardFailure(f"{name}: its leading dimensions do not merge into rows") from None
                if i < len(args_list):
                    args_list[i] = view
                else:
                    kwargs[name] = view
            return _from_rows(fn(*args_list, **kwargs), shape[:-1])

        call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
        call.__wrapped__ = fn  # type: ignore[attr-defined]
        return call

    return wrap


def _from_rows(result: Any, leading: tuple[int, ...]) -> Any:
    if isinstance(result, torch.Tensor):
        return result.view(*leading, result.shape[-1])
    if isinstance(result, tuple):
        return tuple(_from_rows(item, leading) for item in result)
    return result


def check_type(value: Any, expected: type | tuple[type, ...], name: str) -> None:
    if not isinstance(value, expected):
        raise GuardFailure(f"argument {name!r}: expected {_names(expected)}, got {type_name(value)}")


def check_dtype(value: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    if value.dtype != dtype:
        raise GuardFailure(f"argument {name!r}: expected dtype {_dtype(dtype)}, got {_dtype(value.dtype)}")


def check_device_type(value: torch.Tensor, device_type: str, name: str) -> None:
    if value.device.type != device_type:
        raise GuardFailure(f"argument {name!r}: expected a {device_type} tensor, got {value.device.type}")


def check_dim(value: torch.Tensor, ndim: int, name: str) -> None:
    if value.dim() != ndim:
        raise GuardFailure(f"argument {name!r}: expected {ndim} dimensions, got {value.dim()}")


def check_size(value: torch.Tensor, dim: int, size: int, name: str) -> None:
    if value.size(dim) != size:
        raise GuardFailure(f"argument {name!r}: expected size {size} in dimension {dim}, got {value.size(dim)}")


def check_min_size(value: torch.Tensor, dim: int, minimum: int, name: str) -> None:
    """A size the compiled code treats as a symbol (a positive integer) is at least `minimum`."""
    if value.size(dim) < minimum:
        raise GuardFailure(f"argument {name!r}: expected size >= {minimum} in dimension {dim}, got {value.size(dim)}")


def check_same_size(value: torch.Tensor, dim: int, other: torch.Tensor, other_dim: int, name: str,
                    other_name: str) -> None:
    """Two sizes the compiled code assumes equal (the same size symbol) are equal."""
    if value.size(dim) != other.size(other_dim):
        raise GuardFailure(
            f"argument {name!r}: expected size {other.size(other_dim)} in dimension {dim} (as {other_name!r} "
            f"in dimension {other_dim}), got {value.size(dim)}"
        )


def check_value(value: Any, expected: Any, name: str) -> None:
    """A Python value the compiled code was specialised to (a module attribute) is unchanged."""
    if value is not expected and (expected is None or value != expected):
        if type(expected) is TensorValues:
            raise GuardFailure(expected.refusal(value, name))
        raise GuardFailure(f"{name}: expected {expected!r}, got {value!r}")


@dataclass(frozen=True, eq=False)
class TensorValues:
    """The value a dict a module fills as it runs (a cache of tensors by device) is checked
    against: it equals a dict whose values are all tensors that `check_tensor` passes with this
    dtype, device type and shape, so that `check_value` and the entry tables (here and in
    guards_native.cpp, which compare with `!=`) check it as any other value."""

    dtype: torch.dtype
    device_type: str
    shape: tuple[int | None, ...] | None

    def refusal(self, value: Any, name: str) -> str:
        """Why `value` is not such a dict ("" when it is)."""
        if type(value) is not dict:
            return f"{name}: expected a dict of tensors, got {type(value).__name__}"
        for key, v in value.items():
            try:
                check_tensor(v, f"{name}[{key!r}]", self.dtype, self.device_type, self.shape)
            except GuardFailure as failure:
                return failure.reason
        return ""

    def __eq__(self, other: object) -> bool:
        return type(other) is dict and not self.refusal(other, "")

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]


def value_refused(value: Any, expected: Any, name: str) -> None:
    """`check_value(value, expected, name)` where the C++ `check_entry` has seen it fail: raises
    its GuardFailure, whose message `check_value` writes only when it is read."""
    def reason() -> str:
        try:
            check_value(value, expected, name)
        except GuardFailure as failure:
            return failure.reason
        return f"{name}: expected {expected!r}"  # (a value that compared unequal, then equal)

    raise GuardFailure(reason)


def check_keywords(passed: dict[str, Any], expected: dict[str, Any], name: str) -> None:
    """`**kwargs` holds exactly the literal keywords the compiled code was specialised to (what a
    decorated forward's wrappers pass its body), each of the same type (`0` is not `False`)."""
    if passed.keys() != expected.keys() or any(type(v) is not type(expected[k]) or v != expected[k]
                                               for k, v in passed.items()):
        raise GuardFailure(f"{name}: expected {expected!r}, got {passed!r}")


def check_lookup(found: Any, expected: Any, where: str) -> Any:
    """A lookup the compiled code was specialised to (HF's attention dispatch) still returns the
    function it compiled; returns it."""
    if found is not expected:
        raise GuardFailure(f"{where}: the call returns {getattr(found, '__qualname__', found)!r}, "
                           f"compiled for {expected.__qualname__!r}")
    return found


def is_plain_object(value: object) -> bool:
    """An object of a Python class that holds settings, such as a model's configuration: not a
    module, tensor, function, class or builtin collection. The compiler reads its literal
    attributes when compiling (`self.config.num_layers`, transpiler/classinfo.py) and checks them
    at entry with `check_value`; a cache key describes it by its `__dict__`."""
    return (hasattr(value, "__dict__") and type(value).__module__ != "builtins" and not callable(value)
            and not isinstance(value, (type, _nn.Module, torch.Tensor, types.ModuleType)))


def check_contiguous(value: torch.Tensor, name: str) -> None:
    if not value.is_contiguous():
        raise GuardFailure(f"argument {name!r}: expected a contiguous tensor")


def check_annotation(value: Any, annotation: Any, name: str) -> None:
    """Full check against a typing annotation (``tuple[Tensor, int]``, ``Optional[...]``).

    typeguard is imported only here, on first use, so importing the runtime stays cheap.
    """
    import typeguard

    try:
        typeguard.check_type(value, annotation)
    except typeguard.TypeCheckError as error:
        raise GuardFailure(f"argument {name!r}: {error}") from None


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# -- submodules the compiled code inlined or lowered --------------------------------------------
# Calling a submodule runs nn.Module.__call__ (hooks) and then the module's forward. Compiled code
# that inlined the forward of one of the file's classes, or replaced a torch layer by the torch
# function its forward calls, is only right when that call would do exactly that: the module is of
# the class the compiler assumed (not a subclass, nor a class swapped in by parametrize), it does
# not carry a forward of its own, no hooks are registered on it or globally, and the condition
# the lowering relied on holds (`plain_module`'s `conditions`, by name).

_LAYER_CONDITIONS: dict[str, Any] = {
    "eval": lambda m: not m.training,
    # BatchNorm's buffers (a torch class, so they live in _buffers; read past nn.Module.__getattr__).
    "running_stats": lambda m: m._buffers["running_mean"] is not None and m._buffers["running_var"] is not None,
    "no_running_stats": lambda m: m._buffers["running_mean"] is None and m._buffers["running_var"] is None,
    "zeros_padding": lambda m: m.padding_mode == "zeros",
    "no_max_norm": lambda m: m.max_norm is None,
    "no_indices": lambda m: not m.return_indices,
    "valid_p": lambda m: not (m.p < 0.0 or m.p > 1.0),  # as F.dropout tests it (a NaN passes)
}
# test -> (what runtime/guards_native.cpp runs for it, a number): the tests it runs natively,
# keyed by the function, so that a test replaced in _LAYER_CONDITIONS runs as Python again.
_NATIVE_CONDITIONS: dict[Callable[[Any], bool], tuple[str, int]] = {
    _LAYER_CONDITIONS[name]: (name, 0) for name in ("eval", "running_stats", "zeros_padding")
}
_class_matches: dict[tuple[type, str], bool] = {}  # only matches
# qualname -> the classes that matched it (the fast test). A set, not the last class: torchvision's
# Conv2dNormActivation and RegNet's AnyStage both match "torch.nn.Sequential", and a model of both
# sent every other check of one down the slow path (58 a call in regnet_y_400mf).
_matched: dict[str, set[type]] = {}
_getattr_names: dict[type, set[str]] = {}  # only names that `_reads_past_class` accepted
_ABSENT = object()


def _class_is(cls: type, qualname: str) -> bool:
    """Whether `cls` is torch's `torch.nn.<X>` itself, or a class with this qualified name that
    keeps nn.Module's __call__. Matches are cached (this sits on every call's path); misses are
    not, so classes made on the fly (parametrize makes one per module) are not kept alive."""
    key = (cls, qualname)
    if key in _class_matches:
        return True
    if qualname == "torch.nn.Sequential":  # also a subclass that runs Sequential's forward
        found = issubclass(cls, _nn.Sequential) and cls.forward is _nn.Sequential.forward \
            and cls.__call__ is _nn.Module.__call__
    elif qualname.startswith("torch.nn."):
        found = getattr(_nn, qualname[len("torch.nn."):], None) is cls
    else:  # "Block@2": a variant of Block compiled for another module structure (transpiler/jit.py);
        # "Layer!pkg.mod:Base.__call__": a class whose own __call__ (that one) was compiled
        name, _, call = qualname.partition("!")
        found = cls.__qualname__ == name.partition("@")[0] and (
            cls.__call__ is _nn.Module.__call__ if not call
            else f"{cls.__call__.__module__}:{cls.__call__.__qualname__}" == call)
    if found:
        _class_matches[key] = True
        _matched.setdefault(qualname, set()).add(cls)
    return found


def _reads_past_class(cls: type, name: str) -> bool:
    """Whether Python reads `<a cls instance>.<name>` from the instance's __dict__ or else through
    nn.Module.__getattr__ (parameters, buffers, submodules): a module class that keeps object's
    __getattribute__ and nn.Module's __getattr__ and has no class attribute `name` (a property,
    a method: those come first)."""
    return (issubclass(cls, _nn.Module) and cls.__getattribute__ is object.__getattribute__
            and cls.__getattr__ is _nn.Module.__getattr__ and not any(name in k.__dict__ for k in cls.__mro__))


def attr(obj: Any, name: str) -> Any:
    """`obj.<name>` exactly as Python reads it (`getattr`), without going through
    nn.Module.__getattr__ (about 0.4 us) where `_reads_past_class` says what Python would find:
    the instance's attribute, else the parameter, buffer or submodule of that name, in
    nn.Module.__getattr__'s order. Which names a class leaves to its instances is learnt once per
    class (like _class_is: a class changed afterwards is not noticed). Entry checks read the
    submodules, parameters and buffers they check with it: `attr(self_fc1, "bias")`."""
    names = _getattr_names.get(type(obj))
    if names is None or name not in names:
        if not _reads_past_class(type(obj), name):
            return getattr(obj, name)
        _getattr_names.setdefault(type(obj), set()).add(name)
    d = obj.__dict__
    if name in d:
        return d[name]
    try:
        found = d["_parameters"]
        if name in found:
            return found[name]
        found = d["_buffers"]
        if name in found:
            return found[name]
        found = d["_modules"]
        if name in found:
            return found[name]
    except (KeyError, TypeError):  # (not set up by nn.Module.__init__: Python's own read says what happens)
        pass
    return getattr(obj, name)  # raises what nn.Module.__getattr__ raises


_attr_names: dict[str, tuple[str, ...]] = {}  # `attrs`'s names, split once


def attrs(obj: Any, names: str) -> tuple:
    """`attr(obj, name)` of each of the space-separated `names`, as a tuple: a launcher's reads
    of the tensors of one module its kernel takes, one call (`_guards.attrs(m0, "running_var
    weight running_mean bias")`)."""
    split = _attr_names.get(names)
    if split is None:
        split = _attr_names[names] = tuple(sys.intern(name) for name in names.split())
    return tuple([attr(obj, name) for name in split])


_SEQUENTIAL_GETITEM = _nn.Sequential.__getitem__
_MODULELIST_GETITEM = _nn.ModuleList.__getitem__
_MODULEDICT_GETITEM = _nn.ModuleDict.__getitem__
_MODULE_DICT = _nn.Module.__dict__["__dict__"]  # (how guards_native.cpp reads a module's __dict__)
_OBJECT_GETATTRIBUTE = object.__dict__["__getattribute__"]


def item(container: Any, index: int) -> Any:
    """`container[index]` for an nn.Sequential or nn.ModuleList, as their __getitem__ reads it
    (Sequential: the index-th module in order; ModuleList: the module under the key str(index));
    for an nn.ModuleDict (or a module without __getitem__), its submodule named str(index),
    without their Python-level index checks: a Sequential's item took ~1 us, and a model of
    nested Sequentials reads a thousand per call. Anything else (a subclass with its own
    __getitem__, a negative or out-of-range index) goes through `container[index]`."""
    getitem = getattr(type(container), "__getitem__", None)
    if index >= 0:
        if getitem is _SEQUENTIAL_GETITEM:
            modules = container.__dict__["_modules"]
            if index < len(modules):
                return next(_islice(modules.values(), index, None))
        elif getitem is _MODULELIST_GETITEM:
            found = container.__dict__["_modules"].get(str(index))
            if found is not None:
                return found
    # a submodule registered under a number's name (an nn.ModuleDict's "0"): a path of the
    # compiled code names it as it would an item, and it reads as the attribute
    if isinstance(container, _nn.ModuleDict) or isinstance(container, _nn.Module) and getitem is None:
        modules = container.__dict__["_modules"]
        if str(index) in modules:
            return modules[str(index)]
    return container[index]


def _walk(root: Any, path: str) -> Any:
    """The value at `path` below `root` as Python reads `root.a[0].b` (attributes with `attr`),
    or _ABSENT where a part that may be None ("downsample?") is None."""
    value = root
    for step, optional in _paths.get(path) or _path(path):
        value = item(value, step) if type(step) is int else attr(value, step)
        if value is None and optional:
            return _ABSENT
    return value


def at(root: Any, path: str) -> Any:
    """The value at `path` below `root`, as the generated code would read it (`at(self,
    "layers.0.fc")` is `self.layers[0].fc`), attributes read with `attr`, indices with `item`:
    one call for a read of several steps (`_guards.at(block1, "conv1.weight")`). A part written
    "downsample?" may be None: then the value is None."""
    value = _walk(root, path)
    return None if value is _ABSENT else value


def plain_module(root: Any, path: str, qualname: str, *conditions: str) -> bool:
    """Whether calling the submodule at `path` below `root` ("block1.conv1"; "layers.0" indexes
    a ModuleList or Sequential) runs exactly the code the compiled module put in its place: its
    class is `qualname` ("torch.nn.Linear", or a class of the model file), no forward set on the
    instance, no hooks on it nor global ones, and each named condition holds. A part written
    "downsample?" may be None: the compiled code calls the module only after checking that it is
    not, so the check passes. Never raises: a missing attribute is a failed check."""
    try:
        check_module(root, path, qualname, *conditions)
    except GuardFailure:
        return False
    return True


def _length_condition(condition: str) -> Callable[[Any], bool]:
    """"len=3": the container holds exactly 3 modules (an unrolled nn.Sequential)."""
    if not condition.startswith("len=") or not condition[4:].isdigit():
        raise KeyError(condition)  # a failed check
    n = int(condition[4:])
    test = _LAYER_CONDITIONS[condition] = lambda m: len(m._modules) == n
    _NATIVE_CONDITIONS[test] = ("len", n)
    return test


def check_module(root: Any, path: str, qualname: str, *conditions: str) -> Any:
    """`plain_module` as an entry check: raises GuardFailure naming the module when it fails.
    Returns the submodule (None where an optional part of the path is None), so that the checks
    of its parameters read it once: `self_fc1 = check_module(self, "fc1", ...)`, then
    `attr(self_fc1, "bias")`."""
    module = _plain_module_at(root, _paths.get(path) or _path(path), qualname, conditions)
    if module is _ABSENT:
        raise _module_failure(path, qualname, conditions)
    return module


def _plain_module_at(start: Any, steps: tuple[tuple[str | int, bool], ...], qualname: str,
                     conditions: tuple[str, ...]) -> Any:
    """What `check_module` returns for the submodule `steps` below `start`; _ABSENT where the
    check fails."""
    g = _module_globals
    if g._global_forward_hooks or g._global_forward_pre_hooks or g._global_backward_hooks \
            or g._global_backward_pre_hooks:
        return _ABSENT
    try:
        module = start
        for step, optional in steps:  # (_walk, inline: on every call's path)
            module = item(module, step) if type(step) is int else attr(module, step)
            if module is None and optional:
                return None
        cls = type(module)
        if cls in _matched.get(qualname, ()) or (isinstance(module, _nn.Module) and _class_is(cls, qualname)):
            d = module.__dict__  # (the hook dicts are instance attributes that nn.Module.__init__ sets)
            if not (d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"]
                    or d["_backward_pre_hooks"] or "forward" in d):
                for c in conditions:
                    if not (_LAYER_CONDITIONS.get(c) or _length_condition(c))(module):
                        break
                else:
                    return module
    except (AttributeError, IndexError, KeyError, TypeError):
        pass
    return _ABSENT


def _module_failure(path: str, qualname: str, conditions: tuple[str, ...]) -> GuardFailure:
    sizes = [f" of {c[4:]} layers" for c in conditions if c.startswith("len=")]
    named = [c for c in conditions if not c.startswith("len=")]
    wanted = "".join(sizes) + (f" with {', '.join(named)}" if named else "")
    where = f"submodule {path.replace('?', '')!r}" if path else "the module"
    return GuardFailure(f"{where} is not an unhooked {qualname}{wanted}")


# -- a function's entry checks as one table (made by runtime/entry_table.py) ---------------------
def check_entry(root: Any, table: tuple) -> Any:
    """The checks of an `entry_checks` table below `root`, in order (modules, tensors, values):
    raises GuardFailure for the first that fails, as `check_module`, `check_tensor` and
    `check_value` would. Returns the submodules the table's `returns` names: None for none, the
    submodule for one, a tuple of them for more. (The reads are written out in the loops: this
    is the path of every call where the C++ checks are not built.)"""
    modules, tensors, values, returns = table
    found: list[Any] = []
    for path, qualname, conditions, base, steps in modules:
        start = root if base < 0 else found[base]
        module = None if base >= 0 and start is None else _plain_module_at(start, steps, qualname, conditions)
        if module is _ABSENT:
            raise _module_failure(path, qualname, conditions)
        found.append(module)  # (None: an optional part of the path is None, which the check passes)
    for name, base, steps, dtype, device_type, shape in tensors:
        value = root if base < 0 else found[base]
        if value is None and base >= 0:
            continue  # (a part that may be None is None: the check passes)
        for step, optional in steps:
            value = item(value, step) if type(step) is int else attr(value, step)
            if value is None and optional:
                break
        else:
            check_tensor(value, name, dtype, device_type, shape)
    for name, base, steps, last, expected in values:
        value = root if base < 0 else found[base]
        if value is None and base >= 0:
            continue
        for step, optional in steps:
            value = item(value, step) if type(step) is int else attr(value, step)
            if value is None and optional:
                break
        else:
            if last is not None:
                value = getattr(value, last)
            if value is not expected and (expected is None or value != expected):  # (check_value's test)
                check_value(value, expected, name)
    if len(returns) == 1:
        return found[returns[0]]
    return tuple(found[i] for i in returns) if returns else None


# -- autograd -------------------------------------------------------------------------------------
def check_no_autograd(module: Any, args: tuple, kwargs: dict) -> None:
    """Code compiled for a `with torch.no_grad():` block as its body (and kernels, which record
    no autograd graph) runs only where autograd records nothing: else GuardFailure, and the call
    runs eagerly (kernels: the code compiled for autograd, ir/passes.AUTOGRAD_PASSES)."""
    if records_autograd(module, args, kwargs):
        raise GuardFailure("grad is enabled and an input or parameter requires grad; this compiled code "
                           "records no autograd graph (a `with torch.no_grad():` block compiled as its body)")


# -- the passing paths of the checks in C++ ------------------------------------------------------
# runtime/guards_native.cpp does what check_module, check_entry, check_tensor, check_value, attr
# and item do when they pass, reading the same things in the same order, and calls the Python
# function for anything else (a failure, with its message). Built and cached like kernels
# (runtime/native.py) where this machine builds CPython extensions; TORCHSCRIBE_NATIVE_GUARDS=off
# keeps Python.

NATIVE_VAR = "TORCHSCRIBE_NATIVE_GUARDS"
python_checks: dict[str, Callable[..., Any]] = {
    "check_module": check_module, "check_entry": check_entry, "check_tensor": check_tensor,
    "check_value": check_value, "attr": attr, "attrs": attrs, "at": at, "item": item,
}


def native_checks_allowed() -> bool:
    """Whether TORCHSCRIBE_NATIVE_GUARDS leaves the C++ checks on: any value but "off" (as
    TORCHSCRIBE_JIT_CACHE reads)."""
    return os.environ.get(NATIVE_VAR, "on") != "off"


def _load_native() -> types.ModuleType | None:
    """The extension module of guards_native.cpp, set up with this module's checks and tables;
    None when it is turned off or cannot be built here (the Python checks then run)."""
    if not native_checks_allowed():
        return None
    from runtime import native

    module = native.runtime_extension(os.path.join(os.path.dirname(os.path.abspath(__file__)), "guards_native.cpp"),
                                      "torchscribe_guards_")
    if module is None:
        return None
    module.setup(native_setup())
    return module


def native_setup(**fallbacks: Callable[..., Any]) -> types.SimpleNamespace:
    """What the C++ checks' `setup` takes: the Python checks they fall back to (`fallbacks`
    replaces some, as a test that counts them does) and the tables they share with them."""
    tables = {"_getattr_names": _getattr_names, "_matched": _matched, "_paths": _paths, "_attr_names": _attr_names,
              "_LAYER_CONDITIONS": _LAYER_CONDITIONS, "_NATIVE_CONDITIONS": _NATIVE_CONDITIONS,
              "_module_globals": _module_globals,
              "_SEQUENTIAL_GETITEM": _SEQUENTIAL_GETITEM, "_MODULELIST_GETITEM": _MODULELIST_GETITEM,
              "_MODULEDICT_GETITEM": _MODULEDICT_GETITEM,
              "_Tensor": _Tensor, "_Parameter": _Parameter, "_MODULE_DICT": _MODULE_DICT,
              "_OBJECT_GETATTRIBUTE": _OBJECT_GETATTRIBUTE, "value_refused": value_refused}
    return types.SimpleNamespace(**{**python_checks, **fallbacks}, **tables)


def use_native_checks(enabled: bool = True) -> bool:
    """Bind this module's check_module, check_entry, check_tensor, check_value, attr and item to
    their C++ fast paths (enabled, where they are built) or to the Python functions; returns
    whether the C++ ones are bound. Generated code reads them through the module at each call."""
    global _native
    if enabled and _native is None:
        _native = _load_native()
    chosen = {name: getattr(_native, name) for name in python_checks} if enabled and _native is not None \
        else python_checks
    globals().update(chosen)
    return chosen is not python_checks


_native: types.ModuleType | None = None
use_native_checks()

"""The runtime helpers that the IR calls, and the runtime modules generated code imports, named once.

A pass that puts a call of a runtime function into the IR builds a `py.call` whose `callee` is the
name of one of these entries (`PLAIN_MODULE.name`, "_guards.plain_module"), and code that looks
for such a call compares with the entry; codegen imports the runtime module each helper lives in
under its alias (`from runtime import prepacked as _prepacked`) from this table, in its order.
(The checks that codegen alone writes, `_guards.check_tensor(...)` and the like, are its own text.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeModule:
    """A module of runtime/ as generated code imports it: `from runtime import <module> as <alias>`."""

    module: str
    alias: str

    @property
    def import_line(self) -> str:
        return f"from runtime import {self.module} as {self.alias}"


@dataclass(frozen=True)
class Helper:
    """A function (or class) of a runtime module that generated code calls."""

    home: RuntimeModule
    attr: str

    @property
    def name(self) -> str:
        """How generated code (and a `py.call`'s `callee`) names it: "_prepacked.conv2d"."""
        return f"{self.home.alias}.{self.attr}"

    def __str__(self) -> str:
        return self.name


# The modules, in the order a generated module imports them (every module imports GUARDS).
GUARDS = RuntimeModule("guards", "_guards")
AUTOGRAD = RuntimeModule("autograd_kernels", "_autograd")
KERNELS = RuntimeModule("kernels", "_kernels")
PREPACKED = RuntimeModule("prepacked", "_prepacked")
STACKING = RuntimeModule("stacking", "_stacking")
BUFFERS = RuntimeModule("buffers", "_buffers")
MODULES = (GUARDS, AUTOGRAD, KERNELS, PREPACKED, STACKING, BUFFERS)

# Entry checks the passes put into the IR (runtime/guards.py, runtime/call_inputs.py)
PLAIN_MODULE = Helper(GUARDS, "plain_module")  # a submodule is an unhooked instance of its class
NO_OVERLAP = Helper(GUARDS, "no_overlap")  # tensors written and read share no memory
# Frozen programs: weights made once (runtime/prepacked.py)
PACKED_CONV = Helper(PREPACKED, "conv2d")
PACKED_LINEAR = Helper(PREPACKED, "linear")
CHANNELS_LAST_WEIGHT = Helper(PREPACKED, "channels_last")
FOLDED_WEIGHTS = Helper(PREPACKED, "fold_batch_norm")
COMPUTED_ONCE = Helper(PREPACKED, "computed_once")  # (py.computed_once)
# Channels-last rows stacked along a new last dim (runtime/stacking.py)
STACK_LAST = Helper(STACKING, "stack_last")
# Buffers kept between calls (py.take_buffers, py.give_buffers; runtime/buffers.py)
TAKE_BUFFERS = Helper(BUFFERS, "take")
GIVE_BUFFERS = Helper(BUFFERS, "give")

HELPERS: dict[str, Helper] = {h.name: h for h in (
    PLAIN_MODULE, NO_OVERLAP, PACKED_CONV, PACKED_LINEAR, CHANNELS_LAST_WEIGHT, FOLDED_WEIGHTS, COMPUTED_ONCE,
    STACK_LAST, TAKE_BUFFERS, GIVE_BUFFERS)}


def helper(callee: str) -> Helper | None:
    """The runtime helper a `py.call` calls, or None for a builtin (`len`, `math.sqrt`)."""
    return HELPERS.get(callee)


def home_of(callee: str) -> RuntimeModule | None:
    """The runtime module whose helper a `py.call` calls; None for a builtin."""
    found = HELPERS.get(callee)
    return None if found is None else found.home

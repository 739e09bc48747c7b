"""torchscribe's runtime: what a model and its compiled module import in production.

Only the standard library and torch are imported here (typeguard lazily, by guards that use
it); the compiler's packages never are, except ``transpiler.jit`` when ``script`` is asked to
compile now.
"""

from runtime.dispatch import reset, script, script_model
from runtime.errors import TorchscribeError, TorchscribeWarning
from runtime.guards import GuardFailure
from runtime.loader import VERSION as __version__
from runtime.modes import current_mode, mode
from runtime.stats import fallback_counts, generic_counts

__all__ = [
    "GuardFailure",
    "TorchscribeError",
    "TorchscribeWarning",
    "current_mode",
    "fallback_counts",
    "generic_counts",
    "mode",
    "reset",
    "script",
    "script_model",
]

"""torchscribe. ``from transpiler import script`` is all a model needs: it comes from the
runtime, so importing it never imports libcst or the compiler."""

from runtime.dispatch import script, script_model

__all__ = ["script", "script_model"]

"""torchscribe. ``from transpiler import script`` is all a model needs: it comes from the
runtime, so importing it never imports libcst or the compiler."""

from runtime.dispatch import script

__all__ = ["script"]

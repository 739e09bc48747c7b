"""torchscribe. ``from transpiler import script`` is all a model needs: it comes from the
runtime, so importing it never imports libcst or the compiler; the compiler itself is imported
at the first `script(obj, example_inputs=...)`, through the hook registered here (the runtime
never imports this package)."""

from typing import Any

from runtime.dispatch import register_compiler, script, script_model


def _compile_object(obj: Any, **options: Any) -> Any:
    from transpiler.jit import compile_object  # (libcst and the compiler: only when compiling)

    return compile_object(obj, **options)


register_compiler(_compile_object)

__all__ = ["script", "script_model"]

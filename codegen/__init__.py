"""Code generation: IR programs to the text of a compiled Python module."""

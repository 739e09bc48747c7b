"""The shape and dtype interpreter's facts: abstract values, the size algebra, and the rule
tables for torch calls and Python builtins that ir/passes/shapes.py runs."""

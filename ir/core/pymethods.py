"""Methods of Python's own str and dict values that compiled code calls as Python's own (a
`py.call` whose callee is "str.<method>" or "dict.<method>", printed as a method call): what
each returns, which lowering types the call by, and a str method's value on constants, which
folding and shape propagation both take (a setting's test, `"add_all".endswith("all")`)."""

from __future__ import annotations

from typing import Any

from ir.core.types import BOOL, INT, STR, ListType, Type

# str methods by their result type.
STR_METHODS: dict[str, Type] = {
    "startswith": BOOL, "endswith": BOOL, "isdigit": BOOL, "isalpha": BOOL, "lower": STR, "upper": STR,
    "strip": STR, "lstrip": STR, "rstrip": STR, "replace": STR, "split": ListType(STR), "find": INT, "count": INT,
}
# The dict methods: reads (nothing in the dict changes).
DICT_READS = ("items", "keys", "values", "get")
# Longer strs are not folded (`s.replace("", s)` grows with the square of the length).
FOLD_LIMIT = 4096


def str_method_value(callee: str, args: list[Any]) -> tuple[bool, Any]:
    """(True, the value) of str method call `callee` ("str.endswith") on constant `args` (the
    str first) where it is a str, an int or a bool of bounded size; (False, None) otherwise,
    also where Python would raise."""
    method = callee.removeprefix("str.")
    if not callee.startswith("str.") or STR_METHODS.get(method) not in (STR, INT, BOOL) or not args \
            or type(args[0]) is not str or not all(type(a) in (str, int) for a in args) \
            or sum(len(a) for a in args if type(a) is str) >= FOLD_LIMIT:
        return False, None
    try:
        value = getattr(str, method)(*args)
    except (TypeError, ValueError, OverflowError):
        return False, None
    return (False, None) if type(value) is str and len(value) >= FOLD_LIMIT else (True, value)

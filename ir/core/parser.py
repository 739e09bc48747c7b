"""Reads the text that ir/core/printer.py writes back into IR objects.

    func @f(%x: Tensor, %n: int = 3) -> Tensor {  # f.py:1:1
      %y : Tensor = torch.call(%x) {callee = "torch.tanh"}  # f.py:2:9
      func.return(%y)
    }

Ops are built through `Operation.registry`, so every registered op kind parses; attributes are
read as their op class declares them (ir/core/attrs.py). Value names in
the text become the values' name hints (`%x_1` stays "x_1"); numeric names (`%3`) are
temporaries without a hint, which the printer numbers again in order of appearance. A value may
be used before the line that defines it (the verifier, not the parser, rejects that), but every
name must be defined somewhere in its function. Lines holding only a `#` comment are skipped;
a comment after an op is its location, `# file:line:col`.

The round trip `print_program(parse_program(text)) == text` holds for what the printer writes.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import ir.core.ops  # noqa: F401  (registers the op kinds)
from ir.core.graph import Block, Loc, Operation, Program, Region, Value
from ir.core.ops import FuncOp
from ir.core.types import (
    ANY,
    DTYPE_LONG,
    DictType,
    Dim,
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
    parse_dim,
)

_IDENT = re.compile(r"[A-Za-z_]\w*")
_VALUE_NAME = re.compile(r"[\w.]+")
_OP_NAME = re.compile(r"[A-Za-z_][\w.]*")
_NUMBER = re.compile(r"-?(?:inf|nan|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![\w.])")
_INT_DIM = re.compile(r"-?\d+(?=\s*[,\]])")
_DEVICE = re.compile(r"[\w:]+")
_LOC = re.compile(r"(.+):(\d+):(\d+)")
_TOKEN = re.compile(r"\w+|\S")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class ParseError(Exception):
    """An error in IR text, at a 1-based line and column."""

    def __init__(self, message: str, line: int, col: int, source_line: str = "") -> None:
        self.message = message
        self.line = line
        self.col = col
        text = f"{line}:{col}: {message}"
        if source_line:
            text += f"\n    {source_line}\n    {' ' * (col - 1)}^"
        super().__init__(text)


def parse_program(text: str, source_file: str | None = None) -> Program:
    """Parse a whole program. `source_file` defaults to the file of the first location."""
    parser = _Parser(text)
    funcs = parser.program()
    if source_file is None:
        locs = [op.loc for f in funcs for op in f.walk() if op.loc is not None]
        source_file = locs[0].file if locs else "<ir>"
    return Program(source_file, funcs)


def parse_type(text: str) -> Type:
    parser = _Parser(text)
    result = parser.type()
    parser.skip_spaces()
    if not parser.at_end():
        parser.fail("expected end of type")
    return result


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.values: dict[str, Value] = {}  # the current function's names
        self.pending: dict[str, tuple[Value, int]] = {}  # used, not yet defined: placeholder, where

    # -- characters ---------------------------------------------------------------------------
    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_spaces(self) -> None:
        while self.peek() in (" ", "\t", "\r") and not self.at_end():
            self.pos += 1

    def looking_at(self, literal: str) -> bool:
        self.skip_spaces()
        return self.text.startswith(literal, self.pos)

    def accept(self, literal: str) -> bool:
        if self.looking_at(literal):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str, what: str | None = None) -> None:
        if not self.accept(literal):
            self.fail(f"expected {what or repr(literal)}")

    def match(self, pattern: re.Pattern[str], what: str) -> str:
        self.skip_spaces()
        m = pattern.match(self.text, self.pos)
        if m is None:
            self.fail(f"expected {what}")
        self.pos = m.end()
        return m.group(0)

    def until(self, stops: str, what: str) -> str:
        """Raw text up to the first of `stops` outside brackets (or an unmatched closing
        bracket), stripped."""
        start, depth = self.pos, 0
        while not self.at_end() and self.peek() != "\n":
            c = self.peek()
            if depth == 0 and (c in stops or c in ")]"):
                break
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            self.pos += 1
        found = self.text[start : self.pos].strip()
        if not found:
            self.pos = start
            self.fail(f"expected {what}")
        return found

    def fail(self, message: str, pos: int | None = None, show_found: bool = True) -> NoReturn:
        """Raise a ParseError at `pos` (default: here); `show_found` names what stands there."""
        pos = self.pos if pos is None else pos
        line_start = self.text.rfind("\n", 0, pos) + 1
        line_end = self.text.find("\n", pos)
        line_end = len(self.text) if line_end < 0 else line_end
        if pos >= len(self.text):
            found = "end of input"
        elif self.text[pos] == "\n":
            found = "end of line"
        else:
            m = _TOKEN.match(self.text, pos)
            found = repr(m.group(0)) if m else repr(self.text[pos])
        raise ParseError(
            f"{message}, found {found}" if show_found else message,
            self.text.count("\n", 0, pos) + 1,
            pos - line_start + 1,
            self.text[line_start:line_end],
        )

    def skip_blank_lines(self) -> None:
        """Skip empty lines and lines holding only a comment."""
        while True:
            start = self.pos
            self.skip_spaces()
            if self.peek() == "#":
                while not self.at_end() and self.peek() != "\n":
                    self.pos += 1
            if self.peek() == "\n":
                self.pos += 1
            elif self.at_end():
                return
            else:
                self.pos = start
                return

    def end_of_line(self, loc_allowed: bool = False) -> Loc | None:
        """The rest of a line: an optional location comment, then a newline or the end."""
        self.skip_spaces()
        loc = None
        if loc_allowed and self.peek() == "#":
            start = self.pos
            self.pos += 1
            end = self.text.find("\n", self.pos)
            end = len(self.text) if end < 0 else end
            m = _LOC.fullmatch(self.text[self.pos : end].strip())
            if m is None:
                self.fail("expected a location 'file:line:col' after '#'", start, show_found=False)
            loc = Loc(m.group(1), int(m.group(2)), int(m.group(3)) - 1)
            self.pos = end
        if self.peek() == "\n":
            self.pos += 1
        elif not self.at_end():
            self.fail("expected end of line" if not loc_allowed else "expected a location comment or end of line")
        return loc

    # -- values ---------------------------------------------------------------------------
    def value_name(self) -> tuple[str, int]:
        self.expect("%", "a value '%name'")
        pos = self.pos
        return self.match(_VALUE_NAME, "a value name after '%'"), pos

    def use(self) -> Value:
        name, pos = self.value_name()
        if name in self.values:
            return self.values[name]
        if name not in self.pending:
            self.pending[name] = (Value(ANY, name), pos)
        return self.pending[name][0]

    def define(self, name: str, pos: int, value: Value) -> None:
        if name in self.values:
            self.fail(f"redefinition of %{name}", pos - 1, show_found=False)
        value.name = None if name.isdigit() else name
        self.values[name] = value
        if name in self.pending:
            placeholder, _ = self.pending.pop(name)
            placeholder.replace_all_uses_with(value)

    # -- program and functions ------------------------------------------------------------
    def program(self) -> list[Operation]:
        funcs = []
        self.skip_blank_lines()
        while not self.at_end():
            funcs.append(self.func())
            self.skip_blank_lines()
        return funcs

    def func(self) -> FuncOp:
        self.values, self.pending = {}, {}
        self.skip_spaces()
        start = self.pos
        if self.match(_IDENT, "'func'") != "func":
            self.fail("expected 'func'", start)
        self.expect("@", "'@' and the function's name")
        sym_name = self.until("(", "the function's name")
        if " " in sym_name:
            self.fail("expected '(' after the function's name")
        self.expect("(")
        block = Block()
        defaults: dict[str, Any] = {}
        if not self.accept(")"):
            while True:
                name, pos = self.value_name()
                self.expect(":")
                arg = block.add_arg(self.type())
                self.define(name, pos, arg)
                if self.accept("="):
                    defaults[name] = self.attr_value()
                if self.accept(")"):
                    break
                self.expect(",", "',' or ')'")
        self.expect("->")
        result_type = self.type()
        self.expect("{")
        loc = self.end_of_line(loc_allowed=True)
        func = FuncOp(
            attributes={"sym_name": sym_name, "result_type": result_type, "defaults": defaults},
            regions=[Region([block])],
            loc=loc,
        )
        self.block_body(block)
        self.expect("}")
        self.end_of_line()
        if self.pending:
            name, (_, pos) = min(self.pending.items(), key=lambda item: item[1][1])
            self.fail(f"use of undefined value %{name}", pos - 1, show_found=False)
        return func

    def block_body(self, block: Block) -> None:
        """Op lines up to (not including) the closing '}'."""
        while True:
            self.skip_blank_lines()
            if self.looking_at("}"):
                return
            if self.at_end():
                self.fail("expected '}'")
            block.append(self.op())

    # -- ops --------------------------------------------------------------------------------
    def op(self) -> Operation:
        results: list[tuple[str, int, Type]] = []
        if self.looking_at("%"):
            while True:
                name, pos = self.value_name()
                self.expect(":")
                results.append((name, pos, self.type()))
                if not self.accept(","):
                    break
            self.expect("=", "'=' after the results")
        self.skip_spaces()
        name_pos = self.pos
        op_name = self.match(_OP_NAME, "an op name")
        op_class = Operation.registry.get(op_name)
        if op_class is None:
            self.fail(f"unknown op {op_name!r}", name_pos, show_found=False)
        self.expect("(", "'(' and the operands")
        operands = []
        if not self.accept(")"):
            while True:
                operands.append(self.use())
                if self.accept(")"):
                    break
                self.expect(",", "',' or ')'")
        attributes: dict[str, Any] = {}
        if self.looking_at("{") and not self.region_opens():
            attributes = self.attr_dict(op_class)
        regions = []
        if self.accept("{"):
            loc = self.end_of_line(loc_allowed=True)
            while True:
                regions.append(self.region())
                self.expect("}")
                if not self.accept("{"):
                    break
                self.end_of_line()
            self.end_of_line()
        else:
            loc = self.end_of_line(loc_allowed=True)
        op = op_class(
            operands=operands,
            result_types=[t for _, _, t in results],
            attributes=attributes,
            regions=regions,
            loc=loc,
        )
        for (name, pos, _), result in zip(results, op.results):
            self.define(name, pos, result)
        return op

    def region_opens(self) -> bool:
        """At '{': whether it opens regions (the line ends after it) rather than attributes."""
        rest = self.text[self.pos + 1 :].lstrip(" \t")
        return not rest or rest[0] in "\n#"

    def region(self) -> Region:
        block = Block()
        self.skip_blank_lines()
        if self.accept("^"):
            self.expect("(")
            if not self.accept(")"):
                while True:
                    name, pos = self.value_name()
                    self.expect(":")
                    self.define(name, pos, block.add_arg(self.type()))
                    if self.accept(")"):
                        break
                    self.expect(",", "',' or ')'")
            self.expect(":")
            self.end_of_line()
        self.block_body(block)
        return Region([block])

    # -- attributes ---------------------------------------------------------------------------
    def attr_dict(self, op_class: type[Operation]) -> dict[str, Any]:
        """`{key = value, ...}`, each value converted to the type `op_class` declares for it
        (ir/core/attrs.py): an undeclared key or a value of another type is an error here."""
        self.expect("{")
        attributes: dict[str, Any] = {}
        while True:
            self.skip_spaces()
            key_pos = self.pos
            key = self.match(_IDENT, "an attribute name")
            if key in attributes:
                self.fail(f"attribute {key!r} given twice", key_pos, show_found=False)
            spec = op_class.attrs.get(key)
            if spec is None:
                self.fail(f"{op_class.name} has no attribute {key!r}", key_pos, show_found=False)
            self.expect("=")
            self.skip_spaces()
            value_pos = self.pos
            value = spec.type.convert(self.attr_value())
            if not spec.type.check(value):
                self.fail(f"attribute {key!r} of {op_class.name} is {spec.type}", value_pos)
            attributes[key] = value
            if self.accept("}"):
                return attributes
            self.expect(",", "',' or '}'")

    def attr_value(self) -> Any:
        self.skip_spaces()
        c = self.peek()
        if c == '"':
            return self.string()
        if c == "(":
            items = self.sequence("(", ")")
            return tuple(items)
        if c == "[":
            return self.sequence("[", "]")
        if c == "{":
            self.pos += 1
            result = {}
            if not self.accept("}"):
                while True:
                    key = self.attr_value()
                    self.expect(":")
                    result[key] = self.attr_value()
                    if self.accept("}"):
                        break
                    self.expect(",", "',' or '}'")
            return result
        if c == "<":
            self.pos += 1
            t = self.type()
            self.expect(">")
            return t
        m = _NUMBER.match(self.text, self.pos)
        if m is not None:
            self.pos = m.end()
            text = m.group(0)
            is_float = any(ch in text for ch in ".eEn")  # "inf" and "nan" contain an n
            return float(text) if is_float else int(text)
        m = _IDENT.match(self.text, self.pos)
        if m is not None and m.group(0) in ("True", "False", "None"):
            self.pos = m.end()
            return {"True": True, "False": False, "None": None}[m.group(0)]
        self.fail("expected an attribute value (string, number, bool, None, tuple, dict or <type>)")

    def sequence(self, open_: str, close: str) -> list[Any]:
        self.expect(open_)
        items: list[Any] = []
        while not self.accept(close):
            items.append(self.attr_value())
            if not self.accept(","):
                self.expect(close, f"',' or {close!r}")
                break
        return items

    def string(self) -> str:
        start = self.pos
        self.pos += 1
        out = []
        while True:
            c = self.peek()
            if c in ("", "\n"):
                self.fail("unterminated string", start, show_found=False)
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                esc = self.peek()
                if esc not in _ESCAPES:
                    self.fail("expected an escape \\\\, \\\" or \\n")
                out.append(_ESCAPES[esc])
                self.pos += 1
            else:
                out.append(c)

    # -- types --------------------------------------------------------------------------------
    def type(self) -> Type:
        name = self.match(_IDENT, "a type")
        if name == "tuple":
            self.expect("[")
            if self.accept("("):
                self.expect(")")
                self.expect("]")
                return TupleType(())
            return TupleType(tuple(self.type_list()))
        if name == "list":
            return ListType(self.single_type_arg())
        if name == "dict":
            self.expect("[")
            key = self.type()
            self.expect(",")
            value = self.type()
            self.expect("]")
            return DictType(key, value)
        if name == "Optional":
            return OptionalType(self.single_type_arg())
        if name in ("Module", "Function"):
            self.expect("[")
            qualname = self.until("]", "a qualified name")
            self.expect("]")
            return ModuleType(qualname) if name == "Module" else FunctionType(qualname)
        if name in ("ModuleList", "Sequential"):
            return self.module_list(name)
        if name == "Tensor" or self.peek() in ("[", "@"):
            return self.tensor(None if name == "Tensor" else DTYPE_LONG.get(name, name))
        return ScalarType(name)

    def single_type_arg(self) -> Type:
        self.expect("[")
        inner = self.type()
        self.expect("]")
        return inner

    def type_list(self) -> list[Type]:
        """Types separated by ',' up to and including ']' (after the '[')."""
        types = [self.type()]
        while self.accept(","):
            types.append(self.type())
        self.expect("]", "',' or ']'")
        return types

    def module_list(self, kind: str) -> ModuleListType:
        self.expect("[")
        elems: list[Type] = []
        if self.accept("]"):
            return ModuleListType(kind, (), True)
        if not self.looking_at(","):
            elems.append(self.type())
        while self.accept(","):
            if self.accept("..."):
                self.expect("]")
                return ModuleListType(kind, tuple(elems), False)
            elems.append(self.type())
        self.expect("]", "',' or ']'")
        return ModuleListType(kind, tuple(elems), True)

    def tensor(self, dtype: str | None) -> TensorType:
        shape: tuple[Dim, ...] | None = None
        if self.peek() == "[":
            self.pos += 1
            if self.accept("*"):
                self.expect("]")
            elif self.accept("]"):
                shape = ()
            else:
                dims: list[Dim] = []
                while True:
                    self.skip_spaces()
                    if self.accept("?"):
                        dims.append(None)
                    elif _INT_DIM.match(self.text, self.pos):
                        dims.append(int(self.match(_INT_DIM, "a dimension")))
                    else:
                        start = self.pos
                        try:
                            dims.append(parse_dim(self.until(",]", "a dimension")))
                        except ValueError:
                            self.fail("expected a dimension (an int, '?', or a size expression)", start)
                    if self.accept("]"):
                        break
                    self.expect(",", "',' or ']'")
                shape = tuple(dims)
        device = None
        if self.peek() == "@":
            self.pos += 1
            device = self.match(_DEVICE, "a device after '@'")
        return TensorType(dtype, shape, device)

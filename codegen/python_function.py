"""Emit one IR function as a Python function that calls torch: its signature and entry checks,
then its body, each op printed as the rules of the modules below say (python_emitter.py: the
core, planning, names and blocks; python_control, python_calls, python_values, python_checks,
python_kept: the statement and expression of each op class, by what they print)."""

from __future__ import annotations

from codegen import python_calls, python_checks, python_control, python_kept, python_values
from codegen.names import function_name
from codegen.python_checks import entry_tables, guards
from codegen.python_emitter import PythonEmitter, Rules
from codegen.python_text import annotation, restates, string_literal
from ir.core.types import ModuleType

LINE_LENGTH = 100  # a longer signature takes a line per parameter
RULES = Rules.merge(python_control.RULES, python_calls.RULES, python_values.RULES, python_checks.RULES, python_kept.RULES)


class FunctionEmitter(PythonEmitter):
    rules = RULES

    def emit(self) -> list[str]:
        self.plan()
        self.tables = entry_tables(self)
        self.in_table = {guard for group in self.tables.values() for guard in group}
        f = self.func
        params = []
        defaults = f.defaults
        for arg in f.args:
            text = self.var[arg]
            ann = annotation(arg.type) if not isinstance(arg.type, ModuleType) else None
            if ann:
                text += f": {ann}"
                self._note_annotation(ann)
            if arg.name in defaults:
                text += (" = " if ann else "=") + self.literal(defaults[arg.name]).text
            params.append(text)
        star, kwstar = f.star, f.kwstar
        positional = len(params) if f.positional is None else f.positional
        if star is not None or positional < len(params):
            params.insert(positional, f"*{star}" if star is not None else "*")
        if kwstar is not None:
            params.append(f"**{kwstar}")
        ret = annotation(f.result_type)
        if ret:
            self._note_annotation(ret)
        tail = (f" -> {ret}" if ret else "") + ":"
        head = f"def {function_name(f.sym_name)}({', '.join(params)}){tail}"
        if f.grad_off:  # (code for autograd: transpiler/lower_stmt.py)
            self.w.line(f"@torch.{f.grad_off}()")
        if f.rows:  # compiled for (rows, last) views (ir/kernel/rows.py)
            self.w.line(f"@_guards.over_rows({', '.join(string_literal(n) for n in f.rows)})")
        if len(head) <= LINE_LENGTH:
            self.w.line(head)
        else:  # one parameter a line, as formatters lay out long signatures
            self.w.line(f"def {function_name(f.sym_name)}(")
            with self.w.indent():
                for p in params:
                    self.w.line(p + ",")
            self.w.line(")" + tail)
        with self.w.indent():
            expected = f.kwstar_expected
            checked = (star, None if f.kwstar_passed or expected else kwstar)
            extra = " or ".join(n for n in checked if n is not None)
            if extra:  # compiled code is specialised to calls that pass them nothing
                self.w.line(f"if {extra}:")
                with self.w.indent():
                    self.w.line(f"raise _guards.GuardFailure({string_literal(f'called with {extra}, which the compiled code does not take')})")
            if expected:  # ... or the literal keywords its decorators pass
                items = ", ".join(f"{string_literal(k)}: {self.literal(v).text}" for k, v in expected)
                self.w.line(f"_guards.check_keywords({kwstar}, {{{items}}}, {string_literal('**' + kwstar)})")
            guards(self)
            self.block(f.body)
        said = {at for at, text in self.quotes if restates(self.w.lines, at, text)}
        self.w.lines = [line for at, line in enumerate(self.w.lines) if at not in said]
        return self.w.lines

    def _note_annotation(self, text: str) -> None:
        if "Optional[" in text:
            self.needs.add("Optional")

"""The element computation of a C++ kernel: one C++ statement per op of the kernel's region
(`Body`), each op's expression spelled from codegen/elements.py's table (`element`).

An element is computed with torch's semantics: operands are converted to the op's computation
dtype (torch.result_type of the operands, found with meta tensors), NaN propagates through
maximum/minimum/clamp, casts to bool test `!= 0`. bfloat16 and float16 values are floats rounded
to 16 bits after every op, as torch's CPU kernels compute them (VALUE, _operand), so a chain of
them gives eager's bits up to the math functions.
"""

from __future__ import annotations

import torch

from codegen.cpp_text import atomic, bare_arguments
from codegen.elements import Element, Parts, compute_dtype, divides, element_of, is_transcendental, value_names
from codegen.launcher_text import with_source
from codegen.writer import Writer
from ir.core import ops
from ir.core.graph import BlockArg, Operation, Value
from ir.core.types import FLOAT, TensorType
from ir.kernel import ops as kernel_ops
from ir.kernel.vocabulary import SCALARS

# The C type of a tensor element in memory.
CTYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t", "bool": "bool",
         "bfloat16": "uint16_t", "float16": "uint16_t"}
# 16-bit floats are computed in float and rounded back to 16 bits after every op, as torch's CPU
# kernels do: a value of such a dtype is the float it widens to (VALUE), loaded, rounded and
# stored by the ts_<op>_<suffix> helpers of runtime/include/torchscribe/kernels.h.
HALF = {"bfloat16": "bf16", "float16": "f16"}
VALUE = {**CTYPE, "bfloat16": "float", "float16": "float"}
FLOATING = {"float32", "float64", *HALF}


def literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return "NAN"
        if value in (float("inf"), float("-inf")):
            return "INFINITY" if value > 0 else "-INFINITY"
        return repr(value)
    if isinstance(value, int):
        return f"int64_t({value})"
    if isinstance(value, torch.dtype):
        return str(value)
    return repr(value)


def element(op: Operation, names: dict[Value, str]) -> str:
    """A C++ expression for one element of `op`'s result (codegen/elements.py spells it), rounded
    to 16 bits when that is the result's dtype (not where the result is an operand's value or an
    integer, or a cast, which rounds itself)."""
    e = element_of(op)
    result = op.result.type.dtype  # type: ignore[union-attr]
    rt = VALUE[result]
    computed = compute_dtype(op) if e.computes_in == "promoted" else result
    args = []
    for i, kind in enumerate(e.operands):
        v = op.operands[i]
        if kind == "value":
            args.append(_operand(op, e, i, names, computed))
        else:
            args.append(names[v] if kind == "as is" else _cast(v, names[v], result))
    if e.floats_only and result not in FLOATING:
        text = args[0]
    else:
        text = Parts(args, f"{rt}(1)", rt, result in FLOATING, lambda x: rounded_to(result, x), args.__getitem__).fill(e.cpp)
    return rounded_to(result, text) if e.rounds(operands_16bit=True) else text


def _cast(v: Value, x: str, dtype: str) -> str:
    """The element `x` of `v` as `dtype`: a bool tests `!= 0`; a 16-bit float is rounded."""
    if dtype == "bool":
        return f"({x} != 0)"
    rt = VALUE[dtype]
    return rounded_to(dtype, x if VALUE[v.type.dtype] == rt else f"static_cast<{rt}>({x})")  # type: ignore[union-attr]


def _operand(op: Operation, e: Element, i: int, names: dict[Value, str], dtype: str) -> str:
    """Operand `i` of `op` as a value of `dtype`, the dtype the op computes in. Eager converts an
    operand of another type to a 16-bit `dtype` first (rounding it), except where its entry `e`
    reads a one-element operand in float (mul and div's second, a number on either side of `*`)."""
    v = op.operands[i]
    text = _as(v, names[v], VALUE[dtype])
    own = v.type.dtype if isinstance(v.type, TensorType) else None
    if dtype not in HALF or own in (dtype, "bool") or _read_in_float(op, e, i):
        return text
    if isinstance(v.owner, ops.ConstantOp) and type(v.owner.attributes["value"]) in (int, float, bool):
        value = v.owner.attributes["value"]
        exact = torch.tensor(value, dtype=torch.float64 if type(value) is float else torch.int64).float()
        rounded = exact.to(getattr(torch, dtype)).item()
        return f"{rounded!r}f" if abs(rounded) != float("inf") and rounded == rounded else literal(rounded)
    return rounded_to(dtype, text)


def _read_in_float(op: Operation, e: Element, i: int) -> bool:
    v = op.operands[i]
    if v.type in SCALARS:
        return e.reads_in_float(i, number=True)
    if not e.reads_in_float(i, number=False) or not isinstance(v, BlockArg):
        return False  # (a value computed in the kernel counts as more than one element)
    kernel = v.block.parent.parent  # type: ignore[union-attr]
    return all(d == 1 for d in kernel.operands[v.index].type.shape)  # type: ignore[union-attr]


def from_memory(dtype: str, text: str) -> str:
    """An element in memory (`text`) as the value of its dtype."""
    return f"ts_load_{HALF[dtype]}({text})" if dtype in HALF else text


def to_memory(v: Value, text: str) -> str:
    """The value `text` of `v` as the element in memory."""
    dtype = v.type.dtype  # type: ignore[union-attr]
    return f"ts_store_{HALF[dtype]}({text})" if dtype in HALF else text


def rounded_to(dtype: str, text: str) -> str:
    """The float `text` rounded to `dtype` when that is a 16-bit float."""
    return f"ts_round_{HALF[dtype]}({text})" if dtype in HALF else text


def _as(v: Value, text: str, ctype: str) -> str:
    """`text` (the element or scalar `v`) as a `ctype`: a cast only where the types differ."""
    if isinstance(v.type, TensorType) and VALUE[v.type.dtype] == ctype:  # type: ignore[index]
        return text
    if isinstance(v.owner, ops.ConstantOp) and type(v.owner.attributes["value"]) in (int, float):
        value = v.owner.attributes["value"]
        if ctype == "float" and value == value and abs(value) != float("inf"):
            return f"{float(value)!r}f"
        if ctype == "double":
            return literal(float(value))
    if v.type == FLOAT and ctype == "double":
        return text
    return f"static_cast<{ctype}>({text})"


def _same_line(a: Operation, b: Operation) -> bool:
    return a.loc is not None and b.loc is not None and (a.loc.file, a.loc.line) == (b.loc.file, b.loc.line)


class Body:
    """The element computation: one C++ statement per op of the kernel's region."""

    def __init__(self, op: kernel_ops.KernelOp, source_lines: dict[str, list[str]] | None = None) -> None:
        self.op = op
        self.source_lines = source_lines
        self.n_in = op.inputs
        self.names: dict[Value, str] = value_names(op)
        for inner in op.body.ops:
            if isinstance(inner, ops.ConstantOp):
                self.names[inner.result] = literal(inner.attributes["value"])

    def load(self, k: int, at: str) -> str:
        dtype = self.op.body.args[k].type.dtype  # type: ignore[union-attr]
        return f"const {VALUE[dtype]} a{k} = {from_memory(dtype, at)};"

    def compute(self, inner: Operation) -> str:
        return f"const {VALUE[inner.result.type.dtype]} {self.names[inner.result]} = {bare_arguments(element(inner, self.names))};"  # type: ignore[union-attr]

    def quoted(self, items: list[tuple[Operation | None, str]], last: tuple[str, int] | None = None) -> list[str]:
        """Statements with the op each computes (None: a load, a store), each run of them from one
        source line after a comment quoting it (not again for the line of `last`, quoted just
        before)."""
        return with_source(items, self.source_lines, "//", last)

    def placed(self, items: list[tuple[Operation | None, str, set[Value]]], loads: dict[int, str],
               first_store: int | None = None) -> list[tuple[Operation | None, str]]:
        """`items` (statements with the op each computes and the values it reads) with the load
        of each input of `loads` (input -> where it is read) just before the first statement
        that reads it, under that statement's source line (`const float a4 = out0[o + j], v7 = a4
        * v4, ...`); the loads no statement here reads (a value the kernel stores as it is, or
        sums) first. An input an output is written over is loaded before the first store
        (`first_store`, an index of `items`) at the latest: with several outputs, another's
        store may come before the statement that reads it."""
        args = self.op.body.args
        written = {j for _, j in self.op.reuse}
        first: dict[int, int] = {}
        for i, (_, _, reads) in enumerate(items):
            for k in loads:
                if k not in first and args[k] in reads:
                    first[k] = i
        if first_store is not None:
            first.update({k: first_store for k, i in first.items() if k in written and i > first_store})
        out: list[tuple[Operation | None, str]] = [(None, self.load(k, at)) for k, at in loads.items() if k not in first]
        for i, (op, text, _) in enumerate(items):
            out += [(op, self.load(k, loads[k])) for k in loads if first.get(k) == i]
            out.append((op, text))
        return out

    def computed(self, chosen: list[Operation], loads: dict[int, str] | None = None) \
            -> list[tuple[Operation, str, set[Value]]]:
        """The statements computing the ops `chosen` (in this order, in one place), each with
        the values it reads. An op whose value one later op of `chosen` from the same source line
        alone reads is printed inside that op's expression, in parentheses where it is not a
        call (`v4 = (float(1) / std::sqrt(in0[i1 * in0_s0] + 1e-05f)) * a1`): the same
        operations in the same order (no contraction: -ffp-contract=off), one name instead of
        four; so is the load of an input (of `loads`, input -> where it is read) that one op
        alone reads, and that loads is then done. Not a load of an input an output is written
        over (`out0[o + j]`): a store may come between."""
        listed = set(chosen)
        inside: set[Operation] = set()
        for op in chosen:
            uses = op.result.uses
            if len(uses) == 1 and uses[0].op in listed and not isinstance(uses[0].op, kernel_ops.ReduceOp) \
                    and _same_line(op, uses[0].op):
                inside.add(op)
        args = self.op.body.args
        written = {k for _, k in self.op.reuse}
        for k, at in list((loads or {}).items()):
            uses = args[k].uses
            if len(uses) == 1 and uses[0].op in listed and k not in written and not isinstance(uses[0].op, kernel_ops.ReduceOp):
                self.names[args[k]] = from_memory(args[k].type.dtype, at)  # type: ignore[union-attr]
                del loads[k]  # type: ignore[index]
        reads: dict[Operation, set[Value]] = {}
        items = []
        for op in chosen:
            reads[op] = set(op.operands).union(*(reads[v.owner] for v in op.operands if v.owner in inside))  # type: ignore[index]
            if op in inside:
                text = element(op, self.names)
                self.names[op.result] = text if atomic(text) else f"({text})"
                continue
            items.append((op, self.compute(op), reads[op]))
        return items

    def statements(self, w: Writer, loads: dict[int, str], index: str, skip: set[Operation] = set(),
                   stores: dict[int, str] = {}, last: tuple[str, int] | None = None,
                   deferred: bool = False) -> None:
        """The element's statements, written to `w`; output k is stored at `out<k>[index]`, or
        at `stores[k]`: the expression of the op that computes it, where the store alone reads it
        (`out0[o + j] = ts_max(v8, 0.0f);`). `deferred`: the stores are left to a lambda that the
        statements return last (ts_elements in kernels.h), which stores the values by name, an
        expression the store alone reads as `y<k>` (`const float y0 = ts_max(v8, 0.0f);` and
        `return [=] { out0[o + j] = y0; };`)."""
        yielded = self.op.body.terminator.operands
        stored = {v.owner for v in yielded if isinstance(v.owner, Operation) and v.owner not in skip
                  and v.owner.parent is self.op.body and len(v.uses) == 1 and not isinstance(v.owner, ops.ConstantOp)}
        chosen = [inner for inner in self.op.body.ops
                  if not isinstance(inner, (ops.ConstantOp, ops.YieldOp)) and inner not in skip]
        items: list[tuple[Operation | None, str, set[Value]]] = []
        by_op = {}
        loads = dict(loads)
        for op, text, reads in self.computed(chosen, loads):
            if op in stored:
                by_op[op] = reads
            else:
                items.append((op, text, reads))
        later: list[str] = []  # (deferred: the stores)
        first_store = None if deferred else len(items)
        for k, v in enumerate(self.op.body.terminator.operands):
            target = stores.get(k, f"out{k}[{index}]")
            if v.owner in stored:
                value = to_memory(v, bare_arguments(element(v.owner, self.names)))  # type: ignore[arg-type]
            else:
                value = to_memory(v, self.names[v])
            if not deferred:
                items.append((v.owner if v.owner in stored else None, f"{target} = {value};",
                              by_op[v.owner] if v.owner in stored else {v}))  # type: ignore[index]
            elif v.owner in stored or not isinstance(v.owner, Operation) or isinstance(v.owner, ops.ConstantOp):
                # (a load or a constant needs a statement here, the load its place among the loads)
                items.append((v.owner if v.owner in stored else None,
                              f"const {CTYPE[v.type.dtype]} y{k} = {value};",  # type: ignore[union-attr]
                              by_op[v.owner] if v.owner in stored else {v}))  # type: ignore[index]
                later.append(f"{target} = y{k};")
            else:
                later.append(f"{target} = {value};")
        w.extend(self.quoted(self.placed(items, loads, first_store), last))
        if deferred:
            stored_later = f"return [=] {{ {' '.join(later)} }};"
            if len(stored_later) <= 80:
                w.line(stored_later)
            else:
                with w.block("return [=] {", close="};"):
                    w.extend(later)

    def invariant_ops(self, fixed_inputs: set[int]) -> list[Operation]:
        """The ops whose operands are all fixed along the row: those inputs, scalars, constants
        and other such ops (ops that only forward a value, a load's conversion, count too)."""
        args = self.op.body.args
        fixed: set[Value] = {args[k] for k in fixed_inputs} | set(args[self.n_in:])
        found = []
        for inner in self.op.body.ops:
            if isinstance(inner, ops.ConstantOp):
                fixed.add(inner.result)
            elif not isinstance(inner, ops.YieldOp) and inner.results \
                    and all(v in fixed for v in inner.operands):
                fixed.add(inner.result)
                found.append(inner)
        return found


    def row_ops(self, along: set[int], invariant: set[Operation]) -> tuple[list[Operation], list[Value]]:
        """The ops that depend on the inputs `along` (which move along the row only) and on
        nothing that moves across rows, and of their values those that the rest of the element
        computation reads, when one of those ops is worth a row of its own (a square root, a
        division, a transcendental function: not a lone add)."""
        args = self.op.body.args
        same: set[Value] = {args[k] for k in along} | set(args[self.n_in:])
        found: list[Operation] = []
        for inner in self.op.body.ops:
            if isinstance(inner, ops.ConstantOp):
                same.add(inner.result)
            elif not isinstance(inner, ops.YieldOp) and inner.results and inner not in invariant \
                    and all(v in same for v in inner.operands) \
                    and any(v in same and not isinstance(v.owner, ops.ConstantOp) for v in inner.operands):
                same.add(inner.result)
                found.append(inner)
        if not any(is_transcendental(inner) or divides(inner) for inner in found):
            return [], []
        inside = set(found)
        kept = [inner.result for inner in found if any(u.op not in inside for u in inner.result.uses)]
        return found, kept

    def used_beyond(self, k: int, rowwise: list[Operation]) -> bool:
        """Whether input `k` is read by more than the ops computed into rows."""
        inside = set(rowwise)
        return any(u.op not in inside for u in self.op.body.args[k].uses)

    def row_load(self, v: Value, at: str) -> str:
        return f"const {VALUE[v.type.dtype]} {self.names[v]} = r{self.names[v][1:]}[{at}];"  # type: ignore[union-attr]


__all__ = ["CTYPE", "HALF", "VALUE", "FLOATING", "literal", "element", "from_memory", "to_memory", "rounded_to", "Body"]

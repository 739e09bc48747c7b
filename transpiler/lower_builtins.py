"""Lowering of calls of Python's builtins: `len`, `min`/`max`, conversions, `range`, `zip` and
`enumerate` of sequences known when compiling, `all`/`any`/`sum`/`tuple`/`list` unrolled over
their items, `next(iter(...))`, `isinstance` (of a submodule: decided when compiling, pinned by
an entry check), `hasattr`/`getattr`."""

from __future__ import annotations

from typing import Callable

import libcst as cst
from torch import nn

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    DataclassType,
    DictType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    TensorType,
    TupleType,
    unify_all,
)
from transpiler.diagnostics import UserError
from transpiler.expr_messages import a_type, describe
from transpiler.lower_operators import tuple_when_run

BUILTIN_CALLS = {"len", "min", "max", "int", "float", "bool", "abs", "round", "isinstance", "range", "str",
                 "all", "any", "sum", "tuple", "list", "hasattr", "getattr", "next", "zip", "enumerate"}
NEXT_HINT = ("compiled code takes next(iter(xs)) of a list or tuple, and next(self.parameters()) / "
             "next(self.buffers()); else read the tensor by name (`self.fc.weight.device`) or index (`xs[0]`)")
UNROLLED_CALLS = {"all", "any", "sum", "tuple", "list"}
PY_TYPES_FOR_ISINSTANCE = {
    "torch.Tensor": TENSOR, "builtins.int": INT, "builtins.float": FLOAT, "builtins.bool": BOOL,
    "builtins.str": STR, "builtins.tuple": None, "builtins.list": None,
}

UNROLL_LIMIT = 64  # layers of a module list whose loop is unrolled (script(instance, ...))


class BuiltinLowering:
    """Mixin of ExpressionLowering: calls of Python's builtins."""

    def call_builtin(self, node: cst.Call, name: str) -> Value:
        if name not in BUILTIN_CALLS:
            raise self.error(node.func, f"the builtin `{name}` is not supported in compiled code",
                             f"compiled code can call {', '.join(sorted(BUILTIN_CALLS))}"
                             + ("; print outside the model" if name == "print" else ""))
        if name == "range":
            raise self.error(node, "range() is only supported as the iterable of a for loop")
        if name in ("zip", "enumerate") and node.args and all(not a.keyword and not a.star for a in node.args) \
                and (name == "zip" or len(node.args) == 1):
            # (`for i, (conv, bn) in enumerate(zip(self.convs, self.bns))`: unrolled)
            seqs = [self.expr(a.value) for a in node.args]
            unrolled = self.zipped(seqs) if name == "zip" else self.enumerated(seqs[0])
            if unrolled is not None:
                return unrolled
            raise self.error(node, f"{name}() of a value whose length is not known when compiling is not supported",
                             "iterate over tuples or module lists, or index a list by range(len(...))")
        if name == "isinstance":
            return self.isinstance_call(node)
        if name in ("hasattr", "getattr"):
            return self.module_hasattr(node, name)
        if name == "next":
            return self.next_call(node)
        if name in UNROLLED_CALLS:
            return self.unrolled_call(node, name)
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames:
            raise self.error(node, f"{name}() keyword arguments are not supported")
        types = [a.type for a in args]
        if name in ("float", "int", "bool", "str") and len(args) == 1:
            owner = args[0].owner
            if name == "float" and isinstance(owner, ops.ConstantOp) and isinstance(owner.value, str):
                try:
                    return self.b.constant(float(owner.value), FLOAT)
                except ValueError:
                    raise self.error(node, f"float({owner.value!r}) is not a number") from None
            if isinstance(types[0], TensorType) or types[0] in (INT, FLOAT, BOOL, ANY) or (name == "str"):
                t = {"float": FLOAT, "int": INT, "bool": BOOL, "str": STR}[name]
                return self.op(ops.BuiltinCallOp, args, [t], callee=name).result
            raise self.error(node, f"{name}() of a {types[0]}")
        if name == "len" and len(args) == 1:
            if isinstance(types[0], (ListType, TupleType, TensorType, ModuleListType, DictType)) or types[0] in (STR, ANY):
                return self.op(ops.BuiltinCallOp, args, [INT], callee="len").result
            raise self.error(node, f"len() of a {types[0]}")
        if name == "abs" and len(args) == 1 and types[0] in (INT, FLOAT, BOOL, ANY):
            return self.op(ops.BuiltinCallOp, args, [INT if types[0] == BOOL else types[0]], callee="abs").result
        if name == "round" and 1 <= len(args) <= 2 and types[0] in (INT, FLOAT, ANY):
            t = INT if len(args) == 1 else types[0]  # round(t.item(), 1) is Any: the float or int it rounds
            return self.op(ops.BuiltinCallOp, args, [t], callee="round").result
        if name in ("min", "max") and len(args) >= 2 and all(t in (INT, FLOAT, BOOL, ANY) for t in types):
            t = FLOAT if FLOAT in types else INT
            if all(x == BOOL for x in types):
                t = BOOL
            if t == FLOAT and INT in types or ANY in types:
                t = ANY  # Python keeps the winner's type: max(1, 0.5) is the int 1; t.item() is either
            return self.op(ops.BuiltinCallOp, args, [t], callee=name).result
        if name in ("min", "max") and len(args) == 1 and isinstance(types[0], (ListType,)) and types[0].elem in (INT, FLOAT):
            return self.op(ops.BuiltinCallOp, args, [types[0].elem], callee=name).result
        raise self.error(node, f"this use of {name}() is not supported",
                         "min/max take numbers (use torch.minimum/maximum or .amin/.amax for tensors)")

    def enumerated(self, seq: Value) -> Value | None:
        """`enumerate(seq)` of a tuple or of a module list of known length: the tuple of its
        (index, item) pairs; None for anything else."""
        t = seq.type
        if not (isinstance(t, TupleType) or isinstance(t, ModuleListType) and t.length_known) \
                or len(t.elems) > UNROLL_LIMIT:
            return None
        pairs = []
        for i, elem in enumerate(t.elems):
            index = self.b.constant(i)
            item = self.op(ops.GetItemOp, [seq, index], [elem]).result
            pairs.append(self.op(ops.TupleOp, [index, item], [TupleType((INT, elem))]).result)
        return self.op(ops.TupleOp, pairs, [TupleType(tuple(p.type for p in pairs))]).result

    def zipped(self, seqs: list[Value]) -> Value | None:
        """`zip(a, b, ...)` of tuples and module lists of known length: the tuple of their items
        side by side, as long as the shortest; None for anything else."""
        if not all(isinstance(s.type, TupleType) or isinstance(s.type, ModuleListType) and s.type.length_known
                   for s in seqs):
            return None
        count = min(len(s.type.elems) for s in seqs)  # type: ignore[attr-defined]
        if count > UNROLL_LIMIT:
            return None
        rows = []
        for i in range(count):
            index = self.b.constant(i)
            items = [self.op(ops.GetItemOp, [s, index], [s.type.elems[i]]).result for s in seqs]  # type: ignore[attr-defined]
            rows.append(self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result)
        return self.op(ops.TupleOp, rows, [TupleType(tuple(r.type for r in rows))]).result

    def unrolled_call(self, node: cst.Call, name: str) -> Value:
        """all/any/sum/tuple/list of a generator expression or list comprehension over a sequence
        of known length (a tuple, range of a constant), or of a tuple: one expression per element.
        A generator's elements are computed only as far as all/any read them."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
            raise self.error(node, f"{name}() takes one argument here")
        arg = node.args[0].value
        lazy = isinstance(arg, cst.GeneratorExp)
        if name == "list" and isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            return self.list_comprehension(arg)  # type: ignore[attr-defined]
        if isinstance(arg, (cst.GeneratorExp, cst.ListComp)):
            mark = self.mark()  # type: ignore[attr-defined]
            try:
                thunks = self.comprehension_elements(arg)
            except UserError:
                if name != "sum":
                    raise
                self.rollback(mark)  # type: ignore[attr-defined]  # (what the iterable built)
                return self.sum_of_list(self.list_comprehension(arg), arg)  # type: ignore[attr-defined]
        else:
            seq = self.expr(arg)
            if name == "list":
                return self.list_of(seq, arg)
            if name == "sum" and isinstance(seq.type, ListType):
                return self.sum_of_list(seq, arg)
            if not isinstance(seq.type, TupleType):
                raise self.error(arg, f"{name}() of a {seq.type} is not supported",
                                 "pass a tuple, or a generator expression over a tuple or range(<constant>)")
            thunks = [self._getter(seq, i) for i in range(len(seq.type.elems))]
            lazy = False
        if not lazy:
            values = [t() for t in thunks]
            thunks = [lambda v=v: v for v in values]
        if name == "tuple":
            values = [t() for t in thunks]
            return self.op(ops.TupleOp, values, [TupleType(tuple(v.type for v in values))]).result
        if name == "list":
            values = [t() for t in thunks]
            if not values:
                raise self.error(node, "the type of an empty list is not known", "annotate it: `xs: list[Tensor] = []`")
            return self.make_list(values, None, node)
        if name == "sum":
            total = self.b.constant(0)
            for t in thunks:
                total = self.binary("+", total, t(), node)
            return total
        op = "and" if name == "all" else "or"

        def truth_of(thunk: Callable[[], Value]) -> Value:
            v = thunk()
            if isinstance(v.type, TensorType):
                return self.op(ops.BuiltinCallOp, [v], [BOOL], callee="bool").result
            return self.truth(v, arg)

        if not thunks:
            return self.b.constant(name == "all")
        result = truth_of(thunks[0])
        for t in thunks[1:]:
            result = self.short_circuit(op, result, lambda t=t: truth_of(t), node)
        return result

    def sum_of_list(self, seq: Value, node: cst.CSTNode) -> Value:
        """`sum(xs)` of a list of numbers, or of tensors: Python's own sum when it runs (`0 + x0 +
        x1 ...`, so the int 0 of an empty list), typed a tensor; shape propagation gives it the
        items' type where they are known and alike."""
        elem = seq.type.elem  # type: ignore[attr-defined]
        if isinstance(elem, TensorType):
            return self.op(ops.BuiltinCallOp, [seq], [TensorType()], callee="sum").result
        if elem not in (INT, FLOAT, BOOL):
            raise self.error(node, f"sum() of a list of {elem} is not supported",
                             "sum() takes numbers here; add tensors in a for loop, or torch.stack(xs).sum(0)")
        return self.op(ops.BuiltinCallOp, [seq], [INT if elem == BOOL else elem], callee="sum").result

    def list_of(self, seq: Value, node: cst.CSTNode) -> Value:
        """`list(seq)`: a new list holding seq's items (a shallow copy of a list); a tuple's
        items must have one type."""
        if isinstance(seq.type, ListType) and tuple_when_run(seq):  # a torch.Size: its slice is one too
            return self.op(ops.BuiltinCallOp, [seq], [seq.type], callee="list").result
        if isinstance(seq.type, ListType):
            none = self.b.constant(None)
            return self.op(ops.SliceOp, [seq, none, none, none], [seq.type]).result
        if isinstance(seq.type, TupleType):
            elem = unify_all(list(seq.type.elems)) if seq.type.elems else None
            if elem is None:
                raise self.error(node, f"list() of a {seq.type}: " + (
                    "its items have different types, and a list holds one type" if seq.type.elems
                    else "the type of an empty list is not known"),
                    "keep the tuple, or annotate an empty list: `xs: list[Tensor] = []`")
            items = [self._getter(seq, i)() for i in range(len(seq.type.elems))]
            return self.op(ops.ListOp, items, [ListType(TENSOR if isinstance(elem, TensorType) else elem)]).result
        raise self.error(node, f"list() of {a_type(seq.type)} is not supported",
                         "list() takes a list or a tuple in compiled code"
                         + ("; for a tensor's rows use list(t.unbind(0))" if isinstance(seq.type, TensorType) else ""))

    def _getter(self, seq: Value, i: int) -> Callable[[], Value]:
        def get() -> Value:
            return self.op(ops.GetItemOp, [seq, self.b.constant(i)], [seq.type.elems[i]]).result  # type: ignore[attr-defined]
        return get

    def comprehension_elements(self, node: cst.GeneratorExp | cst.ListComp) -> list[Callable[[], Value]]:
        """One function per element of `(elt for target in iterable)`, each lowering `elt` with
        the target bound to that element (in a scope of its own, as in Python)."""
        comp = node.for_in
        if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
            raise self.error(node, "only a single `for` without `if` is supported in a generator expression or comprehension",
                             "write a for loop")
        it = comp.iter
        count: int | None = None
        seq: Value | None = None
        if isinstance(it, cst.Call) and self.source.global_name(it.func) == "builtins.range" and self.env.get("range") is None:
            bounds = [self.expr(a.value) for a in it.args]
            consts = [self.constant_int(b) for b in bounds]
            if all(c is not None for c in consts) and 1 <= len(consts) <= 3 and not any(a.keyword for a in it.args):
                items = list(range(*consts))  # type: ignore[arg-type]
                elements = [lambda k=k: self.b.constant(k) for k in items]
                count = len(items)
        else:
            seq = self.expr(it)
            if isinstance(seq.type, TupleType):
                count = len(seq.type.elems)
                elements = [self._getter(seq, i) for i in range(count)]
        if count is None:
            raise self.error(node, f"{describe(node)} are only supported over a tuple or range(<constant>)",
                             "write a for loop (e.g. accumulate in a variable)")
        target = comp.target

        def element(get: Callable[[], Value]) -> Callable[[], Value]:
            def lower() -> Value:
                saved = self.env
                self.env = saved.copy()
                try:
                    self.bind_target(target, get())  # type: ignore[attr-defined]
                    return self.expr(node.elt)
                finally:
                    self.env = saved
            return lower

        return [element(g) for g in elements]

    def next_call(self, node: cst.Call) -> Value:
        """`next(iter(xs))` of a list or tuple: its first item (StopIteration when there is
        none, as Python); `next(self.parameters())` / `next(self.buffers())` (also in `iter()`):
        the module's first, as torch orders them (a live instance's, or ahead of time one of
        the class's own)."""
        if len(node.args) != 1 or node.args[0].star or node.args[0].keyword is not None:
            raise self.error(node, "next() with a default is not supported", NEXT_HINT)
        arg = node.args[0].value
        if isinstance(arg, cst.Call) and self.source.global_name(arg.func) == "builtins.iter" \
                and self.env.get("iter") is None and len(arg.args) == 1 and not arg.args[0].star:
            arg = arg.args[0].value
        if isinstance(arg, cst.Call) and not arg.args and isinstance(arg.func, cst.Attribute) \
                and isinstance(arg.func.value, cst.Name) and arg.func.value.value == "self" \
                and arg.func.attr.value in ("parameters", "buffers") and self.class_info is not None \
                and self.self_value is not None and arg.func.attr.value not in self.class_info.methods:
            return self.first_tensor_of_self(node, arg.func.attr.value)
        seq = self.expr(arg)
        if isinstance(seq.type, TupleType) and seq.type.elems:
            return self._getter(seq, 0)()
        if isinstance(seq.type, ListType):
            empty = self.op(ops.UnaryOp, [seq], [BOOL], op="not").result
            self.raise_when(empty, "StopIteration", called=False)  # type: ignore[attr-defined]
            return self.op(ops.GetItemOp, [seq, self.b.constant(0)], [seq.type.elem]).result
        raise self.error(node, f"next() of {a_type(seq.type)} is not supported", NEXT_HINT)

    def first_tensor_of_self(self, node: cst.Call, kind: str) -> Value:
        """The first of `self.parameters()` / `self.buffers()`: a read by its path."""
        assert self.class_info is not None and self.self_value is not None
        instance = self.class_info.instance
        if instance is not None:
            named = instance.named_parameters() if kind == "parameters" else instance.named_buffers()
            path = next(iter(named), (None,))[0]
        else:  # ahead of time: torch lists the module's own before its submodules'
            own = "parameter" if kind == "parameters" else "buffer"
            path = next((n for n, a in self.class_info.attrs.items() if a.kind == own and a.type != NONE), None)
        if path is None:
            raise self.error(node, f"the compiler cannot tell which is the first of `self.{kind}()`"
                             + ("" if instance is None else f": `{type(instance).__name__}` has none"), NEXT_HINT)
        obj, info = self.self_value, self.class_info
        parts = path.split(".")
        for part in parts[:-1]:
            found = info.attrs.get(part) if info is not None else None
            if found is None or found.kind != "module":
                raise self.error(node, f"the first of `self.{kind}()` is `self.{path}`, which the compiler cannot read",
                                 NEXT_HINT)
            obj = self.op(ops.GetAttrOp, [obj], [found.type], attr=part).result
            info = self.ctx.class_named(found.type.qualname) if isinstance(found.type, ModuleType) else None
        return self.op(ops.GetAttrOp, [obj], [TENSOR], attr=parts[-1]).result

    def isinstance_call(self, node: cst.Call) -> Value:
        if len(node.args) != 2:
            raise self.error(node, "isinstance takes two arguments")
        value = self.expr(node.args[0].value)
        kinds = node.args[1].value
        names = [e.value for e in kinds.elements] if isinstance(kinds, cst.Tuple) else [kinds]
        if isinstance(value.type, (ModuleType, ModuleListType)):
            return self.module_isinstance(value, names)
        result = False
        for n in names:
            qual = self.source.global_name(n)
            if qual not in PY_TYPES_FOR_ISINSTANCE:
                raise self.error(n, "isinstance is supported for Tensor, int, float, bool, str, tuple and list")
            want = PY_TYPES_FOR_ISINSTANCE[qual]
            t = value.type
            if isinstance(t, OptionalType) or t == ANY:
                raise self.error(node, "isinstance on a value whose type is not fixed is not supported",
                                 "use `is None` / `is not None` for Optional values")
            if qual == "builtins.tuple":
                result = result or isinstance(t, TupleType) and not isinstance(t, DataclassType) or tuple_when_run(value)
            elif qual == "builtins.list":
                result = result or isinstance(t, ListType) and not tuple_when_run(value)
            elif want == INT:
                result = result or t in (INT, BOOL)
            elif want == TENSOR:
                result = result or isinstance(t, TensorType)
            else:
                result = result or t == want
        return self.b.constant(result, BOOL)

    def module_isinstance(self, module: Value, names: list[cst.BaseExpression]) -> Value:
        """`isinstance(t, nn.Identity)` of a module: decided when compiling from the class the
        module has (the instance's, script(instance, ...); ahead of time, a torch layer or a
        class of this file, by name), under an entry check that the module is of that class."""
        container = isinstance(module.type, ModuleListType)
        if container:  # (a subclass that keeps Sequential's forward passes its check too)
            qualname = "torch.nn.Sequential" if module.type.kind == "Sequential" else "torch.nn.ModuleList"  # type: ignore[union-attr]
        else:
            qualname = module.type.qualname  # type: ignore[union-attr]
        info = self.ctx.class_named(qualname) if not container else None
        actual: type | None = None
        if info is not None and info.instance is not None:
            actual = type(info.instance)
        elif qualname.startswith("torch.nn."):
            actual = getattr(nn, qualname[len("torch.nn."):], None)
        result = False
        for n in names:
            qual = self.source.global_name(n)
            wanted = self.ctx.functions.class_object(self.source, n) if self.ctx.functions is not None else None
            if wanted is None and qual is not None and qual.startswith("torch.nn."):
                wanted = getattr(nn, qual[len("torch.nn."):], None)
            if isinstance(wanted, type) and actual is not None and not (container and wanted is not actual
                                                                        and issubclass(wanted, actual)):
                result = result or issubclass(actual, wanted)
            elif qual is not None and qual in self.source.classes and actual is None:
                result = result or qual == qualname.split("@")[0]  # (ahead of time: the class itself)
            else:
                raise self.error(n, f"isinstance of a module with `{self.source.code(n)}` is not decided when compiling",
                                 "name a torch layer or a module class")
        self.op(ops.AssumeClassOp, [module], [], qualname=qualname)
        return self.b.constant(result, BOOL)

"""Lowering of calls, told apart by what they call: methods of `self` and submodules (the rest in
lower_module_calls.py), torch functions and tensor methods (checked against torch's schemas:
`torch_op`), `math`, Python builtins (lower_builtins.py), lookups of what to call made when
compiling, list and dict methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    NamedTupleType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    fits,
    is_subtype,
    tuple_like,
    unify,
)
from ir.core.pymethods import DICT_READS, STR_METHODS
from ir.torchapi.callinfo import effect_attributes
from ir.torchapi.signatures import (
    SignatureError,
    is_known_function,
    resolve_function,
    resolve_method,
)
from transpiler.annotations import dataclass_construction_error, named_tuple_defaults, named_tuple_type
from transpiler.check import left_to_python
from transpiler.classinfo import module_class_names
from transpiler.context import GlobalRef
from transpiler.expr_messages import a_type

if TYPE_CHECKING:
    from transpiler.classinfo import ClassInfo


JIT_ANNOTATE = {"torch.jit.annotate", "torch._jit_internal.annotate"}
# Calls whose value in eager code is known: compiled code computes what eager computes.
CONSTANT_CALLS = {"torch.jit.is_scripting": False, "torch.jit.is_tracing": False,
                  "torch.jit._script.is_scripting": False, "torch._jit_internal.is_scripting": False}
MATH_INT_RESULTS = {"math.floor", "math.ceil", "math.trunc", "math.gcd", "math.factorial", "math.comb"}
MATH_BOOL_RESULTS = {"math.isnan", "math.isinf", "math.isfinite"}
# Calls whose sizes may come as varargs or as one sequence, with the same meaning.
SIZE_VARARGS_METHODS = frozenset({"view", "reshape", "expand", "permute", "repeat", "tile", "flip",
                                  "new_zeros", "new_ones", "new_empty"})
SIZE_VARARGS_FUNCTIONS = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"})


class CallLowering:
    """Mixin of ExpressionLowering: calls, told apart by what they call."""

    def call_arguments(self, node: cst.Call, sizes: bool = False) -> tuple[list[Value], list[str], list[Value], list[cst.Arg]]:
        """The call's positional and keyword values. `sizes`: the callee takes its sizes as
        varargs or as one sequence alike (`x.view(*shape, -1)` is `x.view((*shape, -1))`)."""
        args: list[Value] = []
        kwnames: list[str] = []
        kwargs: list[Value] = []
        starred: set[int] = set()
        for arg in node.args:
            if arg.star and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.empty_stars:
                continue  # `**kwargs` of a function whose compiled callers pass none
            if arg.star == "*" and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.star_tuples:
                if kwnames:
                    raise self.error(arg, "positional argument after a keyword argument")
                args.extend(self.star_tuples[self.env.get(arg.value.value)])  # type: ignore[index]
                continue
            if arg.star == "**" and isinstance(arg.value, cst.Name) and self.env.get(arg.value.value) in self.star_items:
                made = self.env.get(arg.value.value)
                if made in self.dicts_made and (made.uses or self.dicts_made[made] != self.loop_depth):  # type: ignore[union-attr]
                    raise self.error(arg, "`**` of a dict that other code may have changed is not supported",
                                     "pass the keywords one by one")
                for k, v in self.star_items[self.env.get(arg.value.value)].items():  # type: ignore[index]
                    kwnames.append(k)
                    kwargs.append(v)
                continue
            if arg.star == "*" and not kwnames:
                spread = self.expr(arg.value)
                if isinstance(spread.type, TupleType):  # `f(*pair)`: its elements
                    args.extend(self.op(ops.UnpackOp, [spread], list(spread.type.elems)).results)
                    continue
                if spread.type == ListType(INT) and sizes:  # `x.reshape(*shape, -1)`: one sequence of sizes
                    args.append(spread)
                    starred.add(len(args) - 1)
                    continue
            if arg.star:
                raise self.error(arg, f"`{arg.star}` arguments are not supported", "pass the arguments one by one")
            if arg.keyword is None:
                if kwnames:
                    raise self.error(arg, "positional argument after a keyword argument")
                args.append(self.expr(arg.value))
            else:
                kwnames.append(arg.keyword.value)
                kwargs.append(self.expr(arg.value))
        if starred:
            if not all(v.type in (INT, ANY) for i, v in enumerate(args) if i not in starred):
                raise self.error(node, "spreading a list into arguments that are not all sizes is not supported",
                                 "pass the sizes as one tuple")
            args = [self.op(ops.SpreadOp, args, [ListType(INT)], starred=tuple(i in starred for i in range(len(args)))).result]
        return args, kwnames, kwargs, list(node.args)

    def call(self, node: cst.Call) -> Value:
        func = node.func
        # self.method(...) and self.submodule(...)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self" \
                and self.class_info is not None and func.attr.value in self.class_info.methods \
                and self.env.get("self") is not None:
            method = self.class_info.methods[func.attr.value]
            if left_to_python(self.class_info.method_source(func.attr.value) or self.source, method):
                return self.call_python_method(node, method)
            return self.call_method_of_self(node, func.attr.value)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) and not func.value.args \
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super" \
                and func.attr.value not in ("__call__", "__init__") and self.class_info is not None \
                and self.env.get("self") is not None:
            return self.call_base_method(node, func.attr.value)
        if isinstance(func, cst.Attribute) and func.attr.value == "__call__" and isinstance(func.value, cst.Call) \
                and isinstance(func.value.func, cst.Name) and func.value.func.value == "super" and not func.value.args \
                and self.class_info is not None and self.class_info.call_override is not None \
                and self.node.name.value == "__call__":  # type: ignore[attr-defined]
            return self.super_call(node)
        if isinstance(func, cst.Subscript) and isinstance(func.value, cst.Name) and self.env.get(func.value.value) is None \
                and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
            table = self.source.function_table(func.value.value)
            if table is not None:
                return self.table_call(node, table, func.slice[0].slice.value)
        qual = self.source.global_name(func)
        base_is_local = isinstance(func, (cst.Name, cst.Attribute)) and self._root_is_local(func)
        if qual is not None and not base_is_local:
            return self.call_global(node, qual)
        if isinstance(func, cst.Attribute) and not node.args \
                and func.attr.value in ("items", "values", "keys", "children", "named_children"):
            listed = self.module_dict_view(func)
            if listed is not None:
                return listed
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) \
                and (self.env.get(func.value.value) in self.empty_stars or self.env.get(func.value.value) in self.star_items):
            return self.star_method(node, func.attr.value, self.star_items.get(self.env.get(func.value.value), {}))
        if isinstance(func, cst.Attribute):
            if isinstance(func.value, cst.Name) and func.value.value == "self" and self.self_value is not None:
                callee = self.expr(func)
                if isinstance(callee.type, (ModuleType, ModuleListType)) or callee.type == ANY:
                    return self.module_call(node, callee)
                if isinstance(callee.type, FunctionType) and callee.type.qualname.startswith("torch."):
                    return self.call_torch(node, callee.type.qualname)  # `self.activation = F.relu`
                raise self.error(func, f"`self.{func.attr.value}` is a {callee.type} and cannot be called")
            obj = self.expr(func.value)
            if isinstance(obj.type, (TensorType,)):
                return self.tensor_method(node, obj, func.attr.value)
            if isinstance(obj.type, ListType) and func.attr.value == "copy" and not node.args:
                none = self.b.constant(None)
                return self.op(ops.SliceOp, [obj, none, none, none], [obj.type]).result
            if isinstance(obj.type, ListType) and func.attr.value in ("insert", "pop"):
                return self.insert_or_pop(node, obj, func.attr.value)
            if isinstance(obj.type, ListType) and func.attr.value in ("append", "extend"):
                args, kwnames, kwargs, _ = self.call_arguments(node)
                if len(args) != 1 or kwnames:
                    raise self.error(node, f"list.{func.attr.value} takes one argument")
                if func.attr.value == "append":
                    self.append_to(obj, args[0], node.args[0].value)
                else:
                    self.extend_by(obj, args[0], node.args[0].value)
                return self.b.constant(None)
            layer = self.named_layer(obj, func.attr.value)
            if layer is not None:  # `self.head.fc(x)` of a Sequential built from an OrderedDict
                return self.module_call(node, layer)
            if func.attr.value == "forward" and (isinstance(obj.type, ModuleType) or isinstance(
                    obj.type, ModuleListType) and obj.type.kind == "Sequential"):
                # `down.forward(y)` (hrnet): the call without hooks, which the compiled call of a
                # module has too, its entry check finding the module unhooked
                return self.module_call(node, obj)
            info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
            held = info.attrs.get(func.attr.value) if info is not None else None
            if held is not None and held.kind == "module":  # `self.transformer.wte(idx)`: a submodule's call
                return self.module_call(node, self.module_attribute(func, obj, info))  # type: ignore[arg-type]
            if isinstance(obj.type, ModuleType):
                called = self.submodule_method(node, obj, func.attr.value)
                if called is not None:
                    return called
                raise self.error(func, f"calling a method of submodule ({obj.type}) is not supported",
                                 "call the submodule itself, or move the code into this module")
            if isinstance(obj.type, DictType) and func.attr.value in DICT_READS:
                return self.dict_read(node, obj, func.attr.value)
            if obj.type == STR and func.attr.value in STR_METHODS:
                args, kwnames, kwargs, _ = self.call_arguments(node)
                if kwnames or not all(a.type in (STR, INT) for a in args):
                    raise self.error(node, f"str.{func.attr.value}() takes str or int arguments, by position")
                return self.op(ops.BuiltinCallOp, [obj, *args], [STR_METHODS[func.attr.value]],
                               callee=f"str.{func.attr.value}").result
            if obj.type == ANY:
                raise self.error(func, "calling a method of a value whose type is not known")
            raise self.error(func, f"method `{func.attr.value}` of a value of type {obj.type} is not supported")
        callee = self.expr(func)
        if callee in self.functions_known:  # what a lookup returned (lookup_call)
            signature = self.ctx.looked_up_signature(self.functions_known[callee])
            args, kwnames, kwargs, _ = self.call_arguments(node)
            return self.call_compiled(node, signature, None, args, kwnames, kwargs)
        if isinstance(callee.type, (ModuleType, ModuleListType)) or callee.type == ANY:
            return self.module_call(node, callee)
        raise self.error(func, f"a value of type {callee.type} cannot be called")

    # -- lists and dicts ---------------------------------------------------------------------------
    def table_call(self, node: cst.Call, table: list[tuple[str, cst.BaseExpression]], key_node: cst.BaseExpression) -> Value:
        """`ACTS[self.act](x)` of a module-level table of functions (SourceFile.function_table):
        the entry's function called, where the key is known when compiling; else the key compared
        with each entry's in turn, the matching one called, and Python's KeyError for none. The
        key is read before the arguments, as Python reads the callee first."""
        key = self.expr(key_node)
        known = self.known(key)  # type: ignore[attr-defined]
        quals = [(k, self.source.global_name(v), v) for k, v in table]
        for k, qual, v in quals:
            if qual is None:
                raise self.error(v, f"`{self.source.code(v)}` of the table is not a function compiled code can call")
        if type(known) is str:
            entry = next((qual for k, qual, _ in quals if k == known), None)
            if entry is None:
                raise self.error(key_node, f"{known!r} is not a key of the table", "use one of " + ", ".join(
                    repr(k) for k, _, _ in quals))
            return self.call_global(node, entry)  # type: ignore[arg-type]
        if key.type not in (STR, ANY):
            raise self.error(key_node, f"a key of type {key.type} for a table of str keys")
        return self._table_branch(node, quals, 0, key)

    def _table_branch(self, node: cst.Call, quals: list, i: int, key: Value) -> Value | None:
        if i == len(quals):
            self.op(ops.RaiseOp, [key], [], exc="KeyError", called=True)
            return None
        cond = self.op(ops.CompareOp, [key, self.b.constant(quals[i][0])], [BOOL], op="==").result
        return self.either(cond, lambda: self.call_global(node, quals[i][1]),  # type: ignore[attr-defined]
                           lambda: self._table_branch(node, quals, i + 1, key), node,
                           "the table's functions return {a} and {c}")

    def insert_or_pop(self, node: cst.Call, listed: Value, method: str) -> Value:
        """`xs.insert(i, v)` and `xs.pop([i])` of a list, as Python's own (an IndexError of pop
        stays Python's). The list is then not one the lists pass follows item by item."""
        args, kwnames, kwargs, _ = self.call_arguments(node)
        elem = listed.type.elem  # type: ignore[attr-defined]
        if kwnames or (len(args) != 2 if method == "insert" else len(args) > 1) \
                or not all(a.type in (INT, BOOL) for a in args[:1]):
            raise self.error(node, "list.insert takes an index and a value" if method == "insert"
                             else "list.pop takes an optional index")
        if method == "pop":
            return self.op(ops.ListPopOp, [listed, *args], [elem]).result
        if not fits(args[1].type, elem):
            raise self.error(node.args[1], f"inserting a {args[1].type} into a list of {elem}")
        self.op(ops.ListInsertOp, [listed, *args], [])
        return self.b.constant(None)

    def dict_read(self, node: cst.Call, d: Value, method: str) -> Value:
        """`d.items()`, `d.keys()`, `d.values()` (a list of what Python's view yields, as
        TorchScript types them) and `d.get(k[, default])` of a dict: Python's own methods when
        they run, their tensors anything the dict may hold (the alias analysis takes a call's
        results to be what its operands reach)."""
        args, kwnames, kwargs, _ = self.call_arguments(node)
        t: DictType = d.type  # type: ignore[assignment]
        if kwnames or (len(args) not in (1, 2) if method == "get" else bool(args)):
            raise self.error(node, f"dict.{method}() takes " + ("a key and an optional default" if method == "get"
                                                                else "no arguments"))
        if method == "get":
            if not fits(args[0].type, t.key):
                raise self.error(node.args[0], f"a key of type {args[0].type} for a dict of {t.key} keys")
            default = args[1].type if len(args) == 2 else NONE
            result = unify(t.value, default) if default != NONE else OptionalType(t.value)
            if result is None:
                raise self.error(node, f"dict.get() of {t.value} values with a {default} default",
                                 "give a default of the values' type, or None")
        else:
            result = ListType({"items": TupleType((t.key, t.value)), "keys": t.key, "values": t.value}[method])
        return self.op(ops.BuiltinCallOp, [d, *args], [result], callee=f"dict.{method}").result

    def extend_by(self, listed: Value, other: Value, node: cst.CSTNode) -> None:
        """`xs.extend(other)`, `xs += other`: a list or a tuple of elements the list holds."""
        elem = listed.type.elem  # type: ignore[attr-defined]
        elems = [other.type.elem] if isinstance(other.type, ListType) else \
            list(other.type.elems) if isinstance(other.type, TupleType) else None
        if elems is None or not all(fits(t, elem) for t in elems):
            raise self.error(node, f"extending a {listed.type} by a {other.type}")
        self.op(ops.ListExtendOp, [listed, other], [])

    def append_to(self, listed: Value, value: Value, node: cst.CSTNode) -> None:
        elem = listed.type.elem  # type: ignore[attr-defined]
        if not fits(value.type, elem):  # (Any: a module's result in generic code, as Python has it)
            raise self.error(node, f"appending a {value.type} to a list of {elem}",
                             f"an unannotated `[]` is a list of tensors, as in TorchScript: annotate it, "
                             f"e.g. `xs: list[{value.type}] = []`" if elem == TENSOR else None)
        self.op(ops.ListAppendOp, [listed, value], [])

    def star_method(self, node: cst.Call, method: str, items: dict[str, Value]) -> Value:
        """`kwargs.get("k", d)` of `**kwargs` whose keywords are known: none where compiled
        callers pass none (the entry checks that its caller passed none), `items` in a variant
        compiled for one call or those an entry's decorators pass; `kwargs.pop("k", d)` of a key
        it does not hold; `kwargs.items()` and so on when there are none."""
        if method == "get" and 1 <= len(node.args) <= 2 and not any(a.keyword or a.star for a in node.args):
            key = self.expr(node.args[0].value)
            if items and not isinstance(self.known(key), str):
                raise self.error(node.args[0], "`.get()` of `**kwargs` with a key not known when compiling is not supported")
            if self.known(key) in items:
                return items[self.known(key)]
            return self.expr(node.args[1].value) if len(node.args) == 2 else self.b.constant(None)
        if method == "pop" and len(node.args) == 2 and not any(a.keyword or a.star for a in node.args) \
                and isinstance(self.known(key := self.expr(node.args[0].value)), str) and self.known(key) not in items:
            return self.expr(node.args[1].value)  # (popping a key it does not hold changes nothing)
        if method in ("items", "keys", "values") and not node.args and not items:
            return self.b.constant(())
        raise self.error(node, f"`.{method}()` of `**kwargs` is not supported")

    def module_dict_view(self, func: cst.Attribute) -> Value | None:
        """`d.items()` / `values()` / `keys()` of an nn.ModuleDict, `m.children()` /
        `named_children()` of any module, seen through a live instance (script(instance, ...)):
        a tuple of its entries in order, so a loop over it unrolls. (children() skips None and
        yields a module registered twice once, as eager's does.)"""
        method = func.attr.value
        if isinstance(func.value, cst.Name) and func.value.value == "self":
            info, obj = self.class_info, self.self_value
        else:
            obj = self.expr(func.value)
            info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        children = method in ("children", "named_children")
        if info is None or obj is None or not isinstance(info.instance, nn.ModuleDict if not children else nn.Module):
            return None
        return self.listed_modules(obj, info, method)

    def listed_modules(self, obj: Value, info: ClassInfo, method: str) -> Value | None:
        """A tuple of the submodules of module `obj` (`info` of its class variant, from a live
        instance), in order: as `method` ("children", "named_children", "values", "items",
        "keys", or "iter": what iterating over a Sequential or ModuleList yields) lists them;
        None where one is not known as a module."""
        assert info.instance is not None
        children = method in ("children", "named_children")
        entries, seen = [], set()
        for name, child in info.instance._modules.items():
            if children and (child is None or id(child) in seen):
                continue
            seen.add(id(child))
            attr = info.attrs.get(name)
            if attr is None or attr.kind != "module":
                return None
            key = self.b.constant(name)
            module = self.op(ops.GetAttrOp, [obj], [attr.type], attr=name).result
            if method == "keys":
                entries.append(key)
            elif method in ("values", "children", "iter"):
                entries.append(module)
            else:
                entries.append(self.op(ops.TupleOp, [key, module], [TupleType((STR, attr.type))]).result)
        return self.op(ops.TupleOp, entries, [TupleType(tuple(e.type for e in entries))]).result

    def iterated_modules(self, obj: Value) -> Value | None:
        """What a loop over module `obj` walks when its class is a Sequential or ModuleList with
        a forward of its own (`class SequentialList(nn.Sequential)` looping over `self`): a
        tuple of its layers, as for a plain one; else None."""
        info = self.ctx.class_named(obj.type.qualname) if isinstance(obj.type, ModuleType) else None
        if info is None or not isinstance(info.instance, (nn.Sequential, nn.ModuleList)):
            return None
        return self.listed_modules(obj, info, "iter")

    def _root_is_local(self, node: cst.BaseExpression) -> bool:
        while isinstance(node, cst.Attribute):
            node = node.value
        return isinstance(node, cst.Name) and self.env.get(node.value) is not None

    # -- globals: torch, math, lookups -------------------------------------------------------------
    def call_global(self, node: cst.Call, qual: str) -> Value:
        if qual in CONSTANT_CALLS:
            if node.args:
                raise self.error(node, f"{qual}() takes no arguments")
            # script(instance, ...) compiles what TorchScript's recursive scripting would: code
            # written for it keeps eager-only work (API-usage logging, checkpointing) under
            # `not torch.jit.is_scripting()`, so there it is True, as under TorchScript. Not in
            # code for autograd, which must do eager's eager-only work (densenet's checkpointing,
            # which under TorchScript raises), unless that work does not compile (skip_eager_only).
            scripting = self.ctx.recursive and (not self.ctx.autograd or self.ctx.skip_eager_only) \
                and qual.endswith("is_scripting")
            return self.b.constant(True if scripting else CONSTANT_CALLS[qual], BOOL)
        if qual.startswith("builtins."):
            return self.call_builtin(node, qual[len("builtins."):])
        if self.ctx.functions is not None and not qual.startswith(("torch.", "math.")):
            alias = self.ctx.functions.torch_name(self.source, node.func)
            if alias is not None:  # a torch function under another name (`from .utils import _assert`)
                return self.call_global(node, alias)
        signature = self.ctx.function_signature(qual, self.source, node.func) or self.ctx.static_signature(qual)
        if signature is not None:
            args, kwnames, kwargs, _ = self.call_arguments(node)
            return self.call_compiled(node, signature, None, args, kwnames, kwargs)
        named = named_tuple_type(self.source, qual, module_class_names(self.source)) if qual in self.source.classes else None
        if named is not None:
            return self.named_tuple(node, named)
        if qual in self.source.functions or qual in self.source.classes:
            raise self.error(node.func, f"`{qual}` is not compiled",
                             f"decorate `{qual}` with @script, or create it outside the compiled code")
        if qual.startswith("math."):
            return self.call_math(node, qual)
        if qual == "torch._assert":
            return self.torch_assert(node)
        if qual in JIT_ANNOTATE:
            return self.jit_annotate(node)
        if qual == "torch.Size":
            return self.torch_size(node)
        if qual.startswith("torch."):
            return self.call_torch(node, qual)
        looked_up = self.lookup_call(node) if self.ctx.permissive and self.ctx.functions is not None else None
        if looked_up is not None:
            return looked_up
        raise self.error(node.func, f"calls of `{qual}` are not supported in compiled code",
                         "only torch.*, torch.nn.functional.*, math.*, builtins and @script code can be called")

    def lookup_call(self, node: cst.Call) -> Value | None:
        """A call of a module-level object with arguments known now (literals, settings read from
        the live instance, module-level names) that returns a function with source code, as HF's
        `ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, default)`: the
        call is made now, and calls of its result compile that function. A py.check_lookup
        makes the call again on entry and checks it returns the same function (specialize)."""
        if any(a.keyword is not None or a.star for a in node.args):
            return None
        operands: list[Value] = []
        args: list[tuple] = []
        for arg in node.args:
            qual = self.source.global_name(arg.value) if isinstance(arg.value, cst.Name) else None
            if qual is not None and "." not in qual and self.env.get(arg.value.value) is None:  # type: ignore[attr-defined]
                args.append(("global", qual))
                continue
            v = self.expr(arg.value)
            known = self.known(v)
            if known is self._UNKNOWN and isinstance(v.owner, ops.GetAttrOp) and "after" not in v.owner.attributes \
                    and isinstance(v.owner.operands[0].type, ModuleType):  # a module's setting (`self.impl`)
                info = self.ctx.class_named(v.owner.operands[0].type.qualname)
                found_attr = info.attrs.get(v.owner.attributes["attr"]) if info is not None else None
                known = found_attr.value if found_attr is not None and found_attr.has_value else self._UNKNOWN
            if known is not None and type(known) not in (bool, int, float, str):
                return None
            args.append(("const", known))
            operands.append(v)
        assert self.ctx.functions is not None
        found = self.ctx.functions.lookup(self.source, node.func, [GlobalRef(a[1]) if a[0] == "global" else a[1] for a in args])
        if found is None:
            return None
        result = self.op(ops.CheckLookupOp, operands, [FunctionType(found.qualname)], module=self.source.module_name or "",
                         callee=self.source.code(node.func), args=tuple(args), returns=(found.module, found.qualname)).result
        self.functions_known[result] = found
        return result

    def torch_assert(self, node: cst.Call) -> Value:
        """`torch._assert(cond, message)` is `assert cond, message`: AssertionError(message)
        when cond (a bool, or a one-element tensor) is false. The message is built only then."""
        if len(node.args) != 2 or any(a.star or a.keyword is not None and a.keyword.value not in ("condition", "message")
                                      for a in node.args):
            raise self.error(node, "torch._assert takes a condition and a message")
        cond_node, message_node = node.args[0].value, node.args[1].value
        cond = self.condition_of(self.expr(cond_node), cond_node)
        lazy = isinstance(message_node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))
        message = None if lazy else self.expr(message_node)
        failed = self.op(ops.UnaryOp, [cond], [BOOL], op="not").result
        self.raise_when(failed, "AssertionError",  # type: ignore[attr-defined]
                        lambda: [message if message is not None else self.expr(message_node)])
        return self.b.constant(None)

    def named_tuple(self, node: cst.Call, t: NamedTupleType) -> Value:
        """`Output(logits, tokens=x)` of a NamedTuple class of the file: its fields bound as
        Python binds them (defaults from the class), made as that class at run time."""
        if isinstance(t, DataclassType):
            problem = dataclass_construction_error(self.source, t.name)
            if problem is not None:
                raise problem
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if len(args) > len(t.fields):
            raise self.error(node, f"{t.name}() takes {len(t.fields)} fields, {len(args)} given")
        bound = dict(zip(t.fields, args))
        for k, v in zip(kwnames, kwargs):
            if k not in t.fields or k in bound:
                raise self.error(node, f"{t.name}() has no field `{k}`" if k not in t.fields
                                 else f"{t.name}() got two values for `{k}`")
            bound[k] = v
        defaults = named_tuple_defaults(self.source, t.name)
        items = []
        for field, declared in zip(t.fields, t.elems):
            if field not in bound:
                if field not in defaults:
                    raise self.error(node, f"{t.name}() is missing the field `{field}`")
                bound[field] = self.expr(defaults[field])
            if not fits(bound[field].type, declared):
                raise self.error(node, f"field `{field}` of {t.name} is {declared}, got {bound[field].type}")
            items.append(bound[field])
        return self.op(ops.TupleOp, items, [tuple_like(t, tuple(v.type for v in items))], named=t.name,
                       module=self.source.module_name or "").result

    def jit_annotate(self, node: cst.Call) -> Value:
        """`torch.jit.annotate(T, value)`: `value` as a value of type T, as `v: T = value` is
        (an empty list of T's elements: `torch.jit.annotate(List[Tensor], [])`)."""
        from transpiler.annotations import annotation_type
        from transpiler.classinfo import module_class_names

        if len(node.args) != 2 or any(a.keyword is not None or a.star for a in node.args):
            raise self.error(node, "torch.jit.annotate() takes a type and a value")
        declared = annotation_type(self.source, node.args[0].value, module_class_names(self.source))
        return self.declared_value(declared, node.args[1].value, None, "annotated as")  # type: ignore[attr-defined]

    def torch_size(self, node: cst.Call) -> Value:
        """`torch.Size(sizes)` of a list or tuple of ints: a tuple of ints at run time, as
        `x.size()` is (a tuple type where the number of sizes is known now)."""
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames or len(args) > 1:
            raise self.error(node, "torch.Size takes one list or tuple of ints")
        seq = args[0] if args else self.b.constant(())
        t = seq.type
        elems = t.elems if isinstance(t, TupleType) else (t.elem,) if isinstance(t, ListType) else None
        if elems is None or not all(e in (INT, ANY) for e in elems):
            raise self.error(node.args[0] if node.args else node, f"torch.Size of {a_type(t)}",
                             "pass a list or a tuple of ints (x.shape and x.size() already are sizes)")
        if isinstance(seq.owner, ops.ListOp):  # a display: its length is known
            t = TupleType(tuple(v.type for v in seq.owner.operands))
        return self.op(ops.BuiltinCallOp, [seq], [t], callee="torch.Size").result

    def call_torch(self, node: cst.Call, qual: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node, sizes=qual in SIZE_VARARGS_FUNCTIONS)
        consts = self.constant_arguments(args, kwnames, kwargs)
        try:
            info = resolve_function(qual, [a.type for a in args], dict(zip(kwnames, (k.type for k in kwargs))), consts)
        except SignatureError as e:
            at = node.func if not is_known_function(qual) else self.argument_named_in(node, str(e))
            raise self.error(at, str(e), getattr(e, "hint", None)) from None
        return self.torch_op(ops.TorchCallOp, info, args + kwargs, kwnames, callee=qual)

    def tensor_method(self, node: cst.Call, obj: Value, method: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node, sizes=method in SIZE_VARARGS_METHODS)
        consts = self.constant_arguments(args, kwnames, kwargs)
        try:
            info = resolve_method(method, obj.type, [a.type for a in args], dict(zip(kwnames, (k.type for k in kwargs))), consts)
        except SignatureError as e:
            raise self.error(self.argument_named_in(node, str(e)), str(e), getattr(e, "hint", None)) from None
        return self.torch_op(ops.TensorMethodOp, info, [obj] + args + kwargs, kwnames, method=method)

    def argument_named_in(self, node: cst.Call, message: str) -> cst.CSTNode:
        """The keyword argument a signature error complains about, else the whole call."""
        for arg in node.args:
            if arg.keyword is not None and f"keyword argument '{arg.keyword.value}'" in message:
                return arg
        return node

    def torch_op(self, cls: type[ops.Operation], info: Any, operands: list[Value], kwnames: list[str], **attrs: Any) -> Value:
        attrs = dict(attrs)
        if kwnames:
            attrs["kwnames"] = tuple(kwnames)
        attrs.update(effect_attributes(info))
        result_types = [] if info.result == NONE else [info.result]
        op = self.op(cls, operands, result_types, **attrs)
        if info.result_fields and op.results:  # (`.values`, `.indices` of a torch.return_types tuple)
            self.result_fields[op.result] = info.result_fields
        return op.result if op.results else self.b.constant(None)

    def constant_arguments(self, args: list[Value], kwnames: list[str], kwargs: list[Value]) -> dict:
        consts: dict[int | str, object] = {}
        for i, a in enumerate(args):
            if isinstance(a.owner, ops.ConstantOp):
                consts[i] = a.owner.value
        for k, v in zip(kwnames, kwargs):
            if isinstance(v.owner, ops.ConstantOp):
                consts[k] = v.owner.value
        return consts

    def call_math(self, node: cst.Call, qual: str) -> Value:
        args, kwnames, kwargs, _ = self.call_arguments(node)
        if kwnames:
            raise self.error(node, f"{qual} takes no keyword arguments")
        for a, arg_node in zip(args, node.args):
            if a.type not in (INT, FLOAT, BOOL, ANY):
                raise self.error(arg_node, f"{qual} takes numbers, not {a.type}", "use the torch function for tensors")
        t = INT if qual in MATH_INT_RESULTS else BOOL if qual in MATH_BOOL_RESULTS else FLOAT
        import math as _math
        if not callable(getattr(_math, qual[len("math."):], None)):
            raise self.error(node.func, f"`{qual}` is not a function of the math module")
        return self.op(ops.BuiltinCallOp, args, [t], callee=qual).result


def tuple_for_list(given: Type, declared: Type) -> bool:
    """A tuple whose items are all of the list's element type, passed for a `list[T]`."""
    return isinstance(given, TupleType) and isinstance(declared, ListType) \
        and all(is_subtype(e, declared.elem) for e in given.elems)


"""Lowering of assignments: `AssignmentLowering`, a mixin of FunctionLowerer. `x = v`, `a, b = t`
(unpacking), `xs[i] = v` and `d[k] = v`, `t[...] = v` on a tensor, `self.attr = v`; `x: T = v`
(a declared type); `x += v` (in place on a tensor, as Python does)."""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    BOOL,
    INT,
    STR,
    DataclassType,
    DictType,
    ListType,
    OptionalType,
    TensorType,
    TupleType,
    Type,
    fits,
    is_subtype,
    tuple_like,
    unify,
    unify_all,
)
from transpiler.annotations import annotation_type, named_tuple_type
from transpiler.classinfo import module_class_names
from transpiler.diagnostics import UserError
from transpiler.env import Exits
from transpiler.lower_operators import AUG_OPS, tuple_when_run


class AssignmentLowering:
    """Mixin of FunctionLowerer: assignment statements and the targets they bind."""

    def assign_stmt(self, node: cst.Assign) -> Exits:
        value = self.expr(node.value, name=_single_name(node.targets))
        for target in node.targets:
            self.assign(target.target, value)
        return Exits()

    def annotated_assign(self, node: cst.AnnAssign) -> Exits:
        try:
            declared = annotation_type(self.source, node.annotation.annotation, module_class_names(self.source))
        except UserError:
            if not self.ctx.permissive or node.value is None:
                raise
            declared = ANY  # Python does not evaluate a local's annotation: a plain assignment
        if node.value is None:
            raise self.error(node, "a declaration without a value is not supported", "assign a value")
        name = node.target.value if isinstance(node.target, cst.Name) else None
        self.assign(node.target, self.declared_value(declared, node.value, name, "assigned to a name declared"))
        return Exits()

    def declared_value(self, declared: Type, node: cst.BaseExpression, name: str | None, what: str) -> Value:
        """`node` lowered as a value of the `declared` type (`xs: List[Tensor] = []`,
        `torch.jit.annotate(List[Tensor], [])`): an empty list display is a list of its element
        type; another value must fit it, and an Optional is refined to it."""
        if isinstance(node, cst.List) and not node.elements:
            value = self.make_list([], declared, node)
        elif isinstance(node, cst.Dict) and not node.elements and isinstance(declared, DictType):
            value = self.op(ops.DictOp, [], [declared], keys=()).result
        else:
            value = self.expr(node, name=name)
        fits = is_subtype(value.type, declared) or declared.__class__ is type(value.type) and unify(declared, value.type)
        if self.ctx.permissive and (declared == ANY or not fits):
            declared = value.type  # (nor checks it)
        if not is_subtype(value.type, declared) and not (declared.__class__ is type(value.type) and unify(declared, value.type)):
            raise self.error(node, f"value of type {value.type} {what} {declared}")
        if value.type != declared and isinstance(declared, OptionalType):
            value = self.op(ops.RefineOp, [value], [declared]).result
        return value

    def aug_assign(self, node: cst.AugAssign) -> Exits:
        op = AUG_OPS[type(node.operator)]
        target = node.target
        if isinstance(target, cst.Subscript):
            # y[i] += v is: t = y[i]; t += v; y[i] = t (in place on the selected part).
            base = self.expr(target.value)
            if not isinstance(base.type, TensorType):
                raise self.error(target, f"augmented item assignment on a {base.type} is not supported")
            items, operands = self.index_items(target.slice)
            part = self.op(ops.IndexOp, [base, *operands], [TensorType()], items=items).result
            rhs = self.expr(node.value)
            updated = self.inplace(op, part, rhs, node)
            self.op(ops.IndexPutOp, [base, *operands, updated], [], items=items)
            return Exits()
        current = self.expr(target)
        if isinstance(current.type, ListType) and op == "+":
            self.extend_list(current, node.value)  # (list.__iadd__: the one list object grows)
            return Exits()
        rhs = self.expr(node.value)
        if isinstance(current.type, TensorType):
            result = self.inplace(op, current, rhs, node)
            if isinstance(target, cst.Attribute):
                return Exits()  # the tensor attribute was updated in place; Python's re-set is a no-op
        else:
            result = self.binary(op, current, rhs, node)
        if isinstance(target, cst.Name):
            result.name = target.value
            self.env.set(target.value, result)
        else:
            self.bind_target(target, result)
        return Exits()

    def assign(self, target: cst.BaseExpression, value: Value) -> None:
        self.bind_target(target, value)

    def bind_target(self, target: cst.BaseExpression, value: Value) -> None:
        if isinstance(target, cst.Name):
            if value.name is None and isinstance(value.owner, ops.Operation) and not isinstance(value.owner, ops.ConstantOp):
                value.name = target.value
            self.env.set(target.value, value)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            if any(isinstance(e, cst.StarredElement) for e in elements):
                self.bind_starred(target, value)
                return
            t = value.type
            n = len(elements)
            if isinstance(t, TupleType):
                if len(t.elems) != n:
                    raise self.error(target, f"cannot unpack a tuple of {len(t.elems)} values into {n} names",
                                     f"write {len(t.elems)} names on the left, or index the tuple")
                types = list(t.elems)
            elif isinstance(t, ListType):
                types = [t.elem] * n
            elif isinstance(t, TensorType):
                raise self.error(target, "unpacking a tensor is not supported", "use t.unbind(0) or index it")
            elif t == ANY and self.ctx.permissive:
                types = [ANY] * n  # a Python object, unpacked as Python does
            else:
                raise self.error(target, f"cannot unpack a value of type {t}")
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in elements]
            unpack = self.op(ops.UnpackObjectOp if t == ANY else ops.UnpackOp, [value], types)
            for r, nm in zip(unpack.results, names):
                r.name = nm
            for e, r in zip(elements, unpack.results):
                self.bind_target(e.value, r)
            return
        if isinstance(target, cst.Subscript):
            base = self.expr(target.value)
            if isinstance(base.type, ListType) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                index = self.expr(target.slice[0].slice.value)
                if index.type not in (INT, BOOL):
                    raise self.error(target.slice[0], f"a list index of type {index.type}; expected int")
                if not is_subtype(value.type, base.type.elem):
                    raise self.error(target, f"assigning a {value.type} into a list of {base.type.elem}")
                self.op(ops.ListSetItemOp, [base, index, value], [])
                return
            if isinstance(base.type, DictType) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                key = self.expr(target.slice[0].slice.value)
                if not is_subtype(key.type, base.type.key):
                    raise self.error(target.slice[0], f"a key of type {key.type} for a dict of {base.type.key} keys")
                if not is_subtype(value.type, base.type.value) and not (
                        isinstance(value.type, TensorType) and isinstance(base.type.value, TensorType)):
                    raise self.error(target, f"storing a {value.type} in a dict of {base.type.value}")
                self.op(ops.DictSetItemOp, [base, key, value], [])
                self.star_items.pop(base, None)  # (what it holds is known when it runs)
                return
            if not isinstance(base.type, TensorType):
                raise self.error(target, f"item assignment on a {base.type} is not supported",
                                 "only tensors, lists and dicts support index assignment in compiled code")
            items, operands = self.index_items(target.slice)
            self.op(ops.IndexPutOp, [base, *operands, value], [], items=items)
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self" \
                and self.self_value is not None and self.class_info is not None:
            attr = target.attr.value
            found = self.class_info.attrs.get(attr)
            if found is None or found.kind == "module":
                raise self.error(target, f"assigning `self.{attr}` is not supported",
                                 "only existing tensor and Python attributes can be assigned")
            if not is_subtype(value.type, found.type) and not (isinstance(found.type, TensorType) and isinstance(value.type, TensorType)):
                raise self.error(target, f"assigning a {value.type} to `self.{attr}` of type {found.type}")
            self.op(ops.SetAttrOp, [self.self_value, value], [], attr=attr)
            self.env.values.pop(f"self.{attr}", None)
            return
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            record = self.env.get(target.value.value)
            if isinstance(record, Value) and isinstance(record.type, DataclassType):
                self.set_field(target, record, value)
                return
        raise self.error(target, "unsupported assignment target")

    def bind_starred(self, target: cst.Tuple | cst.List, value: Value) -> None:
        """`*lead, h, w = x.shape`: the names around the starred one bound to the first and last
        items, the starred one to a list of the rest, as Python binds them; a sequence too short
        raises Python's ValueError (checked when it runs where its length is not known)."""
        elements = target.elements
        stars = [i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)]
        if len(stars) > 1:
            raise self.error(target, "multiple starred expressions in assignment")
        k = stars[0]
        before, after = k, len(elements) - k - 1
        t = value.type
        if isinstance(t, TupleType):
            n = len(t.elems)
            if n < before + after:
                raise self.error(target, f"not enough values to unpack (expected at least {before + after}, got {n})")
            items = [self.op(ops.GetItemOp, [value, self.b.constant(i)], [e]).result for i, e in enumerate(t.elems)]
            rest = items[before:n - after]
            starred = self.op(ops.ListOp, rest, [ListType(unify_all([v.type for v in rest]) or ANY)]).result
            head, tail = items[:before], items[n - after:]
        elif isinstance(t, ListType):
            length = self.op(ops.BuiltinCallOp, [value], [INT], callee="len").result
            short = self.op(ops.CompareOp, [length, self.b.constant(before + after)], [BOOL], op="<").result
            self.raise_when(short, "ValueError", lambda: [self.op(  # type: ignore[attr-defined]
                ops.FormatOp, [length], [STR], parts=(
                    ("text", f"not enough values to unpack (expected at least {before + after}, got "),
                    ("value", None, ""), ("text", ")"))).result])
            head = [self.op(ops.GetItemOp, [value, self.b.constant(i)], [t.elem]).result for i in range(before)]
            tail = [self.op(ops.GetItemOp, [value, self.b.constant(i - after)], [t.elem]).result for i in range(after)]
            stop = self.b.constant(-after if after else None)
            starred = self.op(ops.SliceOp, [value, self.b.constant(before), stop, self.b.constant(None)], [t]).result
            if tuple_when_run(value):  # (a torch.Size's slice is one too; Python's starred name holds a list)
                starred = self.op(ops.BuiltinCallOp, [starred], [t], callee="list").result
        else:
            raise self.error(target, f"cannot unpack a value of type {t}")
        for e, v in zip(elements, head + [starred] + tail):
            self.bind_target(e.value, v)

    def set_field(self, target: cst.Attribute, record: Value, value: Value) -> None:
        """`out.aux = v` on a dataclass that this function made and that nothing else refers to yet
        (no other name, no container, no call, no other function's code): the name is bound to a
        new record with that field replaced, which is the same as changing the one object. Any
        other object, which some other reference may read, is refused."""
        t = record.type
        name, attr = target.value.value, target.attr.value  # type: ignore[attr-defined]
        if t.frozen:
            raise self.error(target, f"`{t.name}` is a frozen dataclass: assigning `{name}.{attr}` raises",
                             f"construct a new `{t.name}` with the value instead")
        if attr not in t.fields:
            raise self.error(target.attr, f"`{attr}` is not a field of dataclass `{t.name}`",
                             "compiled code assigns declared fields only: declare it in the class")
        shared = [n for n, v in self.env.values.items() if v is record and n != name]
        made_here = _private_record(record, t.name, None)
        in_loop = made_here and self._loop_between(record)
        if not made_here or shared or in_loop:
            why = (f"`{name}` is also `{shared[0]}`" if shared else
                   f"`{name}` was made before the loop this assignment is in" if in_loop else
                   f"`{name}` was passed on or stored, or not made by `{t.name}(...)` in this function")
            raise self.error(target, f"assigning a field of `{name}` is supported only on a dataclass this "
                             f"function made and has not passed on: {why}",
                             f"assign the field before `{name}` is passed on, or construct `{t.name}` with it")
        i = t.fields.index(attr)
        declared = named_tuple_type(self.source, t.name, module_class_names(self.source))
        if declared is not None and not fits(value.type, declared.elems[i]):
            raise self.error(target, f"field `{attr}` of {t.name} is {declared.elems[i]}, got {value.type}")
        items = []
        for j, e in enumerate(t.elems):
            if j == i:
                items.append(value)
                continue
            read = self.op(ops.GetItemOp, [record, self.b.constant(j)], [e])
            self.field_reads.add(read)
            items.append(read.result)
        updated = self.op(ops.TupleOp, items, [tuple_like(t, tuple(v.type for v in items))], named=t.name,
                          module=self.source.module_name or "").result
        updated.name = name
        self.env.set(name, updated)
        self.env.values.pop(f"{name}.{attr}", None)  # (a refinement of the field's old value)

    def _loop_between(self, record: Value) -> bool:
        """Whether a loop encloses the block being lowered but not the op that made `record` (a
        loop carries the names its body assigns, and `out.aux = v` assigns none)."""
        made = record.owner
        block = self.b.block
        while block is not None and block is not made.parent:
            owner = block.parent.parent if block.parent is not None else None
            if isinstance(owner, (ops.ForRangeOp, ops.ForEachOp, ops.WhileOp)):
                return True
            block = owner.parent if owner is not None else None
        return False

    def extend_list(self, listed: Value, items: cst.BaseExpression) -> None:
        """`xs += [a, b]` appends each element, which the lists pass can make SSA; `xs += ys`
        extends the list by another."""
        if isinstance(items, cst.List) and not any(isinstance(e, cst.StarredElement) for e in items.elements):
            for element in items.elements:
                self.append_to(listed, self.expr(element.value), element.value)
            return
        self.extend_by(listed, self.expr(items), items)

    def inplace(self, op: str, target: Value, rhs: Value, node: cst.CSTNode) -> Value:
        t = self.binary_type_checked(op, target, rhs, node)
        if isinstance(t, TensorType) and isinstance(target.type, TensorType):
            if t.dtype is not None and target.type.dtype is not None and t.dtype != target.type.dtype:
                promoted = t.dtype
                # torch refuses to write a float result into an integer tensor in place.
                if target.type.dtype.startswith(("int", "uint", "bool")) and promoted.startswith(("float", "bfloat", "complex")):
                    raise self.error(node, f"in-place `{op}=` would store a {promoted} result in a {target.type.dtype} tensor",
                                     "convert the tensor first (x = x.float()) or use the out-of-place operator")
        return self.op(ops.InplaceOp, [target, rhs], [target.type], op=op).result

    def binary_type_checked(self, op: str, lhs: Value, rhs: Value, node: cst.CSTNode) -> Type:
        from ir.torchapi.signatures import SignatureError, binary_result_type

        try:
            return binary_result_type(op, lhs.type, rhs.type)
        except SignatureError as e:
            raise self.error(node, str(e), getattr(e, "hint", None)) from None


def _single_name(targets: Sequence[cst.AssignTarget]) -> str | None:
    if len(targets) == 1 and isinstance(targets[0].target, cst.Name):
        return targets[0].target.value
    return None


def _private_record(record: Value, name: str, merge: ops.Operation | None) -> bool:
    """Whether dataclass value `record` is an object this function made with `name(...)` (in each
    branch, for a value an `if` merges) that nothing but field reads has used: no container,
    call or other merge holds it (`merge`: the yield that makes the value being checked)."""
    if any(not isinstance(u.op, ops.GetItemOp) and u.op is not merge for u in record.uses):
        return False
    owner = record.owner
    if isinstance(owner, ops.TupleOp):
        return owner.named == name
    if isinstance(owner, ops.IfOp):
        k = owner.results.index(record)
        yields = [b.ops[-1] for r in owner.regions for b in r.blocks]
        return bool(yields) and all(isinstance(y, ops.YieldOp) and _private_record(y.operands[k], name, y)
                                    for y in yields)
    return False

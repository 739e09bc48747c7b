"""Lowering of subscripts: items of tuples, lists, dicts and module lists, slices of sequences,
tensor indexing (`x[:, 0]`, `x[mask]`) as `torch.index` items."""

from __future__ import annotations

import libcst as cst

from ir.core import ops
from ir.core.graph import Value
from ir.core.types import (
    ANY,
    BOOL,
    INT,
    NONE,
    TENSOR,
    DictType,
    ListType,
    ModuleListType,
    OptionalType,
    TensorType,
    TupleType,
    is_subtype,
    unify_all,
)


class SubscriptLowering:
    """Mixin of ExpressionLowering: subscripts and slices."""

    def subscript(self, node: cst.Subscript) -> Value:
        base = self.expr(node.value)
        if isinstance(base.type, (TensorType,)) or base.type == ANY and False:
            items, operands = self.index_items(node.slice)
            return self.op(ops.IndexOp, [base, *operands], [TENSOR], items=items).result
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice) \
                and (isinstance(base.type, (ListType, TupleType))
                     or isinstance(base.type, ModuleListType) and base.type.length_known):
            return self.sequence_slice(base, node.slice[0].slice, node)
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            raise self.error(node, f"slicing a value of type {base.type} is not supported", "index it with one int")
        index_node = node.slice[0].slice.value
        index = self.expr(index_node)
        if isinstance(base.type, DictType):  # (a KeyError where it runs, as in Python)
            if not is_subtype(index.type, base.type.key):
                raise self.error(index_node, f"a key of type {index.type} for a dict of {base.type.key} keys")
            held = self.display_item(base, index)
            if held is not None:
                return held
            return self.op(ops.GetItemOp, [base, index], [base.type.value]).result
        if index.type not in (INT, BOOL):
            raise self.error(index_node, f"index of type {index.type}; expected int")
        t = base.type
        if isinstance(t, TupleType):
            position = self.constant_int(index)
            if position is None:
                raise self.error(index_node, "a tuple index must be a constant", "index tuples with a literal")
            if not -len(t.elems) <= position < len(t.elems):
                raise self.error(index_node, f"tuple index {position} out of range for {t}",
                                 f"the indices of this tuple are 0 to {len(t.elems) - 1}" if t.elems else "the tuple is empty")
            elem = t.elems[position]
        elif isinstance(t, ListType):
            elem = t.elem
        elif isinstance(t, ModuleListType):
            position = self.constant_int(index)
            if t.length_known and position is not None:
                elem = t.elems[position]
                if not isinstance(index.owner, ops.ConstantOp):  # (`self.blocks[i - 1]`: the layer's
                    index = self.b.constant(position)  # path, for the inliner to follow)
            else:
                elem = unify_all(t.elems) or ANY
        elif t == ANY:
            elem = ANY
        else:
            raise self.error(node, f"a value of type {t} cannot be indexed")
        return self.op(ops.GetItemOp, [base, index], [elem]).result

    def sequence_slice(self, base: Value, part: cst.Slice, node: cst.CSTNode) -> Value:
        """`xs[a:b:c]`: of a list, a new list; of a tuple or a module list, with constant bounds,
        the tuple of those elements (its length must be known)."""
        bounds = [self.b.constant(None) if e is None else self.expr(e) for e in (part.lower, part.upper, part.step)]
        for bound, e in zip(bounds, (part.lower, part.upper, part.step)):
            if bound.type not in (INT, BOOL, NONE):
                raise self.error(e or node, f"a slice bound of type {bound.type}; expected int")
        if isinstance(base.type, ListType):
            return self.op(ops.SliceOp, [base, *bounds], [base.type]).result
        consts = [None if b.type == NONE else self.constant_int(b) for b in bounds]
        if any(c is None and b.type != NONE for c, b in zip(consts, bounds)) or consts[2] == 0:
            raise self.error(node, "a tuple or module list slice needs constant bounds", "slice with literals")
        positions = list(range(len(base.type.elems)))[slice(*consts)]  # type: ignore[attr-defined]
        items = [self._getter(base, i)() for i in positions]
        return self.op(ops.TupleOp, items, [TupleType(tuple(v.type for v in items))]).result

    def constant_int(self, value: Value) -> int | None:
        owner = value.owner
        known = self.known(value)
        if isinstance(known, int):
            return int(known)
        if isinstance(owner, ops.UnaryOp) and owner.attributes["op"] == "-":
            inner = self.constant_int(owner.operands[0])
            return None if inner is None else -inner
        return None

    def index_items(self, elements: tuple[cst.SubscriptElement, ...] | list) -> tuple[tuple, list[Value]]:
        items: list[tuple] = []
        operands: list[Value] = []
        for element in elements:
            s = element.slice
            if isinstance(s, cst.Slice):
                parts = [s.lower, s.upper, s.step]
                for part in parts:
                    if part is not None:
                        v = self.expr(part)
                        if v.type not in (INT, BOOL, NONE, ANY) and not isinstance(v.type, (OptionalType, TensorType)):
                            raise self.error(part, f"slice bound of type {v.type}; expected int")
                        operands.append(v)
                items.append(("slice", *(p is not None for p in parts)))
            else:
                value_node = s.value
                if isinstance(value_node, cst.Name) and value_node.value == "None":
                    items.append(("none",))
                elif isinstance(value_node, cst.Ellipsis):
                    items.append(("ellipsis",))
                elif isinstance(value_node, cst.Tuple):
                    raise self.error(value_node, "nested tuples in an index are not supported", "flatten the index")
                else:
                    v = self.expr(value_node)
                    if not (v.type in (INT, BOOL, ANY) or isinstance(v.type, (TensorType, ListType))):
                        raise self.error(value_node, f"index of type {v.type}; expected int, a tensor, or a bool mask")
                    operands.append(v)
                    items.append(("value",))
        return tuple(items), operands

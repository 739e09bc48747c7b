"""Hypothesis strategies that write small random programs of torchscribe's compiled subset as
Python source text, for the differential tests in test_programs.py.

Every program is well-typed and valid for eager PyTorch by construction: the generator tracks
the exact shape of every tensor variable (all shapes come from a small universe derived from
one drawn base shape (R, C)), which names are bound on every path (names bound on only one side
of an `if`, or only inside a loop, are forgotten), which tensors may be mutated in place without
touching the caller's tensors, and which names are frozen (inputs, loop counters). Loops always
terminate: `range` bounds are small, `while` loops advance their counter first.

Strategies:

- ``programs()``: a ``@script`` function ``f(x, [y, [z]], [n: int = ..], [s: float = ..],
  [flag: bool = ..]) -> tuple[Tensor, ..., int, ...]`` (or ``-> Tensor``).
- ``programs(mutate_inputs=True)``: the same, with in-place updates of the input tensors that
  the caller observes.
- ``programs(decorate=False)``: undecorated, for ``script(f, example_inputs=...)``.
- ``module_programs()``: a ``@script`` nn.Module with a Linear, a parameter, a float attribute
  and two buffers that forward updates in place.

Drawing choices are ordered so that hypothesis shrinks toward shorter, simpler programs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import hypothesis.strategies as st
import torch

# Python precedence, loosest first, as in codegen/python_text.py.
P_IF, P_OR, P_AND, P_NOT, P_CMP, P_BOR, P_BAND, P_ADD, P_MUL, P_UNARY, P_POW, P_ATOM = 1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 13, 16
BIN_PREC = {"+": P_ADD, "-": P_ADD, "*": P_MUL, "/": P_MUL, "//": P_MUL, "%": P_MUL, "&": P_BAND, "|": P_BOR}


@dataclass(frozen=True)
class E:
    """An expression's text and the precedence of its outermost operator."""

    text: str
    prec: int = P_ATOM
    fresh: bool = False  # a tensor expression that always allocates (never a view of a variable)

    def at(self, prec: int) -> str:
        """The text, parenthesized unless it binds at least as tightly as `prec`."""
        return self.text if self.prec >= prec else f"({self.text})"


def binop(a: E, op: str, b: E) -> E:
    p = BIN_PREC[op]
    return E(f"{a.at(p)} {op} {b.at(p + 1)}", p, True)


def compare(a: E, op: str, b: E) -> E:
    return E(f"{a.at(P_CMP + 1)} {op} {b.at(P_CMP + 1)}", P_CMP, True)


def fresh(e: E) -> E:
    return E(e.text, e.prec, True)


def call(fn: str, *args: E | str) -> E:
    return E(f"{fn}({', '.join(a if isinstance(a, str) else a.text for a in args)})")


def method(obj: E, name: str, *args: E | str) -> E:
    return E(f"{obj.at(P_ATOM)}.{name}({', '.join(a if isinstance(a, str) else a.text for a in args)})")


def lit(value: float | int) -> E:
    text = repr(value)
    return E(text, P_UNARY if text.startswith("-") else P_ATOM)


@dataclass
class Var:
    name: str
    kind: str  # "tensor" | "mask" | "int" | "float" | "bool" | "list"
    shape: tuple[int, ...] | None = None  # tensors and masks; a list's element shape
    mutable: bool = False  # a fresh tensor (a clone) that in-place ops may update
    frozen: bool = False  # never re-bound (inputs, loop counters, mutable tensors)
    owner: str = ""  # a list: the name that made the list object, which its aliases share

    @property
    def list_object(self) -> str:
        return self.owner or self.name


@dataclass
class Program:
    """One generated program with the arguments of the call(s) to compare."""

    source: str
    name: str  # the function, or the class for module programs
    kind: str  # "function" | "module"
    tensor_params: list[tuple[str, tuple[int, ...]]]
    scalar_args: list[tuple[str, Any]]  # values passed positionally after the tensors
    dtype: torch.dtype
    seed: int
    calls: int  # how many times the function is called on the same arguments
    quantized: bool  # inputs rounded to multiples of 0.25 (ties, exact zeros)
    mutates_inputs: bool
    train: bool = True  # module programs: train() or eval()
    features: set[str] = field(default_factory=set)  # what the program uses, for statistics
    kw_tensor_params: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # passed by keyword
    kw_scalar_args: list[tuple[str, Any]] = field(default_factory=list)  # passed by keyword

    def make_args(self) -> list[Any]:
        """Fresh positional arguments; every call gives equal tensors (new objects)."""
        return self.make_call()[0]

    def make_call(self) -> tuple[list[Any], dict[str, Any]]:
        """Fresh (positional, keyword) arguments; every call gives equal tensors (new objects)."""
        g = torch.Generator().manual_seed(self.seed)

        def tensor(shape: tuple[int, ...]) -> torch.Tensor:
            t = torch.randn(shape, generator=g, dtype=torch.float64) * 2.0
            if self.quantized:
                t = torch.round(t * 4.0) / 4.0
            return t.to(self.dtype)

        tensors = [tensor(shape) for _, shape in self.tensor_params]
        kwargs: dict[str, Any] = {name: tensor(shape) for name, shape in self.kw_tensor_params}
        kwargs.update(self.kw_scalar_args)
        return [*tensors, *(v for _, v in self.scalar_args)], kwargs

    def make_module(self, namespace: Any) -> torch.nn.Module:
        torch.manual_seed(self.seed)
        module = getattr(namespace, self.name)()
        return module.train(self.train)


HEADER = """\
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script
"""

# Shape-preserving functions of one tensor, `{}` being the argument. `{a}` marks a receiver
# (printed as an atom). Only numerically tame ones: exp and log see clamped/positive values.
UNARY_ANY_RANK = [
    "torch.tanh({})", "torch.sigmoid({})", "torch.relu({})", "F.relu({})", "torch.abs({})", "{a}.abs()",
    "torch.exp({a}.clamp(-4.0, 4.0))", "torch.sqrt({a}.abs() + 1)", "F.gelu({})", "{a}.sin()", "{a}.neg()",
    "-{u}", "torch.cos({})", "{a}.sigmoid()", "F.silu({})", "torch.log1p({a}.abs())", "{a}.pow(2)",
    "{a}.square()", "F.leaky_relu({}, 0.1)", "torch.clamp({}, min=-1.5, max=1.5)", "{a}.clamp(min=0.0)",
    "{a}.clamp(max=0.5)", "torch.floor({})", "torch.sign({})", "{a}.exp().clamp(max=8.0)", "{a}.tanh()",
    "{a} * {a}", "{a}.clone()", "{a}.detach()", "{a}.float()" , "torch.neg({})",
    "{a}.double()", "{a}.to(torch.float64)", "{a}.half().float()", "{a}.bfloat16().float()",
    "{a}.to(dtype=torch.float32)",
]
WIDENING = ("{a}.double()", "{a}.to(torch.float64)")  # (not in module programs, whose layers are float32)
UNARY_RANKED = [  # need rank >= 1
    "torch.softmax({}, dim=-1)", "F.softmax({}, dim=0)", "{a}.cumsum(0)", "{a}.flip(0)",
    "torch.log_softmax({}, dim=-1)", "{a}.roll(1, 0)",
]


class Gen:
    """Writes one function body. `draw` is hypothesis's; every choice goes through it."""

    def __init__(self, draw: Callable[[Any], Any], R: int, C: int, *, mutate_inputs: bool, module: bool) -> None:
        self.draw = draw
        self.R, self.C = R, C
        self.S = (R, C)
        self.H = (R, (C + 1) // 2)
        # The shape universe, most common first. Every shape here can be made from an (R, C)
        # tensor (CANON) and every derivation's source shape is in it.
        self.U = [self.S, (R, 1), (1, C), (C, R), (R,), (C,), (), (1, R, C), self.H]
        self.mutate_inputs = mutate_inputs
        self.module = module  # `self.linear` exists
        self.buffers = module  # `self.total`, `self.scale`, `self.count` exist
        self.layers = False  # `self.layers` (ModuleList of 2 Linear) and `self.seq` (Sequential) exist
        self.lines: list[str] = []
        self.scope: dict[str, Var] = {}
        self.counter = itertools.count()
        self.loop_depth = 0
        self.n_tensors_out = 1
        self.n_ints_out = 0
        self.n_floats_out = 0
        self.n_bools_out = 0
        self.single_tensor = False
        self.returns_none = False
        self.nested_out = False  # a (Tensor, int) tuple as the last result
        self.features: set[str] = set()
        self.dtype_float32 = True
        self.helpers: list[str] = []  # @script functions (a: Tensor[R, C], k: int = ..) -> Tensor[R, C]
        self.no_jumps = 0  # inside a loop over a tuple: no break/continue/return
        self.ret_shape: tuple[int, ...] | None = None  # helpers return the base shape
        self.iterating: set[str] = set()  # lists being iterated over: appending would never end
        self.python = False  # permissive mode: statements outside the subset, kept as Python

    # -- drawing helpers -----------------------------------------------------------------------
    def pick(self, seq: list[Any]) -> Any:
        return self.draw(st.sampled_from(seq))

    def chance(self, p: float) -> bool:
        """True with probability about p; shrinks to False."""
        return self.draw(st.integers(0, 99)) >= 100 - round(p * 100)

    def count(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def fresh(self, prefix: str) -> str:
        while True:
            name = f"{prefix}{next(self.counter)}"
            if name not in self.scope:
                return name

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def shape(self) -> tuple[int, ...]:
        """A shape of the universe, the base shape about half the time."""
        return self.S if self.chance(0.5) else self.pick(self.U)

    def vars(self, kind: str, shape: tuple[int, ...] | None | str = "any") -> list[Var]:
        return [v for v in self.scope.values() if v.kind == kind and (shape == "any" or v.shape == shape)]

    def base_tensor(self) -> E:
        """A tensor of the base shape (R, C): x is always one."""
        return E(self.pick([v.name for v in self.vars("tensor", self.S)]))

    @staticmethod
    def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
        try:
            return tuple(torch.broadcast_shapes(a, b))
        except RuntimeError:
            return None

    def partner_shapes(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Shapes of the universe that broadcast to exactly `shape`."""
        return [b for b in self.U if self.broadcast(shape, b) == shape]

    # -- tensor expressions --------------------------------------------------------------------
    def texpr(self, shape: tuple[int, ...], depth: int) -> E:
        """A float tensor expression of exactly `shape`."""
        if depth <= 0:
            return self.leaf(shape)
        kind = self.pick(["leaf", "binary", "unary", "binary", "derive", "where", "minmax", "leaf",
                          "ifexp", "scalar", "derive", "module" if self.module else "binary",
                          "helper" if self.helpers and shape == self.S else "unary", "pow_mod"])
        d = depth - 1
        if kind == "leaf":
            return self.leaf(shape)
        if kind == "unary":
            templates = UNARY_ANY_RANK + (UNARY_RANKED if shape else [])
            t = self.pick(templates)
            if t == "{a}.float()" and not self.dtype_float32:
                t = "{a}.clone()"
            if t in WIDENING and self.module:
                t = "{a}.clone()"  # (a float64 value would reach the float32 layers: eager raises)
            arg = self.texpr(shape, d)
            self.features.add("unary")
            return E(t.replace("{a}", arg.at(P_ATOM)).replace("{u}", arg.at(P_UNARY)).replace("{}", arg.text),
                     P_UNARY if t.startswith("-") else P_MUL if " * " in t else P_ATOM,
                     t not in ("{a}.detach()", "{a}.float()"))  # those two may return their argument
        if kind == "binary":
            return self.binary(shape, d)
        if kind == "derive":
            return self.derive(shape, d)
        if kind == "where":
            self.features.add("where")
            cond = self.mexpr(self.pick(self.partner_shapes(shape)), d)
            a = self.texpr(shape, d)
            if self.chance(0.3):
                b = self.scalar_literal()
            else:
                b = self.texpr(self.pick(self.partner_shapes(shape)), d)
            if self.chance(0.5):
                a, b = b, a
            return fresh(call("torch.where", cond, a, b))
        if kind == "minmax":
            self.features.add("minmax")
            fn = self.pick(["torch.maximum", "torch.minimum", "torch.max", "torch.min"])
            a, b = self.texpr(shape, d), self.texpr(self.pick(self.partner_shapes(shape)), d)
            if self.chance(0.5):
                a, b = b, a
            return fresh(call(fn, a, b))
        if kind == "ifexp":
            self.features.add("ifexp")
            a, c, b = self.texpr(shape, d), self.cond(d), self.texpr(shape, d)
            return E(f"{a.at(P_IF + 1)} if {c.at(P_IF + 1)} else {b.at(P_IF)}", P_IF, a.fresh and b.fresh)
        if kind == "scalar":
            # tensor (op) Python scalar, scalar on either side
            op = self.pick(["*", "+", "-", "/"])
            a = self.texpr(shape, d)
            s = self.scalar_operand(d)
            if op == "/":
                return binop(a, "/", self.nonzero_scalar())
            return binop(s, op, a) if self.chance(0.4) else binop(a, op, s)
        if kind == "helper":
            self.features.add("helper_call")
            fn = self.pick(self.helpers)
            arg = self.texpr(shape, d)
            if self.chance(0.5):
                return call(fn, arg)
            if self.chance(0.5):
                return call(fn, arg, E(f"k={self.iexpr(1).text}"))
            return call(fn, arg, self.iexpr(1))
        if kind == "pow_mod":
            self.features.add("pow_mod")
            a = self.texpr(shape, d)
            op = self.pick(["**", "//", "%", "**"])
            if op == "**":
                base = E(f"{a.at(P_ATOM)}.abs() + 0.5", P_ADD)  # positive: fractional powers stay real
                return E(f"{base.at(P_POW + 1)} ** {self.pick(['2', '3', '0.5', '-1', '2.0'])}", P_POW, True)
            return binop(a, op, self.pick([lit(2.0), lit(1.5), lit(-0.75), lit(3)]))
        if kind == "module":
            if shape and shape[-1] == self.C and self.chance(0.6):
                self.features.add("linear")
                return fresh(call("self.linear", self.texpr(shape, d)))
            return self.binary(shape, d)
        raise AssertionError(kind)

    def binary(self, shape: tuple[int, ...], d: int) -> E:
        self.features.add("binary")
        op = self.pick(["+", "*", "-", "/"])
        a = self.texpr(shape, d)
        b = self.partner(shape, d)
        if self.chance(0.35):
            a, b = b, a
        if op == "/":
            b = self.safe_denominator(b)
        return binop(a, op, b)

    def safe_denominator(self, e: E) -> E:
        """`e`, or something like it that is never zero."""
        if isinstance(e, ScalarE):
            try:
                value = float(e.text)
            except ValueError:  # not a plain literal (a name, `--0.5`, ...)
                return E(f"abs({e.text}) + 1", P_ADD)
            return e if value != 0 else lit(2.0)
        return E(f"{e.at(P_ATOM)}.abs() + 1", P_ADD)

    def partner(self, shape: tuple[int, ...], d: int) -> E:
        """Something that broadcasts against a `shape` tensor without changing the shape."""
        kind = self.pick(["tensor", "literal", "tensor", "int", "float", "mask", "counts"])
        if kind == "tensor":
            return self.texpr(self.pick(self.partner_shapes(shape)), d)
        if kind == "literal":
            return self.scalar_literal()
        if kind == "int":
            e = self.iexpr(min(d, 1))
            return ScalarE(e.text, e.prec)
        if kind == "float":
            e = self.fexpr(min(d, 1))
            return ScalarE(e.text, e.prec)
        if kind == "mask":
            self.features.add("mask_to")
            m = self.mexpr(self.pick(self.partner_shapes(shape)), d)
            dtype = f"{self.base_tensor().text}.dtype"
            return fresh(method(m, "to", dtype) if self.chance(0.6) or not self.dtype_float32 else method(m, "float"))
        # an int64 tensor: per-row counts
        self.features.add("int_tensor")
        cands = [b for b in self.partner_shapes(shape) if len(b) == 2 and b[1] == 1 and b[0] == self.R]
        if cands:
            return fresh(method(compare(self.texpr(self.S, d), ">", lit(0)), "sum", "dim=1", "keepdim=True"))
        return self.scalar_literal()

    def scalar_literal(self) -> E:
        return ScalarE.of(lit(self.pick([2.0, 1, 0.5, -1, -2, 3, 1.5, -0.5, 0.25, -3, 2, -1.5])))

    def nonzero_scalar(self) -> E:
        return ScalarE.of(lit(self.pick([2.0, 4, -2, 0.5, -0.25, 3, 1.5])))

    def scalar_operand(self, d: int) -> E:
        kind = self.pick(["literal", "int", "float"])
        if kind == "literal":
            return self.scalar_literal()
        e = self.iexpr(min(d, 1)) if kind == "int" else self.fexpr(min(d, 1))
        return ScalarE(e.text, e.prec)

    def derive(self, shape: tuple[int, ...], d: int) -> E:
        """`shape` from an expression of another (or the same) shape: views, reductions, slices."""
        R, C, S = self.R, self.C, self.S
        options: list[tuple[tuple[int, ...], str]] = []
        if shape == S:
            options = [((C, R), "{a}.transpose(0, 1)"), ((C, R), "{a}.t()"), ((C, R), "{a}.permute(1, 0)"),
                       (S, f"{{a}}.reshape(-1).reshape({R}, {C})"), (S, "{a}.contiguous()"),
                       ((1, R, C), "{a}.squeeze(0)"), ((1, R, C), "{a}[0]"), (S, "{a}[:, :]"),
                       ((C, R), "{a}.T"), (S, "{a}[..., :]"), (S, f"{{a}}.reshape({C}, {R}).reshape({R}, {C})"),
                       ((1, R, C), "{a}.sum(0)"), (S, "{a}[::1]"),
                       (S, "torch.stack([{a}, {a} * 2], dim=-1).amax(-1)"), (S, f"torch.cat([{{a}}, {{a}}], dim=1)[:, {C}:]"),
                       (S, f"torch.cat([torch.tanh({{a}} * 0.5), {{a}} * 2.0 + 1.0], dim=0)[{R}:]"),
                       (S, f"torch.cat((torch.sigmoid({{a}}) - 0.5, torch.relu({{a}} + 1.0)), -1)[:, :{C}]"),
                       (S, "{a}.reshape({a}.shape[0], -1)"), (S, f"(({{a}} @ {{a}}.t() / {C}) @ {{a}})"),
                       ((C, R), f"(torch.matmul({{a}}.t(), {{a}}) @ {{a}}.t() / {R})")]
        elif shape == (R, 1):
            options = [(S, "{a}.sum(dim=1, keepdim=True)"), (S, "{a}.mean(-1, keepdim=True)"),
                       (S, "{a}.amax(1, keepdim=True)"), (S, "{a}.amin(dim=-1, keepdim=True)"),
                       ((R,), "{a}.unsqueeze(1)"), ((R,), "{a}[:, None]"), (S, "{a}[:, 0:1]"), (S, "{a}[:, -1:]"),
                       (S, "{a}.norm(dim=1, keepdim=True)"), (S, "{a}.logsumexp(-1, keepdim=True)"),
                       (S, "{a}.max(dim=1, keepdim=True)[0]"), ((R,), f"{{a}}.reshape({R}, 1)"),
                       (S, "torch.sum({a}, dim=1, keepdim=True)"), (S, "torch.mean({a}, -1, True)")]
        elif shape == (1, C):
            options = [(S, "{a}.sum(dim=0, keepdim=True)"), (S, "{a}.mean(0, keepdim=True)"),
                       (S, "{a}.amax(0, keepdim=True)"), ((C,), "{a}.unsqueeze(0)"), ((C,), "{a}[None]"),
                       (S, "{a}[:1]"), (S, "{a}[-1:]"), (S, "{a}[0:1, :]"), ((C,), "{a}.view(1, -1)")]
        elif shape == (C, R):
            options = [(S, "{a}.transpose(0, 1)"), (S, "{a}.t()"), (S, "{a}.transpose(1, 0)"), (S, "{a}.mT")]
        elif shape == (R,):
            options = [(S, "{a}.sum(1)"), (S, "{a}.mean(dim=-1)"), (S, "{a}.amax(1)"), (S, "{a}[:, 0]"),
                       (S, "{a}[:, -1]"), ((R, 1), "{a}.squeeze(1)"), ((R, 1), "{a}.squeeze(-1)"),
                       ((R, 1), "{a}.reshape(-1)"), ((R, 1), "{a}[:, 0]"), (S, "{a}.select(1, 0)"),
                       ((C, R), "{a}[0]"), (S, "{a}.min(dim=1)[0]"), ((R, 1), "{a}.flatten()"),
                       (S, f"({{a}} @ torch.linspace(-1.0, 1.0, {C}, dtype={{a}}.dtype))"), (S, "torch.amax({a}, dim=-1)")]
        elif shape == (C,):
            options = [(S, "{a}.sum(0)"), (S, "{a}.mean(dim=0)"), (S, "{a}[0]"), (S, "{a}[-1]"),
                       ((1, C), "{a}.squeeze(0)"), ((1, C), "{a}[0]"), ((1, C), "{a}.reshape(-1)"),
                       (S, "{a}.amin(0)"), (S, "{a}[1]"), ((C, R), "{a}[:, 0]"),
                       (S, f"(torch.ones({R}, dtype={{a}}.dtype) @ {{a}})"), (S, "torch.mean({a}, dim=0)")]
        elif shape == ():
            options = [(S, "{a}.sum()"), (S, "{a}.mean()"), (S, "{a}.amax()"), (S, "{a}[0, 0]"), ((R,), "{a}[0]"),
                       (S, "{a}.max()"), (S, "{a}.min()"), ((C,), "{a}.sum()"), ((R, 1), "{a}.mean()"),
                       (S, "{a}[-1, 1]"), ((1, C), "{a}.sum()")]
            if self.chance(0.15):
                self.features.add("mask_select")
                return method(E(f"{self.texpr(S, d).at(P_ATOM)}[{self.mexpr(S, d).text}]"), "sum")
        elif shape == (1, R, C):
            options = [(S, "{a}.unsqueeze(0)"), (S, "{a}[None]"), (S, "{a}[None, :, :]"), (S, "{a}.unsqueeze(-3)"),
                       (S, f"{{a}}.reshape(1, {R}, {C})"), (S, f"{{a}}.expand(1, {R}, {C})")]
        elif shape == self.H:
            options = [(S, "{a}[:, ::2]"), (S, f"{{a}}[:, 0:{C}:2]")]
        if shape == self.H and shape != S:
            options.append((S, "{a}[:, ::2]"))
        if not options:
            return self.texpr(shape, d)
        src, template = self.pick(options)
        self.features.add("view_or_reduce")
        arg = self.texpr(src, d)
        return E(template.replace("{a}", arg.at(P_ATOM)))

    def leaf(self, shape: tuple[int, ...]) -> E:
        options = []
        same = self.vars("tensor", shape)
        if same:
            options += ["var", "var", "var"]
        lists = self.vars("list", shape)
        if lists:
            options.append("list")
        options += ["canon", "factory"]
        if self.buffers and shape == (self.C,):
            options.append("self")
        kind = self.pick(options)
        if kind == "var":
            return E(self.pick([v.name for v in same]))
        if kind == "list":
            self.features.add("list_read")
            xs = self.pick([v.name for v in lists])
            return self.pick([E(f"torch.stack({xs}).sum(0)", fresh=True), E(f"torch.stack({xs}).amax(0)", fresh=True),
                              E(f"{xs}[0]"), E(f"{xs}[-1]"), E(f"torch.stack({xs}, dim=0).mean(dim=0)", fresh=True)])
        if kind == "self":
            return E(self.pick(["self.total", "self.scale"]))  # (self.linear.bias: submodule attributes are not supported)
        if kind == "factory":
            base = self.base_tensor()
            R, C = self.R, self.C
            if shape == self.S:
                self.features.add("factory")
                return fresh(self.pick([call("torch.zeros_like", base), call("torch.ones_like", base),
                                  call("torch.full_like", base, "0.5"), method(base, "new_ones", f"({R}, {C})"),
                                  E(f"torch.arange({R * C}, dtype={base.text}.dtype).reshape({R}, {C})"),
                                  E(f"torch.ones({R}, {C}, dtype={base.text}.dtype)")]))
            if shape == (self.C,):
                self.features.add("factory")
                return fresh(self.pick([E(f"torch.arange({C}).to({base.text}.dtype)"),
                                        E(f"torch.linspace(-1.0, 1.0, {C}, dtype={base.text}.dtype)"),
                                        E(f"torch.zeros({C}, dtype={base.text}.dtype)")]))
        # canonical: from a base-shaped tensor
        base = self.base_tensor()
        R, C = self.R, self.C
        canon = {
            self.S: "{a}",
            (R, 1): "{a}.sum(dim=1, keepdim=True)",
            (1, C): "{a}.mean(0, keepdim=True)",
            (C, R): "{a}.transpose(0, 1)",
            (R,): "{a}.amax(1)",
            (C,): "{a}[0]",
            (): "{a}.sum()",
            (1, R, C): "{a}.unsqueeze(0)",
            self.H: "{a}[:, ::2]",
        }
        return E(canon[shape].replace("{a}", base.text))

    def mexpr(self, shape: tuple[int, ...], d: int) -> E:
        """A bool tensor expression of exactly `shape`."""
        self.features.add("mask")
        kind = self.pick(["cmp", "cmp", "var", "not", "and", "or", "logical", "isfinite"])
        if kind == "var":
            masks = self.vars("mask", shape)
            if masks:
                return E(self.pick([m.name for m in masks]))
            kind = "cmp"
        if kind == "cmp" or d <= 0:
            op = self.pick([">", "<", ">=", "<=", "!=", "=="])
            a = self.texpr(shape, d - 1 if d > 0 else 0)
            b = self.partner(shape, max(d - 1, 0)) if self.chance(0.5) else self.scalar_literal()
            if op == "==":
                b = lit(0.0)
            if self.chance(0.3):
                a, b = b, a
            return compare(a, op, b)
        if kind == "not":
            return E("~" + self.mexpr(shape, d - 1).at(P_UNARY), P_UNARY)
        if kind in ("and", "or"):
            a = self.mexpr(shape, d - 1)
            b = self.mexpr(self.pick(self.partner_shapes(shape)), d - 1)
            return binop(a, "&" if kind == "and" else "|", b)
        if kind == "logical":
            fn = self.pick(["torch.logical_not", "torch.logical_and", "torch.logical_or"])
            if fn == "torch.logical_not":
                return call(fn, self.mexpr(shape, d - 1))
            return call(fn, self.mexpr(shape, d - 1), self.mexpr(self.pick(self.partner_shapes(shape)), d - 1))
        return call("torch.isfinite", self.texpr(shape, d - 1))

    # -- scalar expressions --------------------------------------------------------------------
    def iexpr(self, depth: int) -> E:
        ints = self.vars("int")
        if depth <= 0 or self.chance(0.3):
            options = ["literal"] + (["var", "var", "var"] if ints else []) + ["size", "count"]
            lists = self.vars("list")
            if lists:
                options.append("len")
            kind = self.pick(options)
            if kind == "var":
                return E(self.pick([v.name for v in ints]))
            if kind == "literal":
                return lit(self.pick([2, 1, 0, 3, -1, 4, -2]))
            if kind == "len":
                self.features.add("len")
                return call("len", self.pick([v.name for v in lists]))
            if kind == "size":
                self.features.add("size")
                base = self.base_tensor()
                return self.pick([method(base, "size", "0"), E(f"{base.text}.shape[1]"), method(base, "dim"),
                                  method(base, "size", "-1"), method(base, "numel"), call("len", base)])
            self.features.add("tensor_to_int")
            return call("int", method(compare(self.texpr(self.S, 0), ">", lit(0)), "sum"))
        d = depth - 1
        kind = self.pick(["+", "-", "*", "//", "%", "neg", "min", "max", "abs", "int", "or", "ifexp", "item", "round"])
        self.features.add("int_arith")
        if kind == "or":
            self.features.add("value_or_and")
            op = self.pick(["or", "and"])
            p = P_OR if op == "or" else P_AND
            return E(f"{self.iexpr(d).at(p)} {op} {self.iexpr(d).at(p + 1)}", p)
        if kind == "ifexp":
            self.features.add("ifexp")
            a, c, b = self.iexpr(d), self.cond(0), self.iexpr(d)
            return E(f"{a.at(P_IF + 1)} if {c.at(P_IF + 1)} else {b.at(P_IF)}", P_IF)
        if kind == "item":
            self.features.add("item")
            return method(method(compare(self.texpr(self.shape(), min(d, 1)), "<", lit(0.5)), "sum"), "item")
        if kind == "round":
            return call("round", self.fexpr(d, finite=True))
        a = self.iexpr(d)
        if kind in ("+", "-"):
            return binop(a, kind, self.iexpr(d))
        if kind == "*":
            return binop(a, "*", lit(self.pick([2, -1, 3])))
        if kind in ("//", "%"):
            return binop(a, kind, lit(self.pick([2, 3, -2, 4])))
        if kind == "neg":
            return E("-" + a.at(P_UNARY), P_UNARY)
        if kind in ("min", "max"):
            return call(kind, a, self.iexpr(d))
        if kind == "abs":
            return call("abs", a)
        return call("int", self.fexpr(d, finite=True))

    def fexpr(self, depth: int, finite: bool = False) -> E:
        """A Python float; with `finite`, one that cannot be nan or inf (it feeds int())."""
        floats = [] if finite else self.vars("float")
        if depth <= 0 or self.chance(0.3):
            options = ["literal"] + (["var", "var", "var"] if floats else []) + (["from_int"] if finite else ["tensor", "from_int"])
            kind = self.pick(options)
            if kind == "var":
                return E(self.pick([v.name for v in floats]))
            if kind == "literal":
                return lit(self.pick([0.5, 1.0, -0.5, 2.0, -1.25, 0.1]))
            if kind == "from_int":
                return call("float", self.iexpr(0))
            self.features.add("tensor_to_float")
            return call("float", self.texpr((), 1))
        d = depth - 1
        kind = self.pick(["+", "*", "-", "/", "neg", "min", "max", "abs", "mixed", "math", "floordiv", "or", "item", "round"])
        self.features.add("float_arith")
        if kind == "item" and not finite:
            self.features.add("item")
            return method(self.texpr((), min(d, 1)), "item")
        if kind == "or":
            self.features.add("value_or_and")
            op = self.pick(["or", "and"])
            p = P_OR if op == "or" else P_AND
            return E(f"{self.fexpr(d, finite).at(p)} {op} {self.fexpr(d, finite).at(p + 1)}", p)
        if kind == "round":
            return call("round", self.fexpr(d, finite), lit(self.pick([1, 2, 0])))
        a = self.fexpr(d, finite)
        if kind == "floordiv":
            return binop(a, self.pick(["//", "%"]), lit(self.pick([0.5, 1.5, -2.0, 3])))
        if kind in ("+", "-", "*"):
            return binop(a, kind, self.fexpr(d, finite))
        if kind == "/":
            return binop(a, "/", lit(self.pick([2.0, -4.0, 0.5, 3])))
        if kind == "neg":
            return E("-" + a.at(P_UNARY), P_UNARY)
        if kind in ("min", "max"):
            return call(kind, a, self.fexpr(d, finite))
        if kind == "abs":
            return call("abs", a)
        if kind == "math":
            self.features.add("math")
            return self.pick([call("math.sqrt", E(f"abs({a.text}) + 1.0", P_ADD)), call("math.tanh", a),
                              call("math.exp", call("min", a, lit(3.0))), binop(a, "*", E("math.pi"))])
        return binop(a, self.pick(["+", "*", "-"]), self.iexpr(d))

    def cond(self, depth: int) -> E:
        """A Python bool condition."""
        kind = self.pick(["int", "float", "tensor", "int", "flag", "any", "and", "or", "not", "chain", "mod", "str"])
        ints, floats, bools = self.vars("int"), self.vars("float"), self.vars("bool")
        d = max(depth - 1, 0)
        strs = self.vars("str")
        if kind == "str" and strs:
            self.features.add("str_option")
            return compare(E(strs[0].name), self.pick(["==", "!="]), E(repr(self.pick(["sum", "max", "mean"]))))
        if kind == "flag" and bools:
            name = self.pick([v.name for v in bools])
            return E(name) if self.chance(0.6) else E(f"not {name}", P_NOT)
        if kind == "int" or kind == "flag":
            return compare(self.iexpr(min(d, 1)), self.pick([">", "<", ">=", "<=", "==", "!="]), lit(self.pick([2, 0, 1, 3, -1])))
        if kind == "mod":
            return compare(binop(self.iexpr(0), "%", lit(2)), "==", lit(self.pick([0, 1])))
        if kind == "float":
            return compare(self.fexpr(min(d, 1)), self.pick(["<", ">", "<=", ">="]), lit(self.pick([0.5, 0.0, -0.5, 1.0])))
        if kind == "tensor":
            self.features.add("tensor_cond")
            shape = self.shape()
            t = self.texpr(shape, min(d, 1))
            red = method(t, "sum") if shape else t
            return call("bool", compare(red, self.pick([">", "<"]), lit(self.pick([0, 0.5, -1.0, 2]))))
        if kind == "any":
            self.features.add("tensor_cond")
            m = self.mexpr(self.pick(self.U[:4]), min(d, 1))
            return call("bool", method(m, self.pick(["any", "all"])))
        if kind == "chain":
            return E(f"{self.pick([-1, 0, 1])} <= {self.iexpr(0).at(P_CMP + 1)} < {self.pick([2, 3, 4])}", P_CMP)
        if kind == "not":
            return E("not " + self.cond(d).at(P_NOT), P_NOT)
        a, b = self.cond(d), self.cond(d)
        if kind == "and":
            return E(f"{a.at(P_AND)} and {b.at(P_AND + 1)}", P_AND)
        return E(f"{a.at(P_OR)} or {b.at(P_OR + 1)}", P_OR)

    # -- statements ----------------------------------------------------------------------------
    def block(self, indent: int, depth: int, n: int, top: bool = False) -> None:
        for _ in range(n):
            self.statement(indent, depth, top)

    def statement(self, indent: int, depth: int, top: bool) -> None:
        kinds = ["assign", "assign", "reassign", "assign", "int", "inplace", "float", "reassign"]
        if depth > 0:
            kinds += ["if", "for", "if", "while", "for"]
        if top:
            kinds += ["mutable", "mutable"]
        kinds += ["tuple", "list", "append", "mask", "unpack_shape"]
        if not self.no_jumps:
            kinds += ["return"]
            if self.loop_depth:
                kinds += ["jump", "jump"]
        if self.buffers:
            kinds += ["buffer", "buffer"]
        if self.layers:
            kinds += ["layers", "layers"]
        if self.inplace_targets():
            kinds += ["inplace", "inplace", "before_write"]
        if self.vars("optional"):
            kinds += ["optional", "optional"]
        if depth > 0 and self.loop_depth < 2:
            kinds += ["foreach"]
        if self.python:
            kinds += ["python_log", "python_log", "python_inplace", "python_rebind", "python_rebind", "python_int"]
        kind = self.pick(kinds)
        getattr(self, "stmt_" + kind)(indent, depth)

    def expr_depth(self) -> int:
        return self.count(0, 3)

    def stmt_assign(self, indent: int, depth: int) -> None:
        shape = self.shape()
        value = self.texpr(shape, self.expr_depth())
        name = self.fresh("t")
        self.emit(indent, f"{name} = {value.text}")
        self.scope[name] = Var(name, "tensor", shape)

    def stmt_mask(self, indent: int, depth: int) -> None:
        shape = self.pick(self.U[:6])
        value = self.mexpr(shape, self.count(0, 2))
        name = self.fresh("m")
        self.emit(indent, f"{name} = {value.text}")
        self.scope[name] = Var(name, "mask", shape)

    def stmt_reassign(self, indent: int, depth: int) -> None:
        targets = [v for v in self.scope.values() if v.kind == "tensor" and not v.frozen]
        if not targets:
            self.stmt_assign(indent, depth)
            return
        v = self.pick(targets)
        if self.chance(0.5):
            # v = v (op) something: the loop-carried pattern when inside a loop
            op = self.pick(["+", "*", "-"])
            other = self.partner(v.shape, self.count(0, 2))
            if op == "*" and not isinstance(other, ScalarE):
                other = call("torch.tanh", other)  # keep repeated products bounded
            value = binop(E(v.name), op, other)
        else:
            value = self.texpr(v.shape, self.expr_depth())
        self.emit(indent, f"{v.name} = {value.text}")

    def stmt_int(self, indent: int, depth: int) -> None:
        targets = [v for v in self.vars("int") if not v.frozen]
        if targets and self.chance(0.5):
            v = self.pick(targets)
            if self.chance(0.5):
                self.emit(indent, f"{v.name} {self.pick(['+=', '-='])} {self.iexpr(1).at(P_ADD + 1)}")
            else:
                self.emit(indent, f"{v.name} = {self.iexpr(2).text}")
            return
        name = self.fresh("k")
        self.emit(indent, f"{name} = {self.iexpr(2).text}")
        self.scope[name] = Var(name, "int")

    def stmt_float(self, indent: int, depth: int) -> None:
        targets = [v for v in self.vars("float") if not v.frozen]
        if targets and self.chance(0.5):
            v = self.pick(targets)
            if self.chance(0.5):
                self.emit(indent, f"{v.name} {self.pick(['+=', '*=', '-='])} {self.fexpr(1).at(P_ADD + 1)}")
            else:
                self.emit(indent, f"{v.name} = {self.fexpr(2).text}")
            return
        name = self.fresh("a")
        self.emit(indent, f"{name} = {self.fexpr(2).text}")
        self.scope[name] = Var(name, "float")

    def stmt_mutable(self, indent: int, depth: int) -> None:
        """A fresh tensor that in-place ops may update: never re-bound afterwards."""
        shape = self.pick([s for s in self.U if s])
        value = self.texpr(shape, self.count(0, 2))
        name = self.fresh("w")
        how = self.pick(["clone", "clone", "mul", "zeros"])
        if how == "clone":
            text = method(value, "clone").text
        elif how == "mul":
            text = binop(value, "*", lit(1.0)).text
        else:
            text = call("torch.zeros_like", value).text
        self.emit(indent, f"{name} = {text}")
        self.scope[name] = Var(name, "tensor", shape, mutable=True, frozen=True)
        self.features.add("mutable")
        for _ in range(self.count(0, 2)):
            self.emit(indent, self.inplace_text(name, shape))
            self.features.add("inplace")

    def inplace_targets(self) -> list[tuple[str, tuple[int, ...]]]:
        out = [(v.name, v.shape) for v in self.scope.values() if v.kind == "tensor" and v.mutable]
        if self.mutate_inputs:
            out += [(v.name, v.shape) for v in self.scope.values() if v.kind == "tensor" and v.frozen and not v.mutable
                    and v.name in ("x", "y", "z")]
        if self.buffers:
            out.append(("self.total", (self.C,)))
        return out  # type: ignore[return-value]

    def stmt_inplace(self, indent: int, depth: int) -> None:
        targets = self.inplace_targets()
        if not targets:
            self.stmt_assign(indent, depth)
            return
        name, shape = self.pick(targets)
        text = self.inplace_text(name, shape)
        if text.startswith(f"{name}.") and text.endswith(")") and self.chance(0.2):
            # an in-place method returns its target: the new name aliases it
            alias = self.fresh("t")
            self.emit(indent, f"{alias} = {text}")
            self.scope[alias] = Var(alias, "tensor", shape)
            self.features.add("inplace_result")
            return
        self.emit(indent, text)
        if name in ("x", "y", "z"):
            self.features.add("input_mutation")
        else:
            self.features.add("inplace")

    def stmt_before_write(self, indent: int, depth: int) -> None:
        """A value computed from a tensor, the tensor updated in place, then the value reshaped
        and read: it must be the value from before the write (fuse once sank such a read below
        the write, to meet the reshape)."""
        name, shape = self.pick(self.inplace_targets())
        snapshot = self.fresh("s")
        self.emit(indent, f"{snapshot} = {self.pick(['torch.sigmoid', 'torch.tanh', 'torch.abs'])}({name})")
        self.emit(indent, self.inplace_text(name, shape))
        if shape:  # (a 0-d value is read as it is)
            back = f".reshape({', '.join(map(str, shape))})" if len(shape) > 1 else ""
            self.emit(indent, f"{snapshot} = {snapshot}.reshape(-1){back}")
        self.scope[snapshot] = Var(snapshot, "tensor", shape)
        self.features.add("before_write")

    def operand(self, e: E) -> E:
        """A tensor operand for an in-place update: torch refuses one that partially overlaps
        the target's memory, and a non-fresh expression might (a view, or a helper returning
        its argument), so those are cloned."""
        if isinstance(e, ScalarE) or e.fresh:
            return e
        return fresh(method(e, "clone"))

    def inplace_text(self, t: str, shape: tuple[int, ...]) -> str:
        d = self.count(0, 2)
        kinds = ["method", "aug", "method", "aug"]
        if shape:
            kinds += ["index", "index", "view"]
        kind = self.pick(kinds)
        if kind == "method":
            m = self.pick(["mul_", "add_", "sub_", "div_", "clamp_", "relu_", "tanh_", "abs_", "neg_", "zero_",
                           "fill_", "copy_", "masked_fill_", "add_alpha", "lerp_", "sigmoid_", "clamp_min"])
            if m == "mul_":
                return f"{t}.mul_({self.scalar_operand(0).text})"
            if m in ("add_", "sub_"):
                return f"{t}.{m}({self.operand(self.partner(shape, d)).text})"
            if m == "div_":
                return f"{t}.div_({self.nonzero_scalar().text})"
            if m == "clamp_":
                return f"{t}.clamp_(-1.0, 1.0)"
            if m == "clamp_min":
                return f"{t}.clamp_(min=0.0)"
            if m == "fill_":
                return f"{t}.fill_({self.scalar_operand(0).text})"
            if m == "copy_":
                return f"{t}.copy_({self.operand(self.texpr(shape, d)).text})"
            if m == "masked_fill_":
                return f"{t}.masked_fill_({self.mexpr(self.pick(self.partner_shapes(shape)), d).text}, {self.scalar_literal().text})"
            if m == "add_alpha":
                return f"{t}.add_({self.operand(self.texpr(self.pick(self.partner_shapes(shape)), d)).text}, alpha={self.pick(['0.5', '-2', '2.0'])})"
            if m == "lerp_":
                # lerp_ does not promote: the end must have the target's dtype
                return f"{t}.lerp_({method(self.texpr(shape, d), 'to', f'{t}.dtype').text}, {self.pick(['0.25', '0.5'])})"
            return f"{t}.{m}()"
        if kind == "aug":
            op = self.pick(["+=", "*=", "-=", "/="])
            if op == "/=":
                return f"{t} /= {self.nonzero_scalar().text}"
            other = self.operand(self.partner(shape, d))
            if op == "*=" and not isinstance(other, ScalarE):
                other = call("torch.tanh", other)
            return f"{t} {op} {other.text}"
        if kind == "view":
            self.features.add("inplace_view")
            views = [f"{t}[0]", f"{t}[-1:]"]
            if len(shape) == 2:
                views += [f"{t}.transpose(0, 1)", f"{t}[:, 0]", f"{t}[:, 1:]", f"{t}.t()"]
            v = self.pick(views)
            return self.pick([f"{v}.mul_({self.nonzero_scalar().text})", f"{v}.add_(1.0)", f"{v}.zero_()",
                              f"{v}.clamp_(max=0.25)"])
        # index assignment
        self.features.add("index_put")
        options = ["mask", "first", "last_aug", "mask_var"]
        if len(shape) == 2:
            options += ["col", "col_expr", "slice", "elem", "step", "row_expr"]
        o = self.pick(options)
        if o == "mask":
            return f"{t}[{self.mexpr(shape, d).text}] = {self.scalar_operand(0).text}"
        if o == "mask_var":
            masks = self.vars("mask", shape)
            if masks:
                m = self.pick([v.name for v in masks])
                src = self.texpr(shape, d)  # index_put_ wants the target's dtype
                return f"{t}[{m}] = {src.at(P_ATOM)}[{m}].to({t}.dtype)"
            return f"{t}[{self.mexpr(shape, d).text}] = {self.scalar_literal().text}"
        if o == "first":
            return f"{t}[0] = {self.scalar_operand(0).text}"
        if o == "last_aug":
            return f"{t}[-1] {self.pick(['+=', '*=', '-='])} {self.scalar_literal().text}"
        if o == "col":
            return f"{t}[:, 0] = {self.scalar_operand(0).text}"
        if o == "col_expr":
            sub = (shape[0],)
            if sub in self.U:
                return f"{t}[:, -1] = {self.operand(self.texpr(sub, d)).text}"
            return f"{t}[:, -1] = {self.scalar_literal().text}"
        if o == "row_expr":
            sub = (shape[1],)
            if sub in self.U:
                return f"{t}[{1 if shape[0] > 1 else 0}] = {self.operand(self.texpr(sub, d)).text}"
            return f"{t}[0] = {self.scalar_literal().text}"
        if o == "slice":
            return f"{t}[1:] {self.pick(['*=', '+='])} {self.scalar_literal().text}"
        if o == "elem":
            return f"{t}[0, -1] = {self.fexpr(1).text}"
        return f"{t}[:, ::2] = {self.scalar_literal().text}"

    def stmt_unpack_shape(self, indent: int, depth: int) -> None:
        """`r, c = x.shape` (or x.size())."""
        self.features.add("shape_unpack")
        base = self.base_tensor()
        a, b = self.fresh("k"), self.fresh("k")
        self.emit(indent, f"{a}, {b} = {self.pick([f'{base.text}.shape', f'{base.text}.size()'])}")
        self.scope[a] = Var(a, "int")
        self.scope[b] = Var(b, "int")

    def stmt_optional(self, indent: int, depth: int) -> None:
        """Use an Optional[Tensor] parameter, refined by `is None` / `is not None`."""
        self.features.add("optional")
        opt = self.pick(self.vars("optional"))
        style = self.pick(["not_none", "else", "early_return"] if not self.no_jumps else ["not_none", "else"])
        refined = Var(opt.name, "tensor", opt.shape, frozen=True)
        before = dict(self.scope)
        if style == "early_return":
            # `if b is None: return ...`: b is a tensor for the rest of the block.
            self.emit(indent, f"if {opt.name} is None:")
            self.emit(indent + 1, f"return{self.ret_value()}")
            self.scope[opt.name] = refined
            return
        targets = [v for v in self.vars("tensor", self.S) if not v.frozen]
        if style == "not_none" and targets:
            self.emit(indent, f"if {opt.name} is not None:")
            self.scope[opt.name] = refined
            v = self.pick(targets)
            self.emit(indent + 1, f"{v.name} = {binop(E(v.name), self.pick(['+', '*', '-']), E(opt.name)).text}")
            if self.chance(0.3):
                self.statement(indent + 1, 0, False)
            self.scope = before
            return
        name = self.fresh("t")
        self.emit(indent, f"if {opt.name} is None:")
        self.emit(indent + 1, f"{name} = {self.texpr(self.S, 1).text}")
        self.emit(indent, "else:")
        self.scope[opt.name] = refined
        self.emit(indent + 1, f"{name} = {self.texpr(self.S, 1).text} + {opt.name}")
        self.scope = before
        self.scope[name] = Var(name, "tensor", self.S)

    def stmt_foreach(self, indent: int, depth: int) -> None:
        """`for e in xs:` over a list, or over a tuple of tensors (unrolled by the compiler)."""
        lists = [v for v in self.vars("list") if v.list_object not in self.iterating]
        before = dict(self.scope)
        acc = None
        over_tuple = not lists or self.chance(0.4)
        if over_tuple:
            self.features.add("for_tuple")
            shape = self.shape()
            items = [self.texpr(shape, self.count(0, 1)) for _ in range(self.count(1, 3))]
            iterable = "(" + ", ".join(e.text for e in items) + ("," if len(items) == 1 else "") + ")"
        else:
            self.features.add("for_list")
            xs = self.pick(lists)
            shape, iterable = xs.shape, xs.name  # type: ignore[assignment]
            self.iterating.add(xs.list_object)
        targets = [v for v in self.vars("tensor", shape) if not v.frozen]
        if targets and self.chance(0.7):
            acc = self.pick(targets).name
        e = self.fresh("e")
        self.emit(indent, f"for {e} in {iterable}:")
        self.scope[e] = Var(e, "tensor", shape, frozen=True)
        self.loop_depth += 1
        if over_tuple:
            self.no_jumps += 1
        if acc is not None:
            self.emit(indent + 1, f"{acc} = {binop(E(acc), self.pick(['+', '-']), E(e)).text}")
        self.block(indent + 1, depth - 1, self.count(0 if acc else 1, 2))
        if over_tuple:
            self.no_jumps -= 1
        else:
            self.iterating.discard(xs.list_object)
        self.loop_depth -= 1
        self.scope = before

    def stmt_layers(self, indent: int, depth: int) -> None:
        """Submodule containers: a loop over an nn.ModuleList, indexing it, an nn.Sequential."""
        self.features.add("module_list")
        targets = [v for v in self.vars("tensor", self.S) if not v.frozen]
        if targets and self.chance(0.7):
            v = self.pick(targets).name
        else:
            v = self.fresh("t")
            self.emit(indent, f"{v} = {self.texpr(self.S, 1).text}")
            self.scope[v] = Var(v, "tensor", self.S)
        style = self.pick(["loop", "index", "seq"])
        if style == "loop":
            layer = self.fresh("layer")
            self.emit(indent, f"for {layer} in self.layers:")
            self.emit(indent + 1, f"{v} = {self.pick(['torch.tanh', 'F.relu', ''])}({layer}({v}))")
            if not self.no_jumps and self.chance(0.3):
                self.emit(indent + 1, f"if {self.cond(0).text}:")
                self.emit(indent + 2, "break")
        elif style == "index":
            self.emit(indent, f"{v} = self.layers[{self.pick([0, 1, -1])}]({v}) * 0.5")
        else:
            self.emit(indent, f"{v} = self.seq({v})")

    def stmt_buffer(self, indent: int, depth: int) -> None:
        self.features.add("buffer_update")
        kind = self.pick(["count", "inplace", "calls", "rebind", "count"])
        if kind == "calls":
            self.features.add("attr_assign")
            self.emit(indent, self.pick(["self.calls += 1", f"self.calls = self.calls + {self.iexpr(1).at(P_ADD + 1)}"]))
        elif kind == "rebind":
            self.features.add("attr_assign")
            self.emit(indent, f"self.total = {self.texpr((self.C,), 1).text} * 0.5")
        elif kind == "inplace":
            self.emit(indent, self.inplace_text("self.total", (self.C,)))
        else:
            self.emit(indent, "self.count += 1")

    def stmt_tuple(self, indent: int, depth: int) -> None:
        self.features.add("tuple")
        swappable = [v for v in self.scope.values() if v.kind == "tensor" and not v.frozen]
        pairs = [(a, b) for a in swappable for b in swappable if a.name < b.name and a.shape == b.shape]
        ints = [v for v in self.vars("int") if not v.frozen]
        kind = self.pick(["pack", "swap", "swap_int"])
        if kind == "swap" and pairs:
            a, b = self.pick(pairs)
            self.emit(indent, f"{a.name}, {b.name} = {b.name}, {a.name}")
            return
        if kind == "swap_int" and len(ints) >= 2:
            a, b = ints[0], ints[1]
            self.emit(indent, f"{a.name}, {b.name} = {b.name}, {a.name} + 1")
            return
        # pack then unpack (or index)
        shape = self.shape()
        t = self.texpr(shape, self.count(0, 2))
        i = self.iexpr(1)
        p = self.fresh("p")
        self.emit(indent, f"{p} = ({t.text}, {i.text})")
        a, b = self.fresh("t"), self.fresh("k")
        if self.chance(0.5):
            self.emit(indent, f"{a}, {b} = {p}")
        else:
            self.emit(indent, f"{a} = {p}[0]")
            self.emit(indent, f"{b} = {p}[1] + {p}[-1]")
        self.scope[a] = Var(a, "tensor", shape)
        self.scope[b] = Var(b, "int")

    def stmt_list(self, indent: int, depth: int) -> None:
        self.features.add("list")
        shape = self.shape()
        name = self.fresh("xs")
        first = self.texpr(shape, self.count(0, 2))
        if self.chance(0.3):
            self.emit(indent, f"{name}: list[Tensor] = []")
            self.emit(indent, f"{name}.append({first.text})")
        else:
            items = [first] + [self.texpr(shape, self.count(0, 1)) for _ in range(self.count(0, 2))]
            self.emit(indent, f"{name} = [{', '.join(e.text for e in items)}]")
        self.scope[name] = Var(name, "list", shape)
        if self.chance(0.3):  # an alias: growing either name grows the one list
            self.features.add("list_alias")
            alias = self.fresh("xs")
            self.emit(indent, f"{alias} = {name}")
            self.scope[alias] = Var(alias, "list", shape, owner=name)

    def stmt_append(self, indent: int, depth: int) -> None:
        lists = [v for v in self.vars("list") if v.list_object not in self.iterating]
        if not lists:
            self.stmt_list(indent, depth)
            return
        xs = self.pick(lists)
        self.features.add("append")
        how = self.pick(["append", "append", "iadd", "extend"])
        if how == "append":
            self.emit(indent, f"{xs.name}.append({self.texpr(xs.shape, self.count(0, 2)).text})")
            return
        self.features.add("list_" + how)
        # by another list (not itself: in a loop, `xs += xs` would double it every turn)
        alike = [v.name for v in self.vars("list", xs.shape) if v.list_object != xs.list_object]
        if alike and self.chance(0.4):
            other = self.pick(alike)
        else:
            other = "[" + ", ".join(self.texpr(xs.shape, self.count(0, 1)).text for _ in range(self.count(1, 2))) + "]"
        self.emit(indent, f"{xs.name} += {other}" if how == "iadd" else f"{xs.name}.extend({other})")

    # -- outside the subset (permissive mode) ----------------------------------------------------
    def stmt_python_log(self, indent: int, depth: int) -> None:
        """A call into Python that records what it sees in the module-level LOG: the order of
        effects and the values at that point must be eager's."""
        tensors = [v for v in self.scope.values() if v.kind == "tensor" and v.shape is not None]
        v = self.pick(tensors)
        how = self.pick(["sum", "list", "repr"])
        if how == "sum":
            text = f"LOG.append(float({v.name}.double().sum()))"
        elif how == "list":
            text = f"LOG.append([round(float(e), 6) for e in {v.name}.reshape(-1).tolist()])"
        else:
            text = f"LOG.append(({v.name}.shape, str({v.name}.dtype)))"
        self.emit(indent, text)
        self.features.add("python_log")

    def stmt_python_inplace(self, indent: int, depth: int) -> None:
        """An in-place update inside Python code: compiled code after it must see it."""
        targets = self.inplace_targets()
        if not targets:
            self.stmt_python_log(indent, depth)
            return
        name, shape = self.pick(targets)
        self.emit(indent, "try:")
        self.emit(indent + 1, self.inplace_text(name, shape))
        self.emit(indent, "except ZeroDivisionError:")
        self.emit(indent + 1, "pass")
        self.features.add("python_inplace")

    def stmt_python_rebind(self, indent: int, depth: int) -> None:
        """A tensor name bound by Python code; compiled code goes on using it."""
        targets = [v for v in self.scope.values() if v.kind == "tensor" and not v.frozen]
        shape = self.shape()
        value = self.texpr(shape, self.count(0, 2))
        how = self.pick(["dict", "lambda", "comprehension"])
        if how == "dict":
            text = f'{{"v": {value.text}}}["v"]'
        elif how == "lambda":
            text = f"(lambda q: q)({value.text})"
        else:
            text = f"{{0: q for q in ({value.text},)}}[0]"  # (a list comprehension compiles)
        if targets and self.chance(0.5):
            v = self.pick([t for t in targets if t.shape == shape] or targets)
            if v.shape == shape:
                self.emit(indent, f"{v.name} = {text}")
                self.features.add("python_rebind")
                return
        name = self.fresh("t")
        self.emit(indent, f"{name} = {text}")
        self.scope[name] = Var(name, "tensor", shape)
        self.features.add("python_rebind")

    def stmt_python_int(self, indent: int, depth: int) -> None:
        """An int that Python code computes; compiled code uses it."""
        name = self.fresh("k")
        self.emit(indent, f"{name} = len([0] * {self.count(0, 3)}) + {self.iexpr(1).at(P_ADD + 1)}")
        self.scope[name] = Var(name, "int", frozen=True)
        self.features.add("python_int")

    def ret_value(self) -> str:
        if self.returns_none:
            return self.pick(["", " None"])
        return " " + self.ret_tuple()

    def ret_tuple(self) -> str:
        parts = []
        for _ in range(self.n_tensors_out):
            if not self.ret_shape and self.chance(0.1):
                self.features.add("mask_out")
                parts.append(self.mexpr(self.pick(self.U[:6]), 1).text)
                continue
            parts.append(self.texpr(self.ret_shape or self.shape(), self.count(0, 1)).text)

        for _ in range(self.n_ints_out):
            parts.append(self.iexpr(1).text)
        for _ in range(self.n_floats_out):
            parts.append(self.fexpr(1).at(P_IF))
        for _ in range(self.n_bools_out):
            parts.append(self.cond(1).at(P_IF))
        if self.nested_out and not self.single_tensor:
            parts.append(f"({self.texpr(self.shape(), 1).text}, {self.iexpr(1).text})")
        if self.single_tensor:
            return parts[0]
        if len(parts) == 1:
            return f"({parts[0]},)"
        return ", ".join(parts)

    def stmt_return(self, indent: int, depth: int) -> None:
        """An early return: `if c: [stmts] return ...`."""
        self.features.add("early_return")
        self.emit(indent, f"if {self.cond(1).text}:")
        saved = dict(self.scope)
        if self.chance(0.3):
            self.statement(indent + 1, 0, False)
        self.emit(indent + 1, f"return{self.ret_value()}")
        self.scope = saved
        if self.chance(0.3):
            # the other side falls through: what it binds is bound after the if
            self.features.add("leave_else")
            self.emit(indent, "else:")
            self.block(indent + 1, max(depth - 1, 0), self.count(1, 2))

    def stmt_jump(self, indent: int, depth: int) -> None:
        self.features.add("break_continue")
        jump = self.pick(["break", "continue"])
        self.emit(indent, f"if {self.cond(1).text}:")
        saved = dict(self.scope)
        if self.chance(0.3):
            self.statement(indent + 1, 0, False)
        self.emit(indent + 1, jump)
        self.scope = saved
        if self.chance(0.3):
            self.features.add("leave_else")
            self.emit(indent, "else:")
            self.block(indent + 1, max(depth - 1, 0), self.count(1, 2))

    def merge(self, before: dict[str, Var], sides: list[dict[str, Var]]) -> dict[str, Var]:
        """Names bound after an if: those bound before, and new ones bound the same way on both sides."""
        merged = dict(before)
        if len(sides) == 2:
            a, b = sides
            for name, v in a.items():
                if name not in before and name in b and b[name] == v and v.kind != "list":
                    merged[name] = v
        return merged

    def stmt_if(self, indent: int, depth: int, keyword: str = "if") -> None:
        self.features.add("if")
        before = dict(self.scope)
        self.emit(indent, f"{keyword} {self.cond(2).text}:")
        self.block(indent + 1, depth - 1, self.count(1, 3))
        then_scope = self.scope
        sides = [then_scope]
        if self.chance(0.6):
            self.scope = dict(before)
            if self.chance(0.25):
                self.features.add("elif")
                self.stmt_if(indent, depth - 1, keyword="elif")
            else:
                self.emit(indent, "else:")
                self.block(indent + 1, depth - 1, self.count(1, 3))
            sides.append(self.scope)
        self.scope = self.merge(before, sides)

    def loop_counter_name(self) -> str:
        for name in ("i", "j", "q", "r"):
            if name not in self.scope:
                return name
        return self.fresh("i")

    def stmt_for(self, indent: int, depth: int) -> None:
        if self.loop_depth >= 2:
            self.stmt_if(indent, depth)
            return
        self.features.add("for")
        before = dict(self.scope)
        acc = None
        if self.chance(0.6):
            shape = self.pick(self.U[:4])
            acc = self.fresh("acc")
            init = self.pick([call("torch.zeros_like", self.leaf(shape)), self.texpr(shape, 1)])
            self.emit(indent, f"{acc} = {init.text}")
            before[acc] = Var(acc, "tensor", shape)
        self.scope = dict(before)
        i = self.loop_counter_name()
        bound = self.pick(["3", "2", "0", "1", "4", "min(abs(N), 4)", "N % 3", "1, 4", "0, 6, 2", "len(L)", "4, 0, -1"])
        if "N" in bound:
            ints = self.vars("int")
            bound = bound.replace("N", self.pick([v.name for v in ints]) if ints else "2")
        if "L" in bound:
            lists = self.vars("list")
            bound = bound.replace("L", lists[0].name) if lists else "2"
        self.emit(indent, f"for {i} in range({bound}):")
        self.scope[i] = Var(i, "int", frozen=True)
        self.loop_depth += 1
        n = self.count(1, 3)
        acc_at = self.count(0, n)
        for k in range(n + 1):
            if k == acc_at and acc is not None:
                acc_shape = before[acc].shape
                term = self.partner(acc_shape, 1)
                self.emit(indent + 1, f"{acc} = {binop(E(acc), self.pick(['+', '-']), binop(term, '*', E(i))).text}")
            if k < n:
                self.statement(indent + 1, depth - 1, False)
        self.loop_depth -= 1
        self.scope = before

    def stmt_while(self, indent: int, depth: int) -> None:
        if self.loop_depth >= 2:
            self.stmt_if(indent, depth)
            return
        self.features.add("while")
        before = dict(self.scope)
        j = self.loop_counter_name()
        self.emit(indent, f"{j} = 0")
        limit = self.pick(["3", "2", "min(abs(N), 3)", "1"])
        if "N" in limit:
            ints = self.vars("int")
            limit = limit.replace("N", self.pick([v.name for v in ints]) if ints else "2")
        style = self.pick(["plain", "tensor_cond", "true"])
        if style == "plain":
            self.emit(indent, f"while {j} < {limit}:")
        elif style == "tensor_cond":
            self.features.add("tensor_cond")
            t = self.texpr(self.S, 1)
            self.emit(indent, f"while {j} < {limit} and bool({t.at(P_ATOM)}.abs().sum() < 1000.0):")
        else:
            self.emit(indent, "while True:")
        self.emit(indent + 1, f"{j} += 1")
        if style == "true":
            self.emit(indent + 1, f"if {j} > {limit}:")
            self.emit(indent + 2, "break")
        before[j] = Var(j, "int", frozen=True)
        self.scope = dict(before)
        self.loop_depth += 1
        self.block(indent + 1, depth - 1, self.count(1, 3))
        self.loop_depth -= 1
        self.scope = before


class ScalarE(E):
    """A Python number (not a tensor) expression."""

    @staticmethod
    def of(e: E) -> "ScalarE":
        return ScalarE(e.text, e.prec)


@st.composite
def programs(draw: Callable[[Any], Any], mutate_inputs: bool = False, decorate: bool = True,
             max_statements: int = 8, python: bool = False) -> Program:
    R = draw(st.integers(2, 4))
    C = draw(st.integers(2, 5))
    dtype = draw(st.sampled_from([torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.float16]))
    g = Gen(draw, R, C, mutate_inputs=mutate_inputs, module=False)
    g.dtype_float32 = dtype == torch.float32
    g.python = python
    n_tensors = draw(st.integers(1, 3))
    tensor_params: list[tuple[str, tuple[int, ...]]] = [("x", (R, C))]
    y_shape = draw(st.sampled_from([(R, C), (R, C), (R, 1), (C,), (1, C)]))
    if n_tensors >= 2:
        tensor_params.append(("y", y_shape))
    if n_tensors >= 3:
        tensor_params.append(("z", (R, C)))
    for name, shape in tensor_params:
        g.scope[name] = Var(name, "tensor", shape, frozen=True)
    params = [f"{name}: Tensor" for name, _ in tensor_params]
    scalar_args: list[tuple[str, Any]] = []
    scalar_specs = []
    if draw(st.booleans()):
        scalar_specs.append(("n", "int", draw(st.integers(-2, 5))))
    if draw(st.booleans()):
        scalar_specs.append(("s", "float", draw(st.sampled_from([0.5, -0.25, 1.5, 0.0, -1.0]))))
    if draw(st.booleans()):
        scalar_specs.append(("flag", "bool", draw(st.booleans())))
    omit_from = draw(st.integers(0, len(scalar_specs)))  # pass a prefix, the rest take defaults
    first_default = draw(st.integers(0, omit_from))  # parameters from here on have defaults
    for k, (name, kind, default) in enumerate(scalar_specs):
        params.append(f"{name}: {kind}" + (f" = {default!r}" if k >= first_default else ""))
        if k < omit_from:
            if kind == "int":
                value: Any = draw(st.integers(-3, 6))
            elif kind == "float":
                value = draw(st.sampled_from([0.75, -0.5, 0.25, 2.0, 0.0, -1.5]))
            else:
                value = draw(st.booleans())
            scalar_args.append((name, value))
        g.scope[name] = Var(name, kind)
    kw_scalar_args: list[tuple[str, Any]] = []
    kw_tensor_params: list[tuple[str, tuple[int, ...]]] = []
    if draw(st.integers(0, 3)) == 3:
        params.append(f"mode: str = {draw(st.sampled_from(['sum', 'max']))!r}")
        g.scope["mode"] = Var("mode", "str")
        if draw(st.booleans()):
            kw_scalar_args.append(("mode", draw(st.sampled_from(["sum", "mean", "max"]))))
    if draw(st.integers(0, 3)) == 3:
        shape = draw(st.sampled_from([(R, C), (C,), (R, 1), (1, C)]))
        params.append("bias: Optional[Tensor] = None")
        g.scope["bias"] = Var("bias", "optional", shape)
        if draw(st.booleans()):
            kw_tensor_params.append(("bias", shape))
    helpers = draw_helpers(draw, R, C, g.dtype_float32)
    g.helpers = [name for name, _ in helpers]
    g.n_tensors_out = draw(st.integers(1, 3))
    g.n_ints_out = draw(st.integers(0, 2))
    g.n_floats_out = draw(st.sampled_from([0, 0, 1]))
    g.n_bools_out = draw(st.sampled_from([0, 0, 1]))
    g.single_tensor = g.n_tensors_out == 1 and g.n_ints_out + g.n_floats_out + g.n_bools_out == 0 and draw(st.booleans())
    g.returns_none = mutate_inputs and draw(st.integers(0, 3)) == 3  # only the mutations are observable
    g.nested_out = not g.single_tensor and draw(st.integers(0, 5)) == 5
    ret = "None" if g.returns_none else "Tensor" if g.single_tensor else "tuple[" + ", ".join(
        ["Tensor"] * g.n_tensors_out + ["int"] * g.n_ints_out + ["float"] * g.n_floats_out + ["bool"] * g.n_bools_out
        + (["tuple[Tensor, int]"] if g.nested_out else [])) + "]"
    g.block(1, 2, draw(st.integers(1, max_statements)), top=True)
    if not g.returns_none or draw(st.booleans()):  # a None function may fall off its end
        g.emit(1, f"return{g.ret_value()}")
    head = f"def f({', '.join(params)}) -> {ret}:"
    source = (HEADER + ("\nLOG: list = []\n" if python else "") + "".join("\n\n" + text for _, text in helpers)
              + "\n\n" + (("@script(permissive=True)\n" if python else "@script\n") if decorate else "")
              + head + "\n" + "\n".join(g.lines) + "\n")
    return Program(
        source=source, name="f", kind="function", tensor_params=tensor_params, scalar_args=scalar_args,
        dtype=dtype, seed=draw(st.integers(0, 2**16)), calls=draw(st.integers(1, 2)),
        quantized=draw(st.booleans()), mutates_inputs=mutate_inputs, features=g.features,
        kw_tensor_params=kw_tensor_params, kw_scalar_args=kw_scalar_args,
    )


def draw_helpers(draw: Callable[[Any], Any], R: int, C: int, dtype_float32: bool) -> list[tuple[str, str]]:
    """Zero to two @script helpers `helperN(a: Tensor, k: int = ..) -> Tensor` on (R, C) tensors;
    the second may call the first."""
    helpers: list[tuple[str, str]] = []
    for k in range(draw(st.sampled_from([0, 0, 1, 2]))):
        g = Gen(draw, R, C, mutate_inputs=False, module=False)
        g.dtype_float32 = dtype_float32
        g.helpers = [name for name, _ in helpers]
        g.scope["a"] = Var("a", "tensor", (R, C), frozen=True)
        g.scope["k"] = Var("k", "int")
        g.ret_shape, g.n_tensors_out, g.single_tensor = (R, C), 1, True
        g.block(1, 1, draw(st.integers(1, 3)), top=True)
        g.emit(1, f"return{g.ret_value()}")
        name = f"helper{k}"
        text = f"@script\ndef {name}(a: Tensor, k: int = {draw(st.integers(-1, 3))}) -> Tensor:\n" + "\n".join(g.lines) + "\n"
        helpers.append((name, text))
    return helpers


@st.composite
def module_programs(draw: Callable[[Any], Any], max_statements: int = 6) -> Program:
    R = draw(st.integers(2, 4))
    C = draw(st.integers(2, 5))
    g = Gen(draw, R, C, mutate_inputs=False, module=True)
    g.scope["x"] = Var("x", "tensor", (R, C), frozen=True)
    g.scope["n"] = Var("n", "int")
    g.scope["s"] = Var("s", "float")
    g.n_tensors_out = draw(st.integers(1, 2))
    g.n_ints_out = draw(st.integers(0, 1))
    g.emit(2, "h = self.linear(x) * self.scale + self.alpha")
    g.scope["h"] = Var("h", "tensor", (R, C))
    helpers = draw_helpers(draw, R, C, True)
    g.helpers = [name for name, _ in helpers]
    g.layers = draw(st.booleans())
    # A method of M (it may update the buffers too) and a @script submodule class, both with a
    # random body, called like the helpers: f(a: Tensor[R, C], k: int = ..) -> Tensor[R, C].
    method_lines: list[str] = []
    inner_source = ""
    if draw(st.booleans()):
        mg = Gen(draw, R, C, mutate_inputs=False, module=True)
        mg.helpers = list(g.helpers)
        mg.scope["a"] = Var("a", "tensor", (R, C), frozen=True)
        mg.scope["k"] = Var("k", "int")
        mg.ret_shape, mg.n_tensors_out, mg.single_tensor = (R, C), 1, True
        mg.block(2, 1, draw(st.integers(1, 3)), top=True)
        mg.emit(2, f"return{mg.ret_value()}")
        method_lines = ["", f"    def step(self, a: Tensor, k: int = {draw(st.integers(-1, 3))}) -> Tensor:", *mg.lines]
        g.helpers.append("self.step")
        g.features |= mg.features | {"method_call"}
    if draw(st.booleans()):
        ig = Gen(draw, R, C, mutate_inputs=False, module=True)
        ig.buffers = False
        ig.helpers = [name for name, _ in helpers]
        ig.scope["a"] = Var("a", "tensor", (R, C), frozen=True)
        ig.scope["k"] = Var("k", "int")
        ig.ret_shape, ig.n_tensors_out, ig.single_tensor = (R, C), 1, True
        ig.block(2, 1, draw(st.integers(1, 3)), top=True)
        ig.emit(2, f"return{ig.ret_value()}")
        inner_source = "\n\n" + "\n".join([
            "@script",
            "class Inner(nn.Module):",
            "    def __init__(self) -> None:",
            "        super().__init__()",
            f"        self.linear = nn.Linear({C}, {C})",
            "",
            f"    def forward(self, a: Tensor, k: int = {draw(st.integers(-1, 3))}) -> Tensor:",
            *ig.lines,
        ]) + "\n"
        g.helpers.append("self.inner")
        g.features |= ig.features | {"script_submodule"}
    if draw(st.booleans()):
        g.emit(2, "if self.training:")
        g.emit(3, "self.count += 1")
    g.block(2, 2, draw(st.integers(1, max_statements)), top=True)
    g.emit(2, f"self.total.add_({g.operand(g.texpr((C,), 1)).text})")
    g.emit(2, "self.count += 1")
    g.emit(2, f"return{g.ret_value()}")
    ret = "tuple[" + ", ".join(["Tensor"] * g.n_tensors_out + ["int"] * g.n_ints_out) + "]"
    n_default = draw(st.integers(-2, 4))
    body = [
        "@script",
        "class M(nn.Module):",
        "    def __init__(self) -> None:",
        "        super().__init__()",
        f"        self.linear = nn.Linear({C}, {C})",
        f"        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, {C}))",
        f"        self.alpha = {draw(st.sampled_from([0.5, -0.25, 1.0]))!r}",
        '        self.register_buffer("count", torch.zeros((), dtype=torch.long))',
        f'        self.register_buffer("total", torch.zeros({C}))',
        "        self.calls = 0",
        *([f"        self.layers = nn.ModuleList([nn.Linear({C}, {C}), nn.Linear({C}, {C})])",
           f"        self.seq = nn.Sequential(nn.Linear({C}, {C}), nn.ReLU())"] if g.layers else []),
        *(["        self.inner = Inner()"] if inner_source else []),
        "",
        f"    def forward(self, x: Tensor, n: int = {n_default}, s: float = 0.5) -> {ret}:",
    ]
    source = (HEADER + "".join("\n\n" + text for _, text in helpers) + inner_source + "\n\n" + "\n".join(body) + "\n"
              + "\n".join(g.lines) + "\n" + "\n".join(method_lines) + ("\n" if method_lines else ""))
    n_args = draw(st.integers(0, 2))
    scalar_args: list[tuple[str, Any]] = []
    if n_args >= 1:
        scalar_args.append(("n", draw(st.integers(-3, 6))))
    if n_args >= 2:
        scalar_args.append(("s", draw(st.sampled_from([0.75, -0.5, 0.0]))))
    g.features.add("module")
    return Program(
        source=source, name="M", kind="module", tensor_params=[("x", (R, C))], scalar_args=scalar_args,
        dtype=torch.float32, seed=draw(st.integers(0, 2**16)), calls=draw(st.integers(1, 3)),
        quantized=draw(st.booleans()), mutates_inputs=False, train=draw(st.booleans()), features=g.features,
    )

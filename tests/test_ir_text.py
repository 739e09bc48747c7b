"""The IR's text form: printer goldens for hand-built programs, and the round trip
`print_program(parse_program(text)) == text` on every example and on hand-written IR."""

from __future__ import annotations

import math
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ir.core import ops  # noqa: E402
from ir.core.attrs import LITERAL, Attr, Dict, Tup  # noqa: E402
from ir.core.builder import Builder  # noqa: E402
from ir.core.graph import Loc, Mutates, Program  # noqa: E402
from ir.core.parser import ParseError, parse_program, parse_type  # noqa: E402
from ir.passes import run_pipeline  # noqa: E402
from ir.core.printer import print_program  # noqa: E402
from ir.core.types import (  # noqa: E402
    BOOL,
    FLOAT,
    INT,
    NONE,
    STR,
    TENSOR,
    FunctionType,
    ListType,
    ModuleListType,
    ModuleType,
    OptionalType,
    ScalarType,
    TensorType,
    TupleType,
    Type,
)
from ir.core.verifier import verify  # noqa: E402

EXAMPLES = sorted(
    p for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__" and not p.stem.endswith("_compiled")
)


@lru_cache(maxsize=None)
def example_ir(stem: str, passes: bool = False) -> str:
    from transpiler.pipeline import lower_file
    from transpiler.source import SourceFile

    path = ROOT / "examples" / f"{stem}.py"
    program, _ = lower_file(SourceFile.read(path, path.name))
    if passes:
        run_pipeline(program, check=True)
    return print_program(program)


def roundtrip(text: str) -> str:
    return print_program(parse_program(text))


# -- round trip on the examples ----------------------------------------------------------------
def test_examples_found() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("passes", [False, True], ids=["lowered", "after-pipeline"])
@pytest.mark.parametrize("stem", [p.stem for p in EXAMPLES])
def test_example_ir_round_trips(stem: str, passes: bool) -> None:
    text = example_ir(stem, passes)
    program = parse_program(text)
    assert print_program(program) == text
    verify(program)
    assert program.source_file == f"{stem}.py"


@pytest.mark.parametrize("stem", [p.stem for p in EXAMPLES])
def test_example_ir_round_trips_without_locations(stem: str) -> None:
    program = parse_program(example_ir(stem))
    text = print_program(program, with_locs=False)
    assert "#" not in text
    assert roundtrip(text) == text


# -- printer goldens ---------------------------------------------------------------------------
F32_B4 = TensorType("float32", ("B", 4))


def cell_program() -> Program:
    """A cell with source-named values, temporaries and a name used twice."""
    func = ops.FuncOp.build(
        "Cell.forward",
        [ModuleType("Cell"), F32_B4, F32_B4],
        ["self", "x", "h"],
        TupleType((F32_B4, INT)),
        loc=Loc("cell.py", 8, 4),
    )
    b = Builder(func.body)
    self_, x, h = func.args
    with b.located(Loc("cell.py", 9, 16)):
        linear = b.create(ops.GetAttrOp, [self_], [ModuleType("torch.nn.Linear")], attr="linear").result
        y = b.create(ops.ModuleCallOp, [linear, x], [F32_B4]).result
        total = b.create(ops.BinaryOp, [y, h], [F32_B4], name="new_h", op="+").result
    with b.located(Loc("cell.py", 9, 8)):
        new_h = b.create(ops.TorchCallOp, [total], [F32_B4], name="new_h", callee="torch.tanh").result
    n = b.constant(3)
    pair = b.create(ops.TupleOp, [new_h, n], [TupleType((F32_B4, INT))]).result
    b.create(ops.ReturnOp, [pair])
    return Program("cell.py", [func])


CELL_TEXT = """\
func @Cell.forward(%self: Module[Cell], %x: f32[B, 4], %h: f32[B, 4]) -> tuple[f32[B, 4], int] {  # cell.py:8:5
  %0 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "linear"}  # cell.py:9:17
  %1 : f32[B, 4] = module.call(%0, %x)  # cell.py:9:17
  %new_h : f32[B, 4] = py.binary(%1, %h) {op = "+"}  # cell.py:9:17
  %new_h_1 : f32[B, 4] = torch.call(%new_h) {callee = "torch.tanh"}  # cell.py:9:9
  %2 : int = py.constant() {value = 3}
  %3 : tuple[f32[B, 4], int] = py.tuple(%new_h_1, %2)
  func.return(%3)
}
"""


def test_print_cell() -> None:
    program = cell_program()
    verify(program)
    assert print_program(program) == CELL_TEXT
    assert roundtrip(CELL_TEXT) == CELL_TEXT


def types_program() -> Program:
    """Arguments of every kind of type, with defaults; names that collide with uniqued ones."""
    linear = ModuleType("torch.nn.Linear")
    arg_types = [
        TENSOR,
        OptionalType(TENSOR),
        ListType(TENSOR),
        ModuleListType("ModuleList", (linear, linear)),
        ModuleListType("Sequential", (ModuleType("Block"),), length_known=False),
        TensorType("float16", (None, 3), "cuda"),
        TensorType("bool"),
        FLOAT,
        STR,
        OptionalType(INT),
    ]
    names = ["x", "mask", "xs", "layers", "blocks", "w", "flags", "scale", "mode", "k"]
    func = ops.FuncOp.build(
        "types",
        arg_types,
        names,
        TupleType((TENSOR, TupleType(()), NONE)),
        defaults={"scale": 0.5, "mode": "mean", "k": None},
    )
    b = Builder(func.body)
    x = func.args[0]
    x1 = b.create(ops.TorchCallOp, [x], [TENSOR], name="x", callee="torch.relu").result
    x2 = b.create(ops.TorchCallOp, [x1], [TENSOR], name="x_1", callee="torch.relu").result
    x3 = b.create(ops.TorchCallOp, [x2], [TENSOR], name="x", callee="torch.relu").result
    empty = b.create(ops.TupleOp, [], [TupleType(())]).result
    none = b.constant(None)
    out = b.create(ops.TupleOp, [x3, empty, none], [TupleType((TENSOR, TupleType(()), NONE))]).result
    b.create(ops.ReturnOp, [out])
    return Program("types.py", [func])


TYPES_TEXT = """\
func @types(%x: Tensor, %mask: Optional[Tensor], %xs: list[Tensor], \
%layers: ModuleList[Module[torch.nn.Linear], Module[torch.nn.Linear]], \
%blocks: Sequential[Module[Block], ...], %w: f16[?, 3]@cuda, %flags: bool[*], \
%scale: float = 0.5, %mode: str = "mean", %k: Optional[int] = None) -> tuple[Tensor, tuple[()], None] {
  %x_1 : Tensor = torch.call(%x) {callee = "torch.relu"}
  %x_1_1 : Tensor = torch.call(%x_1) {callee = "torch.relu"}
  %x_2 : Tensor = torch.call(%x_1_1) {callee = "torch.relu"}
  %0 : tuple[()] = py.tuple()
  %1 : None = py.constant() {value = None}
  %2 : tuple[Tensor, tuple[()], None] = py.tuple(%x_2, %0, %1)
  func.return(%2)
}
"""


def test_print_types_and_name_uniquing() -> None:
    program = types_program()
    verify(program)
    assert print_program(program) == TYPES_TEXT
    assert roundtrip(TYPES_TEXT) == TYPES_TEXT


def loops_program() -> Program:
    """scf.for holding an scf.if, then an scf.while: nested regions with block arguments."""
    func = ops.FuncOp.build("loops", [INT, TENSOR], ["n", "x"], TENSOR, loc=Loc("loops.py", 1, 0))
    b = Builder(func.body)
    n, x = func.args
    zero, one = b.constant(0), b.constant(1)
    body = ops.Block([INT, TENSOR], ["i", "x"])
    loop = b.create(ops.ForRangeOp, [zero, n, one, x], [TENSOR], name="x")
    loop.add_region(ops.Region([body]))
    with b.at_end_of(body):
        i, xi = body.args
        positive = b.create(ops.CompareOp, [i, zero], [BOOL], op=">").result
        branch = b.create(ops.IfOp, [positive], [TENSOR], name="x")
        then_block, else_block = ops.Block(), ops.Block()
        branch.add_region(ops.Region([then_block]))
        branch.add_region(ops.Region([else_block]))
        with b.at_end_of(then_block):
            squashed = b.create(ops.TorchCallOp, [xi], [TENSOR], name="x", callee="torch.tanh").result
            b.create(ops.YieldOp, [squashed])
        with b.at_end_of(else_block):
            b.create(ops.YieldOp, [xi])
        b.create(ops.YieldOp, [branch.result])
    before = ops.Block([TENSOR, INT], ["x", "k"])
    after = ops.Block([TENSOR, INT], ["x", "k"])
    whiled = b.create(ops.WhileOp, [loop.result, zero], [TENSOR, INT])
    whiled.results[0].name, whiled.results[1].name = "x", "k"
    whiled.add_region(ops.Region([before]))
    whiled.add_region(ops.Region([after]))
    with b.at_end_of(before):
        going = b.create(ops.CompareOp, [before.args[1], n], [BOOL], op="<").result
        b.create(ops.ConditionOp, [going, *before.args])
    with b.at_end_of(after):
        sq = b.create(ops.BinaryOp, [after.args[0], after.args[0]], [TENSOR], op="*").result
        k = b.create(ops.BinaryOp, [after.args[1], one], [INT], name="k", op="+").result
        b.create(ops.YieldOp, [sq, k])
    b.create(ops.ReturnOp, [whiled.results[0]])
    return Program("loops.py", [func])


LOOPS_TEXT = """\
func @loops(%n: int, %x: Tensor) -> Tensor {  # loops.py:1:1
  %0 : int = py.constant() {value = 0}
  %1 : int = py.constant() {value = 1}
  %x_1 : Tensor = scf.for(%0, %n, %1, %x) {
    ^(%i: int, %x_2: Tensor):
    %2 : bool = py.compare(%i, %0) {op = ">"}
    %x_3 : Tensor = scf.if(%2) {
      %x_4 : Tensor = torch.call(%x_2) {callee = "torch.tanh"}
      scf.yield(%x_4)
    } {
      scf.yield(%x_2)
    }
    scf.yield(%x_3)
  }
  %x_5 : Tensor, %k : int = scf.while(%x_1, %0) {
    ^(%x_6: Tensor, %k_1: int):
    %3 : bool = py.compare(%k_1, %n) {op = "<"}
    scf.condition(%3, %x_6, %k_1)
  } {
    ^(%x_7: Tensor, %k_2: int):
    %4 : Tensor = py.binary(%x_7, %x_7) {op = "*"}
    %k_3 : int = py.binary(%k_2, %1) {op = "+"}
    scf.yield(%4, %k_3)
  }
  func.return(%x_5)
}
"""


def test_print_nested_regions() -> None:
    program = loops_program()
    verify(program)
    assert print_program(program) == LOOPS_TEXT
    assert roundtrip(LOOPS_TEXT) == LOOPS_TEXT


class _LiteralsOp(ops.Operation):
    """An op of this test's own: one literal attribute per kind of value the IR text writes."""

    name = "test.literals"
    value = Attr(LITERAL)
    flags = Attr(Tup(bool))
    one = Attr(Tup(int))
    empty = Attr(Tup())
    floats = Attr(Tup(float))
    text = Attr(str)
    table = Attr(Dict(str, LITERAL))
    type = Attr(Type)
    big = Attr(int)


def test_print_attributes() -> None:
    func = ops.FuncOp.build("attrs", [], [], NONE)
    b = Builder(func.body)
    b.create(
        _LiteralsOp,
        [],
        [NONE],
        value=None,
        flags=(True, False),
        one=(1,),
        empty=(),
        floats=(1e-06, -0.0, math.inf, -math.inf, math.nan, 2.5e20),
        text='say "hi"\\\n',
        table={"a": 1, "b": (2, "c")},
        type=TensorType("float32", (2,)),
        big=-(10**30),
    )
    b.create(ops.ReturnOp, [b.constant(None)])
    text = print_program(Program("attrs.py", [func]))
    line = text.splitlines()[1]
    assert line == (
        '  %0 : None = test.literals() {value = None, flags = (True, False), one = (1,), empty = (), '
        "floats = (1e-06, -0.0, inf, -inf, nan, 2.5e+20), "
        r'text = "say \"hi\"\\\n", table = {"a": 1, "b": (2, "c")}, type = <f32[2]>, '
        "big = -1000000000000000000000000000000}"
    )
    assert roundtrip(text) == text
    attrs = parse_program(text).funcs[0].body.ops[0].attributes
    floats = attrs.pop("floats")
    assert floats[:5] == (1e-06, -0.0, math.inf, -math.inf) + floats[4:5] and math.isnan(floats[4])
    assert math.copysign(1, floats[1]) == -1 and floats[5] == 2.5e20
    assert attrs == {
        "value": None,
        "flags": (True, False),
        "one": (1,),
        "empty": (),
        "text": 'say "hi"\\\n',
        "table": {"a": 1, "b": (2, "c")},
        "type": TensorType("float32", (2,)),
        "big": -(10**30),
    }
    assert all(type(v) is int for v in (attrs["one"][0], attrs["big"]))


# -- the parser --------------------------------------------------------------------------------
TYPES = [
    "Tensor",
    "f32[B, 4]",
    "Tensor[?, 3]",
    "bool[*]",
    "f64[]",
    "i64[2*B, 7]@cuda:0",
    "Tensor@cpu",
    "float8_e4m3fn[4]",
    "int",
    "float",
    "bool",
    "str",
    "None",
    "dtype",
    "device",
    "Any",
    "Optional[Tensor]",
    "tuple[Tensor, int]",
    "tuple[()]",
    "tuple[Optional[list[f16[1, ?]]], tuple[int, int]]",
    "list[Tensor]",
    "Module[torch.nn.Linear]",
    "ModuleList[Module[torch.nn.Linear], Module[Block]]",
    "ModuleList[]",
    "Sequential[Module[torch.nn.Module], ...]",
    "Function[helpers.scale]",
]


@pytest.mark.parametrize("text", TYPES)
def test_parse_type_round_trips(text: str) -> None:
    assert str(parse_type(text)) == text


def test_parse_type_values() -> None:
    assert parse_type("f32[B, 4]") == TensorType("float32", ("B", 4))
    assert parse_type("Tensor") == TENSOR
    assert parse_type("bool[*]") == TensorType("bool")
    assert parse_type("bool") == BOOL
    assert parse_type("f16[?, 3]@cuda") == TensorType("float16", (None, 3), "cuda")
    assert parse_type("Optional[tuple[Tensor, int]]") == OptionalType(TupleType((TENSOR, INT)))
    assert parse_type("Sequential[Module[A], ...]") == ModuleListType("Sequential", (ModuleType("A"),), False)
    assert parse_type("Function[f]") == FunctionType("f")
    assert parse_type("complex") == ScalarType("complex")
    assert parse_type(" list[ Tensor ] ") == ListType(TENSOR)


HAND_WRITTEN = [
    # No locations, a default of each literal kind, an op without results.
    """\
func @f(%x: Tensor, %n: int = -3, %eps: float = 1e-05, %flag: bool = True, %dims: tuple[int, int] = (1, 2)) -> None {
  %y : Tensor = torch.method(%x, %n) {method = "add_", mutates = (0,), alias_of = 0}
  py.list_append(%x, %y)
  %0 : None = py.constant() {value = None}
  func.return(%0)
}
""",
    # Two functions; a location whose file name holds a colon.
    """\
func @Outer.forward(%self: Module[Outer], %x: Tensor) -> Tensor {  # C:/models/net.py:3:5
  %0 : Module[torch.nn.Linear] = py.getattr(%self) {attr = "fc"}  # C:/models/net.py:4:16
  %1 : Tensor = module.call(%0, %x)  # C:/models/net.py:4:16
  func.return(%1)  # C:/models/net.py:4:9
}

func @helper(%x: Tensor) -> Tensor {
  func.return(%x)
}
""",
    # A region without block arguments that holds only its terminator; an empty region.
    """\
func @g(%c: bool, %x: Tensor) -> Tensor {
  %r : Tensor = scf.if(%c) {
    scf.yield(%x)
  } {
    scf.yield(%x)
  }
  scf.if(%c) {
  } {
  }
  func.return(%r)
}
""",
    # scf.for_each over a module list, with a loop-carried value.
    """\
func @h(%layers: ModuleList[Module[Block], ...], %x: Tensor) -> Tensor {
  %x_1 : Tensor = scf.for_each(%layers, %x) {
    ^(%layer: Module[Block], %x_2: Tensor):
    %x_3 : Tensor = module.call(%layer, %x_2)
    scf.yield(%x_3)
  }
  func.return(%x_1)
}
""",
]


@pytest.mark.parametrize("text", HAND_WRITTEN)
def test_hand_written_ir_round_trips(text: str) -> None:
    assert roundtrip(text) == text


def test_parsed_ops_are_registered_kinds_with_locations_and_names() -> None:
    program = parse_program(CELL_TEXT)
    assert program.source_file == "cell.py"
    func = program.funcs[0]
    assert isinstance(func, ops.FuncOp)
    assert func.sym_name == "Cell.forward" and func.loc == Loc("cell.py", 8, 4)
    assert func.result_type == TupleType((F32_B4, INT))
    assert [a.name for a in func.args] == ["self", "x", "h"]
    body = func.body.ops
    assert [type(op) for op in body] == [
        ops.GetAttrOp,
        ops.ModuleCallOp,
        ops.BinaryOp,
        ops.TorchCallOp,
        ops.ConstantOp,
        ops.TupleOp,
        ops.ReturnOp,
    ]
    assert body[0].loc == Loc("cell.py", 9, 16) and body[4].loc is None
    assert body[0].result.name is None  # %0 is a temporary
    assert body[3].result.name == "new_h_1"
    assert body[3].operands[0] is body[2].result
    assert body[2].result.uses[0].op is body[3]
    assert all(op.parent is func.body for op in body)


def test_parsed_traits_follow_attributes() -> None:
    program = parse_program(HAND_WRITTEN[0])
    method = program.funcs[0].body.ops[0]
    assert isinstance(method, ops.TensorMethodOp) and method.has_trait(Mutates(0))
    assert program.funcs[0].attributes["defaults"] == {"n": -3, "eps": 1e-05, "flag": True, "dims": (1, 2)}
    assert program.source_file == "<ir>"


def test_parse_use_before_definition_links_the_later_value() -> None:
    program = parse_program(
        """\
func @f(%x: Tensor) -> Tensor {
  %y : Tensor = py.binary(%z, %x) {op = "+"}
  %z : Tensor = torch.call(%x) {callee = "torch.tanh"}
  func.return(%y)
}
"""
    )
    first, second, _ = program.funcs[0].body.ops
    assert first.operands[0] is second.result
    assert [u.op for u in second.result.uses] == [first]


def test_parse_skips_blank_and_comment_lines() -> None:
    text = "\n# a comment\nfunc @f(%x: Tensor) -> Tensor {\n\n  # inside\n  func.return(%x)\n}\n"
    assert roundtrip(text) == "func @f(%x: Tensor) -> Tensor {\n  func.return(%x)\n}\n"
    assert parse_program("").funcs == [] and parse_program("\n").funcs == []


BAD = [
    ("func @f(%x: Tensor) -> Tensor {\n  %y : Tensor = py.bogus(%x)\n}\n", 2, 17, "unknown op 'py.bogus'"),
    ("func @f(%x: Tensor) -> Tensor {\n  %y : Tensor = py.binary(%x, %x {op = \"+\"}\n}\n", 2, 34, "expected ',' or ')'"),
    ("func @f(%x: Tensor) -> Tensor {\n  func.return(%q)\n}\n", 2, 15, "use of undefined value %q"),
    ("func @f(%x: Tensor) -> Tensor {\n  %x : Tensor = py.refine(%x)\n}\n", 2, 3, "redefinition of %x"),
    ("func @f(%x: Tensor) -> Tensor {\n  func.return(%x)  # f.py:3\n}\n", 2, 20, "expected a location 'file:line:col'"),
    ("func @f(%x: Tensor) -> Tensor {\n  func.return(%x)\n", 3, 1, "expected '}', found end of input"),
    ("func @f(%x: Tensor) -> Tensor {\n  %s : str = py.constant() {value = \"abc}\n}\n", 2, 37, "unterminated string"),
    ("func @f(%x: Tensor) -> Tensor {\n  %s : str = py.constant() {value = abc}\n}\n", 2, 37, "expected an attribute value"),
    ("func @f(%x: Tensor[B, 4) -> Tensor {\n}\n", 1, 24, "expected ',' or ']'"),
    ("func @f(%x: ) -> Tensor {\n}\n", 1, 13, "expected a type"),
    ("func @f(%x: Tensor) -> Tensor {\n  %y : Tensor py.refine(%x)\n}\n", 2, 15, "expected '=' after the results"),
    ("fun @f() -> None {\n}\n", 1, 1, "expected 'func'"),
    ("func @f() -> None {\n  scf.if(%c) {\n    scf.yield()\n  }\n  %c : bool = py.constant() {value = True}\n}\n", 0, 0, ""),
]


@pytest.mark.parametrize("text, line, col, expected", BAD)
def test_parse_errors_name_line_column_and_expectation(text: str, line: int, col: int, expected: str) -> None:
    if not expected:  # parses: the verifier, not the parser, rejects a use before definition
        parse_program(text)
        return
    with pytest.raises(ParseError) as info:
        parse_program(text)
    err = info.value
    assert (err.line, err.col) == (line, col), str(err)
    assert expected in err.message
    assert str(err).startswith(f"{line}:{col}: ")


def test_parse_type_errors() -> None:
    for text, col, expected in [
        ("f32[B, 4", 9, "expected ',' or ']', found end of input"),
        ("Optional[]", 10, "expected a type, found ']'"),
        ("Tensor junk", 8, "expected end of type"),
        ("f32[4]@", 8, "expected a device"),
    ]:
        with pytest.raises(ParseError) as info:
            parse_type(text)
        assert info.value.col == col and expected in info.value.message, str(info.value)

"""The benchmark runner's helpers (benchmarks/bench.py): arithmetic, formatting, tables, cases.
Nothing here times anything against a threshold."""
from __future__ import annotations

import math

import torch

from benchmarks import bench, micro
from benchmarks.first_call import resolve


def test_geomean_and_speedup_ignore_missing_values() -> None:
    assert math.isclose(bench.geomean([2.0, 8.0]), 4.0)
    assert math.isclose(bench.geomean([4.0, math.nan, 0.0, math.inf]), 4.0)
    assert math.isnan(bench.geomean([]))
    assert bench.speedup(3.0, 1.5) == 2.0
    assert math.isnan(bench.speedup(math.nan, 1.0)) and math.isnan(bench.speedup(1.0, 0.0))


def test_formatting() -> None:
    assert bench.fmt_ms(0.0123456) == "12.3"
    assert bench.fmt_ms(0.25) == "250"
    assert bench.fmt_ms(7.1e-6) == "0.0071"
    assert bench.fmt_ms(math.nan) == "-"
    assert bench.fmt_x(1.234) == "1.23x" and bench.fmt_x(math.nan) == "-"
    assert bench.fmt_s(None) == "-" and bench.fmt_s(1.005) == "1.00"
    assert math.isclose(bench.bandwidth_gbs(2_000_000_000, 0.5), 4.0)


def test_target_status() -> None:
    assert bench.target_status(">=3x eager", 3.0, 3.0) == "met >=3x eager"
    assert bench.target_status(">=3x eager", 2.9, 3.0) == "MISS >=3x eager"
    assert bench.target_status("<0.5 s", 0.4, 0.5, higher_is_better=False) == "met <0.5 s"
    assert bench.target_status("<0.5 s", 0.5, 0.5, higher_is_better=False) == "MISS <0.5 s"
    assert bench.target_status("x", math.nan, 1.0) == "n/a x"


def test_notes_number_each_text_once() -> None:
    notes = bench.Notes()
    assert notes.ref("a") == "[1]" and notes.ref("b") == "[2]" and notes.ref("a") == "[1]"
    assert notes.texts == ["a", "b"]


def test_table_text_and_markdown() -> None:
    table = bench.Table("T", ["name", "ms", "note"], [["mlp", "1.5", "a|b"], ["x", "10", ""]], "lrl", "legend")
    lines = table.text().splitlines()
    assert lines[0] == "T" and lines[-1] == "legend"
    assert lines[1] == "name |  ms | note"
    assert lines[3] == "mlp  | 1.5 | a|b"
    md = table.markdown().splitlines()
    assert md[0] == "### T"
    assert md[3] == "| :-- | --: | :-- |"
    assert md[4] == "| mlp | 1.5 | a\\|b |"


def test_ratios_leave_out_a_wrong_torchscribe_result() -> None:
    case = bench.Case("m", "B=1", "example", lambda: (None, ()))
    row = bench.Row(case, {"eager": bench.Cell(seconds=2.0), "jit": bench.Cell(error="no"),
                           "compile": bench.Cell(seconds=1.0), "torchscribe": bench.Cell(seconds=0.5)})
    r = bench.ratios(row)
    assert r["compile"] == 2.0 and r["torchscribe"] == 4.0 and r["ts_vs_compile"] == 2.0 and math.isnan(r["jit"])
    assert bench.row_targets(row) == "met >=1.2x eager, met >=1x compile"
    row.cells["torchscribe"].mismatch = "differs"
    assert math.isnan(bench.ratios(row)["torchscribe"])
    assert bench.row_targets(row) == "FAIL (torchscribe)"


def test_batch_detection_and_resizing() -> None:
    x, mask = torch.arange(6.0).reshape(3, 2), torch.tensor([[True], [False], [True]])
    assert bench.batch_problem((x, (mask,), "max", 2.0)) is None
    assert "disagree" in bench.batch_problem((torch.zeros(12, 3, 4), (torch.zeros(3, 5),)))
    assert bench.batch_problem((1.0,)) == "no tensor input"
    assert "0-d" in bench.batch_problem((torch.tensor(1.0),))
    x8, (mask8,), mode, t = bench.with_batch((x, (mask,), "max", 2.0), 8)
    assert x8.shape == (8, 2) and mask8.shape == (8, 1) and (mode, t) == ("max", 2.0)
    assert torch.equal(x8[3], x[0]) and torch.equal(bench.with_batch((x,), 1)[0], x[:1])


def test_selected() -> None:
    assert bench.selected("conv_bn_relu[train]", ["conv_bn_relu"])
    assert bench.selected("mlp", [])
    assert not bench.selected("mlp", ["softmax"])


def test_mismatches_use_the_dtype_tolerance() -> None:
    from ir.kernel.primitives import TOLERANCE

    atol, rtol = TOLERANCE["float32"]
    e = {"output": torch.ones(3)}
    assert bench.mismatches(e, {"output": torch.ones(3) + atol / 2}) == []
    assert bench.mismatches(e, {"output": torch.ones(3) + 10 * (atol + rtol)})
    assert bench.mismatches({"output": torch.ones(3, dtype=torch.long)}, {"output": torch.ones(3, dtype=torch.long) * 2})
    assert bench.mismatches(e, {}) == ["output: missing"]


def test_undecorated_examples_have_no_dispatcher() -> None:
    from examples import indexing, module_list

    model, _ = module_list.make_example()
    plain = bench.undecorated(model)
    for module in plain.modules():  # a decorated class's forward is its eager one
        cls = type(module)
        assert getattr(cls, "__torchscribe_eager__", cls.forward) is cls.forward
    assert type(model.layers[0]).forward is not type(plain.layers[0]).forward  # the original is untouched
    assert bench.undecorated(indexing.indexing) is indexing.indexing.__wrapped__


def test_time_in_turns_times_every_entry_and_restores() -> None:
    restored = []
    timed = {
        "a": bench.Timed(lambda: None, ()),
        "b": bench.Timed(lambda: None, (), restore=lambda: restored.append(1)),
    }
    bench.time_in_turns(timed, budget_s=0.001)
    assert all(len(t.times) >= bench.MIN_RUNS for t in timed.values())
    assert len(restored) >= len(timed["b"].times)


def test_noisy_cells_get_a_footnote() -> None:
    notes = bench.Notes()
    assert bench.time_cell(bench.Cell(seconds=0.002, fastest_s=0.0015), notes) == "2"
    assert bench.time_cell(bench.Cell(seconds=0.010, fastest_s=0.001), notes) == "10[1]"
    assert notes.texts == [bench.NOISY_NOTE]
    assert bench.time_cell(bench.Cell(error="boom"), notes) == "n/a[2]"


def test_cases_cover_examples_and_micro_benchmarks() -> None:
    examples, refs = bench.example_cases()
    names = {c.name for c in examples}
    assert {"mlp", "conv_bn_relu[train]", "lstm_cell"} <= names and set(refs) == names
    assert {c.size for c in examples if c.name == "mlp"} == {f"B={b}" for b in bench.BATCHES}
    assert [c.size for c in examples if c.name == "lstm_cell"] == ["example"]  # time-major input
    model, inputs = [c for c in examples if c.name == "mlp" and c.size == "B=1"][0].make()
    assert inputs[0].shape[0] == 1
    micros, micro_refs = bench.micro_cases()
    assert len(micros) == len(micro.BENCHMARKS) * len(micro.SIZES) and set(micro_refs) == set(micro.BENCHMARKS)
    model, (x,) = resolve(micro_refs["softmax"])()
    assert isinstance(model, micro.Softmax) and x.shape == (micro.SIZES["b8"], micro.SEQ, micro.WIDTH)


def test_ideal_bytes_count_inputs_parameters_and_outputs_once() -> None:
    model, (x,) = micro.make("layer_norm_gelu", "b1")
    params = sum(p.numel() for p in model.parameters()) * 4
    assert bench.ideal_bytes(model, (x,), torch.empty_like(x)) == 2 * x.numel() * 4 + params


def test_time_in_turns_keeps_each_round() -> None:
    calls: list[str] = []
    timed = {name: bench.Timed(lambda name=name: calls.append(name), ()) for name in ("a", "b")}
    bench.time_in_turns(timed, 0.0)
    for entry in timed.values():
        assert len(entry.rounds) == bench.ROUNDS
        assert [t for r in entry.rounds for t in r] == entry.times
    assert calls[-2:] == ["a", "b"]  # (the last round: each in turn)


def test_the_zoo_compares_rounds_pairwise() -> None:
    from benchmarks import zoo

    # a busy spell in round 2 slows everyone; the ratio within each round stays
    rounds = {"jit": [[2.0, 2.2], [6.0], [3.0]], "compile": [[4.0], [9.0], [2.0]],
              "frozen": [[1.0], [3.0], [2.0]], "eager": [[9.0], [9.0], [9.0]]}
    assert zoo.paired_ratios(rounds) == [2.1, 2.0, 1.0]
    assert zoo.paired_ratios({"frozen": [[1.0]], "eager": [[2.0]]}) == []
    assert zoo.paired_ratios({"jit": [[1.0]], "compile": [[1.0]]}) == []
    assert zoo.spread([1.0, 1.0, 1.2, 1.2]) == " (1.00-1.20)"
    assert zoo.spread([1.0, 2.0]) == ""
    assert zoo.paired_ratios(rounds, "compile", ("frozen",)) == [0.25, 3.0 / 9.0, 1.0]
    rows = {("m", 1): {"eager": 3e-3, "jit": 2e-3, "compile": 2.5e-3, "torchscribe": 2.4e-3, "frozen": 1.9e-3,
                       "checked-in": 2.0e-3, "rounds": [0.9, 0.95, 1.1, 1.2], "rounds checked-in": [0.9, 1.0, 1.0, 0.9]},
            ("m", 8): {"eager": 3.0, "jit": 2.0, "compile": "failed", "frozen": 1.0, "rounds": [2.0] * 10},
            ("n", 1): {"eager": 3.0, "jit": 1.0, "frozen": 1.5, "rounds": [0.7] * 10},
            ("n", 8): {"eager": 3.0, "jit": "failed", "compile": "failed", "frozen": 1.0}}
    assert zoo.verdict(rows) == ("Against the faster other: 2 of 3 cells at or above 1.00x by the medians; "
                                 "1 of 3 with the lower quartile of the rounds at or above 1.00x.")
    table = zoo.render(rows, [("machine", "test")], tuple(b for b in zoo.BACKENDS if b != "permissive"))
    assert ("| m | 1 | 3.00 | 2.00 (1.50x) | 2.50 (1.20x) | 2.40 (1.25x) | 1.90 (1.58x) | 2.00 (1.50x) "
            "| 1.05x (0.91-1.17) | 0.95x (0.90-1.00) |" in table.splitlines())
    assert ("torchscribe (checked-in) against frozen: 0 of 1 cells at or above 1.00x by the medians; "
            "0 of 1 with the lower quartile of the rounds at or above 1.00x.") in table.splitlines()
    assert ("| n | 8 | 3000.00 | failed [2] | failed [3] | - | 1000.00 (3.00x) | - | - | - |"
            in table.splitlines())  # (`-`: not run)
    only = zoo.render(rows, [("machine", "test")], ("eager", "frozen", "checked-in"))
    assert "| m | 1 | 3.00 | 1.90 (1.58x) | 2.00 (1.50x) | 1.05x (0.91-1.17) | 0.95x (0.90-1.00) |" in only.splitlines()
    # (a comparison with no backend timed on either side says nothing: no verdict line)
    alone = zoo.render({("m", 1): {"eager": 3.0, "frozen": 1.0}}, [("machine", "test")], ("eager", "frozen"))
    assert "Against the faster other" not in alone and "against frozen" not in alone


def test_corpus_blocks_are_kept_and_replaced_each_in_its_place(tmp_path, monkeypatch) -> None:
    from benchmarks import bench, zoo

    results = tmp_path / "RESULTS.md"
    monkeypatch.setattr(bench, "RESULTS", results)
    monkeypatch.setattr(zoo, "RESULTS", results)
    results.write_text("# Benchmark results\n\nexamples\n", encoding="utf-8")
    zoo.write_results("torchvision 1\n")
    zoo.write_results("timm 1\n", bench.TIMM_START, bench.TIMM_END)
    zoo.write_results("torchvision 2\n")
    text = results.read_text(encoding="utf-8")
    assert "torchvision 2" in text and "torchvision 1" not in text and "timm 1" in text
    assert text.index("torchvision 2") < text.index("timm 1")
    # the examples' benchmark rewrites its part and keeps both corpus blocks
    assert bench.kept_zoo_block().strip() == text[text.index(bench.ZOO_START):].strip()
    zoo.write_results("train 1\n", bench.TRAIN_START, bench.TRAIN_END)
    zoo.write_results("train 2\n", bench.TRAIN_START, bench.TRAIN_END)
    text = results.read_text(encoding="utf-8")
    assert "train 2" in text and "train 1" not in text and text.index("timm 1") < text.index("train 2")
    assert bench.kept_zoo_block().strip() == text[text.index(bench.ZOO_START):].strip()
    results.write_text("# Benchmark results\n\n" + f"{bench.TIMM_START}\ntimm\n{bench.TIMM_END}\n", encoding="utf-8")
    assert bench.kept_zoo_block().strip() == f"{bench.TIMM_START}\ntimm\n{bench.TIMM_END}"


def test_regions_are_top_level_children_with_containers_opened() -> None:
    from torch import nn

    from benchmarks import regions

    model = nn.Sequential()
    model.add_module("stem", nn.Conv2d(3, 4, 3))
    model.add_module("blocks", nn.Sequential(nn.ReLU(), nn.Identity()))
    model.add_module("head", nn.Linear(4, 2))
    found = regions.regions_of(model)
    assert [r.name for r in found] == ["stem", "blocks.0", "blocks.1", "head"]
    timed = [regions.Region(name, nn.Identity(), eager_ms=e, compiled_ms=c, ratios=[e / c] * 4)
             for name, e, c in (("big", 10.0, 12.0), ("tiny", 0.05, 0.1), ("fast", 10.0, 5.0))]
    assert [r.name for r in regions.slower_regions(timed)] == ["big"]  # tiny is under 1% of the time


def test_zoo_runs_merge_by_case(tmp_path, monkeypatch) -> None:
    """`--merge`: a run replaces the rows it measured and keeps the others, each with its run."""
    from benchmarks import zoo
    from benchmarks.zoo_models import ZooModel

    monkeypatch.setattr(zoo, "rows_file", lambda corpus: tmp_path / f"rows_{corpus}.json")
    models = [ZooModel(name, lambda: None, lambda b: ()) for name in ("a", "b")]
    first = [("date", "day 1"), ("load", "low"), ("machine", "test")]
    rows, header, backends = zoo.merge_rows("c", models, {("b", 1): {"eager": 2.0, "frozen": 1.0},
                                                          ("a", 1): {"eager": 4.0, "frozen": 2.0}},
                                            first, ("eager", "frozen"))
    assert list(rows) == [("a", 1), ("b", 1)] and header == first and backends == ("eager", "frozen")
    second = [("date", "day 2"), ("load", "low"), ("machine", "test")]
    rows, header, backends = zoo.merge_rows("c", models, {("a", 1): {"eager": 4.0, "jit": 3.0}}, second,
                                            ("eager", "jit"))
    assert rows[("a", 1)]["jit"] == 3.0 and "frozen" not in rows[("a", 1)] and rows[("b", 1)]["frozen"] == 1.0
    assert backends == ("eager", "jit", "frozen")
    assert ("run 1", "day 1 (load low): 1 cases (b B=1)") in header
    assert ("run 2", "day 2 (load low): 1 cases (a B=1)") in header
    assert not any(label == "date" for label, _ in header)
    assert "| b | 1 | 2000.00 | - | 1000.00 (2.00x) | - | - |" in zoo.render(rows, header, backends)


def test_training_tables() -> None:
    """A row per example: times and ratios, a backend that was not timed as n/a with its reason,
    an example without parameters as not trained; the geometric means and targets over B=8."""
    from benchmarks.train_step import Result

    def case(name: str, size: str = "B=8") -> bench.Case:
        return bench.Case(name, size, "example", lambda: (None, ()))

    ok = Result(seconds={"eager": 2.0, "compile": 1.0, "torchscribe": 1.0}, fastest_s={"eager": 2.0, "compile": 1.0,
                "torchscribe": 1.0}, first_s={"compile": 5.0, "torchscribe": 0.5},
                differs={"compile": "compile's step differs"})
    slow = Result(seconds={"eager": 1.0, "compile": 1.0}, fastest_s={"eager": 1.0, "compile": 1.0},
                  problems={"torchscribe": "torchscribe's step differs from eager's: w moved"})
    rows = [bench.TrainRow(case("a"), ok), bench.TrainRow(case("b"), slow),
            bench.TrainRow(case("f"), skipped="a function: no parameters to train"),
            bench.TrainRow(case("lstm", "example"), ok)]
    notes = bench.Notes()
    table = bench.training_table(rows, notes)
    assert table.rows[0][2:9] == ["2000", "1000[1]", "1000", "2.00x", "2.00x", "1.00x", "5.00"]
    assert table.rows[0][-1] == "met >=1x eager"
    assert table.rows[1][4] == "n/a[2]" and table.rows[1][-1] == "n/a >=1x eager"
    assert table.rows[2][2] == "not trained[3]"
    assert notes.texts == ["compile's step differs", "torchscribe's step differs from eager's: w moved",
                           "a function: no parameters to train"]
    means = bench.training_geomean_table(rows).rows
    assert means == [["B=8", "1 of 2", "1.41x", "2.00x", "1.00x",
                      "MISS every model >=1x eager (0 slower, 1 not timed), met >=1x compile"]]
    means = bench.training_geomean_table(rows[:1]).rows
    assert means[0][-1] == "met every model >=1x eager (0 slower, 0 not timed), met >=1x compile"


def test_zoo_training_block() -> None:
    """zoo.py --train's block: times with speed-ups, a backend not timed and one timed that
    differs as numbered notes, torchscribe against eager and torch.compile per round, targets."""
    from benchmarks import zoo
    from benchmarks.train_step import Result

    rounds = [[1.0]] * 4
    fine = Result(seconds={"eager": 0.3, "compile": 0.2, "torchscribe": 0.25}, first_s={"compile": 60.0,
                  "torchscribe": 3.0}, rounds={"eager": rounds, "compile": [[0.5]] * 4, "torchscribe": [[0.8]] * 4},
                  differs={"compile": "compile's step differs from eager's (timed all the same): w"})
    wrong = Result(seconds={"eager": 0.1, "compile": 0.1}, problems={"torchscribe": "torchscribe's step differs"})
    text = zoo.render_train({("resnet18", 8): fine, ("encoder_layer", 8): wrong}, [("date", "today")])
    lines = text.splitlines()
    assert "| resnet18 | 8 | 300.0 | 200.0 (1.50x) [1] | 250.0 (1.20x) | 1.20x (1.25-1.25) | 0.80x (0.62-0.62) " \
           "| 60.0 | 3.0 |" in lines
    assert "| encoder_layer | 8 | 100.0 | 100.0 (1.00x) | not timed [2] | - | - | - | - |" in lines
    assert "[1] resnet18 B=8 compile's step differs from eager's (timed all the same): w" in lines
    assert "[2] encoder_layer B=8 torchscribe: torchscribe's step differs" in lines
    assert any(line.startswith("Geomean speed-up over eager at B=8: torch.compile 1.22x (2 models), "
                               "torchscribe 1.20x (1 models). Targets: MISS never slower than eager (0 of 2 slower, "
                               "1 not timed), met geomean >= 1.2x eager.") for line in lines)

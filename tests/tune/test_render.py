"""The tune's terminal output: on a colour terminal the heat map ``report tN`` prints (each cell on
the colour scale of its ratio to the row's best, the chosen depth bracketed, the schedule's ranges
drawn between rows, the verification table), and the plain text wherever colour is not shown (a
pipe, a file, NO_COLOR, TERM=dumb)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from specgauge.analysis.results import SpeculationSetup
from specgauge.report.tune_report import TuneReport, load_tune_report, print_tune, terminal_colour
from specgauge.store import Store
from specgauge.tune.render import print_result, render_text
from specgauge.tune.choice import Cell, CellMeasurements, build_schedule, choose_cell
from specgauge.tune.run import TuneResult
from specgauge.tune.settings import schedule_settings
from specgauge.tune.stored import tune_document

from tune_fixtures import LEVELS, stored_tune, tune_result

TAIL = ("every point is a bench run in t.db: runs 1-36", "stored as tune t1: specgauge report t1 --db t.db")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def tune(tmp_path):
    """(the TuneResult, its settings, the stored tune as ``report tN`` reads it)."""
    db = tmp_path / "t.db"
    tune_id = stored_tune(db)
    with Store.open(db) as store:
        result = tune_result(store)
        stored = load_tune_report(store, tune_id)
    return result, schedule_settings(result.schedule, SpeculationSetup(engine="specgauge", method="EAGLE3")), stored


def _printed(console: Console, tune) -> str:
    result, settings, stored = tune
    print_result(console, result, settings, stored, TAIL)
    return console.file.getvalue()


def _background(rgb: str) -> str:
    """rich's truecolor background escape for ``rgb(r,g,b)``."""
    red, green, blue = re.fullmatch(r"rgb\((\d+),(\d+),(\d+)\)", rgb).groups()
    return f"48;2;{red};{green};{blue}"


def test_a_colour_terminal_gets_the_heat_map_with_the_schedule_drawn_on_it(tune, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = _printed(Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200), tune)
    plain = ANSI.sub("", out)
    stored = tune[2]
    # every measured cell is coloured by its own ratio to the row's best, on one scale
    backgrounds = set()
    for row in stored.heat_map["rows"]:
        for cell in row["cells"]:
            shown = f"{cell['relative']:.2f}" + ("*" if cell["best"] else "")
            shown = f"[{shown}]" if cell["chosen"] else shown
            escape = _background(terminal_colour(cell["relative"]))
            assert re.search(rf"\x1b\[[0-9;]*{escape}[0-9;]*m *{re.escape(shown)} ", out), (shown, escape)
            backgrounds.add(escape)
    assert len(backgrounds) >= 4   # a scale, not one colour for all
    assert terminal_colour(1.0) != terminal_colour(0.8) != terminal_colour(0.5)
    # the chosen depth of each row is bracketed (bold) on its row's line; the best is starred
    for level in LEVELS:
        line = next(line for line in plain.splitlines() if re.match(rf"\W*{level} ", line))
        assert "[1.00*]" in line
    # the schedule's ranges: one per row here, each row's range beside it and a rule between ranges
    entries = stored.document["schedule"]["entries"]
    assert [e[0] for e in entries] == [1, 2, 5]
    for row in stored.heat_map["rows"]:
        lo, hi = row["schedule_batch_sizes"]
        line = next(line for line in plain.splitlines() if re.match(rf"\W*{row['concurrency']} ", line))
        sizes = str(lo) if lo == hi else f"{lo}–{hi}"
        assert f"{sizes} → k={row['schedule_depth']}" in line
    assert sum(line.startswith("├") for line in plain.splitlines()) == len(entries) - 1
    # the verification table, the key, the settings unwrapped, then the tail lines
    assert "verify: tok/s; schedule / the better fixed arm" in plain and "vs k=3" in plain
    assert "colour: ratio to the row's best" in plain
    vllm = next(s for s in tune[1] if s.server == "vllm")
    assert f"  vllm: {vllm.setting}" in plain.splitlines()
    assert plain.rstrip().splitlines()[-2:] == list(TAIL)


def test_the_coloured_form_is_what_report_tN_prints(tune, tmp_path, monkeypatch):
    """``tune`` and ``report tN``/``show tN`` share one renderer: the same tables, line for line."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200)
    print_tune(console, tune[2])
    out = _printed(Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200), tune)
    assert out == console.file.getvalue() + "".join(f"{line}\n" for line in TAIL)


@pytest.mark.parametrize("where", ["a pipe", "NO_COLOR", "TERM=dumb"])
def test_without_colour_it_is_the_plain_text(tune, where, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if where == "NO_COLOR":
        monkeypatch.setenv("NO_COLOR", "1")
    if where == "TERM=dumb":
        monkeypatch.setenv("TERM", "dumb")
    forced = None if where == "a pipe" else True   # NO_COLOR and TERM=dumb: even on a terminal
    out = _printed(Console(file=io.StringIO(), force_terminal=forced, width=200), tune)
    result, settings, _ = tune
    assert out == "\n".join([render_text(result, settings), *TAIL]) + "\n"
    assert "\x1b[" not in out


def _synthetic(throughput: dict[tuple[int, tuple[int, int] | None], dict[int, float]]) -> TuneReport:
    """A tune document from per-cell tok/s by depth (two rounds, 1% apart for every depth)."""
    choices = tuple(choose_cell(CellMeasurements(Cell(level, band), {d: (v, v * 1.01) for d, v in by_depth.items()}))
                    for (level, band), by_depth in throughput.items())
    result = TuneResult(choices, build_schedule(choices), (), 10.0, 20.0, {})
    return TuneReport(7, {}, "", tune_document(7, result, ()))


def test_rows_in_one_schedule_range_share_it_and_a_rule_marks_each_new_range():
    # 16 and 64 both choose no speculation: one entry 5-256 holds both, no rule between them
    tune = _synthetic({(1, None): {0: 50, 1: 70, 3: 95}, (4, None): {0: 180, 1: 230, 3: 200},
                       (16, None): {0: 600, 1: 520, 3: 400}, (64, None): {0: 900, 1: 700, 3: 500}})
    assert tune.document["schedule"]["entries"] == [[1, 1, 3], [2, 4, 1], [5, 256, 0]]
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200)
    print_tune(console, tune)
    lines = ANSI.sub("", console.file.getvalue()).splitlines()
    rows = {level: next(i for i, line in enumerate(lines) if re.match(rf"\W*{level} ", line))
            for level in (1, 4, 16, 64)}
    rules = [i for i, line in enumerate(lines) if line.startswith("├")]
    assert len(rules) == 2 and rows[1] < rules[0] < rows[4] < rules[1] < rows[16] < rows[64]
    assert "5–256 → k=0" in lines[rows[16]] and "5–256 → k=0" in lines[rows[64]]


def test_a_context_axis_gets_one_heat_map_per_band():
    tune = _synthetic({(1, (1, 128)): {0: 50, 2: 90}, (8, (1, 128)): {0: 300, 2: 200},
                       (1, (129, 512)): {0: 40, 2: 80}, (8, (129, 512)): {0: 200, 2: 260}})
    console = Console(file=io.StringIO(), force_terminal=True, color_system="truecolor", width=200)
    print_tune(console, tune)
    out = ANSI.sub("", console.file.getvalue())
    assert "· context 1–128 tokens" in out and "· context 129–512 tokens" in out
    assert "Schedule [bs_lo, bs_hi, ctx_lo, ctx_hi, K]" in out

"""``specgauge report tN`` end to end from a real store: the heat map beside the verification in the
terminal, the stored document as JSON, the self-contained HTML page with the chosen cells outlined;
``runs`` lists tunes, ``show tN`` prints the heat map, and the one-line refusals."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from specgauge.store import Store

from tune_fixtures import DEPTHS, LEVELS, THROUGHPUT, stored_tune
from cli_testkit import run_cli


class HeatScan(HTMLParser):
    """The heat-map cells (depth, classes, text) and every src/href of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[int, str, str]] = []
        self.links: list[str] = []
        self._cell: list | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "td" and "heat" in (attributes.get("class") or "").split():
            self._cell = [int(attributes["data-depth"]), attributes["class"], ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.cells.append(tuple(self._cell))
            self._cell = None


def test_report_of_a_tune_in_the_terminal_json_and_html(tmp_path):
    db = tmp_path / "t.db"
    tune_id = stored_tune(db)
    done = run_cli("report", f"t{tune_id}", "--db", str(db), "--output-dir", str(tmp_path / "out"),
                   "--output-json", str(tmp_path / "tune.json"))
    assert done.returncode == 0, done.stderr
    with Store.open(db, create=False) as store:
        stored = store.get_tune(tune_id).result
    # JSON: the stored document, in both places
    assert json.loads((tmp_path / "tune.json").read_text()) == stored
    assert json.loads((tmp_path / "out" / "tune.json").read_text()) == stored
    chosen = {row["concurrency"]: row["chosen"] for row in stored["heat_map"]["rows"]}
    best = {level: max(DEPTHS, key=lambda d: THROUGHPUT[(d, level)]) for level in LEVELS}
    assert chosen == best   # the synthetic figures separate the depths clearly: the best is chosen
    # terminal: the heat map with the chosen cell bracketed, the verification beside it, the schedule
    out = done.stdout
    assert "throughput relative to the cell's best" in out and "verify: tok/s" in out
    assert "Schedule [bs_lo, bs_hi, K]: " + str(stored["schedule"]["entries"]) in out
    for level in LEVELS:
        line = next(line for line in out.splitlines() if re.match(rf"\W*{level} ", line))
        assert "[1.00*]" in line
    assert "Verification: the worst ratio of the schedule" in out and "--speculative-schedule" in out
    # HTML: every depth of every level is a coloured cell; exactly the chosen ones are outlined
    page = (tmp_path / "out" / "report.html").read_text()
    scan = HeatScan()
    scan.feed(page)
    assert len(scan.cells) == len(DEPTHS) * len(LEVELS)
    outlined = [(depth, text) for depth, classes, text in scan.cells if "chosen" in classes.split()]
    assert sorted(d for d, _ in outlined) == sorted(best.values())
    assert all(text.startswith("1.00*") for _, text in outlined)
    assert all(link.startswith("#") for link in scan.links)   # self-contained: nothing loaded
    assert 'id="heatmap"' in page and "Verification: the schedule beside" in page
    assert "speculative_adaptive.json" in page and "num_speculative_tokens_per_batch_size" in page


def test_html_only_and_json_on_stdout(tmp_path):
    db = tmp_path / "t.db"
    tune_id = stored_tune(db)
    done = run_cli("report", f"t{tune_id}", "--db", str(db), "--html", str(tmp_path / "only.html"),
                   "--output-json", "-")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tune_id"] == tune_id       # stdout is only the JSON; the tables go to stderr
    assert "throughput relative to the cell's best" in done.stderr
    assert (tmp_path / "only.html").is_file() and not (tmp_path / f"report-t{tune_id}").exists()


def test_runs_lists_tunes_and_show_prints_the_heat_map(tmp_path):
    db = tmp_path / "t.db"
    tune_id = stored_tune(db)
    listed = run_cli("runs", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert "tunes ('specgauge report tN')" in listed.stdout and f"t{tune_id} " in listed.stdout
    shown = run_cli("show", f"t{tune_id}", "--db", str(db))
    assert shown.returncode == 0 and "[1.00*]" in shown.stdout


def test_a_tune_that_cannot_be_reported_is_one_line(tmp_path):
    db = tmp_path / "t.db"
    with Store.open(db) as store:
        running = store.create_tune({"concurrency": [1]})
    for tune, message in ((f"t{running}", f"tune {running} is running and has no result to report"),
                          ("t99", "no tune 99 in")):
        done = run_cli("report", tune, "--db", str(db))
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    done = run_cli("report", "x3", "--db", str(db))
    assert done.returncode == 2 and "a tune id (e.g. t2)" in done.stderr

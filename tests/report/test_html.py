"""The HTML report, its PNGs/JSON/CSV and ``specgauge report``: every section and plot present,
nothing loaded from outside the file, figures matching their sources, one-line errors.

Inputs: the comparison fixture that ``tests/compare/make_fixture.py`` recorded from a real
comparison of two scripted servers, and bench runs written to a real SQLite store."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.image import imread
from rich.console import Console

from html_fixtures import comparison_result, stored_bench_run
from specgauge.analysis import definitions
from specgauge.analysis.results import CompareResult
from specgauge.report.formatting import ratio_outcome, ratio_with_ci
from specgauge.report.html import html_document, render_html, write_report
from specgauge.report.plots import PLOT_BUILDERS, build_plots
from specgauge.report.report_data import report_from_compare, report_from_run
from specgauge.report.report_text import metric_definitions
from specgauge.report.verdict_table import verdict_renderable
from specgauge.store import Store
from cli_testkit import run_cli as cli

FIXTURE = Path(__file__).resolve().parents[1] / "compare" / "fixtures" / "compare_result.json"
SECTIONS = ("verdict", "summary", "recommendation", "warnings", "plots", "arms", "definitions", "provenance")


class PageScan(HTMLParser):
    """Section ids, plot figures, every URL-bearing attribute and the text under each section."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.plots: list[str] = []
        self.svgs = 0
        self.ids: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.text_by_section: dict[str, str] = {}
        self._section: str | None = None
        self._classes: dict[str, int] = {}

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.tags.append(tag)
        if tag == "section" and attributes.get("id"):
            self._section = attributes["id"]
            self.sections.append(self._section)
        if tag == "figure" and "plot" in (attributes.get("class") or "").split():
            self.plots.append(attributes["data-plot"])
        if tag == "svg":
            self.svgs += 1
        if attributes.get("id"):
            self.ids.append(attributes["id"])
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "poster", "data") and value is not None:
                self.urls.append((tag, name, value))
        for css_class in (attributes.get("class") or "").split():
            self._classes[css_class] = self._classes.get(css_class, 0) + 1

    def handle_data(self, data):
        if self._section:
            self.text_by_section[self._section] = self.text_by_section.get(self._section, "") + data

    def count(self, css_class: str) -> int:
        return self._classes.get(css_class, 0)


def scan(html: str) -> PageScan:
    page = PageScan()
    page.feed(html)
    return page


@pytest.fixture(scope="module")
def recorded() -> CompareResult:
    return CompareResult.model_validate_json(FIXTURE.read_text())


@pytest.fixture(scope="module")
def comparison_dir(tmp_path_factory, recorded):
    directory = tmp_path_factory.mktemp("comparison")
    files = write_report(recorded, directory)
    return directory, files


def assert_offline(html: str, page: PageScan) -> None:
    """Nothing outside the file: every src/href is a fragment; no external stylesheet/script/font."""
    external = [(tag, name, value) for tag, name, value in page.urls if not value.startswith("#")]
    assert external == [], external
    assert not any("http" in value or "//" in value for _, _, value in page.urls)
    assert "link" not in page.tags and "iframe" not in page.tags and "img" not in page.tags
    assert "@import" not in html and "<script src" not in html
    assert re.findall(r"url\((?!#)", html) == []          # only url(#clip-path) references inside the SVGs


def test_comparison_report_has_every_section_and_plot_and_loads_nothing(comparison_dir, recorded):
    directory, files = comparison_dir
    html = files.html.read_text()
    page = scan(html)
    assert page.sections == list(SECTIONS)
    assert page.plots == list(PLOT_BUILDERS) and page.svgs == len(PLOT_BUILDERS)
    assert page.count("no-data") == 0
    assert len(page.ids) == len(set(page.ids))            # seven inline SVGs, no id clash between them
    assert_offline(html, page)
    verdict = page.text_by_section["verdict"]
    for line in recorded.verdict_lines:
        assert line in verdict
    assert f"Disable speculation above {recorded.recommended_disable_above} concurrent requests" in verdict


def test_summary_tables_match_the_result_and_colour_ratios_by_their_ci(comparison_dir, recorded):
    html = comparison_dir[1].html.read_text()
    summary = html[html.index('<section id="summary">'):html.index('<section id="recommendation">')]
    for point in recorded.sweep:
        outcome = ratio_outcome(point.ratio, point.ci_low, point.ci_high)
        text = ratio_with_ci(point.ratio, point.ci_low, point.ci_high)
        cell = f'<td class="{outcome}">{text}</td>' if outcome != "unclear" else f"<td>{text}</td>"
        assert cell in summary, (point.concurrency, cell)
        assert f"<td>{point.concurrency}</td>" in summary
    outcomes = {ratio_outcome(p.ratio, p.ci_low, p.ci_high) for p in recorded.sweep}
    assert {"better", "worse"} <= outcomes   # the fixture crosses over: both colours are exercised
    for row in recorded.single_stream:
        assert f"<td class=\"text\">{row.domain}</td>" in summary
        assert ratio_with_ci(row.speedup, row.ci_low, row.ci_high) in summary


def test_recommendation_arms_definitions_and_provenance(comparison_dir, recorded):
    html = comparison_dir[1].html.read_text()
    page = scan(html)
    recommendation = page.text_by_section["recommendation"]
    for setting in recorded.recommendation.settings:      # every server's setting, in a copyable block
        assert setting.setting in recommendation
    assert {"SGLang", "vLLM", "specgauge (embedded engine)"} <= {
        s for s in ("SGLang", "vLLM", "specgauge (embedded engine)") if s in recommendation}
    assert html.count('<button class="copy"') == len(recorded.recommendation.settings)
    warnings = page.text_by_section["warnings"]
    lossless = recorded.losslessness
    assert (f"{lossless.mismatches} of {lossless.compared} request pairs differ" if lossless.mismatches
            else f"all {lossless.compared} request pairs gave the same text") in warnings
    for warning in recorded.health:
        assert warning.message in warnings
    terms = [term for term, _ in metric_definitions()]
    assert terms[:2] == ["TTFT", "TPOT"] and any(t.startswith("ICL") for t in terms) and \
        any(t.startswith("ITL") for t in terms) and "Acceptance length" in terms
    for term, text in metric_definitions():               # quoted from the module, not rewritten
        assert text.split()[0] in (definitions.__doc__ or "")
        assert term in page.text_by_section["definitions"]
    provenance = page.text_by_section["provenance"]
    for suite in recorded.suites:
        assert f"{suite.name}@{suite.version}" in provenance and suite.content_hash in provenance
    for stage in recorded.stages:
        assert all(str(r) in provenance for r in (*stage.baseline_run_ids, *stage.speculative_run_ids))
    assert recorded.tool_version in provenance and recorded.created_at in provenance
    arms = page.text_by_section["arms"]
    assert all(arm.description in arms for arm in recorded.arms)


def test_pngs_json_and_csv_beside_the_report(comparison_dir, recorded):
    directory, files = comparison_dir
    assert sorted(p.name for p in (directory / "plots").iterdir()) == sorted(f"{n}.png" for n in PLOT_BUILDERS)
    for png in files.pngs:
        pixels = imread(png)                               # (H, W, 4) floats in [0, 1]
        assert pixels.shape[0] > 300 and pixels.shape[1] > 600
        assert pixels[..., :3].std() > 0.05                # drawn on, not a blank canvas
    verdict = json.loads((directory / "verdict.json").read_text())
    assert {"single_stream", "sweep", "crossover_concurrency", "recommended_disable_above"} <= verdict.keys()
    assert CompareResult.model_validate(verdict) == recorded
    rows = list(csv.DictReader((directory / "sweep.csv").open()))
    assert [int(r["concurrency"]) for r in rows] == sorted(p.concurrency for p in recorded.sweep)
    by_concurrency = {p.concurrency: p for p in recorded.sweep}
    for row in rows:                                       # one column per figure, no JSON in cells
        point = by_concurrency[int(row["concurrency"])]
        assert float(row["ratio"]) == pytest.approx(point.ratio)
        assert float(row["tpot_ratio_ci_low"]) == pytest.approx(point.tpot_ratio.ci_low)
        assert float(row["speculative_ttft_ms_p99"]) == pytest.approx(point.speculative.ttft_ms.p99)
        assert not any(cell.startswith("{") for cell in row.values())


def test_rendering_is_deterministic(recorded, tmp_path):
    first = render_html(recorded, tmp_path / "a.html").read_text()
    second = render_html(recorded, tmp_path / "b.html").read_text()
    assert first == second


def test_plots_without_data_say_why_instead_of_failing():
    empty = comparison_result().model_copy(update={
        "sweep": (), "single_stream": (), "tokens_per_chunk": {}, "acceptance_by_position": (),
        "verdict_lines": ("nothing measured",)})
    data = report_from_compare(empty)
    plots = build_plots(data)
    assert [p.name for p in plots] == list(PLOT_BUILDERS)
    assert all(p.missing for p in plots), [(p.name, p.missing) for p in plots]
    page = scan(html_document(data, plots))
    assert page.plots == list(PLOT_BUILDERS) and page.count("no-data") == len(PLOT_BUILDERS)
    assert "no data: no sweep point with both arms measured" in page.text_by_section["plots"]


def test_one_arm_report_of_a_run_without_token_counts(tmp_path):
    """Counts that were not measured (one token per chunk assumed) leave the chunk panels empty."""
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db, concurrencies=(1, 8), requests_per_point=4, token_source="chunks")
    with Store.open(db, create=False) as store:
        data = report_from_run(store, run_id)
    missing = {p.name: p.missing for p in build_plots(data)}
    assert "speedup" not in missing
    assert missing["throughput"] is None and missing["ttft"] is None and missing["tpot"] is None
    assert "not measured (source: chunks)" in missing["tokens_per_chunk"]
    assert missing["accept_by_position"] and missing["accept_by_domain"]


def test_crossover_band_with_an_open_upper_end():
    open_ended = comparison_result().model_copy(update={
        "crossover": comparison_result().crossover.model_copy(update={"ci_high": None})})
    speedup = next(p for p in build_plots(report_from_compare(open_ended)) if p.name == "speedup")
    legend = [t.get_text() for t in speedup.figure.axes[0].get_legend().get_texts()]
    assert any(t.startswith("crossover ≈ 13.6 [11.8, > 64]") for t in legend), legend


# -- the command -------------------------------------------------------------------------------

def assert_one_line_error(result: subprocess.CompletedProcess, needle: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert needle in lines[0], lines[0]


def test_report_of_a_bench_run_end_to_end(tmp_path):
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db)
    out = tmp_path / "out"
    result = cli("report", str(run_id), "--db", str(db), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    assert f"run {run_id}" in result.stdout and "Peak throughput" in result.stdout
    page = scan((out / "report.html").read_text())
    assert page.sections == ["verdict", "summary", "plots", "arms", "definitions", "provenance"]
    assert page.plots == [n for n in PLOT_BUILDERS if n != "speedup"] and page.count("no-data") == 0
    exported = cli("export", str(run_id), "--db", str(db))
    assert json.loads((out / "run.json").read_text()) == json.loads(exported.stdout)  # one JSON code path
    rows = list(csv.DictReader((out / "sweep.csv").open()))
    assert [r["concurrency"] for r in rows] == ["1", "4", "16", "64"]
    assert float(rows[0]["output_tokens_per_s"]) == pytest.approx(
        json.loads(exported.stdout)["points"][0]["output_tokens_per_s"])
    assert sorted(p.name for p in (out / "plots").iterdir()) == sorted(f"{n}.png" for n in page.plots)


def test_report_html_only_and_the_default_directory(tmp_path, cli_here, monkeypatch):
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db, concurrencies=(1, 2), requests_per_point=4)
    result = cli_here("report", str(run_id), "--db", str(db), "--html", str(tmp_path / "only.html"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "only.html").is_file() and not (tmp_path / "plots").exists()
    monkeypatch.chdir(tmp_path)
    result = cli_here("report", str(run_id), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / f"report-{run_id}" / "report.html").is_file()


def test_report_of_a_stored_comparison(tmp_path, recorded, cli_here):
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db, concurrencies=(1,), requests_per_point=2)
    with Store.open(db) as store:
        comparison_id = store.create_comparison({"arms": ["baseline", "speculative"]})
        store.link_comparison_run(comparison_id, run_id, arm="baseline", stage="sweep", round=0)
        store.finish_comparison(comparison_id, status="done", result=recorded.model_dump(mode="json"))
    out = tmp_path / "cmp"
    result = cli_here("report", f"c{comparison_id}", "--db", str(db), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    assert recorded.verdict_lines[0] in " ".join(result.stdout.split())
    assert "single stream, per domain" in result.stdout and "concurrency sweep" in result.stdout
    assert CompareResult.model_validate_json((out / "verdict.json").read_text()) == recorded
    hint = cli_here("report", str(run_id), "--db", str(db), "--html", str(tmp_path / "one.html"))
    assert hint.returncode == 0 and f"specgauge report c{comparison_id}" in hint.stderr
    on_stdout = cli_here("report", f"c{comparison_id}", "--db", str(db), "--html", str(tmp_path / "c.html"),
                         "--output-json", "-")
    assert on_stdout.returncode == 0, on_stdout.stderr
    assert CompareResult.model_validate_json(on_stdout.stdout) == recorded   # the tables went to stderr


def test_report_errors_are_one_line(tmp_path, cli_here):
    db = tmp_path / "r.db"
    stored_bench_run(db, concurrencies=(1,), requests_per_point=2)
    with Store.open(db) as store:
        running = store.create_comparison({})
    assert_one_line_error(cli_here("report", "99", "--db", str(db)), "no run 99")
    assert_one_line_error(cli_here("report", "c99", "--db", str(db)), "no comparison 99")
    assert_one_line_error(cli_here("report", "run7", "--db", str(db)), "give a bench run id")
    assert_one_line_error(cli_here("report", f"c{running}", "--db", str(db)), "is running and has no result")
    assert_one_line_error(cli_here("report", "1", "--db", str(tmp_path / "missing.db")), "no results store")
    assert not (tmp_path / "missing.db").exists()
    assert_one_line_error(cli("report", "c99", "--db", str(db)), "no comparison 99")   # and as a process


def test_text_from_the_result_is_escaped(recorded):
    hostile = "<script>alert(1)</script>"
    arms = tuple(a.model_copy(update={"description": hostile}) for a in recorded.arms)
    result = recorded.model_copy(update={"arms": arms, "speculative_label": f"x{hostile}",
                                         "verdict_lines": (hostile,)})
    data = report_from_compare(result)
    html = html_document(data, build_plots(data))
    assert html.count("<script>") == 1                    # the page's own copy-button script only
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_report_of_a_run_with_no_finished_point(tmp_path):
    db = tmp_path / "r.db"
    with Store.open(db) as store:
        run_id = store.create_run(tool_version="0.1.0", host="h", url="http://127.0.0.1:1", api="openai-chat",
                                  model=None, config={}, suite_name="smoke", suite_version=1, suite_hash="0" * 64)
        store.add_points(run_id, [{"mode": "closed", "concurrency": 4, "num_requests": 8}])
        store.set_run_status(run_id, "failed", error="server went away")
        data = report_from_run(store, run_id)
    page = scan(html_document(data, build_plots(data)))
    assert "no finished closed-loop point" in page.text_by_section["verdict"]
    assert f"run {run_id} is failed" in page.text_by_section["warnings"]
    assert page.count("no-data") == len(PLOT_BUILDERS) - 1


def test_terminal_verdict_colours_ratios_by_their_ci(recorded):
    console = Console(record=True, force_terminal=True, color_system="standard", width=200, file=io.StringIO())
    console.print(verdict_renderable(report_from_compare(recorded)))
    text = console.export_text(styles=True, clear=False)
    green, red = "\x1b[1;32m", "\x1b[1;31m"
    for point in recorded.sweep:
        shown = ratio_with_ci(point.ratio, point.ci_low, point.ci_high)
        expected = {"better": green, "worse": red, "unclear": ""}[ratio_outcome(point.ratio, point.ci_low,
                                                                              point.ci_high)]
        assert f"{expected}{shown}" in text, (point.concurrency, expected)
    plain = console.export_text()
    assert "recommendation: Disable speculation above" in plain
    assert all(s.setting.split()[0] in plain for s in recorded.recommendation.settings)


def test_the_recommendation_opens_with_its_schedule_in_the_terminal_and_html(recorded, tmp_path):
    n = recorded.recommended_disable_above
    schedule = ((1, n, 3), (n + 1, 256, 0))
    result = recorded.model_copy(update={"recommendation": recorded.recommendation.model_copy(
        update={"schedule": schedule})})
    console = Console(record=True, width=240, file=io.StringIO())
    console.print(verdict_renderable(report_from_compare(result)))
    plain = console.export_text()
    first = f"recommendation: Schedule [bs_lo, bs_hi, K]: [[1, {n}, 3], [{n + 1}, 256, 0]]"
    assert first in plain and f"Simple case: Disable speculation above {n} concurrent requests." in plain
    assert plain.index(first) < plain.index("Simple case:")
    page = render_html(result, tmp_path / "r.html").read_text()
    section = page[page.index('id="recommendation"'):]
    assert section.index(f"<strong>Schedule [bs_lo, bs_hi, K]: [[1, {n}, 3]") < section.index("Simple case: ")


def test_verification_table(recorded):
    from specgauge.analysis.results import Verification, VerifyPoint

    points = tuple(VerifyPoint(concurrency=p.concurrency, baseline_tok_s=p.baseline_tok_s,
                               thresholded_tok_s=p.baseline_tok_s * 1.01, ratio=1.01, ci_low=0.97, ci_high=1.05,
                               worse_beyond_noise=False) for p in recorded.sweep)
    verified = recorded.model_copy(update={"verification": Verification(disable_above=5, points=points,
                                                                        never_worse=True)})
    data = report_from_compare(verified)
    recommendation = scan(html_document(data, build_plots(data))).text_by_section["recommendation"]
    assert "Verified with the threshold applied (disable above 5): never worse than the baseline" in recommendation
    assert recommendation.count("1.01× [0.97, 1.05]") == len(points)


def test_one_arm_report_shows_flagged_points(tmp_path):
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db, concurrencies=(1, 16), requests_per_point=8, failed_at=16)
    with Store.open(db, create=False) as store:
        data = report_from_run(store, run_id)
    plots = build_plots(data)
    page = scan(html_document(data, plots))
    assert "error rate 25% > 5%" in page.text_by_section["summary"]          # the note column
    assert "concurrency 16" in page.text_by_section["warnings"]
    throughput = next(p for p in plots if p.name == "throughput")
    legend = [t.get_text() for t in throughput.figure.axes[0].get_legend().get_texts()]
    assert "flagged point (errors)" in legend


@pytest.mark.parametrize("losslessness, expected", [
    ({"checked": True, "compared": 12, "mismatches": 0, "mismatch_rate": 0.0},
     "lossless: all 12 request pairs gave the same text at temperature 0."),
    ({"checked": False, "reason": "temperature 0.7 > 0"}, "losslessness not checked: temperature 0.7 > 0"),
])
def test_losslessness_lines(recorded, losslessness, expected):
    from specgauge.analysis.results import Losslessness

    result = recorded.model_copy(update={"losslessness": Losslessness(**losslessness), "health": ()})
    data = report_from_compare(result)
    page = scan(html_document(data, build_plots(data)))
    assert " ".join(page.text_by_section["warnings"].split()) == "Losslessness and health" + expected


def test_the_temperature_panels_plot_speedup_and_acceptance_per_domain(recorded):
    """With ``compare --temperatures`` the report adds speedup and acceptance against temperature;
    a server reporting no acceptance gets the "no data" panel, not an empty axis."""
    from specgauge.analysis.results import SingleStreamDomain

    def row(domain: str, temperature: float, accept: float | None) -> SingleStreamDomain:
        return SingleStreamDomain(domain=domain, baseline_tok_s=30.0, speculative_tok_s=45.0, speedup=1.5,
                                  ci_low=1.2, ci_high=1.8, accept_length=accept, temperature=temperature)

    rows = tuple(row(d, t, a) for d in ("coding", "encyclopedic") for t, a in ((0.0, 2.9), (0.7, 1.3)))
    plots = {p.name: p for p in build_plots(report_from_compare(recorded.model_copy(update={"by_temperature": rows})))}
    assert list(plots)[-2:] == ["speedup_by_temperature", "accept_by_temperature"]
    accept = plots["accept_by_temperature"]
    assert accept.missing is None
    lines = {line.get_label(): list(line.get_ydata()) for line in accept.figure.axes[0].get_lines()}
    assert lines["coding"] == [2.9, 1.3] and lines["encyclopedic"] == [2.9, 1.3]
    silent = tuple(r.model_copy(update={"accept_length": None}) for r in rows)
    plots = build_plots(report_from_compare(recorded.model_copy(update={"by_temperature": silent})))
    assert plots[-1].name == "accept_by_temperature" and "reported no acceptance" in plots[-1].missing

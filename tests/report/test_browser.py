"""The HTML report in a real browser: headless Chromium (Debian's ``chromium``) opens it from a
``file://`` URL, background networking off: a non-blank screenshot showing both arms' colours, every plot
in the DOM, and not one console message. A control page proves console errors are caught."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from specgauge.analysis.results import CompareResult
from specgauge.report.html import write_report
from specgauge.report.plots import BASELINE_COLOUR, PLOT_BUILDERS, SPECULATIVE_COLOUR
from specgauge.report.report_data import report_from_run
from specgauge.store import Store

from html_fixtures import stored_bench_run

FIXTURE = Path(__file__).resolve().parents[1] / "compare" / "fixtures" / "compare_result.json"
CHROMIUM = next((path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None)
WINDOW = (1280, 4000)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0", f"--window-size={WINDOW[0]},{WINDOW[1]}")
BROWSER_TIMEOUT_S = 60

pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH "
                                                                      "(Debian: apt-get install -y chromium)")]


def run_chromium(profile: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    """One headless Chromium run in its own process group, which is killed whatever happens."""
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=BROWSER_TIMEOUT_S)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)   # renderer/zygote children too
        except ProcessLookupError:
            pass
        process.wait()
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def console_messages(stderr: str) -> list[str]:
    """Every page console message Chromium logged (``INFO:CONSOLE`` lines, any level)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


class DomScan(HTMLParser):
    """Plot figures with an SVG inside them, and section ids, from ``--dump-dom`` output."""

    def __init__(self) -> None:
        super().__init__()
        self.plots_with_svg: list[str] = []
        self.sections: list[str] = []
        self._open_plot: str | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "section" and attributes.get("id"):
            self.sections.append(attributes["id"])
        if tag == "figure" and "plot" in (attributes.get("class") or "").split():
            self._open_plot = attributes.get("data-plot")
        if tag == "svg" and self._open_plot:
            self.plots_with_svg.append(self._open_plot)
            self._open_plot = None


def dom_of(profile: Path, url: str) -> tuple[DomScan, list[str]]:
    result = run_chromium(profile, url, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    scan = DomScan()
    scan.feed(result.stdout)
    return scan, console_messages(result.stderr)


def share_of_colour(pixels: np.ndarray, hex_colour: str, tolerance: int = 24) -> float:
    """Share of screenshot pixels within ``tolerance`` of ``hex_colour`` on every channel."""
    target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return float((np.abs(pixels[..., :3].astype(int) - target) <= tolerance).all(axis=-1).mean())


@pytest.fixture(scope="module")
def comparison_page(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("browser")
    return write_report(CompareResult.model_validate_json(FIXTURE.read_text()), directory).html


def test_console_capture_sees_errors(tmp_path):
    """Control: the way the report is checked does catch a console error and an uncaught exception."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("deliberate");'
                    "missingFunction();</script></body></html>")
    _, messages = dom_of(tmp_path / "profile", page.as_uri())
    assert len(messages) == 2 and "deliberate" in messages[0] and "missingFunction" in messages[1], messages


def test_comparison_report_renders_in_chromium(comparison_page, tmp_path):
    shot = tmp_path / "shot.png"
    result = run_chromium(tmp_path / "profile-shot", comparison_page.as_uri(), f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert console_messages(result.stderr) == []
    with Image.open(shot) as image:
        assert image.size == WINDOW
        pixels = np.asarray(image.convert("RGB"))             # (H, W, 3) uint8
    packed = (pixels[..., 0].astype(np.uint32) << 16) | (pixels[..., 1].astype(np.uint32) << 8) | pixels[..., 2]
    assert len(np.unique(packed)) > 200                                 # not one colour: text, tables, plots
    assert share_of_colour(pixels, BASELINE_COLOUR) > 0.0002            # both arms drawn in their colours
    assert share_of_colour(pixels, SPECULATIVE_COLOUR) > 0.0002
    top = pixels[: WINDOW[1] // 4]
    assert top.std() > 10                                               # the verdict is at the top

    scan, messages = dom_of(tmp_path / "profile-dom", comparison_page.as_uri())
    assert messages == []
    assert scan.plots_with_svg == list(PLOT_BUILDERS)
    assert scan.sections[:2] == ["verdict", "summary"]


def test_one_arm_report_renders_in_chromium(tmp_path):
    db = tmp_path / "r.db"
    run_id = stored_bench_run(db, concurrencies=(1, 4), requests_per_point=4)
    with Store.open(db, create=False) as store:
        page = write_report(report_from_run(store, run_id), tmp_path / "out").html
    scan, messages = dom_of(tmp_path / "profile", page.as_uri())
    assert messages == []
    assert scan.plots_with_svg == [n for n in PLOT_BUILDERS if n != "speedup"]


def test_tune_report_renders_in_chromium(tmp_path):
    """The tune page: the heat map's colours and outlined chosen cells are drawn, no console message."""
    from specgauge.report.tune_report import load_tune_report, write_tune_report
    from tune_fixtures import DEPTHS, LEVELS, stored_tune

    db = tmp_path / "t.db"
    tune_id = stored_tune(db)
    with Store.open(db, create=False) as store:
        page = write_tune_report(load_tune_report(store, tune_id), tmp_path / "out", None)[0]
    shot = tmp_path / "shot.png"
    result = run_chromium(tmp_path / "profile-shot", page.as_uri(), f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert console_messages(result.stderr) == []
    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("RGB"))             # (H, W, 3) uint8
    assert pixels[: WINDOW[1] // 4].std() > 10                  # the schedule and the heat map are at the top
    assert share_of_colour(pixels, "#9aea9a", tolerance=12) > 0.001   # the best cells' green (relative 1.00)

    result = run_chromium(tmp_path / "profile-dom", page.as_uri(), "--dump-dom")
    assert result.returncode == 0 and console_messages(result.stderr) == []
    dom = result.stdout
    assert dom.count('data-depth=') == len(DEPTHS) * len(LEVELS)
    assert dom.count("heat chosen") == len(LEVELS)
    scan = DomScan()
    scan.feed(dom)
    assert scan.sections[:2] == ["verdict", "heatmap"]

"""The overview report of a comparison of several speculative arms: one column per arm in the
speedup tables, one series per arm in the plots, a link to each arm's own report; rendered in a real
Chromium (as the two-arm report is) with both arms' colours on screen and no console message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from specgauge.analysis.arm_results import ArmResult, MultiArmResult
from specgauge.analysis.results import CompareResult
from specgauge.compare.arm_choice import arm_choices
from specgauge.report.arms_plots import ARM_COLOURS
from specgauge.report.arms_report import write_arm_reports

from test_browser import CHROMIUM, console_messages, run_chromium, share_of_colour

FIXTURE = Path(__file__).resolve().parents[1] / "compare" / "fixtures" / "compare_result.json"


def several_arms() -> MultiArmResult:
    """The fixture comparison as arm 'eagle3', and the same halved in speed as arm 'ngram'."""
    first = CompareResult.model_validate_json(FIXTURE.read_text())
    slower = first.model_copy(update={
        "single_stream": tuple(r.model_copy(update={"speedup": r.speedup / 2, "ci_low": r.ci_low / 2,
                                                    "ci_high": r.ci_high / 2}) for r in first.single_stream),
        "sweep": tuple(p.model_copy(update={"ratio": p.ratio / 2, "ci_low": p.ci_low / 2, "ci_high": p.ci_high / 2})
                       for p in first.sweep)})
    arms = (ArmResult(key="speculative", label="eagle3", result=first),
            ArmResult(key="speculative-2", label="ngram", result=slower))
    choice = arm_choices(arms, ())
    return MultiArmResult(created_at=first.created_at, tool_version=first.tool_version,
                          baseline=first.arm("baseline"), arms=arms, differences=(), choice=tuple(choice),
                          verdict_lines=tuple(c.sentence for c in choice))


def test_the_overview_has_a_column_and_a_series_per_arm(tmp_path):
    result = several_arms()
    written = write_arm_reports(result, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert written[0] == tmp_path / "report.html"
    assert page.count("<svg") == 2 and (tmp_path / "plots" / "arms_speedup.png").stat().st_size > 0
    assert page.count(">eagle3</th>") == 2 and page.count(">ngram</th>") == 2   # both tables, a column each
    assert 'href="eagle3/report.html"' in page and (tmp_path / "ngram" / "report.html").exists()
    domain = result.arms[0].result.single_stream[0].domain
    assert any(c.domain == domain and c.chosen == "eagle3" for c in result.choice)
    assert f"{domain}: eagle3 (" in page


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install -y chromium)")
def test_the_overview_renders_in_chromium_with_both_arms_colours(tmp_path):
    write_arm_reports(several_arms(), tmp_path / "out")
    url = (tmp_path / "out" / "report.html").as_uri()
    dom = run_chromium(tmp_path / "profile-dom", url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 2 and not console_messages(dom.stderr)
    shot = tmp_path / "shot.png"
    taken = run_chromium(tmp_path / "profile-shot", url, f"--screenshot={shot}")
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert share_of_colour(pixels, ARM_COLOURS[0]) > 0.001 and share_of_colour(pixels, ARM_COLOURS[1]) > 0.001

"""A comparison of several speculative arms, printed and written: its terminal sections
(report/arms_text.py), ``verdict.json`` (every arm) and one report per arm under ``DIR/LABEL/``.
``compare`` and ``specgauge report cN`` both use it."""

from __future__ import annotations

import json
from pathlib import Path

from specgauge.analysis.arm_results import MultiArmResult


def print_arms(result: MultiArmResult, out) -> None:
    """Every arm's section (its verdict tables and checks), then the differences and the choice."""
    from specgauge.report.arms_text import arm_check_lines, arm_heading, choice_lines
    from specgauge.report.report_data import report_from_compare
    from specgauge.report.verdict_table import verdict_renderable

    for index, arm in enumerate(result.arms):
        out.print(arm_heading(result, index), style="bold", soft_wrap=True, markup=False, highlight=False)
        out.print(verdict_renderable(report_from_compare(arm.result)))
        for line in arm_check_lines(result, index):
            out.print(line, style="yellow" if line.startswith("warning") else None, soft_wrap=True, markup=False,
                      highlight=False)
    for line in choice_lines(result):
        out.print(line, soft_wrap=True, markup=False, highlight=False,
                  style="bold" if not line.startswith(" ") else None)


def write_arm_reports(result: MultiArmResult, directory: Path) -> list[Path]:
    """``DIR/report.html`` (the overview: one series per arm), ``DIR/verdict.json`` (every arm) and
    one report per arm under ``DIR/LABEL/``."""
    from specgauge.report.arms_html import write_overview
    from specgauge.report.html import write_report

    directory.mkdir(parents=True, exist_ok=True)
    verdict = directory / "verdict.json"
    verdict.write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
    pages = {arm.label: f"{arm_folder(arm.label)}/report.html" for arm in result.arms}
    overview = write_overview(result, directory, pages)
    written = [overview, verdict]
    for arm in result.arms:
        written.append(write_report(arm.result, directory / arm_folder(arm.label)).html)
    return written


def arm_folder(label: str) -> str:
    """A label as a folder name (letters, digits, ``-``, ``_``, ``.`` kept)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label) or "arm"

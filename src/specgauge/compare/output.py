"""What ``compare`` and ``demo`` print and write once a comparison is done: the verdict table,
warnings, losslessness and goodput; ``verdict.json`` and the report."""

from __future__ import annotations

from pathlib import Path

from specgauge.cli_options import console, write_text
from specgauge.errors import UserError


def check_outputs(output_json: str | None, output_dir: str | None) -> None:
    """Fail before measuring anything when the results could not be written."""
    from specgauge.output_paths import check_output_file

    check_output_file(output_json, "--output-json")
    if output_dir:
        try:
            Path(output_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"--output-dir {output_dir}: {exc.strerror or exc}") from None


def emit(result, *, output_json: str | None, output_dir: str | None, db: str) -> None:
    """Print the verdict table, warnings, losslessness and goodput (``--goodput``); write
    verdict.json (``-``: stdout, the rest then goes to stderr) and the report."""
    import json

    from specgauge.compare.per_turn import per_turn_lines
    from specgauge.report.field_layout import field_table_lines
    from specgauge.report.html import write_report
    from specgauge.report.report_data import report_from_compare
    from specgauge.report.report_text import distribution_lines, goodput_lines, temperature_lines
    from specgauge.report.terminal import comparison_notes
    from specgauge.report.rate_table import rate_lines
    from specgauge.report.trace_table import trace_lines
    from specgauge.report.verdict_table import verdict_renderable
    from specgauge.store import Store

    out = console(stderr=output_json == "-")
    report = report_from_compare(result)
    if result.trace is None:   # a trace comparison's windows print below, one unwrapped line each
        out.print(verdict_renderable(report))
    field = field_table_lines(result)
    if field:   # a Spec-Bench / MT-bench suite: its per-category table as the field publishes it (Markdown)
        out.print(f"single stream in {result.settings.suite_layout}'s layout (95% intervals):", soft_wrap=True)
    for line in field:
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    for line in rate_lines(result.rate_points, result.speculative_label):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    for line in trace_lines(result.trace, result.speculative_label):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    for line in temperature_lines(result.by_temperature):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    for warning in result.health:
        out.print(f"warning: {warning.message}", style="yellow")
    with Store.open(db, create=False) as store:   # prompts left out for a context, templates, errors by class
        for line in comparison_notes(store, result.stages):
            out.print(line, style="red" if line.startswith("errors") else None, soft_wrap=True, markup=False,
                      highlight=False)
    for arm in report.arms:   # what limited a point besides its setting (analysis/saturation.py)
        for point in arm.points:
            for load_warning in point.load_warnings:
                out.print(f"warning: {arm.label} c={point.concurrency}: {load_warning}", style="yellow")
    lossless = result.losslessness
    if lossless.checked:
        out.print(f"losslessness (temperature 0, text-exact): {lossless.mismatches} of {lossless.compared} "
                  f"outputs differ" + (f"; first at character {lossless.examples[0].first_difference} of "
                                       f"prompt {lossless.examples[0].prompt_index}" if lossless.examples else ""))
    for line in distribution_lines(lossless.distribution):
        out.print(line, style="red" if "changes the output" in line else None, soft_wrap=True, markup=False,
                  highlight=False)
    for line in goodput_lines(result.goodput) + per_turn_lines(result.per_turn):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    out.print(f"stored as comparison c{result.comparison_id} in {db} "
              f"(specgauge report c{result.comparison_id} --db {db} regenerates the report)")
    if output_dir:
        files = write_report(result, Path(output_dir))
        out.print(f"wrote {files.html} and {files.json}")
    if output_json:
        write_text(output_json, json.dumps(result.model_dump(mode="json"), indent=2) + "\n")

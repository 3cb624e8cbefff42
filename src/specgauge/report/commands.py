"""``specgauge report ID``: regenerate a report from the results store.

``ID`` is a comparison (``c3``), a tune (``t2``) or one bench run (``7``). Heavy imports
(matplotlib, rich) stay inside the command body.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import click

from specgauge.cli_options import console, db_option, write_text
from specgauge.errors import UserError

_REPORT_ID = re.compile(r"^(?:(?P<comparison>c)(?P<cid>\d+)|(?P<tune>t)(?P<tid>\d+)|(?P<rid>\d+))$", re.IGNORECASE)


@dataclass(frozen=True)
class ReportRef:
    """What ``specgauge report`` was asked for: a comparison, a tune or a bench run, by id."""

    kind: str   # "comparison" | "tune" | "run"
    id: int

    def __str__(self) -> str:
        return {"comparison": f"c{self.id}", "tune": f"t{self.id}"}.get(self.kind, str(self.id))


def parse_report_id(text: str) -> ReportRef:
    """``c3`` → comparison 3; ``t2`` → tune 2; ``7`` → bench run 7; anything else is a one-line ``UserError``."""
    match = _REPORT_ID.match(text.strip())
    if match is None:
        raise UserError(f"ID {text!r}: give a bench run id (e.g. 7), a comparison id (e.g. c3) or a tune id "
                        f"(e.g. t2); see 'specgauge runs'")
    if match["comparison"]:
        return ReportRef("comparison", int(match["cid"]))
    if match["tune"]:
        return ReportRef("tune", int(match["tid"]))
    return ReportRef("run", int(match["rid"]))


def several_arms_of(store, ref: ReportRef):
    """The :class:`MultiArmResult` of ``ref`` when it is a finished comparison of several speculative arms."""
    from specgauge.analysis.arm_results import MultiArmResult, is_multi_arm

    if ref.kind != "comparison":
        return None
    row = store.get_comparison(ref.id)
    return MultiArmResult.model_validate(row.result) if row.result is not None and is_multi_arm(row.result) else None


def _report_arms(result, output_dir: str, output_json: str | None) -> None:
    """Print a comparison of several arms and write its reports (one per arm) and verdict.json."""
    from pathlib import Path

    from specgauge.report.arms_report import print_arms, write_arm_reports

    out = console(stderr=output_json == "-")
    print_arms(result, out)
    written = write_arm_reports(result, Path(output_dir))
    if output_json:
        written += _write_json(result.model_dump(mode="json"), output_json)
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)


def load_report(store, ref: ReportRef):
    """The :class:`ReportData` of ``ref`` and, for a run, its bench JSON document."""
    from pydantic import ValidationError

    from specgauge.analysis.results import CompareResult
    from specgauge.report.export import run_document
    from specgauge.report.report_data import report_from_compare, report_from_run

    if ref.kind == "comparison":
        row = store.get_comparison(ref.id)
        if row.result is None:
            why = f": {row.error}" if row.error else ""
            raise UserError(f"comparison {ref.id} is {row.status} and has no result to report{why}")
        try:
            result = CompareResult.model_validate(row.result)
        except ValidationError as exc:
            raise UserError(f"comparison {ref.id}: its stored result does not match this specgauge's "
                            f"format ({exc.error_count()} error(s)); upgrade specgauge") from None
        return report_from_compare(result), None
    data = report_from_run(store, ref.id)
    return data, run_document(store.get_run(ref.id), store.get_points(ref.id))


@click.command("report")
@click.argument("report_id", metavar="ID")
@click.option("--html", "html_path", metavar="FILE", help="write only the self-contained HTML report to FILE")
@click.option("--output-dir", metavar="DIR",
              help="write report.html, plots/*.png, the JSON and sweep.csv here [default: report-ID]")
@click.option("--output-json", metavar="FILE", help="also write the JSON document here ('-' for stdout)")
@db_option
def report_command(report_id: str, html_path: str | None, output_dir: str | None, output_json: str | None,
                   db: str) -> None:
    """Regenerate the report of a comparison (ID like c3), a tune (ID like t2) or one bench run (ID like 7).

    With --html only, just that HTML file is written; otherwise everything goes into --output-dir.
    """
    from specgauge.output_paths import check_output_file
    from specgauge.report.html import render_html, write_report
    from specgauge.report.report_text import distribution_lines, goodput_lines, temperature_lines
    from specgauge.report.terminal import run_table
    from specgauge.report.verdict_table import verdict_renderable
    from specgauge.store import Store

    ref = parse_report_id(report_id)
    check_output_file(output_json, "--output-json")
    if ref.kind == "tune":
        _report_tune(ref, html_path, output_dir, output_json, db)
        return
    with Store.open(db, create=False, read_only=True) as store:
        several = several_arms_of(store, ref)
        if several is None:
            data, document = load_report(store, ref)
    if several is not None:   # a comparison of several speculative arms: a section and a report per arm
        _report_arms(several, output_dir or f"report-{ref}", output_json)
        return
    with Store.open(db, create=False, read_only=True) as store:
        run_view = (store.get_run(ref.id), store.get_points(ref.id)) if ref.kind == "run" else None
        part_of = store.comparison_of_run(ref.id) if ref.kind == "run" else None
        part_of_tune = store.tune_of_run(ref.id) if ref.kind == "run" else None
    out = console(stderr=output_json == "-")
    if run_view is not None:
        out.print(run_table(*run_view))
    out.print(verdict_renderable(data))
    comparison = data.comparison
    for line in (temperature_lines(comparison.by_temperature if comparison is not None else ())
                 + goodput_lines(comparison.goodput if comparison is not None else None)
                 + distribution_lines(comparison.losslessness.distribution if comparison is not None else None)):
        out.print(line, soft_wrap=True, markup=False, highlight=False)
    if html_path and not output_dir:
        written = [render_html(data, html_path)]
    else:
        files = write_report(data, output_dir or f"report-{ref}", html_path=html_path, run_document=document)
        written = [files.html, files.json, files.csv, files.pngs[0].parent]
    if output_json:
        written += _write_json(data.comparison.model_dump(mode="json") if data.comparison is not None else document,
                               output_json)
    click.echo("wrote " + ", ".join(str(p) for p in written), err=True)
    if part_of is not None:
        click.echo(f"run {ref.id} is one arm of comparison {part_of}: 'specgauge report c{part_of}' shows both",
                   err=True)
    if part_of_tune is not None:
        click.echo(f"run {ref.id} is one point of tune {part_of_tune}: 'specgauge report t{part_of_tune}' shows "
                   f"all of them", err=True)


def _write_json(document: dict, output_json: str) -> list[str]:
    """The JSON document to ``output_json`` (``-``: stdout); returns the path written, if a file."""
    import json

    write_text(output_json, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return [] if output_json == "-" else [output_json]


def _report_tune(ref: ReportRef, html_path: str | None, output_dir: str | None, output_json: str | None,
                 db: str) -> None:
    """``report tN``: the heat map and verification in the terminal, the HTML page (and tune.json)."""
    from specgauge.report.tune_report import load_tune_report, print_tune, write_tune_report
    from specgauge.store import Store

    with Store.open(db, create=False, read_only=True) as store:
        stored = load_tune_report(store, ref.id)
    print_tune(console(stderr=output_json == "-"), stored)
    written = [str(p) for p in write_tune_report(stored, None if html_path and not output_dir else
                                                 output_dir or f"report-{ref}", html_path)]
    if output_json:
        written += _write_json(stored.document, output_json)
    click.echo("wrote " + ", ".join(written), err=True)


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(report_command)

"""What ``compare`` prints and writes for a comparison of several speculative arms: one section per
arm, then the differences and the choice (report/arms_report.py); ``verdict.json`` is the
:class:`~specgauge.analysis.arm_results.MultiArmResult`, and ``--output-dir`` gets one report per arm
(``DIR/LABEL/report.html``) beside it."""

from __future__ import annotations

import json
from pathlib import Path

from specgauge.analysis.arm_results import MultiArmResult
from specgauge.cli_options import console, write_text


def emit_arms(result: MultiArmResult, *, output_json: str | None, output_dir: str | None, db: str) -> None:
    """Print every arm's section and the choice between them; write verdict.json and the reports."""
    from specgauge.report.arms_report import print_arms, write_arm_reports

    out = console(stderr=output_json == "-")
    print_arms(result, out)
    out.print(f"stored as comparison c{result.comparison_id} in {db} "
              f"(specgauge report c{result.comparison_id} --db {db} regenerates the reports)")
    if output_dir:
        for path in write_arm_reports(result, Path(output_dir)):
            out.print(f"wrote {path}")
    if output_json:
        write_text(output_json, json.dumps(result.model_dump(mode="json"), indent=2) + "\n")

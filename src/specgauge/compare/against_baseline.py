"""``compare --against-baseline NAME``: one arm run with a stored baseline's settings, its table of
ratios, and exit 1 on a significant regression (the measuring is in :mod:`specgauge.compare.regression`)."""

from __future__ import annotations

import click

from specgauge.cli_options import console, write_text

EXIT_REGRESSION = 1


def run_against_baseline_command(options: dict, run) -> int:
    """Measure the one arm given against baseline ``--against-baseline``; the exit code.
    ``run`` runs a coroutine (SIGINT/SIGTERM stop it)."""
    from specgauge.compare.arm_options import arm_from
    from specgauge.compare.regression import run_against_baseline
    from specgauge.load.workers.options import placement_from
    from specgauge.report.terminal import RichProgress   # one run: the bench display
    from specgauge.store import Store

    arms = [a for a in (arm_from(options, "baseline", required=False), arm_from(options, "speculative",
                                                                                  required=False)) if a is not None]
    if len(arms) != 1:
        raise click.UsageError("--against-baseline measures one arm now: "
                               "give exactly one of --baseline*/--speculative*")
    with Store.open(options["db"], create=False) as store:
        store.get_baseline(options["against_baseline"])   # unknown name: one line, before anything starts

        async def work():
            return await run_against_baseline(
                store, options["against_baseline"], arms[0].spec(), allow_suite_change=options["allow_suite_change"],
                allow_server_change=options["allow_server_change"], api_key=options["api_key"],
                headers=options["headers"], progress=RichProgress(db=options["db"]),
                start_timeout_s=options["start_timeout"], seed=options["seed"], resamples=options["resamples"],
                min_effect=options["min_effect"], placement=placement_from(options))

        report = run(work())
    print_regressions(report, to_stderr=options["output_json"] == "-")
    if options["output_json"]:
        import dataclasses
        import json

        document = {"baseline": report.baseline_name, "baseline_run_id": report.baseline_run_id,
                    "new_run_id": report.new_run_id, "regressed": report.regressed,
                    "suite_diff": report.suite_diff.summary(), "server_changes": list(report.server_changes),
                    "drift": report.drift.model_dump() if report.drift else None,
                    "points": [dict(dataclasses.asdict(p), verdict=p.verdict) for p in report.points]}
        write_text(options["output_json"], json.dumps(document, indent=2, default=str) + "\n")
    return EXIT_REGRESSION if report.regressed else 0


def print_regressions(report, *, to_stderr: bool) -> None:
    """The run against its baseline: ratios with 95% CIs per point, the drift, the verdict line."""
    from rich.table import Table

    out = console(stderr=to_stderr)
    if not report.suite_diff.same:
        out.print(f"suite changed: {report.suite_diff.summary()}", style="yellow")
    for change in report.server_changes:
        out.print(f"server changed (--allow-server-change): {change}", style="yellow")
    table = Table(title=f"run {report.new_run_id} against baseline {report.baseline_name!r} (run "
                        f"{report.baseline_run_id}); ratios new/baseline, 95% CI", title_justify="left")
    for header in ("point", "baseline tok/s", "new tok/s", "throughput ratio", "per-request tok/s ratio", "verdict"):
        table.add_column(header, justify="left" if header in ("point", "verdict") else "right")

    def ratio(ci) -> str:
        if ci.ratio is None:
            return "-"
        interval = f" [{ci.ci_low:.3f}, {ci.ci_high:.3f}]" if ci.ci_low is not None else ""
        return f"{ci.ratio:.3f}{interval}"

    for p in report.points:
        style = "bold red" if p.change < 0 else ("green" if p.change > 0 else "")
        table.add_row(p.label, "-" if p.baseline_tok_s is None else f"{p.baseline_tok_s:,.1f}",
                      "-" if p.new_tok_s is None else f"{p.new_tok_s:,.1f}", ratio(p.throughput),
                      ratio(p.request_tok_s), f"[{style}]{p.verdict}" if style else p.verdict)
    out.print(table)
    drift = report.drift
    if drift is not None and drift.sigma is not None:
        out.print(f"intervals include the machine drift this run measured: ±{drift.per_measurement:.1%} between "
                  f"the earlier and later halves of its points ({drift.repeats} point(s))")
    within = [p.label for p in report.points if p.within_drift]
    if within:
        out.print(f"the machine drift this run measured is larger than the change at {', '.join(within)}: "
                  f"not called a regression (a quieter machine or more requests would settle it)", style="yellow")
    regressions = [p.label for p in report.points if p.change < 0]
    out.print(f"significant regression at {', '.join(regressions)}" if regressions
              else "no significant regression", style="bold red" if regressions else "bold green")

"""The verdict in the terminal (rich): single-stream and sweep tables with ratios and CIs, coloured
green where the whole CI is above 1 and red where it is below, then the crossover and the
recommendation. A one-arm report (a plain bench run) prints the run's own summary table."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from specgauge.report.formatting import number, ratio_outcome, ratio_with_ci
from specgauge.report.report_data import ReportData
from specgauge.report.report_text import crossover_sentence, headline, recommendation_lines
from specgauge.report.trace_table import trace_lines

OUTCOME_STYLES = {"better": "bold green", "worse": "bold red", "unclear": ""}


def _ratio(ratio: float | None, low: float | None, high: float | None) -> Text:
    return Text(ratio_with_ci(ratio, low, high), style=OUTCOME_STYLES[ratio_outcome(ratio, low, high)])


def single_stream_table(data: ReportData) -> Table:
    """Per domain: both arms' single-stream tok/s, the speedup [95% CI] and acceptance length."""
    result = data.comparison
    table = Table(title="single stream, per domain", title_justify="left")
    looping = any(row.degenerate_pairs for row in result.single_stream)
    headers = ["domain", "baseline tok/s", f"{result.speculative_label} tok/s", "speedup [95% CI]", "accept"]
    if looping:  # the speedup over the pairs whose outputs do not repeat themselves
        headers.append("not looping [95% CI]")
    for header in headers:
        table.add_column(header, justify="left" if header == "domain" else "right")
    for row in result.single_stream:
        cells = [row.domain, number(row.baseline_tok_s), number(row.speculative_tok_s),
                 _ratio(row.speedup, row.ci_low, row.ci_high), number(row.accept_length, ".2f")]
        if looping:
            clean = row.non_degenerate
            cells.append(_ratio(clean.ratio, clean.ci_low, clean.ci_high) + Text(f" ({row.degenerate_pairs} out)"))
        table.add_row(*cells)
    return table


def sweep_table(data: ReportData) -> Table:
    """Per concurrency: both arms' aggregate tok/s and the throughput ratio [95% CI]."""
    result = data.comparison
    table = Table(title="concurrency sweep (aggregate output tok/s)", title_justify="left",
                  caption="ratio = speculative / baseline · green: CI above 1 · red: CI below 1")
    for header in ("concurrency", "baseline tok/s", f"{result.speculative_label} tok/s", "ratio [95% CI]",
                   "TPOT ratio"):
        table.add_column(header, justify="right")
    for point in sorted(result.sweep, key=lambda p: p.concurrency):
        table.add_row(str(point.concurrency), number(point.baseline_tok_s), number(point.speculative_tok_s),
                      _ratio(point.ratio, point.ci_low, point.ci_high),
                      ratio_with_ci(point.tpot_ratio.ratio, point.tpot_ratio.ci_low, point.tpot_ratio.ci_high))
    return table


def verdict_renderable(data: ReportData) -> Group:
    """Everything the terminal shows for a report: tables, then the verdict lines in bold."""
    if data.comparison is None:  # one run: its table is the bench part's run_table; add the headline
        return Group(*[Text(line, style="bold") for line in headline(data)])
    if data.comparison.trace is not None:   # compare --trace: the windows are the result (no sweep to read)
        return Group(*[Text(line) for line in trace_lines(data.comparison.trace, data.comparison.speculative_label)])
    parts: list = [single_stream_table(data), sweep_table(data)]
    parts += [Text(line, style="bold") for line in headline(data)]
    parts.append(Text(f"crossover: {crossover_sentence(data)}"))
    first, *more = recommendation_lines(data)
    parts.append(Text(f"recommendation: {first}", style="bold cyan"))
    parts += [Text(f"  {line}", style="cyan") for line in more]
    for setting in data.comparison.recommendation.settings:
        parts.append(Text(f"  {setting.server}: {setting.setting}"))
        if setting.config_file and setting.config_text:
            parts.append(Text(f"    {setting.config_file}: {setting.config_text}"))
    return Group(*parts)

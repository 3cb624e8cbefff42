"""The overview page of a comparison of several speculative arms (``DIR/report.html``): the choice
per domain and concurrency, the differences between arms, one column per arm in the speedup tables
and one series per arm in the plots, with a link to each arm's own report (``DIR/LABEL/report.html``).
Self-contained like the two-arm report: plots inline as SVG, nothing loaded."""

from __future__ import annotations

from html import escape
from pathlib import Path

from specgauge.analysis.arm_results import MultiArmResult
from specgauge.report.arms_plots import arm_colours, arm_plots
from specgauge.report.formatting import number, ratio_outcome, ratio_with_ci
from specgauge.report.plots import plot_svg, save_png

CSS = """
body { margin: 0; color: #1f2328; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 30px; border-bottom: 1px solid #d8dee4; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; margin: 6px 0 14px; }
th, td { padding: 5px 12px; border-bottom: 1px solid #d8dee4; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; } th:first-child, td:first-child { text-align: left; }
.better { color: #1a7f37; font-weight: 600; } .worse { color: #cf222e; font-weight: 600; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 18px; }
figure { margin: 0; padding: 8px; border: 1px solid #d8dee4; border-radius: 6px; }
figure svg { width: 100%; height: auto; display: block; }
pre { background: #f6f8fa; padding: 8px 10px; white-space: pre-wrap; overflow-wrap: anywhere; }
"""


def _ratio(low: float | None, ratio: float | None, high: float | None) -> str:
    outcome = ratio_outcome(ratio, low, high)
    css = f' class="{outcome}"' if outcome != "unclear" else ""
    return f"<td{css}>{escape(ratio_with_ci(ratio, low, high))}</td>"


def _head(result: MultiArmResult, first: str) -> str:
    colours = arm_colours(result)
    cells = "".join(f'<th><span class="swatch" style="background:{colours[a.label]}"></span>{escape(a.label)}</th>'
                    for a in result.arms)
    return f"<tr><th>{escape(first)}</th><th>baseline tok/s</th>{cells}</tr>"


def _table(result: MultiArmResult, first: str, rows_of, key, ratio_of) -> str:
    """One table: a row per ``key`` value over every arm's ``rows_of(arm.result)``, a ratio column per
    arm (``ratio_of(row)``: low, ratio, high), the baseline's tok/s from the first arm that has the row."""
    keys = sorted({key(row) for arm in result.arms for row in rows_of(arm.result)})
    rows = []
    for value in keys:
        found = [next((r for r in rows_of(arm.result) if key(r) == value), None) for arm in result.arms]
        base = next((r.baseline_tok_s for r in found if r is not None), None)
        rows.append(f"<tr><td>{escape(str(value))}</td><td>{number(base)}</td>" + "".join(
            _ratio(*ratio_of(r)) if r else "<td>–</td>" for r in found) + "</tr>")
    return f"<table>{_head(result, first)}{''.join(rows)}</table>"


def speedup_tables(result: MultiArmResult) -> str:
    """Single stream per domain and the sweep per concurrency: one speedup column per arm."""
    single = _table(result, "domain", lambda r: r.single_stream, lambda row: row.domain,
                    lambda row: (row.ci_low, row.speedup, row.ci_high))
    sweep = _table(result, "concurrency", lambda r: r.sweep, lambda row: row.concurrency,
                   lambda row: (row.ci_low, row.ratio, row.ci_high))
    return (f"<h2>Single stream: speedup per domain [95% CI]</h2>{single}"
            f"<h2>Concurrency sweep: throughput ratio [95% CI]</h2>{sweep}")


def overview_html(result: MultiArmResult, plots_svg: list[str], arm_pages: dict[str, str]) -> str:
    """The whole page as text; ``arm_pages``: each arm's report, relative to the page."""
    choice = "".join(f"<li>{escape(c.sentence)}</li>" for c in result.choice)
    differences = "".join(f"<li>{escape(d.sentence)}</li>" for d in result.differences)
    checks = "".join(
        f"<li><a href=\"{escape(arm_pages[a.label])}\">{escape(a.label)}</a>: "
        f"{escape(a.result.arm('speculative').description)} · losslessness "
        + (f"{a.result.losslessness.mismatches} of {a.result.losslessness.compared} outputs differ"
           if a.result.losslessness.checked else "not checked")
        + f" · {len(a.result.health)} warning(s)</li>" for a in result.arms)
    settings = []
    for label in dict.fromkeys(c.chosen for c in result.choice if c.chosen):
        recommendation = result.arm(label).result.recommendation
        settings.append(f"<h3>{escape(label)}</h3><p>{escape(recommendation.rule)}</p>" + "".join(
            f"<pre>{escape(s.server)}: {escape(s.setting)}</pre>" for s in recommendation.settings))
    ident = f" {result.comparison_id}" if result.comparison_id is not None else ""
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>specgauge · comparison{ident} · "
            f"{len(result.arms)} speculative arms</title><style>{CSS}</style></head><body><main>"
            f"<h1>specgauge · comparison{ident} · baseline vs {escape(', '.join(a.label for a in result.arms))}</h1>"
            f"<p>baseline: {escape(result.baseline.description)} · measured {escape(result.created_at)} · "
            f"specgauge {escape(result.tool_version)}</p>"
            f"<h2>Which method, per domain and concurrency</h2><ul>{choice}</ul>"
            + ("".join(settings) and f"<h2>The chosen arms' schedules per batch size</h2>{''.join(settings)}")
            + f"<h2>Between arms (paired on the same prompts)</h2><ul>{differences}</ul>"
            + speedup_tables(result)
            + f"<h2>Plots</h2><div class=\"plots\">{''.join(f'<figure>{svg}</figure>' for svg in plots_svg)}</div>"
            f"<h2>Each arm's own report and checks</h2><ul>{checks}</ul></main></body></html>\n")


def write_overview(result: MultiArmResult, directory: Path, arm_pages: dict[str, str]) -> Path:
    """``DIR/report.html`` and its plots as ``DIR/plots/NAME.png``; returns the page's path."""
    plots = arm_plots(result)
    (directory / "plots").mkdir(parents=True, exist_ok=True)
    for plot in plots:
        save_png(plot, directory / "plots" / f"{plot.name}.png")
    page = directory / "report.html"
    page.write_text(overview_html(result, [plot_svg(p) for p in plots], arm_pages), encoding="utf-8")
    return page

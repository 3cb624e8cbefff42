"""The self-contained HTML report: one file that opens offline, plots inline as SVG.

No CDN, no web font, no external script or stylesheet: everything the page needs is in it.
:func:`write_report` also writes every plot as a PNG beside it (``DIR/plots/NAME.png``), the
sweep as CSV and, for a comparison, ``verdict.json`` (for one bench run, ``run.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from specgauge.errors import UserError
from specgauge.report.formatting import number, ratio_outcome, ratio_with_ci
from specgauge.report.plots import Plot, arm_colour, build_plots, plot_svg, save_png
from specgauge.report.report_data import ArmData, ReportData, report_from_compare
from specgauge.report.report_text import (DEFINITIONS_SOURCE, crossover_sentence, distribution_lines, goodput_slos,
                                          headline, metric_definitions, recommendation_lines, temperature_lines)

if TYPE_CHECKING:
    from specgauge.analysis.results import CompareResult

SERVER_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "specgauge": "specgauge (embedded engine)"}

CSS = """
:root { --ink: #1f2328; --muted: #59636e; --line: #d8dee4; --soft: #f6f8fa;
        --base: %(base)s; --spec: %(spec)s; --good: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; line-height: 1.45;
       font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
header h1 { font-size: 22px; margin: 0 0 4px; }
header p { margin: 0; color: var(--muted); font-size: 13px; }
h2 { font-size: 18px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 15px; margin: 16px 0 6px; }
.verdict { margin: 20px 0 8px; padding: 18px 22px; background: var(--soft); border-left: 6px solid var(--spec);
           border-radius: 6px; }
.verdict p { font-size: 21px; line-height: 1.35; margin: 6px 0; font-weight: 600; }
.verdict p.sub { font-size: 16px; font-weight: 500; color: var(--muted); }
table { border-collapse: collapse; margin: 6px 0 14px; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 12px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--soft); font-weight: 600; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
td.text { white-space: normal; }
.better { color: var(--good); font-weight: 600; }
.worse { color: var(--bad); font-weight: 600; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.settings { display: grid; grid-template-columns: repeat(auto-fit, minmax(320px, 1fr)); gap: 12px; }
.setting { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.setting h3 { margin: 0; }
.setting p { margin: 6px 0 0; color: var(--muted); font-size: 13px; }
pre { margin: 0; padding: 10px 12px; background: var(--soft); border-radius: 4px; white-space: pre-wrap;
      overflow-wrap: anywhere; font: 13px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.setting-head { display: flex; justify-content: space-between; align-items: baseline; margin-bottom: 6px; }
button.copy { font-size: 12px; padding: 2px 8px; cursor: pointer; border: 1px solid var(--line);
              border-radius: 4px; background: #fff; color: var(--muted); }
ul.warnings { padding-left: 0; list-style: none; }
ul.warnings li { margin: 6px 0; padding: 8px 12px; border-left: 4px solid var(--warn); background: #fff8c5;
                 border-radius: 4px; }
ul.warnings li.ok { border-left-color: var(--good); background: #dafbe1; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); gap: 18px; }
figure.plot { margin: 0; padding: 8px; border: 1px solid var(--line); border-radius: 6px; break-inside: avoid; }
figure.plot svg { width: 100%%; height: auto; display: block; }
figure.plot figcaption { font-size: 12px; color: var(--muted); padding: 4px 4px 0; }
dl.definitions dt { font-weight: 600; margin-top: 8px; }
dl.definitions dd { margin: 2px 0 0 0; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; font-size: 14px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
code { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.note { color: var(--muted); font-size: 13px; }
@media print {
  main { max-width: none; padding: 0; }
  button.copy { display: none; }
  .plots { display: block; }
  figure.plot, table, .setting { break-inside: avoid; margin-bottom: 12px; }
  h2 { break-after: avoid; }
}
"""

# Copy buttons on the settings blocks; works offline, nothing loaded.
SCRIPT = """
document.querySelectorAll("button.copy").forEach(function (button) {
  button.addEventListener("click", function () {
    var code = button.closest(".setting").querySelector("code");
    var text = code.textContent;
    var done = function () {
      button.textContent = "copied"; setTimeout(function () { button.textContent = "copy"; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () {}); return;
    }
    var range = document.createRange(); range.selectNodeContents(code);
    var selection = window.getSelection(); selection.removeAllRanges(); selection.addRange(range); done();
  });
});
"""


@dataclass(frozen=True)
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    pngs: tuple[Path, ...]
    json: Path
    csv: Path


def as_report_data(source: "ReportData | CompareResult") -> ReportData:
    """Accept a comparison result or ready report data."""
    return source if isinstance(source, ReportData) else report_from_compare(source)


# -- small builders --------------------------------------------------------------------------

def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, align: str = "", css_class: str = "") -> str:
    """A table; cells are HTML already (escape text before passing it). ``align`` has one letter
    per column, ``l`` (text) or ``r`` (numbers, the default); a cell may bring its own ``<td>``."""

    def cell_class(index: int) -> str:
        return ' class="text"' if index < len(align) and align[index] == "l" else ""

    head = "".join(f"<th{cell_class(i)}>{h}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell if cell.startswith("<td") else f"<td{cell_class(i)}>{cell}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    cls = f' class="{css_class}"' if css_class else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _ratio_cell(ratio: float | None, low: float | None, high: float | None, note: str = "") -> str:
    outcome = ratio_outcome(ratio, low, high)
    cls = f' class="{outcome}"' if outcome != "unclear" else ""
    return f"<td{cls}>{escape(ratio_with_ci(ratio, low, high) + note)}</td>"


def _arm_heading(arm: ArmData, suffix: str) -> str:
    return f'<span class="swatch" style="background:{arm_colour(arm)}"></span>{escape(arm.label)} {suffix}'


def _section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{section_id}"><h2>{escape(title)}</h2>{body}</section>'


def _setting_block(title: str, code: str, note: str) -> str:
    """A copyable settings block: heading, copy button, the code, a note."""
    return (f'<div class="setting"><div class="setting-head"><h3>{escape(title)}</h3>'
            f'<button class="copy" type="button">copy</button></div><pre><code>{escape(code)}</code></pre>'
            f"<p>{escape(note)}</p></div>")


# -- sections --------------------------------------------------------------------------------

def _verdict_section(data: ReportData) -> str:
    lines = "".join(f"<p>{escape(line)}</p>" for line in headline(data))
    extra = recommendation_lines(data)
    sub = f'<p class="sub">Recommendation: {escape(" ".join(extra))}</p>' if extra else ""
    return f'<section id="verdict" class="verdict">{lines}{sub}</section>'


def _summary_section(data: ReportData) -> str:
    result = data.comparison
    if result is None:
        return _section("summary", "Summary", _one_arm_table(data.arms[0]))
    base, spec = data.baseline, data.speculative
    single = _table(
        ["domain", _arm_heading(base, "tok/s"), _arm_heading(spec, "tok/s"), "speedup [95% CI]",
         "acceptance length", "outputs not looping: speedup [95% CI]"],
        ([escape(d.domain), number(d.baseline_tok_s), number(d.speculative_tok_s),
          _ratio_cell(d.speedup, d.ci_low, d.ci_high), number(d.accept_length, ".2f"),
          _ratio_cell(d.non_degenerate.ratio, d.non_degenerate.ci_low, d.non_degenerate.ci_high,
                      f" ({d.degenerate_pairs} of {d.pairs or 0} pairs left out)")]
         for d in result.single_stream), align="l", css_class="single-stream")
    sweep = _table(
        ["concurrency", _arm_heading(base, "tok/s"), _arm_heading(spec, "tok/s"), "ratio [95% CI]",
         "TPOT ratio", "TTFT ratio"],
        ([str(p.concurrency), number(p.baseline_tok_s), number(p.speculative_tok_s),
          _ratio_cell(p.ratio, p.ci_low, p.ci_high),
          escape(ratio_with_ci(p.tpot_ratio.ratio, p.tpot_ratio.ci_low, p.tpot_ratio.ci_high)),
          escape(ratio_with_ci(p.ttft_ratio.ratio, p.ttft_ratio.ci_low, p.ttft_ratio.ci_high))]
         for p in sorted(result.sweep, key=lambda p: p.concurrency)), css_class="sweep")
    crossover = f"<p><strong>Crossover</strong>: {escape(crossover_sentence(data) or '')}</p>"
    note = ('<p class="note">Ratios are speculative / baseline; green: the whole 95% CI is above 1, red: '
            'below 1. For TPOT and TTFT a ratio below 1 is the better one.</p>')
    return _section("summary", "Summary",
                    f"<h3>Single stream, per domain</h3>{single}<h3>Concurrency sweep (aggregate output tok/s)"
                    f"</h3>{sweep}{crossover}{note}{_goodput_table(data)}{_per_turn_table(result)}")


def _per_turn_table(result: "CompareResult") -> str:
    """A suite with multi-turn sessions: the speedup per point and turn, paired by (session, turn)."""
    if not result.per_turn:
        return ""
    table = _table(
        ["point", "turn", "pairs", "throughput ratio [95% CI]", "TTFT p50 ratio", "baseline TTFT p50 (ms)",
         "speculative TTFT p50 (ms)"],
        ([escape(row.point), str(row.turn), str(row.pairs),
          _ratio_cell(row.throughput.ratio, row.throughput.ci_low, row.throughput.ci_high),
          escape(ratio_with_ci(row.ttft_ratio.ratio, row.ttft_ratio.ci_low, row.ttft_ratio.ci_high)),
          number(row.baseline_ttft_ms_p50), number(row.speculative_ttft_ms_p50)]
         for row in result.per_turn), align="l", css_class="per-turn")
    return ("<h3>Per turn (multi-turn sessions: each later turn sent after that arm's own answer; pairs by "
            f"session and turn)</h3>{table}")


def _goodput_table(data: ReportData) -> str:
    """``--goodput``: per stage, each arm's requests/s meeting every SLO of those completed, and the ratio."""
    goodput = data.comparison.goodput if data.comparison is not None else None
    if goodput is None:
        return ""

    def arm_cell(arm) -> str:
        return f"{number(arm.request_goodput, '.2f')} of {number(arm.request_throughput, '.2f')}"

    rows = ([escape(row.stage), arm_cell(row.baseline), arm_cell(row.speculative), number(row.goodput_ratio, ".2f")]
            for row in goodput.stages)
    headers = ["stage", _arm_heading(data.baseline, "req/s in SLO"), _arm_heading(data.speculative, "req/s in SLO"),
               "goodput ratio"]
    table = _table(headers, rows, align="l", css_class="goodput")
    return (f"<h3>Goodput [{escape(goodput_slos(goodput))}]</h3>{table}"
            '<p class="note">Requests per second meeting every SLO, of those completed (rounds pooled); the '
            'ratio is speculative / baseline and has no interval.</p>')


def _one_arm_table(arm: ArmData) -> str:
    if not arm.points:
        return '<p class="note">No finished closed-loop point.</p>'
    headers = ["concurrency", "output tok/s", "TTFT p50 (ms)", "TTFT p99 (ms)", "TPOT p50 (ms)", "TPOT p99 (ms)",
               "acceptance length", "ok / errors"]
    rows = [[str(p.concurrency), number(p.output_tokens_per_s), number(p.ttft_ms.get("p50")),
             number(p.ttft_ms.get("p99")), number(p.tpot_ms.get("p50"), ",.2f"), number(p.tpot_ms.get("p99"), ",.2f"),
             number(p.accept_length, ".2f"), f"{p.num_ok} / {p.num_errors}"] for p in arm.points]
    if any(p.flagged for p in arm.points):     # a note column only when a point has something to say
        headers.append("note")
        for row, point in zip(rows, arm.points):
            row.append(f'<td class="text worse">{escape(point.flag_reason or "flagged")}</td>' if point.flagged
                       else '<td class="text"></td>')
    return _table(headers, rows, align="r" * 8 + "l", css_class="sweep") + _turns_table(arm)


def _turns_table(arm: ArmData) -> str:
    """A bench run on a suite with multi-turn sessions: TTFT, ITL, acceptance and prefix-cache hits per turn."""
    rows = [[str(p.concurrency), str(row["turn"]), f"{row['ok']} / {row['requests']}", number(row["ttft_ms_p50"]),
             number(row["itl_ms_p50"], ",.2f"), number(row["accept_length"], ".2f"),
             number(row["prompt_tokens_mean"], ",.0f"), number(row["cached_tokens_mean"], ",.0f"),
             "–" if row["cache_hit_share"] is None else f"{row['cache_hit_share']:.0%}"]
            for p in arm.points for row in p.turns]
    if not rows:
        return ""
    table = _table(["concurrency", "turn", "ok / sent", "TTFT p50 (ms)", "ITL p50 (ms)", "acceptance length",
                    "prompt tokens", "cached tokens", "cache hit"], rows, css_class="per-turn")
    return ("<h3>Per turn (multi-turn sessions: each later turn sent after the server's actual answer)</h3>"
            f"{table}<p class=\"note\">Cached tokens: prompt tokens the server's prefix cache served, as it reports "
            "them per request; – where it does not.</p>")


def _recommendation_section(data: ReportData) -> str:
    result = data.comparison
    if result is None:
        return ""
    recommendation = result.recommendation
    blocks = "".join(_setting_block(SERVER_NAMES.get(s.server, s.server), s.setting, s.note)
                     + (_setting_block(f"{SERVER_NAMES.get(s.server, s.server)}: {s.config_file}", s.config_text, "")
                        if s.config_file and s.config_text else "")
                     for s in recommendation.settings)
    threshold = "null (no threshold)" if recommendation.disable_above is None else \
        str(recommendation.disable_above)
    first, *more = recommendation_lines(data)
    body = (f"<p><strong>{escape(first)}</strong></p>"
            + "".join(f"<p>{escape(line)}</p>" for line in more)
            + f"<p><code>recommended_disable_above = {escape(threshold)}</code></p>"
            f'<p class="note">Rule: {escape(recommendation.rule)}.</p>')
    if blocks:
        body += f'<div class="settings">{blocks}</div>'
    verification = result.verification
    if verification is not None:
        rows = ([str(p.concurrency), number(p.baseline_tok_s), number(p.thresholded_tok_s),
                 _ratio_cell(p.ratio, p.ci_low, p.ci_high), "yes" if p.worse_beyond_noise else "no"]
                for p in verification.points)
        verdict = "never worse than the baseline" if verification.never_worse else \
            "worse than the baseline at some point"
        body += (f"<h3>Verified with the threshold applied (disable above {verification.disable_above}): "
                 f"{verdict}</h3>" + _table(["concurrency", "baseline tok/s", "thresholded tok/s", "ratio [95% CI]",
                                             "worse beyond noise"], rows, align="rrrrl"))
    return _section("recommendation", "Recommendation", body)


def _warnings_section(data: ReportData) -> str:
    items: list[str] = []
    result = data.comparison
    if result is not None:
        items += [f"<li><strong>{escape(w.code.replace('_', ' '))}</strong>: {escape(w.message)}</li>"
                  for w in result.health]
        lossless = result.losslessness
        if not lossless.checked:
            items.append(f"<li><strong>losslessness not checked</strong>: {escape(lossless.reason or '')}</li>")
        elif lossless.mismatches:
            items.append(f"<li><strong>output mismatches</strong>: {lossless.mismatches} of {lossless.compared} "
                         f"request pairs differ between the arms at temperature 0 "
                         f"({number((lossless.mismatch_rate or 0) * 100, '.1f')}%); GPU numerics can flip a few "
                         f"tokens, a high rate means the speculative server is not lossless.</li>")
        else:
            items.append(f'<li class="ok"><strong>lossless</strong>: all {lossless.compared} request pairs '
                         f"gave the same text at temperature 0.</li>")
        items += [f"<li>{escape(line)}</li>" for line in distribution_lines(lossless.distribution)
                  + temperature_lines(result.by_temperature)]
    for arm in data.arms:
        flagged = [p for p in arm.points if p.flagged]
        items += [f"<li><strong>{escape(arm.label)}, concurrency {p.concurrency}</strong>: "
                  f"{escape(p.flag_reason or 'flagged')}</li>" for p in flagged]
        items += [f"<li><strong>{escape(arm.label)}, concurrency {p.concurrency}</strong>: {escape(w)}</li>"
                  for p in arm.points for w in p.load_warnings]
    items += [f"<li>{escape(note)}</li>" for note in data.notes]
    if not items:
        return ""
    body = f'<ul class="warnings">{"".join(items)}</ul>'
    if result is not None and result.losslessness.examples:
        body += "<h3>First mismatches</h3>" + _table(
            ["stage", "prompt", "first difference at", "baseline", "speculative"],
            ([escape(e.stage), str(e.prompt_index), f"char {e.first_difference}",
              f"<code>{escape(e.baseline_excerpt)}</code>", f"<code>{escape(e.speculative_excerpt)}</code>"]
             for e in result.losslessness.examples), align="lrrll")
    return _section("warnings", "Losslessness and health", body)


def _plots_section(plots: Sequence[Plot]) -> str:
    figures = []
    for plot in plots:
        cls = "plot no-data" if plot.missing else "plot"
        caption = f"no data: {plot.missing}" if plot.missing else f"PNG: plots/{plot.name}.png"
        figures.append(f'<figure class="{cls}" id="plot-{plot.name}" data-plot="{plot.name}" '
                       f'aria-label="{escape(plot.title)}">{plot_svg(plot)}'
                       f"<figcaption>{escape(caption)}</figcaption></figure>")
    return _section("plots", "Plots", f'<div class="plots">{"".join(figures)}</div>')


def _definitions_section() -> str:
    items = "".join(f"<dt>{escape(term)}</dt><dd>{escape(text)}</dd>" for term, text in metric_definitions())
    return _section("definitions", "Definitions",
                    f'<dl class="definitions">{items}</dl><p class="note">From <code>{DEFINITIONS_SOURCE}</code>, '
                    f"where every figure in this report is computed.</p>")


def _arms_section(data: ReportData) -> str:
    rows = []
    kinds = {a.name: a.kind for a in data.comparison.arms} if data.comparison else {}
    for arm in data.arms:
        rows.append([_arm_heading(arm, ""), escape(kinds.get(arm.role, "bench run")), escape(arm.description),
                     escape(arm.url or "–"), escape(arm.model or "–"),
                     escape(", ".join(map(str, arm.run_ids)) or "–")])
    return _section("arms", "Arms" if data.comparison else "Run",
                    _table(["arm", "kind", "what", "URL", "model", "bench runs"], rows, align="llllll"))


def _provenance_section(data: ReportData) -> str:
    entries: list[tuple[str, str]] = [
        ("suite" if len(data.suites) == 1 else "suites",
         "<br>".join(f"{escape(s['name'])}@{s['version']} <code>{escape(s['content_hash'])}</code>"
                     for s in data.suites)),
        ("bench runs", escape(", ".join(map(str, data.run_ids)))),
    ]
    result = data.comparison
    if result is not None:
        if result.comparison_id is not None:
            entries.insert(0, ("comparison", str(result.comparison_id)))
        stages = "<br>".join(f"{escape(s.stage)}: baseline {', '.join(map(str, s.baseline_run_ids)) or '–'}; "
                             f"speculative {', '.join(map(str, s.speculative_run_ids)) or '–'}"
                             for s in result.stages)
        entries.append(("runs by stage", stages))
        entries.append(("settings", escape(", ".join(f"{k}={v}" for k, v in _settings_items(result)))))
    entries += [("measured", escape(data.measured_at)), ("specgauge", escape(data.tool_version)),
                ("regenerate", f"<code>specgauge report {_report_ref(data)}</code>")]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in entries)
    return _section("provenance", "Provenance", f'<dl class="meta">{items}</dl>')


def _settings_items(result: "CompareResult") -> list[tuple[str, Any]]:
    return [(k, ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v)
            for k, v in result.settings.model_dump().items()]


def _report_ref(data: ReportData) -> str:
    if data.comparison is not None and data.comparison.comparison_id is not None:
        return f"c{data.comparison.comparison_id}"
    return str(data.run_ids[0]) if data.run_ids else ""


def html_document(data: ReportData, plots: Sequence[Plot]) -> str:
    """The whole report page as one string."""
    css = CSS % {"base": arm_colour(data.baseline or data.arms[0]),
                 "spec": arm_colour(data.speculative or data.arms[0])}
    suites = ", ".join(f"{s['name']}@{s['version']}" for s in data.suites)
    subtitle = f"suite {suites} · measured {data.measured_at} · specgauge {data.tool_version}"
    body = "".join([
        f"<header><h1>{escape(data.title)}</h1><p>{escape(subtitle)}</p></header>",
        _verdict_section(data), _summary_section(data), _recommendation_section(data),
        _warnings_section(data), _plots_section(plots), _arms_section(data), _definitions_section(),
        _provenance_section(data),
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(data.title)}</title><style>{css}</style></head>"
            f"<body><main>{body}</main><script>{SCRIPT}</script></body></html>\n")


def render_html(source: "ReportData | CompareResult", path: str | Path) -> Path:
    """Write the self-contained HTML report of ``source`` to ``path``; returns the path."""
    data = as_report_data(source)
    return _write(Path(path), html_document(data, build_plots(data)))


def _make_dir(path: Path) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {path}: {exc.strerror or exc}") from None
    return path


def _write(path: Path, text: str) -> Path:
    _make_dir(path.parent)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of ``outer_inner`` keys (``baseline_ttft_ms_p50``)."""
    if not isinstance(value, dict):
        return {prefix: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(_flatten(inner, f"{prefix}_{key}" if prefix else str(key)))
    return flat


def sweep_rows(data: ReportData) -> list[dict[str, Any]]:
    """The sweep as flat rows (one column per figure): the comparison's points, or the one run's."""
    if data.comparison is not None:
        return [_flatten(p.model_dump(mode="json"))
                for p in sorted(data.comparison.sweep, key=lambda p: p.concurrency)]
    return [_flatten({"concurrency": p.concurrency, "output_tokens_per_s": p.output_tokens_per_s,
                      "ttft_ms": p.ttft_ms, "tpot_ms": p.tpot_ms, "accept_length": p.accept_length,
                      "num_ok": p.num_ok, "num_errors": p.num_errors, "flagged": p.flagged,
                      "flag_reason": p.flag_reason})
            for p in data.arms[0].points]


def write_report(source: "ReportData | CompareResult", output_dir: str | Path, *,
                 html_path: str | Path | None = None, run_document: dict | None = None) -> ReportFiles:
    """Write the HTML report, ``plots/*.png``, the JSON and ``sweep.csv`` into ``output_dir``.

    The JSON is ``verdict.json`` (``CompareResult.model_dump(mode="json")``) for a comparison, and
    ``run.json`` (``run_document``, the bench JSON contract) for one bench run.
    """
    from specgauge.report.export import to_csv

    data = as_report_data(source)
    directory = Path(output_dir)
    plots = build_plots(data)
    html = _write(Path(html_path) if html_path else directory / "report.html", html_document(data, plots))
    plot_dir = _make_dir(directory / "plots")
    pngs = tuple(save_png(plot, plot_dir / f"{plot.name}.png") for plot in plots)
    if data.comparison is not None:
        document: Any = data.comparison.model_dump(mode="json")
        json_path = directory / "verdict.json"
    else:
        document = run_document if run_document is not None else {"run_ids": list(data.run_ids)}
        json_path = directory / "run.json"
    _write(json_path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    csv_path = _write(directory / "sweep.csv", to_csv(sweep_rows(data)))
    return ReportFiles(html=html, pngs=pngs, json=json_path, csv=csv_path)

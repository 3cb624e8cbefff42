"""The report of a stored tune (``specgauge report tN``): the heat map of depth × concurrency
(× context band) relative to each cell's best with the chosen schedule drawn on it, the
verification table beside it, the schedule, the settings and the measuring time — in the terminal
(rich), as JSON (the tune's document) and as one self-contained HTML page (docs/report.md)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

from rich.columns import Columns
from rich.console import Group
from rich.table import Table
from rich.text import Text

from specgauge.report.formatting import number
from specgauge.report.html import CSS, SCRIPT, SERVER_NAMES, _section, _setting_block, _table, _write
from specgauge.report.plots import BASELINE_COLOUR, SPECULATIVE_COLOUR
from specgauge.tune.choice import TOLERANCE, PairedRatio
from specgauge.tune.heatmap import HeatMap, HeatRow, heat_map, relative_colour
from specgauge.tune.stored import StoredTune, tune_document

TUNE_CSS = """
.tune-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 18px;
             align-items: start; }
.tune-grid > div { overflow-x: auto; min-width: 0; }
table.heatmap td.heat { text-align: center; min-width: 64px; color: #1f2328; }
table.heatmap td.heat.chosen { outline: 3px solid #1f2328; outline-offset: -3px; font-weight: 700; }
table.heatmap td.heat .interval { display: block; font-size: 11px; color: #3b434b; font-weight: 400; }
table.heatmap td.uncertain { color: var(--warn); font-weight: 600; }
.legend { font-size: 12px; color: var(--muted); }
.legend span.key { display: inline-block; width: 28px; height: 12px; vertical-align: -2px; margin: 0 4px; }
"""


def _band_name(band: tuple[int, int] | None) -> str:
    return "" if band is None else f"context {band[0]}–{band[1]} tokens"


def _range(row: HeatRow) -> str:
    if row.schedule_batch_sizes is None:
        return "–"
    lo, hi = row.schedule_batch_sizes
    return f"{lo}–{hi} → k={row.schedule_depth}" if lo != hi else f"{lo} → k={row.schedule_depth}"


def _ratio_text(ratio: PairedRatio | None) -> str:
    if ratio is None or not ratio.rounds:
        return "–"
    return f"{ratio.ratio:.2f}×" + ("" if ratio.rounds < 2 else f" [{ratio.lo:.2f}, {ratio.hi:.2f}]")


def schedule_sentence(stored: StoredTune) -> str:
    """The schedule in one line, as vLLM's entries."""
    schedule = stored.result.schedule
    form = "[bs_lo, bs_hi, ctx_lo, ctx_hi, K]" if schedule.context_axis else "[bs_lo, bs_hi, K]"
    if schedule.max_depth == 0:
        return f"Schedule {schedule.as_json_list()}: no depth beat no speculation beyond the noise — switch it off."
    return f"Schedule {form}: {schedule.as_json_list()}"


def verify_sentence(stored: StoredTune) -> str | None:
    """The worst ratio of the schedule to the per-level best, or None when nothing was verified."""
    worst = stored.result.worst_verify_ratio
    if worst is None:
        return None
    return (f"Verified: the worst ratio of the schedule to the per-level best (of {stored.result.best_fixed or '–'} "
            f"and k=0) is {_ratio_text(worst)}.")


def measuring_sentence(stored: StoredTune) -> str:
    result = stored.result
    saved = 1 - result.measure_seconds / result.full_grid_seconds if result.full_grid_seconds else 0.0
    return (f"Measured {result.measure_seconds:.0f} s ({len(result.points)} points) against about "
            f"{result.full_grid_seconds:.0f} s for the full grid ({saved:.0%} saved by measuring again only where "
            f"the choice was uncertain).")


# -- terminal ------------------------------------------------------------------------------------

def _heat_table(grid: HeatMap, band: tuple[int, int] | None) -> Table:
    title = "throughput relative to the cell's best ([ ] chosen, * best)"
    table = Table(title=title + (f" · {_band_name(band)}" if band else ""), title_justify="left")
    table.add_column("concurrency", justify="right")
    for depth in grid.depths:
        table.add_column(f"k={depth}", justify="center")
    table.add_column("schedule", justify="left")
    for row in grid.rows_of(band):
        cells = []
        by_depth = {c.depth: c for c in row.cells}
        for depth in grid.depths:
            cell = by_depth.get(depth)
            if cell is None or cell.relative is None:
                cells.append(Text("–"))
                continue
            text = f"{cell.relative:.2f}" + ("*" if cell.best else "")
            text = f"[{text}]" if cell.chosen else f" {text} "
            cells.append(Text(text, style=f"bold black on {_rich_colour(cell.relative)}" if cell.chosen
                              else f"black on {_rich_colour(cell.relative)}"))
        schedule = _range(row) + ("  UNCERTAIN" if row.uncertain else "")
        table.add_row(str(row.concurrency), *cells, Text(schedule, style="yellow" if row.uncertain else ""))
    return table


def _rich_colour(relative: float) -> str:
    """A terminal background for a relative throughput (the HTML's scale, in three steps)."""
    if relative >= 1 - TOLERANCE:
        return "green"
    if relative >= 0.8:
        return "yellow"
    return "red"


def _verify_table(stored: StoredTune) -> Table | None:
    result = stored.result
    if not result.verify:
        return None
    labels = list(result.verify[0].throughput)
    table = Table(title="verify: schedule / the better fixed arm", title_justify="left")
    table.add_column("concurrency", justify="right")
    for label in labels:
        table.add_column(f"{label} tok/s", justify="right")
    table.add_column("ratio [95% CI]", justify="right")
    for level in result.verify:
        ratio = level.ratio
        style = "" if ratio is None or not ratio.rounds else \
            "bold red" if ratio.hi < 1 - TOLERANCE else "bold green" if ratio.lo >= 1 - TOLERANCE else ""
        table.add_row(str(level.concurrency), *[number(level.throughput.get(label), ",.0f") for label in labels],
                      Text(f"{_ratio_text(ratio)} vs {level.best_other}", style=style))
    return table


def tune_renderable(stored: StoredTune) -> Group:
    """What ``specgauge report tN`` and ``show tN`` print: heat map(s) and the verification side by
    side, then the schedule, the verification's worst ratio, the measuring time, the settings."""
    grid = heat_map(stored.result)
    tables: list = [_heat_table(grid, band) for band in grid.bands]
    verify = _verify_table(stored)
    parts: list = [Columns([*tables, verify] if verify is not None else tables, padding=(0, 4))]
    parts.append(Text(schedule_sentence(stored), style="bold cyan"))
    if (said := verify_sentence(stored)) is not None:
        parts.append(Text(said, style="bold"))
    parts.append(Text(measuring_sentence(stored)))
    for setting in stored.settings:
        parts.append(Text(f"  {setting.server}: {setting.setting}"))
        if setting.config_file and setting.config_text:
            parts.append(Text(f"    {setting.config_file}: {setting.config_text}"))
    parts += [Text(f"note: {note}", style="yellow") for note in stored.result.notes]
    return Group(*parts)


# -- HTML ----------------------------------------------------------------------------------------

def _heat_html(grid: HeatMap, band: tuple[int, int] | None) -> str:
    rows = []
    for row in grid.rows_of(band):
        by_depth = {c.depth: c for c in row.cells}
        cells = [str(row.concurrency)]
        for depth in grid.depths:
            cell = by_depth.get(depth)
            if cell is None:
                cells.append('<td class="heat">–</td>')
                continue
            classes = "heat" + (" chosen" if cell.chosen else "") + (" best" if cell.best else "")
            shown = "–" if cell.relative is None else f"{cell.relative:.2f}" + ("*" if cell.best else "")
            interval = "" if cell.lo is None or f"{cell.lo:.2f}" == f"{cell.hi:.2f}" else \
                f'<span class="interval">[{cell.lo:.2f}, {cell.hi:.2f}]</span>'
            title = f"k={depth}: {number(cell.throughput, ',.0f')} tok/s" + \
                (f", TPOT {cell.tpot_ms:.1f} ms" if cell.tpot_ms else "")
            cells.append(f'<td class="{classes}" data-depth="{depth}" style="background:{relative_colour(cell.relative)}"'
                         f' title="{escape(title)}">{shown}{interval}</td>')
        why = escape(row.why) + (" — UNCERTAIN" if row.uncertain else "")
        cells.append(escape(_range(row)))
        cells.append(f'<td class="text{" uncertain" if row.uncertain else ""}">{why} ({row.rounds} rounds)</td>')
        rows.append(cells)
    headers = ["concurrency", *[f"k={d}" for d in grid.depths], "schedule", "why"]
    caption = f"<h3>{escape(_band_name(band))}</h3>" if band else ""
    return caption + _table(headers, rows, align="r" + "r" * len(grid.depths) + "ll", css_class="heatmap")


def _verify_html(stored: StoredTune) -> str:
    result = stored.result
    if not result.verify:
        notes = [n for n in result.notes if "verify" in n]
        return "<h3>Verification</h3>" + (f'<p class="note">{escape(notes[0])}</p>' if notes else
                                          '<p class="note">Not verified (--no-verify).</p>')
    labels = list(result.verify[0].throughput)
    rows = []
    for level in result.verify:
        ratio = level.ratio
        cls = "" if ratio is None or not ratio.rounds else \
            ' class="worse"' if ratio.hi < 1 - TOLERANCE else ' class="better"' if ratio.lo >= 1 - TOLERANCE else ""
        rows.append([str(level.concurrency), *[number(level.throughput.get(label), ",.0f") for label in labels],
                     f"<td{cls}>{escape(_ratio_text(ratio))} vs {escape(level.best_other)}</td>"])
    return ("<h3>Verification: the schedule beside the best fixed depth and no speculation (tok/s)</h3>"
            + _table(["concurrency", *[escape(label) for label in labels], "schedule / the better [95% CI]"], rows,
                     css_class="verify")
            + f'<p class="note">Green: the whole interval is at or above {1 - TOLERANCE:.2f}×; red: wholly below it.</p>')


def _legend() -> str:
    keys = "".join(f'<span class="key" style="background:{relative_colour(v)}"></span>{v:.2f}'
                   for v in (0.5, 0.75, 0.9, 1.0))
    return (f'<p class="legend">Each cell: the depth\'s throughput over the best depth of its row, paired by '
            f"round (geometric mean, 95% interval below it); * the best; outlined: the chosen depth (the smallest "
            f"whose interval reaches {1 - TOLERANCE:.2f}×), i.e. the schedule. {keys}</p>")


def tune_html_document(stored: StoredTune) -> str:
    """The whole tune report page as one string (self-contained, like the comparison's)."""
    plan, result = stored.plan, stored.result
    title = f"specgauge · tune {stored.tune_id} · depths {', '.join(str(d) for d in heat_map(result).depths)}"
    subtitle = (f"suite {plan.get('suite', '?')} · seed {plan.get('seed', '?')} · measured {stored.started_at} · "
                f"specgauge {plan.get('tool_version', '?')}")
    grid = heat_map(result)
    verdict = "".join(f"<p>{escape(line)}</p>" for line in
                      (schedule_sentence(stored), verify_sentence(stored)) if line)
    verdict += f'<p class="sub">{escape(measuring_sentence(stored))}</p>'
    heat = "".join(_heat_html(grid, band) for band in grid.bands)
    blocks = "".join(_setting_block(SERVER_NAMES.get(s.server, s.server), s.setting, s.note)
                     + (_setting_block(f"{SERVER_NAMES.get(s.server, s.server)}: {s.config_file}", s.config_text, "")
                        if s.config_file and s.config_text else "") for s in stored.settings)
    notes = "".join(f"<li>{escape(note)}</li>" for note in result.notes)
    points = sorted((*result.points, *result.verify_points), key=lambda p: p.run_id)
    runs = _table(["run", "arm", "concurrency", "round", "tok/s", "TPOT p50 (ms)", "seconds"],
                  ([str(p.run_id), escape(p.arm), str(p.concurrency), str(p.round + 1), number(p.throughput, ",.0f"),
                    number(p.tpot_ms, ",.1f"), number(p.seconds, ",.1f")] for p in points), align="rl", css_class="points")
    provenance = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in [
        ("tune", str(stored.tune_id)), ("arms", "<br>".join(escape(f"{a['label']}: {a['kind']} {a['value']}")
                                                            for a in plan.get("arms", ()))),
        ("concurrency", escape(", ".join(map(str, plan.get("concurrency", ()))))),
        ("rounds", escape(f"{plan.get('min_rounds')}–{plan.get('max_rounds')} (verify: {plan.get('verify_rounds')})")),
        ("rounds per concurrency", escape(", ".join(f"{c}: {n}" for c, n in result.rounds_by_cell.items()))),
        ("measured", escape(stored.started_at)),
        ("regenerate", f"<code>specgauge report t{stored.tune_id}</code>")])
    body = "".join([
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>",
        f'<section id="verdict" class="verdict">{verdict}</section>',
        _section("heatmap", "Depth × concurrency", f'<div class="tune-grid"><div>{heat}{_legend()}</div>'
                                                 f"<div>{_verify_html(stored)}</div></div>"),
        _section("settings", "Settings", f'<div class="settings">{blocks}</div>'),
        _section("notes", "Notes", f'<ul class="warnings">{notes}</ul>') if notes else "",
        _section("points", "Points (bench runs)", runs),
        _section("provenance", "Provenance", f'<dl class="meta">{provenance}</dl>'),
    ])
    css = CSS % {"base": BASELINE_COLOUR, "spec": SPECULATIVE_COLOUR} + TUNE_CSS
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{css}</style></head>"
            f"<body><main>{body}</main><script>{SCRIPT}</script></body></html>\n")


def tune_json(stored: StoredTune) -> dict:
    """The tune's JSON document (as ``tune --output-json`` wrote it), the heat map recomputed."""
    return tune_document(stored.tune_id, stored.result, stored.settings)


def write_tune_report(stored: StoredTune, output_dir: str | Path | None, html_path: str | Path | None
                      ) -> list[Path]:
    """``report.html`` and ``tune.json`` into ``output_dir`` (only the HTML at ``html_path`` when
    there is no ``output_dir``); returns what it wrote."""
    page = tune_html_document(stored)
    if output_dir is None:
        return [_write(Path(html_path), page)]
    directory = Path(output_dir)
    html = _write(Path(html_path) if html_path else directory / "report.html", page)
    document = _write(directory / "tune.json", json.dumps(tune_json(stored), indent=2, ensure_ascii=False) + "\n")
    return [html, document]

"""The report of a stored tune (``specgauge report tN``, ``show tN``): the heat map of depth ×
concurrency (× context band) relative to each cell's best with the chosen schedule drawn on it,
the verification table beside it, the schedule, the settings and the measuring time — in the
terminal (rich), as JSON and as one self-contained HTML page (docs/report.md).

It reads the tune's stored JSON document (``tune/stored.py`` writes it: the choices, the heat map
``tune/heatmap.py`` computed, the schedule, the settings, the verification), values in: the report
part sits below the tune part and never imports it.
"""

from __future__ import annotations

import colorsys
import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from rich.columns import Columns
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from specgauge.analysis.results import ServerSetting
from specgauge.errors import UserError
from specgauge.report.formatting import number
from specgauge.report.html import CSS, SCRIPT, SERVER_NAMES, _section, _setting_block, _table, _write
from specgauge.report.plots import BASELINE_COLOUR, SPECULATIVE_COLOUR

TUNE_CSS = """
.tune-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(460px, 1fr)); gap: 18px;
             align-items: start; }
.tune-grid > div { overflow-x: auto; min-width: 0; }
table.heatmap td.heat { text-align: center; min-width: 64px; color: #1f2328; }
table.heatmap td.heat.chosen { outline: 3px solid #1f2328; outline-offset: -3px; font-weight: 700; }
table.heatmap td.heat .interval { display: block; font-size: 11px; color: #3b434b; font-weight: 400; }
table.heatmap td.uncertain { color: var(--warn); font-weight: 600; }
table.verify .interval { display: block; font-size: 11px; color: var(--muted); font-weight: 400; }
.legend { font-size: 12px; color: var(--muted); }
.legend span.key { display: inline-block; width: 28px; height: 12px; vertical-align: -2px; margin: 0 4px; }
"""


@dataclass(frozen=True)
class TuneReport:
    """A finished tune as stored: its id, plan, start time and result document."""

    tune_id: int
    plan: dict
    started_at: str
    document: dict

    @property
    def settings(self) -> tuple[ServerSetting, ...]:
        return tuple(ServerSetting.model_validate(s) for s in self.document.get("settings") or ())

    @property
    def heat_map(self) -> dict:
        return self.document.get("heat_map") or {"depths": [], "bands": [None], "rows": [], "tolerance": 0.03}

    @property
    def line(self) -> float:
        """The tie line: 1 - the rule's tolerance."""
        return 1.0 - float(self.heat_map.get("tolerance", 0.03))


def load_tune_report(store, tune_id: int) -> TuneReport:
    """The tune ``tune_id`` from ``store``; one without a result (running, failed, interrupted) or
    written by another format is a one-line :class:`UserError`."""
    row = store.get_tune(tune_id)
    if row.result is None:
        why = f": {row.error}" if row.error else ""
        raise UserError(f"tune {tune_id} is {row.status} and has no result to report{why}")
    if not isinstance(row.result.get("heat_map"), dict) or "schedule" not in row.result:
        raise UserError(f"tune {tune_id}: its stored result does not match this specgauge's format; "
                        f"upgrade specgauge")
    return TuneReport(tune_id, row.plan, row.started_at, row.result)


def _band_name(band: Any) -> str:
    return "" if not band else f"context {band[0]}–{band[1]} tokens"


def _range(row: dict) -> str:
    sizes = row.get("schedule_batch_sizes")
    if not sizes:
        return "–"
    lo, hi = sizes
    return f"{lo}–{hi} → k={row['schedule_depth']}" if lo != hi else f"{lo} → k={row['schedule_depth']}"


def _ratio_text(ratio: dict | None) -> str:
    if not ratio or not ratio.get("rounds"):
        return "–"
    return f"{ratio['ratio']:.2f}×" + ("" if ratio["rounds"] < 2 else f" [{ratio['lo']:.2f}, {ratio['hi']:.2f}]")


def _rows_of(grid: dict, band: Any) -> list[dict]:
    return [row for row in grid.get("rows", ()) if row.get("band") == band]


def schedule_sentence(tune: TuneReport) -> str:
    """The schedule in one line, as vLLM's entries."""
    schedule = tune.document["schedule"]
    form = "[bs_lo, bs_hi, ctx_lo, ctx_hi, K]" if schedule.get("context_axis") else "[bs_lo, bs_hi, K]"
    if schedule.get("max_depth") == 0:
        return f"Schedule {schedule['entries']}: no depth beat no speculation beyond the noise — switch it off."
    return f"Schedule {form}: {schedule['entries']}"


def verify_sentence(tune: TuneReport) -> str | None:
    """The worst ratio of the schedule to the per-level best, or None when nothing was verified."""
    worst = tune.document.get("worst_verify_ratio")
    if not worst:
        return None
    return (f"Verification: the worst ratio of the schedule to the per-level best (of "
            f"{tune.document.get('best_fixed') or '–'} and k=0) is {_ratio_text(worst)}.")


def measuring_sentence(tune: TuneReport) -> str:
    """The measuring time against the full grid."""
    measured, full = tune.document.get("measure_seconds") or 0.0, tune.document.get("full_grid_seconds") or 0.0
    saved = 1 - measured / full if full else 0.0
    return (f"Measured {measured:.0f} s ({len(tune.document.get('points') or ())} points) against about {full:.0f} s "
            f"for the full grid ({saved:.0%} saved by measuring again only where the choice was uncertain).")


def _verify_style(ratio: dict | None, line: float) -> str:
    """``better`` when the schedule's whole interval is at or above the tie line, ``worse`` when wholly below."""
    if not ratio or not ratio.get("rounds"):
        return ""
    return "worse" if ratio["hi"] < line else "better" if ratio["lo"] >= line else ""


# -- the heat scale (the HTML page and the terminal), then the terminal ---------------------------

def _hsl(relative: float) -> tuple[int, int, int]:
    """The heat scale (hue, saturation %, lightness %): green at the best, through yellow, to red at
    half the best or less — one scale for the HTML page and the terminal."""
    share = min(max((relative - 0.5) / 0.5, 0.0), 1.0)
    return round(120 * share ** 2), 65, round(88 - 12 * share)


def relative_colour(relative: float | None) -> str:
    """A cell's CSS background on the heat scale (``_hsl``); grey where the depth was not measured
    beside the best."""
    if relative is None:
        return "#eaeef2"
    hue, saturation, lightness = _hsl(relative)
    return f"hsl({hue}, {saturation}%, {lightness}%)"


def terminal_colour(relative: float | None) -> str:
    """The same scale as a rich colour (``rgb(r,g,b)``; rich maps it down to what the terminal
    shows); grey where the depth was not measured beside the best."""
    if relative is None:
        return "rgb(234,238,242)"
    hue, saturation, lightness = _hsl(relative)
    red, green, blue = colorsys.hls_to_rgb(hue / 360, lightness / 100, saturation / 100)
    return f"rgb({round(red * 255)},{round(green * 255)},{round(blue * 255)})"


def _level_name(concurrency: int, band: Any) -> str:
    """``16``, or with a context band ``16@1-128`` (as the tune's plain text names a cell)."""
    return str(concurrency) if not band else f"{concurrency}@{band[0]}-{band[1]}"


def _heat_cell(cell: dict | None) -> Text:
    """One depth in one row: the ratio to the row's best (``[ ]`` chosen, ``*`` best) on the heat
    scale, its 95% interval and its tok/s and TPOT below it."""
    if cell is None:
        return Text("–")
    relative = cell["relative"]
    shown = "–" if relative is None else f"{relative:.2f}" + ("*" if cell["best"] else "")
    style = f"black on {terminal_colour(relative)}"
    text = Text(f"[{shown}]" if cell["chosen"] else f" {shown} ", style=style + (" bold" if cell["chosen"] else ""))
    lo, hi = cell["lo"], cell["hi"]
    if lo is not None and f"{lo:.2f}" != f"{hi:.2f}":
        text.append(f"\n{lo:.2f}–{hi:.2f}", style=style)
    text.append(f"\n{number(cell['throughput'], ',.0f')} tok/s"
                + (f"\n{cell['tpot_ms']:.0f} ms" if cell.get("tpot_ms") else ""), style="dim")
    return text


def _heat_table(tune: TuneReport, band: Any) -> Table:
    """One band's heat map: a row per concurrency, a column per depth; a rule between rows that fall
    in different schedule ranges, so the ranges show on the grid."""
    grid = tune.heat_map
    title = "throughput relative to the cell's best ([ ] chosen, * best)"
    table = Table(title=title + (f" · {_band_name(band)}" if band else ""), title_justify="left")
    table.add_column("concurrency", justify="right")
    for depth in grid["depths"]:
        table.add_column(f"k={depth}", justify="center")
    table.add_column("schedule", justify="left")
    table.add_column("choice", justify="left", max_width=40)
    rows = _rows_of(grid, band)
    for index, row in enumerate(rows):
        by_depth = {c["depth"]: c for c in row["cells"]}
        first_of_range = index == 0 or rows[index - 1].get("schedule_batch_sizes") != row.get("schedule_batch_sizes")
        last_of_range = index + 1 == len(rows) or \
            rows[index + 1].get("schedule_batch_sizes") != row.get("schedule_batch_sizes")
        schedule = Text(_range(row), style="bold cyan" if first_of_range else "dim cyan")
        choice = Text(f"k={row['chosen']} · {row['rounds']} rounds" + (" · UNCERTAIN" if row["uncertain"] else ""),
                      style="bold yellow" if row["uncertain"] else "bold")
        choice.append(f"\n{row['why']}", style="yellow" if row["uncertain"] else "dim")
        table.add_row(str(row["concurrency"]), *[_heat_cell(by_depth.get(depth)) for depth in grid["depths"]],
                      schedule, choice, end_section=last_of_range and index + 1 < len(rows))
    return table


def _terminal_legend(tune: TuneReport) -> Text:
    """The heat scale's key and the rule."""
    legend = Text("colour: ratio to the row's best ", style="dim")
    for value in (0.5, 0.6, 0.7, 0.8, 0.9, tune.line, 1.0):
        legend.append(f" {value:.2f} ", style=f"black on {terminal_colour(value)}")
    legend.append(f"\nrule: the smallest depth whose interval reaches {tune.line:.2f}x of the best; "
                  f"a rule between rows: a new schedule range", style="dim")
    return legend


def _verify_table(tune: TuneReport) -> Table | None:
    levels = tune.document.get("verify") or []
    if not levels:
        return None
    labels = list(levels[0]["throughput"])
    table = Table(title="verify: tok/s; schedule / the better fixed arm", title_justify="left")
    table.add_column("concurrency", justify="right")
    for label in labels:
        table.add_column(label, justify="right")
    table.add_column("ratio [95% CI]", justify="right")
    styles = {"better": "bold green", "worse": "bold red", "": ""}
    for level in levels:
        ratio = level.get("ratio")
        table.add_row(_level_name(level["concurrency"], level.get("band")),
                      *[number(level["throughput"].get(label), ",.0f") for label in labels],
                      Text(f"{_ratio_text(ratio)} vs {level['best_other']}",
                           style=styles[_verify_style(ratio, tune.line)]))
    return table


def tune_renderable(tune: TuneReport) -> Group:
    """The tune's tables and verdict: the heat map(s) with the schedule drawn on them, its key, the
    verification table beside them, then the schedule, the verification's worst ratio and the
    measuring time (``print_tune`` adds the settings and notes)."""
    tables: list = [_heat_table(tune, band) for band in tune.heat_map["bands"]]
    verify = _verify_table(tune)
    parts: list = [Columns([*tables, verify] if verify is not None else tables, padding=(0, 4)),
                   _terminal_legend(tune), Text(schedule_sentence(tune), style="bold cyan")]
    if (said := verify_sentence(tune)) is not None:
        parts.append(Text(said, style="bold"))
    parts.append(Text(measuring_sentence(tune)))
    return Group(*parts)


def print_tune(console: Console, tune: TuneReport) -> None:
    """What ``specgauge tune`` prints on a colour terminal, and ``specgauge report tN`` and ``show tN``
    print: ``tune_renderable``, then every server's settings and the notes. A setting is printed
    unwrapped (the terminal folds it), so a command copied from the screen stays one line."""
    console.print(tune_renderable(tune))
    for setting in tune.settings:
        console.print(Text(f"  {setting.server}: {setting.setting}"), soft_wrap=True)
        if setting.config_file and setting.config_text:
            console.print(Text(f"    {setting.config_file}: {setting.config_text}"), soft_wrap=True)
        if setting.note:
            console.print(Text(f"    ({setting.note})", style="dim"))
    for note in tune.document.get("notes") or ():
        console.print(Text(f"note: {note}", style="yellow"))


# -- HTML ----------------------------------------------------------------------------------------

def _heat_html(tune: TuneReport, band: Any) -> str:
    grid = tune.heat_map
    rows = []
    for row in _rows_of(grid, band):
        by_depth = {c["depth"]: c for c in row["cells"]}
        cells = [str(row["concurrency"])]
        for depth in grid["depths"]:
            cell = by_depth.get(depth)
            if cell is None:
                cells.append('<td class="heat">–</td>')
                continue
            classes = "heat" + (" chosen" if cell["chosen"] else "") + (" best" if cell["best"] else "")
            relative, lo, hi = cell["relative"], cell["lo"], cell["hi"]
            shown = "–" if relative is None else f"{relative:.2f}" + ("*" if cell["best"] else "")
            interval = "" if lo is None or f"{lo:.2f}" == f"{hi:.2f}" else \
                f'<span class="interval">[{lo:.2f}, {hi:.2f}]</span>'
            title = f"k={depth}: {number(cell['throughput'], ',.0f')} tok/s" + \
                (f", TPOT {cell['tpot_ms']:.1f} ms" if cell.get("tpot_ms") else "")
            cells.append(f'<td class="{classes}" data-depth="{depth}" style="background:{relative_colour(relative)}"'
                         f' title="{escape(title)}">{shown}{interval}</td>')
        cells.append(escape(_range(row)))
        why = escape(row["why"]) + (" — UNCERTAIN" if row["uncertain"] else "")
        cells.append(f'<td class="text{" uncertain" if row["uncertain"] else ""}">{why} ({row["rounds"]} rounds)</td>')
        rows.append(cells)
    headers = ["concurrency", *[f"k={d}" for d in grid["depths"]], "schedule", "why"]
    caption = f"<h3>{escape(_band_name(band))}</h3>" if band else ""
    return caption + _table(headers, rows, align="r" * (len(grid["depths"]) + 1) + "ll", css_class="heatmap")


def _verify_html(tune: TuneReport) -> str:
    levels = tune.document.get("verify") or []
    if not levels:
        notes = [n for n in tune.document.get("notes") or () if "verify" in n]
        return "<h3>Verification</h3>" + (f'<p class="note">{escape(notes[0])}</p>' if notes else
                                          '<p class="note">Not verified (--no-verify).</p>')
    labels = list(levels[0]["throughput"])
    rows = []
    for level in levels:
        ratio = level.get("ratio")
        style = _verify_style(ratio, tune.line)
        rows.append([str(level["concurrency"]), *[number(level["throughput"].get(label), ",.0f") for label in labels],
                     f'<td{f" class={chr(34)}{style}{chr(34)}" if style else ""}>{escape(_ratio_text(ratio))}'
                     f'<span class="interval">vs {escape(level["best_other"])}</span></td>'])
    return ("<h3>Verification: the schedule beside the best fixed depth and no speculation (tok/s)</h3>"
            + _table(["concurrency", *[escape(label) for label in labels], "schedule / better [95% CI]"], rows,
                     css_class="verify")
            + f'<p class="note">Green: the whole interval is at or above {tune.line:.2f}×; red: wholly below it.</p>')


def _legend(tune: TuneReport) -> str:
    keys = "".join(f'<span class="key" style="background:{relative_colour(v)}"></span>{v:.2f}'
                   for v in (0.5, 0.75, 0.9, 1.0))
    return (f'<p class="legend">Each cell: the depth\'s throughput over the best depth of its row, paired by '
            f"round (geometric mean, 95% interval below it); * the best; outlined: the chosen depth (the smallest "
            f"whose interval reaches {tune.line:.2f}×), i.e. the schedule. {keys}</p>")


def _provenance(tune: TuneReport) -> str:
    plan = tune.plan
    rounds_by_cell = tune.document.get("rounds_by_cell") or {}
    items = [
        ("tune", str(tune.tune_id)),
        ("arms", "<br>".join(escape(f"{a.get('label')}: {a.get('kind')} {a.get('value')}")
                             for a in plan.get("arms") or ())),
        ("concurrency", escape(", ".join(map(str, plan.get("concurrency") or ())))),
        ("rounds", escape(f"{plan.get('min_rounds')}–{plan.get('max_rounds')} (verify: {plan.get('verify_rounds')})")),
        ("rounds per concurrency", escape(", ".join(f"{c}: {n}" for c, n in rounds_by_cell.items()))),
        ("measured", escape(tune.started_at)),
        ("regenerate", f"<code>specgauge report t{tune.tune_id}</code>"),
    ]
    return "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items)


def tune_html_document(tune: TuneReport) -> str:
    """The whole tune report page as one string (self-contained, like the comparison's)."""
    plan, document = tune.plan, tune.document
    title = f"specgauge · tune {tune.tune_id} · depths {', '.join(str(d) for d in tune.heat_map['depths'])}"
    subtitle = (f"suite {plan.get('suite', '?')} · seed {plan.get('seed', '?')} · measured {tune.started_at} · "
                f"specgauge {plan.get('tool_version', '?')}")
    verdict = "".join(f"<p>{escape(line)}</p>" for line in (schedule_sentence(tune), verify_sentence(tune)) if line)
    verdict += f'<p class="sub">{escape(measuring_sentence(tune))}</p>'
    heat = "".join(_heat_html(tune, band) for band in tune.heat_map["bands"])
    blocks = "".join(_setting_block(SERVER_NAMES.get(s.server, s.server), s.setting, s.note)
                     + (_setting_block(f"{SERVER_NAMES.get(s.server, s.server)}: {s.config_file}", s.config_text, "")
                        if s.config_file and s.config_text else "") for s in tune.settings)
    notes = "".join(f"<li>{escape(note)}</li>" for note in document.get("notes") or ())
    points = sorted([*(document.get("points") or ()), *(document.get("verify_points") or ())],
                    key=lambda p: p["run_id"])
    runs = _table(["run", "arm", "concurrency", "round", "tok/s", "TPOT p50 (ms)", "seconds"],
                  ([str(p["run_id"]), escape(p["arm"]), str(p["concurrency"]), str(p["round"] + 1),
                    number(p.get("throughput"), ",.0f"), number(p.get("tpot_ms"), ",.1f"),
                    number(p.get("seconds"), ",.1f")] for p in points), align="rl", css_class="points")
    body = "".join([
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>",
        f'<section id="verdict" class="verdict">{verdict}</section>',
        _section("heatmap", "Depth × concurrency", f'<div class="tune-grid"><div>{heat}{_legend(tune)}</div>'
                                                 f"<div>{_verify_html(tune)}</div></div>"),
        _section("settings", "Settings", f'<div class="settings">{blocks}</div>'),
        _section("notes", "Notes", f'<ul class="warnings">{notes}</ul>') if notes else "",
        _section("points", "Points (bench runs)", runs),
        _section("provenance", "Provenance", f'<dl class="meta">{_provenance(tune)}</dl>'),
    ])
    css = CSS % {"base": BASELINE_COLOUR, "spec": SPECULATIVE_COLOUR} + TUNE_CSS
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{css}</style></head>"
            f"<body><main>{body}</main><script>{SCRIPT}</script></body></html>\n")


def write_tune_report(tune: TuneReport, output_dir: str | Path | None, html_path: str | Path | None) -> list[Path]:
    """``report.html`` and ``tune.json`` (the stored document) into ``output_dir``; only the HTML at
    ``html_path`` when there is no ``output_dir``. Returns what it wrote."""
    page = tune_html_document(tune)
    if output_dir is None:
        return [_write(Path(html_path), page)]
    directory = Path(output_dir)
    html = _write(Path(html_path) if html_path else directory / "report.html", page)
    document = _write(directory / "tune.json", json.dumps(tune.document, indent=2, ensure_ascii=False) + "\n")
    return [html, document]

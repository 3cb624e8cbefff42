"""A tune's result in the terminal (a coloured heat map, or plain text where colour is not shown)
and as a JSON document."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from rich.console import Console

from specgauge.analysis.results import ServerSetting
from specgauge.report.terminal import shows_colour
from specgauge.report.tune_report import TuneReport, print_tune
from specgauge.tune.choice import TOLERANCE, PairedRatio
from specgauge.tune.run import TuneResult


def _ratio(r: PairedRatio | None) -> str:
    if r is None or not r.rounds:
        return "-"
    return f"{r.ratio:.2f}x" if r.rounds < 2 else f"{r.ratio:.2f}x [{r.lo:.2f}, {r.hi:.2f}]"


def _cell(concurrency: int, band: tuple[int, int] | None) -> str:
    """``16`` or, with a context band, ``16@1-128`` (concurrency @ prompt tokens)."""
    return str(concurrency) if band is None else f"{concurrency}@{band[0]}-{band[1]}"


def render_text(result: TuneResult, settings: tuple[ServerSetting, ...]) -> str:
    """The depth × concurrency table (ratio to the cell's best; * the chosen depth), the schedule,
    the settings, the measurement time and the verification."""
    lines = []
    depths = sorted({d.depth for c in result.choices for d in c.depths})
    first = "concurrency" if not result.band_suites else "conc@tokens"
    header = f"{first:>11}  " + "  ".join(f"{'k=' + str(d):>28}" for d in depths) + "  choice"
    lines += ["per depth: tok/s, ratio to the cell's best [95% interval], median TPOT (* chosen):", header]
    for choice in result.choices:
        cells = []
        for depth in depths:
            found = next((d for d in choice.depths if d.depth == depth), None)
            text = "-" if found is None else f"{found.throughput:.0f} {_ratio(found.to_best)}" + \
                (f" {found.tpot_ms:.0f}ms" if found.tpot_ms else "")
            cells.append(f"{text + (' *' if depth == choice.chosen else ''):>28}")
        lines.append(f"{_cell(choice.cell.concurrency, choice.cell.band):>11}  " + "  ".join(cells)
                     + f"  k={choice.chosen} ({choice.rounds} rounds; {choice.why}"
                     + ("; UNCERTAIN" if choice.uncertain else "") + ")")
    lines.append(f"rule: the smallest depth whose interval reaches {1 - TOLERANCE:.2f}x of the best")
    lines.append(f"schedule: {result.schedule.as_json_list()}")
    lines.append(f"measured {result.measure_seconds:.0f} s ({len(result.points)} points) against about "
                 f"{result.full_grid_seconds:.0f} s for the full grid; rounds per concurrency: "
                 + ", ".join(f"{c}: {n}" for c, n in result.rounds_by_cell.items()))
    lines.append("settings:")
    for setting in settings:
        lines.append(f"  {setting.server}: {setting.setting}")
        if setting.config_text:
            lines.append(f"    {setting.config_file}: {setting.config_text}")
        lines.append(f"    ({setting.note})")
    if result.verify:
        lines.append(f"verify: the schedule beside {result.best_fixed or 'no fixed depth'} and k=0, "
                     f"schedule / the better of them per level:")
        for level in result.verify:
            figures = ", ".join(f"{label} {value:.0f}" for label, value in level.throughput.items())
            lines.append(f"  c={_cell(level.concurrency, level.band)}: {figures} tok/s; "
                         f"schedule / {level.best_other} = {_ratio(level.ratio)}")
        worst = result.worst_verify_ratio
        if worst is not None:
            lines.append(f"worst ratio of the schedule to the per-level best: {_ratio(worst)}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def print_result(console: Console, result: TuneResult, settings: tuple[ServerSetting, ...], stored: TuneReport,
                 tail: Sequence[str]) -> None:
    """The tune's terminal output, then the ``tail`` lines. On a terminal that shows colour, the
    heat map ``specgauge report tN`` prints (``report.tune_report.print_tune`` of the ``stored``
    tune); in a pipe, a file, or with ``NO_COLOR`` set, ``render_text``'s plain text."""
    if shows_colour(console):
        print_tune(console, stored)
        for line in tail:
            console.print(line, soft_wrap=True, markup=False, highlight=False)
    else:
        console.file.write("\n".join([render_text(result, settings), *tail]) + "\n")
        console.file.flush()


def result_document(result: TuneResult, settings: tuple[ServerSetting, ...]) -> dict:
    """The JSON document of ``--output-json``."""
    document = dataclasses.asdict(result)
    document["schedule"] = {"entries": result.schedule.as_json_list(), "context_axis": result.schedule.context_axis,
                            "max_depth": result.schedule.max_depth}
    worst = result.worst_verify_ratio
    document["worst_verify_ratio"] = dataclasses.asdict(worst) if worst else None
    document["settings"] = [s.model_dump(mode="json") for s in settings]
    document["rounds_by_cell"] = {str(k): v for k, v in result.rounds_by_cell.items()}
    return document

"""The heat map of a tune: depth × concurrency (× context band when one was measured), each cell the
throughput of a depth relative to the best depth of its cell (the paired ratio ``to_best`` of the
choice rule, with its interval), the chosen depth marked, and the schedule range that covers the
cell — the schedule drawn on the grid. Pure: the terminal, the JSON and the HTML report read it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from specgauge.tune.choice import TOLERANCE, CellChoice, TunedSchedule
from specgauge.tune.run import TuneResult


@dataclass(frozen=True)
class HeatCell:
    """One depth in one grid cell: its throughput relative to the cell's best, [lo, hi] its 95%
    interval (equal to it with one round; None when the depth never ran beside the best)."""

    depth: int
    relative: float | None
    lo: float | None
    hi: float | None
    throughput: float
    tpot_ms: float | None
    ties: bool
    best: bool
    chosen: bool


@dataclass(frozen=True)
class HeatRow:
    """One concurrency level (in one context band): its cells by depth and the schedule there."""

    concurrency: int
    band: tuple[int, int] | None
    cells: tuple[HeatCell, ...]
    chosen: int
    best: int
    rounds: int
    uncertain: bool
    why: str
    schedule_batch_sizes: tuple[int, int] | None   # the schedule range holding this level
    schedule_depth: int | None                     # the K the schedule gives it


@dataclass(frozen=True)
class HeatMap:
    """The grid: ``depths`` are the columns; ``bands`` the context bands ([None] without a context axis);
    ``rows`` by band, then concurrency."""

    depths: tuple[int, ...]
    bands: tuple[tuple[int, int] | None, ...]
    rows: tuple[HeatRow, ...]
    tolerance: float = TOLERANCE   # a depth whose interval reaches 1 - tolerance ties the best


def schedule_entry_at(schedule: TunedSchedule, concurrency: int, band: tuple[int, int] | None
                      ) -> tuple[int, ...] | None:
    """The schedule entry whose batch-size range (and context range) holds this cell."""
    for entry in schedule.entries:
        if not entry[0] <= concurrency <= entry[1]:
            continue
        if schedule.context_axis and band is not None and not entry[2] <= band[0] <= entry[3]:
            continue
        return entry
    return None


def _row(choice: CellChoice, depths: list[int], schedule: TunedSchedule) -> HeatRow:
    by_depth = {d.depth: d for d in choice.depths}
    cells = []
    for depth in depths:
        found = by_depth.get(depth)
        if found is None:
            continue
        measured = found.to_best.rounds > 0
        cells.append(HeatCell(depth, found.to_best.ratio if measured else None, found.to_best.lo if measured else None,
                              found.to_best.hi if measured else None, found.throughput, found.tpot_ms, found.ties,
                              depth == choice.best, depth == choice.chosen))
    band = tuple(choice.cell.band) if choice.cell.band is not None else None
    entry = schedule_entry_at(schedule, choice.cell.concurrency, band)
    return HeatRow(choice.cell.concurrency, band, tuple(cells), choice.chosen, choice.best, choice.rounds,
                   choice.uncertain, choice.why, (entry[0], entry[1]) if entry else None,
                   entry[-1] if entry else None)


def heat_map(result: TuneResult) -> HeatMap:
    """The heat map of ``result`` (module docstring)."""
    depths = sorted({d.depth for c in result.choices for d in c.depths})
    bands = sorted({tuple(c.cell.band) for c in result.choices if c.cell.band is not None})
    ordered = sorted(result.choices, key=lambda c: (tuple(c.cell.band) if c.cell.band else (0, 0),
                                                    c.cell.concurrency))
    rows = tuple(_row(choice, depths, result.schedule) for choice in ordered)
    return HeatMap(tuple(depths), tuple(bands) if bands else (None,), rows)


def heat_map_document(result: TuneResult) -> dict:
    """The heat map as JSON (``heat_map`` in the tune's document)."""
    return dataclasses.asdict(heat_map(result))


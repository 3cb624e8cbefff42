"""The choice rule (docs/tune.md), pure functions over measurements.

Per cell (a concurrency level, with ``--context-lengths`` also a context band) every candidate
depth was measured in the same rounds (same prompts and seeds, depths interleaved), so each
round gives a *paired* ratio of a depth's aggregate throughput to another's. A depth's ratio to
the cell's best depth is the geometric mean of its per-round ratios, with a 95% Student-t
interval over rounds (on the logs).

* The **best** depth has the highest throughput (geometric mean over rounds; an exact tie goes
  to the smaller depth).
* A depth **ties** the best when its interval reaches the line ``1 - TOLERANCE``: the data
  cannot show that it loses more than ``TOLERANCE`` (3%). The **chosen** depth is the smallest
  that ties: within the noise, less drafting is less risk and less draft compute.
* A cell is **uncertain** while fewer than two rounds are in (no interval), or while a depth
  smaller than the best has an interval that straddles the line: more rounds could move the
  choice, so ``tune`` measures such cells again (and only them).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Mapping, Sequence

TOLERANCE = 0.03  # a depth that cannot be shown to lose more than this to the best ties it
# two-sided 95% Student-t quantiles by degrees of freedom (rounds - 1); beyond the table, the normal's
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def t_quantile(dof: int) -> float:
    """The 97.5% Student-t quantile for ``dof`` degrees of freedom (the table's nearest lower entry)."""
    if dof <= 0:
        return math.inf
    if dof > 30:
        return 1.96
    return T_975[max(d for d in T_975 if d <= dof)]


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a concurrency level and, when a context axis was measured, the
    prompt-length band ``(lo, hi)`` in tokens."""

    concurrency: int
    band: tuple[int, int] | None = None


@dataclass(frozen=True)
class CellMeasurements:
    """Aggregate throughput (tok/s) per depth per round: ``throughput[d][i]`` is round i of depth d
    (None where that round's point failed); every depth ran in the same rounds."""

    cell: Cell
    throughput: Mapping[int, Sequence[float | None]]
    tpot_ms: Mapping[int, Sequence[float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class PairedRatio:
    """A depth's throughput over another's: geometric mean of per-round ratios and its 95% interval
    (``lo``/``hi`` equal the ratio with one round: no interval)."""

    ratio: float
    lo: float
    hi: float
    rounds: int


@dataclass(frozen=True)
class DepthResult:
    """One depth in one cell: its throughput, its ratio to the cell's best, whether it ties."""

    depth: int
    throughput: float
    to_best: PairedRatio
    ties: bool
    tpot_ms: float | None = None


@dataclass(frozen=True)
class CellChoice:
    """The rule applied to one cell."""

    cell: Cell
    best: int
    chosen: int
    depths: tuple[DepthResult, ...]
    rounds: int
    uncertain: bool
    why: str


def paired_ratio(numerator: Sequence[float | None], denominator: Sequence[float | None]) -> PairedRatio | None:
    """Geometric mean of ``numerator[i] / denominator[i]`` over the rounds where both were measured,
    with a 95% Student-t interval on the logs (None when no round has both)."""
    logs = [math.log(n / d) for n, d in zip(numerator, denominator) if n and d and n > 0 and d > 0]
    if not logs:
        return None
    centre = statistics.fmean(logs)
    if len(logs) < 2:
        return PairedRatio(math.exp(centre), math.exp(centre), math.exp(centre), 1)
    half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return PairedRatio(math.exp(centre), math.exp(centre - half), math.exp(centre + half), len(logs))


def _geometric_mean(values: Sequence[float | None]) -> float:
    good = [v for v in values if v and v > 0]
    return math.exp(statistics.fmean(math.log(v) for v in good)) if good else 0.0


def choose_cell(measured: CellMeasurements, tolerance: float = TOLERANCE) -> CellChoice:
    """The chosen depth of one cell (module docstring): the smallest depth that ties the best."""
    means = {d: _geometric_mean(v) for d, v in measured.throughput.items()}
    if not means or max(means.values()) <= 0:
        raise ValueError(f"no throughput measured at concurrency {measured.cell.concurrency}")
    best = max(sorted(means), key=lambda d: (means[d], -d))
    line = 1.0 - tolerance
    results = []
    for depth in sorted(means):
        ratio = paired_ratio(measured.throughput[depth], measured.throughput[best])
        if ratio is None:  # never measured beside the best in one round: not a candidate here
            ratio = PairedRatio(0.0, 0.0, 0.0, 0)
        tpot = _geometric_mean(measured.tpot_ms.get(depth, ())) or None
        results.append(DepthResult(depth, means[depth], ratio, depth == best or ratio.hi >= line, tpot))
    chosen = min(r.depth for r in results if r.ties)
    rounds = min(r.to_best.rounds for r in results if r.depth == best)
    straddling = [r.depth for r in results
                  if r.depth < best and r.to_best.rounds and r.to_best.lo < line <= r.to_best.hi]
    if rounds < 2:
        uncertain, why = True, "one round: no interval yet"
    elif straddling:
        uncertain, why = True, (f"depth {', '.join(map(str, straddling))} vs best {best}: the interval straddles "
                                f"{line:.2f}x")
    else:
        uncertain, why = False, (f"depth {chosen} ties the best ({best}) within {tolerance:.0%}" if chosen != best
                                 else "no speculation is best" if best == 0 else
                                 f"depth {best} is best; every smaller depth loses more than {tolerance:.0%}")
    return CellChoice(measured.cell, best, chosen, tuple(results), rounds, uncertain, why)


@dataclass(frozen=True)
class TunedSchedule:
    """The schedule in vLLM's form: ``entries`` are ``(bs_lo, bs_hi, K)`` or, with a context axis,
    ``(bs_lo, bs_hi, ctx_lo, ctx_hi, K)``; ``max_depth`` is the largest K (vLLM's
    ``num_speculative_tokens``)."""

    entries: tuple[tuple[int, ...], ...]
    context_axis: bool

    @property
    def max_depth(self) -> int:
        return max(entry[-1] for entry in self.entries)

    def as_json_list(self) -> list[list[int]]:
        return [list(entry) for entry in self.entries]


def build_schedule(choices: Sequence[CellChoice], max_batch_size: int = 256) -> TunedSchedule:
    """The fewest entries that give every measured cell its chosen depth.

    Batch sizes between two measured levels take the larger level's depth (the depth that pays
    falls as the batch grows, so this never drafts more than measured to pay); the last range
    reaches ``max_batch_size`` (past it vLLM's tail inherits it anyway). Context lengths between
    two measured bands take the shorter band's depth (longer contexts keep speculation paying),
    the first band starting at 1, the last reaching to any length. Neighbouring ranges with the
    same depths are merged — for a grid, rows and columns whole, so it stays rectangular as
    vLLM requires."""
    if not choices:
        raise ValueError("no cells to build a schedule from")
    levels = sorted({c.cell.concurrency for c in choices})
    bands = sorted({c.cell.band for c in choices if c.cell.band is not None})
    context_axis = bool(bands)
    if context_axis and any(c.cell.band is None for c in choices):
        raise ValueError("either every cell has a context band or none")
    chosen = {(c.cell.concurrency, c.cell.band): c.chosen for c in choices}
    columns = bands if context_axis else [None]
    missing = [(lvl, b) for lvl in levels for b in columns if (lvl, b) not in chosen]
    if missing:
        raise ValueError(f"the grid is incomplete: no choice for {missing[0]}")
    bs_ranges = []
    previous = 0
    for i, level in enumerate(levels):
        hi = max(level, max_batch_size) if i == len(levels) - 1 else level
        bs_ranges.append([previous + 1, hi, [chosen[(level, b)] for b in columns]])
        previous = level
    rows = _merge(bs_ranges)
    if not context_axis:
        return TunedSchedule(tuple((lo, hi, ks[0]) for lo, hi, ks in rows), False)
    ctx_ranges = [[1 if j == 0 else band[0], bands[j + 1][0] - 1 if j + 1 < len(bands) else max(band[1], band[0]),
                   [ks[j] for _, _, ks in rows]] for j, band in enumerate(bands)]
    cols = _merge(ctx_ranges)
    entries = tuple((bs_lo, bs_hi, ctx_lo, ctx_hi, col_ks[r])
                    for r, (bs_lo, bs_hi, _) in enumerate(rows) for ctx_lo, ctx_hi, col_ks in cols)
    return TunedSchedule(entries, True)


def _merge(ranges: list[list]) -> list[list]:
    """Adjacent ``[lo, hi, value]`` with equal values merged into one ``[lo, hi', value]``."""
    merged: list[list] = []
    for lo, hi, value in ranges:
        if merged and merged[-1][2] == value:
            merged[-1][1] = hi
        else:
            merged.append([lo, hi, value])
    return merged


"""Which speculative arm pays: the paired differences between the arms of a comparison of several,
and the method chosen per single-stream domain and sweep concurrency.

Every arm ran the same prompts in the same rounds (request index and prompt, as the two-arm
pairing), so arm A's throughput over arm B's is read on the pairs of requests both sent, with the
bootstrap over those pairs that the speedups use (:func:`specgauge.compare.collect.paired_point`);
each pair of arms has its own seeded draws, so the arms' own figures stay as their two-arm
comparison would give them. A difference is claimed only where its interval excludes 1.
"""

from __future__ import annotations

from itertools import combinations
from typing import Sequence

import numpy as np

from specgauge import __version__
from specgauge.analysis.arm_results import ArmChoice, ArmDifference, ArmResult, MultiArmResult
from specgauge.analysis.results import CompareResult, RatioCI
from specgauge.compare.collect import ArmSamples, paired_point, samples_of_runs, split_by_domain
from specgauge.compare.plan import (SINGLE_PREFIX, SPLIT_SINGLE_STAGE, SWEEP_PREFIX, TEMPERATURE_MARK, ComparePlan,
                                    Stage)
from specgauge.store import Store
from specgauge.store.clock import utc_now

Cell = tuple[str | None, int]   # (single-stream domain, 1) or (None, sweep concurrency)


def arm_cells(store: Store, stages: Sequence[Stage], run_ids: dict[tuple[str, str], tuple[int, ...]],
              arm: str) -> dict[Cell, ArmSamples]:
    """One arm's pooled samples per single-stream domain (the plan's temperature) and sweep point."""
    cells: dict[Cell, ArmSamples] = {}
    for stage in stages:
        if TEMPERATURE_MARK in stage.name:
            continue
        levels = samples_of_runs(store, run_ids.get((stage.name, arm), ()))
        if stage.name == SPLIT_SINGLE_STAGE and 1 in levels:
            cells.update({(domain, 1): part for domain, part in split_by_domain(levels[1]).items()})
        elif stage.name.startswith(SINGLE_PREFIX) and 1 in levels:
            cells[(stage.name[len(SINGLE_PREFIX):], 1)] = levels[1]
        elif stage.name.startswith(SWEEP_PREFIX):
            cells.update({(None, level): samples for level, samples in levels.items()})
    return cells


def _cell_order(cell: Cell) -> tuple:
    """Single-stream domains first (by name), then the sweep by concurrency."""
    return cell[0] is None, cell[0] or "", cell[1]


def _figure(ratio: RatioCI) -> str:
    """``1.12x [1.04, 1.21]`` (the interval left out when there is none)."""
    if ratio.ratio is None:
        return "no figure"
    interval = f" [{ratio.ci_low:.2f}, {ratio.ci_high:.2f}]" if ratio.ci_low is not None else ""
    return f"{ratio.ratio:.2f}x{interval}"


def _where(cell: Cell) -> str:
    domain, concurrency = cell
    return f"on {domain}" if domain is not None else f"at concurrency {concurrency}"


def difference_sentence(first: str, second: str, cell: Cell, ratio: RatioCI) -> tuple[bool, str]:
    """Whether ``first`` over ``second`` is clear (its interval excludes 1) and the sentence saying so."""
    figure = _figure(ratio) if ratio.ci_low is not None else "too few pairs for an interval"
    if ratio.ci_low is not None and ratio.ci_low > 1:
        return True, f"{first} pays more than {second} {_where(cell)} ({figure})"
    if ratio.ci_high is not None and ratio.ci_high < 1:
        return True, f"{first} pays less than {second} {_where(cell)} ({figure})"
    return False, f"no clear difference between {first} and {second} {_where(cell)} ({figure})"


def arm_differences(cells: dict[str, dict[Cell, ArmSamples]], labels: dict[str, str], drift: dict, *,
                    seed: int, resamples: int) -> list[ArmDifference]:
    """Every pair of arms (in the order given), at every cell both measured: first's tok/s over second's."""
    out = []
    for (i, a), (j, b) in combinations(enumerate(labels), 2):
        rng = np.random.default_rng([seed, 6, i, j])   # this pair's own draws
        widest = max((drift[a], drift[b]), key=lambda d: (d.widened_by or 0.0) if d is not None else -1.0)
        for cell in sorted(set(cells[a]) & set(cells[b]), key=_cell_order):
            point = paired_point(cells[b][cell], cells[a][cell], rng, resamples, widest)
            clear, sentence = difference_sentence(labels[a], labels[b], cell, point.throughput.ci)
            out.append(ArmDifference(first=labels[a], second=labels[b], domain=cell[0], concurrency=cell[1],
                                     ratio=point.throughput.ci, clear=clear, sentence=sentence))
    return out


def _speedups(result: CompareResult) -> dict[Cell, RatioCI]:
    rows = {(row.domain, 1): RatioCI(ratio=row.speedup, ci_low=row.ci_low, ci_high=row.ci_high,
                                     method=row.ci_method or "none", pairs=row.pairs or 0)
            for row in result.single_stream}
    rows.update({(None, p.concurrency): RatioCI(ratio=p.ratio, ci_low=p.ci_low, ci_high=p.ci_high,
                                                method=p.ci_method or "none", pairs=p.pairs or 0)
                 for p in result.sweep})
    return rows


def arm_choices(arms: Sequence[ArmResult], differences: Sequence[ArmDifference]) -> list[ArmChoice]:
    """Per cell the arm to run: the fastest of those that pay (interval above 1), else none."""
    speedups = {arm.label: _speedups(arm.result) for arm in arms}
    by_label = {arm.label: arm for arm in arms}
    cells = sorted({cell for rows in speedups.values() for cell in rows}, key=_cell_order)
    unclear = {frozenset((d.first, d.second, d.domain or "", str(d.concurrency))) for d in differences if not d.clear}
    out = []
    for cell in cells:
        paying = [(label, rows[cell]) for label, rows in speedups.items()
                  if cell in rows and rows[cell].ci_low is not None and rows[cell].ci_low > 1]
        where = cell[0] if cell[0] is not None else f"concurrency {cell[1]}"
        if not paying:
            out.append(ArmChoice(domain=cell[0], concurrency=cell[1], chosen=None,
                                 sentence=f"{where}: no method pays (run without speculation)"))
            continue
        label, speedup = max(paying, key=lambda item: item[1].ratio or 0.0)
        close = tuple(other for other, _ in paying if other != label and frozenset(
            (label, other, cell[0] or "", str(cell[1]))) in unclear)
        recommendation = by_label[label].result.recommendation
        figure = _figure(speedup)
        sentence = f"{where}: {label} ({figure} over the baseline)"
        if close:
            sentence += f"; {', '.join(close)} not clearly different"
        out.append(ArmChoice(domain=cell[0], concurrency=cell[1], chosen=label, speedup=speedup, also_pays=close,
                             disable_above=recommendation.disable_above, settings=recommendation.settings,
                             sentence=sentence))
    return out


def choose_between(store: Store, plan: ComparePlan, per_arm: dict[str, CompareResult],
                   run_ids: dict[tuple[str, str], tuple[int, ...]], stages: Sequence[Stage],
                   comparison_id: int | None) -> MultiArmResult:
    """The :class:`MultiArmResult` of ``per_arm`` (each speculative arm's result against the baseline)."""
    labels = plan.speculative_labels
    cells = {key: arm_cells(store, stages, run_ids, key) for key in labels}
    drift = {key: result.drift for key, result in per_arm.items()}
    differences = arm_differences(cells, labels, drift, seed=plan.seed, resamples=plan.bootstrap_resamples)
    arms = tuple(ArmResult(key=key, label=labels[key], result=per_arm[key]) for key in labels)
    choice = arm_choices(arms, differences)
    lines = [f"Between arms: {d.sentence}." for d in differences]
    lines += [f"Choice, {c.sentence}." for c in choice]
    return MultiArmResult(comparison_id=comparison_id, created_at=utc_now(), tool_version=__version__,
                          baseline=per_arm["speculative"].arm("baseline"), arms=arms,
                          differences=tuple(differences), choice=tuple(choice), verdict_lines=tuple(lines))

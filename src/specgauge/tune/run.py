"""Run a tune: measure every depth at every concurrency in interleaved rounds, more rounds only
where the choice is uncertain, choose, build the schedule, and verify it (docs/tune.md).

Rounds: in each round every cell (concurrency level) runs once per arm, the arms' order rotating
from cell to cell and round to round, with the same suite, request count, seed and max tokens for
every arm — so every arm sends the same prompts, and a drift of the machine within a round hits
all arms alike; the per-round ratios are paired (``choice.paired_ratio``). With every arm up at
once (embedded engines, URLs) the arms alternate point by point; launch commands run one at a
time per round, the order rotating by round.

Adaptive: ``min_rounds`` rounds of every cell, then a further round only of the cells whose
choice is uncertain (``choice.choose_cell``), up to ``max_rounds``. The time used is reported
against what the full grid (every cell, ``max_rounds`` rounds) would have taken at the measured
time per point.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from specgauge.errors import UserError
from specgauge.load.bench import close_run, open_run, run_point_at
from specgauge.load.bench_config import BenchConfig
from specgauge.store import Store
from specgauge.tune.arms import (SCHEDULE_ARM, TuneArm, all_up_at_once, arms_up, depth_label,
                                 engine_schedule_arm)
from specgauge.tune.choice import (Cell, CellChoice, CellMeasurements, PairedRatio, TunedSchedule, build_schedule,
                                   choose_cell, paired_ratio)


@dataclass(frozen=True)
class TunePlan:
    """What one tune measures (validated by the CLI)."""

    arms: tuple[TuneArm, ...]            # one per candidate depth
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    suite: str = "mixed"
    api: str = "openai-chat"
    requests_per_user: int = 2
    min_requests: int = 8
    max_tokens: int | None = 64
    seed: int = 0
    warmup: int = 1
    min_rounds: int = 2
    max_rounds: int = 4
    verify: bool = True
    verify_rounds: int = 2
    engine_args: str = ""                # the embedded engine's own arguments (schedule arm of --verify)
    algorithm: str = "EAGLE3"
    max_batch_size: int = 256
    start_timeout_s: float = 180.0
    model: str | None = None

    def requests_at(self, concurrency: int) -> int:
        return max(self.min_requests, self.requests_per_user * concurrency)


@dataclass(frozen=True)
class PointMeasure:
    """One arm at one concurrency in one round."""

    arm: str
    concurrency: int
    round: int
    throughput: float | None   # aggregate output tok/s
    tpot_ms: float | None      # median TPOT
    seconds: float             # wall time of the point
    run_id: int


@dataclass(frozen=True)
class VerifyLevel:
    """The schedule beside the best fixed depth and no speculation at one concurrency."""

    concurrency: int
    throughput: dict[str, float]           # arm label → tok/s (geometric mean over rounds)
    best_other: str                         # the fixed arm with the most throughput here
    ratio: PairedRatio | None               # schedule / best_other, paired by round


@dataclass(frozen=True)
class TuneResult:
    """Everything a tune found."""

    choices: tuple[CellChoice, ...]
    schedule: TunedSchedule
    points: tuple[PointMeasure, ...]
    measure_seconds: float
    full_grid_seconds: float
    rounds_by_cell: dict[int, int]
    verify: tuple[VerifyLevel, ...] = ()
    best_fixed: str | None = None
    verify_points: tuple[PointMeasure, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def worst_verify_ratio(self) -> PairedRatio | None:
        ratios = [v.ratio for v in self.verify if v.ratio is not None]
        return min(ratios, key=lambda r: r.ratio) if ratios else None


def _bench_config(plan: TunePlan, url: str, concurrency: int) -> BenchConfig:
    return BenchConfig(url=url, api=plan.api, suite=plan.suite, concurrency=(concurrency,),
                       num_requests=plan.requests_at(concurrency), warmup=plan.warmup, seed=plan.seed,
                       max_tokens=plan.max_tokens, model=plan.model)


async def _point(plan: TunePlan, store: Store, label: str, url: str, concurrency: int, round_number: int) -> PointMeasure:
    started = time.monotonic()
    run = await open_run(_bench_config(plan, url, concurrency), store)
    result = await run_point_at(run, 0)
    close_run(run)
    aggregate = result.aggregate
    return PointMeasure(label, concurrency, round_number, aggregate.output_tokens_per_s, aggregate.tpot_ms.p50,
                        time.monotonic() - started, run.run_id)


async def _round(plan: TunePlan, store: Store, arms: list[TuneArm], levels: list[int], round_number: int,
                 urls: dict[str, str] | None, say: Callable[[str], None]) -> list[PointMeasure]:
    """One round of ``levels`` over ``arms``: point by point with every arm up (``urls``), else
    one launched arm after the other."""
    points = []
    if urls is not None:
        for i, level in enumerate(levels):
            shift = (i + round_number) % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                points.append(await _point(plan, store, arm.label, urls[arm.label], level, round_number))
        return points
    shift = round_number % len(arms)
    for arm in arms[shift:] + arms[:shift]:
        with arms_up([arm], start_timeout_s=plan.start_timeout_s, announce=say) as up:
            for level in levels:
                points.append(await _point(plan, store, arm.label, up[arm.label], level, round_number))
    return points


def measurements(points: list[PointMeasure], arms: list[TuneArm], level: int) -> CellMeasurements:
    """One cell's per-depth, per-round figures (None where a round did not run an arm)."""
    here = [p for p in points if p.concurrency == level]
    rounds = sorted({p.round for p in here})
    by = {(p.arm, p.round): p for p in here}
    throughput = {arm.depth: [by[(arm.label, r)].throughput if (arm.label, r) in by else None for r in rounds]
                  for arm in arms}
    tpot = {arm.depth: [by[(arm.label, r)].tpot_ms if (arm.label, r) in by else None for r in rounds] for arm in arms}
    return CellMeasurements(Cell(level), throughput, tpot)


async def _measure(plan: TunePlan, store: Store, arms: list[TuneArm], say: Callable[[str], None],
                   urls: dict[str, str] | None) -> tuple[list[PointMeasure], list[CellChoice]]:
    points: list[PointMeasure] = []
    levels = list(plan.concurrency)
    choices: list[CellChoice] = []
    for round_number in range(plan.max_rounds):
        if round_number >= plan.min_rounds:
            levels = [c.cell.concurrency for c in choices if c.uncertain]
            if not levels:
                break
            say(f"round {round_number + 1}: the choice is uncertain at concurrency "
                f"{', '.join(map(str, levels))}: measuring there again")
        else:
            say(f"round {round_number + 1}/{plan.min_rounds}: depths {', '.join(a.label for a in arms)} at "
                f"concurrency {', '.join(map(str, levels))}")
        points += await _round(plan, store, arms, levels, round_number, urls, say)
        try:
            choices = [choose_cell(measurements(points, arms, level)) for level in plan.concurrency]
        except ValueError as exc:  # every arm's points failed at a level: nothing to choose from
            raise UserError(f"tune: {exc} (every request failed there; see the runs in the results DB)") from None
    return points, choices


async def run_tune(plan: TunePlan, store: Store, say: Callable[[str], None] = lambda _: None) -> TuneResult:
    """Measure, choose, build the schedule and (``plan.verify``) verify it."""
    arms = list(plan.arms)
    if not all_up_at_once(arms):
        points, choices = await _measure(plan, store, arms, say, None)
        return await _verify(plan, store, _result(plan, arms, points, choices), arms, say, None)
    with arms_up(arms, start_timeout_s=plan.start_timeout_s, announce=say) as urls:
        points, choices = await _measure(plan, store, arms, say, urls)
        # --verify reuses the depth arms still up (no speculation, the best fixed depth)
        return await _verify(plan, store, _result(plan, arms, points, choices), arms, say, urls)


def _result(plan: TunePlan, arms: list[TuneArm], points: list[PointMeasure], choices: list[CellChoice]) -> TuneResult:
    schedule = build_schedule(choices, plan.max_batch_size)
    measured = sum(p.seconds for p in points)
    per_point = {level: [p.seconds for p in points if p.concurrency == level] for level in plan.concurrency}
    full = sum(statistics.fmean(times) * len(arms) * plan.max_rounds for times in per_point.values() if times)
    rounds_by_cell = {level: len({p.round for p in points if p.concurrency == level}) for level in plan.concurrency}
    notes = [f"still uncertain after {plan.max_rounds} rounds at concurrency {c.cell.concurrency}: {c.why}"
             for c in choices if c.uncertain]
    return TuneResult(tuple(choices), schedule, tuple(points), measured, full, rounds_by_cell, notes=tuple(notes))


def best_fixed_depth(choices: tuple[CellChoice, ...]) -> int | None:
    """The speculative depth (> 0) with the highest geometric-mean throughput over the levels."""
    scores: dict[int, list[float]] = {}
    for choice in choices:
        for depth in choice.depths:
            if depth.depth > 0 and depth.throughput > 0:
                scores.setdefault(depth.depth, []).append(math.log(depth.throughput))
    complete = {d: sum(v) / len(v) for d, v in scores.items() if len(v) == len(choices)}
    return max(complete, key=complete.get) if complete else None


async def _verify(plan: TunePlan, store: Store, result: TuneResult, arms: list[TuneArm],
                  say: Callable[[str], None], urls: dict[str, str] | None) -> TuneResult:
    """The schedule beside the best fixed depth and no speculation, every level, ``verify_rounds``
    rounds (the depth arms in ``urls`` reused when they are still up)."""
    if not plan.verify:
        return result
    notes = list(result.notes)
    if any(arm.kind != "engine" for arm in arms):
        notes.append("--verify runs the schedule on the embedded engine only: the arms are not embedded engines")
        return dataclasses.replace(result, notes=tuple(notes))
    if result.schedule.max_depth == 0:
        notes.append("nothing to verify: the schedule is no speculation (the k=0 arm itself)")
        return dataclasses.replace(result, notes=tuple(notes))
    by_depth = {arm.depth: arm for arm in arms}
    best = best_fixed_depth(result.choices)
    others = [by_depth[d] for d in dict.fromkeys([0, best]) if d is not None and d in by_depth]
    schedule_arm = engine_schedule_arm(result.schedule, plan.engine_args, plan.algorithm)
    verify_arms = [schedule_arm, *others]
    say(f"verify: the schedule beside {', '.join(a.label for a in others)}, {plan.verify_rounds} rounds")
    points: list[PointMeasure] = []
    started = [schedule_arm] + ([] if urls is not None else others)
    with arms_up(started, start_timeout_s=plan.start_timeout_s, announce=say) as more:
        up = {**(urls or {}), **more}
        for round_number in range(plan.verify_rounds):
            points += await _round(plan, store, verify_arms, list(plan.concurrency), round_number, up, say)
    levels = verify_levels(points, [a.label for a in others], plan.concurrency, plan.verify_rounds)
    return dataclasses.replace(result, verify=levels, best_fixed=depth_label(best) if best is not None else None,
                               verify_points=tuple(points), notes=tuple(notes))


def verify_levels(points: list[PointMeasure], others: list[str], levels: tuple[int, ...],
                  rounds: int) -> tuple[VerifyLevel, ...]:
    """Per level: each arm's throughput, the better of ``others`` there, and the schedule's paired
    ratio to it."""
    result = []
    for level in levels:
        here = {(p.arm, p.round): p.throughput for p in points if p.concurrency == level}
        series = {label: [here.get((label, r)) for r in range(rounds)] for label in [SCHEDULE_ARM, *others]}
        means = {label: _gmean(values) for label, values in series.items()}
        best_other = max(others, key=lambda label: means[label])
        result.append(VerifyLevel(level, means, best_other, paired_ratio(series[SCHEDULE_ARM], series[best_other])))
    return tuple(result)


def _gmean(values) -> float:
    good = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in good) / len(good)) if good else 0.0

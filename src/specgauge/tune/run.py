"""Run a tune: measure every depth at every concurrency in interleaved rounds, more rounds only
where the choice is uncertain, choose, build the schedule, and verify it (docs/tune.md).

Rounds: in each round every cell (concurrency level) runs once per arm, the arms' order rotating
from cell to cell and round to round, with the same suite, request count, seed and max tokens for
every arm — so every arm sends the same prompts, and a drift of the machine within a round hits
all arms alike; the per-round ratios are paired (``choice.paired_ratio``). With every arm up at
once (embedded engines, URLs) the arms alternate point by point; launch commands run one at a
time per round, the order rotating by round.

With context bands (``plan.bands``) a cell is a concurrency level and a band, each band with its
own prompts (``load.length_bands``), prepared once from the first server up (its tokenizer and context).

Adaptive: ``min_rounds`` rounds of every cell, then a further round only of the cells whose
choice is uncertain (``choice.choose_cell``), up to ``max_rounds``. The time used is reported
against what the full grid (every cell, ``max_rounds`` rounds) would have taken at the measured
time per point.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from specgauge.client.sampling import describe_sampling
from specgauge.errors import UserError
from specgauge.load.length_bands import BandSuite, band_label, build_band_suites, check_fit
from specgauge.load.bench import close_run, open_run, run_point_at
from specgauge.load.bench_config import BenchConfig
from specgauge.store import Store
from specgauge.tune.arms import (SCHEDULE_ARM, TuneArm, all_up_at_once, arms_up, depth_label,
                                 engine_schedule_arm, template_schedule_arm, url_arm)
from specgauge.tune.choice import (Cell, CellChoice, CellMeasurements, PairedRatio, TunedSchedule, build_schedule,
                                   choose_cell, paired_ratio)


@dataclass(frozen=True)
class TunePlan:
    """What one tune measures (validated by the CLI)."""

    arms: tuple[TuneArm, ...]            # one per candidate depth
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    suite: str = "mixed"
    api: str = "openai-chat"
    num_requests: int | None = None      # fixed per point; else max(min_requests, requests_per_user x concurrency)
    requests_per_user: int = 2
    min_requests: int = 8
    max_tokens: int | None = 64
    seed: int = 0
    temperature: float = 0.0             # --temperature, --top-p, --top-k: what every request asks of the sampler
    top_p: float | None = None
    top_k: int | None = None
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
    bands: tuple[tuple[int, int], ...] = ()   # --context-lengths: prompt-length bands (inclusive tokens)
    tokenizer: str | None = None              # counts band prompts (else the server's own)
    schedule_template: str | None = None      # --verify of command arms: the schedule's launch command
    schedule_url: str | None = None           # --verify of URL arms: a server running the schedule
    think_time_ms: float = 0.0                # multi-turn sessions: pause before each later turn (load/sessions.py)
    think_time_distribution: str = "fixed"

    api_key: str | None = field(default=None, repr=False)   # --api-key, --header: sent with every request,
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)   # never stored nor shown
    insecure: bool = False               # https arms: no certificate checks (--insecure)

    def requests_at(self, concurrency: int) -> int:
        if self.num_requests is not None:
            return self.num_requests
        return max(self.min_requests, self.requests_per_user * concurrency)

    def cells(self) -> list[Cell]:
        """Every cell of the grid: each concurrency level at each band (no band without bands)."""
        return [Cell(level, band) for level in self.concurrency for band in (self.bands or (None,))]


def cell_label(cell: Cell) -> str:
    """``16`` or, with a band, ``16@1-128``."""
    return str(cell.concurrency) if cell.band is None else f"{cell.concurrency}@{band_label(cell.band)}"


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
    band: tuple[int, int] | None = None   # the context band (prompt tokens), with --context-lengths

    @property
    def cell(self) -> Cell:
        return Cell(self.concurrency, self.band)


@dataclass(frozen=True)
class VerifyLevel:
    """The schedule beside the best fixed depth and no speculation at one concurrency."""

    concurrency: int
    throughput: dict[str, float]           # arm label → tok/s (geometric mean over rounds)
    best_other: str                         # the fixed arm with the most throughput here
    ratio: PairedRatio | None               # schedule / best_other, paired by round
    band: tuple[int, int] | None = None


@dataclass(frozen=True)
class TuneResult:
    """Everything a tune found."""

    choices: tuple[CellChoice, ...]
    schedule: TunedSchedule
    points: tuple[PointMeasure, ...]
    measure_seconds: float
    full_grid_seconds: float
    rounds_by_cell: dict[str, int]          # cell_label → rounds measured
    verify: tuple[VerifyLevel, ...] = ()
    best_fixed: str | None = None
    verify_points: tuple[PointMeasure, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    band_suites: tuple[BandSuite, ...] = ()

    @property
    def worst_verify_ratio(self) -> PairedRatio | None:
        ratios = [v.ratio for v in self.verify if v.ratio is not None]
        return min(ratios, key=lambda r: r.ratio) if ratios else None


class BandPrompts:
    """The bands' prompt suites, built once from the first server that answers (its tokenizer
    and context; ``load.length_bands``): empty without bands."""

    def __init__(self, plan: TunePlan, store: Store, say: Callable[[str], None]) -> None:
        self._plan, self._store, self._say = plan, store, say
        self.suites: tuple[BandSuite, ...] = ()

    async def for_server(self, url: str) -> dict[tuple[int, int], BandSuite]:
        """band → its suite; built (and the bands checked against the server's context) on the first call."""
        plan = self._plan
        if plan.bands and not self.suites:
            from specgauge.client.endpoint import Endpoint
            from specgauge.client.server_model import describe_server_model

            server = await describe_server_model(Endpoint(base_url=url, api=plan.api, model=plan.model,
                                                          api_key=plan.api_key, headers=plan.headers,
                                                          insecure=plan.insecure))
            max_tokens = plan.max_tokens or 64
            check_fit(plan.bands, server.context_length, server.context_source, max_tokens)
            tokenizer = plan.tokenizer or server.tokenizer_path
            if not tokenizer:
                raise UserError("--context-lengths counts prompt tokens with the server's tokenizer: the server "
                                "reports none on this machine; pass --tokenizer PATH (its tokenizer.json)")
            self.suites = build_band_suites(
                plan.suite, plan.bands, tokenizer_path=tokenizer, api=plan.api, min_prompts=plan.min_requests,
                synthetic_count=min(max(plan.requests_at(c) for c in plan.concurrency), 512), seed=plan.seed,
                max_tokens=max_tokens, work_dir=Path(self._store.path).resolve().parent)
            for found in self.suites:
                self._say(f"band {band_label(found.band)} tokens: {found.count} prompts ({found.source})")
        return {found.band: found for found in self.suites}


def _bench_config(plan: TunePlan, url: str, cell: Cell, suites: dict) -> BenchConfig:
    suite = suites[cell.band].suite_ref if cell.band is not None else plan.suite
    return BenchConfig(url=url, api=plan.api, suite=suite, concurrency=(cell.concurrency,),
                       num_requests=plan.requests_at(cell.concurrency), warmup=plan.warmup, seed=plan.seed,
                       max_tokens=plan.max_tokens, temperature=plan.temperature, top_p=plan.top_p,
                       top_k=plan.top_k, model=plan.model, tokenizer_path=plan.tokenizer,
                       api_key=plan.api_key, headers=plan.headers, insecure=plan.insecure,
                       think_time_ms=plan.think_time_ms, think_time_distribution=plan.think_time_distribution)


async def _point(plan: TunePlan, store: Store, label: str, url: str, cell: Cell, round_number: int,
                 suites: dict) -> PointMeasure:
    started = time.monotonic()
    run = await open_run(_bench_config(plan, url, cell, suites), store)
    result = await run_point_at(run, 0)
    close_run(run)
    aggregate = result.aggregate
    return PointMeasure(label, cell.concurrency, round_number, aggregate.output_tokens_per_s, aggregate.tpot_ms.p50,
                        time.monotonic() - started, run.run_id, cell.band)


async def _round(plan: TunePlan, store: Store, arms: list[TuneArm], cells: list[Cell], round_number: int,
                 urls: dict[str, str] | None, say: Callable[[str], None], prompts: BandPrompts) -> list[PointMeasure]:
    """One round of ``cells`` over ``arms``: point by point with every arm up (``urls``), else
    one launched arm after the other."""
    points = []
    if urls is not None:
        suites = await prompts.for_server(urls[arms[0].label])
        for i, cell in enumerate(cells):
            shift = (i + round_number) % len(arms)
            for arm in arms[shift:] + arms[:shift]:
                points.append(await _point(plan, store, arm.label, urls[arm.label], cell, round_number, suites))
        return points
    shift = round_number % len(arms)
    for arm in arms[shift:] + arms[:shift]:
        with arms_up([arm], start_timeout_s=plan.start_timeout_s, announce=say) as up:
            suites = await prompts.for_server(up[arm.label])
            for cell in cells:
                points.append(await _point(plan, store, arm.label, up[arm.label], cell, round_number, suites))
    return points


def measurements(points: list[PointMeasure], arms: list[TuneArm], cell: Cell | int) -> CellMeasurements:
    """One cell's per-depth, per-round figures (None where a round did not run an arm); a bare
    int is the concurrency level of a tune without bands."""
    cell = Cell(cell) if isinstance(cell, int) else cell
    here = [p for p in points if p.cell == cell]
    rounds = sorted({p.round for p in here})
    by = {(p.arm, p.round): p for p in here}
    throughput = {arm.depth: [by[(arm.label, r)].throughput if (arm.label, r) in by else None for r in rounds]
                  for arm in arms}
    tpot = {arm.depth: [by[(arm.label, r)].tpot_ms if (arm.label, r) in by else None for r in rounds] for arm in arms}
    return CellMeasurements(cell, throughput, tpot)


async def _measure(plan: TunePlan, store: Store, arms: list[TuneArm], say: Callable[[str], None],
                   urls: dict[str, str] | None, prompts: BandPrompts) -> tuple[list[PointMeasure], list[CellChoice]]:
    points: list[PointMeasure] = []
    cells = plan.cells()
    choices: list[CellChoice] = []
    where = "concurrency" if not plan.bands else "concurrency@band"
    for round_number in range(plan.max_rounds):
        if round_number >= plan.min_rounds:
            cells = [c.cell for c in choices if c.uncertain]
            if not cells:
                break
            say(f"round {round_number + 1}: the choice is uncertain at {where} "
                f"{', '.join(map(cell_label, cells))}: measuring there again")
        else:
            say(f"round {round_number + 1}/{plan.min_rounds}: depths {', '.join(a.label for a in arms)} at "
                f"{where} {', '.join(map(cell_label, cells))}")
        points += await _round(plan, store, arms, cells, round_number, urls, say, prompts)
        try:
            choices = [choose_cell(measurements(points, arms, cell)) for cell in plan.cells()]
        except ValueError as exc:  # every arm's points failed at a level: nothing to choose from
            raise UserError(f"tune: {exc} (every request failed there; see the runs in the results DB)") from None
    return points, choices


async def run_tune(plan: TunePlan, store: Store, say: Callable[[str], None] = lambda _: None) -> TuneResult:
    """Measure, choose, build the schedule and (``plan.verify``) verify it."""
    arms = list(plan.arms)
    prompts = BandPrompts(plan, store, say)
    if not all_up_at_once(arms):
        points, choices = await _measure(plan, store, arms, say, None, prompts)
        result = _result(plan, arms, points, choices, prompts.suites)
        return await _verify(plan, store, result, arms, say, None, prompts)
    with arms_up(arms, start_timeout_s=plan.start_timeout_s, announce=say) as urls:
        points, choices = await _measure(plan, store, arms, say, urls, prompts)
        # --verify reuses the depth arms still up (no speculation, the best fixed depth)
        result = _result(plan, arms, points, choices, prompts.suites)
        return await _verify(plan, store, result, arms, say, urls, prompts)


def _result(plan: TunePlan, arms: list[TuneArm], points: list[PointMeasure], choices: list[CellChoice],
            band_suites: tuple[BandSuite, ...] = ()) -> TuneResult:
    schedule = build_schedule(choices, plan.max_batch_size)
    measured = sum(p.seconds for p in points)
    per_point = {cell: [p.seconds for p in points if p.cell == cell] for cell in plan.cells()}
    full = sum(statistics.fmean(times) * len(arms) * plan.max_rounds for times in per_point.values() if times)
    rounds_by_cell = {cell_label(cell): len({p.round for p in points if p.cell == cell}) for cell in plan.cells()}
    where = "concurrency" if not plan.bands else "concurrency@band"
    notes = [f"still uncertain after {plan.max_rounds} rounds at {where} {cell_label(c.cell)}: {c.why}"
             for c in choices if c.uncertain]
    notes.append(f"measured at {describe_sampling(plan.temperature, plan.top_p, plan.top_k)}: acceptance, and "
                 f"so the best depth, changes with temperature; tune at the temperature you serve")
    if (random_note := _random_prompts_note(plan, band_suites)) is not None:
        notes.append(random_note)
    return TuneResult(tuple(choices), schedule, tuple(points), measured, full, rounds_by_cell, notes=tuple(notes),
                      band_suites=band_suites)


def _random_prompts_note(plan: TunePlan, band_suites: tuple[BandSuite, ...]) -> str | None:
    """The warning when the prompts measured (the bands' suites, else ``plan.suite``) hold random tokens."""
    from specgauge.analysis.health import random_prompts_message
    from specgauge.suites.registry import load_suite

    suites = [load_suite(b.suite_ref) for b in band_suites] if band_suites else [load_suite(plan.suite)]
    requests = [r for suite in suites for r in suite.requests]
    return random_prompts_message(sum(r.source == "random" for r in requests), len(requests), "this tune")


def best_fixed_depth(choices: tuple[CellChoice, ...]) -> int | None:
    """The speculative depth (> 0) with the highest geometric-mean throughput over the levels."""
    scores: dict[int, list[float]] = {}
    for choice in choices:
        for depth in choice.depths:
            if depth.depth > 0 and depth.throughput > 0:
                scores.setdefault(depth.depth, []).append(math.log(depth.throughput))
    complete = {d: sum(v) / len(v) for d, v in scores.items() if len(v) == len(choices)}
    return max(complete, key=complete.get) if complete else None


def schedule_arm_for(plan: TunePlan, schedule: TunedSchedule, arms: list[TuneArm]) -> tuple[TuneArm | None, str]:
    """The arm that runs ``schedule`` beside the depth arms, or None and the one-line reason why
    there is none: the embedded engine with ``--speculative-schedule``; for launch commands the
    schedule's command (``plan.schedule_template``); for URLs ``plan.schedule_url``."""
    kind = arms[0].kind
    if kind == "engine":
        return engine_schedule_arm(schedule, plan.engine_args, plan.algorithm), ""
    if kind == "command":
        if plan.schedule_template is None:
            return None, ("verification not run: no command runs the schedule — give --launch-template-schedule CMD "
                          "(with {port}, {k} and {schedule}), or a vLLM template whose --speculative-config has "
                          "\"num_speculative_tokens\": {k}")
        return template_schedule_arm(schedule, plan.schedule_template), ""
    if plan.schedule_url is None:
        return None, ("verification not run: the arms are URLs and no server runs the schedule — start one with the "
                      "settings below and rerun with --url schedule=URL")
    return dataclasses.replace(url_arm(0, plan.schedule_url), label=SCHEDULE_ARM, depth=None), ""


def served_schedule(url: str) -> list | None:
    """The schedule a server reports in its server info (``speculative_schedule``: the embedded
    engine does), or None when it reports none."""
    import urllib.error
    import urllib.request

    from specgauge.client.probe import SERVER_INFO_PATHS

    for path in SERVER_INFO_PATHS:
        try:
            with urllib.request.urlopen(url + path, timeout=10) as response:
                info = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("speculative_schedule"), list):
            return info["speculative_schedule"]
    return None


def _served_schedule_note(url: str, schedule: TunedSchedule) -> str:
    from specgauge.speculation_schedule import normalize_schedule

    served = served_schedule(url)
    if served is None:
        return (f"verify: the server at {url} (--url schedule=) is taken to run the schedule emitted below; "
                f"it reports no schedule to check")
    try:
        same = normalize_schedule(served) == normalize_schedule(schedule.as_json_list())
    except ValueError:
        same = False
    if same:
        return f"verify: the server at {url} reports the emitted schedule"
    return (f"verify: the server at {url} reports the schedule {served}, not the emitted "
            f"{schedule.as_json_list()}: the verification is of the schedule it runs")


async def _verify(plan: TunePlan, store: Store, result: TuneResult, arms: list[TuneArm],
                  say: Callable[[str], None], urls: dict[str, str] | None, prompts: BandPrompts) -> TuneResult:
    """The schedule beside the best fixed depth and no speculation, every cell, ``verify_rounds``
    rounds (the depth arms in ``urls`` reused when they are up; launch commands one at a time)."""
    if not plan.verify:
        return result
    notes = list(result.notes)
    if result.schedule.max_depth == 0:
        notes.append("nothing to verify: the schedule is no speculation (the k=0 arm itself)")
        return dataclasses.replace(result, notes=tuple(notes))
    schedule_arm, why_not = schedule_arm_for(plan, result.schedule, arms)
    if schedule_arm is None:
        notes.append(why_not)
        return dataclasses.replace(result, notes=tuple(notes))
    if schedule_arm.kind == "url":
        notes.append(_served_schedule_note(schedule_arm.value, result.schedule))
    by_depth = {arm.depth: arm for arm in arms}
    best = best_fixed_depth(result.choices)
    others = [by_depth[d] for d in dict.fromkeys([0, best]) if d is not None and d in by_depth]
    verify_arms = [schedule_arm, *others]
    say(f"verify: the schedule beside {', '.join(a.label for a in others)}, {plan.verify_rounds} rounds")
    points: list[PointMeasure] = []
    if urls is None:   # launch commands: one arm at a time, the order rotating by round
        for round_number in range(plan.verify_rounds):
            points += await _round(plan, store, verify_arms, plan.cells(), round_number, None, say, prompts)
    else:
        with arms_up([schedule_arm], start_timeout_s=plan.start_timeout_s, announce=say) as more:
            up = {**urls, **more}
            # the depth arms are warm from the measuring rounds, the schedule's server is fresh: one point
            # at the highest concurrency of each band (the ramp and drain pass every batch size) warms it
            # first, so the first verify round does not charge its cold start to the schedule; not counted
            top = max(plan.concurrency)
            suites = await prompts.for_server(up[schedule_arm.label])
            for cell in (c for c in plan.cells() if c.concurrency == top):
                warm = await _point(plan, store, schedule_arm.label, up[schedule_arm.label], cell, -1, suites)
                say(f"verify: warmed the schedule's server at {cell_label(cell)} (run {warm.run_id}, not counted)")
            for round_number in range(plan.verify_rounds):
                points += await _round(plan, store, verify_arms, plan.cells(), round_number, up, say, prompts)
    levels = verify_levels(points, [a.label for a in others], plan.cells(), plan.verify_rounds)
    return dataclasses.replace(result, verify=levels, best_fixed=depth_label(best) if best is not None else None,
                               verify_points=tuple(points), notes=tuple(notes))


def verify_levels(points: list[PointMeasure], others: list[str], cells: list[Cell] | tuple[int, ...],
                  rounds: int) -> tuple[VerifyLevel, ...]:
    """Per cell (a bare int: a concurrency level without band): each arm's throughput, the better
    of ``others`` there, and the schedule's paired ratio to it."""
    result = []
    for cell in cells:
        cell = Cell(cell) if isinstance(cell, int) else cell
        here = {(p.arm, p.round): p.throughput for p in points if p.cell == cell}
        series = {label: [here.get((label, r)) for r in range(rounds)] for label in [SCHEDULE_ARM, *others]}
        means = {label: _gmean(values) for label, values in series.items()}
        best_other = max(others, key=lambda label: means[label])
        result.append(VerifyLevel(cell.concurrency, means, best_other,
                                  paired_ratio(series[SCHEDULE_ARM], series[best_other]), cell.band))
    return tuple(result)


def _gmean(values) -> float:
    good = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in good) / len(good)) if good else 0.0

"""Run a comparison: both arms over every stage and round, stored, then analysed.

Two schedules (``ComparePlan.schedule``):

- ``abba_by_point``: both arms are up at once (URLs, embedded engines). For each stage a run is
  opened per arm and the points alternate A B, B A, A B, ... over the whole comparison, so a slow
  drift of the machine (thermal, background load) hits both arms alike.
- ``sequential_rounds``: an arm is a launch command (it may need the whole GPU). Each round starts
  one arm, runs every stage, stops it, then the other; the order flips every round (AB, BA, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable, Iterator

from specgauge.compare.arms import ArmSpec, LaunchedServer
from specgauge.compare.collect import build_result
from specgauge.analysis.results import (ArmDescription, CompareResult, CompareSettings, StageRuns, SuiteInfo)
from specgauge.compare.plan import SWEEP_PREFIX, ComparePlan, Stage
from specgauge.compare.speculation_setup import speculation_setup
from specgauge.errors import UserError
from specgauge.load.bench import OpenRun, close_run, open_run, run_point_at
from specgauge.report.progress import BenchProgress, NullProgress
from specgauge.store import Store
from specgauge.suites.registry import load_suite

ARMS = ("baseline", "speculative")


class StageProgress:
    """Forwards bench progress, with each point labelled by phase, arm and stage (``spec sweep c=4``,
    ``verify spec sweep c=4`` in the ``--verify`` phase)."""

    def __init__(self, inner: BenchProgress, arm: str, stage: str, phase: str = "") -> None:
        shown = "sweep" if stage.startswith(SWEEP_PREFIX) else stage   # the point label says c=N already
        self._inner, self._prefix = inner, f"{phase + ' ' if phase else ''}{arm[:4]} {shown}"

    def run_started(self, run_id: int, num_points: int, *, resumed: bool) -> None:
        self._inner.run_started(run_id, num_points, resumed=resumed)

    def point_started(self, point_index: int, label: str, total: int | None, already_done: int) -> None:
        self._inner.point_started(point_index, f"{self._prefix} {label}", total, already_done)

    def request_finished(self, record) -> None:
        self._inner.request_finished(record)

    def point_finished(self, point_index: int, aggregate) -> None:
        self._inner.point_finished(point_index, aggregate)

    def run_finished(self, run_id: int, status: str) -> None:
        self._inner.run_finished(run_id, status)


@dataclasses.dataclass
class _Ledger:
    """Run ids per (stage, arm), one per round, and what each arm turned out to be."""

    runs: dict[tuple[str, str], list[int]] = dataclasses.field(default_factory=dict)
    urls: dict[str, str] = dataclasses.field(default_factory=dict)

    def add(self, store: Store, comparison_id: int, stage: str, arm: str, round_number: int, run_id: int) -> None:
        store.link_comparison_run(comparison_id, run_id, arm=arm, stage=stage, round=round_number)
        self.runs.setdefault((stage, arm), []).append(run_id)


@dataclasses.dataclass
class _Arms:
    """The arms that are up: their URLs, and the started processes (to tell whether one died)."""

    urls: dict[str, str] = dataclasses.field(default_factory=dict)
    started: dict[str, tuple[ArmSpec, object]] = dataclasses.field(default_factory=dict)

    def raise_if_dead(self) -> None:
        """A one-line :class:`UserError` naming the arm, its exit code and its log when a started
        arm's process has exited (called when a run fails, so that a killed arm is not reported as
        an unreachable URL)."""
        for name, (spec, handle) in self.started.items():
            if isinstance(handle, LaunchedServer):
                code, log, tail = handle.exit_code(wait_s=2.0), handle.log_path, handle.log_tail()
            else:
                process = getattr(handle, "process", None)
                try:
                    code = process.wait(timeout=2.0) if process is not None else None
                except Exception:
                    code = None
                log, tail = handle.log_file.name, " | ".join(handle.log_tail.splitlines()[-6:]) or "(empty log)"
            if code is not None:
                raise UserError(f"the {name} arm ({spec.describe()}) exited with code {code} during the comparison; "
                                f"log {log}: {tail}")


@contextlib.contextmanager
def _arms_up(specs: list[ArmSpec], plan: ComparePlan, log_dir: Path | None,
             announce: Callable[[str], None] | None = None) -> Iterator[_Arms]:
    """Start every launched arm of ``specs`` (URLs pass through), saying so; stop them all on exit."""
    import time

    with contextlib.ExitStack() as stack:
        arms = _Arms()
        for spec in specs:
            if not spec.launched:
                arms.urls[spec.name] = spec.value
                continue
            if announce:
                announce(f"starting the {spec.name} arm: {spec.describe()}")
            started = time.monotonic()
            if spec.kind == "engine":
                handle = stack.enter_context(_engine(spec, plan))
            else:
                handle = stack.enter_context(LaunchedServer(spec, start_timeout_s=plan.start_timeout_s,
                                                            log_dir=log_dir))
            arms.urls[spec.name] = handle.url
            arms.started[spec.name] = (spec, handle)
            if announce:
                announce(f"the {spec.name} arm answers at {handle.url} ({time.monotonic() - started:.1f} s)")
        try:
            yield arms
        except (UserError, OSError):
            arms.raise_if_dead()
            raise


def _engine(spec: ArmSpec, plan: ComparePlan):
    """The embedded engine of an ``engine`` arm (``specgauge serve ARGS``), not yet started."""
    import shlex

    try:
        from specgauge.engine.launch import EngineProcess
    except ImportError:
        raise UserError(f"--{spec.name}-engine: the embedded engine is not part of this build") from None
    return EngineProcess(shlex.split(spec.value), start_timeout=plan.start_timeout_s)


async def _run_all_points(run: OpenRun) -> None:
    for point in run.store.get_points(run.run_id):
        await run_point_at(run, point.point_index)
    close_run(run)


async def run_comparison(plan: ComparePlan, store: Store, progress: BenchProgress | None = None, *,
                         log_dir: Path | None = None,
                         on_stage: Callable[[str], None] | None = None, phase: str = "") -> CompareResult:
    """Run ``plan`` against its two arms, store every run and the comparison, return the result.

    ``phase``: a word that prefixes every progress label and stage heading (``verify``).
    Raises :class:`specgauge.errors.UserError` (one line) when an arm cannot be started or reached,
    naming a launched arm that died and its log.
    """
    if phase and on_stage:
        inner_on_stage = on_stage
        on_stage = lambda text: inner_on_stage(f"{phase} · {text}")   # noqa: E731
    progress = progress or NullProgress()
    stages = plan.stages()
    suites = {s.name: load_suite(s.suite) for s in stages}   # unknown suites fail before anything starts
    specs = [plan.baseline.spec(), plan.speculative.spec()]
    comparison_id = store.create_comparison(plan.model_dump(mode="json"))
    ledger = _Ledger()
    try:
        if plan.schedule == "abba_by_point":
            await _abba(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase)
        else:
            await _sequential(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase)
    except BaseException as exc:
        store.finish_comparison(comparison_id, status="interrupted" if isinstance(exc, KeyboardInterrupt) else "failed",
                                error=f"{type(exc).__name__}: {exc}")
        raise
    result = analyse(store, comparison_id, plan, ledger, suites, stages)
    store.finish_comparison(comparison_id, status="done", result=result.model_dump(mode="json"))
    return result


def _stage_heading(stage: Stage, stages: list[Stage]) -> str | None:
    """What to announce before ``stage``: its name, the whole sweep once, nothing for later sweep points."""
    sweep = [s for s in stages if s.name.startswith(SWEEP_PREFIX)]
    if stage not in sweep:
        return stage.name
    if stage == sweep[0]:
        return f"sweep at concurrency {', '.join(str(s.concurrency[0]) for s in sweep)}"
    return None


async def _abba(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase) -> None:
    turn = 0
    with _arms_up(specs, plan, log_dir, on_stage) as arms:
        urls = arms.urls
        ledger.urls.update(urls)
        for round_number in range(plan.rounds):
            for stage in stages:
                if on_stage and (heading := _stage_heading(stage, stages)):
                    on_stage(f"round {round_number + 1}/{plan.rounds} · {heading} · both arms, ABBA by point")
                runs = {}
                for arm in ARMS:
                    runs[arm] = await open_run(plan.bench_config(stage, urls[arm]), store,
                                               StageProgress(progress, arm, stage.name, phase))
                    ledger.add(store, comparison_id, stage.name, arm, round_number, runs[arm].run_id)
                for point in store.get_points(runs["baseline"].run_id):
                    order = ARMS if turn % 2 == 0 else ARMS[::-1]
                    turn += 1
                    for arm in order:
                        await run_point_at(runs[arm], point.point_index)
                for arm in ARMS:
                    close_run(runs[arm])


async def _sequential(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase) -> None:
    by_name = {s.name: s for s in specs}
    for round_number in range(plan.rounds):
        order = ARMS if round_number % 2 == 0 else ARMS[::-1]
        for arm in order:
            if on_stage:
                on_stage(f"round {round_number + 1}/{plan.rounds} · {arm} arm: {by_name[arm].describe()}")
            with _arms_up([by_name[arm]], plan, log_dir, on_stage) as arms:
                urls = arms.urls
                ledger.urls.update(urls)
                for stage in stages:
                    run = await open_run(plan.bench_config(stage, urls[arm]), store,
                                         StageProgress(progress, arm, stage.name, phase))
                    ledger.add(store, comparison_id, stage.name, arm, round_number, run.run_id)
                    await _run_all_points(run)


def analyse(store: Store, comparison_id: int, plan: ComparePlan, ledger: _Ledger, suites: dict,
            stages: list[Stage]) -> CompareResult:
    """Build the :class:`CompareResult` of the stored runs."""
    stage_runs = []
    for stage in stages:
        suite = suites[stage.name]
        stage_runs.append(StageRuns(stage=stage.name,
                                    suite=SuiteInfo(name=suite.name, version=suite.version,
                                                    content_hash=suite.content_hash),
                                    baseline_run_ids=tuple(ledger.runs.get((stage.name, "baseline"), ())),
                                    speculative_run_ids=tuple(ledger.runs.get((stage.name, "speculative"), ()))))
    arms = []
    speculation, vllm_config = None, None
    for arm_config in (plan.baseline, plan.speculative):
        run_ids = ledger.runs.get((stages[0].name, arm_config.name), [])
        run = store.get_run(run_ids[-1]) if run_ids else None
        fingerprint = run.server_fingerprint if run else None
        if arm_config.name == "speculative":
            speculation, vllm_config = speculation_setup(arm_config.kind, arm_config.value, fingerprint)
        arms.append(ArmDescription(name=arm_config.name, kind=arm_config.kind, description=arm_config.spec().describe(),
                                   url=ledger.urls.get(arm_config.name), model=run.model if run else None,
                                   server_fingerprint=fingerprint,
                                   speculation=speculation if arm_config.name == "speculative" else None))
    settings = CompareSettings(
        api=plan.api, domains=plan.domains, concurrency=plan.concurrency,
        num_requests_single=plan.num_requests_single, num_requests_sweep=plan.num_requests_sweep,
        max_tokens=plan.max_tokens, seed=plan.seed, temperature=plan.temperature, warmup=plan.warmup,
        rounds=plan.rounds, schedule=plan.schedule, bootstrap_resamples=plan.bootstrap_resamples)
    return build_result(store, arms=(arms[0], arms[1]), settings=settings, stages=stage_runs, label=plan.label,
                        comparison_id=comparison_id, seed=plan.seed, speculation=speculation,
                        vllm_base_config=vllm_config)


def result_of_comparison(store: Store, comparison_id: int) -> CompareResult:
    """The stored result of a finished comparison (``specgauge report`` renders it)."""
    row = store.get_comparison(comparison_id)
    if row.result is None:
        raise UserError(f"comparison {comparison_id} is {row.status}, it has no result"
                        + (f" ({row.error})" if row.error else ""))
    return CompareResult.model_validate(row.result)



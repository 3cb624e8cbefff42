"""Run a comparison: both arms over every stage and round, stored, then analysed.

Two schedules (``ComparePlan.schedule``):

- ``abba_by_point``: both arms are up at once (URLs, embedded engines). For each stage a run is
  opened per arm and the points alternate A B, B A, A B, ... over the whole comparison, so a slow
  drift of the machine (thermal, background load) hits both arms alike.
- ``sequential_rounds``: an arm is a launch command (it may need the whole GPU). Each round starts
  one arm, runs every stage, stops it, then the other; the order flips every round (AB, BA, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shlex
import sqlite3
from pathlib import Path
from typing import Callable, Iterator

from specgauge.compare.arms import ArmSpec, LaunchedServer
from specgauge.compare.collect import build_result
from specgauge.analysis.health import random_prompt_warnings
from specgauge.analysis.results import (ArmDescription, CompareResult, CompareSettings, HealthWarning,
                                        SpeculationSetup, StageRuns, SuiteInfo)
from specgauge.compare.peer_flags import goodput_of
from specgauge.compare.plan import SWEEP_PREFIX, ComparePlan, Stage, from_store_link, store_link
from specgauge.compare.rotation import order_at
from specgauge.compare.speculation_setup import configured_depth, declared_setup, speculation_setup
from specgauge.errors import UserError
from specgauge.load.bench import OpenRun, RunStopped, close_run, open_run, reopen_run, run_point_at
from specgauge.load.workers.split import Placement
from specgauge.report.progress import BenchProgress, NullProgress
from specgauge.store import Store, StoreWriteError
from specgauge.suites.registry import load_suite


class StageProgress:
    """Forwards bench progress, with each point labelled by phase, arm and stage (``spec sweep c=4``,
    ``verify spec sweep c=4`` in the ``--verify`` phase). ``full_name``: ``arm`` shown whole (the
    labels of several speculative arms), else its first four letters."""

    def __init__(self, inner: BenchProgress, arm: str, stage: str, phase: str = "", *, full_name: bool = False) -> None:
        shown = "sweep" if stage.startswith(SWEEP_PREFIX) else stage   # the point label says c=N already
        arm = arm if full_name else arm[:4]
        self._inner, self._prefix = inner, f"{phase + ' ' if phase else ''}{arm} {shown}"

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


class ComparisonStopped(UserError):
    """A comparison stopped before its end: one of its runs did (the server of an arm stopped
    answering, the store cannot be written), or an arm could not be reached or started for a later
    stage. Its finished runs stay; ``compare --resume`` finishes it. The exit code is the cause's."""

    def __init__(self, comparison_id: int, cause: UserError) -> None:
        super().__init__(f"comparison c{comparison_id} stopped: {cause}")
        self.comparison_id = comparison_id
        self.cause = cause
        self.exit_code = cause.exit_code

    def with_resume(self, command: str) -> UserError:
        """This error as one line ending in the command that finishes the comparison."""
        if isinstance(self.cause, RunStopped):
            text = str(self.cause.with_resume(command))
        else:
            text = f"{self.cause}; finish it with: {command}"
        error = UserError(f"comparison c{self.comparison_id} stopped: {text}")
        error.exit_code = self.exit_code
        return error


@dataclasses.dataclass
class _Ledger:
    """Run ids per (stage, arm), one per round, and what each arm turned out to be. ``existing``:
    the runs a resumed comparison made already, by (stage, arm, round)."""

    runs: dict[tuple[str, str], list[int]] = dataclasses.field(default_factory=dict)
    urls: dict[str, str] = dataclasses.field(default_factory=dict)
    existing: dict[tuple[str, str, int], int] = dataclasses.field(default_factory=dict)
    placement: Placement = Placement()   # where each run's load is generated (--workers, --ray-address)

    def add(self, store: Store, comparison_id: int, stage: str, arm: str, round_number: int, run_id: int) -> None:
        link_arm, link_stage = store_link(arm, stage)
        store.link_comparison_run(comparison_id, run_id, arm=link_arm, stage=link_stage, round=round_number)
        self.runs.setdefault((stage, arm), []).append(run_id)

    def done(self, store: Store, stage: str, arm: str, round_number: int) -> bool:
        """Whether a resumed comparison finished this run already."""
        run_id = self.existing.get((stage, arm, round_number))
        return run_id is not None and all(p.status == "done" for p in store.get_points(run_id))

    async def stage_run(self, plan: ComparePlan, store: Store, comparison_id: int, stage: Stage, arm: str,
                        round_number: int, url: str, progress: BenchProgress, phase: str = "") -> OpenRun:
        """The arm's run of ``stage`` in this round: the one a resumed comparison made, else a new one."""
        several = bool(plan.more_speculative)
        shown = plan.speculative_labels.get(arm, "base") if several else arm
        stage_progress = StageProgress(progress, shown, stage.name, phase, full_name=several)
        run_id = self.existing.get((stage.name, arm, round_number))
        if run_id is None:
            run = await open_run(plan.bench_config(stage, url, arm=arm, round_number=round_number), store,
                                 stage_progress, placement=self.placement)
            self.add(store, comparison_id, stage.name, arm, round_number, run.run_id)
            return run
        self.runs.setdefault((stage.name, arm), []).append(run_id)
        return await reopen_run(run_id, store, stage_progress, url=url, api_key=plan.api_key,
                                headers=plan.headers, placement=self.placement)


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
def _arms_up(specs: dict[str, ArmSpec], plan: ComparePlan, log_dir: Path | None,
             announce: Callable[[str], None] | None = None) -> Iterator[_Arms]:
    """Start every launched arm of ``specs`` (by arm key; URLs pass through), saying so; stop them all on exit."""
    import time

    with contextlib.ExitStack() as stack:
        arms = _Arms()
        for key, spec in specs.items():
            if not spec.launched:
                arms.urls[key] = spec.value
                continue
            server = None if spec.kind == "engine" else LaunchedServer(spec, start_timeout_s=plan.start_timeout_s,
                                                                         log_dir=log_dir)
            name = _arm_name(plan, key)
            if announce:   # a launched arm's log is named up front: a slow start can be watched there
                announce(f"starting the {name} arm: {spec.describe()}"
                         + (f" (log {server.log_path})" if server is not None else ""))
            started = time.monotonic()
            handle = stack.enter_context(_engine(spec, plan) if server is None else server)
            arms.urls[key] = handle.url
            arms.started[name] = (spec, handle)
            if announce:
                announce(f"the {name} arm answers at {handle.url} ({time.monotonic() - started:.1f} s)")
        try:
            yield arms
        except (UserError, OSError):
            arms.raise_if_dead()
            raise


def _arm_name(plan: ComparePlan, key: str) -> str:
    """How messages name an arm: ``baseline``/``speculative`` for two arms, else its label too."""
    if not plan.more_speculative or key == "baseline":
        return key
    return f"speculative ({plan.speculative_labels[key]})"


def _engine(spec: ArmSpec, plan: ComparePlan):
    """The embedded engine of an ``engine`` arm (``specgauge serve ARGS``), not yet started."""
    import shlex

    try:
        from specgauge.engine.serving.launch import EngineProcess
    except ImportError:
        raise UserError(f"--{spec.name}-engine: the embedded engine is not part of this build") from None
    return EngineProcess(shlex.split(spec.value), start_timeout=plan.start_timeout_s)


async def _run_all_points(run: OpenRun) -> None:
    for point in run.store.get_points(run.run_id):
        if point.status != "done":
            await run_point_at(run, point.point_index)
    close_run(run)


async def run_comparison(plan: ComparePlan, store: Store, progress: BenchProgress | None = None, *,
                         log_dir: Path | None = None,
                         on_stage: Callable[[str], None] | None = None, phase: str = "",
                         resume_id: int | None = None, placement: Placement = Placement()) -> CompareResult:
    """Run ``plan`` against its two arms, store every run and the comparison, return the result.

    ``phase``: a word that prefixes every progress label and stage heading (``verify``).
    With ``resume_id``, finish that stored comparison instead: its finished runs are kept, its
    unfinished ones are finished (only their missing requests), the rest run as planned.
    Raises :class:`specgauge.errors.UserError` (one line) when an arm cannot be started or reached
    (naming a launched arm that died and its log),
    and :class:`ComparisonStopped` when a run stops (its server stopped answering, a full store): the
    comparison is then ``failed``, and what it measured is stored as a partial result.
    """
    if phase and on_stage:
        inner_on_stage = on_stage
        on_stage = lambda text: inner_on_stage(f"{phase} · {text}")   # noqa: E731
    progress = progress or NullProgress()
    stages = plan.stages()
    suites = {s.name: load_suite(s.suite) for s in stages}   # unknown suites fail before anything starts
    specs = {key: arm.spec() for key, arm in plan.arm_configs.items()}
    ledger = _Ledger(placement=placement)
    if resume_id is None:
        comparison_id = store.create_comparison(plan.model_dump(mode="json"))
    else:
        comparison_id = resume_id
        ledger.existing = {(*from_store_link(r.arm, r.stage)[::-1], r.round): r.run_id
                           for r in store.comparison_runs(resume_id)}
        store.restart_comparison(resume_id)
    try:
        if plan.schedule == "abba_by_point":
            await _abba(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase)
        else:
            await _sequential(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase)
    except BaseException as exc:
        _stop_comparison(store, comparison_id, plan, ledger, suites, stages, exc)
        if isinstance(exc, UserError):
            raise ComparisonStopped(comparison_id, exc) from None
        raise
    result = analyse_all(store, comparison_id, plan, ledger, suites, stages)
    store.finish_comparison(comparison_id, status="done", result=result.model_dump(mode="json"))
    return result


def _stop_comparison(store: Store, comparison_id: int, plan: ComparePlan, ledger: _Ledger, suites: dict,
                     stages: list[Stage], exc: BaseException) -> None:
    """Mark the comparison stopped and store what it measured (best effort: the store may be what failed)."""
    interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
    error = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
    partial = None
    try:
        partial = _partial_result(store, comparison_id, plan, ledger, suites, stages, error)
    except Exception:  # too little measured to analyse: the runs stay in the store all the same
        partial = None
    try:
        store.commit()
        store.finish_comparison(comparison_id, status="interrupted" if interrupted else "failed",
                                result=partial, error=" ".join(error.split()))
    except (sqlite3.Error, StoreWriteError):
        pass


def _partial_result(store: Store, comparison_id: int, plan: ComparePlan, ledger: _Ledger, suites: dict,
                    stages: list[Stage], error: str) -> dict | None:
    """The result over the points both arms finished, marked incomplete; None when there are none."""
    done = [(stage, arm) for stage in stages for arm in plan.arm_keys
            if any(p.status == "done" for run_id in ledger.runs.get((stage.name, arm), ())
                   for p in store.get_points(run_id))]
    measured = [stage for stage in stages if all((stage, arm) in done for arm in plan.arm_keys)]
    if not measured:
        return None
    result = analyse_all(store, comparison_id, plan, ledger, suites, measured)
    warning = HealthWarning(code="incomplete", message=(
        f"incomplete: the comparison stopped before its end ({' '.join(error.split())}); this covers "
        f"{len(measured)} of {len(stages)} stages, points both arms finished only; "
        f"'specgauge compare --resume c{comparison_id} --db {shlex.quote(str(store.path))}' finishes it"))
    if plan.more_speculative:
        return result.model_copy(update={"arms": tuple(
            arm.model_copy(update={"result": arm.result.model_copy(update={"health": (*arm.result.health, warning)})})
            for arm in result.arms)}).model_dump(mode="json")
    return result.model_copy(update={"health": (*result.health, warning)}).model_dump(mode="json")


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
    keys = plan.arm_keys
    with _arms_up(specs, plan, log_dir, on_stage) as arms:
        urls = arms.urls
        ledger.urls.update(urls)
        for round_number in range(plan.rounds):
            for stage in stages:
                if on_stage and (heading := _stage_heading(stage, stages)):
                    on_stage(f"round {round_number + 1}/{plan.rounds} · {heading} · " + (
                        "both arms, ABBA by point" if len(keys) == 2 else
                        f"all {len(keys)} arms, order rotated by point (balanced Latin square)"))
                runs = {}
                for arm in keys:
                    runs[arm] = await ledger.stage_run(plan, store, comparison_id, stage, arm, round_number,
                                                       urls[arm], progress, phase)
                for point in store.get_points(runs["baseline"].run_id):
                    order = order_at(turn, keys)
                    turn += 1   # counted for finished points too, so a resumed comparison keeps the order
                    for arm in order:
                        if _point_status(runs[arm], point.point_index) != "done":
                            await run_point_at(runs[arm], point.point_index)
                for arm in keys:
                    close_run(runs[arm])


async def _sequential(plan, store, comparison_id, stages, specs, ledger, progress, log_dir, on_stage, phase) -> None:
    for round_number in range(plan.rounds):
        for arm in order_at(round_number, plan.arm_keys):
            if all(ledger.done(store, stage.name, arm, round_number) for stage in stages):
                for stage in stages:   # finished before a resume: nothing to start
                    ledger.runs.setdefault((stage.name, arm), []).append(
                        ledger.existing[(stage.name, arm, round_number)])
                continue
            if on_stage:
                on_stage(f"round {round_number + 1}/{plan.rounds} · {_arm_name(plan, arm)} arm: "
                         f"{specs[arm].describe()}")
            with _arms_up({arm: specs[arm]}, plan, log_dir, on_stage) as arms:
                urls = arms.urls
                ledger.urls.update(urls)
                for stage in stages:
                    run = await ledger.stage_run(plan, store, comparison_id, stage, arm, round_number,
                                                 urls[arm], progress, phase)
                    await _run_all_points(run)


def _point_status(run: OpenRun, point_index: int) -> str:
    return next(p.status for p in run.store.get_points(run.run_id) if p.point_index == point_index)


def analyse_all(store: Store, comparison_id: int, plan: ComparePlan, ledger: _Ledger, suites: dict,
                stages: list[Stage]):
    """The :class:`CompareResult` of a two-arm comparison; with several speculative arms, the
    :class:`MultiArmResult`: each arm's own result against the baseline, and the choice between them."""
    if not plan.more_speculative:
        return analyse(store, comparison_id, plan, ledger, suites, stages)
    from specgauge.compare.arm_choice import choose_between

    per_arm = {}
    for key, label in plan.speculative_labels.items():
        as_two = {"baseline": "baseline", key: "speculative"}   # this arm as a two-arm comparison's
        view = dataclasses.replace(
            ledger, runs={(stage, as_two[arm]): ids for (stage, arm), ids in ledger.runs.items() if arm in as_two},
            urls={as_two[arm]: url for arm, url in ledger.urls.items() if arm in as_two})
        arm_plan = plan.model_copy(update={"speculative": plan.arm_configs[key], "more_speculative": (),
                                           "arm_labels": (), "label": label,   # a URL arm's declaration is the first's
                                           "speculative_arm_config": plan.speculative_arm_config
                                           if key == "speculative" else None})
        per_arm[key] = analyse(store, comparison_id, arm_plan, view, suites, stages)
    return choose_between(store, plan, per_arm, {(stage, arm): tuple(ids) for (stage, arm), ids in ledger.runs.items()},
                          stages, comparison_id)


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
                                    speculative_run_ids=tuple(ledger.runs.get((stage.name, "speculative"), ())),
                                    temperature=stage.temperature))
    arms = []
    speculation, vllm_config = None, None
    for arm_config in (plan.baseline, plan.speculative):
        run_ids = ledger.runs.get((stages[0].name, arm_config.name), [])
        run = store.get_run(run_ids[-1]) if run_ids else None
        fingerprint = run.server_fingerprint if run else None
        if arm_config.name == "speculative":
            speculation, vllm_config = speculation_setup(arm_config.kind, arm_config.value, fingerprint)
            if arm_config.kind == "url" and plan.speculative_arm_config is not None:   # what the URL arm declares
                speculation, vllm_config = declared_setup(plan.speculative_arm_config)
        arms.append(ArmDescription(name=arm_config.name, kind=arm_config.kind, description=arm_config.spec().describe(),
                                   url=ledger.urls.get(arm_config.name), model=run.model if run else None,
                                   server_fingerprint=fingerprint,
                                   speculation=speculation if arm_config.name == "speculative" else None))
    settings = CompareSettings(
        api=plan.api, domains=plan.domains, concurrency=plan.concurrency,
        num_requests_single=plan.num_requests_single, num_requests_sweep=plan.num_requests_sweep,
        max_tokens=plan.max_tokens, seed=plan.seed, temperature=plan.temperature, warmup=plan.warmup,
        temperatures=plan.temperatures, top_p=plan.top_p, top_k=plan.top_k,
        rounds=plan.rounds, schedule=plan.schedule, bootstrap_resamples=plan.bootstrap_resamples,
        suite_layout=plan.suite_layout, trace_bin_s=plan.trace_bin_s if plan.trace else None,
        trace_speed=plan.trace.speed if plan.trace else None)
    result = build_result(store, arms=(arms[0], arms[1]), settings=settings, stages=stage_runs, label=plan.label,
                          comparison_id=comparison_id, seed=plan.seed, speculation=speculation,
                          vllm_base_config=vllm_config,
                          depth_at=configured_depth(plan.speculative.kind, plan.speculative.value,
                                                    speculation or SpeculationSetup(), vllm_config))
    result = result.model_copy(update={"health": result.health + random_prompt_warnings(list(suites.values()))})
    if not plan.goodput:
        return result
    return result.model_copy(update={"goodput": goodput_of(store, result, plan.goodput)})


def result_of_comparison(store: Store, comparison_id: int) -> CompareResult:
    """The stored result of a finished comparison (``specgauge report`` renders it)."""
    row = store.get_comparison(comparison_id)
    if row.result is None:
        raise UserError(f"comparison {comparison_id} is {row.status}, it has no result"
                        + (f" ({row.error})" if row.error else ""))
    return CompareResult.model_validate(row.result)



"""Baselines over time: a named stored run, and a new run of the same config checked against it.

``compare --against-baseline NAME`` re-runs the baseline run's exact settings (suite, points,
seed, max_tokens, temperature) against the arm given now, then compares the two runs point by
point: new / baseline aggregate tok/s with a 95% bootstrap interval (paired by request index when
the suite is unchanged). A point whose interval lies wholly below 1 — and, by default, whose ratio
is at least ``min_effect`` (5%) below 1, so that the few-percent drift between two runs taken at
different times on a quiet loopback server does not fail a pipeline — is a significant
regression; the CLI then exits 1, for CI pipelines. ``--min-effect 0`` applies the interval alone.

Machine drift: each point's requests are split in two halves by request index (earlier and later
in the run); the new/baseline ratio over each half is computed on the same pairs, and the two
halves' log ratio is one measurement of how much the machine moved between two moments
(analysis/drift.py). Every point's interval is widened by that drift; a point whose interval lay
below 1 only before the widening is reported as "within the measured drift", not as a regression.
A changed speculative setup (server_info's ``speculative_*`` fields: algorithm, draft model, steps)
is a server change like a changed model id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.drift import estimate_drift, with_drift
from specgauge.compare.arms import ArmSpec
from specgauge.compare.collect import ArmSamples, paired_point
from specgauge.analysis.results import DriftEstimate, RatioCI
from specgauge.analysis.paired import DEFAULT_RESAMPLES, significant_change
from specgauge.errors import UserError
from specgauge.load.bench_config import BenchConfig, restore_headers
from specgauge.load.workers.split import Placement
from specgauge.report.formatting import describe_point
from specgauge.store import RunRow, Store
from specgauge.suites.continuity import SuiteDiff, require_same_suite
from specgauge.suites.registry import load_suite


@dataclass(frozen=True)
class PointCheck:
    """One point of the new run against the same point of the baseline run."""

    label: str
    baseline_tok_s: float | None
    new_tok_s: float | None
    throughput: RatioCI
    request_tok_s: RatioCI
    change: int     # -1 significant regression, +1 significant improvement, 0 within noise or below min_effect
    within_drift: bool = False   # beyond request noise, but not beyond the machine drift the run measured

    @property
    def verdict(self) -> str:
        if self.change == 0 and self.within_drift:
            return "within the measured drift"
        return {-1: "REGRESSION", 1: "improvement", 0: "no significant change"}[self.change]


@dataclass(frozen=True)
class RegressionReport:
    baseline_name: str
    baseline_run_id: int
    new_run_id: int
    points: tuple[PointCheck, ...]
    suite_diff: SuiteDiff
    drift: DriftEstimate | None = None
    server_changes: tuple[str, ...] = ()   # what differs from the baseline's server (allowed by the user)

    @property
    def regressed(self) -> bool:
        return any(p.change < 0 for p in self.points)


SPECULATIVE_KEYS = ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                    "speculative_eagle_topk", "speculative_num_draft_tokens")


def server_identity(fingerprint: dict | None) -> dict:
    """What must match between a baseline and a new run: the served model ids, the server header and
    the speculative setup the server reports (SGLang's and the embedded engine's ``/server_info``)."""
    fingerprint = fingerprint or {}
    models = fingerprint.get("models")
    ids = sorted(m.get("id") for m in models.get("data", []) if isinstance(m, dict)) if isinstance(models, dict) else []
    identity = {"models": ids, "server": (fingerprint.get("headers") or {}).get("server")}
    info = fingerprint.get("server_info")
    if isinstance(info, dict):
        identity.update({k: info.get(k) for k in SPECULATIVE_KEYS if info.get(k) is not None})
    return identity


def server_changes(old: dict | None, new: dict | None) -> tuple[str, ...]:
    """Each difference between two fingerprints' identities, in words (``speculative_algorithm EAGLE3 → NGRAM``)."""
    old_id, new_id = server_identity(old), server_identity(new)
    return tuple(f"{key} {old_id.get(key)} → {new_id.get(key)}" for key in sorted(set(old_id) | set(new_id))
                 if old_id.get(key) != new_id.get(key))


def baseline_config(run: RunRow, url: str, *, api_key: str | None,
                    headers: tuple[tuple[str, str], ...] | None = ()) -> BenchConfig:
    """The stored run's config pointed at ``url``; header values are not stored: ``headers``
    (``--header``) supply them (a UserError names one the run had and this command did not give)
    and replace stored ones of the same name. ``headers`` None: none at all (a config that sends nothing)."""
    stored = {k: v for k, v in run.config.items() if k != "headers"}
    restored = [] if headers is None else restore_headers(run.config.get("headers", []), headers,
                                                          what=f"the baseline run {run.id}")
    return BenchConfig.model_validate({**stored, "url": url, "headers": restored, "api_key": api_key})


def recorded_suite_size(store: Store, run_id: int) -> int | None:
    """How many requests the run's suite held, when its stored requests show it: prompts are taken in
    shuffled passes over the suite (load/plan.py), so a point that sent more requests than it has
    distinct prompts went through the whole suite, and its distinct prompts are the suite. None otherwise."""
    for point in store.get_points(run_id):
        prompts = [r.prompt_index for r in store.get_requests(point.id)]
        if len(prompts) > len(set(prompts)):
            return len(set(prompts))
    return None


def check_suite(run: RunRow, config: BenchConfig, allow_suite_change: bool,
                recorded_size: int | None = None) -> SuiteDiff:
    """Refuse when the baseline's suite changed since (unless allowed); the diff either way.
    ``recorded_size``: the baseline suite's request count where known (:func:`recorded_suite_size`)."""
    header = {"name": run.suite_name, "version": run.suite_version, "content_hash": run.suite_hash,
              "num_requests": recorded_size}
    return require_same_suite(header, load_suite(config.suite), allow_suite_change)


def check_server(baseline: RunRow, new: RunRow, allow_server_change: bool) -> tuple[str, ...]:
    """Refuse when the new run's server is not the baseline's (model ids, server header, speculative
    setup); the differences, when allowed."""
    changes = server_changes(baseline.server_fingerprint, new.server_fingerprint)
    if changes and not allow_server_change:
        raise UserError(f"the server changed since baseline run {baseline.id}: {'; '.join(changes)}; "
                        f"pass --allow-server-change to compare anyway")
    return changes


def _samples_by_point(store: Store, run_id: int) -> dict[int, tuple[str, ArmSamples]]:
    out = {}
    for point in store.get_points(run_id):
        if point.status != "done" or point.aggregates is None:
            continue
        samples = ArmSamples(output_tokens=int(point.aggregates.get("output_tokens") or 0),
                             window_s=float(point.aggregates.get("window_s") or 0.0))
        for record in store.get_requests(point.id):
            samples.records.append(record)
            samples.keys.append((0, record.request_index))
        out[point.point_index] = (describe_point(point.spec), samples)
    return out


DEFAULT_MIN_EFFECT = 0.05


def classify_change(ci: RatioCI, min_effect: float = DEFAULT_MIN_EFFECT) -> int:
    """-1 / +1 when the interval excludes 1 and the ratio is at least ``min_effect`` away from 1."""
    change = significant_change(ci)
    if change and ci.ratio is not None and abs(ci.ratio - 1.0) < min_effect:
        return 0
    return change


def _rate(records) -> float | None:
    ok = [r for r in records if r.ok]
    seconds = sum((definitions.e2e_ms(r) or 0.0) for r in ok) / 1000.0
    return sum(definitions.output_token_count(r) for r in ok) / seconds if seconds > 0 else None


def half_repeats(old: ArmSamples, new: ArmSamples, paired: bool) -> list[tuple[float | None, float | None]]:
    """The new/baseline throughput ratio over the earlier and over the later half of a point's
    requests (by request index; on the same request pairs when ``paired``): two moments of one comparison."""
    old_by_index = {i: r for (_, i), r in zip(old.keys, old.records) if r.ok}
    new_by_index = {i: r for (_, i), r in zip(new.keys, new.records) if r.ok}
    indices = sorted(set(old_by_index) & set(new_by_index)) if paired else sorted(set(old_by_index) | set(new_by_index))
    if len(indices) < 4:
        return []
    halves = (indices[:len(indices) // 2], indices[len(indices) // 2:])
    ratios = []
    for half in halves:
        new_rate = _rate([new_by_index[i] for i in half if i in new_by_index])
        old_rate = _rate([old_by_index[i] for i in half if i in old_by_index])
        ratios.append(new_rate / old_rate if new_rate and old_rate else None)
    return [(ratios[0], ratios[1])]


def compare_runs(store: Store, baseline_name: str, baseline_run_id: int, new_run_id: int, suite_diff: SuiteDiff, *,
                 seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
                 min_effect: float = DEFAULT_MIN_EFFECT, server_changes: tuple[str, ...] = ()) -> RegressionReport:
    """Point-by-point new/baseline ratios; paired by request only when the suite is unchanged; every
    interval widened by the machine drift measured between the halves of the points (module docstring)."""
    rng = np.random.default_rng(seed)
    old, new = _samples_by_point(store, baseline_run_id), _samples_by_point(store, new_run_id)
    cells = []
    for index in sorted(set(old) & set(new)):
        label, old_samples = old[index]
        _, new_samples = new[index]
        if not suite_diff.same:   # same indices may now hold other prompts: never pair them
            new_samples = ArmSamples(records=new_samples.records, keys=[(-1, i) for _, i in new_samples.keys],
                                     output_tokens=new_samples.output_tokens, window_s=new_samples.window_s)
        cells.append((label, old_samples, new_samples))
    drift = estimate_drift([pair for _, o, n in cells for pair in half_repeats(o, n, suite_diff.same)], rounds=1)
    checks = []
    for label, old_samples, new_samples in cells:
        point = paired_point(old_samples, new_samples, rng, resamples)
        widened = with_drift(point.throughput, drift, rng)
        raw_change = classify_change(point.throughput.ci, min_effect)
        change = classify_change(widened.ci, min_effect)
        checks.append(PointCheck(label=label, baseline_tok_s=old_samples.tok_s, new_tok_s=new_samples.tok_s,
                                 throughput=widened.ci, request_tok_s=point.request_tok_s.ci, change=change,
                                 within_drift=raw_change != 0 and change == 0))
    return RegressionReport(baseline_name, baseline_run_id, new_run_id, tuple(checks), suite_diff, drift,
                            server_changes)


async def run_against_baseline(store: Store, name: str, arm: ArmSpec, *, allow_suite_change: bool = False,
                               allow_server_change: bool = False, api_key: str | None = None,
                               headers: tuple[tuple[str, str], ...] = (), progress=None,
                               start_timeout_s: float = 180.0, log_dir=None, seed: int = 0,
                               resamples: int = DEFAULT_RESAMPLES,
                               min_effect: float = DEFAULT_MIN_EFFECT,
                               placement: Placement = Placement()) -> RegressionReport:
    """Run baseline ``name``'s config against ``arm`` now (its load where ``placement`` says) and
    check the new run against it."""
    from specgauge.compare.arms import LaunchedServer
    from specgauge.load.bench import run_benchmark

    baseline = store.get_baseline(name)
    old_run = store.get_run(baseline.run_id)
    if old_run.status != "done":
        raise UserError(f"baseline {name!r} is run {old_run.id}, which is {old_run.status}, not done")
    probe_config = baseline_config(old_run, "http://127.0.0.1:1", api_key=api_key, headers=None)
    diff = check_suite(old_run, probe_config, allow_suite_change, recorded_suite_size(store, old_run.id))
    server = LaunchedServer(arm, start_timeout_s=start_timeout_s, log_dir=log_dir) if arm.launched else None
    try:
        url = server.start().url if server else arm.value
        summary = await run_benchmark(baseline_config(old_run, url, api_key=api_key, headers=headers), store, progress,
                                      placement=placement)
    finally:
        if server:
            server.stop()
    changes = check_server(old_run, store.get_run(summary.run_id), allow_server_change)
    return compare_runs(store, name, old_run.id, summary.run_id, diff, seed=seed, resamples=resamples,
                        min_effect=min_effect, server_changes=changes)

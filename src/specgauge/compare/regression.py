"""Baselines over time: a named stored run, and a new run of the same config checked against it.

``compare --against-baseline NAME`` re-runs the baseline run's exact settings (suite, points,
seed, max_tokens, temperature) against the arm given now, then compares the two runs point by
point: new / baseline aggregate tok/s with a 95% bootstrap interval (paired by request index when
the suite is unchanged). A point whose interval lies wholly below 1 — and, by default, whose ratio
is at least ``min_effect`` (5%) below 1, so that the few-percent drift between two runs taken at
different times on a quiet loopback server does not fail a pipeline — is a significant
regression; the CLI then exits 1, for CI pipelines. ``--min-effect 0`` applies the interval alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specgauge.compare.arms import ArmSpec
from specgauge.compare.collect import ArmSamples, paired_point
from specgauge.analysis.results import RatioCI
from specgauge.analysis.paired import DEFAULT_RESAMPLES, significant_change
from specgauge.errors import UserError
from specgauge.load.bench_config import BenchConfig
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

    @property
    def verdict(self) -> str:
        return {-1: "REGRESSION", 1: "improvement", 0: "no significant change"}[self.change]


@dataclass(frozen=True)
class RegressionReport:
    baseline_name: str
    baseline_run_id: int
    new_run_id: int
    points: tuple[PointCheck, ...]
    suite_diff: SuiteDiff

    @property
    def regressed(self) -> bool:
        return any(p.change < 0 for p in self.points)


def server_identity(fingerprint: dict | None) -> dict:
    """What must match between a baseline and a new run: the served model ids and the server header."""
    fingerprint = fingerprint or {}
    models = fingerprint.get("models")
    ids = sorted(m.get("id") for m in models.get("data", []) if isinstance(m, dict)) if isinstance(models, dict) else []
    return {"models": ids, "server": (fingerprint.get("headers") or {}).get("server")}


def baseline_config(run: RunRow, url: str, *, api_key: str | None) -> BenchConfig:
    """The stored run's config pointed at ``url`` (secret headers are not stored: none are sent)."""
    stored = {k: v for k, v in run.config.items() if k != "headers"}
    headers = [(k, v) for k, v in run.config.get("headers", []) if v != "<redacted>"]
    return BenchConfig.model_validate({**stored, "url": url, "headers": headers, "api_key": api_key})


def check_suite(run: RunRow, config: BenchConfig, allow_suite_change: bool) -> SuiteDiff:
    """Refuse when the baseline's suite changed since (unless allowed); the diff either way."""
    header = {"name": run.suite_name, "version": run.suite_version, "content_hash": run.suite_hash}
    return require_same_suite(header, load_suite(config.suite), allow_suite_change)


def check_server(baseline: RunRow, new: RunRow, allow_server_change: bool) -> None:
    """Refuse when the new run's server is not the baseline's (model ids, server header)."""
    old_id, new_id = server_identity(baseline.server_fingerprint), server_identity(new.server_fingerprint)
    if old_id != new_id and not allow_server_change:
        raise UserError(f"server fingerprint differs from baseline run {baseline.id}: {old_id} → {new_id}; "
                        f"pass --allow-server-change to compare anyway")


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


def compare_runs(store: Store, baseline_name: str, baseline_run_id: int, new_run_id: int, suite_diff: SuiteDiff, *,
                 seed: int = 0, resamples: int = DEFAULT_RESAMPLES,
                 min_effect: float = DEFAULT_MIN_EFFECT) -> RegressionReport:
    """Point-by-point new/baseline ratios; paired by request only when the suite is unchanged."""
    rng = np.random.default_rng(seed)
    old, new = _samples_by_point(store, baseline_run_id), _samples_by_point(store, new_run_id)
    checks = []
    for index in sorted(set(old) & set(new)):
        label, old_samples = old[index]
        _, new_samples = new[index]
        if not suite_diff.same:   # same indices may now hold other prompts: never pair them
            new_samples = ArmSamples(records=new_samples.records, keys=[(-1, i) for _, i in new_samples.keys],
                                     output_tokens=new_samples.output_tokens, window_s=new_samples.window_s)
        point = paired_point(old_samples, new_samples, rng, resamples)
        checks.append(PointCheck(label=label, baseline_tok_s=old_samples.tok_s, new_tok_s=new_samples.tok_s,
                                 throughput=point.throughput.ci, request_tok_s=point.request_tok_s.ci,
                                 change=classify_change(point.throughput.ci, min_effect)))
    return RegressionReport(baseline_name, baseline_run_id, new_run_id, tuple(checks), suite_diff)


async def run_against_baseline(store: Store, name: str, arm: ArmSpec, *, allow_suite_change: bool = False,
                               allow_server_change: bool = False, api_key: str | None = None, progress=None,
                               start_timeout_s: float = 180.0, log_dir=None, seed: int = 0,
                               resamples: int = DEFAULT_RESAMPLES,
                               min_effect: float = DEFAULT_MIN_EFFECT) -> RegressionReport:
    """Run baseline ``name``'s config against ``arm`` now and check the new run against it."""
    from specgauge.compare.arms import LaunchedServer
    from specgauge.load.bench import run_benchmark

    baseline = store.get_baseline(name)
    old_run = store.get_run(baseline.run_id)
    if old_run.status != "done":
        raise UserError(f"baseline {name!r} is run {old_run.id}, which is {old_run.status}, not done")
    probe_config = baseline_config(old_run, "http://127.0.0.1:1", api_key=api_key)
    diff = check_suite(old_run, probe_config, allow_suite_change)
    server = LaunchedServer(arm, start_timeout_s=start_timeout_s, log_dir=log_dir) if arm.launched else None
    try:
        url = server.start().url if server else arm.value
        summary = await run_benchmark(baseline_config(old_run, url, api_key=api_key), store, progress)
    finally:
        if server:
            server.stop()
    check_server(old_run, store.get_run(summary.run_id), allow_server_change)
    return compare_runs(store, name, old_run.id, summary.run_id, diff, seed=seed, resamples=resamples,
                        min_effect=min_effect)

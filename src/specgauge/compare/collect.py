"""From the stored runs of both arms to a :class:`CompareResult`: pairing, ratios, crossover, verdict.

Reads only the store, so a comparison can be recomputed at any time from its run ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from specgauge import __version__
from specgauge.analysis import definitions
from specgauge.analysis.crossover import find_crossover
from specgauge.analysis.drafted_depth import DepthAt, PointDrafts, drafted_depth_warnings
from specgauge.analysis.drift import estimate_drift, with_drift
from specgauge.analysis.health import (acceptance_by_position, chunk_histogram, counted, domain_acceptance_warnings,
                                       drift_warnings, health_warnings, is_degenerate, mean_accept_length,
                                       mean_tokens_per_chunk, outlying_round_warnings, temperature_warnings)
from specgauge.analysis.lossless import check_losslessness
from specgauge.analysis.paired import RatioEstimate, mean_interval, ratio_of_statistic, ratio_of_sums
from specgauge.analysis.summary import summarize
from specgauge.analysis.trace_windows import trace_windows
from specgauge.analysis.verdict import assess_sweep, recommend, supported_crossover, verdict_lines
from specgauge.client.records import RequestRecord
from specgauge.client.sampling import describe_sampling
from specgauge.analysis.results import (ArmDescription, ArmPoint, CompareResult, CompareSettings, DriftEstimate,
                                     Percentiles, RatePoint, RatioCI, SingleStreamDomain, SpeculationSetup,
                                     StageRuns, SweepPoint)
from specgauge.compare.distribution_samples import check_distribution
from specgauge.compare.per_turn import turn_speedups
from specgauge.compare.plan import (DISTRIBUTION_STAGE, RATE_PREFIX, SINGLE_PREFIX, SPLIT_SINGLE_STAGE,
                                    SWEEP_PREFIX, TRACE_STAGE, split_temperature)
from specgauge.report.export import point_document
from specgauge.report.field_layout import pooled_groups
from specgauge.report.trace_table import trace_verdict
from specgauge.store import Store
from specgauge.store.clock import utc_now


@dataclass
class ArmSamples:
    """One arm's measured requests at one (stage, concurrency), all rounds pooled."""

    records: list[RequestRecord] = field(default_factory=list)
    keys: list[tuple[int, int]] = field(default_factory=list)   # (round, request_index) per record
    output_tokens: int = 0
    window_s: float = 0.0
    num_errors: int = 0
    achieved: list[float] = field(default_factory=list)
    point_accept: list[float] = field(default_factory=list)   # per point: per-request mean, else the server's
    drafts_by_length: dict[str, float] = field(default_factory=dict)   # the server's, over the points
    num_drafts: float | None = None         # the server's drafts and draft tokens over the points (vLLM's counters)
    num_draft_tokens: float | None = None

    @property
    def accept_length(self) -> float | None:
        """Mean per-request acceptance length; else the mean of the points' figures (vLLM /metrics
        counters diffed around the point, when the server reports no per-request value)."""
        per_request = mean_accept_length(self.records)
        if per_request is not None or not self.point_accept:
            return per_request
        return float(np.mean(self.point_accept))

    @property
    def tok_s(self) -> float | None:
        return self.output_tokens / self.window_s if self.window_s > 0 else None


def _samples(store: Store, run_ids: Sequence[int]) -> dict[int, ArmSamples]:
    """Per concurrency, the pooled samples of ``run_ids`` (one run per round)."""
    by_level: dict[int, ArmSamples] = {}
    for round_number, run_id in enumerate(run_ids):
        for point in store.get_points(run_id):
            if point.status != "done" or point.aggregates is None:
                continue
            level = int(point.spec["concurrency"])
            samples = by_level.setdefault(level, ArmSamples())
            aggregate = point.aggregates
            samples.output_tokens += int(aggregate.get("output_tokens") or 0)
            samples.window_s += float(aggregate.get("window_s") or 0.0)
            samples.num_errors += int(aggregate.get("num_errors") or 0)
            if aggregate.get("achieved_concurrency") is not None:
                samples.achieved.append(float(aggregate["achieved_concurrency"]))
            if (accept := point_document(point)["accept_length"]) is not None:
                samples.point_accept.append(float(accept))
            server_spec = aggregate.get("server_spec") or {}
            for length, count in (server_spec.get("drafts_by_length") or {}).items():
                samples.drafts_by_length[length] = samples.drafts_by_length.get(length, 0.0) + float(count)
            if server_spec.get("num_drafts") is not None and server_spec.get("num_draft_tokens") is not None:
                samples.num_drafts = (samples.num_drafts or 0.0) + float(server_spec["num_drafts"])
                samples.num_draft_tokens = (samples.num_draft_tokens or 0.0) + float(server_spec["num_draft_tokens"])
            for record in store.get_requests(point.id):
                samples.records.append(record)
                samples.keys.append((round_number, record.request_index))
    return by_level


def samples_of_runs(store: Store, run_ids: Sequence[int]) -> dict[int, ArmSamples]:
    """Per concurrency, the pooled samples of one arm's runs of a stage (one run per round)."""
    return _samples(store, run_ids)


def split_by_domain(samples: ArmSamples) -> dict[str, ArmSamples]:
    """One single-stream run over a multi-domain suite, split by the requests' domain tags.

    A domain's throughput is its Σ output tokens / Σ E2E: at concurrency 1 requests run back to
    back, so this is the window throughput less the (sub-millisecond) gaps between requests.
    """
    out: dict[str, ArmSamples] = {}
    for key, record in zip(samples.keys, samples.records):
        part = out.setdefault(record.domain, ArmSamples())
        part.records.append(record)
        part.keys.append(key)
        if record.ok:
            part.output_tokens += definitions.output_token_count(record)
            part.window_s += (definitions.e2e_ms(record) or 0.0) / 1000.0
    return out


def _percentiles(values) -> Percentiles:
    summary = summarize(v for v in values if v is not None)
    return Percentiles(mean=summary.mean, p50=summary.p50, p90=summary.p90, p99=summary.p99, count=summary.count)


def _request_tok_s(record: RequestRecord) -> float | None:
    e2e = definitions.e2e_ms(record)
    tokens = definitions.output_token_count(record)
    return tokens / (e2e / 1000.0) if e2e and e2e > 0 and tokens > 0 else None


def _arm_point(samples: ArmSamples) -> ArmPoint:
    ok = [r for r in samples.records if r.ok]
    return ArmPoint(
        output_tok_s=samples.tok_s,
        request_tok_s=_percentiles(map(_request_tok_s, ok)),
        ttft_ms=_percentiles(map(definitions.ttft_ms, ok)),
        tpot_ms=_percentiles(map(definitions.tpot_ms, ok)),
        itl_ms=_percentiles(v for r in ok for v in definitions.itl_ms(r)),
        accept_length=samples.accept_length,
        num_ok=len(ok), num_errors=len(samples.records) - len(ok),
        achieved_concurrency=float(np.mean(samples.achieved)) if samples.achieved else None,
    )


@dataclass(frozen=True)
class PairedPoint:
    """The ratios at one (stage, concurrency)."""

    throughput: RatioEstimate
    request_tok_s: RatioEstimate
    tpot: RatioEstimate
    ttft: RatioEstimate
    pairs: list[tuple[RequestRecord, RequestRecord]]


def _pairs(base: ArmSamples, spec: ArmSamples) -> list[tuple[RequestRecord, RequestRecord]]:
    """Successful requests of both arms with the same (round, request index) and the same prompt."""
    spec_by_key = {k: r for k, r in zip(spec.keys, spec.records) if r.ok}
    out = []
    for key, record in zip(base.keys, base.records):
        other = spec_by_key.get(key)
        if record.ok and other is not None and other.prompt_index == record.prompt_index:
            out.append((record, other))
    return out


def merge_samples(parts: Sequence[ArmSamples]) -> ArmSamples:
    """Several domains' samples of one arm as one, their keys kept apart (part i's rounds offset)."""
    merged = ArmSamples()
    for offset, part in enumerate(parts):
        merged.records += part.records
        merged.keys += [(offset * 1_000_000 + round_number, index) for round_number, index in part.keys]
        merged.output_tokens += part.output_tokens
        merged.window_s += part.window_s
        merged.num_errors += part.num_errors
        merged.point_accept += part.point_accept
    return merged


def _metric_ratio(pairs, base_ok, spec_ok, metric, statistic, rng, resamples) -> RatioEstimate:
    paired = [(metric(b), metric(s)) for b, s in pairs]
    paired = [(b, s) for b, s in paired if b is not None and s is not None]
    if len(paired) >= max(3, len(base_ok) // 2):
        b, s = zip(*paired)
        return ratio_of_statistic(np.array(b), np.array(s), paired=True, rng=rng, statistic=statistic,
                                  resamples=resamples)
    return ratio_of_statistic(np.array([v for v in map(metric, base_ok) if v is not None]),
                              np.array([v for v in map(metric, spec_ok) if v is not None]),
                              paired=False, rng=rng, statistic=statistic, resamples=resamples)


def _tokens_and_seconds(records: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    """Output tokens and end-to-end seconds of each record."""
    tokens = np.array([definitions.output_token_count(r) for r in records], dtype=float)
    seconds = np.array([(definitions.e2e_ms(r) or 0.0) / 1000.0 for r in records])
    return tokens, seconds


def non_degenerate_speedup(pairs: Sequence[tuple[RequestRecord, RequestRecord]], rng: np.random.Generator,
                           resamples: int, drift: DriftEstimate | None = None) -> tuple[RatioCI, int]:
    """The paired throughput ratio over the ``(baseline, speculative)`` pairs in which neither output
    is degenerate (``is_degenerate``), with its interval (drift included), and how many pairs were
    left out. A looping output is easy to draft, so a speedup that holds only on those is no speedup
    on the workload."""
    clean = [(b, s) for b, s in pairs if not (is_degenerate(b.output_text) or is_degenerate(s.output_text))]
    if not clean:
        return RatioCI(), len(pairs)
    bt, bs = _tokens_and_seconds([b for b, _ in clean])
    st, ss = _tokens_and_seconds([s for _, s in clean])
    estimate = ratio_of_sums(bt, bs, st, ss, paired=True, rng=rng, resamples=resamples)
    if drift is not None:
        estimate = with_drift(estimate, drift, rng)
    return estimate.ci, len(pairs) - len(clean)


def paired_point(base: ArmSamples, spec: ArmSamples, rng: np.random.Generator, resamples: int,
                 drift: DriftEstimate | None = None) -> PairedPoint:
    """Ratios at one point; paired by request where most requests pair up, else within each arm.
    ``drift``: every interval is widened by the measured machine drift (analysis/drift.py)."""
    pairs = _pairs(base, spec)
    base_ok = [r for r in base.records if r.ok]
    spec_ok = [r for r in spec.records if r.ok]
    measured = spec.tok_s / base.tok_s if spec.tok_s and base.tok_s else None

    if pairs and len(pairs) >= len(base_ok) // 2:
        bt, bs = _tokens_and_seconds([b for b, _ in pairs])
        st, ss = _tokens_and_seconds([s for _, s in pairs])
        throughput = ratio_of_sums(bt, bs, st, ss, paired=True, rng=rng, resamples=resamples, point_ratio=measured)
    else:
        bt, bs = _tokens_and_seconds(base_ok)
        st, ss = _tokens_and_seconds(spec_ok)
        throughput = ratio_of_sums(bt, bs, st, ss, paired=False, rng=rng, resamples=resamples, point_ratio=measured)
    def drifted(estimate: RatioEstimate) -> RatioEstimate:
        return with_drift(estimate, drift, rng) if drift is not None else estimate

    return PairedPoint(
        throughput=drifted(throughput),
        request_tok_s=drifted(_metric_ratio(pairs, base_ok, spec_ok, _request_tok_s, np.mean, rng, resamples)),
        tpot=drifted(_metric_ratio(pairs, base_ok, spec_ok, definitions.tpot_ms, np.median, rng, resamples)),
        ttft=drifted(_metric_ratio(pairs, base_ok, spec_ok, definitions.ttft_ms, np.median, rng, resamples)),
        pairs=pairs,
    )


def _rate_on(records: Sequence[RequestRecord], prompts: set[int]) -> float | None:
    ok = [r for r in records if r.ok and r.prompt_index in prompts]
    seconds = sum((definitions.e2e_ms(r) or 0.0) for r in ok) / 1000.0
    return sum(definitions.output_token_count(r) for r in ok) / seconds if seconds > 0 else None


def _repeated_measurements(stages: Sequence[StageRuns], cells: dict[str, tuple[ArmSamples, ArmSamples]]
                           ) -> list[tuple[str, float | None, float | None, str]]:
    """A domain's single stream and the sweep's concurrency 1 on the same suite measure the same
    prompts twice, at two times (the default sweep suite is the first domain's): each arm's
    Σ tokens / Σ E2E over the prompts both stages sent, once per stage."""
    suite_of = {s.stage: s.suite.content_hash for s in stages}
    sweep_name = f"{SWEEP_PREFIX}1"
    if sweep_name not in cells:
        return []
    repeats = []
    for name, (base, spec) in cells.items():
        if not name.startswith(SINGLE_PREFIX) or suite_of.get(name) != suite_of.get(sweep_name):
            continue
        what = f"{name[len(SINGLE_PREFIX):]} single stream and the sweep at concurrency 1, same prompts"
        sweep_base, sweep_spec = cells[sweep_name]
        for arm, first, second in (("baseline", base, sweep_base), ("speculative", spec, sweep_spec)):
            prompts = {r.prompt_index for r in first.records} & {r.prompt_index for r in second.records}
            if prompts:
                repeats.append((arm, _rate_on(first.records, prompts), _rate_on(second.records, prompts), what))
    return repeats


def _round_repeats(samples: ArmSamples) -> list[tuple[float | None, float | None]]:
    """One arm's point measured in consecutive rounds: Σ tokens / Σ E2E over the prompts both rounds
    sent, per pair of consecutive rounds (the same arm and prompts at two moments)."""
    return [(first, second) for _, first, second in _numbered_round_repeats(samples)]


def _numbered_round_repeats(samples: ArmSamples) -> list[tuple[int, float | None, float | None]]:
    """:func:`_round_repeats` with the first round's number of each pair."""
    rounds = sorted({r for r, _ in samples.keys})
    by_round = {r: [rec for (k, _), rec in zip(samples.keys, samples.records) if k == r] for r in rounds}
    repeats = []
    for first, second in zip(rounds, rounds[1:]):
        prompts = {r.prompt_index for r in by_round[first]} & {r.prompt_index for r in by_round[second]}
        if prompts:
            repeats.append((first, _rate_on(by_round[first], prompts), _rate_on(by_round[second], prompts)))
    return repeats


def _point_label(stage_name: str, level: int) -> str:
    """A point as the verdict names it: ``single-stream coding``, ``concurrency 16``."""
    if stage_name.startswith(SINGLE_PREFIX):
        return f"single-stream {stage_name[len(SINGLE_PREFIX):]}"
    return f"concurrency {level}"


def _accept_interval(spec: ArmSamples, rng: np.random.Generator, resamples: int) -> tuple[float, float] | None:
    """The bootstrap interval of the speculative arm's mean per-request acceptance length."""
    values = [v for r in spec.records if r.ok and (v := definitions.accept_length(r)) is not None]
    return mean_interval(np.array(values, dtype=float), rng=rng, resamples=resamples)


def _domain_acceptance(spec: ArmSamples) -> float | None:
    """The speculative arm's acceptance in one domain: the server's figure, else tokens per counted chunk."""
    if spec.accept_length is not None:
        return spec.accept_length
    with_counts = counted(spec.records)
    return mean_tokens_per_chunk(with_counts) if with_counts else None


def build_result(store: Store, *, arms: tuple[ArmDescription, ArmDescription], settings: CompareSettings,
                 stages: Sequence[StageRuns], label: str, comparison_id: int | None = None,
                 seed: int = 0, speculation: SpeculationSetup | None = None,
                 vllm_base_config: dict | None = None, depth_at: DepthAt | None = None) -> CompareResult:
    """Compute the whole comparison from the stored runs of ``stages``.

    ``speculation``/``vllm_base_config``: what the speculative arm is (its method and depth, its own
    ``--speculative-config``), so that the settings are written for it; ``depth_at``: the draft
    depth it was set to run per batch size, checked against the drafts the server counted."""
    rng = np.random.default_rng(seed)
    accept_rng = np.random.default_rng([seed, 1])   # acceptance intervals: the speedups' draws stay as they were
    resamples = settings.bootstrap_resamples
    single: list[SingleStreamDomain] = []
    sweep: list[SweepPoint] = []
    replicate_rows: list[np.ndarray | None] = []
    all_base: list[RequestRecord] = []
    all_spec: list[RequestRecord] = []
    lossless_pairs = []
    at_one: dict[str, tuple[ArmSamples, ArmSamples]] = {}   # concurrency-1 samples per stage
    server_accepts: list[float] = []   # the speculative arm's per-point acceptance figures
    cells: list[tuple[str, int, ArmSamples, ArmSamples]] = []
    temperature_of: dict[str, float] = {}   # cell name → the temperature it sampled at
    distribution = None
    trace = None
    rate_points: list[RatePoint] = []
    for stage in stages:
        temperature = settings.temperature if stage.temperature is None else stage.temperature
        if stage.stage == TRACE_STAGE:   # the trace replayed on both arms: its windows, not a point
            trace = trace_windows(*(_run_records(store, ids) for ids in (stage.baseline_run_ids,
                                                                         stage.speculative_run_ids)),
                                  bin_s=settings.trace_bin_s or 10.0, speed=settings.trace_speed or 1.0,
                                  rng=np.random.default_rng([seed, 3]), resamples=resamples)
            continue
        if stage.stage.startswith(RATE_PREFIX):   # an open-loop point: latency ratios at one offered load
            rate_points.append(_rate_point(float(stage.stage[len(RATE_PREFIX):]), store, stage,
                                           np.random.default_rng([seed, 4, len(rate_points)]), resamples))
            continue
        if stage.stage == DISTRIBUTION_STAGE:   # samples for the distribution check, not a speed point
            distribution = check_distribution(store, stage.baseline_run_ids, stage.speculative_run_ids,
                                              temperature=temperature, seed=seed)
            continue
        base_levels = _samples(store, stage.baseline_run_ids)
        spec_levels = _samples(store, stage.speculative_run_ids)
        for level in sorted(set(base_levels) & set(spec_levels)):
            if split_temperature(stage.stage)[0] == SPLIT_SINGLE_STAGE:
                mark = stage.stage[len(SPLIT_SINGLE_STAGE):]   # "@t=0.7" at another temperature, else ""
                base_parts, spec_parts = split_by_domain(base_levels[level]), split_by_domain(spec_levels[level])
                cells += [(SINGLE_PREFIX + d + mark, level, base_parts[d], spec_parts[d])
                          for d in sorted(set(base_parts) & set(spec_parts))]
            else:
                cells.append((stage.stage, level, base_levels[level], spec_levels[level]))
            temperature_of.update({name: temperature for name, *_ in cells if name not in temperature_of})
    for stage_name, level, base, spec in cells:
        if level == 1 and split_temperature(stage_name)[1] is None:   # the same prompts at the same temperature
            at_one[stage_name] = (base, spec)
    repeated = _repeated_measurements(stages, at_one)
    arm_pairs = [pair for _, _, base, spec in cells for arm in (base, spec) for pair in _round_repeats(arm)]
    drift = estimate_drift([(first, second) for _, first, second, _ in repeated] + arm_pairs, settings.rounds)
    accept_by_domain: dict[str, float | None] = {}
    single_cells: dict[str, tuple[ArmSamples, ArmSamples]] = {}
    per_turn: list = []
    by_temperature: list[SingleStreamDomain] = []
    for stage_name, level, base, spec in cells:
        all_base += base.records
        all_spec += spec.records
        server_accepts += spec.point_accept
        point = paired_point(base, spec, rng, resamples, drift)
        if temperature_of[stage_name] == 0:   # sampled outputs differ by chance: text-exact at 0 only
            lossless_pairs += [(stage_name, b.prompt_index, b.request_index, b.output_text, s.output_text)
                               for b, s in point.pairs]
        per_turn += turn_speedups(_point_label(stage_name, level), point.pairs, rng, resamples, drift)
        common = dict(request_tok_s_ratio=point.request_tok_s.ci, tpot_ratio=point.tpot.ci,
                      ttft_ratio=point.ttft.ci, baseline=_arm_point(base), speculative=_arm_point(spec))
        ci = point.throughput.ci
        if stage_name.startswith(SINGLE_PREFIX):
            domain, other_temperature = split_temperature(stage_name[len(SINGLE_PREFIX):])
            row = _single_row(domain, base, spec, point, temperature_of[stage_name], rng, accept_rng, resamples,
                              drift)
            by_temperature.append(row)
            if other_temperature is None:   # the comparison's own temperature: the verdict's rows
                accept_by_domain[domain] = _domain_acceptance(spec)
                single.append(row)
                single_cells[domain] = (base, spec)
        elif stage_name.startswith(SWEEP_PREFIX):
            sweep.append(SweepPoint(
                concurrency=level, baseline_tok_s=base.tok_s, speculative_tok_s=spec.tok_s, ratio=ci.ratio,
                ci_low=ci.ci_low, ci_high=ci.ci_high, ci_method=ci.method, pairs=ci.pairs, **common))
            replicate_rows.append(point.throughput.replicates)
    pooled_rng = np.random.default_rng([seed, 2])   # its own draws: the other figures stay as they were
    pooled = []
    for name, domains in pooled_groups(settings.suite_layout, sorted(single_cells)):
        base = merge_samples([single_cells[d][0] for d in domains])
        spec = merge_samples([single_cells[d][1] for d in domains])
        pooled.append(_single_row(name, base, spec, paired_point(base, spec, pooled_rng, resamples, drift),
                                  settings.temperature, pooled_rng, pooled_rng, resamples, drift))
    replicates = None
    if sweep and all(r is not None for r in replicate_rows):
        replicates = np.stack(replicate_rows, axis=1)   # (B, points)
    crossover = supported_crossover(
        find_crossover([p.concurrency for p in sweep], [p.ratio for p in sweep], replicates), assess_sweep(sweep))
    recommendation = recommend(crossover, sweep, setup=speculation, vllm_base_config=vllm_base_config,
                               rounds=settings.rounds, drift=drift).model_copy(update={"measured_at": describe_sampling(
                                   settings.temperature, settings.top_p, settings.top_k)})
    suites = tuple({s.suite.content_hash: s.suite for s in stages}.values())
    return CompareResult(
        comparison_id=comparison_id, created_at=utc_now(), tool_version=__version__, arms=arms,
        speculative_label=label, settings=settings, suites=suites, stages=tuple(stages),
        single_stream=tuple(single), sweep=tuple(sweep),
        crossover_concurrency=crossover.concurrency if crossover.supported else None, crossover=crossover,
        recommended_disable_above=recommendation.disable_above, recommendation=recommendation, drift=drift,
        # a trace comparison has no sweep to read: its verdict is where along the trace speculation cost
        verdict_lines=tuple(trace_verdict(trace, label)) if trace is not None else
        verdict_lines(label, single, sweep, crossover, drift, settings.rounds),
        losslessness=check_losslessness(lossless_pairs, temperature=0.0 if lossless_pairs else settings.temperature
                                        ).model_copy(
            update={"distribution": distribution}),
        health=domain_acceptance_warnings(accept_by_domain) + temperature_warnings(settings)
        + health_warnings(all_spec, all_base, settings.max_tokens,
                          server_accept=float(np.mean(server_accepts)) if server_accepts else None,
                          domains_checked=any(v is not None for v in accept_by_domain.values()))
        + drift_warnings(repeated)
        + drafted_depth_warnings([PointDrafts(_point_label(name, level), level, spec.drafts_by_length,
                                              spec.num_drafts, spec.num_draft_tokens)
                                  for name, level, _, spec in cells], depth_at)
        + outlying_round_warnings([(_point_label(stage_name, level), arm, first_round, first, second,
                                    level if stage_name.startswith(SWEEP_PREFIX) else None)
                                   for stage_name, level, base, spec in cells
                                   for arm, samples in (("baseline", base), ("speculative", spec))
                                   for first_round, first, second in _numbered_round_repeats(samples)]),
        tokens_per_chunk={"baseline": chunk_histogram(all_base), "speculative": chunk_histogram(all_spec)},
        acceptance_by_position=acceptance_by_position(all_spec),
        acceptance_by_domain={d.domain: d.accept_length for d in single},
        per_turn=tuple(per_turn),
        by_temperature=tuple(by_temperature) if settings.temperatures else (),
        single_stream_pooled=tuple(pooled), trace=trace, rate_points=tuple(rate_points),
    )


def _rate_point(rate: float, store: Store, stage: StageRuns, rng: np.random.Generator, resamples: int) -> RatePoint:
    """Both arms' open-loop runs at ``rate``, paired by (round, request index) and prompt."""
    base, spec = ArmSamples(), ArmSamples()
    for samples, run_ids in ((base, stage.baseline_run_ids), (spec, stage.speculative_run_ids)):
        for round_number, records in enumerate(_run_records(store, run_ids)):
            samples.records += records
            samples.keys += [(round_number, r.request_index) for r in records]
    pairs = _pairs(base, spec)
    base_ok = [r for r in base.records if r.ok]
    spec_ok = [r for r in spec.records if r.ok]

    def ratio(metric) -> RatioCI:
        return _metric_ratio(pairs, base_ok, spec_ok, metric, np.median, rng, resamples).ci

    return RatePoint(rate=rate, pairs=len(pairs), baseline=_arm_point(base), speculative=_arm_point(spec),
                     ttft_ratio=ratio(definitions.ttft_ms), tpot_ratio=ratio(definitions.tpot_ms),
                     e2e_ratio=ratio(definitions.e2e_ms))


def _run_records(store: Store, run_ids: Sequence[int]) -> list[list[RequestRecord]]:
    """Each run's (round's) measured records, its done points pooled."""
    return [[record for point in store.get_points(run_id) if point.status == "done"
             for record in store.get_requests(point.id)] for run_id in run_ids]


def _single_row(domain: str, base: ArmSamples, spec: ArmSamples, point: PairedPoint, temperature: float,
                rng: np.random.Generator, accept_rng: np.random.Generator, resamples: int,
                drift: DriftEstimate | None) -> SingleStreamDomain:
    """One single-stream row: the paired speedup, the non-looping one, both arms' figures, acceptance."""
    ci = point.throughput.ci
    clean, degenerate = non_degenerate_speedup(point.pairs, rng, resamples, drift)
    return SingleStreamDomain(
        domain=domain, baseline_tok_s=base.tok_s, speculative_tok_s=spec.tok_s,
        speedup=ci.ratio, ci_low=ci.ci_low, ci_high=ci.ci_high, ci_method=ci.method, pairs=ci.pairs,
        accept_length=spec.accept_length, non_degenerate=clean, degenerate_pairs=degenerate,
        temperature=temperature, accept_length_ci=_accept_interval(spec, accept_rng, resamples),
        request_tok_s_ratio=point.request_tok_s.ci, tpot_ratio=point.tpot.ci, ttft_ratio=point.ttft.ci,
        baseline=_arm_point(base), speculative=_arm_point(spec))

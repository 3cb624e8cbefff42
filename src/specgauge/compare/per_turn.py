"""Speedups per turn of a suite with multi-turn sessions (load/sessions.py), from a point's request pairs.

Both arms send the same sessions in the same order, so a request pair (same round and request index,
same prompt) is one (session, turn) of both arms: turn t of session s is request ``s * 1000 + t``.
Each arm's later turns carry that arm's own earlier answers (identical at temperature 0 when the
speculative output is lossless). Per turn index: the paired Σ tokens / Σ E2E ratio with its bootstrap
interval (drift included, as every interval of the comparison), and the median-TTFT ratio.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.drift import with_drift
from specgauge.analysis.paired import ratio_of_statistic, ratio_of_sums
from specgauge.analysis.results import DriftEstimate, RatioCI, TurnSpeedup
from specgauge.analysis.summary import summarize
from specgauge.client.records import RequestRecord

def _p50(records: Sequence[RequestRecord]) -> float | None:
    return summarize(v for v in map(definitions.ttft_ms, records) if v is not None).p50


def turn_speedups(point: str, pairs: Sequence[tuple[RequestRecord, RequestRecord]], rng: np.random.Generator,
                  resamples: int, drift: DriftEstimate | None = None) -> list[TurnSpeedup]:
    """One :class:`TurnSpeedup` per turn index among ``pairs`` (none when no pair is a session's turn)."""
    by_turn: dict[int, list[tuple[RequestRecord, RequestRecord]]] = defaultdict(list)
    for base, spec in pairs:
        if base.turn_index is not None and base.turn_index == spec.turn_index:
            by_turn[base.turn_index].append((base, spec))
    out = []
    for turn in sorted(by_turn):
        group = by_turn[turn]
        bases, specs = [b for b, _ in group], [s for _, s in group]
        tokens = [np.array([definitions.output_token_count(r) for r in arm], dtype=float) for arm in (bases, specs)]
        seconds = [np.array([(definitions.e2e_ms(r) or 0.0) / 1000.0 for r in arm]) for arm in (bases, specs)]
        throughput = ratio_of_sums(tokens[0], seconds[0], tokens[1], seconds[1], paired=True, rng=rng,
                                   resamples=resamples)
        if drift is not None:
            throughput = with_drift(throughput, drift, rng)
        ttft = [(definitions.ttft_ms(b), definitions.ttft_ms(s)) for b, s in group]
        ttft = [(b, s) for b, s in ttft if b is not None and s is not None and b > 0]
        ttft_ci = ratio_of_statistic(np.array([b for b, _ in ttft]), np.array([s for _, s in ttft]), paired=True,
                                     rng=rng, statistic=np.median, resamples=resamples).ci
        out.append(TurnSpeedup(point=point, turn=turn, pairs=len(group), throughput=throughput.ci,
                               ttft_ratio=ttft_ci, baseline_ttft_ms_p50=_p50(bases),
                               speculative_ttft_ms_p50=_p50(specs)))
    return out


def per_turn_lines(per_turn: Sequence[TurnSpeedup]) -> list[str]:
    """The terminal's lines: one per (point, turn)."""
    if not per_turn:
        return []

    def ratio(ci: RatioCI) -> str:
        if ci.ratio is None:
            return "-"
        interval = f" [{ci.ci_low:.2f}, {ci.ci_high:.2f}]" if ci.ci_low is not None and ci.ci_high is not None else ""
        return f"{ci.ratio:.2f}x{interval}"

    lines = ["per turn (multi-turn sessions, paired by session and turn; speculative / baseline):"]
    for row in per_turn:
        lines.append(f"  {row.point} turn {row.turn}: throughput {ratio(row.throughput)}, TTFT p50 "
                     f"{ratio(row.ttft_ratio)} ({row.pairs} pairs)")
    return lines

"""The speedup along a replayed trace: both arms replayed the same trace (``compare --trace``),
their requests paired by trace request; per window of trace time, the requests in flight, each
arm's TPOT p50 and p90, and the TPOT ratio (speculative / baseline: below 1, speculation made each
token faster) with a paired bootstrap interval; then the in-flight level above which speculation
cost, read from the trace itself.

A request belongs to the window of its scheduled send (trace seconds since the replay's start,
``--trace-speed`` undone). Requests in flight: the mean over the window of how many of the
baseline arm's requests were between send and end (Σ overlap / window), the load the trace put on
a server without speculation; the speculative arm's is beside it.

The cost level: windows are taken in order of in-flight requests; it is the lowest in-flight level
of a window whose ratio's interval lies wholly above 1 such that no window at or above that level
has its interval wholly below 1 (a clear win above a clear loss means no single level). None when
no window shows a clear cost.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.paired import ratio_of_statistic
from specgauge.analysis.results import TraceComparison, TraceWindow
from specgauge.client.records import RequestRecord

Pair = tuple[RequestRecord, RequestRecord]


def _starts(records: Sequence[RequestRecord]) -> int | None:
    scheduled = [r.scheduled_ns for r in records if r.scheduled_ns is not None]
    return min(scheduled) if scheduled else None


def _in_flight(records: Sequence[RequestRecord], start_ns: int, end_ns: int) -> float:
    busy = 0
    for record in records:
        if record.t_send_ns is None or record.t_end_ns is None:
            continue
        busy += max(0, min(end_ns, record.t_end_ns) - max(start_ns, record.t_send_ns))
    return busy / (end_ns - start_ns)


def _percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def trace_windows(base_runs: Sequence[Sequence[RequestRecord]], spec_runs: Sequence[Sequence[RequestRecord]], *,
                  bin_s: float, speed: float, rng: np.random.Generator, resamples: int) -> TraceComparison:
    """The windows of a trace replayed once per round and arm (module doc). ``base_runs[i]`` and
    ``spec_runs[i]``: round i's records of each arm; requests pair by (round, request index)."""
    rows: dict[int, dict] = {}
    total_pairs = 0
    for base_records, spec_records in zip(base_runs, spec_runs):
        base_zero, spec_zero = _starts(base_records), _starts(spec_records)
        if base_zero is None or spec_zero is None:
            continue
        spec_by_index = {r.request_index: r for r in spec_records if r.ok}
        last = max((r.scheduled_ns for r in base_records if r.scheduled_ns is not None), default=base_zero)
        bin_ns = int(bin_s / speed * 1e9)   # a window of trace time, in replay time
        for window in range((last - base_zero) // bin_ns + 1):
            start, end = base_zero + window * bin_ns, base_zero + (window + 1) * bin_ns
            row = rows.setdefault(window, {"pairs": [], "base_flight": [], "spec_flight": []})
            row["base_flight"].append(_in_flight(base_records, start, end))
            row["spec_flight"].append(_in_flight(spec_records, spec_zero + window * bin_ns,
                                                 spec_zero + (window + 1) * bin_ns))
        for record in base_records:
            other = spec_by_index.get(record.request_index)
            if not record.ok or other is None or record.scheduled_ns is None:
                continue
            total_pairs += 1
            rows[(record.scheduled_ns - base_zero) // bin_ns]["pairs"].append((record, other))
    windows = [_window(index, bin_s, row, rng, resamples) for index, row in sorted(rows.items())]
    level = cost_level(windows)
    share = None
    if level is not None and windows:
        share = sum(1 for w in windows if w.baseline_in_flight >= level) / len(windows)
    lag_ms = {arm: _lag(runs) for arm, runs in (("baseline", base_runs), ("speculative", spec_runs))}
    return TraceComparison(bin_s=bin_s, speed=speed, pairs=total_pairs, windows=tuple(windows),
                           cost_in_flight=level, share_above=share, lag_ms={k: v for k, v in lag_ms.items() if v})


def _lag(runs: Sequence[Sequence[RequestRecord]]) -> dict[str, float]:
    lags = [r.send_lag_ns / 1e6 for records in runs for r in records if r.send_lag_ns is not None]
    if not lags:
        return {}
    return {"p50": float(np.percentile(lags, 50)), "p99": float(np.percentile(lags, 99)), "max": float(max(lags))}


def _window(index: int, bin_s: float, row: dict, rng: np.random.Generator, resamples: int) -> TraceWindow:
    pairs: list[Pair] = row["pairs"]
    tpots = [(definitions.tpot_ms(b), definitions.tpot_ms(s)) for b, s in pairs]
    tpots = [(b, s) for b, s in tpots if b is not None and s is not None]
    base = [b for b, _ in tpots]
    spec = [s for _, s in tpots]
    ratio = ratio_of_statistic(np.array(base), np.array(spec), paired=True, rng=rng, statistic=np.median,
                               resamples=resamples).ci
    return TraceWindow(start_s=index * bin_s, end_s=(index + 1) * bin_s, requests=len(pairs),
                       baseline_in_flight=float(np.mean(row["base_flight"])),
                       speculative_in_flight=float(np.mean(row["spec_flight"])),
                       baseline_tpot_p50_ms=_percentile(base, 50), baseline_tpot_p90_ms=_percentile(base, 90),
                       speculative_tpot_p50_ms=_percentile(spec, 50), speculative_tpot_p90_ms=_percentile(spec, 90),
                       tpot_ratio=ratio)


def cost_level(windows: Sequence[TraceWindow]) -> float | None:
    """The in-flight level above which speculation cost (module doc), or None."""
    ordered = sorted((w for w in windows if w.tpot_ratio.ci_low is not None), key=lambda w: w.baseline_in_flight)
    for i, window in enumerate(ordered):
        if window.tpot_ratio.ci_low > 1 and not any(w.tpot_ratio.ci_high < 1 for w in ordered[i:]):
            return window.baseline_in_flight
    return None

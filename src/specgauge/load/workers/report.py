"""One worker's figures for the point (stored with the point's aggregate) and the warnings that
say a worker, not the server, limited the point."""

from __future__ import annotations

from typing import Any, Sequence

from specgauge.analysis.saturation import SEND_LAG_P50_MS, SEND_LAG_P99_MS
from specgauge.analysis.summary import summarize
from specgauge.client.records import RequestRecord
from specgauge.load.workers.worker import WorkerReady, WorkerReport

LOOP_LAG_P99_MS = 10.0  # a worker whose event loop woke this much late at p99 delayed its reads


def _p(values: Sequence[float], q: int) -> float | None:
    figure = getattr(summarize(values), f"p{q}")
    return None if figure is None else round(figure, 3)


def worker_summary(name: str, ready: WorkerReady, report: WorkerReport, clock_offset_ns: int, go_ns: int,
                   records: Sequence[RequestRecord]) -> dict[str, Any]:
    """What the point stores about one worker: where it ran, when it started after the go (driver
    clock), its window, its slots, and its self-check figures (send lag, event-loop lag, ms)."""
    lags = [r.send_lag_ns / 1e6 for r in records if r.send_lag_ns is not None]
    return {
        "worker": report.worker, "name": name, "host": ready.host, "pid": ready.pid,
        "clock_offset_ms": round(clock_offset_ns / 1e6, 3),
        "start_offset_ms": round((report.window_start_ns + clock_offset_ns - go_ns) / 1e6, 3),
        "window_s": (report.window_end_ns - report.window_start_ns) / 1e9,
        "requests": report.records, "connections": len(ready.connect_ms),
        "send_lag_p50_ms": _p(lags, 50), "send_lag_p99_ms": _p(lags, 99),
        "loop_lag_p50_ms": _p(report.loop_lag_ms, 50), "loop_lag_p99_ms": _p(report.loop_lag_ms, 99),
        "loop_lag_max_ms": round(max(report.loop_lag_ms), 3) if report.loop_lag_ms else None,
    }


def worker_warnings(workers: Sequence[dict[str, Any]]) -> list[str]:
    """One ``client-limited`` sentence per worker whose send lag or event-loop lag is over its bound."""
    warnings = []
    for worker in workers:
        causes = []
        p50, p99, loop = worker.get("send_lag_p50_ms"), worker.get("send_lag_p99_ms"), worker.get("loop_lag_p99_ms")
        if p50 is not None and p99 is not None and (p50 > SEND_LAG_P50_MS or p99 > SEND_LAG_P99_MS):
            causes.append(f"send lag p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                          f"(> {SEND_LAG_P50_MS:g} / {SEND_LAG_P99_MS:g} ms)")
        if loop is not None and loop > LOOP_LAG_P99_MS:
            causes.append(f"event-loop lag p99 {loop:.1f} ms (> {LOOP_LAG_P99_MS:g} ms)")
        if causes:
            warnings.append(f"client-limited on {worker.get('name')}: {'; '.join(causes)}: add workers or machines")
    return warnings

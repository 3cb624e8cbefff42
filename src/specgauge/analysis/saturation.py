"""Did the setting shape the point, or did the client or the server? Warnings per point.

A point's figures describe its setting (concurrency N, or R requests/s) only when that load was
actually offered. Thresholds (docs/bench.md):

- **send lag** (actual − scheduled send; closed loop: the gap between a user's request ending and
  its next one going out): median above ``SEND_LAG_P50_MS`` or 99th percentile above
  ``SEND_LAG_P99_MS`` — the client (its event loop, CPU) sent late, so the server saw less load;
- **achieved concurrency** (closed loop): below ``CONCURRENCY_SHARE`` of the users set — the
  users were idle much of the window (client-side delay, or fewer requests than users);
- **sent rate** (open loop): the measured sends spread over a span more than 1/``SENT_RATE_SHARE``
  of the span the arrival schedule asked for — the client or the ``--max-concurrency`` cap
  could not keep the schedule;
- **completed rate** (open loop): successful requests per second, over the window less one median
  end-to-end latency (the drain after the last arrival), below ``COMPLETED_RATE_SHARE`` of the
  set rate — the server did not keep up with the arrivals.

Open-loop rate checks need at least ``MIN_REQUESTS`` measured requests.
"""

from __future__ import annotations

from typing import Sequence

from specgauge.client.records import RequestRecord

SEND_LAG_P50_MS = 20.0
SEND_LAG_P99_MS = 200.0
CONCURRENCY_SHARE = 0.7
SENT_RATE_SHARE = 0.9
COMPLETED_RATE_SHARE = 0.8
MIN_REQUESTS = 8
TRACE_LAG_P99_MS = 10.0   # a trace replay's send lag, 99th percentile: the client kept the trace's times
NS_PER_S = 1e9


def load_warnings(spec: dict, records: Sequence[RequestRecord], *, send_lag_p50_ms: float | None,
                  send_lag_p99_ms: float | None, achieved_concurrency: float | None, window_s: float,
                  e2e_p50_ms: float | None) -> list[str]:
    """The sentences saying what limited a point other than its setting (module doc); [] when none."""
    warnings = []
    if send_lag_p50_ms is not None and send_lag_p99_ms is not None and (
            send_lag_p50_ms > SEND_LAG_P50_MS or send_lag_p99_ms > SEND_LAG_P99_MS):
        warnings.append(f"client-limited: send lag p50 {send_lag_p50_ms:.1f} ms, p99 {send_lag_p99_ms:.1f} ms "
                        f"(> {SEND_LAG_P50_MS:g} / {SEND_LAG_P99_MS:g} ms): requests went out later than the "
                        f"setting asked")
    if spec.get("mode") == "closed":
        users = spec.get("concurrency") or 1
        if achieved_concurrency is not None and users > 1 and achieved_concurrency < CONCURRENCY_SHARE * users:
            cause = (f"only {len(records)} requests for {users} users" if len(records) < users
                     else "users idle between requests")
            warnings.append(f"achieved concurrency {achieved_concurrency:.1f} of {users} set "
                            f"(< {CONCURRENCY_SHARE:.0%}): {cause}")
        return warnings
    if spec.get("trace_speed") is not None:   # a trace replay: its schedule is the trace's, not a rate
        return warnings + trace_lag_warnings(records)
    rate = spec.get("rate")
    if not rate or len(records) < MIN_REQUESTS:
        return warnings
    scheduled = [r.scheduled_ns for r in records if r.scheduled_ns is not None]
    sent = [r.t_send_ns for r in records if r.t_send_ns is not None]
    if len(sent) >= MIN_REQUESTS and len(scheduled) == len(sent):
        asked_span, sent_span = max(scheduled) - min(scheduled), max(sent) - min(sent)
        if asked_span > 0 and sent_span * SENT_RATE_SHARE > asked_span:
            asked_rate, sent_rate = (len(sent) - 1) * NS_PER_S / asked_span, (len(sent) - 1) * NS_PER_S / sent_span
            cap = spec.get("max_concurrency")
            who = f"the --max-concurrency {cap} cap or the client" if cap else "the client"
            warnings.append(f"sent {sent_rate:.2f} req/s where the schedule asked {asked_rate:.2f} req/s: {who} "
                            f"could not keep the schedule")
    ok = sum(1 for r in records if r.ok)
    steady_s = window_s - (e2e_p50_ms or 0.0) / 1000.0
    if steady_s > 0 and ok / steady_s < COMPLETED_RATE_SHARE * rate:
        warnings.append(f"server-limited: completed {ok / steady_s:.2f} req/s of {rate:g} req/s set "
                        f"(< {COMPLETED_RATE_SHARE:.0%}): the server did not keep up with the arrivals")
    return warnings


def trace_lag_warnings(records: Sequence[RequestRecord]) -> list[str]:
    """A trace replay the client could not keep: its send lag (send time − scaled trace time)
    above ``TRACE_LAG_P99_MS`` at the 99th percentile."""
    lags = sorted(r.send_lag_ns / 1e6 for r in records if r.send_lag_ns is not None)
    if not lags:
        return []
    p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
    late = sum(1 for lag in lags if lag > TRACE_LAG_P99_MS)
    if p99 <= TRACE_LAG_P99_MS:
        return []
    return [f"replay not faithful: the client sent {late} of {len(lags)} requests more than {TRACE_LAG_P99_MS:g} ms "
            f"after their trace time (lag p99 {p99:.1f} ms, max {lags[-1]:.1f} ms); replay slower (--trace-speed) "
            f"or on a less busy client"]

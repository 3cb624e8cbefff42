"""Per-point aggregates: throughput, latency distributions, concurrency, errors, acceptance.

Rules (also in docs/bench.md):

- Failed requests never enter a latency or throughput figure; they are counted by error class,
  and a point whose error rate exceeds ``max_error_rate`` is ``flagged``.
- Output tok/s is the output tokens of the point's successful measured requests divided by the
  measured window (the sum of its windows when a resumed point ran in several segments).
- Achieved concurrency is the time-weighted mean number of measured requests in flight over the
  window: the sum of each request's in-flight time inside the window, over the window's length.
- TTFT, TPOT, E2E and decode tok/s are one value per successful request; ICL and ITL pool every
  gap of every successful request (one value per chunk gap / per token).
- Acceptance length (one definition, :mod:`specgauge.analysis.definitions`) twice: the mean over
  requests (each request weighs the same) and token-weighted (``1 + Σ accepted / Σ verify steps``:
  long completions weigh more); they differ when completions differ in length.
- Effective tokens per step: ``Σ (output tokens − 1) / Σ (chunks − 1)`` — each decode step streams
  one chunk, the first chunk ends the prefill. Share of steps that drafted: the server's drafting
  steps (vLLM ``num_drafts``, which counts only steps that drafted) over those decode steps.
- Prefix-cache hit rate: the share of the point's prompt tokens vLLM's prefix cache served.
- A suite with multi-turn sessions adds ``turns``: the figures per turn index
  (:mod:`specgauge.analysis.turns`), and ``session_notes``: why sessions ended early.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.summary import EMPTY_SUMMARY, Summary, summarize
from specgauge.analysis.turns import turn_figures
from specgauge.client.records import RequestRecord

DEFAULT_MAX_ERROR_RATE = 0.05
NS_PER_S = 1_000_000_000

LATENCY_METRICS = ("ttft_ms", "tpot_ms", "icl_ms", "itl_ms", "e2e_ms")
SUMMARY_FIELDS = (*LATENCY_METRICS, "decode_tok_s", "send_lag_ms", "connect_ms")


@dataclass(frozen=True)
class Window:
    """One stretch of measurement in monotonic ns; a point resumed after a kill has several."""

    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


@dataclass(frozen=True)
class PointAggregate:
    """Everything reported for one load point. ``to_dict``/``from_dict`` round-trip it as JSON data."""

    num_requests: int
    num_ok: int
    num_errors: int
    errors_by_class: dict[str, int]
    error_rate: float | None
    flagged: bool
    flag_reason: str | None
    max_error_rate: float
    window_s: float
    segments: int
    output_tokens: int
    output_tokens_per_s: float | None
    requests_per_s: float | None
    achieved_concurrency: float | None
    ttft_ms: Summary = EMPTY_SUMMARY
    tpot_ms: Summary = EMPTY_SUMMARY
    icl_ms: Summary = EMPTY_SUMMARY
    itl_ms: Summary = EMPTY_SUMMARY
    e2e_ms: Summary = EMPTY_SUMMARY
    decode_tok_s: Summary = EMPTY_SUMMARY
    send_lag_ms: Summary = EMPTY_SUMMARY
    connect_ms: Summary = EMPTY_SUMMARY
    accept_length: float | None = None           # mean of the per-request acceptance lengths
    accept_length_requests: int = 0              # how many requests reported one
    accept_length_token_weighted: float | None = None  # 1 + Σ accepted / Σ verify steps over those requests
    tokens_per_step: float | None = None         # effective: Σ (output tokens − 1) / Σ (chunks − 1)
    drafted_step_share: float | None = None      # server's drafting steps / decode steps (vLLM counters)
    prefix_cache_hit_rate: float | None = None   # prompt tokens vLLM's prefix cache served, of those looked up
    server_spec: dict[str, Any] | None = None    # server-side counters for the point, with "scope"
    token_count_source: str | None = None        # the one source, or "mixed"
    token_count_sources: dict[str, int] = field(default_factory=dict)
    load_warnings: list[str] = field(default_factory=list)   # what limited the point besides its setting
    workers: list[dict[str, Any]] = field(default_factory=list)  # a split point: one summary per worker
    turns: list[dict[str, Any]] = field(default_factory=list)    # sessions: figures per turn index
    session_notes: list[str] = field(default_factory=list)       # sessions: why some ended early

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for name in ("workers", "turns", "session_notes"):
            if not data[name]:  # a one-process point of single requests stores what it always stored
                del data[name]
        for name in SUMMARY_FIELDS:
            data[name] = getattr(self, name).to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PointAggregate":
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for name in SUMMARY_FIELDS:
            if isinstance(values.get(name), dict):
                values[name] = Summary.from_dict(values[name])
        return cls(**values)


def server_spec_as_dict(server_spec: Any) -> dict[str, Any] | None:
    """Normalise the runner's server-side speculation counters (dataclass, pydantic, mapping)."""
    if server_spec is None:
        return None
    if dataclasses.is_dataclass(server_spec) and not isinstance(server_spec, type):
        return dataclasses.asdict(server_spec)
    if hasattr(server_spec, "model_dump"):
        return server_spec.model_dump(mode="json")
    if hasattr(server_spec, "to_dict"):
        return server_spec.to_dict()
    return dict(server_spec)


def _in_flight_ns(records: Iterable[RequestRecord], windows: Sequence[Window]) -> int:
    total = 0
    for record in records:
        if record.t_send_ns is None or record.t_end_ns is None:
            continue
        for window in windows:
            overlap = min(record.t_end_ns, window.end_ns) - max(record.t_send_ns, window.start_ns)
            if overlap > 0:
                total += overlap
    return total


def _flag(num_ok: int, num_errors: int, max_error_rate: float) -> tuple[float | None, bool, str | None]:
    total = num_ok + num_errors
    if total == 0:
        return None, True, "no measured requests"
    rate = num_errors / total
    if rate > max_error_rate:
        return rate, True, f"error rate {rate:.0%} > {max_error_rate:.0%}"
    return rate, False, None


def window_from_records(records: Sequence[RequestRecord]) -> Window | None:
    """The span from the first send to the last end: the window of a segment cut short by a kill."""
    sends = [r.t_send_ns for r in records if r.t_send_ns is not None]
    ends = [r.t_end_ns for r in records if r.t_end_ns is not None]
    if not sends or not ends:
        return None
    return Window(min(sends), max(ends))


def aggregate_point(
    records: Sequence[RequestRecord],
    windows: Sequence[Window],
    *,
    connect_ms: Sequence[float] = (),
    send_lag_ms: Sequence[float] | None = None,
    server_spec: Any = None,
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE,
) -> PointAggregate:
    """Aggregate the measured (non-warm-up) ``records`` of one point over its ``windows``.

    ``send_lag_ms`` defaults to the records' own scheduled-vs-actual send lag.
    """
    ok = [r for r in records if r.ok]
    errors = Counter(r.error_class.value for r in records if not r.ok)
    num_errors = sum(errors.values())
    error_rate, flagged, flag_reason = _flag(len(ok), num_errors, max_error_rate)

    window_ns = sum(w.duration_ns for w in windows)
    window_s = window_ns / NS_PER_S
    output_tokens = sum(definitions.output_token_count(r) for r in ok)
    per_s = (lambda n: n / window_s) if window_s > 0 else (lambda n: None)

    def per_request(metric) -> Summary:
        return summarize(v for v in map(metric, ok) if v is not None)

    def pooled(metric) -> Summary:
        return summarize(v for r in ok for v in metric(r))

    if send_lag_ms is None:
        send_lag_ms = [r.send_lag_ns / definitions.NS_PER_MS for r in records if r.send_lag_ns is not None]
    accept_lengths = [a for a in map(definitions.accept_length, ok) if a is not None]
    sources = Counter(r.token_count_source.value for r in ok)
    spec_dict = server_spec_as_dict(server_spec)
    decode_steps = sum(max(0, len(r.chunk_times_ns) - 1) for r in ok)
    decode_tokens = sum(max(0, definitions.output_token_count(r) - 1) for r in ok)
    server_drafts = (spec_dict or {}).get("num_drafts") if (spec_dict or {}).get("scope") == "point" else None

    return PointAggregate(
        num_requests=len(records),
        num_ok=len(ok),
        num_errors=num_errors,
        errors_by_class=dict(sorted(errors.items())),
        error_rate=error_rate,
        flagged=flagged,
        flag_reason=flag_reason,
        max_error_rate=max_error_rate,
        window_s=window_s,
        segments=len(windows),
        output_tokens=output_tokens,
        output_tokens_per_s=per_s(output_tokens),
        requests_per_s=per_s(len(ok)),
        achieved_concurrency=(_in_flight_ns(records, windows) / window_ns) if window_ns > 0 else None,
        ttft_ms=per_request(definitions.ttft_ms),
        tpot_ms=per_request(definitions.tpot_ms),
        icl_ms=pooled(definitions.icl_ms),
        itl_ms=pooled(definitions.itl_ms),
        e2e_ms=per_request(definitions.e2e_ms),
        decode_tok_s=per_request(definitions.decode_tok_s),
        send_lag_ms=summarize(send_lag_ms),
        connect_ms=summarize(connect_ms),
        accept_length=float(np.mean(accept_lengths)) if accept_lengths else None,
        accept_length_requests=len(accept_lengths),
        accept_length_token_weighted=definitions.token_weighted_accept_length(ok),
        tokens_per_step=decode_tokens / decode_steps if decode_steps else None,
        drafted_step_share=(min(1.0, server_drafts / decode_steps) if server_drafts is not None and decode_steps
                            else None),
        prefix_cache_hit_rate=(spec_dict or {}).get("prefix_cache_hit_rate"),
        server_spec=spec_dict,
        token_count_source=(next(iter(sources)) if len(sources) == 1 else "mixed") if sources else None,
        token_count_sources=dict(sorted(sources.items())),
        turns=turn_figures(records),
    )

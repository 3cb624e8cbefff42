"""The verdict in plain words, and the threshold above which to switch speculation off.

Threshold rule (docs/compare.md): speculate while at most N requests run, N = the interpolated
crossover floored (so N ≥ the largest tested concurrency where speculation still paid). When it
pays at every tested concurrency: no threshold (None). When it never pays: 0 (switch it off).
"""

from __future__ import annotations

import math
from typing import Sequence

from specgauge.analysis.results import Crossover, Recommendation, ServerSetting, SingleStreamDomain, SweepPoint

THRESHOLD_RULE = ("speculate while at most N requests run; N = the crossover concurrency "
                  "(interpolated in log-concurrency) rounded down; none when speculation pays at every tested "
                  "concurrency, 0 when it never pays")


def disable_threshold(crossover: Crossover) -> int | None:
    """N for the settings, by :data:`THRESHOLD_RULE`."""
    if crossover.kind == "crosses" and crossover.concurrency is not None:
        return max(1, math.floor(crossover.concurrency))
    if crossover.kind == "always_below":
        return 0
    return None


def server_settings(threshold: int | None) -> tuple[ServerSetting, ...]:
    """How to apply ``threshold`` on SGLang, vLLM and the embedded engine."""
    if threshold is None:
        return ()
    if threshold == 0:
        return (
            ServerSetting(server="sglang", setting="omit --speculative-algorithm",
                          note="speculation did not pay at any tested concurrency"),
            ServerSetting(server="vllm", setting="omit --speculative-config",
                          note="speculation did not pay at any tested concurrency"),
            ServerSetting(server="specgauge", setting="--speculative-algorithm NONE",
                          note="speculation did not pay at any tested concurrency"),
        )
    n = threshold
    return (
        ServerSetting(
            server="sglang", setting=f"--max-running-requests {n} (on the speculative server)",
            note="upstream SGLang has no flag that switches speculation off by batch size (its --speculative-* "
                 "flags fix the algorithm and draft depth for the server's lifetime); the nearest is to cap the "
                 f"speculative server at {n} running requests and route the overflow to a server without "
                 "speculation"),
        ServerSetting(
            server="vllm",
            setting=f'--speculative-config \'{{"method": "eagle3", "model": "DRAFT", "num_speculative_tokens": K, '
                    f'"num_speculative_tokens_per_batch_size": [[1, {n}, K], [{n + 1}, MAX_NUM_SEQS, 0]]}}\'',
            note=f"newer vLLM: a per-batch-size schedule of (range_start, range_end, num_speculative_tokens) "
                 f"entries with inclusive ranges, 0 draft tokens (allowed) above {n}; K your draft depth, "
                 f"MAX_NUM_SEQS your --max-num-seqs; older (V0) engines: "
                 f"--speculative-disable-by-batch-size {n} (speculation off for new requests once more than {n} "
                 f"are enqueued)"),
        ServerSetting(server="specgauge", setting=f"--speculative-disable-above {n}",
                      note=f"the embedded engine speculates only while at most {n} requests run"),
    )


def recommend(crossover: Crossover) -> Recommendation:
    """The threshold and its settings for every server."""
    threshold = disable_threshold(crossover)
    return Recommendation(disable_above=threshold, rule=THRESHOLD_RULE, settings=server_settings(threshold))


def _interval(low: float | None, high: float | None, fmt: str = "{:.2f}") -> str:
    if low is None and high is None:
        return ""
    shown_low = "?" if low is None else fmt.format(low)
    shown_high = "beyond the tested range" if high is None else fmt.format(high)
    return f" [{shown_low}, {shown_high}]"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def verdict_lines(label: str, single_stream: Sequence[SingleStreamDomain], sweep: Sequence[SweepPoint],
                  crossover: Crossover) -> tuple[str, ...]:
    """Plain-words summary: single-stream speedup per domain, the crossover, the cost at the top."""
    lines: list[str] = []
    def side(d: SingleStreamDomain) -> int:
        """+1 faster, -1 slower, 0 when the interval spans 1 (no clear difference)."""
        if d.ci_low is not None and d.ci_high is not None and d.ci_low <= 1 <= d.ci_high:
            return 0
        return 1 if d.speedup >= 1 else -1

    measured = [d for d in single_stream if d.speedup is not None]
    faster = [f"{d.domain} {d.speedup:.2f}x{_interval(d.ci_low, d.ci_high)}" for d in measured if side(d) == 1]
    slower = [f"{d.domain} {1 / d.speedup:.2f}x (ratio {d.speedup:.2f}{_interval(d.ci_low, d.ci_high)})"
              for d in measured if side(d) == -1]
    unclear = [f"{d.domain} (ratio {d.speedup:.2f}{_interval(d.ci_low, d.ci_high)})" for d in measured if side(d) == 0]
    clauses = []
    if faster:
        clauses.append("speeds up single-stream " + _and(faster))
    if slower:
        clauses.append(("slows down single-stream " if not faster else "slows down ") + _and(slower))
    if unclear:
        clauses.append("makes no clear difference to single-stream " + _and(unclear))
    if clauses:
        lines.append(f"{label} " + "; ".join(clauses) + ".")
    usable = [p for p in sweep if p.ratio is not None]
    if crossover.kind == "crosses":
        lines.append(f"The baseline overtakes {label} at ≈ {crossover.concurrency:.1f} concurrent requests"
                     f"{_interval(crossover.ci_low, crossover.ci_high, '{:.1f}')} (between {crossover.between[0]} "
                     f"and {crossover.between[1]}).")
    elif crossover.kind == "never" and usable:
        lines.append(f"{label} pays at every tested concurrency (up to {usable[-1].concurrency}).")
    elif crossover.kind == "always_below" and usable:
        first = usable[0]
        lines.append(f"{label} does not raise throughput at any tested concurrency (at {first.concurrency}: ratio "
                     f"{first.ratio:.2f}{_interval(first.ci_low, first.ci_high)}).")
    elif usable:
        lines.append("Too few sweep points to place a crossover.")
    if usable:
        top = usable[-1]
        if top.ratio < 1:
            lines.append(f"At {top.concurrency} concurrent requests speculation costs {1 / top.ratio:.2f}x throughput "
                         f"(ratio {top.ratio:.2f}{_interval(top.ci_low, top.ci_high)}).")
        else:
            lines.append(f"At {top.concurrency} concurrent requests the throughput ratio is {top.ratio:.2f}x"
                         f"{_interval(top.ci_low, top.ci_high)}.")
    return tuple(lines)

"""``compare --trace`` in the terminal: one line per window of trace time, then where
speculation cost (analysis/trace_windows.py)."""

from __future__ import annotations

from specgauge.analysis.results import TraceComparison
from specgauge.analysis.saturation import TRACE_LAG_P99_MS
from specgauge.report.formatting import ratio_with_ci


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def trace_lines(trace: TraceComparison | None, label: str = "speculation") -> list[str]:
    """The windows and the cost level as plain lines; [] without a trace comparison."""
    if trace is None:
        return []
    lines = [f"the trace on both arms (x{trace.speed:g}, {trace.pairs} request pairs), per {trace.bin_s:g} s of "
             f"trace time: in flight (baseline / {label}), TPOT p50 ms (baseline / {label}), TPOT ratio "
             f"{label} / baseline [95% CI] (below 1: {label} faster)"]
    for w in trace.windows:
        ratio = w.tpot_ratio
        lines.append(f"  {w.start_s:7.1f}-{w.end_s:<7.1f} s  {w.requests:4d} req  in flight "
                     f"{w.baseline_in_flight:5.1f} / {w.speculative_in_flight:5.1f}  TPOT "
                     f"{_ms(w.baseline_tpot_p50_ms)} / {_ms(w.speculative_tpot_p50_ms)}  ratio "
                     f"{ratio_with_ci(ratio.ratio, ratio.ci_low, ratio.ci_high)}")
    lines += trace_verdict(trace, label)
    for arm, lag in trace.lag_ms.items():
        faithful = "" if lag["p99"] <= TRACE_LAG_P99_MS else f" (above {TRACE_LAG_P99_MS:g} ms: not a faithful replay)"
        lines.append(f"{arm} arm's client lag (send - trace time): p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, "
                     f"max {lag['max']:.2f} ms{faithful}")
    return lines


def trace_verdict(trace: TraceComparison, label: str = "speculation") -> list[str]:
    """Where along the trace speculation cost: one sentence (the comparison's verdict line)."""
    costly = [w for w in trace.windows if w.tpot_ratio.ci_low is not None and w.tpot_ratio.ci_low > 1]
    if trace.cost_in_flight is None and not costly:
        return [f"{label} cost in no window of the trace (no TPOT ratio wholly above 1)"]
    if trace.cost_in_flight is None:
        levels = sorted(w.baseline_in_flight for w in costly)
        return [f"{label} cost in {len(costly)} of {len(trace.windows)} windows ({levels[0]:.1f}-{levels[-1]:.1f} "
                f"requests in flight) but won clearly at a higher load: no single in-flight level above which it cost"]
    share = f"{trace.share_above:.0%}" if trace.share_above is not None else "?"
    return [f"{label} cost from {trace.cost_in_flight:.1f} requests in flight (baseline arm's load); {share} of the "
            f"trace's windows were at or above it"]

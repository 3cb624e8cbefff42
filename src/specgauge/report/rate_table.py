"""``compare --rates`` in the terminal: each open-loop point's paired latency ratios."""

from __future__ import annotations

from typing import Sequence

from specgauge.analysis.results import RatePoint
from specgauge.report.formatting import ratio_with_ci


def _p50(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def rate_lines(points: Sequence[RatePoint], label: str = "speculation") -> list[str]:
    """One line per open-loop point; [] without any."""
    if not points:
        return []
    lines = [f"open loop, both arms at the same arrivals (paired by request): p50 ms baseline / {label}, and "
             f"{label} / baseline [95% CI] (below 1: {label} faster)"]
    for point in points:
        b, s, e2e = point.baseline, point.speculative, point.e2e_ratio
        lines.append(f"  {point.rate:g} req/s  {point.pairs} pairs  TTFT {_p50(b.ttft_ms.p50)} / {_p50(s.ttft_ms.p50)} "
                     f"{ratio_with_ci(point.ttft_ratio.ratio, point.ttft_ratio.ci_low, point.ttft_ratio.ci_high)}  "
                     f"TPOT {_p50(b.tpot_ms.p50)} / {_p50(s.tpot_ms.p50)} "
                     f"{ratio_with_ci(point.tpot_ratio.ratio, point.tpot_ratio.ci_low, point.tpot_ratio.ci_high)}  "
                     f"E2E ratio {ratio_with_ci(e2e.ratio, e2e.ci_low, e2e.ci_high)}")
    return lines

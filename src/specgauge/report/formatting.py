"""Numbers as the reports write them, the same in the terminal and in HTML."""

from __future__ import annotations

from typing import Literal

RatioOutcome = Literal["better", "worse", "unclear"]


def number(value: float | None, spec: str = ",.1f") -> str:
    """``value`` formatted with ``spec``; an en dash when there is none."""
    return "–" if value is None else format(value, spec)


def ratio_outcome(ratio: float | None, ci_low: float | None, ci_high: float | None) -> RatioOutcome:
    """``better`` when the whole CI is above 1, ``worse`` when it is all below; else ``unclear``.

    Without a CI only the ratio itself decides, so a ratio with no interval is never called
    ``unclear`` by accident of missing data.
    """
    if ratio is None:
        return "unclear"
    low = ratio if ci_low is None else ci_low
    high = ratio if ci_high is None else ci_high
    if low > 1.0:
        return "better"
    if high < 1.0:
        return "worse"
    return "unclear"


def ratio_with_ci(ratio: float | None, ci_low: float | None, ci_high: float | None) -> str:
    """``1.80× [1.70, 1.90]`` (no brackets when there is no interval)."""
    if ratio is None:
        return "–"
    interval = f" [{ci_low:.2f}, {ci_high:.2f}]" if ci_low is not None and ci_high is not None else ""
    return f"{ratio:.2f}×{interval}"


def describe_point(spec: dict) -> str:
    """A short label for a stored point spec: ``c=8`` or ``rate=2/s`` (``≤16`` when capped)."""
    if spec.get("mode") == "open" and spec.get("trace_speed") is not None:
        cap = f" ≤{spec['max_concurrency']}" if spec.get("max_concurrency") else ""
        return f"trace x{spec['trace_speed']:g}{cap}"
    if spec.get("mode") == "open":
        cap = f" ≤{spec['max_concurrency']}" if spec.get("max_concurrency") else ""
        return f"rate={spec.get('rate'):g}/s{cap}"
    return f"c={spec.get('concurrency')}"

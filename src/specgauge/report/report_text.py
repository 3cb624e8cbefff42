"""The report's sentences: headline, crossover, goodput, definitions (shared by the terminal and HTML)."""

from __future__ import annotations

import re

from specgauge.analysis import definitions
from specgauge.analysis.definitions import GOODPUT_METRICS
from specgauge.analysis.results import Goodput
from specgauge.report.formatting import number
from specgauge.report.report_data import ReportData

DEFINITIONS_SOURCE = "specgauge.analysis.definitions"
_BULLET = re.compile(r"^- (?P<term>[^:]+): (?P<text>.*)$")


def metric_definitions() -> list[tuple[str, str]]:
    """(term, definition) pairs from :mod:`specgauge.analysis.definitions`' docstring, where
    they are written once; continuation lines are joined to their bullet."""
    pairs: list[tuple[str, str]] = []
    for line in (definitions.__doc__ or "").splitlines():
        match = _BULLET.match(line.strip())
        if match:
            pairs.append((match["term"].strip(), match["text"].strip()))
        elif pairs and line.startswith("  ") and line.strip():
            term, text = pairs[-1]
            pairs[-1] = (term, f"{text} {line.strip()}")
    return pairs


def crossover_sentence(data: ReportData) -> str | None:
    """What the sweep supports about where the baseline overtakes speculation (``None`` for a one-arm
    report); the rules are :mod:`specgauge.analysis.verdict`'s."""
    from specgauge.analysis.verdict import crossover_sentence as sentence

    result = data.comparison
    if result is None:
        return None
    return sentence(result.speculative_label, result.sweep, result.crossover)


def recommendation_sentence(data: ReportData) -> str | None:
    """The threshold as one instruction, uncertain where the intervals do not settle it (``None``
    for a one-arm report)."""
    from specgauge.analysis.verdict import recommendation_sentence as sentence

    if data.comparison is None:
        return None
    return sentence(data.comparison.recommendation)


def recommendation_lines(data: ReportData) -> tuple[str, ...]:
    """The recommendation, its schedule first and the threshold as the simple case (empty for a
    one-arm report); the rules are :mod:`specgauge.analysis.verdict`'s."""
    from specgauge.analysis.verdict import recommendation_lines as lines

    if data.comparison is None:
        return ()
    return lines(data.comparison.recommendation)


def headline(data: ReportData) -> list[str]:
    """The lines at the top of the report: the verdict, or for one run its main figures."""
    if data.comparison is not None:
        return list(data.comparison.verdict_lines)
    arm = data.arms[0]
    measured = [p for p in arm.points if p.output_tokens_per_s is not None]
    if not measured:
        return [f"{arm.label}: no finished closed-loop point to report."]
    lines = []
    single = arm.point_at(1)
    if single is not None and single.output_tokens_per_s is not None:
        lines.append(f"Single stream: {number(single.output_tokens_per_s)} tok/s, "
                     f"TTFT p50 {number(single.ttft_ms.get('p50'))} ms, "
                     f"TPOT p50 {number(single.tpot_ms.get('p50'), ',.2f')} ms.")
    peak = max(measured, key=lambda p: p.output_tokens_per_s)
    lines.append(f"Peak throughput {number(peak.output_tokens_per_s)} tok/s at {peak.concurrency} concurrent "
                 f"request(s) (of {', '.join(str(p.concurrency) for p in arm.points)} tested).")
    accept = [p.accept_length for p in measured if p.accept_length is not None]
    if accept:
        low, high = f"{min(accept):.2f}", f"{max(accept):.2f}"
        span = low if low == high else f"{low}–{high}"
        lines.append(f"Acceptance length {span} tokens per verify step (incl. the bonus token).")
    return lines


def goodput_slos(goodput: Goodput) -> str:
    """The SLOs as given on the command line: ``ttft:500 tpot:400``."""
    return " ".join(f"{k}:{goodput.slo_ms[k]:g}" for k in GOODPUT_METRICS if k in goodput.slo_ms)


def goodput_lines(goodput: Goodput | None) -> list[str]:
    """Per stage, each arm's goodput beside its completed requests/s, and the ratio (none without
    ``--goodput``)."""
    if goodput is None:
        return []

    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    lines = [f"goodput [{goodput_slos(goodput)}] (req/s meeting every SLO, of req/s completed):"]
    for row in goodput.stages:
        arms = ", ".join(f"{name} {shown(arm.request_goodput)} of {shown(arm.request_throughput)}"
                         for name, arm in (("baseline", row.baseline), ("speculative", row.speculative)))
        ratio = "-" if row.goodput_ratio is None else f"{row.goodput_ratio:.2f}x"
        lines.append(f"  {row.stage}: {arms}; goodput ratio {ratio}")
    return lines

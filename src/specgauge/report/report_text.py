"""The report's sentences: headline, crossover, goodput, definitions (shared by the terminal and HTML)."""

from __future__ import annotations

import re

from specgauge.analysis import definitions
from specgauge.analysis.definitions import GOODPUT_METRICS
from specgauge.analysis.results import DistributionCheck, Goodput, SingleStreamDomain
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


def distribution_lines(check: DistributionCheck | None) -> list[str]:
    """The distribution check (``compare --samples-per-prompt``) in words: no detectable difference
    with the shift it would have detected, or the positions and tokens that differ; and its cost."""
    if check is None:
        return []
    if not check.checked:
        return [f"losslessness above temperature 0: not checked ({check.reason})"]
    where = (f"{check.prompts} prompt(s) x {check.samples_per_prompt} samples per arm at temperature "
             f"{number(check.temperature, 'g')}, first {check.positions_tested} {check.tokens.split(' ')[0]}; "
             f"p = {check.p_value:.3g}")
    cost = (f"it cost {check.requests} requests" + (f" and {check.seconds / 60:.1f} arm-minutes"
                                                    if check.seconds is not None else ""))
    if not check.differs:
        return [f"losslessness above temperature 0: no detectable difference ({check.samples} samples: {where}; a "
                f"shift of {check.min_detectable_shift:.2f} in a token's probability would have been detected with "
                f"80% power); {cost}"]
    lines = [f"losslessness above temperature 0: speculation changes the output distribution ({where}); {cost}"]
    for example in check.examples:
        lines.append(f"  prompt {example.prompt_index}, position {example.position}: {example.token!r} in "
                     f"{example.baseline_share:.0%} of baseline samples, {example.speculative_share:.0%} of "
                     f"speculative ones (position p = {example.p_value:.3g}, Holm-adjusted)")
    return lines


def temperature_lines(rows: tuple[SingleStreamDomain, ...]) -> list[str]:
    """``compare --temperatures``: single-stream speedup and acceptance per domain x temperature, each
    with its 95% interval (none without --temperatures)."""
    if not rows:
        return []

    def interval(low: float | None, high: float | None) -> str:
        return "" if low is None or high is None else f" [{low:.2f}, {high:.2f}]"

    lines = ["single stream per domain and temperature (speedup, acceptance length; 95% intervals):"]
    for row in sorted(rows, key=lambda r: (r.domain, r.temperature or 0.0)):
        speedup = "-" if row.speedup is None else f"{row.speedup:.2f}x{interval(row.ci_low, row.ci_high)}"
        accept = ("-" if row.accept_length is None else
                  f"{row.accept_length:.2f}{interval(*(row.accept_length_ci or (None, None)))}")
        shown = number(row.temperature, "g")
        lines.append(f"  {row.domain:<14} t={shown:<5} speedup {speedup:<22} acceptance {accept}")
    return lines

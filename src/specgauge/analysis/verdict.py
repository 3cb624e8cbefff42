"""The verdict in plain words, claiming only what the intervals support (docs/compare.md, "Verdict rules").

Rules:

- A ratio with fewer than :data:`MIN_PAIRS` request pairs behind it, or without an interval, gets
  no speedup sentence: it is listed as "too few requests: N".
- A ratio whose 95% interval (request spread and measured machine drift, analysis/drift.py) lies
  wholly above 1 is "faster"; wholly below 1 "slower"; an interval spanning 1 is "no clear difference".
- The sweep: "pays at every tested concurrency" only when every point is clearly above 1; "does not
  pay at any" only when every point is clearly below 1; a crossover only when, read from low to high
  concurrency, the points go from clearly above 1 to clearly below 1 and never back (unclear points
  may lie between), its place interpolated in log-concurrency (analysis/crossover.py) and kept
  between the last point clearly above and the first clearly below.
- Threshold: N = that crossover rounded down; none (no threshold) when every point is clearly above
  1; 0 when every point is clearly below. Otherwise the recommendation is uncertain: with a clear
  loss somewhere, N = the largest tested concurrency below the first clear loss (0 when the lowest
  point is already a clear loss); without one, no threshold. An uncertain recommendation says why
  and what to run to settle it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

from specgauge.analysis.server_settings import (DEFAULT_DEPTH, DEFAULT_MAX_NUM_SEQS, server_settings,
                                                threshold_schedule)
from specgauge.analysis.results import (Crossover, DriftEstimate, Recommendation, SingleStreamDomain,
                                     SpeculationSetup, SweepPoint)

MIN_PAIRS = 5   # request pairs (per arm when unpaired) a ratio needs before any sentence claims it

THRESHOLD_RULE = ("speculate while at most N requests run; N = the crossover concurrency (interpolated in "
                  "log-concurrency) rounded down, stated only when a point clearly above 1 (95% interval above 1) "
                  "lies below it and a point clearly below 1 above it; none when every tested concurrency is clearly "
                  "above 1, 0 when every one is clearly below; otherwise uncertain")

Call = Literal["faster", "slower", "unclear", "too_few"]


def call(ratio: float | None, low: float | None, high: float | None, pairs: int | None) -> Call:
    """What one ratio supports: ``faster``/``slower`` (interval wholly above/below 1), ``unclear``
    (the interval spans 1), ``too_few`` (fewer than :data:`MIN_PAIRS` pairs, or no interval)."""
    if ratio is None or low is None or high is None or (pairs is not None and pairs < MIN_PAIRS):
        return "too_few"
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    return "unclear"


def point_call(p: SweepPoint | SingleStreamDomain) -> Call:
    ratio = p.speedup if isinstance(p, SingleStreamDomain) else p.ratio
    return call(ratio, p.ci_low, p.ci_high, p.pairs)


_SIDE = {"faster": 1, "unclear": 0, "slower": -1}


@dataclass(frozen=True)
class SweepAssessment:
    """What the sweep supports. ``kind``: ``pays_everywhere``, ``never_pays``, ``crosses``,
    ``mixed`` (anything else with at least one usable point) or ``nothing`` (no usable point)."""

    kind: Literal["pays_everywhere", "never_pays", "crosses", "mixed", "nothing"]
    points: tuple[tuple[SweepPoint, Call], ...]

    def at(self, what: Call) -> list[SweepPoint]:
        return [p for p, c in self.points if c == what]


def assess_sweep(sweep: Sequence[SweepPoint]) -> SweepAssessment:
    """The sweep's calls and what they support together (module docstring)."""
    points = tuple((p, point_call(p)) for p in sorted(sweep, key=lambda p: p.concurrency))
    calls = [c for _, c in points]
    sides = [_SIDE[c] for c in calls if c != "too_few"]
    if not sides:
        return SweepAssessment("nothing", points)
    if all(c == "faster" for c in calls):
        return SweepAssessment("pays_everywhere", points)
    if all(c == "slower" for c in calls):
        return SweepAssessment("never_pays", points)
    monotone = all(a >= b for a, b in zip(sides, sides[1:]))
    if monotone and 1 in sides and -1 in sides:
        return SweepAssessment("crosses", points)
    return SweepAssessment("mixed", points)


def supported_crossover(crossover: Crossover, assessment: SweepAssessment) -> Crossover:
    """``crossover`` marked supported only when the assessment is ``crosses``."""
    return crossover.model_copy(update={"supported": crossover.kind == "crosses" and assessment.kind == "crosses"})


def _threshold(crossover: Crossover, assessment: SweepAssessment) -> tuple[int | None, bool]:
    """``(N, confident)`` by the module's rules."""
    if assessment.kind == "pays_everywhere":
        return None, True
    if assessment.kind == "never_pays":
        return 0, True
    faster, slower = assessment.at("faster"), assessment.at("slower")
    if assessment.kind == "crosses":
        last_faster = max(p.concurrency for p in faster if p.concurrency < min(q.concurrency for q in slower))
        first_slower = min(p.concurrency for p in slower)
        estimate = math.floor(crossover.concurrency) if crossover.kind == "crosses" and crossover.concurrency else \
            last_faster
        return min(max(estimate, last_faster), first_slower - 1), True
    if slower:
        first_slower = min(p.concurrency for p in slower)
        below = [p.concurrency for p, c in assessment.points if p.concurrency < first_slower]
        return (max(below) if below else 0), False
    return None, False


def _settle_hint(rounds: int, drift: DriftEstimate | None) -> str:
    more_rounds = f"--rounds {max(3, rounds + 1)}"
    hint = (f"rerun with {more_rounds} and more requests per point (--num-requests, or --single-stream-requests "
            f"and --min-requests)")
    if drift is not None and drift.per_measurement is not None and drift.per_measurement > 0.05:
        hint += f", on a quieter machine (its speed drifted {drift.per_measurement:.0%} between repeated measurements)"
    elif drift is None or drift.sigma is None:
        hint += " (more rounds also measure the machine's drift)"
    return hint


def recommend(crossover: Crossover, sweep: Sequence[SweepPoint] = (), *, setup: SpeculationSetup | None = None,
              vllm_base_config: dict | None = None, rounds: int = 1,
              drift: DriftEstimate | None = None) -> Recommendation:
    """The threshold, how sure it is, and its settings for every server."""
    assessment = assess_sweep(sweep)
    threshold, confident = _threshold(crossover, assessment)
    because = settle = None
    if not confident:
        unclear = ", ".join(str(p.concurrency) for p in assessment.at("unclear"))
        too_few = ", ".join(str(p.concurrency) for p in assessment.at("too_few"))
        reasons = []
        if assessment.kind == "nothing":
            reasons.append("no sweep point has enough requests for an interval")
        if unclear:
            reasons.append(f"the throughput intervals at {unclear} concurrent requests span 1 (no clear difference)")
        if too_few:
            reasons.append(f"too few requests at {too_few}")
        if assessment.kind == "mixed" and not unclear and not too_few:
            reasons.append("speculation is clearly faster and clearly slower at concurrencies out of order")
        because = "; ".join(reasons)
        settle = _settle_hint(rounds, drift)
    schedule = None
    if confident:  # an uncertain verdict says so and emits no schedule
        depth = (setup.num_speculative_tokens if setup else None) or DEFAULT_DEPTH
        top = (setup.max_num_seqs if setup else None) or DEFAULT_MAX_NUM_SEQS
        schedule = tuple(tuple(entry) for entry in threshold_schedule(threshold, depth, top))
    return Recommendation(disable_above=threshold, rule=THRESHOLD_RULE,
                          settings=server_settings(threshold, setup, vllm_base_config),
                          confident=confident, uncertain_because=because, to_settle=settle, schedule=schedule)


def schedule_sentence(recommendation: Recommendation) -> str | None:
    """The recommendation's first line: the draft-depth schedule in vLLM's form
    (``num_speculative_tokens_per_batch_size``, which SGLang's adaptive tiers and the embedded engine's
    ``--speculative-schedule`` mirror), derived from the per-concurrency verdict; None when uncertain."""
    schedule = recommendation.schedule
    if not recommendation.confident or not schedule:
        return None
    entries = [list(entry) for entry in schedule]
    depth = max(entry[-1] for entry in schedule)
    if depth == 0:
        meaning = "no drafting at any batch size"
    elif len(schedule) == 1:
        meaning = f"{depth} draft tokens at every batch size"
    else:
        meaning = (f"{depth} draft tokens while at most {schedule[0][1]} requests run, 0 (no drafting) from "
                   f"{schedule[1][0]}")
    return f"Schedule [bs_lo, bs_hi, K]: {entries} — {meaning}."


def recommendation_lines(recommendation: Recommendation) -> tuple[str, ...]:
    """The recommendation in order: the schedule first, then the threshold as its simple case; an
    uncertain verdict has only the uncertain sentence (no schedule is claimed)."""
    first = schedule_sentence(recommendation)
    threshold = recommendation_sentence(recommendation)
    lines = (first, f"Simple case: {threshold}") if first is not None else (threshold,)
    if recommendation.measured_at:
        lines += (f"Measured at {recommendation.measured_at}: acceptance, and with it this setting, changes with "
                  f"temperature; measure at the one you serve (--temperature).",)
    return lines


def recommendation_sentence(recommendation: Recommendation) -> str:
    """The threshold as one instruction, uncertain where the intervals do not settle it."""
    threshold = recommendation.disable_above
    if recommendation.confident:
        if threshold is None:
            return "Keep speculation on: it pays at every tested concurrency."
        if threshold == 0:
            return "Switch speculation off: it does not pay at any tested concurrency."
        return f"Disable speculation above {threshold} concurrent requests."
    what = ("No threshold: no tested concurrency shows a clear loss" if threshold is None else
            "Switch speculation off, tentatively" if threshold == 0 else
            f"Tentatively, disable speculation above {threshold} concurrent requests "
            f"(the first clear loss is above it)")
    return f"Uncertain — {what}; {recommendation.uncertain_because}. To settle it: {recommendation.to_settle}."


def _interval(low: float | None, high: float | None, fmt: str = "{:.2f}") -> str:
    if low is None and high is None:
        return ""
    shown_low = "?" if low is None else fmt.format(low)
    shown_high = "beyond the tested range" if high is None else fmt.format(high)
    return f" [{shown_low}, {shown_high}]"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _too_few(pairs: int | None, ratio: float | None) -> str:
    if ratio is None:
        return "no measurement"
    if pairs is not None and pairs < MIN_PAIRS:
        return f"too few requests: {pairs}"
    return "no interval"


def crossover_sentence(label: str, sweep: Sequence[SweepPoint], crossover: Crossover) -> str:
    """What the sweep supports, in one sentence (the report's "crossover" line)."""
    assessment = assess_sweep(sweep)
    tested = [p.concurrency for p, _ in assessment.points]
    if assessment.kind == "crosses" and crossover.kind == "crosses" and crossover.concurrency is not None:
        between = f" (between {crossover.between[0]} and {crossover.between[1]})" if crossover.between else ""
        return (f"The baseline overtakes {label} at ≈ {crossover.concurrency:.1f} concurrent requests"
                f"{_interval(crossover.ci_low, crossover.ci_high, '{:.1f}')}{between}.")
    if assessment.kind == "crosses":
        faster, slower = assessment.at("faster"), assessment.at("slower")
        return (f"The baseline overtakes {label} between {max(p.concurrency for p in faster)} and "
                f"{min(p.concurrency for p in slower)} concurrent requests.")
    if assessment.kind == "pays_everywhere":
        return f"{label} pays at every tested concurrency (up to {tested[-1]}): every interval is above 1."
    if assessment.kind == "never_pays":
        first = assessment.points[0][0]
        return (f"{label} does not raise throughput at any tested concurrency: every interval is below 1 (at "
                f"{first.concurrency}: ratio {first.ratio:.2f}{_interval(first.ci_low, first.ci_high)}).")
    if assessment.kind == "nothing" or len(sweep) < 2:
        return "Too few sweep points with enough requests to place a crossover."
    return f"No crossover is claimed: the intervals do not show {label} clearly above 1 and then clearly below 1."


def _sweep_breakdown(label: str, assessment: SweepAssessment) -> str | None:
    """Per class of point, for a sweep that supports no single statement."""
    parts = []
    for what, words in (("faster", "higher"), ("unclear", "no clear difference"), ("slower", "lower")):
        points = assessment.at(what)
        if points:
            shown = ", ".join(f"{p.concurrency} (ratio {p.ratio:.2f}{_interval(p.ci_low, p.ci_high)})" for p in points)
            parts.append(f"{words} at {shown}")
    too_few = assessment.at("too_few")
    if too_few:
        parts.append("no verdict at " + ", ".join(f"{p.concurrency} ({_too_few(p.pairs, p.ratio)})" for p in too_few))
    return f"Throughput with {label}: " + "; ".join(parts) + "." if parts else None


def drift_sentence(drift: DriftEstimate | None, rounds: int) -> str | None:
    """How the intervals account for machine drift."""
    if drift is None:
        return None
    if drift.sigma is None:
        return ("The run repeated no measurement, so machine drift was not measured: intervals cover "
                "request-to-request spread only (--rounds 2 measures it).")
    pooled = f" over {rounds} rounds" if rounds > 1 else ""
    return (f"Intervals include machine drift: the same arm measured twice differed by {drift.per_measurement:.1%} "
            f"(RMS of {drift.repeats} repeat(s)){pooled}.")


def verdict_lines(label: str, single_stream: Sequence[SingleStreamDomain], sweep: Sequence[SweepPoint],
                  crossover: Crossover, drift: DriftEstimate | None = None, rounds: int = 1) -> tuple[str, ...]:
    """Plain-words summary: single-stream speedup per domain, what the sweep supports, the cost at the top."""
    lines: list[str] = []
    calls = [(d, point_call(d)) for d in single_stream]
    faster = [f"{d.domain} {d.speedup:.2f}x{_interval(d.ci_low, d.ci_high)}" for d, c in calls if c == "faster"]
    slower = [f"{d.domain} {1 / d.speedup:.2f}x (ratio {d.speedup:.2f}{_interval(d.ci_low, d.ci_high)})"
              for d, c in calls if c == "slower"]
    unclear = [f"{d.domain} (ratio {d.speedup:.2f}{_interval(d.ci_low, d.ci_high)})" for d, c in calls
               if c == "unclear"]
    too_few = [f"{d.domain} ({_too_few(d.pairs, d.speedup)})" for d, c in calls if c == "too_few"]
    clauses = []
    if faster:
        clauses.append("speeds up single-stream " + _and(faster))
    if slower:
        clauses.append(("slows down single-stream " if not faster else "slows down ") + _and(slower))
    if unclear:
        clauses.append("makes no clear difference to single-stream " + _and(unclear))
    if clauses:
        lines.append(f"{label} " + "; ".join(clauses) + ".")
    looping = [d for d in single_stream if d.degenerate_pairs]
    if looping:
        parts = [f"{d.domain} {d.non_degenerate.ratio:.2f}x"
                 f"{_interval(d.non_degenerate.ci_low, d.non_degenerate.ci_high)}"
                 f" ({d.degenerate_pairs} of {d.pairs} pairs left out)" if d.non_degenerate.ratio is not None
                 else f"{d.domain} (every pair left out)" for d in looping]
        lines.append("Over the outputs that do not repeat themselves (looping text is easy to draft): "
                     + _and(parts) + ".")
    if too_few:
        lines.append(f"No single-stream verdict for {_and(too_few)}: a verdict needs at least {MIN_PAIRS} "
                     f"request pairs and an interval.")
    if sweep:
        assessment = assess_sweep(sweep)
        lines.append(crossover_sentence(label, sweep, crossover))
        if assessment.kind in ("mixed", "nothing") and (breakdown := _sweep_breakdown(label, assessment)):
            lines.append(breakdown)
        top, top_call = assessment.points[-1]
        if assessment.kind in ("crosses", "never_pays", "pays_everywhere"):
            if top_call == "slower":
                lines.append(f"At {top.concurrency} concurrent requests speculation costs {1 / top.ratio:.2f}x "
                             f"throughput (ratio {top.ratio:.2f}{_interval(top.ci_low, top.ci_high)}).")
            elif top_call == "faster":
                lines.append(f"At {top.concurrency} concurrent requests the throughput ratio is {top.ratio:.2f}x"
                             f"{_interval(top.ci_low, top.ci_high)}.")
    if (said := drift_sentence(drift, rounds)) is not None:
        lines.append(said)
    return tuple(lines)

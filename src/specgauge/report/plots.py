"""The report's plots (matplotlib, Agg, no pyplot state): one look, one colour per arm everywhere.

Every plot is built from a :class:`~specgauge.report.report_data.ReportData` and degrades to a
plain "no data: <why>" panel when its figures are missing, so a report always has all its panels.
Output is deterministic: fixed SVG id salt per plot, no timestamps in the files.
"""

from __future__ import annotations

import io
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import matplotlib

matplotlib.use("Agg", force=False)  # never a GUI backend, even if the user's rc asks for one

from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from specgauge.report.report_data import ArmData, ReportData  # noqa: E402

BASELINE_COLOUR = "#3a6ea5"      # blue: the baseline (and a single bench run)
SPECULATIVE_COLOUR = "#e0782c"   # orange: the speculative arm
NEUTRAL_COLOUR = "#555555"
CROSSOVER_COLOUR = "#b02a37"
PERCENTILE_STYLES = (("p50", "-", "o"), ("p90", "--", "^"), ("p99", ":", "v"))
FIGSIZE_IN = (7.2, 4.0)
MIN_CHUNKS_PER_POSITION_BIN = 5   # a position bin with fewer chunks is too noisy to draw
PNG_DPI = 150

STYLE: dict[str, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 11,
    "axes.titlesize": 13,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.7,
    "legend.frameon": False,
    "legend.fontsize": 10,
    "lines.linewidth": 2.0,
    "lines.markersize": 6,
    "svg.fonttype": "none",          # text stays text in the SVG: small, selectable, printable
    "figure.facecolor": "white",
}


@dataclass(frozen=True)
class Plot:
    """One rendered panel; ``missing`` is why it shows "no data" instead of figures."""

    name: str
    title: str
    figure: Figure
    missing: str | None = None


def arm_colour(arm: ArmData) -> str:
    """The colour an arm has in every plot and table."""
    return SPECULATIVE_COLOUR if arm.role == "speculative" else BASELINE_COLOUR


@contextmanager
def _style() -> Iterator[None]:
    with matplotlib.rc_context(STYLE):
        yield


def _figure() -> tuple[Figure, Any]:
    figure = Figure(figsize=FIGSIZE_IN, layout="constrained")
    return figure, figure.add_subplot()


def _no_data(name: str, title: str, why: str) -> Plot:
    figure, axes = _figure()
    axes.set_title(title)
    axes.set_axis_off()
    axes.text(0.5, 0.5, f"no data: {why}", ha="center", va="center", wrap=True, fontsize=11,
              color=NEUTRAL_COLOUR, transform=axes.transAxes)
    return Plot(name, title, figure, missing=why)


def _concurrency_axis(axes, concurrencies: Sequence[float]) -> None:
    """Log2 x-axis with a tick at each measured concurrency, labelled as a plain number."""
    axes.set_xscale("log", base=2)
    ticks = sorted(set(concurrencies))
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xticklabels([f"{t:g}" for t in ticks])
    axes.set_xlabel("concurrent requests (log₂ scale)")
    if len(ticks) == 1:
        axes.set_xlim(ticks[0] / 2, ticks[0] * 2)


def _maybe_log_y(axes, values: Sequence[float]) -> None:
    positive = [v for v in values if v is not None and v > 0]
    if positive and max(positive) / min(positive) > 30:
        axes.set_yscale("log")


def _arms_with_points(data: ReportData) -> list[ArmData]:
    return [arm for arm in data.arms if arm.points]


def _throughput(data: ReportData) -> Plot:
    name, title = "throughput", "Aggregate output throughput vs concurrency"
    arms = [a for a in _arms_with_points(data) if any(p.output_tokens_per_s for p in a.points)]
    if not arms:
        return _no_data(name, title, "no finished closed-loop point with output tokens")
    figure, axes = _figure()
    for arm in arms:
        points = [p for p in arm.points if p.output_tokens_per_s is not None]
        xs, ys = [p.concurrency for p in points], [p.output_tokens_per_s for p in points]
        axes.plot(xs, ys, marker="o", color=arm_colour(arm), label=arm.label)
        flagged = [p for p in points if p.flagged]
        if flagged:
            axes.scatter([p.concurrency for p in flagged], [p.output_tokens_per_s for p in flagged],
                         s=110, facecolors="none", edgecolors=CROSSOVER_COLOUR, linewidths=1.5, zorder=5,
                         label="flagged point (errors)")
    _concurrency_axis(axes, [p.concurrency for a in arms for p in a.points])
    axes.set_ylabel("output tokens / s (all requests)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def _speedup(data: ReportData) -> Plot:
    name, title = "speedup", "Speedup (speculative / baseline throughput) vs concurrency"
    comparison = data.comparison
    rows = sorted((p for p in (comparison.sweep if comparison else ()) if p.ratio is not None),
                  key=lambda p: p.concurrency)
    if not rows:
        why = "no sweep point with both arms measured" if comparison else \
            "one run only; the speedup needs a comparison (specgauge compare)"
        return _no_data(name, title, why)
    figure, axes = _figure()
    xs = [p.concurrency for p in rows]
    lows = [p.ci_low if p.ci_low is not None else p.ratio for p in rows]
    highs = [p.ci_high if p.ci_high is not None else p.ratio for p in rows]
    axes.fill_between(xs, lows, highs, color=SPECULATIVE_COLOUR, alpha=0.18, linewidth=0, label="95% CI")
    axes.plot(xs, [p.ratio for p in rows], marker="o", color=SPECULATIVE_COLOUR, label="speedup")
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.2, label="break-even (1.0×)")
    crossover = comparison.crossover
    if crossover.concurrency is not None and crossover.supported:   # drawn only where the intervals support it
        low = crossover.ci_low if crossover.ci_low is not None else min(xs)
        high = crossover.ci_high if crossover.ci_high is not None else max(xs)
        axes.axvspan(low, high, color=CROSSOVER_COLOUR, alpha=0.10, linewidth=0)
        upper = f"{crossover.ci_high:.3g}" if crossover.ci_high is not None else f"> {max(xs):g}"
        axes.axvline(crossover.concurrency, color=CROSSOVER_COLOUR, linewidth=1.5,
                     label=f"crossover ≈ {crossover.concurrency:.3g} [{low:.3g}, {upper}]")
    _concurrency_axis(axes, xs)
    axes.set_ylabel("speedup (×)")
    low_y, high_y = min(min(lows), 1.0), max(max(highs), 1.0)
    pad = 0.08 * (high_y - low_y or 1.0)
    axes.set_ylim(max(0.0, low_y - pad), high_y + pad)
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def _latency(data: ReportData, metric: str, name: str, title: str, unit_label: str) -> Plot:
    arms = [a for a in _arms_with_points(data) if any(getattr(p, metric).get("p50") is not None for p in a.points)]
    if not arms:
        return _no_data(name, title, f"no {metric.split('_')[0].upper()} measured (no successful request"
                                      f"{' with ≥ 2 output tokens' if metric == 'tpot_ms' else ''})")
    figure, axes = _figure()
    values: list[float] = []
    for arm in arms:
        for key, linestyle, marker in PERCENTILE_STYLES:
            points = [p for p in arm.points if getattr(p, metric).get(key) is not None]
            ys = [getattr(p, metric)[key] for p in points]
            values += ys
            axes.plot([p.concurrency for p in points], ys, linestyle=linestyle, marker=marker,
                      color=arm_colour(arm), label=f"{arm.label} {key}",
                      linewidth=2.0 if key == "p50" else 1.4, markersize=5 if key == "p50" else 4)
    _concurrency_axis(axes, [p.concurrency for a in arms for p in a.points])
    _maybe_log_y(axes, values)
    if axes.get_yscale() == "linear":
        axes.set_ylim(0, max(values) * 1.45)   # headroom: the legend sits above the curves
    axes.set_ylabel(unit_label)
    axes.set_title(title)
    axes.legend(ncols=len(arms))
    return Plot(name, title, figure)


def _accept_arm(data: ReportData) -> ArmData | None:
    """The arm whose acceptance the report shows: the speculative one, or the only one."""
    arm = data.speculative or (data.arms[0] if len(data.arms) == 1 else None)
    return arm if arm is not None and arm.accept_by_domain else None


def _accept_by_domain(data: ReportData) -> Plot:
    name, title = "accept_by_domain", "Acceptance length by domain"
    arm = _accept_arm(data)
    if arm is None:
        return _no_data(name, title, "the server reported no acceptance (e.g. SGLang spec_verify_ct) "
                                     "and token counts per chunk were not measured")
    rows = arm.accept_by_domain
    source = "server-reported" if arm.accept_source == "server" else "mean tokens per decode chunk"
    if data.comparison is not None:
        source = "single stream"
    figure, axes = _figure()
    xs = range(len(rows))
    values = [r.accept_length for r in rows]
    has_ci = all(r.ci_low is not None and r.ci_high is not None for r in rows)
    errors = [[v - r.ci_low for v, r in zip(values, rows)], [r.ci_high - v for v, r in zip(values, rows)]] \
        if has_ci else None
    axes.bar(xs, values, color=arm_colour(arm), width=0.6, yerr=errors, capsize=5 if has_ci else 0,
             error_kw={"ecolor": NEUTRAL_COLOUR, "elinewidth": 1.2})
    for x, value in zip(xs, values):
        axes.annotate(f"{value:.2f}", (x, value), xytext=(0, 3), textcoords="offset points", ha="center",
                      va="bottom", fontsize=9)
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.0)
    axes.set_xticks(list(xs), [r.domain for r in rows])
    axes.xaxis.grid(False)
    axes.set_xlabel(f"prompt domain ({arm.label}, {source}{'; bars: 95% CI' if has_ci else ''})")
    axes.set_ylabel("tokens per verify step (incl. bonus)")
    axes.set_ylim(0, max(max(values), max((r.ci_high or 0) for r in rows)) * 1.18)
    axes.set_title(title)
    return Plot(name, title, figure)


def _tokens_per_chunk(data: ReportData) -> Plot:
    name, title = "tokens_per_chunk", "Tokens per streamed chunk (decode steps)"
    arms = [a for a in data.arms if a.chunk_histogram]
    if not arms:
        sources = ", ".join(sorted({a.token_count_source or "none" for a in data.arms}))
        return _no_data(name, title, f"token counts per chunk were not measured (source: {sources}); "
                                     "use an API that reports them or pass --tokenizer")
    arms.sort(key=lambda a: a.role != "speculative")     # speculative first, baseline for contrast
    figure, axes = _figure()
    counts = {arm.label: {b.tokens: b.count for b in arm.chunk_histogram} for arm in arms}
    sizes = sorted({t for c in counts.values() for t in c})
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        total = sum(counts[arm.label].values())
        shares = [100.0 * counts[arm.label].get(t, 0) / total for t in sizes]
        offset = (i - (len(arms) - 1) / 2) * width
        axes.bar([t + offset for t in sizes], shares, width=width, color=arm_colour(arm),
                 label=f"{arm.label} ({total:,} chunks)", alpha=1.0 if i == 0 else 0.75)
    axes.set_xticks(sizes, [str(t) for t in sizes])
    axes.xaxis.grid(False)
    axes.set_xlabel("tokens in one chunk (one verify step under speculation)")
    axes.set_ylabel("share of chunks (%)")
    highest = max(100.0 * b.count / sum(c.count for c in arm.chunk_histogram)
                  for arm in arms for b in arm.chunk_histogram)
    axes.set_ylim(0, 105 if highest > 70 else highest * 1.35)
    axes.set_title(title)
    axes.legend(loc="best")
    return Plot(name, title, figure)


def _accept_by_position(data: ReportData) -> Plot:
    name, title = "accept_by_position", "Acceptance vs output position"
    shown = {a.label: [b for b in a.accept_by_position if b.chunks >= MIN_CHUNKS_PER_POSITION_BIN]
             for a in data.arms}
    arms = [a for a in data.arms if shown[a.label]]
    if not arms:
        return _no_data(name, title, "token counts per chunk were not measured, or outputs were too short "
                                     "for one position bin")
    arms.sort(key=lambda a: a.role != "speculative")
    figure, axes = _figure()
    for arm in arms:
        bins = shown[arm.label]
        axes.plot([(b.start + b.end) / 2 for b in bins], [b.tokens_per_chunk for b in bins],
                  marker="o", markersize=4, color=arm_colour(arm), label=arm.label)
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.0)
    first = shown[arms[0].label][0]
    axes.set_xlabel(f"output position (tokens; bins of {first.end - first.start}, "
                    f"each with ≥ {MIN_CHUNKS_PER_POSITION_BIN} chunks)")
    axes.set_ylabel("mean tokens per decode chunk")
    axes.set_ylim(bottom=0)
    axes.set_xlim(left=0)
    axes.set_title(title)
    axes.legend(loc="lower right")     # curves sit above 1 token per chunk; the bottom is free
    return Plot(name, title, figure)


def _speedup_by_temperature(data: ReportData) -> Plot:
    """``compare --temperatures``: single-stream speedup per domain against temperature, with intervals."""
    name, title = "speedup_by_temperature", "Single-stream speedup vs temperature"
    rows = data.comparison.by_temperature if data.comparison is not None else ()
    figure, axes = _figure()
    for domain in sorted({r.domain for r in rows}):
        points = sorted((r for r in rows if r.domain == domain and r.speedup is not None),
                        key=lambda r: r.temperature or 0.0)
        xs = [r.temperature or 0.0 for r in points]
        lows = [r.speedup - (r.ci_low if r.ci_low is not None else r.speedup) for r in points]
        highs = [(r.ci_high if r.ci_high is not None else r.speedup) - r.speedup for r in points]
        axes.errorbar(xs, [r.speedup for r in points], yerr=[lows, highs], marker="o", capsize=4, label=domain)
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.2, label="break-even (1.0×)")
    axes.set_xlabel("sampling temperature (bars: 95% CI)")
    axes.set_ylabel("speedup (×)")
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def _accept_by_temperature(data: ReportData) -> Plot:
    """``compare --temperatures``: the speculative arm's mean acceptance length per domain against
    temperature (tokens per verify step; 1.0 = nothing drafted was kept)."""
    name, title = "accept_by_temperature", "Acceptance length vs temperature"
    rows = [r for r in (data.comparison.by_temperature if data.comparison is not None else ())
            if r.accept_length is not None]
    if not rows:
        return _no_data(name, title, "the speculative arm reported no acceptance at any temperature")
    figure, axes = _figure()
    for domain in sorted({r.domain for r in rows}):
        points = sorted((r for r in rows if r.domain == domain),
                        key=lambda r: r.temperature or 0.0)
        axes.plot([r.temperature or 0.0 for r in points], [r.accept_length for r in points], marker="o",
                  label=domain)
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.2, label="no draft kept (1.0)")
    axes.set_xlabel("sampling temperature")
    axes.set_ylabel("acceptance length (tokens per verify)")
    axes.set_ylim(bottom=0)
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def _trace_timeline(data: ReportData) -> Plot:
    """``compare --trace``: each arm's TPOT p50 per window of trace time, the baseline arm's requests
    in flight behind them, and the windows where speculation cost (TPOT ratio's interval above 1) shaded."""
    name, title = "trace_timeline", "The trace on both arms: TPOT and load over trace time"
    trace = data.comparison.trace if data.comparison is not None else None
    if trace is None or not trace.windows:
        return _no_data(name, title, "no trace replayed")
    figure, axes = _figure()
    load = axes.twinx()
    mids = [(w.start_s + w.end_s) / 2 for w in trace.windows]
    load.bar(mids, [w.baseline_in_flight for w in trace.windows], width=trace.bin_s * 0.9, color="#cccccc",
             alpha=0.5, label="in flight (baseline)")
    load.set_ylabel("requests in flight")
    load.grid(False)
    for w in trace.windows:
        if w.tpot_ratio.ci_low is not None and w.tpot_ratio.ci_low > 1:
            axes.axvspan(w.start_s, w.end_s, color=CROSSOVER_COLOUR, alpha=0.12, linewidth=0)
    for label, values, colour in (("baseline", [w.baseline_tpot_p50_ms for w in trace.windows], BASELINE_COLOUR),
                                  (data.comparison.speculative_label,
                                   [w.speculative_tpot_p50_ms for w in trace.windows], SPECULATIVE_COLOUR)):
        points = [(x, v) for x, v in zip(mids, values) if v is not None]
        axes.plot([x for x, _ in points], [v for _, v in points], marker="o", color=colour, label=f"TPOT p50, {label}")
    axes.set_zorder(load.get_zorder() + 1)
    axes.patch.set_visible(False)
    axes.set_xlabel(f"trace time (s; windows of {trace.bin_s:g} s; shaded: speculation cost)")
    axes.set_ylabel("TPOT p50 (ms / token)")
    axes.set_title(title)
    axes.legend(loc="upper left")
    return Plot(name, title, figure)


PLOT_BUILDERS: dict[str, Callable[[ReportData], Plot]] = {
    "throughput": _throughput,
    "speedup": _speedup,
    "ttft": lambda d: _latency(d, "ttft_ms", "ttft", "Time to first token (TTFT) vs concurrency",
                               "TTFT (ms)"),
    "tpot": lambda d: _latency(d, "tpot_ms", "tpot", "Time per output token (TPOT) vs concurrency",
                               "TPOT (ms / token)"),
    "accept_by_domain": _accept_by_domain,
    "tokens_per_chunk": _tokens_per_chunk,
    "accept_by_position": _accept_by_position,
}
ONE_ARM_PLOTS = tuple(n for n in PLOT_BUILDERS if n != "speedup")
TEMPERATURE_PLOTS = ("speedup_by_temperature", "accept_by_temperature")   # only with compare --temperatures


def plot_names(data: ReportData) -> tuple[str, ...]:
    """The panels a report has: all of them for a comparison (speedup and acceptance by temperature
    only with ``--temperatures``); no speedup panel for one run."""
    if data.comparison is None:
        return ONE_ARM_PLOTS
    if data.comparison.trace is not None:   # a trace comparison has no sweep: its timeline is the figure
        return ("trace_timeline",)
    return tuple(PLOT_BUILDERS) + (TEMPERATURE_PLOTS if data.comparison.by_temperature else ())


def build_plots(data: ReportData) -> list[Plot]:
    """Every panel of the report, in display order."""
    builders = {**PLOT_BUILDERS, "speedup_by_temperature": _speedup_by_temperature,
                "accept_by_temperature": _accept_by_temperature, "trace_timeline": _trace_timeline}
    with _style():
        return [builders[name](data) for name in plot_names(data)]


_SVG_ID_REFERENCES = re.compile(r'(?P<head>\bid="|href="#|url\(#)(?P<id>[^")]+)')


def plot_svg(plot: Plot) -> str:
    """The plot as an ``<svg>`` element for inline use: no XML prolog, and every id (and every
    reference to one) prefixed with the plot's name, so several plots share a page without clashes.
    The id hash salt is fixed, so the same plot gives the same text."""
    buffer = io.StringIO()
    with _style(), matplotlib.rc_context({"svg.hashsalt": f"specgauge-{plot.name}"}):
        plot.figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    return _SVG_ID_REFERENCES.sub(lambda m: f"{m['head']}{plot.name}-{m['id']}", text)


def save_png(plot: Plot, path: Path) -> Path:
    """Write the plot as a PNG at :data:`PNG_DPI`; returns ``path``."""
    with _style():
        plot.figure.savefig(path, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return path

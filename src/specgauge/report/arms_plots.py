"""The plots of a comparison of several speculative arms: one series per arm, each arm's speedup
over the baseline with its 95% interval, along the concurrency sweep and per single-stream domain."""

from __future__ import annotations

from specgauge.analysis.arm_results import MultiArmResult
from specgauge.report.plots import (BASELINE_COLOUR, NEUTRAL_COLOUR, SPECULATIVE_COLOUR, Plot, _concurrency_axis,
                                    _figure, _no_data, _style)

# one colour per speculative arm (the baseline keeps its blue); the first is the two-arm report's orange
ARM_COLOURS = (SPECULATIVE_COLOUR, "#2a9d5c", "#8e44ad", "#c0392b", "#7f8c8d", "#b8860b")


def arm_colours(result: MultiArmResult) -> dict[str, str]:
    """Each arm's colour by label, the same in every plot and table."""
    return {arm.label: ARM_COLOURS[i % len(ARM_COLOURS)] for i, arm in enumerate(result.arms)}


def sweep_speedups(result: MultiArmResult) -> Plot:
    """Speedup vs concurrency, one line and interval band per arm."""
    name, title = "arms_speedup", "Speedup over the baseline vs concurrency, per arm"
    series = [(arm.label, sorted((p for p in arm.result.sweep if p.ratio is not None), key=lambda p: p.concurrency))
              for arm in result.arms]
    series = [(label, rows) for label, rows in series if rows]
    if not series:
        return _no_data(name, title, "no sweep point with the baseline and an arm measured")
    colours = arm_colours(result)
    figure, axes = _figure()
    values = [1.0]
    for label, rows in series:
        xs = [p.concurrency for p in rows]
        lows = [p.ci_low if p.ci_low is not None else p.ratio for p in rows]
        highs = [p.ci_high if p.ci_high is not None else p.ratio for p in rows]
        axes.fill_between(xs, lows, highs, color=colours[label], alpha=0.15, linewidth=0)
        axes.plot(xs, [p.ratio for p in rows], marker="o", color=colours[label], label=f"{label} (95% CI band)")
        values += lows + highs
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.2, label="break-even (1.0×)")
    _concurrency_axis(axes, [p.concurrency for _, rows in series for p in rows])
    axes.set_ylabel("speedup (×)")
    axes.set_ylim(max(0.0, min(values) * 0.9), max(values) * 1.08)
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def domain_speedups(result: MultiArmResult) -> Plot:
    """Single-stream speedup per domain: a bar per arm with its interval."""
    name, title = "arms_single_stream", "Single-stream speedup per domain, per arm"
    domains = sorted({row.domain for arm in result.arms for row in arm.result.single_stream})
    if not domains:
        return _no_data(name, title, "no single-stream domain measured")
    colours = arm_colours(result)
    figure, axes = _figure()
    width = 0.8 / len(result.arms)
    for i, arm in enumerate(result.arms):
        rows = {row.domain: row for row in arm.result.single_stream if row.speedup is not None}
        xs = [d + (i - (len(result.arms) - 1) / 2) * width for d in range(len(domains)) if domains[d] in rows]
        shown = [rows[d] for d in domains if d in rows]
        errors = [[r.speedup - (r.ci_low if r.ci_low is not None else r.speedup) for r in shown],
                  [(r.ci_high if r.ci_high is not None else r.speedup) - r.speedup for r in shown]]
        axes.bar(xs, [r.speedup for r in shown], width=width * 0.95, color=colours[arm.label], label=arm.label,
                 yerr=errors, capsize=3, ecolor=BASELINE_COLOUR)
    axes.axhline(1.0, color=NEUTRAL_COLOUR, linestyle="--", linewidth=1.2, label="break-even (1.0×)")
    axes.set_xticks(range(len(domains)), domains)
    axes.set_ylabel("speedup (×), 95% CI")
    axes.set_title(title)
    axes.legend()
    return Plot(name, title, figure)


def arm_plots(result: MultiArmResult) -> list[Plot]:
    """Every panel of the overview, in display order."""
    with _style():
        return [domain_speedups(result), sweep_speedups(result)]

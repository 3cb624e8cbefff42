"""Verdict wording follows the interval: a ratio whose CI spans 1 is not called a speed-up or a slow-down."""

from specgauge.analysis.verdict import verdict_lines
from specgauge.analysis.results import Crossover, SingleStreamDomain


def domain(name: str, speedup: float, low: float | None, high: float | None) -> SingleStreamDomain:
    return SingleStreamDomain(domain=name, baseline_tok_s=100.0, speculative_tok_s=100.0 * speedup,
                              speedup=speedup, ci_low=low, ci_high=high, accept_length=2.0)


def test_interval_spanning_one_is_no_clear_difference():
    lines = verdict_lines("EAGLE-3", [domain("coding", 1.8, 1.7, 1.9), domain("chat", 0.95, 0.74, 1.22),
                                      domain("encyclopedic", 0.65, 0.57, 0.73)], [], Crossover(kind="insufficient"))
    first = lines[0]
    assert "speeds up single-stream coding 1.80x [1.70, 1.90]" in first
    assert "slows down encyclopedic 1.54x (ratio 0.65 [0.57, 0.73])" in first
    assert "makes no clear difference to single-stream chat (ratio 0.95 [0.74, 1.22])" in first
    assert "chat 1.05x" not in first


def test_without_an_interval_no_speedup_is_claimed():
    lines = verdict_lines("EAGLE-3", [domain("coding", 0.9, None, None)], [], Crossover(kind="insufficient"))
    assert not any("slows down" in line or "speeds up" in line for line in lines)
    assert lines[0].startswith("No single-stream verdict for coding (no interval)")

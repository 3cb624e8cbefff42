"""A comparison of several speculative arms in the terminal: one section per arm (its verdict
tables, recommendation, warnings and losslessness, as a two-arm comparison prints them), then the
paired differences between the arms and the method chosen per domain and concurrency."""

from __future__ import annotations

from specgauge.analysis.arm_results import MultiArmResult


def arm_heading(result: MultiArmResult, index: int) -> str:
    """``speculative arm 1 of 2: eagle3 (specgauge serve ...)``."""
    arm = result.arms[index]
    return (f"── speculative arm {index + 1} of {len(result.arms)}: {arm.label} "
            f"({arm.result.arm('speculative').description}) ──")


def arm_check_lines(result: MultiArmResult, index: int) -> list[str]:
    """The arm's own checks: warnings, losslessness, acceptance by position."""
    arm = result.arms[index].result
    lines = [f"warning: {w.message}" for w in arm.health]
    lossless = arm.losslessness
    if lossless.checked:
        lines.append(f"losslessness (temperature 0, text-exact): {lossless.mismatches} of {lossless.compared} "
                     f"outputs differ")
    if arm.acceptance_by_position:
        lines.append("tokens per chunk by output position: " + ", ".join(
            f"{b.start}-{b.end - 1}: {b.tokens_per_chunk:.2f}" for b in arm.acceptance_by_position))
    return lines


def choice_lines(result: MultiArmResult) -> list[str]:
    """The differences between arms, then the choice per domain and concurrency with its settings."""
    lines = ["between arms (paired on the same prompts; ratio = first arm's tok/s over the second's, 95% intervals):"]
    lines += [f"  {d.sentence}" for d in result.differences] or ["  (no point both arms measured)"]
    lines.append("which method, per domain and concurrency:")
    for choice in result.choice:
        lines.append(f"  {choice.sentence}")
    shown: set[str] = set()
    for choice in result.choice:   # each chosen arm's schedule once, in each engine's form
        if choice.chosen is None or choice.chosen in shown:
            continue
        shown.add(choice.chosen)
        recommendation = result.arm(choice.chosen).result.recommendation
        lines.append(f"{choice.chosen}'s schedule per batch size: {recommendation.rule}")
        lines += [f"  {s.server}: {s.setting}" for s in recommendation.settings]
    return lines

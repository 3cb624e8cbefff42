"""Losslessness in serving: at temperature 0, speculative output must equal the baseline's.

Compared text-exact per request pair (same stage, round and request index, hence the same
prompt). GPU numerics can flip a near-tie token, so a mismatch is reported, never fatal.
"""

from __future__ import annotations

from typing import Iterable

from specgauge.analysis.results import Losslessness, MismatchExample

MAX_EXAMPLES = 5
EXCERPT_CHARS = 60


def first_difference(a: str, b: str) -> int | None:
    """Offset of the first differing character; None when equal (a prefix differs at its end)."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_losslessness(pairs: Iterable[tuple[str, int, int, str, str]], *, temperature: float) -> Losslessness:
    """Compare ``(stage, prompt_index, request_index, baseline_text, speculative_text)`` pairs.

    Only meaningful at temperature 0; otherwise returns ``checked=False`` with the reason.
    """
    if temperature > 0:
        return Losslessness(checked=False, reason=f"temperature {temperature:g} > 0: outputs are sampled")
    compared = mismatches = 0
    examples: list[MismatchExample] = []
    for stage, prompt_index, request_index, base_text, spec_text in pairs:
        compared += 1
        position = first_difference(base_text, spec_text)
        if position is None:
            continue
        mismatches += 1
        if len(examples) < MAX_EXAMPLES:
            start = max(0, position - 10)
            examples.append(MismatchExample(
                stage=stage, prompt_index=prompt_index, request_index=request_index, first_difference=position,
                baseline_excerpt=base_text[start:position + EXCERPT_CHARS],
                speculative_excerpt=spec_text[start:position + EXCERPT_CHARS]))
    if compared == 0:
        return Losslessness(checked=False, reason="no successful request pairs to compare")
    return Losslessness(checked=True, compared=compared, mismatches=mismatches,
                        mismatch_rate=mismatches / compared, examples=tuple(examples))

"""The depth that ran against the depth that was set: health warning ``drafted_depth_mismatch``.

A configured draft depth can silently not run: vllm #57053 (a model runner that did not pass the
per-batch-size schedule to autoregressive drafters), vLLM switching the schedule off under data
parallelism. The server's drafts by their length, differenced around each point (vLLM's newer
``vllm:spec_decode_num_drafts_by_draft_length{draft_length}``, which the embedded engine exports
too; ``client/server_metrics.py``), are checked against the depth set for the batch sizes the
point can have.

A closed-loop point at concurrency ``c`` runs batches of 1 to ``c`` requests (the last requests
finish alone), so the depths it may run are K(b) for b in 1..c, and drafts may be shorter than K
(an n-gram match runs out, an EAGLE-3 chain stops at a low-confidence token). Hence a mismatch is:

- drafts longer than the largest K(b), b <= c (deeper than set; drafting where K is 0 everywhere);
- no draft at all where every K(b), b <= c, is above 0 and the server counted drafts by length
  (the set depth never ran).
"""

from __future__ import annotations

from typing import Callable, Sequence

from specgauge.analysis.results import HealthWarning

DepthAt = Callable[[int], int]   # batch size → the draft tokens set for it


def drafted_depth_warnings(points: Sequence[tuple[str, int, dict[str, float]]],
                           depth_at: DepthAt | None) -> tuple[HealthWarning, ...]:
    """``points``: (label, concurrency, drafts by draft length as the server counted them over the
    point) of the speculative arm; ``depth_at``: the configured depth by batch size (None: unknown,
    nothing is checked). One warning per point that ran other than set (module doc)."""
    if depth_at is None:
        return ()
    warnings = []
    for label, concurrency, by_length in points:
        if not by_length:
            continue   # the server counts no drafts by length: nothing to check
        set_depths = [depth_at(b) for b in range(1, max(1, concurrency) + 1)]
        ran = {int(length): count for length, count in by_length.items() if count > 0}
        deepest, longest = max(set_depths), max(ran, default=0)
        shown = ", ".join(f"{count:g} of length {length}" for length, count in sorted(ran.items())) or "no draft"
        set_text = (f"K={set_depths[0]}" if len(set(set_depths)) == 1 else
                    f"K from {min(set_depths)} to {deepest} over batch sizes 1-{concurrency}")
        if longest > deepest:
            why = "drafts deeper than the depth set"
        elif not ran and min(set_depths) > 0:
            why = "the depth set never ran"
        else:
            continue
        warnings.append(HealthWarning(code="drafted_depth_mismatch", concurrency=concurrency, message=(
            f"{label}: {why}: set {set_text}, ran {shown} (the server's drafts by length over the point); the "
            f"configured depth is not what the server ran (vllm #57053: a schedule not passed to the drafter)")))
    return tuple(warnings)

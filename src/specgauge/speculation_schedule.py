"""vLLM's draft-depth schedule: its rules, once, for every part (pure, no dependencies).

A schedule is a list of entries ``[bs_lo, bs_hi, K]`` or, with a context-length axis,
``[bs_lo, bs_hi, ctx_lo, ctx_hi, K]`` (the two forms are not mixed). The rules are vLLM's
(vllm/v1/spec_decode/dynamic/utils.py ``validate_and_normalize_dynamic_sd_schedule`` and
``build_dynamic_sd_schedule_lookup``; the field ``num_speculative_tokens_per_batch_size`` in
vllm/config/speculative.py, newer versions' ``speculative_token_schedule``):

* ranges are inclusive and positive, start ≤ end; batch-size ranges sorted without overlap, the
  first starting at 1; K ≥ 0 (0 = no drafting);
* 5-item entries form a rectangular grid: every batch-size range has the same context ranges,
  which start at 1 and are contiguous; the last context range reaches to infinity; one cell
  per (batch-size range, context range);
* a batch size in a gap between ranges, or past the last one, takes the previous range's K;
* K is clamped to ``num_speculative_tokens`` (which must be > 0).

The embedded engine (``specgauge serve --speculative-schedule``), the settings that ``compare``
and ``tune`` emit for vLLM, and ``tune``'s own check of its schedule all apply these rules.
"""

from __future__ import annotations

import json

CTX_INFINITY = 2**31 - 1  # vLLM's _CTX_INFINITY: the last context range's end after normalising

Entry = tuple[int, int, int, int, int]  # (bs_lo, bs_hi, ctx_lo, ctx_hi, K)


def normalize_schedule(schedule: object) -> list[Entry]:
    """The schedule as sorted 5-tuples (3-item entries get the context range 1..∞); raises
    ``ValueError`` naming the broken rule."""
    if not isinstance(schedule, list) or not schedule:
        raise ValueError("the schedule must be a non-empty list of [bs_lo, bs_hi, K] or "
                         "[bs_lo, bs_hi, ctx_lo, ctx_hi, K] entries")
    arities: set[int] = set()
    parsed: list[Entry] = []
    for entry in schedule:
        if (not isinstance(entry, (list, tuple)) or len(entry) not in (3, 5)
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)):
            raise ValueError(f"entry {json.dumps(entry) if _jsonable(entry) else entry!r}: must be "
                             f"[bs_lo, bs_hi, K] (three integers) or [bs_lo, bs_hi, ctx_lo, ctx_hi, K] (five integers)")
        arities.add(len(entry))
        bs_lo, bs_hi, ctx_lo, ctx_hi, k = (entry[0], entry[1], 1, CTX_INFINITY, entry[2]) if len(entry) == 3 \
            else tuple(entry)
        if bs_lo <= 0 or bs_hi <= 0:
            raise ValueError(f"entry {list(entry)}: batch-size range must be positive")
        if bs_lo > bs_hi:
            raise ValueError(f"entry {list(entry)}: batch-size range start must be <= end")
        if ctx_lo <= 0 or ctx_hi <= 0:
            raise ValueError(f"entry {list(entry)}: context range must be positive")
        if ctx_lo > ctx_hi:
            raise ValueError(f"entry {list(entry)}: context range start must be <= end")
        if k < 0:
            raise ValueError(f"entry {list(entry)}: K must be >= 0")
        parsed.append((bs_lo, bs_hi, ctx_lo, ctx_hi, k))
    if len(arities) > 1:
        raise ValueError("entries must be all 3-item or all 5-item; the two forms are not mixed")
    bs_ranges = sorted({(lo, hi) for lo, hi, *_ in parsed})
    previous_end = 0
    for lo, hi in bs_ranges:
        if lo <= previous_end:
            raise ValueError("batch-size ranges must not overlap")
        previous_end = hi
    if bs_ranges[0][0] != 1:
        raise ValueError("the first batch-size range must start at 1")
    ctx_ranges = sorted({(lo, hi) for _, _, lo, hi, _ in parsed})
    if len(parsed) != len(bs_ranges) * len(ctx_ranges):
        raise ValueError(f"the 5-item entries must form a rectangular grid: {len(parsed)} entries for "
                         f"{len(bs_ranges)} batch-size ranges x {len(ctx_ranges)} context ranges")
    if ctx_ranges[0][0] != 1:
        raise ValueError("the first context range must start at 1")
    for before, after in zip(ctx_ranges, ctx_ranges[1:]):
        if after[0] != before[1] + 1:
            raise ValueError(f"context ranges must be contiguous: {list(before)} is followed by {list(after)}")
    last_lo = ctx_ranges[-1][0]
    ctx_hi_of = {lo: (CTX_INFINITY if lo == last_lo else hi) for lo, hi in ctx_ranges}
    seen: set[tuple[int, int, int]] = set()
    normalized = []
    for bs_lo, bs_hi, ctx_lo, _, k in parsed:
        if (bs_lo, bs_hi, ctx_lo) in seen:
            raise ValueError(f"two entries for batch sizes {bs_lo}-{bs_hi}, context from {ctx_lo}")
        seen.add((bs_lo, bs_hi, ctx_lo))
        normalized.append((bs_lo, bs_hi, ctx_lo, ctx_hi_of[ctx_lo], k))
    return sorted(normalized, key=lambda e: (e[0], e[2]))


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def parse_schedule(text: str) -> list[Entry]:
    """A schedule from its JSON text (the flag's value), normalised; ``ValueError`` if bad."""
    try:
        schedule = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at character {exc.pos})") from None
    return normalize_schedule(schedule)


def draft_tokens_at(schedule: list[Entry], num_speculative_tokens: int, batch_size: int,
                    context_length: int = 1) -> int:
    """K at ``batch_size`` and ``context_length`` under a normalised schedule: the entry whose
    context range holds the length (past the last: the last), and within it the batch-size range
    holding the batch, or the previous one for a gap or the tail; clamped to
    ``num_speculative_tokens`` (utils.py ``build_dynamic_sd_schedule_lookup``, ``bucket_of``)."""
    if num_speculative_tokens <= 0:
        raise ValueError("num_speculative_tokens must be > 0")
    ctx_ranges = sorted({(lo, hi) for _, _, lo, hi, _ in schedule})
    ctx_lo = next((lo for lo, hi in ctx_ranges if context_length <= hi), ctx_ranges[-1][0])
    k = None
    for bs_lo, _, lo, _, entry_k in schedule:  # sorted by batch size
        if lo == ctx_lo and bs_lo <= max(batch_size, 1):
            k = entry_k
    return min(num_speculative_tokens, k if k is not None else 0)


def has_context_axis(schedule: list[Entry]) -> bool:
    """Whether the schedule has more than one context range (needs the 5-item form)."""
    return len({(lo, hi) for _, _, lo, hi, _ in schedule}) > 1


def compact_form(schedule: list[Entry]) -> list[list[int]]:
    """A normalised schedule as JSON entries: 3-item when it has one context range (1..∞),
    5-item otherwise (what ``/server_info`` shows)."""
    if has_context_axis(schedule):
        return [list(entry) for entry in schedule]
    return [[bs_lo, bs_hi, k] for bs_lo, bs_hi, _, _, k in schedule]

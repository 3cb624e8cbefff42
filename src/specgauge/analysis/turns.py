"""Per-turn figures of a point whose suite has multi-turn sessions (:mod:`specgauge.load.sessions`).

For each turn index: how many turns were measured and succeeded, TTFT and ICL/ITL (the definitions
of :mod:`specgauge.analysis.definitions`), acceptance length (mean over requests), prompt tokens, and
the server's prefix-cache hits: the prompt tokens its cache served (``cached_tokens``, where the
server reports it per request) and their share of those turns' prompt tokens. A later turn sends
the whole history again, so on a server with prefix caching its share should rise with the turn.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from specgauge.analysis import definitions
from specgauge.analysis.summary import summarize
from specgauge.client.records import RequestRecord


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def turn_figures(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """One dict per turn index present in ``records`` (in order); empty when no record is a turn."""
    by_turn: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        if record.turn_index is not None:
            by_turn[record.turn_index].append(record)
    rows = []
    for turn in sorted(by_turn):
        group = by_turn[turn]
        ok = [r for r in group if r.ok]
        ttft = summarize(v for v in map(definitions.ttft_ms, ok) if v is not None)
        itl = summarize(v for r in ok for v in definitions.itl_ms(r))
        icl = summarize(v for r in ok for v in definitions.icl_ms(r))
        accepts = [a for a in map(definitions.accept_length, ok) if a is not None]
        reporting = [r for r in ok if r.cached_tokens is not None and r.prompt_tokens]
        prompt_in_reporting = sum(r.prompt_tokens or 0 for r in reporting)
        rows.append({
            "turn": turn,
            "requests": len(group),
            "ok": len(ok),
            "ttft_ms_p50": ttft.p50, "ttft_ms_mean": ttft.mean,
            "icl_ms_p50": icl.p50, "itl_ms_p50": itl.p50, "itl_ms_mean": itl.mean,
            "accept_length": _mean(accepts),
            "prompt_tokens_mean": _mean([r.prompt_tokens for r in ok if r.prompt_tokens is not None]),
            "cached_tokens_mean": _mean([r.cached_tokens for r in reporting]),
            "cache_hit_share": (sum(r.cached_tokens or 0 for r in reporting) / prompt_in_reporting
                                if prompt_in_reporting else None),
            "cache_reported": len(reporting),
        })
    return rows

"""The per-turn table of a run whose suite has multi-turn sessions (analysis/turns.py's figures)."""

from __future__ import annotations

from rich.table import Table

from specgauge.report.formatting import describe_point
from specgauge.store import PointRow


def _cell(value: float | None, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


def turns_table(points: list[PointRow]) -> Table | None:
    """One row per (point, turn index): TTFT, ICL, ITL, acceptance, prompt tokens and the server's
    prefix-cache hits; None when no point has per-turn figures."""
    rows = [(point, row) for point in points for row in (point.aggregates or {}).get("turns") or ()]
    if not rows:
        return None
    table = Table(title="per turn (multi-turn sessions: each turn sent after the previous answer)",
                  title_justify="left", caption_justify="left")
    for header in ("point", "turn", "ok/sent", "TTFT p50", "TTFT mean", "ICL p50", "ITL p50", "accept",
                   "prompt tok", "cached tok", "cache hit"):
        table.add_column(header, justify="left" if header == "point" else "right")
    for point, row in rows:
        share = row.get("cache_hit_share")
        table.add_row(describe_point(point.spec), str(row["turn"]), f"{row['ok']}/{row['requests']}",
                      _cell(row["ttft_ms_p50"]), _cell(row["ttft_ms_mean"]), _cell(row["icl_ms_p50"]),
                      _cell(row["itl_ms_p50"]), _cell(row["accept_length"], ".2f"),
                      _cell(row["prompt_tokens_mean"], ",.0f"), _cell(row["cached_tokens_mean"], ",.0f"),
                      "-" if share is None else f"{share:.0%}")
    table.caption = ("latencies in ms · cached tok: prompt tokens the server's prefix cache served, as it reports "
                     "them per request (vLLM --enable-prompt-tokens-details, SGLang meta_info / --enable-cache-report);"
                     " '-' where it does not")
    return table

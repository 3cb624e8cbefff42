"""The single-stream speedups of a Spec-Bench or MT-bench suite in the table layout those
benchmarks publish: one row, a column per category, the mean accepted tokens, the overall.

Spec-Bench's layout is its leaderboard's (hemingkx/Spec-Bench ``Leaderboard.md``): columns
"Multi-turn Conversation" (MT-bench's eight categories pooled), "Translation", "Summa-rization",
"Question Answering", "Mathematical Reasoning", "Retrieval-aug. Generation", "#Mean Accepted
Tokens", "Overall"; a speedup is written ``2.08x``. An MT-bench suite (imported with
``--format mtbench``, whose categories become specgauge's domains) gets a column per domain.
Here every speedup carries its 95% interval, as everywhere in specgauge.
"""

from __future__ import annotations

from specgauge.analysis.results import CompareResult, SingleStreamDomain

OVERALL = "overall"
MULTI_TURN = "multi-turn conversation"
# MT-bench's categories, which Spec-Bench's question.jsonl keeps as its first 80 questions
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
SPEC_BENCH_COLUMNS = (("Multi-turn Conversation", MULTI_TURN), ("Translation", "translation"),
                      ("Summa-rization", "summarization"), ("Question Answering", "qa"),
                      ("Mathematical Reasoning", "math_reasoning"), ("Retrieval-aug. Generation", "rag"))


def pooled_groups(layout: str | None, domains: list[str]) -> list[tuple[str, list[str]]]:
    """The rows to pool for ``layout`` over the measured ``domains``: (name, its domains)."""
    if layout is None or not domains:
        return []
    groups = [(OVERALL, sorted(domains))]
    multi_turn = [d for d in domains if d in MT_BENCH_CATEGORIES]
    if layout == "specbench" and multi_turn:
        groups.append((MULTI_TURN, multi_turn))
    return groups


def _speedup(row: SingleStreamDomain | None) -> str:
    if row is None or row.speedup is None:
        return "-"
    if row.ci_low is None or row.ci_high is None:
        return f"{row.speedup:.2f}x"
    return f"{row.speedup:.2f}x [{row.ci_low:.2f}, {row.ci_high:.2f}]"


def field_table_lines(result: CompareResult) -> list[str]:
    """The Markdown table (header, rule, one row) in the suite's field layout; empty when the
    comparison's suite is neither Spec-Bench nor MT-bench."""
    layout = result.settings.suite_layout
    if layout is None or not result.single_stream_pooled:
        return []
    rows = {row.domain: row for row in result.single_stream}
    rows.update({row.domain: row for row in result.single_stream_pooled})
    if layout == "specbench":
        columns = [(title, key) for title, key in SPEC_BENCH_COLUMNS if key in rows]
        columns += [(d, d) for d in sorted(rows) if d not in {k for _, k in SPEC_BENCH_COLUMNS}
                    and d not in MT_BENCH_CATEGORIES and d != OVERALL]
    else:
        columns = [(d, d) for d in sorted(r.domain for r in result.single_stream)]
    overall = rows.get(OVERALL)
    accept = "-" if overall is None or overall.accept_length is None else f"{overall.accept_length:.2f}"
    titles = ["Models", *(title for title, _ in columns), "#Mean Accepted Tokens", "Overall"]
    cells = [result.speculative_label, *(_speedup(rows.get(key)) for _, key in columns), accept, _speedup(overall)]
    return ["| " + " | ".join(titles) + " |", "| " + " | ".join(["---"] * len(titles)) + " |",
            "| " + " | ".join(cells) + " |"]

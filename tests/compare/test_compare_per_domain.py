"""``compare --suite`` on an imported Spec-Bench file: ``--single-stream-requests N`` is N per
category and arm (a shortfall named before the run), and the field's per-category table."""

import json

from cli_testkit import run_cli
from specgauge.compare.per_domain import per_domain_choice, suite_layout
from specgauge.suites.model import Suite, SuiteRequest
from specgauge.suites.registry import load_suite
from specgauge.testing.scripted_server import Script, ScriptedServer

CATEGORIES = {"writing": 5, "translation": 5, "summarization": 5, "qa": 5, "math_reasoning": 5, "rag": 3}
BASELINE = Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=12)
SPECULATIVE = Script(ttft_s=0.002, chunk_delay_s=0.002, num_chunks=4, tokens_per_chunk=3,
                     sglang_meta={"spec_accept_length": 3.0})


def _spec_bench_file(path):
    """A question.jsonl in Spec-Bench's shape (question_id, category, turns), CATEGORIES' counts."""
    lines, qid = [], 0
    for category, count in CATEGORIES.items():
        for i in range(count):
            qid += 1
            lines.append(json.dumps({"question_id": qid, "category": category,
                                     "turns": [f"{category} question {i}: say something."]}))
    path.write_text("\n".join(lines) + "\n")


def test_per_domain_choice_takes_n_of_each_domain_and_names_the_short_ones():
    requests = [SuiteRequest(prompt=f"{d} {i}", domain=d) for d, n in (("a", 7), ("b", 2)) for i in range(n)]
    derived, shortfalls = per_domain_choice(Suite(name="s", requests=tuple(requests)), 4, seed=1)
    assert sorted(r.domain for r in derived.requests) == ["a"] * 4 + ["b"] * 2
    assert len(shortfalls) == 1 and "domain 'b'" in shortfalls[0] and "2 of the 4" in shortfalls[0]
    again, _ = per_domain_choice(Suite(name="s", requests=tuple(requests)), 4, seed=1)
    assert again == derived   # the same prompts for both arms, every round, a resume


def test_compare_suite_specbench_sends_n_per_category_and_prints_the_field_table(tmp_path):
    source = tmp_path / "question.jsonl"
    _spec_bench_file(source)
    suite_file = tmp_path / "specbench@1.jsonl"
    imported = run_cli("suite", "import", source, "--name", "specbench", "--format", "specbench",
                       "--max-tokens", "16", "--output", suite_file)
    assert imported.returncode == 0, imported.stderr
    assert suite_layout(load_suite(str(suite_file))) == "specbench"
    with ScriptedServer(BASELINE) as baseline, ScriptedServer(SPECULATIVE) as speculative:
        done = run_cli("compare", "--baseline", baseline.url, "--speculative", speculative.url, "--api", "sglang",
                       "--raw-chat-format", "--suite", suite_file, "--single-stream-requests", "5",
                       "--concurrency", "2", "--num-requests", "4", "--warmup", "0", "--resamples", "200",
                       "--output-json", tmp_path / "v.json", "--db", tmp_path / "c.db")
        sent = len(baseline.requests_seen)
    assert done.returncode == 0, done.stderr
    assert "domain 'rag'" in done.stderr and "3 of the 5" in done.stderr   # named before the run
    verdict = json.loads((tmp_path / "v.json").read_text())
    pairs = {row["domain"]: row["pairs"] for row in verdict["single_stream"]}
    assert pairs == {d: min(n, 5) for d, n in CATEGORIES.items()}
    assert sent == sum(min(n, 5) for n in CATEGORIES.values()) + 4   # single stream, then the sweep point
    pooled = {row["domain"]: row for row in verdict["single_stream_pooled"]}
    assert pooled["overall"]["pairs"] == 28 and pooled["multi-turn conversation"]["pairs"] == 5
    assert pooled["overall"]["speedup"] > 1 and pooled["overall"]["accept_length"] == 3.0
    header = next(line for line in done.stdout.splitlines() if line.startswith("| Models"))
    assert header.split(" | ")[1:4] == ["Multi-turn Conversation", "Translation", "Summa-rization"]
    assert header.rstrip(" |").endswith("#Mean Accepted Tokens | Overall")
    row = next(line for line in done.stdout.splitlines() if line.startswith("| speculation"))
    assert len(row.split(" | ")) == len(header.split(" | ")) and "x [" in row

"""from-training-data on a synthetic directory with a known mix, tokenized with a real (tiny) tokenizer."""

from __future__ import annotations

import json

import pytest
from suite_fixtures import DUPLICATES_PER_SOURCE, SOURCE_COUNTS, conversation, run_cli, tokenize_conversation

from specgauge.suites.model import read_suite_jsonl
from specgauge.suites.training_data import (BuildOptions, allocate, build_suite_from_training_data, is_held_out,
                                            request_key_text, text_hash)


def _expected_prompt(source: str, index: int) -> list[dict]:
    return conversation(source, index)[:-1]


def _find_origin(request) -> tuple[str, int]:
    """Which synthetic sample a request came from (its user text carries the index)."""
    user = next(m.content for m in request.messages if m.role == "user")
    return request.source, int(user.split(":")[0].removeprefix("Please explain "))


@pytest.mark.parametrize("size,weights", [(12, None), (37, None), (18, {"code_stdlib": 2, "prose_docs": 1}),
                                          (9, {"code_stdlib": 1, "agentic_tools": 1, "prose_docs": 1})])
def test_stratified_within_one_prompt_per_source(training_dir, tokenizer_path, size, weights):
    suite, reports = build_suite_from_training_data(training_dir, tokenizer_path,
                                                    BuildOptions(size=size, weights=weights))
    assert len(suite.requests) == size
    found = {s: SOURCE_COUNTS[s] + DUPLICATES_PER_SOURCE for s in SOURCE_COUNTS}
    mix = weights or found
    total_weight = sum(mix.get(s, 0) for s in SOURCE_COUNTS)
    counts = {s: sum(r.source == s for r in suite.requests) for s in SOURCE_COUNTS}
    for source in SOURCE_COUNTS:
        assert abs(counts[source] - size * mix.get(source, 0) / total_weight) <= 1, (source, counts)
    assert suite.build_info["found"] == found
    assert suite.build_info["sampled"] == counts
    assert {r.name: r.sampled for r in reports} == counts


def test_allocation_is_within_one_of_exact_share():
    weights = {"a": 0.53, "b": 0.31, "c": 0.16, "d": 0.0}
    for total in range(1, 60):
        counts = allocate(total, weights)
        assert sum(counts.values()) == total
        assert all(abs(counts[k] - total * w) < 1 for k, w in weights.items())


def test_prompt_response_split_is_exact(training_dir, tokenizer_path, tokenizer):
    suite, _ = build_suite_from_training_data(training_dir, tokenizer_path, BuildOptions(size=30))
    for request in suite.requests:
        source, index = _find_origin(request)
        assert [m.model_dump() for m in request.messages] == _expected_prompt(source, index)
        response = conversation(source, index)[-1]["content"]
        response_tokens = len(tokenizer.encode(response, add_special_tokens=False).ids) + 1  # + <|end|>
        assert request.max_tokens == max(16, response_tokens)
        assert request.domain == {"code_stdlib": "coding", "agentic_tools": "agentic",
                                  "prose_docs": "encyclopedic"}[source]


def test_duplicates_are_dropped(training_dir, tokenizer_path):
    distinct = sum(SOURCE_COUNTS.values())
    stored = distinct + DUPLICATES_PER_SOURCE * len(SOURCE_COUNTS)
    suite, reports = build_suite_from_training_data(training_dir, tokenizer_path,
                                                    BuildOptions(size=stored, allow_fewer=True))
    keys = [text_hash(request_key_text(r)) for r in suite.requests]
    assert len(set(keys)) == len(keys) == distinct
    assert sum(r.duplicates for r in reports) == DUPLICATES_PER_SOURCE * len(SOURCE_COUNTS)


def test_holdout_is_disjoint_from_the_rest(training_dir, tokenizer_path):
    fraction = 0.5
    suite, reports = build_suite_from_training_data(
        training_dir, tokenizer_path, BuildOptions(size=10, holdout=fraction, allow_fewer=True))
    everything, _ = build_suite_from_training_data(training_dir, tokenizer_path,
                                                   BuildOptions(size=sum(SOURCE_COUNTS.values()),
                                                                weights=SOURCE_COUNTS))
    held_out = {request_key_text(r) for r in everything.requests if is_held_out(request_key_text(r), fraction)}
    rest = {request_key_text(r) for r in everything.requests} - held_out
    chosen = {request_key_text(r) for r in suite.requests}
    assert chosen and chosen <= held_out and not chosen & rest
    assert sum(r.outside_holdout for r in reports) > 0


def test_seed_changes_the_sample_and_the_same_seed_repeats_it(training_dir, tokenizer_path):
    first, _ = build_suite_from_training_data(training_dir, tokenizer_path, BuildOptions(size=10, seed=1))
    again, _ = build_suite_from_training_data(training_dir, tokenizer_path, BuildOptions(size=10, seed=1))
    other, _ = build_suite_from_training_data(training_dir, tokenizer_path, BuildOptions(size=10, seed=2))
    assert first.content_hash == again.content_hash != other.content_hash


def test_cli_writes_the_contract_format(training_dir, tokenizer_path, tmp_path):
    output = tmp_path / "drafter.jsonl"
    result = run_cli("suite", "from-training-data", training_dir, "--tokenizer", tokenizer_path.parent,
                     "--size", 12, "--output", output, "--holdout", "1.0", "--max-tokens", 200)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert set(lines[0]) == {"suite"} and lines[0]["suite"]["source_mix"]
    for line in lines[1:]:
        assert ("messages" in line) != ("prompt" in line)
        assert line["source"] in SOURCE_COUNTS and line["max_tokens"] == 200 and line["domain"]
    assert read_suite_jsonl(output).name == "drafter"


def test_domain_map_overrides_the_heuristic(training_dir, tokenizer_path):
    suite, _ = build_suite_from_training_data(training_dir, tokenizer_path,
                                              BuildOptions(size=6, domain_map={"prose_docs": "history"}))
    assert {r.domain for r in suite.requests if r.source == "prose_docs"} == {"history"}


def test_fewer_eligible_samples_than_asked_stops(training_dir, tokenizer_path, tmp_path):
    result = run_cli("suite", "from-training-data", training_dir, "--tokenizer", tokenizer_path,
                     "--size", 500, "--output", tmp_path / "x.jsonl")
    assert result.returncode == 2 and "not enough eligible samples" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()
    result = run_cli("suite", "from-training-data", training_dir, "--tokenizer", tokenizer_path,
                     "--size", 500, "--output", tmp_path / "x.jsonl", "--allow-fewer")
    assert result.returncode == 0, result.stderr
    assert len(read_suite_jsonl(tmp_path / "x.jsonl").requests) == sum(SOURCE_COUNTS.values())


def test_roundtrip_tokenize_matches_fixture(tokenizer):
    ids, mask = tokenize_conversation(tokenizer, conversation("code_stdlib", 3))
    assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)

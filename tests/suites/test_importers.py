"""Each importer on small sample files, through the CLI and the Python API."""

from __future__ import annotations

import json

import pytest
from suite_fixtures import run_cli

from specgauge.suites.importers import detect_format, import_suite
from specgauge.suites.model import read_suite_jsonl


def _jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_messages_and_prompt(tmp_path):
    path = _jsonl(tmp_path / "mine.jsonl", [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}],
         "max_tokens": 32, "domain": "chat"},
        {"prompt": "Once upon a time", "domain": "story"},
        {"messages": [{"role": "user", "content": "Name a prime."}, {"role": "assistant", "content": "7" * 400}]},
    ])
    suite = import_suite(path, "mine")
    first, second, third = suite.requests
    assert [m.role for m in first.messages] == ["system", "user"] and first.max_tokens == 32 and first.domain == "chat"
    assert second.prompt == "Once upon a time" and second.max_tokens == 256 and second.domain == "story"
    assert [m.role for m in third.messages] == ["user"] and third.max_tokens == 100  # 400 chars / 4
    assert detect_format(path) == "jsonl"


def test_sharegpt_json(tmp_path):
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "Write a poem."}, {"from": "gpt", "value": "Roses"}]},
        {"id": "b", "conversations": [{"from": "system", "value": "You are terse."}, {"from": "human", "value": "2+2?"},
                                      {"from": "gpt", "value": "4"}, {"from": "human", "value": "times 3?"}]},
    ]))
    suite = import_suite(path, "sg", domain="chat")
    assert [m.role for m in suite.requests[0].messages] == ["user"]
    assert [m.role for m in suite.requests[1].messages] == ["system", "user", "assistant", "user"]
    assert {r.domain for r in suite.requests} == {"chat"}


def test_mt_bench_maps_categories_to_domains(tmp_path):
    path = _jsonl(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Write a travel blog post.", "Rewrite it in rhyme."]},
        {"question_id": 111, "category": "math", "turns": ["What is 3^4?", "And 4^3?"]},
        {"question_id": 121, "category": "coding", "turns": ["Write a BFS."]},
    ])
    assert detect_format(path) == "mtbench"
    suite = import_suite(path, "mt")
    assert [r.domain for r in suite.requests] == ["chat", "reasoning", "coding"]
    assert suite.requests[0].messages[0].content == "Write a travel blog post."
    # every turn kept: the second is a later turn of a session, sent after the first turn's answer
    assert [m.content for m in suite.requests[0].next_turns] == ["Rewrite it in rhyme."]
    assert suite.requests[2].next_turns is None and suite.has_sessions
    assert "a session of 2 turns" in suite.requests[0].notes


def test_spec_bench_category_becomes_the_domain(tmp_path):
    path = _jsonl(tmp_path / "question.jsonl", [
        {"question_id": 1, "category": "translation", "turns": ["Translate to German: good morning"]},
        {"question_id": 2, "category": "rag", "turns": ["Context: ... Question: who?"]},
        {"question_id": 3, "category": "writing", "turns": ["Write a haiku."]},
    ])
    assert detect_format(path) == "specbench"
    suite = import_suite(path, "sb")
    assert [r.domain for r in suite.requests] == ["translation", "rag", "writing"]


def test_csv(tmp_path):
    path = tmp_path / "prompts.csv"
    path.write_text('prompt,domain,max_tokens\n"Explain tides, briefly",encyclopedic,64\nTell a joke,,\n')
    suite = import_suite(path, "csv")
    assert suite.requests[0].messages is None and suite.requests[0].prompt == "Explain tides, briefly"
    assert suite.requests[0].max_tokens == 64 and suite.requests[1].domain == "general"


@pytest.mark.parametrize("kind", ["parquet", "arrow", "datasets"])
def test_parquet_arrow_and_datasets_dir(tmp_path, kind):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"prompt": ["First prompt", "Second prompt", "Third prompt"],
                      "domain": ["coding", "chat", "coding"]})
    if kind == "parquet":
        path = tmp_path / "p.parquet"
        pq.write_table(table, path, row_group_size=2)
    elif kind == "arrow":
        path = tmp_path / "p.arrow"
        with pa.ipc.new_file(path, table.schema) as writer:
            writer.write_table(table)
    else:
        path = tmp_path / "saved"
        path.mkdir()
        with pa.ipc.new_stream(path / "data-00000-of-00001.arrow", table.schema) as writer:
            writer.write_table(table)
        (path / "state.json").write_text("{}")
    suite = import_suite(path, "tab")
    assert [r.prompt for r in suite.requests] == ["First prompt", "Second prompt", "Third prompt"]
    assert [r.domain for r in suite.requests] == ["coding", "chat", "coding"]


def test_cli_import_writes_a_loadable_suite(tmp_path):
    source = _jsonl(tmp_path / "q.jsonl", [{"prompt": "Hello"}, {"prompt": "World"}])
    output = tmp_path / "out.jsonl"
    result = run_cli("suite", "import", source, "--name", "hello", "--domain", "chat", "--output", output)
    assert result.returncode == 0, result.stderr
    suite = read_suite_jsonl(output)
    assert suite.ref == "hello@1" and len(suite.requests) == 2 and suite.domains() == ["chat"]
    shown = run_cli("suite", "show", output)
    assert shown.returncode == 0 and "hello@1" in shown.stdout and "chat 2" in shown.stdout

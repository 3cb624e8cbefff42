"""The field's prompt sets, whole, from small files the tests write: MT-bench entries keep every turn (the
second sent after the first turn's actual answer), SPEED-Bench rows import with their categories and
throughput splits as domains, and a file that is not the format is one line naming its line."""

from __future__ import annotations

import json

import pytest
from suite_fixtures import run_cli

from specgauge.suites.importers import detect_format, import_suite
from specgauge.suites.importers.speedbench import PLACEHOLDER
from specgauge.suites.model import read_suite_jsonl
from specgauge.testing.scripted_server import Script, ScriptedServer
from specgauge.errors import UserError

QUESTION_ID = "0123456789abcdef0123456789abcdef"


def _jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _speedbench_row(category: str, turns: list[str], **extra) -> dict:
    return {"question_id": QUESTION_ID, "category": category, "sub_category": "general", "turns": turns,
            "source": "test", "src_id": "1", "difficulty": "easy", "multiturn": len(turns) > 1, **extra}


def test_an_mt_bench_files_second_turns_are_sent_after_the_first_answers(tmp_path):
    question = _jsonl(tmp_path / "question.jsonl", [
        {"question_id": 81, "category": "writing", "turns": ["Write a travel blog post.", "Rewrite it in rhyme."]},
        {"question_id": 82, "category": "coding", "turns": ["Write a BFS.", "Now make it iterative."]},
    ])
    imported = run_cli("suite", "import", question, "--name", "mt", "--format", "mtbench", "--max-tokens", "8",
                       "--output", tmp_path / "mt@1.jsonl")
    assert imported.returncode == 0, imported.stderr
    script = Script(num_chunks=2, token_text="ans ", unique_answers=True)
    with ScriptedServer(script) as server:
        result = run_cli("bench", server.url, "--suite", tmp_path / "mt@1.jsonl", "--concurrency", "1",
                         "--num-requests", "2", "--warmup", "0", "--db", tmp_path / "r.db")
        bodies = list(server.requests_seen)
    assert result.returncode == 0, result.stderr
    assert len(bodies) == 4 and "per turn" in result.stdout
    for second_turn in ("Rewrite it in rhyme.", "Now make it iterative."):
        (body,) = [b for b in bodies if b["messages"][-1]["content"] == second_turn]
        first, answer, _ = body["messages"]
        assert first["role"] == "user" and answer["role"] == "assistant"
        # the answer the server gave to this conversation's first turn, not a canned one
        (first_body_index,) = [i for i, b in enumerate(bodies) if b["messages"] == [first]]
        assert answer["content"].startswith(f"<req-{first_body_index + 1}>")


def test_speed_bench_qualitative_and_throughput_rows_become_domains(tmp_path):
    qualitative = _jsonl(tmp_path / "qualitative" / "test.jsonl", [
        _speedbench_row("coding", ["Write a function.", "Add tests."]),
        _speedbench_row("multilingual", ["Traduis: bonjour"]),
    ])
    assert detect_format(qualitative) == "speedbench"
    suite = import_suite(qualitative, "sq")
    assert [r.domain for r in suite.requests] == ["coding", "multilingual"]
    assert [m.content for m in suite.requests[0].next_turns] == ["Add tests."] and suite.requests[1].next_turns is None
    assert "sub-category general" in suite.requests[0].notes

    throughput = _jsonl(tmp_path / "throughput_8k" / "test.jsonl", [
        _speedbench_row("low_entropy", ["x " * 50]), _speedbench_row("high_entropy", ["y " * 50]),
    ])
    assert [r.domain for r in import_suite(throughput, "st", fmt="speedbench").requests] == \
        ["throughput_8k:low_entropy", "throughput_8k:high_entropy"]


def test_speed_bench_parquet_and_aiperf_messages_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [_speedbench_row("mixed", ["a long prompt"]), _speedbench_row("high_entropy", ["another", "and more"])]
    path = tmp_path / "throughput_1k" / "test-00000-of-00001.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert detect_format(path) == "speedbench"
    suite = import_suite(path, "sp")
    assert [r.domain for r in suite.requests] == ["throughput_1k:mixed", "throughput_1k:high_entropy"]
    assert suite.requests[1].num_turns == 2

    resolved = _jsonl(tmp_path / "resolved.jsonl", [   # AIPerf's resolved form: messages instead of turns
        {"question_id": QUESTION_ID, "category": "rag", "sub_category": "x",
         "messages": [{"role": "user", "content": "Context ... question?"}, {"role": "user", "content": "Why?"}]}])
    (request,) = import_suite(resolved, "sr", fmt="speedbench").requests
    assert request.domain == "rag" and [m.content for m in request.next_turns] == ["Why?"]


@pytest.mark.parametrize("record, needle", [
    ({"question_id": QUESTION_ID, "prompt": "no category"}, "not a SPEED-Bench row"),
    (_speedbench_row("coding", [PLACEHOLDER]), "placeholder"),
])
def test_a_file_that_is_not_speed_bench_is_one_line_with_its_line(tmp_path, record, needle):
    path = _jsonl(tmp_path / "bad.jsonl", [_speedbench_row("coding", ["fine"]), record])
    with pytest.raises(UserError, match=needle) as error:
        import_suite(path, "bad", fmt="speedbench")
    assert f"{path}:2:" in str(error.value)
    result = run_cli("suite", "import", path, "--name", "bad", "--format", "speedbench",
                     "--output", tmp_path / "bad@1.jsonl")
    assert result.returncode == 2 and "bad.jsonl:2:" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_file_that_is_not_mt_bench_is_one_line_with_its_line(tmp_path):
    path = _jsonl(tmp_path / "q.jsonl", [{"question_id": 1, "category": "writing", "turns": ["ok"]},
                                         {"messages": [{"role": "user", "content": "not mt-bench"}]}])
    with pytest.raises(UserError, match=r"q.jsonl:2: not an MT-bench question \(needs 'turns'"):
        import_suite(path, "q", fmt="mtbench")


def test_an_imported_session_suite_round_trips(tmp_path):
    path = _jsonl(tmp_path / "question.jsonl", [{"question_id": 1, "category": "math", "turns": ["2+2?", "x2?"]}])
    suite = import_suite(path, "rt")
    out = tmp_path / "rt@1.jsonl"
    from specgauge.suites.model import write_suite_jsonl

    write_suite_jsonl(suite, out)
    again = read_suite_jsonl(out)
    assert again.content_hash == suite.content_hash and again.requests[0].num_turns == 2

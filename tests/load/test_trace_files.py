"""Trace files read one line at a time: every format, detection, the selection, and one error
line (file, line, field; exit 2) for each way a line can be bad."""

import json
from pathlib import Path

import pytest

from cli_testkit import one_line_error, run_cli
from specgauge.client.tokens import load_tokenizer
from specgauge.errors import UserError
from specgauge.load.traces.formats import detect_format, read_trace
from specgauge.load.traces.selection import TraceSelection, parse_window, select
from specgauge.load.traces.text import BlockText

TOKENIZER = Path(__file__).resolve().parents[2] / "src" / "specgauge" / "assets" / "target" / "tokenizer.json"
NOWHERE = "http://127.0.0.1:9"   # the trace is checked before any server is contacted


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _mooncake(i: int, t_ms: int) -> dict:
    return {"timestamp": t_ms, "input_length": 600 + i, "output_length": 10 + i, "hash_ids": [1, 2, 100 + i]}


def test_each_format_reads_time_lengths_blocks_and_prompts(tmp_path):
    mooncake = _jsonl(tmp_path / "m.jsonl", [_mooncake(0, 0), _mooncake(1, 1500)])
    bailian = _jsonl(tmp_path / "b.jsonl", [{"chat_id": 7, "parent_chat_id": -1, "timestamp": 61.5, "input_length": 52,
                                             "output_length": 13, "type": "text", "turn": 1, "hash_ids": [4, 5, 6, 7]}])
    burst = tmp_path / "burst.csv"
    burst.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                     "5,ChatGPT,472,18,490,Conversation log\n7.5,GPT-4,1087,0,1087,API log\n")
    timed = _jsonl(tmp_path / "t.jsonl", [{"timestamp": 0.25, "messages": [{"role": "user", "content": "hi"}],
                                          "max_tokens": 9, "session_id": "s1"},
                                         {"timestamp": 0.5, "prompt": "Write a haiku.", "output_length": 17}])
    assert [detect_format(p) for p in (mooncake, bailian, burst, timed)] == \
        ["mooncake", "bailian", "burstgpt", "timed-jsonl"]
    first, second = read_trace(mooncake, "mooncake")
    assert (second.timestamp_s, second.input_length, second.output_length, second.hash_ids, second.block_tokens) == \
        (1.5, 601, 11, (1, 2, 101), 512)
    assert [line.timestamp_s for line in read_trace(mooncake, "vllm-timed")] == [0.0, 1500.0]   # seconds there
    (row,) = read_trace(bailian, "bailian")
    assert (row.timestamp_s, row.block_tokens, row.session_id) == (61.5, 16, "7")
    logged, failed = read_trace(burst, "burstgpt")
    assert (logged.line, logged.timestamp_s, logged.input_length, logged.output_length) == (2, 5.0, 472, 18)
    assert failed.output_length == 0
    chat, raw = read_trace(timed, "timed-jsonl")
    assert chat.messages == (("user", "hi"),) and chat.max_tokens == 9 and chat.session_id == "s1"
    assert raw.prompt == "Write a haiku." and raw.output_length == 17


def test_selection_windows_counts_sorts_and_stops_reading_early(tmp_path):
    lines = [_mooncake(i, i * 1000) for i in range(10)] + ["{not json"]   # a bad line past what is needed
    path = _jsonl(tmp_path / "m.jsonl", lines)
    window = list(select(path, "mooncake", TraceSelection(window=(2.0, 5.0))))
    assert [t.trace_s for t in window] == [2.0, 3.0, 4.0, 5.0]
    assert len(list(select(path, "mooncake", TraceSelection(max_requests=3)))) == 3
    with pytest.raises(UserError, match=r"m.jsonl:11: not valid JSON"):
        list(select(path, "mooncake", TraceSelection()))
    shuffled = _jsonl(tmp_path / "s.jsonl", [_mooncake(0, 3000), _mooncake(1, 1000), _mooncake(2, 2000)])
    with pytest.raises(UserError, match=r"s.jsonl:2: field 'timestamp': earlier than the line before"):
        list(select(shuffled, "mooncake", TraceSelection()))
    ordered = list(select(shuffled, "mooncake", TraceSelection(sort=True, window=(0.5, None))))
    assert [(t.request.line, t.trace_s) for t in ordered] == [(3, 1.0), (1, 2.0)]
    assert parse_window("60-") == (60.0, None) and parse_window("-30") == (0.0, 30.0)


def test_equal_hash_blocks_get_equal_text_and_lengths_are_token_exact():
    tokenizer = load_tokenizer(str(TOKENIZER))
    source = " ".join(f"def step_{i}(state):\n    return state + {i}  # advance one tick" for i in range(60))
    text = BlockText(source, tokenizer)
    a = text.prompt(40, (11, 12, 13), 16, ("line", 1))
    b = text.prompt(37, (11, 12, 99), 16, ("line", 2))
    c = text.prompt(40, (55, 56, 57), 16, ("line", 3))
    ids = [tokenizer.encode(p, add_special_tokens=False).ids for p in (a, b, c)]
    assert [len(i) for i in ids] == [40, 37, 40]
    assert ids[0][:28] == ids[1][:28]                 # two shared 16-token blocks, give or take the boundary
    assert ids[0][:16] != ids[2][:16]                 # other blocks, other text
    assert text.prompt(40, (11, 12, 13), 16, ("line", 9)) == a   # the same on every call and run
    words = BlockText(source)                                    # no tokenizer: a word per token
    assert len(words.prompt(25, (11,), 16, ("line", 1)).split()) == 25


@pytest.mark.parametrize(("name", "lines", "needles"), [
    ("missing-field", [{"timestamp": 0, "output_length": 3, "hash_ids": [1], "input_length": 4},
                       {"timestamp": 5, "output_length": 3, "hash_ids": [1]}],
     ["missing-field.jsonl:2:", "field 'input_length'", "missing"]),
    ("bad-number", [{"timestamp": "soon", "input_length": 4, "output_length": 3, "hash_ids": []}],
     ["bad-number.jsonl:1:", "field 'timestamp'", "not a number"]),
    ("bad-hash", [{"timestamp": 0, "input_length": 4, "output_length": 3, "hash_ids": "abc"}],
     ["bad-hash.jsonl:1:", "field 'hash_ids'"]),
    ("not-json", [{"timestamp": 0, "input_length": 4, "output_length": 3, "hash_ids": []}, "{oops"],
     ["not-json.jsonl:2:", "not valid JSON"]),
    ("backwards", [{"timestamp": 9, "input_length": 4, "output_length": 3, "hash_ids": []},
                   {"timestamp": 2, "input_length": 4, "output_length": 3, "hash_ids": []}],
     ["backwards.jsonl:2:", "field 'timestamp'", "--trace-sort"]),
    ("bad-message", [{"timestamp": 0, "messages": [{"role": "robot", "content": "x"}]}],
     ["bad-message.jsonl:1:", "field 'messages[0]'"]),
])
def test_a_bad_trace_line_is_one_error_line_naming_file_line_and_field(tmp_path, name, lines, needles):
    path = _jsonl(tmp_path / f"{name}.jsonl", lines)
    done = run_cli("bench", NOWHERE, "--trace", path, "--trace-text-from", "coding", "--db", tmp_path / "r.db")
    one_line_error(done, *needles)
    assert not (tmp_path / "r.db").exists()


def test_burstgpt_bad_cell_and_missing_column_and_usage_errors(tmp_path):
    bad = tmp_path / "burst.csv"
    bad.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n1,GPT-4,12,3,15,API log\n"
                   "2,GPT-4,many,3,15,API log\n")
    one_line_error(run_cli("bench", NOWHERE, "--trace", bad, "--trace-text-from", "coding", "--db", tmp_path / "r.db"),
                   "burst.csv:3:", "field 'Request tokens'", "not a whole number")
    headless = tmp_path / "headless.csv"
    headless.write_text("Timestamp,Model,Response tokens\n1,GPT-4,3\n")
    one_line_error(run_cli("bench", NOWHERE, "--trace", headless, "--trace-format", "burstgpt", "--trace-text-from",
                           "coding", "--db", tmp_path / "r.db"), "headless.csv:1:", "field 'Request tokens'")
    lengths = _jsonl(tmp_path / "m.jsonl", [_mooncake(0, 0)])
    one_line_error(run_cli("bench", NOWHERE, "--trace", lengths, "--db", tmp_path / "r.db"), "--trace-text-from")
    one_line_error(run_cli("bench", NOWHERE, "--trace-speed", "2", "--db", tmp_path / "r.db"), "--trace-speed",
                   "needs --trace")
    one_line_error(run_cli("bench", NOWHERE, "--trace", lengths, "--trace-window", "9-3", "--db", tmp_path / "r.db"),
                   "--trace-window")
    one_line_error(run_cli("bench", NOWHERE, "--trace", lengths, "--concurrency", "4", "--trace-text-from", "coding",
                           "--db", tmp_path / "r.db"), "--trace", "--concurrency")

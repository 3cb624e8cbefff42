"""Every bad input ends in one line on stderr naming the file (and line), exit 2, no suite written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from suite_fixtures import conversation, run_cli, tokenize_conversation


def _assert_one_line_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _build(data_dir, tokenizer_path, tmp_path, *extra):
    output = tmp_path / "out.jsonl"
    result = run_cli("suite", "from-training-data", data_dir, "--tokenizer", tokenizer_path, "--size", 3,
                     "--output", output, *extra)
    if result.returncode != 0:
        assert not output.exists()
    return result


def _source(tmp_path, name="code_stdlib"):
    directory = tmp_path / "data" / name
    directory.mkdir(parents=True)
    return directory


def test_missing_and_empty_directories(tmp_path, tokenizer_path):
    _assert_one_line_error(_build(tmp_path / "nope", tokenizer_path, tmp_path), "not found", "nope")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(_build(tmp_path / "empty", tokenizer_path, tmp_path), "no source subdirectories")


def test_source_without_sample_files(tmp_path, tokenizer_path):
    directory = _source(tmp_path)
    (directory / "meta.json").write_text("{}")
    (directory / "README.txt").write_text("nothing here")
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "has no sample files", "code_stdlib")


def test_mixed_formats_in_one_source(tmp_path, tokenizer_path, tokenizer):
    directory = _source(tmp_path)
    ids, mask = tokenize_conversation(tokenizer, conversation("code_stdlib", 0))
    (directory / "a.jsonl").write_text(json.dumps({"input_ids": ids, "loss_mask": mask}) + "\n")
    np.save(directory / "b.npy", np.array([ids]))
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "mixes sample formats")


def test_mixed_record_kinds_in_one_jsonl_source(tmp_path, tokenizer_path, tokenizer):
    directory = _source(tmp_path)
    lines = []
    for i in range(6):
        if i % 2:
            lines.append({"messages": conversation("code_stdlib", i)})
        else:
            ids, mask = tokenize_conversation(tokenizer, conversation("code_stdlib", i))
            lines.append({"input_ids": ids, "loss_mask": mask})
    (directory / "shard-00000.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "mixed sample formats",
                           "shard-00000.jsonl:")


def test_token_ids_beyond_the_vocabulary(tmp_path, tokenizer_path):
    directory = _source(tmp_path)
    (directory / "shard-00000.jsonl").write_text(
        "".join(json.dumps({"input_ids": [5, 60000 + i, 7], "loss_mask": [0, 0, 1]}) + "\n" for i in range(4)))
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "beyond the vocabulary",
                           "wrong tokenizer?", "shard-00000.jsonl:")


def test_sample_with_no_prompt_part(tmp_path, tokenizer_path, tokenizer):
    directory = _source(tmp_path)
    ids = tokenizer.encode("all of this is response", add_special_tokens=False).ids
    (directory / "shard-00000.jsonl").write_text(
        "".join(json.dumps({"input_ids": ids, "loss_mask": [1] * len(ids)}) + "\n" for _ in range(4)))
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "no prompt part", ".jsonl:")


def test_sample_with_no_split_point(tmp_path, tokenizer_path, tokenizer):
    directory = _source(tmp_path)
    ids = tokenizer.encode("plain text without any chat markers", add_special_tokens=False).ids
    (directory / "shard-00000.jsonl").write_text(json.dumps({"input_ids": ids}) + "\n")
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "cannot split prompt from response")


def test_bad_json_line_in_training_data(tmp_path, tokenizer_path):
    directory = _source(tmp_path)
    (directory / "shard-00000.jsonl").write_text('{"input_ids": [1, 2\n')
    _assert_one_line_error(_build(tmp_path / "data", tokenizer_path, tmp_path), "shard-00000.jsonl:1",
                           "not valid JSON")


def test_wrong_tokenizer_path(training_dir, tmp_path):
    _assert_one_line_error(_build(training_dir, tmp_path / "missing", tmp_path), "tokenizer not found")


@pytest.mark.parametrize("flags,fragment", [(("--weights", "code_stdlib"), "name=value"),
                                            (("--weights", "nosuch=1"), "unknown sources"),
                                            (("--holdout", "1.5"), "--holdout")])
def test_bad_options(training_dir, tokenizer_path, tmp_path, flags, fragment):
    _assert_one_line_error(_build(training_dir, tokenizer_path, tmp_path, *flags), fragment)


@pytest.mark.parametrize("line,fragment", [("not json", "not valid JSON"),
                                           ('{"max_tokens": 3}', "bad request"),
                                           ('{"prompt": "x", "max_tokens": 0}', "bad request")])
def test_suite_file_with_a_bad_line(tmp_path, line, fragment):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    _assert_one_line_error(run_cli("suite", "show", path), "broken.jsonl:2", fragment)


def test_importer_bad_record(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"prompt": "ok"}\n{"text": "no prompt key"}\n')
    _assert_one_line_error(run_cli("suite", "import", path, "--name", "q", "--output", tmp_path / "o.jsonl"),
                           "q.jsonl:2", "needs 'messages'")
    csv_path = tmp_path / "q.csv"
    csv_path.write_text("question\nhello\n")
    _assert_one_line_error(run_cli("suite", "import", csv_path, "--name", "q"), "q.csv:1", "'prompt' column")


def test_unknown_suite_name():
    _assert_one_line_error(run_cli("suite", "show", "nosuchsuite"), "unknown suite")


def test_data_directory_passed_one_level_too_high(training_dir, tokenizer_path, tmp_path):
    """DIR/train/<source>/... given as DIR: the 'source' train holds several source directories."""
    import shutil

    shutil.copytree(training_dir, tmp_path / "corpus" / "train")
    _assert_one_line_error(_build(tmp_path / "corpus", tokenizer_path, tmp_path), "looks like a data directory",
                           "corpus/train")


@pytest.mark.parametrize(("line", "fragments"), [
    ('{"prompt": ""}', ["bad.jsonl:2:", "'prompt' is empty"]),
    ('{"prompt": "  \\n "}', ["bad.jsonl:2:", "'prompt' is empty"]),
    ('{"messages": [{"role": "user", "content": ""}]}', ["bad.jsonl:2:", "'content' is empty"]),
    ('{"prompt": "hi", "max_tokens": "5"}', ["bad.jsonl:2:", "max_tokens", "got '5'"]),
    ('{"prompt": "hi", "max_tokens": 5.0}', ["bad.jsonl:2:", "max_tokens", "got 5.0"]),
    ('{"prompt": "hi", "max_tokens": true}', ["bad.jsonl:2:", "max_tokens"]),
])
def test_suite_file_requests_are_strict(tmp_path, line, fragments):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "a fine first request"}\n' + line + "\n")
    _assert_one_line_error(run_cli("suite", "show", path), *fragments)


@pytest.mark.parametrize("name", ["../../escaped", "x/y", "/abs", "..", ".hidden", "a b"])
def test_suite_names_are_names_not_paths(tmp_path, name):
    source = tmp_path / "in.jsonl"
    source.write_text('{"prompt": "hello"}\n')
    _assert_one_line_error(run_cli("suite", "import", source, "--name", name, cwd=tmp_path), "--name", "suite name")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in.jsonl"]
    assert not (tmp_path.parent.parent / "escaped@1.jsonl").exists()


def test_suite_import_checks_its_output_first(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('{"prompt": "hello"}\n')
    _assert_one_line_error(run_cli("suite", "import", source, "--name", "ok", "--output", "/nonexistent/dir/out.jsonl"),
                           "--output", "no such directory")

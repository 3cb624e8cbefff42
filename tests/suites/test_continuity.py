"""Baseline continuity: hashes stable and edit-sensitive, diffs, refusal, old versions loadable."""

from __future__ import annotations

import subprocess
import sys

import pytest
from suite_fixtures import run_cli

from specgauge.errors import UserError
from specgauge.suites.continuity import diff_suites, require_same_suite, suite_record
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest, write_suite_jsonl
from specgauge.suites.registry import load_suite


def _tiny(version: int, prompts: list[str]) -> Suite:
    return Suite(name="tiny", version=version, requests=tuple(SuiteRequest(prompt=p) for p in prompts))


def test_hash_is_stable_across_processes():
    code = "from specgauge.suites.registry import load_suite; print(load_suite('coding@1').content_hash)"
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
            for _ in range(2)}
    assert runs == {load_suite("coding@1").content_hash}


@pytest.mark.parametrize("edit", ["content", "max_tokens", "domain", "order", "drop"])
def test_any_edit_changes_the_hash(edit):
    suite = load_suite("coding@1")
    requests = list(suite.requests)
    first = requests[0]
    if edit == "content":
        requests[0] = first.model_copy(update={"messages": (ChatMessage(role="user", content=first.text() + " "),)})
    elif edit == "max_tokens":
        requests[0] = first.model_copy(update={"max_tokens": first.max_tokens + 1})
    elif edit == "domain":
        requests[0] = first.model_copy(update={"domain": "other"})
    elif edit == "order":
        requests[0], requests[1] = requests[1], requests[0]
    else:
        requests.pop()
    assert Suite(name="coding", requests=tuple(requests)).content_hash != suite.content_hash


def test_diff_by_position_and_by_content():
    old = _tiny(1, ["a", "b", "c"])
    new = _tiny(2, ["a", "B", "c", "d"])
    diff = diff_suites(old, new)
    assert not diff.same
    assert diff.changed_positions == (1,) and diff.added_positions == (3,) and diff.removed_positions == ()
    assert len(diff.added_content) == 2 and len(diff.removed_content) == 1
    reordered = diff_suites(old, _tiny(2, ["c", "b", "a"]))
    assert reordered.changed_positions == (0, 2) and reordered.added_content == () == reordered.removed_content


def test_require_same_suite_refuses_unless_allowed():
    old, new = _tiny(1, ["a", "b"]), _tiny(2, ["a", "z"])
    with pytest.raises(UserError) as error:
        require_same_suite(old.header(), new, allow_change=False)
    message = str(error.value)
    assert message == (f"suite changed: tiny@1 (hash {old.content_hash[:6]}…) → tiny@2 (hash {new.content_hash[:6]}…); "
                       f"pass --allow-suite-change to compare anyway")
    diff = require_same_suite(old.header(), new, allow_change=True)
    assert not diff.same and diff.added_content is None  # a header alone carries no per-request hashes
    assert require_same_suite(old, _tiny(1, ["a", "b"]), allow_change=False).same
    detailed = require_same_suite(suite_record(old), new, allow_change=True)
    assert detailed.changed_positions == (1,) and len(detailed.added_content) == 1
    assert "1 added, 1 removed by content" in detailed.summary()


def test_old_versions_stay_loadable_beside_new_ones(tmp_path, monkeypatch):
    write_suite_jsonl(_tiny(1, ["a", "b"]), tmp_path / "tiny@1.jsonl")
    write_suite_jsonl(_tiny(2, ["a", "b", "c"]), tmp_path / "tiny@2.jsonl")
    assert len(load_suite("tiny", search_dirs=[tmp_path]).requests) == 3
    assert len(load_suite("tiny@1", search_dirs=[tmp_path]).requests) == 2
    with pytest.raises(UserError, match="no version 3"):
        load_suite("tiny@3", search_dirs=[tmp_path])
    monkeypatch.setenv("SPECGAUGE_SUITE_PATH", str(tmp_path))
    listed = run_cli("suite", "list")
    assert "tiny@1" in listed.stdout and "tiny@2" in listed.stdout and "coding@1" in listed.stdout
    diffed = run_cli("suite", "diff", "tiny@1", "tiny@2")
    assert diffed.returncode == 0 and "2 → 3 requests" in diffed.stdout


def test_edited_file_with_stale_header_is_refused(tmp_path):
    path = tmp_path / "tiny@1.jsonl"
    write_suite_jsonl(_tiny(1, ["a", "b"]), path)
    path.write_text(path.read_text().replace('"prompt": "b"', '"prompt": "c"'))
    result = run_cli("suite", "show", path)
    assert result.returncode == 2 and "bump its version" in result.stderr

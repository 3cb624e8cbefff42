"""Built-in suites: sizes, loadability, lengths, and shipped files equal to their Python sources."""

from __future__ import annotations

import pytest
from suite_fixtures import run_cli

from specgauge.suites.builtin_source import render_all
from specgauge.suites.registry import BUILTIN_DIR, builtin_suites, load_suite

MINIMUMS = {"coding": 60, "agentic": 40, "reasoning": 40, "encyclopedic": 40, "chat": 40, "mixed": 60}


@pytest.mark.parametrize("name,minimum", sorted(MINIMUMS.items()))
def test_builtin_meets_its_minimum_and_loads(name, minimum):
    suite = load_suite(name)  # the newest version
    assert suite.ref == f"{name}@{builtin_suites()[name][-1]}" and len(suite.requests) >= minimum
    assert suite.description and "max_tokens" in suite.description
    if name != "mixed":
        assert suite.domains() == [name]
    assert len({r.content_hash for r in suite.requests}) == len(suite.requests)  # no duplicate prompts


def test_lengths_vary_from_one_line_to_kilobytes():
    longest = {name: max(len(r.text()) for r in load_suite(name).requests) for name in MINIMUMS}
    shortest = {name: min(len(r.text()) for r in load_suite(name).requests) for name in MINIMUMS}
    assert all(v >= 1000 for k, v in longest.items() if k != "reasoning")
    assert all(v < 400 for k, v in shortest.items() if k != "agentic")


def test_shipped_jsonl_equals_the_generator_output():
    for file_name, text in render_all().items():
        assert (BUILTIN_DIR / file_name).read_text(encoding="utf-8") == text, (
            f"{file_name} is stale: run python -m specgauge.suites.builtin_source (and bump the version)")


def test_released_versions_stay_loadable():
    assert builtin_suites()["agentic"] == [1, 2] and load_suite("agentic").ref == "agentic@2"
    assert load_suite("agentic@1").content_hash.startswith("a0554cf7b27a")  # released: never changes
    assert load_suite("mixed@1").content_hash.startswith("e0e3c0520f20")


def test_smoke_suite_is_kept():
    assert builtin_suites()["smoke"] == [1]
    assert load_suite("smoke@1").content_hash.startswith("559653094970")


def test_cli_list_and_show():
    listed = run_cli("suite", "list")
    assert listed.returncode == 0
    for name in MINIMUMS:
        assert f"{name}@1" in listed.stdout
    shown = run_cli("suite", "show", "agentic@1", "--first", "1")
    assert shown.returncode == 0 and "agentic 45" in shown.stdout and "prompt length" in shown.stdout

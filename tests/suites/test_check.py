"""The representativeness check warns on an off-distribution suite and not on a matched one."""

from __future__ import annotations

import json

from suite_fixtures import run_cli

from specgauge.suites.check import check_suite, jensen_shannon, references_from_dir
from specgauge.suites.model import Suite
from specgauge.suites.registry import load_suite
from specgauge.suites.tokenizer_file import load_tokenizer
from specgauge.suites.training_data import BuildOptions, build_suite_from_training_data


def test_matched_suite_passes(training_dir, tokenizer_path):
    suite, _ = build_suite_from_training_data(training_dir, tokenizer_path, BuildOptions(size=20, seed=3))
    tokenizer = load_tokenizer(tokenizer_path)
    report = check_suite(suite, references_from_dir(training_dir, tokenizer), str(training_dir), tokenizer)
    assert report.warning is None, report
    assert report.total_variation < 0.2
    by_source = {s.name: s for s in report.sources}
    assert all(abs(s.suite_share_by_tag - s.training_share) < 0.1 for s in by_source.values())
    # each prompt's nearest source is the one it was drawn from
    assert all(n == r.source for n, r in zip(report.nearest_source, suite.requests))


def test_off_distribution_suite_warns(training_dir, tokenizer_path):
    encyclopedic = load_suite("encyclopedic@1")
    questions = Suite(name="questions", requests=encyclopedic.requests[:20])
    tokenizer = load_tokenizer(tokenizer_path)
    report = check_suite(questions, references_from_dir(training_dir, tokenizer), str(training_dir), tokenizer)
    assert report.warning is not None
    assert "look encyclopedic" in report.warning and "coding" in report.warning and "agentic" in report.warning
    assert report.jsd_unigram > 0.3


def test_cli_check_against_a_suite_word_level_and_fail_on_warning(tmp_path):
    result = run_cli("suite", "check", "coding@1", "--against", "agentic@1")
    assert result.returncode == 0, result.stderr
    assert "warning:" in result.stdout and "look coding" in result.stdout
    failing = run_cli("suite", "check", "coding@1", "--against", "agentic@1", "--fail-on-warning")
    assert failing.returncode == 1
    same = run_cli("suite", "check", "mixed@1", "--against", "mixed@1", "--json", "--fail-on-warning")
    assert same.returncode == 0, same.stdout
    report = json.loads(same.stdout)
    assert report["warning"] is None and report["unit"] == "word" and len(report["prompts"]) == 60


def test_cli_check_against_training_dir(training_dir, tokenizer_path):
    result = run_cli("suite", "check", "encyclopedic@1", "--against", training_dir, "--tokenizer", tokenizer_path)
    assert result.returncode == 0 and "code_stdlib" in result.stdout and "token-level" in result.stdout


def test_jensen_shannon_bounds():
    assert jensen_shannon({"a": 1.0}, {"a": 1.0}) == 0.0
    assert abs(jensen_shannon({"a": 1.0}, {"b": 1.0}) - 1.0) < 1e-12
    assert 0 < jensen_shannon({"a": 0.5, "b": 0.5}, {"a": 0.9, "b": 0.1}) < 1

"""specgauge demo: its plan, and an honest refusal when this build has no EAGLE-3 arm."""

import subprocess
import sys

import pytest

from specgauge.compare.demo import demo_plan, speculative_arm_missing


def test_demo_plan_is_speculation_off_vs_eagle3_on_the_generic_domains_and_a_sweep_to_16():
    plan = demo_plan()
    assert (plan.baseline.kind, plan.baseline.value) == ("engine", "--speculative-algorithm NONE")
    assert (plan.speculative.kind, plan.speculative.value) == ("engine", "--speculative-algorithm EAGLE3")
    assert plan.domains == ("coding", "encyclopedic") and plan.concurrency == (1, 4, 16)
    assert plan.schedule == "abba_by_point" and plan.temperature == 0
    assert [plan.sweep_requests(c) for c in plan.concurrency] == [8, 8, 16]
    assert plan.rounds == 1 and demo_plan(rounds=3).rounds == 3   # `demo --rounds`, as the verdict advises


def test_demo_rounds_misuse_is_one_line():
    done = subprocess.run([sys.executable, "-m", "specgauge", "demo", "--rounds", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--rounds" in done.stderr and "Traceback" not in done.stderr


def test_demo_says_the_speculative_arm_is_missing_instead_of_faking_one(tmp_path):
    missing = speculative_arm_missing()
    if missing is None:
        pytest.skip("this build can run the EAGLE-3 arm (benchmarks/demo_time.py times the real demo)")
    done = subprocess.run([sys.executable, "-m", "specgauge", "demo", "--output-dir", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"specgauge: error: demo: the speculative arm is not available yet: {missing}; "
                                   f"the demo will not fake one")
    assert not (tmp_path / "out" / "verdict.json").exists()


def test_demo_suites_are_cut_to_the_targets_context_and_add_the_drafters_held_out_mix(tmp_path):
    from specgauge.compare.demo import TARGET_DIR, demo_plan, prepare_suites, requests_single
    from specgauge.compare.held_out import HELD_OUT_DOMAIN
    from specgauge.suites.registry import load_suite

    if not (TARGET_DIR / "tokenizer.json").exists():
        pytest.skip("the default target is not set up (make model)")
    pytest.importorskip("tokenizers")
    files, notes = prepare_suites(tmp_path, quick=False)
    assert set(files) == {"coding", "encyclopedic", HELD_OUT_DOMAIN}
    for domain in ("coding", "encyclopedic"):
        suite = load_suite(files[domain])
        assert suite.requests and all(r.domain == domain for r in suite.requests)
        assert len(suite.requests) <= len(load_suite(domain).requests)
    held = load_suite(files[HELD_OUT_DOMAIN])
    assert len(held.requests) == requests_single(False) and all(r.max_tokens == 64 for r in held.requests)
    assert held.build_info["builder"] == "from-training-data" and held.build_info["data_dir"].endswith("held-out-data")
    assert {r.source for r in held.requests} <= {"code_requests", "code_stdlib", "code_questions"}   # the mix's bulk
    again, _ = prepare_suites(tmp_path / "again", quick=False)
    assert [load_suite(r).content_hash for r in again.values()] == [load_suite(r).content_hash for r in files.values()]
    assert any(note.startswith(f"{HELD_OUT_DOMAIN}: ") and "held out" in note for note in notes)
    assert demo_plan(domain_suites=files).domains == ("coding", "encyclopedic", HELD_OUT_DOMAIN)

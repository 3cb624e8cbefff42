"""compare's recommendation: its first line is the draft-depth schedule (vLLM's
``num_speculative_tokens_per_batch_size`` form: K where speculation pays, 0 above the crossover),
the threshold its simple case; the vLLM and SGLang settings carry that schedule (SGLang as its
adaptive tiers, never a cap on running requests); an uncertain verdict emits no schedule."""

import json
import shlex

import pytest

from specgauge.analysis.crossover import find_crossover
from specgauge.analysis.results import SpeculationSetup, SweepPoint
from specgauge.analysis.server_settings import sglang_steps_at, validate_vllm_config, vllm_tokens_at
from specgauge.analysis.verdict import assess_sweep, recommend, recommendation_lines, supported_crossover
from specgauge.speculation_schedule import normalize_schedule

CROSSING = [(1, 1.6, 1.5, 1.7), (2, 1.4, 1.3, 1.5), (4, 1.15, 1.1, 1.2), (8, 0.8, 0.75, 0.85), (16, 0.6, 0.55, 0.65)]


def recommended(points, setup):
    sweep = [SweepPoint(concurrency=c, baseline_tok_s=100.0, speculative_tok_s=100.0 * r, ratio=r, ci_low=lo,
                        ci_high=hi, pairs=16) for c, r, lo, hi in points]
    crossover = supported_crossover(find_crossover([p.concurrency for p in sweep], [p.ratio for p in sweep]),
                                    assess_sweep(sweep))
    return recommend(crossover, sweep, setup=setup)


def _settings(recommendation):
    return {s.server: s for s in recommendation.settings}


def test_the_first_line_is_the_schedule_and_the_vllm_setting_carries_it():
    setup = SpeculationSetup(engine="vllm", method="eagle3", num_speculative_tokens=4, draft_model="d",
                             max_num_seqs=128)
    recommendation = recommended(CROSSING, setup)
    n = recommendation.disable_above
    assert recommendation.confident and 4 <= n < 8
    assert recommendation.schedule == ((1, n, 4), (n + 1, 128, 0))
    normalize_schedule([list(e) for e in recommendation.schedule])     # vLLM's rules
    first, simple = recommendation_lines(recommendation)
    assert first == f"Schedule [bs_lo, bs_hi, K]: [[1, {n}, 4], [{n + 1}, 128, 0]] — 4 draft tokens while at most " \
                    f"{n} requests run, 0 (no drafting) from {n + 1}."
    assert simple == f"Simple case: Disable speculation above {n} concurrent requests."
    flag, text = shlex.split(_settings(recommendation)["vllm"].setting)
    config = validate_vllm_config(json.loads(text))
    assert flag == "--speculative-config"
    assert config["num_speculative_tokens_per_batch_size"] == [list(e) for e in recommendation.schedule]
    # K where speculation paid, 0 above the crossover, at every tested level
    for concurrency, ratio, *_ in CROSSING:
        expected = 4 if concurrency <= n else 0
        assert vllm_tokens_at(config["num_speculative_tokens_per_batch_size"], 4, concurrency) == expected
        assert (ratio > 1) == (expected > 0)


def test_the_sglang_advice_is_the_adaptive_config_of_the_same_schedule():
    setup = SpeculationSetup(engine="sglang", method="EAGLE3", num_speculative_tokens=3, eagle_topk=1)
    recommendation = recommended(CROSSING, setup)
    n = recommendation.disable_above
    sglang = _settings(recommendation)["sglang"]
    assert "--speculative-adaptive --speculative-adaptive-config speculative_adaptive.json" in sglang.setting
    assert "max-running-requests" not in sglang.setting + sglang.note
    config = json.loads(sglang.config_text)
    for concurrency in range(1, 257):
        expected = [0] if concurrency > n else [3]
        assert sglang_steps_at(config, concurrency) == expected
        assert [e[-1] for e in recommendation.schedule if e[0] <= concurrency <= e[1]] == expected
    assert recommendation_lines(recommendation)[0].startswith("Schedule [bs_lo, bs_hi, K]: [[1, ")


@pytest.mark.parametrize("points, schedule, words", [
    ([(1, 1.6, 1.4, 1.8), (64, 1.1, 1.05, 1.15)], ((1, 256, 3),), "3 draft tokens at every batch size"),
    ([(1, 0.8, 0.7, 0.9), (8, 0.6, 0.5, 0.7)], ((1, 256, 0),), "no drafting at any batch size"),
])
def test_pays_everywhere_and_never_pays_as_schedules(points, schedule, words):
    recommendation = recommended(points, SpeculationSetup())   # depth and --max-num-seqs unknown: 3 and 256
    assert recommendation.schedule == schedule
    first, simple = recommendation_lines(recommendation)
    assert words in first and simple.startswith("Simple case: ")


def test_an_uncertain_verdict_says_so_and_emits_no_schedule():
    recommendation = recommended([(1, 1.05, 0.9, 1.2), (4, 1.0, 0.9, 1.1), (16, 0.7, 0.6, 0.8)],
                                 SpeculationSetup(engine="vllm", method="eagle3", num_speculative_tokens=3))
    assert not recommendation.confident and recommendation.schedule is None
    lines = recommendation_lines(recommendation)
    assert len(lines) == 1 and lines[0].startswith("Uncertain — ") and "Schedule" not in lines[0]

"""The choice rule on synthetic measurements: ties, noise, merging, the 5-item form, and the
emitted settings checked by the engines' own rules."""

import json
import shlex

import pytest

from specgauge.analysis.results import SpeculationSetup
from specgauge.analysis.server_settings import sglang_steps_at, validate_sglang_adaptive_config, vllm_tokens_at
from specgauge.speculation_schedule import draft_tokens_at, normalize_schedule
from specgauge.tune.choice import Cell, CellMeasurements, build_schedule, choose_cell, paired_ratio
from specgauge.tune.settings import engine_schedule_setting, schedule_settings


def rounds(value, wobble=(1.0, 1.01, 0.99, 1.0)):
    """Per-round throughputs around ``value`` (the same small wobble in every depth: paired)."""
    return [value * w for w in wobble]


def cell(concurrency, by_depth, band=None):
    return CellMeasurements(Cell(concurrency, band), {d: v if isinstance(v, list) else rounds(v)
                                                      for d, v in by_depth.items()})


def test_the_best_depth_wins_when_it_clearly_beats_the_rest():
    choice = choose_cell(cell(1, {0: 100, 1: 140, 3: 180, 5: 150}))
    assert (choice.best, choice.chosen, choice.uncertain) == (3, 3, False)


def test_an_exact_tie_goes_to_the_smaller_depth():
    choice = choose_cell(cell(4, {0: 100, 2: 150, 3: 150}))
    assert (choice.best, choice.chosen) == (2, 2)


def test_a_depth_within_the_noise_of_the_best_loses_to_the_smaller_depth():
    # depth 2 is 1.5% behind depth 3 on every round: within the 3% tolerance, so the smaller depth
    choice = choose_cell(cell(8, {0: 100, 2: 147.75, 3: 150}))
    assert (choice.best, choice.chosen, choice.uncertain) == (3, 2, False)
    # noisy rounds: depth 1 is 8% behind on average but its interval reaches the best: it ties
    noisy = choose_cell(cell(8, {0: [100, 100, 100], 1: [120, 150, 135], 3: [150, 140, 145]}))
    assert noisy.best == 3 and noisy.chosen in (0, 1)
    assert next(d for d in noisy.depths if d.depth == 1).ties


def test_one_round_and_straddling_intervals_are_uncertain():
    assert choose_cell(cell(1, {0: [100], 3: [150]})).uncertain
    straddle = choose_cell(cell(1, {0: [100, 100, 100], 1: [140, 155, 120], 3: [150, 150, 150]}))
    depth1 = next(d for d in straddle.depths if d.depth == 1).to_best
    assert depth1.lo < 0.97 <= depth1.hi and straddle.uncertain


def test_paired_ratio_cancels_drift_shared_by_a_round():
    # the machine slows 30% in round 2 for both depths: the paired ratio stays exactly 1.5
    ratio = paired_ratio([150, 105, 150], [100, 70, 100])
    assert ratio.ratio == pytest.approx(1.5) and ratio.lo == pytest.approx(1.5) and ratio.hi == pytest.approx(1.5)


def test_ranges_are_merged_into_the_fewest_entries():
    choices = [choose_cell(cell(c, {0: 100, 3: t})) for c, t in ((1, 180), (2, 170), (4, 160), (16, 90), (64, 80))]
    schedule = build_schedule(choices, max_batch_size=256)
    # batch sizes between levels take the larger level's depth: 5..16 → 0
    assert schedule.entries == ((1, 4, 3), (5, 256, 0))
    assert schedule.max_depth == 3 and not schedule.context_axis


def test_a_measured_context_axis_gives_the_rectangular_5_item_form():
    short, long = (1, 256), (1024, 2048)
    choices = [choose_cell(cell(c, {0: 100, 2: t}, band)) for c, band, t in
               ((1, short, 150), (16, short, 90), (64, short, 80),
                (1, long, 160), (16, long, 130), (64, long, 90))]
    schedule = build_schedule(choices, max_batch_size=128)
    assert schedule.context_axis
    assert schedule.entries == ((1, 1, 1, 1023, 2), (1, 1, 1024, 2048, 2),
                                (2, 16, 1, 1023, 0), (2, 16, 1024, 2048, 2),
                                (17, 128, 1, 1023, 0), (17, 128, 1024, 2048, 0))
    normalized = normalize_schedule(schedule.as_json_list())  # vLLM's rules: rectangular, contiguous, from 1
    assert draft_tokens_at(normalized, 2, 8, 1500) == 2 and draft_tokens_at(normalized, 2, 8, 200) == 0
    assert draft_tokens_at(normalized, 2, 8, 10**6) == 2  # the last context range reaches any length
    sglang, vllm, _ = schedule_settings(schedule, SpeculationSetup(engine="vllm", method="ngram"))
    entries = json.loads(shlex.split(vllm.setting)[1])["num_speculative_tokens_per_batch_size"]
    assert all(len(entry) == 5 for entry in entries)
    assert vllm_tokens_at(entries, 2, 8, context_length=1500) == 2
    # SGLang has no context axis: a tier takes the smallest depth over the bands
    assert [sglang_steps_at(json.loads(sglang.config_text), bs) for bs in (1, 8, 64)] == [[2], [0], [0]]
    assert "no context-length axis" in sglang.note


def test_emitted_settings_pass_the_engines_rules():
    choices = [choose_cell(cell(c, {0: 100, 1: a, 3: b})) for c, a, b in ((1, 140, 180), (4, 130, 125), (32, 95, 80))]
    schedule = build_schedule(choices)
    sglang, vllm, engine = schedule_settings(schedule, SpeculationSetup(engine="vllm", method="eagle3",
                                                                        draft_model="org/drafter"))
    flag, text = shlex.split(vllm.setting)
    config = json.loads(text)
    assert flag == "--speculative-config"
    assert config["method"] == "eagle3" and config["model"] == "org/drafter"
    assert config["num_speculative_tokens"] == 3
    entries = config["num_speculative_tokens_per_batch_size"]
    assert [vllm_tokens_at(entries, 3, bs) for bs in (1, 2, 4, 5, 32, 500)] == [3, 1, 1, 0, 0, 0]
    adaptive = json.loads(sglang.config_text)
    validate_sglang_adaptive_config(adaptive)
    assert [sglang_steps_at(adaptive, bs) for bs in (1, 2, 4, 5, 500)] == [[3], [1], [1], [0], [0]]
    assert "--speculative-adaptive-config" in sglang.setting
    argv = shlex.split(engine.setting)
    assert normalize_schedule(json.loads(argv[argv.index("--speculative-schedule") + 1]))
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"


def test_a_schedule_that_never_drafts_says_to_switch_speculation_off():
    schedule = build_schedule([choose_cell(cell(c, {0: 100, 2: 90})) for c in (1, 8)])
    assert schedule.max_depth == 0
    sglang, vllm, engine = schedule_settings(schedule)
    assert vllm.setting.startswith("omit") and sglang.setting.startswith("omit")
    assert engine_schedule_setting(schedule).setting == "--speculative-algorithm NONE"


def test_an_incomplete_grid_is_refused():
    choices = [choose_cell(cell(1, {0: 100, 2: 150}, (1, 100))), choose_cell(cell(8, {0: 100, 2: 150}, (101, 400))),
               choose_cell(cell(1, {0: 100, 2: 150}, (101, 400)))]
    with pytest.raises(ValueError, match="incomplete"):
        build_schedule(choices)


def test_verify_compares_the_schedule_with_the_better_fixed_arm_per_level():
    from specgauge.tune.run import PointMeasure, verify_levels

    figures = {  # (arm, level) → per-round tok/s: k=3 wins at 1, no speculation at 16
        ("schedule", 1): [170, 160], ("k=3", 1): [180, 170], ("k=0", 1): [100, 95],
        ("schedule", 16): [400, 390], ("k=3", 16): [300, 290], ("k=0", 16): [400, 400],
    }
    points = [PointMeasure(arm, level, r, value, None, 1.0, 0)
              for (arm, level), values in figures.items() for r, value in enumerate(values)]
    levels = verify_levels(points, ["k=0", "k=3"], (1, 16), 2)
    assert [(v.concurrency, v.best_other) for v in levels] == [(1, "k=3"), (16, "k=0")]
    assert levels[0].ratio.ratio == pytest.approx(((170 / 180) * (160 / 170)) ** 0.5)
    assert levels[1].ratio.lo <= levels[1].ratio.ratio <= levels[1].ratio.hi

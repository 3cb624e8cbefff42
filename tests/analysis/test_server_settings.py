"""The engines' own rules for load-aware speculation, as pure validators."""

import pytest

from specgauge.analysis.server_settings import (sglang_steps_at, validate_sglang_adaptive_config,
                                                validate_vllm_config, validate_vllm_schedule, vllm_tokens_at)


@pytest.mark.parametrize("schedule, message", [
    ([], "non-empty"),
    ([[2, 8, 3]], "start at 1"),
    ([[1, 8, 3], [8, 16, 0]], "overlap"),
    ([[1, 8, 3], [4, 16, 0]], "overlap"),
    ([[1, 8, -1]], "K must be >= 0"),
    ([[0, 8, 3]], "positive"),
    ([[5, 1, 3]], "start must be <= end"),
    ([[1, 8]], "three integers"),
    ([[1, 8, 2.5]], "three integers"),
])
def test_vllm_schedule_rules(schedule, message):
    with pytest.raises(ValueError, match=message):
        validate_vllm_schedule(schedule, 3)


def test_vllm_schedule_accepts_gaps_and_clamps_to_the_depth():
    schedule = [[1, 16, 3], [32, 128, 2], [256, 256, 0]]     # the gaps 17-31 and 129-255 inherit
    assert validate_vllm_schedule(schedule, 3) == [(1, 16, 3), (32, 128, 2), (256, 256, 0)]
    assert [vllm_tokens_at(schedule, 3, bs) for bs in (1, 16, 17, 31, 32, 255, 256, 999)] == [3, 3, 3, 3, 2, 2, 0, 0]
    assert vllm_tokens_at([[1, 4, 9], [5, 8, 0]], 5, 2) == 5          # K clamped to num_speculative_tokens
    assert validate_vllm_schedule([[9, 16, 0], [1, 8, 4]], 4) == [(1, 8, 4), (9, 16, 0)]   # order does not matter


def test_vllm_config_needs_a_positive_depth():
    with pytest.raises(ValueError, match="> 0"):
        validate_vllm_config({"method": "ngram", "num_speculative_tokens": 0})
    with pytest.raises(ValueError, match="JSON object"):
        validate_vllm_config([1, 2])


@pytest.mark.parametrize("config, message", [
    ({"strategy": "fast", "1": {"candidate_steps": [1]}}, "strategy"),
    ({"strategy": "ema"}, "at least one"),
    ({"1": {"candidate_steps": []}}, "non-negative ints"),
    ({"1": {"candidate_steps": [-1]}}, "non-negative ints"),
    ({"4": {"candidate_steps": [1]}}, "start at 1"),
    ([], "JSON object"),
])
def test_sglang_adaptive_config_rules(config, message):
    with pytest.raises(ValueError, match=message):
        validate_sglang_adaptive_config(config)


def test_sglang_tiers_route_by_lower_bound():
    config = {"1": {"candidate_steps": [3]}, "9": {"candidate_steps": [0]}}
    assert [sglang_steps_at(config, bs) for bs in (1, 8, 9, 500)] == [[3], [3], [0], [0]]


def test_sglang_advice_on_its_cpu_path_adds_the_flag_adaptive_speculation_needs_there():
    """SGLang's CPU path: adaptive speculation builds CUDA-graph runners unless the decode graph is
    off (found against a real SGLang, docs/real-engines.md); the device is read from the arm."""
    from specgauge.analysis.results import SpeculationSetup
    from specgauge.analysis.server_settings import sglang_setting
    from specgauge.compare.speculation_setup import from_arguments

    stated, _ = from_arguments(["python", "-m", "sglang.launch_server", "--device", "cpu",
                                "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"])
    assert stated.device == "cpu"
    on_cpu = sglang_setting(4, stated)
    assert on_cpu.setting.endswith("--speculative-eagle-topk 1 --cuda-graph-backend-decode disabled")
    assert "CPU path" in on_cpu.note and "sglang-cpu.patch" in on_cpu.note
    on_gpu = sglang_setting(4, SpeculationSetup(engine="sglang", method="EAGLE3", num_speculative_tokens=3))
    assert "cuda-graph" not in on_gpu.setting and "CPU path" not in on_gpu.note

"""``--speculative-schedule``: vLLM's schedule form on the embedded engine — refused when vLLM
would refuse it, lossless, and the draft depth follows the batch size (and context length)."""

import subprocess
import sys

import pytest
from spec_testkit import domain_prompts, generate_all, make_spec_engine

from engine_testkit import make_engine, wait_idle
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.control import SpeculationController
from specgauge.speculation_schedule import parse_schedule


@pytest.mark.parametrize("schedule, message", [
    ("[]", "non-empty"),
    ("[[2, 8, 3]]", "start at 1"),
    ("[[1, 8, 3], [8, 16, 0]]", "overlap"),
    ("[[1, 8, -1]]", "K must be >= 0"),
    ("[[1, 8, 2, 9, 1]]", "first context range must start at 1"),
    ("[[1, 8, 1, 100, 3], [9, 16, 1, 100, 1], [1, 8, 101, 900, 3]]", "rectangular"),
    ("[[1, 8, 1, 100, 3], [1, 8, 200, 900, 3]]", "contiguous"),
    ("[[1, 8, 3], [9, 16, 1, 100, 1]]", "mixed"),
    ("[[1, 8]", "not JSON"),
])
def test_bad_schedule_is_refused_with_one_line(schedule, message):
    result = subprocess.run([sys.executable, "-m", "specgauge", "serve", "--speculative-algorithm", "NGRAM",
                             "--speculative-schedule", schedule], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert "--speculative-schedule" in result.stderr


@pytest.mark.parametrize("spec, message", [
    (dict(algorithm="NONE"), "needs --speculative-algorithm"),
    (dict(algorithm="NGRAM", disable_above=4), "replaces"),
    (dict(algorithm="EAGLE3", num_steps=3, eagle_topk=2, num_draft_tokens=5), "tree"),
])
def test_schedule_conflicts_are_refused(spec, message):
    config = SpeculativeConfig(schedule=tuple(parse_schedule("[[1, 4, 2], [5, 64, 0]]")), **spec)
    with pytest.raises(ValueError, match=message):
        config.validate()


def test_controller_follows_the_schedule_by_batch_and_context():
    # gaps inherit, K clamped to the depth (4), the context axis picks the column
    schedule = tuple(parse_schedule("[[1, 2, 1, 100, 9], [1, 2, 101, 200, 1], [4, 8, 1, 100, 2], [4, 8, 101, 200, 0]]"))
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=False, schedule=schedule)
    assert [controller.choose(n, 50) for n in (1, 2, 3, 4, 8, 64)] == [4, 4, 4, 2, 2, 2]
    assert [controller.choose(n, 5000) for n in (1, 3, 4, 64)] == [1, 1, 0, 0]


def test_schedule_is_lossless_and_switches_depth_by_batch_size(tiny_model_dir):
    prompts_text = domain_prompts(24)
    plain = make_engine(tiny_model_dir)
    prompts = [plain.tokenizer.encode(t) for t in prompts_text]
    params = [SamplingParams(max_tokens=8 - (i % 3), temperature=0.0, ignore_eos=True) for i in range(len(prompts))]

    def run(speculative):
        engine = make_spec_engine(tiny_model_dir, speculative=speculative, max_running=16, max_tokens_per_step=512)
        engine.start()
        try:
            tokens, _ = generate_all(engine, prompts, params)
            wait_idle(engine)
            return tokens, engine.snapshot()
        finally:
            engine.stop()

    reference, _ = run(SpeculativeConfig())
    schedule = tuple(parse_schedule("[[1, 3, 3], [4, 8, 1], [9, 64, 0]]"))
    tokens, snapshot = run(SpeculativeConfig(algorithm="NGRAM", num_steps=3, schedule=schedule))
    assert tokens == reference
    steps = snapshot["spec_steps_by_batch_and_k"]  # [decoding requests, k, steps]
    # the batch drains from 16 to 1: each batch size decoded with its range's K (a step's K is chosen
    # for the requests it serves, counting the waiting ones it admits: at least its decoding ones)
    assert {k for batch, k, _ in steps if batch >= 9} == {0}
    assert any(k == 3 for batch, k, _ in steps if batch <= 3)
    assert any(k == 1 for batch, k, _ in steps if 4 <= batch <= 8)
    assert snapshot["speculative_schedule"] == [[1, 3, 3], [4, 8, 1], [9, 64, 0]]

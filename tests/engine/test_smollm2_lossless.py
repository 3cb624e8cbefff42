"""SmolLM2-135M-Instruct in the engine's default dtype (bf16 where the CPU computes it natively):
greedy n-gram and EAGLE-3 speculation (its shipped drafter) give exactly the plain greedy tokens,
one stream, eight and 64 at once.

A verify step runs k+1 rows where a plain decode runs one; the model is lossless only when each
row's bits do not depend on how many rows share the step (docs/engine.md, "Batch invariance"). On
this model that needs oneDNN's bf16 product taken in slices of at most ``ONEDNN_ROW_SLICE`` rows
(its 1,536-wide down projection first sums differently at 130 rows); before that, 58 of 80
outputs of a comparison differed from plain decoding."""

import pytest
from engine_testkit import suite_chat_prompts
from spec_testkit import generate_all, make_spec_engine

from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig

MAX_TOKENS = 32


def generate(model_dir, prompts, max_running, **spec):
    """The greedy tokens of each prompt, and the engine's tokens per verify (None without speculation)."""
    engine = make_spec_engine(model_dir, speculative=SpeculativeConfig(**spec) if spec else SpeculativeConfig(),
                              max_running=max_running, max_tokens_per_step=512, max_model_len=1024)
    assert engine.runner.model.batch_invariant, "the bf16 model should be batch-invariant on this CPU"
    engine.start()
    try:
        tokens, _ = generate_all(engine, prompts, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
        return tokens, engine.metrics.avg_spec_accept_length()
    finally:
        engine.stop()


def drafter(algorithm: str) -> dict:
    if algorithm == "NGRAM":
        return {"algorithm": "NGRAM", "num_steps": 4}
    from specgauge.shipped_models import get_shipped

    return {"algorithm": "EAGLE3", "num_steps": 3, "draft_model_path": str(get_shipped("smollm2-135m").draft_dir)}


@pytest.mark.parametrize("algorithm", ["NGRAM", "EAGLE3"])
@pytest.mark.parametrize("max_running", [1, 8, 64])
def test_speculative_greedy_equals_plain_greedy_in_bf16(smollm2_dir, max_running, algorithm):
    from specgauge.engine.models.cpu_features import has_native_bf16

    if not has_native_bf16():
        pytest.skip("this CPU has no native bf16 (AMX or AVX512-BF16): the engine computes in float32 here")
    prompts = suite_chat_prompts(smollm2_dir, ("coding", "encyclopedic"), 3 if max_running < 64 else 32)
    plain, _ = generate(smollm2_dir, prompts, max_running)
    spec, accept_length = generate(smollm2_dir, prompts, max_running, **drafter(algorithm))
    assert accept_length is not None and accept_length > 1.0, "no draft was accepted: the check would be vacuous"
    differ = [i for i, (a, b) in enumerate(zip(plain, spec)) if a != b]
    assert not differ, f"{len(differ)} of {len(prompts)} outputs differ, first at prompt {differ[0]}"

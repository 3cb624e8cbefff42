"""SmolLM2-135M-Instruct, as set-up converts it, served by the engine: greedy output equals the
transformers reference token for token (float32) on prompts of the built-in suites, rendered with
the model's own ChatML template."""

import pytest
import torch
from engine_testkit import make_engine, suite_chat_prompts

from specgauge.train.regenerate import complete_all

transformers = pytest.importorskip("transformers")
NEW_TOKENS = 24


def test_engine_greedy_equals_transformers_in_float32(smollm2_dir):
    model_dir = smollm2_dir
    prompts = suite_chat_prompts(model_dir, ("coding", "encyclopedic", "agentic"), 1)
    engine = make_engine(model_dir, dtype="float32", max_model_len=max(map(len, prompts)) + NEW_TOKENS + 16)
    engine.start()
    try:
        got = complete_all(engine, prompts, NEW_TOKENS)
    finally:
        engine.stop()
    reference = transformers.LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for prompt, tokens in zip(prompts, got):
        with torch.no_grad():
            out = reference.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                     max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=2, pad_token_id=2)
        expected = out[0, len(prompt):].tolist()
        assert tokens == expected, f"prompt of {len(prompt)} tokens: engine {tokens} vs transformers {expected}"


def test_conversion_matches_pinned_checksums(smollm2_dir):
    model_dir = smollm2_dir
    from specgauge.model_setup.smollm2 import CHECKSUMS, SMOLLM2

    listed = dict(line.split()[::-1] for line in (model_dir / CHECKSUMS).read_text().splitlines())
    assert listed == SMOLLM2.converted_sha256

"""Batch invariance: where the model runs batch-invariant (bf16 on a CPU with native bf16), a
token's logits are the same bits however its step was made — prefilled whole or in chunks, decoded
alone or inside a 5-token verify run, with or without other sequences beside it. That is what makes
speculative greedy output *exactly* equal to plain greedy output, not equal up to near-ties."""

import pytest
import torch
from engine_testkit import make_model, runner_for, step_logits

from specgauge.engine.models.llama import load_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import Request


@pytest.fixture
def bf16_model(tmp_path):
    make_model(tmp_path, hidden_size=128, intermediate_size=256, max_position_embeddings=512)
    model = load_model(tmp_path, dtype=torch.bfloat16)
    model.prepare_for_inference(512)
    if not model.batch_invariant:
        pytest.skip("this CPU's bf16 matmuls are not batch-invariant (no native bf16)")
    return model


def logits_of(model, plan, tokens, others):
    """Run ``tokens`` through steps of the given new-token counts, each step also carrying
    ``others`` (name → ids, advanced alongside one chunk at a time); its logits, row by row."""
    runner, blocks = runner_for(model, num_blocks=260)
    request = Request("main", tokens, SamplingParams())
    side = {name: Request(name, ids, SamplingParams()) for name, ids in others.items()}
    done = {name: 0 for name in side}
    rows, start = [], 0
    for n in plan:
        step = [(request, start, n)]
        for name, other in side.items():
            take = min(3, len(other.prompt_ids) - done[name])
            if take:
                step.append((other, done[name], take))
                done[name] += take
        out, _ = step_logits(runner, blocks, step)
        rows.append(out["main"])
        start += n
    assert start == len(tokens)
    blocks.check_integrity()
    return torch.cat(rows)


def test_a_tokens_logits_are_the_same_bits_in_any_step(bf16_model):
    # long enough that CPU SDPA's blocking would change the bits (without row-wise attention the
    # chunked and decoded runs below differ from the whole prefill in the last bf16 digit)
    torch.manual_seed(3)
    tokens = torch.randint(0, 101, (300,)).tolist()
    others = {"x": torch.randint(0, 101, (30,)).tolist(), "y": torch.randint(0, 101, (13,)).tolist()}
    whole = logits_of(bf16_model, [300], tokens, {})
    chunked = logits_of(bf16_model, [97, 13, 130] + [5] * 10 + [3, 7], tokens, others)  # chunks, verify-sized runs
    decoded = logits_of(bf16_model, [240] + [1] * 60, tokens, others)                   # one token a step
    assert torch.equal(chunked, whole)
    assert torch.equal(decoded, whole)

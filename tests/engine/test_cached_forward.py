"""The cached path (paged KV, chunked prefill, ragged groups) gives the full forward's logits."""

import pytest
import torch
from engine_testkit import make_model, runner_for, step_logits

from specgauge.engine.models.cpu_features import has_amx_bf16
from specgauge.engine.models.llama import load_model, save_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import Request, ScheduledSeq


@pytest.mark.parametrize("rope_scaling", [None, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 32}])
def test_chunked_prefill_and_decode_match_full_forward(tmp_path, rope_scaling):
    reference, model = make_model(tmp_path, rope_scaling=rope_scaling)
    runner, blocks = runner_for(model)
    torch.manual_seed(1)
    tokens = {rid: torch.randint(0, 101, (n,)).tolist() for rid, n in (("a", 23), ("b", 9), ("c", 17))}
    requests = {rid: Request(rid, ids, SamplingParams()) for rid, ids in tokens.items()}
    full = {}
    with torch.no_grad():
        for rid, ids in tokens.items():
            full[rid] = reference(torch.tensor([ids]))[0][0]  # (T, V)
    got = {rid: [] for rid in tokens}
    # step 1: a's first chunk (10), b whole (9), c's first chunk (10): groups of 9 and 10, all fresh
    # step 2: a's second chunk (10) and c's rest (7) on top of cached context
    # steps 3..: one token at a time (decode group with different context lengths)
    plan = [[("a", 0, 10), ("b", 0, 9), ("c", 0, 10)], [("a", 10, 10), ("c", 10, 7)],
            [("a", 20, 1)], [("a", 21, 1)], [("a", 22, 1)]]
    for step in plan:
        out, _ = step_logits(runner, blocks, [(requests[r], s, n) for r, s, n in step])
        for rid, logits in out.items():
            got[rid].append(logits)
    for rid in tokens:
        torch.testing.assert_close(torch.cat(got[rid]), full[rid], atol=2e-5, rtol=1e-4)
    blocks.check_integrity()


def test_decode_batch_with_ragged_contexts_and_aux_hidden_states(tmp_path):
    reference, model = make_model(tmp_path, num_key_value_heads=1, tie_word_embeddings=True)
    runner, blocks = runner_for(model, block_size=3)
    torch.manual_seed(2)
    # 7, 12 and 10 tokens in blocks of 3: 3, 4 and 4 blocks, one width bucket (one padded group)
    seqs = {rid: torch.randint(0, 101, (n,)).tolist() for rid, n in (("x", 7), ("y", 12), ("z", 10))}
    requests = {rid: Request(rid, ids, SamplingParams()) for rid, ids in seqs.items()}
    # prefill all but the last token, then run the last tokens together as one decode group
    step_logits(runner, blocks, [(requests[r], 0, len(ids) - 1) for r, ids in seqs.items() if len(ids) > 1])
    out, aux = step_logits(runner, blocks, [(requests[r], len(ids) - 1, 1) for r, ids in seqs.items()])
    decode = [ScheduledSeq(requests[r], len(ids) - 1, 1) for r, ids in seqs.items()]
    batch = runner.lay_out(decode).batch
    assert len(batch.groups) == 1 and batch.groups[0].batch == 3
    order = list(seqs)  # all q_len 1 and one width bucket: one group in submission order
    with torch.no_grad():
        for i, rid in enumerate(order):
            logits, ref_aux = reference(torch.tensor([seqs[rid]]), aux_layers=(0, 2))
            torch.testing.assert_close(out[rid][0], logits[0, -1], atol=2e-5, rtol=1e-4)
            torch.testing.assert_close(aux[1][i], ref_aux[1][0, -1], atol=2e-5, rtol=1e-4)


def test_prepared_model_still_saves_and_runs_full_forward(tmp_path):
    reference, model = make_model(tmp_path)
    ids = torch.randint(0, 101, (1, 7))
    with torch.no_grad():
        torch.testing.assert_close(model(ids)[0], reference(ids)[0])
    save_model(model, tmp_path / "again")  # fused weights share storage: save must still work
    again = load_model(tmp_path / "again")
    with torch.no_grad():
        torch.testing.assert_close(again(ids)[0], reference(ids)[0])


def test_bfloat16_cached_path_tracks_fp32(tmp_path):
    """bf16 weights stay close to the fp32 reference; on CPU attention is computed in bf16 where
    the CPU has AMX, else in fp32 (its bf16 kernel is slow there)."""
    reference, _ = make_model(tmp_path)
    model = load_model(tmp_path, dtype=torch.bfloat16)
    model.prepare_for_inference(128)
    assert model.attention_dtype == (torch.bfloat16 if has_amx_bf16() else torch.float32)
    runner, blocks = runner_for(model, num_blocks=16)
    ids = torch.randint(0, 101, (12,)).tolist()
    request = Request("r", ids, SamplingParams())
    out, _ = step_logits(runner, blocks, [(request, 0, 8)])
    more, _ = step_logits(runner, blocks, [(request, 8, 4)])
    with torch.no_grad():
        expected = reference(torch.tensor([ids]))[0][0]
    got = torch.cat([out["r"], more["r"]]).float()
    assert (got - expected).abs().max() < 0.1 * expected.abs().max()
    blocks.free("r")
    blocks.check_integrity()


def test_decode_contexts_of_very_different_lengths_attend_in_separate_width_buckets(tmp_path):
    """One long context among short ones gets its own padded group (``width_bucket``), so the short
    ones do not attend over its padding; every row still matches the reference."""
    reference, model = make_model(tmp_path, num_key_value_heads=1, tie_word_embeddings=True)
    runner, blocks = runner_for(model, block_size=4)
    torch.manual_seed(5)
    seqs = {rid: torch.randint(0, 101, (n,)).tolist() for rid, n in (("short", 6), ("long", 60), ("mid", 7))}
    requests = {rid: Request(rid, ids, SamplingParams()) for rid, ids in seqs.items()}
    step_logits(runner, blocks, [(requests[r], 0, len(ids) - 1) for r, ids in seqs.items()])
    decode = [(requests[r], len(ids) - 1, 1) for r, ids in seqs.items()]
    for request, start, n in decode:
        blocks.grow(request.request_id, start + n)
    batch = runner.lay_out([ScheduledSeq(r, s, n) for r, s, n in decode]).batch
    assert sorted(g.batch for g in batch.groups) == [1, 2]  # short + mid (2 blocks each), long (15 blocks)
    assert max(g.block_table.shape[1] for g in batch.groups if g.batch == 2) == 2
    out, _ = step_logits(runner, blocks, decode)
    with torch.no_grad():
        for rid, ids in seqs.items():
            logits, _ = reference(torch.tensor([ids]))
            torch.testing.assert_close(out[rid][0], logits[0, -1], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_signed_rope_gives_the_same_bits_as_the_rotate_half_form(dtype):
    """The cached paths' RoPE (a roll and a sign folded into sin) equals HF's rotate-half form
    bit for bit, so the cached forward still matches the training/reference forward exactly."""
    from specgauge.engine.models.llama import apply_rope, apply_rope_signed, rope_cos_sin, signed_sin

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 6, 40, generator=generator).to(dtype)
    cos, sin = rope_cos_sin(1.0 / (10000 ** (torch.arange(0, 40, 2) / 40)), torch.arange(5))
    cos, sin = cos.unsqueeze(1).to(dtype), sin.unsqueeze(1).to(dtype)  # (5, 1, 40)
    assert torch.equal(apply_rope_signed(x, cos, signed_sin(sin)), apply_rope(x, cos, sin))

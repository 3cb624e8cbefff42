"""Weights packed as fp16 for FBGEMM or reordered for oneDNN's bf16 GEMM (engine/models/linear.py):
what the matmul computes, when ``auto`` packs, and that speculation stays lossless on packed weights."""

import pytest
import torch
import torch.nn.functional as F
from spec_testkit import domain_prompts, generate_all, make_spec_engine, write_random_head

from specgauge.engine.models.attention import linear_is_batch_invariant
from specgauge.engine.models.cpu_features import has_amx_bf16
from specgauge.engine.models.linear import (PackedFP16, PackedOneDNN, bf16_valued, choose_packing,
                                             fp16_packing_supported, linear, onednn_packing_supported)
from specgauge.engine.models.random_model import write_random_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.errors import UserError

from engine_testkit import wait_idle

needs_fbgemm = pytest.mark.skipif(not fp16_packing_supported(), reason="this torch build has no FBGEMM fp16 matmul")
# The reordered product's bits: the same at every row count wherever oneDNN runs it (a lone row
# goes through as two where its shape's one-row kernel sums differently: AVX512-BF16 without AMX);
# equal to F.linear's one-row product too on CPUs with AMX, where that was probed.
probed_onednn = pytest.mark.skipif(not onednn_packing_supported(), reason="this torch build or CPU has no oneDNN bf16 matmul")
CPU = torch.device("cpu")


@needs_fbgemm
@pytest.mark.parametrize("rows", [1, 7, 64])
def test_packed_linear_is_fp32_math_on_fp16_weights(rows):
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(96, 80, generator=generator) * 0.05
    x = torch.randn(rows, 80, generator=generator)
    got = linear(x, PackedFP16(weight))
    assert got.shape == (rows, 96) and got.dtype == torch.float32
    # the fp16-rounded weights in fp32 arithmetic (only the summation order differs)
    torch.testing.assert_close(got, F.linear(x, weight.half().float()), rtol=1e-5, atol=1e-6)
    # and not the unrounded weights: the rounding is real for fp32-valued weights
    assert not torch.allclose(got, F.linear(x, weight), rtol=1e-6, atol=1e-7)


@needs_fbgemm
def test_bf16_valued_weights_pack_exactly_but_for_fp16_subnormals():
    weight = torch.randn(64, 48, generator=torch.Generator().manual_seed(0)) * 0.05
    weight = (weight.sign() * weight.abs().clamp_min(1e-3)).bfloat16().float()  # all in fp16's normal range
    weight[0, 0] = 3e-6  # below 2^-14: an fp16 subnormal, moved by at most 2^-25
    weight[0, 1] = 0.0
    weight = weight.bfloat16().float()
    assert bf16_valued([weight])
    moved = (weight.half().float() - weight).abs()
    assert moved.max() <= 2.0 ** -25 and int((moved > 0).sum()) == 1  # only the subnormal moved
    x = torch.randn(5, 48)
    torch.testing.assert_close(linear(x, PackedFP16(weight)), F.linear(x, weight), rtol=1e-5, atol=1e-6)


def test_auto_packs_bf16_valued_fp32_weights_and_reorders_bf16_ones_on_cpu():
    bf16_like = [(torch.randn(8, 8) * 0.1).bfloat16().float()]
    fp32 = [torch.randn(8, 8) * 0.1]
    huge = [torch.full((2, 2), 70000.0).bfloat16().float()]
    expected = "fp16" if fp16_packing_supported() else "none"
    assert choose_packing("auto", CPU, torch.float32, bf16_like) == expected
    assert choose_packing("auto", CPU, torch.float32, fp32) == "none"
    assert choose_packing("auto", CPU, torch.float32, huge) == "none"
    assert choose_packing("auto", CPU, torch.bfloat16, bf16_like) == ("onednn" if onednn_packing_supported() else "none")
    assert choose_packing("auto", CPU, torch.float16, bf16_like) == "none"
    assert choose_packing("auto", torch.device("meta"), torch.float32, bf16_like) == "none"
    assert choose_packing("auto", torch.device("meta"), torch.bfloat16, bf16_like) == "none"
    assert choose_packing("none", CPU, torch.float32, bf16_like) == "none"
    assert choose_packing("none", CPU, torch.bfloat16, bf16_like) == "none"
    assert choose_packing("fp16", CPU, torch.float32, fp32) == "fp16"
    # a packing asked for another dtype's matmuls resolves as auto for these (the EAGLE-3 head
    # holds an fp32 set beside its bf16 one)
    assert choose_packing("onednn", CPU, torch.float32, bf16_like) == expected
    if onednn_packing_supported():
        assert choose_packing("onednn", CPU, torch.bfloat16, bf16_like) == "onednn"


@probed_onednn
@pytest.mark.parametrize("shape", [(1024, 320), (320, 512), (320, 864), (1024, 640), (576, 1536)])
def test_reordered_bf16_weights_give_a_row_the_same_bits_at_every_row_count(shape):
    """A row's product with reordered weights is the same bits at any row count (1-129 and 300
    rows) as alone: batch-invariant where plain bf16 F.linear is not (inner dimensions of 512 and
    more, at 33-319 rows, on a CPU with AMX), and where oneDNN's own one-row kernel sums otherwise
    (576 x 1,536, SmolLM2's down projection, on AVX512-BF16 without AMX). On a CPU with AMX it is
    also F.linear's one-row product: ``onednn`` decodes what ``none`` decodes one row at a time."""
    generator = torch.Generator().manual_seed(shape[1])
    weight = (torch.randn(*shape, generator=generator) * 0.05).bfloat16()
    packed = PackedOneDNN(weight)
    x = torch.randn(300, shape[1], generator=generator).bfloat16()
    alone = torch.cat([linear(x[i:i + 1], packed) for i in range(300)])
    for rows in (*range(1, 130), 300):
        assert torch.equal(linear(x[:rows], packed), alone[:rows]), rows
    assert linear_is_batch_invariant(packed)
    if has_amx_bf16():
        assert torch.equal(alone, torch.cat([F.linear(x[i:i + 1], weight) for i in range(300)]))


def test_engine_refuses_onednn_packing_where_it_does_not_apply(tiny_model_dir):
    with pytest.raises(UserError, match="--weight-packing onednn applies to bfloat16 on CPU"):
        make_spec_engine(tiny_model_dir, dtype="float32", weight_packing="onednn")


@pytest.fixture(scope="module")
def bf16_model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("bf16-model"), max_position_embeddings=1024, dtype="bfloat16")


@needs_fbgemm
def test_engine_packs_a_bf16_checkpoint_and_not_an_fp32_one(bf16_model_dir, tiny_model_dir):
    # fp32 compute named: "auto" computes in bf16 on a CPU with native bf16 (AMX, AVX512-BF16),
    # where the weights are reordered for oneDNN instead
    packed = make_spec_engine(bf16_model_dir, dtype="float32")
    # Whether FBGEMM's packed matmul is batch-invariant depends on the CPU and the shapes (it is
    # on some hosts for this tiny model), so the engine's flag must follow the probe of every
    # matrix shape, not a guess.
    assert packed.model.weight_packing == "fp16"
    layer, model = packed.model.model.layers[0], packed.model
    shapes = (layer.self_attn.qkv_weight, layer.self_attn.o_proj.weight, layer.mlp.gate_up_weight,
              layer.mlp.down_proj.weight, model.lm_head.weight)
    assert model.batch_invariant == all(linear_is_batch_invariant(PackedFP16(w)) for w in shapes)
    assert make_spec_engine(tiny_model_dir, dtype="float32").model.weight_packing == "none"
    assert make_spec_engine(bf16_model_dir, dtype="float32", weight_packing="none").model.weight_packing == "none"


def greedy_tokens(model_dir, speculative, dtype, packing="auto"):
    """Greedy tokens of 40 prompts (max_tokens 9-12, batches up to 16, prompts prefilled in one
    step of up to 512 rows), the engine's snapshot, and the packings its target and its EAGLE-3
    head's (fp32, many-row) matmuls got."""
    engine = make_spec_engine(model_dir, speculative=speculative, max_running=16, max_tokens_per_step=512,
                              dtype=dtype, weight_packing=packing)
    drafter = engine.runner.drafter if speculative.algorithm == "EAGLE3" else None
    packings = (engine.model.weight_packing,
                (drafter.head.weight_packing, drafter.head.many_rows_packing) if drafter else None)
    engine.start()
    try:
        prompts = [engine.tokenizer.encode(t) for t in domain_prompts(40)]
        params = [SamplingParams(max_tokens=12 - i % 4, temperature=0.0, ignore_eos=True) for i in range(40)]
        tokens, _ = generate_all(engine, prompts, params)
        wait_idle(engine)
        return tokens, engine.snapshot(), packings
    finally:
        engine.stop()


@needs_fbgemm
@pytest.mark.parametrize("spec", [dict(algorithm="EAGLE3", num_steps=4), dict(algorithm="NGRAM", num_steps=4)],
                         ids=["eagle-chain", "ngram-chain"])
def test_greedy_speculative_equals_plain_on_packed_weights(spec, bf16_model_dir, tmp_path):
    """Plain and speculative engines on fp16-packed weights (verify rows in the same FBGEMM
    kernel as decode rows) give the same greedy tokens."""
    if spec["algorithm"] == "EAGLE3":
        head = write_random_head(tmp_path / "head", bf16_model_dir, dtype=torch.bfloat16)
        spec = dict(spec, draft_model_path=str(head))
    plain, _, (packing, _) = greedy_tokens(bf16_model_dir, SpeculativeConfig(), "float32")
    speculative, snapshot, (spec_packing, head_packings) = greedy_tokens(bf16_model_dir, SpeculativeConfig(**spec),
                                                                         "float32")
    assert packing == spec_packing == "fp16"
    assert head_packings in (None, ("fp16", "fp16"))  # the head's sets are both fp32 here
    assert speculative == plain
    assert snapshot["spec_num_verifies"] > 0


@probed_onednn
def test_reordered_weights_decode_what_dense_ones_do_plain_and_speculative(bf16_model_dir, tmp_path):
    """bf16 engines with dense and with reordered weights give the same greedy tokens, and an
    EAGLE-3 chain on reordered weights (its head's many-row passes reordered too) gives them as
    well."""
    head = write_random_head(tmp_path / "head", bf16_model_dir, dtype=torch.bfloat16)
    dense, _, (dense_packing, _) = greedy_tokens(bf16_model_dir, SpeculativeConfig(), "bfloat16", "none")
    reordered, _, (packing, _) = greedy_tokens(bf16_model_dir, SpeculativeConfig(), "bfloat16")
    speculative, snapshot, (spec_packing, head_packings) = greedy_tokens(
        bf16_model_dir, SpeculativeConfig(algorithm="EAGLE3", num_steps=4, draft_model_path=str(head)), "bfloat16")
    assert (dense_packing, packing, spec_packing) == ("none", "onednn", "onednn")
    assert head_packings[1] == "onednn"
    assert reordered == dense
    assert speculative == dense
    assert snapshot["spec_num_verifies"] > 0


@needs_fbgemm
def test_head_passes_of_few_rows_run_on_the_fbgemm_set_and_more_rows_in_bf16(bf16_model_dir, tmp_path):
    """A bf16 engine's EAGLE-3 head holds an fp32 set packed for FBGEMM and a bf16 one: a pass
    of up to ``FBGEMM_ROWS_MAX`` rows (a catch-up, the chain steps of a few requests) runs on the
    first, a larger one on the second; both give the same drafts' features up to bf16 rounding."""
    from specgauge.engine.models.eagle3 import FBGEMM_ROWS_MAX

    head_dir = write_random_head(tmp_path / "head", bf16_model_dir, dtype=torch.bfloat16)
    engine = make_spec_engine(bf16_model_dir, dtype="bfloat16", speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=2, draft_model_path=str(head_dir)))
    head = engine.runner.drafter.head
    assert (head.weight_packing, head.fp32_rows_max) == ("fp16", FBGEMM_ROWS_MAX)
    cfg = head.config
    generator = torch.Generator().manual_seed(0)
    n_kv, width = cfg.num_key_value_heads, 32
    rows = FBGEMM_ROWS_MAX + 1
    tokens = torch.randint(0, cfg.draft_vocab_size, (rows,), generator=generator)
    features = torch.randn(rows, cfg.hidden_size, generator=generator)
    kv = torch.randn(2, rows, width, n_kv, cfg.head_size, generator=generator).to(head.attention_dtype)
    positions = torch.full((rows,), width - 1)
    cos, sin = head.rope_cached(positions)
    mask = torch.zeros(rows, 1, 1, width, dtype=head.attention_dtype)

    def run(count):
        k, v = kv[0, :count].clone(), kv[1, :count].clone()
        return head.forward_gathered(tokens[:count], features[:count], cos[:count], sin[:count], k, v,
                                     (torch.arange(count), positions[:count]), mask[:count])

    few, few_logits = run(FBGEMM_ROWS_MAX)
    many, many_logits = run(rows)
    assert (few.dtype, many.dtype) == (torch.float32, torch.bfloat16)
    torch.testing.assert_close(few, many[:FBGEMM_ROWS_MAX].float(), rtol=0.05, atol=0.05)
    torch.testing.assert_close(few_logits, many_logits[:FBGEMM_ROWS_MAX].float(), rtol=0.05, atol=0.05)

"""Weights packed as fp16 for FBGEMM (engine/models/linear.py): what the matmul computes, when ``auto``
packs, and that speculation stays lossless on packed weights."""

import pytest
import torch
import torch.nn.functional as F
from spec_testkit import domain_prompts, generate_all, make_spec_engine, write_random_head

from specgauge.engine.models.attention import linear_is_batch_invariant
from specgauge.engine.models.linear import PackedFP16, bf16_valued, choose_packing, fp16_packing_supported, linear
from specgauge.engine.models.random_model import write_random_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig

from engine_testkit import wait_idle

needs_fbgemm = pytest.mark.skipif(not fp16_packing_supported(), reason="this torch build has no FBGEMM fp16 matmul")
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


def test_auto_packs_only_bf16_valued_fp32_weights_on_cpu():
    bf16_like = [(torch.randn(8, 8) * 0.1).bfloat16().float()]
    fp32 = [torch.randn(8, 8) * 0.1]
    huge = [torch.full((2, 2), 70000.0).bfloat16().float()]
    expected = "fp16" if fp16_packing_supported() else "none"
    assert choose_packing("auto", CPU, torch.float32, bf16_like) == expected
    assert choose_packing("auto", CPU, torch.float32, fp32) == "none"
    assert choose_packing("auto", CPU, torch.float32, huge) == "none"
    assert choose_packing("auto", CPU, torch.bfloat16, bf16_like) == "none"
    assert choose_packing("auto", torch.device("meta"), torch.float32, bf16_like) == "none"
    assert choose_packing("none", CPU, torch.float32, bf16_like) == "none"
    assert choose_packing("fp16", CPU, torch.float32, fp32) == "fp16"


@pytest.fixture(scope="module")
def bf16_model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("bf16-model"), max_position_embeddings=1024, dtype="bfloat16")


@needs_fbgemm
def test_engine_packs_a_bf16_checkpoint_and_not_an_fp32_one(bf16_model_dir, tiny_model_dir):
    # fp32 compute named: "auto" computes in bf16 on a CPU with native bf16 (AMX, AVX512-BF16),
    # where there is nothing to pack
    packed = make_spec_engine(bf16_model_dir, dtype="float32")
    # Whether FBGEMM's packed matmul is batch-invariant depends on the CPU and the shapes (it is
    # on some hosts for this tiny model), so the engine's flag must follow the probe, not a guess.
    assert packed.model.weight_packing == "fp16"
    assert packed.model.batch_invariant == linear_is_batch_invariant(
        PackedFP16(packed.model.model.layers[0].self_attn.qkv_weight))
    assert make_spec_engine(tiny_model_dir, dtype="float32").model.weight_packing == "none"
    assert make_spec_engine(bf16_model_dir, dtype="float32", weight_packing="none").model.weight_packing == "none"


@needs_fbgemm
@pytest.mark.parametrize("spec", [dict(algorithm="EAGLE3", num_steps=4), dict(algorithm="NGRAM", num_steps=4)],
                         ids=["eagle-chain", "ngram-chain"])
def test_greedy_speculative_equals_plain_on_packed_weights(spec, bf16_model_dir, tmp_path):
    """Plain and speculative engines on fp16-packed weights (verify rows in the same FBGEMM
    kernel as decode rows) give the same greedy tokens, at batch up to 16."""
    if spec["algorithm"] == "EAGLE3":
        head = write_random_head(tmp_path / "head", bf16_model_dir, dtype=torch.bfloat16)
        spec = dict(spec, draft_model_path=str(head))
    outputs = []
    for speculative in (SpeculativeConfig(), SpeculativeConfig(**spec)):
        engine = make_spec_engine(bf16_model_dir, speculative=speculative, max_running=16, max_tokens_per_step=512,
                                  dtype="float32")
        assert engine.model.weight_packing == "fp16"
        if speculative.algorithm == "EAGLE3":
            assert engine.runner.drafter.head.weight_packing == "fp16"
        engine.start()
        try:
            prompts = [engine.tokenizer.encode(t) for t in domain_prompts(48)]
            params = [SamplingParams(max_tokens=10 - i % 4, temperature=0.0, ignore_eos=True) for i in range(48)]
            tokens, _ = generate_all(engine, prompts, params)
            wait_idle(engine)
            outputs.append((tokens, engine.snapshot()))
        finally:
            engine.stop()
    (plain, _), (speculative_tokens, snapshot) = outputs
    assert speculative_tokens == plain
    assert snapshot["spec_num_verifies"] > 0

"""A Hugging Face Llama checkpoint as a user has it — sharded safetensors, GQA, llama3 rope
scaling, explicit head_dim, untied embeddings, bf16 on disk — loads, and its cached-path logits
equal transformers' on the same weights."""

import json

import pytest
import torch
from engine_testkit import runner_for

from specgauge.engine.models.llama import load_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.core.scheduler import Request, ScheduledSeq

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf-llama")
    config = transformers.LlamaConfig(
        vocab_size=211, hidden_size=96, intermediate_size=160, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=256, tie_word_embeddings=False,
        rope_theta=500000.0, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=[2, 3])
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.save_pretrained(path, max_shard_size="200KB", safe_serialization=True)
    return path, model.float()


def test_sharded_checkpoint_loads_and_cached_logits_match_transformers(hf_checkpoint):
    path, reference = hf_checkpoint
    assert len(list(path.glob("model-*.safetensors"))) > 1, "the checkpoint should be sharded"
    assert isinstance(json.loads((path / "config.json").read_text())["eos_token_id"], list)
    model = load_model(path)  # bf16 on disk, fp32 in memory
    assert model.config.head_size == 32 and not model.config.tie_word_embeddings
    model.prepare_for_inference(256)
    runner, blocks = runner_for(model, num_blocks=32, block_size=8)
    cache = runner.cache
    ids = torch.randint(0, 211, (90,)).tolist()  # past the original 64-token rope window
    request = Request("r", ids, SamplingParams())
    got = []
    for start, n in ((0, 50), (50, 39), (89, 1)):
        blocks.grow("r", start + n)
        batch = runner.lay_out([ScheduledSeq(request, start, n)]).batch
        batch.logit_indices = torch.arange(n)
        with torch.inference_mode():
            got.append(model.forward_cached(batch, cache)[0])
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits[0]
    torch.testing.assert_close(torch.cat(got), expected, atol=1e-4, rtol=1e-4)
    blocks.free("r")
    blocks.check_integrity()

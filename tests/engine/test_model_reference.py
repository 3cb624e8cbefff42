"""The model's logits equal transformers' LlamaForCausalLM on the same weights (fp32)."""

import pytest
import torch

from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, load_model, save_model

transformers = pytest.importorskip("transformers")


def tiny_config(**overrides) -> LlamaConfig:
    values = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    values.update(overrides)
    return LlamaConfig(**values)


@pytest.mark.parametrize("tied", [True, False])
def test_logits_match_transformers(tmp_path, tied):
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_config(tie_word_embeddings=tied))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.05)
    save_model(model, tmp_path)
    ours = load_model(tmp_path)
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path, torch_dtype=torch.float32).eval()
    ids = torch.randint(0, 97, (2, 17))
    with torch.no_grad():
        logits, aux = ours(ids, aux_layers=(0, 2))
        ref = theirs(ids, output_hidden_states=True)
    torch.testing.assert_close(logits, ref.logits, atol=1e-5, rtol=1e-4)
    # HF hidden_states[i] is the input of layer i.
    torch.testing.assert_close(aux[1], ref.hidden_states[2], atol=1e-5, rtol=1e-4)

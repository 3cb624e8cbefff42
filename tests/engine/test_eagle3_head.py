"""The EAGLE-3 head: shapes, vocabulary map, published layout, and the pieces a cached path uses."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from specgauge.engine.models.eagle3 import (
    Eagle3Config,
    Eagle3Head,
    build_vocab_map,
    config_for_engine,
    default_aux_layers,
    load_eagle3,
    save_eagle3,
    target_features,
)
from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, rope_cos_sin, rope_inv_freq

VOCAB, HIDDEN, DRAFT_VOCAB = 96, 32, 40


@pytest.fixture(scope="module")
def target():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=64, num_hidden_layers=6,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    return LlamaForCausalLM(config).eval()


@pytest.fixture()
def head(target):
    torch.manual_seed(1)
    head = Eagle3Head(Eagle3Config.for_target(target.config, DRAFT_VOCAB))
    head.share_embeddings(target)
    counts = torch.arange(VOCAB, dtype=torch.float64)  # higher ids are more frequent
    head.set_vocab_map(*build_vocab_map(counts, DRAFT_VOCAB, always=(0, 1)))
    return head.eval()


def test_default_aux_layers_follow_sglang_and_clamp_for_shallow_targets():
    assert default_aux_layers(32) == (2, 16, 29)  # SGLang: inputs of 2, L//2, L-3
    assert default_aux_layers(6) == (2, 3, 4)  # L//2 and L-3 collide: pushed apart
    assert default_aux_layers(2) == (1, 1, 1)
    assert default_aux_layers(1) == (0, 0, 0)


def test_config_json_is_the_published_layout(head):
    raw = head.config.to_dict()
    assert raw["architectures"] == ["LlamaForCausalLMEagle3"]
    assert raw["num_hidden_layers"] == 1 and raw["draft_vocab_size"] == DRAFT_VOCAB and raw["vocab_size"] == VOCAB
    # vLLM's meaning: id j is the input of target layer j, as aux_layers holds it.
    assert raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == list(head.config.aux_layers)
    assert Eagle3Config.from_dict(raw) == head.config


def test_layer_ids_mean_inputs_of_those_layers_as_in_vllm(target):
    """vLLM reads id j as the input of target layer j (the hidden state after j layers):
    ``_maybe_add_hidden_state(aux, idx + 1, ...)`` after layer idx in vllm/model_executor/models/llama.py."""
    config = Eagle3Config.from_dict(_published_config([2, 3, 4]))
    assert config.aux_layers == (2, 3, 4)
    ids = torch.randint(0, VOCAB, (1, 5))
    _, aux = target_features(target, ids, config.aux_layers)
    x = target.model.embed_tokens(ids)
    inputs = []
    cos, sin = rope_cos_sin(rope_inv_freq(target.config), torch.arange(5).unsqueeze(0))
    for layer in target.model.layers:
        inputs.append(x)
        x = layer(x, cos, sin)
    torch.testing.assert_close(aux, torch.cat([inputs[2], inputs[3], inputs[4]], dim=-1))


def test_config_for_sglang_names_the_same_layers():
    """SGLang captures the input of layer id + 1 (set_eagle3_layers_to_capture,
    python/sglang/srt/models/llama.py), so its config says one less for the same layers."""
    ours = _published_config([2, 3, 4])
    sglang = config_for_engine(ours, "sglang")
    assert sglang["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3]
    assert [i + 1 for i in sglang["eagle_config"]["eagle_aux_hidden_state_layer_ids"]] == [2, 3, 4]
    assert config_for_engine(ours, "vllm") == ours and ours["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 3, 4]
    with pytest.raises(ValueError, match="engine must be one of"):
        config_for_engine(ours, "tgi")


def test_shapes_of_one_step_and_of_the_pieces(target, head):
    ids = torch.randint(0, VOCAB, (2, 7))
    logits, aux = target_features(target, ids, head.config.aux_layers)
    assert logits.shape == (2, 7, VOCAB) and aux.shape == (2, 7, 3 * HIDDEN)
    features = head.fuse(aux)  # (B, T, h)
    assert features.shape == (2, 7, HIDDEN)
    out = head.step(ids, features, torch.arange(7))
    assert out.features.shape == (2, 7, HIDDEN) and out.logits.shape == (2, 7, DRAFT_VOCAB)
    assert out.kv.k.shape == (2, 2, 7, HIDDEN // 4)
    names = {name for name, _ in head.named_parameters()}
    assert {"fc.weight", "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
            "midlayer.self_attn.q_proj.weight", "midlayer.post_attention_layernorm.weight",
            "midlayer.mlp.gate_proj.weight", "norm.weight", "lm_head.weight"} <= names
    assert head.midlayer.self_attn.q_proj.weight.shape == (HIDDEN, 2 * HIDDEN)  # q/k/v read the 2h concat


def test_aux_features_are_the_inputs_of_the_listed_layers_in_order(target):
    ids = torch.randint(0, VOCAB, (1, 5))
    _, aux = target_features(target, ids, (3, 1, 3))
    _, by_layer = target(ids, aux_layers=(1, 3))
    assert torch.equal(aux, torch.cat([by_layer[1], by_layer[0], by_layer[1]], dim=-1))


def test_vocab_map_keeps_the_most_frequent_tokens_and_maps_back(head):
    draft_ids = torch.arange(DRAFT_VOCAB)
    target_ids = head.draft_to_target(draft_ids)
    expected = sorted({0, 1} | set(range(VOCAB - (DRAFT_VOCAB - 2), VOCAB)))
    assert target_ids.tolist() == expected
    assert head.d2t.dtype == torch.int64 and head.t2d.dtype == torch.bool
    assert head.t2d.sum() == DRAFT_VOCAB and head.t2d[target_ids].all()
    logits = torch.randn(3, VOCAB)
    assert torch.equal(head.target_to_draft_logits(logits), logits[:, head.t2d])


def test_vocab_map_breaks_ties_by_id():
    d2t, t2d = build_vocab_map(torch.tensor([5.0, 1.0, 1.0, 1.0, 7.0]), 3)
    assert (d2t + torch.arange(3)).tolist() == [0, 1, 4] and t2d.tolist() == [True, True, False, False, True]


def test_chain_attention_of_a_first_step_is_plain_causal_attention(target, head):
    ids = torch.randint(0, VOCAB, (2, 6))
    features = head.fuse(target_features(target, ids, head.config.aux_layers)[1])
    first = head.step(ids, features, torch.arange(6))
    again = head.step(ids, features, torch.arange(6), base=None)
    # With the first step's own keys as base and nothing in between, a second call attends to
    # base rows 0..t plus its own key t again: check that formula against a hand computation.
    second = head.step(ids, features, torch.arange(6), base=first.kv)
    q = head.midlayer.project_qkv(head.midlayer.attention_input(head.embed(ids), features), *head.rope(torch.arange(6)[None]))[0]
    k = first.kv.k.repeat_interleave(2, dim=1)
    v = first.kv.v.repeat_interleave(2, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // 4)  # (B, H, T, T)
    scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    diag = (q * k).sum(-1, keepdim=True) / math.sqrt(HIDDEN // 4)  # own key = the base key of the same row
    weights = torch.softmax(torch.cat([scores, diag], -1), -1)
    attn = weights[..., :6] @ v + weights[..., 6:] * v
    expected = head.midlayer.finish(features, attn.transpose(1, 2).reshape(2, 6, -1))
    assert torch.allclose(first.features, again.features)
    assert torch.allclose(second.features, expected, atol=1e-5)


def test_pieces_with_outside_kv_reproduce_the_sequence_path(target, head):
    """What an engine's cached path does: row by row against a growing K/V store, then a second
    draft step that sees the prefix keys and its own new key."""
    ids = torch.randint(0, VOCAB, (1, 8))
    features = head.fuse(target_features(target, ids, head.config.aux_layers)[1])  # (1, T, h)
    first = head.step(ids, features, torch.arange(8))
    drafted = head.draft_to_target(first.logits.argmax(-1))
    second = head.step(drafted, first.features, torch.arange(8) + 1, base=first.kv)
    layer = head.midlayer
    keys, values = [], []
    for t in range(8):  # prefill one token at a time into an outside cache
        x = layer.attention_input(head.embed(ids[:, t:t + 1]), features[:, t:t + 1])  # (1, 1, 2h)
        q, k, v = layer.project_qkv(x, *head.rope(torch.tensor([[t]])))
        keys.append(k)
        values.append(v)
        out = F.scaled_dot_product_attention(q, torch.cat(keys, 2), torch.cat(values, 2), enable_gqa=True)
        row = layer.finish(features[:, t:t + 1], out.transpose(1, 2).reshape(1, 1, -1))
        assert torch.allclose(row, first.features[:, t:t + 1], atol=1e-5)
    t = 5  # the second draft step of row 5: token drafted at step one, position t + 1
    x = layer.attention_input(head.embed(drafted[:, t:t + 1]), first.features[:, t:t + 1])
    q, k, v = layer.project_qkv(x, *head.rope(torch.tensor([[t + 1]])))
    out = F.scaled_dot_product_attention(q, torch.cat([*keys[:t + 1], k], 2), torch.cat([*values[:t + 1], v], 2), enable_gqa=True)
    row = layer.finish(first.features[:, t:t + 1], out.transpose(1, 2).reshape(1, 1, -1))
    assert torch.allclose(row, second.features[:, t:t + 1], atol=1e-5)


def test_save_and_load_round_trip(tmp_path, target, head):
    save_eagle3(head, tmp_path / "head", dtype=None)
    loaded = load_eagle3(tmp_path / "head", target)
    assert loaded.embed_tokens.weight is target.model.embed_tokens.weight
    for name, value in head.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    ids = torch.randint(0, VOCAB, (1, 5))
    features = head.fuse(target_features(target, ids, head.config.aux_layers)[1])
    assert torch.equal(loaded.step(ids, features, torch.arange(5)).logits, head.step(ids, features, torch.arange(5)).logits)


def _published_state(head: Eagle3Head, with_embeddings: bool) -> dict:
    """Tensors named and typed as a SpecForge / SGLang EAGLE-3 export writes them."""
    state = {name: param.detach().to(torch.bfloat16).clone() for name, param in head.named_parameters()
             if name != "embed_tokens.weight"}
    state["d2t"] = head.d2t.clone()  # int64 offsets
    state["t2d"] = head.t2d.clone()  # bool mask
    if with_embeddings:
        state["embed_tokens.weight"] = head.embed_tokens.weight.detach().to(torch.bfloat16).clone()
    return state


def _published_config(layer_ids: list[int] | None) -> dict:
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
              "vocab_size": VOCAB, "draft_vocab_size": DRAFT_VOCAB, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": False,
              "torch_dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 1, "pretraining_tp": 1,
              "attention_bias": False, "rope_scaling": None}
    if layer_ids is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": layer_ids, "use_aux_hidden_state": True}
    return config


@pytest.mark.parametrize("with_embeddings", [False, True])
def test_loads_a_head_saved_in_the_published_layout(tmp_path, target, head, with_embeddings):
    folder = tmp_path / "published"
    folder.mkdir()
    state = _published_state(head, with_embeddings)
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(_published_config([2, 3, 4])))
    loaded = load_eagle3(folder, target)
    assert loaded.config.aux_layers == (2, 3, 4)
    assert loaded.embed_tokens.weight is target.model.embed_tokens.weight
    assert torch.equal(loaded.fc.weight, state["fc.weight"].float())
    assert torch.equal(loaded.d2t, head.d2t) and torch.equal(loaded.t2d, head.t2d)
    if with_embeddings:  # standalone: the file's own embeddings
        alone = load_eagle3(folder)
        assert torch.equal(alone.embed_tokens.weight, state["embed_tokens.weight"].float())
    else:
        with pytest.raises(ValueError, match="embed_tokens"):
            load_eagle3(folder)


def test_published_head_without_aux_ids_takes_the_default_for_its_target(tmp_path, target, head):
    folder = tmp_path / "no_ids"
    folder.mkdir()
    save_file(_published_state(head, False), str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(_published_config(None)))
    assert load_eagle3(folder, target).config.aux_layers == default_aux_layers(6)


def test_a_head_for_another_target_is_refused(tmp_path, head):
    save_eagle3(head, tmp_path / "head")
    other = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB + 1, hidden_size=HIDDEN, intermediate_size=64,
                                         num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2))
    with pytest.raises(ValueError, match="does not fit the target"):
        load_eagle3(tmp_path / "head", other)


def test_inconsistent_vocab_map_is_refused(head):
    d2t, t2d = head.d2t.clone(), head.t2d.clone()
    t2d[int(torch.nonzero(~t2d)[0])] = True
    t2d[int(head.draft_to_target(torch.tensor(0)))] = False
    with pytest.raises(ValueError, match="different draft vocabularies"):
        head.set_vocab_map(d2t, t2d)


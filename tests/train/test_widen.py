"""Widening a target's heads keeps its function; a run continued from a model starts from it."""

from __future__ import annotations

import pytest
import torch

from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, save_model
from specgauge.train.target import ModelShape, TrainConfig, Trainer
from specgauge.train.widen import widen_head_dim, widened_config


def _model(vocab: int = 600, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = LlamaForCausalLM(config)
    for param in model.parameters():
        torch.nn.init.normal_(param, std=0.2)
    return model


def test_widened_heads_compute_the_same_logits():
    model = _model()
    wide = widen_head_dim(model, 32)
    assert model.config.head_size == 12 and wide.config.head_size == 32
    assert wide.config.rope_theta == pytest.approx(10000.0 ** (32 / 12))
    tokens = torch.randint(0, 600, (2, 40))
    with torch.no_grad():
        before, _ = model(tokens)
        after, _ = wide(tokens)
    assert torch.allclose(before, after, atol=1e-4 * before.abs().max().item())


def test_the_new_dims_get_gradients():
    wide = widen_head_dim(_model(), 32)
    logits, _ = wide(torch.randint(0, 600, (2, 24)))
    logits.logsumexp(-1).mean().backward()
    attention = wide.model.layers[0].self_attn
    new_q_rows = attention.q_proj.weight.grad.view(4, 32, -1)[:, 6:16]  # rows no old dim moved to
    new_o_cols = attention.o_proj.weight.grad.view(-1, 4, 32)[:, :, 12:]
    assert new_q_rows.abs().sum() > 0 and new_o_cols.abs().sum() > 0


def test_widening_refuses_a_smaller_or_odd_head_dim():
    config = _model().config
    for bad in (12, 8, 13):
        with pytest.raises(ValueError, match="head_dim"):
            widened_config(config, bad)


def test_a_run_continued_from_a_model_starts_from_its_function(tiny_corpus, tmp_path):
    model = _model()
    save_model(model, tmp_path / "start", dtype=torch.float32)
    shape = ModelShape.continuing(model.config, 48, 32)
    config = TrainConfig(seq_len=48, batch_size=2, max_steps=2, bf16=False, threads=1, eval_every=1000, eval_windows=1,
                         init_from=str(tmp_path / "start"))
    trainer = Trainer(tiny_corpus["dir"], tmp_path / "run", shape, config, vocab_size=600)
    tokens = torch.randint(0, 600, (1, 40))
    with torch.no_grad():
        before, _ = model(tokens)
        after, _ = trainer.model(tokens)
    assert trainer.model.config.head_size == 32 and trainer.model.config.max_position_embeddings == 48
    assert torch.allclose(before, after, atol=1e-4 * before.abs().max().item())
    trainer.run()
    assert trainer.state.step == 2


def _head(target: LlamaForCausalLM, seed: int = 1):
    from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map

    torch.manual_seed(seed)
    head = Eagle3Head(Eagle3Config.for_target(target.config, 64, (0, 1, 1), intermediate_size=40))
    for name, param in head.named_parameters():
        if name != "embed_tokens.weight":
            torch.nn.init.normal_(param, std=0.2)
    head.share_embeddings(target)
    head.set_vocab_map(*build_vocab_map(torch.rand(600), 64))
    return head


def _two_steps(target, drafter, tokens):
    from specgauge.engine.models.eagle3 import target_features

    positions = torch.arange(tokens.shape[1])
    _, aux = target_features(target, tokens, drafter.config.aux_layers)
    first = drafter.step(tokens, drafter.fuse(aux), positions)
    second = drafter.step(tokens, first.features, positions + 1, base=first.kv)
    return first.logits, second.logits


def test_a_widened_head_drafts_what_the_old_one_did_on_the_widened_target():
    from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head
    from specgauge.train.widen import warm_start_head

    model = _model()
    head = _head(model)
    wide = widen_head_dim(model, 32)
    wide_head = Eagle3Head(Eagle3Config.for_target(wide.config, 64, (0, 1, 1), intermediate_size=40))
    wide_head.share_embeddings(wide)
    warm_start_head(wide_head, head)
    assert wide_head.config.head_size == 32 and torch.equal(wide_head.d2t, head.d2t)
    tokens = torch.randint(0, 600, (2, 30))
    with torch.no_grad():
        outputs = [_two_steps(model, head, tokens), _two_steps(wide, wide_head, tokens)]
    for before, after in zip(*outputs):
        assert torch.allclose(before, after, atol=1e-4 * before.abs().max().item())


def test_a_warm_start_with_a_larger_draft_vocabulary_keeps_the_rows_of_the_tokens_both_have():
    from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map
    from specgauge.train.widen import warm_start_head

    model = _model()
    head = _head(model)  # 64 draft tokens
    larger = Eagle3Head(Eagle3Config.for_target(model.config, 160, (0, 1, 1), intermediate_size=40))
    larger.share_embeddings(model)
    vocab_map = build_vocab_map(torch.rand(600, generator=torch.Generator().manual_seed(5)), 160)
    warm_start_head(larger, head, vocab_map=vocab_map, fresh_rows=model.lm_head.weight)
    assert torch.equal(larger.d2t, vocab_map[0]) and torch.equal(larger.t2d, vocab_map[1])
    old = dict(zip(head.draft_to_target(torch.arange(64)).tolist(), head.lm_head.weight))
    shared = 0
    for draft_id, target_id in enumerate(larger.draft_to_target(torch.arange(160)).tolist()):
        expected = old[target_id] if target_id in old else model.lm_head.weight[target_id]
        assert torch.equal(larger.lm_head.weight[draft_id], expected.detach())
        shared += target_id in old
    assert 0 < shared < 64  # some tokens in both vocabularies, some only in the new one
    assert torch.equal(larger.fc.weight, head.fc.weight) and torch.equal(larger.norm.weight, head.norm.weight)
    with pytest.raises(ValueError, match="needs fresh_rows"):
        warm_start_head(larger, head, vocab_map=vocab_map)


def test_a_head_of_another_shape_is_refused():
    from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head
    from specgauge.train.widen import warm_start_head

    model = _model()
    head = _head(model)
    wide = widen_head_dim(model, 32)
    narrower = Eagle3Head(Eagle3Config.for_target(wide.config, 64, (0, 1, 1), intermediate_size=24))
    with pytest.raises(ValueError, match="MLP of 40, wider than the new head's 24"):
        warm_start_head(narrower, head)


def test_a_head_started_with_a_wider_mlp_drafts_what_the_narrow_one_did_and_its_new_units_learn():
    from specgauge.engine.models.eagle3 import Eagle3Config, Eagle3Head
    from specgauge.train.widen import warm_start_head

    model = _model()
    head = _head(model)  # MLP of 40
    wider = Eagle3Head(Eagle3Config.for_target(model.config, 64, (0, 1, 1), intermediate_size=72))
    wider.share_embeddings(model)
    warm_start_head(wider, head)
    assert wider.midlayer.mlp.gate_proj.weight.shape == (72, 48)
    tokens = torch.randint(0, 600, (2, 30))
    with torch.no_grad():
        narrow_out, wide_out = _two_steps(model, head, tokens), _two_steps(model, wider, tokens)
    for before, after in zip(narrow_out, wide_out):
        assert torch.allclose(before, after, atol=1e-5 * before.abs().max().item())
    logits, _ = _two_steps(model, wider, tokens)
    logits.logsumexp(-1).mean().backward()
    mlp = wider.midlayer.mlp
    assert mlp.down_proj.weight.grad[:, 40:].abs().sum() > 0   # the new units feed the loss at once


def test_the_reproduce_line_widens_only_when_the_start_had_another_head_dim(tmp_path):
    """A continued run's command names ``--head-dim`` only when it widened its start's heads."""
    import json

    from specgauge.train.report import target_command_line

    start = tmp_path / "start"
    start.mkdir()
    (start / "config.json").write_text(json.dumps({"hidden_size": 320, "num_attention_heads": 8, "head_dim": 64}))
    config = {"minutes": 60, "max_steps": 10, "batch_size": 2, "seq_len": 4096, "lr": 6e-4, "warmup_steps": 30,
              "loss_on": "all", "bf16": False, "eval_every": 100, "eval_windows": 4, "seed": 1, "threads": 2,
              "init_from": str(start)}
    same = target_command_line(config, {"head_dim": 64, "rope_theta": 10000.0})
    wider = target_command_line(config, {"head_dim": 128, "rope_theta": 10000.0})
    assert f"--init-from {start} --eval-every" in same and "--head-dim" not in same
    assert f"--init-from {start} --head-dim 128" in wider

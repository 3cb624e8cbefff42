"""Helpers the engine tests import (pytest puts this folder on sys.path)."""

from __future__ import annotations

import time

import torch

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.kv_cache import KVCache
from specgauge.engine.models.llama import LlamaConfig, LlamaForCausalLM, load_model, save_model
from specgauge.engine.core.model_runner import ModelRunner
from specgauge.engine.core.scheduler import ScheduledSeq


def make_engine(model_dir, **scheduler_overrides):
    from specgauge.engine.core.engine import Engine, EngineConfig
    from specgauge.engine.core.scheduler import SchedulerConfig

    engine_keys = {"num_blocks", "block_size", "max_model_len", "dtype", "weight_packing"}
    engine_kwargs = {k: scheduler_overrides.pop(k) for k in list(scheduler_overrides) if k in engine_keys}
    config = EngineConfig(model_dir=str(model_dir), threads=1, scheduler=SchedulerConfig(**scheduler_overrides),
                          **engine_kwargs)
    return Engine(config)


def wait_idle(engine, timeout: float = 10.0) -> None:
    """Wait until the engine has no running or waiting request, then check the KV pool."""
    deadline = time.monotonic() + timeout
    while True:
        state = engine.call(lambda e: (len(e.scheduler.running), len(e.scheduler.waiting), e.blocks.num_free_blocks))
        if state[:2] == (0, 0):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"engine not idle after {timeout}s: running, waiting, free = {state}")
        time.sleep(0.02)
    engine.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks, "KV blocks leaked"


def make_model(tmp_path, **overrides):
    """A random 4-layer GQA model saved in bf16: (reference loaded for `forward`, prepared copy)."""
    values = dict(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  tie_word_embeddings=False)
    values.update(overrides)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**values))
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.1)
    save_model(model, tmp_path, dtype=torch.bfloat16)  # stored bf16 like the shipped target
    reference = load_model(tmp_path)                    # upcast to fp32
    cached = load_model(tmp_path)
    cached.prepare_for_inference(128)
    return reference, cached


def runner_for(model, num_blocks=64, block_size=4):
    """A runner with its own KV pool for ``model`` (K/V in its attention dtype, as the engine
    keeps them); returns (runner, block manager)."""
    cfg = model.config
    blocks = BlockManager(num_blocks, block_size)
    cache = KVCache(cfg.num_hidden_layers, num_blocks, block_size, cfg.num_key_value_heads, cfg.head_size,
                    model.attention_dtype, "cpu")
    return ModelRunner(model, cache, blocks), blocks


def step_logits(runner, blocks, seqs):
    """Run ``seqs`` (request, start, n) through one cached forward; logits of every new token."""
    scheduled = []
    for request, start, n in seqs:
        blocks.grow(request.request_id, start + n)
        scheduled.append(ScheduledSeq(request, start, n))
    layout = runner.lay_out(scheduled)
    batch = layout.batch
    batch.logit_indices = torch.arange(batch.num_tokens)
    with torch.inference_mode():
        logits, aux = runner.model.forward_cached(batch, runner.cache, aux_layers=(0, 2))
    return {seq.request.request_id: logits[offset:offset + seq.num_new]
            for seq, offset in zip(scheduled, layout.offsets)}, aux


def suite_chat_prompts(model_dir, suites: tuple[str, ...], per_suite: int) -> list[list[int]]:
    """The first ``per_suite`` requests of each built-in suite, as the engine encodes a chat request
    to the model of ``model_dir`` (its own chat template)."""
    from specgauge.engine.models.tokenizer import EngineTokenizer
    from specgauge.suites.registry import load_suite

    tokenizer = EngineTokenizer(model_dir)
    prompts = []
    for name in suites:
        for request in load_suite(name).requests[:per_suite]:
            messages = [{"role": m.role, "content": m.content} for m in request.messages]
            prompts.append(tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True)))
    return prompts

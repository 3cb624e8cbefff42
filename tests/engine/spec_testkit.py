"""Helpers for the speculative-decoding tests: random-weight EAGLE-3 heads, engines, generation."""

from __future__ import annotations

import queue
from pathlib import Path

import torch

from specgauge.engine.eagle3 import Eagle3Config, Eagle3Head, build_vocab_map, save_eagle3
from specgauge.engine.model import load_model
from specgauge.engine.sampling_params import SamplingParams


def write_random_head(path: Path, target_dir: Path, draft_vocab_size: int = 200, seed: int = 0,
                      std: float = 0.1) -> Path:
    """A random-weight EAGLE-3 head for the target in ``target_dir``, saved in the published
    layout (fp32). Losslessness does not depend on the head's quality."""
    target = load_model(target_dir)
    config = Eagle3Config.for_target(target.config, draft_vocab_size, intermediate_size=96)
    torch.manual_seed(seed)
    head = Eagle3Head(config)
    with torch.no_grad():
        for name, param in head.named_parameters():
            if "norm" not in name and name != "embed_tokens.weight":
                param.normal_(0.0, std)
    counts = torch.arange(config.vocab_size, 0, -1).float()  # favour low ids, like frequent tokens
    head.set_vocab_map(*build_vocab_map(counts, draft_vocab_size, always=[6]))
    save_eagle3(head, path, dtype=None)
    return path


def generate_all(engine, prompts: list[list[int]], params: SamplingParams | list[SamplingParams],
                 timeout: float = 60.0) -> tuple[list[list[int]], list]:
    """Submit every prompt at once; return each one's tokens and its last event."""
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    params = params if isinstance(params, list) else [params] * len(prompts)
    for i, (ids, p) in enumerate(zip(prompts, params)):
        engine.submit(f"r{i}", ids, p, inbox.put)
    tokens: dict[int, list[int]] = {i: [] for i in range(len(prompts))}
    last: dict[int, object] = {}
    while len(last) < len(prompts):
        event = inbox.get(timeout=timeout)
        index = int(event.request_id[1:])
        tokens[index].extend(event.token_ids)
        if event.finished:
            last[index] = event
    return [tokens[i] for i in range(len(prompts))], [last[i] for i in range(len(prompts))]

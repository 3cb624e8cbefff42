"""Regenerate the corpus responses with the target, as SpecForge's regenerate step does.

A drafter must predict what *the target* says, not what the corpus says. For each corpus
sample one assistant turn is picked (seeded), the conversation before it becomes the prompt,
and the target writes the response — greedy by default — through the embedded engine
(continuous batching over the paged KV cache). The result is a tokenized corpus in the same
format as the original (``<split>/<source>/shard-00000.jsonl`` with ``input_ids`` and a
``loss_mask`` that is 1 on the generated response), plus a ``meta.json`` that says how it was
made; a folder whose ``meta.json`` matches the request is reused, so a rerun costs nothing.
"""

from __future__ import annotations

import json
import random
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from specgauge.train.dataset import iter_samples


@dataclass(frozen=True)
class RegenerateConfig:
    """How responses are regenerated; validated here."""

    samples_per_source: int = 400
    max_prompt_tokens: int = 320
    max_new_tokens: int = 192
    temperature: float = 0.0
    seed: int = 0
    max_running: int = 64
    threads: int = 2

    def __post_init__(self) -> None:
        if self.samples_per_source <= 0 or self.max_new_tokens <= 0 or self.max_prompt_tokens <= 1:
            raise ValueError("samples_per_source, max_new_tokens must be positive and max_prompt_tokens > 1")
        if self.temperature < 0:
            raise ValueError("temperature must be ≥ 0")


def response_starts(loss_mask: list[int]) -> list[int]:
    """Indices where an assistant turn begins (the mask goes from 0 to 1)."""
    return [i for i, m in enumerate(loss_mask) if m and (i == 0 or not loss_mask[i - 1])]


def pick_prompts(source_dir: Path, count: int, max_prompt_tokens: int, seed: int) -> Iterator[list[int]]:
    """Up to ``count`` prompts from a tokenized source: for each sample, the tokens before one
    of its assistant turns chosen at random (seeded per sample) among those that start within
    ``max_prompt_tokens``; samples with no such turn are skipped."""
    taken = 0
    for index, (ids, mask) in enumerate(iter_samples(source_dir)):
        if taken >= count:
            return
        starts = [s for s in response_starts(mask) if 1 < s <= max_prompt_tokens]
        if not starts:
            continue
        start = random.Random(seed * 1_000_003 + index).choice(starts)
        taken += 1
        yield ids[:start]


def generate_responses(target_dir: Path, prompts: list[list[int]], config: RegenerateConfig,
                       on_done: Callable[[int], None] | None = None) -> list[list[int]]:
    """Responses of the target (``target_dir``, HF layout with tokenizer) to ``prompts``, each
    ending with its EOS token when it stopped on one; batched by the engine (``max_running``)."""
    from specgauge.engine.core.engine import Engine, EngineConfig
    from specgauge.engine.core.malloc import restore_malloc_defaults
    from specgauge.engine.core.scheduler import SchedulerConfig

    if not prompts:
        return []
    context = max(len(p) for p in prompts) + config.max_new_tokens
    scheduler = SchedulerConfig(max_running=config.max_running, max_tokens_per_step=max(2048, config.max_running),
                                max_waiting=len(prompts) + 1)
    engine = Engine(EngineConfig(model_dir=str(target_dir), threads=config.threads, scheduler=scheduler,
                                 max_model_len=context))
    engine.start()
    try:
        return complete_all(engine, prompts, config.max_new_tokens, config.temperature, config.seed, on_done)
    finally:
        engine.stop()
        # this process goes on to keep the target's outputs and train: the server's allocator
        # tuning would fragment its heap to several times what it holds
        restore_malloc_defaults()


def complete_all(engine, prompts: list[list[int]], max_new_tokens: int, temperature: float = 0.0, seed: int = 0,
                 on_done: Callable[[int], None] | None = None) -> list[list[int]]:
    """Submit every prompt to a started :class:`~specgauge.engine.core.engine.Engine` and wait for all
    completions (token ids, with the EOS token that stopped each, if one did)."""
    from specgauge.engine.core.engine import StreamEvent
    from specgauge.engine.core.sampling_params import SamplingParams

    outputs: list[list[int]] = [[] for _ in prompts]
    remaining = [len(prompts)]
    done = threading.Event()
    errors: list[str] = []

    def sink_for(index: int) -> Callable[[StreamEvent], None]:
        def sink(event: StreamEvent) -> None:
            outputs[index].extend(event.token_ids)
            if event.finished:
                if event.error:
                    errors.append(event.error)
                if isinstance(event.matched_stop, int) and (not outputs[index] or outputs[index][-1] != event.matched_stop):
                    outputs[index].append(event.matched_stop)
                remaining[0] -= 1
                if on_done:
                    on_done(1)
                if remaining[0] == 0:
                    done.set()
        return sink

    for index, prompt in enumerate(prompts):
        request_seed = None if temperature == 0 else seed * 1_000_003 + index
        params = SamplingParams(max_tokens=max_new_tokens, temperature=temperature, seed=request_seed)
        engine.submit(engine.new_request_id("regen"), prompt, params, sink_for(index))
    while prompts and not done.wait(1.0):
        if not engine.alive:
            raise RuntimeError("the engine stopped while generating")
    if errors:
        raise RuntimeError(f"generation failed: {errors[0]}")
    return outputs


def saved_responses(folder: Path, meta: dict, prompts: list[list[int]]) -> list[list[int]]:
    """The responses a folder already holds for the leading ``prompts``: its ``meta.json`` must
    match ``meta`` in everything but ``samples_per_source`` and each saved record must start with
    its prompt. ``pick_prompts`` takes samples in corpus order, so the prompts of a smaller request
    are the first ones of a larger: a folder regenerated for 1,600 prompts serves a request for 2,000
    with 1,600 of them done (or one for 400 with the first 400, and the folder then holds those
    only). Empty when nothing matches."""
    meta_path, shard = folder / "meta.json", folder / "shard-00000.jsonl"
    if not (meta_path.is_file() and shard.is_file()):
        return []
    saved = json.loads(meta_path.read_text())
    if any(saved.get(k) != v for k, v in meta.items() if k != "samples_per_source"):
        return []
    responses = []
    with shard.open() as handle:
        for prompt, line in zip(prompts, handle):
            record = json.loads(line)
            ids, mask = record["input_ids"], record["loss_mask"]
            if ids[:len(prompt)] != prompt or any(mask[:len(prompt)]) or len(ids) == len(prompt):
                break
            responses.append(ids[len(prompt):])
    return responses


def regenerate_source(corpus_dir: Path, target_dir: Path, out_dir: Path, split: str, source: str,
                      config: RegenerateConfig, target_digest: str,
                      on_start: Callable[[str, int], None] | None = None,
                      on_done: Callable[[int], None] | None = None) -> Path:
    """Regenerate one source of one split into ``out_dir/<split>/<source>/``; returns that folder.

    What the folder already holds for the same target and settings is kept (:func:`saved_responses`),
    so only prompts it lacks are generated: a request for more prompts than a previous run costs
    only the new ones, and a rerun of the same request costs nothing."""
    folder = Path(out_dir) / split / source
    meta = {"source": source, "split": split, "target_sha256": target_digest, **asdict(config),
            "format": "jsonl input_ids+loss_mask (loss on the regenerated response)"}
    for key in ("max_running", "threads"):  # how fast, not what
        meta.pop(key)
    prompts = list(pick_prompts(Path(corpus_dir) / split / source, config.samples_per_source,
                                config.max_prompt_tokens, config.seed))
    kept = saved_responses(folder, meta, prompts)
    meta.update(num_samples=len(prompts))
    meta_path = folder / "meta.json"
    if len(kept) == len(prompts) and meta_path.is_file() and (folder / "shard-00000.jsonl").is_file() \
            and json.loads(meta_path.read_text()) == {**meta, "num_response_tokens": sum(len(r) for r in kept)}:
        return folder
    missing = prompts[len(kept):]
    if on_start and missing:
        on_start(f"{split}/{source}", len(missing))
    responses = kept + generate_responses(target_dir, missing, config, on_done)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "shard-00000.jsonl.tmp"
    with tmp.open("w") as handle:
        for prompt, response in zip(prompts, responses):
            record = {"input_ids": prompt + response, "loss_mask": [0] * len(prompt) + [1] * len(response)}
            handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    tmp.replace(folder / "shard-00000.jsonl")
    meta.update(num_response_tokens=sum(len(r) for r in responses))
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return folder

"""Evaluate a model directory on the corpus: validation loss per source, and how repetitive its
greedy output is (share of distinct trigrams in continuations of held-out prompts)."""

from __future__ import annotations

from pathlib import Path

import torch

from specgauge.engine.models.llama import LlamaForCausalLM, load_model
from specgauge.train.chat import END, END_OF_TEXT, role_token, tokenize_conversation
from specgauge.train.corpus import TARGET_SOURCES, read_text
from specgauge.train.dataset import load_split
from specgauge.train.greedy import BatchKVCache, cached_forward
from specgauge.train.target import validation_losses


def distinct_trigram_share(tokens: list[int]) -> float | None:
    """Distinct trigrams / all trigrams of a token sequence (1.0 = never repeats; None if < 3 tokens)."""
    trigrams = list(zip(tokens, tokens[1:], tokens[2:]))
    return len(set(trigrams)) / len(trigrams) if trigrams else None


@torch.no_grad()
def greedy_continuation(model: LlamaForCausalLM, prompt_ids: list[int], max_new_tokens: int, stop_ids: set[int]) -> list[int]:
    """Greedy tokens after ``prompt_ids`` (with a KV cache), stopping after a token in ``stop_ids``
    or ``max_new_tokens``. A prompt too long for the context keeps its last tokens."""
    context = model.config.max_position_embeddings
    if max_new_tokens >= context:
        raise ValueError(f"max_new_tokens {max_new_tokens} does not fit the context of {context}")
    prompt = list(prompt_ids)[-(context - max_new_tokens):]
    cache = BatchKVCache(len(model.model.layers))
    logits = cached_forward(model, torch.tensor([prompt]), 0, cache)[0]
    out: list[int] = []
    for _ in range(max_new_tokens):
        token = int(logits.argmax())
        out.append(token)
        if token in stop_ids or len(out) == max_new_tokens:
            break
        logits = cached_forward(model, torch.tensor([[token]]), len(prompt) + len(out) - 1, cache)[0]
    return out


def held_out_prompts(corpus_dir: Path, source: str, count: int) -> list[list[dict]]:
    """The messages before the first assistant turn of the first ``count`` validation conversations."""
    prompts = []
    for record in read_text(corpus_dir, source, "validation"):
        messages = record["messages"]
        first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
        prompts.append(messages[:first])
        if len(prompts) == count:
            break
    return prompts


def prompt_ids(tokenizer, messages: list[dict]) -> list[int]:
    """Token ids of ``messages`` followed by the generation prompt ``<|assistant|>\\n``."""
    ids, _ = tokenize_conversation(tokenizer, messages)
    return ids + [tokenizer.token_to_id(role_token("assistant"))] + tokenizer.encode("\n", add_special_tokens=False).ids


def evaluate_model(model_dir: Path, corpus_dir: Path, prompts_per_source: int = 8, max_new_tokens: int = 128,
                   threads: int = 2, eval_windows: int = 64, ignore_eos: bool = False,
                   sources: tuple[str, ...] = TARGET_SOURCES) -> dict:
    """Per source: all-token validation loss, the distinct-trigram share of greedy continuations
    (pooled over the prompts), their mean length, and one sample continuation."""
    from tokenizers import Tokenizer

    torch.set_num_threads(threads)
    model = load_model(model_dir, dtype=torch.float32)
    tokenizer = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    stop_ids = set() if ignore_eos else {tokenizer.token_to_id(END), tokenizer.token_to_id(END_OF_TEXT)}
    val = validation_losses(model, load_split(corpus_dir, "validation", sources), model.config.max_position_embeddings,
                            eval_windows, bf16=False)
    report: dict = {"model_dir": str(model_dir), "parameters": model.num_parameters(), "max_new_tokens": max_new_tokens, "eval_windows": eval_windows,
                    "prompts_per_source": prompts_per_source, "ignore_eos": ignore_eos, "sources": {}}
    for source in sources:
        distinct = total = generated = 0
        samples = []
        for messages in held_out_prompts(corpus_dir, source, prompts_per_source):
            tokens = greedy_continuation(model, prompt_ids(tokenizer, messages), max_new_tokens, stop_ids)
            generated += len(tokens)
            trigrams = list(zip(tokens, tokens[1:], tokens[2:]))
            distinct += len(set(trigrams))
            total += len(trigrams)
            samples.append({"prompt": messages[-1]["content"][-300:], "continuation": tokenizer.decode(tokens, skip_special_tokens=False)})
        report["sources"][source] = {
            "val_loss": val[source],
            "distinct_trigram_share": distinct / total if total else float("nan"),
            "mean_generated_tokens": generated / max(len(samples), 1),
            "samples": samples,
        }
    return report

"""The distribution check of a comparison (``--samples-per-prompt``): its stored samples, tokenized,
tested by :func:`specgauge.analysis.distribution.distribution_check`, with what it cost.

A sample's tokens are its output text re-encoded with the tokenizer its run used (``--tokenizer``,
else the server's own, as the run stored it), else its characters: any fixed function of the
output keeps the test valid (the module docstring of ``analysis/distribution.py`` says why).
"""

from __future__ import annotations

from typing import Callable, Sequence

from specgauge.analysis.distribution import PromptSamples, distribution_check
from specgauge.analysis.results import DistributionCheck
from specgauge.client.records import RequestRecord
from specgauge.compare.plan import DISTRIBUTION_POSITIONS
from specgauge.errors import UserError
from specgauge.store import Store


def _arm_records(store: Store, run_ids: Sequence[int]) -> tuple[list[RequestRecord], float, str | None]:
    """The arm's successful samples over its runs (one per round), the seconds its points took, and
    the tokenizer its first run used."""
    records, seconds, tokenizer = [], 0.0, None
    for run_id in run_ids:
        tokenizer = tokenizer or store.get_run(run_id).config.get("tokenizer_path")
        for point in store.get_points(run_id):
            if point.status != "done":
                continue
            seconds += float((point.aggregates or {}).get("window_s") or 0.0)
            records += [r for r in store.get_requests(point.id) if r.ok]
    return records, seconds, tokenizer


def _encoder(tokenizer_path: str | None) -> tuple[Callable[[str], list[int]], Callable[[int], str], str]:
    """Text → token ids, an id → text, and what a token is."""
    if tokenizer_path:
        try:
            from specgauge.client.tokens import load_tokenizer

            tokenizer = load_tokenizer(tokenizer_path)
            return (lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
                    lambda token: tokenizer.decode([token]), f"tokens of {tokenizer_path}")
        except (UserError, ImportError):   # gone since the run, or no tokenizers package: characters
            pass
    return (lambda text: [ord(c) for c in text]), chr, "characters (no tokenizer known)"


def check_distribution(store: Store, baseline_run_ids: Sequence[int], speculative_run_ids: Sequence[int], *,
                       temperature: float, seed: int) -> DistributionCheck:
    """Both arms' samples, grouped by prompt, tested; ``requests`` and ``seconds`` say what it cost."""
    base, base_s, tokenizer = _arm_records(store, baseline_run_ids)
    spec, spec_s, _ = _arm_records(store, speculative_run_ids)
    encode, decode, what = _encoder(tokenizer)
    prompts = []
    for prompt_index in sorted({r.prompt_index for r in base} | {r.prompt_index for r in spec}):
        prompts.append(PromptSamples(
            prompt_index=prompt_index,
            baseline=tuple(tuple(encode(r.output_text or "")) for r in base if r.prompt_index == prompt_index),
            speculative=tuple(tuple(encode(r.output_text or "")) for r in spec if r.prompt_index == prompt_index)))
    check = distribution_check(prompts, DISTRIBUTION_POSITIONS, seed=seed, decode=decode, temperature=temperature,
                               tokens_from=what)
    return check.model_copy(update={"requests": len(base) + len(spec), "seconds": base_s + spec_s})

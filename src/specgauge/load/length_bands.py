"""Context-length bands (``tune --context-lengths``, ``compare --context-lengths``): their syntax, their
fit, their prompts.

A band ``LO-HI`` is the prompts of LO to HI tokens (inclusive) as the server sees them — the
prompt rendered the way it reaches the model (the chat template applied on a chat API), counted
with the server's tokenizer (``--tokenizer``, else the one the server reports; the same counting
as bench's context check, ``load.workload.prompt_tokens_as_served``). A band must fit the
server's context with ``--max-tokens`` of output: ``HI + max_tokens <= context``.

A band's prompts are the suite's requests whose length falls in it, when the suite has at least
``min_prompts`` of them; otherwise length-exact synthetic prompts (vLLM's random-dataset
machinery, ``suites.random_prompts.random_suite``) spread over the band, each kept only when
its length as served falls in the band. Every depth gets the same band suite (a derived suite
file, deterministic from the seed), so every arm sends the same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specgauge.errors import UserError
from specgauge.suites.model import Suite, SuiteRequest

SYNTHETIC_ATTEMPTS = 6   # rounds of synthetic prompts before a band is given up


@dataclass(frozen=True)
class BandSuite:
    """The prompts of one band: the derived suite file, where they came from, how many."""

    band: tuple[int, int]
    suite_ref: str
    source: str          # "suite NAME" or "synthetic"
    count: int


def band_label(band: tuple[int, int] | None) -> str:
    """``1-128`` (empty for no band)."""
    return "" if band is None else f"{band[0]}-{band[1]}"


def parse_bands(text: str) -> tuple[tuple[int, int], ...]:
    """``1-128,129-384`` → ((1, 128), (129, 384)); raises ``ValueError`` with a one-line reason:
    each band ``LO-HI`` with 1 <= LO <= HI, bands ascending and not overlapping."""
    bands: list[tuple[int, int]] = []
    for item in (part.strip() for part in text.split(",")):
        lo_text, sep, hi_text = item.partition("-")
        if not sep or not lo_text.strip().isdigit() or not hi_text.strip().isdigit():
            raise ValueError(f"{item!r} is not a band LO-HI of prompt tokens (e.g. 1-128,129-384)")
        lo, hi = int(lo_text), int(hi_text)
        if lo < 1 or lo > hi:
            raise ValueError(f"band {item!r}: needs 1 <= LO <= HI (a prompt has at least one token)")
        if bands and lo <= bands[-1][1]:
            raise ValueError(f"band {item!r} overlaps or precedes {band_label(bands[-1])}: give bands in ascending "
                             f"order without overlap")
        bands.append((lo, hi))
    return tuple(bands)


def check_fit(bands: tuple[tuple[int, int], ...], context: int | None, context_source: str | None,
              max_tokens: int) -> None:
    """Refuse (one line, naming it) the first band whose longest prompt plus ``max_tokens`` exceeds
    the server's context; nothing to check when the server reports none."""
    if context is None:
        return
    for band in bands:
        if band[1] + max_tokens > context:
            raise UserError(f"--context-lengths {band_label(band)}: prompts of up to {band[1]} tokens plus "
                            f"--max-tokens {max_tokens} exceed the server's {context}-token context "
                            f"({context_source}); the longest band that fits ends at {context - max_tokens}")


def suite_band_requests(suite: Suite, lengths: list[int], band: tuple[int, int]) -> tuple[SuiteRequest, ...]:
    """The requests of ``suite`` whose length as served (``lengths``, one per request) is in ``band``."""
    return tuple(r for r, n in zip(suite.requests, lengths) if band[0] <= n <= band[1])


def synthetic_band_requests(tokenizer, measure, band: tuple[int, int], count: int, seed: int,
                            overhead: int) -> tuple[SuiteRequest, ...]:
    """``count`` length-exact random prompts whose length as served (``measure(request)``) is in
    ``band``; ``overhead`` is what serving adds to a raw prompt's tokens (chat template, BOS)."""
    from specgauge.suites.random_prompts import random_suite

    lo, hi = max(1, band[0] - overhead), band[1] - overhead
    if hi < 1:
        raise UserError(f"--context-lengths {band_label(band)}: the server adds {overhead} tokens to every prompt "
                        f"(chat template), so no prompt is {band[1]} tokens or shorter; start the band higher")
    num_special = len(tokenizer.encode("", add_special_tokens=True).ids)
    middle = round((lo + hi) / 2)
    # random_suite draws from [floor(L(1-r)), ceil(L(1+r))]: the widest r that keeps it inside
    # [lo, hi] (less a rounding margin, so a band from 1 never asks for a prompt of 0 tokens).
    ratio = max(0.0, min((middle - lo) / middle, (hi - middle) / middle, 0.999) - 1e-9)
    kept: list[SuiteRequest] = []
    for attempt in range(SYNTHETIC_ATTEMPTS):
        drawn = random_suite(tokenizer, num_prompts=max(count - len(kept), 1) + 4, input_len=middle + num_special,
                             output_len=1, range_ratio=ratio, seed=seed + 7919 * attempt, name="band")
        kept += [r for r in drawn.requests if band[0] <= measure(r) <= band[1]]
        if len(kept) >= count:
            return tuple(kept[:count])
    raise UserError(f"--context-lengths {band_label(band)}: could build only {len(kept)} of {count} prompts of that "
                    f"length with the server's tokenizer; widen the band")


def build_band_suites(suite_name: str, bands: tuple[tuple[int, int], ...], *, tokenizer_path: str, api: str,
                      min_prompts: int, synthetic_count: int, seed: int, max_tokens: int,
                      work_dir: Path) -> tuple[BandSuite, ...]:
    """One derived suite per band (module doc), written under ``work_dir``."""
    from specgauge.client.prompts import chat_template
    from specgauge.client.tokens import load_tokenizer
    from specgauge.load.workload import prompt_tokens_as_served, write_derived_suite
    from specgauge.suites.registry import load_suite

    suite = load_suite(suite_name)
    tokenizer = load_tokenizer(tokenizer_path)
    templated = chat_template(tokenizer_path) is not None

    def measure(request: SuiteRequest) -> int:
        return prompt_tokens_as_served(tokenizer, tokenizer_path, request, api, templated)

    lengths = [measure(r) for r in suite.requests]
    probe = SuiteRequest(prompt="hello", max_tokens=1)
    overhead = measure(probe) - len(tokenizer.encode("hello", add_special_tokens=False).ids)
    result = []
    for band in bands:
        chosen = suite_band_requests(suite, lengths, band)
        if len(chosen) >= min_prompts:
            source = f"suite {suite.name}"
        else:
            chosen = synthetic_band_requests(tokenizer, measure, band, synthetic_count, seed, overhead)
            source = "synthetic"
        requests = tuple(r.model_copy(update={"max_tokens": max_tokens}) for r in chosen)
        derived = Suite(name=f"{suite.name if source != 'synthetic' else 'random'}-ctx{band[0]}-{band[1]}",
                        requests=requests,
                        description=f"prompts of {band_label(band)} tokens as served ({source}) for --context-lengths")
        result.append(BandSuite(band, write_derived_suite(derived, work_dir), source, len(requests)))
    return tuple(result)

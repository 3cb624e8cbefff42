"""Drafter and benchmark health: warnings that say when a speedup should not be trusted.

- acceptance length ≈ 1: the drafter is wrong or mismatched (nothing is accepted);
- tokens per chunk disagree with the server's acceptance figure (one chunk should be one verify
  step; a server that batches several steps per chunk, or a miscount, makes one figure wrong);
- acceptance falls with output position (later tokens are accepted less: long answers will gain
  less than short benchmarks show);
- degenerate output (a high share of repeated n-grams, or most requests running into
  ``max_tokens`` while repeating): looping text is easy to draft and inflates acceptance;
- random-token prompts (``--dataset-name random``, a tune band's synthetic prompts): acceptance on
  them is not that of text (vllm #52536, #33497), so the speedup says little about a workload.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from specgauge.analysis import definitions
from specgauge.client.records import RequestRecord, TokenCountSource
from specgauge.analysis.results import HealthWarning, HistogramBin, PositionBin

ACCEPT_LENGTH_ONE = 1.1          # mean acceptance length below this: nothing is being accepted
CHUNK_DISAGREEMENT = 0.25        # relative gap between tokens per chunk and the server's figure
POSITION_FALL = 0.8              # last third of positions below this share of the first third
REPEATED_NGRAM_SHARE = 0.5       # a request is degenerate above this share of repeated 4-grams
DEGENERATE_REQUEST_SHARE = 0.2   # warn when more than this share of requests is degenerate
NGRAM = 4
POSITION_BIN = 16


def is_degenerate(text: str) -> bool:
    """Whether an output repeats itself past ``REPEATED_NGRAM_SHARE`` of its 4-grams."""
    return repeated_ngram_share(text) > REPEATED_NGRAM_SHARE


def repeated_ngram_share(text: str, n: int = NGRAM) -> float:
    """Share of the word n-grams of ``text`` that occurred earlier in it (0 for short texts)."""
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    if len(grams) < 2 * n:
        return 0.0
    counts = Counter(grams)
    return sum(c - 1 for c in counts.values()) / len(grams)


COUNTED_SOURCES = (TokenCountSource.SERVER, TokenCountSource.TOKENIZER)   # real per-chunk counts


def counted(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The successful records whose tokens per chunk were counted (server or tokenizer), not spread
    evenly or assumed: only they say how many tokens each verify step produced."""
    return [r for r in records if r.ok and r.token_count_source in COUNTED_SOURCES]


def chunk_histogram(records: Sequence[RequestRecord]) -> tuple[HistogramBin, ...]:
    """How many chunks carried 1, 2, 3, ... tokens, over the counted records (the first chunk of
    each request excluded: it ends the prefill and carries one token whatever the speculation)."""
    counts = Counter(t for r in counted(records) for t in r.chunk_tokens[1:])
    return tuple(HistogramBin(tokens=t, count=c) for t, c in sorted(counts.items()))


def acceptance_by_position(records: Sequence[RequestRecord], bin_tokens: int = POSITION_BIN) -> tuple[PositionBin, ...]:
    """Mean tokens per chunk by output position (bins of ``bin_tokens``): acceptance vs position.

    A chunk is placed in the bin of the output position of its first token. Counted records only.
    """
    sums: dict[int, int] = {}
    chunks: dict[int, int] = {}
    for record in counted(records):
        position = record.chunk_tokens[0] if record.chunk_tokens else 0
        for tokens in record.chunk_tokens[1:]:
            b = position // bin_tokens
            sums[b] = sums.get(b, 0) + tokens
            chunks[b] = chunks.get(b, 0) + 1
            position += tokens
    return tuple(PositionBin(start=b * bin_tokens, end=(b + 1) * bin_tokens, tokens_per_chunk=sums[b] / chunks[b],
                             chunks=chunks[b]) for b in sorted(chunks))


def mean_tokens_per_chunk(records: Sequence[RequestRecord]) -> float | None:
    """Tokens per chunk after the first chunk, over every successful request."""
    tokens = sum(sum(r.chunk_tokens[1:]) for r in records if r.ok)
    chunks = sum(max(0, len(r.chunk_tokens) - 1) for r in records if r.ok)
    return tokens / chunks if chunks else None


def mean_accept_length(records: Sequence[RequestRecord]) -> float | None:
    """Mean of the per-request acceptance lengths the server reported (None when it reported none)."""
    values = [v for r in records if r.ok and (v := definitions.accept_length(r)) is not None]
    return float(np.mean(values)) if values else None


def domain_acceptance_warnings(by_domain: dict[str, float | None]) -> tuple[HealthWarning, ...]:
    """``accept_length_one`` per domain: a domain whose acceptance (tokens per verify step) is below
    :data:`ACCEPT_LENGTH_ONE` alarms even when the mean over all domains looks healthy."""
    return tuple(HealthWarning(
        code="accept_length_one", domain=domain,
        message=f"{domain}: acceptance length is {value:.2f} (≈ 1): almost no draft token is accepted on this "
                f"domain; the drafter does not cover it (or does not match the target model)")
        for domain, value in by_domain.items() if value is not None and value < ACCEPT_LENGTH_ONE)


def health_warnings(speculative: Sequence[RequestRecord], baseline: Sequence[RequestRecord],
                    max_tokens: int | None, server_accept: float | None = None,
                    domains_checked: bool = False) -> tuple[HealthWarning, ...]:
    """Every warning that applies to the two arms' records (all stages pooled).

    ``server_accept``: the speculative server's point-scoped acceptance length (vLLM counters),
    used when the requests carry none. ``domains_checked``: acceptance was checked per domain
    (:func:`domain_acceptance_warnings`), so the pooled ``accept_length_one`` check is skipped
    (one bad domain must alarm on its own, and a pooled mean cannot add to that).
    """
    warnings: list[HealthWarning] = []
    accept = mean_accept_length(speculative)
    if accept is None:
        accept = server_accept
    with_counts = counted(speculative)
    if accept is None and not with_counts:
        warnings.append(HealthWarning(
            code="no_acceptance_figures",
            message="the speculative server reported no acceptance length and no per-chunk token counts; "
                    "acceptance cannot be checked"))
    estimate = accept if accept is not None else (mean_tokens_per_chunk(with_counts) if with_counts else None)
    if estimate is not None and estimate < ACCEPT_LENGTH_ONE and not domains_checked:
        warnings.append(HealthWarning(
            code="accept_length_one",
            message=f"acceptance length is {estimate:.2f} (≈ 1): almost no draft token is accepted; "
                    f"the drafter is probably wrong or does not match the target model"))
    if accept is not None and with_counts and (chunked := mean_tokens_per_chunk(with_counts)) is not None:
        if abs(chunked - accept) / accept > CHUNK_DISAGREEMENT:
            warnings.append(HealthWarning(
                code="chunks_disagree_with_server",
                message=f"tokens per streamed chunk ({chunked:.2f}) disagree with the server's acceptance "
                        f"length ({accept:.2f}): the server may send several verify steps per chunk "
                        f"(stream interval) or count differently"))
    bins = acceptance_by_position(with_counts)
    if len(bins) >= 3:
        third = max(1, len(bins) // 3)
        first = _weighted(bins[:third])
        last = _weighted(bins[-third:])
        if first > 1.0 and last < POSITION_FALL * first:
            warnings.append(HealthWarning(
                code="acceptance_falls_with_position",
                message=f"acceptance falls with output position: {first:.2f} tokens per step in the first "
                        f"{bins[third - 1].end} tokens, {last:.2f} from token {bins[-third].start}; long answers "
                        f"will gain less than this benchmark shows"))
    for name, records in (("speculative", speculative), ("baseline", baseline)):
        ok = [r for r in records if r.ok]
        if not ok:
            continue
        degenerate = [r for r in ok if is_degenerate(r.output_text)]
        if len(degenerate) / len(ok) > DEGENERATE_REQUEST_SHARE:
            at_limit = sum(1 for r in degenerate if r.finish_reason == "length"
                           or (max_tokens is not None and definitions.output_token_count(r) >= max_tokens))
            warnings.append(HealthWarning(
                code="degenerate_output",
                message=f"{len(degenerate)} of {len(ok)} {name} outputs repeat themselves (over "
                        f"{REPEATED_NGRAM_SHARE:.0%} repeated {NGRAM}-grams; {at_limit} ran into max_tokens): "
                        f"looping text is easy to draft and inflates acceptance"))
        failed = len(records) - len(ok)
        if failed:
            warnings.append(HealthWarning(code="errors", message=f"{failed} of {len(records)} {name} requests failed "
                                                                 f"(left out of every figure)"))
    return tuple(warnings)


DRIFT_WARNING = 0.10   # the same arm, measured twice alike, differing by more than this
OUTLYING_ROUND = 0.25  # one round of an arm's point this far from its other round: an outlying speed


def drift_warnings(repeats: Sequence[tuple[str, float | None, float | None, str]]) -> tuple[HealthWarning, ...]:
    """Warnings for measurements of the same arm, suite and concurrency taken at two times.

    ``repeats``: ``(arm, tok_s first, tok_s second, what was repeated)``. A difference above
    :data:`DRIFT_WARNING` means the machine's speed changed during the comparison; the intervals
    include the measured drift (analysis/drift.py), which is why they are wide.
    """
    warnings = []
    for arm, first, second, what in repeats:
        if not first or not second:
            continue
        drift = abs(first - second) / ((first + second) / 2)
        if drift > DRIFT_WARNING:
            warnings.append(HealthWarning(
                code="machine_drift",
                message=f"the {arm} arm measured twice alike ({what}) gave {first:,.1f} and {second:,.1f} tok/s "
                        f"({drift:.0%} apart): the machine's speed drifted during the comparison; the intervals "
                        f"include that drift, so differences between the arms smaller than it are not claimed (use "
                        f"a quieter machine, or --rounds 2 or more)"))
    return tuple(warnings)


def outlying_round_warnings(rounds: Sequence[tuple[str, str, int, float | None, float | None, int | None]]
                            ) -> tuple[HealthWarning, ...]:
    """Warnings for points where one arm's speed in consecutive rounds differs by more than
    :data:`OUTLYING_ROUND` (relative to their mean), on the same prompts.

    ``rounds``: ``(point label, arm, first round number, tok/s in that round, tok/s in the next,
    the sweep point's concurrency or None)``; the warning carries the arm and concurrency so the
    report can flag the point.
    A launched arm runs alone for a whole round, so a slow minute of the machine lands on one arm's
    point only; the flag names the point so its ratio is read with care (the interval includes the
    drift all the same)."""
    warnings = []
    for point, arm, first_round, first, second, concurrency in rounds:
        if not first or not second:
            continue
        apart = abs(first - second) / ((first + second) / 2)
        if apart > OUTLYING_ROUND:
            warnings.append(HealthWarning(
                code="outlying_round", arm=arm, concurrency=concurrency,
                message=f"{point}: the {arm} arm ran at {first:,.1f} tok/s in round {first_round + 1} and "
                        f"{second:,.1f} in round {first_round + 2} ({apart:.0%} apart, over {OUTLYING_ROUND:.0%}) "
                        f"on the "
                        f"same prompts: one round was measured at an outlying speed, so this point's ratio is "
                        f"uncertain beyond its requests (rerun on a quieter machine or with more --rounds)"))
    return tuple(warnings)


def random_prompts_message(random_requests: int, requests: int, where: str) -> str | None:
    """The warning's sentence when ``random_requests`` of the ``requests`` prompts ``where`` names
    are random tokens (``SuiteRequest.source == "random"``); None when none are."""
    if random_requests == 0:
        return None
    share = "all" if random_requests == requests else f"{random_requests} of {requests}"
    return (f"{share} prompts of {where} are random tokens: acceptance on random tokens is not that of text "
            f"(drafters are trained on text; vllm #52536, #33497), so this speedup says little about a real "
            f"workload: measure on prompts that represent it (a suite, or --dataset-name sharegpt|custom)")


def random_prompt_warnings(suites: Sequence) -> tuple[HealthWarning, ...]:
    """A ``random_prompts`` warning when any prompt of ``suites`` (the comparison's, one per stage,
    repeats counted once) is random tokens."""
    unique = {suite.content_hash: suite for suite in suites}.values()
    requests = [r for suite in unique for r in suite.requests]
    message = random_prompts_message(sum(r.source == "random" for r in requests), len(requests),
                                     "this comparison")
    return () if message is None else (HealthWarning(code="random_prompts", message=message),)


def temperature_warnings(settings) -> tuple[HealthWarning, ...]:
    """``temperature_not_measured``: ``--temperatures`` left out ``--temperature``, the one the sweep
    and the recommendation ran at, so the per-domain table does not show it (``settings``:
    :class:`~specgauge.analysis.results.CompareSettings`)."""
    if not settings.temperatures or settings.temperature in settings.temperatures:
        return ()
    listed = ", ".join(f"{t:g}" for t in settings.temperatures)
    return (HealthWarning(code="temperature_not_measured", message=(
        f"the sweep and the recommendation ran at temperature {settings.temperature:g} (--temperature), which is "
        f"not among the single-stream temperatures ({listed}): the per-domain speedups were not measured at the "
        f"temperature the recommendation holds for; give --temperature as the one you serve at")),)


def _weighted(bins: Sequence[PositionBin]) -> float:
    chunks = sum(b.chunks for b in bins)
    return sum(b.tokens_per_chunk * b.chunks for b in bins) / chunks

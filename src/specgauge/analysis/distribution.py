"""Distributional losslessness above temperature 0: do the two arms sample from one distribution?

At temperature 0 losslessness is text equality (``analysis/lossless.py``). Above 0 every output
is a draw, so ``compare --samples-per-prompt N`` sends each of a few prompts N times to each arm,
every request with its own seed, and this module tests whether the two arms' samples could come
from the same distribution.

What is compared. Each sample's first ``M`` tokens (the output re-encoded with the run's
tokenizer, else its characters; a sample that ended early has an "end" token at the later
positions). Speculative decoding is lossless when the whole generated sequence has the target's
distribution, so the distribution of any fixed function of the sequence must be the same in both
arms; the test is valid whatever the tokenizer (it only changes the power). At each position ``t``
the next-token counts are compared *within strata of the previous token* (the samples whose token
at ``t - 1`` is the same; position 0 is one stratum): a wrong sampler shifts the probability of the
drafted token given its prefix, and comparing next tokens after the same previous token removes
most of the variation of the prefixes, which measured about 2-5x fewer samples for the same
detection than comparing each position's marginal counts (the benchmark's fault, below). Tokens
seen fewer than ``MIN_TOKEN_COUNT`` times in a stratum (both arms together) are merged into one
"other" category, and strata with fewer than ``MIN_STRATUM`` samples are left out; both rules look
only at pooled counts, so they do not depend on which arm a sample came from.

The test: two statistics, each summed over prompts, positions and strata, and one decision.

- *Omnibus*: Pearson's chi-square of each stratum's 2 x K table (arm x next token): any change of
  the next-token distribution raises it.
- *Drafted-token shift* (the Cochran-Mantel-Haenszel idea): in each stratum, the speculative arm's
  count of the stratum's most frequent next token (pooled over both arms) minus its expectation
  under no difference, summed with its sign; the statistic is the absolute sum. A wrong
  speculative sampler accepts drafts too often (or too rarely), and drafts are mostly the target's
  likeliest tokens, so it moves that share the same way at every drafted position; summing signed
  deviations accumulates such a shift where squares would drown it in the noise of all the other
  tokens (on the benchmark's fault it needed about half the samples of the omnibus statistic for the
  same p-values).

Their null distributions come from permuting the arm labels of the samples within each prompt
(``PERMUTATIONS`` times; the same permutation for every position of a sample, so the dependence
between positions is kept): a permutation test is exact for any sample size, where the asymptotic
chi-square is not for the sparse tables of sampled text, and it needs no assumption about how the
positions depend on each other. ``p_value`` = min(1, 2 x the smaller of the two permutation
p-values) (Bonferroni over the two statistics), one test for the whole comparison (``differs`` when
it is below ``ALPHA`` = 0.05). Which positions differ is said with multiple-testing control: each
position's own p-value (the same two statistics over that position alone, the same permutations,
the same Bonferroni factor), Holm-adjusted across the positions (valid under any dependence
between them); the examples are the positions whose adjusted p-value is below ``ALPHA`` (else the
smallest), each with the token whose share differs most between the arms. scipy's
``permutation_test`` permutes without strata (it would mix samples of different prompts), so the
permutation is done here with numpy; Holm's procedure is four lines.

Power, shown and stated. ``min_detectable_shift`` is the change in one token's probability, at one
position of one prompt, that a two-sided two-proportion test at the Bonferroni level ALPHA / (prompts
x positions) detects with 80% power at the least favourable probability (1/2) with N samples per
arm: (z(1 - ALPHA / (2 m)) + z(0.8)) x sqrt(2 x 0.25 / N). It is a conservative, closed-form
statement of what one cell alone would reveal; the summed statistic usually detects smaller
shifts spread over positions. The measured power is the benchmark's:
``benchmarks/distribution_check.py`` repeats the comparison against an engine with a wrong sampler
(``specgauge serve --testing-fault accept-bias=1.5``) and against a correct one, and prints the
detection and false-positive rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable, Sequence

import numpy as np

from specgauge.analysis.results import DistributionCheck, DistributionExample

ALPHA = 0.05
POWER = 0.8
PERMUTATIONS = 1999
MIN_TOKEN_COUNT = 5      # rarer next tokens (both arms, one stratum) are merged into "other"
MIN_STRATUM = 10         # fewer samples after one previous token: the stratum is left out
END = -1                 # the token of a position past a sample's end
OTHER = -2               # the merged rare tokens


@dataclass(frozen=True)
class PromptSamples:
    """One prompt's samples in both arms: each sample's first tokens (ids; ``END`` past its end)."""

    prompt_index: int
    baseline: tuple[tuple[int, ...], ...]
    speculative: tuple[tuple[int, ...], ...]


def padded(samples: Sequence[Sequence[int]], positions: int) -> np.ndarray:
    """(n, positions) token ids: each sample cut to ``positions``, ``END`` after its last token."""
    out = np.full((len(samples), positions), END, dtype=np.int64)
    for row, sample in enumerate(samples):
        kept = list(sample)[:positions]
        out[row, :len(kept)] = kept
    return out


def _stratum_statistics(tokens: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson's chi-square of the arm x token table of one stratum, and the speculative arm's
    count of the stratum's most frequent token less its expectation, per label row: ``tokens``
    (r,) the stratum's next tokens, ``labels`` (P, r) True where a sample is the speculative arm's.
    Returns two (P,) arrays."""
    values, index = np.unique(tokens, return_inverse=True)
    counts = np.bincount(index)
    modal = (index == counts.argmax()).astype(float)   # (r,) the most frequent token, by pooled counts
    index = np.where(counts[index] >= MIN_TOKEN_COUNT, index, len(values))   # rare → one "other" column
    onehot = np.eye(len(values) + 1)[index]               # (r, K)
    onehot = onehot[:, onehot.sum(axis=0) > 0]            # an empty "other" column adds nothing
    column = onehot.sum(axis=0)                           # (K,)
    rows = len(tokens)
    spec = labels.astype(float)                           # (P, r)
    spec_total = spec.sum(axis=1, keepdims=True)          # (P, 1)
    observed_spec = spec @ onehot                         # (P, K)
    observed_base = column - observed_spec                # (P, K)
    expected_spec = spec_total * column / rows            # (P, K)
    expected_base = (rows - spec_total) * column / rows
    with np.errstate(divide="ignore", invalid="ignore"):   # a permutation with one arm absent: 0/0
        terms = ((observed_spec - expected_spec) ** 2 / expected_spec
                 + (observed_base - expected_base) ** 2 / expected_base)
    shift = spec @ modal - spec_total[:, 0] * modal.sum() / rows   # (P,)
    return np.nan_to_num(terms, nan=0.0, posinf=0.0).sum(axis=1), shift


def position_statistics(tokens: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two (P, positions) arrays: each position's chi-square and signed modal-token shift, summed
    over its previous-token strata, for each label row. ``tokens`` (n, positions), ``labels`` (P, n)."""
    chi_square = np.zeros((labels.shape[0], tokens.shape[1]))
    shift = np.zeros_like(chi_square)
    for position in range(tokens.shape[1]):
        previous = tokens[:, position - 1] if position > 0 else np.zeros(len(tokens), dtype=np.int64)
        for value in np.unique(previous):
            rows = previous == value
            if rows.sum() >= MIN_STRATUM:
                stratum_chi, stratum_shift = _stratum_statistics(tokens[rows, position], labels[:, rows])
                chi_square[:, position] += stratum_chi
                shift[:, position] += stratum_shift
    return chi_square, shift


def permutation_p_value(statistic: np.ndarray) -> float:
    """Row 0 observed, the rest permuted: the share of rows at least as large (the observed counted)."""
    return float((1 + (statistic[1:] >= statistic[0]).sum()) / len(statistic))


def combined_p_value(chi_square: np.ndarray, shift: np.ndarray) -> float:
    """min(1, 2 x the smaller permutation p-value) of the omnibus and the absolute shift statistic."""
    return min(1.0, 2 * min(permutation_p_value(chi_square), permutation_p_value(np.abs(shift))))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control under any dependence)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [1.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def min_detectable_shift(samples_per_arm: int, cells: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The module docstring's closed form: the shift in one token's probability in one of ``cells``
    (prompt, position) cells detected with ``power`` by a two-proportion test at alpha / cells."""
    normal = NormalDist()
    z = normal.inv_cdf(1 - alpha / (2 * max(1, cells))) + normal.inv_cdf(power)
    return z * math.sqrt(0.5 / max(1, samples_per_arm))


def _examples(prompts: Sequence[tuple[PromptSamples, np.ndarray, np.ndarray]], positions: Sequence[int],
              adjusted: Sequence[float], decode: Callable[[int], str]) -> tuple[DistributionExample, ...]:
    """Per named position and prompt, the token whose share differs most between the arms."""
    examples = []
    for position in positions:
        for samples, base, spec in prompts:
            base_tokens, spec_tokens = base[:, position], spec[:, position]
            candidates = np.unique(np.concatenate([base_tokens, spec_tokens]))
            shares = [(float((spec_tokens == t).mean()) - float((base_tokens == t).mean()), int(t)) for t in candidates]
            shift, token = max(shares, key=lambda item: abs(item[0]))
            examples.append(DistributionExample(
                prompt_index=samples.prompt_index, position=position,
                token="<end>" if token == END else decode(token), token_id=None if token == END else token,
                baseline_share=float((base_tokens == token).mean()),
                speculative_share=float((spec_tokens == token).mean()), p_value=adjusted[position]))
    return tuple(examples)


def distribution_check(prompts: Sequence[PromptSamples], positions: int, *, seed: int = 0,
                       decode: Callable[[int], str] = str, permutations: int = PERMUTATIONS,
                       alpha: float = ALPHA, temperature: float | None = None,
                       tokens_from: str = "") -> DistributionCheck:
    """The module docstring's test over ``prompts`` at their first ``positions`` tokens.
    ``decode``: a token id as text (for the examples); ``tokens_from``: what a token is (said in
    the result)."""
    usable = [p for p in prompts if p.baseline and p.speculative]
    if not usable:
        return DistributionCheck(checked=False, reason="no prompt has samples in both arms")
    rng = np.random.default_rng(seed)
    chi_square = np.zeros((permutations + 1, positions))
    shift = np.zeros_like(chi_square)
    arrays = []
    for samples in usable:
        base, spec = padded(samples.baseline, positions), padded(samples.speculative, positions)
        arrays.append((samples, base, spec))
        observed = np.zeros(len(base) + len(spec), dtype=bool)
        observed[len(base):] = True
        labels = np.vstack([observed] + [rng.permutation(observed) for _ in range(permutations)])  # (P+1, n)
        prompt_chi, prompt_shift = position_statistics(np.vstack([base, spec]), labels)
        chi_square += prompt_chi
        shift += prompt_shift
    p_value = combined_p_value(chi_square.sum(axis=1), shift.sum(axis=1))
    adjusted = holm([combined_p_value(chi_square[:, t], shift[:, t]) for t in range(positions)])
    differs = p_value < alpha
    named = [t for t in range(positions) if adjusted[t] < alpha]
    if differs and not named:
        named = [min(range(positions), key=lambda t: adjusted[t])]
    per_arm = min(min(len(p.baseline), len(p.speculative)) for p in usable)
    return DistributionCheck(
        checked=True, differs=differs, p_value=p_value, alpha=alpha,
        samples=sum(len(p.baseline) + len(p.speculative) for p in usable), samples_per_prompt=per_arm,
        prompts=len(usable), positions_tested=positions,
        min_detectable_shift=min_detectable_shift(per_arm, len(usable) * positions, alpha),
        position_p_values=tuple(adjusted), temperature=temperature, tokens=tokens_from,
        examples=_examples(arrays, named, adjusted, decode) if differs else ())

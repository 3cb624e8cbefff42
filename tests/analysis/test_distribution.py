"""The distribution check's statistics (analysis/distribution.py) on samples drawn here from known
distributions: the same distribution passes, a shifted one is flagged with the position and token
that moved; Holm's adjustment and the stated detectable shift."""

import numpy as np
import pytest

from specgauge.analysis.distribution import (END, PromptSamples, distribution_check, holm, min_detectable_shift,
                                             padded)

POSITIONS = 4


def _draw(rng: np.random.Generator, n: int, boost: float = 0.0) -> tuple[tuple[int, ...], ...]:
    """``n`` sequences of 4 tokens: token 0 from {10, 11, 12}; each later token 20 + the previous
    token's parity with probability 0.5 (+ ``boost`` at position 2: a sampler that favours it), else
    30 + rng.integers(3)."""
    samples = []
    for _ in range(n):
        tokens = [int(rng.choice([10, 11, 12]))]
        for position in range(1, POSITIONS):
            favoured = 20 + tokens[-1] % 2
            chance = 0.5 + (boost if position == 2 else 0.0)
            tokens.append(favoured if rng.random() < chance else 30 + int(rng.integers(3)))
        samples.append(tuple(tokens))
    return tuple(samples)


def _check(boost: float, seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    prompts = [PromptSamples(i, _draw(rng, n), _draw(rng, n, boost)) for i in range(2)]
    return distribution_check(prompts, POSITIONS, seed=seed, permutations=499, temperature=1.0,
                              decode=lambda token: f"t{token}", tokens_from="test tokens")


def test_samples_of_one_distribution_pass():
    check = _check(0.0, seed=3)
    assert check.checked and check.differs is False and check.p_value > 0.05
    assert check.examples == () and check.samples == 2 * 2 * 300 and check.samples_per_prompt == 300
    assert check.positions_tested == POSITIONS and len(check.position_p_values) == POSITIONS


def test_a_sampler_that_favours_a_token_is_flagged_at_its_position():
    check = _check(0.2, seed=4)
    assert check.differs is True and check.p_value < 0.01
    assert {e.position for e in check.examples} == {2}   # the only position that moved
    example = check.examples[0]
    assert example.token in ("t20", "t21") and example.speculative_share > example.baseline_share
    assert check.position_p_values[2] < 0.05 and min(check.position_p_values[:2]) > 0.05


def test_false_positive_rate_is_near_alpha_over_seeds():
    flagged = sum(bool(_check(0.0, seed=seed, n=120).differs) for seed in range(20))
    assert flagged <= 4   # alpha 0.05: 1 expected of 20, 4 or more has probability < 2%


def test_no_samples_in_one_arm_is_not_checked():
    check = distribution_check([PromptSamples(0, ((1, 2),), ())], POSITIONS)
    assert check.checked is False and "both arms" in check.reason


def test_holm_and_padding_and_the_stated_shift():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert padded([(5,), (1, 2, 3)], 2).tolist() == [[5, END], [1, 2]]
    assert min_detectable_shift(400, 24) < min_detectable_shift(100, 24) < min_detectable_shift(100, 240)
    assert 0.1 < min_detectable_shift(200, 24) < 0.3

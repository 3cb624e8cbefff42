"""Rejection sampling reproduces the target's distribution (chi-square, small vocabulary, fixed
seed), for a chain and for a tree whose root has several children; and sampled requests run
through the speculative engine with the pool left whole."""

from collections import Counter

import pytest
import torch
from scipy.stats import chisquare
from spec_testkit import generate_all, make_spec_engine, write_random_head

from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.tree import DraftTree
from specgauge.engine.speculative.verify import accept_greedy, accept_sampled

SAMPLES = 6000
P_ROOT = torch.tensor([0.30, 0.05, 0.25, 0.10, 0.20, 0.10])
P_AFTER_FIRST = torch.tensor([0.10, 0.40, 0.05, 0.15, 0.05, 0.25])
P_AFTER_SECOND = torch.tensor([0.20, 0.20, 0.10, 0.10, 0.30, 0.10])


def chi2_pvalue(observed: Counter, probs: torch.Tensor) -> float:
    total = sum(observed.values())
    counts = [observed.get(i, 0) for i in range(len(probs))]
    expected = probs.double() / probs.double().sum() * total
    return chisquare(counts, expected.tolist()).pvalue


def test_chain_rejection_sampling_matches_the_target_distribution():
    tree = DraftTree.chain([2, 4])
    probs = torch.stack([P_ROOT, P_AFTER_FIRST, P_AFTER_SECOND])  # (1+M, V)
    generator = torch.Generator().manual_seed(1234)
    first, second = Counter(), Counter()
    accepted = 0
    for _ in range(SAMPLES):
        verdict = accept_sampled(tree, probs, generator)
        first[verdict.tokens[0]] += 1
        if verdict.tokens[0] == 2:  # the first draft accepted: the next token follows P_AFTER_FIRST
            second[verdict.tokens[1]] += 1
        accepted += verdict.num_accepted
        assert len(verdict.tokens) == verdict.num_accepted + 1
    assert chi2_pvalue(first, P_ROOT) > 1e-3
    assert chi2_pvalue(second, P_AFTER_FIRST) > 1e-3
    # acceptance of the first draft happens with probability P_ROOT[2]
    assert abs(first[2] / SAMPLES - float(P_ROOT[2])) < 0.03
    assert accepted > 0


def test_tree_rejection_sampling_matches_the_target_distribution():
    # root children 0 and 2 (both likely), 3 a child of 0
    tree = DraftTree((0, 2, 3), (-1, -1, 0))
    probs = torch.stack([P_ROOT, P_AFTER_FIRST, P_AFTER_FIRST, P_AFTER_SECOND])
    generator = torch.Generator().manual_seed(99)
    first = Counter(accept_sampled(tree, probs, generator).tokens[0] for _ in range(SAMPLES))
    assert chi2_pvalue(first, P_ROOT) > 1e-3


def test_recovered_token_comes_from_the_residual_and_bonus_after_a_full_accept():
    tree = DraftTree.chain([1, 2])
    # the target never emits the draft token 1: it is always rejected, recovered ~ P_ROOT without 1
    probs = torch.stack([torch.tensor([0.5, 0.0, 0.5, 0, 0, 0]), P_AFTER_FIRST, P_AFTER_SECOND])
    verdict = accept_sampled(tree, probs, torch.Generator().manual_seed(0))
    assert verdict.num_accepted == 0 and verdict.tokens[0] in (0, 2) and not verdict.bonus
    # greedy: every draft equal to the argmax is accepted and the argmax after the leaf is the bonus
    full = accept_greedy(DraftTree.chain([3, 5]), [3, 5, 1])
    assert full.tokens == (3, 5, 1) and full.bonus and full.num_accepted == 2


@pytest.fixture(scope="module")
def head_dir(tiny_model_dir, tmp_path_factory):
    return write_random_head(tmp_path_factory.mktemp("head"), tiny_model_dir)


@pytest.mark.parametrize("spec", [dict(algorithm="NGRAM", num_steps=3),
                                  dict(algorithm="EAGLE3", num_steps=2, eagle_topk=2, num_draft_tokens=4)])
def test_sampled_requests_through_the_speculative_engine(spec, tiny_model_dir, head_dir):
    if spec["algorithm"] == "EAGLE3":
        spec = dict(spec, draft_model_path=str(head_dir))
    engine = make_spec_engine(tiny_model_dir, max_running=8, max_tokens_per_step=256,
                              speculative=SpeculativeConfig(**spec))
    engine.start()
    try:
        prompts = [engine.tokenizer.encode(t) for t in ("abc abc abc", "def add(a, b):", "x y x y x y")]
        params = [SamplingParams(max_tokens=20, temperature=0.8, top_p=0.9, seed=i, ignore_eos=True) for i in range(3)]
        first, last = generate_all(engine, prompts, params)
        again, _ = generate_all(engine, prompts, params)
        vocab = engine.model.config.vocab_size
        assert all(len(t) == 20 and all(0 <= x < vocab for x in t) for t in first)
        assert first == again  # a seeded request's draws are reproducible under speculation
        assert sum(e.spec["spec_num_proposed_drafts"] for e in last) > 0
    finally:
        engine.stop()
    engine.blocks.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_the_accept_bias_fault_shifts_the_distribution_toward_the_draft():
    # --testing-fault accept-bias=F: the draft (token 2, p = 0.25) is accepted with 1.5 x 0.25, then
    # the rest comes from the residual: the first token is no longer distributed as P_ROOT
    tree = DraftTree.chain([2, 4])
    probs = torch.stack([P_ROOT, P_AFTER_FIRST, P_AFTER_SECOND])  # (1+M, V)
    generator = torch.Generator().manual_seed(1234)
    first = Counter(accept_sampled(tree, probs, generator, accept_bias=1.5).tokens[0] for _ in range(SAMPLES))
    assert abs(first[2] / SAMPLES - 1.5 * float(P_ROOT[2])) < 0.03
    assert chi2_pvalue(first, P_ROOT) < 1e-6

"""Losslessness first: greedy speculative output equals plain greedy output, token for token.

200+ prompts across domains, batch sizes 1 to 64, chain and tree, EAGLE-3 (random-weight
head: losslessness does not depend on its quality) and n-gram, with speculation switched off
and on mid-request (``disable_above`` as the batch drains, adaptive k); plus EOS, stop strings
and ``max_tokens`` landing inside an accepted run. Every engine's KV pool is checked whole.
"""

import pytest
from spec_testkit import domain_prompts, generate_all, make_spec_engine, write_random_head

from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig

from engine_testkit import make_engine, wait_idle

NUM_PROMPTS = 200
MAX_TOKENS = 10


@pytest.fixture(scope="module")
def head_dir(tiny_model_dir, tmp_path_factory):
    return write_random_head(tmp_path_factory.mktemp("head"), tiny_model_dir)


@pytest.fixture(scope="module")
def prompts(tiny_model_dir):
    engine = make_engine(tiny_model_dir)
    return [engine.tokenizer.encode(t) for t in domain_prompts(NUM_PROMPTS)]


def lengths(n):
    """Varied max_tokens so requests finish at different steps (the batch drains unevenly)."""
    return [SamplingParams(max_tokens=MAX_TOKENS - (i % 5), temperature=0.0, ignore_eos=True) for i in range(n)]


def run(model_dir, prompts, params, max_running=32, geometry=None, drafter=None, **spec):
    """Generate on a fresh engine (speculative when ``spec`` is given); check its pool; return
    tokens, last events and the engine's snapshot (``drafter`` replaces the configured one)."""
    geometry = geometry or dict(max_running=max_running, max_tokens_per_step=512)
    engine = make_spec_engine(model_dir, speculative=SpeculativeConfig(**spec) if spec else SpeculativeConfig(),
                              **geometry)
    if drafter is not None:
        engine.runner.drafter = drafter
    engine.start()
    try:
        tokens, last = generate_all(engine, prompts, params)
        wait_idle(engine)
        return tokens, last, dict(engine.snapshot(), preemptions=engine.scheduler.num_preemptions)
    finally:
        engine.stop()


@pytest.fixture(scope="module")
def reference(tiny_model_dir, prompts):
    tokens, _, _ = run(tiny_model_dir, prompts, lengths(len(prompts)))
    return tokens


CONFIGS = {
    "ngram-chain": dict(algorithm="NGRAM", num_steps=4),
    "eagle-chain": dict(algorithm="EAGLE3", num_steps=4),
    "eagle-tree": dict(algorithm="EAGLE3", num_steps=3, eagle_topk=3, num_draft_tokens=6),
    # starts with 32 running > 8: plain; speculation comes on mid-request as the batch drains
    "eagle-chain-switching": dict(algorithm="EAGLE3", num_steps=3, disable_above=8),
    "ngram-adaptive": dict(algorithm="NGRAM", num_steps=3, adaptive=True),
    # chains cut after an unsure draft token: ragged chain lengths inside one batch
    "eagle-chain-min-prob": dict(algorithm="EAGLE3", num_steps=4, min_draft_prob=0.02),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_greedy_speculative_equals_plain_at_batch_up_to_32(name, tiny_model_dir, head_dir, prompts, reference):
    spec = dict(CONFIGS[name])
    if spec["algorithm"] == "EAGLE3":
        spec["draft_model_path"] = str(head_dir)
    tokens, last, snapshot = run(tiny_model_dir, prompts, lengths(len(prompts)), **spec)
    mismatched = [i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b]
    assert not mismatched, f"{len(mismatched)} outputs differ from plain greedy, first {mismatched[:5]}"
    assert snapshot["spec_num_verifies"] > 0
    proposed = [e.spec["spec_num_proposed_drafts"] for e in last]
    assert sum(proposed) > 0
    if "disable_above" in spec:  # early requests ran entirely off; the tail speculated after switching on
        assert 0 in proposed and max(proposed) > 0
    if name.startswith("ngram"):  # the n-gram drafter gets real acceptance on repetitive text
        assert snapshot["avg_spec_accept_length"] > 1.1


@pytest.mark.parametrize("name", ["eagle-chain", "ngram-chain"])
def test_greedy_speculative_equals_plain_at_64_streams(name, tiny_model_dir, head_dir, prompts, reference):
    """64 requests in flight (decode attention over the pool at its widest batch; verify rows of
    64 sequences in one group): the same tokens as plain greedy."""
    spec = dict(CONFIGS[name])
    if spec["algorithm"] == "EAGLE3":
        spec["draft_model_path"] = str(head_dir)
    plain, _, _ = run(tiny_model_dir, prompts, lengths(len(prompts)), max_running=64)
    assert plain == reference, "plain greedy at 64 streams differs from plain greedy at 32"
    tokens, _, snapshot = run(tiny_model_dir, prompts, lengths(len(prompts)), max_running=64, **spec)
    mismatched = [i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b]
    assert not mismatched, f"{len(mismatched)} outputs differ from plain greedy, first {mismatched[:5]}"
    assert snapshot["spec_num_verifies"] > 0


def test_greedy_speculative_equals_plain_one_request_at_a_time(tiny_model_dir, head_dir, prompts, reference):
    sample = prompts[:6]
    for spec in (dict(algorithm="EAGLE3", num_steps=4), dict(algorithm="EAGLE3", num_steps=2, eagle_topk=2,
                                                                num_draft_tokens=4), dict(algorithm="NGRAM")):
        if spec["algorithm"] == "EAGLE3":
            spec["draft_model_path"] = str(head_dir)
        for i, prompt in enumerate(sample):
            tokens, _, _ = run(tiny_model_dir, [prompt], lengths(NUM_PROMPTS)[i:i + 1], max_running=1, **spec)
            assert tokens[0] == reference[i], (spec, i)


def test_eos_stop_strings_and_max_tokens_inside_an_accepted_run(tiny_model_dir, head_dir, prompts):
    """Finish conditions cut an accepted run exactly where plain decoding stops."""
    engine = make_engine(tiny_model_dir)
    texts = []
    long = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    sample = prompts[:40]
    plain_tokens, _, _ = run(tiny_model_dir, sample, [long] * len(sample))
    params = []
    for i, tokens in enumerate(plain_tokens):
        text = engine.tokenizer.decode(tokens)
        texts.append(text)
        if i % 3 == 0 and len(text) > 12:   # a stop string that occurs mid-output
            params.append(SamplingParams(max_tokens=24, temperature=0.0, stop=(text[8:11],)))
        elif i % 3 == 1:                    # a stop token id that occurs mid-output
            params.append(SamplingParams(max_tokens=24, temperature=0.0, stop_token_ids=frozenset({tokens[7]})))
        else:                               # EOS honoured, max_tokens odd
            params.append(SamplingParams(max_tokens=7 + i % 4, temperature=0.0))
    expected, expected_last, _ = run(tiny_model_dir, sample, params)
    for spec in (dict(algorithm="NGRAM", num_steps=5), dict(algorithm="EAGLE3", num_steps=4,
                                                             draft_model_path=str(head_dir))):
        got, got_last, _ = run(tiny_model_dir, sample, params, **spec)
        assert got == expected, spec
        assert [e.finish_reason for e in got_last] == [e.finish_reason for e in expected_last]
        assert [e.matched_stop for e in got_last] == [e.matched_stop for e in expected_last]
    assert {e.finish_reason for e in expected_last} >= {"stop", "length"}


@pytest.mark.parametrize("tree", [False, True])
def test_high_acceptance_compacts_the_tree_path_and_stays_lossless(tree, tiny_model_dir, prompts, reference):
    """With drafts that are mostly right, long accepted runs (and, for trees, accepted paths out
    of verify order) still give exactly the plain output."""
    from spec_testkit import OracleDrafter

    sample, params = prompts[:48], lengths(48)
    continuations = {tuple(p): ref for p, ref in zip(sample, reference[:48])}
    tokens, last, snapshot = run(tiny_model_dir, sample, params, max_running=16, algorithm="NGRAM", num_steps=4,
                                 drafter=OracleDrafter(continuations, depth=4, tree=tree))
    assert tokens == reference[:48]
    assert snapshot["avg_spec_accept_length"] > 1.8  # short outputs: the last steps draft less
    assert max(len(e.spec["spec_correct_drafts_histogram"]) for e in last) == 5  # some verify accepted all 4


@pytest.mark.parametrize("algorithm", ["EAGLE3", "NGRAM"])
def test_lossless_under_preemption_with_a_small_pool(algorithm, tiny_model_dir, head_dir, prompts):
    """Draft slots make the pool run short: preempted requests (target and draft state dropped,
    recomputed later) still give the plain output."""
    sample = prompts[:24]
    params = [SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)] * len(sample)
    geometry = dict(max_running=16, max_tokens_per_step=96, block_size=4, num_blocks=90, max_model_len=160)
    expected, _, _ = run(tiny_model_dir, sample, params, geometry=geometry)
    got, _, snapshot = run(tiny_model_dir, sample, params, geometry=geometry, algorithm=algorithm, num_steps=3,
                           draft_model_path=str(head_dir) if algorithm == "EAGLE3" else None)
    assert got == expected
    assert snapshot["preemptions"] > 0, "the test meant to exercise preemption"

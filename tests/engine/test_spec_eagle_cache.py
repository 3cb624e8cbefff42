"""The EAGLE-3 head's cached path (its own paged KV, rolled back by ``draft_len``) drafts exactly
what the head's whole-sequence forward (the training path) gives for the same sequence — also
after speculation was switched off for a while and the draft KV caught up."""

import pytest
import torch
from spec_testkit import domain_prompts, make_spec_engine, write_random_head

from specgauge.engine.models.eagle3 import load_eagle3, target_features
from specgauge.engine.models.llama import load_model
from specgauge.engine.core.sampling_params import SamplingParams
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.eagle3_drafter import CATCH_UP_PER_TOKEN_LEFT, EagleState


@pytest.fixture(scope="module")
def head_dir(tiny_model_dir, tmp_path_factory):
    return write_random_head(tmp_path_factory.mktemp("head"), tiny_model_dir, seed=1)


def reference_drafts(target, head, sequence: list[int]) -> tuple[int, int]:
    """First two chain drafts after ``sequence`` (its last token pending) from the whole-sequence path."""
    ids = torch.tensor([sequence])
    _, feats = target_features(target, ids[:, :-1], head.config.aux_layers)  # (1, N-1, 3H)
    positions = torch.arange(ids.shape[1] - 1)
    first = head.step(ids[:, 1:], head.fuse(feats), positions)
    d1 = int(head.draft_to_target(first.logits[0, -1].argmax()))
    tokens = ids[:, 1:].clone()
    tokens[0, -1] = d1  # the last row's second step reads the first draft
    second = head.step(tokens, first.features, positions + 1, base=first.kv)
    return d1, int(head.draft_to_target(second.logits[0, -1].argmax()))


def test_cached_drafts_equal_the_whole_sequence_head_across_an_off_period(tiny_model_dir, head_dir):
    # fp32, as the whole-sequence reference below runs (a bf16 target's features would differ)
    engine = make_spec_engine(tiny_model_dir, max_running=8, max_tokens_per_step=256, dtype="float32",
                              speculative=SpeculativeConfig(algorithm="EAGLE3", num_steps=3,
                                                            draft_model_path=str(head_dir)))
    drafter = engine.runner.drafter
    records = []
    propose = drafter.propose

    def recording(requests, ks):
        def cached():
            return sum(r.draft_state.draft_len for r in requests if isinstance(r.draft_state, EagleState))

        before = cached()
        proposal = propose(requests, ks)
        assert proposal.catch_up == cached() - before  # the pairs it ran, reported by value
        catch_ups.append(proposal.catch_up)
        for request, k, tree in zip(requests, ks, proposal.trees):
            if len(tree) >= 2:
                records.append((request.token_ids(0, request.num_tokens), tree.tokens[:2]))
            if len(tree):
                assert request.draft_state.draft_len == request.num_computed  # caught up
            else:
                partial.append(request.draft_state.num_pending)
        return proposal

    drafter.catch_up_budget = 40  # less than the backlogs after the off period: spread over steps
    partial = []
    catch_ups = []
    drafter.propose = recording
    params = SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)
    for i, text in enumerate(domain_prompts(6)):
        engine.submit(f"r{i}", engine.tokenizer.encode(text), params, lambda event: None)
    engine.drain_inbox(block=False)
    steps = 0
    while engine.scheduler.has_work:
        # off for steps 4..9: features pile up, the next catch-up covers them all
        engine.controller.disable_above = 0 if 4 <= steps < 10 else None
        engine.step()
        state = engine.snapshot()
        expected_mode = "plain" if 4 <= steps < 10 else "speculative"
        assert (state["speculative_mode"], state["speculative_num_draft_tokens"] > 0) == (expected_mode, expected_mode != "plain")
        steps += 1
        if steps == 10:
            pending = [r.draft_state.num_pending for r in engine.scheduler.running
                       if isinstance(r.draft_state, EagleState)]
            assert pending and min(pending) >= 6
    assert any(p > 0 for p in partial), "some request should have caught up over several steps"
    assert max(catch_ups) == 40  # a backlog after the off period, capped by the budget
    engine.blocks.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    target = load_model(tiny_model_dir)
    head = load_eagle3(head_dir, target=target)
    assert len(records) > 20
    mismatches = [(seq[-3:], got) for seq, got in records if tuple(reference_drafts(target, head, seq)) != got]
    assert not mismatches, mismatches[:3]


def test_one_stream_drafts_on_a_view_of_the_pool_as_the_whole_sequence_head_does(tiny_model_dir, head_dir):
    """One request alone keeps consecutive blocks (a rolled-back draft slot is handed out again),
    so its chain attends a view of the head's pool and writes its scratch K/V there: the drafts
    are still the whole-sequence head's."""
    from specgauge.engine.core.kv_cache import consecutive_from

    engine = make_spec_engine(tiny_model_dir, dtype="float32", speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=3, draft_model_path=str(head_dir)))
    drafter = engine.runner.drafter
    records, views = [], []
    propose = drafter.propose

    def recording(requests, ks):
        views.append(consecutive_from([drafter.blocks.table(r.request_id).blocks for r in requests]) is not None)
        proposal = propose(requests, ks)
        for request, tree in zip(requests, proposal.trees):
            if len(tree) >= 2:
                records.append((request.token_ids(0, request.num_tokens), tree.tokens[:2]))
        return proposal

    drafter.propose = recording
    text = domain_prompts(1)[0]
    engine.submit("alone", engine.tokenizer.encode(text), SamplingParams(max_tokens=40, temperature=0.0,
                                                                         ignore_eos=True), lambda event: None)
    engine.drain_inbox(block=False)
    while engine.scheduler.has_work:
        engine.step()
    assert views and all(views)
    target = load_model(tiny_model_dir)
    head = load_eagle3(head_dir, target=target)
    assert len(records) > 5
    assert all(tuple(reference_drafts(target, head, seq)) == got for seq, got in records)


def test_a_chain_stops_after_an_unsure_draft_token(tiny_model_dir, head_dir):
    engine = make_spec_engine(tiny_model_dir, speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=4, draft_model_path=str(head_dir), min_draft_prob=0.6))
    drafter = engine.runner.drafter
    sure, unsure = torch.tensor([0.0, 5.0, 0.0]), torch.tensor([1.0, 1.1, 1.0])  # max prob 0.99 vs 0.36
    logits = torch.stack([sure, unsure, sure])
    # rows are the live chains 0, 2, 3; the unsure one (chain 2) stops at this length, the others go on
    assert drafter.stop_unsure([4, 4, 4, 3], [0, 2, 3], logits, 2) == [4, 4, 2, 3]
    drafter.min_draft_prob = 0.0  # off: every chain keeps its k
    assert drafter.stop_unsure([4, 4], [0, 1], logits[:2], 1) == [4, 4]


def test_a_request_with_no_room_to_draft_counts_in_the_yield_of_k(tiny_model_dir, head_dir):
    """A request whose max_tokens leaves no room for drafts gives 1 token under any k, in every
    batch that drafts: the controller's yield counts it (0 drafts accepted), so that its tokens per
    request-step are what a drafting batch gives. Only a backlog not worth catching up after an
    off period (a cost of switching back on) is reported ineligible and left out."""
    engine = make_spec_engine(tiny_model_dir, max_running=4, max_tokens_per_step=256, dtype="float32",
                              speculative=SpeculativeConfig(algorithm="EAGLE3", num_steps=3,
                                                            draft_model_path=str(head_dir)))
    prompts = [engine.tokenizer.encode(text) for text in domain_prompts(2)]
    engine.submit("short", prompts[0], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True), lambda e: None)
    engine.submit("long", prompts[1], SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True), lambda e: None)
    engine.drain_inbox(block=False)
    engine.step()  # both prefill; each has 1 token
    observed, reports = [], []
    engine.controller.costs.add_yield = lambda k, proposed, accepted: observed.append((proposed, accepted))
    observe = engine.controller.observe
    engine.controller.observe = lambda report, seconds: (reports.append(report), observe(report, seconds))
    engine.step()  # "short" has 1 token left: it can draft nothing
    [report] = reports
    assert report.k > 0 and report.ineligible == set()
    assert report.verdicts["short"] == (0, 0) and report.verdicts["long"][0] > 0
    assert sorted(observed) == sorted(report.verdicts.values())
    while engine.scheduler.has_work:
        engine.step()
    engine.blocks.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_causal_mask_rows_from_the_table_and_past_it(tiny_model_dir, head_dir, monkeypatch):
    """A one-stream catch-up and chain read their mask rows as views of a table that grows on
    demand; past ``CAUSAL_TABLE_MAX`` the rows are made on the spot. Both are the causal mask:
    query position p sees keys 0..p."""
    from specgauge.engine.speculative import eagle3_drafter

    engine = make_spec_engine(tiny_model_dir, speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=3, draft_model_path=str(head_dir)))
    drafter = engine.runner.drafter

    def expected(first, count, keys):
        visible = torch.arange(keys).unsqueeze(0) <= torch.arange(first, first + count).unsqueeze(1)
        return torch.zeros(count, keys).masked_fill_(~visible, float("-inf"))

    monkeypatch.setattr(eagle3_drafter, "CAUSAL_TABLE_MAX", 96)
    for first, count, keys in ((0, 3, 16), (10, 4, 32), (70, 6, 80), (90, 6, 96), (93, 5, 112), (200, 2, 208)):
        assert torch.equal(drafter.causal_rows(first, count, keys), expected(first, count, keys)), (first, count, keys)
    assert drafter._causal.shape == (96, 96)  # grown to the cap, never past it


def test_a_long_prompt_is_caught_up_and_drafted_on_whatever_tokens_are_left(tiny_model_dir, head_dir):
    """A prompt far longer than its output (an agentic transcript: thousands of tokens in, a short
    tool call out) still drafts: its pairs are caught up over several steps within the budget, never
    skipped as a backlog not worth catching up (that rule is for tokens decoded while off)."""
    engine = make_spec_engine(tiny_model_dir, max_running=4, max_tokens_per_step=256, dtype="float32",
                              speculative=SpeculativeConfig(algorithm="EAGLE3", num_steps=3,
                                                            draft_model_path=str(head_dir)))
    drafter = engine.runner.drafter
    drafter.catch_up_budget = 64
    prompt = engine.tokenizer.encode(" ".join(domain_prompts(6)) * 3)[:600]
    max_tokens = 24
    assert len(prompt) > CATCH_UP_PER_TOKEN_LEFT * max_tokens and len(prompt) > 2 * drafter.catch_up_budget
    skipped, drafted = set(), []
    propose = drafter.propose

    def recording(requests, ks):
        proposal = propose(requests, ks)
        skipped.update(proposal.skipped)
        drafted.extend(len(tree) for tree in proposal.trees)
        return proposal

    drafter.propose = recording
    engine.submit("long", prompt, SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True),
                  lambda event: None)
    engine.drain_inbox(block=False)
    while engine.scheduler.has_work:
        engine.step()
    assert skipped == set() and any(drafted)  # some step drafted for it
    engine.blocks.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks

"""The scheduler without a model: a fake runner returns scripted tokens."""

import pytest

from specgauge.engine.core.block_manager import BlockManager
from specgauge.engine.core.sampling import SamplingParams
from specgauge.engine.core.scheduler import Request, Scheduler, SchedulerConfig, SeqOutput, Status

EOS = 0


def fake_run(batch, token=7):
    """Every sequence that reaches its end produces ``token``; KV of all new tokens is kept."""
    return [SeqOutput([token] if s.samples else [], s.num_new) for s in batch.seqs]


def request(rid, prompt_len, max_tokens=4, **params):
    return Request(rid, list(range(1, prompt_len + 1)), SamplingParams(max_tokens=max_tokens, temperature=0, **params),
                   eos_token_ids=frozenset({EOS}))


def run_to_end(scheduler, steps=1000, run=fake_run):
    finished = []
    for _ in range(steps):
        if not scheduler.has_work:
            break
        batch = scheduler.schedule()
        for update in scheduler.postprocess(batch, run(batch)):
            if update.finished:
                finished.append(update.request)
        scheduler.blocks.check_integrity()
    assert not scheduler.has_work
    return finished


def test_mixed_step_decodes_first_then_prefill_chunks_within_budget():
    sched = Scheduler(SchedulerConfig(max_running=4, max_tokens_per_step=10), BlockManager(64, 4))
    sched.add(request("a", 3))
    first = sched.schedule()
    assert [(s.request.request_id, s.start, s.num_new) for s in first.seqs] == [("a", 0, 3)]
    sched.postprocess(first, fake_run(first))
    sched.add(request("b", 25))
    step = sched.schedule()
    # a decodes one token; b gets the remaining 9 of the budget as its first prefill chunk
    assert [(s.request.request_id, s.num_new, s.samples) for s in step.seqs] == [("a", 1, True), ("b", 9, False)]
    sched.postprocess(step, fake_run(step))
    assert sched.requests["b"].num_computed == 9 and sched.requests["b"].output_ids == []
    finished = run_to_end(sched)
    assert {r.request_id for r in finished} == {"a", "b"}
    assert all(len(r.output_ids) == 4 and r.finish_reason == "length" for r in finished)
    assert sched.blocks.num_free_blocks == 64


def test_max_running_limits_admission():
    sched = Scheduler(SchedulerConfig(max_running=2, max_tokens_per_step=100), BlockManager(64, 4))
    for i in range(5):
        sched.add(request(f"r{i}", 2))
    batch = sched.schedule()
    assert len(batch.seqs) == 2 and len(sched.waiting) == 3
    sched.postprocess(batch, fake_run(batch))
    assert len(run_to_end(sched)) == 5


def test_num_active_counts_the_waiting_requests_the_next_step_may_admit():
    sched = Scheduler(SchedulerConfig(max_running=3, max_tokens_per_step=100), BlockManager(64, 4))
    for i in range(2):
        sched.add(request(f"r{i}", 2, max_tokens=1))
    batch = sched.schedule()
    sched.postprocess(batch, fake_run(batch))  # both finish at once (a closed loop's wave) ...
    for i in range(2, 6):
        sched.add(request(f"r{i}", 2))  # ... and their replacements arrive
    assert len(sched.running) == 0 and sched.num_active == 3  # no lull: what the next step will serve
    batch = sched.schedule()
    assert len(batch.seqs) == 3 == sched.num_active


def test_eos_and_stop_token_finish_with_stop():
    sched = Scheduler(SchedulerConfig(), BlockManager(16, 4))
    sched.add(request("eos", 2, max_tokens=10))
    finished = run_to_end(sched, run=lambda b: fake_run(b, token=EOS))
    assert finished[0].finish_reason == "stop" and finished[0].output_ids == [EOS]
    sched.add(request("ignore", 2, max_tokens=3, ignore_eos=True))
    finished = run_to_end(sched, run=lambda b: fake_run(b, token=EOS))
    assert finished[0].finish_reason == "length" and len(finished[0].output_ids) == 3
    sched.add(request("stopid", 2, max_tokens=10, stop_token_ids=frozenset({7})))
    assert run_to_end(sched)[0].matched_stop == 7


def test_preemption_when_blocks_run_out_then_recompute():
    # 6 blocks of 2 tokens: two requests of 3 prompt + 6 output tokens cannot both stay resident.
    sched = Scheduler(SchedulerConfig(max_running=2, max_tokens_per_step=32), BlockManager(6, 2))
    sched.add(request("a", 3, max_tokens=6))
    sched.add(request("b", 3, max_tokens=6))
    finished = run_to_end(sched)
    assert sched.num_preemptions >= 1
    assert sorted(r.request_id for r in finished) == ["a", "b"]
    assert all(len(r.output_ids) == 6 for r in finished)
    assert sched.blocks.num_free_blocks == 6


def test_a_decode_and_a_chunked_prefill_competing_for_a_small_pool_both_finish():
    # 'a' is admitted (its 8-token prompt fits), then 'b' decodes into the blocks 'a' still needs
    sched = Scheduler(SchedulerConfig(max_running=2, max_tokens_per_step=4), BlockManager(5, 2))
    sched.add(request("b", 1, max_tokens=6))
    batch = sched.schedule()
    sched.postprocess(batch, fake_run(batch))
    sched.add(request("a", 7, max_tokens=1))
    finished = run_to_end(sched, steps=200)
    assert sorted(r.request_id for r in finished) == ["a", "b"]
    assert all(r.finish_reason == "length" for r in finished)


def test_admission_waits_for_blocks_for_the_whole_prompt():
    sched = Scheduler(SchedulerConfig(max_running=4, max_tokens_per_step=4), BlockManager(4, 4))
    sched.add(request("big", 14, max_tokens=1))  # needs 4 blocks (14 prompt + 1)
    sched.add(request("next", 2))
    batch = sched.schedule()
    assert [s.request.request_id for s in batch.seqs] == ["big"]  # budget used; 'next' waits
    sched.postprocess(batch, fake_run(batch))
    assert sched.waiting[0].request_id == "next"
    run_to_end(sched)


def test_request_that_can_never_fit_ends_with_length_instead_of_waiting_forever():
    sched = Scheduler(SchedulerConfig(), BlockManager(2, 4))
    sched.add(request("huge", 8))  # 8 prompt + 1 > 2 blocks of 4
    sched.add(request("small", 2, max_tokens=2))
    batch = sched.schedule()
    updates = sched.postprocess(batch, fake_run(batch))
    assert [(u.request.request_id, u.finished) for u in updates][0] == ("huge", True)
    assert sched.requests.get("huge") is None
    finished = run_to_end(sched)
    assert [r.request_id for r in finished] == ["small"]


def test_abort_frees_blocks_at_once_even_mid_step():
    sched = Scheduler(SchedulerConfig(), BlockManager(16, 4))
    sched.add(request("a", 9, max_tokens=50))
    sched.add(request("w", 2))
    batch = sched.schedule()
    sched.abort("a")
    assert sched.blocks.num_tokens("a") == 0 and "a" not in sched.blocks.tables
    updates = sched.postprocess(batch, fake_run(batch))  # the step's result for 'a' is dropped
    assert all(u.request.request_id != "a" for u in updates)
    sched.abort("missing")
    assert sched.abort("w") is not None and not sched.has_work
    assert sched.blocks.num_free_blocks == 16
    sched.blocks.check_integrity()


def test_a_step_reserves_the_lookahead_it_is_given_and_admission_the_configured_one():
    """The draft slots of a step are an argument of ``schedule`` (the speculation controller's k
    of that step); admission reserves the configured most for a whole request."""
    sched = Scheduler(SchedulerConfig(lookahead=3), BlockManager(32, 4))
    sched.add(request("a", 4, max_tokens=8))
    batch = sched.schedule(lookahead=0)
    sched.postprocess(batch, fake_run(batch))
    batch = sched.schedule(lookahead=1)
    assert sched.blocks.num_tokens("a") == 5 + 1  # next token + 1 draft slot
    sched.postprocess(batch, fake_run(batch))
    assert sched.blocks.num_tokens("a") == sched.requests["a"].num_computed == 5  # the slot went back
    sched.schedule()
    assert sched.blocks.num_tokens("a") == 6 + 3  # no lookahead given: the configured one
    run_to_end(sched)


def test_ragged_multi_token_outputs_and_kv_rollback():
    """A speculative runner's shape of output: several tokens, fewer K/V kept than computed."""
    sched = Scheduler(SchedulerConfig(lookahead=3), BlockManager(32, 4))
    sched.add(request("a", 4, max_tokens=8))
    sched.add(request("b", 4, max_tokens=8))
    batch = sched.schedule()
    sched.postprocess(batch, fake_run(batch))  # prefill: one token each
    a, b = sched.requests["a"], sched.requests["b"]
    assert sched.blocks.num_tokens("a") == 4  # lookahead reservation returned after the step
    batch = sched.schedule()
    assert sched.blocks.num_tokens("a") == 5 + 3  # decode: next token + 3 draft slots reserved
    # 'a' accepted 2 drafts + bonus (KV kept: input token + 2 drafts), 'b' accepted none (bonus only)
    outputs = [SeqOutput([11, 12, 13], 3) if s.request is a else SeqOutput([21], 1) for s in batch.seqs]
    sched.postprocess(batch, outputs)
    assert a.output_ids == [7, 11, 12, 13] and a.num_computed == 7 and sched.blocks.num_tokens("a") == 7
    assert b.output_ids == [7, 21] and b.num_computed == 5
    sched.blocks.check_integrity()
    # max_tokens inside an accepted run cuts the run
    batch = sched.schedule()
    outputs = [SeqOutput([1, 2, 3, 4, 5], 4) if s.request is a else SeqOutput([22], 1) for s in batch.seqs]
    sched.postprocess(batch, outputs)
    assert a.status == Status.FINISHED and a.output_ids == [7, 11, 12, 13, 1, 2, 3, 4]
    assert "a" not in sched.blocks.tables
    run_to_end(sched)


def test_duplicate_request_id_rejected():
    sched = Scheduler(SchedulerConfig(), BlockManager(4, 4))
    sched.add(request("a", 1))
    with pytest.raises(ValueError):
        sched.add(request("a", 1))


def test_token_ids_span_prompt_and_output():
    r = request("r", 3)
    r.output_ids = [10, 11]
    assert r.token_ids(0, 5) == [1, 2, 3, 10, 11]
    assert r.token_ids(1, 2) == [2] and r.token_ids(3, 5) == [10, 11] and r.token_ids(2, 4) == [3, 10]

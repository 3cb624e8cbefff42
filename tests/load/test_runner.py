"""run_point against the scripted server: load modes, warm-up, resume skips, faults, counters."""

import pytest

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.errors import UserError
from specgauge.load.plan import PointSpec, prompt_order
from specgauge.load.runner import run_point
from specgauge.suites.model import Suite, SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer, VllmCounters

SUITE = Suite(name="t", requests=tuple(SuiteRequest(prompt=f"prompt number {i}", max_tokens=8) for i in range(5)))


def max_overlap(intervals):
    """Peak number of simultaneously open (start, end) intervals."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


async def test_closed_loop_holds_the_concurrency():
    script = Script(ttft_s=0.05, chunk_delay_s=0.01, num_chunks=4)
    seen = []
    with ScriptedServer(script) as server:
        endpoint = Endpoint(server.url, api="openai-completions")
        outcome = await run_point(endpoint, SUITE, PointSpec(mode="closed", concurrency=4, num_requests=16, seed=2),
                                  on_record=seen.append)
    records = outcome.records
    assert len(records) == 16 and seen == records and all(r.ok for r in records)
    assert sorted(r.request_index for r in records) == list(range(16))
    order = prompt_order(2, len(SUITE.requests), 16)
    assert all(r.prompt_index == order[r.request_index] for r in records)
    assert max_overlap([(r.t_send_ns, r.t_end_ns) for r in records]) == 4
    assert len(outcome.connect_ms) >= 4  # the pool was opened before the window
    assert outcome.model == "scripted-model"  # auto-detected from /v1/models
    assert outcome.window_start_ns <= min(r.t_send_ns for r in records)
    assert outcome.window_end_ns >= max(r.t_end_ns for r in records)
    assert len(outcome.send_lag_ms) == 16 and all(lag >= 0 for lag in outcome.send_lag_ms)


async def test_single_stream_with_warmup_and_resume_skips():
    with ScriptedServer(Script(num_chunks=3)) as server:
        endpoint = Endpoint(server.url, api="sglang")
        spec = PointSpec(mode="closed", concurrency=1, num_requests=6, warmup_requests=2)
        outcome = await run_point(endpoint, SUITE, spec, on_record=lambda r: None,
                                  skip_request_indices=frozenset({0, 3}))
    assert len(server.truth) == 2 + 4  # warm-up requests were sent but are not in the records
    assert outcome.warmup_records == 2
    assert [r.request_index for r in outcome.records] == [1, 2, 4, 5]  # sequential, skipped ones absent
    assert max_overlap([(r.t_send_ns, r.t_end_ns) for r in outcome.records]) == 1


async def test_open_loop_sends_on_schedule_under_a_cap():
    script = Script(ttft_s=0.2, num_chunks=2)
    with ScriptedServer(script) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        spec = PointSpec(mode="open", rate=100.0, num_requests=30, max_concurrency=5, seed=1)
        outcome = await run_point(endpoint, SUITE, spec, on_record=lambda r: None)
    records = outcome.records
    assert len(records) == 30 and all(r.ok for r in records)
    assert max_overlap([(r.t_send_ns, r.t_end_ns) for r in records]) <= 5
    # 30 requests of ~200 ms, 5 at a time: the cap, not the rate, sets the pace, and the lag shows it.
    assert max(outcome.send_lag_ms) > 500


async def test_open_loop_rate_without_cap():
    with ScriptedServer(Script(num_chunks=2)) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        spec = PointSpec(mode="open", rate=50.0, duration_s=1.0, seed=5)
        outcome = await run_point(endpoint, SUITE, spec, on_record=lambda r: None)
    sent = len(outcome.records)
    assert 20 <= sent <= 85  # Poisson(50) in one second, loose bound
    assert sorted(outcome.send_lag_ms)[len(outcome.send_lag_ms) // 2] < 20


async def test_duration_stops_a_closed_loop():
    with ScriptedServer(Script(ttft_s=0.05, num_chunks=2)) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        outcome = await run_point(endpoint, SUITE, PointSpec(mode="closed", concurrency=2, duration_s=0.5),
                                  on_record=lambda r: None)
    assert 6 <= len(outcome.records) <= 24
    assert (outcome.window_end_ns - outcome.window_start_ns) / 1e9 < 1.0


async def test_faults_are_recorded_and_the_run_goes_on():
    prompts = ["fine", "[[fault:http_error]]", "fine again", "[[fault:cut]]", "[[fault:malformed_json]]",
               "[[fault:stall]]"]
    suite = Suite(name="faulty", requests=tuple(SuiteRequest(prompt=p) for p in prompts))
    with ScriptedServer(Script(num_chunks=4)) as server:
        endpoint = Endpoint(server.url, api="openai-completions", model="m")
        outcome = await run_point(endpoint, suite, PointSpec(mode="closed", concurrency=2, num_requests=12),
                                  on_record=lambda r: None, timeouts=Timeouts(read_s=0.3))
    by_prompt = {}
    for record in outcome.records:
        by_prompt.setdefault(prompts[record.prompt_index], set()).add(
            record.error_class.value if record.error_class else "ok")
    assert by_prompt == {"fine": {"ok"}, "fine again": {"ok"}, "[[fault:http_error]]": {"http_5xx"},
                         "[[fault:cut]]": {"stream_cut"}, "[[fault:malformed_json]]": {"bad_json"},
                         "[[fault:stall]]": {"read_timeout"}}


async def test_vllm_counters_are_diffed_around_the_point():
    counters = VllmCounters(drafts=1000, draft_tokens=3000, accepted=900, per_position=[500, 300, 100],
                            drafts_per_request=10, draft_tokens_per_request=30, accepted_per_request=18,
                            accepted_per_position=(8, 6, 4))
    with ScriptedServer(Script(num_chunks=2), vllm=counters) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        outcome = await run_point(endpoint, SUITE, PointSpec(mode="closed", concurrency=2, num_requests=5),
                                  on_record=lambda r: None)
    spec = outcome.server_spec
    assert spec.scope == "point" and spec.source == "vllm_metrics"
    assert spec.num_drafts == 50 and spec.accept_length == pytest.approx(1 + 90 / 50)
    assert spec.accept_rate == pytest.approx(90 / 150)
    assert spec.per_position == pytest.approx([40 / 50, 30 / 50, 20 / 50])
    assert outcome.server_spec_before["vllm"]["num_drafts"] == 1000


async def test_missing_tokenizer_fails_before_any_request(tmp_path):
    with ScriptedServer(Script(num_chunks=2)) as server:
        endpoint = Endpoint(server.url, api="sglang", tokenizer_path=str(tmp_path / "nope.json"))
        with pytest.raises(UserError, match="tokenizer file not found"):
            await run_point(endpoint, SUITE, PointSpec(mode="closed", concurrency=1, num_requests=2),
                            on_record=lambda r: None)
    assert server.truth == []


async def test_on_record_failure_stops_the_point_with_that_error():
    def broken(record):
        raise RuntimeError("disk full")

    with ScriptedServer(Script(num_chunks=2)) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        with pytest.raises(RuntimeError, match="disk full"):
            await run_point(endpoint, SUITE, PointSpec(mode="closed", concurrency=2, num_requests=4),
                            on_record=broken)

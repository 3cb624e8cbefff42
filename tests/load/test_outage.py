"""The outage rule: connection-level failures are held back until an answer or a failed probe;
a server that stops answering stops the point (ServerDown) without burning the rest of the plan."""

from __future__ import annotations

import threading

import pytest

from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.load.outage import SUSPECT_AFTER, OutageGuard, ServerDown
from specgauge.load.plan import PointSpec
from specgauge.load.runner import run_point
from specgauge.client.endpoint import Endpoint
from specgauge.suites.model import Suite, SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer

SUITE = Suite(name="t", requests=tuple(SuiteRequest(prompt=f"prompt number {i}", max_tokens=8) for i in range(5)))


def record(index: int, error: ErrorClass | None = None, *, sent: int = 0, ended: int = 1) -> RequestRecord:
    made = RequestRecord(request_index=index, prompt_index=0, t_send_ns=sent)
    if error is not None:
        made.fail(error, error.value, ended)
    return made


def guard_with(answers: list[str | None]) -> tuple[OutageGuard, list[int]]:
    probes: list[int] = []

    async def probe() -> str | None:
        probes.append(1)
        return answers.pop(0)

    return OutageGuard("http://x", probe), probes


async def test_an_answer_releases_the_held_failures_in_order():
    guard, probes = guard_with([])
    assert guard.admit(record(0, ErrorClass.CONNECT_REFUSED)) == []
    assert guard.admit(record(1, ErrorClass.STREAM_CUT)) == []
    released = guard.admit(record(2, ErrorClass.HTTP_5XX, sent=5))  # an answer, even an error one
    assert [r.request_index for r in released] == [0, 1, 2] and not probes and guard.held == 0


async def test_an_answer_to_a_request_sent_before_the_failures_releases_none_of_them():
    # A graceful shutdown finishes the streams in flight while new connections are refused.
    guard, _ = guard_with([])
    guard.admit(record(0, ErrorClass.CONNECT_REFUSED, sent=10, ended=11))
    guard.admit(record(1, ErrorClass.CONNECTION_LOST, sent=10, ended=20))
    assert [r.request_index for r in guard.admit(record(2, sent=15))] == [0, 2]   # sent after 0 ended only
    assert guard.held == 1


async def test_a_run_of_failures_is_probed_once_and_released_when_the_server_answers():
    guard, probes = guard_with([None])
    for index in range(SUSPECT_AFTER):
        assert guard.admit(record(index, ErrorClass.CONNECT_REFUSED)) == []
    assert guard.suspect
    released = await guard.check()
    assert [r.request_index for r in released] == list(range(SUSPECT_AFTER)) and probes == [1]
    assert not guard.suspect and not guard.probing


async def test_a_failed_probe_is_server_down_and_the_held_failures_are_dropped():
    guard, _ = guard_with(["connection refused"])
    for index in range(SUSPECT_AFTER):
        guard.admit(record(index, ErrorClass.CONNECT_REFUSED))
    with pytest.raises(ServerDown, match="stopped answering .connection refused; 3 request"):
        await guard.check()
    with pytest.raises(ServerDown):                  # every sender that asks afterwards stops too
        await guard.wait_clear()


async def test_failures_left_at_the_end_of_the_plan_are_settled_by_a_probe():
    guard, probes = guard_with([None])
    guard.admit(record(0, ErrorClass.CONNECT_REFUSED))
    assert [r.request_index for r in await guard.settle()] == [0] and probes == [1]
    assert await guard.settle() == [] and probes == [1]              # nothing held: no probe


async def test_a_server_failing_single_requests_is_still_measured():
    # Every request of a prompt with a fault marker is cut mid-stream; the server itself is up.
    suite = Suite(name="t", requests=(SuiteRequest(prompt="[[fault:cut]] a", max_tokens=8),))
    with ScriptedServer(Script(num_chunks=4)) as server:
        outcome = await run_point(Endpoint(server.url, api="openai-chat", model="m"), suite,
                                  PointSpec(mode="closed", concurrency=2, num_requests=8), on_record=lambda r: None)
    assert len(outcome.records) == 8 and {r.error_class for r in outcome.records} == {ErrorClass.STREAM_CUT}


@pytest.mark.parametrize("mode", ["closed", "open"])
async def test_a_server_killed_mid_point_stops_the_point(mode):
    stored: list[RequestRecord] = []
    killed = threading.Event()
    server = ScriptedServer(Script(ttft_s=0.01, chunk_delay_s=0.002, num_chunks=4)).__enter__()
    try:
        def on_record(finished: RequestRecord) -> None:
            stored.append(finished)
            if len(stored) == 10 and not killed.is_set():   # the condition: 10 requests completed
                killed.set()
                server.__exit__(None, None, None)

        spec = (PointSpec(mode="closed", concurrency=4, num_requests=400) if mode == "closed"
                else PointSpec(mode="open", rate=400.0, max_concurrency=4, num_requests=400))
        with pytest.raises(ServerDown, match="connection refused"):
            await run_point(Endpoint(server.url, api="openai-chat", model="m"), SUITE, spec, on_record=on_record)
    finally:
        if not killed.is_set():
            server.__exit__(None, None, None)
    assert killed.is_set()
    # Nothing of the outage is stored: no refused connection, no stream cut by the kill.
    assert all(r.ok for r in stored), {r.error_class for r in stored}
    assert 10 <= len(stored) < 400

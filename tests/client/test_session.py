"""The runner's session: socket-level read stamps, write-time send stamps, connect times."""

import asyncio

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.send import send_request
from specgauge.client.session import StampingResponseHandler, open_session, warm_pool
from specgauge.suites.model import SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer


def test_stamping_protocol_stamps_arrivals_only():
    loop = asyncio.new_event_loop()
    try:
        protocol = StampingResponseHandler(loop=loop)
        protocol.data_received(b"")  # aiohttp's own parser resume: not an arrival
        assert protocol.last_data_ns == 0
        protocol.data_received(b"HTTP/1.1 200 OK\r\n")
        assert protocol.last_data_ns > 0
    finally:
        loop.close()


async def test_warm_pool_opens_the_connections_and_times_them():
    connect_ms: list[float] = []
    with ScriptedServer(Script(num_chunks=2)) as server:
        endpoint = Endpoint(server.url, api="openai-chat", model="m")
        async with open_session(Timeouts(), connect_ms) as session:
            await warm_pool(session, endpoint, 6, Timeouts())
            assert len(connect_ms) == 6 and all(ms > 0 for ms in connect_ms)
            records = await asyncio.gather(*(
                send_request(session, endpoint, SuiteRequest(prompt="hi"), request_index=i, prompt_index=0,
                             max_tokens=None, timeouts=Timeouts()) for i in range(6)))
    assert all(r.ok for r in records)
    assert len(connect_ms) == 6  # the measured requests reused the warm connections
    for record, truth in zip(sorted(records, key=lambda r: r.server_request_id),
                             sorted(server.truth, key=lambda t: t.request_id)):
        assert record.t_send_ns <= truth.t_recv_ns  # stamped at the write, before the server read it

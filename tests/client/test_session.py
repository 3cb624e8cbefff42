"""The runner's session: socket-level read stamps, write-time send stamps, connect times."""

import asyncio

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.send import send_request
from specgauge.client.http_connection import HttpConnection
from specgauge.client.session import open_session, warm_pool
from specgauge.suites.model import SuiteRequest
from specgauge.testing.scripted_server import Script, ScriptedServer


class Recorder:
    def __init__(self):
        self.data = []

    def on_headers(self, status, headers, t_ns):
        pass

    def on_data(self, data, t_ns):
        self.data.append((data, t_ns))


def test_stamping_protocol_stamps_arrivals_only():
    loop = asyncio.new_event_loop()
    try:
        protocol = HttpConnection(loop, key="k")
        assert protocol.last_data_ns == 0
        protocol.transport = FakeTransport()
        sink = Recorder()
        protocol.start(b"GET / HTTP/1.1\r\n\r\n", sink)
        protocol.data_received(b"HTTP/1.1 200 OK\r\n")
        assert protocol.last_data_ns > 0
        first = protocol.last_data_ns
        protocol.data_received(b"Content-Length: 2\r\n\r\nok")
        assert sink.data == [(b"ok", protocol.last_data_ns)] and protocol.last_data_ns >= first
    finally:
        loop.close()


class FakeTransport:
    def write(self, data):
        pass

    def is_closing(self):
        return False

    def abort(self):
        pass


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

"""The lean benchmark server speaks what the client needs and records the same truth."""

import pytest

from specgauge.analysis.definitions import ttft_ms
from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.records import TokenCountSource
from specgauge.client.send import send_request
from specgauge.client.session import open_session, warm_pool
from specgauge.suites.model import SuiteRequest
from specgauge.testing.lean_server import LeanServer
from specgauge.testing.scripted_server import Script


async def test_lean_server_streams_and_records_truth():
    script = Script(ttft_s=0.03, chunk_delay_s=0.005, num_chunks=6, tokens_per_chunk=(1, 2),
                    num_chunks_jitter=4, events_per_write=2)
    server = LeanServer(script)
    await server.start_async()
    try:
        endpoint = Endpoint(f"http://127.0.0.1:{server.port}", api="openai-completions", model="m")
        async with open_session(Timeouts()) as session:
            await warm_pool(session, endpoint, 2, Timeouts())
            records = [await send_request(session, endpoint, SuiteRequest(prompt="a b c"), request_index=i,
                                          prompt_index=0, max_tokens=None, timeouts=Timeouts())
                       for i in range(3)]
    finally:
        await server.stop_async()
    assert all(r.ok for r in records), [r.error_message for r in records]
    for record, truth in zip(records, server.truth):
        assert record.server_request_id == truth.request_id
        assert len(truth.chunk_send_ns) == len(truth.chunk_tokens) >= 6  # jitter adds up to 4 chunks
        assert record.output_tokens == sum(truth.chunk_tokens)
        assert record.token_count_source is TokenCountSource.SPREAD and record.prompt_tokens == 3
        truth_ttft_ms = (truth.chunk_send_ns[0] - truth.t_recv_ns) / 1e6
        assert truth_ttft_ms >= 30 and 0 <= ttft_ms(record) - truth_ttft_ms < 20
    assert len({len(t.chunk_tokens) for t in server.truth}) > 1  # the per-request jitter varies lengths


def test_script_rejects_unknown_settings():
    for bad in ({"fault": "explode"}, {"framing": "crcr"}, {"sglang_text": "sometimes"}, {"events_per_write": 0}):
        with pytest.raises(ValueError):
            Script(**bad)

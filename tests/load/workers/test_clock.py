"""Moving a remote worker's times onto the driver's clock: every time moves, no latency changes."""

from time import perf_counter_ns

from specgauge.analysis.definitions import ttft_ms
from specgauge.client.records import RequestRecord
from specgauge.load.workers.driver import clock_offset_ns, shift_record


async def test_the_offset_estimate_is_within_the_round_trip():
    skew = 123_456_789_000   # the worker's clock runs this far ahead

    async def worker_clock() -> int:
        return perf_counter_ns() + skew

    before = perf_counter_ns()
    estimate = await clock_offset_ns(worker_clock)
    elapsed = perf_counter_ns() - before
    assert abs(estimate + skew) <= elapsed    # the error is at most half the best round trip


def test_shift_moves_every_time_and_keeps_latencies():
    record = RequestRecord(request_index=3, prompt_index=1, scheduled_ns=100, t_send_ns=110, t_headers_ns=150,
                           t_end_ns=400, chunk_times_ns=[200, 300, 390], chunk_tokens=[1, 1, 1])
    moved = shift_record(record, -50)
    assert (moved.scheduled_ns, moved.t_send_ns, moved.t_headers_ns, moved.t_end_ns) == (50, 60, 100, 350)
    assert moved.chunk_times_ns == [150, 250, 340] and record.chunk_times_ns == [200, 300, 390]
    assert ttft_ms(moved) == ttft_ms(record) and moved.send_lag_ns == record.send_lag_ns
    assert shift_record(record, 0) is record

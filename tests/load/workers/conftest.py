"""What every split-point test checks: the stored records are the one-process plan, and their times
agree with the scripted server's truth on the shared clock of this machine."""

from __future__ import annotations

import pytest

from specgauge.load.bench_config import BenchConfig
from specgauge.load.plan import PointSpec, plan_requests
from specgauge.store import Store
from specgauge.suites.registry import load_suite


def check_against_plan_and_truth(store: Store, run_id: int, config: BenchConfig, truth) -> int:
    """Assert, for every point of the run: its stored (request, prompt) pairs are exactly its
    one-process plan (none twice, none missing) and each request's times sit inside the server's
    truth for it — sent before the server got it, every chunk received after the server wrote it,
    as many chunks as it wrote. Returns the number of requests checked."""
    suite = load_suite(config.suite)
    by_id = {t.request_id: t for t in truth}
    checked = 0
    for point in store.get_points(run_id):
        records = store.get_requests(point.id)
        planned = [(i.request_index, i.prompt_index)
                   for i in plan_requests(PointSpec(**point.spec), len(suite.requests))]
        assert sorted((r.request_index, r.prompt_index) for r in records) == planned
        for record in records:
            assert record.ok, record.error_message
            server = by_id[record.server_request_id]
            assert record.t_send_ns <= server.t_recv_ns
            assert len(record.chunk_times_ns) == len(server.chunk_send_ns)
            assert all(got >= sent for got, sent in zip(record.chunk_times_ns, server.chunk_send_ns))
            assert record.chunk_times_ns[0] - record.t_send_ns >= server.ttft_ns   # client TTFT ≥ server's
            checked += 1
    return checked


@pytest.fixture
def plan_and_truth():
    return check_against_plan_and_truth

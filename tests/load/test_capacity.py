"""A load the machine cannot open is refused before anything starts; large pools show progress."""

from __future__ import annotations

import resource

import pytest

from specgauge.client.endpoint import Endpoint, Timeouts
from specgauge.client.session import open_session, warm_pool
from specgauge.errors import UserError
from specgauge.load import capacity
from specgauge.load.plan import PointSpec
from specgauge.testing.scripted_server import ScriptedServer


def closed(concurrency: int) -> PointSpec:
    return PointSpec(mode="closed", concurrency=concurrency, num_requests=1)


def test_more_connections_than_open_files_allowed_are_refused(monkeypatch):
    monkeypatch.setattr(capacity, "available_memory_bytes", lambda: None)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    with pytest.raises(UserError, match=f"need about {hard + 1:,} open files.*at most {hard:,}"):
        capacity.check_capacity([closed(1), closed(hard + 1 - capacity.RESERVED_FDS)])


def test_the_soft_limit_is_raised_when_the_hard_one_allows(monkeypatch):
    monkeypatch.setattr(capacity, "available_memory_bytes", lambda: None)
    calls = []
    monkeypatch.setattr(capacity.resource, "getrlimit", lambda which: (1024, 4096))
    monkeypatch.setattr(capacity.resource, "setrlimit", lambda which, limits: calls.append(limits))
    capacity.check_capacity([closed(2000)])
    assert calls == [(2000 + capacity.RESERVED_FDS, 4096)]
    capacity.check_capacity([closed(10)])                     # within the soft limit: nothing to do
    assert len(calls) == 1


def test_more_connections_than_memory_allows_are_refused(monkeypatch):
    monkeypatch.setattr(capacity, "available_memory_bytes", lambda: 100 * capacity.BYTES_PER_CONNECTION)
    with pytest.raises(UserError, match="--concurrency: 1,000 connections need about .* GiB is available"):
        capacity.check_capacity([closed(1000)])


async def test_opening_the_pool_reports_progress():
    seen = []
    with ScriptedServer() as server:
        async with open_session(Timeouts()) as session:
            await warm_pool(session, Endpoint(server.url, api="openai-chat"), 12, Timeouts(),
                            on_opened=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 12) for n in range(1, 13)]

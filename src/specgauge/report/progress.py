"""What a benchmark run tells its observer as it goes (the terminal, a test, the demo)."""

from __future__ import annotations

from typing import Protocol

from specgauge.analysis.aggregate import PointAggregate
from specgauge.client.records import RequestRecord


class BenchProgress(Protocol):
    """Callbacks from :func:`specgauge.load.bench.run_benchmark`, all called in the event loop."""

    def run_started(self, run_id: int, num_points: int, *, resumed: bool) -> None: ...

    def point_started(self, point_index: int, label: str, total: int | None, already_done: int) -> None: ...

    def request_finished(self, record: RequestRecord) -> None: ...

    def point_finished(self, point_index: int, aggregate: PointAggregate) -> None: ...

    def run_finished(self, run_id: int, status: str) -> None: ...


class NullProgress:
    """Reports nothing (library use, tests)."""

    def run_started(self, run_id: int, num_points: int, *, resumed: bool) -> None:
        pass

    def point_started(self, point_index: int, label: str, total: int | None, already_done: int) -> None:
        pass

    def request_finished(self, record: RequestRecord) -> None:
        pass

    def point_finished(self, point_index: int, aggregate: PointAggregate) -> None:
        pass

    def run_finished(self, run_id: int, status: str) -> None:
        pass

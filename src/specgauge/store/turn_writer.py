"""Store finished requests from the event loop, one commit per loop turn.

The load runner calls ``on_record`` in the event loop as each request ends, and every
microsecond spent there delays the reads of all other streams in flight. An INSERT costs a few
tens of microseconds; the COMMIT (WAL append, file locks) as much again. Under batched decoding
many requests end in the same instant, so :class:`TurnWriter` inserts each record at once but
commits once per event-loop turn: the commit is queued with ``call_soon`` and so runs before the
loop reads anything more from the network. A kill therefore loses at most the requests whose
end was being handled in the very turn it struck.
"""

from __future__ import annotations

import asyncio

from specgauge.client.records import RequestRecord
from specgauge.store.sqlite_store import Store


class TurnWriter:
    """``on_record`` for one point's segment: insert now, commit at the end of this loop turn."""

    def __init__(self, store: Store, point_id: int, segment: int) -> None:
        self.store = store
        self.point_id = point_id
        self.segment = segment
        self._commit_queued = False
        self._error: BaseException | None = None

    def __call__(self, record: RequestRecord) -> None:
        """Insert ``record`` in the open transaction; queue the commit if none is queued yet."""
        self._raise_if_failed()
        self.store.add_request(self.point_id, record, segment=self.segment, commit=False)
        if not self._commit_queued:
            self._commit_queued = True
            asyncio.get_running_loop().call_soon(self._commit)

    def flush(self) -> None:
        """Commit now (at the end of the point); re-raise a failed commit."""
        self._commit()
        self._raise_if_failed()

    def _commit(self) -> None:
        self._commit_queued = False
        try:
            self.store.commit()
        except BaseException as exc:  # a loop callback cannot raise to anyone: keep it for the caller
            self._error = exc

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

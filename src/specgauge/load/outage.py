"""When the server stops answering, the point stops sending: the rule and the records it holds back.

The rule: a request that failed at the connection level (:data:`CONNECTION_FAILURES`: refused,
connect timeout or failure, DNS, closed before the response headers, no headers in time, or a
stream cut off) is *held back* instead of stored. A request that gets an answer releases the held
ones that had ended before it was sent, in order, as ordinary failures of the point. When
:data:`SUSPECT_AFTER` are held with no such answer, or the plan ends with some held, the server
is probed once (``GET
/v1/models``, any HTTP status counts; every sender waits for it). If it answers, the held records
are released likewise; if not, :class:`ServerDown` is raised: the point stops, requests in flight
are cancelled, and the held records are dropped — they did not complete, so ``--resume`` sends
them again, with the requests never sent. A dead server therefore never burns the rest of a plan
on refused connections, and a server that only fails some requests is still measured.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from specgauge.client.records import ErrorClass, RequestRecord
from specgauge.errors import UserError

CONNECTION_FAILURES = frozenset({
    ErrorClass.CONNECT_REFUSED, ErrorClass.CONNECT_TIMEOUT, ErrorClass.CONNECT_FAILED, ErrorClass.DNS,
    ErrorClass.CONNECTION_LOST, ErrorClass.HEADER_TIMEOUT, ErrorClass.STREAM_CUT,
})
SUSPECT_AFTER = 3  # connection-level failures in a row, with no answer between them, before a probe


class ServerDown(UserError):
    """The server stopped answering during a point (exit code 3: resumable once it is back)."""

    exit_code = 3

    def __init__(self, base_url: str, reason: str, failures: int) -> None:
        super().__init__(f"the server at {base_url} stopped answering ({reason}; "
                         f"{failures} request(s) in a row failed at the connection level)")
        self.base_url = base_url
        self.reason = reason
        self.failures = failures


class OutageGuard:
    """Holds back connection-level failures until an answer (release) or a failed probe (ServerDown).

    ``probe`` returns why the server does not answer, or None when it does.
    """

    def __init__(self, base_url: str, probe: Callable[[], Awaitable[str | None]], *,
                 suspect_after: int = SUSPECT_AFTER) -> None:
        self.base_url = base_url
        self._probe = probe
        self.suspect_after = suspect_after
        self._held: list[RequestRecord] = []
        self._probing: asyncio.Future[str | None] | None = None
        self._down: ServerDown | None = None

    @property
    def held(self) -> int:
        """How many records are held back now."""
        return len(self._held)

    @property
    def probing(self) -> bool:
        """Whether senders should wait (:meth:`wait_clear`) before sending more."""
        return self._probing is not None or self._down is not None

    def admit(self, record: RequestRecord) -> list[RequestRecord]:
        """The records to store now that ``record`` finished (released held ones first, in order).

        An answer releases only the failures that had ended before its request was sent: a request
        already in flight when the server went away (a graceful shutdown finishes its streams) says
        nothing about the server after that."""
        if record.error_class in CONNECTION_FAILURES:
            self._held.append(record)
            return []
        sent = record.t_send_ns
        released = [r for r in self._held if sent is None or (r.t_end_ns or 0) <= sent]
        if len(released) < len(self._held):
            self._held = [r for r in self._held if not (sent is None or (r.t_end_ns or 0) <= sent)]
        else:
            self._held = []
        return [*released, record]

    @property
    def suspect(self) -> bool:
        """Enough connection-level failures in a row to ask whether the server is still there."""
        return len(self._held) >= self.suspect_after

    async def check(self) -> list[RequestRecord]:
        """Probe the server (one probe shared by every caller). Answers: return the held records
        (to store as ordinary failures; later callers get none). Does not: raise :class:`ServerDown`."""
        await self._await_probe()
        released, self._held = self._held, []
        return released

    async def wait_clear(self) -> None:
        """Wait for a probe in progress; raise :class:`ServerDown` if it found the server gone."""
        if self._down is not None or self._probing is not None:
            await self._await_probe()

    async def _await_probe(self) -> None:
        if self._down is not None:
            raise self._down
        if self._probing is None:
            self._probing = asyncio.ensure_future(self._probe())
        probe = self._probing
        reason = await asyncio.shield(probe)
        if self._probing is probe:
            self._probing = None
        if reason is not None:
            if self._down is None:
                self._down = ServerDown(self.base_url, reason, len(self._held))
            raise self._down

    async def settle(self) -> list[RequestRecord]:
        """At the end of a plan: decide about records still held (probe when there are any)."""
        return await self.check() if self._held else []

"""Which process is running a run: a claim row per run, so that two processes never run one run.

:meth:`RunClaims.claim_run` takes the claim in one ``BEGIN IMMEDIATE`` transaction (SQLite lets one
writer in at a time, so two claimants cannot both see the run free). A claim held by a live
process refuses with one line; a claim left by a process that is gone (killed) is taken over. On
the same host "gone" means no process with that pid, or one with another start time (the pid was
reused); a claim from another host is taken as live, since its process cannot be looked at.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from specgauge.errors import UserError


@dataclass(frozen=True)
class ProcessId:
    """A process, told apart from a later one with the same pid by its start time."""

    pid: int
    host: str
    started: str | None

    @classmethod
    def current(cls) -> "ProcessId":
        return cls(os.getpid(), socket.gethostname(), process_start_time(os.getpid()))


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of ``/proc/PID/stat``), or None
    where there is no ``/proc`` or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]   # fields after "(comm)" start at field 3


def process_alive(owner: ProcessId) -> bool:
    """Whether the claim's process may still be running (True when it cannot be told)."""
    if owner.host != socket.gethostname():
        return True
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    if owner.started is not None:
        return process_start_time(owner.pid) in (owner.started, None)
    return True


class RunBusy(UserError):
    """Another live process is running this run."""


class RunClaims:
    """Claim rows of the store (mixed into :class:`specgauge.store.Store`; uses its ``_db``)."""

    _db: sqlite3.Connection

    def claim_run(self, run_id: int, owner: ProcessId | None = None) -> None:
        """Claim ``run_id`` for ``owner`` (default: this process), or raise :class:`RunBusy` when a
        live process holds it. Claiming a run this process holds already is a no-op."""
        owner = owner or ProcessId.current()
        if self._db.in_transaction:
            self._db.execute("COMMIT")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute("SELECT pid, host, process_started, claimed_at FROM run_claims WHERE run_id = ?",
                                   (run_id,)).fetchone()
            if row is not None:
                holder = ProcessId(row[0], row[1], row[2])
                if holder != owner and process_alive(holder):
                    raise RunBusy(f"run {run_id} is being run by another specgauge (pid {holder.pid} on "
                                  f"{holder.host}, since {row[3]}); wait for it to end or stop it first")
            self._db.execute("INSERT OR REPLACE INTO run_claims (run_id, pid, host, process_started, claimed_at)"
                             " VALUES (?, ?, ?, ?, ?)",
                             (run_id, owner.pid, owner.host, owner.started,
                              datetime.now(timezone.utc).isoformat(timespec="seconds")))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def release_run(self, run_id: int, owner: ProcessId | None = None) -> None:
        """Drop ``owner``'s claim on ``run_id`` (best effort: a claim left behind is taken over later)."""
        owner = owner or ProcessId.current()
        try:
            self._db.execute("DELETE FROM run_claims WHERE run_id = ? AND pid = ? AND host = ?",
                             (run_id, owner.pid, owner.host))
        except sqlite3.Error:
            pass

"""Tune rows of the results store (schema version 4; docs/tune.md, "Stored").

A mixin of :class:`specgauge.store.Store`: a tune (id ``tN``) has its plan, its result document
(choices, schedule, settings, verification, measuring time) and links to the bench runs it made,
one per point (``stage`` measure or verify, the arm, the concurrency, the round).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from specgauge.errors import UserError
from specgauge.store.clock import utc_now


@dataclass(frozen=True)
class TuneRow:
    id: int
    status: str
    started_at: str
    finished_at: str | None
    plan: dict
    result: dict | None
    error: str | None


@dataclass(frozen=True)
class TuneRunRow:
    """One bench run of a tune: which arm, at which concurrency, in which round and stage."""

    tune_id: int
    run_id: int
    stage: str      # "measure" | "verify"
    arm: str        # "k=3" | "schedule"
    concurrency: int
    round: int


class TuneTables:
    """Methods on the store's connection ``self._db`` for tunes."""

    _db: sqlite3.Connection
    path: Any

    def _has_tunes(self) -> bool:
        """Whether the tune tables exist (a store older than schema 4 opened read-only has none)."""
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tunes'").fetchone() \
            is not None

    def create_tune(self, plan: dict) -> int:
        """Insert a tune with status ``running``; returns its id."""
        cursor = self._db.execute("INSERT INTO tunes (status, started_at, plan_json) VALUES ('running', ?, ?)",
                                  (utc_now(), json.dumps(plan, sort_keys=True, default=str)))
        return int(cursor.lastrowid)

    def link_tune_run(self, tune_id: int, run_id: int, *, stage: str, arm: str, concurrency: int,
                      round: int) -> None:
        """Record that ``run_id`` is ``arm``'s point at ``concurrency`` in ``round`` of ``stage``."""
        self._db.execute("INSERT OR REPLACE INTO tune_runs (tune_id, run_id, stage, arm, concurrency, round)"
                         " VALUES (?, ?, ?, ?, ?, ?)", (tune_id, run_id, stage, arm, concurrency, round))

    def finish_tune(self, tune_id: int, *, status: str, result: dict | None = None, error: str | None = None) -> None:
        """Set the final status, and the result document when it is ``done``."""
        self._db.execute("UPDATE tunes SET status = ?, finished_at = ?, result_json = ?, error = ? WHERE id = ?",
                         (status, utc_now(), None if result is None else json.dumps(result, sort_keys=True),
                          error, tune_id))

    def get_tune(self, tune_id: int) -> TuneRow:
        """The tune ``tune_id``; an unknown id raises :class:`UserError`."""
        row = self._db.execute("SELECT * FROM tunes WHERE id = ?", (tune_id,)).fetchone() \
            if self._has_tunes() else None
        if row is None:
            raise UserError(f"no tune {tune_id} in {self.path} (tune prints the id it stores; "
                            f"'specgauge runs' lists them)")
        return TuneRow(id=row["id"], status=row["status"], started_at=row["started_at"],
                       finished_at=row["finished_at"], plan=json.loads(row["plan_json"]),
                       result=None if row["result_json"] is None else json.loads(row["result_json"]),
                       error=row["error"])

    def list_tunes(self) -> list[TuneRow]:
        """All tunes, oldest first (none in a store older than schema 4)."""
        if not self._has_tunes():
            return []
        return [self.get_tune(r[0]) for r in self._db.execute("SELECT id FROM tunes ORDER BY id")]

    def tune_runs(self, tune_id: int) -> list[TuneRunRow]:
        """The bench runs of a tune, by stage, concurrency, round and arm."""
        if not self._has_tunes():
            return []
        rows = self._db.execute("SELECT * FROM tune_runs WHERE tune_id = ? ORDER BY stage, concurrency, round, arm",
                                (tune_id,))
        return [TuneRunRow(r["tune_id"], r["run_id"], r["stage"], r["arm"], r["concurrency"], r["round"])
                for r in rows]

    def tune_of_run(self, run_id: int) -> int | None:
        """The tune a run belongs to, if any."""
        if not self._has_tunes():
            return None
        row = self._db.execute("SELECT tune_id FROM tune_runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else int(row[0])

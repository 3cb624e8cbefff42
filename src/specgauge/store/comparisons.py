"""Comparison and baseline rows of the results store (schema version 2; docs/compare.md).

A mixin of :class:`specgauge.store.Store`: a comparison links the bench runs of its two arms
(one run per arm, stage and round); a baseline is a name for a stored run.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from specgauge.errors import UserError
from specgauge.store.clock import utc_now


@dataclass(frozen=True)
class ComparisonRow:
    id: int
    status: str
    started_at: str
    finished_at: str | None
    plan: dict
    result: dict | None
    error: str | None


@dataclass(frozen=True)
class ComparisonRunRow:
    comparison_id: int
    run_id: int
    arm: str
    stage: str
    round: int


@dataclass(frozen=True)
class BaselineRow:
    name: str
    run_id: int
    created_at: str


class ComparisonTables:
    """Methods on the store's connection ``self._db`` for comparisons and baselines."""

    _db: sqlite3.Connection
    path: Any

    def create_comparison(self, plan: dict) -> int:
        """Insert a comparison with status ``running``; returns its id."""
        cursor = self._db.execute("INSERT INTO comparisons (status, started_at, plan_json) VALUES ('running', ?, ?)",
                                  (utc_now(), json.dumps(plan, sort_keys=True, default=str)))
        return int(cursor.lastrowid)

    def link_comparison_run(self, comparison_id: int, run_id: int, *, arm: str, stage: str, round: int) -> None:
        """Record that ``run_id`` is ``arm``'s run of ``stage`` in round ``round``."""
        self._db.execute("INSERT INTO comparison_runs (comparison_id, run_id, arm, stage, round)"
                         " VALUES (?, ?, ?, ?, ?)",
                         (comparison_id, run_id, arm, stage, round))

    def finish_comparison(self, comparison_id: int, *, status: str, result: dict | None = None,
                          error: str | None = None) -> None:
        """Set the final status, and the result document when it is ``done``."""
        self._db.execute("UPDATE comparisons SET status = ?, finished_at = ?, result_json = ?, error = ? WHERE id = ?",
                         (status, utc_now(), None if result is None else json.dumps(result, sort_keys=True),
                          error, comparison_id))

    def restart_comparison(self, comparison_id: int) -> None:
        """Mark a stopped comparison ``running`` again (``compare --resume``); its partial result goes."""
        self._db.execute("UPDATE comparisons SET status = 'running', finished_at = NULL, result_json = NULL,"
                         " error = NULL WHERE id = ?", (comparison_id,))

    def get_comparison(self, comparison_id: int) -> ComparisonRow:
        """The comparison ``comparison_id``; an unknown id raises :class:`UserError`."""
        row = self._db.execute("SELECT * FROM comparisons WHERE id = ?", (comparison_id,)).fetchone()
        if row is None:
            raise UserError(f"no comparison {comparison_id} in {self.path} "
                            f"(compare and demo print the ids they store)")
        return ComparisonRow(id=row["id"], status=row["status"], started_at=row["started_at"],
                             finished_at=row["finished_at"], plan=json.loads(row["plan_json"]),
                             result=None if row["result_json"] is None else json.loads(row["result_json"]),
                             error=row["error"])

    def list_comparisons(self) -> list[ComparisonRow]:
        """All comparisons, oldest first."""
        ids = [r[0] for r in self._db.execute("SELECT id FROM comparisons ORDER BY id")]
        return [self.get_comparison(i) for i in ids]

    def comparison_runs(self, comparison_id: int) -> list[ComparisonRunRow]:
        """The runs linked to a comparison, by stage, arm and round."""
        rows = self._db.execute("SELECT * FROM comparison_runs WHERE comparison_id = ? ORDER BY stage, arm, round",
                                (comparison_id,))
        return [ComparisonRunRow(r["comparison_id"], r["run_id"], r["arm"], r["stage"], r["round"]) for r in rows]

    def comparison_of_run(self, run_id: int) -> int | None:
        """The comparison a run belongs to, if any."""
        row = self._db.execute("SELECT comparison_id FROM comparison_runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else int(row[0])

    def set_baseline(self, name: str, run_id: int) -> None:
        """Name run ``run_id`` as baseline ``name`` (replacing an earlier run of that name)."""
        self._db.execute("INSERT INTO baselines (name, run_id, created_at) VALUES (?, ?, ?) "
                         "ON CONFLICT(name) DO UPDATE SET run_id = excluded.run_id, created_at = excluded.created_at",
                         (name, run_id, utc_now()))

    def get_baseline(self, name: str) -> BaselineRow:
        """The baseline called ``name``; unknown names raise :class:`UserError`."""
        row = self._db.execute("SELECT * FROM baselines WHERE name = ?", (name,)).fetchone()
        if row is None:
            known = [r[0] for r in self._db.execute("SELECT name FROM baselines ORDER BY name")]
            raise UserError(f"no baseline named {name!r} in {self.path} "
                            f"({'known: ' + ', '.join(known) if known else 'none set; use specgauge baseline set'})")
        return BaselineRow(row["name"], row["run_id"], row["created_at"])

    def list_baselines(self) -> list[BaselineRow]:
        """All named baselines, by name."""
        return [BaselineRow(r["name"], r["run_id"], r["created_at"])
                for r in self._db.execute("SELECT * FROM baselines ORDER BY name")]

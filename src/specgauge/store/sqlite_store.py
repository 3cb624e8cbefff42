"""The results store: runs, points and requests in one SQLite file (WAL).

Every measured request is written and committed the moment it finishes (:meth:`Store.add_request`),
so a process killed mid-sweep loses nothing that finished; ``bench --resume`` reads back what is
there and runs only what is missing. One ``Store`` is used from one thread (the event loop's).
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from specgauge.client.records import ErrorClass, RequestRecord, TokenCountSource
from specgauge.errors import UserError
from specgauge.store import codec
from specgauge.store.claims import RunClaims
from specgauge.store.clock import utc_now
from specgauge.store.comparisons import ComparisonTables
from specgauge.store.schema import DDL, MIGRATIONS, SCHEMA_VERSION
from specgauge.store.tunes import TuneTables

DEFAULT_DB_PATH = "specgauge.db"

# RequestRecord fields stored in a column of the same name, as they are.
_PLAIN_FIELDS = (
    "request_index", "prompt_index", "domain", "api", "scheduled_ns", "t_send_ns", "t_headers_ns",
    "t_end_ns", "prompt_tokens", "output_tokens", "output_text", "finish_reason", "spec_verify_ct",
    "spec_accept_length", "spec_accept_rate", "spec_correct_drafts", "spec_proposed_drafts",
    "status_code", "error_message", "server_request_id",
)
# Columns added by schema version 5 (read as None from an older store opened read-only).
_V5_FIELDS = ("session_index", "turn_index", "cached_tokens")
# Fields with their own encoding (see _record_values / _row_record).
_ENCODED_FIELDS = ("chunk_times_ns", "chunk_tokens", "token_count_source", "error_class", "spec_accept_histogram")
STORED_RECORD_FIELDS = frozenset(_PLAIN_FIELDS + _V5_FIELDS + _ENCODED_FIELDS)


class StoreWriteError(UserError):
    """The results store could not be written (disk full, read-only, removed): exit code 4.

    Everything committed before stays; ``bench --resume`` finishes the run once it can be written.
    """

    exit_code = 4

    def __init__(self, path: Path | str, error: BaseException) -> None:
        super().__init__(f"cannot write to the results store {path}: {' '.join(str(error).split())}")


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _why_unwritable(path: Path) -> str | None:
    """Why the store at ``path`` (or a new one there) cannot be written, or None. SQLite needs the
    file and, for its write-ahead log, the folder writable."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return f"{folder} is on a read-only filesystem"
    except OSError:
        pass
    for target in ((path, folder) if path.exists() else (folder,)):
        if target.exists() and not os.access(target, os.W_OK):
            return f"{'the folder ' if target == folder else ''}{target} is not writable"
    return None


def _read_only_uri(path: Path) -> str:
    """An SQLite URI reading ``path`` without writing anything next to it. ``immutable`` (no locks,
    no -shm) unless a write-ahead log with content is there, which only a normal read-only open reads."""
    wal = Path(f"{path}-wal")
    mode = "mode=ro" if wal.exists() and wal.stat().st_size > 0 else "mode=ro&immutable=1"
    return f"{path.resolve().as_uri()}?{mode}"


def _is_read_only_error(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open database file" in text


@dataclass(frozen=True)
class RunRow:
    """One stored run."""

    id: int
    status: str
    started_at: str
    finished_at: str | None
    tool_version: str
    host: str
    url: str
    api: str
    model: str | None
    config: dict
    suite_name: str
    suite_version: int
    suite_hash: str
    server_fingerprint: Any
    server_info: Any
    response_headers: Any
    error: str | None


@dataclass(frozen=True)
class PointRow:
    """One stored load point; ``aggregates`` is ``PointAggregate.to_dict()`` once it is done."""

    id: int
    run_id: int
    point_index: int
    spec: dict
    status: str
    started_at: str | None
    finished_at: str | None
    windows: list[list[int]]
    aggregates: dict | None
    server_spec_before: Any
    server_spec_after: Any


_REQUEST_COLUMNS = (*_PLAIN_FIELDS, *_V5_FIELDS, "num_chunks", "chunk_times", "chunk_tokens", "token_count_source",
                    "error_class", "spec_accept_histogram", "point_id", "segment")
_INSERT_REQUEST = (f"INSERT INTO requests ({', '.join(_REQUEST_COLUMNS)}) "
                   f"VALUES ({', '.join('?' for _ in _REQUEST_COLUMNS)})")


def _record_values(record: RequestRecord, point_id: int, segment: int) -> tuple:
    """The INSERT parameters of one record, in ``_REQUEST_COLUMNS`` order (hot path: no dicts)."""
    return (
        *[getattr(record, name) for name in _PLAIN_FIELDS],
        *[getattr(record, name) for name in _V5_FIELDS],
        len(record.chunk_times_ns),
        codec.encode_times(record.chunk_times_ns, record.t_send_ns),
        codec.encode_counts(record.chunk_tokens),
        TokenCountSource(record.token_count_source).value,
        None if record.error_class is None else ErrorClass(record.error_class).value,
        _dumps(record.spec_accept_histogram),
        point_id,
        segment,
    )


def _row_record(row: sqlite3.Row) -> RequestRecord:
    keys = row.keys()
    return RequestRecord(
        **{name: row[name] for name in _PLAIN_FIELDS},
        **{name: row[name] for name in _V5_FIELDS if name in keys},
        chunk_times_ns=codec.decode_times(row["chunk_times"], row["t_send_ns"]),
        chunk_tokens=codec.decode_counts(row["chunk_tokens"]),
        token_count_source=TokenCountSource(row["token_count_source"]),
        error_class=None if row["error_class"] is None else ErrorClass(row["error_class"]),
        spec_accept_histogram=_loads(row["spec_accept_histogram"]),
    )


class Store(ComparisonTables, TuneTables, RunClaims):
    """The SQLite results store. Open it with :meth:`Store.open`; use as a context manager."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path
        self.read_only = False

    # -- opening -------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path = DEFAULT_DB_PATH, *, create: bool = True, read_only: bool = False) -> "Store":
        """Open (and with ``create``, initialise) the store at ``path``.

        Raises :class:`UserError` with one clear line when the file is missing (``create=False``),
        not an SQLite file, another program's database, or written by a newer specgauge. A store
        that cannot be written (read-only file, directory or filesystem) is opened read-only with
        ``read_only`` (the commands that only read: ``runs``, ``show``, ``export``, ``report``) and
        refused with a line saying it is read-only otherwise.
        """
        path = Path(path)
        if path.is_dir():
            raise UserError(f"--db {path}: is a directory, not a results file")
        if not create and not path.exists():
            raise UserError(f"no results store at {path} (run 'specgauge bench' first or pass --db)")
        unwritable = _why_unwritable(path)
        if unwritable is not None and not read_only:
            raise UserError(f"--db {path}: the store is read-only ({unwritable}); this command writes to it: "
                            f"copy it to a writable place or give another --db")
        try:
            if unwritable is not None:
                connection = sqlite3.connect(_read_only_uri(path), uri=True, isolation_level=None)
            else:
                connection = sqlite3.connect(path, isolation_level=None)  # autocommit: one row, one commit
        except sqlite3.Error as exc:
            raise UserError(f"--db {path}: cannot open ({exc})") from None
        connection.row_factory = sqlite3.Row
        store = cls(connection, path)
        store.read_only = unwritable is not None
        try:
            store._prepare()
        except sqlite3.DatabaseError as exc:
            connection.close()
            if _is_read_only_error(exc):
                raise UserError(f"--db {path}: the store is read-only ({exc}); copy it to a writable place "
                                f"or give another --db") from None
            raise UserError(f"--db {path}: not a specgauge results file ({exc})") from None
        except UserError:
            connection.close()
            raise
        return store

    def _prepare(self) -> None:
        db = self._db
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "schema_version" not in tables:
            raise UserError(f"--db {self.path}: an SQLite file, but not a specgauge results store "
                            f"(tables: {', '.join(sorted(tables)[:5])})")
        version = SCHEMA_VERSION
        if "schema_version" in tables:
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = row[0] if row else None
            if version is None:
                raise UserError(f"--db {self.path}: the schema_version table is empty; not a specgauge store")
            if version > SCHEMA_VERSION:
                raise UserError(f"--db {self.path}: written by a newer specgauge (schema {version}; this one "
                                f"reads up to {SCHEMA_VERSION}); upgrade specgauge")
        if self.read_only:  # nothing to set up or migrate: the reads work on every older schema
            return
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: a killed process loses no commit
        # No automatic checkpoint: it would fsync inside a commit, i.e. stall the event loop while
        # streams are being timed. The bench driver checkpoints between points (see checkpoint()).
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA busy_timeout = 5000")
        if "schema_version" not in tables:
            db.executescript(DDL)  # idempotent (IF NOT EXISTS); commits by itself
            for version in sorted(MIGRATIONS):
                db.executescript(MIGRATIONS[version])
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        elif version < SCHEMA_VERSION:
            for step in sorted(v for v in MIGRATIONS if v > version):
                db.executescript(MIGRATIONS[step])
                db.execute("UPDATE schema_version SET version = ?", (step,))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file; call it outside a measured window."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        """Commit what is pending, checkpoint and close the connection.

        Closing never raises for a store that cannot be written any more (disk full): what could
        not be committed is rolled back, and the connection is closed all the same.
        """
        if self.read_only:
            self._db.close()
            return
        try:
            self.commit()
        except StoreWriteError:
            pass
        try:
            self.checkpoint()
        except sqlite3.Error:  # another connection holds the log (it checkpoints on its own close), or no space
            pass
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ----------------------------------------------------------------------------------

    def create_run(self, *, tool_version: str, host: str, url: str, api: str, model: str | None,
                   config: dict, suite_name: str, suite_version: int, suite_hash: str,
                   server_fingerprint: Any = None, server_info: Any = None,
                   response_headers: Any = None) -> int:
        """Insert a run with status ``running``; returns its id."""
        cursor = self._db.execute(
            "INSERT INTO runs (status, started_at, tool_version, host, url, api, model, config_json,"
            " suite_name, suite_version, suite_hash, server_fingerprint_json, server_info_json,"
            " response_headers_json) VALUES ('running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (utc_now(), tool_version, host, url, api, model, _dumps(config), suite_name, suite_version,
             suite_hash, _dumps(server_fingerprint), _dumps(server_info), _dumps(response_headers)),
        )
        return int(cursor.lastrowid)

    def set_run_status(self, run_id: int, status: str, *, error: str | None = None) -> None:
        """Set a run's status; ``done``/``failed``/``interrupted`` also stamp ``finished_at``."""
        finished = None if status == "running" else utc_now()
        self._db.execute("UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE id = ?",
                         (status, finished, error, run_id))

    def get_run(self, run_id: int) -> RunRow:
        """The run with ``run_id``; an unknown id raises :class:`UserError`."""
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run {run_id} in {self.path} (see 'specgauge runs --db {self.path}')")
        return self._run_row(row)

    def list_runs(self) -> list[RunRow]:
        """All runs, oldest first."""
        return [self._run_row(r) for r in self._db.execute("SELECT * FROM runs ORDER BY id")]

    @staticmethod
    def _run_row(row: sqlite3.Row) -> RunRow:
        return RunRow(
            id=row["id"], status=row["status"], started_at=row["started_at"], finished_at=row["finished_at"],
            tool_version=row["tool_version"], host=row["host"], url=row["url"], api=row["api"],
            model=row["model"], config=_loads(row["config_json"]), suite_name=row["suite_name"],
            suite_version=row["suite_version"], suite_hash=row["suite_hash"],
            server_fingerprint=_loads(row["server_fingerprint_json"]),
            server_info=_loads(row["server_info_json"]),
            response_headers=_loads(row["response_headers_json"]), error=row["error"],
        )

    # -- points --------------------------------------------------------------------------------

    def add_points(self, run_id: int, specs: list[dict]) -> list[int]:
        """Insert the run's points (status ``pending``) in order, in one transaction; returns ids."""
        with self._transaction() as db:
            return [int(db.execute("INSERT INTO points (run_id, point_index, spec_json, status)"
                                   " VALUES (?, ?, ?, 'pending')", (run_id, i, _dumps(spec))).lastrowid)
                    for i, spec in enumerate(specs)]

    def start_point(self, point_id: int) -> None:
        """Mark a point ``running`` (keeps the first start time across resumes)."""
        self._db.execute("UPDATE points SET status = 'running', started_at = COALESCE(started_at, ?)"
                         " WHERE id = ?", (utc_now(), point_id))

    def finish_point(self, point_id: int, *, windows: list[list[int]], aggregates: dict,
                     server_spec_before: Any = None, server_spec_after: Any = None) -> None:
        """Mark a point ``done`` with its measurement windows, aggregates and server counters."""
        self._db.execute(
            "UPDATE points SET status = 'done', finished_at = ?, windows_json = ?, aggregates_json = ?,"
            " server_spec_before_json = ?, server_spec_after_json = ? WHERE id = ?",
            (utc_now(), _dumps(windows), _dumps(aggregates), _dumps(server_spec_before),
             _dumps(server_spec_after), point_id))

    def get_points(self, run_id: int) -> list[PointRow]:
        """The run's points in order."""
        rows = self._db.execute("SELECT * FROM points WHERE run_id = ? ORDER BY point_index", (run_id,))
        return [PointRow(id=r["id"], run_id=r["run_id"], point_index=r["point_index"], spec=_loads(r["spec_json"]),
                         status=r["status"], started_at=r["started_at"], finished_at=r["finished_at"],
                         windows=_loads(r["windows_json"]), aggregates=_loads(r["aggregates_json"]),
                         server_spec_before=_loads(r["server_spec_before_json"]),
                         server_spec_after=_loads(r["server_spec_after_json"]))
                for r in rows]

    # -- requests ------------------------------------------------------------------------------

    def add_request(self, point_id: int, record: RequestRecord, *, segment: int = 0, commit: bool = True) -> None:
        """Write one finished measured request; with ``commit`` (the default) commit it at once.

        ``commit=False`` opens (or joins) a transaction that :meth:`commit` ends: the bench
        driver uses it to commit once per event-loop turn (see ``specgauge.load.bench``).
        """
        try:
            if not commit and not self._db.in_transaction:
                self._db.execute("BEGIN")
            self._db.execute(_INSERT_REQUEST, _record_values(record, point_id, segment))
            if commit:
                self.commit()
        except sqlite3.IntegrityError as exc:
            raise UserError(f"request {record.request_index} of point {point_id} is stored already "
                            f"(is another specgauge process running this run?)") from exc
        except sqlite3.Error as exc:  # disk full, file removed, read-only...: one line, not a traceback
            raise StoreWriteError(self.path, exc) from None

    def commit(self) -> None:
        """Commit the open transaction, if any; a failed commit (disk full...) rolls it back and
        raises :class:`StoreWriteError`."""
        if self._db.in_transaction:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self.rollback()
                raise StoreWriteError(self.path, exc) from None

    def rollback(self) -> None:
        """Drop the open transaction, if any (never raises)."""
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def measured_indices(self, point_id: int) -> frozenset[int]:
        """Request indices of the point's measured requests that are stored."""
        rows = self._db.execute("SELECT request_index FROM requests WHERE point_id = ?", (point_id,))
        return frozenset(r[0] for r in rows)

    def next_segment(self, point_id: int) -> int:
        """The segment number a new session on this point writes under."""
        row = self._db.execute("SELECT MAX(segment) FROM requests WHERE point_id = ?", (point_id,)).fetchone()
        return 0 if row[0] is None else row[0] + 1

    def get_requests(self, point_id: int, *, segment: int | None = None) -> list[RequestRecord]:
        """The point's stored measured requests, by segment then request index."""
        sql = "SELECT * FROM requests WHERE point_id = ?"
        args: tuple = (point_id,)
        if segment is not None:
            sql += " AND segment = ?"
            args += (segment,)
        return [_row_record(r) for r in self._db.execute(sql + " ORDER BY segment, request_index", args)]

    def request_segments(self, point_id: int) -> dict[int, list[RequestRecord]]:
        """The point's measured requests grouped by the session (segment) that measured them."""
        grouped: dict[int, list[RequestRecord]] = {}
        rows = self._db.execute("SELECT * FROM requests WHERE point_id = ? ORDER BY segment, request_index",
                                (point_id,))
        for row in rows:
            grouped.setdefault(row["segment"], []).append(_row_record(row))
        return grouped

    def delete_requests(self, point_id: int) -> None:
        """Drop a point's stored requests (a partial duration-bounded point is rerun whole)."""
        self._db.execute("DELETE FROM requests WHERE point_id = ?", (point_id,))

"""The SQLite results store (runs, points, requests). See docs/bench.md for the schema."""

from specgauge.store.schema import SCHEMA_VERSION
from specgauge.store.sqlite_store import DEFAULT_DB_PATH, PointRow, RunRow, Store, StoreWriteError

__all__ = ["DEFAULT_DB_PATH", "PointRow", "RunRow", "SCHEMA_VERSION", "Store", "StoreWriteError"]

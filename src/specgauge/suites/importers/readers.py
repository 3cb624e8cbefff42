"""Read the records of each importable file format, each with where it came from (file:line or row)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from specgauge.errors import UserError, require_extra
from specgauge.suites.sample_files import arrow_batches

Located = tuple[str, Any]  # (where, record)


def read_jsonl(path: Path) -> Iterator[Located]:
    """One JSON object a line; blank lines skipped."""
    try:
        with path.open(encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield f"{path}:{lineno}", json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None


def read_json_array(path: Path) -> Iterator[Located]:
    """A JSON array of objects (ShareGPT dumps); a bad file names the line of the syntax error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if isinstance(data, dict):  # some dumps wrap the list: {"data": [...]}
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else data
    if not isinstance(data, list):
        raise UserError(f"{path}: expected a JSON array of conversations")
    for index, record in enumerate(data):
        yield f"{path}: item {index}", record


def read_csv(path: Path) -> Iterator[Located]:
    """CSV with a header row naming at least a ``prompt`` column (optional ``domain``, ``max_tokens``)."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or "prompt" not in reader.fieldnames:
                raise UserError(f"{path}:1: a CSV suite needs a 'prompt' column (columns: "
                                f"{', '.join(reader.fieldnames or []) or 'none'})")
            for row in reader:
                record = {k: v for k, v in row.items() if k and v not in (None, "")}
                yield f"{path}:{reader.line_num}", record
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    except csv.Error as exc:
        raise UserError(f"{path}: bad CSV ({exc})") from None


def read_parquet(path: Path) -> Iterator[Located]:
    """Rows of a parquet file, one row group at a time."""
    require_extra("data", "pyarrow")
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types
        raise UserError(f"cannot read {path}: {exc}") from None
    row = 0
    for group in range(parquet.num_row_groups):
        for record in parquet.read_row_group(group).to_pylist():
            yield f"{path}: row {row}", record
            row += 1


def read_arrow(path: Path) -> Iterator[Located]:
    """Rows of an arrow IPC file or stream (what ``datasets`` writes), memory-mapped."""
    row = 0
    for batch in arrow_batches(path):
        for record in batch.to_pylist():
            yield f"{path}: row {row}", record
            row += 1


def read_datasets_dir(path: Path) -> Iterator[Located]:
    """A ``datasets`` directory saved with ``save_to_disk``: its ``*.arrow`` files in order (all splits)."""
    files = sorted(p for p in path.rglob("*.arrow") if not p.name.startswith("cache-"))
    if not files:
        raise UserError(f"{path}: no .arrow files (expected a directory written by datasets' save_to_disk)")
    for file in files:
        yield from read_arrow(file)

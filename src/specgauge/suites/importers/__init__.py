"""Import prompt sets from local files into suites (nothing is fetched).

Formats: ``jsonl`` (``messages`` or ``prompt`` a line), ``sharegpt`` (a JSON array, or JSONL, of
``{"conversations": [{"from", "value"}]}``), ``mtbench`` and ``specbench`` (``question.jsonl`` with
``turns`` and ``category``; an entry with later turns becomes a multi-turn session), ``speedbench``
(NVIDIA's SPEED-Bench, parquet or JSONL: :mod:`.speedbench`), ``parquet``, ``arrow``, ``datasets`` (a
directory saved with ``save_to_disk``) and ``csv`` (a ``prompt`` column). ``auto`` picks one from the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from specgauge.errors import UserError
from specgauge.suites.importers.readers import (Located, read_arrow, read_csv, read_datasets_dir, read_json_array,
                                                read_jsonl, read_parquet)
from specgauge.suites.importers.records import MT_BENCH_DOMAINS, ImportDefaults, request_from_record
from specgauge.suites.importers.speedbench import looks_like_speedbench, speedbench_request
from specgauge.suites.model import Suite

FORMATS = ("auto", "jsonl", "sharegpt", "mtbench", "specbench", "speedbench", "parquet", "arrow", "datasets", "csv")
# Categories only Spec-Bench has (besides MT-bench's eight, which it includes).
SPEC_BENCH_ONLY = {"translation", "summarization", "qa", "math_reasoning", "rag"}

__all__ = ["FORMATS", "ImportDefaults", "detect_format", "import_suite", "request_from_record"]


def detect_format(path: Path) -> str:
    """The format of ``path`` from its suffix, and for ``.jsonl`` from its records' keys."""
    if path.is_dir():
        return "datasets"
    suffix = path.suffix.lower()
    by_suffix = {".parquet": "parquet", ".arrow": "arrow", ".csv": "csv", ".json": "sharegpt"}
    if suffix == ".parquet":   # SPEED-Bench ships parquet: its own columns say so
        first = next(iter(read_parquet(path)), None)
        return "speedbench" if first is not None and looks_like_speedbench(first[1]) else "parquet"
    if suffix in by_suffix:
        return by_suffix[suffix]
    if suffix != ".jsonl":
        raise UserError(f"cannot tell the format of {path} from its name; pass --format ({', '.join(FORMATS[1:])})")
    first = next(iter(read_jsonl(path)), None)
    if first is None:
        raise UserError(f"{path}: the file holds no records")
    _, record = first
    if looks_like_speedbench(record):
        return "speedbench"
    if isinstance(record, dict) and "turns" in record:
        categories = {str(r.get("category")) for _, r in read_jsonl(path) if isinstance(r, dict)}
        return "specbench" if categories & SPEC_BENCH_ONLY or not categories <= set(MT_BENCH_DOMAINS) else "mtbench"
    if isinstance(record, dict) and "conversations" in record:
        return "sharegpt"
    return "jsonl"


def _records(path: Path, fmt: str) -> Iterator[Located]:
    if fmt == "sharegpt" and path.suffix.lower() != ".jsonl":
        return read_json_array(path)
    if fmt == "speedbench":   # the dataset's own parquet files, or JSONL rows
        return read_parquet(path) if path.suffix.lower() == ".parquet" else read_jsonl(path)
    readers = {"jsonl": read_jsonl, "sharegpt": read_jsonl, "mtbench": read_jsonl, "specbench": read_jsonl,
               "parquet": read_parquet, "arrow": read_arrow, "datasets": read_datasets_dir, "csv": read_csv}
    return readers[fmt](path)


def import_suite(path: str | Path, name: str, *, fmt: str = "auto", domain: str | None = None,
                 max_tokens: int = 256, version: int = 1, description: str | None = None) -> Suite:
    """Read the prompt file ``path`` into a suite named ``name``; a bad record raises :class:`UserError`
    naming the file and line (or row)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"file not found: {path}")
    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    chosen = detect_format(path) if fmt == "auto" else fmt
    flavor = chosen if chosen in {"mtbench", "specbench"} else "generic"
    defaults = ImportDefaults(domain=domain, max_tokens=max_tokens, source=f"import:{path.name}")
    if chosen == "speedbench":
        requests = tuple(speedbench_request(record, where, path, max_tokens, domain, defaults.source)
                         for where, record in _records(path, chosen))
    else:
        requests = tuple(request_from_record(record, where, defaults, flavor)
                         for where, record in _records(path, chosen))
    if not requests:
        raise UserError(f"{path}: no records to import")
    return Suite(name=name, version=version, requests=requests,
                 description=description or f"Imported from {path.name} ({chosen}, {len(requests)} requests).")

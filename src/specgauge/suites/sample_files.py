"""Random access to training samples stored on disk, without loading whole files.

A source directory holds sample files of one format (searched recursively):

* ``.jsonl`` — one JSON object a line: ``{"input_ids": [...], "loss_mask": [...]}`` (tokenized) or
  ``{"messages": [...]}`` / ``{"conversations": [...]}`` (text). A first pass records the byte
  offset of every line (a chunked scan for newlines); samples are then read with one seek each.
* ``.npy`` — a 2-D integer array, one sample a row (negative ids are padding and dropped),
  memory-mapped; or an object array of 1-D integer arrays (loaded whole, with pickle: trusted files only).
* ``.npz`` — ``input_ids`` flat 1-D + ``offsets`` (n+1 boundaries) + optional flat ``loss_mask``
  (memory-mapped when the archive is stored uncompressed, as ``np.savez`` writes it); or
  ``input_ids`` / ``loss_mask`` object arrays (loaded whole, with pickle).
* ``.parquet`` / ``.arrow`` (a ``datasets`` directory saved with ``save_to_disk`` is arrow files)
  — columns ``input_ids`` (+ ``loss_mask``) or ``messages`` / ``conversations``; read a row group
  or record batch at a time (arrow files memory-mapped).
* ``.pt`` — ``torch.load(weights_only=True, mmap=True)`` of a list of 1-D tensors, or a dict with
  ``input_ids`` (a list of tensors, or a flat tensor with ``offsets``) and optional ``loss_mask``.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specgauge.errors import UserError, require_extra

SAMPLE_SUFFIXES = {".jsonl": "jsonl", ".npy": "npy", ".npz": "npz", ".parquet": "parquet", ".arrow": "arrow",
                   ".pt": "pt"}
# Files that describe a source rather than hold samples.
META_FILES = {"meta.json", "dataset_info.json", "state.json", "dataset_dict.json"}
SCAN_CHUNK_BYTES = 16 << 20


@dataclass(frozen=True)
class RawSample:
    """One training sample as stored: token ids (+ loss mask) or chat messages; ``where`` names file:line."""

    where: str
    input_ids: np.ndarray | None = None     # (T,) int64
    loss_mask: np.ndarray | None = None     # (T,) int8, 1 on response tokens
    messages: list[dict] | None = None      # [{"role", "content"}] or ShareGPT [{"from", "value"}]

    @property
    def kind(self) -> str:
        return "tokens" if self.input_ids is not None else "messages"


def sample_from_record(record: Any, where: str) -> RawSample:
    """Turn one stored record (a JSON object or a table row) into a :class:`RawSample`."""
    if not isinstance(record, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if record.get("input_ids") is not None:
        ids = _int_array(record["input_ids"], where, "input_ids")
        mask = record.get("loss_mask")
        mask_array = None if mask is None else _int_array(mask, where, "loss_mask").astype(np.int8)
        if mask_array is not None and mask_array.shape != ids.shape:
            raise UserError(f"{where}: loss_mask has {mask_array.size} entries but input_ids has {ids.size}")
        return RawSample(where=where, input_ids=ids, loss_mask=mask_array)
    for key in ("messages", "conversations"):
        if record.get(key) is not None:
            messages = record[key]
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise UserError(f"{where}: '{key}' must be a list of objects")
            return RawSample(where=where, messages=messages)
    raise UserError(f"{where}: a sample needs 'input_ids', 'messages' or 'conversations' "
                    f"(found keys: {', '.join(sorted(record)) or 'none'})")


def _int_array(values: Any, where: str, key: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"{where}: '{key}' must be a list of integers") from None
    if array.ndim != 1:
        raise UserError(f"{where}: '{key}' must be a flat list of integers")
    return array


class SampleFile:
    """Base of the per-format readers: ``len()`` samples, ``read(i)`` one of them."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __len__(self) -> int:
        raise NotImplementedError

    def read(self, index: int) -> RawSample:
        raise NotImplementedError


class JsonlSampleFile(SampleFile):
    """JSON lines, indexed by byte offset in one streaming pass."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        starts, ends = self._index_lines(path)
        nonblank = ends - starts > 0
        self._line_numbers = np.flatnonzero(nonblank) + 1
        self._starts, self._ends = starts[nonblank], ends[nonblank]

    @staticmethod
    def _index_lines(path: Path) -> tuple[np.ndarray, np.ndarray]:
        newline_positions: list[np.ndarray] = []
        size = 0
        try:
            with path.open("rb") as handle:
                while chunk := handle.read(SCAN_CHUNK_BYTES):
                    newline_positions.append(np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10) + size)
                    size += len(chunk)
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
        newlines = np.concatenate(newline_positions) if newline_positions else np.zeros(0, dtype=np.int64)
        starts = np.concatenate([[0], newlines + 1]).astype(np.int64)
        ends = np.concatenate([newlines, [size]]).astype(np.int64)
        return starts, _trim_blank_ends(path, starts, ends)

    def __len__(self) -> int:
        return int(self._starts.size)

    def read(self, index: int) -> RawSample:
        where = f"{self.path}:{int(self._line_numbers[index])}"
        with self.path.open("rb") as handle:  # one open a read: thousands of shards never exhaust file handles
            handle.seek(int(self._starts[index]))
            line = handle.read(int(self._ends[index] - self._starts[index]))
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{where}: not valid JSON ({getattr(exc, 'msg', exc)})") from None
        return sample_from_record(record, where)


def _trim_blank_ends(path: Path, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Lines that hold only whitespace get an end equal to their start (so they are skipped)."""
    short = np.flatnonzero(ends - starts <= 2)
    if short.size:
        with path.open("rb") as handle:
            for i in short:
                handle.seek(int(starts[i]))
                if not handle.read(int(ends[i] - starts[i])).strip():
                    ends[i] = starts[i]
    return ends


class RaggedArraySampleFile(SampleFile):
    """Samples held as ragged arrays: flat ids + offsets, rows of a 2-D array, or an object array."""

    def __init__(self, path: Path, ids: Any, offsets: np.ndarray | None, mask: Any | None) -> None:
        super().__init__(path)
        self._ids, self._offsets, self._mask = ids, offsets, mask
        if offsets is not None:
            self._count = int(offsets.size - 1)
            if self._count < 0 or int(offsets[-1]) > len(ids):
                raise UserError(f"{path}: 'offsets' do not fit 'input_ids' ({len(ids)} ids)")
        else:
            self._count = len(ids)

    def __len__(self) -> int:
        return self._count

    def read(self, index: int) -> RawSample:
        where = f"{self.path}: sample {index}"
        if self._offsets is not None:
            start, end = int(self._offsets[index]), int(self._offsets[index + 1])
            ids = np.asarray(self._ids[start:end], dtype=np.int64)
            mask = None if self._mask is None else np.asarray(self._mask[start:end], dtype=np.int8)
        else:
            ids = np.asarray(_as_numpy(self._ids[index]), dtype=np.int64).reshape(-1)
            mask = None if self._mask is None else np.asarray(_as_numpy(self._mask[index]), dtype=np.int8).reshape(-1)
            if ids.size and getattr(self._ids, "ndim", 1) == 2:   # padded rows: negative ids are padding
                keep = ids >= 0
                ids, mask = ids[keep], (None if mask is None else mask[keep])
        if mask is not None and mask.shape != ids.shape:
            raise UserError(f"{where}: loss_mask has {mask.size} entries but input_ids has {ids.size}")
        return RawSample(where=where, input_ids=ids, loss_mask=mask)


def _as_numpy(value: Any) -> Any:
    return value.numpy() if hasattr(value, "numpy") else value


def _open_npy(path: Path) -> SampleFile:
    try:
        array = np.load(path, mmap_mode="r")
    except ValueError:  # object arrays cannot be memory-mapped
        array = _load_pickled(path)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if array.dtype != object and array.ndim != 2:
        raise UserError(f"{path}: a .npy file must be a 2-D id array (one sample a row) or an object array")
    return RaggedArraySampleFile(path, array, None, None)


def _load_pickled(path: Path) -> Any:
    try:
        return np.load(path, allow_pickle=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is bad input
        raise UserError(f"cannot read {path}: {' '.join(str(exc).split())}") from None


def _npz_member(path: Path, archive: zipfile.ZipFile, key: str) -> np.ndarray | None:
    """Member ``key`` of an .npz: memory-mapped when stored uncompressed, else read whole."""
    name = f"{key}.npy"
    if name not in archive.namelist():
        return None
    info = archive.getinfo(name)
    if info.compress_type == zipfile.ZIP_STORED:
        with path.open("rb") as handle:
            handle.seek(info.header_offset)
            local_header = handle.read(30)
            name_len = int.from_bytes(local_header[26:28], "little")
            extra_len = int.from_bytes(local_header[28:30], "little")
            data_start = info.header_offset + 30 + name_len + extra_len
            handle.seek(data_start)
            version = np.lib.format.read_magic(handle)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(handle)
            if not dtype.hasobject:
                return np.memmap(path, dtype=dtype, mode="r", offset=handle.tell(), shape=shape,
                                 order="F" if fortran else "C")
    with archive.open(name) as member:
        return np.lib.format.read_array(member, allow_pickle=True)


def _open_npz(path: Path) -> SampleFile:
    try:
        with zipfile.ZipFile(path) as archive:
            ids = _npz_member(path, archive, "input_ids")
            offsets = _npz_member(path, archive, "offsets")
            mask = _npz_member(path, archive, "loss_mask")
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if ids is None:
        raise UserError(f"{path}: an .npz file needs an 'input_ids' array (with 'offsets' when flat)")
    if ids.dtype != object and offsets is None and ids.ndim != 2:
        raise UserError(f"{path}: flat 'input_ids' needs an 'offsets' array (sample boundaries, n+1 entries)")
    return RaggedArraySampleFile(path, ids, None if offsets is None else np.asarray(offsets, dtype=np.int64), mask)


def _open_pt(path: Path) -> SampleFile:
    require_extra("engine", "torch")
    import torch

    try:
        try:
            data = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
        except RuntimeError:  # legacy (non-zip) files cannot be memory-mapped
            data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - unpickling errors come in many types
        raise UserError(f"cannot read {path}: {' '.join(str(exc).split())[:200]}") from None
    if isinstance(data, (list, tuple)):
        return RaggedArraySampleFile(path, list(data), None, None)
    if isinstance(data, dict) and "input_ids" in data:
        ids, mask, offsets = data["input_ids"], data.get("loss_mask"), data.get("offsets")
        if offsets is not None:
            return RaggedArraySampleFile(path, ids.numpy(), np.asarray(offsets, dtype=np.int64),
                                         None if mask is None else mask.numpy())
        return RaggedArraySampleFile(path, list(ids), None, None if mask is None else list(mask))
    raise UserError(f"{path}: a .pt file must hold a list of 1-D tensors or a dict with 'input_ids'")


class TableSampleFile(SampleFile):
    """Rows of a parquet file (by row group) or an arrow file/stream (by record batch)."""

    def __init__(self, path: Path, row_counts: list[int], read_chunk) -> None:
        super().__init__(path)
        self._bounds = np.concatenate([[0], np.cumsum(row_counts)]).astype(np.int64)
        self._read_chunk = read_chunk
        self._cached: tuple[int, list[dict]] | None = None

    def __len__(self) -> int:
        return int(self._bounds[-1])

    def read(self, index: int) -> RawSample:
        chunk = int(np.searchsorted(self._bounds, index, side="right") - 1)
        if self._cached is None or self._cached[0] != chunk:
            self._cached = (chunk, self._read_chunk(chunk))
        return sample_from_record(self._cached[1][index - int(self._bounds[chunk])], f"{self.path}: row {index}")


def _table_columns(names: list[str], path: Path) -> list[str]:
    wanted = [c for c in ("input_ids", "loss_mask", "messages", "conversations") if c in names]
    if not wanted:
        raise UserError(f"{path}: no 'input_ids', 'messages' or 'conversations' column (columns: {', '.join(names)})")
    return wanted


def _open_parquet(path: Path) -> SampleFile:
    require_extra("data", "pyarrow")
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid and OSError
        raise UserError(f"cannot read {path}: {exc}") from None
    columns = _table_columns(parquet.schema_arrow.names, path)
    counts = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    return TableSampleFile(path, counts, lambda i: parquet.read_row_group(i, columns=columns).to_pylist())


def arrow_batches(path: Path) -> list:
    """The record batches of an arrow IPC file or stream (``datasets`` writes streams), memory-mapped:
    listing them copies no row data."""
    require_extra("data", "pyarrow")
    import pyarrow as pa

    try:
        source = pa.memory_map(str(path))
        try:
            reader = pa.ipc.open_file(source)
            return [reader.get_batch(i) for i in range(reader.num_record_batches)]
        except pa.ArrowInvalid:
            source.seek(0)
            return list(pa.ipc.open_stream(source))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError, ...
        raise UserError(f"cannot read {path}: {exc}") from None


def _open_arrow(path: Path) -> SampleFile:
    batches = arrow_batches(path)
    columns = _table_columns(batches[0].schema.names if batches else [], path)
    return TableSampleFile(path, [b.num_rows for b in batches],
                           lambda i: batches[i].select(columns).to_pylist())


OPENERS = {"jsonl": JsonlSampleFile, "npy": _open_npy, "npz": _open_npz, "parquet": _open_parquet,
           "arrow": _open_arrow, "pt": _open_pt}


@dataclass
class SourceData:
    """One source subdirectory: its sample files (all of one format) and optional ``meta.json``."""

    name: str
    directory: Path
    file_format: str
    files: list[SampleFile]
    meta: dict = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return sum(len(f) for f in self.files)

    def read(self, index: int) -> RawSample:
        """Sample ``index`` counted across all files of the source, in file-name order."""
        for sample_file in self.files:
            if index < len(sample_file):
                return sample_file.read(index)
            index -= len(sample_file)
        raise IndexError(index)


def discover_sources(data_dir: str | Path) -> list[SourceData]:
    """Open every source subdirectory of ``data_dir`` (sorted by name); bad layouts raise :class:`UserError`."""
    data_dir = Path(data_dir)
    if not data_dir.exists():
        raise UserError(f"training-data directory not found: {data_dir}")
    if not data_dir.is_dir():
        raise UserError(f"{data_dir} is not a directory (expected one subdirectory per source)")
    try:
        subdirs = sorted(p for p in data_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as exc:
        raise UserError(f"cannot read directory {data_dir}: {exc.strerror or exc}") from None
    if not subdirs:
        raise UserError(f"{data_dir} holds no source subdirectories (expected DIR/<source>/shard-00000.jsonl ...)")
    return [_open_source(d) for d in subdirs]


def _open_source(directory: Path) -> SourceData:
    try:
        candidates = sorted(p for p in directory.rglob("*") if p.is_file() and p.name not in META_FILES
                            and not p.name.startswith("."))
    except OSError as exc:
        raise UserError(f"cannot read directory {directory}: {exc.strerror or exc}") from None
    by_format: dict[str, list[Path]] = {}
    for path in candidates:
        fmt = SAMPLE_SUFFIXES.get(path.suffix.lower())
        if fmt is not None:
            by_format.setdefault(fmt, []).append(path)
    if not by_format:
        raise UserError(f"source {directory} has no sample files "
                        f"(expected {', '.join(sorted(SAMPLE_SUFFIXES))})")
    if len(by_format) > 1:
        found = ", ".join(f"{len(v)} {k}" for k, v in sorted(by_format.items()))
        raise UserError(f"source {directory} mixes sample formats ({found}); keep one format per source")
    (fmt, paths), = by_format.items()
    nested = sorted({p.relative_to(directory).parts[0] for p in paths if p.parent != directory})
    if len(nested) > 1 and len(nested) == len({p.relative_to(directory).parts[0] for p in paths}) \
            and not (directory / "dataset_dict.json").is_file():
        raise UserError(f"source {directory} holds sample files only in subdirectories ({', '.join(nested[:5])}): "
                        f"it looks like a data directory itself; pass {directory} as DIR")
    meta: dict = {}
    meta_path = directory / "meta.json"
    if meta_path.is_file():
        try:
            loaded = json.loads(meta_path.read_text(encoding="utf-8"))
            meta = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError) as exc:
            raise UserError(f"{meta_path}: not valid JSON ({exc})") from None
    files = [OPENERS[fmt](p) for p in paths]
    return SourceData(name=directory.name, directory=directory, file_format=fmt, files=files, meta=meta)

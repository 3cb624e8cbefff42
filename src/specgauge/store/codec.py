"""Compact encodings for per-chunk arrays stored as SQLite BLOBs.

- Chunk timestamps: the gaps between consecutive values (the first one relative to a base, the
  request's send time) as little-endian int64, zlib-compressed (level 1). Gaps are small numbers,
  so most high bytes are zero and compress well; decoding is one cumulative sum.
- Tokens per chunk: little-endian int32, zlib-compressed.

An empty list is stored as an empty BLOB.
"""

from __future__ import annotations

import zlib

import numpy as np

_COMPRESSION_LEVEL = 1


def encode_times(times_ns: list[int], base_ns: int | None) -> bytes:
    """Encode monotonic ns timestamps as zlib'd int64 deltas from ``base_ns`` (0 when None)."""
    if not times_ns:
        return b""
    values = np.asarray(times_ns, dtype=np.int64)
    deltas = np.diff(values, prepend=np.int64(base_ns or 0))
    return zlib.compress(deltas.astype("<i8").tobytes(), _COMPRESSION_LEVEL)


def decode_times(blob: bytes | None, base_ns: int | None) -> list[int]:
    """Inverse of :func:`encode_times`."""
    if not blob:
        return []
    deltas = np.frombuffer(zlib.decompress(blob), dtype="<i8")
    return (np.cumsum(deltas) + np.int64(base_ns or 0)).tolist()


def encode_counts(counts: list[int]) -> bytes:
    """Encode per-chunk token counts as zlib'd little-endian int32."""
    if not counts:
        return b""
    return zlib.compress(np.asarray(counts, dtype="<i4").tobytes(), _COMPRESSION_LEVEL)


def decode_counts(blob: bytes | None) -> list[int]:
    """Inverse of :func:`encode_counts`."""
    if not blob:
        return []
    return np.frombuffer(zlib.decompress(blob), dtype="<i4").tolist()

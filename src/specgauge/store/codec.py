"""Compact encodings for per-chunk arrays stored as SQLite BLOBs.

Both arrays are stored as *packed little-endian signed integers of the smallest width that
holds every value*: one header byte giving the width (1, 2, 4 or 8), then the values.

- Chunk timestamps (``chunk_times``): the gaps between consecutive chunk timestamps in ns, the
  first one from the request's send time. Gaps under 2.1 s fit in 4 bytes (half the raw int64
  size); decoding is one cumulative sum.
- Tokens per chunk (``chunk_tokens``): usually 1 byte each.

An empty list is an empty BLOB. No zlib: on a few hundred values it saves little over the
narrow width and costs ~10 µs per request inside the event loop (measured in
``benchmarks/store_overhead.py``).
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate, chain
from operator import sub

_SWAP = sys.byteorder != "little"  # stored little-endian on every machine
_TYPECODES = ((1, "b"), (2, "h"), (4, "i"), (8, "q"))
_BY_WIDTH = dict(_TYPECODES)


def pack_ints(values) -> bytes:
    """Pack signed integers at the smallest of 1/2/4/8 bytes each, after a one-byte width header."""
    values = values if isinstance(values, list) else list(values)
    if not values:
        return b""
    low, high = min(values), max(values)
    for width, typecode in _TYPECODES:
        limit = 1 << (8 * width - 1)
        if -limit <= low and high < limit:
            break
    else:
        raise OverflowError(f"value out of int64 range: {low if low < -(1 << 63) else high}")
    packed = array(typecode, values)
    if _SWAP:
        packed.byteswap()
    return bytes((width,)) + packed.tobytes()


def unpack_ints(blob: bytes | None) -> list[int]:
    """Inverse of :func:`pack_ints`."""
    if not blob:
        return []
    typecode = _BY_WIDTH.get(blob[0])
    if typecode is None:
        raise ValueError(f"not a packed integer array (width byte {blob[0]})")
    values = array(typecode)
    values.frombytes(blob[1:])
    if _SWAP:
        values.byteswap()
    return values.tolist()


def encode_times(times_ns: list[int], base_ns: int | None) -> bytes:
    """Encode monotonic ns timestamps as packed deltas, the first from ``base_ns`` (0 when None)."""
    if not times_ns:
        return b""
    return pack_ints(list(map(sub, times_ns, chain((base_ns or 0,), times_ns))))


def decode_times(blob: bytes | None, base_ns: int | None) -> list[int]:
    """Inverse of :func:`encode_times`."""
    deltas = unpack_ints(blob)
    return list(accumulate(deltas, initial=base_ns or 0))[1:] if deltas else []


def encode_counts(counts: list[int]) -> bytes:
    """Encode per-chunk token counts (packed, usually one byte each)."""
    return pack_ints(counts)


def decode_counts(blob: bytes | None) -> list[int]:
    """Inverse of :func:`encode_counts`."""
    return unpack_ints(blob)

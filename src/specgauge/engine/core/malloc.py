"""Keep freed memory in the process (glibc ``mallopt``), so big step temporaries are not page-faulted in every step.

A decode step at high concurrency gathers every sequence's K/V into temporaries of tens of MB.
glibc serves allocations that large with ``mmap`` and returns them with ``munmap`` on free, so
the next step faults every page in again: at 64 streams that was a third of the step's time,
spent in the kernel. With mmap disabled and the trim threshold raised, freed blocks stay in the
heap and the next step reuses them. The process keeps its peak heap instead of shrinking back,
which is what a server wants — and not what a process that goes on to do other work wants:
:func:`restore_malloc_defaults` undoes it (``train draft`` regenerates responses with an engine,
then keeps gigabytes of target outputs and trains; with mmap still off, its heap fragmented to
19.7 GB resident for 4.2 GB of kept outputs).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
# glibc's defaults (malloc/malloc.c: DEFAULT_MMAP_MAX 65536, DEFAULT_TRIM_THRESHOLD 128 KiB)
DEFAULT_MMAP_MAX = 65536
DEFAULT_TRIM_THRESHOLD = 128 * 1024
_done = False


def _glibc() -> ctypes.CDLL | None:
    """glibc with ``mallopt`` typed, or None where there is none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory() -> bool:
    """Tune glibc's allocator once per process; False where there is no glibc (macOS, musl)."""
    global _done
    if _done:
        return True
    libc = _glibc()
    if libc is None:
        return False
    _done = bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**30))
    return _done


def restore_malloc_defaults() -> bool:
    """Undo :func:`keep_freed_memory` (large blocks mmap'd again, the heap trimmed back) once the
    engine that wanted it has stopped; False where nothing was tuned."""
    global _done
    libc = _glibc() if _done else None
    if libc is None:
        return False
    libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
    libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    libc.malloc_trim(0)
    _done = False
    return True

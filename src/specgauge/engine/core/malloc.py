"""Keep freed memory in the process (glibc ``mallopt``), so big step temporaries are not page-faulted in every step.

A decode step at high concurrency gathers every sequence's K/V into temporaries of tens of MB.
glibc serves allocations that large with ``mmap`` and returns them with ``munmap`` on free, so
the next step faults every page in again: at 64 streams that was a third of the step's time,
spent in the kernel. With mmap disabled and the trim threshold raised, freed blocks stay in the
heap and the next step reuses them. The process keeps its peak heap instead of shrinking back,
which is what a server wants.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
_done = False


def keep_freed_memory() -> bool:
    """Tune glibc's allocator once per process; False where there is no glibc (macOS, musl)."""
    global _done
    if _done:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**30))
    return _done

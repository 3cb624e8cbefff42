"""Refuse, before anything starts, a load this machine cannot open (file descriptors, memory).

Each connection of a point is one open file of this process, and each stream in flight holds its
connection, task, buffers and record. A closed-loop point opens ``concurrency`` connections at once
(an open-loop point ``--max-concurrency``, else up to 256 before its window), so the point with the
largest pool decides. Without this check ``--concurrency 1000000000`` died in a ``MemoryError``
traceback while the pool was being opened.
"""

from __future__ import annotations

import os
import resource
from typing import Iterable

from specgauge.errors import UserError
from specgauge.load.plan import PointSpec

RESERVED_FDS = 64                  # the store, the event loop, stdio, probes, the tokenizer...
BYTES_PER_CONNECTION = 64 * 1024   # an allowance per stream in flight (see docs/bench.md)


def available_memory_bytes() -> int | None:
    """Memory the kernel says is available (``MemAvailable``), else free pages; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_capacity(specs: Iterable[PointSpec], option: str = "--concurrency") -> None:
    """Raise :class:`UserError` (one line) when the largest point needs more open files than this
    process may have, or more memory than is available. Raises the soft open-file limit up to the
    hard one when that is enough."""
    connections = max((spec.pool_size for spec in specs), default=0)
    needed_fds = connections + RESERVED_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    memory = available_memory_bytes()
    needed_memory = connections * BYTES_PER_CONNECTION
    if memory is not None and needed_memory > memory:
        raise UserError(f"{option}: {connections:,} connections need about {needed_memory / 2**30:,.1f} GiB "
                        f"({BYTES_PER_CONNECTION // 1024} KiB each), and {memory / 2**30:,.1f} GiB is available; "
                        f"lower {option}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or needed_fds <= soft:
        return
    refusal = UserError(f"{option}: {connections:,} connections need about {needed_fds:,} open files, and this "
                        f"process may open at most {hard if hard != resource.RLIM_INFINITY else soft:,} "
                        f"(ulimit -n / -Hn); lower {option} or raise the limit")
    if hard != resource.RLIM_INFINITY and needed_fds > hard:
        raise refusal
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed_fds, hard))
    except (ValueError, OSError):  # above the kernel's nr_open, say
        raise refusal from None

"""The engine's allocator tuning is undone for processes that go on to other work (train draft)."""

import json
import subprocess
import sys

import pytest

# Runs in a child process: the tuning is process-wide and the test process must keep its own.
CHILD = r"""
import ctypes, json, os
from specgauge.engine.core.malloc import keep_freed_memory, restore_malloc_defaults

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
page = os.sysconf("SC_PAGE_SIZE")
size = 256 << 20

def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page

def churn():
    block = libc.malloc(size)
    ctypes.memset(block, 1, size)
    libc.free(block)
    return resident()

base = resident()
tuned = keep_freed_memory()
kept = churn()
restored = restore_malloc_defaults()
after_restore = resident()
after_churn = churn()
print(json.dumps({"tuned": tuned, "restored": restored, "again": restore_malloc_defaults(),
                  "base": base, "kept": kept, "after_restore": after_restore, "after_churn": after_churn}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux-only")
def test_freed_memory_is_kept_while_tuned_and_returned_once_restored():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True)
    r = json.loads(out.stdout)
    assert r["tuned"] and r["restored"] and not r["again"]  # a second restore has nothing to undo
    mib = 1 << 20
    assert r["kept"] - r["base"] > 200 * mib  # tuned: the freed 256 MiB stays in the heap
    assert r["after_restore"] - r["base"] < 64 * mib  # restored: trimmed back
    assert r["after_churn"] - r["base"] < 64 * mib  # and a large block goes back to the OS on free

"""The in-place paged attention kernel (``csrc/paged_attention.cpp``): built, loaded, selected.

Decode and verify rows attend over the paged KV pool where its blocks lie: for each
(sequence, query row, kv head) the kernel walks the row's block table and reads key and value
rows straight out of the layer's pool ``(Hkv, S, D)`` — no ``index_select`` gather, no padded
``(B, Hkv, Tk, D)`` copy, no SDPA call per group.

**Why it is batch invariant.** One task computes one query row for the q heads of one kv head,
alone: over the row's *visible* keys only (additive mask not ``-inf``; masked keys — the
group's padding, the future, a tree's other branches — are skipped, not added as zeros), in
ascending position order, each dot product summed over 16 fixed lanes and then a fixed pairwise
tree, the softmax's max, sum and weighted value sum taken key by key in that same order. Every
operation a row's result depends on is thus fixed by the row's own query, its visible keys and
the compiled code — not by the batch size, the row count of its group (a k-token verify row gets
the bits a 1-token decode row gets at that position), the group's padded width, the row's place,
nor which thread computes it (no sum crosses tasks). The compiled code is fixed per machine: one
of an AVX-512, an AVX2+FMA and a plain x86-64 clone, picked once at load time from the CPU's
flags (GCC ``target_clones``), so bits may differ between machines, never within a process.

The kernel handles fp32 queries and an fp32 pool on CPU; anything else (bf16 K/V, a GPU) keeps
the gather path. It is built on first use with ``torch.utils.cpp_extension`` (gcc) into the
project cache (``.cache/engine-kernels/``; ``python -m specgauge.engine.models.paged_kernel``
builds it ahead of use); a failed build falls back to the gather path, and ``attention_path()``
says which path runs and why (``serve``'s start line and ``/server_info`` show it).

``SPECGAUGE_PAGED_ATTENTION=gather`` selects the gather path for the process; benchmarks switch
paths within one run with :func:`select_path`.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import torch

SOURCE = Path(__file__).resolve().parent / "csrc" / "paged_attention.cpp"
PATHS = ("inplace", "gather")
ENV = "SPECGAUGE_PAGED_ATTENTION"

_state: dict = {"path": None, "module": None, "error": None, "loaded": False}


def _build_dir() -> Path:
    from specgauge.shipped_models import cache_dir

    digest = hashlib.sha256(SOURCE.read_bytes() + torch.__version__.encode()).hexdigest()[:12]
    return cache_dir() / "engine-kernels" / f"paged_attention-{digest}"


MODULE = "specgauge_paged_attention"
# torch's build lock (``build_dir/lock``, ``FileBaton`` in torch/utils/cpp_extension.py) is a file a
# build creates and removes; a build killed half-way leaves it, and every later ``load`` of
# torch's would wait on it for ever. A lock older than this is such a leftover; a younger one is
# another process's build, waited for until the module appears, for at most BUILD_WAIT_S.
STALE_LOCK_S = 900
BUILD_WAIT_S = 600


def _import_built(build: Path) -> object | None:
    """The module already built in ``build`` (imported directly: no lock, no ninja), or None."""
    import importlib.util

    library = build / f"{MODULE}.so"
    if not library.is_file():
        return None
    spec = importlib.util.spec_from_file_location(MODULE, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wait_for_other_build(build: Path) -> object | None:
    """While another process's build holds the lock: its module once it appears. A stale lock
    (older than STALE_LOCK_S) is removed; a build that outlasts BUILD_WAIT_S is an error."""
    import time

    lock = build / "lock"
    deadline = time.monotonic() + BUILD_WAIT_S
    while True:
        try:
            age_s = time.time() - lock.stat().st_mtime
        except FileNotFoundError:
            return _import_built(build)
        if age_s > STALE_LOCK_S:
            lock.unlink(missing_ok=True)   # left by a killed build: its library, if whole, else a build
            try:
                return _import_built(build)
            except ImportError:
                return None
        if time.monotonic() > deadline:
            raise TimeoutError(f"another process held the kernel build lock {lock} for over {BUILD_WAIT_S} s")
        time.sleep(0.5)


def load() -> object | None:
    """The compiled kernel module (built on first use, then cached), or None where it cannot be
    built or loaded (the reason is kept for :func:`attention_path`)."""
    if _state["loaded"]:
        return _state["module"]
    _state["loaded"] = True
    try:
        from torch.utils.cpp_extension import load as load_extension

        build = _build_dir()
        build.mkdir(parents=True, exist_ok=True)
        # a library beside a lock may be half-written by the build holding it: wait for that first
        module = _wait_for_other_build(build) if (build / "lock").exists() else _import_built(build)
        if module is None:
            module = load_extension(
                name=MODULE, sources=[str(SOURCE)], build_directory=str(build),
                extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False)
        _state["module"] = module
    except Exception as error:  # noqa: BLE001 - any build or load failure means: use the gather path
        _state["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
    return _state["module"]


def select_path(path: str) -> None:
    """Make ``path`` ('inplace' or 'gather') the attention path of this process's later steps."""
    if path not in PATHS:
        raise ValueError(f"attention path must be one of {', '.join(PATHS)}, not {path!r}")
    _state["path"] = path


def selected_path() -> str:
    """The path asked for: :func:`select_path`'s, else ``$SPECGAUGE_PAGED_ATTENTION``, else 'inplace'."""
    if _state["path"] is None:
        wanted = os.environ.get(ENV, "inplace").strip().lower() or "inplace"
        if wanted not in PATHS:
            print(f"specgauge: ignoring {ENV}={wanted!r} (expected inplace or gather)", file=sys.stderr)
            wanted = "inplace"
        _state["path"] = wanted
    return _state["path"]


def kernel() -> object | None:
    """The kernel to use for fp32 CPU attention now: the module when the in-place path is selected
    and built, else None (the gather path)."""
    if selected_path() != "inplace":
        return None
    return load()


def attention_path(attention_dtype: torch.dtype, device: torch.device | str = "cpu") -> str:
    """One line saying how decode/verify attention reads the KV pool for a model attending in
    ``attention_dtype`` on ``device`` (for ``serve``'s start line and ``/server_info``)."""
    if torch.device(device).type != "cpu" or attention_dtype != torch.float32:
        return "gather (the in-place kernel handles fp32 on CPU only)"
    if selected_path() != "inplace":
        return f"gather (selected by {ENV})" if os.environ.get(ENV) else "gather (selected)"
    if load() is None:
        return f"gather (in-place kernel unavailable: {_state['error']})"
    return "in-place paged"


def can_run(q: torch.Tensor, k_layer: torch.Tensor) -> bool:
    """Whether the kernel handles these tensors (fp32, CPU, a contiguous pool)."""
    return (q.device.type == "cpu" and k_layer.dtype == torch.float32 and k_layer.is_contiguous())


if __name__ == "__main__":
    module = load()
    print(f"paged attention kernel: {'built in ' + str(_build_dir()) if module else 'unavailable: ' + str(_state['error'])}")
    sys.exit(0 if module else 1)

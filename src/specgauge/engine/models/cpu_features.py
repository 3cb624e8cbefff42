"""What this CPU offers the engine's kernels, read once from ``/proc/cpuinfo``."""

from __future__ import annotations

import functools
from pathlib import Path

import torch


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where ``/proc/cpuinfo`` cannot be read)."""
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX) and torch has oneDNN: then
    bf16 matmuls are both faster than fp32 and batch-invariant in oneDNN's kernels (see
    ``linear_is_batch_invariant``)."""
    flags = cpu_flags()
    return ("avx512_bf16" in flags or "amx_bf16" in flags) and torch.backends.mkldnn.is_available()


def has_amx_bf16() -> bool:
    """Whether this CPU has AMX tiles for bf16 (Intel Sapphire Rapids and later)."""
    return "amx_bf16" in cpu_flags()


def attention_dtype(device: torch.device, dtype: torch.dtype) -> torch.dtype:
    """The dtype a model computing in ``dtype`` attends in (and keeps its K/V in) on ``device``.

    CPU SDPA in bf16 runs on AMX tiles where the CPU has them: 1.3-1.8x faster than in fp32
    (decodes, verify runs and 32-row prompt blocks, 256-3,072 keys; benchmarks/attention_dtype.py
    on an Intel Xeon with AMX). Without AMX its bf16 kernel took 5x the fp32 time (AMD EPYC with
    AVX512-BF16, 2026-12-02): fp32 there, and for fp16 and fp32 models. Elsewhere (CUDA) ``dtype``."""
    if device.type != "cpu":
        return dtype
    return torch.bfloat16 if dtype == torch.bfloat16 and has_amx_bf16() else torch.float32

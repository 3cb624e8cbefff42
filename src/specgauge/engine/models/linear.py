"""The matrix products of the engine's cached path: dense ``F.linear``, or weights packed once
as fp16 for FBGEMM.

On CPUs without native bf16 the engine computes in fp32, and MKL's fp32 GEMM there is slow for
the 1-16 rows of a decode or verify step (its cost grows about 2x from 1 row to 7). FBGEMM's
fp16-weight GEMM keeps the weights packed once, as fp16, and multiplies fp32 activations with
fp32 accumulation. It reads half the bytes, and costs 0.22-0.54x of MKL's time at 1-7 rows,
0.7-0.85x at 64 rows, about the same at 256 rows on an AVX2-only AMD EPYC
(``benchmarks/linear_packing.py`` on the shipped models' shapes; docs/engine.md).

fp16 holds every bf16 value in its normal range exactly; only weights below 2^-14 in magnitude
(fp16 subnormals) move, by at most 2^-25. So ``auto`` packs only checkpoints whose weights are
all bf16 values (the shipped ones are): the model computed is the checkpoint's up to those few
tiny weights and fp32 summation order, the same order of change as MKL switching kernels with
the row count. Weights trained in fp32 would be rounded to fp16's 11 bits; ``auto`` leaves them dense.
"""

from __future__ import annotations

import functools
import warnings
from typing import Iterable

import torch
import torch.nn.functional as F

PACKINGS = ("auto", "none", "fp16")
FP16_MAX = 65504.0


class PackedFP16:
    """A weight (out, in) packed for FBGEMM's fp16-weight GEMM, with the zero bias it takes."""

    __slots__ = ("packed", "bias", "shape")

    def __init__(self, weight: torch.Tensor) -> None:
        if not fp16_packing_supported():
            raise RuntimeError("this torch build or CPU has no FBGEMM fp16-weight matmul")
        self.shape = tuple(weight.shape)
        self.packed = torch.fbgemm_pack_gemm_matrix_fp16(weight.detach().float().contiguous())
        self.bias = torch.zeros(weight.shape[0])


def linear(x: torch.Tensor, weight: "torch.Tensor | PackedFP16") -> torch.Tensor:
    """``x @ weight.T`` for x (N, in): dense or packed."""
    if isinstance(weight, PackedFP16):
        return torch.fbgemm_linear_fp16_weight(x, weight.packed, weight.bias)
    return F.linear(x, weight)


@functools.cache
def fp16_packing_supported() -> bool:
    """Whether FBGEMM's fp16-weight GEMM works here (x86 CPU builds of torch with AVX2), probed
    once. torch calls its two entry points deprecated, with a warning issued once per process: the
    probe takes that warning, so the engine's log stays clean. They are used over the non-deprecated
    ``torch.ops.quantized.linear_dynamic_fp16``, the same kernel, which spends ~18 µs more per call
    on dispatch (24 µs against 7 µs for 320x320, one row): more than the product itself."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            packed = torch.fbgemm_pack_gemm_matrix_fp16(torch.ones(8, 8))
            out = torch.fbgemm_linear_fp16_weight(torch.ones(1, 8), packed, torch.zeros(8))
        return torch.equal(out, torch.full((1, 8), 8.0))
    except (AttributeError, RuntimeError):
        return False


def bf16_valued(weights: Iterable[torch.Tensor]) -> bool:
    """True when every weight is a bf16 value within fp16's range (fp16 then holds it exactly,
    or within 2^-25 below 2^-14)."""
    with torch.no_grad():
        return all(torch.equal(w, w.to(torch.bfloat16).to(w.dtype)) and float(w.abs().max()) <= FP16_MAX
                   for w in weights)


def choose_packing(requested: str, device: torch.device, dtype: torch.dtype,
                   weights: Iterable[torch.Tensor]) -> str:
    """The packing a model's linears get: ``requested`` as validated by the engine config, with
    ``auto`` = ``fp16`` for fp32 compute on CPU when supported and every weight is a bf16 value."""
    if requested != "auto":
        return requested
    if device.type != "cpu" or dtype != torch.float32 or not fp16_packing_supported():
        return "none"
    return "fp16" if bf16_valued(weights) else "none"


def pack(weight: torch.Tensor, packing: str) -> "torch.Tensor | PackedFP16":
    """``weight`` as the step's matmul takes it under ``packing`` ("none" or "fp16")."""
    return PackedFP16(weight) if packing == "fp16" else weight

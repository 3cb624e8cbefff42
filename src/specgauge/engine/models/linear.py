"""The matrix products of the engine's cached path: dense ``F.linear``, weights packed once as
fp16 for FBGEMM (fp32 compute), or bf16 weights reordered once into oneDNN's blocked layout.

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

Where the engine computes in bf16 on CPU (one with native bf16: AMX or AVX512-BF16), ``F.linear``
hands oneDNN a plain (out, in) matrix, which oneDNN lays out again for its kernel on every call.
``onednn`` does that once, as PyTorch's own compiler does for bf16 linears on CPU
(``torch.ops.mkldnn._reorder_linear_weight`` and ``_linear_pointwise``, in
torch/_inductor/fx_passes/mkldnn_fusion.py): 0.59-0.78x of ``F.linear``'s time at 1-32 rows with
the weights out of cache (``benchmarks/linear_packing.py --dtype bfloat16``), and a row's bits the
same at every row count, where ``F.linear``'s are not (:class:`PackedOneDNN`). ``auto`` takes it
for bf16 on CPU.
"""

from __future__ import annotations

import functools
import warnings
from typing import Iterable

import torch
import torch.nn.functional as F

PACKINGS = ("auto", "none", "fp16", "onednn")
FP16_MAX = 65504.0
# oneDNN's reordered bf16 product gives a row the same bits at every row count only up to a point
# that falls as the inner dimension grows (Intel Xeon with AMX, torch 2.13, random bf16 operands:
# inner 1,536 first differs at 130 rows, 2,048 at 117, 4,096 at 134; inner 576 nowhere up to
# 1,024): a step's rows go through it in slices of at most this many, where every slice is exact.
ONEDNN_ROW_SLICE = 64


class PackedFP16:
    """A weight (out, in) packed for FBGEMM's fp16-weight GEMM, with the zero bias it takes."""

    __slots__ = ("packed", "bias", "shape")

    def __init__(self, weight: torch.Tensor) -> None:
        if not fp16_packing_supported():
            raise RuntimeError("this torch build or CPU has no FBGEMM fp16-weight matmul")
        self.shape = tuple(weight.shape)
        self.packed = torch.fbgemm_pack_gemm_matrix_fp16(weight.detach().float().contiguous())
        self.bias = torch.zeros(weight.shape[0])


class PackedOneDNN:
    """A bf16 weight (out, in) reordered once into oneDNN's blocked layout for its bf16 GEMM.

    Probed on an Intel Xeon with AMX (torch 2.13, every matrix shape of the shipped models, 1 to
    1,024 rows, ``benchmarks/linear_packing.py --dtype bfloat16`` and tests/engine/test_linear_packing.py):
    the reordered product gives a row the same bits at every row count up to ``ONEDNN_ROW_SLICE``
    and beyond for inner dimensions below 1,024 (so :func:`linear` slices larger steps), equal to
    ``F.linear``'s one-row product (on an AMD EPYC with AVX512-BF16 and no AMX, one shape's
    one-row kernel sums otherwise: :func:`single_row_sums_differently`, so a lone row goes
    through as two); ``F.linear`` on the plain weight does not — for inner dimensions of 512 and
    more it sums differently at 33 to 319 rows (to 704 rows for 640), so a 40-row step's token
    differs in its last bits from the same token decoded alone. Whether a model's matmuls are
    batch-invariant is probed for each of its shapes (``LlamaForCausalLM.prepare_for_inference``)."""

    __slots__ = ("packed", "shape", "pad_single_row")

    def __init__(self, weight: torch.Tensor) -> None:
        if not onednn_packing_supported():
            raise RuntimeError("this torch build or CPU has no oneDNN bf16 matmul on reordered weights")
        self.shape = tuple(weight.shape)
        self.pad_single_row = single_row_sums_differently(self.shape)
        # the batch-size hint picks oneDNN's layout; one made for 1 row (a decode) served 1-32 rows
        # as fast as one made for their own count (a one-off measure, all 25 matrices of a
        # specgauge-9m-4k step: 1.22 against 1.22 ms at 1 row, 1.49 against 1.56 ms at 32)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(torch.bfloat16).contiguous(), 1)


def _reordered_product(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


@functools.cache
def single_row_sums_differently(shape: tuple[int, int]) -> bool:
    """Whether oneDNN's reordered bf16 product of this (out, in) shape gives a row other bits
    alone than among 2-64 rows, probed once per shape with random operands (64 rows, each also
    alone). oneDNN picks its kernel by shape and ISA, not by values. Seen on an AMD EPYC with
    AVX512-BF16 and no AMX (torch 2.13, 2026-12-06): SmolLM2's down projection (576 x 1,536)
    differed in 3-12 of 64 rows alone, while every row count from 2 to 64 agreed; its other
    matrices (inner 576) and every shape on the Intel Xeon with AMX agreed alone too."""
    generator = torch.Generator().manual_seed(0)
    weight = (torch.randn(*shape, generator=generator) * 0.05).bfloat16()
    packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
    x = torch.randn(64, shape[1], generator=generator).bfloat16()
    with torch.no_grad():
        together = _reordered_product(x, packed)
        return any(not torch.equal(_reordered_product(x[i:i + 1], packed), together[i:i + 1]) for i in range(64))


def _reordered_rows(x: torch.Tensor, weight: "PackedOneDNN") -> torch.Tensor:
    """One slice of at most ``ONEDNN_ROW_SLICE`` rows; a lone row goes through as two (itself
    twice) where this shape's one-row kernel sums differently, so that a decode's row has the bits
    the same row has inside a verify or a batch."""
    if x.shape[0] == 1 and weight.pad_single_row:
        return _reordered_product(x.expand(2, -1).contiguous(), weight.packed)[:1]
    return _reordered_product(x, weight.packed)


def linear(x: torch.Tensor, weight: "torch.Tensor | PackedFP16 | PackedOneDNN") -> torch.Tensor:
    """``x @ weight.T`` for x (N, in): dense or packed."""
    if isinstance(weight, PackedOneDNN):
        if x.shape[0] <= ONEDNN_ROW_SLICE:
            return _reordered_rows(x, weight)
        return torch.cat([_reordered_rows(part, weight) for part in x.split(ONEDNN_ROW_SLICE)])
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


@functools.cache
def onednn_packing_supported() -> bool:
    """Whether oneDNN's bf16 GEMM on reordered weights runs here (a torch with oneDNN), probed once."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")):
        return False
    try:
        with torch.no_grad():
            weight = torch.ones(8, 8, dtype=torch.bfloat16)
            got = _reordered_product(torch.ones(1, 8, dtype=torch.bfloat16),
                                     torch.ops.mkldnn._reorder_linear_weight(weight, 1))
        return torch.equal(got, torch.full((1, 8), 8.0, dtype=torch.bfloat16))
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
    """The packing the linears computing in ``dtype`` get: ``requested`` as validated by the
    engine config where it applies to ``dtype`` (``fp16`` to fp32, ``onednn`` to bf16; the
    EAGLE-3 head also holds an fp32 set beside a bf16 one), else as ``auto`` resolves: ``onednn``
    for bf16 on CPU when supported, ``fp16`` for fp32 on CPU when supported and every weight is a
    bf16 value, else ``none``."""
    if requested == "none" or (requested, dtype) in (("fp16", torch.float32), ("onednn", torch.bfloat16)):
        return requested
    if device.type != "cpu":
        return "none"
    if dtype == torch.bfloat16:
        return "onednn" if onednn_packing_supported() else "none"
    if dtype != torch.float32 or not fp16_packing_supported():
        return "none"
    return "fp16" if bf16_valued(weights) else "none"


def pack(weight: torch.Tensor, packing: str) -> "torch.Tensor | PackedFP16 | PackedOneDNN":
    """``weight`` as the step's matmul takes it under ``packing`` ("none", "fp16" or "onednn")."""
    if packing == "fp16":
        return PackedFP16(weight)
    return PackedOneDNN(weight) if packing == "onednn" else weight

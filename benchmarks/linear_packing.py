"""The engine's matmuls with dense weights and with packed ones, side by side.

    PYTHONPATH=src python benchmarks/linear_packing.py                       # fp32: MKL against FBGEMM fp16
    PYTHONPATH=src python benchmarks/linear_packing.py --dtype bfloat16      # bf16: oneDNN, plain against reordered
    PYTHONPATH=src python benchmarks/linear_packing.py --model specgauge-9m-4k --rows 1,7,64 --threads 2

For every weight shape of a shipped target (``--model``) and its drafter, the same activations
times the same bf16-valued weights, dense (``F.linear``) and packed — ``--weight-packing fp16`` for
``--dtype float32``, ``onednn`` for ``--dtype bfloat16`` — interleaved call by call so machine
load falls on both alike. The weights cycle through enough copies to leave the cache, as in a
real step, where every matrix is read once. Prints µs per call and the packed/dense ratio, and
how the two results differ: fp32, the largest difference relative to the output's scale
(summation order only: the weights are bf16 values, which fp16 holds); bf16, the cells whose
bits differ. ``benchmarks/head_weight_sets.py`` sets the two packed forms against each other for
the EAGLE-3 head.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from benchkit.weight_shapes import COPIES, shapes  # noqa: E402

from specgauge.engine.models.linear import (PackedFP16, PackedOneDNN, fp16_packing_supported, linear,  # noqa: E402
                                             onednn_packing_supported)
from specgauge.shipped_models import DEFAULT_MODEL  # noqa: E402

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="a shipped model name (its target's and drafter's shapes)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--rows", default="1,2,4,7,16,64,256", help="activation rows (tokens in the step)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200, help="calls per arm and cell")
    args = parser.parse_args()
    bf16 = args.dtype == "bfloat16"
    if bf16 and not onednn_packing_supported():
        raise SystemExit("this torch build or CPU has no oneDNN bf16 matmul on reordered weights")
    if not bf16 and not fp16_packing_supported():
        raise SystemExit("this torch build has no FBGEMM fp16 matmul (torch.fbgemm_pack_gemm_matrix_fp16)")
    dtype, packing = (torch.bfloat16, PackedOneDNN) if bf16 else (torch.float32, PackedFP16)
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {args.model}, {args.dtype}, {args.threads} thread(s); µs per call, "
          f"median of {args.calls} interleaved calls")
    worst, differing = 0.0, []
    print(f"{'matmul':>15} {'out x in':>10} " + " ".join(f"{f'{r} rows':>20}" for r in rows))
    for name, out, inp in shapes(args.model):
        dense = [(torch.randn(out, inp, generator=generator) * 0.05).bfloat16().to(dtype) for _ in range(COPIES)]
        packed = [packing(w) for w in dense]
        cells = []
        for r in rows:
            x = torch.randn(r, inp, generator=generator).to(dtype)
            times = {"dense": [], "packed": []}
            for call in range(args.calls + 10):
                i = call % COPIES
                arms = (("dense", dense), ("packed", packed))
                for arm, weights in (arms if call % 2 else arms[::-1]):  # who goes first alternates
                    started = time.perf_counter()
                    linear(x, weights[i])
                    if call >= 10:
                        times[arm].append(time.perf_counter() - started)
            a, b = (1e6 * statistics.median(times[arm]) for arm in ("dense", "packed"))
            reference, got = F.linear(x, dense[0]), linear(x, packed[0])
            worst = max(worst, float((got.float() - reference.float()).abs().max() / reference.float().abs().max()))
            if not torch.equal(got, reference):
                differing.append(f"{name} at {r} rows")
            cells.append(f"{a:6.0f}/{b:5.0f} {b / a:4.2f}x")
        print(f"{name:>15} {f'{out}x{inp}':>10} " + " ".join(f"{c:>20}" for c in cells))
    print("cells: dense µs / packed µs, packed/dense")
    if bf16:
        print(f"cells whose bits differ: {', '.join(differing) or 'none'}")
    else:
        print(f"largest |packed - dense| / max|dense| over all cells: {worst:.1e}")


if __name__ == "__main__":
    main()

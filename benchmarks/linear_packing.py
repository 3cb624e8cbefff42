"""The engine's matmuls with dense fp32 weights (MKL) and with fp16-packed weights (FBGEMM), side by side.

    PYTHONPATH=src python benchmarks/linear_packing.py
    PYTHONPATH=src python benchmarks/linear_packing.py --rows 1,7,64 --threads 2

For every weight shape of the shipped target and drafter, the same activations (fp32) times the
same bf16-valued weights, dense (``F.linear``) and packed (``--weight-packing fp16``), interleaved
call by call so machine load falls on both alike. The weights cycle through enough copies to
leave the cache, as in a real step, where every matrix is read once. Prints µs per call and the
packed/dense ratio, and the largest difference between the two results relative to the output's
scale (summation order only: the weights are bf16 values, which fp16 holds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from specgauge.engine.models.linear import PackedFP16, fp16_packing_supported, linear  # noqa: E402

ASSETS = ROOT / "src" / "specgauge" / "assets"
COPIES = 24  # weight copies cycled through: more than the last-level cache holds for the big shapes


def shapes() -> list[tuple[str, int, int]]:
    """(name, out, in) of the shipped target's fused matmuls and the drafter's."""
    t = json.loads((ASSETS / "target" / "config.json").read_text())
    d = json.loads((ASSETS / "draft" / "config.json").read_text())
    h, heads, kv = t["hidden_size"], t["num_attention_heads"], t["num_key_value_heads"]
    head_dim = h // heads
    return [("target qkv", (heads + 2 * kv) * head_dim, h), ("target o", h, h),
            ("target gate_up", 2 * t["intermediate_size"], h), ("target down", h, t["intermediate_size"]),
            ("target lm_head", t["vocab_size"], h), ("draft fc", d["hidden_size"], 3 * h),
            ("draft qkv", (heads + 2 * kv) * head_dim, 2 * h), ("draft gate_up", 2 * d["intermediate_size"], h),
            ("draft lm_head", d["draft_vocab_size"], h)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1,2,4,7,16,64,256", help="activation rows (tokens in the step)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200, help="calls per arm and cell")
    args = parser.parse_args()
    if not fp16_packing_supported():
        raise SystemExit("this torch build has no FBGEMM fp16 matmul (torch.ops.quantized.linear_prepack_fp16)")
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s); µs per call, median of {args.calls} interleaved calls")
    worst = 0.0
    print(f"{'matmul':>15} {'out x in':>10} " + " ".join(f"{f'{r} rows':>20}" for r in rows))
    for name, out, inp in shapes():
        dense = [(torch.randn(out, inp, generator=generator) * 0.05).bfloat16().float() for _ in range(COPIES)]
        packed = [PackedFP16(w) for w in dense]
        cells = []
        for r in rows:
            x = torch.randn(r, inp, generator=generator)
            times = {"dense": [], "packed": []}
            for call in range(args.calls + 10):
                i = call % COPIES
                for arm, weights in (("dense", dense), ("packed", packed)):
                    started = time.perf_counter()
                    linear(x, weights[i])
                    if call >= 10:
                        times[arm].append(time.perf_counter() - started)
            a, b = (1e6 * statistics.median(times[arm]) for arm in ("dense", "packed"))
            reference = F.linear(x, dense[0])
            worst = max(worst, float((linear(x, packed[0]) - reference).abs().max() / reference.abs().max()))
            cells.append(f"{a:6.0f}/{b:5.0f} {b / a:4.2f}x")
        print(f"{name:>15} {f'{out}x{inp}':>10} " + " ".join(f"{c:>20}" for c in cells))
    print("cells: dense µs / packed µs, packed/dense")
    print(f"largest |packed - dense| / max|dense| over all cells: {worst:.1e}")


if __name__ == "__main__":
    main()

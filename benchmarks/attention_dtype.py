"""CPU SDPA in fp32 against bf16 on the engine's call shapes, side by side in one run.

    PYTHONPATH=src python benchmarks/attention_dtype.py
    PYTHONPATH=src python benchmarks/attention_dtype.py --keys 256,1024,3072 --calls 200

The engine's batch-invariant attention (engine/models/attention.py) makes three kinds of SDPA
call per layer and sequence: a decode (1 query row per head), a verify run of R rows folded into
the head axis (R one-row queries per head), and a prompt block (32 query rows against the keys
up to the block's end). For each at ``--keys`` keys, the shapes of ``specgauge-9m-4k`` (8 query
heads on 4 KV heads of 64), the same random inputs in both dtypes (bf16 values), the two dtypes
alternating call by call. Printed: µs per call (median) and bf16/fp32. Then, in bf16, the three
facts batch invariance rests on: a row folded among others equals the row alone; a row's output
does not change with masked keys past its last visible one; a row of a 32-row block does not
depend on the other rows' values.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 8, 4, 64, 32


def causal(positions: list[int], width: int, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask (1, 1, len(positions), width): -inf past each row's position."""
    rows = torch.tensor(positions).view(-1, 1)
    return torch.zeros(len(positions), width).masked_fill_(torch.arange(width) > rows, float("-inf")).view(
        1, 1, len(positions), width).to(dtype)


def calls(keys: int, verify_rows: int, generator: torch.Generator) -> dict[str, tuple]:
    """(q, k, v, mask) in fp32 (bf16 values) for each kind of call at ``keys`` keys."""
    k = torch.randn(1, KV_HEADS, keys, HEAD_DIM, generator=generator).bfloat16().float()
    v = torch.randn(1, KV_HEADS, keys, HEAD_DIM, generator=generator).bfloat16().float()
    rand = lambda *shape: torch.randn(*shape, generator=generator).bfloat16().float()  # noqa: E731
    last = keys - 1
    verify = list(range(last - verify_rows + 1, last + 1))
    folded = causal(verify, keys, torch.float32).expand(1, HEADS, verify_rows, keys).reshape(
        1, HEADS * verify_rows, 1, keys)
    return {"decode": (rand(1, HEADS, 1, HEAD_DIM), k, v, causal([last], keys, torch.float32)),
            f"verify {verify_rows} rows": (rand(1, HEADS * verify_rows, 1, HEAD_DIM), k, v, folded),
            "prompt block": (rand(1, HEADS, BLOCK, HEAD_DIM), k, v, causal(list(range(keys - BLOCK, keys)), keys,
                                                                             torch.float32))}


def attend(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


def invariance_facts(generator: torch.Generator) -> dict[str, bool]:
    """The three properties of bf16 SDPA that batch-invariant attention relies on."""
    dt = torch.bfloat16
    k, v = (torch.randn(1, KV_HEADS, 1024, HEAD_DIM, generator=generator).to(dt) for _ in range(2))
    q = torch.randn(1, HEADS, 5, HEAD_DIM, generator=generator).to(dt)
    positions, width = [600, 601, 602, 603, 604], 608
    mask = causal(positions, width, dt)
    folded = attend(q.reshape(1, HEADS * 5, 1, HEAD_DIM), k[:, :, :width], v[:, :, :width],
                    mask.expand(1, HEADS, 5, width).reshape(1, HEADS * 5, 1, width)).view(1, HEADS, 5, HEAD_DIM)
    alone = torch.cat([attend(q[:, :, i:i + 1], k[:, :, :width], v[:, :, :width], mask[:, :, i:i + 1])
                       for i in range(5)], dim=2)
    one = [attend(q[:, :, :1], k[:, :, :w], v[:, :, :w], causal([600], w, dt)) for w in (608, 624, 640, 1024)]
    block_q = torch.randn(1, HEADS, BLOCK, HEAD_DIM, generator=generator).to(dt)
    block_mask = causal(list(range(608, 640)), 640, dt)
    full = attend(block_q, k[:, :, :640], v[:, :, :640], block_mask)
    lone = torch.zeros_like(block_q)
    lone[:, :, 5] = block_q[:, :, 5]
    return {"a folded row equals the row alone": torch.equal(folded, alone),
            "masked keys past a row do not change it (608, 624, 640, 1024 keys)": all(torch.equal(o, one[0]) for o in one),
            "a block row does not depend on the other rows": torch.equal(
                attend(lone, k[:, :, :640], v[:, :, :640], block_mask)[:, :, 5], full[:, :, 5])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", default="256,1024,2048,3072")
    parser.add_argument("--verify-rows", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100, help="calls per dtype and cell")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s); µs per SDPA call, median of {args.calls} "
          f"interleaved calls; {HEADS} query heads on {KV_HEADS} KV heads of {HEAD_DIM}")
    for keys in (int(k) for k in args.keys.split(",")):
        cells = []
        for name, inputs in calls(keys, args.verify_rows, generator).items():
            arms = {torch.float32: inputs, torch.bfloat16: tuple(t.bfloat16() for t in inputs)}
            times = {dtype: [] for dtype in arms}
            for call in range(args.calls + 5):
                for dtype in (list(arms) if call % 2 else list(arms)[::-1]):
                    started = time.perf_counter()
                    attend(*arms[dtype])
                    if call >= 5:
                        times[dtype].append(time.perf_counter() - started)
            a, b = (1e6 * statistics.median(times[dtype]) for dtype in arms)
            cells.append(f"{name} {a:.0f}/{b:.0f} ({b / a:.2f}x)")
        print(f"{keys:>5} keys: " + ", ".join(cells))
    print("cells: fp32 µs / bf16 µs (bf16/fp32)")
    for fact, holds in invariance_facts(generator).items():
        print(f"bf16: {fact}: {holds}")


if __name__ == "__main__":
    main()

"""One layer's decode and verify attention over the paged KV pool: the earlier token-major layout
and its gather, against the head-major layout's gather and its view, in one run.

    PYTHONPATH=src python benchmarks/kv_layout.py
    PYTHONPATH=src python benchmarks/kv_layout.py --contexts 256,1024,3072 --rows 1,5

Shapes of ``specgauge-9m-4k`` (8 query heads, 4 kv heads, head dim 64; blocks of 16 tokens; fp32
K/V), 1 thread, row-wise attention (the batch-invariant path for generated rows). Per context
length and query row count, the median time of:

* **token-major gather**: the pool as it was, ``(S, Hkv, D)`` per layer; a step gathered the
  sequence's blocks (``index_select`` over ``(blocks, bs, Hkv, D)``) into a ``(1, Hkv, Tk, D)``
  view with strided heads — reproduced here as the reference;
* **head-major gather**: :func:`paged_attention` on the pool as it is, ``(Hkv, S, D)``, the
  sequence's blocks scattered (a gather, but of one contiguous run per head);
* **head-major view**: :func:`paged_attention` for a sequence whose blocks are consecutive (one
  stream): its keys a view of the pool, no gather.

It also checks that all three give the same bits.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from specgauge.engine.core.kv_cache import ForwardBatch, build_group  # noqa: E402
from specgauge.engine.models.attention import paged_attention, rowwise_attention  # noqa: E402

HQ, HKV, D, BS = 8, 4, 64, 16


def timed(fn, repeats: int) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--contexts", default="256,1024,3072", help="cached tokens, comma-separated")
    parser.add_argument("--rows", default="1,5", help="query rows per step (1: a decode, 1+k: a verify)")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    num_blocks = 3 * (4096 // BS + 1)
    print(f"1 layer, {HQ} query / {HKV} kv heads, head dim {D}, blocks of {BS}, fp32 K/V, 1 thread; median of {args.repeats}")
    print(f"{'context':>8} {'rows':>5} {'token-major gather':>19} {'head-major gather':>18} {'head-major view':>16} "
          f"{'earlier/view':>13} {'same bits':>10}")
    for context in [int(c) for c in args.contexts.split(",")]:
        for rows in [int(r) for r in args.rows.split(",")]:
            total = context + rows
            nb = -(-total // BS)
            scattered = list(range(0, 2 * nb, 2))         # every other block: a gather
            consecutive = list(range(2 * nb, 3 * nb))      # one run: a view
            pool_k, pool_v = torch.zeros(HKV, num_blocks * BS, D), torch.zeros(HKV, num_blocks * BS, D)
            seq_k, seq_v = torch.randn(HKV, nb, BS, D), torch.randn(HKV, nb, BS, D)  # the sequence's cached K/V
            for table in (scattered, consecutive):
                pool_k.view(HKV, num_blocks, BS, D)[:, table] = seq_k
                pool_v.view(HKV, num_blocks, BS, D)[:, table] = seq_v
            old_k, old_v = pool_k.transpose(0, 1).contiguous(), pool_v.transpose(0, 1).contiguous()  # (S, Hkv, D)
            q = torch.randn(rows, HQ, D)
            k_new, v_new = torch.randn(rows, HKV, D), torch.randn(rows, HKV, D)
            results, seconds = {}, {}
            for name, table in (("head-major gather", scattered), ("head-major view", consecutive)):
                group, positions, slots = build_group(0, rows, [context], [table], BS, torch.device("cpu"))
                batch = ForwardBatch(torch.zeros(rows, dtype=torch.long), positions, slots, [group], torch.zeros(0))
                assert (group.first_block is not None) == (name == "head-major view")
                run = lambda batch=batch: paged_attention(q, k_new, v_new, pool_k, pool_v, batch, BS, torch.float32, True)
                results[name] = run()
                seconds[name] = timed(run, args.repeats)
            group, positions, slots = build_group(0, rows, [context], [scattered], BS, torch.device("cpu"))
            blocks = group.block_table.reshape(-1)

            def token_major():
                old_k.index_copy_(0, slots, k_new)
                old_v.index_copy_(0, slots, v_new)
                kg = old_k.view(-1, BS, HKV, D).index_select(0, blocks).view(1, -1, HKV, D).transpose(1, 2)
                vg = old_v.view(-1, BS, HKV, D).index_select(0, blocks).view(1, -1, HKV, D).transpose(1, 2)
                out = rowwise_attention(q.view(1, rows, HQ, D).transpose(1, 2), kg, vg, group.mask)
                return out.transpose(1, 2).reshape(rows, HQ * D)

            results["token-major gather"] = token_major()
            seconds["token-major gather"] = timed(token_major, args.repeats)
            same = all(torch.equal(results["token-major gather"], r) for r in results.values())
            ms = {name: s * 1e3 for name, s in seconds.items()}
            print(f"{context:>8} {rows:>5} {ms['token-major gather']:>17.3f}ms {ms['head-major gather']:>16.3f}ms "
                  f"{ms['head-major view']:>14.3f}ms {ms['token-major gather'] / ms['head-major view']:>12.2f}x {str(same):>10}")


if __name__ == "__main__":
    main()

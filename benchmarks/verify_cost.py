"""What a verify step costs against a one-token decode, on one model, in-process, side by side.

    PYTHONPATH=src python benchmarks/verify_cost.py                        # smollm2-135m, default dtype
    PYTHONPATH=src python benchmarks/verify_cost.py --model specgauge-8m --rows 1,2,4,5,6,8 --context 512

One request's cached forward (the engine's own path: ``LlamaForCausalLM.forward_cached`` over the
paged KV pool, weights packed as the engine packs them, batch-invariant attention where the model
is) over R new generated tokens after ``--context`` tokens of prompt, for each R in ``--rows``,
the row counts interleaved repeat by repeat so a drifting machine falls on all alike. Printed:
the median time of each and its ratio to R = 1. Speculation pays on a step that costs little
more for k + 1 rows than for one: a chain of k drafts breaks even at ``ratio(k+1)`` tokens per
step before the drafter's own cost.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from specgauge.engine.core.block_manager import BlockManager  # noqa: E402
from specgauge.engine.core.engine import EngineConfig  # noqa: E402
from specgauge.engine.core.kv_cache import KVCache  # noqa: E402
from specgauge.engine.core.model_runner import ModelRunner  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.core.scheduler import Request, ScheduledSeq  # noqa: E402
from specgauge.engine.models.llama import load_model  # noqa: E402
from specgauge.shipped_models import get_shipped  # noqa: E402

BLOCK = 16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--rows", default="1,2,4,5,6,8")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    target_dir = get_shipped(args.model).target_dir
    dtype = EngineConfig(model_dir=str(target_dir), dtype=args.dtype).torch_dtype  # auto: the engine's default
    model = load_model(target_dir, dtype=dtype)
    rows = [int(r) for r in args.rows.split(",")]
    total = args.context + max(rows)
    model.prepare_for_inference(total + BLOCK, packing="auto")
    num_blocks = total // BLOCK + 2
    blocks = BlockManager(num_blocks, BLOCK)
    cache = KVCache(model.config.num_hidden_layers, num_blocks, BLOCK, model.config.num_key_value_heads,
                    model.config.head_size, model.attention_dtype, "cpu")
    runner = ModelRunner(model, cache, blocks)
    ids = torch.randint(10, model.config.vocab_size, (total,), generator=torch.Generator().manual_seed(0)).tolist()
    request = Request("r", ids[:args.context], SamplingParams(max_tokens=max(rows)))

    def forward(start: int, count: int) -> float:
        blocks.grow("r", start + count)
        batch = runner.lay_out([ScheduledSeq(request, start, count)]).batch
        batch.logit_indices = torch.arange(count)
        started = time.perf_counter()
        with torch.inference_mode():
            model.forward_cached(batch, cache)
        return time.perf_counter() - started

    forward(0, args.context)  # the prompt, once
    request.output_ids = ids[args.context:]   # the generated tokens the verify rows stand for
    times: dict[int, list[float]] = {r: [] for r in rows}
    for _ in range(args.repeats):
        for r in rows:
            times[r].append(forward(args.context, r))
    base = statistics.median(times[rows[0]])
    print(f"{args.model}: {str(dtype).removeprefix('torch.')}, packing {model.weight_packing}, batch-invariant "
          f"{model.batch_invariant}, {args.threads} thread(s), context {args.context}, {args.repeats} repeats")
    print(f"{'rows':>5} {'median ms':>10} {'vs 1 row':>9}")
    for r in rows:
        median = statistics.median(times[r])
        print(f"{r:>5} {median * 1e3:>10.2f} {median / base:>8.2f}x")


if __name__ == "__main__":
    main()

"""What MKL's reproducible mode (MKL_CBWR=AUTO,STRICT, which specgauge.engine sets) costs and
buys: decode steps and their attention with it and without, side by side.

    PYTHONPATH=src python benchmarks/mkl_reproducible.py                 # smollm2-135m, 1 and 16 streams
    PYTHONPATH=src python benchmarks/mkl_reproducible.py --streams 1,4,16 --rounds 4
    PYTHONPATH=src python benchmarks/mkl_reproducible.py --dtype float32   # fp32 weights: MKL's GEMMs too

MKL reads MKL_CBWR once, at its first call, so each setting runs in its own child process (the
mode off is an empty MKL_CBWR, which MKL ignores and specgauge.engine leaves alone); children of
both settings alternate round by round so a drifting machine falls on both alike. Each child
loads the model as the engine does, prefills ``--streams`` sequences of ``--context`` tokens and
times one-token decode steps of all of them (the engine's own cached forward; the row-wise
attention path in both settings wherever the matmuls allow it, as the engine took it before it
probed attention too), then the SDPA call
such a step makes in each layer (one-row queries of every sequence against its keys, in the
attention dtype). Printed: medians per setting and their ratio, and whether
``attention_is_batch_invariant`` held for fp32 and bf16 in each.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BLOCK = 16
SETTINGS = {"off": "", "AUTO,STRICT": "AUTO,STRICT"}


def child(args: argparse.Namespace) -> dict:
    sys.path.insert(0, str(SRC))
    import specgauge.engine  # noqa: F401  (sets MKL_CBWR unless the parent set it, empty included)
    import torch
    import torch.nn.functional as F

    from specgauge.engine.core.block_manager import BlockManager
    from specgauge.engine.core.engine import EngineConfig
    from specgauge.engine.core.kv_cache import KVCache
    from specgauge.engine.core.model_runner import ModelRunner
    from specgauge.engine.core.sampling_params import SamplingParams
    from specgauge.engine.core.scheduler import Request, ScheduledSeq
    from specgauge.engine.models.attention import attention_is_batch_invariant, linear_is_batch_invariant
    from specgauge.engine.models.llama import load_model
    from specgauge.shipped_models import get_shipped

    torch.set_num_threads(args.threads)
    target_dir = get_shipped(args.model).target_dir
    dtype = EngineConfig(model_dir=str(target_dir), dtype=args.dtype).torch_dtype  # auto: the engine's default
    model = load_model(target_dir, dtype=dtype)
    streams = [int(s) for s in args.streams.split(",")]
    most = max(streams)
    per_seq = args.context // BLOCK + 2
    model.prepare_for_inference(args.context + BLOCK, packing="auto")
    blocks = BlockManager(per_seq * most, BLOCK)
    cache = KVCache(model.config.num_hidden_layers, per_seq * most, BLOCK, model.config.num_key_value_heads,
                    model.config.head_size, model.attention_dtype, "cpu")
    invariant = model.batch_invariant
    # both settings time the same attention path: the row-wise one wherever the matmuls allow it
    _, qkv, o, _, gate_up, down = model._layer_weights[0]
    model.batch_invariant = all(linear_is_batch_invariant(w) for w in (qkv, o, gate_up, down, model._lm_head_w))
    runner = ModelRunner(model, cache, blocks)
    generator = torch.Generator().manual_seed(0)
    requests = []
    for i in range(most):
        ids = torch.randint(10, model.config.vocab_size, (args.context + 1,), generator=generator).tolist()
        request = Request(f"r{i}", ids[:args.context], SamplingParams(max_tokens=1))
        blocks.grow(request.request_id, args.context + 1)
        requests.append(request)

    def forward(seqs: list) -> float:
        batch = runner.lay_out(seqs).batch
        batch.logit_indices = torch.arange(len(seqs))
        started = time.perf_counter()
        with torch.inference_mode():
            model.forward_cached(batch, cache)
        return time.perf_counter() - started

    for request in requests:
        forward([ScheduledSeq(request, 0, args.context)])  # its prompt, once
        request.output_ids = [request.prompt_ids[-1]]
    n_q, n_kv, d = model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_size
    step: dict[int, list[float]] = {s: [] for s in streams}
    sdpa: dict[int, list[float]] = {s: [] for s in streams}
    keys = -(-(args.context + 1) // BLOCK) * BLOCK
    for _ in range(args.repeats):
        for s in streams:
            step[s].append(forward([ScheduledSeq(r, args.context, 1) for r in requests[:s]]))
            q = torch.randn(s, n_q, 1, d, generator=generator).to(model.attention_dtype)
            k, v = (torch.randn(s, n_kv, keys, d, generator=generator).to(model.attention_dtype) for _ in range(2))
            started = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            sdpa[s].append(time.perf_counter() - started)
    return {"step": {s: statistics.median(t) for s, t in step.items()},
            "sdpa": {s: statistics.median(t) for s, t in sdpa.items()},
            "invariant": {"float32": attention_is_batch_invariant(torch.float32),
                          "bfloat16": attention_is_batch_invariant(torch.bfloat16)},
            "dtype": str(dtype).removeprefix("torch."), "packing": model.weight_packing,
            "attention": str(model.attention_dtype).removeprefix("torch."),
            "batch_invariant": invariant, "rowwise": model.batch_invariant}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto",
                        help="the model's dtype (auto: the engine's default here); float32 weights are MKL's")
    parser.add_argument("--streams", default="1,16")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    results: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for _ in range(args.rounds):
        for name, value in SETTINGS.items():
            out = subprocess.run([sys.executable, __file__, "--child", *sys.argv[1:]], check=True, text=True,
                                 capture_output=True, env={**os.environ, "MKL_CBWR": value}).stdout
            results[name].append(json.loads(out.splitlines()[-1]))
    first = results["off"][0]
    print(f"{args.model}: {first['dtype']} weights ({first['packing']}), {first['attention']} attention, "
          f"{args.threads} thread(s), "
          f"context {args.context}, {args.rounds} rounds x {args.repeats} repeats a setting")
    for name, runs in results.items():
        print(f"MKL_CBWR {name or 'off'}: attention batch-invariant fp32 "
              f"{[r['invariant']['float32'] for r in runs]}, bf16 {[r['invariant']['bfloat16'] for r in runs]}; "
              f"model batch_invariant {[r['batch_invariant'] for r in runs]}, "
              f"steps timed row-wise {[r['rowwise'] for r in runs]}")
    print(f"{'streams':>7} {'step off ms':>12} {'step on ms':>11} {'on/off':>7} "
          f"{'sdpa off ms':>12} {'sdpa on ms':>11} {'on/off':>7}")
    for s in args.streams.split(","):
        off, on = ([statistics.median(r[kind][s] for r in results[name]) for kind in ("step", "sdpa")]
                   for name in SETTINGS)
        print(f"{s:>7} {off[0] * 1e3:>12.2f} {on[0] * 1e3:>11.2f} {on[0] / off[0]:>6.2f}x "
              f"{off[1] * 1e3:>12.3f} {on[1] * 1e3:>11.3f} {on[1] / off[1]:>6.2f}x")


if __name__ == "__main__":
    main()

"""Single-stream greedy decode: the embedded engine against transformers, same weights, side by side.

    PYTHONPATH=src python benchmarks/engine_vs_transformers.py                     # smollm2-135m
    PYTHONPATH=src python benchmarks/engine_vs_transformers.py --dtypes bfloat16,float32 --threads 1

For each dtype, in one process and alternating request by request (so a drifting machine falls on
both alike): the engine (``Engine``, plain decoding, the packing ``auto`` picks) and transformers'
``LlamaForCausalLM.generate`` (KV cache, greedy) decode ``--tokens`` tokens after each of
``--prompts`` chat prompts of the coding suite (each stops at EOS or ``--tokens``). Printed: decode
tokens/s of each (the prompt's prefill excluded: the engine's first step, transformers' time to its
first token), their ratio, and whether the two produced the same tokens.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.shipped_models import get_shipped  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def engine_decode(engine: Engine, prompt: list[int], tokens: int) -> tuple[float, list[int]]:
    """Seconds per decode step of one greedy request alone (first step, the prefill, excluded),
    and its output ids. The engine is stepped here, without its thread: what a step produced comes
    back as its updates (sinks are called by the thread's loop only)."""
    engine.submit(engine.new_request_id("bench"), prompt, SamplingParams(max_tokens=tokens, temperature=0.0),
                  lambda event: None)
    engine.drain_inbox(block=False)
    updates = engine.step()
    steps = []
    while engine.scheduler.has_work:
        started = time.perf_counter()
        updates = engine.step() or updates
        steps.append(time.perf_counter() - started)
    return statistics.median(steps), list(updates[0].request.output_ids)


def transformers_decode(model, prompt: list[int], tokens: int) -> tuple[float, list[int]]:
    """Seconds per decoded token of ``generate`` (greedy, KV cache), its first token's time excluded."""
    ids = torch.tensor([prompt])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        started = time.perf_counter()
        model.generate(ids, attention_mask=mask, max_new_tokens=1, do_sample=False, pad_token_id=0)
        first = time.perf_counter() - started
        started = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=tokens, do_sample=False, pad_token_id=0)
        total = time.perf_counter() - started
    produced = out.shape[1] - len(prompt)
    return (total - first) / max(1, produced - 1), out[0, len(prompt):].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    import transformers

    torch.set_num_threads(args.threads)
    model = get_shipped(args.model)
    requests = load_suite("coding").requests[:args.prompts]
    print(f"{args.model}, {args.threads} thread(s), {args.prompts} coding prompts x {args.tokens} tokens, greedy")
    print(f"{'dtype':>9} {'engine tok/s':>13} {'transformers tok/s':>19} {'ratio':>7} {'same tokens':>12}")
    for dtype in args.dtypes.split(","):
        engine = Engine(EngineConfig(model_dir=str(model.target_dir), threads=args.threads, dtype=dtype))
        reference = transformers.LlamaForCausalLM.from_pretrained(model.target_dir, dtype=getattr(torch, dtype)).eval()
        ours, theirs, same = [], [], 0
        for request in requests:
            messages = [{"role": m.role, "content": m.content} for m in request.messages]
            prompt = engine.tokenizer.encode(engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True))
            step, out_engine = engine_decode(engine, prompt, args.tokens)
            per_token, out_reference = transformers_decode(reference, prompt, args.tokens)
            ours.append(1 / step)
            theirs.append(1 / per_token)
            same += out_engine == out_reference
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{dtype:>9} {a:>13.1f} {b:>19.1f} {a / b:>6.2f}x {same:>7}/{len(requests)}")


if __name__ == "__main__":
    main()

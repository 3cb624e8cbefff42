"""Prefill time of one prompt, prompt rows attended in 32-row blocks against row by row, in one run.

    PYTHONPATH=src python benchmarks/prefill_attention.py                       # specgauge-9m-4k
    PYTHONPATH=src python benchmarks/prefill_attention.py --lengths 256,1024,3072 --repeats 3

Where the model is batch-invariant (bf16 on a CPU with native bf16), the engine attends prompt
rows in position-aligned blocks (``prompt_block_attention``) and generated rows one by one; until
then every row was row-wise. One engine (1 thread) serves both ways: the row-wise way by telling
its runner that no row is a prompt row, which is exactly the earlier path. Per prompt length, the
two ways alternate ``--repeats`` times on the same prompt (agentic suite prompts, joined and cut),
each a whole request of ``max_tokens`` 1 (the prefill plus one sampled token). Printed: the median
wall time of each way, their ratio, and whether both gave the same first token.
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

from head_cost import prompt_of_length  # noqa: E402  (this folder: the agentic suite's prompts, joined and cut)


def prefill(engine: Engine, name: str, prompt: list[int]) -> tuple[float, int]:
    """Wall seconds of one request of ``max_tokens`` 1, and its token."""
    tokens: list[int] = []
    engine.submit(name, prompt, SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True),
                  lambda update: tokens.extend(update.new_token_ids))
    engine._drain_inbox(block=False)
    started = time.perf_counter()
    while engine.scheduler.has_work:
        engine.step()
    return time.perf_counter() - started, tokens[-1] if tokens else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="specgauge-9m-4k", help="a shipped model name")
    parser.add_argument("--lengths", default="256,1024,2048,3072", help="prompt lengths in tokens, comma-separated")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each way per length")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = get_shipped(args.model)
    engine = Engine(EngineConfig(model_dir=str(model.target_dir), threads=1))
    if not engine.model.batch_invariant:
        raise SystemExit("this machine's engine is not batch-invariant (no native bf16): both ways are the same path")
    runner = engine.runner
    blocked = runner.prompt_rows
    ways = {"blocked": blocked, "row-wise": lambda seq: 0}
    requests = load_suite("agentic").requests
    print(f"{args.model}: 1 thread, dtype {engine.config.torch_dtype}, {args.repeats} runs of each way per length")
    print(f"{'prompt':>7} {'blocked':>10} {'row-wise':>10} {'row-wise/blocked':>17} {'same token':>11}")
    counter = 0
    for length in [int(n) for n in args.lengths.split(",")]:
        prompt = prompt_of_length(engine.tokenizer, requests, length, 0)
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        first: dict[str, set[int]] = {way: set() for way in ways}
        for _ in range(args.repeats):
            for way, rows in ways.items():
                runner.prompt_rows = rows
                counter += 1
                took, token = prefill(engine, f"p{counter}", prompt)
                seconds[way].append(took)
                first[way].add(token)
        runner.prompt_rows = blocked
        b, r = statistics.median(seconds["blocked"]), statistics.median(seconds["row-wise"])
        print(f"{length:>7} {b * 1e3:>8.0f}ms {r * 1e3:>8.0f}ms {r / b:>16.2f}x {str(first['blocked'] == first['row-wise']):>11}")


if __name__ == "__main__":
    main()

"""Single-stream decode tok/s of speculative configurations in-process (no HTTP), interleaved.

    PYTHONPATH=src python benchmarks/spec_inprocess.py                              # shipped models
    PYTHONPATH=src python benchmarks/spec_inprocess.py --configs plain,k3,k5p30 --suite encyclopedic --prompts 12
    PYTHONPATH=src python benchmarks/spec_inprocess.py --configs plain@none,k6p15@none,plain@fp16,k6p15@fp16

Each configuration is an :class:`Engine` of the shipped target (1 thread) built once; the
prompts of ``--suite`` run one at a time through every configuration in turn (request by
request, so drifting machine load falls on all alike), ``Engine.step`` driven here. A
configuration is ``plain``, ``ngram`` or ``k<steps>p<percent>`` (EAGLE-3 chain of up to
``steps`` drafts with ``--speculative-min-draft-prob percent/100``; ``k4p0`` = a fixed chain of 4),
with a trailing ``ad`` for ``--speculative-adaptive``, and ``@none`` or ``@fp16`` for the
engine's ``--weight-packing`` (default ``auto``). Prints each one's median decode tok/s
(tokens after the first / time after the first step), its ratio to ``plain`` (to ``plain@X``
for a configuration ``...@X`` when that is run too), the median of the per-prompt ratios and its
decode tokens per step (the acceptance length: tokens per verify).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

TARGET = ROOT / "src" / "specgauge" / "assets" / "target"


def build(name: str, draft: str | None) -> Engine:
    """The engine a configuration name describes (see the module docstring)."""
    name, _, packing = name.partition("@")
    if name == "plain":
        spec = SpeculativeConfig()
    elif name == "ngram":
        spec = SpeculativeConfig(algorithm="NGRAM", num_steps=5)
    else:
        match = re.fullmatch(r"k(\d+)p(\d+)(ad)?", name)
        if not match:
            raise SystemExit(f"unknown configuration {name!r} (plain, ngram, k<steps>p<percent>[ad])")
        spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=int(match[1]), min_draft_prob=int(match[2]) / 100,
                                 adaptive=bool(match[3]), draft_model_path=draft)
    return Engine(EngineConfig(model_dir=str(TARGET), threads=1, speculative=spec, weight_packing=packing or "auto"))


def decode_rate(engine: Engine, prompt: list[int], tokens: int) -> tuple[float, int, int]:
    """One greedy request alone: decode tokens per second after its first step, and the decode
    tokens and steps (tokens per step = the request's acceptance length after its first token)."""
    engine.submit("r", prompt, SamplingParams(max_tokens=tokens, temperature=0.0), lambda event: None)
    engine._drain_inbox(block=False)
    engine.step()  # prefill + first token
    started, count, steps = time.perf_counter(), 0, 0
    while engine.scheduler.has_work:
        count += sum(len(update.new_token_ids) for update in engine.step())
        steps += 1
    return count / (time.perf_counter() - started), count, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="plain,k3p0,k4p0,k5p0,k5p30,ngram")
    parser.add_argument("--suite", default="coding")
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--draft", default=None, help="EAGLE-3 head directory (default: the shipped drafter)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.configs.split(",")
    if not any(name.partition("@")[0] == "plain" for name in names):
        names.insert(0, "plain")
    engines = {name: build(name, args.draft) for name in names}
    suite = fitting_suite(load_suite(args.suite), TARGET, args.tokens)  # the requests that fit the context
    first = next(iter(engines.values()))
    tokenizer = first.tokenizer
    prompts = [tokenizer.encode(render_prompt(tokenizer, suite.requests[(i * 7) % len(suite.requests)]))
               for i in range(args.prompts)]
    for engine in engines.values():  # warm-up: lazy allocations, the adaptive arm's first measurements
        decode_rate(engine, prompts[0], args.tokens)
    rates = {name: [] for name in engines}
    counts = {name: [0, 0] for name in engines}  # decode tokens, decode steps
    for prompt in prompts:
        for name, engine in engines.items():
            rate, count, steps = decode_rate(engine, prompt, args.tokens)
            rates[name].append(rate)
            counts[name][0] += count
            counts[name][1] += steps
    print(f"{suite.name} ({len(suite.requests)} requests fit): {len(prompts)} prompts x {args.tokens} tokens, greedy, 1 thread, "
          f"dtype {first.config.torch_dtype}")
    for name, values in rates.items():
        _, at, packing = name.partition("@")
        baseline = f"plain{at}{packing}" if f"plain{at}{packing}" in rates else "plain"  # plain with the same @packing
        base = statistics.median(rates[baseline])
        paired = statistics.median(a / b for a, b in zip(values, rates[baseline]))
        print(f"{name:>12}: {statistics.median(values):7.1f} tok/s   {statistics.median(values) / base:.2f}x of {baseline} "
              f"(median of per-prompt ratios {paired:.2f}x)   {counts[name][0] / counts[name][1]:.2f} tokens per step   "
              f"weights {engines[name].model.weight_packing}")


if __name__ == "__main__":
    main()

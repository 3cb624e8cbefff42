"""Trace the adaptive controller's choices on the shipped target and drafter, in-process.

    PYTHONPATH=src python benchmarks/spec_adaptive_trace.py --levels 1,2,4,8,16

One ``--speculative-adaptive`` engine (warmed up at 4 streams, as in ``spec_aggregate.py``)
runs a closed loop at each level in turn; per level it prints the share of steps that drafted,
the tokens per second, one character per step (``D`` drafted, ``.`` plain: alternation while a
bucket measures, probes, runs), and the controller's model (``paired_view``). This is how the
failures behind the controller's design were found: a choice locked for hundreds of steps
shows as a long run of the wrong character.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402
from benchkit.closed_loop import SERVE_EAGLE, TARGET, ClosedLoop, build, closed_loop, describe_model  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,2,4,8,16")
    parser.add_argument("--tokens", type=int, default=48, help="max tokens per request")
    parser.add_argument("--requests-per-stream", type=int, default=6)
    parser.add_argument("--width", type=int, default=400, help="steps shown per level (the first ones)")
    parser.add_argument("--suite", default="coding")
    args = parser.parse_args()
    torch.set_num_threads(1)
    levels = [int(x) for x in args.levels.split(",")]
    engine = build(SpeculativeConfig(**SERVE_EAGLE, adaptive=True), max(levels), None)
    suite = fitting_suite(load_suite(args.suite), TARGET, args.tokens)
    prompts = [engine.tokenizer.encode(render_prompt(engine.tokenizer, r)) for r in suite.requests]
    controller = engine.controller
    choices: list[int] = []
    choose = controller.choose

    def traced(num_active: int, context_length: int = 1) -> int:
        k = choose(num_active, context_length)
        choices.append(k)
        return k

    controller.choose = traced
    closed_loop(engine, prompts, 4, args.tokens)  # warm-up, as spec_aggregate's adaptive arm
    print(f"warm-up at 4 streams: {describe_model(controller)}")
    for level in levels:
        choices.clear()
        loop = ClosedLoop(engine, prompts, level, args.tokens, max(args.requests_per_stream * level, 48))
        while not loop.done:
            loop.advance(60.0)
        drafting = sum(1 for k in choices if k) / max(len(choices), 1)
        print(f"c={level}: {len(choices)} steps, {drafting:.0%} drafting, {loop.rate:.1f} tok/s in the window")
        print("  " + "".join("D" if k else "." for k in choices[:args.width]))
        print(f"  model: {describe_model(controller)}", flush=True)


if __name__ == "__main__":
    main()

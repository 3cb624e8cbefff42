"""What a speculation schedule's K = 0 costs against a plain engine, in-process (no HTTP).

    PYTHONPATH=src python benchmarks/schedule_k0_cost.py                         # 16 and 64 streams
    PYTHONPATH=src python benchmarks/schedule_k0_cost.py --levels 4,16,64,256 --repeats 3

Three engines of the shipped target (1 thread): ``plain``; ``plain2``, a second plain engine (its
ratio to plain is the noise floor); ``sched``, EAGLE-3 with the shipped drafter and
``--speculative-schedule`` (default ``[[1,1,3],[2,256,0]]``, what ``specgauge tune`` chose on this
machine), so at two or more streams it decodes with K = 0 while keeping its drafter's bookkeeping.
The closed loops and interleaving are ``spec_aggregate.py``'s: each arm steps for ``--slice``
seconds in turn, so the machine's drift falls on all alike. Prints each arm's tok/s and its median
ratio to plain over ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import spec_aggregate as aggregate  # noqa: E402  (puts src/ on sys.path)
import torch  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.speculation_schedule import normalize_schedule  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="16,64")
    parser.add_argument("--schedule", default="[[1,1,3],[2,256,0]]")
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--slice", type=float, default=0.3)
    parser.add_argument("--suite", default="coding")
    args = parser.parse_args()
    torch.set_num_threads(1)
    levels = [int(x) for x in args.levels.split(",")]
    schedule = tuple(normalize_schedule(json.loads(args.schedule)))
    depth = max(entry[-1] for entry in schedule) or 1
    top = max(levels)
    engines = {
        "plain": aggregate.build(SpeculativeConfig(), top, None),
        "plain2": aggregate.build(SpeculativeConfig(), top, None),
        "sched": aggregate.build(SpeculativeConfig(algorithm="EAGLE3", num_steps=depth, schedule=schedule), top, None),
    }
    tokenizer = engines["plain"].tokenizer
    suite = fitting_suite(load_suite(args.suite), aggregate.TARGET, args.tokens)
    prompts = [tokenizer.encode(render_prompt(tokenizer, r)) for r in suite.requests]
    print(f"{suite.name}: {len(prompts)} prompts, {args.tokens} max tokens, schedule {args.schedule}, "
          f"{args.repeats} interleaved runs per level", flush=True)
    settings = SimpleNamespace(repeats=args.repeats, requests_per_stream=3, min_requests=32, tokens=args.tokens,
                               slice=args.slice)
    aggregate.measure(engines, prompts, levels, settings)


if __name__ == "__main__":
    main()

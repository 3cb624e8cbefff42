"""Aggregate decode throughput of speculation on / off / disable-above / adaptive, in-process.

    PYTHONPATH=src python benchmarks/spec_aggregate.py                       # levels 1..256
    PYTHONPATH=src python benchmarks/spec_aggregate.py --levels 1,8,64 --tokens 32 --repeats 1 --slice 0.5

Why in-process: over HTTP on a 2-core machine the load generator, the server's event loop and
the engine thread share the cores, and past a few dozen streams every plain token is one SSE
event to write and read — the HTTP sweep then measures event handling, not the model
(docs/speculative.md). Here the engine is stepped directly, the way its thread steps it, so the
figure is what the model and the scheduler can do.

Each arm is an :class:`Engine` of the shipped target and drafter (1 thread, built once, every
arm with the same scheduler limits). At each concurrency ``c`` an arm runs a closed loop: ``c``
greedy requests in flight, a new one submitted as soon as one finishes, ``6c`` in all (at least
48), coding prompts that fit the context. Throughput is the tokens emitted per second of the
arm's own steps between the first request finishing and the last one being submitted (the
window in which ``c`` requests are always in flight: no ramp-up, no drain).

The arms' loops run interleaved: each arm steps for ``--slice`` seconds (0.1: dozens of steps,
its caches warm), then the next, the order reversed every turn, until all are done. This
machine's speed drifts by tens of percent within minutes (other tenants); run one after the
other, arms compared minutes apart differed by that much, while interleaved every arm sees the
same drift. An arm's ratio to plain is the median over ``--repeats`` such runs of its rate over
plain's in the same run (pooled tok/s are printed beside, and for the disable-above and adaptive
arms the share of their window's steps that drafted).

Run 1 measures ``plain`` and ``on`` (EAGLE-3, ``serve``'s defaults) and the crossover (the
first level where on loses); run 2 measures all four side by side — ``plain``, ``on``,
``disable`` (``--speculative-disable-above`` set to the level before run 1's crossover) and
``adaptive`` — beside ``off2``, a second plain engine whose ratio to ``plain`` is the noise floor
(``--no-control`` leaves it out), and the goal lines are judged on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
from benchkit.closed_loop import SERVE_EAGLE, TARGET, build, closed_loop, describe_model, interleaved  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.core.engine import Engine  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

def measure(engines: dict[str, Engine], prompts: list[list[int]], levels: list[int], args) -> dict:
    """{level: {arm: ratio to plain}}: per level ``args.repeats`` interleaved runs (``interleaved``),
    an arm's ratio the median over them of its rate over plain's in the same run."""
    ratios = {}
    for level in levels:
        tokens, seconds = dict.fromkeys(engines, 0), dict.fromkeys(engines, 0.0)
        steps, drafting = dict.fromkeys(engines, 0), dict.fromkeys(engines, 0)
        rounds = {arm: [] for arm in engines}
        requests = max(args.requests_per_stream * level, args.min_requests)
        for _ in range(args.repeats):
            loops = interleaved(engines, prompts, level, args.tokens, requests, args.slice)
            for arm, loop in loops.items():
                tokens[arm] += loop.tokens
                seconds[arm] += loop.seconds
                steps[arm] += loop.steps
                drafting[arm] += loop.drafting_steps
                rounds[arm].append(loop.rate / loops["plain"].rate)
        ratios[level] = {arm: statistics.median(values) for arm, values in rounds.items()}
        print(f"  c={level:>3}: " + "  ".join(
            f"{arm} {tokens[arm] / seconds[arm]:7.1f} tok/s ({ratios[level][arm]:.2f}x)"
            + (f" [{drafting[arm] / steps[arm]:.0%} drafting]" if arm in ("disable", "adaptive") else "")
            for arm in engines), flush=True)
        if "adaptive" in engines:
            print("         adaptive's model: " + describe_model(engines["adaptive"].controller), flush=True)
    return ratios


def crossover(rates: dict, arm: str) -> int | None:
    """The first level where ``arm`` is slower than plain (ratio below 1)."""
    return next((level for level, row in rates.items() if row[arm] < 1.0), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--tokens", type=int, default=48, help="max tokens per request")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved runs per level (median ratio)")
    parser.add_argument("--requests-per-stream", type=int, default=6, help="requests per run: this many per stream...")
    parser.add_argument("--min-requests", type=int, default=48, help="...and at least this many")
    parser.add_argument("--slice", type=float, default=0.1, help="seconds an arm runs before the next arm's turn")
    parser.add_argument("--no-control", action="store_true",
                        help="run 2 without off2, the second plain engine whose ratio to plain is the noise floor")
    parser.add_argument("--suite", default="coding")
    parser.add_argument("--draft", default=None, help="EAGLE-3 head directory (default: the shipped drafter)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    levels = [int(x) for x in args.levels.split(",")]
    top = max(levels)
    suite = fitting_suite(load_suite(args.suite), TARGET, args.tokens)
    plain = build(SpeculativeConfig(), top, None)
    prompts = [plain.tokenizer.encode(render_prompt(plain.tokenizer, r)) for r in suite.requests]
    print(f"{suite.name}: {len(prompts)} prompts, {args.tokens} max tokens, greedy, 1 thread, dtype "
          f"{plain.config.torch_dtype}, closed loop, arms interleaved "
          f"{args.slice:g} s at a time, {args.repeats} runs per level")

    print("run 1: speculation off vs EAGLE-3 on")
    first = {"plain": plain, "on": build(SpeculativeConfig(**SERVE_EAGLE), top, args.draft)}
    for engine in first.values():
        closed_loop(engine, prompts, 4, args.tokens)  # warm-up
    rates = measure(first, prompts, levels, args)
    cross = crossover(rates, "on")
    below = [level for level in levels if cross is None or level < cross]
    threshold = max(below) if below else 1
    print(f"crossover: {'none within ' + str(top) if cross is None else f'on loses to off from c={cross}'}; "
          f"disable-above = {threshold}")

    print(f"run 2: off vs on vs --speculative-disable-above {threshold} vs --speculative-adaptive"
          + ("" if args.no_control else " (off2: a second plain engine, the noise floor)"))
    second = {"plain": plain, "on": first["on"],
              "disable": build(SpeculativeConfig(**SERVE_EAGLE, disable_above=threshold), top, args.draft),
              "adaptive": build(SpeculativeConfig(**SERVE_EAGLE, adaptive=True), top, args.draft)}
    if not args.no_control:
        second["off2"] = build(SpeculativeConfig(), top, None)
    for name in second.keys() - first.keys():
        closed_loop(second[name], prompts, 4, args.tokens)  # warm-up (the adaptive arm learns from here on)
    rates2 = measure(second, prompts, levels, args)
    print_goals(rates2, levels, cross, crossover(rates2, "on"))


def print_goals(rates: dict, levels: list[int], cross: int | None, cross2: int | None) -> None:
    """The aggregate goals, judged on run 2 (every arm side by side)."""
    first = levels[0]
    speedup = rates[first]
    print("\ngoals (run 2):")
    if "off2" in speedup:
        floor = [rates[level]["off2"] for level in levels]
        print(f"  noise floor: off2 / off {min(floor):.3f}x .. {max(floor):.3f}x over the levels")
    print(f"  crossover within c<=256: {'yes' if cross else 'NO'} (run 1: c={cross}, run 2: c={cross2})")
    for arm in ("disable", "adaptive"):
        worst = min((rates[level][arm], level) for level in levels if level <= 64)
        kept = (speedup[arm] - 1) / (speedup["on"] - 1) if speedup["on"] > 1 else float("nan")
        print(f"  {arm}: worst ratio to off over c<=64 {worst[0]:.3f}x at c={worst[1]} (goal >= 0.95); "
              f"c={first} speedup {speedup[arm]:.2f}x vs on's {speedup['on']:.2f}x: {kept:.0%} of the gain kept "
              f"(goal >= 90%)")


if __name__ == "__main__":
    main()

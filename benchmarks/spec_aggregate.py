"""Aggregate decode throughput of speculation on / off / disable-above / adaptive, in-process.

    PYTHONPATH=src python benchmarks/spec_aggregate.py                       # levels 1..256
    PYTHONPATH=src python benchmarks/spec_aggregate.py --levels 1,8,64 --tokens 32 --repeats 1

Why in-process: over HTTP on a 2-core machine the load generator, the server's event loop and
the engine thread share the cores, and past a few dozen streams every plain token is one SSE
event to write and read — the HTTP sweep then measures event handling, not the model
(docs/speculative.md). Here the engine is stepped directly, the way its thread steps it, so the
figure is what the model and the scheduler can do.

Each arm is an :class:`Engine` of the shipped target and drafter (1 thread, built once, every
arm with the same scheduler limits). At each concurrency ``c`` an arm runs a closed loop: ``c``
greedy requests in flight, a new one submitted as soon as one finishes, ``3c`` in all (at least
24), coding prompts that fit the context. Throughput is the tokens emitted per second between the first request
finishing and the last one being submitted (the window in which ``c`` requests are always in
flight: no ramp-up, no drain). Arms run in alternating order (ABBA) ``--repeats`` times per
level; an arm's ratio to plain is the median over the rounds of its rate over the plain rate of
the same round (pooled tok/s are printed beside).

Run 1 measures ``plain`` and ``on`` (EAGLE-3, ``serve``'s defaults) and the crossover (the
first level where on loses); run 2 measures all four side by side — ``plain``, ``on``,
``disable`` (``--speculative-disable-above`` set to the level before run 1's crossover) and
``adaptive`` — and the issue's goal lines are judged on it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.commands import SERVE_MIN_DRAFT_PROB, SERVE_NUM_STEPS  # noqa: E402
from specgauge.engine.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.scheduler import SchedulerConfig  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

TARGET = ROOT / "src" / "specgauge" / "assets" / "target"
SERVE_EAGLE = dict(algorithm="EAGLE3", num_steps=SERVE_NUM_STEPS, min_draft_prob=SERVE_MIN_DRAFT_PROB)  # `serve`'s defaults


def build(spec: SpeculativeConfig, max_running: int, draft: str | None) -> Engine:
    if spec.algorithm != "NONE" and draft:
        spec = SpeculativeConfig(**{**spec.__dict__, "draft_model_path": draft})
    scheduler = SchedulerConfig(max_running=max_running, max_tokens_per_step=2048, max_waiting=4 * max_running)
    return Engine(EngineConfig(model_dir=str(TARGET), threads=1, scheduler=scheduler, speculative=spec))


def closed_loop(engine: Engine, prompts: list[list[int]], concurrency: int, tokens: int) -> tuple[int, float]:
    """(tokens, seconds) of the steady window of one closed-loop run (see the module docstring)."""
    total = max(3 * concurrency, 24)
    submitted = finished = 0
    counted, window_start, window_end = 0, None, None

    def submit() -> None:
        nonlocal submitted
        engine.submit(f"c{concurrency}-{submitted}", prompts[submitted % len(prompts)],
                      SamplingParams(max_tokens=tokens, temperature=0.0), lambda event: None)
        submitted += 1

    for _ in range(min(concurrency, total)):
        submit()
    while finished < total:
        engine._drain_inbox(block=False)
        updates = engine.step()
        now = time.perf_counter()
        if window_start is not None and window_end is None:
            counted += sum(len(u.new_token_ids) for u in updates)
        for update in updates:
            if not update.finished:
                continue
            finished += 1
            if window_start is None:
                window_start = now
            if submitted < total:
                submit()
                if submitted == total:
                    window_end = now
    window_end = window_end or time.perf_counter()
    return counted, window_end - window_start


def measure(engines: dict[str, Engine], prompts: list[list[int]], levels: list[int], args) -> dict:
    """{level: {arm: ratio to plain}}: per level ``args.repeats`` rounds, arms in ABBA order, each
    round's ratio taken against the plain run beside it in time and the median of the rounds
    kept (the machine's load drifts by tens of percent within minutes; a ratio of neighbours in
    time is what survives that). Pooled tok/s are printed beside."""
    ratios = {}
    for level in levels:
        tokens, seconds = dict.fromkeys(engines, 0), dict.fromkeys(engines, 0.0)
        rounds = {arm: [] for arm in engines}
        for repeat in range(args.repeats):
            rates = {}
            for arm in (list(engines) if repeat % 2 == 0 else list(engines)[::-1]):
                n, s = closed_loop(engines[arm], prompts, level, args.tokens)
                tokens[arm] += n
                seconds[arm] += s
                rates[arm] = n / s
            for arm in engines:
                rounds[arm].append(rates[arm] / rates["plain"])
        ratios[level] = {arm: statistics.median(values) for arm, values in rounds.items()}
        print(f"  c={level:>3}: " + "  ".join(
            f"{arm} {tokens[arm] / seconds[arm]:7.1f} tok/s ({ratios[level][arm]:.2f}x)" for arm in engines), flush=True)
    return ratios


def crossover(rates: dict, arm: str) -> int | None:
    """The first level where ``arm`` is slower than plain (ratio below 1)."""
    return next((level for level, row in rates.items() if row[arm] < 1.0), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--levels", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--tokens", type=int, default=48, help="max tokens per request")
    parser.add_argument("--repeats", type=int, default=3, help="ABBA rounds per level")
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
          f"{plain.config.torch_dtype}, closed loop, {args.repeats} ABBA rounds per level")

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

    print(f"run 2: off vs on vs --speculative-disable-above {threshold} vs --speculative-adaptive")
    second = {"plain": plain, "on": first["on"],
              "disable": build(SpeculativeConfig(**SERVE_EAGLE, disable_above=threshold), top, args.draft),
              "adaptive": build(SpeculativeConfig(**SERVE_EAGLE, adaptive=True), top, args.draft)}
    for name in ("disable", "adaptive"):
        closed_loop(second[name], prompts, 4, args.tokens)
        closed_loop(second[name], prompts, 32, args.tokens)  # the adaptive cost model's first points
    rates2 = measure(second, prompts, levels, args)
    print_goals(rates2, levels, cross, crossover(rates2, "on"))


def print_goals(rates: dict, levels: list[int], cross: int | None, cross2: int | None) -> None:
    """The issue's aggregate goals, judged on run 2 (every arm side by side)."""
    first = levels[0]
    speedup = rates[first]
    print("\ngoals (run 2):")
    print(f"  crossover within c<=256: {'yes' if cross else 'NO'} (run 1: c={cross}, run 2: c={cross2})")
    for arm in ("disable", "adaptive"):
        worst = min((rates[level][arm], level) for level in levels if level <= 64)
        kept = (speedup[arm] - 1) / (speedup["on"] - 1) if speedup["on"] > 1 else float("nan")
        print(f"  {arm}: worst ratio to off over c<=64 {worst[0]:.2f}x at c={worst[1]} (goal >= 0.95); "
              f"c={first} speedup {speedup[arm]:.2f}x vs on's {speedup['on']:.2f}x: {kept:.0%} of the gain kept "
              f"(goal >= 90%)")


if __name__ == "__main__":
    main()

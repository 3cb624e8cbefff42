"""The power and the false-positive rate of ``compare --samples-per-prompt`` (the distribution check
of losslessness above temperature 0), measured, not assumed: ``specgauge compare`` run many times
against an embedded engine with a wrong sampler (``specgauge serve --testing-fault accept-bias=1.5``:
each drafted token accepted 1.5x too often) and against a correct one, each against plain decoding.

    PYTHONPATH=src python benchmarks/distribution_check.py [--repeats 10] [--samples-per-prompt N]
        [--temperature 0.7] [--algorithm EAGLE3|NGRAM] [--accept-bias 1.5] [--arms both|correct|faulted]
        [--first-seed 1000]

``--samples-per-prompt`` defaults to compare's suggestion (``DEFAULT_SAMPLES_PER_PROMPT``).

Three engines are started once (plain, correct speculation, faulted speculation) and every
repetition is one ``specgauge compare`` of plain against each speculative engine, as URL arms,
with its own ``--seed`` (``--first-seed`` + the repetition: the same seeds draw the same samples, so
give another first seed for new draws), the speed stages cut to one
request each. Prints, per arm, how often ``losslessness.distribution.differs`` was true (the
detection rate against the faulted arm, the false-positive rate against the correct one, each
with a 95% Wilson interval), the p-values, and what one check cost (requests, seconds).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specgauge.compare.compare_command import DEFAULT_SAMPLES_PER_PROMPT
from specgauge.engine.serving.launch import EngineProcess


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


def compare_once(baseline: str, speculative: str, seed: int, args, work: Path) -> dict:
    """One comparison; its ``losslessness.distribution`` and wall seconds."""
    out = work / f"verdict-{speculative.rsplit(':', 1)[-1]}-{seed}.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "specgauge", "compare", "--baseline", baseline, "--speculative", speculative,
         "--temperature", str(args.temperature), "--samples-per-prompt", str(args.samples_per_prompt),
         "--seed", str(seed), "--domains", "coding", "--single-stream-requests", "1", "--concurrency", "1",
         "--num-requests", "1", "--warmup", "0", "--resamples", "200", "--output-json", str(out),
         "--db", str(work / "compare.db")], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"compare failed: {done.stderr.strip()[-500:]}")
    check = json.loads(out.read_text())["losslessness"]["distribution"]
    return {**check, "wall_s": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--samples-per-prompt", type=int, default=DEFAULT_SAMPLES_PER_PROMPT)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--algorithm", choices=["EAGLE3", "NGRAM"], default="EAGLE3")
    parser.add_argument("--accept-bias", type=float, default=1.5)
    parser.add_argument("--first-seed", type=int, default=1000, help="--seed of the first repetition")
    parser.add_argument("--arms", choices=["both", "correct", "faulted"], default="both",
                        help="which speculative engines to compare against plain (one alone: more repeats of it)")
    args = parser.parse_args()
    spec = ["--model", "specgauge-8m", "--speculative-algorithm", args.algorithm]   # the figures were on the 8m target
    work = Path(tempfile.mkdtemp(prefix="distribution-check-"))
    with EngineProcess(["--model", "specgauge-8m"]) as plain, EngineProcess(spec) as correct, \
            EngineProcess(spec + ["--testing-fault", f"accept-bias={args.accept_bias:g}"]) as faulted:
        named = (("correct", correct.url), (f"accept-bias={args.accept_bias:g}", faulted.url))
        arms = {name: url for name, url in named
                if args.arms == "both" or (name == "correct") == (args.arms == "correct")}
        results: dict[str, list[dict]] = {name: [] for name in arms}
        for repeat in range(args.repeats):
            for name, url in arms.items():
                check = compare_once(plain.url, url, args.first_seed + repeat, args, work)
                results[name].append(check)
                print(f"repeat {repeat + 1}/{args.repeats} {name}: differs={check['differs']} "
                      f"p={check['p_value']:.4f} ({check['wall_s']:.0f} s)", flush=True)
    print(f"\n{args.algorithm}, temperature {args.temperature:g}, {args.samples_per_prompt} samples per prompt "
          f"and arm, {args.repeats} comparisons per arm:")
    for name, checks in results.items():
        flagged = sum(bool(c["differs"]) for c in checks)
        low, high = wilson(flagged, len(checks))
        what = "false-positive rate" if name == "correct" else "detection rate"
        p_values = ", ".join(format(c["p_value"], ".3g") for c in checks)
        print(f"  {name}: {what} {flagged}/{len(checks)} = {flagged / len(checks):.0%} [{low:.0%}, {high:.0%}]; "
              f"p-values {p_values}")
    one = next(iter(results.values()))[0]
    walls = [c["wall_s"] for checks in results.values() for c in checks]
    print(f"cost of one check: {one['requests']} requests ({one['samples_per_prompt']} x {one['prompts']} prompts x 2 "
          f"arms), {one['seconds']:.0f} arm-seconds; one whole compare {min(walls):.0f}-{max(walls):.0f} s wall; "
          f"min_detectable_shift {one['min_detectable_shift']:.3f}")


if __name__ == "__main__":
    main()

"""Run one benchmark script from two source trees in alternation and print its tok/s side by side.

    python benchmarks/ab_trees.py --before /path/to/main --after . --rounds 2 \
        -- benchmarks/spec_inprocess.py --prompts 6
    python benchmarks/ab_trees.py --before /path/to/main --after . \
        -- benchmarks/engine_throughput.py --concurrency 1,8,64

The script (a path relative to a tree's root) runs from each tree in turn — before, after, then
after, before in the next round (ABBA), so drifting machine load falls on both alike — and each
run imports its own tree's ``src`` (the benchmark scripts put it first on ``sys.path``). Every
output line with a ``<number> tok/s`` figure is a measurement, labelled by the text before the
number; printed per label: the median over the rounds in each tree, and the median of the
per-round ratios after/before (above 1: the after tree is faster).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

FIGURE = re.compile(r"^\s*(?P<label>.*?)[:\s]\s*(?P<value>\d+(?:\.\d+)?) tok/s")


def run(tree: Path, script: list[str]) -> dict[str, float]:
    """One run of ``script`` from ``tree``: its tok/s figures by label (output echoed as it comes)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree / "src")
    command = [sys.executable, str(tree / script[0]), *script[1:]]
    print(f"$ (cd {tree}) PYTHONPATH={env['PYTHONPATH']} {' '.join(command)}", flush=True)
    figures: dict[str, float] = {}
    with subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True) as process:
        for line in process.stdout:
            print(f"  {line}", end="", flush=True)
            match = FIGURE.match(line)
            if match:
                figures[match["label"].strip()] = float(match["value"])
    if process.returncode:
        raise SystemExit(f"{script[0]} from {tree} exited with {process.returncode}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="source tree measured first (e.g. main)")
    parser.add_argument("--after", type=Path, required=True, help="source tree compared against it")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...], relative to each tree's root")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("name the benchmark script after --")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    results: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for index in range(args.rounds):
        order = ("before", "after") if index % 2 == 0 else ("after", "before")
        for name in order:
            results[name].append(run(trees[name], script))
    labels = [label for label in results["before"][0] if all(label in r for r in results["before"] + results["after"])]
    width = max((len(label) for label in labels), default=10)
    print(f"\n{' '.join(script)}: {args.rounds} rounds, before = {trees['before']}, after = {trees['after']}")
    print(f"{'tok/s':<{width}}  {'before':>8}  {'after':>8}  after/before (median of per-round ratios)")
    for label in labels:
        before = [r[label] for r in results["before"]]
        after = [r[label] for r in results["after"]]
        ratio = statistics.median(a / b for a, b in zip(after, before))
        print(f"{label:<{width}}  {statistics.median(before):8.1f}  {statistics.median(after):8.1f}  {ratio:.3f}")


if __name__ == "__main__":
    main()

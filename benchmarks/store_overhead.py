"""What does storing every request as it finishes cost the measurement? Prints figures; asserts nothing.

The bench driver stores each finished request from the event loop (``on_record``), inserting it
at once and committing once per loop turn (:class:`specgauge.store.turn_writer.TurnWriter`).
Time spent there delays every other stream's reads, so this script prints:

1. Per row: ``Store.add_request`` committed on its own (WAL, synchronous=NORMAL, no automatic
   checkpoint) for 64- and 512-chunk records — median/p99/max µs; the chunk-timestamp BLOB
   against its raw int64 size; bytes per row on disk; the checkpoint run after a point.
2. A burst — N requests ending in the same loop turn, as under batched decoding with equal
   ``max_tokens``: how long the loop is blocked committing each row, versus one commit per turn.
3. Side by side in one run (alternating AB/BA): closed-loop points against a scripted server in
   its own process, ``on_record`` a no-op versus the driver's TurnWriter; client TTFT and mean
   ITL against the server's truth.

    PYTHONPATH=src python benchmarks/store_overhead.py [--concurrency 128] [--rounds 4]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

from benchkit.truth_server import SUITE, ServerProcess, percentile  # noqa: E402

from specgauge.client.endpoint import Endpoint, Timeouts  # noqa: E402
from specgauge.client.records import RequestRecord, TokenCountSource  # noqa: E402
from specgauge.load.plan import PointSpec  # noqa: E402
from specgauge.load.runner import run_async, run_point  # noqa: E402
from specgauge.store import Store  # noqa: E402
from specgauge.store.turn_writer import TurnWriter  # noqa: E402


def _new_point(store: Store) -> int:
    run_id = store.create_run(tool_version="bench", host="bench", url="http://127.0.0.1", api="openai-completions",
                              model=None, config={}, suite_name=SUITE.name, suite_version=1,
                              suite_hash=SUITE.content_hash)
    return store.add_points(run_id, [{}])[0]


def _records(count: int, chunks: int) -> list[RequestRecord]:
    """Finished requests with ~20 ms chunk gaps and up to 2 ms of noise, like a real stream."""
    t0 = time.perf_counter_ns()
    records = []
    for i in range(count):
        jitter = random.Random(i)
        times = [t0 + 50_000_000 + j * 20_000_000 + jitter.randrange(2_000_000) for j in range(chunks)]
        records.append(RequestRecord(request_index=i, prompt_index=i % 16, api="openai-completions",
                                     t_send_ns=t0, t_headers_ns=t0 + 1_000_000, t_end_ns=times[-1] + 1000,
                                     chunk_times_ns=times, chunk_tokens=[1] * chunks, output_tokens=chunks,
                                     token_count_source=TokenCountSource.SERVER, output_text="tok " * chunks,
                                     finish_reason="length", status_code=200, server_request_id=f"req-{i}"))
    return records


def per_row_cost(directory: Path, chunks: int, rows: int) -> dict:
    """Time ``rows`` inserts of ``chunks``-chunk records, each committed on its own."""
    with Store.open(directory / f"rows{chunks}.db") as store:
        point_id = _new_point(store)
        costs_us = []
        for record in _records(rows, chunks):
            start = time.perf_counter_ns()
            store.add_request(point_id, record)
            costs_us.append((time.perf_counter_ns() - start) / 1000)
        blob_bytes = store._db.execute("SELECT AVG(LENGTH(chunk_times)) FROM requests").fetchone()[0]
        start = time.perf_counter_ns()
        store.checkpoint()
        checkpoint_ms = (time.perf_counter_ns() - start) / 1e6
    size = (directory / f"rows{chunks}.db").stat().st_size
    return {"p50_us": percentile(costs_us, 50), "p99_us": percentile(costs_us, 99), "max_us": max(costs_us),
            "bytes_per_row": size / rows, "blob_bytes": blob_bytes, "raw_bytes": 8 * chunks,
            "checkpoint_ms": checkpoint_ms}


def burst_cost(directory: Path, burst: int, repeats: int = 5) -> tuple[float, float]:
    """Median ms the loop is blocked storing ``burst`` records: commit each, versus one commit."""
    each_ms, one_ms = [], []
    with Store.open(directory / "burst.db") as store:
        for _ in range(repeats):
            for commit_each, sink in ((True, each_ms), (False, one_ms)):
                point_id, records = _new_point(store), _records(burst, 64)
                start = time.perf_counter_ns()
                for record in records:
                    store.add_request(point_id, record, commit=commit_each)
                store.commit()
                sink.append((time.perf_counter_ns() - start) / 1e6)
    return percentile(each_ms, 50), percentile(one_ms, 50)


def errors_against_truth(outcome, truth: dict) -> tuple[list[float], list[float]]:
    """Client TTFT minus truth TTFT (ms), and mean-ITL error (%), per request."""
    ttft, itl = [], []
    for record in outcome.records:
        t = truth.get(record.server_request_id or "")
        if not record.ok or t is None or len(t["chunk_send_ns"]) < 2:
            continue
        ttft.append(((record.chunk_times_ns[0] - record.t_send_ns) - (t["chunk_send_ns"][0] - t["t_recv_ns"])) / 1e6)
        client = (record.chunk_times_ns[-1] - record.chunk_times_ns[0]) / (len(record.chunk_times_ns) - 1)
        sends = t["chunk_send_ns"]
        server = (sends[-1] - sends[0]) / (len(sends) - 1)
        itl.append(100 * (client - server) / server)
    return ttft, itl


def side_by_side(directory: Path, concurrency: int, waves: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    script = {"ttft_s": 0.05, "chunk_delay_s": 0.02, "num_chunks": 32, "tokens_per_chunk": 1}
    results = {mode: {"ttft": [], "itl": []} for mode in ("no store", "store (TurnWriter)")}
    with ServerProcess(script) as server, Store.open(directory / "sweep.db") as store:
        endpoint = Endpoint(server.url, api="openai-completions", model="scripted-model")
        timeouts = Timeouts(connect_s=30, headers_s=120, read_s=120)
        for round_number in range(rounds):
            order = list(results) if round_number % 2 == 0 else list(results)[::-1]  # AB BA: no order bias
            for mode in order:
                writer = TurnWriter(store, _new_point(store), segment=0)
                on_record = (lambda r: None) if mode == "no store" else writer
                spec = PointSpec(mode="closed", concurrency=concurrency, num_requests=concurrency * waves,
                                 seed=round_number)
                outcome = run_async(run_point(endpoint, SUITE, spec, on_record=on_record, timeouts=timeouts))
                writer.flush()
                ttft, itl = errors_against_truth(outcome, server.truth())
                results[mode]["ttft"] += ttft
                results[mode]["itl"] += itl
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description="cost of storing each request as it finishes")
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--waves", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        print("specgauge results store (SQLite WAL, synchronous=NORMAL, no automatic checkpoint)")
        for chunks in (64, 512):
            r = per_row_cost(directory, chunks, args.rows)
            print(f"  {chunks:4d}-chunk records, {args.rows} rows committed one by one: median {r['p50_us']:.0f} us, "
                  f"p99 {r['p99_us']:.0f} us, max {r['max_us']:.0f} us; chunk_times BLOB {r['blob_bytes']:,.0f} B "
                  f"(raw int64 {r['raw_bytes']:,} B); {r['bytes_per_row']:,.0f} B/row on disk; "
                  f"checkpoint after the point {r['checkpoint_ms']:.1f} ms")
        for burst in (128, 512):
            each, once = burst_cost(directory, burst)
            print(f"  {burst} requests ending in one loop turn: loop blocked {each:.1f} ms committing each row, "
                  f"{once:.1f} ms with one commit per turn (median of 5)")
        results = side_by_side(directory, args.concurrency, args.waves, args.rounds)
        print(f"  {args.concurrency} streams, {args.rounds} alternating rounds per mode, client vs server truth:")
        for mode, figures in results.items():
            ttft, itl = figures["ttft"], figures["itl"]
            print(f"    {mode:18s}: {len(ttft)} requests, TTFT - truth median {percentile(ttft, 50):+.2f} ms, "
                  f"p99 {percentile(ttft, 99):+.2f} ms; mean-ITL error median {percentile(itl, 50):+.3f} %, "
                  f"|err| p99 {percentile([abs(x) for x in itl], 99):.3f} %")


if __name__ == "__main__":
    main()

"""How much does the client add to what it measures? Prints figures; asserts nothing.

A scripted streaming server runs in a separate process with a known schedule and records its own
truth (``perf_counter_ns`` when each request arrived and when each chunk was written). The client
(``specgauge.load.runner.run_point``, the code the CLI uses) runs closed-loop points against it:

- at 128 and 512 concurrent streams: client TTFT minus server-truth TTFT (median, p99), measured
  ITL versus the truth (%), connection set-up time (its own figure: the pool is warmed first),
  and the runner's send lag;
- at 64 streams with the server writing as fast as it can: content chunks consumed per second,
  with the server batching 16 events per socket write and with one event per write;
- the same accuracy figures for a reference "plain aiohttp + uvloop client" (no pool
  warm-up, send time taken before ``session.post``), side by side in the same run.

Targets: TTFT error <= 2 ms median, <= 10 ms p99; ITL within 2 %; >= 100,000 chunks/s.
Peer clients (GuideLLM, SGLang's bench_serving, vLLM's bench) are reported when installed.

    PYTHONPATH=src python benchmarks/client_overhead.py [--concurrency 128,512] [--waves 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from specgauge.client.endpoint import Endpoint, Timeouts  # noqa: E402
from specgauge.load.plan import PointSpec  # noqa: E402
from specgauge.load.runner import run_async, run_point  # noqa: E402
from specgauge.suites.model import Suite, SuiteRequest  # noqa: E402

SUITE = Suite(name="overhead", requests=tuple(SuiteRequest(prompt=f"benchmark prompt {i} " * 8, max_tokens=64)
                                             for i in range(16)))
PEERS = {"guidellm": "GuideLLM", "sglang": "SGLang bench_serving", "vllm": "vLLM bench serve",
         "aiperf": "AIPerf"}


class ServerProcess:
    """A streaming server in its own process: the lean one by default (see
    :mod:`specgauge.testing.lean_server`), or ``--server scripted`` for the aiohttp test server."""

    def __init__(self, script: dict, module: str = "specgauge.testing.lean_server") -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        self.proc = subprocess.Popen([sys.executable, "-m", module,
                                      "--script", json.dumps(script)], stdout=subprocess.PIPE, env=env, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise SystemExit(f"scripted server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def truth(self) -> dict[str, dict]:
        with urllib.request.urlopen(self.url + "/_truth", timeout=30) as resp:
            return {t["request_id"]: t for t in json.loads(resp.read())}

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def accuracy(concurrency: int, waves: int, script: dict) -> dict:
    """One closed-loop point at ``concurrency`` streams; client figures against server truth."""
    with ServerProcess(script) as server:
        endpoint = Endpoint(server.url, api="openai-completions", model="scripted-model")
        spec = PointSpec(mode="closed", concurrency=concurrency, num_requests=concurrency * waves)
        cpu_start = time.process_time()
        outcome = run_async(run_point(endpoint, SUITE, spec, on_record=lambda r: None,
                                      timeouts=Timeouts(connect_s=30, headers_s=120, read_s=120)))
        client_cpu_s = time.process_time() - cpu_start
        truth = server.truth()
    ttft_error_ms, itl_client, itl_truth, errors = [], [], [], 0
    for record in outcome.records:
        t = truth.get(record.server_request_id or "")
        if not record.ok or t is None or not t["chunk_send_ns"]:
            errors += 1
            continue
        client_ttft = record.chunk_times_ns[0] - record.t_send_ns
        server_ttft = t["chunk_send_ns"][0] - t["t_recv_ns"]
        ttft_error_ms.append((client_ttft - server_ttft) / 1e6)
        n = len(record.chunk_times_ns)
        if n > 1:  # mean ITL of the request: (last - first) / (tokens after the first)
            itl_client.append((record.chunk_times_ns[-1] - record.chunk_times_ns[0]) / (n - 1) / 1e6)
            sends = t["chunk_send_ns"]
            itl_truth.append((sends[-1] - sends[0]) / (len(sends) - 1) / 1e6)
    itl_error_pct = [100 * (c - s) / s for c, s in zip(itl_client, itl_truth)]
    return {"concurrency": concurrency, "requests": len(outcome.records), "errors": errors,
            "ttft_error_ms_p50": percentile(ttft_error_ms, 50), "ttft_error_ms_p99": percentile(ttft_error_ms, 99),
            "itl_error_pct_mean": statistics.fmean(itl_error_pct) if itl_error_pct else float("nan"),
            "itl_error_pct_p99_abs": percentile([abs(x) for x in itl_error_pct], 99),
            "itl_truth_ms": statistics.fmean(itl_truth) if itl_truth else float("nan"),
            "connections": len(outcome.connect_ms),
            "connect_ms_p50": percentile(outcome.connect_ms, 50), "connect_ms_max": max(outcome.connect_ms or [0]),
            "send_lag_ms_p50": percentile(outcome.send_lag_ms, 50),
            "send_lag_ms_p99": percentile(outcome.send_lag_ms, 99),
            "client_cpu_share": client_cpu_s / ((outcome.window_end_ns - outcome.window_start_ns) / 1e9),
            "chunks_per_s": sum(len(r.chunk_times_ns) for r in outcome.records)
            / ((outcome.window_end_ns - outcome.window_start_ns) / 1e9)}


async def _plain_client(url: str, concurrency: int, num_requests: int) -> list[tuple[str, int, int, list[int]]]:
    """The reference "plain aiohttp + uvloop client written in a few minutes": one
    shared session, no pool warm-up, send time taken before ``session.post``, ``readany`` + split.
    Returns ``(server id, t_send_ns, t_first_ns, chunk times)`` per request."""
    import aiohttp
    import orjson

    body = orjson.dumps({"model": "scripted-model", "prompt": "hello", "max_tokens": 64, "stream": True})
    results, remaining = [], iter(range(num_requests))

    async def user(session: aiohttp.ClientSession) -> None:
        for _ in remaining:
            t_send, times, request_id, buffer = time.perf_counter_ns(), [], "", b""
            async with session.post(url + "/v1/completions", data=body) as resp:
                while chunk := await resp.content.readany():
                    now = time.perf_counter_ns()
                    buffer += chunk
                    *events, buffer = buffer.split(b"\n\n")
                    for event in events:
                        if event.startswith(b"data: {"):
                            obj = orjson.loads(event[6:])
                            if obj.get("choices"):
                                request_id = obj["id"]
                                times.append(now)
            results.append((request_id, t_send, times[0] if times else 0, times))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(user(session) for _ in range(concurrency)))
    return results


def plain_accuracy(concurrency: int, waves: int, script: dict) -> dict:
    """The same point with the plain reference client, for a side-by-side figure."""
    with ServerProcess(script) as server:
        results = run_async(_plain_client(server.url, concurrency, concurrency * waves))
        truth = server.truth()
    errors_ms, itl_pct = [], []
    for request_id, t_send, t_first, times in results:
        t = truth.get(request_id)
        if t is None or not t_first:
            continue
        errors_ms.append(((t_first - t_send) - (t["chunk_send_ns"][0] - t["t_recv_ns"])) / 1e6)
        sends = t["chunk_send_ns"]
        if len(times) > 1 and len(sends) > 1:
            client_itl = (times[-1] - times[0]) / (len(times) - 1)
            truth_itl = (sends[-1] - sends[0]) / (len(sends) - 1)
            itl_pct.append(100 * (client_itl - truth_itl) / truth_itl)
    return {"ttft_error_ms_p50": percentile(errors_ms, 50), "ttft_error_ms_p99": percentile(errors_ms, 99),
            "itl_error_pct_mean": statistics.fmean(itl_pct) if itl_pct else float("nan")}


def throughput(streams: int, chunks_per_request: int, requests_per_stream: int, events_per_write: int) -> dict:
    """Content chunks the client consumes per second, the server writing as fast as it can
    (``events_per_write`` events per socket write)."""
    script = {"num_chunks": chunks_per_request, "tokens_per_chunk": 1, "events_per_write": events_per_write,
              "token_text": "t"}
    with ServerProcess(script) as server:
        endpoint = Endpoint(server.url, api="openai-completions", model="scripted-model")
        spec = PointSpec(mode="closed", concurrency=streams, num_requests=streams * requests_per_stream)
        cpu_start = time.process_time()
        outcome = run_async(run_point(endpoint, SUITE, spec, on_record=lambda r: None))
        client_cpu_s = time.process_time() - cpu_start
    chunks = sum(len(r.chunk_times_ns) for r in outcome.records)
    seconds = (outcome.window_end_ns - outcome.window_start_ns) / 1e9
    reads = sum(len(set(r.chunk_times_ns)) for r in outcome.records)  # chunks in one read share a stamp
    return {"streams": streams, "chunks": chunks, "seconds": seconds, "chunks_per_s": chunks / seconds,
            "errors": sum(not r.ok for r in outcome.records), "client_cpu_share": client_cpu_s / seconds,
            "chunks_per_read": chunks / max(1, reads)}


def main() -> None:
    parser = argparse.ArgumentParser(description="client overhead against a scripted server in another process")
    parser.add_argument("--concurrency", default="128,512")
    parser.add_argument("--waves", type=int, default=3, help="requests per stream at each concurrency")
    parser.add_argument("--ttft-ms", type=float, default=100.0, help="scripted TTFT (accuracy points)")
    parser.add_argument("--ttft-jitter-ms", type=float, default=100.0, help="per-request extra TTFT, 0 to this")
    parser.add_argument("--chunk-delay-ms", type=float, default=20.0)
    parser.add_argument("--chunks", type=int, default=32, help="chunks per request (accuracy points)")
    parser.add_argument("--chunks-jitter", type=int, default=16, help="per-request extra chunks, 0 to this")
    parser.add_argument("--no-plain", dest="plain", action="store_false",
                        help="skip the plain aiohttp reference client")
    parser.add_argument("--throughput-streams", type=int, default=64)
    parser.add_argument("--throughput-chunks", type=int, default=2000)
    args = parser.parse_args()
    script = {"ttft_s": args.ttft_ms / 1000, "ttft_jitter_s": args.ttft_jitter_ms / 1000,
              "chunk_delay_s": args.chunk_delay_ms / 1000, "num_chunks": args.chunks,
              "num_chunks_jitter": args.chunks_jitter, "tokens_per_chunk": 1}
    print("specgauge client overhead (client and server on this machine, server in its own process)")
    print(f"  schedule: TTFT {args.ttft_ms:.0f}-{args.ttft_ms + args.ttft_jitter_ms:.0f} ms, one chunk every "
          f"{args.chunk_delay_ms:.0f} ms, {args.chunks}-{args.chunks + args.chunks_jitter} chunks per request; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for level in [int(x) for x in args.concurrency.split(",")]:
        r = accuracy(level, args.waves, script)
        print(f"  {r['concurrency']:4d} streams, {r['requests']} requests ({r['errors']} errors): "
              f"TTFT - truth median {r['ttft_error_ms_p50']:+.2f} ms, p99 {r['ttft_error_ms_p99']:+.2f} ms "
              f"(target <= 2 / <= 10); ITL vs truth {r['itl_error_pct_mean']:+.3f} % mean, "
              f"|err| p99 {r['itl_error_pct_p99_abs']:.3f} % of {r['itl_truth_ms']:.2f} ms (target <= 2 %)")
        print(f"       connect: {r['connections']} connections opened before the window, median "
              f"{r['connect_ms_p50']:.2f} ms, max {r['connect_ms_max']:.2f} ms; "
              f"send lag median {r['send_lag_ms_p50']:.2f} ms, p99 {r['send_lag_ms_p99']:.2f} ms; "
              f"{r['chunks_per_s']:,.0f} chunks/s took {100 * r['client_cpu_share']:.0f} % of one core (client)")
        if args.plain:
            p = plain_accuracy(level, args.waves, script)
            print(f"       plain aiohttp+uvloop reference client, same point: TTFT - truth median "
                  f"{p['ttft_error_ms_p50']:+.2f} ms, p99 {p['ttft_error_ms_p99']:+.2f} ms; "
                  f"ITL vs truth {p['itl_error_pct_mean']:+.3f} % mean")
    for events_per_write in (16, 1):
        t = throughput(args.throughput_streams, args.throughput_chunks, 2, events_per_write)
        print(f"  {t['streams']:4d} streams, server as fast as it can ({events_per_write} event(s) per write): "
              f"{t['chunks']} chunks in {t['seconds']:.2f} s = {t['chunks_per_s']:,.0f} chunks/s "
              f"(target >= 100,000; {t['errors']} errors); {t['chunks_per_read']:.1f} chunks per read, "
              f"client at {100 * t['client_cpu_share']:.0f} % of one core")
    for module, label in PEERS.items():
        installed = importlib.util.find_spec(module) is not None
        state = "installed, but no adapter to drive it here yet" if installed else "not installed"
        print(f"  peer {label}: {state}")


if __name__ == "__main__":
    main()

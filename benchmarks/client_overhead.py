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
  warm-up, send time taken before ``session.post``), side by side in the same run;
- client CPU per content chunk, first of all: the client process's CPU time (``process_time``)
  for two runs that differ only in chunks per request (16 and 176 by default, 512 requests at
  128 streams, the server pacing one event per write every 20 ms as a GPU server's decode steps
  do), differenced and divided by the extra chunks, so set-up, request issue and the machine's
  other load largely cancel. Measured for this tree and for the code of another revision
  (``--before-rev``, default ``main``: its ``src`` extracted with ``git archive``, the old
  aiohttp streaming path), each in a fresh process against the same server, repeated
  ``--cpu-repeats`` times: the spread of the repeats is the machine's noise.

Targets: CPU <= 10 us per chunk; TTFT error <= 2 ms median, <= 10 ms p99; ITL within 2 %;
>= 100,000 chunks/s. The CPU comparison also runs the field's own clients (vLLM's ``bench serve``
request function from ``--vllm-python``, SGLang's ``bench_serving`` one from ``--sglang-sources``;
``benchkit/peer_clients.py``) against the same server, each in its own process.

    PYTHONPATH=src python benchmarks/client_overhead.py [--concurrency 128,512] [--waves 3]
    PYTHONPATH=src python benchmarks/client_overhead.py --only-cpu --before-rev main
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# ``--client-src DIR``: the client code measured in this process (a child of --before-rev's run).
CLIENT_SRC = Path(sys.argv[sys.argv.index("--client-src") + 1]) if "--client-src" in sys.argv else SRC
sys.path.insert(0, str(CLIENT_SRC))

from specgauge.client.endpoint import Endpoint, Timeouts  # noqa: E402
from specgauge.load.plan import PointSpec  # noqa: E402
from specgauge.load.runner import run_async, run_point  # noqa: E402
from benchkit.truth_server import SUITE, ServerProcess, percentile  # noqa: E402

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
    to_server_ms, to_client_ms = [], []   # the error's two halves (one clock: same machine, CLOCK_MONOTONIC)
    for record in outcome.records:
        t = truth.get(record.server_request_id or "")
        if not record.ok or t is None or not t["chunk_send_ns"]:
            errors += 1
            continue
        client_ttft = record.chunk_times_ns[0] - record.t_send_ns
        server_ttft = t["chunk_send_ns"][0] - t["t_recv_ns"]
        ttft_error_ms.append((client_ttft - server_ttft) / 1e6)
        to_server_ms.append((t["t_recv_ns"] - record.t_send_ns) / 1e6)
        to_client_ms.append((record.chunk_times_ns[0] - t["chunk_send_ns"][0]) / 1e6)
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
            "to_server_ms_p50": percentile(to_server_ms, 50), "to_server_ms_p99": percentile(to_server_ms, 99),
            "to_client_ms_p50": percentile(to_client_ms, 50), "to_client_ms_p99": percentile(to_client_ms, 99),
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


def cpu_run(url: str, streams: int, requests: int) -> tuple[float, int]:
    """One closed-loop point with the client of this process: (CPU seconds, content chunks)."""
    endpoint = Endpoint(url, api="openai-completions", model="scripted-model")
    spec = PointSpec(mode="closed", concurrency=streams, num_requests=requests)
    cpu_start = time.process_time()
    outcome = run_async(run_point(endpoint, SUITE, spec, on_record=lambda r: None,
                                  timeouts=Timeouts(connect_s=30, headers_s=120, read_s=120)))
    cpu_s = time.process_time() - cpu_start
    bad = sum(not r.ok for r in outcome.records)
    if bad:
        raise SystemExit(f"{bad} of {len(outcome.records)} requests failed: the CPU figure would be wrong")
    return cpu_s, sum(len(r.chunk_times_ns) for r in outcome.records)


class _FloorStream(asyncio.Protocol):
    """The floor: a raw ``asyncio.Protocol`` that writes each request and only notices the end of
    its chunked response (``0\\r\\n\\r\\n``): nothing is parsed, decoded or recorded."""

    def __init__(self, request: bytes, remaining: list[int], finished: asyncio.Future) -> None:
        self.request, self.remaining, self.finished = request, remaining, finished

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._next()

    def _next(self) -> None:
        if self.remaining[0] <= 0:
            self.transport.close()
            if not self.finished.done() and self.remaining[1] == 0:
                self.finished.set_result(None)
            return
        self.remaining[0] -= 1
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if data.endswith(b"0\r\n\r\n"):
            self.remaining[1] -= 1
            self._next()


async def _floor_point(url: str, streams: int, requests: int) -> None:
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"model": "scripted-model", "prompt": "floor", "max_tokens": 64, "stream": True}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    remaining = [requests, requests]   # to send, to finish (shared by the streams)
    for _ in range(streams):
        await loop.create_connection(lambda: _FloorStream(request, remaining, finished), host, int(port))
    await finished


def cpu_child(args) -> None:
    """``--cpu-child URL``: one CPU run in this process (this tree's or ``--client-src``'s client), as
    JSON; ``sys_s`` is the kernel's share of ``cpu_s`` (``os.times``: the reads, epoll, wake-ups)."""
    start = os.times()
    if args.floor:
        cpu_start = time.process_time()
        run_async(_floor_point(args.cpu_child, args.cpu_streams, args.cpu_requests))
        cpu_s, chunks, client = time.process_time() - cpu_start, args.floor * args.cpu_requests, str(args.client_src)
    else:
        import specgauge.client.send as measured

        cpu_s, chunks = cpu_run(args.cpu_child, args.cpu_streams, args.cpu_requests)
        client = measured.__file__
    print(json.dumps({"cpu_s": cpu_s, "sys_s": os.times().system - start.system, "chunks": chunks, "client": client}))


def extract_revision(rev: str, into: Path) -> Path:
    """``rev``'s ``src`` folder written under ``into`` (read from git; the checkout is not touched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def peer_command(peer: str, args, url: str) -> list[str] | None:
    """The child command that runs ``peer``'s own client (:mod:`benchkit.peer_clients`), or None
    when it cannot run here (vLLM not installed in ``--vllm-python``, no SGLang sources)."""
    if peer == "vllm":
        python = Path(args.vllm_python)
        if not python.is_file():
            return None
        check = subprocess.run([str(python), "-c", "import vllm.benchmarks.lib.endpoint_request_func"],
                               capture_output=True)
        if check.returncode != 0:
            return None
    else:
        python = Path(sys.executable)
        sources = Path(args.sglang_sources)
        if not (list(sources.glob("sglang-python-*.tar.xz")) or (sources / "python" / "sglang").is_dir()
                or (sources / "sglang").is_dir()):
            return None
    return [str(python), str(ROOT / "benchmarks" / "benchkit" / "peer_clients.py"), "--peer", peer, "--url", url,
            "--streams", str(args.cpu_streams), "--requests", str(args.cpu_requests),
            "--sglang-sources", str(args.sglang_sources)]


def cpu_per_chunk(args) -> None:
    """Client CPU per chunk: this tree, the floor, ``--before-rev`` and the peers' own clients, each
    in fresh processes against the same server script, repeats interleaved."""
    import tempfile

    small, large = args.cpu_chunks
    clients = [("this tree (own HTTP/1.1 transport)", "tree", SRC),
               ("floor (uvloop + bare asyncio.Protocol, nothing parsed)", "floor", None)]
    with tempfile.TemporaryDirectory() as scratch:
        if args.before_rev:
            try:
                old_src = extract_revision(args.before_rev, Path(scratch))
                clients.append((f"{args.before_rev} (git archive {args.before_rev} src)", "tree", old_src))
            except subprocess.CalledProcessError as exc:
                print(f"  cannot extract {args.before_rev!r}: {exc.stderr.decode().strip()}")
        for peer, label in (("vllm", "vLLM bench serve's client (aiohttp, asyncio)"),
                            ("sglang", "SGLang bench_serving's client (aiohttp, asyncio)")):
            if peer in args.peers:
                if peer_command(peer, args, "http://127.0.0.1:1") is None:
                    where = args.vllm_python if peer == "vllm" else args.sglang_sources
                    print(f"  {label}: not measured (not available from {where})")
                else:
                    clients.append((label, peer, None))
        results: dict[str, list[float]] = {label: [] for label, _, _ in clients}
        kernel: dict[str, list[float]] = {label: [] for label, _, _ in clients}
        print(f"  client CPU per content chunk: {args.cpu_requests} requests at {args.cpu_streams} streams, "
              f"{small} vs {large} chunks per request, one event per write every {args.cpu_delay_ms:g} ms")
        for repeat in range(args.cpu_repeats):
            for label, kind, src in clients:
                runs = []
                for chunks in (small, large):
                    script = {"ttft_s": 0.05, "ttft_jitter_s": 0.05, "chunk_delay_s": args.cpu_delay_ms / 1000,
                              "num_chunks": chunks, "tokens_per_chunk": 1}
                    with ServerProcess(script) as server:
                        if kind in ("vllm", "sglang"):
                            command, env = peer_command(kind, args, server.url), dict(os.environ)
                            env.pop("PYTHONPATH", None)
                        else:
                            floor = ["--floor", str(chunks)] if kind == "floor" else []
                            command = [sys.executable, __file__, "--cpu-child", server.url, "--client-src",
                                       str(src or SRC), "--cpu-streams", str(args.cpu_streams), "--cpu-requests",
                                       str(args.cpu_requests), *floor]
                            env = {**os.environ, "PYTHONPATH": str(src or SRC)}
                        child = subprocess.run(command, capture_output=True, text=True, env=env)
                    if child.returncode != 0:
                        raise SystemExit(f"{label}: {child.stderr.strip().splitlines()[-1:]}")
                    runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
                    if runs[-1].get("failed"):
                        raise SystemExit(f"{label}: {runs[-1]['failed']} requests failed ({runs[-1]['error']})")
                    if kind == "tree" and not runs[-1]["client"].startswith(str(src)):
                        raise SystemExit(f"{label}: the child measured {runs[-1]['client']}, not {src}")
                extra = runs[1]["chunks"] - runs[0]["chunks"]
                us = 1e6 * (runs[1]["cpu_s"] - runs[0]["cpu_s"]) / extra
                results[label].append(us)
                kernel[label].append(1e6 * (runs[1]["sys_s"] - runs[0]["sys_s"]) / extra)
                print(f"    repeat {repeat + 1}: {label}: {us:.2f} us per chunk, {kernel[label][-1]:.2f} in the kernel "
                      f"({runs[0]['cpu_s']:.2f} s for {runs[0]['chunks']} chunks, "
                      f"{runs[1]['cpu_s']:.2f} s for {runs[1]['chunks']}); load average {os.getloadavg()[0]:.2f}")
    medians = {label: statistics.median(values) for label, values in results.items()}
    for label, values in results.items():
        print(f"  {label}: median {medians[label]:.2f} us per chunk (range {min(values):.2f}-{max(values):.2f}, "
              f"{len(values)} repeats; target <= 10), of which {statistics.median(kernel[label]):.2f} in the kernel")
    (new_label, new), (floor_label, floor), *others = medians.items()
    print(f"  this tree minus the floor: {new - floor:.2f} us per chunk is specgauge's own (parse, SSE, adapter, "
          f"record); the floor is the kernel and the event loop, one read per event")
    for other_label, other in others:
        print(f"  ratio {other_label} / this tree: {other / new:.2f}x")


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
    parser.add_argument("--only-cpu", action="store_true", help="only the CPU-per-chunk comparison")
    parser.add_argument("--no-throughput", dest="throughput", action="store_false", help="skip the chunks/s ceiling")
    parser.add_argument("--no-cpu", dest="cpu", action="store_false", help="skip the CPU-per-chunk comparison")
    parser.add_argument("--before-rev", default="main", help="git revision whose client is the 'before' ('' : none)")
    parser.add_argument("--cpu-repeats", type=int, default=3)
    parser.add_argument("--cpu-streams", type=int, default=128)
    parser.add_argument("--cpu-requests", type=int, default=512)
    parser.add_argument("--cpu-chunks", type=lambda text: tuple(int(x) for x in text.split(",")), default=(16, 176),
                        help="chunks per request of the two runs, SMALL,LARGE")
    parser.add_argument("--cpu-delay-ms", type=float, default=20.0)
    parser.add_argument("--peers", type=lambda text: [x for x in text.split(",") if x], default=["vllm", "sglang"],
                        help="peer clients measured beside ours: vllm,sglang ('' : none)")
    parser.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"),
                        help="a Python with vLLM installed (make vllm builds .venv-vllm)")
    parser.add_argument("--sglang-sources",
                        default=os.environ.get("SGLANG_CPU_SOURCES", str(ROOT.parent / "shared" / "sglang-cpu")),
                        help="SGLang's sources: a checkout or the folder of sglang-python-*.tar.xz")
    parser.add_argument("--cpu-child", help=argparse.SUPPRESS)
    parser.add_argument("--client-src", help=argparse.SUPPRESS)
    parser.add_argument("--floor", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_child:
        cpu_child(args)
        return
    script = {"ttft_s": args.ttft_ms / 1000, "ttft_jitter_s": args.ttft_jitter_ms / 1000,
              "chunk_delay_s": args.chunk_delay_ms / 1000, "num_chunks": args.chunks,
              "num_chunks_jitter": args.chunks_jitter, "tokens_per_chunk": 1}
    print("specgauge client overhead (client and server on this machine, server in its own process)")
    print(f"  schedule: TTFT {args.ttft_ms:.0f}-{args.ttft_ms + args.ttft_jitter_ms:.0f} ms, one chunk every "
          f"{args.chunk_delay_ms:.0f} ms, {args.chunks}-{args.chunks + args.chunks_jitter} chunks per request; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.cpu:
        cpu_per_chunk(args)
    if args.only_cpu:
        return
    for level in [int(x) for x in args.concurrency.split(",")]:
        r = accuracy(level, args.waves, script)
        print(f"  {r['concurrency']:4d} streams, {r['requests']} requests ({r['errors']} errors): "
              f"TTFT - truth median {r['ttft_error_ms_p50']:+.2f} ms, p99 {r['ttft_error_ms_p99']:+.2f} ms "
              f"(target <= 2 / <= 10); ITL vs truth {r['itl_error_pct_mean']:+.3f} % mean, "
              f"|err| p99 {r['itl_error_pct_p99_abs']:.3f} % of {r['itl_truth_ms']:.2f} ms (target <= 2 %)")
        print(f"       of which: client write -> server read of the request median {r['to_server_ms_p50']:.2f} ms, "
              f"p99 {r['to_server_ms_p99']:.2f} ms (the server's loop); server write -> client read of the first "
              f"chunk median {r['to_client_ms_p50']:.2f} ms, p99 {r['to_client_ms_p99']:.2f} ms (the client's loop)")
        print(f"       connect: {r['connections']} connections opened before the window, median "
              f"{r['connect_ms_p50']:.2f} ms, max {r['connect_ms_max']:.2f} ms; "
              f"send lag median {r['send_lag_ms_p50']:.2f} ms, p99 {r['send_lag_ms_p99']:.2f} ms; "
              f"{r['chunks_per_s']:,.0f} chunks/s took {100 * r['client_cpu_share']:.0f} % of one core (client)")
        if args.plain:
            p = plain_accuracy(level, args.waves, script)
            print(f"       plain aiohttp+uvloop reference client, same point: TTFT - truth median "
                  f"{p['ttft_error_ms_p50']:+.2f} ms, p99 {p['ttft_error_ms_p99']:+.2f} ms; "
                  f"ITL vs truth {p['itl_error_pct_mean']:+.3f} % mean")
    for events_per_write in (16, 1) if args.throughput else ():
        t = throughput(args.throughput_streams, args.throughput_chunks, 2, events_per_write)
        print(f"  {t['streams']:4d} streams, server as fast as it can ({events_per_write} event(s) per write): "
              f"{t['chunks']} chunks in {t['seconds']:.2f} s = {t['chunks_per_s']:,.0f} chunks/s "
              f"(target >= 100,000; {t['errors']} errors); {t['chunks_per_read']:.1f} chunks per read, "
              f"client at {100 * t['client_cpu_share']:.0f} % of one core")


if __name__ == "__main__":
    main()

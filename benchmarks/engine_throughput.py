"""Throughput of the embedded engine against Hugging Face transformers on the same weights.

Measured in one run, on this machine:

* single-stream decode tok/s of the engine (one streaming request over HTTP; decode rate =
  (tokens - 1) / (last chunk - first chunk), so prefill is excluded);
* aggregate tok/s at 1, 8, 32 and 64 concurrent streaming clients (aiohttp, closed loop: each
  client sends its next request when the previous one ends; all completion tokens / wall time);
* the engine process's peak RSS (VmHWM);
* transformers ``generate()`` on the same weights and thread count, greedy, one request at a
  time, its single-stream runs interleaved with the engine's so both see the same load: that is how
  ``generate()`` serves independent requests — its static batching needs
  requests that arrive together and are padded to one length, which a serving workload does
  not give — so its aggregate rate at any concurrency is its one-request rate.

Usage::

    PYTHONPATH=src python benchmarks/engine_throughput.py [--model DIR] [--tokens 128]

Without ``--model`` it uses the shipped target (``src/specgauge/assets/target``) when present,
else a random-weight model of the target's shape (d=384, 6 layers, 6 heads / 2 KV heads,
4k vocabulary) with a tokenizer trained on the standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from specgauge.shipped_models import DEFAULT  # noqa: E402
from specgauge.engine.serving.launch import EngineProcess  # noqa: E402

SHIPPED = DEFAULT.target_dir   # the default shipped model (shipped_models.py)
PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "The history of the printing press begins",
    "import json\n\nwith open('config.json') as f:\n    config = json.load(f)\n",
    "Question: what does a hash table do?\nAnswer:",
    "class LRUCache:\n    def __init__(self, capacity):\n",
    "Tool call: search(query=\"weather in Paris\")\nResult:",
    "for i in range(10):\n",
    "Once upon a time, in a small village near the mountains, there lived an old clockmaker who",
]


def model_dir(args, scratch: Path) -> tuple[Path, str]:
    if args.model:
        return Path(args.model), "given"
    if (SHIPPED / "config.json").is_file():
        return SHIPPED, "shipped target"
    from specgauge.engine.models.random_model import stdlib_text, write_random_model

    path = scratch / "random-target"
    write_random_model(path, hidden_size=384, num_layers=6, num_heads=6, num_kv_heads=2, intermediate_size=1024,
                       vocab_size=4096, max_position_embeddings=1024, tie_word_embeddings=True, std=0.05,
                       tokenizer_text=stdlib_text())
    return path, "random weights, target shape"


async def stream_one(session, url: str, prompt: str, tokens: int) -> tuple[int, list[float]]:
    """One streaming completion; returns its completion tokens and the arrival time of each chunk."""
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    times, completion = [], 0
    async with session.post(url + "/v1/completions", json=body) as response:
        response.raise_for_status()
        async for raw in response.content:
            if not raw.startswith(b"data: {"):
                continue
            if b'"choices":[]' in raw:  # the usage chunk: the only one parsed, to keep the client light
                completion = json.loads(raw[6:])["usage"]["completion_tokens"]
            else:
                times.append(time.perf_counter())
    return completion, times


async def single_stream(url: str, prompt: str, tokens: int) -> float:
    """Decode rate of one streaming request: (tokens - 1) / (last chunk - first chunk)."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        await stream_one(session, url, prompt, 4)  # warm the connection and the engine
        count, times = await stream_one(session, url, prompt, tokens)
    return (count - 1) / (times[-1] - times[0])


async def aggregate(url: str, concurrency: int, tokens: int, requests_per_client: int) -> float:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=3600)) as session:
        async def client(index: int) -> int:
            total = 0
            for r in range(requests_per_client):
                count, _ = await stream_one(session, url, PROMPTS[(index + r) % len(PROMPTS)], tokens)
                total += count
            return total

        start = time.perf_counter()
        counts = await asyncio.gather(*(client(i) for i in range(concurrency)))
        return sum(counts) / (time.perf_counter() - start)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class EngineCore:
    """The engine stepped synchronously in this process — no HTTP, no thread — as ``generate()`` is."""

    def __init__(self, path: Path, threads: int, device: str, dtype: str) -> None:
        import torch

        from specgauge.engine.core.engine import Engine, EngineConfig

        torch.set_num_threads(threads)
        self.engine = Engine(EngineConfig(model_dir=str(path), device=device, dtype=dtype, threads=threads))
        self.engine.tokenizer.encode(PROMPTS[0])
        self.rate(PROMPTS[0], 8)

    def _add(self, prompt: str, tokens: int):
        from specgauge.engine.core.sampling_params import SamplingParams
        from specgauge.engine.core.scheduler import Request
        from specgauge.engine.models.tokenizer import TextState

        engine = self.engine
        ids = engine.tokenizer.encode(prompt)
        params = SamplingParams(max_tokens=tokens, temperature=0, ignore_eos=True)
        request = Request(engine.new_request_id(), ids, params,
                          text_state=TextState(engine.tokenizer, context_ids=ids))
        engine.scheduler.add(request)
        return request

    def rate(self, prompt: str, tokens: int) -> float:
        """Decode tok/s of one request: (tokens - 1) / (time of last token - time of first)."""
        request = self._add(prompt, tokens)
        times = []
        while self.engine.scheduler.has_work:
            if any(u.new_token_ids for u in self.engine.step()):
                times.append(time.perf_counter())
        assert len(request.output_ids) == tokens
        return (tokens - 1) / (times[-1] - times[0])

    def aggregate(self, concurrency: int, tokens: int) -> float:
        """Generated tok/s with ``concurrency`` requests submitted together (prefill included)."""
        requests = [self._add(PROMPTS[i % len(PROMPTS)], tokens) for i in range(concurrency)]
        start = time.perf_counter()
        while self.engine.scheduler.has_work:
            self.engine.step()
        return sum(len(r.output_ids) for r in requests) / (time.perf_counter() - start)


class TransformersPeer:
    """The same weights under transformers ``generate()``, greedy, one request at a time.

    Both of transformers' attention implementations that run on CPU (``sdpa``, ``eager``) are
    tried and the faster one is used, so the peer is not handicapped by a slow kernel.
    """

    def __init__(self, path: Path, threads: int, dtype: str) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import LlamaForCausalLM

        torch.set_num_threads(threads)
        torch_dtype = getattr(torch, dtype)
        self.torch = torch
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        timings = {}
        for impl in ("sdpa", "eager"):
            self.model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch_dtype,
                                                          attn_implementation=impl).eval()
            self.timed(PROMPTS[0], 4)
            timings[impl] = min(self.timed(PROMPTS[0], 16) for _ in range(2))
        self.attn_implementation = min(timings, key=timings.get)
        self.model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch_dtype,
                                                      attn_implementation=self.attn_implementation).eval()
        self.timed(PROMPTS[0], 8)

    def timed(self, prompt: str, new_tokens: int) -> float:
        torch = self.torch
        ids = torch.tensor([self.tokenizer.encode(prompt, add_special_tokens=False).ids])
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                      min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        assert out.shape[1] - ids.shape[1] == new_tokens
        return time.perf_counter() - start

    def rates(self, prompt: str, tokens: int) -> tuple[float, float]:
        """(decode tok/s excluding the first token, whole-request tok/s) for one request."""
        first = self.timed(prompt, 1)
        full = self.timed(prompt, tokens)
        return (tokens - 1) / (full - first), tokens / full


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="model directory (default: shipped target, else random weights)")
    parser.add_argument("--tokens", type=int, default=128, help="completion tokens per request")
    parser.add_argument("--concurrency", default="1,8,32,64")
    parser.add_argument("--requests-per-client", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="single-stream repetitions (median)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads, both engines (1: on a shared 2-core machine, 2 OpenMP threads "
                             "stall whenever another process holds a core)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="compute dtype of both engines (the weights are the same)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    with tempfile.TemporaryDirectory() as scratch:
        path, kind = model_dir(args, Path(scratch))
        print(f"model: {path} ({kind}); {args.tokens} tokens per request; {args.threads} threads; "
              f"{args.dtype} in both engines")
        serve_args = ["--model", str(path), "--threads", str(args.threads), "--device", args.device,
                      "--dtype", args.dtype,
                      "--max-running-requests", str(max(levels)), "--max-waiting-requests", str(max(levels))]
        results: dict[str, float] = {}
        peer = TransformersPeer(path, args.threads, args.dtype)
        core = EngineCore(path, args.threads, args.device, args.dtype)
        with EngineProcess(serve_args) as engine:
            # Single stream: engine over HTTP, engine core in-process, transformers — interleaved,
            # so all three see the same machine load.
            rates: dict[str, list[float]] = {"http": [], "core": [], "hf_decode": [], "hf_whole": []}
            for i in range(args.repeats):
                prompt = PROMPTS[i % len(PROMPTS)]
                rates["http"].append(asyncio.run(single_stream(engine.url, prompt, args.tokens)))
                rates["core"].append(core.rate(prompt, args.tokens))
                hf_decode, hf_whole = peer.rates(prompt, args.tokens)
                rates["hf_decode"].append(hf_decode)
                rates["hf_whole"].append(hf_whole)
            median = {k: statistics.median(v) for k, v in rates.items()}
            results["engine_single"] = median["http"]
            hf_decode, hf_whole = median["hf_decode"], median["hf_whole"]
            print(f"engine single-stream decode over HTTP: {median['http']:.1f} tok/s", flush=True)
            print(f"engine core single-stream decode, in-process: {median['core']:.1f} tok/s", flush=True)
            print(f"transformers generate() single-stream decode, in-process: {hf_decode:.1f} tok/s "
                  f"(attn_implementation={peer.attn_implementation}; whole request incl. prefill: "
                  f"{hf_whole:.1f} tok/s — one request at a time, so also its aggregate)", flush=True)
            if 32 in levels:
                results["core_c32"] = core.aggregate(32, args.tokens)
                print(f"engine core aggregate at 32, in-process (no HTTP): {results['core_c32']:.1f} tok/s", flush=True)
            del core
            for level in levels:
                rate = asyncio.run(aggregate(engine.url, level, args.tokens, args.requests_per_client))
                results[f"engine_c{level}"] = rate
                print(f"engine aggregate at {level:>2} concurrent: {rate:.1f} tok/s", flush=True)
            rss = peak_rss_mib(engine.process.pid)
            print(f"engine peak RSS: {rss:.0f} MiB (server process, VmHWM)")
        # transformers again after the aggregate runs: the machine's load drifts, so the aggregate
        # ratios use transformers' median over samples taken before and after them.
        for i in range(args.repeats):
            rates["hf_whole"].append(peer.rates(PROMPTS[i % len(PROMPTS)], args.tokens)[1])
        hf_whole = statistics.median(rates["hf_whole"])
        print(f"transformers whole-request rate, median of {len(rates['hf_whole'])} runs around the aggregates: "
              f"{hf_whole:.1f} tok/s")

    single = results["engine_single"]
    print("\nratios (goal in brackets):")
    print(f"  engine over HTTP / transformers, single-stream decode:  {single / hf_decode:.2f}x  [>= 2x]")
    print(f"  engine core / transformers, single-stream decode:       {median['core'] / hf_decode:.2f}x  "
          f"(both in-process, no HTTP)")
    if "engine_c32" in results:
        at_32 = results["engine_c32"]
        print(f"  engine aggregate at 32 / transformers:                  {at_32 / hf_whole:.2f}x  [>= 10x]")
        print(f"  engine aggregate at 32 / engine single-stream (HTTP):   {at_32 / single:.2f}x  [>= 5x]")
        print(f"  engine core aggregate at 32 / transformers:             {results['core_c32'] / hf_whole:.2f}x  "
              f"(both in-process, no HTTP)")


if __name__ == "__main__":
    main()

"""Single-stream decode tok/s of speculative configurations in-process (no HTTP), interleaved.

    PYTHONPATH=src python benchmarks/spec_inprocess.py                              # the default shipped model
    PYTHONPATH=src python benchmarks/spec_inprocess.py --model specgauge-9m-4k --suite agentic
    PYTHONPATH=src python benchmarks/spec_inprocess.py --configs plain,k3,k5p30 --suite encyclopedic --prompts 12
    PYTHONPATH=src python benchmarks/spec_inprocess.py --configs plain,k3p0,t3x2n6,t4x3n8 --model specgauge-9m-4k
    PYTHONPATH=src python benchmarks/spec_inprocess.py --configs plain@none,k6p15@none,plain@fp16,k6p15@fp16

Each configuration is an :class:`Engine` of the shipped target ``--model`` (1 thread) built once; the
prompts of ``--suite`` run one at a time through every configuration in turn (request by
request, so drifting machine load falls on all alike), ``Engine.step`` driven here. A
configuration is ``plain``, ``ngram`` or ``k<steps>p<percent>`` (EAGLE-3 chain of up to
``steps`` drafts with ``--speculative-min-draft-prob percent/100``; ``k4p0`` = a fixed chain of 4),
with a trailing ``ad`` for ``--speculative-adaptive``, or ``t<steps>x<topk>n<tokens>`` (an EAGLE-3
tree: SGLang's ``--speculative-num-steps``, ``--speculative-eagle-topk`` and
``--speculative-num-draft-tokens``), ``#b`` for the drafter of ``--draft-b`` (two heads side by
side: ``--configs plain,k3p0,k3p0#b --draft-b DIR``), and ``@none`` or ``@fp16`` for the
engine's ``--weight-packing`` (default ``auto``). Prints each one's median decode tok/s
(tokens after the first / time after the first step), its ratio to ``plain`` (to ``plain@X``
for a configuration ``...@X`` when that is run too), the median of the per-prompt ratios and its
decode tokens per step (the acceptance length: tokens per verify) and its median time to the
first token (the prompt's prefill).

    PYTHONPATH=src python benchmarks/spec_inprocess.py --compare-src /path/to/other/checkout

``--compare-src DIR`` also runs every configuration on ``DIR``'s source tree (``DIR/src``, e.g.
main before a change), in a worker process driven in lockstep: each prompt of each configuration
runs in this tree and in that one back to back (the order alternating by prompt), never both at
once. Printed per configuration: both trees' median tok/s, the median of the per-prompt ratios
this/that, whether both decoded the same tokens in the same number of steps, and both trees'
median time to the first token.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = "--worker-src"  # internal: serve --compare-src's requests from the source tree given after it
SRC = Path(sys.argv[sys.argv.index(WORKER) + 1]) if WORKER in sys.argv else ROOT / "src"
sys.path.insert(0, str(SRC))

import torch  # noqa: E402

from specgauge.compare.fit import fitting_suite, render_prompt  # noqa: E402
from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.shipped_models import DEFAULT_MODEL, get_shipped  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.core.scheduler import SchedulerConfig  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def build(name: str, draft: str | None, target: str, draft_b: str | None = None) -> Engine:
    """The engine a configuration name describes (see the module docstring)."""
    name, _, packing = name.partition("@")
    name, _, which = name.partition("#")
    if which:
        if which != "b" or draft_b is None:
            raise SystemExit(f"configuration {name}#{which}: '#b' names the drafter of --draft-b, which is not given")
        draft = draft_b
    if name == "plain":
        spec = SpeculativeConfig()
    elif name == "ngram":
        spec = SpeculativeConfig(algorithm="NGRAM", num_steps=5)
    elif tree := re.fullmatch(r"t(\d+)x(\d+)n(\d+)", name):
        spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=int(tree[1]), eagle_topk=int(tree[2]),
                                 num_draft_tokens=int(tree[3]), min_draft_prob=0.0, draft_model_path=draft)
    else:
        match = re.fullmatch(r"k(\d+)p(\d+)(ad)?", name)
        if not match:
            raise SystemExit(f"unknown configuration {name!r} (plain, ngram, k<steps>p<percent>[ad], "
                             f"t<steps>x<topk>n<tokens>)")
        spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=int(match[1]), min_draft_prob=int(match[2]) / 100,
                                 adaptive=bool(match[3]), draft_model_path=draft)
    # One request at a time: a KV pool of the engine's minimum (two whole contexts) rather than the
    # default for 64 running requests, so that several engines of a real model fit in memory at once.
    return Engine(EngineConfig(model_dir=target, threads=1, speculative=spec, weight_packing=packing or "auto",
                               scheduler=SchedulerConfig(max_running=1)))


def decode_rate(engine: Engine, prompt: list[int], tokens: int) -> tuple[float, int, int, float]:
    """One greedy request alone: decode tokens per second after its first token, the decode
    tokens and steps (tokens per step = the request's acceptance length after its first token),
    and the seconds to the first token (the prefill's steps)."""
    engine.submit("r", prompt, SamplingParams(max_tokens=tokens, temperature=0.0), lambda event: None)
    engine.drain_inbox(block=False)
    submitted = time.perf_counter()
    while engine.scheduler.has_work and not any(update.new_token_ids for update in engine.step()):
        pass  # prefill chunks, then the first token
    first_token = time.perf_counter() - submitted
    started, count, steps = time.perf_counter(), 0, 0
    while engine.scheduler.has_work:
        count += sum(len(update.new_token_ids) for update in engine.step())
        steps += 1
    return count / (time.perf_counter() - started), count, steps, first_token


def serve_worker() -> None:
    """``--worker-src``: build the engines named on the first stdin line, then answer one
    ``decode_rate`` per line (JSON in, JSON out on the original stdout; all else to stderr)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    torch.set_num_threads(1)
    engines: dict[str, Engine] = {}
    for line in sys.stdin:
        ask = json.loads(line)
        if "build" in ask:
            engines = {name: build(name, ask["draft"], ask["target"], ask.get("draft_b")) for name in ask["build"]}
            answer: dict = {"built": sorted(engines)}
        else:
            rate, count, steps, first = decode_rate(engines[ask["name"]], ask["prompt"], ask["tokens"])
            answer = {"rate": rate, "count": count, "steps": steps, "first": first}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()


class OtherTree:
    """The engines of another source tree, in a worker process (``--compare-src``)."""

    def __init__(self, checkout: Path, names: list[str], draft: str | None, target: str,
                 draft_b: str | None = None) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), WORKER, str(checkout.resolve() / "src")]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ask({"build": names, "draft": draft, "target": target, "draft_b": draft_b})

    def ask(self, message: dict) -> dict:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the --compare-src worker ended (exit {self.process.wait()})")
        return json.loads(line)

    def decode_rate(self, name: str, prompt: list[int], tokens: int) -> tuple[float, int, int, float]:
        answer = self.ask({"name": name, "prompt": prompt, "tokens": tokens})
        return answer["rate"], answer["count"], answer["steps"], answer["first"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def main() -> None:
    if WORKER in sys.argv:
        serve_worker()
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="a shipped model name (its target, and its drafter unless --draft)")
    parser.add_argument("--configs", default="plain,k3p0,k4p0,k5p0,k5p30,ngram")
    parser.add_argument("--suite", default="coding")
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--draft", default=None, help="EAGLE-3 head directory (default: the shipped drafter)")
    parser.add_argument("--draft-b", default=None,
                        help="a second EAGLE-3 head directory, drafting for the configurations named with '#b'")
    parser.add_argument("--compare-src", type=Path, default=None,
                        help="another checkout whose src/ runs every configuration too, in lockstep")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.configs.split(",")
    if not any(name.partition("@")[0] == "plain" for name in names):
        names.insert(0, "plain")
    shipped = get_shipped(args.model)
    target, draft = str(shipped.target_dir), args.draft or (str(shipped.draft_dir) if shipped.draft_dir else None)
    engines = {name: build(name, draft, target, args.draft_b) for name in names}
    suite = fitting_suite(load_suite(args.suite), shipped.target_dir, args.tokens)  # the requests that fit the context
    first = next(iter(engines.values()))
    tokenizer = first.tokenizer
    prompts = [tokenizer.encode(render_prompt(tokenizer, suite.requests[(i * 7) % len(suite.requests)]))
               for i in range(args.prompts)]
    other = OtherTree(args.compare_src, names, draft, target, args.draft_b) if args.compare_src else None
    for name, engine in engines.items():  # warm-up: lazy allocations, the adaptive arm's first measurements
        decode_rate(engine, prompts[0], args.tokens)
        if other:
            other.decode_rate(name, prompts[0], args.tokens)
    rates = {name: [] for name in engines}
    counts = {name: [0, 0] for name in engines}  # decode tokens, decode steps
    other_rates = {name: [] for name in engines}
    other_counts = {name: [0, 0] for name in engines}
    firsts = {name: [] for name in engines}        # seconds to the first token
    other_firsts = {name: [] for name in engines}
    for index, prompt in enumerate(prompts):
        for name, engine in engines.items():
            runs = [(rates, counts, firsts, lambda: decode_rate(engine, prompt, args.tokens))]
            if other:
                runs.append((other_rates, other_counts, other_firsts,
                             lambda: other.decode_rate(name, prompt, args.tokens)))
            for into, counted, first_times, run in (runs if index % 2 == 0 else runs[::-1]):
                rate, count, steps, first_token = run()
                into[name].append(rate)
                first_times[name].append(first_token)
                counted[name][0] += count
                counted[name][1] += steps
    if other:
        other.close()
    lengths = sorted(len(p) for p in prompts)
    print(f"{args.model}, {suite.name} ({len(suite.requests)} requests fit): {len(prompts)} prompts "
          f"({lengths[0]}–{lengths[-1]} tokens, median {statistics.median(lengths):.0f}) x {args.tokens} tokens, "
          f"greedy, 1 thread, dtype {first.config.torch_dtype}")
    for name, values in rates.items():
        _, at, packing = name.partition("@")
        baseline = f"plain{at}{packing}" if f"plain{at}{packing}" in rates else "plain"  # plain with the same @packing
        base = statistics.median(rates[baseline])
        paired = statistics.median(a / b for a, b in zip(values, rates[baseline]))
        rate, first_ms = statistics.median(values), statistics.median(firsts[name]) * 1e3
        print(f"{name:>12}: {rate:7.1f} tok/s   {rate / base:.2f}x of {baseline} "
              f"(median of per-prompt ratios {paired:.2f}x)   "
              f"{counts[name][0] / counts[name][1]:.2f} tokens per step   "
              f"weights {engines[name].model.weight_packing}   first token {first_ms:.0f} ms")
    if other:
        print(f"this tree ({SRC}) against {args.compare_src.resolve() / 'src'}, prompt by prompt:")
        for name, values in rates.items():
            paired = statistics.median(a / b for a, b in zip(values, other_rates[name]))
            same = "same tokens and steps" if counts[name] == other_counts[name] else \
                f"DIFFERENT tokens/steps {counts[name]} vs {other_counts[name]}"
            first_ratio = statistics.median(b / a for a, b in zip(firsts[name], other_firsts[name]))
            here_ms, there_ms = statistics.median(firsts[name]) * 1e3, statistics.median(other_firsts[name]) * 1e3
            print(f"{name:>12}: {statistics.median(values):7.1f} tok/s here, "
                  f"{statistics.median(other_rates[name]):7.1f} tok/s there: {paired:.3f}x (median of per-prompt "
                  f"ratios)   {same}   first token {here_ms:.0f} ms here, {there_ms:.0f} ms there: "
                  f"{first_ratio:.2f}x faster here")


if __name__ == "__main__":
    main()

"""Where a decode step's time goes, and decode tok/s, with the KV pool gathered or read in place.

    PYTHONPATH=src python benchmarks/decode_paths.py                                # the default shipped model
    PYTHONPATH=src python benchmarks/decode_paths.py --model smollm2-135m --streams 1,16,64
    PYTHONPATH=src python benchmarks/decode_paths.py --arms plain,eagle3 --steps 6 --rounds 2

For each model, arm (``plain``; ``eagle3``: the shipped drafter, a chain of ``--draft-steps``) and
stream count, ``N`` greedy requests of ``--context`` prompt tokens are prefilled together in one
in-process :class:`Engine` (``--threads`` compute threads); then windows of ``--steps`` decode
steps run with the attention path alternating (gather, in-place, gather, in-place, ... for
``--rounds`` rounds; ``paged_kernel.select_path``), so both paths decode the same requests at
nearly the same contexts, and the machine's drift falls on both. Printed per row: decode tok/s of
each path and their ratio, each path's time per step and their ratio (the fair comparison for
eagle3, whose tokens per step vary with acceptance from window to window), and each path's
shares of a step's time:

* ``attn``: the target's attention (``paged_attention``: the K/V write, gather and SDPA or the kernel);
* ``gather``: the part of ``attn`` in ``index_select`` (whole blocks out of the pool);
* ``matmul+``: the rest of the target's forward (projections, MLP, norms, lm head);
* ``sample``: sampling over the vocabulary (and the greedy acceptance of drafts);
* ``draft``: the EAGLE-3 head's drafting;
* ``python``: the rest of the step (scheduling, batch layout, bookkeeping).

Timers wrap those functions, so the shares add to 1 with ``python`` as the remainder;
``index_select`` is wrapped only while the target attends. By default they read this thread's
CPU time (``time.thread_time``: with 1 compute thread the engine's work all runs on it, and time
other jobs take from the machine is not counted; tok/s is then per CPU-second); ``--clock wall``
reads ``time.perf_counter`` (needed with ``--threads`` above 1).
``verify/plain`` (the eagle3 arm) is the target forward of a speculative step over a plain
step's at the same stream count and path. The machine may be shared: figures are noisy; only
ratios from one run compare.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

import torch  # noqa: E402

from specgauge.engine.core import model_runner  # noqa: E402
from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.core.scheduler import SchedulerConfig  # noqa: E402
from specgauge.engine.models import llama, paged_kernel  # noqa: E402
from specgauge.engine.speculative import runner as spec_runner  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.shipped_models import DEFAULT_MODEL, get_shipped  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit.length_prompts import prompt_of_length  # noqa: E402

PARTS = ("attn", "gather", "matmul+", "sample", "draft", "python")
TIMES: dict[str, float] = dict.fromkeys(("attn", "gather", "forward", "sample", "draft"), 0.0)
INSIDE_ATTENTION = [False]
CLOCK = [time.thread_time]  # --clock: this thread's CPU time (the default) or wall time


def timed(key: str, fn):
    """``fn`` with its time added to ``TIMES[key]``."""
    def wrapper(*args, **kwargs):
        start = CLOCK[0]()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[key] += CLOCK[0]() - start
    return wrapper


def install_timers() -> None:
    attention = llama.paged_attention

    def target_attention(*args, **kwargs):
        INSIDE_ATTENTION[0] = True
        try:
            return attention(*args, **kwargs)
        finally:
            INSIDE_ATTENTION[0] = False

    llama.paged_attention = timed("attn", target_attention)
    index_select = torch.Tensor.index_select

    def gather(self, *args, **kwargs):
        if not INSIDE_ATTENTION[0]:
            return index_select(self, *args, **kwargs)
        start = CLOCK[0]()
        out = index_select(self, *args, **kwargs)
        TIMES["gather"] += CLOCK[0]() - start
        return out

    torch.Tensor.index_select = gather
    llama.LlamaForCausalLM.forward_cached = timed("forward", llama.LlamaForCausalLM.forward_cached)
    model_runner.sample_requests = timed("sample", model_runner.sample_requests)
    spec_runner.sample_requests = timed("sample", spec_runner.sample_requests)
    spec_runner.accept_greedy = timed("sample", spec_runner.accept_greedy)
    spec_runner.SpeculativeRunner._draft = timed("draft", spec_runner.SpeculativeRunner._draft)


def build(target: str, draft: str | None, arm: str, streams: int, context: int, tokens: int, threads: int,
          draft_steps: int) -> Engine:
    spec = SpeculativeConfig()
    if arm == "eagle3":
        spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=draft_steps, min_draft_prob=0.0,
                                 draft_model_path=draft)
    scheduler = SchedulerConfig(max_running=streams, max_tokens_per_step=2048, max_waiting=streams)
    return Engine(EngineConfig(model_dir=target, threads=threads, speculative=spec, scheduler=scheduler,
                               max_model_len=context + tokens + 64))


def window(engine: Engine, steps: int) -> tuple[int, float, dict[str, float]]:
    """``steps`` engine steps: tokens produced, seconds, and the timed parts' seconds."""
    for key in TIMES:
        TIMES[key] = 0.0
    produced = 0
    start = CLOCK[0]()
    for _ in range(steps):
        produced += sum(len(u.new_token_ids) for u in engine.step())
    return produced, CLOCK[0]() - start, dict(TIMES)


def shares(parts: dict[str, float], seconds: float) -> dict[str, float]:
    named = {"attn": parts["attn"], "gather": parts["gather"], "matmul+": parts["forward"] - parts["attn"],
             "sample": parts["sample"], "draft": parts["draft"]}
    named["python"] = seconds - parts["forward"] - parts["sample"] - parts["draft"]
    return {key: value / seconds for key, value in named.items()}


def measure(engine: Engine, prompts: list[list[int]], streams: int, tokens: int, steps: int, rounds: int) -> dict:
    for i in range(streams):
        engine.submit(f"r{i}", prompts[i % len(prompts)], SamplingParams(max_tokens=tokens, temperature=0.0,
                                                                      ignore_eos=True), lambda event: None)
    engine.drain_inbox(block=False)
    while any(not r.output_ids for r in engine.scheduler.running) or engine.scheduler.waiting:
        engine.step()  # prefill, then every request has its first token
    engine.step()
    results = {path: {"tokens": 0, "seconds": 0.0, "parts": dict.fromkeys(TIMES, 0.0), "steps": 0}
               for path in paged_kernel.PATHS}
    for _ in range(rounds):
        for path in ("gather", "inplace"):
            paged_kernel.select_path(path)
            produced, seconds, parts = window(engine, steps)
            entry = results[path]
            entry["tokens"] += produced
            entry["seconds"] += seconds
            entry["steps"] += steps
            for key, value in parts.items():
                entry["parts"][key] += value
    paged_kernel.select_path("inplace")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="shipped model names, comma-separated")
    parser.add_argument("--arms", default="plain,eagle3")
    parser.add_argument("--streams", default="1,4,16,64")
    parser.add_argument("--context", type=int, default=192, help="prompt tokens per request")
    parser.add_argument("--steps", type=int, default=6, help="decode steps per window")
    parser.add_argument("--rounds", type=int, default=2, help="gather/in-place window pairs per row")
    parser.add_argument("--draft-steps", type=int, default=3, help="the eagle3 arm's chain of drafts")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--suite", default="coding")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="time steps by this thread's CPU time (default: robust to a shared machine "
                             "while the engine computes on 1 thread) or by wall time")
    args = parser.parse_args()
    if args.clock == "wall":
        CLOCK[0] = time.perf_counter
    elif args.threads != 1:
        parser.error("--clock cpu times the calling thread only: use it with --threads 1, or --clock wall")
    levels = [int(s) for s in args.streams.split(",")]
    install_timers()
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.clock} clock; in-place kernel: "
          f"{paged_kernel.attention_path(torch.float32)}; context {args.context} tokens, "
          f"{args.rounds} x {args.steps} decode steps per path and row")
    for name in args.model.split(","):
        shipped = get_shipped(name)
        target, draft = str(shipped.target_dir), str(shipped.draft_dir) if shipped.draft_dir else None
        tokens = args.rounds * 2 * args.steps * (args.draft_steps + 1) + 8
        suite = load_suite(args.suite)
        plain_forward: dict[tuple[int, str], float] = {}
        for arm in args.arms.split(","):
            if arm == "eagle3" and draft is None:
                print(f"{name}: no shipped drafter, eagle3 skipped")
                continue
            for streams in levels:
                engine = build(target, draft, arm, streams, args.context, tokens, args.threads, args.draft_steps)
                prompts = [prompt_of_length(engine.tokenizer, suite.requests, args.context, i) for i in range(streams)]
                res = measure(engine, prompts, streams, tokens, args.steps, args.rounds)
                rate = {p: r["tokens"] / r["seconds"] for p, r in res.items()}
                step_ms = {p: 1e3 * r["seconds"] / r["steps"] for p, r in res.items()}
                line = (f"{name:13s} {arm:6s} {streams:3d} streams  tok/s gather {rate['gather']:8.1f}  in-place "
                        f"{rate['inplace']:8.1f}  x{rate['inplace'] / rate['gather']:.2f}   ms/step gather "
                        f"{step_ms['gather']:7.1f}  in-place {step_ms['inplace']:7.1f}  "
                        f"x{step_ms['gather'] / step_ms['inplace']:.2f}")
                for path in ("gather", "inplace"):
                    r = res[path]
                    share = shares(r["parts"], r["seconds"])
                    line += f"\n    {path:8s} " + "  ".join(f"{k} {share[k]:5.1%}" for k in PARTS)
                    forward = r["parts"]["forward"] / r["steps"]
                    if arm == "plain":
                        plain_forward[(streams, path)] = forward
                    elif (streams, path) in plain_forward:
                        line += f"  verify/plain {forward / plain_forward[(streams, path)]:.2f}"
                print(line, flush=True)
                del engine  # the next row builds its own (the requests are left unfinished)


if __name__ == "__main__":
    main()

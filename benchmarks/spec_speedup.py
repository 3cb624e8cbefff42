"""Speculative decoding speedups of the embedded engine, measured side by side in one run.

    PYTHONPATH=src python benchmarks/spec_speedup.py            # shipped target + shipped drafter
    PYTHONPATH=src python benchmarks/spec_speedup.py --model DIR --draft DIR --concurrency 1,4,16,64,128,256

Prints:

1. single-stream decode tok/s (median per request) with speculation off, EAGLE-3 chain, the
   n-gram drafter and EAGLE-3 with adaptive k on the ``coding`` and ``encyclopedic`` suites and on
   code-editing prompts (a function to change and return whole; ``--suites`` picks others, e.g.
   ``agentic`` for a 4,096-token target), arms interleaved request by request; the speedups
   over off; the acceptance length per suite (the requests' own ``spec_accept_length``);
2. aggregate tok/s (closed loop) at each concurrency with speculation off, on and with
   ``--speculative-adaptive``; the crossover (the first concurrency where on loses to off); then
   a server with ``--speculative-disable-above`` set at the crossover (the last concurrency where
   on won) over the same levels; each arm's ratio to off.

Every arm is a ``specgauge serve`` subprocess (:class:`EngineProcess`) on the same model and
threads, all started up front, and load comes from specgauge's own runner (``run_point``).
Without the shipped files it falls back to random weights (the target's shape, a random head)
and says so: acceptance is then near zero and the speedups are not the drafter's.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from specgauge.analysis.definitions import accept_length, decode_tok_s, output_token_count  # noqa: E402
from specgauge.client.endpoint import Endpoint  # noqa: E402
from specgauge.shipped_models import DEFAULT, DIRECTORY_DRAFT_DIR, resolve_model  # noqa: E402
from specgauge.engine.serving.launch import EngineProcess  # noqa: E402
from specgauge.load.plan import PointSpec  # noqa: E402
from specgauge.load.runner import run_async, run_point  # noqa: E402
from specgauge.suites.model import ChatMessage, Suite, SuiteRequest  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

def resolve_models(args, scratch: Path) -> tuple[Path, Path, str]:
    """Target and drafter directories (``--model``: a directory or a shipped name, as serve takes it),
    and a note saying where they came from."""
    try:
        target, named = resolve_model(args.model) if args.model else (DEFAULT.target_dir, DEFAULT)
    except KeyError as exc:
        sys.exit(f"spec_speedup: --model: {exc.args[0]}")
    shipped_draft = DIRECTORY_DRAFT_DIR if named is None else named.draft_dir
    draft = Path(args.draft) if args.draft else shipped_draft
    note = (f"{'shipped ' + named.name if named else 'given'} target + "
            f"{'given' if args.draft else 'shipped'} drafter")
    if not (target / "config.json").is_file():
        from specgauge.engine.models.random_model import stdlib_text, write_random_model

        target = write_random_model(scratch / "random-target", hidden_size=384, num_layers=6, num_heads=6,
                                    num_kv_heads=2, intermediate_size=1024, vocab_size=4096,
                                    max_position_embeddings=2048, tokenizer_text=stdlib_text(400_000))
        note = "RANDOM target weights (no shipped target)"
    if draft is None or not (draft / "config.json").is_file():
        sys.path.insert(0, str(ROOT / "tests" / "engine"))
        from spec_testkit import write_random_head

        draft = write_random_head(scratch / "random-head", target, draft_vocab_size=1024)
        note += " + RANDOM drafter (no shipped drafter): acceptance ~0, speedups are not the drafter's"
    return target, draft, note


def code_editing_suite(tokens: int, count: int) -> Suite:
    """Prompts that ask to return a given function with a small change (output copies input)."""
    import json
    import shlex
    import string
    import textwrap as tw

    functions = [json.dumps, shlex.quote, string.capwords, tw.dedent, tw.indent, inspect.cleandoc,
                 json.loads, shlex.split]
    asks = ["Rename the first parameter to `value` and return the whole function.",
            "Add a type hint to every parameter and return the whole function.",
            "Return the function unchanged except for a one-line docstring."]
    requests = []
    for i in range(count):
        source = textwrap.dedent(inspect.getsource(functions[i % len(functions)]))[:1200]
        prompt = f"{asks[i % len(asks)]}\n\n```python\n{source}```"
        requests.append(SuiteRequest(messages=(ChatMessage(role="user", content=prompt),), max_tokens=tokens,
                                     domain="code-editing"))
    return Suite(name="code-editing", requests=tuple(requests))


def point(url: str, suite: Suite, concurrency: int, requests: int, tokens: int, warmup: int = 0):
    spec = PointSpec(mode="closed", concurrency=concurrency, num_requests=requests, max_tokens=tokens,
                     temperature=0.0, warmup_requests=warmup)
    return run_async(run_point(Endpoint(url, api="openai-chat", model="specgauge-target"), suite, spec,
                               on_record=lambda record: None))


def single_stream(servers: dict, suites: dict, args) -> dict:
    """Interleave the arms one request at a time; returns {(suite, arm): (tok/s list, accept list)}."""
    figures = {(s, a): ([], []) for s in suites for a in servers}
    for i in range(args.single_requests):
        for suite_name, suite in suites.items():
            one = Suite(name=suite.name, version=suite.version, requests=(suite.requests[i % len(suite.requests)],))
            for arm, url in servers.items():
                outcome = point(url, one, 1, 1, args.tokens)
                for record in outcome.records:
                    if record.ok and decode_tok_s(record):
                        figures[(suite_name, arm)][0].append(decode_tok_s(record))
                        if accept_length(record) is not None:
                            figures[(suite_name, arm)][1].append(accept_length(record))
    return figures


def aggregate(urls: dict[str, str], suite: Suite, concurrency: int, args) -> dict[str, float]:
    """Aggregate tok/s of each arm at ``concurrency``: ``args.repeats`` rounds in alternating
    order (ABBA), so drifting machine load falls on every arm alike; tokens / window seconds."""
    tokens = dict.fromkeys(urls, 0)
    seconds = dict.fromkeys(urls, 0.0)
    for repeat in range(args.repeats):
        for arm in (list(urls) if repeat % 2 == 0 else list(urls)[::-1]):
            outcome = point(urls[arm], suite, concurrency, max(args.agg_factor * concurrency, 8), args.agg_tokens,
                            warmup=min(concurrency, 4))
            seconds[arm] += (outcome.window_end_ns - outcome.window_start_ns) / 1e9
            tokens[arm] += sum(output_token_count(r) for r in outcome.records if r.ok)
    return {arm: tokens[arm] / seconds[arm] for arm in urls}


def warm_up(servers: dict, suite: Suite, args) -> None:
    """A few unrecorded requests per arm (lazy allocations; the adaptive arm's first measurements)."""
    for url in servers.values():
        point(url, suite, 1, args.warmup, args.tokens)


def print_goals(rates: dict, levels: list[int]) -> None:
    """The goals for dynamic control, from the aggregate table: the worst ratio to off over
    concurrency 1…64, and how much of the single-stream (concurrency 1) gain each arm keeps."""
    upto = [level for level in levels if level <= 64]
    gain = rates[(levels[0], "eagle3")] / rates[(levels[0], "off")] - 1
    for arm, base in (("disable-above", "off (again)"), ("adaptive", "off")):
        worst = min(upto, key=lambda level: rates[(level, arm)] / rates[(level, base)])
        kept = (rates[(levels[0], arm)] / rates[(levels[0], base)] - 1) / gain if gain > 0 else float("nan")
        print(f"{arm}: worst ratio to off over concurrency {upto[0]}..{upto[-1]}: "
              f"{rates[(worst, arm)] / rates[(worst, base)]:.2f}x at {worst} (goal >= 0.95x); "
              f"at concurrency {levels[0]} keeps {kept:.0%} of eagle3's gain of {gain:+.0%} (goal >= 90%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help=f"target directory or shipped name (default: {DEFAULT.name})")
    parser.add_argument("--draft", help="EAGLE-3 head directory (default: the shipped drafter)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--num-steps", type=int, default=None, help="draft tokens per verify (chain); default: serve's")
    parser.add_argument("--min-draft-prob", type=float, default=None, help="EAGLE-3 chain cut-off; default: serve's")
    parser.add_argument("--tokens", type=int, default=128, help="max tokens per single-stream request")
    parser.add_argument("--agg-tokens", type=int, default=64, help="max tokens per aggregate request")
    parser.add_argument("--single-requests", type=int, default=6, help="requests per suite and arm, single stream")
    parser.add_argument("--concurrency", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--disable-above", type=int, default=None,
                        help="--speculative-disable-above of that arm (default: the measured crossover)")
    parser.add_argument("--agg-factor", type=int, default=2, help="aggregate requests per point = factor x concurrency")
    parser.add_argument("--repeats", type=int, default=2, help="aggregate rounds per level (alternating order)")
    parser.add_argument("--warmup", type=int, default=3, help="unrecorded single-stream requests per arm first")
    parser.add_argument("--skip-aggregate", action="store_true")
    parser.add_argument("--suites", default="coding,encyclopedic,code-editing",
                        help="single-stream suites: built-in names (e.g. agentic, for a target whose context holds "
                             "it) and code-editing")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]

    scratch = Path(tempfile.mkdtemp(prefix="spec-speedup-"))
    target, draft, note = resolve_models(args, scratch)
    common = ["--model", str(target), "--threads", str(args.threads), "--max-running-requests", str(max(levels)),
              "--max-waiting-requests", str(4 * max(levels)), "--max-tokens-per-step", str(max(512, 2 * max(levels)))]
    steps = ["--speculative-num-steps", str(args.num_steps)] if args.num_steps else []
    eagle = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft), *steps]
    if args.min_draft_prob is not None:
        eagle += ["--speculative-min-draft-prob", str(args.min_draft_prob)]
    arm_flags = {
        "off": ["--speculative-algorithm", "NONE"],
        "eagle3": eagle,
        "ngram": ["--speculative-algorithm", "NGRAM", *steps],
        "adaptive": eagle + ["--speculative-adaptive"],
    }
    if args.skip_aggregate:
        arm_flags = {k: v for k, v in arm_flags.items() if k in ("off", "eagle3", "ngram", "adaptive")}
    print(f"models: {note}\n  target {target}\n  drafter {draft}\nthreads {args.threads}, chain k="
          f"{args.num_steps or 'serve default'}, min draft prob "
          f"{args.min_draft_prob if args.min_draft_prob is not None else 'serve default'}",
          flush=True)
    processes = {arm: EngineProcess(common + flags, start_timeout=180) for arm, flags in arm_flags.items()}
    try:
        servers = {}
        for arm, proc in processes.items():
            proc.start()
            servers[arm] = proc.url
        suites = {name: code_editing_suite(args.tokens, 8) if name == "code-editing" else load_suite(name)
                  for name in args.suites.split(",")}
        warm_up(servers, next(iter(suites.values())), args)
        started = time.perf_counter()
        single_arms = [a for a in ("off", "eagle3", "ngram", "adaptive") if a in servers]
        single = single_stream({a: servers[a] for a in single_arms}, suites, args)
        print(f"\nsingle-stream decode tok/s (median of {args.single_requests} requests per cell, "
              f"{args.tokens} max tokens, arms interleaved; {time.perf_counter() - started:.0f} s); "
              f"accept = tokens per verify (the requests' spec_accept_length)")
        spec_arms = single_arms[1:]
        print(f"{'suite':<14}" + "".join(f"{a:>10}" for a in single_arms)
              + "".join(f"{a + '/off':>14}" for a in spec_arms) + "".join(f"{'accept ' + a:>17}" for a in spec_arms))
        for suite_name in suites:
            med = {a: statistics.median(single[(suite_name, a)][0]) for a in single_arms}
            acc = {a: statistics.mean(single[(suite_name, a)][1]) if single[(suite_name, a)][1] else float("nan")
                   for a in spec_arms}
            print(f"{suite_name:<14}" + "".join(f"{med[a]:>10.1f}" for a in single_arms)
                  + "".join(f"{med[a] / med['off']:>13.2f}x" for a in spec_arms)
                  + "".join(f"{acc[a]:>17.2f}" for a in spec_arms), flush=True)
        if args.skip_aggregate:
            return
        coding = load_suite("coding")
        print(f"\naggregate tok/s, closed loop on 'coding' ({args.agg_tokens} max tokens, "
              f"{args.agg_factor}x concurrency requests per point, {args.repeats} rounds per level in alternating "
              f"order)", flush=True)
        rates: dict[tuple[int, str], float] = {}
        for level in levels:
            measured = aggregate({a: servers[a] for a in ("off", "eagle3", "adaptive")}, coding, level, args)
            rates.update({(level, arm): rate for arm, rate in measured.items()})
        crossover = next((level for level in levels if rates[(level, "eagle3")] < rates[(level, "off")]), None)
        # speculate up to the last level before the crossover (every level when there is none)
        before = levels[:levels.index(crossover)] if crossover is not None else levels
        threshold = args.disable_above if args.disable_above is not None else (before[-1] if before else 0)
        # --speculative-disable-above at the crossover: speculate up to the last level where it won
        proc = EngineProcess(common + eagle + ["--speculative-disable-above", str(threshold)], start_timeout=180)
        processes["disable-above"] = proc
        proc.start()
        for level in levels:  # off measured again beside it: that ratio is side by side too
            measured = aggregate({"off (again)": servers["off"], "disable-above": proc.url}, coding, level, args)
            rates.update({(level, arm): rate for arm, rate in measured.items()})
        print(f"{'concurrency':<12}" + "".join(f"{a:>14}" for a in ("off", "eagle3", "adaptive"))
              + f"{'eagle3/off':>14}{'adaptive/off':>14}   |{'off again':>11}{'disable-above':>15}{'/off again':>12}")
        for level in levels:
            r = {a: rates[(level, a)] for a in ("off", "eagle3", "adaptive", "off (again)", "disable-above")}
            print(f"{level:<12}{r['off']:>14.1f}{r['eagle3']:>14.1f}{r['adaptive']:>14.1f}"
                  f"{r['eagle3'] / r['off']:>13.2f}x{r['adaptive'] / r['off']:>13.2f}x   |"
                  f"{r['off (again)']:>11.1f}{r['disable-above']:>15.1f}"
                  f"{r['disable-above'] / r['off (again)']:>11.2f}x")
        print(f"crossover (first concurrency where eagle3 < off): {crossover if crossover else 'not reached'}; "
              f"--speculative-disable-above {threshold} "
              f"({'given' if args.disable_above is not None else 'the last concurrency before the crossover'})")
        print_goals(rates, levels)
    finally:
        for proc in processes.values():
            proc.stop()


if __name__ == "__main__":
    main()

"""Embedded targets side by side: does greedy output loop, how fast does one stream decode, how
much context do the built-in suites need.

    PYTHONPATH=src python benchmarks/target_quality.py                 # the shipped targets
    PYTHONPATH=src python benchmarks/target_quality.py --models A_DIR,B_DIR --suites coding --prompts 8

For each model directory (default: every ``src/specgauge/assets/target*`` with a config.json) and
each built-in suite, the engine (in-process, 1 thread, greedy, ``--tokens`` new tokens, stopping at
end of turn) continues the suite's prompts that fit EVERY model's context (the same prompts for
all, so the figures compare), the models taking turns prompt by prompt so the machine's drift
falls on all alike. Printed per model and suite:

* distinct-trigram share: distinct / all token trigrams of the continuations, pooled (1.0 = no
  trigram repeats; a model stuck in a loop scores low — the goal is ≥ 0.6 on code and prose);
* mean continuation length in tokens (short ones end their turn);
* median single-stream decode tok/s (tokens after the first over the time after the first step);
* how many of the suite's prompts fit the model's context with ``--tokens`` output, and its
  median prompt length in the model's tokens.

With ``--corpus DIR`` (a tokenized ``specgauge train corpus``), also each model's validation loss
per source on the same ``--windows`` windows of 512 tokens (every model reads that much), and of
4,096 tokens for the models whose context holds them: whether a longer context cost short-context
quality.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from specgauge.compare.fit import model_context, prompt_tokens, render_prompt  # noqa: E402
from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402

ASSETS = ROOT / "src" / "specgauge" / "assets"


def distinct_trigram_share(outputs: list[list[int]]) -> float:
    """Distinct / all trigrams pooled over ``outputs`` (each counted within its own sequence)."""
    distinct = total = 0
    for tokens in outputs:
        trigrams = list(zip(tokens, tokens[1:], tokens[2:]))
        distinct += len(set(trigrams))
        total += len(trigrams)
    return distinct / total if total else float("nan")


def continue_greedily(engine: Engine, prompt: list[int], tokens: int) -> tuple[list[int], float | None]:
    """One request alone: its output tokens and its decode tok/s after the first step."""
    out: list[int] = []
    engine.submit("q", prompt, SamplingParams(max_tokens=tokens, temperature=0.0), lambda event: None)
    engine.drain_inbox(block=False)
    for update in engine.step():  # prefill + first token
        out += update.new_token_ids
    started, count = time.perf_counter(), 0
    while engine.scheduler.has_work:
        for update in engine.step():
            out += update.new_token_ids
            count += len(update.new_token_ids)
    elapsed = time.perf_counter() - started
    return out, (count / elapsed if count and elapsed > 0 else None)


def validation_table(models: list[Path], corpus: Path, windows: int) -> None:
    """Validation loss per source of every model, on 512- and (where it fits) 4,096-token windows."""
    from specgauge.engine.models.llama import load_model
    from specgauge.train.corpus import SOURCES
    from specgauge.train.dataset import load_split
    from specgauge.train.target import validation_losses

    sources = tuple(s for s in SOURCES if (corpus / "validation" / s).is_dir())
    split = load_split(corpus, "validation", sources)
    for length in (512, 4096):
        for m in models:
            model = load_model(m, dtype=torch.float32)
            if model.config.max_position_embeddings < length:
                continue
            losses = validation_losses(model, split, length, windows, bf16=False)
            print(f"validation loss, {windows} windows of {length} tokens, {m.name:>12}: "
                  + ", ".join(f"{s} {v:.3f}" for s, v in losses.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=None, help="comma-separated model directories")
    parser.add_argument("--suites", default="coding,encyclopedic,agentic")
    parser.add_argument("--prompts", type=int, default=12, help="prompts per suite at most")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--corpus", type=Path, default=None, help="tokenized corpus: validation loss per source too")
    parser.add_argument("--windows", type=int, default=16, help="validation windows per source and length")
    args = parser.parse_args()
    torch.set_num_threads(1)
    models = ([Path(m) for m in args.models.split(",")] if args.models else
              sorted(p for p in ASSETS.glob("target*") if (p / "config.json").is_file()))
    engines = {m: Engine(EngineConfig(model_dir=str(m), threads=1)) for m in models}
    print("models: " + ", ".join(f"{m.name} ({model_context(m)} tokens)" for m in models) +
          f"; greedy, {args.tokens} new tokens at most, 1 thread", flush=True)
    if args.corpus:
        validation_table(models, args.corpus, args.windows)
    for suite_name in args.suites.split(","):
        suite = load_suite(suite_name)
        lengths = {m: prompt_tokens(suite, m) for m in models}
        fits = {m: [n + args.tokens <= model_context(m) for n in lengths[m]] for m in models}
        common = [i for i in range(len(suite.requests)) if all(fits[m][i] for m in models)][:args.prompts]
        print(f"\n{suite.ref}: {len(suite.requests)} prompts; {len(common)} fit every model and run", flush=True)
        outputs = {m: [] for m in models}
        rates = {m: [] for m in models}
        for turn, index in enumerate(common):
            order = models if turn % 2 == 0 else models[::-1]
            for m in order:
                engine = engines[m]
                prompt = engine.tokenizer.encode(render_prompt(engine.tokenizer, suite.requests[index]))
                out, rate = continue_greedily(engine, prompt, args.tokens)
                outputs[m].append(out)
                if rate:
                    rates[m].append(rate)
        for m in models:
            fit = sum(fits[m])
            mean_len = statistics.mean(len(o) for o in outputs[m]) if outputs[m] else float("nan")
            rate = f"{statistics.median(rates[m]):.0f}" if rates[m] else "-"
            print(f"  {m.name:>12}: distinct trigrams {distinct_trigram_share(outputs[m]):.3f}, mean output "
                  f"{mean_len:.0f} tokens, decode {rate} tok/s; {fit}/{len(suite.requests)} prompts fit its context "
                  f"(median prompt {statistics.median(lengths[m]):.0f} tokens)", flush=True)


if __name__ == "__main__":
    main()

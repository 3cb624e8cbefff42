"""How many of the target's greedy tokens its EAGLE-3 drafter can propose at all.

    PYTHONPATH=src python benchmarks/draft_vocab_coverage.py --model specgauge-9m-4k
    PYTHONPATH=src python benchmarks/draft_vocab_coverage.py --model specgauge-8m --prompts 20 --tokens 128

An EAGLE-3 head drafts from its own vocabulary, a subset of the target's (``d2t``/``t2d`` in the
checkpoint; SpecForge picks the most frequent tokens of the training data). A token outside it is
never drafted, so the target's greedy token there is always rejected: the share of greedy tokens
inside the draft vocabulary bounds the first draft's acceptance. For each built-in suite,
``--prompts`` prompts that fit the model's context are decoded greedily (``--tokens`` tokens, EOS
ignored) by the plain engine of ``--model``; printed: the share of the generated tokens inside the
draft vocabulary, and the share of the draft vocabulary's size in the target's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from specgauge.compare.fit import render_prompt  # noqa: E402
from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.models.eagle3 import load_eagle3  # noqa: E402
from specgauge.shipped_models import DEFAULT_MODEL, get_shipped  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def greedy_tokens(engine: Engine, prompt: list[int], tokens: int) -> list[int]:
    """One request alone, greedy, ``tokens`` tokens whatever EOS says."""
    engine.submit("r", prompt, SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True),
                  lambda event: None)
    engine.drain_inbox(block=False)
    out: list[int] = []
    while engine.scheduler.has_work:
        for update in engine.step():
            out.extend(update.new_token_ids)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a shipped model name with a drafter")
    parser.add_argument("--suites", default="coding,encyclopedic,agentic")
    parser.add_argument("--prompts", type=int, default=12, help="prompts per suite")
    parser.add_argument("--tokens", type=int, default=128, help="greedy tokens per prompt")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    shipped = get_shipped(args.model)
    engine = Engine(EngineConfig(model_dir=str(shipped.target_dir), threads=args.threads))
    head = load_eagle3(shipped.draft_dir, target=engine.model, device=torch.device("cpu"), dtype=torch.float32)
    draft_vocab = set(head.draft_to_target(torch.arange(head.config.draft_vocab_size)).tolist())
    print(f"{args.model}: draft vocabulary {len(draft_vocab)} of the target's {head.config.vocab_size} tokens "
          f"({len(draft_vocab) / head.config.vocab_size:.0%}); greedy tokens inside it, {args.tokens} per prompt:")
    for suite in args.suites.split(","):
        inside = total = used = 0
        for request in load_suite(suite).requests:
            prompt = engine.tokenizer.encode(render_prompt(engine.tokenizer, request))
            if len(prompt) + args.tokens > shipped.context:
                continue
            out = greedy_tokens(engine, prompt, args.tokens)
            inside += sum(token in draft_vocab for token in out)
            total += len(out)
            used += 1
            if used == args.prompts:
                break
        print(f"{suite:>14}: {inside}/{total} = {inside / max(total, 1):.3f} ({used} prompts)")

if __name__ == "__main__":
    main()

"""Acceptance of the shipped EAGLE-3 drafter as the engine serves it, per corpus source.

For each source, held-out corpus prompts (the validation split, one assistant turn each, as
``train draft`` regenerates them) are served greedily by the embedded engine with an EAGLE-3
chain, and the engine's own counters give the acceptance length (tokens per verify, bonus
included). Printed beside it: the same requests' output equality with speculation off, and
the expected length ``train draft`` estimated on its validation split (TRAINING.md).

    PYTHONPATH=src python benchmarks/draft_acceptance.py --corpus /work/train_runs/corpus
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchkit.draft_serving import serve

from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.train.assets import shipped_target_dir
from specgauge.train.corpus import SOURCES
from specgauge.train.regenerate import pick_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="tokenized corpus (DIR/validation/<source>)")
    parser.add_argument("--target", type=Path, default=None, help="default: the shipped target")
    parser.add_argument("--draft", default=None, help="default: the shipped drafter")
    parser.add_argument("--prompts", type=int, default=16, help="per source")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--num-steps", type=int, default=4)
    parser.add_argument("--max-running", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    target = args.target or shipped_target_dir()
    eagle = SpeculativeConfig(algorithm="EAGLE3", num_steps=args.num_steps, draft_model_path=args.draft)
    print(f"target {target}, drafter {eagle.draft_dir}, chain of {args.num_steps}, {args.prompts} prompts per source, "
          f"≤ {args.max_new_tokens} new tokens, greedy")
    print(f"{'source':<14} {'accept length':>13} {'same as plain':>13} {'spec s':>7} {'plain s':>7}")
    for source in SOURCES:
        prompts = list(pick_prompts(args.corpus / "validation" / source, args.prompts, 320, seed=0))
        spec_out, accept, spec_s = serve(target, prompts, eagle, args.max_new_tokens, args.threads, args.max_running)
        plain_out, _, plain_s = serve(target, prompts, SpeculativeConfig(), args.max_new_tokens, args.threads,
                                      args.max_running)
        same = sum(a == b for a, b in zip(spec_out, plain_out))
        print(f"{source:<14} {accept:>13.2f} {same:>6}/{len(prompts):<6} {spec_s:>7.1f} {plain_s:>7.1f}")


if __name__ == "__main__":
    main()

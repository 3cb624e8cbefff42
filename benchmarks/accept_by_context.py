"""EAGLE-3 acceptance by prompt length: does the drafter keep up past the windows it was trained on?

For each source and band of prompt lengths, held-out corpus samples are cut right before an
assistant turn that starts inside the band (the middle such turn), served greedily by the
embedded engine with an EAGLE-3 chain, and the engine's own counter gives the acceptance length
(tokens per verify, bonus included). The shipped 9m-4k drafter was trained on windows of at most
1,184 tokens (assets/draft-4k/TRAINING.md), so the bands past that are positions it never saw.

    PYTHONPATH=src python benchmarks/accept_by_context.py --corpus runs/corpus --model specgauge-9m-4k
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchkit.draft_serving import serve

from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.shipped_models import get_shipped
from specgauge.train.dataset import iter_samples
from specgauge.train.regenerate import response_starts


def band_prompts(folder: Path, low: int, high: int, count: int) -> list[list[int]]:
    """Up to ``count`` prompts: each sample cut before its middle assistant turn starting in [low, high]."""
    prompts = []
    for ids, mask in iter_samples(folder):
        starts = [s for s in response_starts(mask) if low <= s <= high]
        if starts:
            prompts.append(ids[:starts[len(starts) // 2]])
        if len(prompts) >= count:
            break
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="tokenized corpus (DIR/validation/<source>)")
    parser.add_argument("--model", default="specgauge-9m-4k", help="a shipped model's name")
    parser.add_argument("--sources", default="agentic_sessions,agentic_tools,code_files")
    parser.add_argument("--bands", default="64-512,513-1184,1185-2048,2049-3900", help="prompt token ranges")
    parser.add_argument("--prompts", type=int, default=16, help="per source and band")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--num-steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    model = get_shipped(args.model)
    eagle = SpeculativeConfig(algorithm="EAGLE3", num_steps=args.num_steps, draft_model_path=str(model.draft_dir))
    print(f"target {model.target_dir}, drafter {model.draft_dir}, chain of {args.num_steps}, ≤ {args.prompts} prompts "
          f"per source and band, ≤ {args.max_new_tokens} new tokens, greedy")
    print(f"{'source':<17} {'band':>10} {'prompts':>7} {'mean len':>8} {'accept length':>13}")
    for source in args.sources.split(","):
        for band in args.bands.split(","):
            low, high = (int(x) for x in band.split("-"))
            prompts = band_prompts(args.corpus / "validation" / source, low, high, args.prompts)
            if not prompts:
                print(f"{source:<17} {band:>10} {0:>7} {'-':>8} {'-':>13}")
                continue
            _, accept, _ = serve(model.target_dir, prompts, eagle, args.max_new_tokens, args.threads, 8)
            mean_len = sum(map(len, prompts)) / len(prompts)
            print(f"{source:<17} {band:>10} {len(prompts):>7} {mean_len:>8.0f} {accept:>13.2f}", flush=True)


if __name__ == "__main__":
    main()

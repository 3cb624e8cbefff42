"""How the drafter's first draft fares against how sure the target is of its own next token.

On held-out responses the target regenerated (``train draft``'s ``RUN/regenerated/validation``),
each scored response position is bucketed by the target's probability of its greedy token (the
token a draft must equal to be accepted at temperature 0), and the head's first draft — fed the
target's features, as in a chain's first step — is checked against it. Per source it prints the
share of positions in each bucket and the head's step-1 accuracy there: whether a source's low
acceptance comes from positions where the target itself is unsure.

    PYTHONPATH=src python benchmarks/accept_by_confidence.py --regenerated runs/draft-v2048/regenerated
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from benchkit.confidence import EDGES

from specgauge.engine.models.eagle3 import load_eagle3, target_features
from specgauge.engine.models.llama import load_model
from specgauge.shipped_models import get_shipped
from specgauge.train.corpus import SOURCES
from specgauge.train.draft import load_regenerated, pad_batch
from specgauge.train.ttt import unrolled_loss



@torch.no_grad()
def first_drafts(target, head, samples, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per scored position: the target's probability of its greedy token, and whether the head's
    first draft equals that token."""
    confidence, right = [], []
    for offset in range(0, len(samples), 4):
        window, response = pad_batch(samples[offset:offset + 4], pad_id)  # (B, T)
        logits, aux = target_features(target, window, head.config.aux_layers)  # (B, T, V), (B, T, 3H)
        _, stats = unrolled_loss(head, window, aux.float(), logits.float(), response, steps=1, trace=True)
        record = stats.trace[0]
        b, t = window.shape
        # row i (position i of a sequence) drafts token i + 2: the target's logits at position i + 1
        nxt = torch.cat([logits[:, 1:], logits.new_zeros(b, 1, logits.shape[-1])], dim=1)[:, :t - 1]
        nxt = nxt.reshape(b * (t - 1), -1)[record["rows"]].float().softmax(-1)  # (N, V)
        p_max, greedy = nxt.max(-1)
        drafted = head.draft_to_target(record["logits"].argmax(-1))
        keep = record["mask"]
        confidence.append(p_max[keep])
        right.append((drafted == greedy)[keep])
    return torch.cat(confidence), torch.cat(right)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regenerated", type=Path, required=True, help="a train draft run's regenerated/ folder")
    parser.add_argument("--model", default="specgauge-9m-4k", help="a shipped model's name")
    parser.add_argument("--draft", type=Path, default=None,
                        help="an EAGLE-3 head's directory (default: the model's shipped one)")
    parser.add_argument("--samples", type=int, default=48, help="held-out responses per source")
    parser.add_argument("--max-len", type=int, default=1184)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = get_shipped(args.model)
    target = load_model(model.target_dir).eval()
    draft_dir = args.draft or model.draft_dir
    head = load_eagle3(draft_dir, target).eval()
    # the pad id as train draft takes it: the target's config, else its first EOS
    eos = target.config.eos_token_id
    eos_ids = eos if isinstance(eos, list) else ([] if eos is None else [eos])
    pad_id = target.config.extra.get("pad_token_id", eos_ids[0] if eos_ids else 0)
    buckets = [f"{lo:.1f}-{min(hi, 1.0):.1f}" for lo, hi in zip(EDGES, EDGES[1:])]
    print(f"target {model.target_dir}, drafter {draft_dir}; per bucket of the target's p(greedy token): "
          "share of positions / head's step-1 accuracy")
    print(f"{'source':<17} {'positions':>9} {'mean p':>6} {'step 1':>6}  " + "  ".join(f"{b:>13}" for b in buckets))
    sources = load_regenerated(args.regenerated, SOURCES, "validation", args.max_len)
    for name, source in sources.items():
        confidence, right = first_drafts(target, head, source.samples[:args.samples], pad_id)
        cells = []
        for lo, hi in zip(EDGES, EDGES[1:]):
            inside = (confidence >= lo) & (confidence < hi)
            share = inside.float().mean().item()
            accuracy = right[inside].float().mean().item() if inside.any() else float("nan")
            cells.append(f"{share:>5.2f} / {accuracy:>5.2f}")
        print(f"{name:<17} {confidence.numel():>9} {confidence.mean().item():>6.2f} "
              f"{right.float().mean().item():>6.2f}  "
              + "  ".join(f"{c:>13}" for c in cells), flush=True)


if __name__ == "__main__":
    main()

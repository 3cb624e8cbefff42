"""How many tokens per verify a drafter could reach on a suite, given how sure the target is.

The target's greedy responses to a suite's requests (chat template, as served; the embedded
engine, plain, its default dtype) are read back through the target under bf16 autocast, as
``train draft`` reads its samples: at every response position, the target's probability p of
its own greedy token (the token a draft must equal at temperature 0). For a chain of K drafts
started after every response token, the expected tokens per verify 1 + Σ_j Π_{l≤j} a_l of:

- ``drafter``: the head given, teacher-forced as ``train draft`` validates it (its own fed-back
  features and tokens from step 1 on): what it should accept on this suite;
- ``drafter (teacher-forced, chained)``: the same outcomes, but each chain starting where a server
  would start it — after the previous chain's accepted drafts and bonus token — instead of at every
  position (a server's chains start right after a rejection, where the next tokens tend to be hard);
- ``drafter (served)`` with ``--served``: the engine's own acceptance counters, the head drafting
  chains of K on the same prompts (greedy, batched) — the teacher-forced figure checked against serving;
- ``drafter, by p``: a drafter right at each position with the head's step-1 accuracy at that p
  (its bucket), positions independent — the model the rows below rest on, checked against the row
  above;
- ``sure ≥ θ``: an oracle right exactly where p ≥ θ and never elsewhere;
- ``sure ≥ θ, else drafter``: right where p ≥ θ, and below θ as often as the head is at that p;
- ``--profile A,B,C,D,E``: a drafter right with chance A..E in the five buckets of p (e.g. another
  head's step-1 accuracies there, from ``accept_by_confidence.py``).

Outputs the degenerate-output check flags (``analysis.health.is_degenerate``, the check
``compare`` applies) are left out of the second column of figures.

    PYTHONPATH=src python benchmarks/accept_ceiling.py --model smollm2-135m --draft runs/draft-smol-e/export
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit.confidence import EDGES  # noqa: E402  (the same buckets of p as accept_by_confidence.py)
from benchkit.draft_serving import serve  # noqa: E402

from specgauge.analysis.health import is_degenerate  # noqa: E402
from specgauge.compare.fit import fitting_suite, render_prompt
from specgauge.engine.models.eagle3 import load_eagle3, target_features
from specgauge.engine.models.llama import load_model
from specgauge.engine.models.tokenizer import EngineTokenizer
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.shipped_models import get_shipped
from specgauge.suites.registry import load_suite
from specgauge.train.ttt import unrolled_loss

THRESHOLDS = (0.9, 0.7, 0.5)


def expected_accept(right: torch.Tensor, k: int) -> float:
    """Mean over chain starts of 1 + Σ_{j≤k} Π_{l≤j} right[s+l], ``right`` (n,) the chance that a
    draft of response position i is right; a chain is cut at the response's end."""
    values = right.tolist()
    n = len(values)
    if n < 2:
        return 1.0
    total = 0.0
    for s in range(n - 1):
        run = 1.0
        for i in range(s + 1, min(s + 1 + k, n)):
            run *= values[i]
            total += run
    return 1.0 + total / (n - 1)


def chained_by_position(chance: torch.Tensor, k: int, samples: int = 64) -> float:
    """:func:`chained_accept` for a drafter right at response position i with ``chance[i]``,
    positions independent: the walk averaged over ``samples`` draws (one when every chance is 0 or 1)."""
    n = chance.numel()
    draws = 1 if bool(((chance == 0) | (chance == 1)).all()) else samples
    generator = torch.Generator().manual_seed(0)
    total = 0.0
    for _ in range(draws):
        outcome = torch.rand(n, generator=generator) < chance  # (n,) the draft of position i is right
        shifted = torch.stack([torch.cat([outcome[s:], outcome.new_zeros(s)]) for s in range(k)])  # (k, n)
        total += chained_accept(shifted, k)
    return total / draws


def bucket_of(p: torch.Tensor) -> torch.Tensor:
    """Index of each probability's bucket in ``EDGES``."""
    return torch.bucketize(p, torch.tensor(EDGES[1:-1]), right=True)


@torch.no_grad()
def read_back(target, head, prompt: list[int], response: list[int], steps: int) -> dict:
    """The target's p of its greedy token at each response position after the first, and the
    head's teacher-forced outcome there: step-1 right, and the number of chain steps right in a row."""
    ids = torch.tensor([prompt + response])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, aux = target_features(target, ids, head.config.aux_layers)
    logits, aux = logits.float(), aux.float()
    t = ids.shape[1]
    mask = torch.zeros((1, t), dtype=torch.bool)
    mask[0, len(prompt):] = True
    _, stats = unrolled_loss(head, ids, aux, logits, mask, steps=steps, trace=True)
    # step 1's rows: row r drafts token r + 2 (the target's greedy token there, from its logits at r + 1)
    rows = stats.trace[0]["rows"]
    probs = logits[0].softmax(-1).amax(-1)  # (T,) p of the greedy token after position i
    greedy = logits[0].argmax(-1)
    p = probs[rows + 1]
    right = []  # per step: the chain started at each row drafts that step's token right
    for s, record in enumerate(stats.trace):
        drafted = head.draft_to_target(record["logits"].argmax(-1))
        right.append((drafted == greedy[(rows + 1 + s).clamp(max=t - 1)]) & record["mask"])
    keep = stats.trace[0]["mask"]
    return {"p": p[keep], "step1": right[0][keep], "right": torch.stack(right)[:, keep],
            "prefix": stats.prefix_correct, "counts": stats.counts}


def chained_accept(right: torch.Tensor, k: int) -> float:
    """Tokens per verify as a server walks the response: a chain of ``k`` from the first position,
    the next one after its accepted drafts and the bonus token. right (S ≥ k, n) per step and start."""
    run = right[:k].int().cumprod(0).sum(0).tolist()  # (n,) drafts accepted from each start
    verifies, at = [], 0
    while at < len(run):
        verifies.append(1 + run[at])
        at += run[at] + 1
    return sum(verifies) / max(len(verifies), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="a shipped model's name")
    parser.add_argument("--draft", type=Path, default=None, help="an EAGLE-3 head's directory (default: the model's)")
    parser.add_argument("--suite", default="coding")
    parser.add_argument("--prompts", type=int, default=0, help="the suite's first N requests (0: all that fit)")
    parser.add_argument("--tokens", type=int, default=128, help="max new tokens per response")
    parser.add_argument("--chains", default="3,5", help="chain lengths K")
    parser.add_argument("--served", action="store_true", help="also serve the prompts with the head (chains of K)")
    parser.add_argument("--profile", default=None, help="step-1 accuracies in the five buckets of p, comma-separated")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    profile = torch.tensor([float(a) for a in args.profile.split(",")]) if args.profile else None
    if profile is not None and profile.numel() != len(EDGES) - 1:
        parser.error(f"--profile needs {len(EDGES) - 1} accuracies, one per bucket of p")
    torch.set_num_threads(args.threads)
    model = get_shipped(args.model)
    draft_dir = args.draft or model.draft_dir
    chains = [int(k) for k in args.chains.split(",")]
    suite = fitting_suite(load_suite(args.suite), model.target_dir, args.tokens)
    requests = suite.requests[:args.prompts] if args.prompts else suite.requests
    tokenizer = EngineTokenizer(model.target_dir)
    prompts = [tokenizer.encode(render_prompt(tokenizer, r)) for r in requests]
    responses, _, _ = serve(model.target_dir, prompts, SpeculativeConfig(), args.tokens, args.threads, max_running=16)
    target = load_model(model.target_dir).eval()
    head = load_eagle3(draft_dir, target).eval()
    steps = max(chains)
    reads, flagged = [], []
    for prompt, response in zip(prompts, responses):
        reads.append(read_back(target, head, prompt, response, steps))
        flagged.append(is_degenerate(tokenizer.decode(response)))
    print(f"target {model.target_dir}, drafter {draft_dir}; suite {args.suite}: {len(reads)} responses "
          f"(≤ {args.tokens} tokens, greedy), {sum(flagged)} flagged degenerate")
    p_all = torch.cat([r["p"] for r in reads])
    right_all = torch.cat([r["step1"] for r in reads])
    buckets = bucket_of(p_all)
    accuracy = torch.tensor([right_all[buckets == b].float().mean().item() if (buckets == b).any() else 0.0
                             for b in range(len(EDGES) - 1)])
    print(f"{'p of the greedy token':<26}" + "".join(f"{f'{lo:.1f}-{min(hi, 1.0):.1f}':>11}"
                                                  for lo, hi in zip(EDGES, EDGES[1:])))
    print(f"{'share of positions':<26}" + "".join(f"{(buckets == b).float().mean().item():>11.2f}"
                                               for b in range(len(EDGES) - 1)))
    print(f"{'head step-1 accuracy':<26}" + "".join(f"{a:>11.2f}" for a in accuracy.tolist()))
    print(f"mean p {p_all.mean().item():.3f}; head step-1 accuracy {right_all.float().mean().item():.3f}")
    print("\nexpected tokens per verify (all outputs | not flagged), chain of K:")
    print(f"{'drafter':<34}" + "".join(f"{f'K={k}':>16}" for k in chains))

    def row(name: str, per_read) -> None:
        cells = []
        for k in chains:
            values = [per_read(r, k) for r in reads]
            weights = [max(r["p"].numel() - 1, 0) for r in reads]
            kept = [(v, w) for v, w, f in zip(values, weights, flagged) if not f]
            mean = sum(v * w for v, w in zip(values, weights)) / max(sum(weights), 1)
            mean_kept = sum(v * w for v, w in kept) / max(sum(w for _, w in kept), 1)
            cells.append(f"{mean:>7.2f} | {mean_kept:<6.2f}")
        print(f"{name:<34}" + "".join(f"{c:>16}" for c in cells), flush=True)

    def teacher_forced(r: dict, k: int) -> float:
        counts = r["counts"][:k].clamp(min=1)
        return 1.0 + (r["prefix"][:k] / counts).sum().item()

    row("drafter (teacher-forced)", teacher_forced)
    row("drafter (teacher-forced, chained)", lambda r, k: chained_accept(r["right"], k))
    if args.served:
        cells = []
        for k in chains:
            spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=k, min_draft_prob=0.0,
                                     draft_model_path=str(draft_dir))
            outputs, accept, _ = serve(model.target_dir, prompts, spec, args.tokens, args.threads, max_running=16)
            same = sum(a == b for a, b in zip(outputs, responses))
            cells.append(f"{accept:>7.2f} ({same}/{len(prompts)} same)")
        print(f"{'drafter (served, all outputs)':<34}" + "".join(f"{c:>16}" for c in cells), flush=True)
    row("drafter, by p", lambda r, k: expected_accept(accuracy[bucket_of(r["p"])], k))
    for theta in THRESHOLDS:
        row(f"sure ≥ {theta}", lambda r, k, th=theta: expected_accept((r["p"] >= th).float(), k))
    for theta in THRESHOLDS:
        row(f"sure ≥ {theta}, else drafter",
            lambda r, k, th=theta: expected_accept(torch.where(r["p"] >= th, 1.0, accuracy[bucket_of(r["p"])]), k))
    if profile is not None:
        row(f"profile {args.profile}", lambda r, k: expected_accept(profile[bucket_of(r["p"])], k))
        row("  the same, chained", lambda r, k: chained_by_position(profile[bucket_of(r["p"])], k))
    row("sure ≥ 0.7, chained", lambda r, k: chained_by_position((r["p"] >= 0.7).float(), k))


if __name__ == "__main__":
    main()

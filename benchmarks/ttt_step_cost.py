"""Time of one training-time-test step (loss, backward) here against another revision's ``train/ttt.py``.

A batch shaped like ``train draft``'s (``--batch`` windows of ``--length`` tokens, each with a
response of 120–190 tokens after its prompt; features, teacher logits and greedy tokens drawn at
random) runs through this checkout's ``unrolled_loss_from`` and through the one of git revision
``--before`` (its ``src/specgauge/train/ttt.py`` imported on its own, the rest of the package
this checkout's), interleaved ``--rounds`` times under bf16 autocast, as ``train draft`` runs.
Printed: each one's median seconds and the ratio, and how far apart their loss and gradients are
in fp32 (the same computation gives ~1e-6) and in bf16.

    PYTHONPATH=src python benchmarks/ttt_step_cost.py --before HEAD~1 --draft runs/draft-smol-g/export
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from specgauge.engine.models.eagle3 import load_eagle3
from specgauge.engine.models.llama import load_model
from specgauge.shipped_models import get_shipped
from specgauge.train import ttt

ROOT = Path(__file__).resolve().parents[1]


def module_at(revision: str):
    """``train/ttt.py`` as it was at ``revision``, imported as a module of its own."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:src/specgauge/train/ttt.py"],
                            capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "ttt_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ttt_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["ttt_before"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a git revision to compare with")
    parser.add_argument("--model", default="smollm2-135m", help="a shipped model's name")
    parser.add_argument("--draft", type=Path, default=None, help="an EAGLE-3 head's directory (default: the model's)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=576)
    parser.add_argument("--steps", type=int, default=5, help="unrolled steps (--ttt-steps)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.length < 200:
        sys.exit("--length must be at least 200 (a prompt and a response of 120–190 tokens)")
    torch.set_num_threads(args.threads)
    before = module_at(args.before)
    model = get_shipped(args.model)
    target = load_model(model.target_dir).requires_grad_(False)
    head = load_eagle3(args.draft or model.draft_dir, target).train()
    generator = torch.Generator().manual_seed(0)
    b, t, vocab = args.batch, args.length, target.config.vocab_size
    ids = torch.randint(0, vocab, (b, t), generator=generator)
    aux = torch.randn(b, t, 3 * target.config.hidden_size, generator=generator)
    teacher = torch.randn(b, t, head.config.draft_vocab_size, generator=generator)
    greedy = torch.randint(0, vocab, (b, t), generator=generator)
    mask = torch.zeros(b, t, dtype=torch.bool)
    for i in range(b):
        length = 120 + (70 * i) // max(b - 1, 1)
        mask[i, t - length - (i % 3) * 8:t - (i % 3) * 8] = True
    params = [(n, p) for n, p in head.named_parameters() if p.requires_grad]

    def run(module, bf16: bool) -> tuple[float, dict[str, torch.Tensor], float]:
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = module.unrolled_loss_from(head, ids, aux, teacher, greedy, mask, args.steps)
        loss.backward()
        seconds = time.perf_counter() - started
        grads = {n: p.grad.clone() for n, p in params}
        for _, p in params:
            p.grad = None
        return loss.item(), grads, seconds

    print(f"{b} windows of {t} tokens, {int(mask.sum())} scored, {args.steps} unrolled steps, "
          f"{args.threads} threads; this checkout against {args.before}")
    for bf16 in (False, True):
        loss_a, grads_a, _ = run(ttt, bf16)
        loss_b, grads_b, _ = run(before, bf16)
        worst = max(((grads_a[n] - grads_b[n]).norm() / grads_b[n].norm().clamp(min=1e-20)).item() for n in grads_a)
        print(f"{'bf16' if bf16 else 'fp32'}: loss {loss_a:.6f} against {loss_b:.6f}; "
              f"largest relative gradient difference {worst:.1e}")
    times = {"this": [], "before": []}
    for _ in range(args.rounds):
        times["this"].append(run(ttt, True)[2])
        times["before"].append(run(before, True)[2])
    this, old = statistics.median(times["this"]), statistics.median(times["before"])
    print(f"seconds a step (bf16, median of {args.rounds}): this {this:.2f}, {args.before} {old:.2f}; "
          f"ratio {this / old:.2f}")


if __name__ == "__main__":
    main()

"""What one EAGLE-3 draft step costs against one target step, at several context lengths, in-process.

    PYTHONPATH=src python benchmarks/head_cost.py                                  # the default shipped model
    PYTHONPATH=src python benchmarks/head_cost.py --model specgauge-9m-4k --contexts 256,1024,3072

Two engines of ``--model`` (1 thread each, built once): a plain one and one with its shipped
EAGLE-3 drafter drafting a fixed chain of ``--k`` tokens (``--speculative-min-draft-prob 0``, so
every decode step drafts ``k``). For each context length L, prompts of exactly L tokens (agentic
suite prompts, joined and cut) are decoded greedily for ``--tokens`` tokens by each engine in
turn, request by request, so machine drift falls on both alike. Printed per L:

* **target step**: the plain engine's median decode step (``Engine.step`` wall time, first step —
  the prefill — excluded);
* **head step**: the speculative engine's drafting time per drafted token (the runner's
  ``StepReport.draft_seconds``, which includes the drafter's catch-up over the last step's
  accepted tokens, over the tokens it drafted), the median over steps;
* their ratio (the issue's goal: head step ≤ 15% of the target's), and the verify step (one
  target forward over 1 + k tokens) against the plain step;
* **tokens/step**: the tokens each speculative step produced (mean), and the tokens per step a
  chain of k would need at these costs to break even and to decode twice as fast as plain
  decoding: ``(verify + k · head step) / target step``, and twice that.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402
from benchkit.length_prompts import prompt_of_length  # noqa: E402

from specgauge.engine.core.engine import Engine, EngineConfig  # noqa: E402
from specgauge.engine.core.sampling_params import SamplingParams  # noqa: E402
from specgauge.engine.speculative.config import SpeculativeConfig  # noqa: E402
from specgauge.shipped_models import DEFAULT_MODEL, get_shipped  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


def decode_steps(engine: Engine, prompt: list[int], tokens: int) -> list[tuple[float, object]]:
    """One greedy request alone; per decode step after the first: (wall seconds, step report or None)."""
    reports: list = []
    run = engine._run

    def recording_run(batch, k):
        outputs, report = run(batch, k)
        reports.append(report)
        return outputs, report

    engine._run = recording_run
    try:
        engine.submit("r", prompt, SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True),
                      lambda event: None)
        engine.drain_inbox(block=False)
        engine.step()  # prefill + first token
        steps = []
        while engine.scheduler.has_work:
            reports.clear()
            started = time.perf_counter()
            engine.step()
            steps.append((time.perf_counter() - started, reports[-1] if reports else None))
        return steps
    finally:
        engine._run = run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a shipped model name (with a drafter)")
    parser.add_argument("--contexts", default="256,1024,3072", help="prompt lengths in tokens, comma-separated")
    parser.add_argument("--k", type=int, default=4, help="drafts per step (a fixed chain)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per context length")
    parser.add_argument("--tokens", type=int, default=64, help="tokens decoded per prompt")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = get_shipped(args.model)
    if model.draft_dir is None:
        raise SystemExit(f"{args.model} ships no drafter")
    contexts = [int(c) for c in args.contexts.split(",")]
    if max(contexts) + args.tokens > model.context:
        raise SystemExit(f"--contexts {max(contexts)} + --tokens {args.tokens} exceed {args.model}'s context "
                         f"{model.context}")
    plain = Engine(EngineConfig(model_dir=str(model.target_dir), threads=1))
    spec = Engine(EngineConfig(model_dir=str(model.target_dir), threads=1, speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=args.k, min_draft_prob=0.0, draft_model_path=str(model.draft_dir))))
    tokenizer = plain.tokenizer
    requests = load_suite("agentic").requests
    warm = prompt_of_length(tokenizer, requests, contexts[0], 0)
    decode_steps(plain, warm, args.tokens)
    decode_steps(spec, warm, args.tokens)
    print(f"{args.model}: 1 thread, dtype {plain.config.torch_dtype}, chain of {args.k} drafts, "
          f"{args.prompts} prompts x {args.tokens} tokens per context length")
    print(f"{'context':>8} {'target step':>12} {'head step':>10} {'head/target':>12} {'verify(1+k)/plain':>18} "
          f"{'tokens/step':>12} {'needed for 1x':>14} {'for 2x':>7}")
    for length in contexts:
        target, head, verify, produced = [], [], [], []
        for index in range(args.prompts):
            prompt = prompt_of_length(tokenizer, requests, length, index * 3)
            for seconds, _ in decode_steps(plain, prompt, args.tokens):
                target.append(seconds)
            for _, report in decode_steps(spec, prompt, args.tokens):
                drafted = sum(proposed for proposed, _ in report.verdicts.values()) if report else 0
                if report is None or not drafted:
                    continue  # the last steps, where max_tokens leaves no room to draft
                head.append(report.draft_seconds / drafted)
                verify.append(report.verify_seconds)
                produced.append(1 + sum(a for _, a in report.verdicts.values()))  # drafts kept + the target's own token
        step, draft = statistics.median(target), statistics.median(head)
        even = (statistics.median(verify) + args.k * draft) / step  # a spec step's cost in plain steps
        print(f"{length:>8} {step * 1e3:>10.2f}ms {draft * 1e3:>8.2f}ms {draft / step:>11.1%} "
              f"{statistics.median(verify) / step:>17.2f}x {statistics.mean(produced):>12.2f} {even:>14.2f} "
              f"{2 * even:>7.2f}")


if __name__ == "__main__":
    main()

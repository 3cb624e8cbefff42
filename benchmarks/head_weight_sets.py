"""The EAGLE-3 head's two weight sets on CPU, side by side: fp32 on FBGEMM's fp16-packed weights
against bf16 on oneDNN's reordered weights, per row count.

    PYTHONPATH=src python benchmarks/head_weight_sets.py --model specgauge-9m-4k
    PYTHONPATH=src python benchmarks/head_weight_sets.py --rows 1,2,4,8,12,16,32 --calls 300

On a CPU with native bf16 the head holds its matrices twice (``Eagle3Head.prepare_for_inference``):
fp32 packed for FBGEMM and bf16 reordered for oneDNN; a pass picks one by its row count
(``FBGEMM_ROWS_MAX`` in engine/models/eagle3.py). For every matrix of ``--model``'s drafter, the
same activations times the same bf16-valued weights in both forms, interleaved call by call so
machine load falls on both alike, the weights cycling through enough copies to leave the cache
(in a real step the target's matmuls run between the head's). Prints µs per call, the
oneDNN/FBGEMM ratio, and the whole pass's six matmuls summed.

    PYTHONPATH=src python benchmarks/head_weight_sets.py --model specgauge-9m-4k --decode --contexts 256,1024,3072
    PYTHONPATH=src python benchmarks/head_weight_sets.py --model specgauge-9m-4k --decode --streams 4

``--decode`` measures the choice in the engine instead: one engine of ``--model`` with its
drafter (a fixed chain of 4, 1 thread) decodes agentic-suite prompts cut to each context length
(``--streams`` requests at a time), and the head's row limit alternates step by step between 1
(only one-row passes on FBGEMM) and ``FBGEMM_ROWS_MAX``, so both settings meet the same machine
load and the same acceptance. Prints the drafting time per drafted token under each (median and
mean), split by the step's catch-up: one pair per stream (the same passes under both settings
when one stream decodes) or more; steps catching up a prompt are left out.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from benchkit.weight_shapes import COPIES, shapes  # noqa: E402
from specgauge.engine.models.linear import (PackedFP16, PackedOneDNN, fp16_packing_supported, linear,  # noqa: E402
                                             onednn_packing_supported)
from specgauge.shipped_models import DEFAULT_MODEL  # noqa: E402


def head_shapes(model: str) -> list[tuple[str, int, int]]:
    """(name, out, in) of the drafter's six matmuls (o and down beside linear_packing's four)."""
    draft = [s for s in shapes(model) if s[0].startswith("draft")]
    target = {name: (out, inp) for name, out, inp in shapes(model)}
    o_out, o_in = target["target o"]
    (_, gate_up_out, h), = [s for s in draft if s[0] == "draft gate_up"]
    return draft + [("draft o", o_out, o_in), ("draft down", h, gate_up_out // 2)]


def decode_ab(model: str, contexts: list[int], streams: int, prompts: int, tokens: int) -> None:
    """The head's drafting time per drafted token, its row limit alternating step by step."""
    from benchkit.length_prompts import prompt_of_length

    from specgauge.engine.core.engine import Engine, EngineConfig
    from specgauge.engine.core.sampling_params import SamplingParams
    from specgauge.engine.models.eagle3 import FBGEMM_ROWS_MAX
    from specgauge.engine.speculative.config import SpeculativeConfig
    from specgauge.shipped_models import get_shipped
    from specgauge.suites.registry import load_suite

    shipped = get_shipped(model)
    engine = Engine(EngineConfig(model_dir=str(shipped.target_dir), threads=1, speculative=SpeculativeConfig(
        algorithm="EAGLE3", num_steps=4, min_draft_prob=0.0, draft_model_path=str(shipped.draft_dir))))
    head = engine.runner.drafter.head
    if head.weight_packing != "fp16":
        raise SystemExit(f"the head's fp32 set is not packed for FBGEMM here ({head.weight_packing}): "
                         f"nothing to compare")
    limits = (1, FBGEMM_ROWS_MAX)
    records: list[tuple[int, int, float]] = []  # (row limit, pairs caught up, seconds per drafted token)
    run = engine._run

    def alternating_run(batch, k):
        limit = head.fp32_rows_max = limits[len(records) % 2]
        outputs, report = run(batch, k)
        drafted = sum(proposed for proposed, _ in report.verdicts.values()) if report else 0
        if drafted:
            records.append((limit, report.catch_up, report.draft_seconds / drafted))
        return outputs, report

    def decode(batch_prompts: list[list[int]]) -> None:
        for i, prompt in enumerate(batch_prompts):
            engine.submit(f"r{i}", prompt, SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True),
                          lambda event: None)
        engine.drain_inbox(block=False)
        while engine.scheduler.has_work:
            engine.step()

    engine._run = alternating_run
    requests = load_suite("agentic").requests
    tokenizer = engine.tokenizer
    decode([prompt_of_length(tokenizer, requests, contexts[0], 0)])  # warm-up
    print(f"{model}: chain of 4, 1 thread, {streams} stream(s), {prompts} prompts x {tokens} tokens per context; "
          f"ms per drafted token, row limit {limits[0]} / {limits[1]}, ratio")
    for length in contexts:
        records.clear()
        for first in range(0, prompts, streams):
            decode([prompt_of_length(tokenizer, requests, length, 3 * p)
                    for p in range(first, min(prompts, first + streams))])
        decode_pairs = streams * 5  # a step's catch-up: each stream's accepted drafts and bonus token
        for name, keep in (("catch-up of 1 pair", lambda c: c == streams),
                           ("catch-up of more", lambda c: streams < c <= decode_pairs),
                           ("every step", lambda c: c <= decode_pairs)):
            times = [[t for limit, caught, t in records if limit == lim and keep(caught)] for lim in limits]
            if all(times):
                medians = [1e3 * statistics.median(t) for t in times]
                means = [1e3 * statistics.mean(t) for t in times]
                print(f"{length:>6} tokens, {name:>18}: steps {len(times[0])}/{len(times[1])}, median "
                      f"{medians[0]:.3f} / {medians[1]:.3f} ({medians[1] / medians[0]:.2f}x), mean "
                      f"{means[0]:.3f} / {means[1]:.3f} ({means[1] / means[0]:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a shipped model name with a drafter")
    parser.add_argument("--rows", default="1,2,3,5,8,12,16,32", help="activation rows of a head pass")
    parser.add_argument("--calls", type=int, default=200, help="calls per arm and cell")
    parser.add_argument("--decode", action="store_true", help="measure the row limit in the engine's decode instead")
    parser.add_argument("--contexts", default="256,1024,3072", help="--decode: prompt lengths in tokens")
    parser.add_argument("--streams", type=int, default=1, help="--decode: requests decoded at a time")
    parser.add_argument("--prompts", type=int, default=6, help="--decode: prompts per context length")
    parser.add_argument("--tokens", type=int, default=64, help="--decode: tokens decoded per prompt")
    args = parser.parse_args()
    if not (fp16_packing_supported() and onednn_packing_supported()):
        raise SystemExit("this torch build or CPU lacks FBGEMM fp16 or oneDNN bf16 on reordered weights")
    torch.set_num_threads(1)
    if args.decode:
        return decode_ab(args.model, [int(c) for c in args.contexts.split(",")], args.streams, args.prompts,
                         args.tokens)
    rows = [int(r) for r in args.rows.split(",")]
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {args.model}'s drafter, 1 thread; µs per call (median of {args.calls} "
          f"interleaved calls): FBGEMM fp16 / oneDNN bf16, and oneDNN/FBGEMM")
    print(f"{'matmul':>14} {'out x in':>10} " + " ".join(f"{f'{r} rows':>17}" for r in rows))
    totals = {r: [0.0, 0.0] for r in rows}
    for name, out, inp in head_shapes(args.model):
        weights = [(torch.randn(out, inp, generator=generator) * 0.05).bfloat16() for _ in range(COPIES)]
        arms = {"fbgemm": ([PackedFP16(w.float()) for w in weights], torch.float32),
                "onednn": ([PackedOneDNN(w) for w in weights], torch.bfloat16)}
        cells = []
        for r in rows:
            x = torch.randn(r, inp, generator=generator)
            times = {arm: [] for arm in arms}
            order = list(arms.items())
            for call in range(args.calls + 10):
                for arm, (packed, dtype) in (order if call % 2 else order[::-1]):  # who goes first alternates
                    xs = x.to(dtype)
                    started = time.perf_counter()
                    linear(xs, packed[call % COPIES])
                    if call >= 10:
                        times[arm].append(time.perf_counter() - started)
            a, b = (1e6 * statistics.median(times[arm]) for arm in ("fbgemm", "onednn"))
            totals[r][0] += a
            totals[r][1] += b
            cells.append(f"{a:5.0f}/{b:4.0f} {b / a:4.2f}x")
        print(f"{name:>14} {f'{out}x{inp}':>10} " + " ".join(f"{c:>17}" for c in cells))
    print(f"{'whole pass':>14} {'':>10} " + " ".join(
        f"{f'{a:5.0f}/{b:4.0f} {b / a:4.2f}x':>17}" for a, b in totals.values()))


if __name__ == "__main__":
    main()

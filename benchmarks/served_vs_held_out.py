"""Why the SmolLM2 drafter accepts fewer tokens served than held out: the gap taken apart.

TRAINING.md's figure (code_stdlib, depth 3: 1 + the first three prefix rates = 2.55) is
teacher-forced on held-out prompts with the target's 192-token greedy answers; the server's 1.78 is
the engine's chain of 3 on the ``coding`` suite at 128 tokens (docs/results.md, run I). Between them
lie: the prompts' source (corpus prompts vs the hand-written suite), the answer length, the prompt
text the server sees (the chat template and its system turn vs what training tokenized), the chained
walk itself (drafts fed back, one verify per chain) and tokens outside the draft vocabulary. Each row
below changes one of them, on the in-process engine with its own acceptance counter:

    PYTHONPATH=src python benchmarks/served_vs_held_out.py [--prompts 16] [--threads 1]

Prints, per row: tokens per verify (the engine's ``avg_spec_accept_length``, bonus included), the
share of the target's greedy output tokens outside the draft vocabulary, and the mean prompt length;
first, whether the client's chat rendering of each held-out prompt gives exactly the token ids
training used (a template mismatch would show here).
"""

from __future__ import annotations

import argparse
import json
import lzma
from pathlib import Path

from benchkit.draft_serving import serve
from safetensors import safe_open

from specgauge.client.prompts import prompt_text
from specgauge.engine.models.tokenizer import EngineTokenizer
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.shipped_models import get_shipped
from specgauge.suites.registry import load_suite
from specgauge.suites.training_data import BuildOptions, build_suite_from_training_data

SMOLLM2 = get_shipped("smollm2-135m")


def training_estimate(source: str, depth: int) -> float | None:
    """1 + the first ``depth`` prefix rates of ``source`` in the drafter's TRAINING.md validation table."""
    for line in (SMOLLM2.draft_dir / "TRAINING.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] == source and len(cells) >= 11:
            return 1.0 + sum(float(c) for c in cells[6:6 + depth])   # prefix 1..depth follow the 5 step columns
    return None


def held_out(source: str, count: int) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) of the first ``count`` held-out samples of ``source``."""
    path = SMOLLM2.training_data / "validation" / source / "shard-00000.jsonl.xz"
    pairs = []
    with lzma.open(path, "rt") as f:
        for line in f:
            record = json.loads(line)
            first = record["loss_mask"].index(1)
            pairs.append((record["input_ids"][:first], record["input_ids"][first:]))
            if len(pairs) == count:
                break
    return pairs


def template_check(source: str, count: int, workdir: Path) -> tuple[int, int, int]:
    """``source``'s held-out prompts as ``suite from-training-data`` and the client make them: how many
    re-render to exactly training's ids, how many differ only in that training's last prompt token
    also holds the answer's leading whitespace (the whole conversation was tokenized at once, so the
    header's newline merged with it; a server's prompt always ends at the header), and the total."""
    import shutil

    folder = workdir / source
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SMOLLM2.training_data / "validation" / source / "meta.json", folder / "meta.json")
    with lzma.open(SMOLLM2.training_data / "validation" / source / "shard-00000.jsonl.xz", "rb") as f:
        (folder / "shard-00000.jsonl").write_bytes(f.read())
    suite, _ = build_suite_from_training_data(workdir, SMOLLM2.tokenizer_path,
                                              BuildOptions(size=count, weights={source: 1.0}, allow_fewer=True))
    tokenizer = EngineTokenizer(SMOLLM2.target_dir)
    trained = [tokenizer.tokenizer.decode(p, skip_special_tokens=False) for p, _ in held_out(source, 10_000)]
    exact = merged = 0
    for request in suite.requests:
        served = prompt_text(request, str(SMOLLM2.tokenizer_path))
        if served in trained:
            exact += 1
        elif any(t.startswith(served) and not t[len(served):].strip() for t in trained):
            merged += 1
    return exact, merged, len(suite.requests)


def suite_prompts(name: str, count: int | None = None, longer_than: int = 0,
                  up_to: int | None = None) -> list[list[int]]:
    """A built-in suite's prompts as the server gets them (template applied): the first ``count``
    (None: all) of those longer than ``longer_than`` tokens and at most ``up_to``."""
    tokenizer = EngineTokenizer(SMOLLM2.target_dir)
    prompts = [tokenizer.encode(prompt_text(r, str(SMOLLM2.tokenizer_path))) for r in load_suite(name).requests]
    kept = [p for p in prompts if len(p) > longer_than and (up_to is None or len(p) <= up_to)]
    return kept[:count] if count is not None else kept


def outside_vocab(outputs: list[list[int]]) -> float:
    """Share of output tokens the draft vocabulary cannot propose (the head's ``t2d`` is False)."""
    with safe_open(str(SMOLLM2.draft_dir / "model.safetensors"), "pt") as f:
        t2d = f.get_tensor("t2d")
    tokens = [t for out in outputs for t in out]
    return sum(not bool(t2d[t]) for t in tokens) / max(1, len(tokens))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16, help="prompts per row")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--depth", type=int, default=3, help="the chain's draft tokens per verify")
    parser.add_argument("--only", default="", help="run only the rows whose label starts with this")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for source in ("code_stdlib", "code_requests"):
            exact, merged, total = template_check(source, args.prompts, Path(tmp) / source)
            print(f"template: of {total} held-out {source} prompts the client renders {exact} exactly as training "
                  f"tokenized them, {merged} short of the answer's leading whitespace (merged into the header's "
                  f"newline in training), {total - exact - merged} otherwise")
    eagle = SpeculativeConfig(algorithm="EAGLE3", num_steps=args.depth, draft_model_path=str(SMOLLM2.draft_dir))
    sources = ("code_stdlib", "code_requests", "code_questions")
    rows = [(f"held-out {s}, {n} tokens", [p for p, _ in held_out(s, args.prompts)], n,
             training_estimate(s, args.depth)) for s in sources for n in (192, 64)]
    rows += [(f"suite {name}, {n} tokens", suite_prompts(name, args.prompts), n, None)
             for name in ("coding", "encyclopedic") for n in (192, 64)]
    rows += [("suite coding, all, 128 tokens", suite_prompts("coding"), 128, None),   # run I's served figure
             ("suite coding, prompt <= 200, 128", suite_prompts("coding", up_to=200), 128, None),
             ("suite coding, prompt > 200, 128", suite_prompts("coding", longer_than=200), 128, None)]
    print(f"chain of {args.depth}, {args.prompts} prompts per row, greedy, {args.threads} thread(s); AMD EPYC, AVX2")
    print(f"{'row':<34} {'tokens/verify':>13} {'training est.':>13} {'outside vocab':>13} {'prompt toks':>11}")
    for label, prompts, new_tokens, estimate in rows:
        if not label.startswith(args.only):
            continue
        outputs, accept, _ = serve(SMOLLM2.target_dir, prompts, eagle, new_tokens, args.threads, len(prompts))
        mean_prompt = sum(map(len, prompts)) / len(prompts)
        shown = f"{estimate:.2f}" if estimate else "-"
        print(f"{label:<34} {accept:>13.2f} {shown:>13} {outside_vocab(outputs):>12.1%} {mean_prompt:>11.0f}")


if __name__ == "__main__":
    main()

"""Build a 500-prompt suite from 1 GB of tokenized training data across 8 sources; print time and peak RSS.

Generates the data (JSONL, ``{"input_ids", "loss_mask"}`` a line, the embedded engine's chat format,
token ids from a tiny BPE trained here) into a temporary directory that is deleted afterwards, then
runs ``specgauge suite from-training-data`` as a subprocess and reads its peak RSS from ``wait4``.

    PYTHONPATH=src python benchmarks/suite_build.py [--gigabytes 1.0] [--size 500]

Goal: <= 60 s and <= 1 GB RSS for 500 prompts from 1 GB across 8 sources.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "suites"))

from suite_fixtures import SOURCE_WORDS, train_tiny_tokenizer  # noqa: E402

SOURCES = {"A1_deepswekimi": 0.22, "B1_glaive": 0.16, "B2_opencodeinstruct": 0.14, "code_stdlib": 0.12,
           "agentic_tools": 0.10, "prose_docs": 0.10, "C1_gsm8k": 0.08, "D1_wikipedia": 0.08}
WORDS_FOR = {"A1_deepswekimi": "agentic_tools", "B1_glaive": "agentic_tools", "B2_opencodeinstruct": "code_stdlib",
             "code_stdlib": "code_stdlib", "agentic_tools": "agentic_tools", "prose_docs": "prose_docs",
             "C1_gsm8k": "code_stdlib", "D1_wikipedia": "prose_docs"}
SEGMENTS_PER_SOURCE = 400
SHARD_BYTES = 64 << 20


def _segment_pool(tokenizer, words: list[str], rng: random.Random) -> list[tuple[str, int]]:
    """Pre-encoded sentences as (comma-joined ids, token count)."""
    pool = []
    for _ in range(SEGMENTS_PER_SOURCE):
        ids = tokenizer.encode(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) + ".",
                               add_special_tokens=False).ids
        pool.append((",".join(map(str, ids)), len(ids)))
    return pool


def generate(root: Path, tokenizer_path: Path, total_bytes: int, seed: int = 0) -> dict[str, int]:
    """Write ~``total_bytes`` of tokenized JSONL split over SOURCES; returns samples per source."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    special = {t: tokenizer.token_to_id(t) for t in ("<|begin_of_text|>", "<|user|>", "<|assistant|>", "<|end|>")}
    newline = tokenizer.encode("\n", add_special_tokens=False).ids[0]
    head = f"{special['<|begin_of_text|>']},{special['<|user|>']},{newline}"
    turn = f"{special['<|end|>']},{newline},{special['<|assistant|>']},{newline}"
    rng = random.Random(seed)
    counts = {}
    for source, share in SOURCES.items():
        pool = _segment_pool(tokenizer, SOURCE_WORDS[WORDS_FOR[source]], rng)
        directory = root / source
        directory.mkdir(parents=True)
        budget, written, shard, count = int(total_bytes * share), 0, 0, 0
        out = (directory / f"shard-{shard:05d}.jsonl").open("w")
        while written < budget:
            prompt = rng.choices(pool, k=rng.randint(4, 40))
            response = rng.choices(pool, k=rng.randint(1, 12))
            prompt_len = 3 + sum(n for _, n in prompt) + 4
            response_len = sum(n for _, n in response) + 1
            ids = ",".join([head, *(s for s, _ in prompt), turn, *(s for s, _ in response), str(special["<|end|>"])])
            mask = "0," * prompt_len + "1," * (response_len - 1) + "1"
            line = '{"input_ids": [' + ids + '], "loss_mask": [' + mask + "]}\n"
            out.write(line)
            written += len(line)
            count += 1
            if written // SHARD_BYTES > shard:
                out.close()
                shard += 1
                out = (directory / f"shard-{shard:05d}.jsonl").open("w")
        out.close()
        (directory / "meta.json").write_text(json.dumps({"samples": count}))
        counts[source] = count
    return counts


def timed_build(data_dir: Path, tokenizer_path: Path, output: Path, size: int, *extra: str) -> tuple[float, float, str]:
    """Run from-training-data; (wall seconds, peak RSS in MiB, its stdout)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, "-m", "specgauge", "suite", "from-training-data", str(data_dir), "--tokenizer",
               str(tokenizer_path), "--size", str(size), "--output", str(output), *extra]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"build failed ({process.returncode}):\n{stdout}")
    return elapsed, usage.ru_maxrss / 1024, stdout  # ru_maxrss is KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--size", type=int, default=500)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="specgauge-suite-bench-"))
    try:
        tokenizer_path = train_tiny_tokenizer(root / "tokenizer" / "tokenizer.json")
        start = time.perf_counter()
        counts = generate(root / "data", tokenizer_path, int(args.gigabytes * (1 << 30)))
        on_disk = sum(f.stat().st_size for f in (root / "data").rglob("*.jsonl"))
        print(f"generated {on_disk / (1 << 30):.2f} GiB, {sum(counts.values())} samples in {len(counts)} sources "
              f"in {time.perf_counter() - start:.1f} s (page cache warm)")
        for label, extra in (("no hold-out", ()), ("--holdout 0.1", ("--holdout", "0.1"))):
            seconds, rss_mib, stdout = timed_build(root / "data", tokenizer_path, root / "suite.jsonl", args.size,
                                                   *extra)
            lines = sum(1 for _ in (root / "suite.jsonl").open()) - 1
            print(f"from-training-data --size {args.size} ({label}): {seconds:.2f} s wall, peak RSS {rss_mib:.0f} MiB, "
                  f"{lines} prompts written")
            print("\n".join("    " + line for line in stdout.rstrip().splitlines()))
        print("goal: <= 60 s and <= 1024 MiB")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

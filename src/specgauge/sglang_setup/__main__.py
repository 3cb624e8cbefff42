"""``python -m specgauge.sglang_setup``: lay out the SGLang-servable copies and print the serve lines
(``make sglang`` runs this after building ``.venv-sglang``); ``… serve METHOD --port N`` starts one.

    python -m specgauge.sglang_setup [--root DIR]                 lay out + print command lines
    python -m specgauge.sglang_setup serve plain|eagle3|ngram --port N [--model NAME] [--depth K]
                                     [-- more SGLang args]

Every shipped model with a drafter is laid out (``.cache/sglang-models/<name>/``); ``serve`` serves
the default one unless ``--model`` names another, at that model's context.
"""
from __future__ import annotations

import sys
from pathlib import Path

from specgauge.server_setup import prepare as prepare_all
from specgauge.server_setup import serve_main
from specgauge.sglang_setup.layout import lay_out
from specgauge.sglang_setup.serve import default_setup


def prepare(root: Path) -> int:
    """Lay out every shipped target and drafter under ``root/.cache/sglang-models`` and print how
    to serve the default one."""
    return prepare_all(root, setup_for=default_setup,
                       lay_out=lambda model, setup: lay_out(model, setup.target, setup.draft),
                       prog="python -m specgauge.sglang_setup", ready="SGLang set-up ready (CPU, upstream 2f14d6c)",
                       start_time="0.5-2 minutes", port=30000, compare_args="--api sglang ")


def main(args: list[str] | None = None) -> int:
    """Entry point; see the module doc."""
    return serve_main(list(sys.argv[1:] if args is None else args), prog="python -m specgauge.sglang_setup",
                      doc=__doc__.splitlines()[0], setup_for=default_setup, prepare=prepare)


if __name__ == "__main__":
    sys.exit(main())

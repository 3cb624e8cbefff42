"""Regenerate ``fixtures/compare_result.json`` from a real comparison of two loaded scripted servers.

    PYTHONPATH=src python tests/compare/make_fixture.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from specgauge.compare.orchestrate import run_comparison
from specgauge.compare.plan import ArmConfig, ComparePlan
from specgauge.load.runner import run_async
from specgauge.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loaded_server import crossing_pair  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "compare_result.json"


def main() -> None:
    baseline, speculative = crossing_pair()
    with baseline, speculative, tempfile.TemporaryDirectory() as tmp:
        plan = ComparePlan(baseline=ArmConfig(name="baseline", kind="url", value=baseline.url),
                           speculative=ArmConfig(name="speculative", kind="url", value=speculative.url),
                           api="sglang", raw_chat_format=True, domains=("coding", "encyclopedic"),
                           concurrency=(1, 2, 4, 8, 16, 32),
                           num_requests_single=8, num_requests_sweep=32, warmup=1, label="scripted speculation",
                           bootstrap_resamples=500)
        with Store.open(Path(tmp) / "fixture.db") as store:
            result = run_async(run_comparison(plan, store))
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(result.model_dump(mode="json"), indent=1) + "\n")
    for line in result.verdict_lines:
        print(line)


if __name__ == "__main__":
    main()

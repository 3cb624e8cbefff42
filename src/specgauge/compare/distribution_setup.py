"""The prompts of a comparison's distribution check (``--samples-per-prompt``): the first
``DISTRIBUTION_PROMPTS`` prompts of a suite, written once as a derived suite file so both arms,
every round and a resume sample the same ones."""

from __future__ import annotations

from pathlib import Path

from specgauge.compare.plan import DISTRIBUTION_PROMPTS
from specgauge.load.workload import write_derived_suite
from specgauge.suites.model import Suite
from specgauge.suites.registry import load_suite


def distribution_suite_file(suite_ref: str, work_dir: Path) -> str:
    """The derived suite of ``suite_ref``'s first prompts under ``work_dir``; its path."""
    suite = load_suite(suite_ref)
    derived = Suite(name=f"{suite.name}-first{DISTRIBUTION_PROMPTS}", requests=suite.requests[:DISTRIBUTION_PROMPTS],
                    description=f"the first {DISTRIBUTION_PROMPTS} prompts of {suite.name} {suite.version}: "
                                f"specgauge compare's distribution check")
    return write_derived_suite(derived, work_dir)

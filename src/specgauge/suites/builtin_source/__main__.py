"""Regenerate the built-in suite files: ``python -m specgauge.suites.builtin_source``."""

from specgauge.suites.builtin_source import write_all
from specgauge.suites.registry import BUILTIN_DIR

for written in write_all(BUILTIN_DIR):
    print(written)

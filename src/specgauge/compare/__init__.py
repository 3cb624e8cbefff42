"""``specgauge compare``: a baseline arm and a speculative arm, measured side by side (docs/compare.md)."""

"""``specgauge tune``: the draft depth per batch size (and context length) for a workload, measured
per depth, chosen by a rule that prefers the smaller depth on a tie, emitted for vLLM, SGLang and
the embedded engine, and verified (docs/tune.md)."""

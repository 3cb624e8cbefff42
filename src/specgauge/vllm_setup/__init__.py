"""A real vLLM (PyPI's CPU build) beside specgauge: checkpoints it can serve and the command
lines that serve them. ``make vllm`` runs ``python -m specgauge.vllm_setup`` after installing."""

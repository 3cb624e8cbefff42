"""A real SGLang (its CPU path, built from source by ``make sglang``) beside specgauge: checkpoints
it can serve and the command lines that serve them. ``make sglang`` runs ``python -m
specgauge.sglang_setup`` after building."""

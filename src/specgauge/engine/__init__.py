"""The embedded engine: a Llama-architecture LLM server in PyTorch with continuous batching.

Folders: ``models`` (the target, the EAGLE-3 head, attention, packed linears), ``core`` (the
engine thread, scheduler, paged KV, batched forward, sampling), ``speculative`` (drafters,
verification, control) and ``serving`` (the HTTP server, its launcher and metrics).

Entry points (import the submodule; nothing heavy is imported here):

* ``specgauge.engine.serving.launch.EngineProcess`` — run ``specgauge serve`` as a subprocess (stdlib only);
* ``specgauge.engine.core.engine.Engine`` / ``EngineConfig`` — the engine thread (submit, abort, step);
* ``specgauge.engine.serving.app.create_app`` / ``BackgroundServer`` — the HTTP front end;
* ``specgauge.engine.models.llama`` — the model, its full and cached forward passes, load/save.

See docs/engine.md.
"""

import os

# MKL's Conditional Numerical Reproducibility: without it, fp32 CPU SDPA (the flash kernel's MKL
# GEMMs) gives one (sequence, head) other bits depending on which of 2+ threads computes it, i.e.
# on the sequence's place in the batch, so a greedy output could change with the load beside it
# (docs/engine.md, "Batch invariance"). AUTO,STRICT keeps MKL's fastest code path for the CPU
# and makes it reproducible; MKL reads this when first called, so it is set before any engine
# module imports torch (a user's own MKL_CBWR wins). attention.attention_is_batch_invariant
# checks that it took effect (oneMKL Developer Guide, "Obtaining Numerically Reproducible Results").
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

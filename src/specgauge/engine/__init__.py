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

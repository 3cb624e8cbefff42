"""The embedded engine: a Llama-architecture LLM server in PyTorch with continuous batching.

Entry points (import the submodule; nothing heavy is imported here):

* ``specgauge.engine.launch.EngineProcess`` — run ``specgauge serve`` as a subprocess (stdlib only);
* ``specgauge.engine.engine.Engine`` / ``EngineConfig`` — the engine thread (submit, abort, step);
* ``specgauge.engine.serving.app.create_app`` / ``BackgroundServer`` — the HTTP front end;
* ``specgauge.engine.model`` — the model, its full and cached forward passes, load/save.

See docs/engine.md.
"""

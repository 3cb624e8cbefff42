"""The step loop: the engine thread (``engine``), the scheduler (``scheduler``), the paged KV pool
(``block_manager``, ``kv_cache``), the batched forward (``model_runner``) and sampling
(``sampling``, ``sampling_params``). Speculation lives in ``specgauge.engine.speculative``."""

"""Serving prompt token ids greedily on an in-process engine: outputs, acceptance length and seconds."""

from __future__ import annotations

import time
from pathlib import Path

from specgauge.engine.core.engine import Engine, EngineConfig
from specgauge.engine.core.scheduler import SchedulerConfig
from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.train.regenerate import complete_all


def serve(target: Path, prompts: list[list[int]], spec: SpeculativeConfig, max_new_tokens: int, threads: int,
          max_running: int) -> tuple[list[list[int]], float | None, float]:
    """Outputs, acceptance length (None without speculation) and seconds for ``prompts``."""
    engine = Engine(EngineConfig(model_dir=str(target), threads=threads, speculative=spec,
                                 scheduler=SchedulerConfig(max_running=max_running, max_waiting=len(prompts) + 1)))
    engine.start()
    try:
        started = time.perf_counter()
        outputs = complete_all(engine, prompts, max_new_tokens)
        seconds = time.perf_counter() - started
        return outputs, engine.snapshot()["avg_spec_accept_length"], seconds
    finally:
        engine.stop()

"""Helpers the engine tests import (pytest puts this folder on sys.path)."""

from __future__ import annotations

import time


def make_engine(model_dir, **scheduler_overrides):
    from specgauge.engine.engine import Engine, EngineConfig
    from specgauge.engine.scheduler import SchedulerConfig

    engine_keys = {"num_blocks", "block_size", "max_model_len"}
    engine_kwargs = {k: scheduler_overrides.pop(k) for k in list(scheduler_overrides) if k in engine_keys}
    config = EngineConfig(model_dir=str(model_dir), threads=1, scheduler=SchedulerConfig(**scheduler_overrides),
                          **engine_kwargs)
    return Engine(config)


def wait_idle(engine, timeout: float = 10.0) -> None:
    """Wait until the engine has no running or waiting request, then check the KV pool."""
    deadline = time.monotonic() + timeout
    while True:
        state = engine.call(lambda e: (len(e.scheduler.running), len(e.scheduler.waiting), e.blocks.num_free_blocks))
        if state[:2] == (0, 0):
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"engine not idle after {timeout}s: running, waiting, free = {state}")
        time.sleep(0.02)
    engine.check_integrity()
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks, "KV blocks leaked"

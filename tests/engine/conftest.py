"""Tiny random-weight models and running servers shared by the engine tests.

Every test that touches an engine ends with the KV pool checked whole (``check_integrity``)
once the engine is idle.
"""

from __future__ import annotations

import time

import pytest

from specgauge.engine.random_model import write_random_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A 3-layer GQA model (untied embeddings) with a byte-level BPE tokenizer and chat template."""
    return write_random_model(tmp_path_factory.mktemp("tiny-model"), max_position_embeddings=256)


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


@pytest.fixture(scope="session")
def shared_engine(tiny_model_dir):
    """One running engine for the server tests (max 8 running, 8 waiting)."""
    engine = make_engine(tiny_model_dir, max_running=8, max_waiting=8, max_tokens_per_step=64)
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture
def engine(shared_engine):
    yield shared_engine
    wait_idle(shared_engine)


@pytest.fixture(scope="session")
def _server(shared_engine):
    from specgauge.engine.server import BackgroundServer

    with BackgroundServer(shared_engine) as server:
        yield server


@pytest.fixture
def server(_server, engine):
    """The HTTP server over the shared engine; the pool is checked whole after the test."""
    yield _server

"""Tiny random-weight models and running servers shared by the engine tests.

Every test that touches an engine ends with the KV pool checked whole (``check_integrity``)
once the engine is idle.
"""

from __future__ import annotations

import pytest
from engine_testkit import make_engine, wait_idle

from specgauge.engine.models.random_model import write_random_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A 3-layer GQA model (untied embeddings) with a byte-level BPE tokenizer and chat template."""
    return write_random_model(tmp_path_factory.mktemp("tiny-model"), max_position_embeddings=1024)


@pytest.fixture
def engine_factory(tiny_model_dir):
    """Build engines of the tiny model with custom limits; each is stopped after the test and its
    pool checked whole."""
    engines = []

    def build(**overrides):
        engine = make_engine(tiny_model_dir, **overrides)
        engines.append(engine)
        return engine

    yield build
    try:
        for engine in engines:
            if engine.alive:
                wait_idle(engine)
    finally:
        for engine in engines:
            engine.stop()


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
    from specgauge.engine.serving.app import BackgroundServer

    with BackgroundServer(shared_engine) as server:
        yield server


@pytest.fixture
def server(_server, engine):
    """The HTTP server over the shared engine; the pool is checked whole after the test."""
    yield _server


@pytest.fixture(scope="module")
def smollm2_dir():
    """The converted SmolLM2-135M-Instruct (``make model``); skipped, with how to get it, when absent."""
    from specgauge.shipped_models import SETUP_COMMAND, SHIPPED

    if "smollm2-135m" not in SHIPPED:
        pytest.skip(f"smollm2-135m is not set up here: run {SETUP_COMMAND}")
    return SHIPPED["smollm2-135m"].target_dir

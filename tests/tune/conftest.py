"""A tiny random-weight model for the embedded-engine tune test."""

import pytest

from specgauge.engine.models.random_model import write_random_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("tiny-model"), max_position_embeddings=1024)

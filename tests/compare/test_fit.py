"""The demo's suites restricted to what fits the model's context."""

import json

import pytest

pytest.importorskip("tokenizers")

from specgauge.compare.fit import fitting_suite, model_context, prompt_tokens  # noqa: E402
from specgauge.suites.registry import load_suite  # noqa: E402


@pytest.fixture(scope="module")
def short_context_model(tmp_path_factory):
    from specgauge.engine.models.random_model import write_random_model

    return write_random_model(tmp_path_factory.mktemp("fit") / "model", hidden_size=16, num_layers=1,
                              num_heads=2, num_kv_heads=1, intermediate_size=32, max_position_embeddings=512)


def test_only_requests_with_room_for_the_output_are_kept(short_context_model):
    suite = load_suite("coding")
    lengths = prompt_tokens(suite, short_context_model)
    fitted = fitting_suite(suite, short_context_model, max_tokens=64)
    assert model_context(short_context_model) == 512
    expected = [r for r, n in zip(suite.requests, lengths) if n + 64 <= 512]
    assert 0 < len(expected) < len(suite.requests)          # some coding prompts are longer than 448 tokens
    assert fitted.requests == tuple(expected)
    assert fitted.name == "coding-fit512" and "fit a 512-token context" in fitted.description
    assert fitting_suite(suite, short_context_model, max_tokens=64).content_hash == fitted.content_hash


def test_a_suite_that_fits_is_returned_as_it_is(short_context_model, tmp_path):
    config = json.loads((short_context_model / "config.json").read_text())
    assert config["max_position_embeddings"] == 512
    smoke = load_suite("smoke")
    assert fitting_suite(smoke, short_context_model, max_tokens=8) is smoke

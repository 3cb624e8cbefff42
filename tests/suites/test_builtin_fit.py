"""Every built-in suite's newest version fits the 4,096-token target with 256 output tokens, and
``agentic@2`` holds transcripts of realistic length.

Prompt lengths are counted as the engine counts them: the shipped target's tokenizer after its chat
template (:func:`specgauge.compare.fit.prompt_tokens`); the 4,096-token target shares that tokenizer.
"""

from __future__ import annotations

import statistics

import pytest

from specgauge.compare.demo import TARGET_DIR
from specgauge.compare.fit import prompt_tokens
from specgauge.suites.registry import builtin_suites, load_suite

CONTEXT = 4096
MAX_TOKENS = 256


@pytest.mark.parametrize("name", sorted(builtin_suites()))
def test_newest_version_fits_the_4096_token_context(name):
    suite = load_suite(name)
    lengths = prompt_tokens(suite, TARGET_DIR)
    too_long = [(i, n) for i, n in enumerate(lengths) if n + MAX_TOKENS > CONTEXT]
    assert not too_long, f"{suite.ref}: requests (index, prompt tokens) over {CONTEXT - MAX_TOKENS}: {too_long}"


def test_agentic_transcripts_have_realistic_length():
    suite = load_suite("agentic")
    lengths = prompt_tokens(suite, TARGET_DIR)
    assert suite.version >= 2 and len(lengths) >= 40
    assert statistics.median(lengths) >= 1000
    # spread over the context: short first turns up to transcripts near the limit
    assert min(lengths) < 1000 and max(lengths) > 3000
    assert {r.max_tokens for r in suite.requests} == {MAX_TOKENS}

"""Helpers of the tests against a real vLLM (``make vllm`` builds it; ``make test-vllm`` runs them):
the shared ones (``tests/real_server_kit.py``) and the set-up ``make vllm`` made."""
from __future__ import annotations

from real_server_kit import (CLI_TIMEOUT_S, REPO, START_TIMEOUT_S, chat, checked, command,  # noqa: F401
                             counter, launched, metrics, specgauge)

from specgauge.shipped_models import FIRST, ShippedModel
from specgauge.vllm_setup.serve import VllmSetup, default_setup


def vllm_setup(model: ShippedModel = FIRST) -> VllmSetup:
    """The set-up ``make vllm`` made for the shipped ``model``; a test *failure* (never a skip)
    when a piece is missing."""
    return checked(default_setup(REPO, model))
